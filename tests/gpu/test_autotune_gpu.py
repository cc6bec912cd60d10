"""Autotuning on the GPU: the first launch times each kernel's candidates (CUDA events) and runs the winner,
whose results match NumPy (outputs poisoned first); a fresh launcher, and a second process, take the winner
from the tune cache and time nothing (counters); ``fuse(autotune=True)`` end to end, and ``explain`` after
it. Each test has its own tune cache (``FUSEC_TUNE_CACHE`` in a temporary directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.ir.interpret import to_xp
from fusec.runtime import autotune
from fusec.runtime.launch import KernelLauncher, run_plan
from tests.helpers import GPU_ONLY, assert_function_matches_numpy, assert_matches_numpy, random_array, seed_of
from tests.test_autotune import mean_var0, sum_squares, transpose_add  # the CPU tests' regions
from tests.workloads import col_sum, gelu, softmax

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY
ROOT = Path(__file__).resolve().parents[2]


CASES = {  # name -> (function, argument shapes)
    "softmax_300": (softmax, [(4096, 300)]),
    "softmax_8192": (softmax, [(1024, 8192)]),
    "col_sum_tall": (col_sum, [(1 << 20, 8)]),
    "mean_var_axis0": (mean_var0, [(1 << 16, 512)]),
    "transpose_add": (transpose_add, [(2048, 1024), (1024, 2048)]),
    "gelu": (gelu, [(1029, 917)]),
    "sum_squares": (sum_squares, [(1029, 917)]),
}


@pytest.fixture
def tune_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FUSEC_TUNE_CACHE", str(tmp_path / "tune"))
    autotune.reset_counters()
    return tmp_path / "tune"


def _inputs(name):
    fn, shapes = CASES[name]
    rng = np.random.default_rng(seed_of("autotune", name))
    return fn, [random_array(rng, s, "float32", special=False) for s in shapes]


def _run(launcher, fn, xs):
    plan = fusec.fuse(fn).plan(*[fusec.ArraySpec(x.shape, x.dtype) for x in xs])
    got = run_plan(plan, [to_xp(cupy, x) for x in xs], launcher=launcher)
    return plan, [cupy.asnumpy(g) for g in got]


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_autotune_times_candidates_then_reuses_the_winner(tune_dir, name) -> None:
    fn, xs = _inputs(name)
    first = KernelLauncher(poison=True, compiler="nvrtc", autotune=True)
    plan, got = _run(first, fn, xs)
    assert_function_matches_numpy(got, fn, *xs)  # a tuned kernel may sum in another order: its error bound
    (recipe,) = first.recipes(plan.kernels[0].region)
    assert recipe.tuned == "timed"
    assert autotune.counters()["runs"] == 1 and autotune.counters()["cache_hits"] == 0
    assert autotune.counters()["candidates_timed"] >= 2
    # a fresh launcher (no recipes in memory) takes the winner from the tune cache, timing nothing
    second = KernelLauncher(poison=True, compiler="nvrtc", autotune=True)
    plan2, got2 = _run(second, fn, xs)
    (recipe2,) = second.recipes(plan2.kernels[0].region)
    assert recipe2.tuned == "tune cache" and recipe2.schedule == recipe.schedule
    assert autotune.counters()["runs"] == 1 and autotune.counters()["cache_hits"] == 1
    assert_function_matches_numpy(got2, fn, *xs)


def test_gpu_autotune_off_by_default_and_forced_schedules_are_not_tuned(tune_dir, monkeypatch) -> None:
    monkeypatch.delenv("FUSEC_AUTOTUNE", raising=False)
    fn, xs = _inputs("softmax_300")
    launcher = KernelLauncher(poison=True, compiler="nvrtc")
    plan, _ = _run(launcher, fn, xs)
    assert launcher.recipes(plan.kernels[0].region)[0].tuned == ""
    tuned = KernelLauncher(poison=True, compiler="nvrtc", autotune=True)
    plan = fusec.fuse(fn).plan(fusec.ArraySpec(xs[0].shape, xs[0].dtype))
    got = run_plan(plan, [cupy.asarray(xs[0])], launcher=tuned, schedules={"k0": "rows:warp"})
    assert_matches_numpy(cupy.asnumpy(got[0]), fn(xs[0]))
    assert tuned.recipes(plan.kernels[0].region)[0].tuned == "" and autotune.counters()["runs"] == 0


def test_gpu_autotune_second_process_times_nothing(tune_dir) -> None:
    fused = fusec.fuse(softmax, autotune=True)
    x = cupy.asarray(random_array(np.random.default_rng(1), (4096, 300), "float32", special=False))
    assert_matches_numpy(cupy.asnumpy(fused(x)), softmax(cupy.asnumpy(x)))
    assert autotune.counters()["runs"] == 1
    script = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
import cupy, numpy as np, fusec
from fusec.runtime import autotune
import tests.gpu.test_autotune_gpu as t
x = cupy.asarray(np.random.default_rng(1).standard_normal((4096, 300)).astype(np.float32))
y = fusec.fuse(t.softmax, autotune=True)(x)
assert np.allclose(cupy.asnumpy(y), t.softmax(cupy.asnumpy(x)), rtol=1e-5, atol=1e-7)
print(json.dumps(autotune.counters()))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "FUSEC_TUNE_CACHE": str(tune_dir)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"runs": 0, "cache_hits": 1, "candidates_timed": 0}


def test_gpu_autotune_explain_shows_the_winner_after_a_call(tune_dir) -> None:
    fused = fusec.fuse(col_sum, autotune=True)
    x = cupy.asarray(random_array(np.random.default_rng(2), (1 << 20, 8), "float32", special=False))
    fused(x)
    report = str(fused.explain(x))
    assert "(autotuned: from the tune cache)" in report
    entry_schedules = [line for line in report.splitlines() if "schedule:" in line]
    assert len(entry_schedules) == 1
