"""The IR nodes tracing builds, below the tracer: every node made while a function traces carries the user's line
(:func:`new_node`), and the per-trace record of what the trace assumed about sizes: whether the function read a
concrete size (then a new size traces again), and the shape guards of fusec's own size-dependent decisions (a trace
is reused for new sizes while each guard holds on them, and traced again where one does not).

:class:`TracedArray` is the base of :class:`fusec.frontend.tracer.Tracer`, so that the modules below the tracer (runtime
scalars, indexing, assignments) tell a traced array from other values without importing it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    _state.guards = []


@dataclass(frozen=True)
class ShapeGuard:
    """A decision the trace took from the sizes of ``nodes`` (not only their ranks), such as a contraction small
    enough to trace as a product and a sum: ``holds(nodes)`` says whether the same decision stands for the same
    nodes over other sizes (their shapes re-inferred). ``why`` names the decision for the logs."""

    nodes: tuple[Node, ...]
    holds: Callable[[tuple[Node, ...]], bool]
    why: str

    def holds_after(self, mapping: Mapping[Node, Node]) -> bool:
        """Whether the decision stands for the nodes as ``mapping`` (a graph's nodes -> the same over new sizes)
        re-infers them; it stands where the graph no longer holds them (their result is read by nothing)."""
        if any(n not in mapping for n in self.nodes):
            return True
        return self.holds(tuple(mapping[n] for n in self.nodes))


def add_shape_guard(nodes: tuple[Node, ...], holds: Callable[[tuple[Node, ...]], bool], why: str) -> None:
    """Record that the trace decided something from the sizes of ``nodes`` (see :class:`ShapeGuard`)."""
    _state.guards.append(ShapeGuard(tuple(nodes), holds, why))


def shape_guards() -> tuple[ShapeGuard, ...]:
    """The shape guards recorded since :func:`reset_shape_read`."""
    return tuple(getattr(_state, "guards", ()))


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


__all__ = ["ShapeGuard", "TracedArray", "add_shape_guard", "as_axis", "cast", "const", "iota_node", "mark_shape_read",
           "new_node", "reset_shape_read", "shape_guards", "shape_was_read", "squeeze_axes"]
