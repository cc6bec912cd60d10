"""Random numbers drawn inside a fused function are refused with the user's line: drawn once while tracing, the same
numbers would come back from every call. ``np.random.rand`` used to crash the interpreter (its compiled body got a
traced array from the wrapped ``np.empty``): checked in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.support.errors import UnsupportedError

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(0)
LEGACY = np.random.RandomState(0)


def test_legacy_random_inside_a_fused_function_is_an_error_not_a_crash(tmp_path) -> None:
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent("""\
        import numpy as np
        import fusec

        @fusec.fuse
        def dropout(x):
            return x * (np.random.rand(*x.shape) > 0.5)

        try:
            dropout(np.ones(8, np.float32))
        except fusec.FusecError as exc:
            print(exc)
        """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "user.py:6: random numbers (rand) cannot be drawn inside a fused function" in done.stdout
    assert "pass them in as an argument" in done.stdout


CASES = {
    "rand": lambda x: x * (np.random.rand(*x.shape) > 0.5),
    "normal": lambda x: x + np.random.normal(0.0, 1.0, x.shape),
    "seed": lambda x: (np.random.seed(0), x)[1],
    "default_rng": lambda x: x + np.random.default_rng(0).standard_normal(x.shape),
    "generator_method": lambda x: x + RNG.standard_normal(x.shape),
    "generator_mask": lambda x: x * (RNG.random(x.shape) < 0.1),
    "randomstate_method": lambda x: x + LEGACY.uniform(size=x.shape),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_draws_inside_are_refused_at_the_users_line(name) -> None:
    fn = CASES[name]
    with pytest.raises(UnsupportedError, match="cannot be drawn inside a fused function") as info:
        fusec.fuse(fn)(np.ones((3, 4), np.float32))
    assert info.value.loc is not None and info.value.loc.startswith(__file__ + ":")
    assert int(info.value.loc.rsplit(":", 1)[1]) == fn.__code__.co_firstlineno


def test_random_numbers_passed_in_are_fine_and_random_works_again_after_the_trace() -> None:
    mask = RNG.random((3, 4)) < 0.5
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    got = fusec.fuse(lambda x, m: np.where(m, x / 0.5, 0))(x, mask)
    np.testing.assert_array_equal(got, np.where(mask, x / 0.5, 0))
    assert np.random.rand(2).shape == (2,) and np.random.normal.__module__ != __name__  # restored after tracing


def test_an_alias_of_a_creator_still_traces() -> None:
    def fn(x):
        zeros = np.zeros
        return x + zeros(x.shape, np.float32)

    plan = fusec.fuse(fn).plan(np.ones(3, np.float32))
    ops = [n.op for n in plan.graph.nodes]
    assert ops.count("input") == 1 and "broadcast_to" in ops  # the zeros traced (a broadcast constant), not captured
