"""Views sink to the arrays they read: ``slice(f(a, b))`` becomes ``f(slice(a), slice(b))``.

A ``slice`` of a function input is index arithmetic inside the kernel that reads it (an offset and strides:
:mod:`fusec.schedule.nest`), but a slice of a value computed in the same kernel would need elements other
threads compute. So every slice is moved down to the arrays: through elementwise ops (each operand sliced
along its own axes; a broadcast axis stays as it is), ``broadcast_to``, ``transpose``, ``expand_dims``,
``squeeze``, another slice (composed into one), gathers (the array's kept axes sliced; a view that selects
some of the indices stops at the gather, which then checks every index, as NumPy does) and reductions (the kept
axes sliced, the reduced ones whole). What is computed then is only the selected part: ``exp(x)[::2]`` computes
half the exponentials. A value read through many different views is computed once instead
(:mod:`fusec.passes.kept_values`). A slice selecting nothing becomes an empty constant; one selecting everything
disappears. After this, slices sit on function inputs only (fusion's form, which ``fuse`` applies to every graph).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

from fusec.ir import windows
from fusec.ir.graph import Node, make_node
from fusec.ir.infer import Bound, gather_window, slice_attrs, slice_bounds
from fusec.ir.ops import Kind

Bounds = tuple[Bound, ...]


class _Sinking:
    """What every sinking of one pass run shares (:func:`shared_sinking`): the (value, bounds) pairs built, per kind
    of sinking ("slice", "window"), and the values it stops at (:func:`fusec.passes.kept_values.kept_in_memory`)."""

    def __init__(self, kept: set[Node]):
        self.built: dict[str, dict[tuple[Node, tuple], Node]] = {}
        self.kept = kept
        self.steps = 0  # (value, bounds) pairs taken from the work stack: the work done


_SHARED: contextvars.ContextVar[_Sinking | None] = contextvars.ContextVar("fusec_sinking", default=None)


@contextlib.contextmanager
def shared_sinking(kept: set[Node] | None = None) -> Iterator[_Sinking]:
    """Within it, every sinking shares what it built: nodes are interned, so a (value, bounds) pair's result depends
    on the pair only, and a chain whose every level is read through a view (``x = x[::-1] + x``) is walked once, not
    once per level; and no sinking passes a value of ``kept`` (its views read it from memory). A pass that rewrites
    the graph adds the new versions of kept values to ``kept`` as it makes them (:func:`fusec.ir.graph.rewrite`'s
    ``follow``)."""
    state = _Sinking(set() if kept is None else kept)
    token = _SHARED.set(state)
    try:
        yield state
    finally:
        _SHARED.reset(token)


def _whole(n: Node) -> Bounds:
    return tuple((0, 1, d) for d in n.shape)


def _is_identity(n: Node, bounds: Bounds) -> bool:
    return all(b == (0, 1, d) or (d == 0 and b[2] == 0) for b, d in zip(bounds, n.shape))


def operand_bounds(y: Node, bounds: Bounds) -> list[tuple[Node, Bounds | None]] | None:
    """Each operand of ``y`` with the bounds that select what ``y[bounds]`` reads of it (None: the operand
    as it is, a 0-d value), or None when the slice cannot move below ``y``."""
    if y.kind is Kind.ELEMENTWISE or y.op == "broadcast_to":
        out = []
        for o in y.operands:
            off = y.ndim - o.ndim
            ob = tuple(bounds[j + off] if o.shape[j] == y.shape[j + off] else (0, 1, o.shape[j])
                       for j in range(o.ndim))
            out.append((o, ob if o.ndim else None))
        return out
    if y.kind is Kind.GATHER:  # the kept axes of the array (within its window) and the index operands
        x, indices = y.operands[0], y.operands[1:]
        axes = y.attr("axes")
        dim_of = dict(zip([j for j in range(x.ndim) if j not in axes], y.attr("dims")))
        window = gather_window(x.shape, dict(y.attrs)) or [(0, 1, d) for d in x.shape]
        if any(len(b) == 5 and windows.clamps(b) for b in bounds):  # a clamping window: no slice of the array
            return None
        xb = []
        for j, (f, s, c) in enumerate(window):
            if j in dim_of and c == y.shape[dim_of[j]]:
                f2, s2, c2 = bounds[dim_of[j]][:3]
                xb.append((f + s * f2, s * s2, c2))
            else:
                xb.append((f, s, c))
        out = [(x, tuple(xb))]
        for a, i in zip(axes, indices):
            ib = tuple(bounds[k] if i.shape[k] == y.shape[k] else (0, 1, i.shape[k]) for k in range(i.ndim))
            if any(b[:3] != (0, 1, d) for b, d in zip(ib, i.shape)) and not _in_range(i, window[a][2]):
                # the view selects some of the indices: every index is still checked where NumPy checks it
                # (x[i][::2] raises for any i out of range), so the gather is computed whole, the view reads it
                return None
            out.append((i, ib if i.ndim else None))
        return out
    (x,) = y.operands if len(y.operands) == 1 else (None,)
    if x is None:
        return None
    if y.op == "transpose":
        xb: list = [None] * x.ndim
        for k, p in enumerate(y.attr("perm")):
            xb[p] = bounds[k]
        return [(x, tuple(xb))]
    if y.op == "expand_dims":
        new = set(y.attr("axes"))
        return [(x, tuple(b for k, b in enumerate(bounds) if k not in new))]
    if y.op == "squeeze":
        gone = set(y.attr("axes"))
        it = iter(bounds)
        return [(x, tuple((0, 1, 1) if j in gone else next(it) for j in range(x.ndim)))]
    if y.op == "slice":
        inner = slice_bounds(x.shape, dict(y.attrs))
        return [(x, tuple((f + s * f2, s * s2, c2) for (f, s, _), (f2, s2, c2) in zip(inner, bounds)))]
    if y.kind is Kind.SCAN:  # a prefix of the scanned axis, any slice of the others: the scan of that slice
        along = bounds[y.attr("axis")]
        if len(along) != 3:  # a window (fusec.passes.windows): a prefix only where its clamp never binds
            return [(x, bounds)] if along[:2] == (0, 1) and not windows.clamps(along) else None
        first, step, _ = along
        return [(x, bounds)] if (first, step) == (0, 1) else None
    if y.kind is Kind.REDUCTION:
        axes = set(y.attr("axes"))
        if y.attr("keepdims"):
            return [(x, tuple((0, 1, x.shape[j]) if j in axes else bounds[j] for j in range(x.ndim)))]
        it = iter(bounds)
        return [(x, tuple((0, 1, x.shape[j]) if j in axes else next(it) for j in range(x.ndim)))]
    return None


_INDEX_OPS = {"add": lambda a, b: (a[0] + b[0], a[1] + b[1]), "sub": lambda a, b: (a[0] - b[1], a[1] - b[0]),
              "mul": lambda a, b: (min(p := [x * y for x in a for y in b]), max(p))}


def _in_range(index: Node, n: int, depth: int = 16) -> bool:
    """Whether every value of ``index`` (computed from iotas and constants, as ``diagonal`` builds its positions)
    lies in ``[-n, n)``: a gather's check cannot fail on it, whichever of its indices a view keeps."""
    bounds = _value_range(index, depth)
    return bounds is not None and -n <= bounds[0] and bounds[1] < n


def _value_range(v: Node, depth: int) -> tuple[int, int] | None:
    """The smallest and largest value of an integer ``v`` made of iotas and constants by ``+``, ``-``, ``*`` and
    views (None: it reads anything else)."""
    if depth == 0 or v.dtype.kind not in "iu":
        return None
    if v.op == "const":
        return int(v.attr("value")), int(v.attr("value"))
    if v.op == "iota":
        first, second, count = int(v.attr("start")), int(v.attr("next")), int(v.attr("count"))
        last = first + (second - first) * max(count - 1, 0)
        return min(first, last), max(first, last)
    if v.op in ("slice", "window", "broadcast_to", "expand_dims", "squeeze", "transpose"):
        return _value_range(v.operands[0], depth - 1)
    if v.op in _INDEX_OPS:
        a, b = (_value_range(o, depth - 1) for o in v.operands)
        return None if a is None or b is None else _INDEX_OPS[v.op](a, b)
    return None


def _rebuilt(y: Node, operands: list[Node], bounds: Bounds) -> Node:
    if y.op == "slice":  # composed into its operand's slice
        return operands[0]
    attrs = dict(y.attrs)
    if y.kind is Kind.GATHER:  # the array's operand carries the window now
        attrs = {"axes": attrs["axes"], "dims": attrs["dims"]}
    if y.op == "broadcast_to":
        attrs["shape"] = [b[2] for b in bounds]
    dtype = y.dtype if y.op in ("cast", "const", "size") else None
    return make_node(y.op, operands, attrs, dtype=dtype, loc=y.loc)


def sink_through(x: Node, root: tuple, identity: Callable[[Node, tuple], bool],
                 children: Callable[[Node, tuple], list[tuple[Node, tuple | None]] | None],
                 leaf: Callable[[Node, tuple], Node], kind: str = "slice") -> Node:
    """``x`` read through ``root`` (per axis a slice's or a window's bounds), with the reading moved down to the
    arrays it reads: ``children(y, bounds)`` gives each operand of ``y`` with the bounds it is read through (None:
    as it is), or None where the bounds stop at ``y``, which ``leaf`` then reads through them. Iterative (no
    recursion proportional to the graph), each (value, bounds) pair built once (once per pass run, of pairs of one
    ``kind``, within :func:`shared_sinking`)."""
    shared = _SHARED.get()
    done: dict[tuple[Node, tuple], Node] = {} if shared is None else shared.built.setdefault(kind, {})
    kept = frozenset() if shared is None else shared.kept
    stack: list[tuple[Node, tuple, bool]] = [(x, root, False)]
    steps = 0
    while stack:
        steps += 1
        y, bounds, expanded = stack.pop()
        key = (y, bounds)
        if key in done:
            continue
        if identity(y, bounds):
            done[key] = y
            continue
        kids = None if y in kept else children(y, bounds)
        if kids is None:
            done[key] = leaf(y, bounds)
        elif not expanded:
            stack.append((y, bounds, True))
            stack.extend((o, ob, False) for o, ob in kids if ob is not None and (o, ob) not in done)
        else:
            done[key] = _rebuilt(y, [o if ob is None else done[(o, ob)] for o, ob in kids], bounds)
    if shared is not None:
        shared.steps += steps
    return done[(x, root)]


def sink_slice(node: Node) -> Node | None:
    """``node`` (a ``slice``) with the slice moved down to the arrays it reads; None when it already sits on
    one. Iterative (no recursion proportional to the graph), each (value, bounds) pair built once."""
    if node.op != "slice":
        return None
    x = node.operands[0]
    root = tuple(slice_bounds(x.shape, dict(node.attrs)))
    if 0 in node.shape:
        zero = make_node("const", (), {"value": 0}, dtype=node.dtype, loc=node.loc)
        return make_node("broadcast_to", [zero], {"shape": list(node.shape)}, loc=node.loc)
    if operand_bounds(x, root) is None and not _is_identity(x, root):  # on an array already: canonical bounds
        canonical = make_node("slice", [x], slice_attrs(list(root)), loc=node.loc)
        return None if canonical is node else canonical
    return sink_through(x, root, _is_identity, operand_bounds,
                        lambda y, bounds: make_node("slice", [y], slice_attrs(list(bounds)), loc=node.loc))
