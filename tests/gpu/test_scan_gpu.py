"""Scan kernels on the GPU: ``cumsum``/``cumprod`` (and their fused prologues and epilogues) through ``fusec.fuse``
with CuPy arrays, against NumPy on fresh random data, outputs poisoned before each launch (the launcher's
``poison``): float32, float16 and int32, rows of 1 to 2**20 elements, column scans, every forced schedule,
non-contiguous inputs (offset, strided, reversed, transposed); rows few and long enough run split across blocks
(a grid barrier between each block's totals and its outputs). ``pytest -m gpu tests/gpu/test_scan_gpu.py``
(skipped where CuPy sees no GPU).

Integers are exact (int32 accumulates in int64, wrapping as NumPy's). Floats against ``tests.reference``'s
reference (NumPy with the scan accumulated exactly and rounded once to NumPy's dtype, every other step as NumPy
rounds it): NaN and infinities exactly, finite values within ``tests.helpers.assert_scan_matches_numpy``'s bound for
the schedule's chain of roundings (a thread's elements, the tree over the row's threads, the carry over the chunks
before), or within twice NumPy's own error. fusec accumulates a float16 scan in float32 in every schedule and rounds
each prefix once to float16, as it accumulates float16 sums (``shared/CORRECTNESS.md``); NumPy rounds the running
value to float16 at every step, so its long float16 scans stagnate (adding 0.25 to 512 gives 512) and overflow
early, and are checked only within twice their own error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fusec
from fusec.kinds import generate_plan
from fusec.runtime.launch import KernelLauncher, run_plan
from tests.correctness.scan_cases import FORCED_SHAPES, SCHEDULES, scan_data, scan_depth
from tests.helpers import (
    GPU_ONLY,
    assert_matches_numpy,
    assert_result_matches_numpy,
    assert_scan_matches_numpy,
    device_copy,
    seed_of,
)
from tests.reference import expect
from tests.schedule.test_scan_schedules import CHAINED_INDEX_CASES, INDEX_VALUE_CASES

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

DTYPES = ["float32", "float16", "int32"]
LENGTHS = [1, 2, 7, 8, 9, 31, 32, 33, 255, 1000, 1025, 4097, 65539, 1 << 20]


def _run(fn: Callable[..., Any], args: list[np.ndarray], schedule: str | None = None) -> tuple[list[Any], Any]:
    fused = fusec.fuse(fn, schedules={"k0": schedule} if schedule else {})
    dev = [device_copy(a) for a in args]
    plan = fused.plan(*dev)
    got = run_plan(plan, dev, launcher=KernelLauncher(poison=True), schedules=fused.schedules)
    schedules = [k.schedule for k in generate_plan(plan, dict(zip(plan.graph.inputs, dev)), fused.schedules)]
    for a, d in zip(args, dev):  # inputs untouched
        assert np.array_equal(cupy.asnumpy(d), a, equal_nan=True)
    return [cupy.asnumpy(g) for g in got], schedules


def _check_scan(fn: Callable[..., Any], x: np.ndarray, schedule: str | None = None, *, axis: int = -1) -> None:
    """``fn(x)``, a scan of ``x`` along ``axis`` (and elementwise steps before and after it), against NumPy."""
    with np.errstate(all="ignore"):
        want = fn(x)
    (got,), schedules = _run(fn, [x], schedule)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "biu":
        assert_matches_numpy(got, want, exact=True)
        return
    n = x.shape[axis]
    scan = next((s for s in schedules if s.kind == "scan"), None)  # none where the axis has one element
    assert_scan_matches_numpy(got, fn, x, depth=scan_depth(scan, n) if scan is not None else 2)


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_rows_gpu_match_numpy(dtype: str, length: int) -> None:
    rows = max(1, min(67, (1 << 22) // length))
    x = scan_data(np.random.default_rng(seed_of(dtype, length)), (rows, length), dtype, special=length > 100)
    _check_scan(lambda a: np.cumsum(a, axis=-1), x)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_forced_schedules_gpu_match_numpy(dtype: str, schedule: str) -> None:
    rng = np.random.default_rng(seed_of(dtype, schedule))
    for shape in FORCED_SHAPES:
        x = scan_data(rng, shape, dtype)
        _check_scan(lambda a: np.cumsum(a, axis=1), x, schedule)
        if dtype != "int32":
            _check_scan(lambda a: np.cumsum(np.abs(a) * 0.5, axis=1) / 3.0, x, schedule)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("case", sorted(INDEX_VALUE_CASES))
def test_scan_reading_index_values_gpu_match_numpy(case: str, schedule: str) -> None:
    """Scans whose prologue or epilogue reads iotas (directly, or through the windows of pads, joins and rolls),
    under every schedule, on int32 data: the scans are exact, and what follows them elementwise is compared with the
    elementwise tolerance of its dtype (float results: divisions by aranges and linspaces)."""
    if case in CHAINED_INDEX_CASES and schedule.startswith("scan:split"):
        pytest.skip("a scan of a scan: no split schedule")
    fn = INDEX_VALUE_CASES[case]
    rng = np.random.default_rng(seed_of("index values", case, schedule))
    for shape in [(37, 1000), (3, 17), (5, 3), (2, 40_000)]:
        x = rng.integers(-1000, 1000, shape).astype(np.int32)
        with np.errstate(all="ignore"):
            want = fn(x)
        (got,), schedules = _run(fn, [x], schedule)
        assert [s.kind for s in schedules] == ["scan"]
        assert_matches_numpy(got, want, exact=want.dtype.kind != "f")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1000, 5), (100_000, 3), (4096, 1024), (2, 3, 1000)], ids=str)
def test_scan_columns_gpu_match_numpy(dtype: str, shape: tuple[int, ...]) -> None:
    x = scan_data(np.random.default_rng(seed_of(dtype, shape)), shape, dtype, special=True)
    _check_scan(lambda a: np.cumsum(a, axis=0), x, axis=0)
    if len(shape) == 3:
        _check_scan(lambda a: np.cumsum(a, axis=1), x, axis=1)


def _layouts(x: np.ndarray) -> dict[str, np.ndarray]:
    """``x`` (2-d) as the same values laid out differently in memory."""
    big = np.zeros((x.shape[0] + 3, 2 * x.shape[1] + 5), x.dtype)
    big[3:, 5::2] = x
    reversed_ = np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1]
    return {"contiguous": x, "offset_strided": big[3:, 5::2], "reversed": reversed_,
            "transposed": np.ascontiguousarray(x.T).T}


@pytest.mark.parametrize("layout", ["contiguous", "offset_strided", "reversed", "transposed"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_non_contiguous_inputs_gpu_match_numpy(dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed_of(dtype, layout))
    for shape in [(33, 1000), (700, 9)]:
        x = _layouts(scan_data(rng, shape, dtype))[layout]
        _check_scan(lambda a: np.cumsum(a, axis=1), x)
        _check_scan(lambda a: np.cumsum(a, axis=0), x, axis=0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scan_cumprod_gpu_matches_numpy(dtype: str) -> None:
    rng = np.random.default_rng(seed_of("cumprod", dtype))
    x = rng.uniform(0.99, 1.01, (21, 3000)).astype(dtype)
    _check_scan(lambda a: np.cumprod(a, axis=1), x)
    _check_scan(lambda a: np.cumprod(a, axis=0), x, axis=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_fused_workloads_gpu_match_numpy(dtype: str) -> None:
    rng = np.random.default_rng(seed_of("workloads", dtype))
    x = scan_data(rng, (129, 2049), dtype)
    m = rng.random((129, 2049)) < 0.5

    def workload(a, mask):  # a prologue, two scans of the row (one of the other's result), epilogues
        return np.cumsum(a * mask, axis=1) * 0.5, np.cumsum(np.cumsum(np.abs(a), axis=1), axis=1)

    with np.errstate(all="ignore"):
        want = workload(x, m)
    got, schedules = _run(workload, [x, m])
    assert len(schedules) == 1 and schedules[0].kind == "scan"
    if dtype == "int32":
        for g, w in zip(got, want):
            assert_matches_numpy(g, w, exact=True)
        return
    depth = scan_depth(schedules[0], x.shape[1])
    first, second = expect(workload, x, m).outputs
    assert_result_matches_numpy(got[0], first, depth=depth)
    # the outer scan adds the inner one's errors (each bounded by the inner magnitudes it folds, which the outer
    # magnitude sums); the inner prefixes' rounding to the result dtype, fusec's and the reference's, is the
    # bound's step after the first accumulation
    assert_result_matches_numpy(got[1], second, depth=2 * depth)


def test_scan_nan_functions_and_integer_wrapping_gpu_match_numpy() -> None:
    rng = np.random.default_rng(17)
    x = scan_data(rng, (40, 3000), "float32", special=True)
    _check_scan(lambda a: np.nancumsum(a, axis=1), x)
    big = np.full((4, 5000), np.iinfo(np.int64).max // 1000, np.int64)
    _check_scan(lambda a: np.cumsum(a, axis=1), big)
    _check_scan(lambda a: np.cumprod(a % 7 - 3, axis=1), big)
    _check_scan(lambda a: np.cumsum(a > 0, axis=1), x)


# scans beside an iota (``np.arange``: the position along the row, computed in the kernel): NVRTC rejected these
# kernels (`identifier "ld0" is undefined`) in the GPU run of 2026-12-07. Integer data: exact results.
IOTA_WORKLOADS = {
    "running_mean": lambda a: np.cumsum(a, axis=-1) / np.arange(1, a.shape[-1] + 1),
    "weighted_by_position": lambda a: np.cumsum(a * np.arange(a.shape[-1], dtype=a.dtype), axis=-1),
    "position_minus_prefix_max": lambda a: np.arange(a.shape[-1]) - np.maximum.accumulate(a, axis=-1),
}


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", ["int32", "int16"])
@pytest.mark.parametrize("name", sorted(IOTA_WORKLOADS))
def test_scan_beside_an_iota_gpu_matches_numpy(name: str, dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed_of("iota", name, dtype, layout))
    for shape in [(37, 100), (3, 2049), (1, 5)]:
        x = _layouts(scan_data(rng, shape, dtype))[layout]
        with np.errstate(all="ignore"):
            want = IOTA_WORKLOADS[name](x)
        (got,), schedules = _run(IOTA_WORKLOADS[name], [x])
        assert [s.kind for s in schedules] == ["scan"]
        assert_matches_numpy(got, want, exact=True)


def test_scan_empty_and_zero_d_gpu_match_numpy() -> None:
    for shape in [(0, 10), (10, 0), (0,)]:
        x = np.zeros(shape, np.float32)
        (got,), _ = _run(lambda a: np.cumsum(a, axis=-1), [x])
        assert got.shape == shape and got.dtype == np.float32
    (got,), _ = _run(lambda a: np.cumsum(a), [np.array(2.5, np.float32)])
    assert_matches_numpy(got, np.array([2.5], np.float32), exact=True)
