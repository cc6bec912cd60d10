"""Gather workloads shared by the CPU tests (NumPy backend, kernel counts, CUDA compile checks) and the GPU
tests: each is a fused function and how to make its arguments (indices in range, negative ones included)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def cross_entropy(logits, t):
    m = logits.max(1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(1)) + m[:, 0]
    picked = np.take_along_axis(logits, t[:, None], axis=1)[:, 0]
    return (lse - picked).mean()


def rows_of(x, i):  # embedding lookup: x[idx] of a 2-d table
    return x[i]


def cols_of(x, i):
    return x[:, i] * 2


def pairs(x, i, j):  # two index arrays broadcast against each other, adjacent
    return x[i[:, None], j]


def apart(x, i, j):  # non-adjacent advanced indices: the broadcast axes come first
    return x[i, :, j]


def take_axis1(x, i):
    return np.take(x, i, axis=1) + x.take(0, axis=1)[:, None, None]


def along_last(x, i):
    return np.take_along_axis(x, i, axis=-1)


def of_computed(x, y, i):  # a gather of elementwise values moves to the arguments
    return np.exp(x - y)[i] + 1


def of_reduction(x, i):  # a gather of a reduction reads it from memory
    return x.sum(1)[i]


def gather_then_reduce(x, i):
    return x[i].sum(1)


def of_slice(x, i):  # the slice becomes the gather's window: the argument is read through it
    return x[1:, ::-1][i] * 2


def reversed_gather(x, i):
    return x.T[i] - x.T[i].max(1, keepdims=True)


def of_arange(x, i):  # gathers of iotas, arrays without memory: their elements are computed at the positions
    ramp = np.arange(3, 3 + 2 * x.shape[0], 2, dtype=x.dtype)[i]
    back = np.arange(3 * x.shape[0])[::-3][i]  # through a window with a negative step
    return x[i] * ramp[:, None] - back[:, None]


@dataclass(frozen=True)
class Workload:
    fn: Callable
    make: Callable[[np.random.Generator, str, str], tuple]  # (rng, data dtype, index dtype) -> arguments
    kernels: int  # fused kernels on the GPU


def _data(rng: np.random.Generator, shape: tuple[int, ...], dt: str) -> np.ndarray:
    if np.dtype(dt).kind in "iu":
        return rng.integers(-50, 50, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def _idx(rng: np.random.Generator, n: int, shape: tuple[int, ...], it: str) -> np.ndarray:
    low = 0 if np.dtype(it).kind == "u" else -n
    return rng.integers(low, n, shape).astype(it)


WORKLOADS: dict[str, Workload] = {
    "cross_entropy": Workload(cross_entropy, lambda r, d, i: (_data(r, (37, 1029), d), _idx(r, 1029, (37,), i)), 2),
    "rows_of": Workload(rows_of, lambda r, d, i: (_data(r, (50, 33), d), _idx(r, 50, (7, 3), i)), 1),
    "cols_of": Workload(cols_of, lambda r, d, i: (_data(r, (9, 40), d), _idx(r, 40, (11,), i)), 1),
    "pairs": Workload(pairs, lambda r, d, i: (_data(r, (20, 30), d), _idx(r, 20, (5,), i), _idx(r, 30, (6,), i)), 1),
    "apart": Workload(apart, lambda r, d, i: (_data(r, (6, 7, 8), d), _idx(r, 6, (4,), i), _idx(r, 8, (4,), i)), 1),
    "take_axis1": Workload(take_axis1, lambda r, d, i: (_data(r, (5, 23), d), _idx(r, 23, (2, 3), i)), 1),
    "along_last": Workload(along_last, lambda r, d, i: (_data(r, (8, 64), d), _idx(r, 64, (8, 5), i)), 1),
    "of_computed": Workload(of_computed, lambda r, d, i: (_data(r, (30, 17), "float32"), _data(r, (17,), "float32"),
                                                          _idx(r, 30, (9,), i)), 1),
    "of_reduction": Workload(of_reduction, lambda r, d, i: (_data(r, (30, 17), d), _idx(r, 30, (9,), i)), 2),
    "gather_then_reduce": Workload(gather_then_reduce, lambda r, d, i: (_data(r, (30, 17), d), _idx(r, 30, (9,), i)),
                                   1),
    "of_slice": Workload(of_slice, lambda r, d, i: (_data(r, (31, 17), d), _idx(r, 30, (9,), i)), 1),
    "of_arange": Workload(of_arange, lambda r, d, i: (_data(r, (30, 17), d), _idx(r, 30, (9,), i)), 1),
    "reversed_gather": Workload(reversed_gather, lambda r, d, i: (_data(r, (17, 30), d), _idx(r, 30, (9,), i)), 1),
}
