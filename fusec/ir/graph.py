"""The IR: immutable, hash-consed nodes and the graph of a traced function.

A :class:`Node` is (op, dtype, shape, operands, attrs). Nodes are interned: building a node equal
to a live one returns that very object, so structurally equal nodes are one node (CSE for free,
tests compare with ``is``). The user's source location rides beside the node, not in its identity.

A :class:`Graph` is a function: its input nodes, its output nodes, and (after fusion) its regions.
Nodes are shared between graphs; a graph's nodes are those reachable from its outputs.
"""

from __future__ import annotations

import math
import struct
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from fusec.ir import dtypes
from fusec.ir.infer import Shape, infer
from fusec.ir.ops import OPS, Kind, OpDef

if TYPE_CHECKING:
    from fusec.ir.region import Region

_INTERN: weakref.WeakValueDictionary[tuple, Node] = weakref.WeakValueDictionary()
_INTERN_LOCK = threading.Lock()


def attr_key(value: Any) -> Any:
    """A hashable key that tells -0.0 from 0.0 and a NaN with its sign bit set from one without (copysign
    and signbit tell them apart: 0/0 is -nan on x86), and makes NaNs of the same sign equal."""
    if isinstance(value, float):
        if math.isnan(value):
            return ("f", "-nan" if math.copysign(1.0, value) < 0 else "nan")
        return ("f", struct.pack("<d", value))
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (list, tuple)):
        return tuple(attr_key(v) for v in value)
    return value


class Node:
    """One value of the IR. Build with :func:`make_node`; never mutate."""

    __slots__ = ("op", "dtype", "shape", "operands", "attrs", "loc", "__weakref__")

    op: str
    dtype: np.dtype
    shape: Shape
    operands: tuple[Node, ...]
    attrs: tuple[tuple[str, Any], ...]
    loc: str | None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Node is immutable")

    @property
    def opdef(self) -> OpDef:
        return OPS[self.op]

    @property
    def kind(self) -> Kind:
        return OPS[self.op].kind

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        args = ", ".join(f"%{o.op}" for o in self.operands)
        attrs = ", ".join(f"{k}={v!r}" for k, v in self.attrs)
        return f"<Node {self.op}({args}){{{attrs}}} : {dtypes.short(self.dtype)}{list(self.shape)}>"


def make_node(op: str, operands: Iterable[Node] = (), attrs: Mapping[str, Any] | None = None, *,
              dtype: np.dtype | type | str | None = None, shape: Shape | None = None, loc: str | None = None) -> Node:
    """Build (or find) the node ``op(operands){attrs}``; its dtype and shape are inferred and checked.

    ``dtype`` (a dtype, as NumPy reads it: :func:`fusec.ir.dtypes.node_dtype`) is required for ``input``,
    ``const``, ``size`` and ``cast``; ``shape`` for ``input``.
    """
    operands = tuple(operands)
    attrs = dict(attrs or {})
    dt = dtypes.node_dtype(dtype) if dtype is not None else None
    out_dtype, out_shape = infer(op, list(operands), attrs, dt, shape)
    if op == "const":
        attrs["value"] = dtypes.scalar_constant(attrs["value"], out_dtype)
    frozen_attrs = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()))
    return _intern(op, out_dtype, out_shape, operands, frozen_attrs, loc)


def _intern(op: str, dtype: np.dtype, shape: Shape, operands: tuple[Node, ...],
            attrs: tuple[tuple[str, Any], ...], loc: str | None) -> Node:
    """The node with these fields, found or made (the fields already checked and normalized)."""
    key = (op, dtype, shape, operands, tuple((k, attr_key(v)) for k, v in attrs))
    with _INTERN_LOCK:
        node = _INTERN.get(key)
        if node is None:
            node = object.__new__(Node)
            for name, value in (("op", op), ("dtype", dtype), ("shape", shape),
                                ("operands", operands), ("attrs", attrs), ("loc", loc)):
                object.__setattr__(node, name, value)
            _INTERN[key] = node
    return node


def with_operands(node: Node, operands: tuple[Node, ...]) -> Node:
    """``node`` rebuilt over new operands (itself when they are the same objects)."""
    if all(a is b for a, b in zip(operands, node.operands)):
        return node
    if all(a.dtype == b.dtype and a.shape == b.shape for a, b in zip(operands, node.operands)):
        # operands of the same types: the node's own type, already inferred and checked
        return _intern(node.op, node.dtype, node.shape, operands, node.attrs, node.loc)
    dtype = node.dtype if node.op in ("cast", "size", "const", "input", "iota") else None
    shape = node.shape if node.op == "input" else None
    return make_node(node.op, operands, dict(node.attrs), dtype=dtype, shape=shape, loc=node.loc)


def topological(outputs: Iterable[Node]) -> list[Node]:
    """Nodes reachable from ``outputs``, operands before users, in a deterministic order
    (depth-first, operands left to right)."""
    order: list[Node] = []
    seen: set[int] = set()
    for root in outputs:
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if id(node) in seen:
                continue
            if i < len(node.operands):
                stack.append((node, i + 1))
                child = node.operands[i]
                if id(child) not in seen:
                    stack.append((child, 0))
            else:
                seen.add(id(node))
                order.append(node)
    return order


@dataclass(frozen=True, eq=False)
class Graph:
    """A traced function: named inputs (``input`` nodes, in argument order) and outputs."""

    name: str
    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    regions: tuple[Region, ...] | None = None
    refusals: tuple[str, ...] = field(default=(), compare=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        same_regions = (self.regions is None) == (other.regions is None) and (
            self.regions is None
            or [(r.kind, r.nodes, r.outputs) for r in self.regions]
            == [(r.kind, r.nodes, r.outputs) for r in other.regions or ()]
        )
        return (self.name == other.name and self.inputs == other.inputs
                and self.outputs == other.outputs and same_regions)

    def __hash__(self) -> int:
        return hash((self.name, self.inputs, self.outputs))

    @cached_property
    def nodes(self) -> tuple[Node, ...]:
        """Every node, operands before users; unused inputs are included, in argument order."""
        order = topological(self.outputs)
        reached = {id(n) for n in order}
        unused = [n for n in self.inputs if id(n) not in reached]
        return tuple(unused + order)

    @cached_property
    def users(self) -> dict[Node, list[Node]]:
        """node -> the nodes that read it (each once, in topological order)."""
        users: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for node in self.nodes:
            for operand in dict.fromkeys(node.operands):
                users[operand].append(node)
        return users

    def __str__(self) -> str:
        from fusec.ir.printer import print_graph

        return print_graph(self)


def rewrite(graph: Graph, fn: Callable[[Node], Node], follow: set[Node] | None = None) -> Graph:
    """Rebuild ``graph`` bottom-up: each node gets its rewritten operands, then ``fn`` may replace it.

    ``fn`` sees a node whose operands are already rewritten and returns it or a replacement. The
    result drops regions. Returns ``graph`` itself when nothing changed (passes stay pure and cheap).
    ``follow``: nodes a pass marked; each one's rebuilt node and replacement join the set as they are made,
    before ``fn`` sees any of their users.
    """
    mapping: dict[Node, Node] = {}
    for node in graph.nodes:
        rebuilt = with_operands(node, tuple(mapping[o] for o in node.operands))
        if follow is not None and node in follow:
            follow.add(rebuilt)
            mapping[node] = fn(rebuilt)
            follow.add(mapping[node])
            continue
        mapping[node] = fn(rebuilt)
    outputs = tuple(mapping[o] for o in graph.outputs)
    inputs = tuple(mapping[i] for i in graph.inputs)
    if outputs == graph.outputs and inputs == graph.inputs and graph.regions is None:
        return graph
    return Graph(graph.name, inputs, outputs)


def rebind(graph: Graph, shapes: list[Shape]) -> Graph:
    """The same function over inputs of new shapes (same ranks); every node's shape re-inferred."""
    return rebind_nodes(graph, shapes)[0]


def rebind_nodes(graph: Graph, shapes: list[Shape]) -> tuple[Graph, dict[Node, Node]]:
    """:func:`rebind`, and each node of ``graph`` -> its node over the new shapes."""
    assert len(shapes) == len(graph.inputs)
    mapping: dict[Node, Node] = {
        node: make_node("input", (), dict(node.attrs), dtype=node.dtype, shape=tuple(s), loc=node.loc)
        for node, s in zip(graph.inputs, shapes)
    }
    for node in graph.nodes:
        if node not in mapping:
            mapping[node] = with_operands(node, tuple(mapping[o] for o in node.operands))
    return Graph(graph.name, tuple(mapping[i] for i in graph.inputs),
                 tuple(mapping[o] for o in graph.outputs)), mapping
