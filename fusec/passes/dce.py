"""dce: dead-code elimination.

A Graph holds exactly the nodes reachable from its outputs (plus its inputs, which are the
function's signature), so nodes nothing reads are dropped by construction: a parsed ``.fir``
with dead lines prints without them. The pass also drops fusion regions left empty.
"""

from __future__ import annotations

from fusec.ir.graph import Graph
from fusec.passes.registry import register


@register("dce", "drop nodes no output depends on (a graph holds only reachable nodes)")
def dce(graph: Graph) -> Graph:
    if graph.regions is None or all(r.nodes for r in graph.regions):
        return graph
    return Graph(graph.name, graph.inputs, graph.outputs, tuple(r for r in graph.regions if r.nodes),
                 graph.refusals)
