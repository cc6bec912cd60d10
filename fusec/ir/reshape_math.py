"""The arithmetic of C-order reshapes: which reshapes are views, and the shape both sides refine to.

A C-order reshape keeps each element's flat index. An axis of extent ``d`` whose later axes hold ``inner``
elements covers the flat positions ``inner .. inner * d``; its *cuts* are where the other side's axes start
inside it. The reshape has a *common refinement* (a shape both sides are merges of, such as
``(N, G, C // G, H, W)`` for ``(N, C, H, W) -> (N, G, -1)``) when every cut point divides the next one:
then both sides are the same array over that shape, and kernels can iterate over it with plain strides.
``(2, 3) -> (3, 2)`` has none (its cut points 2 and 3 do not divide each other).

``view_strides`` answers which reshapes of a strided array are views (NumPy's no-copy rule): splitting an
axis always is; merging axes is where they step through memory one after the other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from fusec.ir.graph import Graph, Node, make_node

Shape = tuple[int, ...]


def inner_sizes(shape: Sequence[int]) -> list[int]:
    """The elements after each axis: ``(2, 3, 4) -> [12, 4, 1]``."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def flat_cuts(shape: Sequence[int]) -> set[int]:
    """The flat positions where the axes of extent above 1 start: ``(2, 3, 4) -> {12, 4, 1}``."""
    return {inner for inner, d in zip(inner_sizes(shape), shape) if d > 1}


def is_chain(points: Iterable[int]) -> bool:
    """Whether the sorted ``points`` each divide the next (they are the strides of one grid)."""
    ordered = sorted(set(points))
    return all(b % a == 0 for a, b in zip(ordered, ordered[1:]))


def common_refinement(a: Sequence[int], b: Sequence[int]) -> Shape | None:
    """The coarsest shape both ``a`` and ``b`` (of the same size) are merges of, or None when there is none;
    size-1 axes do not count (an empty array refines to ``(0,)``)."""
    size = math.prod(a)
    if size != math.prod(b):
        raise ValueError(f"{tuple(a)} and {tuple(b)} differ in size")
    if size == 0:
        return (0,)
    points = flat_cuts(a) | flat_cuts(b) | {size}
    if not is_chain(points):
        return None
    ordered = sorted(points, reverse=True)
    return tuple(outer // inner for outer, inner in zip(ordered, ordered[1:] + [1]) if outer // inner > 1)


def sub_extents(extent: int, cuts: Iterable[int]) -> Shape:
    """An axis of ``extent`` cut where ``cuts`` say (inner sizes strictly between 1 and ``extent``): its
    sub-axes, outermost first. ``sub_extents(12, {4}) -> (3, 4)``."""
    points = sorted({c for c in cuts if 1 < c < extent} | {1, extent}, reverse=True)
    return tuple(outer // inner for outer, inner in zip(points, points[1:]))


def only_unit_axes_differ(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether ``a`` and ``b`` are the same extents once size-1 axes are dropped."""
    return [d for d in a if d != 1] == [d for d in b if d != 1]


def view_strides(shape: Sequence[int], strides: Sequence[int], target: Sequence[int]) -> tuple[int, ...] | None:
    """The strides (in elements) of ``target`` as a C-order reshape of an array of ``shape`` with ``strides``,
    or None where it is not a view (merged axes that do not step through memory one after the other)."""
    if math.prod(shape) == 0:
        return tuple(0 for _ in target)
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    out = [0] * len(target)
    new = [k for k, d in enumerate(target) if d != 1]
    i = j = 0
    while i < len(old) and j < len(new):
        # the smallest runs of old and new axes that cover the same elements
        i2, j2 = i + 1, j + 1
        np_old, np_new = old[i][0], target[new[j]]
        while np_old != np_new:
            if np_old < np_new:
                np_old *= old[i2][0]
                i2 += 1
            else:
                np_new *= target[new[j2]]
                j2 += 1
        for k in range(i, i2 - 1):  # the old run must be one block of memory
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        step = old[i2 - 1][1]
        for k in reversed(range(j, j2)):
            out[new[k]] = step
            step *= target[new[k]]
        i, j = i2, j2
    return tuple(out)


def _embedding(small: Sequence[int], big: Sequence[int]) -> list[int] | None:
    """The axes of ``big`` left over when ``small`` is matched into it in order (each left-over of extent 1),
    or None when it does not fit so."""
    extra, i = [], 0
    for k, d in enumerate(big):
        if i < len(small) and small[i] == d:
            i += 1
        elif d == 1:
            extra.append(k)
        else:
            return None
    return extra if i == len(small) else None


def reshape_node(x: Node, target: Sequence[int], loc: str | None = None) -> Node:
    """``x`` in C order in ``target``: ``x`` itself, a ``squeeze``/``expand_dims`` where only size-1 axes come
    and go, else a ``reshape`` (of ``x``'s own operand where ``x`` is a reshape: two compose into one)."""
    target = tuple(int(d) for d in target)
    if x.shape == target:
        return x
    if only_unit_axes_differ(x.shape, target):
        if x.op in ("squeeze", "expand_dims"):  # one squeeze and one expand_dims at most
            return reshape_node(x.operands[0], target, loc)
        extra = _embedding(target, x.shape)  # axes of x that target lacks (all of extent 1)
        if extra is not None:
            return make_node("squeeze", [x], {"axes": extra}, loc=loc)
        extra = _embedding(x.shape, target)
        if extra is not None:
            return make_node("expand_dims", [x], {"axes": extra}, loc=loc)
        gone = [i for i, d in enumerate(x.shape) if d == 1]
        node = make_node("squeeze", [x], {"axes": gone}, loc=loc) if gone else x
        new = [i for i, d in enumerate(target) if d == 1]
        return make_node("expand_dims", [node], {"axes": new}, loc=loc) if new else node
    if x.op == "reshape" and not is_read_back(x):
        return reshape_node(x.operands[0], target, loc)
    return make_node("reshape", [x], {"shape": list(target)}, loc=loc)


VIEW_OPS = ("slice", "reshape")
READ_BACK = "between_kernels"  # the attribute of a reshape taken between kernels (see is_read_back)


def is_read_back(node: Node) -> bool:
    """Whether ``node`` is a reshape the ``reshapes`` pass could not make index arithmetic: its operand is written
    to memory (C-contiguous) by the kernel computing it, and the runtime takes the reshape there, as a view of
    that buffer (of an argument: CuPy's reshape, a copy only where the argument's strides need one), for the
    kernels after it to read."""
    return node.op == "reshape" and bool(node.attr(READ_BACK))


def read_back_node(x: Node, target: Sequence[int], why: str, loc: str | None = None) -> Node:
    """``x`` reshaped to ``target`` between kernels (:func:`is_read_back`), saying ``why`` it is no index
    arithmetic."""
    return make_node("reshape", [x], {"shape": [int(d) for d in target], READ_BACK: why}, loc=loc)


def view_base(node: Node) -> Node:
    """The array a chain of ``slice``/``reshape`` views reads (``node`` itself when it is none)."""
    while node.op in VIEW_OPS:
        node = node.operands[0]
    return node


def argument_views(graph: Graph) -> list[Node]:
    """The views of arguments that kernels read as arrays of their own, in graph order: each ``reshape`` of an
    argument (through slices and reshapes: after the ``reshapes`` pass each one only splits axes, so NumPy and
    CuPy make it without a copy) and the views it is taken through. The runtime takes them before the kernels
    run (:func:`fusec.schedule.layout.layouts_of` says how they lie in memory); no kernel holds them."""
    chain: set[Node] = set()
    for n in graph.nodes:
        if n.op == "reshape" and view_base(n).op == "input":
            while n.op in VIEW_OPS and n not in chain:
                chain.add(n)
                n = n.operands[0]
    return [n for n in graph.nodes if n in chain]


def read_back_views(graph: Graph) -> list[Node]:
    """The reshapes of computed values taken between kernels (:func:`is_read_back`), in graph order: the runtime
    takes each once the kernel writing its operand has run."""
    return [n for n in graph.nodes if is_read_back(n) and view_base(n).op != "input"]


def returned_views(graph: Graph) -> list[Node]:
    """The returned reshapes of computed values that nothing else reads: views of what the kernels wrote, taken
    by the runtime after them; no kernel holds them."""
    users = graph.users
    return list(dict.fromkeys(o for o in graph.outputs if o.op == "reshape" and not users.get(o)
                              and view_base(o).op != "input"))


def outside_kernels(graph: Graph) -> set[Node]:
    """The views no kernel holds: :func:`returned_views`, :func:`read_back_views`, and :func:`argument_views`
    that only views read (a slice of an argument that a kernel also reads stays that kernel's member as well)."""
    before = argument_views(graph)
    users = graph.users
    pre = set(before)
    out = {n for n in before if n.op == "reshape" or all(u in pre for u in users.get(n, ()))}
    return out | set(returned_views(graph)) | set(read_back_views(graph))


__all__ = ["READ_BACK", "VIEW_OPS", "common_refinement", "flat_cuts", "inner_sizes", "is_chain", "is_read_back",
           "only_unit_axes_differ", "read_back_node", "read_back_views", "reshape_node", "returned_views",
           "sub_extents", "view_base", "view_strides"]
