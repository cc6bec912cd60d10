"""fold: evaluate ops whose operands are all constants, with NumPy's own semantics.

The value is computed by the reference interpreter on 0-d arrays, so it is exactly what NumPy
gives (integer wrap-around, float16 rounding, NaN). ``size`` nodes are not folded: they depend on
the input shapes, and leaving them as kernel parameters keeps kernels independent of sizes.
"""

from __future__ import annotations

import numpy as np

from fusec.ir.graph import Graph, Node, make_node, rewrite
from fusec.ir.interpret import evaluate_node
from fusec.ir.ops import Kind
from fusec.passes.registry import register


def _fold(node: Node) -> Node:
    if node.kind is Kind.SOURCE or node.shape != () or not node.operands:
        return node
    if not all(o.op == "const" for o in node.operands):
        return node
    args = [np.asarray(o.attr("value"), dtype=o.dtype) for o in node.operands]
    try:
        with np.errstate(all="ignore"):
            value = np.asarray(evaluate_node(np, node, args))
    except (ValueError, ArithmeticError):  # NumPy raises (an integer to a negative power): so must the run
        return node
    return make_node("const", (), {"value": value.item()}, dtype=node.dtype, loc=node.loc)


@register("fold", "evaluate ops on constants with NumPy's semantics")
def fold(graph: Graph) -> Graph:
    return rewrite(graph, _fold)
