"""Iotas, pads and joins (issue 17, items 2 and 3) on the GPU: ``tests/ir/test_joins.py``'s workloads through
``fusec.fuse`` with CuPy arrays, against NumPy on fresh random data, in float32, float16 and int32, for inputs
laid out several ways (contiguous, transposed in memory, every other element), with outputs poisoned before each
launch; ``np.arange`` bit for bit, float steps included; RoPE at its benchmark shape and a join under every row
and column schedule: ``pytest -m gpu tests/gpu/test_joins_gpu.py`` (skipped where CuPy sees no GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.runtime.launch import KernelLauncher, run_plan
from tests.helpers import (
    GPU_ONLY,
    assert_function_matches_numpy,
    assert_matches_numpy,
    assert_same_bits,
    device_copy,
    seed_of,
)
from tests.ir.test_joins import ARANGES, DTYPES, WORKLOADS, _args, _plus_arange, _rope
from tests.schedule.test_join_accesses import _laid_out

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

TOLERANCE = {"float32": (4e-6, 1e-5), "float16": (4e-3, 1e-3)}




def _check(fn, args: list[np.ndarray], schedules: dict | None = None, kernels: int = 1) -> None:
    fused = fusec.fuse(fn, schedules=schedules) if schedules else fusec.fuse(fn)
    with np.errstate(all="ignore"):
        want = fn(*args)
    dev = [device_copy(a) for a in args]
    for a, d in zip(args, dev):
        assert np.array_equal(cupy.asnumpy(d), a)
    plan = fused.plan(*dev)
    got = run_plan(plan, dev, launcher=KernelLauncher(poison=True), schedules=schedules)
    got = [cupy.asnumpy(g) for g in got]
    if any(n.kind.value == "reduction" for n in plan.graph.nodes):
        # sums in fusec's order (float16 in float32): NumPy's tolerance, or the error bound of that order from
        # NumPy with exact sums (tests.reference)
        rtol, atol = TOLERANCE.get(str(np.asarray(want if not isinstance(want, tuple) else want[0]).dtype),
                                   (1e-7, 1e-7))
        assert_function_matches_numpy(got, fn, *args, rtol=rtol, atol=atol)
    else:
        for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
            assert_matches_numpy(g, np.asarray(w), exact=True)
    assert len(plan.kernels) <= kernels
    for a, d in zip(args, dev):  # inputs untouched
        assert np.array_equal(cupy.asnumpy(d), a)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_join_workload_gpu_matches_numpy(name: str, dtype: str, layout: str) -> None:
    fn, _ = WORKLOADS[name]
    _check(fn, [_laid_out(a, layout) for a in _args(name, dtype)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("args", ARANGES, ids=repr)
def test_arange_gpu_bit_for_bit(args: tuple, dtype: str | None) -> None:
    try:
        with np.errstate(all="ignore"):
            want = np.arange(*args, dtype=dtype)
    except (OverflowError, ValueError, TypeError):
        pytest.skip("NumPy refuses these bounds (tests/ir/test_joins.py checks fusec does too)")
    x = cupy.zeros(want.shape, want.dtype)
    got = cupy.asnumpy(fusec.fuse(lambda x: x + np.arange(*args, dtype=dtype))(x))
    assert_same_bits(got, want)  # NaN bits are the machine's: float16 arange(1e8, 1e8 + 40) is inf, inf, nan...


def test_arange_long_float_ranges_gpu_bit_for_bit() -> None:
    for dtype in ("float32", "float16", "float64"):
        want = np.arange(-3.0, 7000.0, 0.37, dtype=dtype)
        x = cupy.zeros(want.shape, want.dtype)
        got = cupy.asnumpy(fusec.fuse(_plus_arange(-3.0, 7000.0, 0.37, dtype))(x))
        assert_same_bits(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_rope_at_benchmark_shape_gpu(dtype: str) -> None:
    rng = np.random.default_rng(seed_of("rope gpu", dtype))
    x = rng.standard_normal((2, 256, 8, 128)).astype(dtype)
    cos, sin = (rng.standard_normal((256, 1, 128)).astype(dtype) for _ in range(2))
    _check(_rope, [x, cos, sin])
    _check(_rope, [x[:, ::2], cos[::2], sin[::2]])  # strided


@pytest.mark.parametrize("schedule", ["rows:warp", "rows:block", "cols:tiles", "cols:last_block",
                                      "cols:grid_barrier"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_join_under_reduction_schedules_gpu(schedule: str, dtype: str) -> None:
    rng = np.random.default_rng(seed_of("join schedules", schedule, dtype))
    if schedule.startswith("rows"):
        fn = lambda x, y: np.concatenate([x, y * 2], axis=-1).sum(axis=-1)  # noqa: E731
        shapes = [(67, 300), (67, 211)]
    else:
        fn = lambda x, y: np.concatenate([x, y * 2], axis=0).max(axis=0)  # noqa: E731
        shapes = [(300, 67), (211, 67)]
    args = [(rng.standard_normal(s) * 10).astype(dtype) for s in shapes]
    _check(fn, args, schedules={"k0": schedule})


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_onehot_and_pads_at_size_gpu(dtype: str) -> None:
    rng = np.random.default_rng(seed_of("onehot gpu", dtype))
    t = rng.integers(0, 1000, 4099).astype(dtype)
    _check(lambda t: t[:, None] == np.arange(1000, dtype=t.dtype), [t])
    x = (rng.standard_normal((515, 777)) * 10).astype(dtype)
    _check(lambda x: np.pad(x, ((3, 2), (1, 7)), mode="edge") - 1, [x])
    _check(lambda x: np.pad(x.T, 2, constant_values=5), [x])
