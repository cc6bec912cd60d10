"""Values computed once, into memory, for their views: where the sinking of views (:mod:`fusec.passes.views`,
:mod:`fusec.passes.windows`) stops.

Sinking a view through a value computes the value again for that view: ``exp(x)[::2]`` computes half the
exponentials, and ``y[1:] - y[:-1]`` computes ``y`` twice, each time where it is read. That is cheap while a value
is read through a few views; but the values below it are then read through every composition of the views above
them, and an unrolled stencil (``u = u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))``, n steps) reads its first
step through some 5^n of them: planning time and kernel code explode, and the kernel recomputes each step as often.

So a value read through more than :data:`VIEWS_PER_VALUE` different views (slices and windows, composed through the
views and values above it exactly as sinking composes them) is computed whole, once, and its views read it from
memory: a kernel boundary (fusion never puts a view in the kernel that computes what it views:
:func:`fusec.ir.region.slice_problem`). Sinking then builds at most ``VIEWS_PER_VALUE + 1`` (value, view) pairs per
value of the graph: linear work.

The choice is a fixpoint: on the graph that sinking leaves, the values kept are read through the same views (now
directly), the others through fewer; a later pass (fusion after canonicalize) keeps the same ones.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

from fusec.ir import windows
from fusec.ir.graph import Graph, Node, rewrite
from fusec.ir.ops import Kind
from fusec.passes.views import shared_sinking
from fusec.passes.windows import Bounds, below, children, is_identity

VIEWS_PER_VALUE = 8  # different views of one value that are each computed where they are read
VIEW_OPS = ("slice", "window")
# what reads each operand whole when read whole itself (a gather reads its array through its own window)
WHOLE_READS_WHOLE = frozenset({Kind.ELEMENTWISE, Kind.REDUCTION, Kind.SCAN, "transpose", "expand_dims", "squeeze",
                               "broadcast_to"})


def kept_in_memory(graph: Graph, limit: int = VIEWS_PER_VALUE) -> frozenset[Node]:
    """The computed values of ``graph`` that sinking leaves its views on (see the module docstring); none, without
    looking further, when no view reads a computed value."""
    if not any(n.op in VIEW_OPS and n.operands[0].operands for n in graph.nodes):
        return frozenset()
    reads: dict[Node, set[Bounds | None]] = defaultdict(set)  # value -> the views it is read through (None: whole)

    def read(node: Node, bounds: Bounds | None) -> None:
        if bounds is not None:
            node, bounds = below(node, bounds)
        if node.operands and node.op not in VIEW_OPS:
            reads[node].add(None if bounds is None or is_identity(node, bounds) else bounds)

    for out in graph.outputs:
        read(out, _whole(out))
    kept: set[Node] = set()
    for y in reversed(graph.nodes):
        seen = reads.pop(y, None)
        if not seen:
            continue
        if sum(b is not None for b in seen) > limit:
            kept.add(y)
            seen = {None}
        for bounds in seen:
            if bounds is None and (y.kind in WHOLE_READS_WHOLE or y.op in WHOLE_READS_WHOLE):
                for o in y.operands:  # read whole, the operands are read whole (or through the views they are)
                    if o.op in VIEW_OPS:
                        read(o, _whole(o))
                    elif o.operands:
                        reads[o].add(None)
                continue
            kids = children(y, _whole(y) if bounds is None else bounds)
            if kids is None:  # the view stops at y (a scan, a clamped gather): y is read from memory, whole
                for o in y.operands:
                    read(o, _whole(o))
                continue
            for o, ob in kids:
                if ob is not None:
                    read(o, ob)
    return frozenset(kept)


def _whole(n: Node) -> Bounds:
    return tuple(windows.whole(d) for d in n.shape)


def sunk_rewrite(graph: Graph, fn: Callable[[Node], Node], counts: Counter | None = None) -> Graph:
    """:func:`fusec.ir.graph.rewrite` for a pass whose ``fn`` sinks views: the sinkings share what they build and
    stop at the values :func:`kept_in_memory` keeps. ``counts`` gets the work: ``sink_steps`` (pairs taken up by
    sinking), ``kept`` (values kept for their views)."""
    kept = set(kept_in_memory(graph))
    first = len(kept)
    with shared_sinking(kept) as state:
        result = rewrite(graph, fn, kept)
    if counts is not None:
        counts["sink_steps"] += state.steps
        counts["kept"] += first
    return result
