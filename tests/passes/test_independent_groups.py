"""Independent elementwise groups of the same shape share one kernel (one launch), unless that would make a
cycle between kernels or outgrow a kernel's budget; an attempt refused so leaves no refusal in the plan."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from tests.helpers import assert_matches_numpy, random_array

F32 = "float32"


def two_outputs(a, b):
    return a * 2 + 1, np.exp(b) - 3


def three_shapes(a, b, c):
    return a * 2, b + 1, c - 1  # a and b share a shape, c does not


def with_reduction(a, b, c):
    return a * 2, b.sum(axis=0), c + 1


def through_a_reduction(a, b):
    y = np.exp(a) * 2
    s = y.sum(axis=0, keepdims=True)  # over 2**22 elements: its epilogue is a kernel of its own
    return y, b / s


def many(*xs):
    return tuple(x * (i + 2) for i, x in enumerate(xs))


def _plan(fn, *shapes):
    return fusec.fuse(fn).plan(*[fusec.ArraySpec(s, F32) for s in shapes])


def _check_numpy(fn, *shapes):
    rng = np.random.default_rng(len(shapes))
    xs = [random_array(rng, s, F32, special=False) for s in shapes]
    with np.errstate(over="ignore"):
        got, want = fusec.fuse(fn)(*xs), fn(*xs)
    for g, w in zip(got, want, strict=True):
        assert_matches_numpy(g, w)


def test_independent_groups_of_one_shape_share_a_kernel() -> None:
    plan = _plan(two_outputs, (300, 7), (300, 7))
    assert [k.kind for k in plan.kernels] == ["pointwise"] and len(plan.kernels[0].outputs) == 2
    _check_numpy(two_outputs, (300, 7), (300, 7))
    # broadcast inputs: the same iteration space
    assert len(_plan(two_outputs, (300, 7), (7,)).kernels) == 2  # (7,) and (300, 7) are different spaces
    assert len(_plan(lambda a, b: (a * 2, b[None, :] + a), (300, 7), (7,)).kernels) == 1


def test_independent_groups_of_other_shapes_or_kinds_stay_apart() -> None:
    plan = _plan(three_shapes, (64, 64), (64, 64), (64, 32))
    assert sorted(len(k.outputs) for k in plan.kernels) == [1, 2]
    _check_numpy(three_shapes, (64, 64), (64, 64), (64, 32))
    plan = _plan(with_reduction, (64, 64), (64, 64), (64, 64))
    assert sorted(k.kind for k in plan.kernels) == ["cols", "pointwise"]  # a and c together, not with the sum
    assert len(next(k for k in plan.kernels if k.kind == "pointwise").outputs) == 2


def test_independent_groups_never_make_a_cycle_and_leave_no_refusal() -> None:
    plan = _plan(through_a_reduction, (4096, 2048), (4096, 2048))
    assert [k.kind for k in plan.kernels] == ["pointwise", "cols", "pointwise"]  # b / s needs the sum of y
    assert all("data on chip" in r for r in plan.refusals), plan.refusals
    _check_numpy(through_a_reduction, (40, 20), (40, 20))


def test_independent_groups_respect_the_array_budget() -> None:
    shapes = [(33, 5)] * 20  # 20 groups of one read and one write: 16 fill a kernel's 32 arrays
    plan = _plan(many, *shapes)
    assert sorted(len(k.outputs) for k in plan.kernels) == [4, 16]
    _check_numpy(many, *shapes)


def test_independent_groups_merged_kernel_compiles_with_nvrtc() -> None:
    try:
        nvrtc.compile_cubin('extern "C" __global__ void k() {}', "sm_90")
    except Exception as exc:  # pragma: no cover - a machine without NVRTC
        pytest.skip(f"NVRTC unavailable: {exc}")
    source = fusec.fuse(two_outputs).cuda_source(fusec.ArraySpec((300, 7), F32), fusec.ArraySpec((300, 7), F32),
                                                 full=True)
    assert source.count("__global__") == 1
    assert nvrtc.compile_cubin(source, "sm_90").cubin.startswith(b"\x7fELF")
