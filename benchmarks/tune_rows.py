#!/usr/bin/env python
"""Try register-resident row schedules (``ROW_REGS_TABLE`` buckets: threads per row x elements per thread)
on the row workloads and print the median time of each, so the table in ``fusec/codegen/spec.py`` is
chosen by measurement; then gelu with the pointwise vector loop unrolled 1, 2 and 4
times. GPU only:  PYTHONPATH=. python benchmarks/tune_rows.py [WORKLOAD ...]  (default: all, then gelu)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import cupy as cp
import numpy as np

import fusec
from fusec.codegen import plan as codegen_plan
from fusec.explain_run import time_ms

ROOT = Path(__file__).resolve().parents[1]


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name).fn if hasattr(getattr(module, name), "fn") else getattr(module, name)


def _time(call, reps: int = 50) -> float:
    return time_ms(call, cp, reps, warmup=10)


CASES = {  # workload -> (shape, row length bucket, variants (threads per row, elements per thread))
    "softmax": ((8192, 8192), 8192, [(256, 32), (512, 16), (1024, 8)]),
    "layernorm": ((8192, 8192), 8192, [(256, 32), (512, 16), (1024, 8)]),
    "moe_router": ((1 << 20, 64), 64, [(8, 8), (4, 16), (16, 4), (2, 32)]),
}


def main(names: list[str]) -> None:
    base = dict(codegen_plan.ROW_REGS_TABLE)
    rng = cp.random.default_rng(0)
    for name, (shape, bucket, variants) in CASES.items():
        if names and name not in names:
            continue
        fn = _example(name)
        x = rng.standard_normal(shape, dtype=cp.float32)
        reference = None
        for threads, elems in [*variants, *reversed(variants)]:  # both orders: clock drift shows
            table = tuple((n, threads, elems) if n == bucket else (n, t, e) for n, t, e in base[4])
            codegen_plan.ROW_REGS_TABLE = {**base, 4: table}
            fused = fusec.fuse(fn)
            out = fused(x)
            out = out if isinstance(out, tuple) else (out,)
            got = [cp.asnumpy(o) for o in out]
            if reference is None:
                reference = got
            ok = all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, reference))
            ms = _time(lambda fused=fused, x=x: fused(x))
            verdict = "ok" if ok else "MISMATCH"
            print(f"{name:10s} threads/row {threads:4d} elems/thread {elems:3d}: {ms:.4f} ms {verdict}", flush=True)
    codegen_plan.ROW_REGS_TABLE = base
    if not names or "gelu" in names:
        tune_pointwise_unroll(rng)


def tune_pointwise_unroll(rng) -> None:
    """gelu over 2^28 float32 with the vector loop of the pointwise template unrolled N times."""
    from fusec.codegen import templates as codegen_cuda

    original = codegen_cuda.render
    loop = "for (index_t iv = start; iv < nvec; iv += stride) {"
    fn = _example("gelu")
    x = rng.standard_normal(1 << 28, dtype=cp.float32)
    for unroll in (1, 2, 4):
        def render(*args, _unroll=unroll, **kwargs):
            return original(*args, **kwargs).replace(loop, f"#pragma unroll {_unroll}\n  " + loop)
        codegen_cuda.render = render
        fused = fusec.fuse(fn)
        source = fused.cuda_source(x)
        ms = _time(lambda fused=fused: fused(x))
        patched = "patched" if f"#pragma unroll {unroll}" in source else "NOT patched"
        print(f"gelu       unroll {unroll}: {ms:.4f} ms ({patched})", flush=True)
    codegen_cuda.render = original


if __name__ == "__main__":
    main(sys.argv[1:])
