"""Regressions found by the GPU fuzzer (tests/gpu/test_fuzz_gpu.py), each pinned as its smallest graph."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.ir.interpret import to_xp
from fusec.ir.text import parse
from fusec.runtime.plan import make_plan
from tests.codegen.test_vector_lanes import FUZZ_2775_GRAPH
from tests.helpers import GPU_ONLY
from tests.schedule.test_scan_schedules import FUZZ_SCANS_OF_IOTAS

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
    from fusec.runtime.launch import run_plan

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


# fuzz graph 2775 (2026-12-07, H100): nanmin(y // 2) of int8 in a vectorized reduce-all gave 64 where NumPy gives
# -64. NVRTC 13.5 dropped the sign extension of the first byte of each 16-bit half of a 16-byte vector before 16-bit
# min/max/comparisons; the kernels read 1-byte lanes through fs::lane (tests/codegen/test_vector_lanes.py).
# (its IR text: FUZZ_2775_GRAPH of tests/codegen/test_vector_lanes.py)
FUZZ_2775_Y = [[[83, 3, 0, -1], [127, 126, -11, -127], [3, -17, 127, 19], [-128, -128, -1, 1]]]


def test_int8_nanmin_of_floordiv_in_a_vectorized_reduce_all_is_numpys() -> None:
    from fusec.ir.interpret import interpret
    from fusec.runtime.launch import run_plan
    from tests.helpers import assert_matches_numpy

    graph = parse(FUZZ_2775_GRAPH)
    host = [np.array(True), np.array(FUZZ_2775_Y, np.int8)]
    got = run_plan(make_plan(graph), [to_xp(cupy, a) for a in host])
    for g, w in zip(got, interpret(graph, host)):
        assert_matches_numpy(cupy.asnumpy(g), w, exact=True)


INT8_LANE_WORKLOADS = {  # arithmetic on int8 lanes of 16-byte vectors, then a min/max or a comparison
    "reduce_all_nanmin_floordiv": lambda x: np.nanmin(x // 2),
    "reduce_all_max_neg": lambda x: (-x).max(),
    "reduce_all_min_sub": lambda x: (x - np.int8(1)).min(),
    "pointwise_compare_floordiv": lambda x: x // 4 < -10,
    "pointwise_compare_abs": lambda x: np.abs(x) > 100,
    "rows_min_floordiv": lambda x: (x // 2).min(axis=1),
    "rows_max_neg_keepdims": lambda x: x - (-x).max(axis=1, keepdims=True),
    "scan_cummin_sub": lambda x: np.minimum.accumulate(x - np.int8(1), axis=1),
}


@pytest.mark.parametrize("shape", [(64, 256), (4103,)], ids=str)
@pytest.mark.parametrize("name", sorted(INT8_LANE_WORKLOADS))
def test_int8_arithmetic_on_vector_lanes_then_min_max_or_compare_is_numpys(name: str, shape: tuple[int, ...]) -> None:
    import fusec
    from tests.helpers import assert_matches_numpy

    fn = INT8_LANE_WORKLOADS[name]
    if len(shape) == 1 and name.startswith(("rows", "scan")):
        pytest.skip("a row kernel needs rows")
    x = np.random.default_rng(2775).integers(-128, 128, shape).astype(np.int8)
    x.reshape(-1)[:4] = [-128, -128, -127, 127]
    with np.errstate(all="ignore"):
        want = fn(x)
    got = fusec.fuse(fn)(cupy.asarray(x))
    assert_matches_numpy(cupy.asnumpy(got), want, exact=True)


# Scan kernels whose other members read an iota (a window of one, or a value cast from one) that NVRTC rejected
# (`identifier "ld0" is undefined`, `"ld0_o"`): the GPU run of 2026-12-07, fuzz graph 1755 of the seed-0 corpus and
# graphs 4165 and 4166 of the seed-11 one (shared/gpu-runs/2026-12-07-h100/fuzz-report*.txt), each on the input views
# it failed on (corpus.place: "t" transposed, "c" contiguous).
SCAN_BESIDE_AN_IOTA = {  # the graphs (tests/schedule/test_scan_schedules.py), each with the input views it failed on
    "fuzz1755_cast_iota_beside_cummax": (("t", "c"), FUZZ_SCANS_OF_IOTAS["1755"]),
    "fuzz4165_scan_of_a_window_of_an_iota": (("c",), FUZZ_SCANS_OF_IOTAS["4165"]),
    "fuzz4166_scan_of_a_window_of_an_iota": (("c",), FUZZ_SCANS_OF_IOTAS["4166"]),
}


@pytest.mark.parametrize("name", sorted(SCAN_BESIDE_AN_IOTA))
def test_scan_beside_an_iota_compiles_and_matches_the_interpreter(name: str) -> None:
    from fusec.ir.interpret import interpret
    from fusec.runtime.launch import KernelLauncher, run_plan
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
