"""The iteration space of a region that grows as fusion merges groups, kept up to date incrementally.

:func:`fusec.ir.region.region_space` is the definition: it computes the space of a set of nodes from
scratch, copying region-axis numbers along the region's edges until nothing changes. The fusion pass
asks for the space of every merge it tries, so computing it from scratch made planning quadratic. A
:class:`SpaceState` holds what that algorithm computes in a form that two groups combine in time
proportional to the smaller one plus the edges between them, and gives exactly its result.

**Slots and classes.** Every axis of a member is a *slot*: each axis of its result and, for a reduction,
each axis of its operand (the reduction's operand-space map). region_space copies numbers along *links*
(the axis pairs an op rule ties: NumPy's right-aligned broadcasting, ``squeeze``, ``expand_dims``,
``transpose``, a reduction's result and its operand), so linked slots end up with one number. The state
keeps the classes of linked slots in a union-find; a merge unions the two groups' classes and the links
between them.

**Claims.** region_space numbers the region axes after a *seed* (the first reduction's operand, else the
first largest member), then seeds, in member order, every member of the region's shape whose slots are
all still unnumbered (siblings such as ``x.sum(0)`` beside ``x.max(0)``). In class terms: the seed
*claims* its classes (the class of its axis i gets region axis i); then each *candidate* (a member of
the region's shape, or a reduction with the region's operand shape and axes) claims its classes if none
of them is claimed yet. Each class remembers the first candidate with a slot in it, so the claims are
replayed class by class; only when that candidate is itself blocked by another class are all members
walked (a *rescan*).

**Conflicts.** Two numbers in one class: a refusal when every slot of the class is a real axis (extent
!= 1); when the class holds a size-1 slot, region_space's answer depends on the order it visits edges,
and the state asks region_space itself (an *oracle call*; such a group is kept as region_space's answer).

**Checks**, as region_space makes them: every real axis of a member runs along a region axis of its
extent; every reduction reduces exactly the region's reduced axes (free reduced axes placed as
region_space places them). Each member's *phase* (reductions on its longest path) only grows as groups
merge, so it is raised along the new edges only.

``FUSEC_CHECK_SPACES=1`` in the environment (or :data:`CHECK_AGAINST_SCRATCH` set true) compares every
space computed here, legal or not, with region_space from scratch.
"""

from __future__ import annotations

import heapq
import itertools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import (
    AxisMap,
    Refusal,
    RegionSpace,
    corresponding_axes,
    describe_axes,
    describe_space,
    region_space,
)

CHECK_AGAINST_SCRATCH = os.environ.get("FUSEC_CHECK_SPACES", "") not in ("", "0")

_NONE = 1 << 62  # "no candidate" as a position
_NO_CANDIDATES: dict = {}  # shared, never changed
_MIXED = -1  # a class holding real axes of two different extents
_SERIALS = itertools.count()


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


class AxisSlots:
    """The slots of every node of one graph and the links between them, built once per fusion pass.

    Slot ``first[n] + k`` is axis ``k`` of ``n``'s result; for a reduction, ``first[n] + n.ndim + j`` is
    axis ``j`` of its operand. ``order`` is each node's position in ``nodes`` (topological)."""

    def __init__(self, nodes: Iterable[Node], users: Mapping[Node, list[Node]], counts: SpaceCounts | None = None):
        self.nodes: list[Node] = list(nodes)
        self.users = users
        self.counts = counts if counts is not None else SpaceCounts()
        self.order: dict[Node, int] = {}
        self.first: dict[Node, int] = {}
        self.extent: list[int] = []
        self.checked_extent: list[int | None] = []  # extent of a real result axis (every one needs a region axis)
        self.links: dict[Node, dict[Node, list[tuple[int, int]]]] = {}  # user -> operand -> slot pairs
        self.inner: dict[Node, list[tuple[int, int]]] = {}  # reduction -> (result slot, operand slot) pairs
        # memos of checks that depend only on their key: (reduction, its operand's numbering, region) and
        # (node, its axis map, region)
        self.reduce_check: dict[tuple, AxisMap | None] = {}
        self.written_once: dict[tuple, bool] = {}
        for i, n in enumerate(self.nodes):
            self.order[n] = i
            if n.kind is Kind.SOURCE:
                continue
            base = self.first[n] = len(self.extent)
            self.extent.extend(n.shape)
            self.checked_extent.extend(d if d != 1 else None for d in n.shape)
            links: dict[Node, list[tuple[int, int]]] = {}
            if n.kind is Kind.REDUCTION:
                x = n.operands[0]
                self.extent.extend(x.shape)
                self.checked_extent.extend([None] * x.ndim)
                op = base + n.ndim
                axes = n.attr("axes")
                positions = range(x.ndim) if n.attr("keepdims") else [j for j in range(x.ndim) if j not in axes]
                self.inner[n] = [(base + k, op + j) for k, j in enumerate(positions)]
                if x.kind is not Kind.SOURCE:
                    links[x] = [(op + j, self.first[x] + j) for j in range(x.ndim)]
            else:
                for o in dict.fromkeys(n.operands):
                    if o.kind is not Kind.SOURCE:
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


def _params(seed: Node) -> tuple[tuple[int, ...], tuple]:
    """(region shape, reduced axes as the seed lists them) of a region seeded by ``seed``."""
    if seed.kind is Kind.REDUCTION:
        return seed.operands[0].shape, tuple(seed.attr("axes"))
    return seed.shape, ()


def _join(a: tuple, b: tuple) -> tuple:
    """The summary of a class made of classes ``a`` and ``b``: (size, checked extent, has a size-1 slot,
    first candidate per candidate key, has a real slot)."""
    ea, eb = a[1], b[1]
    ext = eb if ea is None else ea if eb is None or ea == eb else _MIXED
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
            if pos < firsts.get(key, _NONE):
                firsts[key] = pos
    return (a[0] + b[0], ext, a[2] or b[2], firsts, a[4] or b[4])


class _Values:
    """Class numbers of a union on the fast path: the trial's own, else the base state's (whose numbers hold
    for every class that is still a root)."""

    __slots__ = ("own", "base")

    def __init__(self, own: dict[int, int], base: dict[int, int]):
        self.own, self.base = own, base

    def get(self, r: int) -> int | None:
        v = self.own.get(r)
        return v if v is not None else self.base.get(r)


class SpaceState:
    """The iteration space of one group of nodes, as union-find classes of their slots (see the module
    docstring). Built by :meth:`build`, combined by :meth:`union`; read by :meth:`final_map` and
    :meth:`region_space`."""

    def __init__(self, slots: AxisSlots):
        self.slots = slots
        self.serial = next(_SERIALS)  # with ``version``, names this state's contents (a cache key)
        self.version = 0
        self.members: set[Node] = set()
        self.parent: dict[int, int] = {}
        self.info: dict[int, tuple] = {}  # class root -> (size, checked extent, size-1 slot, firsts, real slot)
        self.roots: set[int] = set()
        self.reductions: list[Node] = []
        self.phase: dict[Node, int] = {}
        self.seed: Node | None = None
        self.shape: tuple[int, ...] = ()
        self.reduced: tuple = ()
        self.values: dict[int, int] = {}  # class root -> region axis
        self.reduce_maps: dict[Node, AxisMap] = {}
        self.oracle: RegionSpace | None = None  # region_space's answer, for a group with an unordered conflict
        self.legal = False
        # candidates with no slot in a class the seed claims (only those can claim anything), or None: unknown
        self.free: list[Node] | None = None
        self.maps: dict[Node, AxisMap] = {}  # final maps computed so far (valid for the current numbers)

    def find(self, x: int) -> int:
        parent = self.parent
        root = x
        while True:
            p = parent[root]
            if p == root:
                break
            root = p
        while x != root:
            parent[x], x = root, parent[x]
        return root

    @staticmethod
    def single(slots: AxisSlots, n: Node) -> SpaceState:
        """The space of the one member ``n``: always legal, each claimed slot on the region axis of its own
        position (what :meth:`build` computes, without its general machinery)."""
        if CHECK_AGAINST_SCRATCH:
            return SpaceState.build(slots, [n])
        state = SpaceState(slots)
        state.members.add(n)
        state.seed = n
        state.shape, state.reduced = _params(n)
        state.phase[n] = 0
        state.legal = True
        state.free = []
        key = slots.candidate_key(n)
        firsts = {key: slots.order[n]} if key is not None else _NO_CANDIDATES
        extent, checked = slots.extent, slots.checked_extent
        parent, info, values = state.parent, state.info, state.values
        base = slots.first[n]
        if n.kind is Kind.REDUCTION:
            x = n.operands[0]
            op = base + n.ndim
            for j in range(x.ndim):
                s = op + j
                parent[s] = s
                info[s] = (1, None, extent[s] == 1, firsts, extent[s] != 1)
                values[s] = j
            for res, s in slots.inner[n]:
                parent[res] = s
                info[s] = _join(info[s], (1, checked[res], extent[res] == 1, _NO_CANDIDATES, extent[res] != 1))
            state.reduce_maps[n] = tuple(j if d != 1 else None for j, d in enumerate(x.shape))
            state.reductions = [n]
            state.roots = set(range(op, op + x.ndim))
        else:
            for k in range(n.ndim):
                s = base + k
                parent[s] = s
                info[s] = (1, checked[s], extent[s] == 1, firsts, extent[s] != 1)
                values[s] = k
            state.roots = set(range(base, base + n.ndim))
        slots.counts.slot_steps += len(parent)
        return state

    @staticmethod
    def build(slots: AxisSlots, nodes: Iterable[Node], *, evaluate: bool = True) -> SpaceState:
        """The space of ``nodes`` (members; any order) from scratch. ``evaluate=False``: classes and phases
        only (for a producer cone about to join a group, whose own space does not matter)."""
        trial = _Trial(SpaceState(slots), slots, list(nodes))
        return trial.finish(evaluate).commit()

    def union(self, other: SpaceState) -> _Trial:
        """The space of the union of this group and ``other`` (their members may overlap), not yet applied:
        read it from the returned trial, :meth:`_Trial.commit` it to get the union's state. Neither state
        changes until then (the larger one becomes the union's state)."""
        big, small = (self, other) if len(self.parent) >= len(other.parent) else (other, self)
        slots = self.slots
        seed = min(big.seed, small.seed, key=slots.seed_key)  # type: ignore[arg-type]
        if big.oracle is not None or small.oracle is not None:
            return _Trial(SpaceState(slots), slots, list(big.members | small.members)).finish(True)
        return _Trial(big, slots, small=small, seed=seed).finish(True)

    def final_map(self, n: Node) -> AxisMap:
        """The axis map of member ``n`` (region_space's ``maps[n]``)."""
        if self.oracle is not None:
            return self.oracle.maps[n]
        base, values, find = self.slots.first[n], self.values, self.find
        return tuple(values.get(find(base + k)) if d != 1 else None for k, d in enumerate(n.shape))

    def region_space(self, ordered: list[Node]) -> RegionSpace:
        """The :class:`RegionSpace` of the group, whose members are ``ordered`` (topological order)."""
        if self.oracle is not None:
            return self.oracle
        maps = {n: self.final_map(n) for n in ordered}
        reduce_maps = {n: self.reduce_maps[n] for n in ordered if n in self.reduce_maps}
        phase = {n: self.phase[n] for n in ordered}
        return RegionSpace(tuple(self.shape), tuple(sorted(self.reduced)), maps, reduce_maps, phase)

    def max_reduction_phase(self) -> int:
        return max((self.phase[r] for r in self.reductions), default=-1)


class _Trial:
    """A space being computed: an overlay on ``base`` (the larger group's state) holding the smaller
    group's classes and the links between them, evaluated, then committed into ``base`` or dropped."""

    def __init__(self, base: SpaceState, slots: AxisSlots, nodes: list[Node] | None = None, *,
                 small: SpaceState | None = None, seed: Node | None = None):
        self.base, self.slots, self.counts = base, slots, slots.counts
        self.parent: dict[int, int] = {}
        self.info: dict[int, tuple] = {}
        self.dead: set[int] = set()
        self.born: set[int] = set()
        self.added: list[Node] = []
        self.added_set: set[Node] = set()
        self.phase: dict[Node, int] = {}
        self.values: dict[int, int] = {}
        self.reduce_maps: dict[Node, AxisMap] = {}
        self.oracle: RegionSpace | None = None
        self.legal = False
        self.roots: list[int] | None = None
        self.free: list[Node] | None = None
        self.maps: dict[Node, AxisMap] = {}
        self.fast = False
        self.small = small
        if small is None:  # from scratch over ``nodes``
            assert nodes is not None
            self.counts.rebuilds += 1
            self.counts.rebuilt_nodes += len(nodes)
            nodes.sort(key=slots.order.__getitem__)
            self.seed = min(nodes, key=slots.seed_key)
            self.shape, self.reduced = _params(self.seed)
            for n in nodes:
                self._add(n)
            for n in nodes:
                for o, pairs in slots.links[n].items():
                    if o in self.added_set:
                        self._union_pairs(pairs)
            for n in nodes:  # phases, operands first
                self.phase[n] = max((self.phase[o] + (o.kind is Kind.REDUCTION) for o in n.operands
                                     if o in self.added_set), default=0)
            self.counts.phase_steps += len(nodes)
            self.reductions = [n for n in nodes if n.kind is Kind.REDUCTION]
        else:
            assert seed is not None
            self.seed = seed
            self.shape, self.reduced = _params(seed)
            # the fast path: the seed and the region are the base's and nothing but the seed claims there, so
            # the base's numbers stay and are carried through the unions; only touched classes are checked
            self.fast = (base.free == [] and base.seed is seed and base.oracle is None and base.legal
                         and (base.shape, base.reduced) == (self.shape, self.reduced))
            self.own: dict[int, int] = {}
            self.touched: list[int] = []
            self.clash: int | None = None  # a class with a real slot that got two numbers
            self.unit_clashes: list[int] = []  # classes of size-1 slots that got two numbers
            self._insert(small)

    # -- the overlaid union-find ----------------------------------------------------------------------
    def contains(self, n: Node) -> bool:
        return n in self.added_set or n in self.base.members

    def find(self, x: int) -> int:
        parent, base = self.parent, self.base.parent
        root = x
        while True:
            p = parent.get(root)
            if p is None:
                p = base[root]
            if p == root:
                break
            root = p
        while x != root:
            p = parent.get(x)
            if p is None:
                p = base[x]
            parent[x] = root
            x = p
        return root

    def _info(self, r: int) -> tuple:
        info = self.info.get(r)
        return info if info is not None else self.base.info[r]

    def _union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        ia, ib = self._info(ra), self._info(rb)
        if ia[0] < ib[0]:
            ra, rb, ia, ib = rb, ra, ib, ia
        self.parent[rb] = ra
        joined = self.info[ra] = _join(ia, ib)
        if rb in self.born:
            self.born.discard(rb)
        else:
            self.dead.add(rb)
        if self.fast:
            own, numbers = self.own, self.base.values
            va = own.get(ra, numbers.get(ra))
            vb = own.get(rb, numbers.get(rb))
            if vb is not None and va != vb:
                if va is None:
                    own[ra] = vb
                elif not joined[4]:  # a size-1 class so far: the smaller number stays (a clash if it grows)
                    own[ra] = min(va, vb)
                    self.unit_clashes.append(ra)
                elif self.clash is None:
                    self.clash = ra
            self.touched.append(ra)

    def _union_pairs(self, pairs: list[tuple[int, int]]) -> None:
        self.counts.slot_steps += len(pairs)
        for a, b in pairs:
            self._union(a, b)

    def _add(self, n: Node) -> None:
        """Member ``n`` with a class of its own per slot (its reduction links applied)."""
        slots = self.slots
        self.added.append(n)
        self.added_set.add(n)
        key = slots.candidate_key(n)
        base = slots.first[n]
        claim = range(0) if key is None else range(base + n.ndim, base + n.ndim + len(key[1])) \
            if key[0] == "R" else range(base, base + n.ndim)
        firsts = {key: slots.order[n]}
        extent, checked = slots.extent, slots.checked_extent
        rng = slots.slots(n)
        self.counts.slot_steps += len(rng)
        for s in rng:
            self.parent[s] = s
            self.info[s] = (1, checked[s], extent[s] == 1, firsts if s in claim else _NO_CANDIDATES, extent[s] != 1)
            self.born.add(s)
        if n.kind is Kind.REDUCTION:
            self._union_pairs(slots.inner[n])

    def _insert(self, small: SpaceState) -> None:
        """Overlay ``small``'s members, its classes and the links between it and the base."""
        base, slots = self.base, self.slots
        self.counts.slot_steps += len(small.parent)
        phase, users = self.phase, slots.users
        if small.members.isdisjoint(base.members):  # small's classes copied as they are
            new = list(small.members)
            self.added, self.added_set = new, set(small.members)
            self.parent.update(small.parent)
            self.info.update((r, small.info[r]) for r in small.roots)
            self.born.update(small.roots)
            phase.update(small.phase)
        else:
            new = [n for n in small.members if n not in base.members]
            for n in new:
                self._add(n)
                phase[n] = small.phase[n]
            for s, p in small.parent.items():  # small's classes
                if s != p:
                    self._union(s, p)
        start: list[Node] = []
        for n in new:
            for o, pairs in slots.links[n].items():
                if o in base.members and o not in small.members:
                    self._union_pairs(pairs)
                    start.append(n)
            for u in users[n]:
                if u in base.members and u not in small.members:
                    self._union_pairs(slots.links[u][n])
                    start.append(u)
        for n in small.members:  # shared members: the larger of the two phases, then raise the users
            if n in base.members and small.phase[n] != base.phase[n]:
                phase[n] = max(small.phase[n], base.phase[n])
                start.extend(u for u in users[n] if self.contains(u))
        self.start = start
        self.reductions = base.reductions + [n for n in new if n.kind is Kind.REDUCTION]

    def _roots(self) -> list[int]:
        if self.roots is None:
            dead = self.dead
            base = self.base.roots
            self.roots = [r for r in base if r not in dead] if dead else list(base)
            self.roots.extend(self.born)
        return self.roots

    # -- evaluation -----------------------------------------------------------------------------------
    def _members(self) -> list[Node]:
        order = self.slots.order
        if self.small is None:
            return self.added
        return sorted(self.base.members | self.added_set, key=order.__getitem__)

    def _claim(self, claim: range, values: dict[int, int]) -> int | None:
        """Give the class of slot i of ``claim`` region axis i; a class that gets two numbers is returned,
        unless all its slots have extent 1: there region_space ignores the clash, and the numbers it leaves
        there never reach a real axis (they are region axes of extent 1), only say "numbered"."""
        find = self.find
        for i, s in enumerate(claim):
            r = find(s)
            v = values.get(r)
            if v is None:
                values[r] = i
            elif v != i and self._info(r)[4]:
                return r
        return None

    def _claims(self) -> tuple[dict[int, int], int | None]:
        """region_space's numbering of the classes: (class -> region axis, a class with two numbers)."""
        slots, find = self.slots, self.find
        seed = self.seed
        assert seed is not None
        base = slots.first[seed]
        primary = range(base + seed.ndim, base + seed.ndim + len(self.shape)) \
            if seed.kind is Kind.REDUCTION else range(base, base + seed.ndim)
        values: dict[int, int] = {}
        conflict = self._claim(primary, values)
        if conflict is not None:
            return values, conflict
        self._carry_free(set(values))
        roots = self._roots()
        self.counts.class_steps += len(roots)
        by_shape, by_reduction = ("S", self.shape), ("R", self.shape, self.reduced)
        heads = []
        for r in roots:
            firsts = self._info(r)[3]
            if firsts and r not in values:
                first = min(firsts.get(by_shape, _NONE), firsts.get(by_reduction, _NONE))
                if first != _NONE:
                    heads.append((first, r))
        heapq.heapify(heads)
        while heads:
            pos, r = heapq.heappop(heads)
            if r in values:
                continue
            n = slots.nodes[pos]
            claim = slots.claim_slots(n, self.shape, self.reduced)
            assert claim is not None
            if any(find(s) in values for s in claim):
                return self._claims_by_candidates(primary)
            conflict = self._claim(claim, values)
            if conflict is not None:
                return values, conflict
        return values, None

    def _claims_fast(self) -> tuple[_Values | dict[int, int], int | None]:
        """The claims on the fast path: the base's numbers carried through the unions (every numbered class
        is the seed's), then the smaller group's candidates that touch none of them, in member order."""
        values = _Values(self.own, self.base.values)
        slots, find = self.slots, self.find
        if self.clash is not None:
            return values, find(self.clash)
        for r in self.unit_clashes:
            if self._info(find(r))[4]:  # it gained a real slot since
                return values, find(r)
        claimed: set[int] = set()
        free = []
        for n in sorted(self.added, key=slots.order.__getitem__):
            claim = slots.claim_slots(n, self.shape, self.reduced)
            if not claim:
                continue
            roots = [find(s) for s in claim]
            if any(r not in claimed and values.get(r) is not None for r in roots):
                continue  # blocked by the seed, in this group and any larger one with this seed
            free.append(n)
            if not any(r in claimed for r in roots):
                for i, r in enumerate(roots):
                    v = values.get(r)
                    if v is None:
                        self.own[r] = i
                        claimed.add(r)
                        self.touched.append(r)
                    elif v != i and self._info(r)[4]:
                        return values, r
        self.free = free
        return values, None

    def _touched_roots(self) -> list[int]:
        """The classes a fast-path union changed or added (the others were checked in the base)."""
        find = self.find
        return list({find(r) for r in (*self.touched, *self.born)})

    def _carry_free(self, seed_classes: set[int]) -> None:
        """The union's free candidates from the base's (when the seed and the region are the base's):
        those of the base (some may no longer be free) and the smaller group's that are."""
        base, slots, find = self.base, self.slots, self.find
        if self.small is None or base.free is None or base.seed is not self.seed \
                or (base.shape, base.reduced) != (self.shape, self.reduced):
            return
        free = list(base.free)
        for n in self.added:
            claim = slots.claim_slots(n, self.shape, self.reduced)
            if claim and not any(find(s) in seed_classes for s in claim):
                free.append(n)
        self.free = free

    def _claims_by_candidates(self, primary: range) -> tuple[dict[int, int], int | None]:
        """The claims replayed candidate by candidate, in member order (when a class's first candidate is
        blocked): over the free candidates when known, else over every member."""
        self.counts.rescans += 1
        slots, find, seed = self.slots, self.find, self.seed
        values: dict[int, int] = {}
        conflict = self._claim(primary, values)
        seed_classes = set(values)
        order = slots.order
        pool = sorted(self.free, key=order.__getitem__) if self.free is not None else self._members()
        self.counts.rescanned += len(pool)
        free = []
        for n in pool:
            if conflict is not None:
                self.free = None
                return values, conflict
            if n is seed:
                continue
            claim = slots.claim_slots(n, self.shape, self.reduced)
            if not claim:
                continue
            roots = [find(s) for s in claim]
            if any(r in seed_classes for r in roots):
                continue  # blocked by the seed, now and in any larger group with this seed
            free.append(n)
            if all(r not in values for r in roots):
                conflict = self._claim(claim, values)
        self.free = free
        return values, conflict

    def finish(self, evaluate: bool) -> _Trial:
        """Evaluate the space (claims and checks) and, when legal, the phases."""
        if evaluate:
            values, conflict = self._claims_fast() if self.fast else self._claims()
            if conflict is not None:
                if self._info(conflict)[2] and self._extents_fit():  # region_space's visiting order decides
                    self.counts.oracle_calls += 1
                    members = self._members()
                    self.counts.oracle_nodes += len(members)
                    try:
                        self.oracle = region_space(members)
                        self.legal = True
                    except Refusal:
                        self.legal = False
            else:
                self.values = values
                self.legal = self._checks(values, self._touched_roots() if self.fast else self._roots())
        if self.small is not None and (self.legal or not evaluate):
            self._raise_phases()
        if self.oracle is not None:
            self.phase.update(self.oracle.phase)
        if CHECK_AGAINST_SCRATCH and evaluate:
            self._compare_with_scratch()
        return self

    def _extents_fit(self) -> bool:
        """Whether every real axis of every member has an extent the region has (else no numbering can
        validate, whatever region_space's visiting order)."""
        region = set(self.shape)
        extent = self.slots.extent
        for n in (self._members() if self.small is None else self.added + list(self.base.members)):
            for s in self.slots.slots(n):
                if extent[s] != 1 and extent[s] not in region:
                    return False
        return True

    def _checks(self, values: dict[int, int] | _Values, roots: list[int]) -> bool:
        """region_space's validation: real axes (of the classes ``roots``) on region axes of their extent,
        reductions over the region's reduced axes."""
        shape = self.shape
        self.counts.class_steps += len(roots)
        info, base_info = self.info, self.base.info
        for r in roots:
            i = info.get(r)
            ext = (i if i is not None else base_info[r])[1]
            if ext is None:
                continue
            v = values.get(r)
            if v is None or ext == _MIXED or shape[v] != ext:
                return False
        memo = self.slots.reduce_check
        find, first = self.find, self.slots.first
        for r in self.reductions:
            x = r.operands[0]
            base = first[r] + r.ndim
            m = [values.get(find(base + j)) for j in range(x.ndim)]
            key = (r, tuple(m), shape, self.reduced)
            out = memo.get(key, False)
            if out is False:
                out = memo[key] = self._reduce_map(r, m)
            if out is None:
                return False
            self.reduce_maps[r] = out
        return True

    def _first_failure(self, values: dict[int, int]) -> str | None:
        """The message of the first of region_space's checks that fails, with these class numbers."""
        shape, find, first = self.shape, self.find, self.slots.first
        where = describe_space(shape, self.reduced)
        members = self._members()
        for n in members:
            base = first[n]
            for k, d in enumerate(n.shape):
                if d != 1:
                    v = values.get(find(base + k))
                    if v is None or shape[v] != d:
                        return (f"different iteration space: {n.op} of shape {list(n.shape)} does not run along "
                                f"the region's {where}")
        reductions = [n for n in members if n.kind is Kind.REDUCTION]
        maps = {}
        for r in reductions:
            x = r.operands[0]
            base = first[r] + r.ndim
            m = self._placed(r, [values.get(find(base + j)) for j in range(x.ndim)])
            for j, d in enumerate(x.shape):
                if d != 1 and (m[j] is None or shape[m[j]] != d):
                    return (f"different iteration space: {r.op} of shape {list(x.shape)} does not run along "
                            f"the region's {where}")
            maps[r] = tuple(a if d != 1 else None for a, d in zip(m, x.shape))
        want = {a for a in self.reduced if shape[a] != 1}
        for r in reductions:
            m, axes = maps[r], r.attr("axes")
            got = {m[a] for a in axes if m[a] is not None}
            kept = {m[a] for a in range(len(m)) if a not in axes and m[a] is not None}
            if got != want or kept & want:
                return (f"different iteration space: {r.op} reduces {describe_axes(shape, got)} but the region "
                        f"reduces {describe_axes(shape, want)}")
        return None

    def _placed(self, r: Node, m: list) -> list:
        """Reduction ``r``'s operand numbering ``m`` with its free reduced axes placed as region_space does."""
        shape, x, axes = self.shape, r.operands[0], r.attr("axes")
        want = [a for a in self.reduced if shape[a] != 1]
        free = [a for a in axes if x.shape[a] != 1 and m[a] is None]
        taken = {m[a] for a in axes}
        left = [a for a in want if a not in taken]
        if len(free) == len(left):
            for a, v in zip(free, left):
                m[a] = v
        return m

    def _reduce_map(self, r: Node, m: list) -> AxisMap | None:
        """The operand map of reduction ``r`` whose operand slots are numbered ``m``: its free reduced axes
        placed, validated, checked to reduce the region's reduced axes (None if not)."""
        shape = self.shape
        want_set = {a for a in self.reduced if shape[a] != 1}
        x = r.operands[0]
        axes = r.attr("axes")
        m = self._placed(r, m)
        out = []
        for j, d in enumerate(x.shape):
            if d == 1:
                out.append(None)
            elif m[j] is None or shape[m[j]] != d:
                return None
            else:
                out.append(m[j])
        got = {out[a] for a in axes if out[a] is not None}
        kept = {out[a] for a in range(len(out)) if a not in axes and out[a] is not None}
        if got != want_set or kept & want_set:
            return None
        return tuple(out)

    def _raise_phases(self) -> None:
        """Phases in the union: raised from the new edges on, in topological order."""
        order, users, base_phase, phase = self.slots.order, self.slots.users, self.base.phase, self.phase
        heap = [(order[n], n) for n in dict.fromkeys(self.start)]
        heapq.heapify(heap)
        queued = {n for _, n in heap}
        steps = 0
        while heap:
            _, n = heapq.heappop(heap)
            steps += 1
            p = max(((phase[o] if o in phase else base_phase[o]) + (o.kind is Kind.REDUCTION)
                     for o in n.operands if self.contains(o)), default=0)
            if p > (phase[n] if n in phase else base_phase[n]):
                phase[n] = p
                for u in users[n]:
                    if u not in queued and self.contains(u):
                        queued.add(u)
                        heapq.heappush(heap, (order[u], u))
        self.counts.phase_steps += steps

    # -- results --------------------------------------------------------------------------------------
    def commit(self) -> SpaceState:
        """Apply the trial: the base state becomes the union's."""
        base = self.base
        base.version += 1
        base.parent.update(self.parent)
        base.info.update(self.info)
        base.roots.difference_update(self.dead)
        base.roots.update(self.born)
        for r in self.dead:
            base.info.pop(r, None)
        base.members.update(self.added_set)
        base.phase.update(self.phase)
        base.reductions = self.reductions
        base.seed, base.shape, base.reduced = self.seed, self.shape, self.reduced
        if self.fast:
            base.values.update(self.own)
            base.maps.update(self.maps)  # the base's members keep their maps on the fast path
        else:
            base.values = self.values  # type: ignore[assignment]
            base.maps = self.maps
        base.reduce_maps = self.reduce_maps
        base.oracle = self.oracle
        base.legal = self.legal
        base.free = self.free
        return base

    def final_map(self, n: Node) -> AxisMap:
        """The axis map of member ``n`` in the union (remembered: a reused trial is asked again)."""
        m = self.maps.get(n)
        if m is None and self.fast and n not in self.added_set:
            m = self.base.maps.get(n)
        if m is None:
            if self.oracle is not None:
                m = self.oracle.maps[n]
            else:
                base, values, find = self.slots.first[n], self.values, self.find
                m = tuple(values.get(find(base + k)) if d != 1 else None for k, d in enumerate(n.shape))
            self.maps[n] = m
        return m

    def max_reduction_phase(self) -> int:
        phase, base = self.phase, self.base.phase
        return max(((phase[r] if r in phase else base[r]) for r in self.reductions), default=-1)

    def _compare_with_scratch(self) -> None:
        members = self._members()
        try:
            want = region_space(members)
        except Refusal as exc:
            assert not self.legal, f"incremental space is legal, region_space refuses: {exc}; {members}"
            return
        assert self.legal, f"incremental space refuses, region_space gives {want}; {members}"
        got_maps = {n: self.final_map(n) for n in members}
        phase = {n: (self.phase[n] if n in self.phase else self.base.phase[n]) for n in members}
        reduce_maps = self.oracle.reduce_maps if self.oracle is not None else self.reduce_maps
        assert (self.shape, tuple(sorted(self.reduced))) == (want.shape, want.reduced), (self.shape, want)
        assert list(got_maps.items()) == list(want.maps.items()), (got_maps, want.maps)
        assert {r: reduce_maps[r] for r in want.reduce_maps} == dict(want.reduce_maps), (reduce_maps, want)
        assert phase == dict(want.phase), (phase, want.phase)


def refusal_text(slots: AxisSlots, nodes: list[Node]) -> str:
    """region_space's message for ``nodes`` (topological order), which have no common space.

    Without a clash of numbers region_space's propagation never raises, so its message is the first check
    that fails, in its order: a member's map, then a reduction's operand map, then a reduction's axes;
    those are read off the classes here. With a clash, region_space itself says where it met it."""
    trial = _Trial(SpaceState(slots), slots, list(nodes))
    values, conflict = trial._claims()
    text = None if conflict is not None and trial._info(conflict)[4] else trial._first_failure(values)
    if text is None or CHECK_AGAINST_SCRATCH:
        try:
            region_space(nodes)
        except Refusal as exc:
            assert text is None or text == str(exc), (text, str(exc))
            return str(exc)
        raise AssertionError("region_space accepts a set of nodes the incremental space refused")
    return text
