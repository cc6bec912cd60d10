"""Recomputation, the second step of fusion's greedy driver (``fuse.py``): an intermediate that one group
writes and others read is instead recomputed in each reader, when its producer cone is pointwise and cheap
(``policy.should_recompute``) and every reader stays a legal kernel with it (``legality.py``); the producer's
group drops the cone when nothing of its own still reads it, unless what it keeps runs along its region only
through the cone (a returned node that reads nothing else of the group): then it keeps computing the cone.

:class:`Recomputation` is mixed into the partition of ``fuse.py``, whose bookkeeping it keeps up to date: the
groups holding each node, each group's reads, the node owners and the order of the graph of groups (an edge
that points backwards after recomputation makes the order be rebuilt once, at the end of the step).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.space_state import SpaceState
from fusec.passes import legality, policy

if TYPE_CHECKING:
    from fusec.passes.fuse import Group


def reads_of(nodes: Iterable[Node], inside: set[Node], order: dict[Node, int]) -> dict[Node, tuple]:
    """The arrays ``nodes`` read from outside ``inside`` (constants and sizes are no arrays), each with the
    position of its first reader and the operand index (the order of the graph of groups' edges)."""
    reads: dict[Node, tuple] = {}
    for n in nodes:
        for i, o in enumerate(n.operands):
            if o not in inside and o.op != "const" and o.op != "size":
                key = (order[n], i)
                if o not in reads or key < reads[o]:
                    reads[o] = key
    return reads


class Recomputation:
    """The recomputation step of the partition (see the module docstring). The partition mixing it in
    provides ``graph``, ``users``, ``slots``, ``order``, ``returned``, ``groups``, ``owner``, ``holders``,
    ``readers``, ``positions``, ``epoch``, ``order_stale``, ``read_back_bases`` and the methods ``_union_reads``,
    ``_written``, ``_set_reads``, ``_update_exported``, ``_successors`` and ``with_read_back_bases``."""

    def recompute(self, views_only: bool = False) -> bool:
        """Recompute cheap pointwise producers in the groups that read them (``views_only``: layout
        views alone, whatever the policy says, as the unfused partition does)."""
        changed = False
        for n in self.graph.nodes:
            group = self.owner.get(n)
            if group is None or n in self.returned or (views_only and n.kind is not Kind.LAYOUT):
                continue
            readers = sorted(self.readers.get(n, ()), key=lambda g: g.gid)
            if not readers:
                continue
            cone = self._cone(n, group, views_only)
            if cone is None:
                continue
            trials = []
            for g in readers:
                if g.library:  # a matmul's GEMM reads it from memory: its owner keeps writing it
                    continue
                trial = g.state.union(SpaceState.build(self.slots, cone, evaluate=False))
                reads = self._union_reads((g,), trial)
                for o, key in reads_of(cone, set(cone), self.order).items():
                    if not trial.contains(o) and (o not in reads or key < reads[o]):
                        reads[o] = key
                self.with_read_back_bases(reads)
                reason = legality.kernel_reason(trial, lambda g=g: g.members_at, self.slots,
                                                self._written((g,)), len(reads))
                if reason is not None:
                    break
                trials.append((g, trial, reads))
            else:
                self.epoch += 1
                for g, trial, reads in trials:
                    self._add_cone(g, trial.commit(), cone, reads)
                # the owner keeps computing n only if something of its own still reads it
                if not any(u in group.members for u in self.users[n]):
                    self._drop_unused(group, cone)
                changed = True
        if self.order_stale:
            self.order_stale = False
            self.positions.reorder(self.groups, self._successors)
        return changed

    def _cone(self, n: Node, group: Group, views_only: bool) -> list[Node] | None:
        """``n`` and what it reads inside ``group`` (``views_only``: through layout views only), or None
        when the policy would not recompute it (found without collecting all of a large cone)."""
        inside = group.members
        cone: set[Node] = set()
        stack = [n]
        while stack:
            m = stack.pop()
            if m in cone or m not in inside or (views_only and m.kind is not Kind.LAYOUT):
                continue
            if m in self.read_back_bases:  # written for a reshape read back after this kernel: never twice
                return None
            cone.add(m)
            if not views_only and policy.rules_out_recompute(cone):
                return None
            stack.extend(m.operands)
        return sorted(cone, key=self.order.__getitem__)

    def _add_cone(self, g: Group, state: SpaceState, cone: list[Node], reads: dict[Node, tuple]) -> None:
        g.state = state
        for m in cone:
            self.holders[m].add(g)
        self._set_reads(g, reads)
        g.members_at = legality.Members(g.members_at, tuple(cone))
        g.first = min(g.first, self.order[cone[0]])
        self._check_edges_into(g, reads)

    def _check_edges_into(self, g: Group, reads: Iterable[Node]) -> None:
        for o in reads:
            src = self.owner.get(o)
            if src is not None and src is not g and not self.positions.edge_fits(src.gid, g.gid):
                self.order_stale = True

    def _drop_unused(self, group: Group, cone: list[Node]) -> None:
        keep = set(group.members)
        for m in reversed(cone):
            # still wanted here: returned, read by what the group keeps, or read from memory by a group that did
            # not take the cone (a gather's array, which never joins the gather's kernel): moving its owner
            # there could make the kernels read each other
            used = (m in self.returned or any(u in keep for u in self.users[m] if u is not m)
                    or any(group is not r and r not in self.holders[m] for r in self.readers.get(m, ())))
            if not used:
                keep.discard(m)
        ordered = sorted(keep, key=self.order.__getitem__)
        state = SpaceState.build(self.slots, ordered) if keep else None
        if state is not None and not state.legal:
            # what is left has no iteration space of its own (it ran along the region through the cone only: a
            # returned node that read nothing else of the group, a window read along part of an axis the dropped
            # members spanned): the group goes on computing the cone too
            return
        dropped = group.members - keep
        for m in dropped:
            self.holders[m].discard(group)
        if state is None:
            self._set_reads(group, {})
            del self.groups[group.gid]
            self.positions.remove(group.gid)
        else:
            group.state = state
            group.members_at = legality.Members(tuple(ordered))
            group.first, group.last = self.order[ordered[0]], self.order[ordered[-1]]
            self._set_reads(group, reads_of(ordered, keep, self.order))
        for m in cone:
            if self.owner[m] is group and m not in keep:
                new = min(self.holders[m], key=lambda g: g.gid)
                self.owner[m] = new
                group.exported.discard(m)
                self._update_exported(m)
                for r in self.readers.get(m, ()):
                    if not self.positions.edge_fits(new.gid, r.gid):
                        self.order_stale = True
