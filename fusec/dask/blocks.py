"""What a Dask task runs: a fused program on one block, and the combine/aggregate steps of a tree reduction.

Everything here pickles small: a :class:`BlockProgram` travels as its IR text, and each process parses and
plans it once (then the runtime compiles each kernel once per process, reusing the on-disk cubin cache).
NumPy blocks run the reference interpreter kernel by kernel; CuPy blocks run the fused GPU kernels, through the
program's :class:`fusec.runtime.executable.Executable`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fusec.ir import dtypes
from fusec.ir.graph import Graph, Node
from fusec.ir.ops import OPS, reference
from fusec.support.lru import LRU

if TYPE_CHECKING:
    from fusec.runtime.executable import Executable
    from fusec.runtime.plan import Plan

_PROGRAMS_KEPT = 256
_PARSED: LRU[tuple, _Compiled] = LRU(_PROGRAMS_KEPT)  # (IR text, fusion) -> its _Compiled, per process
_PARSED_LOCK = threading.Lock()
_PLANNED = [0]  # programs parsed and planned in this process (a worker plans each program once)


def programs_planned() -> int:
    """How many block programs this process has parsed and planned (each kernel compiles at most once per
    planned program, in the runtime's per-process cache, from the disk cache when it is there)."""
    return _PLANNED[0]


class _Compiled:
    """A program's executable in this process, and its CuPy runners (one per exact block layout, as ``Fused``'s
    fast path: a call only allocates and launches)."""

    __slots__ = ("executable", "runners")

    def __init__(self, executable: Executable):
        self.executable = executable
        self.runners: dict[tuple, Callable[[Sequence[Any]], Any]] = {}


_RUNNERS_KEPT = 16  # per program: regular blocks, last blocks, a few layouts


class BlockProgram:
    """A fused function of blocks, held as IR text. Calling it plans (once per process) and runs it."""

    __slots__ = ("text", "fusion", "_compiled", "__weakref__")

    def __init__(self, text: str, fusion: bool = True):
        self.text = text
        self.fusion = fusion  # False: the unfused plan (one kernel per op), as fusec.fuse(fusion=False)
        self._compiled: _Compiled | None = None

    @classmethod
    def of(cls, graph: Graph, fusion: bool = True) -> BlockProgram:
        from fusec.ir.printer import print_graph

        return cls(print_graph(graph), fusion)

    def __reduce__(self) -> tuple:
        return (BlockProgram, (self.text, self.fusion))

    def __repr__(self) -> str:
        return f"<BlockProgram {self.text.splitlines()[0] if self.text else ''}>"

    def _get(self) -> _Compiled:
        compiled = self._compiled
        if compiled is None:
            with _PARSED_LOCK:
                compiled = _PARSED.get((self.text, self.fusion))
                if compiled is None:
                    from fusec.ir.text import parse
                    from fusec.passes.manager import DEFAULT_PIPELINE, UNFUSED_PIPELINE
                    from fusec.runtime.executable import Executable
                    from fusec.runtime.plan import make_plan

                    passes = DEFAULT_PIPELINE if self.fusion else UNFUSED_PIPELINE
                    compiled = _Compiled(Executable(make_plan(parse(self.text), passes)))
                    _PARSED.put((self.text, self.fusion), compiled)
                    _PLANNED[0] += 1
            self._compiled = compiled
        return compiled

    @property
    def plan(self) -> Plan:
        """The fused plan of this program (parsed and planned once per process)."""
        return self._get().executable.plan

    def __call__(self, backend: str, *blocks: Any) -> list[Any]:
        compiled = self._get()
        if backend == "cupy":
            return _run_cupy(compiled, blocks)
        from fusec.runtime.plan import execute_numpy

        return execute_numpy(compiled.executable.plan, [np.asarray(b) for b in blocks])


def _run_cupy(compiled: _Compiled, blocks: Sequence[Any]) -> list[Any]:
    import cupy

    arrays = [b if isinstance(b, cupy.ndarray) else cupy.asarray(b) for b in blocks]
    device = cupy.cuda.runtime.getDevice()
    key = (device, *((a.dtype, a.shape, a.strides, a.data.ptr & 15) for a in arrays))
    runner = compiled.runners.get(key)
    if runner is not None:
        return list(runner(tuple(arrays)))
    executable = compiled.executable
    results = executable(arrays)
    runner = executable.runner(arrays)
    if runner is not None and len(compiled.runners) < _RUNNERS_KEPT:
        compiled.runners[key] = runner
    return results


def run_block(program: BlockProgram, backend: str, tuple_result: bool, fixups: tuple, counts: tuple,
              *blocks: Any) -> Any:
    """A stage's task: the program on these blocks; the arg-reduction partials' local indices made global
    (``fixups``: (position, block extents, offsets, whole extents) of each over its reduced axes); ``counts``
    (the block's element counts of its moments partials) appended to the results."""
    results = program(backend, *blocks)
    results.extend(counts)
    for position, local_shape, starts, whole in fixups:
        xp = _xp(results[position])
        local = results[position]
        parts = xp.unravel_index(local, local_shape)
        moved = tuple(p + s for p, s in zip(parts, starts))
        results[position] = xp.ravel_multi_index(moved, whole).astype(np.int64)
    return tuple(results) if tuple_result else results[0]


def pick(result: Any, index: int) -> Any:
    """One result of a stage's task that returned several."""
    return result[index]


@dataclass(frozen=True)
class ReducePlan:
    """How a split reduction's partials are made and combined: ``partial_ops`` per block (over the block's
    part of the reduced axes, keepdims), then an elementwise ``combine`` of partials, then the final shape.
    ``argmax``/``argmin`` carry (extreme value, global flat index) pairs: the smallest index among the
    values equal to the extreme (NaN counting as equal to NaN), which is NumPy's first occurrence."""

    op: str
    partial_ops: tuple[str, ...]
    combine: str
    dtype: np.dtype

    @classmethod
    def of(cls, node: Node) -> ReducePlan:
        op = node.op
        if op in ("argmax", "argmin"):
            value = "max" if op == "argmax" else "min"
            return cls(op, (value, op), OPS[value].combine or "", node.dtype)
        return cls(op, (op,), OPS[op].combine or "", node.dtype)

    @classmethod
    def joint(cls, kind: str, node: Node) -> ReducePlan:
        """The partials of ``node`` and of the statistic that reads it (:mod:`fusec.dask.moments`): ``moments``
        (sum, M2, count) of a sum, ``expsum`` (max, sum of exp(x - max)) of a max."""
        if kind == "moments":
            return cls("moments", ("sum", "M2", "count"), "add", node.dtype)
        return cls("expsum", ("max", "expsum"), "maximum", node.dtype)

    @property
    def is_arg(self) -> bool:
        return self.op in ("argmax", "argmin")


def combine(plan: ReducePlan, positions: Sequence[int] | None, *parts: Any) -> tuple[Any, ...]:
    """Partials combined into one partial. ``positions`` picks each partial out of a stage's results (first
    level); later levels get partials as they are."""
    if positions is not None:
        parts = tuple(tuple(p[i] for i in positions) for p in parts)
    xp = _xp(parts[0][0])
    ufunc = reference(OPS[plan.combine], xp)
    with np.errstate(all="ignore"):
        if plan.op == "moments":
            return _chan(parts)
        if plan.op == "expsum":
            return _online_expsum(parts, xp)
        if not plan.is_arg:
            total = functools.reduce(ufunc, (p[0] for p in parts))
            return (total.astype(parts[0][0].dtype, copy=False),)
        values = [p[0] for p in parts]
        extreme = functools.reduce(ufunc, values)  # maximum/minimum: NaN wins, as argmax's first NaN
        floating = dtypes.kind(extreme.dtype) in "fc"
        best = None
        for value, index in ((p[0], p[1]) for p in parts):
            hit = value == extreme
            if floating:
                hit = hit | (xp.isnan(value) & xp.isnan(extreme))
            candidate = xp.where(hit, index, np.iinfo(np.int64).max)
            best = candidate if best is None else xp.minimum(best, candidate)
        return (extreme, best)


def _chan(parts: Sequence[tuple[Any, ...]]) -> tuple[Any, Any, Any]:
    """(sum, M2, count) partials merged (Chan et al.): M2 = sum of M2_i + n_i (mean_i - mean) ** 2, in float64."""
    dtype = parts[0][0].dtype
    sums = [p[0].astype(np.float64) for p in parts]
    counts = [float(p[2]) for p in parts]
    total, count = functools.reduce(lambda a, b: a + b, sums), functools.reduce(lambda a, b: a + b, counts)
    mean = total / count
    m2 = functools.reduce(lambda a, b: a + b, (p[1] + n * (s / n - mean) ** 2 for p, s, n in zip(parts, sums, counts)))
    return total.astype(dtype), m2.astype(dtype), count


def _online_expsum(parts: Sequence[tuple[Any, ...]], xp: Any) -> tuple[Any, Any]:
    """(max, sum of exp(x - max)) pairs merged: the sums rescaled to the overall max. A part whose max is -inf
    (all -inf) adds 0 when another part's max is above it; when all are -inf, NaN stays, as NumPy's."""
    top = functools.reduce(xp.maximum, (p[0] for p in parts))
    total = None
    for m, s in parts:
        term = s * xp.exp(m - top)
        term = xp.where((m == -np.inf) & (top != -np.inf), xp.zeros((), s.dtype), term)
        total = term if total is None else total + term
    return top, total.astype(parts[0][1].dtype, copy=False)


def aggregate(plan: ReducePlan, component: int, dtype: Any, shape: tuple[int, ...], positions: Sequence[int] | None,
              *parts: Any) -> Any:
    """The reduction's block of ``shape`` and ``dtype``: every partial combined, then its ``component`` (the
    value; the index of an arg reduction; the sum or the M2 of moments)."""
    result = combine(plan, positions, *parts)[component]
    xp = _xp(result)
    return xp.asarray(result).astype(dtype, copy=False).reshape(shape)


def _xp(array: Any) -> Any:
    if type(array).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np
