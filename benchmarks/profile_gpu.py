#!/usr/bin/env python
"""Look inside fusec's kernels and its dispatch path on a GPU, to tune by measurement, not by guesses.

    PYTHONPATH=. python benchmarks/profile_gpu.py kernels [--cubins DIR] [NAME ...]
        runs each workload's fused call twice at its benchmark size (under ``ncu`` this profiles each
        kernel: ``ncu --clock-control none -k regex:^k[0-9] --launch-skip-before-match 0 ...``),
        prints every kernel's registers, shared memory and spills, and with ``--cubins`` writes each
        kernel's cubin there (``cuobjdump --dump-sass DIR/*.cubin`` disassembles them).
    PYTHONPATH=. python benchmarks/profile_gpu.py dispatch
        the host time of each step of a small call (1024 elements) on the fast path, per call.
    PYTHONPATH=. python benchmarks/profile_gpu.py grid [NAME ...]
        each row or pointwise workload with its grid capped at 1, 2 and 4 times the resident capacity,
        and uncapped.
    PYTHONPATH=. python benchmarks/profile_gpu.py compile
        compile time: the first call of each workload in a new process with an empty cubin cache, then
        in a second process with that cache warm (which must compile nothing).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cupy as cp  # noqa: E402

import fusec  # noqa: E402
from benchmarks import workloads as W  # noqa: E402
from fusec.inspect.timing import time_ms  # noqa: E402
from fusec.runtime.launch import NULL_POINTER, KernelLauncher, default_launcher  # noqa: E402

LARGE = ("sum_abs", "gelu", "softmax", "layernorm", "moe_router", "adam")


def _inputs(w: W.Workload, shape: tuple, seed: int = 0) -> tuple:
    rng = cp.random.default_rng(seed)
    return w.make_inputs(lambda s: rng.standard_normal(s, dtype=cp.float32), shape)


def _fused(w: W.Workload) -> Any:
    return fusec.fuse(w.build(cp), name=w.name)


def kernels(names: list[str], cubins: Path | None) -> None:
    from fusec.codegen.nvrtc import compile_cubin

    launcher = default_launcher()
    seen: set[int] = set()
    for name in names or LARGE:
        w = W.BY_NAME[name]
        args = _inputs(w, w.shape)
        fused = _fused(w)
        for _ in range(2):
            fused(*args)
        cp.cuda.Device().synchronize()
        arch = "sm_" + cp.cuda.Device().compute_capability
        for recipe in launcher.recipes():
            if id(recipe) in seen:
                continue
            seen.add(id(recipe))
            compiled = compile_cubin(recipe.source, arch)
            print(f"{name:11s} {recipe.spec.name}: {recipe.schedule} grid {recipe.grid} "
                  f"block {recipe.block[0]}; {compiled.kernel(recipe.spec.name)}", flush=True)
            if cubins is not None:
                cubins.mkdir(parents=True, exist_ok=True)
                (cubins / f"{name}-{recipe.spec.name}.cubin").write_bytes(compiled.cubin)
                (cubins / f"{name}-{recipe.spec.name}.cu").write_text(recipe.source)


def _per_call_us(fn: Any, calls: int = 2000, reps: int = 7) -> float:
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        cp.cuda.Device().synchronize()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def _issue_us(fn: Any, calls: int = 64, reps: int = 21) -> float:
    """Host time per call of ``calls`` calls issued onto an idle GPU (nothing queued ahead of them)."""
    times = []
    for _ in range(reps):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    cp.cuda.Device().synchronize()
    return statistics.median(times)


def dispatch() -> None:
    for name in ("sum_abs_small", "gelu_small"):
        _dispatch_one(name)


def _dispatch_one(name: str) -> None:
    from fusec.frontend import api

    w = W.BY_NAME[name]
    args = _inputs(w, w.shape)
    fused = _fused(w)
    fused(*args)
    recipe = default_launcher().recipes()[-1]
    fused(*args)
    fast = fused._fast[api._fast_key(args)]
    runner = fast.runner
    step = runner.steps[-1]
    (shape, dtype), = recipe.outputs
    out = cp.empty(shape, dtype)
    arrays = [*args, out, *([step.workspace()] if step.workspace is not None else [])]
    null = [NULL_POINTER] if recipe.spec.kind == "reduce-all" and step.workspace is None else []
    cupy_args = (*arrays, *null, *recipe.scalars)
    pointers = [a.data.ptr for a in arrays]
    stream = cp.cuda.get_current_stream().ptr
    nbytes = out.nbytes
    recycler = step.outputs[-1][3]
    rows = [("full call", lambda: fused(*args)),
            ("_fast_key", lambda: api._fast_key(args)),
            ("runner.run(args)", lambda: runner.run(args)),
            ("packed launch (pointers written, driver)", lambda: step.launch.launch(stream, pointers)),
            ("CuPy Function call (the same launch)", lambda: recipe.function((recipe.grid, 1, 1), recipe.block,
                                                                              cupy_args)),
            ("cupy.ndarray(shape, dtype)", lambda: cp.ndarray(shape, dtype)),
            ("cupy.cuda.alloc(nbytes)", lambda: cp.cuda.alloc(nbytes)),
            ("get_current_stream().ptr", lambda: cp.cuda.get_current_stream().ptr),
            ("getDevice", cp.cuda.runtime.getDevice)]
    if recycler is not None:
        rows.append(("recycled output (take)", lambda: recycler.take(stream)))
    if step.workspace is not None:
        rows.append(("workspace lookup", step.workspace))
    try:
        import torch

        t = torch.randn(w.shape, device="cuda")
        torch_fn = torch.abs if name.startswith("sum") else torch.nn.functional.gelu
        rows.append(("torch eager (abs / gelu only)", lambda: torch_fn(t)))
    except Exception as exc:  # no PyTorch: no reference row
        print(f"no torch row: {exc}")
    print(f"{name:14s} {'':42s} {'back-to-back':>12s} {'issue, idle GPU':>16s}")
    for label, fn in rows:
        print(f"{name:14s} {label:42s} {_per_call_us(fn):9.2f} us {_issue_us(fn):13.2f} us", flush=True)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(5000):
        fused(*args)
    profile.disable()
    cp.cuda.Device().synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(12)
    print(text.getvalue())


def grid(names: list[str]) -> None:
    original = KernelLauncher.capacity
    for name in names or ("gelu", "softmax", "layernorm", "moe_router"):
        _grid_one(name, original)
    KernelLauncher.capacity = original


def _grid_one(name: str, original: Any) -> None:
    w = W.BY_NAME[name]
    args = _inputs(w, w.shape)
    for factor in (1, 2, 4, 0):
        def capacity(self, function, threads, _f=factor):
            return original(self, function, threads) * _f if _f else 1 << 30
        KernelLauncher.capacity = capacity
        default_launcher().clear()
        fused = _fused(w)
        ms = time_ms(lambda fused=fused: fused(*args), cp, 50, warmup=5)
        label = f"x{factor}" if factor else "uncapped"
        print(f"{name:11s} grid {label:9s} {ms:.4f} ms", flush=True)


def compile_times() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FUSEC_CUBIN_CACHE": cache}
        for label in ("empty cubin cache", "warm cubin cache, new process"):
            print(f"-- {label}", flush=True)
            subprocess.run([sys.executable, __file__, "first-calls"], env=env, check=True)


def first_calls() -> None:
    launcher = default_launcher()
    for w in W.WORKLOADS:
        if w.dispatch:
            continue
        args = _inputs(w, w.dry_shape)
        before = launcher.compiles
        t0 = time.perf_counter()
        fused = _fused(w)
        fused(*args)
        cp.cuda.Device().synchronize()
        seconds = time.perf_counter() - t0
        print(f"{w.name:11s} first call {seconds:6.3f} s, kernels compiled {launcher.compiles - before}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("kernels", "dispatch", "grid", "compile", "first-calls"))
    p.add_argument("names", nargs="*")
    p.add_argument("--cubins", type=Path)
    a = p.parse_intermixed_args()
    if a.what == "kernels":
        kernels(a.names, a.cubins)
    elif a.what == "dispatch":
        dispatch()
    elif a.what == "grid":
        grid(a.names)
    elif a.what == "compile":
        compile_times()
    else:
        first_calls()


if __name__ == "__main__":
    main()
