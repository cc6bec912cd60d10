#!/usr/bin/env python
"""What autotuning finds: for a few layout cases, every candidate schedule's median time (CUDA events), the
winner, and its speed-up over the heuristics' schedule, read from a fresh tune cache (a temporary directory,
so nothing is reused from an earlier run), then a second launcher that must take every winner from the cache
(counters printed). GPU only:

    PYTHONPATH=. python benchmarks/autotune.py [CASE ...]      (default: all)
"""

from __future__ import annotations

import os
import sys
import tempfile

import cupy as cp

import fusec
from fusec.kinds import generate
from fusec.runtime import autotune, tune_cache
from fusec.runtime.launch import KernelLauncher, run_plan
from fusec.schedule.device import device_properties
from tests.workloads import softmax

CASES = {  # name -> (function, argument shapes)
    "col_sum_2^24x8": (lambda x: x.sum(axis=0), [(1 << 24, 8)]),
    "mean_var_axis0_2^19x512": (lambda x: (x.mean(axis=0), x.var(axis=0)), [(1 << 19, 512)]),
    "transpose_add_16384x4096": (lambda x, y: x.T * 2 + y, [(4096, 16384), (16384, 4096)]),
    "softmax_8192x1000": (softmax, [(8192, 1000)]),
    "softmax_65536x100": (softmax, [(65536, 100)]),
    "softmax_64x2^20": (softmax, [(64, 1 << 20)]),
    "sum_squares_2^26": (lambda x: (x * x).sum(), [(1 << 26,)]),
}


def main(names: list[str]) -> None:
    os.environ["FUSEC_TUNE_CACHE"] = tempfile.mkdtemp(prefix="fusec-tune-")
    props = device_properties(cp.cuda.runtime.getDevice())
    print(f"device: {props.name}; tune cache {os.environ['FUSEC_TUNE_CACHE']}")
    rng = cp.random.default_rng(0)
    for name, (fn, shapes) in CASES.items():
        if names and name not in names:
            continue
        arrays = [rng.standard_normal(s, dtype=cp.float32) for s in shapes]
        plan = fusec.fuse(fn).plan(*[fusec.ArraySpec(a.shape, a.dtype) for a in arrays])
        run_plan(plan, arrays, launcher=KernelLauncher(autotune=True))
        for kernel in plan.kernels:
            layouts = fusec.schedule.layouts_of(kernel.inputs, dict(zip(plan.graph.inputs, arrays)))
            entry = tune_cache.load(autotune.kernel_key(kernel.region, layouts, props))
            times = entry.times
            heuristic = generate(kernel.region, layouts, None, device=props).schedule.text()
            first = times[heuristic]
            best = times[entry.schedule]
            print(f"{name} {kernel.name}: winner {entry.schedule} {best:.4f} ms, heuristics {first:.4f} ms "
                  f"(x{first / best:.2f})")
            for text, ms in times.items():
                print(f"    {text:90s} {'refused' if ms is None else f'{ms:.4f} ms'}")
    before = autotune.counters()
    for name, (fn, shapes) in CASES.items():  # a second launcher: every schedule from the tune cache
        if names and name not in names:
            continue
        arrays = [rng.standard_normal(s, dtype=cp.float32) for s in shapes]
        plan = fusec.fuse(fn).plan(*[fusec.ArraySpec(a.shape, a.dtype) for a in arrays])
        run_plan(plan, arrays, launcher=KernelLauncher(autotune=True))
    after = autotune.counters()
    print(f"second launcher: {after['runs'] - before['runs']} tuned, {after['cache_hits'] - before['cache_hits']} "
          "from the tune cache")


if __name__ == "__main__":
    main(sys.argv[1:])
