"""A traced graph cut into the stages Dask runs, given how its inputs are chunked (plain data, no Dask import).

A reduction whose reduced axes span more than one chunk is *split*: its value is made by a tree reduction
(per-chunk partials, combines, an aggregate). Everything else runs inside blocks: a *stage* is one task per
block of its grid, each running one fused program (:class:`fusec.dask.blocks.BlockProgram`) that computes the
stage's *products* (graph outputs, and the partials of split reductions) from the blocks it reads (graph
inputs and split reductions' results). Products go into one stage when they come after the same number of
split reductions and iterate over the same axis classes, so a prologue shared by an output and a reduction
is read once. A statistic that reads another over the same split axes (a variance after its mean, a
softmax denominator after its maximum: :mod:`fusec.dask.moments`) is made with it, from the same read:
a softmax over rows split across chunks is two stages, the (max, sum of exp) partials and their tree, then
the per-chunk epilogue.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusec.dask.axes import AxisClasses, Chunks
from fusec.dask.blocks import BlockProgram, ReducePlan
from fusec.dask.moments import moment_pairs
from fusec.ir.graph import Graph, Node, make_node, with_operands
from fusec.ir.ops import Kind
from fusec.support.errors import UnsupportedError


@dataclass(frozen=True, eq=False)
class Stage:
    """One task per block of ``grid`` (axis classes, each with its chunking): reads ``reads`` (graph nodes
    that are inputs or split reductions' results), writes ``products`` (output nodes, and partials of
    ``partials_of``: for each split reduction, the positions of its partial arrays among the results)."""

    index: int
    grid: tuple[int, ...]
    reads: tuple[Node, ...]
    outputs: tuple[Node, ...]
    output_positions: tuple[int, ...]  # where each output is among the program's results
    partials_of: tuple[tuple[Node, tuple[int, ...]], ...]
    graph: Graph  # the stage's program over whole arrays (for explain)
    classes: Mapping[Node, tuple[int | None, ...]]  # axis classes of graph's nodes
    counted: tuple[Node, ...] = ()  # moments reductions whose block counts the tasks append to the results
    fusion: bool = True  # whether block programs fuse (fusec.fuse(fusion=False): one kernel per op)
    programs: dict[tuple[int, ...], BlockProgram] = field(default_factory=dict)  # block extents -> program
    templates: dict[str, Any] = field(default_factory=dict)  # the task layout, made on the first build

    @property
    def product_count(self) -> int:
        return len(self.graph.outputs)

    @property
    def result_count(self) -> int:
        """The task's results: the program's, then one element count per ``counted`` reduction."""
        return len(self.graph.outputs) + len(self.counted)

    @property
    def returns_tuple(self) -> bool:
        return self.product_count != 1 or bool(self.partials_of)


@dataclass(frozen=True, eq=False)
class DaskPlan:
    """The stages of ``graph`` for inputs chunked as ``input_chunks``, in the order they run."""

    graph: Graph
    axes: AxisClasses
    input_chunks: tuple[Chunks, ...]
    stages: tuple[Stage, ...]
    reductions: dict[Node, ReducePlan]
    produced_by: dict[Node, Stage]  # output or split reduction -> the stage computing it (or its partials)
    joint: dict[Node, Node] = field(default_factory=dict)  # a split sum -> the M2 its moments' tree also gives
    token: str = field(default_factory=lambda: uuid.uuid4().hex)  # names this plan's tasks

    def chunks_of(self, node: Node) -> Chunks:
        return self.axes.chunks_of(node)


# the ops whose chunking the Dask path knows (fusec.dask.axes): any other layout or source op (a slice, a
# reshape, a gather, ...) moves elements between chunks, and is refused rather than run on the wrong blocks
_KNOWN = {Kind.SOURCE: {"input", "const", "size"}, Kind.LAYOUT: {"expand_dims", "squeeze", "transpose", "broadcast_to"}}


def plan_stages(graph: Graph, input_chunks: list[Chunks | None], fusion: bool = True) -> DaskPlan:
    """Cut ``graph`` (after the cleanup passes, regions none) into stages for these input chunkings; with
    ``fusion`` False the block programs run unfused (as ``fusec.fuse(fusion=False)``)."""
    for node in graph.nodes:
        known = _KNOWN.get(node.kind)
        if node.kind not in (Kind.ELEMENTWISE, Kind.REDUCTION) and (known is None or node.op not in known):
            raise UnsupportedError(f"{node.op} is not supported on Dask arrays yet", loc=node.loc,
                                   hint="apply it to the Dask array before calling the fused function")
    axes = AxisClasses(graph, input_chunks)
    split = [n for n in graph.nodes if n.kind is Kind.REDUCTION and axes.split(n.operands[0], n.attr("axes"))]
    split_set = set(split)
    found = {second: first for second, first in moment_pairs(split).items()
             if axes.classes_of(second.operands[0]) == axes.classes_of(first[0].operands[0])}
    pairs = {second: first for second, (first, _) in found.items()}
    level: dict[Node, int] = {}
    for node in graph.nodes:
        below = max((level[o] for o in node.operands), default=0)
        level[node] = level[pairs[node]] if node in pairs else below + 1 if node in split_set else below

    def grid_of(node: Node) -> tuple[int, ...]:
        return tuple(sorted({c for c in axes.classes_of(node) if c is not None}))

    # products grouped by (level, grid), in the order they are first met
    groups: dict[tuple[int, tuple[int, ...]], list[tuple[str, Node]]] = {}
    joint = {first: second for second, first in pairs.items()}
    joint_kind = {first: kind for _, (first, kind) in found.items()}
    for r in split:
        if r in pairs:
            continue  # its partials are made with those of the reduction it reads
        x = r.operands[0]
        groups.setdefault((level[x], grid_of(x)), []).append((joint_kind.get(r, "partial"), r))
    for o in dict.fromkeys(graph.outputs):
        if o.op != "input" and o not in split_set:
            groups.setdefault((level[o], grid_of(o)), []).append(("output", o))

    stages: list[Stage] = []
    produced_by: dict[Node, Stage] = {}
    reductions: dict[Node, ReducePlan] = {}
    for (_, grid), products in sorted(groups.items(), key=lambda kv: kv[0][0]):
        stage = _make_stage(len(stages), graph.name, grid, products, axes, split_set, fusion)
        stages.append(stage)
        for kind, node in products:
            produced_by[node] = stage
            if kind == "partial":
                reductions[node] = ReducePlan.of(node)
            elif kind != "output":
                reductions[node] = ReducePlan.joint(kind, node)
                produced_by[joint[node]] = stage
    return DaskPlan(graph, axes, tuple(input_chunks_of(axes, graph)), tuple(stages), reductions, produced_by,
                    joint)


def input_chunks_of(axes: AxisClasses, graph: Graph) -> list[Chunks]:
    """The chunks each input must have for the plan: its classes' chunkings (what it is rechunked to)."""
    return [axes.chunks_of(n) for n in graph.inputs]


def _make_stage(index: int, name: str, grid: tuple[int, ...], products: list[tuple[str, Node]],
                axes: AxisClasses, split: set[Node], fusion: bool) -> Stage:
    mapping: dict[Node, Node] = {}
    classes: dict[Node, tuple[int | None, ...]] = {}
    reads: list[Node] = []

    def build(root: Node) -> Node:
        stack = [root]
        while stack:
            node = stack[-1]
            if node in mapping:
                stack.pop()
                continue
            if node.op == "input" or node in split:
                new = make_node("input", (), {"name": f"v{len(reads)}", "index": len(reads)},
                                dtype=node.dtype, shape=node.shape)
                reads.append(node)
            elif node.op == "size":  # a count over whole axes: the same constant in every block
                count = 1
                for a in node.attr("axes"):
                    count *= node.operands[0].shape[a]
                new = make_node("const", (), {"value": float(count)}, dtype=node.dtype)
            else:
                missing = [o for o in node.operands if o not in mapping]
                if missing:
                    stack.extend(missing)
                    continue
                new = with_operands(node, tuple(mapping[o] for o in node.operands))
            stack.pop()
            mapping[node] = new
            classes[new] = axes.classes_of(node)
        return mapping[root]

    outputs: list[Node] = []
    out_nodes: list[Node] = []
    out_positions: list[int] = []
    counted: list[Node] = []
    partials_of: list[tuple[Node, tuple[int, ...]]] = []
    for kind, node in products:
        if kind == "output":
            out_positions.append(len(outputs))
            outputs.append(build(node))
            out_nodes.append(node)
            continue
        x = build(node.operands[0])
        reduced = tuple(node.attr("axes"))
        x_classes = axes.classes_of(node.operands[0])
        keep = tuple(None if a in reduced else c for a, c in enumerate(x_classes))
        if kind == "moments":
            partials = _moment_partials(x, reduced, classes, x_classes, keep)
        elif kind == "expsum":
            partials = _expsum_partials(x, reduced, classes, x_classes, keep)
        else:
            partials = [make_node(op, [x], {"axes": list(reduced), "keepdims": True})
                        for op in ReducePlan.of(node).partial_ops]
            classes.update((p, keep) for p in partials)
        partials_of.append((node, tuple(range(len(outputs), len(outputs) + len(partials)))))
        outputs.extend(partials)
        if kind == "moments":
            counted.append(node)
    graph = Graph(f"{name}_stage{index}", tuple(mapping[r] for r in reads), tuple(outputs))
    for cls in {c for ids in classes.values() for c in ids if c is not None} - set(grid):
        assert axes.numblocks(cls) == 1, "a class outside a stage's grid spans one chunk"
    # each moments partial's element count is the block's extent over the reduced axes, known when the task
    # is made: the task appends it to the program's results (a kernel output that is a constant would keep
    # the program off the runtime's fast path)
    extra = {r: len(outputs) + i for i, r in enumerate(counted)}
    partials_of = [(r, (*positions, extra[r]) if r in extra else positions) for r, positions in partials_of]
    return Stage(index, grid, tuple(reads), tuple(out_nodes), tuple(out_positions), tuple(partials_of), graph, classes,
                 tuple(counted), fusion)


def _moment_partials(x: Node, reduced: tuple[int, ...], classes: dict[Node, tuple[int | None, ...]],
                     x_classes: tuple[int | None, ...], keep: tuple[int | None, ...]) -> list[Node]:
    """A block's (sum, M2 about the block's own mean) of ``x`` over ``reduced`` (keepdims), in float64 (the
    count comes with the task):
    the merge's correction terms n_i (mean_i - mean) ** 2 need block means more exact than the data's dtype
    (float32 data with a large mean would otherwise lose most of M2's digits)."""
    if x.dtype != np.float64:
        x = make_node("cast", [x], dtype=np.float64)
        classes[x] = x_classes
    total = make_node("sum", [x], {"axes": list(reduced), "keepdims": True})
    count = make_node("size", [x], {"axes": list(reduced)}, dtype=np.float64)
    mean = make_node("div", [total, make_node("cast", [count], dtype=x.dtype)])
    deviation = make_node("sub", [x, mean])
    m2 = make_node("sum", [make_node("square", [deviation])], {"axes": list(reduced), "keepdims": True})
    for node in (total, mean, m2):
        classes[node] = keep
    for node in (deviation, m2.operands[0]):
        classes[node] = x_classes
    classes[count] = ()
    classes[mean.operands[1]] = ()
    return [total, m2]


def _expsum_partials(x: Node, reduced: tuple[int, ...], classes: dict[Node, tuple[int | None, ...]],
                     x_classes: tuple[int | None, ...], keep: tuple[int | None, ...]) -> list[Node]:
    """A block's (max, sum of exp(x - the block's max)) over ``reduced`` (keepdims)."""
    top = make_node("max", [x], {"axes": list(reduced), "keepdims": True})
    shifted = make_node("exp", [make_node("sub", [x, top])])
    total = make_node("sum", [shifted], {"axes": list(reduced), "keepdims": True})
    classes[top] = classes[total] = keep
    classes[shifted] = classes[shifted.operands[0]] = x_classes
    return [top, total]


def block_index_space(axes: AxisClasses, stage: Stage) -> list[tuple[int, ...]]:
    """Every block of the stage's grid, row-major."""
    return list(itertools.product(*(range(axes.numblocks(c)) for c in stage.grid)))


def block_program(axes: AxisClasses, stage: Stage, block: tuple[int, ...]) -> BlockProgram:
    """The program of one block: the stage's graph over the block's extents (made once per distinct extents)."""
    index = dict(zip(stage.grid, block))
    extents = {cls: (axes.chunks[cls][index[cls]] if cls in index else axes.extent[cls]) for cls in axes.extent}
    used = sorted({c for ids in stage.classes.values() for c in ids if c is not None})
    key = tuple(extents[c] for c in used)
    program = stage.programs.get(key)
    if program is None:
        program = BlockProgram.of(block_graph(stage, extents), stage.fusion)
        stage.programs[key] = program
    return program


def block_graph(stage: Stage, extents: Mapping[int, int]) -> Graph:
    """The stage's graph with every node's extents those of one block (``extents``: class -> chunk extent)."""
    mapping: dict[Node, Node] = {}
    for node in stage.graph.nodes:
        shape = tuple(1 if c is None else extents[c] for c in stage.classes[node])
        if node.op == "input":
            new = make_node("input", (), dict(node.attrs), dtype=node.dtype, shape=shape)
        elif node.op == "broadcast_to":
            new = make_node("broadcast_to", [mapping[node.operands[0]]], {"shape": list(shape)})
        else:
            new = with_operands(node, tuple(mapping[o] for o in node.operands))
        assert new.shape == shape, (node, new.shape, shape)
        mapping[node] = new
    return Graph(stage.graph.name, tuple(mapping[n] for n in stage.graph.inputs),
                 tuple(mapping[n] for n in stage.graph.outputs))


def block_key(axes: AxisClasses, node: Node, grid: tuple[int, ...], block: tuple[int, ...]) -> tuple[int, ...]:
    """The block index of ``node`` (its axes' order) that a stage's block ``block`` of ``grid`` reads."""
    index: dict[Any, int] = dict(zip(grid, block))
    return tuple(index.get(c, 0) if c is not None else 0 for c in axes.classes_of(node))
