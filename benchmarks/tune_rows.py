#!/usr/bin/env python
"""Time register-resident row schedules (threads per row x elements per thread) on the row workloads, each
forced through ``fusec.fuse(..., schedules=...)``, and print the median time of each, so that the buckets of
``ROW_REGS_TABLE`` (``fusec/kinds/rows.py``) are chosen by measurement. Every variant's result is
compared with the first's. GPU only:

    PYTHONPATH=. python benchmarks/tune_rows.py [WORKLOAD ...]      (default: all)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import cupy as cp
import numpy as np

import fusec
from fusec.inspect.timing import time_ms

ROOT = Path(__file__).resolve().parents[1]


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name).fn if hasattr(getattr(module, name), "fn") else getattr(module, name)


def _time(call, reps: int = 50) -> float:
    return time_ms(call, cp, reps, warmup=10)


CASES = {  # workload -> (shape, variants (threads per row, elements per thread))
    "softmax": ((8192, 8192), [(256, 32), (512, 16), (1024, 8)]),
    "layernorm": ((8192, 8192), [(256, 32), (512, 16), (1024, 8)]),
    "moe_router": ((1 << 20, 64), [(8, 8), (4, 16), (16, 4), (2, 32)]),
}


def schedule_text(threads: int, elems: int) -> str:
    """The forced schedule of one variant (vec, hold and fast division stay the heuristics')."""
    mapping = "warp_regs" if threads <= 32 else "block_regs"
    return f"rows:{mapping},threads={threads},elems={elems}"


def main(names: list[str]) -> None:
    rng = cp.random.default_rng(0)
    for name, (shape, variants) in CASES.items():
        if names and name not in names:
            continue
        fn = _example(name)
        x = rng.standard_normal(shape, dtype=cp.float32)
        reference = None
        for threads, elems in [*variants, *reversed(variants)]:  # both orders: clock drift shows
            fused = fusec.fuse(fn, schedules={"k0": schedule_text(threads, elems)})
            out = fused(x)
            out = out if isinstance(out, tuple) else (out,)
            got = [cp.asnumpy(o) for o in out]
            if reference is None:
                reference = got
            ok = all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, reference))
            ms = _time(lambda fused=fused, x=x: fused(x))
            verdict = "ok" if ok else "MISMATCH"
            print(f"{name:10s} {schedule_text(threads, elems):40s}: {ms:.4f} ms {verdict}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
