"""Windows sink to the arrays they read, as slices do (:mod:`fusec.passes.views`).

``window(f(a, b))`` becomes ``f(window(a), window(b))``: a window only says which element each result element
reads, so it moves through elementwise ops (each operand windowed along its own axes; a broadcast axis stays as
it is), ``broadcast_to``, ``transpose``, ``expand_dims``, ``squeeze`` and reductions (the kept axes windowed, the
reduced ones whole). A window of a slice or of a window, and a slice of a window, compose into one window
(:func:`fusec.ir.windows.compose`); a window whose clamp never binds is a slice, and one that selects everything
disappears. After this every window sits on an array the kernel reads from memory (or on an ``iota``), where
the kernel reads it through a clamped index (:mod:`fusec.schedule.nest`).
"""

from __future__ import annotations

from fusec.ir import windows
from fusec.ir.graph import Node, make_node
from fusec.ir.infer import slice_attrs, slice_bounds
from fusec.ir.windows import AxisWindow
from fusec.passes.views import operand_bounds, sink_through

Bounds = tuple[AxisWindow, ...]


def _as_window(bounds: tuple, shape: tuple[int, ...]) -> Bounds:
    """Bounds from :func:`fusec.passes.views.operand_bounds` (windows passed through, slices' whole axes as
    ``(0, 1, n)``) as windows."""
    return tuple(b if len(b) == 5 else windows.of_slice(b[0], b[1], b[2], n) for b, n in zip(bounds, shape))


def is_identity(n: Node, bounds: Bounds) -> bool:
    return all((b[:3] == (0, 1, d) and not windows.clamps(b)) or (d == 0 and b[2] == 0)
               for b, d in zip(bounds, n.shape))


def _view_of(x: Node, bounds: Bounds, loc: str | None) -> Node:
    """``x`` read through ``bounds``: itself, a slice where no clamp binds, else a window."""
    # one element along an axis: the clamped index itself (any step)
    bounds = tuple((min(max(b[0], b[3]), b[4]), 1, 1, b[3], b[4]) if b[2] == 1 else b for b in bounds)
    if is_identity(x, bounds):
        return x
    if not any(windows.clamps(b) or (b[1] == 0 and b[2] > 1) for b in bounds):
        return make_node("slice", [x], slice_attrs([b[:3] for b in bounds]), loc=loc)
    return make_node("window", [x], windows.attrs_of(bounds), loc=loc)


def below(x: Node, bounds: Bounds) -> tuple[Node, Bounds]:
    """Compose ``bounds`` into the slices and windows ``x`` is (repeatedly): the array they read, and the
    bounds over it."""
    while x.op in ("slice", "window"):
        inner = x.operands[0]
        if x.op == "slice":
            own = tuple(windows.of_slice(f, s, c, n) for (f, s, c), n in zip(slice_bounds(inner.shape, dict(x.attrs)),
                                                                             inner.shape))
        else:
            own = tuple(windows.axes_of(dict(x.attrs)))
        bounds = tuple(windows.compose(i, o) for i, o in zip(own, bounds))
        x = inner
    return x, bounds


def children(y: Node, bounds: Bounds) -> list[tuple[Node, Bounds | None]] | None:
    """Each operand of ``y`` with the window it is read through, composed into the slices and windows it is."""
    kids = None if y.op in ("slice", "window") else operand_bounds(y, bounds)
    if kids is None:
        return None
    return [(o, None) if ob is None else below(o, _as_window(ob, o.shape)) for o, ob in kids]


def sink_window(node: Node) -> Node | None:
    """``node`` (a ``window``, or a ``slice`` of one) with the window moved down to the arrays it reads; None when
    it already sits on one in canonical form."""
    if node.op == "slice" and node.operands[0].op != "window":
        return None
    if node.op not in ("slice", "window"):
        return None
    if 0 in node.shape:
        zero = make_node("const", (), {"value": 0}, dtype=node.dtype, loc=node.loc)
        return make_node("broadcast_to", [zero], {"shape": list(node.shape)}, loc=node.loc)
    x, root = below(node, tuple((0, 1, d, 0, max(d - 1, 0)) for d in node.shape))
    if any(n == 1 and b[2] != 1 for n, b in zip(x.shape, root)):  # a size-1 axis repeated: a broadcast of it
        single = tuple((0, 1, 1, 0, 0) if n == 1 else b for n, b in zip(x.shape, root))
        inner = _view_of(x, single, node.loc)
        inner = (sink_window(inner) or inner) if inner.op == "window" else inner
        return make_node("broadcast_to", [inner], {"shape": list(node.shape)}, loc=node.loc)
    result = sink_through(x, root, is_identity, children, lambda y, bounds: _view_of(y, bounds, node.loc), "window")
    return None if result is node else result
