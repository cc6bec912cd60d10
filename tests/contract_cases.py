"""The launch-contract cases: one function per kernel kind and access pattern (vector loops, inner vectors, register
rows of exact and bucketed lengths, reduce-all, columns, scans, slices, joins, gathers, in-place updates), with
the shapes that give them their vector schedules when aligned. Shared by the CPU tests (contracts against fake
pointers, the fake GPU's launches, NVRTC compiles of every kernel) and the GPU test
(``tests/gpu/test_contracts_gpu.py``), so the kernels the GPU builds are the ones checked here.

Each case's arrays are laid out at ``offset`` elements past a 256-byte aligned base (:data:`OFFSETS`): 0 is the
aligned layout, 1, 2 and 3 elements misalign every vector access of 4-byte and 2-byte dtypes (and, of
8-byte ones, all but none: 8 bytes past 16 is 8-byte aligned, still short of a 16-byte vector).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.ir.dtypes import kind as dtype_kind
from tests.workloads import col_sum, softmax, sum_abs

OFFSETS = (0, 1, 2, 3)  # elements past a 256-byte aligned base
DTYPES = ("float32", "float16", "float64", "bfloat16")
BASE_ALIGN = 256


def axpy(x, y):
    return x * 2 + y


def scale_shift(x, w, b):  # rows scaled and shifted by broadcast vectors: inner_vector
    return x * w + b


def cumsum(x):
    return np.cumsum(x, axis=-1)


def sliced(x):  # a slice read inside the kernel: the access starts 4 elements into its array
    return x[:, 4:] * 2


def joined(x, y):
    return np.concatenate([x, y], axis=-1) + 1


def gathered(x, i):
    return x[i] * 2


def sgd(p, g):  # an in-place update: the kernel writes p's own buffer
    p -= 0.5 * g
    return p.sum()


@dataclass(frozen=True)
class ContractCase:
    """A function, its array arguments' shapes (``index`` arguments are int64 indices into axis 0 of the first
    argument, never offset-sensitive data), and whether its first result can be written into an ``out=`` array."""

    name: str
    fn: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    index: tuple[int, ...] = ()  # positions of int64 index arguments
    out: bool = True  # the first result takes an out= buffer (a function returning one array)
    updates: bool = False  # the function updates its first argument in place

    def arguments(self, rng: np.random.Generator, dtype: str) -> list[np.ndarray]:
        """Host arguments: random data of ``dtype`` (no NaN or infinities: compared with a tolerance), indices in
        range."""
        args = []
        for k, shape in enumerate(self.shapes):
            if k in self.index:
                args.append(rng.integers(-self.shapes[0][0], self.shapes[0][0], size=shape).astype(np.int64))
            else:
                args.append((rng.standard_normal(shape) * 2).astype(dtype))
        return args


CASES = (
    ContractCase("axpy", axpy, ((1027,), (1027,))),  # pointwise:vector (and its scalar tail)
    ContractCase("scale_shift", scale_shift, ((33, 64), (64,), (64,))),  # pointwise:inner_vector
    ContractCase("sum_abs", sum_abs, ((4099,),), out=False),  # reduce-all, loop=vector
    ContractCase("softmax", softmax, ((40, 128),)),  # rows in registers, exact length
    ContractCase("softmax_bucket", softmax, ((24, 1000),)),  # rows in registers, lengths=bucket
    ContractCase("col_sum", col_sum, ((300, 48),)),  # cols: no vectors
    ContractCase("cumsum", cumsum, ((12, 300),)),  # scan: vectors where the row is aligned, checked when it runs
    ContractCase("sliced", sliced, ((32, 68),)),  # a slice's offset inside the kernel
    ContractCase("joined", joined, ((32, 64), (32, 64))),  # a join: clamped reads
    ContractCase("gathered", gathered, ((64, 32), (16,)), index=(1,)),  # a gather
    ContractCase("sgd", sgd, ((1024,), (1024,)), out=False, updates=True),  # in-place update
)

CASE_NAMES = [c.name for c in CASES]


def case(name: str) -> ContractCase:
    return next(c for c in CASES if c.name == name)


def offset_copy(a: np.ndarray, elements: int, xp: Any = np, empty: Callable[..., Any] | None = None) -> Any:
    """``a``'s values in an array of ``xp`` that starts ``elements`` elements past a :data:`BASE_ALIGN`-byte
    aligned address (a view into a larger buffer, as a Dask chunk or ``x[1:]`` is)."""
    a = np.asarray(a)
    itemsize = a.dtype.itemsize
    pad = BASE_ALIGN // itemsize
    flat = (empty or xp.empty)((a.size + elements + 2 * pad,), a.dtype)
    ptr = flat.data.ptr if hasattr(flat, "__cuda_array_interface__") else flat.__array_interface__["data"][0]
    start = (-ptr % BASE_ALIGN) // itemsize + elements
    view = flat[start:start + a.size].reshape(a.shape)
    view[...] = xp.asarray(a) if xp is not np else a
    return view


# ---- one case's runs, on a GPU or on the CPU's fake one ---------------------------------------------------------


@dataclass
class Outcome:
    """One result of :func:`exercise`: what fusec gave (a device array), NumPy's value, and NumPy's value computed in
    float64 (the bound for reductions' summation order)."""

    what: str
    got: Any
    want: np.ndarray
    reference: np.ndarray


def exercise(c: ContractCase, dtype: str, elements: int, xp: Any, seed: int) -> list[Outcome]:
    """Run case ``c`` in ``dtype`` with every array ``elements`` past an aligned base, through ``fusec.fuse`` on
    ``xp`` (CuPy, or the fake GPU's): the checked path with outputs poisoned, ``out=`` buffers at the same offset,
    the argument updated in place, then (a launcher that does not poison) a first call and two repeat calls on the
    dispatch fast path, and a runner built for aligned arrays called with these (a cache keyed wrongly). Returns
    every result with NumPy's; nothing is compared here."""
    import fusec
    from fusec.runtime import launch as runtime

    rng = np.random.default_rng(seed)
    host = c.arguments(rng, dtype)
    outcomes: list[Outcome] = []
    with np.errstate(all="ignore"):
        want_args = [a.copy() for a in host]
        want = np.asarray(c.fn(*want_args))
        reference = np.asarray(c.fn(*[a.astype(np.float64) if dtype_kind(a.dtype) == "f" else a for a in host]))

    def dev(a: np.ndarray, at: int = elements) -> Any:
        return offset_copy(a, at, xp)

    saved = runtime._DEFAULT
    try:
        runtime._DEFAULT = runtime.KernelLauncher(poison=True)
        args = [dev(a) for a in host]
        outcomes.append(Outcome("checked path, outputs poisoned", fusec.fuse(c.fn)(*args), want, reference))
        if c.updates:
            outcomes.append(Outcome("argument updated in place", args[0], want_args[0], want_args[0]))
        if c.out:
            out = dev(np.zeros(want.shape, want.dtype))
            fusec.fuse(c.fn)(*[dev(a) for a in host], out=out)
            outcomes.append(Outcome("out= buffer at the same offset", out, want, reference))
        runtime._DEFAULT = runtime.KernelLauncher()
        if not c.updates:
            fused = fusec.fuse(c.fn)
            for call in range(3):  # the first checked, the next two on the dispatch fast path
                outcomes.append(Outcome(f"call {call}", fused(*[dev(a) for a in host]), want, reference))
            aligned = [dev(a, 0) for a in host]
            plan = fused.plan(*aligned)
            runner = runtime.default_launcher().plan_runner(plan, aligned, structure="single")
            if runner is not None:
                outcomes.append(Outcome("a runner built for aligned arrays", runner.run(tuple(dev(a) for a in host)),
                                        want, reference))
    finally:
        runtime._DEFAULT = saved
    return outcomes


DASK_CASES = ("axpy", "scale_shift", "sliced", "sum_abs", "softmax", "softmax_bucket", "col_sum")


def exercise_dask(c: ContractCase, dtype: str, elements: int, xp: Any, seed: int) -> list[Outcome]:
    """Case ``c`` on Dask arrays of ``xp`` chunks: each array ``elements`` past an aligned base, chunked by 3 along
    its first axis (every chunk but the first starting at another offset), computed by Dask's threads."""
    import dask
    import dask.array as da

    import fusec

    host = c.arguments(np.random.default_rng(seed), dtype)
    with np.errstate(all="ignore"):
        want = np.asarray(c.fn(*[a.copy() for a in host]))
        reference = np.asarray(c.fn(*[a.astype(np.float64) for a in host]))
    chunked = [da.from_array(offset_copy(a, elements, xp), chunks=(3,) + a.shape[1:], asarray=False) for a in host]
    got = dask.compute(fusec.fuse(c.fn)(*chunked), scheduler="threads")[0]
    return [Outcome("Dask chunks", got, want, reference)]
