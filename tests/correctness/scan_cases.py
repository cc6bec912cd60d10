"""What the scan tests share, on the GPU (``tests/gpu/test_scan_gpu.py``) and on the CPU against the kernels'
emulated arithmetic (``tests/correctness/test_scan_tolerance.py``): the forced schedules, the data, and the depth of
a schedule's chain of roundings that bounds its error."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tests.helpers import random_array

SCHEDULES = ["scan:sequential", "scan:rows,threads=32,elems=1", "scan:rows,threads=32,elems=8",
             "scan:rows,threads=64,elems=4", "scan:rows,threads=256,elems=8", "scan:rows,threads=1024,elems=16",
             "scan:split,threads=256,elems=8", "scan:split,threads=32,elems=2", "scan:columns,threads=8,elems=8",
             "scan:columns,threads=1,elems=4", "scan:columns,threads=32,elems=1"]
FORCED_SHAPES = [(37, 5000), (5, 2), (3, 17), (1, 70_001)]


def scan_data(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, special: bool = False) -> np.ndarray:
    """Uniform in [-1, 1) for floats (with NaN, +-inf and -0.0 at four places with ``special``), else
    :func:`tests.helpers.random_array`."""
    if np.dtype(dtype).kind == "f":
        x = rng.uniform(-1, 1, shape).astype(dtype)
        if special and x.size >= 8:
            flat = x.reshape(-1)
            flat[rng.choice(flat.size, 4, replace=False)] = [np.nan, np.inf, -np.inf, -0.0]
        return x
    return random_array(rng, shape, dtype, special=special)


def scan_depth(schedule: Any, n: int) -> int:
    """The rounded operations on the longest path to a prefix of ``n`` elements under ``schedule``, with slack: a
    thread's elements, the tree over the row's threads (Hillis-Steele within a warp and over the warps' totals;
    the columns mapping adds the threads' totals in order), the carry over the chunks before."""
    if schedule.mapping == "sequential":
        return n + 2
    if schedule.mapping == "columns":
        return schedule.elems + schedule.row_threads + 4 + -(-n // (schedule.row_threads * schedule.elems))
    chunk = schedule.row_threads * schedule.elems
    depth = schedule.elems + 2 * int(math.log2(schedule.row_threads)) + 4 + -(-n // chunk)
    # split: the totals of the segments before a segment, one per block of the row (a few thousand at most)
    return depth + 4096 if schedule.mapping == "split" else depth


__all__ = ["FORCED_SHAPES", "SCHEDULES", "scan_data", "scan_depth"]
