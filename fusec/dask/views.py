"""Views of arguments on Dask arrays: after the cleanup passes every ``slice`` sits on a function input
(:mod:`fusec.passes.views` moves slices down to the arrays they read), so each such slice is taken as a slice
of the argument itself (Dask's own indexing: chunk selection and index arithmetic, no data moved before it
computes), and the stages see whole inputs. So is every ``window`` of an input (a pad's or a join's clamped
indices: Dask's indexing by an integer array per clamped axis), and every ``iota`` (``numpy.arange``'s values)
becomes a one-chunk array of the chunks' library. The rewritten graph and the views to take are cached per graph.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusec.ir import windows
from fusec.ir.graph import Graph, Node, make_node, rewrite
from fusec.ir.infer import slice_bounds
from fusec.support.lru import LRU

# (argument index, the view to take of it: None (as it is), a tuple of slices, or ("window", per-axis windows));
# an iota is (-1, ("iota", node))
Pick = tuple[int, Any]

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

    iotas: dict[Node, Node] = {}  # the input standing for an iota -> the iota

    def as_input(node: Node) -> Node:
        if node.op == "iota" or (node.op in ("slice", "window") and node.operands[0] in iotas):
            if node not in views:
                views[node] = make_node("input", (), {"name": f"iota{len(views)}", "index": len(picks)},
                                        dtype=node.dtype, shape=node.shape, loc=node.loc)
                if node.op == "iota":
                    iotas[views[node]] = node
                    picks.append((-1, ("iota", node)))
                else:  # a view of an iota: the view of its values
                    picks.append((-1, ("iota", make_node(node.op, [iotas[node.operands[0]]], dict(node.attrs)))))
            return views[node]
        if node.op not in ("slice", "window") or node.operands[0] not in index:
            return node
        if node not in views:
            source = node.operands[0]
            views[node] = make_node("input", (), {"name": f"{source.attr('name')}_view{len(views)}",
                                                  "index": len(picks)}, dtype=node.dtype, shape=node.shape,
                                    loc=node.loc)
            view = (python_slices(source, node) if node.op == "slice"
                    else ("window", tuple(windows.axes_of(dict(node.attrs)))))
            picks.append((index[source], view))
        return views[node]

    rewritten = rewrite(cleaned, as_input)
    result = (Graph(rewritten.name, rewritten.inputs + tuple(views.values()), rewritten.outputs), tuple(picks))
    with _LOCK:
        _CACHE.put(graph, result)
    return result


def _take(array: Any, view: Any, library: Any) -> Any:
    if view is None:
        return array
    if view[0] == "iota":  # an iota, or a slice or window of one
        from fusec.ir.interpret import run_nodes

        node = view[1]
        return run_nodes(library, [*node.operands, node], {})[node]
    if view[0] == "window":
        for j, w in enumerate(view[1]):
            if w[:3] != (0, 1, array.shape[j]) or windows.clamps(w):
                array = array[(slice(None),) * j + (windows.indices(w, np),)]
        return array
    return array[view]


def picked(arrays: Sequence[Any], picks: Sequence[Pick]) -> list[Any]:
    """The arrays the rewritten graph's inputs are: each argument, the slice or window of it a pick names, or an
    iota's values (in the chunks' library)."""
    library = np
    metas = [getattr(a, "_meta", a) for a in arrays]
    if any(type(m).__module__.startswith("cupy") for m in metas):
        import cupy

        library = cupy
    return [_take(arrays[k] if k >= 0 else None, view, library) for k, view in picks]
