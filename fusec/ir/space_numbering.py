"""How region_space numbers the classes of linked slots, and the checks it makes of the numbering: the half
of :mod:`fusec.ir.space_state` that reads a union's classes (:class:`Numbering`, mixed into its trials).

*Claims.* region_space numbers the region axes after a *seed* (the first reduction's operand, else the first
largest member), then seeds, in member order, every member of the region's shape whose slots are all still
unnumbered (siblings such as ``x.sum(0)`` beside ``x.max(0)``). In class terms: the seed *claims* its
classes (the class of its axis i gets region axis i); then each *candidate* claims its classes if none of
them is claimed yet. Each class remembers its first candidate per candidate kind, so the claims are replayed
class by class; when that candidate is itself blocked by another class, the *free* candidates (those with no
slot in a class the seed claims: the only ones that can claim anything) are replayed one by one. On the fast
path (the seed and the region of the larger group, nothing but the seed claiming there) the numbers are
carried through the unions instead, and only the smaller group's free candidates can add claims.

*Conflicts.* Two numbers in one class: a refusal when the class holds a real slot (extent != 1) and no
size-1 slot; with a size-1 slot too, region_space's answer depends on the order it visits links, and the
trial asks region_space itself. A class of size-1 slots only never raises, and its numbers never reach a real
axis: it just counts as numbered.

*Checks*, as region_space makes them: every real axis of a member runs along a region axis of its extent;
no two real axes of a member (or of a reduction's operand) run along one region axis; every reduction reduces
exactly the region's reduced axes (free reduced axes placed as region_space places them).
:meth:`Numbering._first_failure` gives region_space's message for the first check that fails.

*Twins on one region axis.* Only axes of one extent can share a region axis, so only twins
(:mod:`fusec.ir.axis_slots`) can: two in one class (the class's flag, set by the union that joined them), or
in two classes with one number. A free reduced axis of a reduction's operand, placed per reduction, never
shares one in a map that passes the reduction's other checks, so the class numbers decide. The numbers a
union gives its classes are the seed's, one class each, and those of the candidates that claim classes
(siblings): two classes share a number only when a candidate claimed one of them, so only those classes'
partners are looked at. On the fast path (nothing claimed in the base but the seed's, one class per number)
those are the classes the smaller group's candidates claim; otherwise the second and later class of each
number among the union's classes.
"""

from __future__ import annotations

import heapq

from fusec.ir.axis_slots import MIXED, NO_CANDIDATE
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import AxisMap, describe_axes, describe_space, outer_product_problem


class _Values:
    """Class numbers of a union on the fast path: the trial's own, else the base state's (whose numbers hold
    for every class that is still a root)."""

    __slots__ = ("own", "base")

    def __init__(self, own: dict[int, int], base: dict[int, int]):
        self.own, self.base = own, base

    def get(self, r: int) -> int | None:
        v = self.own.get(r)
        return v if v is not None else self.base.get(r)


class Numbering:
    """Claims and checks over a union's classes (see the module docstring). The class mixing it in provides
    ``slots``, ``counts``, ``base``, ``seed``, ``shape``, ``reduced``, ``reductions``, ``added``, ``own``,
    ``clash``, ``unit_clashes``, ``touched``, ``claimed``, ``fast``, ``info``, ``free``, ``small``, ``reduce_maps``
    and the methods ``find``, ``_info``, ``_roots`` and ``_members``."""

    __slots__ = ()

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
                first = min(firsts.get(by_shape, NO_CANDIDATE), firsts.get(by_reduction, NO_CANDIDATE))
                if first != NO_CANDIDATE:
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
        self.claimed = []
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
                        self.claimed.append(r)
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
        """region_space's validation: real axes (of the classes ``roots``) on region axes of their extent, no two
        on one region axis, reductions over the region's reduced axes. ``roots`` are all the union's classes,
        or on the fast path those it changed (the others were checked in the base)."""
        shape = self.shape
        self.counts.class_steps += len(roots)
        info, base_info = self.info, self.base.info
        numbered: dict[int, int] = {}  # region axis -> the first class of ``roots`` with partners numbered so
        shared: list[int] = []  # the other classes with partners that got a number already taken
        for r in roots:
            i = info.get(r)
            if i is None:
                i = base_info[r]
            ext = i[1]
            v = values.get(r)
            if ext is not None and (v is None or ext == MIXED or shape[v] != ext):
                return False
            if v is not None and (i[5] or i[6]):
                if i[6]:  # a slot and its twin in this class: two axes of a node along region axis v
                    return False
                if numbered.setdefault(v, r) != r:
                    shared.append(r)
        if self._twins_share_a_number(values, self.claimed if self.fast else shared):
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

    def _twins_share_a_number(self, values: dict[int, int] | _Values, roots: list[int]) -> bool:
        """Whether one of the classes ``roots`` has a partner class of its own number (twins along one region
        axis)."""
        find, info, base_info = self.find, self.info, self.base.info
        for r in roots:
            v = values.get(r)
            if v is None:
                continue
            i = info.get(r)
            partners = (i if i is not None else base_info[r])[5]
            self.counts.twin_steps += len(partners)
            for t in partners:
                if values.get(find(t)) == v:
                    return True
        return False

    def _first_failure(self, values: dict[int, int]) -> str | None:
        """The message of the first of region_space's checks that fails, with these class numbers."""
        shape, find, first = self.shape, self.find, self.slots.first
        where = describe_space(shape, self.reduced)
        members = self._members()
        for n in members:
            base = first[n]
            out: list[int | None] = []
            for k, d in enumerate(n.shape):
                v = None
                if d != 1:
                    v = values.get(find(base + k))
                    if v is None or shape[v] != d:
                        return (f"different iteration space: {n.op} of shape {list(n.shape)} does not run along "
                                f"the region's {where}")
                out.append(v)
            problem = outer_product_problem(n.op, n.shape, tuple(out), shape, self.reduced)
            if problem is not None:
                return problem
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
            problem = outer_product_problem(r.op, x.shape, maps[r], shape, self.reduced)
            if problem is not None:
                return problem
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
