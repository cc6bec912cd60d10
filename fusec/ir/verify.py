"""The verifier: structural, shape and dtype checks of a graph, and of its regions after fusion.

:func:`verify` collects every problem and raises one :class:`VerifyError` that lists them, one line
per bad node (named as the printer names it: ``%3 (add): ...``) or bad region (``region @k0: ...``).
The pass manager runs it after each pass.

Checks:
- each node: a known op, its arity, a supported dtype, and the (dtype, shape) that ``infer`` gives
  for its operands and attributes; a ``const`` holds a Python scalar of its dtype; an ``input`` has
  a ``name`` (an identifier) and an ``index``;
- the graph: ``inputs`` are ``input`` nodes with distinct names and ``index`` equal to their
  position; every ``input`` reachable from the outputs is among them (nodes cannot form a cycle: a
  node is immutable and its operands exist before it);
- regions (when present): known kinds, distinct names; members are nodes of the graph (never an
  ``input``) listed in ``graph.nodes`` order (so that the text form round-trips); every non-source
  node is in a region, and only elementwise, layout and source nodes are in several (recomputed);
  inputs and outputs are what ``make_regions`` gives; the graph of regions is acyclic and the
  regions are listed in an order where each reads only what earlier ones (or the top level) made.

A node's own checks depend only on its signature (op, dtype, shape, attributes, its operands' dtypes
and shapes), so their result is remembered per signature: a pass that rebuilds nodes over new operands
of the same types costs the verifier a lookup each. Text names are computed only when there is a
problem to report, or regions to check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import networkx as nx

from fusec.ir import dtypes
from fusec.ir.graph import Graph, Node, attr_key
from fusec.ir.infer import infer
from fusec.ir.ops import OPS, VARIADIC, Kind, arity_ok
from fusec.ir.printer import block_layout, global_name
from fusec.ir.region import REGION_KINDS, Region, kind_problem, make_regions
from fusec.ir.reshape_math import outside_kernels
from fusec.support.errors import FusecError, VerifyError

_INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_GIVEN_DTYPE = ("input", "const", "size", "cast", "iota")
_PROBLEMS: dict[tuple, tuple[str, ...]] = {}  # a node signature -> the problems of such a node
_PROBLEMS_KEPT = 1 << 16


class _Names(Mapping[Node, str]):
    """The printer's names of a graph's nodes, computed on first use (with the region order problem)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self._names: dict[Node, str] | None = None
        self._order_problem: str | None = None

    def _get(self) -> dict[Node, str]:
        if self._names is None:
            _, self._names, self._order_problem = block_layout(self.graph)
        return self._names

    def order_problem(self) -> str | None:
        self._get()
        return self._order_problem

    def __getitem__(self, node: Node) -> str:
        return self._get()[node]

    def __iter__(self) -> Iterator[Node]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def verify(graph: Graph) -> None:
    """Return if ``graph`` is well formed; otherwise raise one :class:`VerifyError` listing every problem."""
    names = _Names(graph)
    problems: list[str] = []
    for node in graph.nodes:
        found = _node_problems(node)
        if not found:
            continue
        label = _label(node, names)
        problems += [f"{label}: {p}" for p in found]
    problems += _input_problems(graph, names)
    if graph.regions is not None:
        problems += _region_problems(graph, names)
        order_problem = names.order_problem()
        if order_problem and not any("regions form a cycle" in p for p in problems):
            problems.append(order_problem)
    if problems:
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        raise VerifyError(f"{count} in the IR:\n  " + "\n  ".join(problems),
                          loc=f"func {global_name(graph.name)}")


def _label(node: Node, names: Mapping[Node, str]) -> str:
    """``%3 (add, at FILE:LINE)``: the node as the printer names it, with where it was made when known."""
    return f"{names.get(node, '?')} ({node.op}{', at ' + node.loc if node.loc else ''})"


def _type(dt: Any, shape: tuple[int, ...]) -> str:
    name = dtypes.SHORT_NAMES.get(dt, str(dt))
    return f"{name}[{','.join(map(str, shape))}]"


def _same_scalar(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b


def _node_problems(node: Node) -> tuple[str, ...]:
    """The problems of ``node`` on its own (remembered per signature: they depend on nothing else)."""
    try:
        key = (node.op, node.dtype, tuple(node.shape), tuple((k, attr_key(v)) for k, v in node.attrs),
               tuple((o.dtype, tuple(o.shape)) for o in node.operands))
        found = _PROBLEMS.get(key)
    except TypeError:  # an unhashable attribute (only a forged node has one)
        return tuple(_check_node(node))
    if found is None:
        if len(_PROBLEMS) >= _PROBLEMS_KEPT:
            _PROBLEMS.clear()
        found = _PROBLEMS[key] = tuple(_check_node(node))
    return found


def _arity_text(arity: int) -> str:
    return "at least 2" if arity == VARIADIC else str(arity)


def _check_node(node: Node) -> list[str]:
    op = OPS.get(node.op)
    if op is None:
        return ["unknown op"]
    if not arity_ok(op, len(node.operands)):
        return [f"has {len(node.operands)} operands, {node.op} takes {_arity_text(op.arity)}"]
    if node.dtype not in dtypes.SHORT_NAMES:
        return [f"dtype {node.dtype} is not supported"]
    attrs = dict(node.attrs)
    try:
        given_dtype = node.dtype if node.op in _GIVEN_DTYPE else None
        given_shape = node.shape if node.op == "input" else None
        dt, shape = infer(node.op, list(node.operands), attrs, given_dtype, given_shape)
    except FusecError as exc:
        return [exc.message]
    except (KeyError, TypeError) as exc:
        return [f"missing or bad attribute {exc}"]
    problems = []
    if (dt, shape) != (node.dtype, tuple(node.shape)):
        problems.append(f"has type {_type(node.dtype, node.shape)} but its operands and attributes give "
                        f"{_type(dt, shape)}")
    if node.op == "const":
        value = attrs.get("value")
        try:
            ok = _same_scalar(value, dtypes.scalar_constant(value, node.dtype))
        except (FusecError, TypeError, ValueError):
            ok = False
        if not ok:
            problems.append(f"value {value!r} is not a {dtypes.short(node.dtype)} scalar")
    if node.op == "input":
        name, index = attrs.get("name"), attrs.get("index")
        if not isinstance(name, str) or not _INPUT_NAME.match(name):
            problems.append(f"name {name!r} is not an identifier")
        if not isinstance(index, int) or isinstance(index, bool):
            problems.append(f"index {index!r} is not an int")
    return problems


def _input_problems(graph: Graph, names: Mapping[Node, str]) -> list[str]:
    problems = []
    seen: dict[object, int] = {}
    for i, node in enumerate(graph.inputs):
        label = f"{names.get(node, '?')} ({node.op})"
        if node.op != "input":
            problems.append(f"{label}: argument {i} is not an input node")
            continue
        if node.attr("index") != i:
            problems.append(f"{label}: has index {node.attr('index')!r} but is argument {i}")
        name = node.attr("name")
        if name in seen:
            problems.append(f"{label}: name {name!r} is also argument {seen[name]}'s")
        seen.setdefault(name, i)
    arguments = set(graph.inputs)
    for node in graph.nodes:
        if node.op == "input" and node not in arguments:
            problems.append(f"{names[node]} (input): is used but is not among the graph's inputs")
    return problems


def _region_problems(graph: Graph, names: Mapping[Node, str]) -> list[str]:
    assert graph.regions is not None
    problems: list[str] = []
    index = {n: i for i, n in enumerate(graph.nodes)}
    member_of: dict[Node, list[Region]] = {}
    seen_names: set[str] = set()
    for r in graph.regions:
        label = f"region {global_name(r.name)}"
        if r.kind not in REGION_KINDS:
            problems.append(f"{label}: unknown kind {r.kind!r} (kinds: {', '.join(REGION_KINDS)})")
        if r.name in seen_names:
            problems.append(f"{label}: the name is used by another region")
        seen_names.add(r.name)
        for n in r.nodes:
            if n not in index:
                problems.append(f"{label}: holds a {n.op} node that is not part of the graph")
            elif n.op == "input":
                problems.append(f"{label}: holds the input {names[n]}; inputs are never region members")
            else:
                member_of.setdefault(n, []).append(r)
        positions = [index[n] for n in r.nodes if n in index]
        if positions != sorted(set(positions)):
            problems.append(f"{label}: nodes are not in graph.nodes order (or repeat)")
        elif r.kind in REGION_KINDS and all(n in index and n.op != "input" for n in r.nodes):
            problems += _space_problems(r, label)
    expected_regions = make_regions([(r.name, r.kind, r.nodes) for r in graph.regions], graph.users,
                                    graph.outputs)
    for r, expected in zip(graph.regions, expected_regions):
        label = f"region {global_name(r.name)}"
        for part in ("inputs", "outputs"):
            got, want = getattr(r, part), getattr(expected, part)
            if got != want:
                problems.append(f"{label}: {part} are ({', '.join(names.get(n, '?') for n in got)}) but "
                                f"make_regions gives ({', '.join(names.get(n, '?') for n in want)})")
    after = outside_kernels(graph)  # views of arguments and results, taken by the runtime
    for node in graph.nodes:
        if node.op == "input":
            continue
        regions = member_of.get(node, [])
        if not regions and node.kind is not Kind.SOURCE and node not in after:
            problems.append(f"{_label(node, names)}: is in no region")
        if len(regions) > 1 and node.kind not in (Kind.ELEMENTWISE, Kind.LAYOUT, Kind.SOURCE):
            held = ", ".join(global_name(r.name) for r in regions)
            problems.append(f"{_label(node, names)}: is in regions {held}; only elementwise, layout and "
                            "source nodes may be recomputed")
    return problems + _quotient_problems(graph, names, member_of)


def _space_problems(region: Region, label: str) -> list[str]:
    """The region's nodes are one kernel (one iteration space) of the region's kind."""
    problem = kind_problem(region)
    return [f"{label}: {problem}"] if problem else []


def _quotient_problems(graph: Graph, names: Mapping[Node, str],
                       member_of: dict[Node, list[Region]]) -> list[str]:
    """A cycle in the graph of groups (regions, and top-level nodes on their own). A region reads a
    recomputed node that it does not hold from the first region that holds it."""
    def groups(n: Node) -> list[tuple[str, object]]:
        return [("region", id(r)) for r in member_of[n]] if n in member_of else [("node", n)]

    label = {("region", id(r)): f"region {global_name(r.name)}" for r in graph.regions or ()}
    quotient = nx.DiGraph()
    for node in graph.nodes:
        if node.op == "input":
            continue
        mine = groups(node)
        quotient.add_nodes_from(mine)
        for operand in node.operands:
            if operand.op == "input":
                continue
            theirs = groups(operand)  # read from outside: from its first region, where it is printed
            quotient.add_edges_from((theirs[0], g) for g in mine if g not in theirs)
    if nx.is_directed_acyclic_graph(quotient):
        return []
    cycle = [a for a, _ in nx.find_cycle(quotient)]
    path = [label.get(g) or (_label(g[1], names) if isinstance(g[1], Node) else "?")  # type: ignore[call-overload]
            for g in cycle + cycle[:1]]
    return ["regions form a cycle: " + " -> ".join(path)]
