"""How arrays lie in memory, as the schedule layer and the code generator see them.

:class:`ArrayLayout` is one array's element strides, C-contiguity and pointer alignment. :func:`layouts_of`
is the one place that turns a kernel's arguments (NumPy or CuPy arrays, or :class:`fusec.ArraySpec`
descriptions) into layouts; the runtime, ``cuda_source``, ``ptxas`` and ``explain`` all call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fusec.ir.arrayspec import ArraySpec
from fusec.support.errors import FusecValueError

VECTOR_BYTES = 16  # vectorized loads/stores move this many bytes per array per thread


@dataclass(frozen=True)
class ArrayLayout:
    """How one array lies in memory: ``strides`` in elements per its own axes (negative and zero allowed;
    the element offset is already in the pointer), whether it is C-contiguous, and the pointer's alignment
    in bytes (a power of two, at most 16)."""

    strides: tuple[int, ...]
    contiguous: bool = True
    align: int = VECTOR_BYTES

    @staticmethod
    def c_contiguous(shape: Sequence[int]) -> ArrayLayout:
        """A fresh C-contiguous, 16-byte aligned array of ``shape``."""
        strides, step = [], 1
        for d in reversed(tuple(shape)):
            strides.append(step)
            step *= max(int(d), 1)
        return ArrayLayout(tuple(reversed(strides)), True, VECTOR_BYTES)

    @staticmethod
    def of(array: Any) -> ArrayLayout:
        """The layout of a NumPy or CuPy array."""
        itemsize = array.dtype.itemsize
        if any(s % itemsize for s in array.strides):
            raise ValueError(f"strides {array.strides} are not multiples of the itemsize {itemsize}")
        ptr = array.data.ptr if hasattr(array, "__cuda_array_interface__") else array.ctypes.data
        return ArrayLayout(tuple(s // itemsize for s in array.strides), bool(array.flags.c_contiguous),
                           alignment(ptr))


def alignment(ptr: int) -> int:
    """The largest power of two up to 16 that divides ``ptr``."""
    align = VECTOR_BYTES
    while align > 1 and ptr % align:
        align //= 2
    return align


def layout_of(value: Any) -> ArrayLayout | None:
    """The layout of one argument: an array's own (a layout: itself); an :class:`fusec.ArraySpec`'s strides when
    it gives them (its pointer taken as aligned); None for a spec without strides (a fresh C-contiguous array) and
    for anything that is not an array. An array whose strides are not whole elements raises
    :class:`fusec.FusecValueError`: no kernel can address it."""
    if isinstance(value, ArrayLayout):
        return value
    if isinstance(value, ArraySpec):
        return None if value.strides is None else ArrayLayout(tuple(value.strides), contiguous=False)
    if getattr(value, "strides", None) is None or not hasattr(value, "dtype"):
        return None
    try:
        return ArrayLayout.of(value)
    except ValueError as exc:
        raise FusecValueError(f"an argument of shape {tuple(value.shape)} has {exc}",
                              hint="pass a copy (array.copy()), whose strides are whole elements") from None


def layouts_of(nodes: Iterable[Any], values: Mapping[Any, Any]) -> dict[Any, ArrayLayout]:
    """``{node: layout}`` for each of ``nodes`` whose value in ``values`` has a layout of its own (see
    :func:`layout_of`); nodes left out are C-contiguous and 16-byte aligned."""
    out = {}
    for node in nodes:
        if node in values:
            layout = layout_of(values[node])
        else:
            layout = view_layout(node, values)
        if layout is not None:
            out[node] = layout
    return out


def view_layout(node: Any, values: Mapping[Any, Any]) -> ArrayLayout | None:
    """The layout of ``node``, a chain of ``slice``/``reshape`` views (:func:`fusec.ir.reshape_math.argument_views`)
    of an array in ``values``, as NumPy and CuPy lay the view out: each slice moves the start and multiplies the
    strides, each reshape re-strides; None when ``node`` is no such view (or the reshape is not one)."""
    from fusec.ir.infer import slice_bounds
    from fusec.ir.reshape_math import VIEW_OPS, view_strides

    chain = []
    base = node
    while getattr(base, "op", None) in VIEW_OPS and base not in values:
        chain.append(base)
        base = base.operands[0]
    if not chain or base not in values:
        return None
    given = layout_of(values[base])
    layout = given if given is not None else ArrayLayout.c_contiguous(base.shape)
    strides, shape, offset = tuple(layout.strides), tuple(base.shape), 0
    for view in reversed(chain):
        if view.op == "slice":
            bounds = slice_bounds(shape, dict(view.attrs))
            offset += sum(first * s for (first, _, _), s in zip(bounds, strides))
            strides = tuple(s * step for (_, step, _), s in zip(bounds, strides))
        else:
            reshaped = view_strides(shape, strides, view.shape)
            if reshaped is None:
                return None
            strides = reshaped
        shape = tuple(view.shape)
    fresh = ArrayLayout.c_contiguous(shape)
    contiguous = all(s == f for s, f, d in zip(strides, fresh.strides, shape) if d != 1)
    return ArrayLayout(strides, contiguous, min(layout.align, alignment(abs(offset) * node.dtype.itemsize)))
