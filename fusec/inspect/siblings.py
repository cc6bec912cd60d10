"""Siblings in one kernel, for ``explain``: work that does not depend on other work of the kernel but shares
its launch (and, where the siblings read an array in common, one read of that array).

Two kinds, both found from the kernel's region alone (what the fusion pass merged, whichever step merged it):

- **independent groups**: the region's nodes fall into several groups with no data flowing between them
  inside the kernel (``np.exp(x), np.sin(y)`` of one shape; ``x.sum(0), x.max(0)``);
- **sibling reductions**: reductions of one group none of which depends on another (the three sums of a
  cosine similarity; a sum and a sum of squares): each is at the same *level*, the number of reductions on
  the longest path into it inside the kernel. The kernel folds them side by side, in one pass over the
  data unless its schedule splits them (``one_pass`` may pair a sum of squares with the mean before it).

For each, :func:`siblings` gives what the siblings would read as kernels of their own (each the arrays its
nodes read from memory, with the bytes the plan counts for them) against what the merged kernel reads
for them once: the bytes merging saved. Sharing no input saves no bytes, only launches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.union_find import find_root
from fusec.runtime.plan import Kernel, format_bytes

SHOWN = 6  # siblings named on the line; the others are counted


@dataclass(frozen=True)
class Siblings:
    """Siblings of one kernel: ``heads`` (each group's nodes, or each sibling reduction alone), the arrays each
    reads from memory, and the bytes read apart and merged."""

    kind: str  # "groups" | "reductions"
    heads: tuple[tuple[Node, ...], ...]
    reads: tuple[tuple[Node, ...], ...]
    bytes_apart: int
    bytes_merged: int

    @property
    def bytes_saved(self) -> int:
        return self.bytes_apart - self.bytes_merged


def _components(kernel: Kernel) -> list[list[Node]]:
    """The region's nodes grouped by the data that flows between them inside the kernel, in node order."""
    members = set(kernel.nodes)
    parent = {n: n for n in kernel.nodes}

    for n in kernel.nodes:
        for o in n.operands:
            if o in members:
                parent[find_root(parent, o)] = find_root(parent, n)
    groups: dict[Node, list[Node]] = {}
    for n in kernel.nodes:
        groups.setdefault(find_root(parent, n), []).append(n)
    return list(groups.values())


def _arrays_read(kernel: Kernel, nodes: Sequence[Node], stop_at_reductions: bool = False) -> tuple[Node, ...]:
    """The kernel's input arrays that ``nodes`` read, directly or through members they read (not through a
    reduction with ``stop_at_reductions``: a reduced value of an earlier pass is no read of memory)."""
    members, arrays = set(kernel.nodes), set(kernel.inputs)
    seen: set[Node] = set()
    found: dict[Node, None] = {}
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        for o in n.operands:
            if o in arrays:
                found[o] = None
            elif o in members and not (stop_at_reductions and o.kind is Kind.REDUCTION):
                stack.append(o)
    order = {n: i for i, n in enumerate(kernel.inputs)}
    return tuple(sorted(found, key=order.__getitem__))


def _levels(kernel: Kernel) -> dict[Node, int]:
    """For each member: the number of reductions on the longest path into it inside the kernel (itself not
    counted)."""
    members, level = set(kernel.nodes), {}
    for n in kernel.nodes:  # topological order
        level[n] = max((level[o] + (o.kind is Kind.REDUCTION) for o in n.operands if o in members), default=0)
    return level


def _measure(kind: str, kernel: Kernel, heads: list[tuple[Node, ...]], reads: list[tuple[Node, ...]]) -> Siblings:
    apart = sum(kernel.read_bytes(a) for r in reads for a in r)
    merged = sum(kernel.read_bytes(a) for a in dict.fromkeys(a for r in reads for a in r))
    return Siblings(kind, tuple(heads), tuple(reads), apart, merged)


def siblings(kernel: Kernel) -> list[Siblings]:
    """The independent groups of ``kernel`` (if more than one), then each set of two or more sibling
    reductions inside one group."""
    out = []
    components = _components(kernel)
    if len(components) > 1:
        heads = [tuple(c) for c in components]
        out.append(_measure("groups", kernel, heads, [_arrays_read(kernel, c) for c in components]))
    level = _levels(kernel)
    for component in components:
        by_level: dict[int, list[Node]] = {}
        for n in component:
            if n.kind is Kind.REDUCTION:
                by_level.setdefault(level[n], []).append(n)
        for same in by_level.values():
            if len(same) > 1:
                out.append(_measure("reductions", kernel, [(r,) for r in same],
                                    [_arrays_read(kernel, [r], stop_at_reductions=True) for r in same]))
    return out


def sibling_lines(kernel: Kernel, names: Mapping[Node, str]) -> list[str]:
    """``explain``'s lines for ``kernel``'s siblings (none when it has none)."""
    out = []
    for s in siblings(kernel):
        parts = []
        for heads, reads in list(zip(s.heads, s.reads))[:SHOWN]:
            what = ", ".join(f"{names[n]} {n.op}" for n in heads if n.kind is not Kind.LAYOUT) or ", ".join(
                f"{names[n]} {n.op}" for n in heads)
            parts.append(f"{what} (reads {', '.join(names[a] for a in reads) or 'nothing'})")
        if s.kind == "groups":
            head = f"{len(s.heads)} independent groups in one launch: "
        else:
            head = f"{len(s.heads)} independent reductions in one kernel: "
        if s.bytes_saved:
            tail = (f"apart they would read {format_bytes(s.bytes_apart)}, merged {format_bytes(s.bytes_merged)}: "
                    f"{format_bytes(s.bytes_saved)} saved")
        else:
            tail = "no input in common: no bytes saved, " + (
                f"one launch instead of {len(s.heads)}" if s.kind == "groups" else "one kernel for all")
        more = f"; and {len(s.heads) - SHOWN} more" if len(s.heads) > SHOWN else ""
        out += [f"  siblings: {head}{'; '.join(parts)}{more}", f"            {tail}"]
    return out


def bytes_saved(kernels: Sequence[Kernel]) -> int:
    """What merging siblings saved over all ``kernels``."""
    return sum(s.bytes_saved for k in kernels for s in siblings(k))


__all__ = ["Siblings", "bytes_saved", "sibling_lines", "siblings"]
