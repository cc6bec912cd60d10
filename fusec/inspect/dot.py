"""The fused DAG of an :class:`fusec.inspect.explain.Explanation` as Graphviz DOT text (``Explanation.to_dot``).

Each kernel is a ``subgraph cluster_<name>`` filled with its colour (the same hue as the kernel's name
in the coloured terminal report), labelled with its name, kind, iteration space and bytes. Nodes are
labelled with their IR name (as the optimized IR prints them), op and type. Inputs and outputs are
grey house shapes; constants a kernel reads are drawn inside that kernel; a node recomputed by several
kernels is drawn in each, dashed in all but the first. An intermediate written to memory by one kernel
and read by another has a bold red double border, and the edges into its readers are bold and red.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.printer import node_names
from fusec.runtime.plan import format_bytes

if TYPE_CHECKING:
    from fusec.inspect.explain import Explanation

# Per kernel, cycling: (ANSI colour code, DOT fill colour, DOT border colour); the terminal report and
# the drawing give kernel i the same hue.
PALETTE = (
    ("32", "#e8f5e9", "#2e7d32"),  # green
    ("34", "#e3f2fd", "#1565c0"),  # blue
    ("35", "#f3e5f5", "#6a1b9a"),  # magenta
    ("33", "#fff3e0", "#e65100"),  # orange / yellow
    ("36", "#e0f7fa", "#00838f"),  # cyan
)
MATERIALIZED_COLOR = "#c62828"


def _q(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def type_text(node: Node) -> str:
    """``f32[8192,1]``, as the IR text writes a type."""
    return f"{dtypes.short(node.dtype)}[{','.join(map(str, node.shape))}]"


def _const_text(node: Node) -> str:
    """A constant's value as its dtype prints it (``0.001`` for a float32, not ``0.0010000000474974513``)."""
    try:
        return str(np.asarray(node.attr("value"), dtype=node.dtype)[()])
    except (TypeError, ValueError):
        return repr(node.attr("value"))


class _Dot:
    """Builds the DOT text of an :class:`Explanation` (see :meth:`Explanation.to_dot`)."""

    def __init__(self, e: Explanation):
        self.e = e
        self.plan = e.plan
        self.graph = e.plan.graph
        self.names = node_names(self.graph)
        self.index = {n: j for j, n in enumerate(self.graph.nodes)}
        self.inputs = {n: i for i, n in enumerate(self.graph.inputs)}
        self.members = [set(k.nodes) for k in self.plan.kernels]
        self.first_holder: dict[Node, int] = {}  # a node held by a later kernel too is recomputed there
        for i, k in enumerate(self.plan.kernels):
            for n in k.nodes:
                self.first_holder.setdefault(n, i)
        self.owner: dict[Node, int] = {}
        for i, k in enumerate(self.plan.kernels):
            for n in k.outputs:
                self.owner.setdefault(n, i)
        in_kernels = set().union(*self.members) if self.members else set()
        # nodes outside every kernel that something outside the kernels needs (a returned constant, ...);
        # constants and sizes that kernels read are drawn inside each kernel that reads them
        needed: set[Node] = set()
        stack = [n for n in self.graph.outputs if n not in in_kernels and n not in self.inputs]
        while stack:
            n = stack.pop()
            if n not in needed:
                needed.add(n)
                stack += [o for o in n.operands if o not in in_kernels and o not in self.inputs]
        self.free = [n for n in self.graph.nodes if n in needed]
        self.lines: list[str] = []

    def node_label(self, n: Node, kernel: int | None = None) -> str:
        name = self.names.get(n, "")
        if n.op == "const":
            return f"{name} = {_const_text(n)}\n{type_text(n)}"
        attrs = [f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in n.attrs if k in ("axes", "perm", "to")]
        head = " ".join([f"{name} = {n.op}"] + attrs)
        label = f"{head}\n{type_text(n)}"
        if n in self.e.materialized and kernel == self.owner.get(n):
            label += f"\nin memory: {format_bytes(n.nbytes, short=True)}"
        if self.recomputed(n, kernel):
            label += "\nrecomputed here"
        return label

    def recomputed(self, n: Node, kernel: int | None) -> bool:
        return kernel is not None and self.first_holder.get(n, kernel) != kernel

    def node_id(self, n: Node, kernel: int | None) -> str:
        if n in self.inputs:
            return f"in{self.inputs[n]}"
        return f"k{kernel}_n{self.index[n]}" if kernel is not None else f"n{self.index[n]}"

    def source_of(self, operand: Node, kernel: int | None) -> tuple[str, bool]:
        """(the DOT id an edge into ``kernel`` starts from, whether the value crosses memory)."""
        if operand in self.inputs:
            return self.node_id(operand, None), False
        if kernel is not None and (operand in self.members[kernel] or operand.kind is Kind.SOURCE):
            return self.node_id(operand, kernel), False
        if operand in self.owner:
            return self.node_id(operand, self.owner[operand]), kernel is not None
        return self.node_id(operand, None), False

    def emit_node(self, n: Node, kernel: int | None, indent: str) -> None:
        attrs = {"label": _q(self.node_label(n, kernel))}
        if n.kind is Kind.SOURCE:
            attrs.update(shape="plaintext", style='""')
        elif self.recomputed(n, kernel):
            attrs.update(style='"rounded,filled,dashed"')
        elif n in self.e.materialized and kernel == self.owner.get(n):
            attrs.update(style='"rounded,filled,bold"', peripheries="2", penwidth="2.5",
                         color=_q(MATERIALIZED_COLOR))
        self.lines.append(f"{indent}{self.node_id(n, kernel)} [{', '.join(f'{k}={v}' for k, v in attrs.items())}];")

    def text(self) -> str:
        plan, L = self.plan, self.lines
        fused, unfused = format_bytes(plan.bytes_moved, short=True), format_bytes(plan.bytes_moved_unfused, short=True)
        summary = (f"@{self.graph.name}: {len(plan.kernels)} kernel(s), {fused} moved "
                   f"(unfused: {plan.kernel_count_unfused} kernel(s), {unfused})")
        if self.e.materialized:
            summary += "\nbold double border, red edges: intermediates written to memory between kernels"
        L += [f"digraph {_q(self.graph.name)} {{",
              "  rankdir=TB; newrank=true; compound=true;",
              f"  label={_q(summary)}; labelloc=t; fontname=\"Helvetica\";",
              '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="Courier"];',
              '  edge [color="#555555"];']
        for n, i in self.inputs.items():
            L.append(f"  in{i} [label={_q(f'{self.names[n]}: input {i}' + chr(10) + type_text(n))}, "
                     'shape=invhouse, fillcolor="#eeeeee"];')
        for i, k in enumerate(plan.kernels):
            _, fill, border = PALETTE[i % len(PALETTE)]
            reduced = f", reducing {list(k.space.reduced)}" if k.space.reduced else ""
            label = (f"{k.label}\n{k.kind} over {list(k.space.shape)}{reduced}\n"
                     f"reads {format_bytes(k.bytes_read, short=True)}, "
                     f"writes {format_bytes(k.bytes_written, short=True)}")
            L += [f"  subgraph cluster_{k.name} {{",
                  f"    label={_q(label)}; style=\"filled,rounded\"; fillcolor={_q(fill)}; color={_q(border)}; "
                  "penwidth=2; fontname=\"Helvetica\";"]
            sources = [n for n in k.region.inputs if n.kind is Kind.SOURCE and n not in self.inputs]
            for n in dict.fromkeys(sources + list(k.nodes)):
                self.emit_node(n, i, "    ")
            L.append("  }")
        for n in self.free:
            self.emit_node(n, None, "  ")
        for i, k in enumerate(plan.kernels):
            for n in k.nodes:
                self.emit_edges(n, i)
        for n in self.free:
            self.emit_edges(n, None)
        for o, n in enumerate(self.graph.outputs):
            src, _ = self.source_of(n, None)
            L.append(f"  out{o} [label={_q(f'output {o}' + chr(10) + type_text(n))}, shape=house, "
                     'fillcolor="#eeeeee"];')
            L.append(f"  {src} -> out{o};")
        L.append("}")
        return "\n".join(L) + "\n"

    def emit_edges(self, n: Node, kernel: int | None) -> None:
        for operand in dict.fromkeys(n.operands):
            src, crosses = self.source_of(operand, kernel)
            style = f' [color={_q(MATERIALIZED_COLOR)}, penwidth=2.5, style=bold]' if crosses else ""
            self.lines.append(f"  {src} -> {self.node_id(n, kernel)}{style};")


def dot_text(explanation: Explanation) -> str:
    """The DOT text of ``explanation`` (see :meth:`fusec.inspect.explain.Explanation.to_dot`)."""
    return _Dot(explanation).text()
