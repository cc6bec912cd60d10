"""The iteration space of a region that grows as fusion merges groups, kept up to date incrementally.

:func:`fusec.ir.region.region_space` is the definition: it computes the space of a set of nodes from
scratch, copying region-axis numbers along the region's links until nothing changes. The fusion pass asks
for the space of every merge it tries, so computing it from scratch made planning quadratic. A
:class:`SpaceState` holds what that algorithm computes in a form that two groups combine in time
proportional to the smaller one plus the links between them, and gives exactly its result.

It keeps the classes of linked slots (:mod:`fusec.ir.axis_slots`) in a union-find with a summary per class
(size, extent of its real result slots, whether it holds a size-1 slot or a real one, its first candidate
per candidate kind, its partners: the other classes holding twins of its slots, and whether it holds two
twins itself), the numbers region_space gives the classes, the members' phases (reductions on their
longest path, which only grow as groups merge, so they are raised along the new links only), and the final
maps computed so far. :meth:`SpaceState.union` overlays the smaller group on the larger one (a
:class:`_Trial`), numbers and checks the union (:mod:`fusec.ir.space_numbering`), and applies it only when
the merge goes ahead; a failed merge changes nothing.

``FUSEC_CHECK_SPACES=1`` in the environment (or :data:`CHECK_AGAINST_SCRATCH` set true) compares every space
computed here, legal or not, with region_space from scratch.
"""

from __future__ import annotations

import heapq
import itertools
import os
from collections.abc import Iterable

from fusec.ir.axis_slots import NO_CANDIDATES, AxisSlots, join_classes, region_params
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import AxisMap, Refusal, RegionSpace, region_space, scan_axis
from fusec.ir.space_numbering import Numbering

CHECK_AGAINST_SCRATCH = os.environ.get("FUSEC_CHECK_SPACES", "") not in ("", "0")
_SERIALS = itertools.count()


class SpaceState:
    """The iteration space of one group of nodes, as union-find classes of their slots (see the module
    docstring). Built by :meth:`build`, combined by :meth:`union`; read by :meth:`final_map` and
    :meth:`region_space`."""

    __slots__ = ("slots", "serial", "version", "members", "parent", "info", "roots", "reductions", "scans", "phase",
                 "slices", "gathers", "seed",
                 "shape", "reduced", "values", "reduce_maps", "oracle", "legal", "free", "maps")

    def __init__(self, slots: AxisSlots):
        self.slots = slots
        self.serial = next(_SERIALS)  # with ``version``, names this state's contents (a cache key)
        self.version = 0
        self.members: set[Node] = set()
        self.parent: dict[int, int] = {}
        # class root -> (size, checked extent, size-1 slot, firsts, real slot, partners, holds two twins)
        self.info: dict[int, tuple] = {}
        self.roots: set[int] = set()
        self.reductions: list[Node] = []
        self.scans: list[Node] = []
        self.slices: list[Node] = []  # slices of computed values (of scans: others sink onto arrays)
        self.gathers: list[Node] = []
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

    def contains(self, n: Node) -> bool:
        return n in self.members

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
        position (what :meth:`build` computes, without its general machinery). It knows that no candidate but the
        seed claims anything (``free`` is empty), so unions with it take the fast path."""
        state = SpaceState(slots)
        state.members.add(n)
        state.seed = n
        state.shape, state.reduced = region_params(n)
        state.phase[n] = 0
        state.legal = True
        state.free = []
        key = slots.candidate_key(n)
        firsts = {key: slots.order[n]} if key is not None else NO_CANDIDATES
        extent, checked, twins = slots.extent, slots.checked_extent, slots.twins
        parent, info, values = state.parent, state.info, state.values
        base = slots.first[n]
        if n.kind is Kind.REDUCTION:
            x = n.operands[0]
            op = base + n.ndim
            for j in range(x.ndim):
                s = op + j
                parent[s] = s
                info[s] = (1, None, extent[s] == 1, firsts, extent[s] != 1, twins[s], False)
                values[s] = j
            for res, s in slots.inner[n]:  # a result slot's twins sit with the operand slots' twins: listed
                parent[res] = s
                info[s] = join_classes(info[s], (1, checked[res], extent[res] == 1, NO_CANDIDATES, extent[res] != 1,
                                                 (), False))
            state.reduce_maps[n] = tuple(j if d != 1 else None for j, d in enumerate(x.shape))
            state.reductions = [n]
            state.roots = set(range(op, op + x.ndim))
        else:
            for k in range(n.ndim):
                s = base + k
                parent[s] = s
                info[s] = (1, checked[s], extent[s] == 1, firsts, extent[s] != 1, twins[s], False)
                values[s] = k
            state.roots = set(range(base, base + n.ndim))
            if n.kind is Kind.SCAN:
                state.scans = [n]
            if _inner_slice(n):
                state.slices = [n]
            if n.kind is Kind.GATHER:
                state.gathers = [n]
        slots.counts.slot_steps += len(parent)
        if CHECK_AGAINST_SCRATCH:  # what build computes (and compares with region_space)
            want = SpaceState.build(slots, [n])
            assert want.legal and want.final_map(n) == state.final_map(n), (n, want.final_map(n))
            assert want.reduce_maps == state.reduce_maps, (want.reduce_maps, state.reduce_maps)
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
        axis = scan_axis(self.scans, maps.__getitem__, bool(self.reductions))
        return RegionSpace(tuple(self.shape), tuple(sorted(self.reduced)), maps, reduce_maps, phase, axis)

    def max_reduction_phase(self) -> int:
        return max((self.phase[r] for r in self.reductions), default=-1)


class _Trial(Numbering):
    """A space being computed: an overlay on ``base`` (the larger group's state) holding the smaller
    group's classes and the links between them, evaluated, then committed into ``base`` or dropped."""

    __slots__ = ("base", "slots", "counts", "parent", "info", "dead", "born", "added", "added_set", "phase",
                 "values", "reduce_maps", "oracle", "legal", "roots", "free", "maps", "fast", "small", "seed",
                 "shape", "reduced", "reductions", "scans", "slices", "gathers", "own", "touched", "clash",
                 "unit_clashes", "start", "claimed")

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
        self.own: dict[int, int] = {}  # class numbers the fast path changed or added
        self.touched: list[int] = []  # classes the fast path changed or added
        self.clash: int | None = None  # a class with a real slot that got two numbers
        self.unit_clashes: list[int] = []  # classes of size-1 slots that got two numbers
        self.claimed: list[int] = []  # classes the fast path's free candidates numbered (not carried)
        self.start: list[Node] = []  # members whose phase may rise (operands first)
        self.small = small
        if small is None:  # from scratch over ``nodes``
            assert nodes is not None
            self.counts.rebuilds += 1
            self.counts.rebuilt_nodes += len(nodes)
            nodes.sort(key=slots.order.__getitem__)
            self.seed = min(nodes, key=slots.seed_key)
            self.shape, self.reduced = region_params(self.seed)
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
            self.scans = [n for n in nodes if n.kind is Kind.SCAN]
            self.slices = [n for n in nodes if _inner_slice(n)]
            self.gathers = [n for n in nodes if n.kind is Kind.GATHER]
        else:
            assert seed is not None
            self.seed = seed
            self.shape, self.reduced = region_params(seed)
            # the fast path: the seed and the region are the base's and nothing but the seed claims there, so
            # the base's numbers stay and are carried through the unions; only touched classes are checked
            self.fast = (base.free == [] and base.seed is seed and base.oracle is None and base.legal
                         and (base.shape, base.reduced) == (self.shape, self.reduced))
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
        joined = join_classes(ia, ib)
        if ia[5] and ib[5]:  # each lists the other if a node has a twin in each (twins are mutual)
            joined = self._partners_once(joined, ra)
        self.info[ra] = joined
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

    def _partners_once(self, joined: tuple, root: int) -> tuple:
        """Class summary ``joined`` of a union (now ``root``) with its partners listed once per class; a partner
        in the class itself means it holds a slot and its twin (a node's two axes run together from now on)."""
        find = self.find
        partners = joined[5]
        self.counts.twin_steps += len(partners)
        twin = joined[6]
        once: dict[int, int] = {}
        for t in partners:
            r = find(t)
            if r == root:
                twin = True
            elif r not in once:
                once[r] = t
        return (*joined[:5], tuple(once.values()), twin)

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
        extent, checked, twins = slots.extent, slots.checked_extent, slots.twins
        rng = slots.slots(n)
        self.counts.slot_steps += len(rng)
        for s in rng:
            self.parent[s] = s
            self.info[s] = (1, checked[s], extent[s] == 1, firsts if s in claim else NO_CANDIDATES, extent[s] != 1,
                            twins[s], False)
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
        self.scans = base.scans + [n for n in new if n.kind is Kind.SCAN]
        self.slices = base.slices + [n for n in new if _inner_slice(n)]
        self.gathers = base.gathers + [n for n in new if n.kind is Kind.GATHER]

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
        base.scans = self.scans
        base.slices = self.slices
        base.gathers = self.gathers
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


def _inner_slice(n: Node) -> bool:
    """A slice or window of a computed value (legality refuses one whose operand is in the same kernel)."""
    return n.op in ("slice", "window") and n.operands[0].kind is not Kind.SOURCE


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
