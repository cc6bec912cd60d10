"""Printing the IR's text form: :func:`print_graph` prints a graph canonically (:func:`fusec.ir.text.parse` reads it
back; the module docstring there describes the form). Nodes, graphs and regions are read here, never built, so the
printer imports none of their modules at run time: ``Graph.__str__`` prints through it.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING

import numpy as np

from fusec.ir import dtypes
from fusec.support.errors import VerifyError

if TYPE_CHECKING:
    from fusec.ir.graph import Graph, Node
    from fusec.ir.infer import Shape
    from fusec.ir.region import Region

    _Block = tuple[Region | None, list[Node]]

_BARE_GLOBAL = re.compile(r"[A-Za-z0-9_.]+\Z")


def block_layout(graph: Graph) -> tuple[list[_Block], dict[Node, str], str | None]:
    """The printed blocks (region or None for top level, its nodes), the names, and a problem if the
    regions cannot be printed in the order given (a block reads a node printed after it)."""
    index = {n: i for i, n in enumerate(graph.nodes)}
    body = [n for n in graph.nodes if n.op != "input"]
    blocks: list[_Block] = []
    if graph.regions is None:
        blocks.append((None, body))
    else:
        home: dict[Node, Region] = {}
        for r in graph.regions:
            for n in r.nodes:
                if n in index and n.op != "input":
                    home.setdefault(n, r)
        printed: set[Node] = set()
        for r in graph.regions:
            own = [n for n in dict.fromkeys(r.nodes) if home.get(n) is r]
            own.sort(key=index.__getitem__)
            needed, stack, seen = [], [o for n in own for o in n.operands], set(own)
            while stack:  # top-level nodes this block reads, directly or through other nodes
                n = stack.pop()
                if n in seen or n in printed or n.op == "input":
                    continue
                seen.add(n)
                if n not in home:
                    needed.append(n)
                stack.extend(n.operands)
            if needed:
                blocks.append((None, sorted(needed, key=index.__getitem__)))
            blocks.append((r, own))
            printed.update(needed, own)
        rest = [n for n in body if n not in printed]
        if rest:
            blocks.append((None, rest))
    names = {n: "%" + str(n.attr("name", "?")) for n in graph.nodes if n.op == "input"}
    for i, n in enumerate(n for _, nodes in blocks for n in nodes):
        names[n] = f"%{i}"
    problem, defined = None, {n for n in graph.nodes if n.op == "input"}
    for r, nodes in blocks:
        for n in nodes:
            late = [o for o in n.operands if o not in defined]
            if late and problem is None:
                where = f"kernel {global_name(r.name)}" if r else "top level"
                problem = (f"regions are not in dependency order: {names[n]} ({n.op}) in {where} reads "
                           f"{names.get(late[0], '?')}, which is printed after it")
            defined.add(n)
    return blocks, names, problem


def node_names(graph: Graph) -> dict[Node, str]:
    """Each node's text name: ``%x`` for an input named ``x``, ``%0, %1, ...`` for the others in
    printed order (``graph.nodes`` order when there are no regions)."""
    return block_layout(graph)[1]


def type_text(dt: np.dtype, shape: Shape) -> str:
    return f"{dtypes.short(dt)}[{','.join(map(str, shape))}]"


def global_name(name: str) -> str:
    return "@" + (name if _BARE_GLOBAL.match(name) else json.dumps(name))


def _value(v: object) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)
    if v is None:
        return "none"
    if isinstance(v, float):
        return _float_text(v, repr(float(v)))
    return str(v)


def _float_text(v: float, text: str) -> str:
    """``text``, or ``-nan`` for a NaN with its sign bit set: str() and repr() drop a NaN's sign, which
    copysign and signbit read."""
    return "-nan" if math.isnan(v) and math.copysign(1.0, v) < 0 else text


def _float_str(v: float, dt: np.dtype) -> str:
    """A float constant of ``dt`` as NumPy prints its scalar; bfloat16 as the Python float it is exactly (ml_dtypes
    prints ``-0`` and 6 digits: the parser would read an int)."""
    return repr(float(dt.type(v))) if dt == dtypes.BFLOAT16 else str(dt.type(v))


def _attrs(attrs: tuple[tuple[str, object], ...], skip: tuple[str, ...]) -> str:
    items = [f"{k}={_value(v)}" for k, v in attrs if k not in skip]
    return " {" + ", ".join(items) + "}" if items else ""


def _line(node: Node, names: dict[Node, str]) -> str:
    text = f"{names[node]} = {node.op}"
    if node.op == "const":
        v = node.attr("value")
        text += " " + (_float_text(v, _float_str(v, node.dtype)) if dtypes.kind(node.dtype) == "f" else _value(v))
    if node.operands:
        text += " " + ", ".join(names[o] for o in node.operands)
    attrs = _attrs(node.attrs, ("value",) if node.op == "const" else ())
    return f"{text}{attrs} : {type_text(node.dtype, node.shape)}"


def print_graph(graph: Graph) -> str:
    """The canonical text of ``graph`` (no trailing newline)."""
    blocks, names, problem = block_layout(graph)
    if problem:
        raise VerifyError(problem, loc=f"func {global_name(graph.name)}")
    sig = ", ".join(f"{names[n]}: {type_text(n.dtype, n.shape)}{_attrs(n.attrs, ('name', 'index'))}"
                    for n in graph.inputs)
    outs = [type_text(n.dtype, n.shape) for n in graph.outputs]
    lines = [f"func {global_name(graph.name)}({sig}) -> "
             f"{outs[0] if len(outs) == 1 else '(' + ', '.join(outs) + ')'} {{"]
    placed: set[Node] = set()
    for region, nodes in blocks:
        if region is None:
            lines += ["  " + _line(n, names) for n in nodes]
            continue
        again = [names[n] for n in dict.fromkeys(region.nodes) if n in placed]
        lines.append(f"  kernel {global_name(region.name)} {region.kind}"
                     + (" recomputes " + ", ".join(again) if again else "") + " {")
        lines += ["    " + _line(n, names) for n in nodes]
        lines.append("  }")
        placed.update(nodes)
    if graph.regions == ():
        lines.append("  no kernels")  # partitioned, with nothing to run: not the same as unpartitioned
    lines.append(("  return " + ", ".join(names[n] for n in graph.outputs)).rstrip())
    lines.append("}")
    return "\n".join(lines)


__all__ = ["block_layout", "global_name", "node_names", "print_graph", "type_text"]
