"""Bucketed register rows on the GPU: one kernel runs every row length of its bucket (the length a parameter,
each row's start checked for vectors when it runs), against NumPy, outputs poisoned first (0xAB bytes).

Lengths inside a bucket (odd, even, multiples of 2 and 4), at its edges (one past the previous bucket, one
below its own length, its own length: the exact full-rows kernel), rows that start misaligned (odd lengths,
an offset view) and aligned, one launcher so the kernels of a bucket are compiled once: the test checks that
too (``launcher.compiles``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fusec
from fusec.ir.interpret import to_xp
from fusec.runtime.launch import KernelLauncher, run_plan
from tests.helpers import GPU_ONLY, assert_matches_numpy, random_array, seed_of
from tests.workloads import layernorm, softmax

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


def row_sum_max(x):
    return x.sum(axis=-1), x.max(axis=-1)


def scaled_rows(x, w):
    return x * w / (x * x).sum(axis=-1, keepdims=True)


# float32 buckets a warp or more long: 129..256 (32 x 8), 257..512 (32 x 16), 513..1024 (32 x 32),
# 1025..2048 (256 x 8), 2049..4096 (256 x 16); float64: 513..1024 (256 x 4)
LENGTHS = (129, 130, 131, 132, 200, 255, 256, 257, 301, 302, 304, 511, 512, 513, 777, 1000, 1001, 1023, 1024,
           1025, 1027, 1534, 2047, 2048, 2049, 3001, 4095)


@pytest.fixture(scope="module")
def launcher() -> KernelLauncher:
    return KernelLauncher(poison=True, compiler="nvrtc")


def _run(launcher, fn, arrays):
    plan = fusec.fuse(fn).plan(*[fusec.ArraySpec(a.shape, a.dtype) for a in arrays])
    got = run_plan(plan, [to_xp(cupy, a) for a in arrays], launcher=launcher)
    return plan, [cupy.asnumpy(g) for g in got]


def _assert_close(got: list[np.ndarray], fn, x: np.ndarray) -> None:
    """``got`` against ``fn`` of ``x`` in float64: NaN and infinities at NumPy's places, maxima exact, the rest
    within CORRECTNESS.md's reduction bound (a few eps x log2(n) of the magnitude: the output's plus 1 for
    normalized rows, each row's sum of |x| for sums)."""
    n = x.shape[-1]
    eps = float(ml_dtypes.finfo(x.dtype).eps)
    with np.errstate(all="ignore"):
        wants = fn(x.astype(np.float64))
        exact = fn(x)
    wants = wants if isinstance(wants, tuple) else (wants,)
    exact = exact if isinstance(exact, tuple) else (exact,)
    scales = {"softmax": (1.0,), "layernorm": (1.0,),
              "row_sum_max": (np.abs(x.astype(np.float64)).sum(axis=-1), None)}[fn.__name__]
    for g, w, e, scale in zip(got, wants, exact, scales, strict=True):
        assert g.dtype == x.dtype and g.shape == w.shape
        if scale is None:  # a maximum: exactly NumPy's
            assert_matches_numpy(g, e, exact=True)
            continue
        assert np.array_equal(np.isnan(g), np.isnan(w)), "NaN positions differ"
        inf = np.isinf(w)
        assert np.array_equal(g[inf], w[inf]) and not np.isinf(g[~inf]).any(), "infinities differ"
        finite = np.isfinite(w)
        bound = 8 * eps * max(1.0, np.log2(n)) * (np.abs(w) + scale) + ml_dtypes.finfo(x.dtype).tiny
        err = np.abs(g.astype(np.float64) - w)
        assert (err[finite] <= np.broadcast_to(bound, w.shape)[finite]).all(), f"worst error {err[finite].max():.3e}"


@pytest.mark.parametrize("fn", [softmax, layernorm, row_sum_max], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_row_buckets_every_length_matches_numpy(launcher, fn, dtype) -> None:
    for n in LENGTHS:
        rng = np.random.default_rng(seed_of("buckets", fn.__name__, dtype, n))
        x = random_array(rng, (37, n), dtype)
        plan, got = _run(launcher, fn, [x])
        (recipe,) = launcher.recipes(plan.kernels[0].region)
        if getattr(recipe.schedule, "in_registers", False):
            expect = "exact" if n == recipe.schedule.capacity else "bucket"
            assert recipe.schedule.lengths == expect, (n, str(recipe.schedule))
        _assert_close(got, fn, x)


def test_gpu_row_buckets_one_compile_per_bucket(launcher) -> None:
    """Every length of the bucket 257..511 runs one kernel: compiled once (the first length), reused after."""
    rng = np.random.default_rng(seed_of("buckets", "compiles"))
    lengths = (259, 260, 262, 300, 333, 400, 480, 509, 510, 511)
    first = random_array(rng, (64, lengths[0]), "float32")
    _run(launcher, softmax, [first])
    before = launcher.compiles
    for n in lengths[1:]:
        x = random_array(rng, (64, n), "float32")
        plan, got = _run(launcher, softmax, [x])
        _assert_close(got, softmax, x)
        (recipe,) = launcher.recipes(plan.kernels[0].region)
        assert recipe.schedule.lengths == "bucket" and recipe.spec.rows_aligned_at_run_time
    assert launcher.compiles == before


@pytest.mark.parametrize("n", [301, 302, 304, 1000, 1001, 2047])
def test_gpu_row_buckets_misaligned_views_and_broadcast_rows(launcher, n) -> None:
    """Rows of an offset view (every row start shifted by one element), a row broadcast along the rows (the
    weight ``w``), and rows strided by a wider array: the run-time check picks vectors or scalars per row."""
    rng = np.random.default_rng(seed_of("buckets", "views", n))
    base = random_array(rng, (33, n + 5), "float32")
    w = random_array(rng, (n,), "float32", special=False)
    base_d = cupy.asarray(base)
    for offset in (1, 4, 0):
        x = base[:, offset:offset + n]
        fused = fusec.fuse(scaled_rows)
        plan = fused.plan(fusec.ArraySpec(x.shape, x.dtype), fusec.ArraySpec(w.shape, w.dtype))
        got = run_plan(plan, [base_d[:, offset:offset + n], cupy.asarray(w)], launcher=launcher)
        with np.errstate(all="ignore"):
            want = scaled_rows(x.astype(np.float64), w.astype(np.float64))
        g = cupy.asnumpy(got[0]).astype(np.float64)
        assert np.array_equal(np.isnan(g), np.isnan(want))
        finite = np.isfinite(want)
        scale = np.abs(x.astype(np.float64) * w).sum(axis=-1, keepdims=True) / (x.astype(np.float64) ** 2).sum(
            axis=-1, keepdims=True)  # |x * w| over the sum of squares: what each output's error scales with
        bound = 16 * ml_dtypes.finfo(np.float32).eps * np.log2(n) * (np.abs(want) + np.broadcast_to(scale, want.shape))
        assert (np.abs(g - want)[finite] <= bound[finite]).all()


@pytest.mark.parametrize("schedule", ["rows:warp_regs,lengths=bucket", "rows:warp_regs,lengths=exact",
                                      "rows:block_regs,lengths=bucket", "rows:block_regs,lengths=exact"])
@pytest.mark.parametrize("n", [3, 17, 100, 257, 512, 513])
def test_gpu_row_buckets_forced_lengths_policies_agree(launcher, schedule, n) -> None:
    rng = np.random.default_rng(seed_of("buckets", "forced", schedule, n))
    x = random_array(rng, (41, n), "float32")
    fused = fusec.fuse(softmax, schedules={"k0": schedule})
    plan = fused.plan(fusec.ArraySpec(x.shape, x.dtype))
    got = run_plan(plan, [cupy.asarray(x)], launcher=launcher, schedules=fused.schedules)
    assert str(launcher.recipes(plan.kernels[0].region)[0].schedule).endswith(schedule.split(",")[-1])
    _assert_close([cupy.asnumpy(got[0])], softmax, x)
