"""Statistics in one pass on the GPU: variances (Welford's update, Chan's combination) and softmax denominators
(online max-rescaled sums), every reduction kind forced with ``one_pass=1`` and ``one_pass=0``, within
CORRECTNESS.md's reduction bound of the float64 result on fresh data, NaN and infinities at the same positions
as NumPy's, outputs poisoned first; variances of badly conditioned data (a mean far above the spread) at least
as accurate as NumPy's own two-pass result."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fusec
from fusec.ir.interpret import to_xp
from fusec.runtime.launch import KernelLauncher, run_plan
from tests.helpers import GPU_ONLY, seed_of

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


def var_axis0(x):
    return x.mean(axis=0), x.var(axis=0)


def std_rows(x):
    return x.std(axis=-1, ddof=1)


def var_all(x):
    return x.var()


def var_written_out(x):
    m = x.mean(axis=(0, 2), keepdims=True)
    return ((x - m) ** 2).mean(axis=(0, 2))


def batchnorm(x):
    m = x.mean(axis=0, keepdims=True)
    v = x.var(axis=0, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5)


def softmax_rows(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def logsumexp_rows(x):
    m = x.max(axis=-1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=-1)) + m.squeeze(-1)


def softmax_axis0(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def logsumexp_all(x):
    m = x.max()
    return np.log(np.exp(x - m).sum()) + m


def _reference(fn, x: np.ndarray) -> tuple[np.ndarray, ...]:
    with np.errstate(all="ignore"):
        want = fn(x.astype(np.float64))
    return want if isinstance(want, tuple) else (want,)


# what each output's error scales with, beyond its own magnitude: a variance's error scales with the variance
# itself (Welford's does not grow with the mean); a mean's with the mean magnitude of the elements summed; a
# normalized value's with its unit scale
SCALES = {"var_axis0": ("mean", "var"), "std_rows": ("var",), "var_all": ("var",), "var_written_out": ("var",),
          "batchnorm": ("unit",), "softmax_rows": ("var",), "logsumexp_rows": ("unit",), "softmax_axis0": ("var",),
          "logsumexp_all": ("unit",)}


def _bound(x: np.ndarray, want: np.ndarray, n: int, scale: str) -> np.ndarray:
    """CORRECTNESS.md's reduction bound for a result over ``n`` elements: a few eps(dtype) x log2(n) of the
    result's magnitude plus its scale's, and the dtype's own rounding."""
    eps = float(ml_dtypes.finfo(x.dtype).eps)
    extra = {"var": 0.0, "unit": 1.0, "mean": float(np.nanmean(np.abs(x[np.isfinite(x)].astype(np.float64))))}
    return 8 * eps * max(1.0, np.log2(max(n, 2))) * (np.abs(want) + extra[scale]) + ml_dtypes.finfo(x.dtype).tiny


# (function, shape, elements per variance, dtype, schedules forced on the one kernel)
CASES = [
    (var_axis0, (2049, 37), 2049, "float32", ["cols:tiles,one_pass=1", "cols:grid_barrier,blocks=5,one_pass=1",
                                              "cols:last_block,blocks=7,one_pass=1", "cols:tiles,one_pass=0",
                                              "cols:tiles,tile=1,split=256,one_pass=1"]),
    # float16: few enough elements that M2 stays below float16's largest value (NumPy's two-pass form too)
    (var_axis0, (257, 5), 257, "float16", ["cols:last_block,blocks=3,one_pass=1", "cols:grid_barrier,one_pass=0"]),
    (var_axis0, (1000, 64), 1000, "float64", ["cols:last_block,blocks=4,one_pass=1", "cols:tiles,one_pass=1"]),
    (std_rows, (37, 1000), 1000, "float32", ["rows:warp,one_pass=1", "rows:block,one_pass=1",
                                             "rows:block_regs,threads=64,elems=16,one_pass=1",
                                             "rows:warp_regs,threads=32,elems=32,one_pass=1",
                                             "rows:block,one_pass=0", "cols:grid_barrier,tile=1,split=256,blocks=4"]),
    (std_rows, (300, 3), 3, "float32", ["rows:warp,one_pass=1", "rows:warp_regs,one_pass=1"]),
    (var_all, (1029, 917), 1029 * 917, "float32", ["reduce-all:last_block,one_pass=1",
                                                   "reduce-all:grid_barrier,loop=strided,one_pass=1",
                                                   "reduce-all:grid_barrier,one_pass=0"]),
    (var_all, (7,), 7, "float64", ["reduce-all:last_block,one_pass=1"]),
    (var_written_out, (8, 300, 9), 72, "float32", ["cols:tiles,one_pass=1", "cols:grid_barrier,blocks=3,one_pass=1"]),
    (batchnorm, (5003, 24), 5003, "float32", ["cols:grid_barrier,blocks=6,one_pass=1", "cols:tiles,one_pass=1"]),
    (softmax_rows, (37, 3000), 3000, "float32", ["rows:warp", "rows:block", "rows:block,one_pass=0",
                                                 "rows:block_regs,threads=128,elems=32,one_pass=1",
                                                 "cols:grid_barrier,tile=1,split=256,blocks=4"]),
    (softmax_rows, (37, 1000), 1000, "float16", ["rows:block", "rows:warp_regs,threads=32,elems=32,one_pass=1"]),
    (softmax_rows, (37, 300), 300, "float64", ["rows:block", "cols:grid_barrier,tile=1,split=256,blocks=3"]),
    (logsumexp_rows, (300, 2000), 2000, "float32", ["rows:block", "rows:warp", "rows:block,one_pass=0"]),
    (softmax_axis0, (1029, 37), 1029, "float32", ["cols:tiles", "cols:grid_barrier,blocks=5",
                                                  "cols:grid_barrier,blocks=5,one_pass=0"]),
    (logsumexp_all, (1029, 917), 1029 * 917, "float32", ["reduce-all:last_block", "reduce-all:grid_barrier",
                                                         "reduce-all:grid_barrier,one_pass=0"]),
]


@pytest.fixture(scope="module")
def launcher() -> KernelLauncher:
    return KernelLauncher(poison=True, compiler="nvrtc")


@pytest.mark.parametrize("fn, shape, n, dtype, schedule",
                         [(fn, shape, n, dtype, s) for fn, shape, n, dtype, schedules in CASES for s in schedules],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_gpu_variance_in_one_pass_matches_the_float64_result(launcher, fn, shape, n, dtype, schedule) -> None:
    rng = np.random.default_rng(seed_of("one_pass", fn.__name__, shape, dtype, schedule))
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)  # float16's squares stay finite
    x.flat[rng.choice(x.size, size=3, replace=False)] = [np.nan, np.inf, -np.inf]  # NaN in three columns/rows
    if fn in (softmax_rows, logsumexp_rows) and shape[0] > 3:
        x[1] = -np.inf  # a row of -inf only: NaN, as exp(-inf - -inf)
        x[2, ::2] = -np.inf  # -inf among finite values: exp(-inf) = 0
    fused = fusec.fuse(fn, schedules={"k0": schedule})
    plan = fused.plan(fusec.ArraySpec(shape, dtype))
    assert len(plan.kernels) == 1
    got = run_plan(plan, [to_xp(cupy, x)], launcher=launcher, schedules=fused.schedules)
    chosen = launcher.recipes(plan.kernels[0].region)[0].schedule
    assert chosen.one_pass == ("one_pass=0" not in schedule and (
        "regs" not in schedule or "one_pass=1" in schedule)), chosen
    for g, w, scale in zip(got, _reference(fn, x), SCALES[fn.__name__], strict=True):
        g = cupy.asnumpy(g).astype(np.float64)
        w = np.asarray(w, dtype=np.float64)
        assert g.shape == w.shape
        assert np.array_equal(np.isnan(g), np.isnan(w)), "NaN positions differ"
        finite = np.isfinite(w)
        assert np.array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)])
        err = np.abs(g[finite] - w[finite])
        assert (err <= _bound(x, w[finite], n, scale)).all(), f"worst error {err.max():.3e} for {schedule}"


def _conditioned(rng, shape, mean: float) -> np.ndarray:
    return (mean + rng.standard_normal(shape)).astype(np.float32)


@pytest.mark.parametrize("fn, shape, axis", [(var_axis0, (1 << 16, 64), 0), (std_rows, (64, 1 << 15), -1),
                                             (var_all, (1 << 20,), None)],
                         ids=["axis0", "rows", "all"])
@pytest.mark.parametrize("mean", [1e4, 1e6])
def test_gpu_variance_of_badly_conditioned_data_is_as_accurate_as_numpy(fn, shape, axis, mean) -> None:
    """float32 data 1e4 (1e6) + N(0, 1): NumPy's two-pass variance errs by ~1e-7 (up to ~1e-3) relative to the
    float64 result; the one-pass kernel must do no worse than twice NumPy's error (CORRECTNESS.md's rule)."""
    rng = np.random.default_rng(seed_of("conditioned", fn.__name__, shape, mean))
    x = _conditioned(rng, shape, mean)
    fused = fusec.fuse(fn)
    got = fused(cupy.asarray(x))
    got = cupy.asnumpy(got[-1] if isinstance(got, tuple) else got).astype(np.float64)
    ddof = 1 if fn is std_rows else 0
    exact = np.var(x.astype(np.float64), axis=axis, ddof=ddof)
    ours_np = np.var(x, axis=axis, ddof=ddof).astype(np.float64)
    if fn is std_rows:
        exact, ours_np = np.sqrt(exact), np.sqrt(ours_np)
    numpy_err = np.abs(ours_np - exact) / exact
    fusec_err = np.abs(got - exact) / exact
    assert fusec_err.max() <= max(2 * numpy_err.max(), 4 * ml_dtypes.finfo(np.float32).eps), (
        f"fusec {fusec_err.max():.2e} vs NumPy {numpy_err.max():.2e}")


def test_gpu_variance_of_empty_and_single_columns_is_numpys() -> None:
    for shape in ((0, 5), (1, 5)):
        x = np.ones(shape, np.float32) * 3
        with np.errstate(all="ignore"):
            want = x.var(axis=0)
        got = cupy.asnumpy(fusec.fuse(lambda a: a.var(axis=0))(cupy.asarray(x)))
        np.testing.assert_array_equal(got, want)
