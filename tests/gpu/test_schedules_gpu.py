"""Forced schedules on the GPU: every variant of every kind, forced on one region, gives NumPy's result on fresh
random data (special values included) with its outputs poisoned first; and a fused function's nodes are freed
once it is dropped, whatever the runtime compiled and cached for it."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import fusec
from fusec.ir import graph as ir_graph
from fusec.ir.interpret import interpret, to_xp
from fusec.runtime.launch import KernelLauncher, default_launcher, run_plan
from tests.helpers import GPU_ONLY, assert_matches_numpy, random_array, seed_of
from tests.schedule.test_schedules import channel_sum, mean_var, row_sum_of_transposed, transpose_affine
from tests.workloads import col_softmax, col_sum, gelu, router, softmax, sum_abs

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


def affine(x, w, b):
    return x * w + b


def transpose_mix(x, y):
    return np.sin(x.T) * y, x.T > y


def transpose_3d(x):
    return x.transpose(0, 2, 1) - 1


def col_stats(x):
    return x.sum(axis=0), x.argmax(axis=0), x.max(axis=0)


def col_mean_var(x):
    m = x.mean(axis=0, keepdims=True)
    return m, ((x - m) ** 2).mean(axis=0)


def layernorm(x):
    c = x - x.mean(axis=-1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5)


# (function, shape, dtype, the schedules forced on its one kernel)
CASES = [
    (gelu, (1029, 917), "float32", ["pointwise:vector,vec=4", "pointwise:vector,vec=2", "pointwise:contiguous",
                                     "pointwise:strided"]),
    (gelu, (7, 3), "float16", ["pointwise:vector,vec=8", "pointwise:strided"]),
    (transpose_affine, (1029, 917), "float32", ["pointwise:tiled", "pointwise:strided", "pointwise:tiled,tile=64",
                                                "pointwise:tiled,tile=8"]),
    (transpose_affine, (33, 65), "float16", ["pointwise:tiled"]),
    (transpose_affine, (31, 2), "float64", ["pointwise:tiled"]),
    (transpose_affine, (100, 70), "int8", ["pointwise:tiled"]),
    (transpose_3d, (3, 40, 77), "float64", ["pointwise:tiled"]),
    (sum_abs, (1029, 917), "float32", ["reduce-all:last_block", "reduce-all:last_block,loop=strided",
                                       "reduce-all:grid_barrier,loop=vector,vec=2"]),
    (mean_var, (1029, 917), "float64", ["reduce-all:grid_barrier", "reduce-all:grid_barrier,loop=contiguous"]),
    (softmax, (37, 1000), "float32", ["rows:warp", "rows:block", "rows:warp_regs", "rows:block_regs",
                                      "rows:block_regs,threads=128,elems=8", "rows:block_regs,threads=64,elems=16",
                                      "rows:warp_regs,threads=32,elems=32,vec=2,hold=none,fast_division=0"]),
    (router, (300, 64), "float32", ["rows:warp_regs,threads=8,elems=8", "rows:warp_regs,threads=16,elems=4",
                                    "rows:warp_regs,threads=2,elems=32", "rows:warp", "rows:block"]),
    (layernorm, (64, 8192), "float16", ["rows:block_regs,threads=512,elems=16", "rows:block_regs,threads=1024,elems=8",
                                        "rows:block"]),
    (col_softmax, (1029, 917), "float32", ["cols:tiles", "cols:tiles,tile=64,split=4", "cols:tiles,tile=8,split=32",
                                           "cols:tiles,tile=1,split=1", "cols:grid_barrier",
                                           "cols:grid_barrier,blocks=3",
                                           "cols:grid_barrier,tile=1,split=256,blocks=5",
                                           "cols:grid_barrier,tile=4,split=64,blocks=7"]),
    # split across blocks: sums, an argmax pair (8-byte partials) and a max, combined by the last block or
    # after a grid barrier; integers exactly
    (col_stats, (5003, 30), "int32", ["cols:last_block,blocks=9", "cols:last_block,tile=1,split=256,blocks=4",
                                      "cols:grid_barrier,tile=8,split=32,blocks=13", "cols:tiles,tile=2,split=128"]),
    (col_stats, (5003, 30), "float32", ["cols:last_block,blocks=9", "cols:grid_barrier,tile=1,split=256,blocks=4"]),
    (col_mean_var, (2049, 7), "float64", ["cols:grid_barrier,blocks=6", "cols:grid_barrier,tile=8,split=32,blocks=2"]),
    (col_sum, (0, 5), "float32", ["cols:last_block,blocks=3"]),
    (col_sum, (5, 0), "float32", ["cols:last_block,blocks=3"]),
    (softmax, (37, 1000), "float32", ["cols:grid_barrier,tile=1,split=256,blocks=4", "cols:grid_barrier,blocks=2"]),
]


@pytest.fixture(scope="module")
def launcher() -> KernelLauncher:
    return KernelLauncher(poison=True, compiler="nvrtc")


@pytest.mark.parametrize("fn, shape, dtype, schedule",
                         [(fn, shape, dtype, s) for fn, shape, dtype, schedules in CASES for s in schedules],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_gpu_forced_schedule_gives_numpy_result(launcher, fn, shape, dtype, schedule) -> None:
    rng = np.random.default_rng(seed_of("schedule", fn.__name__, shape, dtype, schedule))
    x = _nonnegative_for_sums(fn, random_array(rng, shape, dtype))
    fused = fusec.fuse(fn, schedules={"k0": schedule})
    plan = fused.plan(fusec.ArraySpec(shape, dtype))
    assert len(plan.kernels) == 1
    got = run_plan(plan, [to_xp(cupy, x)], launcher=launcher, schedules=fused.schedules)
    assert str(launcher.recipes(plan.kernels[0].region)[0].schedule).startswith(schedule.split(",")[0])
    with np.errstate(all="ignore"):
        want = interpret(plan.traced, [x])
    if fn in (sum_abs, mean_var):  # a reduce-all: within CORRECTNESS.md's reduction bound of the float64 result
        with np.errstate(all="ignore"):
            want = fn(x.astype(np.float64))
        want = want if isinstance(want, tuple) else (want,)
        bound = 4 * np.finfo(x.dtype).eps * np.log2(x.size) * float(np.abs(x.astype(np.float64)).sum())
        for g, w in zip(got, want):
            assert_matches_numpy(cupy.asnumpy(g).astype(np.float64), np.asarray(w), rtol=0, atol=bound)
        return
    for g, w in zip(got, want):
        assert_matches_numpy(cupy.asnumpy(g), np.asarray(w))


SUMS_PER_KEPT_INDEX = (col_stats, col_mean_var, col_sum, channel_sum, row_sum_of_transposed)


def _nonnegative_for_sums(fn, x: np.ndarray) -> np.ndarray:
    """Float sums per kept index are compared with NumPy's within the elementwise tolerance: on data of one
    sign (NaN and infinities kept), where any summation order is that close."""
    return np.abs(x) if fn in SUMS_PER_KEPT_INDEX and x.dtype.kind == "f" else x


# the heuristics' own schedules where they split, tile or follow the layout: (function, shape, dtype, transposed
# input)
CHOSEN = [
    (transpose_affine, (3000, 2000), "float32", False),  # tiled
    (transpose_affine, (300, 200), "bool", True),  # a transposed input, transposed back: contiguous
    (transpose_3d, (5, 300, 77), "int16", False),
    (col_sum, (1 << 20, 8), "float32", False),  # one tile split across the device
    (col_sum, (1 << 18, 3), "int32", False),
    (col_stats, (1 << 17, 64), "float32", False),
    (col_softmax, (4096, 300), "float32", False),
    (col_mean_var, (1 << 16, 40), "float64", False),
    (channel_sum, (64, 32, 28, 28), "float32", False),  # the warps along the reduced axis
    (row_sum_of_transposed, (3000, 2000), "float32", False),  # rows strided in memory: the kept axis is fastest
    (softmax, (300, 2000), "float32", True),  # a transposed input: the same
    (softmax, (16, 1 << 17), "float32", False),  # few long rows
]


@pytest.mark.parametrize("fn, shape, dtype, transposed", CHOSEN, ids=lambda v: getattr(v, "__name__", str(v)))
def test_gpu_chosen_cols_schedules_give_numpy_results(launcher, fn, shape, dtype, transposed) -> None:
    rng = np.random.default_rng(seed_of("chosen", fn.__name__, shape, dtype, transposed))
    x = _nonnegative_for_sums(fn, random_array(rng, shape[::-1] if transposed else shape, dtype))
    x = x.T if transposed else x
    plan = fusec.fuse(fn).plan(x)
    got = run_plan(plan, [cupy.asarray(x)], launcher=launcher)
    schedule = launcher.recipes(plan.kernels[0].region)[0].schedule
    expected = "pointwise:vector" if transposed and fn is transpose_affine else (
        "pointwise:tiled" if fn in (transpose_affine, transpose_3d) else "cols")
    assert str(schedule).startswith(expected), schedule
    with np.errstate(all="ignore"):
        want = interpret(plan.traced, [x])
    for g, w in zip(got, want):
        assert_matches_numpy(cupy.asnumpy(g), np.asarray(w))


def test_gpu_tiled_transpose_with_broadcast_and_two_outputs_matches_numpy(launcher) -> None:
    rng = np.random.default_rng(seed_of("tiled", "mix"))
    x, y = random_array(rng, (77, 1000), "float32"), random_array(rng, (1000, 77), "float32")
    plan = fusec.fuse(transpose_mix).plan(x, y)
    got = run_plan(plan, [cupy.asarray(x), cupy.asarray(y)], launcher=launcher)
    assert str(launcher.recipes(plan.kernels[0].region)[0].schedule) == "pointwise:tiled,tile=64"
    with np.errstate(all="ignore"):
        want = transpose_mix(x, y)
    for g, w in zip(got, want):
        assert_matches_numpy(cupy.asnumpy(g), w)
    column = random_array(rng, (77, 1), "float32")
    fused = fusec.fuse(lambda x, c: x.T + c.T)  # the column broadcast along the tiled axis
    assert_matches_numpy(cupy.asnumpy(fused(cupy.asarray(x), cupy.asarray(column))), x.T + column.T)


# broadcasts along the inner axis with vectors: (x shape, w shape, b shape, dtype, schedules)
INNER_VECTOR = [
    ((37, 512), (512,), (37, 1), "float32", ["pointwise:inner_vector,vec=4", "pointwise:inner_vector,vec=2", None]),
    ((5, 7, 64), (7, 1), (64,), "float16", ["pointwise:inner_vector,vec=8", None]),
    ((33, 6), (1, 6), (33, 1), "float64", ["pointwise:inner_vector,vec=2", None]),
    ((300, 1), (1, 4096), (4096,), "int16", [None]),  # the outer product of a column and a row
]


@pytest.mark.parametrize("xs, ws, bs, dtype, schedules", INNER_VECTOR, ids=lambda v: str(v))
def test_gpu_inner_vector_broadcasts_give_numpy_results(launcher, xs, ws, bs, dtype, schedules) -> None:
    rng = np.random.default_rng(seed_of("inner_vector", xs, ws, bs, dtype))
    args = [random_array(rng, s, dtype) for s in (xs, ws, bs)]
    with np.errstate(all="ignore"):
        want = affine(*args)
    for schedule in schedules:
        fused = fusec.fuse(affine, schedules={"k0": schedule} if schedule else {})
        plan = fused.plan(*args)
        got = run_plan(plan, [cupy.asarray(a) for a in args], launcher=launcher, schedules=fused.schedules)
        assert str(launcher.recipes(plan.kernels[0].region)[-1].schedule).startswith("pointwise:inner_vector")
        assert_matches_numpy(cupy.asnumpy(got[0]), want)


def test_gpu_fused_with_a_forced_schedule_takes_the_fast_path_with_it() -> None:
    x = cupy.asarray(np.random.default_rng(1).standard_normal((37, 1000)).astype(np.float32))
    fused = fusec.fuse(softmax, schedules={"k0": "rows:block"})
    first, second = fused(x), fused(x)  # the second call is the dispatch fast path's
    want = softmax(cupy.asnumpy(x))
    for got in (first, second):
        assert_matches_numpy(cupy.asnumpy(got), want)
    assert "a block per row" in fused.cuda_source(x)


def test_gpu_dropping_a_fused_function_frees_its_nodes_and_recipes() -> None:
    """What the runtime compiled and cached for a function (recipes, the fast path's runner) holds no node
    once the function is gone."""
    gc.collect()
    before = set(map(id, ir_graph._INTERN.values()))
    regions_before = len(default_launcher()._regions)
    x = cupy.asarray(np.random.default_rng(2).standard_normal((64, 300)).astype(np.float32))

    def layernorm_again(x):
        c = x - x.mean(axis=-1, keepdims=True)
        return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + 3e-5)  # a constant no other test uses

    fused = fusec.fuse(layernorm_again)
    for _ in range(3):
        fused(x)
    fused.explain(x)
    assert len(default_launcher()._regions) > regions_before
    del fused
    gc.collect()
    assert len(default_launcher()._regions) == regions_before, "the launcher kept recipes of dropped regions"
    left = [n for n in ir_graph._INTERN.values() if id(n) not in before]
    holders = {type(r).__name__ for n in left[:3] for r in gc.get_referrers(n)}
    assert not left, f"{len(left)} nodes outlived their function, such as {left[:3]}, held by {holders}"
