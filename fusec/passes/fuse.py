"""fuse: partition a graph into regions, each one kernel with one iteration space.

Legality is decided here and in ``fusec/ir/region.py`` (the iteration space); whether a legal merge is
worth it, in ``policy.py``.
The partitioner starts from one group per non-source node and merges greedily:

1. vertical: a producer's group into its consumer's group (prologues into reductions, epilogues
   that broadcast reduced values back over the row, pointwise chains);
2. recompute: an intermediate that one region writes and others read is instead recomputed in
   each reader when its producer cone is pointwise and cheap (``policy.should_recompute``);
3. horizontal: groups with the same iteration space that read a common input (``x.sum(0)`` and
   ``x.max(0)`` read ``x`` once).

A merge is refused, with a reason kept for ``explain``, when the nodes have no common iteration
space, when it would create a cycle between kernels (checked with networkx on the graph of
groups), when an output could not be written once per element, or when the policy's budget says
no. The result is the same graph with ``regions`` (in an order that respects dependencies) and
``refusals``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import networkx as nx

from fusec.ir.graph import Graph, Node, rewrite
from fusec.ir.ops import Kind
from fusec.ir.region import Refusal, Region, RegionSpace, make_regions, region_space
from fusec.passes import policy
from fusec.passes.canonicalize import keepdims_form, reduce_over_nothing, size_of_input
from fusec.passes.manager import register


def _fusion_form(node: Node) -> Node:
    """What fusion needs of every graph, canonicalized or not: no reductions over no axes (kernels
    have nothing to reduce there), reductions in keepdims form, and ``size`` nodes that read an
    input's shape rather than an intermediate."""
    if node.op == "size":
        return size_of_input(node, node.operands[0]) or node
    if node.kind is Kind.REDUCTION:
        node = reduce_over_nothing(node, node.operands[0]) or node
    return keepdims_form(node) or node


@dataclass
class _Group:
    nodes: list[Node]  # topological order
    space: RegionSpace


class _Partition:
    """Groups of nodes (a node may sit in several groups when it is recomputed)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.order = {n: i for i, n in enumerate(graph.nodes)}
        self.names = _node_names(graph)
        self.returned = set(graph.outputs)
        self.groups: dict[int, _Group] = {}
        self.owner: dict[Node, int] = {}  # the group that computes and (if needed) writes a node
        self.refusals: dict[tuple, str] = {}
        for node in graph.nodes:
            if node.kind is Kind.SOURCE:
                continue
            gid = len(self.groups)
            self.groups[gid] = _Group([node], region_space([node]))
            self.owner[node] = gid

    # -- queries --------------------------------------------------------------------------------
    def holders(self, node: Node) -> list[int]:
        return [g for g, grp in self.groups.items() if node in grp.nodes]

    def reads_outside(self, gid: int) -> list[Node]:
        """Arrays the group reads that it does not compute (materialized nodes and inputs)."""
        inside = set(self.groups[gid].nodes)
        return list(dict.fromkeys(o for n in self.groups[gid].nodes for o in n.operands
                                  if o not in inside and o.op not in ("const", "size")))

    def writes(self, gid: int) -> list[Node]:
        """Nodes the group must write: returned ones it owns, and those read by groups lacking them."""
        out = []
        for n in self.groups[gid].nodes:
            if self.owner.get(n) != gid:
                continue
            if n in self.returned or any(
                gid2 != gid and any(n in u.operands for u in grp.nodes) and n not in grp.nodes
                for gid2, grp in self.groups.items()
            ):
                out.append(n)
        return out

    def quotient(self) -> nx.DiGraph:
        q = nx.DiGraph()
        q.add_nodes_from(self.groups)
        for gid in self.groups:
            for o in self.reads_outside(gid):
                src = self.owner.get(o)
                if src is not None and src != gid:
                    q.add_edge(src, gid, via=o)
        return q

    # -- legality of a candidate set ------------------------------------------------------------
    def check(self, nodes: list[Node], exclude: set[int]) -> RegionSpace:
        """The space of a candidate group, or Refusal. ``exclude`` are the groups it replaces."""
        space = region_space(nodes)
        # every node the candidate writes must be written once per element
        inside = set(nodes)
        others = [grp for g, grp in self.groups.items() if g not in exclude]
        n_written = 0
        for n in nodes:
            if self.owner.get(n) not in exclude:
                continue  # computed here only as a recomputed copy; its owner writes it
            read_elsewhere = any(n in u.operands and n not in grp.nodes for grp in others for u in grp.nodes)
            if not (n in self.returned or read_elsewhere):
                continue
            n_written += 1
            if space.reduced:
                ok = space.covers_all_axes(n) or (space.covers_kept_axes(n) and not space.varies_along_reduction(n))
            else:
                ok = space.covers_all_axes(n)
            if not ok:
                raise Refusal(f"{self.names[n]} ({n.op}, shape {list(n.shape)}) would be written more than once "
                              f"per element in a kernel over {list(space.shape)}")
        n_arrays = len({o for m in nodes for o in m.operands if o not in inside and o.op not in ("const", "size")})
        reason = policy.over_budget(nodes, space, n_arrays + n_written)  # intermediates stay in registers
        if reason:
            raise Refusal(reason)
        return space

    def cycle_through(self, a: int, b: int) -> str | None:
        """A node on a path a -> ... -> b (or b -> ... -> a) through another group, if any."""
        q = self.quotient()
        for src, dst in ((a, b), (b, a)):
            for succ in q.successors(src):
                if succ in (a, b):
                    continue
                if nx.has_path(q, succ, dst):
                    via = q.edges[src, succ]["via"]
                    return self.names[via]
        return None

    def _refuse(self, a: int, b: int, reason: str) -> None:
        key = (self.groups[a].nodes[-1], self.groups[b].nodes[-1])
        na, nb = self.names[key[0]], self.names[key[1]]
        self.refusals[key] = f"{na} ({key[0].op}) and {nb} ({key[1].op}) stay in separate kernels: {reason}"

    # -- merges ---------------------------------------------------------------------------------
    def merge(self, a: int, b: int) -> bool:
        if a == b:
            return False
        nodes = sorted(set(self.groups[a].nodes) | set(self.groups[b].nodes), key=self.order.__getitem__)
        try:
            space = self.check(nodes, {a, b})
        except Refusal as r:
            self._refuse(a, b, str(r))
            return False
        via = self.cycle_through(a, b)
        if via is not None:
            self._refuse(a, b, f"would create a cycle through {via}")
            return False
        self.groups[a] = _Group(nodes, space)
        del self.groups[b]
        for n, g in list(self.owner.items()):
            if g == b:
                self.owner[n] = a
        return True

    def vertical(self) -> bool:
        changed = False
        for u in self.graph.nodes:
            if u not in self.owner:
                continue
            for o in u.operands:
                if o in self.owner and self.owner[o] != self.owner[u]:
                    changed |= self.merge(self.owner[u], self.owner[o])
        return changed

    def recompute(self, views_only: bool = False) -> bool:
        """Recompute cheap pointwise producers in the groups that read them (``views_only``: layout
        views alone, whatever the policy says, as the unfused partition does)."""
        changed = False
        for n in list(self.graph.nodes):
            gid = self.owner.get(n)
            if gid is None or n in self.returned or (views_only and n.kind is not Kind.LAYOUT):
                continue
            readers = [g for g, grp in self.groups.items()
                       if g != gid and n not in grp.nodes and any(n in u.operands for u in grp.nodes)]
            if not readers:
                continue
            cone = self._cone(n, gid, views_only)
            if not views_only and not policy.should_recompute(cone):
                continue
            trial: dict[int, tuple[list[Node], RegionSpace]] = {}
            try:
                for g in readers:
                    nodes = sorted(set(self.groups[g].nodes) | set(cone), key=self.order.__getitem__)
                    trial[g] = (nodes, self.check(nodes, {g}))
            except Refusal:
                continue
            for g, (nodes, space) in trial.items():
                self.groups[g] = _Group(nodes, space)
            # the owner keeps computing n only if something of its own still reads it
            if not any(n in u.operands for u in self.groups[gid].nodes):
                self._drop_unused(gid, cone)
            changed = True
        return changed

    def _cone(self, n: Node, gid: int, views_only: bool = False) -> list[Node]:
        """``n`` and what it reads inside group ``gid`` (``views_only``: through layout views only)."""
        inside = set(self.groups[gid].nodes)
        cone, stack = set(), [n]
        while stack:
            m = stack.pop()
            if m in cone or m not in inside or (views_only and m.kind is not Kind.LAYOUT):
                continue
            cone.add(m)
            stack.extend(m.operands)
        return sorted(cone, key=self.order.__getitem__)

    def _drop_unused(self, gid: int, cone: list[Node]) -> None:
        grp = self.groups[gid]
        keep = list(grp.nodes)
        for m in reversed(cone):
            used = m in self.returned or any(m in u.operands for u in keep if u is not m)
            if not used:
                keep.remove(m)
        if not keep:
            del self.groups[gid]
        else:
            self.groups[gid] = _Group(keep, region_space(keep))
        for m in cone:
            if self.owner.get(m) == gid and m not in keep:
                self.owner[m] = next(g for g, gr in self.groups.items() if m in gr.nodes)

    def horizontal(self) -> bool:
        changed = True
        any_change = False
        while changed:
            changed = False
            ids = sorted(self.groups)
            for i, a in enumerate(ids):
                for b in ids[i + 1:]:
                    if a not in self.groups or b not in self.groups:
                        continue
                    sa, sb = self.groups[a].space, self.groups[b].space
                    if (sa.shape, sa.reduced) != (sb.shape, sb.reduced):
                        continue
                    shared = set(self.reads_outside(a)) & set(self.reads_outside(b))
                    if shared and self.merge(a, b):
                        changed = any_change = True
        return any_change

    def regions(self) -> tuple[Region, ...]:
        q = self.quotient()
        order = list(nx.lexicographical_topological_sort(
            q, key=lambda g: self.order[self.groups[g].nodes[0]]))
        specs = [(f"k{i}", self.groups[gid].space.kind, self.groups[gid].nodes) for i, gid in enumerate(order)]
        return make_regions(specs, self.graph.users, self.graph.outputs, [self.groups[g].space for g in order])


def _node_names(graph: Graph) -> dict[Node, str]:
    from fusec.ir.text import node_names

    return node_names(graph)


def partition(graph: Graph) -> Graph:
    """``graph`` with regions and refusals (graph must be in keepdims form)."""
    part = _Partition(graph)
    for _ in range(8):
        changed = part.vertical()
        changed |= part.recompute()
        changed |= part.horizontal()
        if not changed:
            break
    regions = part.regions()
    # keep one refusal per pair of kernels that really stayed apart
    where: dict[Node, str] = {}
    for r in regions:
        for n in r.nodes:
            where.setdefault(n, r.name)
    by_pair: dict[frozenset, str] = {}
    for (na, nb), msg in part.refusals.items():
        pair = frozenset((where[na], where[nb]))
        if len(pair) == 2:
            by_pair.setdefault(pair, msg)
    fused = Graph(graph.name, graph.inputs, graph.outputs, regions)
    # the messages name nodes as the unfused graph prints them; say them as the result prints them
    printed = _node_names(fused)
    rename = {part.names[n]: printed[n] for n in part.names if n in printed}
    refusals = [re.sub(r"%\d+\b", lambda m: rename.get(m.group(), m.group()), msg) for msg in by_pair.values()]
    return Graph(graph.name, graph.inputs, graph.outputs, regions, tuple(dict.fromkeys(refusals)))


@register("fuse", "partition into kernels (pointwise, reduce-all, rows, cols) with the reason for every split")
def fuse(graph: Graph) -> Graph:
    graph = rewrite(graph, _fusion_form)
    return partition(graph)


def partition_unfused(graph: Graph) -> Graph:
    """``graph`` with one region per elementwise op and reduction (``graph`` in keepdims form): the unfused
    plan, for comparison with the fused one. Layout views move no data, so a view joins the region that
    computes the array it views, or, when it views an input or a constant, each region that reads it; a
    view that is returned as it is, or that cannot join, is a region of its own (a copy)."""
    part = _Partition(graph)
    for n in graph.nodes:
        if n.kind is Kind.LAYOUT and n in part.owner and n.operands[0] in part.owner:
            part.merge(part.owner[n], part.owner[n.operands[0]])
    part.recompute(views_only=True)
    return Graph(graph.name, graph.inputs, graph.outputs, part.regions())


@register("unfuse", "one kernel per elementwise op and reduction (views join one): the plan fusion is compared with")
def unfuse(graph: Graph) -> Graph:
    graph = rewrite(graph, _fusion_form)
    return partition_unfused(graph)
