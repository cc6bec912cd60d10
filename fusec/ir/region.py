"""A region (the nodes that become one kernel) and its iteration space.

A :class:`Region` is filled in by the fusion pass: its member nodes, the nodes it writes and the nodes it
reads from outside. Its :class:`RegionSpace` is the one iteration space of the kernel, or, for a set of
nodes that cannot be one kernel, :class:`Refusal` with the reason.

A region is one kernel with one iteration space: a shape ``S`` and a set of reduced axes ``A``
(empty for pointwise regions). Every member node is placed in that space by an *axis map*: for
each of its own axes, the region axis it runs along (``None`` for a size-1 axis, which is
broadcast), never two of its axes along one region axis (a kernel that iterates it once would
compute only the diagonal of their outer product: :func:`outer_product_problem`). Maps are
propagated along the region's edges with each op's own axis rule (NumPy's right-aligned
broadcasting, ``squeeze``/``expand_dims``/``transpose``), so the same function answers "can these
nodes be one kernel" for the fusion pass and "how is each node indexed" for the code generator.

Within a reduction region a node is *full* (it varies along a reduced axis) or *per-row* (it is
constant along all of them: a reduced value, or something computed from reduced values); its
*phase* is the number of reductions it sits after, which is how many passes over the row the
kernel makes before it can compute it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from fusec.ir.graph import Node
from fusec.ir.ops import Kind

AxisMap = tuple  # tuple[int | None, ...]: node axis -> region axis


class Refusal(Exception):
    """Why a set of nodes cannot be one kernel (shown by ``explain``)."""


# The region kinds: what a region's space is, a fact of the IR (the kernel kinds of :mod:`fusec.kinds` say which of
# them each runs). Everything else spells a region kind through these names.
POINTWISE = "pointwise"  # no reduction: every member over the whole space
REDUCE_ALL = "reduce-all"  # every axis reduced: scalar results
ROWS = "rows"  # the innermost axes reduced
COLS = "cols"  # an outer axis reduced
SCAN = "scan"  # an inclusive scan along one axis, with its prologue and epilogue
MATMUL = "matmul"  # one contraction (a GEMM) and the views of its operands it reads through, nothing else
REGION_KINDS = (POINTWISE, REDUCE_ALL, ROWS, COLS, SCAN, MATMUL)


def space_kind(shape: tuple[int, ...], reduced: Iterable[int], scan_axis: int | None = None) -> str:
    """The region kind of a space over ``shape`` reducing axes ``reduced`` (or scanning along ``scan_axis``):
    one of :data:`REGION_KINDS` (size-1 axes don't count)."""
    reduced = set(reduced)
    if scan_axis is not None:
        return SCAN
    if not reduced:
        return POINTWISE
    red = [i for i in reduced if shape[i] != 1]
    kept = [i for i, d in enumerate(shape) if d != 1 and i not in reduced]
    if not kept:
        return REDUCE_ALL
    if not red or max(kept) < min(red):
        return ROWS
    return COLS


@dataclass(frozen=True)
class RegionSpace:
    """Where each member runs: the region shape, the reduced axes, axis maps, phases.

    ``maps[n]`` maps each axis of ``n`` to a region axis (``None`` where ``n`` has extent 1);
    ``reduce_maps[r]`` does the same for the *operand* of each reduction ``r`` (its reduced axes
    included), which is how the reduction's loop walks its input.
    """

    shape: tuple[int, ...]
    reduced: tuple[int, ...]
    maps: Mapping[Node, AxisMap] = field(compare=False)
    reduce_maps: Mapping[Node, AxisMap] = field(compare=False)
    phase: Mapping[Node, int] = field(compare=False)
    # the region axis its scans run along (a scan region: no reduced axes), else None
    scan_axis: int | None = None
    # the contraction a matmul region computes (its space is the product's shape), else None
    contraction: Node | None = field(default=None, compare=False)

    @property
    def kind(self) -> str:
        """pointwise | reduce-all | rows | cols (by which axes reduce; size-1 axes don't count) | scan | matmul."""
        if self.contraction is not None:
            return MATMUL
        return space_kind(self.shape, self.reduced, self.scan_axis)

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.shape)) if i not in self.reduced)

    def varies_along_reduction(self, node: Node) -> bool:
        """Whether ``node`` takes different values along the reduced axes (a *full* node)."""
        return any(a is not None and a in self.reduced for a in self.maps[node])

    def covers_kept_axes(self, node: Node) -> bool:
        """Whether ``node`` has one element per point of the kept (non-reduced) axes."""
        kept = {i for i in self.kept if self.shape[i] != 1}
        return kept <= {a for a in self.maps[node] if a is not None}

    def covers_all_axes(self, node: Node) -> bool:
        big = {i for i, d in enumerate(self.shape) if d != 1}
        return big <= {a for a in self.maps[node] if a is not None}


def corresponding_axes(op_node: Node, operand: Node) -> list[tuple[int, int]]:
    """Pairs (user axis, operand axis) that run together, by the user's op rule."""
    op = op_node.op
    if op_node.kind is Kind.SCAN:  # same shape: element i of the result sits where element i of the operand does
        return [(j, j) for j in range(operand.ndim)]
    if op_node.kind is Kind.ELEMENTWISE or op == "broadcast_to":
        off = op_node.ndim - operand.ndim
        return [(j + off, j) for j in range(operand.ndim)]
    if op_node.kind is Kind.REDUCTION:
        if op_node.attr("keepdims"):
            return [(j, j) for j in range(operand.ndim)]
        kept = [j for j in range(operand.ndim) if j not in op_node.attr("axes")]
        return list(enumerate(kept))
    if op == "squeeze":
        kept = [j for j in range(operand.ndim) if j not in op_node.attr("axes")]
        return list(enumerate(kept))
    if op == "expand_dims":
        new = set(op_node.attr("axes"))
        old = [k for k in range(op_node.ndim) if k not in new]
        return list(zip(old, range(operand.ndim)))
    if op == "transpose":
        return [(k, p) for k, p in enumerate(op_node.attr("perm"))]
    if op in ("slice", "window"):  # axis k of the result steps along axis k of the operand (strided, offset: nest.py)
        return [(k, k) for k in range(operand.ndim)]
    if op_node.kind is Kind.GATHER:  # index operands run along the result (same rank); the array is read
        if operand is op_node.operands[0]:  # from memory at computed positions, never linked (see region_space)
            return []
        return [(k, k) for k in range(operand.ndim)]
    return []


def gather_refusal(gather: Node) -> str:
    """Why a gather and the value it reads cannot share a kernel."""
    return (f"a gather of {gather.operands[0].op}, which the same kernel would compute: the gathered elements come "
            "from other threads (a gather reads an array in memory; it moves through elementwise ops to the "
            "arguments, not through reductions)")


def _is_member(node: Node) -> bool:
    return node.kind is not Kind.SOURCE


def region_space(nodes: Iterable[Node]) -> RegionSpace:
    """The one iteration space of ``nodes`` as a kernel, or :class:`Refusal` with the reason.

    Sources (inputs, constants, sizes) are never members: they are read where used. ``nodes``
    must come in topological order.
    """
    members = [n for n in dict.fromkeys(nodes) if _is_member(n)]
    if not members:
        raise Refusal("empty region")
    if any(n.kind is Kind.CONTRACTION for n in members):
        return contraction_space(members)
    inside = set(members)
    reductions = [n for n in members if n.kind is Kind.REDUCTION]
    # maps over each member's own axes; for reductions, over the operand's axes (op_maps)
    maps: dict[Node, list] = {n: [None] * n.ndim for n in members}
    op_maps: dict[Node, list] = {r: [None] * r.operands[0].ndim for r in reductions}
    if reductions:
        seed = reductions[0]
        shape, reduced = seed.operands[0].shape, tuple(seed.attr("axes"))
        op_maps[seed] = list(range(len(shape)))
        if seed.operands[0] in inside:
            maps[seed.operands[0]] = list(range(len(shape)))
    else:
        seed = max(members, key=lambda n: (n.ndim, n.size))
        shape, reduced = seed.shape, ()
        maps[seed] = list(range(seed.ndim))

    def merge_into(dst: list, d_axis: int, value: int | None, extent: int, where: Node) -> bool:
        if value is None or dst[d_axis] == value:
            return False
        if dst[d_axis] is None:
            dst[d_axis] = value
            return True
        if extent != 1:
            raise Refusal(f"axes don't line up at {where.op}: axis {d_axis} runs along both region axes "
                          f"{dst[d_axis]} and {value}")
        return False

    # the links between slots, in the order propagation visits them (computed once, not once per sweep)
    red_links = []
    for r in reductions:  # a reduction's result map and its operand-space map go together
        x = r.operands[0]
        positions = range(x.ndim) if r.attr("keepdims") else [j for j in range(x.ndim) if j not in r.attr("axes")]
        red_links.append((r, [(k, j, x.shape[j], r.shape[k]) for k, j in enumerate(positions)]))
    links = []
    for u in members:
        for o in dict.fromkeys(u.operands):
            if o not in inside:
                continue
            of_reduction = u in op_maps
            pairs = [(j, j) for j in range(o.ndim)] if of_reduction else corresponding_axes(u, o)
            user_shape = (u.operands[0] if of_reduction else u).shape
            links.append((u, o, of_reduction, [(ku, jo, o.shape[jo], user_shape[ku]) for ku, jo in pairs]))

    def propagate() -> None:
        changed = True
        while changed:
            changed = False
            for r, pairs in red_links:
                res, opm = maps[r], op_maps[r]
                for k, j, x_extent, r_extent in pairs:
                    if res[k] is not None and opm[j] != res[k]:
                        changed |= merge_into(opm, j, res[k], x_extent, r)
                    if opm[j] is not None and res[k] != opm[j]:
                        changed |= merge_into(res, k, opm[j], r_extent, r)
            for u, o, of_reduction, pairs in links:
                um = op_maps[u] if of_reduction else maps[u]
                om = maps[o]
                for ku, jo, o_extent, u_extent in pairs:
                    if um[ku] is not None and om[jo] != um[ku]:
                        changed |= merge_into(om, jo, um[ku], o_extent, o)
                    if om[jo] is not None and um[ku] != om[jo]:
                        changed |= merge_into(um, ku, om[jo], u_extent, u)

    propagate()
    # parts of the region not connected to the seed (siblings that only share inputs, such as
    # x.sum(0) beside x.max(0)) run along the region axes in place when their shapes allow it
    seeded = {seed}
    while True:
        loose = next((n for n in members if n not in seeded
                      and all(a is None for a in (op_maps[n] if n in op_maps else maps[n]))
                      and (n.operands[0].shape == shape and tuple(n.attr("axes")) == reduced
                           if n.kind is Kind.REDUCTION else n.shape == shape and n.ndim > 0)), None)
        if loose is None:
            break
        seeded.add(loose)
        (op_maps if loose.kind is Kind.REDUCTION else maps)[loose] = list(range(len(shape)))
        propagate()

    # reduced axes nobody could place (a reduction of an input whose result is used per row only)
    want = [a for a in reduced if shape[a] != 1]
    for r in reductions:
        x = r.operands[0]
        free = [a for a in r.attr("axes") if x.shape[a] != 1 and op_maps[r][a] is None]
        taken = {op_maps[r][a] for a in r.attr("axes")}
        left = [a for a in want if a not in taken]
        if len(free) == len(left):
            for a, v in zip(free, left):
                op_maps[r][a] = v

    def validate(n: Node, m: list, ext: tuple[int, ...]) -> AxisMap:
        out = tuple(a if ext[k] != 1 else None for k, a in enumerate(m))
        for k, a in enumerate(out):
            if ext[k] != 1 and (a is None or shape[a] != ext[k]):
                raise Refusal(f"different iteration space: {n.op} of shape {list(ext)} does not run along "
                              f"the region's {describe_space(shape, reduced)}")
        problem = outer_product_problem(n.op, ext, out, shape, reduced)
        if problem is not None:
            raise Refusal(problem)
        return out

    final = {n: validate(n, maps[n], n.shape) for n in members}
    reduce_maps = {r: validate(r, op_maps[r], r.operands[0].shape) for r in reductions}
    want_set = set(want)
    for r in reductions:
        m = reduce_maps[r]
        got = {m[a] for a in r.attr("axes") if m[a] is not None}
        kept = {m[a] for a in range(len(m)) if a not in r.attr("axes") and m[a] is not None}
        if got != want_set or kept & want_set:
            raise Refusal(f"different iteration space: {r.op} reduces {describe_axes(shape, got)} but the "
                          f"region reduces {describe_axes(shape, want_set)}")
    scans = [n for n in members if n.kind is Kind.SCAN]
    axis = scan_axis(scans, final.__getitem__, bool(reductions))
    return RegionSpace(tuple(shape), tuple(sorted(reduced)), final, reduce_maps, _phases(members, inside), axis)


LIBRARY_KERNEL = ("the matmul runs in cuBLAS; its epilogue is a kernel of its own that reads the product once "
                  "(nothing fuses into a library's GEMM yet)")


def operand_views(contraction: Node, keep: Callable[[Node], bool] = lambda n: True) -> list[Node]:
    """The layout views between ``contraction`` and the arrays its operands view (transposes, reshapes, slices,
    size-1 axes added or removed, broadcasts), in topological order: what its kernel takes as views of those
    arrays (strided layouts the GEMM reads, or CuPy's copies where it cannot), never a kernel of their own.
    ``keep(view)`` may stop a chain (a view that is returned is written by a kernel of its own)."""
    out: list[Node] = []
    for o in contraction.operands:
        chain = []
        while o.kind is Kind.LAYOUT and o.op != "window" and not o.attr("between_kernels") and keep(o):
            chain.append(o)
            o = o.operands[0]
        out.extend(reversed(chain))
    return list(dict.fromkeys(out))


def contraction_space(members: list[Node]) -> RegionSpace:
    """The space of a matmul region: its one contraction's shape, the other members views of its operands
    (:func:`operand_views`), or :class:`Refusal` naming what else would share the kernel."""
    contractions = [n for n in members if n.kind is Kind.CONTRACTION]
    if len(contractions) > 1:
        raise Refusal(f"two matmuls would share a kernel: {LIBRARY_KERNEL}")
    (c,) = contractions
    views = set(operand_views(c))
    other = next((n for n in members if n is not c and n not in views), None)
    if other is not None:
        raise Refusal(f"{other.op} and a matmul would share a kernel: {LIBRARY_KERNEL}")
    maps = {n: (tuple(range(n.ndim)) if n is c else (None,) * n.ndim) for n in members}
    return RegionSpace(tuple(c.shape), (), maps, {}, dict.fromkeys(members, 0), None, c)


def outer_product_problem(op: str, ext: tuple[int, ...], out: AxisMap, shape: tuple[int, ...],
                          reduced: tuple[int, ...]) -> str | None:
    """Why a node (or a reduction's operand) of shape ``ext`` whose axes run along region axes ``out`` (None on its
    size-1 axes) cannot be in a region over ``shape`` reducing ``reduced``, or None: two of its axes run along one
    region axis, and a kernel that iterates that axis once would compute only the diagonal of their outer product.
    (That its axes run along region axes of their extents is checked before.)"""
    placed = [a for a in out if a is not None]
    if len(set(placed)) == len(placed):
        return None
    twice = next(a for a in placed if placed.count(a) > 1)
    i, j = [k for k, a in enumerate(out) if a == twice][:2]
    return (f"different iteration space: two axes of {op} of shape {list(ext)} ({i} and {j}) run along region axis "
            f"{twice} of the region's {describe_space(shape, reduced)}: the kernel would compute only the diagonal "
            "of their outer product")


def members_problem(nodes: Iterable[Node], space: RegionSpace) -> str | None:
    """Why ``nodes``, whose iteration space is ``space``, still cannot be one kernel (what the fusion pass's
    legality checks beside the space: :func:`slice_problem`, :func:`scan_axis_problem`), or None."""
    nodes = list(nodes)
    inside = set(nodes).__contains__
    gathers = [n for n in nodes if n.kind is Kind.GATHER and inside(n.operands[0])]
    if gathers:
        return gather_refusal(gathers[0])
    problem = slice_problem((n for n in nodes if n.op in ("slice", "window")), inside)
    if problem is None and any(n.kind is Kind.SCAN for n in nodes) and any(n.kind is Kind.GATHER for n in nodes):
        problem = SCAN_GATHER
    if problem is None:
        problem = scan_axis_problem([n for n in nodes if n.kind is Kind.SCAN], space.maps.__getitem__,
                                    any(n.kind is Kind.REDUCTION for n in nodes))
    return problem


SCAN_GATHER = ("a gather and a scan would share a kernel, which fusec does not generate yet: the gather's kernel "
               "writes its result and the scan's reads it")


def slice_problem(slices: Iterable[Node], inside: Callable[[Node], bool]) -> str | None:
    """Why a kernel holding ``slices`` (its slice and window members) and the nodes ``inside`` says cannot be one
    kernel, or None: a slice of a value the same kernel computes reads elements other threads compute (slices read
    arrays in memory; canonicalize moves them onto the arrays they read, except where a scan stops them)."""
    for n in slices:
        if inside(n.operands[0]):
            return (f"a {n.op} of {n.operands[0].op}, which the same kernel computes: its elements come from other "
                    "threads (slices and windows read arrays in memory: they sink to the arrays they read, but not "
                    "past a scan, nor past a value read through many different views, which is computed once "
                    "into memory: fusec.passes.kept_values)")
    return None


def scan_axis_problem(scans: Iterable[Node], final_map: Callable[[Node], AxisMap], reduces: bool) -> str | None:
    """Why ``scans`` (a region's scan members, placed by ``final_map``) cannot run in one scan kernel, or None:
    a scan kernel scans along one region axis, and reduces nothing."""
    axes = {final_map(s)[s.attr("axis")] for s in scans}
    axes.discard(None)  # a scan along a size-1 axis is its operand
    if axes and reduces:
        return "a scan and a reduction would share a kernel: a scan kernel reduces nothing"
    if len(axes) > 1:
        return f"scans along different axes ({', '.join(map(str, sorted(axes)))}) would share a kernel"
    return None


def scan_axis(scans: Iterable[Node], final_map: Callable[[Node], AxisMap], reduces: bool) -> int | None:
    """The region axis ``scans`` run along; None without a scan of more than one element, or where they cannot
    be one scan kernel (:func:`scan_axis_problem`: the fusion pass's legality refuses such a kernel, and the
    verifier a hand-written one), so that the space itself stays what :mod:`fusec.ir.space_state` computes."""
    scans = list(scans)
    if scan_axis_problem(scans, final_map, reduces) is not None:
        return None
    axes = {final_map(s)[s.attr("axis")] for s in scans} - {None}
    return axes.pop() if axes else None


def describe_axes(shape: tuple[int, ...], axes: set) -> str:
    return "axes " + ", ".join(f"{a} (of {shape[a]})" for a in sorted(axes)) if axes else "no axis"


def describe_space(shape: tuple[int, ...], reduced: tuple[int, ...]) -> str:
    dims = "x".join(map(str, shape)) or "scalar"
    return f"{dims} reducing {list(reduced)}" if reduced else dims


def operand_map(user: Node, operand: Node, space: RegionSpace) -> AxisMap:
    """The axis map under which region member ``user`` reads ``operand`` (a load's index)."""
    if user in space.reduce_maps:
        return space.reduce_maps[user]
    m: list = [None] * operand.ndim
    for ku, jo in corresponding_axes(user, operand):
        if operand.shape[jo] != 1:
            m[jo] = space.maps[user][ku]
    return tuple(m)


def _phases(members: list[Node], inside: set[Node]) -> dict[Node, int]:
    """Phase of each member: the number of reductions on its longest path from the region's inputs
    (a reduction's own phase is that of its operand; its result is available from phase + 1)."""
    phase: dict[Node, int] = {}
    for n in members:  # members come in topological order
        p = 0
        for o in n.operands:
            if o in inside:
                p = max(p, phase[o] + (1 if o.kind is Kind.REDUCTION else 0))
        phase[n] = p
    return phase


@dataclass(frozen=True)
class Region:
    """A set of nodes that become one kernel (filled in by the fusion pass)."""

    name: str
    kind: str  # pointwise | reduce-all | rows | cols | scan | matmul
    nodes: tuple[Node, ...]  # in topological order
    outputs: tuple[Node, ...]  # nodes read outside the region or returned (materialized)
    inputs: tuple[Node, ...]  # nodes outside the region that it reads
    given_space: RegionSpace | None = field(default=None, compare=False, repr=False)

    @cached_property
    def space(self) -> RegionSpace:
        """The region's iteration space: the one fusion computed, else computed from the nodes (raises
        :class:`Refusal` for nodes that cannot be one kernel, as in hand-written IR)."""
        return self.given_space if self.given_space is not None else region_space(self.nodes)


def kind_problem(region: Region) -> str | None:
    """Why ``region`` is not one kernel of its kind (its nodes have no one iteration space, or one of
    another kind), or None. A region of sources only (constants) runs nothing: any kind will do."""
    if all(n.kind is Kind.SOURCE for n in region.nodes):
        return None
    try:
        space = region.space
    except Refusal as exc:
        return f"its nodes cannot be one kernel: {exc}"
    problem = members_problem(region.nodes, space) if space.contraction is None else None
    if problem is not None:
        return f"its nodes cannot be one kernel: {problem}"
    if space.kind != region.kind:
        return f"is a {region.kind} kernel but its nodes make a {space.kind} one"
    return None


def contraction_of(region: Region) -> Node | None:
    """The contraction a matmul region computes, else None."""
    return next((n for n in region.nodes if n.kind is Kind.CONTRACTION), None)


def make_regions(specs: Iterable[tuple[str, str, Iterable[Node]]], users: Mapping[Node, list[Node]],
                 graph_outputs: Iterable[Node], spaces: Iterable[RegionSpace | None] | None = None,
                 ) -> tuple[Region, ...]:
    """Regions from ``(name, kind, nodes)`` in kernel order, with their inputs and outputs.

    A node may sit in several regions (it is recomputed in each). The first region holding a node
    *owns* it and writes it when something needs it in memory: the function returns it, or a
    user sits in a region that does not hold it. A region's inputs are the operands it reads from
    outside itself (constants and sizes included; they become literals and parameters). ``spaces``
    gives each region's iteration space where the caller already has it.
    """
    specs = [(name, kind, list(dict.fromkeys(nodes))) for name, kind, nodes in specs]
    returned = set(graph_outputs)
    holders: dict[Node, list[int]] = {}
    for i, (_, _, nodes) in enumerate(specs):
        for n in nodes:
            holders.setdefault(n, []).append(i)
    members = [set(nodes) for _, _, nodes in specs]
    given = list(spaces) if spaces is not None else [None] * len(specs)
    regions = []
    for i, (name, kind, nodes) in enumerate(specs):
        inside = members[i]
        inputs = list(dict.fromkeys(o for n in nodes for o in n.operands if o not in inside))
        outputs = []
        for n in nodes:
            if holders[n][0] != i:
                continue
            needed = n in returned or any(
                u not in holders or any(n not in members[j] for j in holders[u])
                for u in users.get(n, ())
            )
            if needed:
                outputs.append(n)
        regions.append(Region(name, kind, tuple(nodes), tuple(outputs), tuple(inputs), given[i]))
    return tuple(regions)


def make_region(name: str, kind: str, nodes: Iterable[Node], users: Mapping[Node, list[Node]],
                graph_outputs: Iterable[Node]) -> Region:
    """One region over ``nodes`` (see :func:`make_regions`)."""
    return make_regions([(name, kind, nodes)], users, graph_outputs)[0]
