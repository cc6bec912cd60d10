"""Views of arguments on Dask arrays: after the cleanup passes every ``slice`` sits on a function input
(:mod:`fusec.passes.views` moves slices down to the arrays they read), so each such slice is taken as a slice
of the argument itself (Dask's own indexing: chunk selection and index arithmetic, no data moved before it
computes), and the stages see whole inputs. The rewritten graph and the slices to take are cached per graph.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from fusec.ir.graph import Graph, Node, make_node, rewrite
from fusec.ir.infer import slice_bounds
from fusec.lru import LRU

Pick = tuple[int, tuple[slice, ...] | None]  # (argument index, the slices to take of it, or None: as it is)

_CACHE: LRU[Graph, tuple[Graph, tuple[Pick, ...]]] = LRU(64)
_LOCK = threading.Lock()


def python_slices(operand: Node, slice_node: Node) -> tuple[slice, ...]:
    """The Python slices that select what ``slice_node`` selects of ``operand`` (an integer index as a slice of
    one element: the ``slice`` op keeps the axis, a ``squeeze`` after it drops it)."""
    out = []
    for first, step, count in slice_bounds(operand.shape, dict(slice_node.attrs)):
        if count == 0:
            out.append(slice(0, 0, 1))
            continue
        stop = first + step * count
        out.append(slice(first, stop if stop >= 0 else None, step))
    return tuple(out)


def inputs_through_views(graph: Graph) -> tuple[Graph, tuple[Pick, ...]]:
    """``graph`` after the cleanup passes, with each slice of an input replaced by an input of its own, and
    for every input of the result which argument it is and the slices to take of it."""
    with _LOCK:
        hit = _CACHE.get(graph)
    if hit is not None:
        return hit
    from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline

    cleaned = run_pipeline(graph, CLEANUP_PIPELINE)
    index = {node: k for k, node in enumerate(cleaned.inputs)}
    picks: list[Pick] = [(k, None) for k in range(len(cleaned.inputs))]
    views: dict[Node, Node] = {}

    def as_input(node: Node) -> Node:
        if node.op != "slice" or node.operands[0] not in index:
            return node
        if node not in views:
            source = node.operands[0]
            views[node] = make_node("input", (), {"name": f"{source.attr('name')}_view{len(views)}",
                                                  "index": len(picks)}, dtype=node.dtype, shape=node.shape,
                                    loc=node.loc)
            picks.append((index[source], python_slices(source, node)))
        return views[node]

    rewritten = rewrite(cleaned, as_input)
    result = (Graph(rewritten.name, rewritten.inputs + tuple(views.values()), rewritten.outputs), tuple(picks))
    with _LOCK:
        _CACHE.put(graph, result)
    return result


def picked(arrays: Sequence[Any], picks: Sequence[Pick]) -> list[Any]:
    """The arrays the rewritten graph's inputs are: each argument, or the slice of it a pick names."""
    return [arrays[k] if slices is None else arrays[k][slices] for k, slices in picks]
