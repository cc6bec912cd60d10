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


# Scan kernels whose other members read an iota (a window of one, or a value cast from one) that NVRTC rejected
# (`identifier "ld0" is undefined`, `"ld0_o"`): the GPU run of 2026-12-07, fuzz graph 1755 of the seed-0 corpus and
# graphs 4165 and 4166 of the seed-11 one (shared/gpu-runs/2026-12-07-h100/fuzz-report*.txt), each on the input views
# it failed on (corpus.place: "t" transposed, "c" contiguous).
SCAN_BESIDE_AN_IOTA = {
    "fuzz1755_cast_iota_beside_cummax": (("t", "c"), """
func @fuzz1755_int(%x: u16[2,2], %y: i8[]) -> bool[1,2,1,2] {
  %0 = cummax %x {axis=1} : u16[2,2]
  %1 = cast %0 : i32[2,2]
  %2 = logical_or %1, %1 : bool[2,2]
  %3 = expand_dims %2 {axes=[0, 2]} : bool[1,2,1,2]
  %4 = cast %3 : u32[1,2,1,2]
  %5 = iota {count=2, next=1, start=0} : u8[2]
  %6 = cast %5 : u32[2]
  %7 = eq %4, %6 : bool[1,2,1,2]
  return %7
}
"""),
    "fuzz4165_scan_of_a_window_of_an_iota": (("c",), """
func @fuzz4165_int(%x: i32[]) -> u8[4,1,1] {
  %0 = const 91 : u8[]
  %1 = iota {count=2, next=3, start=2} : i16[2]
  %2 = window %1 {count=[4], hi=[1], lo=[1], start=[-3], step=[2]} : i16[4]
  %3 = cummin %2 {axis=0} : i16[4]
  %4 = cummax %3 {axis=0} : i16[4]
  %5 = expand_dims %4 {axes=[1, 2]} : i16[4,1,1]
  %6 = cast %5 : u8[4,1,1]
  %7 = bitwise_xor %0, %6 : u8[4,1,1]
  return %7
}
"""),
    "fuzz4166_scan_of_a_window_of_an_iota": (("c",), """
func @fuzz4166_int(%x: i32[]) -> i16[4,1,1] {
  %0 = iota {count=2, next=3, start=2} : i16[2]
  %1 = window %0 {count=[4], hi=[1], lo=[1], start=[-3], step=[2]} : i16[4]
  %2 = cummin %1 {axis=0} : i16[4]
  %3 = cummax %2 {axis=0} : i16[4]
  %4 = expand_dims %3 {axes=[1, 2]} : i16[4,1,1]
  %5 = min %4 {axes=[], keepdims=false} : i16[4,1,1]
  return %5
}
"""),
}


@pytest.mark.parametrize("name", sorted(SCAN_BESIDE_AN_IOTA))
def test_scan_beside_an_iota_compiles_and_matches_the_interpreter(name: str) -> None:
    from fusec.ir.interpret import interpret
    from fusec.runtime import KernelLauncher, run_plan
    from tests.fuzz.corpus import make_inputs, place
    from tests.helpers import assert_matches_numpy

    views, text = SCAN_BESIDE_AN_IOTA[name]
    graph = parse(text)
    plan = make_plan(graph)
    assert [k.kind for k in plan.kernels] == ["scan"]
    host = make_inputs(graph, 1755)
    want = interpret(graph, host)
    dev = [place(cupy, a, view)[0] for a, view in zip(host, views)]
    got = run_plan(plan, dev, launcher=KernelLauncher(poison=True))
    for g, w in zip(got, want, strict=True):
        assert_matches_numpy(cupy.asnumpy(g), np.asarray(w), exact=True)
