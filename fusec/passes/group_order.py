"""The graph of groups during fusion (the quotient DAG) kept in a topological order, for cycle checks.

The groups of a partition form a DAG: an edge ``g -> h`` when ``h`` reads a node that ``g`` owns (computes
and writes). Merging ``a`` and ``b`` must not close a cycle, which it would exactly when a path leads from
one to the other through a third group. :class:`GroupOrder` keeps an integer key per group such that every
edge goes from a smaller key to a larger one, so such a path can only run through groups whose keys lie
between those of ``a`` and ``b``: the search never leaves that window. After a merge the union takes the
later group's place and the earlier group's descendants inside the window move just after it (the search
found them), which keeps the order topological without renumbering the rest.

The edges themselves belong to the partition (``successors``); this module only orders and searches.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from collections.abc import Callable, Iterable

SPACING = 1 << 16  # room between keys, so moved groups get keys without renumbering the others


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

    def path_through_others(self, a: int, b: int, successors: Callable[[int], list[int]]
                            ) -> tuple[int | None, int | None, set[int]]:
        """Whether a path leads from ``a`` to ``b`` or from ``b`` to ``a`` through another group: ``(src,
        succ, seen)`` with ``succ`` the first successor of ``src`` (in ``successors`` order, ``a`` and ``b``
        skipped, ascending) from which the other one is reached, else ``(src, None, seen)`` where ``seen`` is every
        descendant of the earlier group ``src`` that precedes the later one."""
        src, dst = (a, b) if self.key[a] < self.key[b] else (b, a)
        limit = self.key[dst]
        key = self.key
        seen: set[int] = set()
        steps = 0
        for first in sorted(successors(src)):
            if first in (a, b) or key[first] > limit or first in seen:
                continue
            seen.add(first)
            stack = [first]
            while stack:
                g = stack.pop()
                for h in successors(g):
                    steps += 1
                    if h == dst:
                        self.counts["cycle_steps"] += steps
                        return src, first, seen
                    if h not in seen and key[h] < limit:
                        seen.add(h)
                        stack.append(h)
        self.counts["cycle_steps"] += steps + len(seen)
        return src, None, seen

    def contract(self, keep: int, gone: int, earlier: int, moved: set[int]) -> None:
        """``keep`` and ``gone`` became one group ``keep``: it takes the later key of the two, and ``moved``
        (the earlier one's descendants before the later one) goes right after it, in its current order."""
        if earlier == keep:  # keep takes the later key, which gone held
            anchor = self.key.pop(gone)
            self.remove(keep)
            self.key[keep] = anchor
        else:
            self.remove(gone)
        if moved:
            self._place_after(keep, sorted(moved, key=self.key.__getitem__))

    def _place_after(self, anchor: int, moved: list[int]) -> None:
        for g in moved:
            self.remove(g)
        lo = self.key[anchor]
        i = bisect.bisect_right(self.sorted, lo)
        hi = self.sorted[i] if i < len(self.sorted) else lo + SPACING * (len(moved) + 1)
        if hi - lo <= len(moved):  # no room left between the two keys: spread every key out again
            self.counts["renumbered"] += 1
            order = sorted(self.key, key=self.key.__getitem__)
            at = order.index(anchor) + 1
            order[at:at] = moved
            self.key = {g: (j + 1) * SPACING for j, g in enumerate(order)}
            self.sorted = sorted(self.key.values())
            return
        step = (hi - lo) // (len(moved) + 1)
        for j, g in enumerate(moved):
            k = lo + step * (j + 1)
            self.key[g] = k
            bisect.insort(self.sorted, k)

    def edge_fits(self, src: int, dst: int) -> bool:
        return self.key[src] < self.key[dst]

    def reorder(self, gids: Iterable[int], successors: Callable[[int], list[int]]) -> None:
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
