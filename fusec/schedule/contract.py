"""Launch contracts: what a kernel needs of the arrays it is launched on.

A schedule with vector accesses moves ``W`` consecutive elements of an array as one ``W x itemsize``-byte load or
store, which the GPU executes only from an address that is a multiple of ``W x itemsize``; any other address is
``CUDA_ERROR_MISALIGNED_ADDRESS``, which ends the process's CUDA context. Where such an access lands is the sum of
two parts:

- the element offset the kernel computes, from the layout it was generated for (strides, a slice's start, a row's
  start, the lanes of the vector): known when the kernel is generated, the same at every launch;
- the array's base address: known only at launch.

:func:`vector_accesses` lists the vector accesses a (loop nest, schedule) pair makes, exactly as the templates emit
them. :func:`offset_problem` says why one of them would be misaligned even from a well-aligned base (a vector whose
lanes do not step by one element, a stride or a slice offset that is not a multiple of ``W``): such a schedule does
not fit the region at all, and :func:`fusec.kinds.check` refuses it. What is left is the
:class:`LaunchContract`: for each pointer parameter, the alignment its base address needs, with the element
strides and shape the kernel was generated for and its index width. The runtime checks it before every launch
(:meth:`LaunchContract.violation` on the checked path, :attr:`LaunchContract.masks` on the dispatch fast path)
and runs the schedule's scalar variant (:meth:`fusec.schedule.base.Schedule.scalar`) where it does not hold.

Kernels that check alignment themselves when they run ask nothing of their bases: a scan moves a row in vectors
only where that row's address is aligned, a register-row kernel of ``lengths=bucket`` checks each row's start
(but its arrays' bases must still be aligned: the check is on the element offset).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fusec.schedule.base import Schedule
from fusec.schedule.layout import ArrayLayout
from fusec.schedule.nest import AccessInfo, LoopNest


class ContractViolation(Exception):
    """A launch's arrays do not meet its kernel's :class:`LaunchContract` (raised instead of launching; the
    runtime then runs a kernel built for those arrays)."""

    def __init__(self, kernel: str, schedule: str, why: str):
        super().__init__(f"{kernel} ({schedule}): {why}")
        self.kernel, self.schedule, self.why = kernel, schedule, why


@dataclass(frozen=True)
class VectorAccess:
    """One array access a kernel makes ``lanes`` elements at a time: its access variable (``ld3``, ``st0``), its
    array's pointer parameter (``in0``, ``out1``), the itemsize, and along which collapsed axis the lanes run
    (None: the flat index of a contiguous loop)."""

    info: AccessInfo
    lanes: int
    axis: int | None
    # the kept offset's alignment is checked per row when the kernel runs (register rows, lengths=bucket)
    rows_checked: bool = False
    # the vectors cover the axis whole, with no scalar tail: its extent must be a multiple of the lanes
    whole_axis: bool = False

    @property
    def pointer(self) -> str:
        assert self.info.pointer is not None
        return self.info.pointer

    @property
    def bytes(self) -> int:
        assert self.info.dtype is not None
        return self.lanes * self.info.dtype.itemsize


@dataclass(frozen=True)
class PointerNeed:
    """What a kernel needs of one array parameter: its base address a multiple of ``align`` bytes (1: any: the
    kernel reads and writes it one element at a time), and the layout the kernel's frozen index arithmetic was
    generated for: ``shape`` and ``strides`` (in elements, per array axis) and ``itemsize``."""

    param: str
    align: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int

    @property
    def mask(self) -> int:
        """``align - 1``: a base address ``p`` fits when ``p & mask == 0``."""
        return self.align - 1

    def violation(self, array: Any) -> str | None:
        """Why ``array`` (a CuPy array, or anything with ``shape``, ``strides`` in bytes and ``data.ptr``) does not
        fit this parameter, or None."""
        ptr = array.data.ptr
        if ptr & self.mask:
            return f"{self.param} starts at an address {_alignment(ptr)}-byte aligned, the kernel needs {self.align}"
        if tuple(array.shape) != self.shape:
            return f"{self.param} has shape {tuple(array.shape)}, the kernel was built for {self.shape}"
        strides = tuple(s // self.itemsize if s % self.itemsize == 0 else s / self.itemsize for s in array.strides)
        if strides != self.strides and any(d > 1 for d in self.shape):
            mine = tuple(s for s, d in zip(strides, self.shape) if d > 1)
            built = tuple(s for s, d in zip(self.strides, self.shape) if d > 1)
            if mine != built:
                return f"{self.param} has strides {strides} (elements), the kernel was built for {self.strides}"
        return None


@dataclass(frozen=True)
class LaunchContract:
    """What a generated kernel needs of its array arguments (see the module docstring): one :class:`PointerNeed`
    per array parameter, in parameter order (inputs, then outputs), and the index width its offsets were computed
    in (``int``: every offset below 2**31, which the shapes and strides guarantee)."""

    pointers: tuple[PointerNeed, ...]
    index_ctype: str = "int"

    @property
    def aligned(self) -> tuple[PointerNeed, ...]:
        """The parameters whose base address must be aligned (read or written with vectors)."""
        return tuple(p for p in self.pointers if p.align > 1)

    @property
    def masks(self) -> tuple[int, ...]:
        """``align - 1`` per array parameter, in parameter order: the fast path's test (``ptr & mask``)."""
        return tuple(p.mask for p in self.pointers)

    def holds(self, pointers: Sequence[int]) -> bool:
        """Whether base addresses ``pointers`` (one per array parameter, in order) are aligned as needed."""
        return not any(p & need.mask for p, need in zip(pointers, self.pointers))

    def violation(self, arrays: Sequence[Any]) -> str | None:
        """Why ``arrays`` (one per array parameter, in order) do not fit the kernel, or None: an address not
        aligned as its vector accesses need, or a shape or strides other than the kernel was generated for."""
        if len(arrays) != len(self.pointers):
            return f"{len(arrays)} arrays for {len(self.pointers)} array parameters"
        for array, need in zip(arrays, self.pointers):
            why = need.violation(array)
            if why is not None:
                return why
        return None

    def text(self) -> str:
        """``in0, out0 16-byte aligned; in1 4-byte aligned; others any; int32 indices`` (the strides:
        :meth:`strides_text`)."""
        by_align: dict[int, list[str]] = {}
        for p in self.aligned:
            by_align.setdefault(p.align, []).append(p.param)
        parts = [f"{', '.join(names)} {align}-byte aligned" for align, names in sorted(by_align.items(), reverse=True)]
        if not parts:
            parts = ["any alignment (no vector accesses)"]
        elif len(self.aligned) < len(self.pointers):
            parts.append("others any")
        parts.append("int32 indices" if self.index_ctype == "int" else "int64 indices")
        return "; ".join(parts)

    def strides_text(self) -> str:
        """``in0 (917, 1), out0 (917, 1)``: the element strides each array parameter was generated for."""
        return ", ".join(f"{p.param} {p.strides}" for p in self.pointers)

    def __str__(self) -> str:
        return self.text()


def _alignment(ptr: int) -> int:
    align = 256
    while align > 1 and ptr % align:
        align //= 2
    return align


# ---- what a schedule moves in vectors ------------------------------------------------------------------------


def vector_accesses(nest: LoopNest, schedule: Schedule) -> list[VectorAccess]:
    """Every array access ``schedule`` makes with vectors over ``nest`` (the nest the kernel computes: with
    one-pass statistics where the schedule says so), as its kind's template emits them
    (:meth:`fusec.schedule.base.Schedule.vector_accesses`, which each kind's schedule class defines)."""
    return [a for a in schedule.vector_accesses(nest) if a.info.dtype is not None]


def offset_problem(nest: LoopNest, schedule: Schedule) -> str | None:
    """Why some vector access of ``schedule`` over ``nest`` would be misaligned (or its lanes not ``vec``
    consecutive elements) even with every array's base address aligned, or None when every one is aligned
    given aligned bases (its lanes step by one element, every other step and its slice offset a multiple of
    the vector)."""
    for access in vector_accesses(nest, schedule):
        info, lanes = access.info, access.lanes
        i = nest.info_index[info.var]
        role = "store" if info.var.startswith("st") else "load"
        if access.axis is None:
            if nest.axes:  # (a vector loop is one flat index, or the row's one axis)
                return f"the vector accesses of {info.var} run along no single axis of the {len(nest.axes)}"
            continue  # no axis left: one element, never a whole vector
        step = nest.axes[access.axis].strides[i]
        if step != 1 or access.axis in nest.clamped[i]:
            return (f"the {role} {info.var} of {info.pointer} steps by {step} along the vector axis, not 1: "
                    f"a {lanes}-element vector would not be its {lanes} consecutive elements")
        if access.whole_axis and nest.extents[access.axis] % lanes:
            return f"the innermost axis ({nest.extents[access.axis]} elements) is not a multiple of vec={lanes}"
        others = [k for k in range(len(nest.axes)) if k != access.axis]
        if not access.rows_checked:
            bad = [nest.axes[k].strides[i] for k in others if nest.axes[k].strides[i] % lanes]
            if bad:
                return (f"the {role} {info.var} of {info.pointer} steps by {bad[0]} elements between vectors, "
                        f"not a multiple of {lanes}")
            if any(c[5] % lanes for c in info.clamps):
                return (f"the {role} {info.var} of {info.pointer} is read through a clamped index whose stride is "
                        f"not a multiple of {lanes}")
        if info.offset and info.offset % lanes:
            return (f"the {role} {info.var} of {info.pointer} starts {info.offset} elements into its array, not a "
                    f"multiple of {lanes}")
    return None


def launch_contract(nest: LoopNest, schedule: Schedule) -> LaunchContract:
    """The :class:`LaunchContract` of the kernel ``schedule`` makes of ``nest`` (the nest it computes)."""
    need: dict[str, int] = {}
    for access in vector_accesses(nest, schedule):
        need[access.pointer] = max(need.get(access.pointer, 1), access.bytes)
    pointers = []
    for node, param in [*nest.pointer.items(), *nest.out_pointer.items()]:
        layout = nest.layouts.get(node) or ArrayLayout.c_contiguous(node.shape)
        pointers.append(PointerNeed(param, need.get(param, 1), tuple(int(d) for d in node.shape),
                                    tuple(int(s) for s in layout.strides), node.dtype.itemsize))
    return LaunchContract(tuple(pointers), nest.index_ctype)


def layout_problem(nest: LoopNest, schedule: Schedule) -> str | None:
    """Why the contract of ``schedule`` over ``nest`` does not hold for the layouts the nest was analysed with (a
    pointer less aligned than its vectors need), or why its vectors are misaligned whatever the bases
    (:func:`offset_problem`); None when the kernel's every vector access is aligned for these layouts."""
    problem = offset_problem(nest, schedule)
    if problem is not None:
        return problem
    params = {**{p: n for n, p in nest.pointer.items()}, **{p: n for n, p in nest.out_pointer.items()}}
    for need in launch_contract(nest, schedule).aligned:
        have = nest.layout(params[need.param]).align
        if have < need.align:
            return f"{need.param} is {have}-byte aligned, its vector accesses need {need.align}"
    return None


__all__ = ["ContractViolation", "LaunchContract", "PointerNeed", "VectorAccess", "launch_contract", "layout_problem",
           "offset_problem", "vector_accesses"]
