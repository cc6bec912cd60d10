"""``fusec.fuse`` of a function that is already fused (docs/explain.md's ``fusec.fuse(softmax, schedules={...})`` on
a ``@fusec.fuse`` softmax) compiles the same Python function with the options given, keeping the others."""

from __future__ import annotations

import numpy as np

import fusec

SPEC = fusec.ArraySpec((64, 1000), "float32")


@fusec.fuse(name="rows_softmax", static_argnames=("axis",))
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _schedule_line(f) -> str:
    return next(line for line in str(f.explain(SPEC)).splitlines() if line.startswith("  schedule: "))


def test_fuse_of_a_fused_function_wraps_its_function_with_the_options_given():
    forced = fusec.fuse(softmax, schedules={"k0": "rows:block"})
    assert isinstance(forced, fusec.Fused) and forced.fn is softmax.fn
    assert _schedule_line(forced) == "  schedule: rows:block (forced)"
    assert _schedule_line(softmax) != _schedule_line(forced)  # the original is untouched
    assert forced.name == "rows_softmax" and forced.static_argnames == frozenset({"axis"})
    x = np.random.default_rng(0).standard_normal((64, 1000), dtype=np.float32)
    np.testing.assert_array_equal(forced(x), softmax(x))


def test_fuse_of_a_fused_function_adds_schedules_and_keeps_fusion_off():
    unfused = fusec.fuse(softmax, fusion=False, name="plain")
    again = fusec.fuse(unfused, schedules={"k0": "rows:warp"})
    assert (unfused.name, again.name) == ("plain", "plain") and not again.fusion
    assert len(again.plan(SPEC).kernels) == len(unfused.plan(SPEC).kernels) > 1
    both = fusec.fuse(fusec.fuse(softmax, schedules={"k0": "rows:block"}), autotune=False)
    assert "k0" in both.schedules and both.autotune is False


def test_fuse_decorator_with_options_on_a_fused_function():
    named = fusec.fuse(name="again")(softmax)
    assert named.name == "again" and named.fn is softmax.fn


def test_fuse_of_a_fused_function_pickles_with_its_options():
    import pickle

    forced = fusec.fuse(softmax, schedules={"k0": "rows:block"})
    back = pickle.loads(pickle.dumps(forced))
    assert back.fn is softmax.fn and back.name == "rows_softmax" and back.static_argnames == frozenset({"axis"})
    assert _schedule_line(back) == "  schedule: rows:block (forced)"
