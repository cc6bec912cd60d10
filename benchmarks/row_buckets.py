#!/usr/bin/env python
"""What bucketed register rows cost: each row workload at a few row lengths, run with the kernel of its
length bucket (``lengths=bucket``: the length a parameter, each row's start checked for vectors when the
kernel runs) and with the kernel specialized to the length (``lengths=exact``: vectors only where every row
start is known aligned, no bounds checks at a bucket's own length), both forced through
``fusec.fuse(..., schedules=...)`` with the heuristics' other fields. Prints the median CUDA-event time of
each (and GB/s of one read and one write), and the ratio bucket / exact; each bucket result is compared with
the exact one. GPU only:

    PYTHONPATH=. python benchmarks/row_buckets.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys

import cupy as cp
import numpy as np

import fusec
from fusec.inspect.timing import time_ms
from tests.workloads import layernorm, row_sum, softmax  # the row workloads of tests/schedule/test_row_buckets.py

WORKLOADS = {"softmax": softmax, "layernorm": layernorm, "row_sum": row_sum}
# lengths: rows shorter than a warp's share (65..128: 16 threads per row, where the heuristics stay exact
# because rows of different alignments share a warp), aligned and odd ones in warp-per-row buckets (257..512,
# 513..1024) and block-per-row ones (1025..2048, 2049..4096), and a bucket's own length (the exact kernel is
# then also the heuristics' choice)
LENGTHS = (100, 127, 300, 301, 512, 1000, 1001, 1536, 1537, 3000, 3001, 4096)
BYTES = 1 << 28  # about 256 MiB of float32 input per case


def schedule_of(fn, shape) -> fusec.schedule.RowSchedule:
    (kernel,) = fusec.fuse(fn)._kernels((fusec.ArraySpec(shape, "float32"),), {})
    return kernel.schedule


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    rng = cp.random.default_rng(0)
    results = []
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    for name, fn in WORKLOADS.items():
        for n in LENGTHS:
            rows = max(1, BYTES // (4 * n))
            x = rng.standard_normal((rows, n), dtype=cp.float32)
            base = schedule_of(fn, (rows, n))
            if not getattr(base, "in_registers", False):
                print(f"{name:10s} n={n:5d}: {base} (not held in registers: no bucket)")
                continue
            times, outs = {}, {}
            for lengths in ("exact", "bucket", "exact", "bucket"):  # both orders: clock drift shows
                text = f"rows:{base.mapping},threads={base.row_threads},elems={base.elems},lengths={lengths}"
                fused = fusec.fuse(fn, schedules={"k0": text})
                outs[lengths] = cp.asnumpy(fused(x))
                ms = time_ms(lambda fused=fused, x=x: fused(x), cp, 50, warmup=10)
                times[lengths] = min(times.get(lengths, ms), ms)
            ok = np.allclose(outs["bucket"], outs["exact"], rtol=1e-5, atol=1e-6, equal_nan=True)
            moved = x.nbytes + outs["exact"].nbytes
            row = dict(workload=name, n=n, rows=rows, heuristic=str(base), exact_ms=times["exact"],
                       bucket_ms=times["bucket"], ratio=times["bucket"] / times["exact"], same=bool(ok))
            results.append(row)
            print(f"{name:10s} n={n:5d} rows={rows:7d}: exact {times['exact']:.4f} ms "
                  f"({moved / times['exact'] / 1e6:.0f} GB/s), bucket {times['bucket']:.4f} ms "
                  f"({moved / times['bucket'] / 1e6:.0f} GB/s), bucket/exact {row['ratio']:.3f}"
                  f"{'' if ok else '  MISMATCH'}  [heuristics: {base.lengths}]", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
