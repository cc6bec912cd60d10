"""Which axes of a graph are chunked alike, and how: the chunk bookkeeping of the Dask path (no Dask import).

Every axis of every node whose extent is not 1 belongs to an *axis class*: two axes are in one class when
NumPy's semantics tie their indices together (an elementwise op's operand axis and its result axis, a
reduction's kept axes, a transpose's permuted axes, ...). An axis of extent 1 belongs to no class: it
broadcasts, and its chunking is ``(1,)`` wherever it is. One class has one chunking, the common refinement
of its inputs' chunkings (what Dask's ``unify_chunks`` computes for ``blockwise``), so a block index per class
addresses one block of every node at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from fusec.ir.graph import Graph, Node
from fusec.ir.ops import Kind
from fusec.ir.union_find import find_root

Chunks = tuple[tuple[int, ...], ...]
AxisKey = tuple[Node, int]


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[AxisKey, AxisKey] = {}

    def add(self, key: AxisKey) -> None:
        self.parent.setdefault(key, key)

    def find(self, key: AxisKey) -> AxisKey:
        return find_root(self.parent, key)

    def union(self, a: AxisKey, b: AxisKey) -> None:
        if a[0].shape[a[1]] == 1 or b[0].shape[b[1]] == 1:
            return  # a broadcast axis is tied to nothing
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _operand_axes(node: Node) -> list[tuple[int, int, int]]:
    """(operand index, operand axis, result axis) for every pair of axes ``node`` ties together."""
    pairs: list[tuple[int, int, int]] = []
    kind = node.kind
    if kind is Kind.ELEMENTWISE or node.op == "broadcast_to":
        for i, operand in enumerate(node.operands):
            offset = node.ndim - operand.ndim
            pairs += [(i, ax, ax + offset) for ax in range(operand.ndim)]
    elif kind is Kind.REDUCTION:
        (x,) = node.operands
        axes = set(node.attr("axes"))
        if node.ndim == 0:
            return []
        if node.attr("keepdims"):
            pairs += [(0, ax, ax) for ax in range(x.ndim) if ax not in axes]
        else:
            kept = [ax for ax in range(x.ndim) if ax not in axes]
            pairs += [(0, ax, out) for out, ax in enumerate(kept)]
    elif node.op == "expand_dims":
        new = set(node.attr("axes"))
        kept = [ax for ax in range(node.ndim) if ax not in new]
        pairs += [(0, i, out) for i, out in enumerate(kept)]
    elif node.op == "squeeze":
        gone = set(node.attr("axes"))
        kept = [ax for ax in range(node.operands[0].ndim) if ax not in gone]
        pairs += [(0, ax, out) for out, ax in enumerate(kept)]
    elif node.op == "transpose":
        pairs += [(0, ax, out) for out, ax in enumerate(node.attr("perm"))]
    return pairs


class AxisClasses:
    """The axis classes of ``graph`` and each class's chunking, from the chunkings of its inputs.

    ``input_chunks`` gives, per graph input, its Dask chunks (``None`` for an input that is not chunked yet:
    it takes its classes' chunkings). ``classes_of(node)`` is one class id (or ``None``) per axis;
    ``chunks_of(node)`` the node's chunks; ``split(node, axes)`` whether ``axes`` of ``node`` span more than one
    chunk."""

    def __init__(self, graph: Graph, input_chunks: Sequence[Chunks | None]):
        uf = _UnionFind()
        for node in graph.nodes:
            for ax, extent in enumerate(node.shape):
                if extent != 1:
                    uf.add((node, ax))
            for i, ax, out in _operand_axes(node):
                operand = node.operands[i]
                if operand.shape[ax] != 1 and node.shape[out] != 1:
                    uf.union((operand, ax), (node, out))
        roots: dict[AxisKey, int] = {}
        self._classes: dict[Node, tuple[int | None, ...]] = {}
        for node in graph.nodes:
            ids = []
            for ax, extent in enumerate(node.shape):
                if extent == 1:
                    ids.append(None)
                else:
                    ids.append(roots.setdefault(uf.find((node, ax)), len(roots)))
            self._classes[node] = tuple(ids)
        self.extent: dict[int, int] = {}
        for node, ids in self._classes.items():
            for cls, extent in zip(ids, node.shape):
                if cls is not None:
                    self.extent[cls] = extent
        wanted: dict[int, list[tuple[int, ...]]] = {}
        for node, chunks in zip(graph.inputs, input_chunks):
            if chunks is None:
                continue
            for cls, c in zip(self._classes[node], chunks):
                if cls is not None:
                    wanted.setdefault(cls, []).append(tuple(c))
        self.chunks: dict[int, tuple[int, ...]] = {
            cls: refine(wanted.get(cls, [(extent,)]), extent) for cls, extent in self.extent.items()}
        # a class twice in one node (a + a.T): one block index cannot address its blocks, so it stays one chunk
        for ids in self._classes.values():
            named = [cls for cls in ids if cls is not None]
            for cls in {c for c in named if named.count(c) > 1}:
                self.chunks[cls] = (self.extent[cls],)

    def classes_of(self, node: Node) -> tuple[int | None, ...]:
        return self._classes[node]

    def chunks_of(self, node: Node) -> Chunks:
        return tuple((1,) if cls is None else self.chunks[cls] for cls in self._classes[node])

    def numblocks(self, cls: int | None) -> int:
        return 1 if cls is None else len(self.chunks[cls])

    def split(self, node: Node, axes: Sequence[int]) -> bool:
        """Whether the axes ``axes`` of ``node`` span more than one chunk together."""
        return any(self.numblocks(self._classes[node][ax]) > 1 for ax in axes)


def refine(chunkings: Sequence[tuple[int, ...]], extent: int) -> tuple[int, ...]:
    """The common refinement of chunkings of one extent: a chunk boundary wherever any of them has one."""
    if extent == 0:
        return (0,)
    cuts = sorted({c for chunks in chunkings for c in itertools.accumulate(chunks)} | {extent})
    return tuple(b - a for a, b in zip([0, *cuts], cuts) if b > a)


def block_extents(classes: Mapping[int, tuple[int, ...]], index: Mapping[int, int]) -> dict[int, int]:
    """Each class's chunk extent at block ``index`` (class -> block number)."""
    return {cls: classes[cls][i] for cls, i in index.items()}


def offsets(chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Where each chunk starts."""
    return tuple(itertools.accumulate((0, *chunks[:-1])))
