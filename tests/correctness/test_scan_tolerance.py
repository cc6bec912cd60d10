"""The scan check of the GPU tests (``tests.helpers.assert_scan_matches_numpy``) on the CPU: what every forced
schedule computes (its float32 arithmetic emulated operation for operation, ``scan_emulation``) on the GPU tests'
own data passes, float16 included, where NumPy's float16 scans round every step and stagnate; NaN and infinities
follow the exactly accumulated scan (a float16 overflow where the exact prefix overflows, inf - inf, nancumsum);
a dropped carry, a wrong element, a moved NaN, a finite value where the exact prefix overflows, fail."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.kinds import generate_plan
from tests.correctness.scan_cases import FORCED_SHAPES, SCHEDULES, scan_data, scan_depth
from tests.correctness.scan_emulation import scan_prefixes
from tests.helpers import assert_result_matches_numpy, assert_scan_matches_numpy, seed_of
from tests.reference import expect


def _schedule(fn, x: np.ndarray, forced: str | None = None):
    """The scan schedule of ``fn(x)``'s kernel: ``forced`` completed, else the heuristic's."""
    fused = fusec.fuse(fn, schedules={"k0": forced} if forced else {})
    plan = fused.plan(x)
    (spec,) = generate_plan(plan, dict(zip(plan.graph.inputs, [x])), fused.schedules)
    return spec.schedule


def _cumsum(a):
    return np.cumsum(a, axis=1)


def _half_abs_cumsum_third(a):
    return np.cumsum(np.abs(a) * 0.5, axis=1) / 3.0


def _fused_like(fn, x: np.ndarray, schedule) -> np.ndarray:
    """What fusec's kernel computes for ``fn`` (one of the two above) under ``schedule``: the prologue as NumPy
    rounds it, the scan accumulated in float32 in the schedule's order, each prefix rounded once to the result's
    dtype, the epilogue as NumPy rounds it."""
    operand = np.abs(x) * x.dtype.type(0.5) if fn is _half_abs_cumsum_third else x
    prefixes = scan_prefixes(operand.astype(np.float32), schedule).astype(x.dtype)
    return prefixes / 3.0 if fn is _half_abs_cumsum_third else prefixes


@pytest.mark.parametrize("forced", SCHEDULES)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_scan_tolerance_passes_every_forced_schedule_on_the_gpu_tests_data(dtype: str, forced: str) -> None:
    """tests/gpu/test_scan_gpu.py::test_scan_forced_schedules_gpu_match_numpy's data and bound, with the kernel's
    arithmetic emulated: it passes. The float16 half-abs scan of the long row is where the GPU run of 2026-12-07
    failed (its check took the scan's input for the scanned values, and NumPy's stagnated scan for the truth)."""
    rng = np.random.default_rng(seed_of(dtype, forced))
    for shape in FORCED_SHAPES:
        x = scan_data(rng, shape, dtype)
        for fn in (_cumsum, _half_abs_cumsum_third):
            schedule = _schedule(fn, x, forced)
            assert_scan_matches_numpy(_fused_like(fn, x, schedule), fn, x, depth=scan_depth(schedule, shape[1]))


def test_scan_tolerance_float16_follows_the_float32_accumulation_where_numpy_stagnates() -> None:
    x = np.full((2, 5000), 0.25, np.float16)
    assert np.cumsum(x, axis=1)[0, -1] == 512  # NumPy rounds every step: 512 + 0.25 is 512 in float16
    fused_like = np.cumsum(x.astype(np.float32), axis=1).astype(np.float16)
    assert fused_like[0, -1] == 1250
    assert_scan_matches_numpy(fused_like, _cumsum, x, depth=5002)
    assert_scan_matches_numpy(np.cumsum(x, axis=1), _cumsum, x, depth=64)  # NumPy's own result passes too
    stuck = np.minimum(fused_like, np.float16(200))  # neither: a scan that stops at 200
    with pytest.raises(AssertionError, match="accumulation's error bound"):
        assert_scan_matches_numpy(stuck, _cumsum, x, depth=5002)


def test_scan_tolerance_float16_infinities_are_the_exact_prefixes() -> None:
    """A float16 prefix is inf where the exact prefix rounds to inf, and finite again where it comes back (NumPy's
    running float16 value stays inf, which passes as NumPy's own); inf - inf is NaN; nancumsum skips NaN."""
    x = np.array([[60000, 10000, -20000, 3, np.inf, -np.inf, 1]], np.float16)
    fused_like = np.cumsum(x.astype(np.float32), axis=1).astype(np.float16)
    assert list(fused_like[0, :3]) == [60000, np.inf, np.float16(50000)] and np.isnan(fused_like[0, 5:]).all()
    assert np.isinf(np.cumsum(x, axis=1)[0, 2])  # NumPy: inf - 20000
    assert_scan_matches_numpy(fused_like, _cumsum, x, depth=9)
    stuck = fused_like.copy()
    stuck[0, 2:4] = np.inf  # NumPy's sticky overflow: not the exact prefix, but NumPy's own value passes
    assert_scan_matches_numpy(stuck, _cumsum, x, depth=9)
    stuck[0, 2] = -np.inf  # neither
    with pytest.raises(AssertionError, match="infinities differ"):
        assert_scan_matches_numpy(stuck, _cumsum, x, depth=9)
    finite = fused_like.copy()
    finite[0, 1] = 65504  # the exact prefix 70000 overflows
    with pytest.raises(AssertionError, match="infinities differ"):
        assert_scan_matches_numpy(finite, _cumsum, x, depth=9)
    y = np.array([[1.0, np.nan, 2.0, np.inf, -np.inf, 4.0]], np.float32)
    nancumsum = lambda a: np.nancumsum(a, axis=-1)  # noqa: E731
    assert_scan_matches_numpy(np.array([[1, 1, 3, np.inf, np.nan, np.nan]], np.float32), nancumsum, y, depth=8)
    with pytest.raises(AssertionError, match="NaN positions differ"):
        assert_scan_matches_numpy(np.cumsum(y, axis=-1), nancumsum, y, depth=8)


def test_scan_tolerance_at_the_float16_overflow_threshold_takes_either_side() -> None:
    x = np.array([[65000, 518]], np.float16)  # 65518: rounds to 65504, one float32 rounding away from inf
    exact = np.array([[65000, 65504]], np.float16)
    assert_scan_matches_numpy(exact, _cumsum, x, depth=4)
    assert_scan_matches_numpy(np.array([[65000, np.inf]], np.float16), _cumsum, x, depth=4)
    with pytest.raises(AssertionError, match="infinities differ"):
        assert_scan_matches_numpy(np.array([[65000, -np.inf]], np.float16), _cumsum, x, depth=4)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scan_tolerance_passes_a_tree_scan(dtype: str) -> None:
    x = np.random.default_rng(5000).uniform(-1, 1, (3, 5000)).astype(dtype)
    tree = np.cumsum(x.astype(np.float64), axis=-1)
    tree = (tree + np.random.default_rng(1).uniform(-1, 1, tree.shape) * 8 * 2.0**-24 * np.cumsum(np.abs(x), -1))
    assert_scan_matches_numpy(tree.astype(dtype), _cumsum, x, depth=16)


def test_scan_tolerance_catches_a_dropped_carry_and_a_wrong_element() -> None:
    x = np.random.default_rng(5000).uniform(-1, 1, (3, 5000)).astype(np.float32)
    good = np.cumsum(x.astype(np.float64), axis=-1)
    carry = good.copy()
    carry[:, 2048:] -= good[:, 2047:2048]
    with pytest.raises(AssertionError):
        assert_scan_matches_numpy(carry.astype(np.float32), _cumsum, x, depth=64)
    element = good.copy()
    element[1, 17:] += x[1, 3]
    with pytest.raises(AssertionError):
        assert_scan_matches_numpy(element.astype(np.float32), _cumsum, x, depth=64)
    third = _half_abs_cumsum_third(x.astype(np.float64))
    with pytest.raises(AssertionError):  # the epilogue left out
        assert_scan_matches_numpy((3 * third).astype(np.float32), _half_abs_cumsum_third, x, depth=64)


def test_scan_tolerance_keeps_nan_positions_and_products_relative() -> None:
    x = np.array([[1.0, np.nan, 2.0], [1.5, 2.0, 0.5]], np.float32)
    moved = np.array([[np.nan, np.nan, 3.0], [1.5, 3.5, 4.0]], np.float32)
    with pytest.raises(AssertionError):
        assert_scan_matches_numpy(moved, _cumsum, x, depth=4)
    p = np.random.default_rng(3).uniform(0.9, 1.1, (2, 3000)).astype(np.float32)
    exact = np.cumprod(p.astype(np.float64), axis=-1)
    cumprod = lambda a: np.cumprod(a, axis=-1)  # noqa: E731
    assert_scan_matches_numpy((exact * (1 + 4e-6)).astype(np.float32), cumprod, p, depth=64)
    with pytest.raises(AssertionError):
        assert_scan_matches_numpy((exact * 1.01).astype(np.float32), cumprod, p, depth=64)


def test_expect_reference_accumulates_exactly_and_rounds_where_numpy_rounds() -> None:
    x = np.full((1, 5000), 0.25, np.float16)
    (result,) = expect(_half_abs_cumsum_third, x).outputs
    assert result.reference.dtype == np.float16 and result.numpy[0, -1] != result.reference[0, -1]
    # the exact prefix rounded to float16, then divided by 3 in float16, as NumPy divides its float16 array
    want = (np.cumsum(np.abs(x).astype(np.float64) * 0.5, axis=1).astype(np.float16) / 3.0).astype(np.float16)
    assert np.array_equal(result.reference, want)
    assert result.terms == 5000 and result.steps == 1


def test_scan_tolerance_passes_the_gpu_tests_fused_float16_workload() -> None:
    """tests/gpu/test_scan_gpu.py::test_scan_fused_workloads_gpu_match_numpy[float16]: two scans of a row in one
    kernel, one of the other's result (its float16 prefixes, rounded once). The GPU run of 2026-12-07 failed it on
    infinities: NumPy's float16 running value overflows where the exact prefix (6.528e+04) does not; the emulated
    kernel gives the GPU's values there."""
    rng = np.random.default_rng(seed_of("workloads", "float16"))
    x = scan_data(rng, (129, 2049), "float16")
    m = rng.random((129, 2049)) < 0.5

    def workload(a, mask):
        return np.cumsum(a * mask, axis=1) * 0.5, np.cumsum(np.cumsum(np.abs(a), axis=1), axis=1)

    fused = fusec.fuse(workload)
    plan = fused.plan(x, m)
    (spec,) = generate_plan(plan, dict(zip(plan.graph.inputs, [x, m])), fused.schedules)
    schedule = spec.schedule
    first = scan_prefixes((x * m).astype(np.float32), schedule).astype(np.float16) * np.float16(0.5)
    inner = scan_prefixes(np.abs(x).astype(np.float32), schedule).astype(np.float16)
    second = scan_prefixes(inner.astype(np.float32), schedule).astype(np.float16)
    depth = scan_depth(schedule, x.shape[1])
    want_first, want_second = expect(workload, x, m).outputs
    # where NumPy's float16 running value overflowed early: the GPU's 55 elements, 6.528e+04 first, as emulated
    assert int((np.isinf(want_second.numpy) & np.isfinite(second)).sum()) == 55 and second[0, 513] == 65280
    assert_result_matches_numpy(first, want_first, depth=depth)
    assert_result_matches_numpy(second, want_second, depth=2 * depth)


def test_scan_tolerance_passes_the_gpu_tests_nancumsum() -> None:
    """tests/gpu/test_scan_gpu.py::test_scan_nan_functions_and_integer_wrapping_gpu_match_numpy's float32
    nancumsum: its check compared against the cumsum of the data (NaN from the first NaN on), so wherever that was
    NaN it asked for NumPy's bits exactly."""
    x = scan_data(np.random.default_rng(17), (40, 3000), "float32", special=True)
    fn = lambda a: np.nancumsum(a, axis=1)  # noqa: E731
    schedule = _schedule(fn, x)
    fused_like = scan_prefixes(np.where(np.isnan(x), np.float32(0), x), schedule)
    assert_scan_matches_numpy(fused_like, fn, x, depth=scan_depth(schedule, x.shape[1]))


@pytest.mark.parametrize(("forced", "shape", "head", "tail"), [
    ("scan:sequential", (1, 70_001), ["0.114", "0.1627", "0.1803"], ["5.812e+03", "5.812e+03", "5.812e+03"]),
    ("scan:rows,threads=32,elems=1", (37, 5000), ["0.1583", "0.28", "0.321"], ["414.8", "415.0", "415.0"]),
])
def test_scan_emulation_gives_what_the_gpu_printed(forced: str, shape: tuple[int, int], head: list[str],
                                                   tail: list[str]) -> None:
    """The emulated kernels against the values the GPU run of 2026-12-07 printed for the half-abs scan of the
    forced-schedules test (row 0's first and last three: NumPy's are 341.2 at the end)."""
    rng = np.random.default_rng(seed_of("float16", forced))
    x = {s: scan_data(rng, s, "float16") for s in FORCED_SHAPES}[shape]
    got = _fused_like(_half_abs_cumsum_third, x, _schedule(_half_abs_cumsum_third, x, forced))
    assert list(got[0, :3]) == [np.float16(v) for v in head] and list(got[0, -3:]) == [np.float16(v) for v in tail]
