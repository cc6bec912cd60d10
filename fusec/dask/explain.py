"""``f.explain(dask_array)``: the stages a call runs as on Dask, the tasks of each and the bytes each moves."""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusec.dask.graph import SPLIT_EVERY, task_count
from fusec.dask.stages import DaskPlan, Stage, block_index_space, block_program
from fusec.ir.graph import Node
from fusec.runtime.plan import format_bytes


def _chunks_text(chunks: tuple[tuple[int, ...], ...]) -> str:
    parts = []
    for c in chunks:
        if len(c) == 1:
            parts.append(str(c[0]))
        elif len(set(c[:-1])) == 1:
            parts.append(f"{len(c)}x{c[0]}" + (f"(last {c[-1]})" if c[-1] != c[0] else ""))
        else:
            parts.append(f"{len(c)} chunks")
    return "(" + ", ".join(parts) + ")"


@dataclass(frozen=True)
class StageReport:
    """One stage: its tasks, what its blocks read and write (bytes over all blocks), its fused program."""

    index: int
    what: str
    blocks: int
    tasks: int
    read: int
    written: int
    kernels: tuple[str, ...]


class DaskExplanation:
    """The Dask stages of one call (``print()`` it); ``stages`` holds a :class:`StageReport` per stage and
    ``bytes_moved`` their total reads and writes (partials and the tree's traffic included)."""

    def __init__(self, name: str, plan: DaskPlan, backend: str):
        self.name = name
        self.plan = plan
        self.backend = backend
        counts = task_count(plan)
        self.stages = tuple(self._report(stage, counts[stage.index]) for stage in plan.stages)
        self.bytes_moved = sum(s.read + s.written for s in self.stages)

    def _report(self, stage: Stage, tasks: int) -> StageReport:
        plan = self.plan
        blocks = block_index_space(plan.axes, stage)
        read = 0
        for v in stage.reads:  # a value of fewer blocks than the grid is read once per block that reads it
            per_block = v.nbytes / max(1, math.prod(len(c) for c in plan.chunks_of(v)))
            read += int(per_block * len(blocks))
        written = sum(o.nbytes for o in stage.outputs)
        what = []
        if stage.outputs:
            what.append("outputs " + ", ".join(_node_text(plan, o) for o in stage.outputs))
        for r, _ in stage.partials_of:
            parts = math.prod(len(c) for c in plan.chunks_of(r.operands[0])) // max(
                1, math.prod(len(c) for c in plan.chunks_of(r)))
            # per block: the result block's elements, each a value (and an int64 index for argmax/argmin)
            kind = plan.reductions[r].op
            moments = kind == "moments"
            per_element = 16 if moments else r.dtype.itemsize * (2 if kind == "expsum" else 1) + (
                r.operands[0].dtype.itemsize if r.op in ("argmax", "argmin") else 0)  # moments: float64 sum, M2
            result_blocks = max(1, math.prod(len(c) for c in plan.chunks_of(r)))
            size = per_element * len(blocks) * r.size // result_blocks + (8 * len(blocks) if moments else 0)
            written += size
            name = {"moments": f"{r.op} and its M2 (one pass: sum, M2, count; Chan's merge)",
                    "expsum": f"{r.op} and sum(exp(x - max)) (one pass: online max and rescaled sum)"}.get(kind, r.op)
            what.append(f"partials of {name} over axes {list(r.attr('axes'))} ({parts} per result block, "
                        f"combined {SPLIT_EVERY} per task, then aggregated: {format_bytes(size)} of partials)")
        program = block_program(plan.axes, stage, blocks[0]) if blocks else None
        kernels = tuple(f"{k.name} {k.kind}" for k in program.plan.kernels) if program is not None else ()
        return StageReport(stage.index, "; ".join(what), len(blocks), tasks, read, written, kernels)

    def __str__(self) -> str:
        plan = self.plan
        lines = [f"== {self.name} on Dask ({self.backend} chunks): {len(self.stages)} stage(s)"]
        for node, chunks in zip(plan.graph.inputs, plan.input_chunks):
            lines.append(f"input %{node.attr('name')}: {list(node.shape)} {node.dtype} "
                         f"in chunks {_chunks_text(chunks)}")
        split = [r for s in plan.stages for r, _ in s.partials_of]
        split += [plan.joint[r] for r in split if r in plan.joint]
        if split:
            lines.append("split reductions (reduced axes span several chunks): "
                         + ", ".join(f"{r.op} over axes {list(r.attr('axes'))}" for r in split))
        for s in self.stages:
            lines.append(f"stage {s.index}: {s.blocks} block(s), {s.tasks} task(s): {s.what}")
            lines.append(f"  reads {format_bytes(s.read)}, writes {format_bytes(s.written)}; per block: "
                         + (", ".join(s.kernels) if s.kernels else "no kernel"))
        lines.append(f"bytes moved: {format_bytes(self.bytes_moved)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def _node_text(plan: DaskPlan, node: Node) -> str:
    return f"{node.dtype}{list(node.shape)} in chunks {_chunks_text(plan.chunks_of(node))}"
