"""reshapes: every reshape that merges or splits axes becomes index arithmetic on the arguments.

A kernel iterates over one shape and reads each array through strides, so a reshape of a computed value
(``xr = x.reshape(N, G, -1)`` feeding a reduction whose result is reshaped back and scaled per channel) can
be neither a member of its kernel nor, without a copy, a kernel boundary. This pass rewrites the graph over
*refined* shapes instead: each axis is cut into the sub-axes every reshape it meets needs (``C`` into ``G``
and ``C // G`` for group norm), so that both sides of each reshape are the same array and the reshape
disappears. Cuts spread along the axes that run together (an elementwise op's operands and result, a
reduction's kept axes, a transpose's permuted axes, a whole axis of a slice) and through each reshape's flat
positions (:mod:`fusec.ir.reshape_math`), until nothing changes.

What is left afterwards:

- on each argument, a ``reshape`` that only splits its axes: a view (new strides, whatever the argument's
  layout) that the kernel reads through (:mod:`fusec.schedule.nest`);
- on each returned value whose refined shape is not its own, a ``reshape`` back to it (merging the axes of a
  fresh C-contiguous array: a view, which the runtime applies after the kernels);
- ``squeeze``/``expand_dims`` where only size-1 axes differ.

Arguments and iotas are cut per use (one use may split an axis another slices), so no argument's cut reaches another
use of it.

Where the cuts cannot all hold (two reshapes cut an axis of 6 as 2 x 3 and as 3 x 2, ``(2, 3) -> (3, 2)``
has no common refinement, a slice, pad, join or scan reads part of an axis a reshape cuts), the pass reads
one of the reshapes *back*: it no longer links its two sides, the kernel computing its operand writes that
to memory (C-contiguous, so the reshape of it is a view), and the runtime takes the reshape there for the
kernels after it (:func:`~fusec.ir.reshape_math.is_read_back`; the reshape keeps why, and the plan prints it).
It picks the reshape that met the conflict, else the latest one whose cuts reached the conflicting axis, and
refines again, until the cuts hold. Only a reshape of a constant or an iota that no cut can hold is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fusec.ir import windows
from fusec.ir.graph import Graph, Node, make_node
from fusec.ir.infer import slice_attrs, slice_bounds
from fusec.ir.ops import Kind
from fusec.ir.region import corresponding_axes
from fusec.ir.reshape_math import (
    READ_BACK,
    inner_sizes,
    is_chain,
    is_read_back,
    only_unit_axes_differ,
    outside_kernels,
    read_back_node,
    reshape_node,
    sub_extents,
)
from fusec.ir.union_find import find_root
from fusec.passes.registry import register
from fusec.support.errors import UnsupportedError

Slot = tuple  # (node, axis), or for an argument read by a user: (argument, user, operand index, axis)
Groups = list[tuple[int, ...]]  # per axis of a node, the extents of its sub-axes


class _Conflict(Exception):
    """Cuts that do not hold; ``node`` is the reshape (or slice, window, scan) that met them, ``slot`` an axis
    slot of the class whose cuts they are, where known."""

    node: Node | None = None
    slot: Slot | None = None
    reaching: tuple[Node, ...] = ()  # the reshapes whose cuts reached ``slot``, in graph order


class _Cuts:
    """Union-find over axis slots of extent above 1, each class with the cuts (inner sizes) of its axis."""

    def __init__(self) -> None:
        self.parent: dict[Slot, Slot] = {}
        self.extent: dict[Slot, int] = {}
        self.cuts: dict[Slot, frozenset[int]] = {}

    def add(self, slot: Slot, extent: int) -> None:
        if slot not in self.parent:
            self.parent[slot] = slot
            self.extent[slot] = extent
            self.cuts[slot] = frozenset()

    def find(self, slot: Slot) -> Slot:
        return find_root(self.parent, slot)

    def union(self, a: Slot, b: Slot) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
            self._set(ra, self.cuts[ra] | self.cuts.pop(rb))

    def _set(self, root: Slot, cuts: frozenset[int]) -> None:
        if not is_chain(cuts | {1, self.extent[root]}):
            conflict = _Conflict(f"an axis of {self.extent[root]} elements would be cut at {sorted(cuts)}")
            conflict.slot = root
            raise conflict
        self.cuts[root] = cuts

    def cut(self, slot: Slot, cuts: set[int]) -> bool:
        root = self.find(slot)
        new = self.cuts[root] | cuts
        if new == self.cuts[root]:
            return False
        self._set(root, new)
        return True

    def subs(self, slot: Slot) -> tuple[int, ...]:
        root = self.find(slot)
        return sub_extents(self.extent[root], self.cuts[root])


def _whole(bound: tuple[int, int, int], extent: int) -> bool:
    return bound == (0, 1, extent)


class _Refinement:
    """The cuts of every axis of ``graph`` (classes of axes that run together, and of size-1 axes standing for
    them), and each node's refined shape."""

    def __init__(self, graph: Graph, read_back: Mapping[Node, str] | None = None):
        self.graph = graph
        self.read_back = read_back or {}  # reshapes that link nothing, taken between kernels -> why
        self.cuts = _Cuts()
        self.ones_parent: dict[Slot, Slot] = {}  # size-1 axes that run together (a union-find)
        self.follows: dict[Slot, set[Slot]] = {}  # a class of size-1 axes -> the axes of extent above 1 they stand for
        self.reshapes: list[Node] = []
        for u in graph.nodes:
            if u.kind is Kind.SOURCE:
                continue
            for j, d in enumerate(u.shape):
                if d > 1:
                    self.cuts.add((u, j), d)
            for i, o in enumerate(u.operands):
                for j, d in enumerate(o.shape):
                    if d > 1:
                        self.cuts.add(self.slot(o, u, i, j), d)
            if u.op == "reshape" and u not in self.read_back:
                self.reshapes.append(u)
            for i, o in enumerate(u.operands):
                if o.kind is Kind.SOURCE and o.op not in ("input", "iota"):
                    continue
                for ku, jo in self._linked(u, o):
                    self.cuts.union((u, ku), self.slot(o, u, i, jo))
                self._link_unit_axes(u, o, self.slot(o, u, i, 0)[:-1])

    def _link_unit_axes(self, u: Node, o: Node, prefix: tuple) -> None:
        """Size-1 axes take as many size-1 sub-axes as the axis they stand for: an operand's broadcast axis
        that of ``u``'s axis, a keepdims reduction's reduced axis that of its operand's, and a size-1 axis
        running along a size-1 axis the same number (:meth:`groups`)."""
        spreads = u.kind is Kind.ELEMENTWISE or u.op == "broadcast_to"
        for ku, jo in corresponding_axes(u, o):
            eu, eo = u.shape[ku], o.shape[jo]
            mine, theirs = (u, ku), (*prefix, jo)
            if eu == eo == 1:
                self._ones_union(mine, theirs)
            elif eo == 1 and eu > 1 and spreads:
                self._ones_follow(theirs, mine)
            elif eu == 1 and eo > 1 and u.kind is Kind.REDUCTION and jo in u.attr("axes"):
                self._ones_follow(mine, theirs)

    def _ones_find(self, slot: Slot) -> Slot:
        self.ones_parent.setdefault(slot, slot)
        return find_root(self.ones_parent, slot)

    def _ones_union(self, a: Slot, b: Slot) -> None:
        ra, rb = self._ones_find(a), self._ones_find(b)
        if ra != rb:
            self.ones_parent[rb] = ra
            self.follows.setdefault(ra, set()).update(self.follows.pop(rb, ()))

    def _ones_follow(self, one: Slot, big: Slot) -> None:
        self.follows.setdefault(self._ones_find(one), set()).add(big)

    def unit_group(self, slot: Slot) -> tuple[int, ...]:
        """The size-1 sub-axes of a size-1 axis: as many as the one axis its class stands for has sub-axes
        (one where it stands for none, or for axes of different classes)."""
        bigs = {self.cuts.find(b) for b in self.follows.get(self._ones_find(slot), ())}
        if len(bigs) != 1:
            return (1,)
        return (1,) * len(self.cuts.subs(next(iter(bigs))))

    @staticmethod
    def slot(o: Node, user: Node, index: int, axis: int) -> Slot:
        return (o, user, index, axis) if o.op in ("input", "iota") else (o, axis)  # cut per use

    @staticmethod
    def _linked(u: Node, o: Node) -> list[tuple[int, int]]:
        pairs = [(ku, jo) for ku, jo in corresponding_axes(u, o) if o.shape[jo] > 1 and u.shape[ku] == o.shape[jo]]
        if u.op == "slice":
            bounds = slice_bounds(o.shape, dict(u.attrs))
            pairs = [(ku, jo) for ku, jo in pairs if _whole(bounds[jo], o.shape[jo])]
        elif u.op == "window":  # only the axes it reads whole, in order, unclamped
            axes = windows.axes_of(dict(u.attrs))
            pairs = [(ku, jo) for ku, jo in pairs if axes[jo] == windows.whole(o.shape[jo])]
        elif u.kind is Kind.GATHER:  # positions come from data: no axis of it is an axis of its operands
            pairs = []
        elif u.kind is Kind.SCAN:  # a prefix along a cut axis is not one along its sub-axes: never linked
            pairs = [(ku, jo) for ku, jo in pairs if jo != u.attr("axis")]
        return pairs

    def spread(self) -> None:
        """Cut each reshape's two sides at the flat positions either side starts an axis or a sub-axis,
        until nothing changes."""
        changed = True
        while changed:
            changed = False
            for u in self.reshapes:
                try:
                    changed |= self._spread_one(u)
                except _Conflict as e:
                    e.node = e.node or u
                    raise

    def _spread_one(self, u: Node) -> bool:
        """Cut both sides of reshape ``u`` at every flat position where either side starts an axis or a
        sub-axis; whether a cut was new."""
        o = u.operands[0]
        sides = [(o.shape, [self.slot(o, u, 0, j) for j in range(o.ndim)]),
                 (u.shape, [(u, k) for k in range(u.ndim)])]
        points: set[int] = set()
        for shape, slots in sides:
            for inner, d, slot in zip(inner_sizes(shape), shape, slots):
                if d > 1:
                    points |= {inner * c for c in self._cut_points(slot)}
        changed = False
        for shape, slots in sides:
            for inner, d, slot in zip(inner_sizes(shape), shape, slots):
                if d <= 1:
                    continue
                inside = {p for p in points if inner < p < inner * d}
                if any(p % inner for p in inside):
                    raise _Conflict(f"reshape from {o.shape} to {u.shape} has no common refinement")
                changed |= self.cuts.cut(slot, {p // inner for p in inside})
        return changed

    def reshapes_reaching(self, slot: Slot) -> list[Node]:
        """The reshapes (not read back) with an axis, on either side, in the class of ``slot``, in graph order."""
        root = self.cuts.find(slot)
        out = []
        for u in self.reshapes:
            o = u.operands[0]
            sides = [self.slot(o, u, 0, j) for j, d in enumerate(o.shape) if d > 1]
            sides += [(u, k) for k, d in enumerate(u.shape) if d > 1]
            if any(self.cuts.find(s) == root for s in sides):
                out.append(u)
        return out

    def _cut_points(self, slot: Slot) -> set[int]:
        root = self.cuts.find(slot)
        return {1} | set(self.cuts.cuts[root])

    def groups(self, node: Node, slots: Sequence[Slot]) -> Groups:
        return [self.cuts.subs(s) if d > 1 else self.unit_group(s) if d == 1 else (d,)
                for d, s in zip(node.shape, slots)]

    def own(self, node: Node) -> Groups:
        return self.groups(node, [(node, k) for k in range(node.ndim)])

    def wanted(self, o: Node, u: Node, i: int) -> Groups:
        """The sub-axes ``u`` reads operand ``o`` (its ``i``-th) over: its classes', and where ``o`` is
        broadcast along an axis of ``u``, as many size-1 axes as that axis has sub-axes."""
        groups = self.groups(o, [self.slot(o, u, i, j) for j in range(o.ndim)])
        if u.kind is Kind.ELEMENTWISE or u.op == "broadcast_to":
            off = u.ndim - o.ndim
            for j in range(o.ndim):
                if o.shape[j] == 1 and u.shape[j + off] > 1:
                    groups[j] = (1,) * len(self.cuts.subs((u, j + off)))
        return groups


def _flat(groups: Groups) -> tuple[int, ...]:
    return tuple(d for g in groups for d in g)


def _starts(groups: Groups) -> list[int]:
    out, acc = [], 0
    for g in groups:
        out.append(acc)
        acc += len(g)
    return out


def _integer_iota_in(o: Node, shape: tuple[int, ...]) -> Node | None:
    """An integer iota ``o`` (``start + k * delta``) laid out in ``shape`` in C order, as a sum of one iota per axis
    (``delta`` times the elements after it, times the index) and ``start``: index arithmetic where a reshape of it
    would be none; None for other nodes, float iotas, and shapes that only add or drop size-1 axes."""
    if o.op != "iota" or o.dtype.kind not in "iu" or only_unit_axes_differ(o.shape, shape):
        return None
    start, delta = int(o.attr("start")), int(o.attr("next")) - int(o.attr("start"))
    total: Node | None = None
    for k, (d, inner) in enumerate(zip(shape, inner_sizes(shape))):
        if d == 1:
            continue
        step = delta * inner
        term = make_node("iota", (), {"count": d, "start": o.dtype.type(0).item(), "next": o.dtype.type(step).item()},
                         dtype=o.dtype)
        others = [j for j in range(len(shape)) if j != k]
        term = make_node("expand_dims", [term], {"axes": others}) if others else term
        total = term if total is None else make_node("add", [total, term])
    if total is None or start:
        first = make_node("const", (), {"value": start}, dtype=o.dtype)
        total = first if total is None else make_node("add", [total, first])
    if total.shape != shape:
        total = make_node("broadcast_to", [total], {"shape": list(shape)})
    return total


def _conflict(text: str, ref: _Refinement, u: Node, axis: int, result: bool = False) -> _Conflict:
    """A conflict at ``u``'s reading of axis ``axis`` of its operand (``result``: at its result's axis)."""
    conflict = _Conflict(text)
    conflict.node, conflict.slot = u, (u, axis) if result else ref.slot(u.operands[0], u, 0, axis)
    return conflict


def _result_cut(ref: _Refinement, u: Node, own: Groups, axis: int, what: str) -> None:
    """A conflict where ``u`` reads part of axis ``axis`` of its operand (an affine map of one index) while a
    reshape cuts that axis of its result into several (no such map over the sub-axes)."""
    if u.shape[axis] > 1 and len(own[axis]) > 1:  # (size-1 axes take size-1 sub-axes: no cut)
        raise _conflict(f"{what} an axis of {u.shape[axis]} elements that a reshape cuts into {own[axis]}",
                        ref, u, axis, result=True)


def _rebuild(ref: _Refinement, u: Node, new: dict[Node, Node]) -> Node:
    """``u`` over its operands' refined forms, in its own refined shape or one differing only in size-1
    axes."""
    if u in ref.read_back:  # the operand as its kernel writes it (its refined shape, C order), reshaped there
        return read_back_node(new[u.operands[0]], _flat(ref.own(u)), ref.read_back[u], u.loc)
    if u.op == "size":
        o = u.operands[0]
        if o.op == "input":
            return u
        groups = ref.own(o)
        starts = _starts(groups)
        axes = [starts[a] + k for a in u.attr("axes") for k in range(len(groups[a]))]
        return make_node("size", [new[o]], {"axes": axes}, dtype=u.dtype, loc=u.loc)
    wanted = [ref.wanted(o, u, i) for i, o in enumerate(u.operands)]
    for i, (o, w) in enumerate(zip(u.operands, wanted)):
        if o.op == "iota" and o.dtype.kind not in "iu" and any(len(g) > 1 for g in w):
            conflict = _Conflict(f"a float arange of {o.shape[0]} elements that a reshape cuts into {w[0]}")
            conflict.node, conflict.slot = u, ref.slot(o, u, i, 0)
            raise conflict
    operands = [_integer_iota_in(o, _flat(w)) or reshape_node(new[o], _flat(w), u.loc)
                if o.kind is not Kind.SOURCE or o.op in ("input", "iota") else new[o]
                for o, w in zip(u.operands, wanted)]
    own = ref.own(u)
    attrs = dict(u.attrs)
    dtype = u.dtype if u.op in ("cast", "const", "size") else None
    if u.kind is Kind.ELEMENTWISE:
        return make_node(u.op, operands, attrs, dtype=dtype, loc=u.loc)
    if u.op == "broadcast_to":
        attrs["shape"] = list(_flat(own))
        return make_node(u.op, operands, attrs, loc=u.loc)
    if u.kind in (Kind.GATHER, Kind.CONTRACTION):
        # over its operands' own shapes (positions come from data, so no axis is linked through it), then cut as
        # its users want: such a reshape of a computed value is refused by check_reshapes unless it sits on an
        # argument or a result
        plain = [reshape_node(new[o], o.shape, u.loc) if o.kind is not Kind.SOURCE or o.op == "input" else new[o]
                 for o in u.operands]
        return reshape_node(make_node(u.op, plain, attrs, loc=u.loc), _flat(own), u.loc)
    (w,) = wanted
    (x,) = operands
    if u.kind is Kind.REDUCTION:
        starts = _starts(w)
        reduced = set(u.attr("axes"))
        attrs["axes"] = [starts[a] + k for a in sorted(reduced) for k in range(len(w[a]))]
        return make_node(u.op, [x], attrs, loc=u.loc)
    if u.op == "transpose":
        starts = _starts(w)
        attrs["perm"] = [starts[p] + k for p in u.attr("perm") for k in range(len(w[p]))]
        return reshape_node(make_node("transpose", [x], attrs, loc=u.loc), _flat(own), u.loc)
    if u.op == "window":  # as a slice: axes read whole are cut as the operand's, others must stay whole
        refined_w: list = []
        for j, (axis, g, d) in enumerate(zip(windows.axes_of(attrs), w, u.operands[0].shape)):
            if axis == windows.whole(d):
                refined_w.extend(windows.whole(e) for e in g)
            elif len(g) > 1 and d > 1:
                raise _conflict(f"a pad or join reads part of an axis of {d} elements that a reshape cuts into {g}",
                                ref, u, j)
            else:
                _result_cut(ref, u, own, j, "a pad or join makes")
                refined_w.extend([axis] + [windows.whole(1)] * (len(g) - 1))
        return reshape_node(make_node("window", [x], windows.attrs_of(refined_w), loc=u.loc), _flat(own), u.loc)
    if u.op == "slice":
        bounds = slice_bounds(u.operands[0].shape, attrs)
        refined = []
        for j, ((first, step, count), g, d) in enumerate(zip(bounds, w, u.operands[0].shape)):
            if _whole((first, step, count), d):
                refined.extend((0, 1, e) for e in g)
            elif d <= 1:  # an integer index of a size-1 axis: its other size-1 sub-axes whole
                refined.extend([(first, step, count)] + [(0, 1, 1)] * (len(g) - 1))
            elif len(g) > 1:
                raise _conflict(f"a slice selects part of an axis of {d} elements that a reshape cuts into {g}",
                                ref, u, j)
            else:
                _result_cut(ref, u, own, j, "a slice makes")
                refined.append((first, step, count))
        return reshape_node(make_node("slice", [x], slice_attrs(refined), loc=u.loc), _flat(own), u.loc)
    if u.kind is Kind.SCAN:
        (w,) = wanted
        axis = u.attr("axis")
        if len(w[axis]) > 1:
            raise _conflict(f"a {u.op} along an axis of {u.operands[0].shape[axis]} elements that a reshape cuts "
                            f"into {w[axis]}", ref, u, axis)
        _result_cut(ref, u, own, axis, f"a {u.op} along")
        attrs["axis"] = _starts(w)[axis]
        return reshape_node(make_node(u.op, operands, attrs, loc=u.loc), _flat(own), u.loc)
    if u.op == "reshape" and u.size == 0:  # nothing to read: an empty constant (as an empty slice becomes)
        zero = make_node("const", (), {"value": 0}, dtype=u.dtype, loc=u.loc)
        return make_node("broadcast_to", [zero], {"shape": list(_flat(own))}, loc=u.loc)
    # expand_dims, squeeze, reshape: the same elements in the same order over the refined shape
    return reshape_node(x, _flat(own), u.loc)


def refine_reshapes(graph: Graph) -> Graph:
    """``graph`` over refined shapes (see the module docstring); ``graph`` itself when it has no reshape."""
    if not any(n.op == "reshape" for n in graph.nodes):
        return graph
    read_back = {n: n.attr(READ_BACK) for n in graph.nodes if is_read_back(n)}
    while True:
        try:
            return _refined(graph, read_back)
        except _Conflict as e:
            read_back = _read_back_one_more(graph, read_back, e)


def _refined(graph: Graph, read_back: dict[Node, str]) -> Graph:
    ref = _Refinement(graph, read_back)
    new: dict[Node, Node] = {}
    u: Node | None = None
    try:
        ref.spread()
        for u in graph.nodes:
            new[u] = u if u.kind is Kind.SOURCE and u.op != "size" else _rebuild(ref, u, new)
    except _Conflict as e:
        e.node = e.node or u
        e.reaching = tuple(ref.reshapes_reaching(e.slot)) if e.slot is not None else ()
        raise
    outputs = tuple(reshape_node(new[o], o.shape, o.loc) for o in graph.outputs)
    if outputs == graph.outputs:
        return graph
    return Graph(graph.name, graph.inputs, outputs)


def _read_back_one_more(graph: Graph, read_back: dict[Node, str], conflict: _Conflict) -> dict[Node, str]:
    """``read_back`` and the reshape to read back for ``conflict`` (with why): the reshape that met it, else the
    latest one whose cuts reached the conflicting axis, else the latest one;
    :class:`~fusec.support.errors.UnsupportedError`
    where there is none (only reshapes of constants or iotas left, which no kernel writes)."""
    def readable(n: Node) -> bool:
        return n.op == "reshape" and n not in read_back and (
            n.operands[0].kind is not Kind.SOURCE or n.operands[0].op == "input")

    picks = [conflict.node] if conflict.node is not None and readable(conflict.node) else []
    if not picks:
        picks = [u for u in conflict.reaching if readable(u)][-1:]
    if not picks:
        picks = [n for n in graph.nodes if readable(n)][-1:]
    if not picks:
        where = conflict.node
        raise UnsupportedError(
            f"this reshape cannot be index arithmetic in one kernel: {conflict}",
            loc=where.loc if where is not None else None,
            hint="reshape the argument before the call (or the result after it), or copy the value "
                 "(np.ascontiguousarray) before reshaping it") from None
    return {**read_back, picks[0]: str(conflict)}


def check_reshapes(graph: Graph) -> Graph:
    """``graph`` when each of its reshapes is a view of an argument or of a returned result (which the runtime
    takes, :func:`~fusec.ir.reshape_math.outside_kernels`); else :class:`~fusec.support.errors.UnsupportedError` at the
    reshape."""
    outside = outside_kernels(graph)
    for n in graph.nodes:
        if n.op == "reshape" and n not in outside:
            raise UnsupportedError(
                f"a reshape from {n.operands[0].shape} to {n.shape} of a value computed in the function, which "
                "the function then reads further, cannot be index arithmetic in one kernel", loc=n.loc,
                hint="reshape the argument before the call, or slice before reshaping")
    return graph


register("reshapes", "rewrite over refined shapes: reshapes become argument views and views of results")(
    refine_reshapes)
