"""The graph of groups during fusion (the quotient DAG) kept in a topological order, for cycle checks.

The groups of a partition form a DAG: an edge ``g -> h`` when ``h`` reads a node that ``g`` owns (computes
and writes). Merging ``a`` and ``b`` must not close a cycle, which it would exactly when a path leads from
one to the other through a third group. :class:`GroupOrder` keeps an integer key per group such that every
edge goes from a smaller key to a larger one, so such a path can only run through groups whose keys lie
between those of ``a`` and ``b``. The search runs from both ends inside that window, forward from the
earlier group and backward from the later one, always growing the smaller side: it stops when the two
meet (a cycle) or when one side runs out. The side that ran out is what must move for the order to stay
topological after the merge: the earlier group's descendants in the window go right after the union, which
takes the later key, or the later group's ancestors in the window go right before the union, which takes
the earlier key. Nothing else is renumbered (unless two keys run out of room between them).

The edges themselves belong to the partition (``successors``, ``predecessors``); this module only orders
and searches.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from collections.abc import Callable, Iterable

SPACING = 1 << 16  # room between keys, so moved groups get keys without renumbering the others

Edges = Callable[[int], Iterable[int]]


class GroupOrder:
    """Integer keys giving a topological order of the groups."""

    def __init__(self, gids: Iterable[int], counts: Counter):
        self.key: dict[int, int] = {}
        for i, g in enumerate(gids):
            self.key[g] = (i + 1) * SPACING
        self.sorted: list[int] = sorted(self.key.values())
        self.counts = counts

    def remove(self, g: int) -> None:
        k = self.key.pop(g)
        del self.sorted[bisect.bisect_left(self.sorted, k)]

    def edge_fits(self, src: int, dst: int) -> bool:
        return self.key[src] < self.key[dst]

    def search(self, a: int, b: int, successors: Edges, predecessors: Edges) -> Search:
        """Whether a path joins ``a`` and ``b`` (either way) through another group."""
        key = self.key
        src, dst = (a, b) if key[a] < key[b] else (b, a)
        lo, hi = key[src], key[dst]
        ends = (a, b)
        fwd_seen: set[int] = set()
        bwd_seen: set[int] = set()
        fwd = [g for g in successors(src) if g not in ends and key[g] < hi]
        bwd = [g for g in predecessors(dst) if g not in ends and key[g] > lo]
        fwd_seen.update(fwd)
        bwd_seen.update(bwd)
        steps = len(fwd) + len(bwd)
        found = not fwd_seen.isdisjoint(bwd_seen)
        while not found and fwd and bwd:
            if len(fwd_seen) <= len(bwd_seen):
                for h in successors(fwd.pop()):
                    steps += 1
                    if h == dst or h in bwd_seen:
                        found = True
                        break
                    if h not in fwd_seen and key[h] < hi:
                        fwd_seen.add(h)
                        fwd.append(h)
            else:
                for h in predecessors(bwd.pop()):
                    steps += 1
                    if h == src or h in fwd_seen:
                        found = True
                        break
                    if h not in bwd_seen and key[h] > lo:
                        bwd_seen.add(h)
                        bwd.append(h)
        self.counts["cycle_steps"] += steps
        if found:
            return Search(src, dst, True, set(), False)
        if not fwd:
            return Search(src, dst, False, fwd_seen, True)
        return Search(src, dst, False, bwd_seen, False)

    def first_successor_on_a_path(self, search: Search, ends: tuple[int, int], successors: Edges,
                                  predecessors: Edges) -> int:
        """For a search that found a path: the first successor of its earlier group (ascending id, ``ends``
        skipped) from which the later group is reached."""
        lo = self.key[search.src]
        ancestors: set[int] = set()
        stack = [search.dst]
        while stack:
            for h in predecessors(stack.pop()):
                if h not in ancestors and h not in ends and self.key[h] > lo:
                    ancestors.add(h)
                    stack.append(h)
        self.counts["cycle_steps"] += len(ancestors)
        return min(g for g in successors(search.src) if g in ancestors)

    def contract(self, keep: int, gone: int, search: Search) -> None:
        """``keep`` and ``gone`` became one group ``keep`` (``search`` found no path between them): reorder
        so that every edge still points forward."""
        key = self.key
        src, dst = search.src, search.dst
        anchor = key[dst] if search.moved_after else key[src]
        if keep != (dst if search.moved_after else src):  # keep takes the anchor's key
            self.remove(keep)
            del key[gone]
            key[keep] = anchor
        else:
            self.remove(gone)
        if search.moved:
            moved = sorted(search.moved, key=key.__getitem__)
            for g in moved:
                self.remove(g)
            self._place(keep, moved, after=search.moved_after)

    def _place(self, anchor: int, moved: list[int], *, after: bool) -> None:
        k = self.key[anchor]
        i = bisect.bisect_left(self.sorted, k)
        if after:
            lo, hi = k, self.sorted[i + 1] if i + 1 < len(self.sorted) else k + SPACING * (len(moved) + 1)
        else:
            lo, hi = self.sorted[i - 1] if i > 0 else k - SPACING * (len(moved) + 1), k
        if hi - lo <= len(moved):  # no room left between the two keys: spread every key out again
            self.counts["renumbered"] += 1
            order = sorted(self.key, key=self.key.__getitem__)
            at = order.index(anchor) + (1 if after else 0)
            order[at:at] = moved
            self.key = {g: (j + 1) * SPACING for j, g in enumerate(order)}
            self.sorted = sorted(self.key.values())
            return
        step = (hi - lo) // (len(moved) + 1)
        for j, g in enumerate(moved):
            new = lo + step * (j + 1)
            self.key[g] = new
            bisect.insort(self.sorted, new)

    def reorder(self, gids: Iterable[int], successors: Edges) -> None:
        """Give every group a fresh key from a topological sort (after edges appeared that point backwards,
        which recomputation can do), keeping the current order where it is free to."""
        self.counts["reorders"] += 1
        gids = list(gids)
        indegree = dict.fromkeys(gids, 0)
        for g in gids:
            for h in successors(g):
                indegree[h] += 1
        ready = [(self.key[g], g) for g in gids if indegree[g] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, g = heapq.heappop(ready)
            order.append(g)
            for h in successors(g):
                indegree[h] -= 1
                if indegree[h] == 0:
                    heapq.heappush(ready, (self.key[h], h))
        if len(order) != len(gids):
            raise AssertionError("fusion made the graph of kernels cyclic")
        self.key = {g: (j + 1) * SPACING for j, g in enumerate(order)}
        self.sorted = sorted(self.key.values())


class Search:
    """The result of :meth:`GroupOrder.search`: the earlier and later group, whether a path joins them,
    and otherwise the groups that must move after a merge (after the union, or before it)."""

    __slots__ = ("src", "dst", "found", "moved", "moved_after")

    def __init__(self, src: int, dst: int, found: bool, moved: set[int], moved_after: bool):
        self.src, self.dst, self.found, self.moved, self.moved_after = src, dst, found, moved, moved_after
