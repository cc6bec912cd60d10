"""The axis slots of a graph's nodes and the links between them: what the incremental iteration space
(:mod:`fusec.ir.space_state`) works on, built once per fusion pass.

Every axis of a member of a region is a *slot*: each axis of its result and, for a reduction, each axis of
its operand (the reduction's operand-space map). A *link* ties two slots that an op rule makes run together
(NumPy's right-aligned broadcasting, ``squeeze``, ``expand_dims``, ``transpose``, a reduction's result and
its operand, a reduction's operand and the node it reads); :func:`fusec.ir.region.region_space` copies
region-axis numbers along exactly these links. This module also holds what the space needs to know of each
node on its own: which node would seed a region, under which region parameters a node is a *candidate* (a
member of the region's shape, or a reduction with the region's operand shape and axes), the slots it claims,
its *twins* and the summary kept per class of linked slots.

*Twins.* Two real axes of one node's result (or of one reduction's operand) that have the same extent are twins:
were they to run along one region axis, the kernel would iterate that axis once and compute only the diagonal
of their outer product (region_space refuses it). Only axes of one extent can share a region axis, so each slot
lists its twins once, here, and a class of slots lists its *partners*: one slot in each other class that holds
a twin of one of its slots.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import AxisMap, corresponding_axes

NO_CANDIDATE = 1 << 62  # "no candidate" as a position
NO_CANDIDATES: dict = {}  # shared, never changed
MIXED = -1  # a class holding real axes of two different extents


@dataclass
class SpaceCounts:
    """Work done on iteration spaces (the fusion pass reports these; tests bound their growth)."""

    slot_steps: int = 0  # slots inserted and links unioned
    class_steps: int = 0  # classes visited by claims and checks
    phase_steps: int = 0  # members whose phase was recomputed
    rescans: int = 0  # claims replayed candidate by candidate (a class's first candidate was blocked)
    rescanned: int = 0  # candidates those replays walked
    rebuilds: int = 0  # spaces built from all members (new groups, and a group whose region shape changed)
    rebuilt_nodes: int = 0  # members those rebuilds walked
    oracle_calls: int = 0  # conflicts at size-1 slots settled by region_space
    oracle_nodes: int = 0  # members those calls walked
    twin_steps: int = 0  # partners visited: joined into a class's list, or checked for a shared region axis


class AxisSlots:
    """The slots of every node of one graph and the links between them, built once per fusion pass.

    Nodes that are never members (sources, and the views of ``outside``) have no slots. Slot ``first[n] + k`` is
    axis ``k`` of ``n``'s result; for a reduction, ``first[n] + n.ndim + j`` is
    axis ``j`` of its operand. ``order`` is each node's position in ``nodes`` (topological)."""

    def __init__(self, nodes: Iterable[Node], users: Mapping[Node, list[Node]], counts: SpaceCounts | None = None,
                 outside: Collection[Node] = ()):
        self.nodes: list[Node] = list(nodes)
        self.users = users
        self.counts = counts if counts is not None else SpaceCounts()
        self.order: dict[Node, int] = {}
        self.first: dict[Node, int] = {}
        self.extent: list[int] = []
        self.checked_extent: list[int | None] = []  # extent of a real result axis (every one needs a region axis)
        self.twins: list[tuple[int, ...]] = []  # the slot's twins: the node's other real slots of its extent
        self.links: dict[Node, dict[Node, list[tuple[int, int]]]] = {}  # user -> operand -> slot pairs
        self.inner: dict[Node, list[tuple[int, int]]] = {}  # reduction -> (result slot, operand slot) pairs
        # memos of checks that depend only on their key: (reduction, its operand's numbering, region) and
        # (node, its axis map, region)
        self.reduce_check: dict[tuple, AxisMap | None] = {}
        self.written_once: dict[tuple, bool] = {}
        # each gather of the graph: legality keeps it apart from the node it reads
        self.gathers: tuple[Node, ...] = tuple(n for n in self.nodes if n.kind is Kind.GATHER)
        # sources, and views the runtime takes (``outside``: reshapes of arguments), are read, never members
        outside = {n for n in self.nodes if n.kind is Kind.SOURCE} | set(outside)
        for i, n in enumerate(self.nodes):
            self.order[n] = i
            if n in outside:
                continue
            base = self.first[n] = len(self.extent)
            self.extent.extend(n.shape)
            self.checked_extent.extend(d if d != 1 else None for d in n.shape)
            self.twins.extend(_twins(base, n.shape))
            links: dict[Node, list[tuple[int, int]]] = {}
            if n.kind is Kind.REDUCTION:
                x = n.operands[0]
                self.extent.extend(x.shape)
                self.checked_extent.extend([None] * x.ndim)
                self.twins.extend(_twins(base + n.ndim, x.shape))
                op = base + n.ndim
                axes = n.attr("axes")
                positions = range(x.ndim) if n.attr("keepdims") else [j for j in range(x.ndim) if j not in axes]
                self.inner[n] = [(base + k, op + j) for k, j in enumerate(positions)]
                if x not in outside:
                    links[x] = [(op + j, self.first[x] + j) for j in range(x.ndim)]
            else:
                for o in dict.fromkeys(n.operands):
                    if o not in outside:
                        links[o] = [(base + ku, self.first[o] + jo) for ku, jo in corresponding_axes(n, o)]
            self.links[n] = links

    def slots(self, n: Node) -> range:
        """Every slot of member ``n``."""
        base = self.first[n]
        return range(base, base + n.ndim + (n.operands[0].ndim if n.kind is Kind.REDUCTION else 0))

    def seed_key(self, n: Node) -> tuple:
        """region_space's seed is the member with the smallest key: the first reduction, else the first of
        the largest (ndim, size)."""
        if n.kind is Kind.REDUCTION:
            return (0, self.order[n])
        return (1, -n.ndim, -n.size, self.order[n])

    @staticmethod
    def candidate_key(n: Node) -> tuple | None:
        """The region parameters under which ``n`` is a candidate, as a key: ``("S", shape)`` for a member
        (of any reduced axes), ``("R", operand shape, axes)`` for a reduction; None for a 0-d member."""
        if n.kind is Kind.REDUCTION:
            return ("R", n.operands[0].shape, tuple(n.attr("axes")))
        return ("S", n.shape) if n.ndim > 0 else None

    def claim_slots(self, n: Node, shape: tuple[int, ...], reduced: tuple) -> range | None:
        """The slots ``n`` claims as a candidate of a region over ``shape`` reducing ``reduced`` (slot i
        gets region axis i), or None when ``n`` is no candidate there."""
        base = self.first[n]
        if n.kind is Kind.REDUCTION:
            if n.operands[0].shape == shape and tuple(n.attr("axes")) == reduced:
                return range(base + n.ndim, base + n.ndim + len(shape))
            return None
        if n.shape == shape and n.ndim > 0:
            return range(base, base + n.ndim)
        return None


def _twins(base: int, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The twins of slots ``base + k`` for the axes ``k`` of ``shape`` (one node's result, or a reduction's operand):
    the other real axes of the same extent."""
    if len(set(shape)) == len(shape) or len(shape) < 2:
        return [()] * len(shape)
    return [tuple(base + j for j, e in enumerate(shape) if e == d and j != k) if d != 1 else ()
            for k, d in enumerate(shape)]


def region_params(seed: Node) -> tuple[tuple[int, ...], tuple]:
    """(region shape, reduced axes as the seed lists them) of a region seeded by ``seed``."""
    if seed.kind is Kind.REDUCTION:
        return seed.operands[0].shape, tuple(seed.attr("axes"))
    return seed.shape, ()


def join_classes(a: tuple, b: tuple) -> tuple:
    """The summary of a class made of classes ``a`` and ``b``: (size, checked extent, has a size-1 slot,
    first candidate per candidate key, has a real slot, partners, holds two twins).

    ``partners`` holds, for every other class with a twin of one of the class's slots, at least one slot of it
    (a slot's class changes as classes join, so the list may name a class twice, and may name the class itself:
    :meth:`fusec.ir.space_state._Trial._union` lists each class once and sets the last field when the class
    holds a slot and its twin). Here the two lists are only put together."""
    ea, eb = a[1], b[1]
    ext = eb if ea is None else ea if eb is None or ea == eb else MIXED
    ca, cb = a[3], b[3]
    if not cb or ca is cb:
        firsts = ca
    elif not ca:
        firsts = cb
    else:
        if len(ca) < len(cb):
            ca, cb = cb, ca
        firsts = dict(ca)
        for key, pos in cb.items():
            if pos < firsts.get(key, NO_CANDIDATE):
                firsts[key] = pos
    pa, pb = a[5], b[5]
    partners = pa + pb if pa and pb else pa or pb
    return (a[0] + b[0], ext, a[2] or b[2], firsts, a[4] or b[4], partners, a[6] or b[6])
