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
