"""Autotuning candidates: the few schedules worth timing for a region, the heuristics' own first.

As Triton's ``Config`` lists and tinygrad's ``Opt`` lists, candidates are data: each kind proposes a short
table of schedule lines (partial: the fields they leave out are the heuristics' for that variant), each
completed and checked against the region (:func:`fusec.schedule.resolve`); the ones that do not fit are
dropped, duplicates too. What varies is what the heuristics guess at:

- pointwise: the tile edge of a tiled loop, the vector width of a vector or inner-vector loop;
- reduce-all: the vector width, the finish (last block vs grid barrier);
- rows: the threads per row of a register-resident row at the same row capacity (elements per thread
  halved or doubled), a warp or a block re-reading the row, one pass or two for variances and softmax
  denominators;
- cols: the block shape (kept indices per block x threads along the reduction), splitting the reduced
  extent across blocks or not, one pass or two.

The heuristics' schedule is always the first candidate (the reference the others' results are checked
against, and the winner of a tie). Nothing here times anything: :mod:`fusec.runtime.autotune` does, on a GPU.
"""

from __future__ import annotations

from fusec.schedule.device import H200, DeviceProperties
from fusec.schedule.heuristics import choose, resolve
from fusec.schedule.kinds import (
    ColSchedule,
    PointwiseSchedule,
    ReduceAllSchedule,
    RowSchedule,
    ScanSchedule,
    Schedule,
    ScheduleError,
)
from fusec.schedule.nest import LoopNest

MAX_CANDIDATES = 8  # schedules timed per region at most (the heuristics' included)
REGS_ELEMS_MAX = 32  # register rows: elements per thread proposed at most (ROW_REGS_TABLE's own limit)


def proposals(nest: LoopNest, base: Schedule) -> list[str]:
    """The schedule lines worth timing beside ``base`` (the heuristics' schedule of ``nest``), by kind."""
    out: list[str] = []
    if isinstance(base, PointwiseSchedule):
        if base.loop == "tiled":
            out += [f"pointwise:tiled,tile={t}" for t in (64, 32, 16) if t != base.tile]
        elif base.loop in ("vector", "inner_vector"):
            out += [f"pointwise:{base.loop},vec={v}" for v in (base.vec // 2, base.vec * 2) if v >= 2]
            if base.loop == "vector":
                out.append("pointwise:contiguous")
    elif isinstance(base, ReduceAllSchedule):
        if base.loop == "vector":
            out += [f"reduce-all:{base.finish},vec={v}" for v in (base.vec // 2,) if v >= 2]
        out.append("reduce-all:grid_barrier" if base.finish == "last_block" else "reduce-all:last_block")
    elif isinstance(base, RowSchedule):
        if base.in_registers:
            capacity = base.capacity
            most = base.elems if base.elems > REGS_ELEMS_MAX else REGS_ELEMS_MAX  # more would spill
            for threads in (base.row_threads // 2, base.row_threads * 2):
                if threads >= 1 and capacity % threads == 0 and 1 <= capacity // threads <= most:
                    mapping = "warp_regs" if threads <= 32 else "block_regs"
                    out.append(f"rows:{mapping},threads={threads},elems={capacity // threads}")
        out += [f"rows:{m}" for m in ("warp", "block") if m != base.mapping]
        if base.one_pass is not None:
            out.append(f"rows:{base.mapping},one_pass={int(not base.one_pass)}")
    elif isinstance(base, ColSchedule):
        shapes = ((base.tile, base.split * 2), (base.tile, base.split // 2), (base.tile * 2, base.split // 2))
        for tile, split in shapes:
            if tile >= 1 and split >= 1:
                out.append(f"cols:{base.finish},tile={tile},split={split}")
        out.append("cols:tiles" if base.splits else "cols:grid_barrier")
        if base.one_pass is not None:  # (two passes: two phases, which last_block cannot combine)
            out += [f"cols:{f},one_pass={int(not base.one_pass)}" for f in dict.fromkeys((base.finish, "grid_barrier"))]
    elif isinstance(base, ScanSchedule):
        if base.mapping == "rows":
            out += [f"scan:rows,threads={t},elems={base.elems}" for t in (base.row_threads // 2, base.row_threads * 2)]
            out += [f"scan:rows,threads={base.row_threads},elems={e}" for e in (base.elems // 2, base.elems * 2)]
        out.append("scan:rows" if base.mapping == "sequential" else "scan:sequential")
    return out


def candidates(nest: LoopNest, device: DeviceProperties = H200, limit: int = MAX_CANDIDATES) -> tuple[Schedule, ...]:
    """The schedules to time for ``nest``'s region on ``device``: the heuristics' first, then the fitting,
    distinct :func:`proposals`, at most ``limit`` in all."""
    base = choose(nest, device)
    out = [base]
    for text in proposals(nest, base):
        try:
            schedule = resolve(nest, text, device)
        except ScheduleError:
            continue
        if schedule not in out:
            out.append(schedule)
        if len(out) >= limit:
            break
    return tuple(out)


__all__ = ["MAX_CANDIDATES", "candidates", "proposals"]
