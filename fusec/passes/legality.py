"""Legality: whether a set of nodes may be one kernel, and the reason when it may not.

A merge of groups is legal when, in this order (the first failure is the reason given):

-. neither group is a matmul, which a GEMM library computes alone (:class:`LibraryKernel`; its operands' views
   are its own, :func:`fusec.ir.region.operand_views`);
0. no gather reads a value the same kernel computes (:func:`fusec.ir.region.gather_refusal`);
1. the nodes have one iteration space (:func:`fusec.ir.region.region_space`, computed incrementally by
   :mod:`fusec.ir.space_state`);
2. a kernel with scans scans along one axis and reduces nothing, and reads no slice of a value it computes (a
   slice of a scan: :func:`fusec.ir.region.scan_axis_problem`, :func:`fusec.ir.region.slice_problem`);
3. every node the kernel must write (returned, or read by another kernel) is written once per element:
   it covers every axis of the space, or, in a reduction, every kept axis without varying along a
   reduced one;
4. the kernel fits its budgets (reductions, passes over a row, arrays, and the data a cols kernel re-reads for
   outputs over its elements: the numbers are in ``policy.py``);
5. it closes no cycle between kernels (the partitioner searches its graph of groups).

Reasons are data (:data:`Reason`); their text is made once, when the refusals are printed with the names
of the fused graph. Whether a legal merge is worth doing is ``policy.py``'s question.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from fusec.ir.axis_slots import AxisSlots
from fusec.ir.graph import Node
from fusec.ir.region import (
    COLS,
    LIBRARY_KERNEL,
    SCAN_GATHER,
    AxisMap,
    gather_refusal,
    scan_axis_problem,
    slice_problem,
    space_kind,
)
from fusec.ir.space_state import refusal_text
from fusec.passes import policy

Names = Mapping[Node, str]


class Members:
    """A group's members at one moment, kept without copying (two groups' members joined in O(1)), listed
    only when a refusal's text is needed."""

    __slots__ = ("parts",)

    def __init__(self, *parts: Members | tuple[Node, ...]):
        self.parts = parts

    def nodes(self) -> set[Node]:
        out: set[Node] = set()
        stack: list = list(self.parts)
        while stack:
            part = stack.pop()
            if isinstance(part, Members):
                stack.extend(part.parts)
            else:
                out.update(part)
        return out


@dataclass(frozen=True)
class NoCommonSpace:
    """The nodes have no one iteration space (region_space's message says why)."""

    members: Members
    slots: AxisSlots = field(repr=False)

    def text(self, names: Names) -> str:
        return refusal_text(self.slots, sorted(self.members.nodes(), key=self.slots.order.__getitem__))


@dataclass(frozen=True)
class ScanConflict:
    """Scans along different axes, a scan and a reduction, or a slice of a scan, in one kernel."""

    message: str

    def text(self, names: Names) -> str:
        return self.message


@dataclass(frozen=True)
class WrittenTwice:
    node: Node
    shape: tuple[int, ...]

    def text(self, names: Names) -> str:
        n = self.node
        return (f"{names[n]} ({n.op}, shape {list(n.shape)}) would be written more than once per element in a "
                f"kernel over {list(self.shape)}")


@dataclass(frozen=True)
class OverBudget:
    message: str

    def text(self, names: Names) -> str:
        return self.message


@dataclass(frozen=True)
class Cycle:
    via: Node

    def text(self, names: Names) -> str:
        return f"would create a cycle through {names[self.via]}"


@dataclass(frozen=True)
class GatherOfComputed:
    """A gather whose array the same kernel would compute (other threads' elements)."""

    gather: Node

    def text(self, names: Names) -> str:
        return gather_refusal(self.gather)


@dataclass(frozen=True)
class ReadBackOfOwn:
    """A reshape read back between kernels (:func:`fusec.ir.reshape_math.is_read_back`) that the kernel computing
    the array it views would read: that array is in memory only once the kernel is over."""

    reshape: Node

    def text(self, names: Names) -> str:
        base = self.reshape.operands[0]
        return (f"{names[self.reshape]} reads {names.get(base, base.op)} back from memory reshaped, after the kernel "
                f"that writes it ({self.reshape.attr('between_kernels')})")


@dataclass(frozen=True)
class LibraryKernel:
    """A matmul (computed by a GEMM library: :mod:`fusec.kinds.matmul`) and anything else in one kernel."""

    contraction: Node

    def text(self, names: Names) -> str:
        return LIBRARY_KERNEL


Reason = (NoCommonSpace | ScanConflict | WrittenTwice | OverBudget | Cycle | GatherOfComputed | ReadBackOfOwn
          | LibraryKernel)


@functools.lru_cache(maxsize=4096)
def written_once(m: AxisMap, shape: tuple[int, ...], reduced_axes: tuple) -> bool:
    """Whether a node placed by axis map ``m`` in a space over ``shape`` reducing ``reduced_axes`` is written
    once per element: it covers every axis, or (in a reduction) every kept axis and no reduced one."""
    reduced = set(reduced_axes)
    placed = {a for a in m if a is not None}
    big = {i for i, d in enumerate(shape) if d != 1}
    if big <= placed:
        return True
    if not reduced:
        return False
    kept = {i for i in big if i not in reduced}
    return kept <= placed and not placed & reduced


class SpaceView(Protocol):
    """What the checks read of a candidate space (a :mod:`fusec.ir.space_state` trial)."""

    legal: bool
    shape: tuple[int, ...]
    reduced: tuple
    reductions: list[Node]
    scans: list[Node]
    slices: list[Node]  # slices of computed values
    gathers: list[Node]  # gather members

    def contains(self, n: Node) -> bool: ...

    def final_map(self, n: Node) -> AxisMap: ...

    def max_reduction_phase(self) -> int: ...


def kernel_reason(space: SpaceView, members: Callable[[], Members], slots: AxisSlots,
                  written: list[Node], n_reads: int) -> Reason | None:
    """Checks 1-4 for a candidate kernel: ``space`` is its iteration space, ``members`` gives its nodes
    (only called for a refusal), ``written`` the nodes it must write (topological order), ``n_reads``
    the arrays it reads. None when legal so far (the cycle check is the caller's)."""
    for g in space.gathers:
        if space.contains(g.operands[0]):
            return GatherOfComputed(g)
    if not space.legal:
        return NoCommonSpace(members(), slots)
    problem = slice_problem(space.slices, space.contains) if space.slices else None
    if problem is None and space.scans and space.gathers:
        problem = SCAN_GATHER
    if problem is None and space.scans:
        problem = scan_axis_problem(space.scans, space.final_map, bool(space.reductions))
    if problem is not None:
        return ScanConflict(problem)
    for n in written:
        if not written_once(space.final_map(n), space.shape, space.reduced):
            return WrittenTwice(n, space.shape)
    message = policy.over_budget(len(space.reductions), 1 + space.max_reduction_phase(), n_reads + len(written))
    if message is None and space_kind(space.shape, space.reduced) == COLS and any(
            _over_reduced_axes(space.final_map(n), space) for n in written):
        message = policy.cols_epilogue_refusal(math.prod(space.shape))
    return OverBudget(message) if message else None


def _over_reduced_axes(m: AxisMap, space: SpaceView) -> bool:
    """Whether a node placed by ``m`` varies along a reduced axis (one of more than one element)."""
    return any(a is not None and a in space.reduced and space.shape[a] != 1 for a in m)
