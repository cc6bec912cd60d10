"""Outlined element bodies (``pointwise:...,outline=1``): a heavy body is one ``__noinline__`` function that the
vector loop and its scalar tail call per element, so NVRTC compiles it once instead of ``vec + 1`` times.

Checked here without a GPU: which bodies the heuristics outline (every kernel of today's workloads stays inline),
that the schedule is forceable both ways and refused on the loops that do not take it, the rendered source (one
``__noinline__`` body, called per element), an NVRTC compile of outlined kernels of every pointwise loop that takes
it (with gathers, positions, scalars and several outputs), and the compiled code's size: outlined it grows
linearly with the body and is a fraction of the inline one (deterministic, no wall clock).
``tests/gpu/test_outline_gpu.py`` checks on a GPU that both give the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.kinds import generate_plan
from fusec.schedule.base import ScheduleError
from fusec.schedule.heuristics import OUTLINE_MIN_HEAVY
from tests.workloads import gelu

N = 1 << 20


def trig_chain(n_ops):
    """``n_ops`` of ``sin`` and ``cos`` in turn: the first-call case of issue 34 (120 of them)."""

    def fn(x):
        for i in range(n_ops):
            x = np.sin(x) if i % 2 == 0 else np.cos(x)
        return x

    return fn


def arith_chain(n_ops):
    def fn(x):
        for i in range(n_ops):
            x = x * 1.0001 if i % 2 == 0 else x + 0.5
        return x

    return fn


def heavy_mix(x, w, idx, s):
    """Several outputs, a broadcast row, a gather, a position (iota) and a runtime scalar around a heavy body."""
    y = x
    for _ in range(OUTLINE_MIN_HEAVY):
        y = np.tanh(np.sin(y) * s)
    g = np.take(w, idx)
    return y + g, y * np.arange(x.shape[0], dtype=np.float32), (y > 0).astype(np.float32)


def _kernels(fn, *specs, schedules=None):
    f = fusec.fuse(fn, schedules=schedules or {})
    plan = f.plan(*specs)
    return generate_plan(plan, dict(zip(plan.graph.inputs, specs)), dict(schedules or {}))


def _schedule(fn, *specs, **kw):
    (kernel,) = _kernels(fn, *specs, **kw)
    return kernel.schedule


F32 = fusec.ArraySpec((N,), "float32")


# ---- the heuristics ----------------------------------------------------------------------------------------------


def test_outline_heuristic_outlines_heavy_vector_bodies_from_the_threshold_on():
    assert not _schedule(trig_chain(OUTLINE_MIN_HEAVY - 1), F32).outline
    assert _schedule(trig_chain(OUTLINE_MIN_HEAVY), F32).outline
    assert str(_schedule(trig_chain(120), F32)) == "pointwise:vector,vec=4,outline=1"


def test_outline_heuristic_leaves_cheap_and_single_copy_bodies_inline():
    assert not _schedule(arith_chain(1000), F32).outline  # plain arithmetic compiles fast inline
    assert not _schedule(gelu, F32).outline
    strided = fusec.ArraySpec((256, 1024), "float32", strides=(2048, 2))  # every other element: one copy of the body
    assert _schedule(trig_chain(30), strided).loop == "strided"
    assert not _schedule(trig_chain(30), strided).outline


def test_outline_is_forceable_both_ways_and_refused_where_it_does_not_apply():
    assert not _schedule(trig_chain(120), F32, schedules={"k0": "pointwise:vector,outline=0"}).outline
    forced = _schedule(arith_chain(4), F32, schedules={"k0": "pointwise:contiguous,outline=1"})
    assert forced.outline and str(forced) == "pointwise:contiguous,vec=1,outline=1"
    two_d = fusec.ArraySpec((64, 64), "float32")
    with pytest.raises(ScheduleError, match="outline=1 takes the vector, contiguous or strided loops"):
        _kernels(lambda x, y: np.sin(x.T) + y, two_d, two_d, schedules={"k0": "pointwise:tiled,outline=1"})


# ---- the source --------------------------------------------------------------------------------------------------


def test_outline_source_has_one_noinline_body_called_per_element():
    (kernel,) = _kernels(trig_chain(120), F32)
    src = kernel.source
    assert src.count("__noinline__") == 1
    assert src.count("fc::sin(") == 60 and src.count("fc::cos(") == 60  # the body once
    assert src.count("fc_element(") == 2  # in the vector loop (per lane) and in the scalar tail
    (inline,) = _kernels(trig_chain(120), F32, schedules={"k0": "pointwise:vector,outline=0"})
    assert "__noinline__" not in inline.source and inline.source.count("fc::sin(") == 120  # vector + tail


# ---- NVRTC -------------------------------------------------------------------------------------------------------

pytest.importorskip("cuda.core")
from fusec.codegen.nvrtc import compile_cubin  # noqa: E402

CASES = {
    "vector": (heavy_mix, "pointwise:vector,outline=1"),
    "contiguous": (heavy_mix, "pointwise:contiguous,outline=1"),
    "strided": (heavy_mix, "pointwise:strided,outline=1"),
}


@pytest.mark.parametrize("loop", sorted(CASES))
def test_outline_kernels_of_every_outlined_loop_compile(loop):
    fn, schedule = CASES[loop]
    specs = (F32, fusec.ArraySpec((64,), "float32"), fusec.ArraySpec((N,), "int64"),
             fusec.ArraySpec((), "float32"))
    (kernel,) = _kernels(fn, *specs, schedules={"k0": schedule})
    assert str(kernel.schedule).startswith(schedule.split(",")[0]) and kernel.schedule.outline
    assert "__noinline__" in kernel.source
    result = compile_cubin(kernel.source)
    assert result.kernels and all(r.spills == 0 for r in result.kernels.values())


def test_outline_strided_view_kernel_compiles():
    strided = fusec.ArraySpec((256, 1024), "float32", strides=(2048, 2))
    (kernel,) = _kernels(trig_chain(12), strided, schedules={"k0": "pointwise:strided,outline=1"})
    assert kernel.schedule.loop == "strided" and "fc_element(" in kernel.source
    assert compile_cubin(kernel.source).kernels


def _cubin_bytes(n_ops, outline):
    (kernel,) = _kernels(trig_chain(n_ops), F32, schedules={"k0": f"pointwise:vector,outline={outline}"})
    return len(compile_cubin(kernel.source).cubin)


def test_outline_code_grows_linearly_and_is_a_fraction_of_the_inline_code():
    """The cubin's size (deterministic): outlined, 40 ops take at most 2.5 x the code of 10 (4 x the ops, plus the
    kernel's fixed part); against the inline kernel (5 copies of the body) under half."""
    small, large = _cubin_bytes(10, 1), _cubin_bytes(40, 1)
    assert large <= 4.5 * small
    assert large < 0.5 * _cubin_bytes(40, 0)
