"""fuse: partition a graph into regions, each one kernel with one iteration space.

Whether groups may share a kernel is ``legality.py``'s question (with ``fusec/ir/region.py`` for the
iteration space); whether a legal merge is worth it, ``policy.py``'s. This module is the greedy driver
that starts from one group per non-source node and merges:

1. vertical: a producer's group into its consumer's group (prologues into reductions, epilogues
   that broadcast reduced values back over the row, pointwise chains);
2. recompute (``recompute.py``): an intermediate that one region writes and others read is instead
   recomputed in each reader when its producer cone is pointwise and cheap (``policy.should_recompute``);
3. horizontal: groups with the same iteration space that read a common input (``x.sum(0)`` and
   ``x.max(0)`` read ``x`` once).

The three steps repeat (at most 8 rounds) until nothing changes. The result is the same graph with
``regions`` (in an order that respects dependencies) and ``refusals``: each refused merge is recorded as
data (the two groups' last nodes and a ``legality`` reason), and one refusal per pair of kernels that stayed
apart is printed at the end, naming the nodes as the result prints them.

Every step costs time in proportion to what it changes, not to the graph: each group carries its
iteration space (:class:`fusec.ir.space_state.SpaceState`, updated as groups merge), the arrays it reads
from outside (at most the budget's 32) and the nodes it owns that others read; each node knows its owner,
the groups holding it and the groups reading it; the graph of groups is kept in a topological order
(:mod:`group_order`) so a cycle check searches only between the two groups; horizontal candidates come
from an index by (iteration space, array read). The space of a pair of groups is reused while neither
changes, and a refusal is repeated without checks while nothing changed at all (the sweeps try every edge
again each round). :class:`PartitionCounts` counts the work, for tests that bound it.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from fusec.ir.axis_slots import AxisSlots, SpaceCounts
from fusec.ir.graph import Graph, Node
from fusec.ir.ops import Kind
from fusec.ir.region import Region, contraction_space, make_regions, operand_views
from fusec.ir.reshape_math import (
    READ_BACK,
    is_read_back,
    outside_kernels,
    read_back_views,
    returned_views,
    view_base,
)
from fusec.ir.space_state import SpaceState
from fusec.passes import kept_values, legality
from fusec.passes.canonicalize import keepdims_form, reduce_over_nothing, size_of_input
from fusec.passes.gathers import sink_gather
from fusec.passes.group_order import GroupOrder
from fusec.passes.kept_values import sunk_rewrite
from fusec.passes.recompute import Recomputation
from fusec.passes.registry import register
from fusec.passes.reshapes import check_reshapes, refine_reshapes
from fusec.passes.views import sink_slice
from fusec.passes.windows import sink_window

INDEPENDENT_TRIES = 2  # independent elementwise groups: earlier groups of the same shape each one tries to join
# refused sibling merges after which a group stops trying later siblings in one sweep: a chain of n groups that all
# read one array (the steps of a stencil, each reading the same mask) would otherwise try n^2/2 pairs, each
# refused as a cycle; groups that merged try again in the next sweep
SIBLING_REFUSALS = 8


def _fusion_form(node: Node) -> Node:
    """What fusion needs of every graph, canonicalized or not: no reductions over no axes (kernels
    have nothing to reduce there), reductions in keepdims form, ``size`` nodes that read an
    input's shape rather than an intermediate, and slices and gathers on the arrays they read (:mod:`views`,
    :mod:`gathers`)."""
    if node.op == "size":
        return size_of_input(node, node.operands[0]) or node
    if node.op == "window" or (node.op == "slice" and node.operands[0].op == "window"):
        return sink_window(node) or node
    if node.op == "slice":
        return sink_slice(node) or node
    if node.kind is Kind.GATHER:
        return sink_gather(node) or node
    if node.kind is Kind.REDUCTION:
        node = reduce_over_nothing(node, node.operands[0]) or node
    return keepdims_form(node) or node


@dataclass
class PartitionCounts:
    """Work done by one partition (doubling a graph should about double each count)."""

    merges_tried: int = 0
    merges: int = 0
    groups_examined: int = 0  # horizontal candidates and readers looked at
    steps: Counter = field(default_factory=Counter)  # cycle_steps (group edges searched), reorders, ...
    space: SpaceCounts = field(default_factory=SpaceCounts)


class Group:
    """One group: its space, members, the arrays it reads from outside, the nodes it owns that others read."""

    __slots__ = ("gid", "state", "members_at", "reads", "exported", "first", "last", "library")

    def __init__(self, gid: int, state: SpaceState, members_at: legality.Members, reads: dict[Node, tuple],
                 first: int, last: int, library: tuple[Node, ...] = ()):
        self.gid = gid
        self.state = state
        self.members_at = members_at  # the members, for a refusal's text
        self.reads = reads  # array read from outside -> (position of its first reader, operand index)
        self.exported: set[Node] = set()  # owned nodes that are returned or read by other groups
        self.first, self.last = first, last  # smallest and largest member position
        # a matmul's group (a GEMM library computes it alone): the operand views it takes, then the matmul
        self.library = library

    @property
    def members(self) -> set[Node]:
        return self.state.members

    def key(self) -> tuple:
        """Groups with equal keys have the same iteration space (shape and reduced axes)."""
        return self.state.shape, tuple(sorted(self.state.reduced))


class _Partition(Recomputation):
    """Groups of nodes (a node may sit in several groups when it is recomputed) and their bookkeeping."""

    def __init__(self, graph: Graph, counts: PartitionCounts):
        self.graph = graph
        self.counts = counts
        self.users = graph.users
        outside = outside_kernels(graph)  # views the runtime takes of arguments and results (reshapes)
        # reshapes read back between kernels -> the computed array each one views, which a kernel must write
        self.read_back: dict[Node, Node] = {}
        for n in read_back_views(graph):
            base = n.operands[0]
            while base in outside:
                base = base.operands[0]
            self.read_back[n] = base
        self.read_back_bases = frozenset(self.read_back.values())  # each written for a kernel after its own
        self.returned = set(graph.outputs) | {n.operands[0] for n in returned_views(graph)} | self.read_back_bases
        self.slots = AxisSlots(graph.nodes, self.users, counts.space, outside)
        self.order = self.slots.order
        self.groups: dict[int, Group] = {}
        self.owner: dict[Node, Group] = {}  # the group that computes and (if needed) writes a node
        self.holders: dict[Node, set[Group]] = {}
        self.readers: dict[Node, set[Group]] = {}  # array -> groups reading it from outside
        self.refusals: dict[tuple[Node, Node], legality.Reason] = {}
        self.trials: dict[tuple[int, int], tuple[tuple[int, int], object]] = {}  # last space tried per pair
        self.epoch = 0  # counts changes to any group: a refusal repeats while neither group nor the epoch changed
        self.last_refusal: dict[tuple[int, int], tuple[tuple, legality.Reason]] = {}
        library = self._library_kernels(outside)
        taken = {v for views in library.values() for v in views if self._views_only_for(v, views)}
        for node in graph.nodes:
            if node.kind is Kind.SOURCE or node in outside or node in taken:
                continue
            gid = len(self.groups)
            pos = self.order[node]
            views = library.get(node, ())
            reads: dict[Node, tuple] = {}
            for i, o in enumerate(node.operands):
                while o in views:  # the arrays a matmul's operands view (the views are the GEMM's layouts)
                    o = o.operands[0]
                if o not in reads and o.op != "const" and o.op != "size":
                    reads[o] = (pos, i)
            self.with_read_back_bases(reads)
            group = Group(gid, SpaceState.single(self.slots, node), legality.Members((node,)), reads, pos, pos,
                          (*views, node) if node in library else ())
            self.groups[gid] = self.owner[node] = group
            self.holders[node] = {group}
            for o in group.reads:
                self.readers.setdefault(o, set()).add(group)
        for node in self.owner:
            self._update_exported(node)
        self.positions = GroupOrder(self.groups, counts.steps)
        self.order_stale = False  # an edge of the graph of groups points backwards (after recomputation)

    # -- bookkeeping ------------------------------------------------------------------------------
    def _library_kernels(self, outside: set[Node]) -> dict[Node, tuple[Node, ...]]:
        """Each matmul (a kernel a library computes) -> the views of its operands it takes itself (none returned:
        a returned view is written by a kernel of its own)."""
        return {n: tuple(operand_views(n, lambda v: v not in self.returned and v not in outside))
                for n in self.graph.nodes if n.kind is Kind.CONTRACTION}

    def _views_only_for(self, view: Node, views: tuple[Node, ...]) -> bool:
        """Whether ``view`` (one of a matmul's operand views) is read by that matmul's views and itself only (then no
        other kernel holds it; else it is also a member of the kernels reading it, as views are)."""
        inside = set(views)
        stack, seen = [view], set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            for u in self.users.get(v, ()):
                if u.kind is Kind.CONTRACTION:  # a matmul reading it takes it as a view too
                    continue
                if u not in inside:
                    return False
                stack.append(u)
        return True

    def with_read_back_bases(self, reads: dict[Node, tuple]) -> None:
        """Add to ``reads`` the array behind each reshape read back between kernels that it holds: the edge of the
        graph of groups from the kernel that writes it."""
        for o in [o for o in reads if o in self.read_back]:
            reads.setdefault(self.read_back[o], reads[o])

    def reads_back_own(self, space: SpaceState | object, reads: dict[Node, tuple]) -> Node | None:
        """A reshape read back between kernels that a kernel of ``space`` reads while computing what it views."""
        contains = space.contains  # type: ignore[attr-defined]
        return next((o for o in reads if o in self.read_back and contains(self.read_back[o])), None)

    def _update_exported(self, node: Node) -> None:
        owner = self.owner.get(node)
        if owner is None:
            return
        if node in self.returned or self.readers.get(node):
            owner.exported.add(node)
        else:
            owner.exported.discard(node)

    def _successors(self, gid: int) -> list[int]:
        readers = self.readers
        out = {r.gid for o in self.groups[gid].exported for r in readers.get(o, ())}
        out.discard(gid)
        return list(out)

    def _predecessors(self, gid: int) -> list[int]:
        group = self.groups[gid]
        out = {owner.gid for o in group.reads if (owner := self.owner.get(o)) is not None and owner is not group}
        return list(out)

    def _via(self, src: int, succ: int) -> Node:
        """The node an edge src -> succ of the graph of groups stands for (the last one ``succ`` reads)."""
        owner = self.groups[src]
        reads = self.groups[succ].reads
        return max((o for o in reads if self.owner.get(o) is owner), key=reads.__getitem__)

    def _set_reads(self, group: Group, reads: dict[Node, tuple]) -> None:
        """Replace ``group``'s reads, keeping readers and the owners' exported nodes up to date."""
        old = group.reads
        group.reads = reads
        for o in old.keys() - reads.keys():
            self.readers[o].discard(group)
            self._update_exported(o)
        for o in reads.keys() - old.keys():
            self.readers.setdefault(o, set()).add(group)
            self._update_exported(o)

    def _written(self, exclude: tuple[Group, ...]) -> list[Node]:
        """Nodes owned by ``exclude`` that a kernel replacing them must write: returned, or read by
        another group (topological order)."""
        returned, readers, gone = self.returned, self.readers, set(exclude)
        out = [n for g in exclude for n in g.exported if n in returned or not readers[n] <= gone]
        out.sort(key=self.order.__getitem__)
        return out

    # -- merges ---------------------------------------------------------------------------------
    def _refuse(self, a: Group, b: Group, reason: legality.Reason) -> None:
        key = (self.slots.nodes[a.last], self.slots.nodes[b.last])  # each group's last node
        self.refusals[key] = reason

    def _union_reads(self, groups: tuple[Group, ...], inside: SpaceState | object) -> dict[Node, tuple]:
        reads: dict[Node, tuple] = {}
        contains = inside.contains  # type: ignore[attr-defined]
        for g in groups:
            for o, key in g.reads.items():
                if not contains(o) and (o not in reads or key < reads[o]):
                    reads[o] = key
        return reads

    def _space_of_union(self, sa: SpaceState, sb: SpaceState):  # -> space_state._Trial
        """The space of two groups together, reused while neither group changed (the sweeps try the same
        pair again for every edge between them, and again in later rounds)."""
        pair, versions = (sa.serial, sb.serial), (sa.version, sb.version)
        cached = self.trials.get(pair)
        if cached is not None and cached[0] == versions:
            self.counts.steps["spaces_reused"] += 1
            return cached[1]
        trial = sa.union(sb)
        self.trials[pair] = (versions, trial)
        return trial

    def merge(self, a: int, b: int) -> bool:
        """Merge group ``b`` into group ``a`` if legal (else record why not)."""
        if a == b:
            return False
        ga, gb = self.groups[a], self.groups[b]
        self.counts.merges_tried += 1
        if ga.library or gb.library:  # a GEMM library's kernel takes nothing else
            self._refuse(ga, gb, legality.LibraryKernel((ga.library or gb.library)[-1]))
            return False
        when = (ga.state.serial, ga.state.version, gb.state.serial, gb.state.version, self.epoch)
        last = self.last_refusal.get((a, b))
        if last is not None and last[0] == when:  # nothing changed since the same refusal
            self.counts.steps["refusals_repeated"] += 1
            self._refuse(ga, gb, last[1])
            return False
        trial = self._space_of_union(ga.state, gb.state)
        reads = self._union_reads((ga, gb), trial)
        own = self.reads_back_own(trial, reads)
        reason = legality.ReadBackOfOwn(own) if own is not None else legality.kernel_reason(
            trial, lambda: legality.Members(ga.members_at, gb.members_at), self.slots, self._written((ga, gb)),
            len(reads))
        search = None
        if reason is None:
            search = self.positions.search(a, b, self._successors, self._predecessors)
            if search.found:
                succ = self.positions.first_successor_on_a_path(search, (a, b), self._successors,
                                                                self._predecessors)
                reason = legality.Cycle(self._via(search.src, succ))
        if reason is not None:
            self._refuse(ga, gb, reason)
            self.last_refusal[(a, b)] = (when, reason)
            return False
        self.epoch += 1
        state = trial.commit()
        self.trials.pop((ga.state.serial, gb.state.serial), None)
        if ga.state is state:
            keep, gone = ga, gb
        elif gb.state is state:
            keep, gone = gb, ga
        else:  # rebuilt from scratch: the larger group stays
            keep, gone = (ga, gb) if len(ga.members) >= len(gb.members) else (gb, ga)
        gone_members = gone.members  # the other state is untouched
        keep.gid, keep.state = a, state
        for n in gone_members:
            holders = self.holders[n]
            holders.discard(gone)
            holders.add(keep)
            if self.owner[n] is gone:
                self.owner[n] = keep
        for o in gone.reads:
            self.readers[o].discard(gone)
        touched = list(gone.reads)
        gone.reads = {}
        self._set_reads(keep, reads)
        exported = keep.exported | gone.exported
        keep.exported = exported
        for n in [*touched, *exported]:
            self._update_exported(n)
        keep.members_at = legality.Members(keep.members_at, gone.members_at)
        keep.first, keep.last = min(keep.first, gone.first), max(keep.last, gone.last)
        self.groups[a] = keep
        del self.groups[b]
        self.positions.contract(a, b, search)  # type: ignore[arg-type]
        self.counts.merges += 1
        return True

    def vertical(self) -> bool:
        changed = False
        owner = self.owner
        for u in self.graph.nodes:
            if u not in owner:
                continue
            for o in u.operands:
                if o in owner and owner[o] is not owner[u]:
                    changed |= self.merge(owner[u].gid, owner[o].gid)
        return changed

    # -- horizontal -----------------------------------------------------------------------------
    def horizontal(self) -> bool:
        """Merge groups of one iteration space that read a common array: each group with every later one,
        in ascending order (until :data:`SIBLING_REFUSALS` of them refused), again while anything merged (the
        pairwise sweep, over candidates only)."""
        any_change = False
        changed = True
        while changed:
            changed = False
            siblings: dict[tuple, set[int]] = {}  # (space key, array read) -> groups
            for g in self.groups.values():
                key = g.key()
                for o in g.reads:
                    siblings.setdefault((key, o), set()).add(g.gid)
            for a in sorted(self.groups):
                if a in self.groups:
                    changed |= self._merge_siblings(a, siblings)
            any_change |= changed
        return any_change

    def _merge_siblings(self, a: int, siblings: dict[tuple, set[int]]) -> bool:
        """Try group ``a`` with each later group of the same space that reads an array ``a`` reads, in
        ascending order; ``siblings`` is kept up to date as ``a`` takes groups in."""
        merged = False
        key = self.groups[a].key()
        heap: list[int] = []
        self._push_siblings(heap, siblings, key, self.groups[a].reads, a)
        current = a
        refused = 0
        while heap and refused < SIBLING_REFUSALS:
            b = heapq.heappop(heap)
            if b <= current:
                continue
            current = b
            self.counts.groups_examined += 1
            ga, gb = self.groups[a], self.groups.get(b)
            if gb is None or gb.key() != key or not (ga.reads.keys() & gb.reads.keys()):
                continue
            before, taken = set(ga.reads), list(gb.reads)
            if not self.merge(a, b):
                refused += 1
            else:
                merged = True
                for o in taken:
                    siblings[(key, o)].discard(b)
                added = [o for o in self.groups[a].reads if o not in before]
                for o in added:
                    siblings.setdefault((key, o), set()).add(a)
                self._push_siblings(heap, siblings, key, added, current)
        return merged

    def independent(self) -> bool:
        """Merge elementwise groups of one iteration space that share no input (independent pointwise work of
        the same shape: one launch instead of several), each into an earlier group of its shape that legally
        takes it (one of the :data:`INDEPENDENT_TRIES` latest: linear work). A refused attempt (a cycle, a
        budget) leaves no refusal behind: the groups were never meant to share data."""
        changed = False
        open_groups: dict[tuple, list[int]] = {}  # space key -> groups that may take more, in order
        for gid in sorted(self.groups):
            g = self.groups.get(gid)
            if g is None or g.state.reduced or g.state.shape == () or not g.reads:
                continue
            key = g.key()
            for a in open_groups.get(key, [])[-INDEPENDENT_TRIES:]:
                refusals, last = dict(self.refusals), dict(self.last_refusal)
                if a in self.groups and self.merge(a, gid):
                    changed = True
                    break
                self.refusals, self.last_refusal = refusals, last
            else:
                open_groups.setdefault(key, []).append(gid)
        return changed

    def _push_siblings(self, heap: list[int], siblings: dict[tuple, set[int]], key: tuple, reads: Iterable[Node],
                       after: int) -> None:
        for o in reads:
            for gid in siblings.get((key, o), ()):
                self.counts.groups_examined += 1
                if gid > after:
                    heapq.heappush(heap, gid)

    # -- result ---------------------------------------------------------------------------------
    def regions(self) -> tuple[Region, ...]:
        """The groups as regions, in the order of a topological sort of the graph of groups that takes
        the group with the earliest first node (then the smallest id) whenever it may."""
        indegree = dict.fromkeys(self.groups, 0)
        successors = {g: sorted(self._successors(g)) for g in self.groups}
        for succ in successors.values():
            for h in succ:
                indegree[h] += 1
        ready = [(self.groups[g].first, g) for g, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, g = heapq.heappop(ready)
            order.append(g)
            for h in successors[g]:
                indegree[h] -= 1
                if indegree[h] == 0:
                    heapq.heappush(ready, (self.groups[h].first, h))
        specs, spaces = [], []
        for i, g in enumerate(order):
            group = self.groups[g]
            if group.library:
                nodes = sorted(group.library, key=self.order.__getitem__)
                space = contraction_space(nodes)
            else:
                nodes = sorted(group.members, key=self.order.__getitem__)
                space = group.state.region_space(nodes)
            specs.append((f"k{i}", space.kind, nodes))
            spaces.append(space)
        return make_regions(specs, self.users, self.graph.outputs, spaces)


def partition(graph: Graph, counts: PartitionCounts | None = None) -> Graph:
    """``graph`` with regions and refusals (graph must be in keepdims form); ``counts`` receives the work."""
    from fusec.ir.printer import node_names

    part = _Partition(graph, counts if counts is not None else PartitionCounts())
    for _ in range(8):
        changed = part.vertical()
        changed |= part.recompute()
        changed |= part.horizontal()
        if not changed:
            break
    part.independent()
    regions = part.regions()
    # keep one refusal per pair of kernels that really stayed apart
    where: dict[Node, str] = {}
    for r in regions:
        for n in r.nodes:
            where.setdefault(n, r.name)
    by_pair: dict[frozenset, tuple[Node, Node, legality.Reason]] = {}
    for (na, nb), reason in part.refusals.items():
        pair = frozenset((where[na], where[nb]))
        if len(pair) == 2:
            by_pair.setdefault(pair, (na, nb, reason))
    fused = Graph(graph.name, graph.inputs, graph.outputs, regions)
    names = node_names(fused)
    refusals = [f"{names[na]} ({na.op}) and {names[nb]} ({nb.op}) stay in separate kernels: {reason.text(names)}"
                for na, nb, reason in by_pair.values()]
    refusals += _read_back_entries(graph, names)
    return Graph(graph.name, graph.inputs, graph.outputs, regions, tuple(dict.fromkeys(refusals)))


def _read_back_entries(graph: Graph, names: dict[Node, str]) -> list[str]:
    """The plan's entry for each reshape read back between kernels: what is written and read again, and why."""
    out = []
    for n in graph.nodes:
        if not is_read_back(n):
            continue
        o = n.operands[0]
        what = (f"{names[n]} (reshape to {list(n.shape)}) is taken by CuPy before the kernels (a copy where the "
                "argument's strides need one)" if view_base(n).op == "input" else
                f"{names[n]} (reshape to {list(n.shape)}) reads {names.get(o, o.op)} back from memory: the kernel "
                f"computing it writes it, the kernels after it read the reshape")
        out.append(f"{what}, as no kernel can read it as index arithmetic: {n.attr(READ_BACK)}")
    return out


def fusion_form(graph: Graph, counts: Counter | None = None) -> Graph:
    """``graph`` in the form fusion partitions (:func:`_fusion_form` on every node; views sunk to the arrays they
    read, or to the values kept in memory for them: :mod:`fusec.passes.kept_values`, whose work ``counts`` gets)."""
    return sunk_rewrite(graph, _fusion_form, counts)


@register("fuse", "partition into kernels (pointwise, reduce-all, rows, cols) with the reason for every split")
def fuse(graph: Graph) -> Graph:
    graph = check_reshapes(refine_reshapes(fusion_form(graph)))
    fused = partition(graph)
    kept = kept_values.kept_in_memory(graph)
    if not kept:
        return fused
    from fusec.ir.printer import node_names

    names = node_names(fused)
    notes = [f"{names.get(n, n.op)} ({n.op}) is read through more than {kept_values.VIEWS_PER_VALUE} different "
             "views: it is computed once into memory, where its views read it, not again for each view "
             "(fusec.passes.kept_values)" for n in graph.nodes if n in kept]
    return Graph(fused.name, fused.inputs, fused.outputs, fused.regions, fused.refusals + tuple(notes))


def partition_unfused(graph: Graph) -> Graph:
    """``graph`` with one region per elementwise op and reduction (``graph`` in keepdims form): the unfused
    plan, for comparison with the fused one. Layout views move no data, so a view joins the region that
    computes the array it views, or, when it views an input or a constant, each region that reads it; a
    view that is returned as it is, or that cannot join, is a region of its own (a copy)."""
    part = _Partition(graph, PartitionCounts())
    for n in graph.nodes:
        if n.kind is Kind.LAYOUT and n in part.owner and n.operands[0] in part.owner:
            part.merge(part.owner[n].gid, part.owner[n.operands[0]].gid)
    part.recompute(views_only=True)
    return Graph(graph.name, graph.inputs, graph.outputs, part.regions())


@register("unfuse", "one kernel per elementwise op and reduction (views join one): the plan fusion is compared with")
def unfuse(graph: Graph) -> Graph:
    graph = check_reshapes(refine_reshapes(fusion_form(graph)))
    return partition_unfused(graph)
