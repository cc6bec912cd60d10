"""The IR nodes tracing builds, below the tracer: every node made while a function traces carries the user's line
(:func:`new_node`), and the per-trace record of whether the function read a concrete size.

:class:`TracedArray` is the base of :class:`fusec.frontend.tracer.Tracer`, so that the modules below the tracer (runtime
scalars, indexing, assignments) tell a traced array from other values without importing it.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from fusec.ir import dtypes
from fusec.ir.graph import Node, make_node
from fusec.support.errors import user_location


class TracedArray:
    """A traced array (:class:`fusec.frontend.tracer.Tracer`, the only subclass): ``node`` is its current value."""

    __slots__ = ()
    node: Node


_state = threading.local()


def shape_was_read() -> bool:
    """Whether the function being traced read a concrete size (``x.shape``, ``len(x)``, ``x.size``)."""
    return getattr(_state, "shape_read", False)


def reset_shape_read() -> None:
    _state.shape_read = False


def mark_shape_read() -> None:
    """Record that the trace depends on a concrete size (it traces again for another)."""
    _state.shape_read = True


def new_node(op: str, operands: list[Node] | tuple[Node, ...] = (), attrs: dict | None = None, **kw: Any) -> Node:
    """A node made at the user's line that is being traced."""
    return make_node(op, operands, attrs, loc=user_location(), **kw)


def const(value: Any, dt: np.dtype) -> Node:
    """A 0-d constant ``value`` of ``dt``."""
    return new_node("const", (), {"value": dtypes.scalar_constant(value, dt)}, dtype=dt)


def cast(node: Node, dt: np.dtype) -> Node:
    """``node`` as ``dt`` (itself when it already is)."""
    return node if node.dtype == dt else new_node("cast", [node], dtype=dt)


def squeeze_axes(x: Node, axes: tuple[int, ...]) -> Node:
    """``x`` without its (size-1) axes ``axes`` (itself for none)."""
    return new_node("squeeze", [x], {"axes": list(axes)}) if axes else x


def iota_node(count: int, dt: np.dtype, start: Any = 0, nxt: Any = None) -> Node:
    """An iota of ``count`` elements (``start``, ``next``, ...: by default 0, 1, 2, ...)."""
    if count == 0:
        return new_node("broadcast_to", [const(0, dt)], {"shape": [0]})
    if nxt is None:
        nxt = start + 1 if count > 1 else start
    return new_node("iota", (), {"count": count, "start": dtypes.scalar_constant(start, dt),
                                 "next": dtypes.scalar_constant(nxt, dt)}, dtype=dt)


def as_axis(node: Node, axis: int, ndim: int) -> Node:
    """A 1-d ``node`` as axis ``axis`` of an ``ndim``-d array (size 1 along the others)."""
    others = [k for k in range(ndim) if k != axis]
    return new_node("expand_dims", [node], {"axes": others}) if others else node


__all__ = ["TracedArray", "as_axis", "cast", "const", "iota_node", "mark_shape_read", "new_node", "reset_shape_read",
           "shape_was_read", "squeeze_axes"]
