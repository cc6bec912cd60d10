"""Regressions found by the GPU fuzzer (tests/gpu/test_fuzz_gpu.py), each pinned as its smallest graph."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.ir.interpret import to_xp
from fusec.ir.text import parse
from fusec.plan import make_plan
from tests.helpers import GPU_ONLY

cupy = pytest.importorskip("cupy")


pytestmark = GPU_ONLY

# fuzz graph 1278: a folded -0.0 constant returned as an output (no kernel computes it). CuPy builds a 0-d
# array from a scalar with fill, which writes +0.0 for -0.0; fusec must copy the constant's bytes.
NEGATIVE_ZERO_CONSTANT = """
func @negative_zero(%x: i64[1]) -> (f16[], f64[1]) {
  %0 = const 5.5343528405947934e-11 : f64[]
  %1 = neg %0 : f64[]
  %2 = cast %1 : f16[]
  %3 = ceil %2 : f16[]
  %4 = cast %x : f64[1]
  return %3, %4
}
"""


def test_negative_zero_constant_output_keeps_its_sign() -> None:
    from fusec.runtime import run_plan

    graph = parse(NEGATIVE_ZERO_CONSTANT)
    plan = make_plan(graph)
    x = to_xp(cupy, np.array([3], np.int64))
    zero, cast = run_plan(plan, [x])
    assert zero.shape == () and zero.dtype == np.float16
    assert np.signbit(cupy.asnumpy(zero)), "the -0.0 constant came back as +0.0"
    assert cupy.asnumpy(cast).tolist() == [3.0]


def test_to_xp_keeps_negative_zero_of_a_0d_array() -> None:
    for dtype in (np.float16, np.float32, np.float64):
        assert np.signbit(cupy.asnumpy(to_xp(cupy, np.array(-0.0, dtype))))


# Miscompiled by ptxas before CUDA 13.3 (fusec.codegen.compiler_bugs), found by the fuzzer on an H100 whose NVRTC
# was 13.0: an overflowing int16 negation widened without its sign extension (fuzz graphs 921/922 of 2026-12-07),
# abs of a float16 pair losing the sign-bit clearing of its low half (seed-11 graphs 4934/4935/5020), and the int8
# floor division of -128 feeding a reduction (fuzz graph 2775: 64 for -64). The extremes are where the bugs show.
NARROW_VALUE_CASES = {
    "int16_neg_to_uint64": (lambda y: (-y).astype(np.uint64), np.int16),
    "float16_abs_of_int32": (lambda y: np.abs(y.astype(np.float16)), np.int32),
    "float16_abs_of_int64": (lambda y: np.abs(y.astype(np.float16)), np.int64),
    "int8_floordiv_min": (lambda y: (y // 2).min(axis=(1, 2)), np.int8),
}


@pytest.mark.parametrize("name", sorted(NARROW_VALUE_CASES))
def test_narrow_values_compile_right(name: str) -> None:
    import fusec

    fn, dtype = NARROW_VALUE_CASES[name]
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    y = rng.integers(-100, 100, (3, 4, 64), dtype=dtype)
    y.reshape(-1)[::7] = info.min
    y.reshape(-1)[3::11] = info.max
    y.reshape(-1)[5::13] = -1
    with np.errstate(all="ignore"):
        want = fn(y)
    got = cupy.asnumpy(fusec.fuse(fn)(cupy.asarray(y)))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
