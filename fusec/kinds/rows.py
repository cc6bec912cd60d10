"""The rows kind: reductions over the innermost axes, a row at a time (``templates/reduce_rows.cu.j2``).

A warp or a block per row re-reads the row in every phase; a row that fits a bucket of :data:`ROW_REGS_TABLE` is
read once into registers, held there for the later phases and the epilogue (:class:`RowSchedule`). Rows strided
in memory, or too long for registers and too few to fill the device, run as the cols kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from fusec.codegen.lower import Lowering, launch_policy, lower_loops, phase_partials
from fusec.codegen.spec import Access, Axis, KernelSpec, LaunchPolicy, Phase
from fusec.ir.graph import Node
from fusec.ir.region import COLS, ROWS
from fusec.kinds.kind import KernelKind, Refuse
from fusec.schedule.base import BLOCK, MIN_RESIDENT, WARP, Schedule
from fusec.schedule.contract import VectorAccess
from fusec.schedule.device import DeviceProperties
from fusec.schedule.heuristics import fastest_axis, power_of_two
from fusec.schedule.layout import VECTOR_BYTES
from fusec.schedule.nest import AccessInfo, LoopNest

ROW_BLOCK_MIN = 1024  # re-read rows with at least this many elements get a block each, shorter ones a warp

# Register-resident rows: by the widest itemsize of the arrays held (1, 2 and 4 bytes share one column),
# the buckets (longest row, threads per row, elements per thread). A row of length n takes the first bucket
# with n <= longest row; the threads and elements per thread are compile-time constants of the kernel, so
# every row length of one bucket shares a kernel. Threads per row below 256 are (sub-)warps: 256 / threads
# rows per block, all phases by shuffles; 256 and up are one block per row. Rows of 2 to 8 elements take
# a thread each (no shuffle: 32 rows per warp, so a warp's loads stay wide), up to 16 a pair (a row of one
# element has no loop axis left: it is re-read by the warp schedule). At most 32
# elements (16 for 8-byte values) per thread: the held values plus the row's working set stay within the
# 64..128 registers that __launch_bounds__(threads, MIN_RESIDENT) allows. Longer rows (and rows that are
# not contiguous) keep the re-reading schedules warp/block.
ROW_REGS_TABLE: dict[int, tuple[tuple[int, int, int], ...]] = {
    4: ((2, 1, 2), (4, 1, 4), (8, 1, 8), (16, 2, 8), (32, 8, 4), (64, 4, 16), (128, 16, 8),
        (256, 32, 8), (512, 32, 16), (1024, 32, 32), (2048, 256, 8), (4096, 256, 16), (8192, 256, 32),
        (16384, 512, 32)),
    8: ((2, 1, 2), (4, 1, 4), (8, 1, 8), (16, 2, 8), (32, 8, 4), (64, 8, 8), (128, 16, 8),
        (256, 32, 8), (512, 32, 16), (1024, 256, 4), (2048, 256, 8), (4096, 256, 16), (8192, 512, 16)),
}
HOLD_MIN_COST = 2  # rows in registers: an element value of at least this op cost (exp, div, ...) that a later
# phase or the epilogue needs again is kept in registers (<var>_h) rather than recomputed there
HOLD_MAX_VALUES = 64  # ... while the row's loads and the kept values take at most this many 4-byte registers
LONG_ROW = 1 << 15  # rows this long or longer, too few to give every SM ...
FEW_ROWS_PER_SM = 2  # ... this many rows each, run as cols schedules split across blocks


@dataclass(frozen=True)
class RowSchedule(Schedule):
    """Reductions over the innermost axes, a row at a time. ``mapping``:

    - ``warp``: a warp per row (8 rows per 256-thread block), re-reading the row in every phase;
    - ``block``: a 256-thread block per row, re-reading likewise;
    - ``warp_regs``: ``threads`` lanes per row (1..32: 256 / threads rows per block; the header's
      ``subwarp_allreduce<1>`` is the lane's own value), the row read once
      into registers, ``elems`` elements per thread in ``vec``-element vectors;
    - ``block_regs``: a block of ``threads`` threads per row, held in registers likewise.

    Rows held in registers keep the element values listed in ``hold`` (member indices, the ``v<k>`` of
    the generated code) in registers from the first phase that computes them for later phases and the
    epilogue; every other value a later loop needs is recomputed there. ``fast_division``: a float
    division by a per-row divisor multiplies by a reciprocal computed once per row (``fc::div_invariant``,
    exact), and a loop runs again with IEEE division where an operand leaves that helper's range.

    ``lengths`` (rows in registers): ``bucket``, the kernel serves every row length up to ``threads x elems``
    (the length is a parameter, and each row's start is checked at run time for the vector accesses, so
    one kernel runs every length of its bucket); ``exact``, it is specialized to the row length at hand:
    vector accesses only where every row start is aligned (known when it is compiled), and a row of exactly
    ``threads x elems`` elements checks no bounds at all. The re-reading schedules take every length as a
    parameter (``bucket``).

    ``one_pass`` (every reduction kind): on, the region's variances and softmax denominators
    (:mod:`fusec.schedule.one_pass`) take the pass of the mean or maximum they read: Welford's (count, mean,
    M2) and the online (max, sum of exp) pairs per thread, partials combined in a fixed order; off, a second
    pass over the data; None (left out of the text) for a region without them."""

    kind: ClassVar[str] = ROWS
    variant_field: ClassVar[str] = "mapping"
    variants: ClassVar[tuple[str, ...]] = ("warp", "block", "warp_regs", "block_regs")
    keys: ClassVar[dict[str, str]] = {"threads": "row_threads", "elems": "elems", "vec": "vec", "hold": "hold",
                                      "fast_division": "fast_division", "lengths": "lengths", "one_pass": "one_pass"}
    quiet: ClassVar[tuple[str, ...]] = ("one_pass",)
    mapping: str = "warp"
    row_threads: int = WARP
    elems: int = 0
    vec: int = 1
    hold: tuple[int, ...] = field(default=())
    fast_division: bool = False
    lengths: str = "bucket"
    one_pass: bool | None = None


    @property
    def capacity(self) -> int:
        """Rows in registers: the longest row the kernel holds (0 for the re-reading schedules, which take any)."""
        return self.row_threads * self.elems if self.in_registers else 0

    @property
    def in_registers(self) -> bool:
        return self.mapping in ("warp_regs", "block_regs")

    @property
    def block(self) -> tuple[int, int]:
        return (self.row_threads, 1) if self.mapping == "block_regs" else (BLOCK, 1)

    @property
    def rows_per_block(self) -> int:
        return 1 if self.mapping in ("block", "block_regs") else BLOCK // self.row_threads

    @property
    def min_resident(self) -> int:
        return max(1, 512 // self.row_threads) if self.mapping == "block_regs" else MIN_RESIDENT

    def scalar(self) -> Schedule:
        return replace(self, vec=1) if self.vec > 1 else self

    def text(self) -> str:
        if not self.in_registers and not self.fast_division and not self.hold and self.vec == 1 and \
                self.elems == 0 and self.lengths == "bucket" and \
                self.row_threads == (WARP if self.mapping == "warp" else BLOCK):
            # the re-reading schedules have no fields of their own
            return f"{self.kind}:{self.mapping}" + self._flag_text("one_pass")
        return super().text()

    def vector_accesses(self, nest: LoopNest) -> list[VectorAccess]:
        """Rows in registers with ``vec`` > 1: every array read into registers, and every store over the row's
        elements (with ``lengths=bucket``, each row's start is checked when the kernel runs)."""
        if self.vec <= 1 or not self.in_registers:
            return []
        loop_axis = nest.loop_idx[0] if len(nest.loop_idx) == 1 else None
        checked = self.lengths == "bucket"
        held: dict[str, AccessInfo] = {}
        for refs in (*(ph.refs for ph in nest.phases), nest.epilogue_refs):
            for info in nest.split(refs)[2]:
                if info.pointer is not None:
                    held.setdefault(info.var, info)
        out = [VectorAccess(info, self.vec, loop_axis, checked) for info in sorted(held.values(), key=lambda a: a.key)]
        out += [VectorAccess(nest.store_access(node), self.vec, loop_axis, checked) for node in nest.full_outputs]
        return out


class RowsKind(KernelKind):
    name = ROWS
    schedule_type = RowSchedule
    template = "reduce_rows.cu.j2"
    runs = (ROWS,)
    one_pass = True

    def prefers(self, nest: LoopNest, device: DeviceProperties) -> str:
        return COLS if rows_as_cols(nest, device) else ROWS

    def defaults(self, nest: LoopNest, device: DeviceProperties, variant: str | None) -> RowSchedule:
        bucket = row_bucket(nest)
        mapping = variant
        if mapping is None:
            if bucket is not None:
                mapping = "warp_regs" if bucket[0] <= WARP else "block_regs"
            else:
                mapping = "block" if nest.n_loop >= ROW_BLOCK_MIN else "warp"
        if mapping in ("warp", "block"):
            return RowSchedule(mapping, BLOCK if mapping == "block" else WARP)
        if bucket is None or (bucket[0] <= WARP) != (mapping == "warp_regs"):
            bucket = bucket_of(nest, mapping)
        threads, elems, vec = bucket
        lengths = row_lengths(nest, threads, elems)
        if lengths == "bucket" and nest.row_contiguous:
            vec = row_vector(nest, elems, exact=False)
        fast_division = any(nest.invariant_division(n) for n in nest.members)
        return RowSchedule(mapping, threads, elems, vec, values_to_hold(nest, elems), fast_division, lengths)

    def complete(self, nest: LoopNest, target: LoopNest, given: Any, defaults: dict[str, Any]) -> None:
        if defaults.get("elems") and "vec" not in given and nest.row_contiguous:
            # register rows: the widest vectors for the lengths policy and the elements per thread asked for
            exact = given.get("lengths", defaults.get("lengths")) == "exact"
            defaults["vec"] = row_vector(nest, given.get("elems", defaults["elems"]), exact=exact)

    def check_fields(self, nest: LoopNest, s: RowSchedule, device: DeviceProperties, refuse: Refuse) -> None:
        if s.lengths not in ("bucket", "exact"):
            refuse("lengths is bucket (one kernel for every row length of the bucket) or exact")
        if not s.in_registers:
            if s.vec != 1 or s.elems or s.hold or s.fast_division:
                refuse("vec, elems, hold and fast_division belong to the register schedules")
            if s.lengths != "bucket":
                refuse("the re-reading schedules take every row length as a parameter: lengths=exact belongs to the "
                       "register schedules")
            if s.row_threads != (WARP if s.mapping == "warp" else BLOCK):
                refuse(f"a {s.mapping} per row has {WARP if s.mapping == 'warp' else BLOCK} threads")
            return
        if not nest.row_contiguous:
            refuse("a row sits in registers only when it is one axis along which every array steps by 0 or 1")
        if s.mapping == "warp_regs" and (not power_of_two(s.row_threads) or not 1 <= s.row_threads <= WARP):
            refuse("warp_regs takes 1, 2, 4, 8, 16 or 32 threads per row")
        if s.mapping == "block_regs" and (s.row_threads % WARP or s.row_threads < WARP):
            refuse("block_regs takes a multiple of 32 threads per row")
        if s.elems < 1 or not power_of_two(s.vec) or s.elems % s.vec:
            refuse("elems must be a positive multiple of vec, a power of two")
        if s.row_threads * s.elems < nest.n_loop:
            refuse(f"{s.row_threads} threads x {s.elems} elements hold rows of at most {s.row_threads * s.elems}, "
                   f"not {nest.n_loop}")
        if s.vec > 1 and row_vector(nest, s.elems, exact=s.lengths == "exact") < s.vec:
            refuse(f"the rows' arrays are not aligned for vectors of {s.vec}"
                   + (" (lengths=bucket checks each row's start when it runs)" if s.lengths == "exact" else ""))
        loops = [{nest.member_index[n] for n in ph.needed} for ph in nest.phases]
        loops.append({nest.member_index[n] for n in nest.epilogue_needed})
        for k in s.hold:
            first = next((p for p, members in enumerate(loops[:-1]) if k in members), None)
            if first is None or not any(k in members for members in loops[first + 1:]):
                refuse(f"hold={k}: v{k} is not a value a phase computes and a later loop reads again")

    def proposals(self, nest: LoopNest, base: RowSchedule) -> list[str]:
        """The threads per row of a register-resident row at the same row capacity (elements per thread halved or
        doubled), a warp or a block re-reading the row, one pass or two for variances and softmax denominators."""
        out: list[str] = []
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
        return out

    def lower(self, nest: LoopNest, schedule: RowSchedule, name: str | None = None) -> KernelSpec:
        def launch(vec: int, phases: tuple[Phase, ...]) -> LaunchPolicy:
            return launch_policy(schedule, nest.n_kept, schedule.rows_per_block, phase_partials(schedule, phases))

        def fields(lo: Lowering, built: dict[str, Access], axes: list[Axis],
                   epilogue_loads: tuple[Access, ...]) -> dict[str, object]:
            return dict(full_rows=lo.regs and schedule.lengths == "exact" and nest.n_loop == schedule.capacity,
                        rows_aligned_at_run_time=lo.regs and schedule.lengths == "bucket" and lo.vec > 1)

        return lower_loops(nest, schedule, name, template=self.template, launch=launch, spec_fields=fields)


REGS_ELEMS_MAX = 32  # register rows: elements per thread proposed at most (ROW_REGS_TABLE's own limit)


# ---- the heuristics' helpers -----------------------------------------------------------------------------------


def rows_as_cols(nest: LoopNest, device: DeviceProperties) -> bool:
    """A rows region the cols kernel runs better: rows that are strided in memory while the kept axis is
    contiguous (a transposed input: coalesced across rows), or rows too long for registers and too few to
    give every SM :data:`FEW_ROWS_PER_SM` of them (each row split across blocks)."""
    if fastest_axis(nest) == "kept":
        return True
    return (nest.n_loop >= LONG_ROW and row_bucket(nest) is None
            and nest.n_kept < FEW_ROWS_PER_SM * device.sm_count)

def _row_arrays(nest: LoopNest) -> list[int]:
    """Positions (in ``nest.infos``) of the arrays that move along a row."""
    k = nest.loop_idx[0]
    return [i for i, info in enumerate(nest.infos) if nest.axes[k].strides[i] != 0 and info.pointer is not None]

def _row_itemsize(nest: LoopNest) -> int:
    return max((nest.infos[i].dtype.itemsize for i in _row_arrays(nest)), default=4)

def row_lengths(nest: LoopNest, threads: int, elems: int) -> str:
    """``lengths`` of a register-resident row schedule of ``threads`` x ``elems``: ``exact`` where
    specializing the kernel to the row length pays, ``bucket`` (one kernel for every length of the bucket)
    elsewhere. Exact pays for a row of exactly ``threads x elems`` elements (no bounds checks at all; the
    power-of-two rows of most models) and for rows shorter than a warp (several rows per warp: a run-time
    choice between vector and scalar accesses would diverge inside the warp wherever rows start at
    different alignments, so such a kernel takes the vectors its row starts allow, known when compiled).
    A bucket of rows a warp or more long is one kernel with the row length a parameter (``benchmarks/
    row_buckets.py`` measures what that costs against the exact kernels)."""
    return "exact" if nest.n_loop == threads * elems or threads < WARP else "bucket"

def row_vector(nest: LoopNest, elems: int, itemsize: int | None = None, exact: bool = True) -> int:
    """The vector width of a register-resident row: the widest power of two up to 16 bytes of the widest
    varying array (and up to the elements per thread) that keeps every varying array's row starts aligned
    (its pointer alignment and, for a kernel of ``exact`` row length, each kept stride allow it; a bucketed
    kernel checks each row's start when it runs and reads a misaligned row with scalar accesses)."""
    arrays = _row_arrays(nest)
    itemsize = itemsize or _row_itemsize(nest)
    vec = min(VECTOR_BYTES // itemsize, elems)
    while vec > 1:
        if all(nest.access_align(nest.infos[i]) >= vec * nest.infos[i].dtype.itemsize
               and (not exact or all(nest.axes[g].strides[i] % vec == 0 for g in nest.kept_idx)) for i in arrays):
            break
        vec //= 2
    return max(vec, 1)

def row_bucket(nest: LoopNest) -> tuple[int, int, int] | None:
    """(threads per row, elements per thread, vector width) of a register-resident row, or None when the
    row cannot sit in registers (not one contiguous axis) or no bucket of :data:`ROW_REGS_TABLE` holds it."""
    if not nest.row_contiguous:
        return None
    itemsize = _row_itemsize(nest)
    table = ROW_REGS_TABLE[8 if itemsize > 4 else 4]
    bucket = next((t for t in table if nest.n_loop <= t[0]), None)
    if bucket is None:
        return None
    _, threads, elems = bucket
    return threads, elems, row_vector(nest, elems, itemsize)

def bucket_of(nest: LoopNest, mapping: str) -> tuple[int, int, int]:
    """For a forced register mapping: the first bucket of that mapping that holds the row (else its
    largest), as (threads, elems, vec)."""
    itemsize = _row_itemsize(nest) if nest.row_contiguous else 4
    table = [t for t in ROW_REGS_TABLE[8 if itemsize > 4 else 4] if (t[1] <= WARP) == (mapping == "warp_regs")]
    bucket = next((t for t in table if nest.n_loop <= t[0]), table[-1])
    _, threads, elems = bucket
    return threads, elems, row_vector(nest, elems, itemsize) if nest.row_contiguous else 1

def values_to_hold(nest: LoopNest, elems: int) -> tuple[int, ...]:
    """Rows in registers: the element values (op cost >= HOLD_MIN_COST) that a phase computes and a later
    phase or the epilogue needs again (member indices, by the phase that computes them first), within
    HOLD_MAX_VALUES 4-byte registers per thread less the row's loads (``elems`` registers per value)."""
    loads = {a.var: a for ph in nest.phases for a in nest.split(ph.refs)[2] if a.pointer is not None}
    loads.update((a.var, a) for a in nest.split(nest.epilogue_refs)[2] if a.pointer is not None)
    budget = HOLD_MAX_VALUES - sum(elems * (2 if a.dtype.itemsize == 8 else 1) for a in loads.values())
    kept: list[Node] = []
    needed = [ph.needed for ph in nest.phases]
    for p, members in enumerate(needed):
        later = {n for s in needed[p + 1:] for n in s} | set(nest.epilogue_needed)
        for n in members:
            if n in kept or n not in later or n.opdef.cost < HOLD_MIN_COST:
                continue
            size = elems * max(1, n.dtype.itemsize // 4)
            if size > budget:
                continue
            budget -= size
            kept.append(n)
    return tuple(sorted(nest.member_index[n] for n in kept))

KIND = RowsKind()

__all__ = ["HOLD_MAX_VALUES", "HOLD_MIN_COST", "KIND", "ROW_BLOCK_MIN", "ROW_REGS_TABLE", "RowSchedule", "RowsKind",
           "bucket_of", "row_bucket", "row_lengths", "row_vector", "rows_as_cols", "values_to_hold"]
