"""Heuristic helpers every kind shares: flat loops and their vector width, the arrays' fastest axis, one-pass
statistics.

Each kernel kind's heuristics (``defaults`` in :mod:`fusec.kinds`) read the loop nest through these and their
own; :func:`fusec.kinds.choose` and :func:`fusec.kinds.resolve` are what callers use. The constants of each
kind's heuristics sit in its module, measured on the H200 (``benchmarks/tune_rows.py`` times alternatives by
forcing schedules).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.schedule.base import Schedule
from fusec.schedule.layout import VECTOR_BYTES
from fusec.schedule.nest import LoopNest

OUTLINE_HEAVY_COST = 6  # an op of at least this cost in the op table is a libm-style function (sin, tanh, pow, erf)
OUTLINE_MIN_HEAVY = 8  # outline a body of at least this many of them (NVRTC, 2-core CPU: benchmarks/compile_time.py
# --nvrtc: 8 sin/cos in a vec=4 loop take 1.5 s inline, 0.65 s outlined; 120 take 33 s and 2.0 s)


def outline_pays(body: Iterable[Node], copies: int) -> bool:
    """Whether a loop whose element computes ``body`` (its nodes) in ``copies`` places of the kernel (a vector of
    4 and a scalar tail: 5) should call it as one ``__noinline__`` function instead: where it has at least
    :data:`OUTLINE_MIN_HEAVY` ops of cost :data:`OUTLINE_HEAVY_COST` or more. NVRTC's time grows with the code
    it is given, and CUDA's ``sinf``/``cosf``/``powf`` inline a large slow path into every copy: a chain of 120
    ``sin``/``cos`` takes 33 s to compile inline, 2 s outlined. The call costs a few instructions per element,
    nothing against such a body; every kernel of the benchmarks and examples stays inline."""
    heavy = sum(1 for n in body if n.kind is Kind.ELEMENTWISE and n.opdef.cost >= OUTLINE_HEAVY_COST)
    return copies > 1 and heavy >= OUTLINE_MIN_HEAVY


def one_pass_pays(nest: LoopNest, schedule: Schedule) -> bool:
    """Whether the region's one-pass statistics (variances, softmax denominators) should take one pass under a
    schedule like ``schedule``: whenever it has some and does not hold its rows in registers, where the second
    pass reads registers, not memory, and costs less than the one-pass updates (a division or an exp more
    per element)."""
    if not nest.one_pass_candidates or "one_pass" not in schedule.keys:
        return False
    return schedule.natural("one_pass")


def nest_for(nest: LoopNest, schedule: Schedule) -> LoopNest:
    """The loop nest a kernel of ``schedule`` computes: ``nest``, or with ``one_pass`` its one-pass statistics."""
    return nest.with_one_pass() if getattr(schedule, "one_pass", None) else nest


def fastest_axis(nest: LoopNest) -> str | None:
    """Along which axes the region's arrays are contiguous in memory: ``"kept"`` when the innermost kept
    axis is the one most of the bytes step along by one element, ``"reduced"`` when it is the innermost
    reduced (loop) axis, None when neither (every array strided there). Arrays vote by itemsize."""
    if not nest.kept_idx or not nest.loop_idx:
        return None
    inner_kept, inner_loop = nest.kept_idx[-1], nest.loop_idx[-1]
    votes = {"kept": 0, "reduced": 0}
    for i, info in enumerate(nest.infos):
        if info.pointer is None or not nest.varying(i):
            continue
        if abs(nest.axes[inner_kept].strides[i]) == 1:
            votes["kept"] += info.dtype.itemsize
        elif abs(nest.axes[inner_loop].strides[i]) == 1:
            votes["reduced"] += info.dtype.itemsize
    if not any(votes.values()):
        return None
    return "kept" if votes["kept"] >= votes["reduced"] else "reduced"


def power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def flat_loop(nest: LoopNest, loop: str | None) -> tuple[str, int]:
    """(loop, vec) of a flat loop: the heuristic's, or the best of the ``loop`` asked for."""
    vec = vector_width(nest) if nest.contiguous else 1
    if loop is None:
        return ("vector" if vec > 1 else ("contiguous" if nest.contiguous else "strided")), vec
    if loop == "vector":
        widest = max((i.dtype.itemsize for k, i in enumerate(nest.infos) if nest.varying(k) and i.pointer), default=4)
        return loop, vec if vec > 1 else max(2, VECTOR_BYTES // widest)  # (a misfit is refused with its reason)
    return loop, 1


def vector_width(nest: LoopNest) -> int:
    """Elements per thread per vector step of a contiguous loop: 16 bytes of the widest varying array, when
    every varying array's pointer is aligned to the bytes it moves; 1 (scalar) otherwise."""
    pointers = [info for i, info in enumerate(nest.infos) if nest.varying(i) and info.pointer is not None]
    if not pointers:
        return 1
    width = VECTOR_BYTES // max(i.dtype.itemsize for i in pointers)
    if width < 2:
        return 1
    for info in pointers:
        if nest.access_align(info) < width * info.dtype.itemsize:
            return 1
    return width


def check_flat_loop(nest: LoopNest, loop: str, vec: int, refuse: Any) -> None:
    """Refuse a flat loop (``loop``: vector, contiguous or strided; ``vec`` elements per step) that does not fit
    ``nest``."""
    if loop in ("vector", "contiguous") and not nest.contiguous:
        refuse(f"a {loop} loop needs every array to step by one element along one flat index; these do not")
    if loop == "vector":
        if vec < 2 or not power_of_two(vec):
            refuse("a vector loop takes vec = 2, 4, 8 or 16")
        for i, info in enumerate(nest.infos):
            if nest.varying(i) and info.pointer is not None:
                if vec * info.dtype.itemsize > VECTOR_BYTES:
                    refuse(f"vec={vec} moves {vec * info.dtype.itemsize} bytes of {info.var} per step "
                           f"(at most {VECTOR_BYTES})")
                if nest.access_align(info) < vec * info.dtype.itemsize:
                    refuse(f"{info.var} is {nest.access_align(info)}-byte aligned, vec={vec} needs "
                           f"{vec * info.dtype.itemsize}")
    elif vec != 1:
        refuse(f"vec={vec} needs the vector loop")


__all__ = ["check_flat_loop", "fastest_axis", "flat_loop", "nest_for", "one_pass_pays", "power_of_two", "vector_width"]
