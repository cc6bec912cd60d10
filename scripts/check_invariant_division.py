#!/usr/bin/env python
"""Check ``fc::div_invariant`` (float32 division by a loop-invariant divisor) against IEEE division on the GPU.

    PYTHONPATH=. python scripts/check_invariant_division.py            # every pair of significands: 2^46
    PYTHONPATH=. python scripts/check_invariant_division.py --a-bits 8 # every b significand x 2^8 a's (seconds)

For 1 <= a, b < 2 (every float32 significand, both signs through a's sign bit alternating per chunk) it
compares the bits of ``fc::div_invariant(a, b, fast, 0)`` (its first pass) with ``__fdiv_rn(a, b)`` and
requires ``fast`` to stay set. Scaling a and b by powers of two scales every step of the helper exactly while
2^-64 <= |a| <= 2^64 and 2^-32 <= |b| <= 2^32 (no intermediate leaves the normal range, and a - b*q0,
whose lowest bit is at least 2^-47 |a|, stays normal), so this covers every pair the helper takes its fast
path for; outside that range the helper clears ``fast`` and the kernel divides with IEEE division.

``--a-bits N`` takes 2^N significands of a spread evenly over all 2^23 (with every b significand): the GPU
test runs that; the full run takes about a minute on an H200. Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KERNEL = r"""
extern "C" __global__ void check_div_invariant(unsigned int a_first, unsigned int a_count, unsigned int a_step,
                                               unsigned int a_sign, unsigned long long* mismatches,
                                               unsigned long long* not_fast, unsigned int* example) {
  const unsigned int bm = blockIdx.x * blockDim.x + threadIdx.x;  // b's significand bits
  if (bm >= (1u << 23)) return;
  const float b = __uint_as_float(0x3f800000u | bm);
  unsigned long long bad = 0, slow = 0;
  for (unsigned int k = 0; k < a_count; ++k) {
    const float a = __uint_as_float(a_sign | 0x3f800000u | ((a_first + k * a_step) & 0x7fffffu));
    bool fast = true;
    const float q = fc::div_invariant(a, b, fast, 0);
    const float ref = __fdiv_rn(a, b);
    if (__float_as_uint(q) != __float_as_uint(ref)) {
      ++bad;
      if (atomicCAS(example, 0u, 1u) == 0u) { example[1] = __float_as_uint(a); example[2] = __float_as_uint(b);
                                              example[3] = __float_as_uint(q); example[4] = __float_as_uint(ref); }
    }
    slow += !fast;
  }
  if (bad) atomicAdd(mismatches, bad);
  if (slow) atomicAdd(not_fast, slow);
}
"""


def check(a_bits: int = 23, chunk_bits: int = 16, log=print) -> dict:
    """Run the comparison for 2^a_bits significands of a (spread over all 2^23) and every b."""
    import cupy as cp

    from fusec.codegen import render
    from fusec.codegen.nvrtc import compile_cubin

    arch = "sm_" + cp.cuda.Device().compute_capability
    module = cp.cuda.function.Module()
    module.load(compile_cubin(render.include_block() + KERNEL, arch).cubin)
    fn = module.get_function("check_div_invariant")
    mismatches = cp.zeros(1, cp.uint64)
    not_fast = cp.zeros(1, cp.uint64)
    example = cp.zeros(5, cp.uint32)
    a_step = 1 << (23 - a_bits)
    count = 1 << a_bits
    chunk = min(count, 1 << chunk_bits)
    start = time.perf_counter()
    for c, first in enumerate(range(0, count, chunk)):
        sign = 0x80000000 if c % 2 else 0
        fn(((1 << 23) // 256,), (256,), (cp.uint32(first * a_step), cp.uint32(chunk), cp.uint32(a_step),
                                         cp.uint32(sign), mismatches, not_fast, example))
    cp.cuda.Device().synchronize()
    seconds = time.perf_counter() - start
    result = {"pairs": count << 23, "mismatches": int(mismatches.get()[0]), "not_fast": int(not_fast.get()[0]),
              "seconds": seconds, "arch": arch}
    if result["mismatches"]:
        a, b, q, ref = (int(v) for v in example.get()[1:])
        result["example"] = {"a": hex(a), "b": hex(b), "got": hex(q), "ieee": hex(ref)}
    log(f"div_invariant vs __fdiv_rn on {arch}: {result['pairs']} pairs (2^{a_bits + 23}), "
        f"{result['mismatches']} mismatches, {result['not_fast']} off the fast path, {seconds:.1f} s")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a-bits", type=int, default=23, choices=range(0, 24), metavar="0..23",
                        help="log2 of the a significands tried (23: all)")
    args = parser.parse_args(argv)
    result = check(args.a_bits)
    if "example" in result:
        print("first mismatch:", result["example"])
    return 1 if result["mismatches"] or result["not_fast"] else 0


if __name__ == "__main__":
    sys.exit(main())
