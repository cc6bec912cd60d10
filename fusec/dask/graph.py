"""The Dask task graph of a :class:`fusec.dask.stages.DaskPlan` over input Dask arrays.

Each stage is one task per block (the block's fused program); each split reduction a tree: its partial
blocks grouped ``split_every`` at a time into combine tasks until one aggregate task per result block is
left (Dask's own tree reduction, with fusec's partials). Outputs of a stage that computes several are
picked out by one small task per block, as ``dask.array.apply_gufunc`` does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusec.dask.blocks import aggregate, combine, pick, run_block
from fusec.dask.stages import DaskPlan, Stage, block_index_space, block_key, block_program
from fusec.ir.graph import Node

SPLIT_EVERY = 8  # partials combined per task


def build_arrays(plan: DaskPlan, inputs: list[Any], backend: str, prefix: str,
                 split_every: int = SPLIT_EVERY) -> list[Any]:
    """One lazy Dask array per output of ``plan.graph`` (inputs already chunked as the plan wants)."""
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    axes = plan.axes
    graph = plan.graph
    token = tokenize(plan.token, [a.name for a in inputs])
    names: dict[Node, str] = {node: a.name for node, a in zip(graph.inputs, inputs)}
    tasks: dict[tuple, Any] = {}
    for stage in plan.stages:
        _stage_tasks(plan, stage, names, tasks, backend, f"{prefix}-s{stage.index}-{token}", split_every)

    meta_source = inputs[0]._meta if inputs else np.empty(())
    arrays = []
    dependencies = [a for a in inputs]
    for node in graph.outputs:
        if node.op == "input":
            arrays.append(inputs[graph.inputs.index(node)])
            continue
        name = names[node]
        layer = HighLevelGraph.from_collections(name, dict(tasks), dependencies=dependencies)
        meta = meta_from_array(meta_source, node.ndim, node.dtype)
        arrays.append(da.Array(layer, name, axes.chunks_of(node), meta=meta))
    return arrays


def _stage_tasks(plan: DaskPlan, stage: Stage, names: dict[Node, str], tasks: dict[tuple, Any], backend: str,
                 name: str, split_every: int) -> None:
    blocks, picks, trees = _template(plan, stage)
    single = None if stage.returns_tuple else stage.outputs[0]
    if single is not None:
        names[single] = f"{name}-out"
    own = names[single] if single is not None else name
    read_names = [names[v] for v in stage.reads]
    returns_tuple = stage.returns_tuple
    for index, reads, program, fixups, counts in blocks:
        tasks[(own, *index)] = (run_block, program, backend, returns_tuple, fixups, counts,
                                *[(n, *r) for n, r in zip(read_names, reads)])
    for out, position, where in picks:
        out_name = names.setdefault(out, f"{name}-out{position}")
        for index, block in where:
            tasks[(out_name, *index)] = (pick, (name, *block), position)
    for i, (r, rp, positions, groups, targets) in enumerate(trees):
        r_name = names.setdefault(r, f"{name}-{r.op}{i}")
        target_names = [(names.setdefault(t, f"{r_name}-{k}"), k, t.dtype) for t, k in targets]
        for index, shape, members in groups:
            keys = [(name, *b) for b in members]
            level, picked = 0, positions
            while len(keys) > split_every:
                level_name = f"{r_name}-c{level}"
                grouped = []
                for j in range(0, len(keys), split_every):
                    k = (level_name, *index, j // split_every)
                    tasks[k] = (combine, rp, picked, *keys[j:j + split_every])
                    grouped.append(k)
                keys, picked, level = grouped, None, level + 1
            for t_name, component, dtype in target_names:
                tasks[(t_name, *index)] = (aggregate, rp, component, dtype, shape, picked, *keys)


def _template(plan: DaskPlan, stage: Stage) -> tuple[list, list, list]:
    """The stage's tasks without names, made once per plan: (key index, read indices, program, fixups) per
    block; the blocks each output picks; each split reduction's result blocks and the partials they combine."""
    cached = stage.templates.get("tasks")
    if cached is not None:
        return cached
    axes = plan.axes
    grid = stage.grid
    all_blocks = block_index_space(axes, stage)
    single = None if stage.returns_tuple else stage.outputs[0]
    arg_partials = [(r, positions) for r, positions in stage.partials_of if plan.reductions[r].is_arg]
    blocks = []
    for block in all_blocks:
        index = block_key(axes, single, grid, block) if single is not None else block
        reads = [block_key(axes, v, grid, block) for v in stage.reads]
        fixups = tuple(_fixup(plan, r, positions[1], grid, block) for r, positions in arg_partials)
        counts = tuple(float(math.prod(_fixup(plan, r, 0, grid, block)[1])) for r in stage.counted)
        blocks.append((index, reads, block_program(axes, stage, block), fixups, counts))
    picks = []
    if single is None:
        for position, out in zip(stage.output_positions, stage.outputs):
            picks.append((out, position, [(block_key(axes, out, grid, b), b) for b in all_blocks]))
    trees = []
    for r, positions in stage.partials_of:
        by_result: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for block in all_blocks:
            by_result.setdefault(block_key(axes, r, grid, block), []).append(block)
        groups = [(index, _block_shape(axes.chunks_of(r), index), members) for index, members in by_result.items()]
        rp = plan.reductions[r]
        targets = [(r, 1 if rp.is_arg else 0)] + ([(plan.joint[r], 1)] if r in plan.joint else [])
        trees.append((r, rp, positions, groups, targets))
    stage.templates["tasks"] = (blocks, picks, trees)
    return blocks, picks, trees


def _block_shape(chunks: tuple[tuple[int, ...], ...], index: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(c[b] for c, b in zip(chunks, index))


def _fixup(plan: DaskPlan, r: Node, position: int, grid: tuple[int, ...], block: tuple[int, ...]) -> tuple:
    """(position, block extents, block offsets, whole extents) over an arg reduction's reduced axes."""
    axes = plan.axes
    x = r.operands[0]
    where = block_key(axes, x, grid, block)
    chunks = axes.chunks_of(x)
    reduced = r.attr("axes")
    local = tuple(chunks[a][where[a]] for a in reduced)
    starts = tuple(sum(chunks[a][:where[a]]) for a in reduced)
    whole = tuple(x.shape[a] for a in reduced)
    return (position, local, starts, whole)


def task_count(plan: DaskPlan, split_every: int = SPLIT_EVERY) -> dict[int, int]:
    """Tasks per stage (its blocks, its picks, its reductions' combine and aggregate tasks)."""
    counts = {}
    for stage in plan.stages:
        n = len(block_index_space(plan.axes, stage))
        total = n + (n * len(stage.outputs) if stage.returns_tuple else 0)
        for r, _ in stage.partials_of:
            results = math.prod(len(c) for c in plan.axes.chunks_of(r))
            per = n // max(results, 1)
            while per > split_every:
                per = math.ceil(per / split_every)
                total += per * results
            total += results * (2 if r in plan.joint else 1)
        counts[stage.index] = total
    return counts
