"""Scan regions: their loop nest, and choosing, completing and checking their :class:`ScanSchedule`.

A scan region (:func:`fusec.ir.region.region_space` gives it a ``scan_axis``) computes every member per element:
the elementwise prologue, the scans along the scan axis, the epilogue on the scanned values. Its loop nest is
:class:`LoopNest`'s (arrays, accesses, strides, index width) with every member *full* and the scan axis as the
loop axis (the one axis a row walks), the other axes collapsed into the kept axes that number the rows.

The heuristic (:func:`choose`): ``columns`` when the scan axis is not the one the arrays step along by one
element (a scan along an outer axis: a warp takes 32 neighbouring rows, coalesced, with several threads along
each row while the rows are too few to fill the device); a thread per row (``sequential``) for very short rows;
otherwise a warp per row for rows up to :data:`WARP_ROW_MAX` elements, a block beyond; rows fewer than the
device's SMs and at least :data:`SPLIT_MIN_LENGTH` long are split across blocks (``split``), unless a scan reads
another's result (then a block of :data:`BIG_BLOCK` threads per row).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import Region
from fusec.schedule.device import H200, DeviceProperties
from fusec.schedule.kinds import BLOCK, WARP, ScanSchedule, ScheduleError, ScheduleRequest, as_forced
from fusec.schedule.layout import ArrayLayout
from fusec.schedule.nest import LoopNest

SEQUENTIAL_ROW_MAX = 8  # contiguous rows this short take a thread each (a warp reads 32 neighbouring rows)
WARP_ROW_MAX = 1024  # contiguous rows up to this long take a warp each (8 rows per block), longer ones a block
ELEMS = 8  # elements per thread per chunk (4-byte values; 4 for 8-byte values)
BIG_BLOCK = 1024  # threads per row when the rows are fewer than the device's SMs (and cannot be split)
ELEMS_MAX = 16
COLUMN_THREADS = 8  # columns: threads along each row (8 x 32 = 256 per block) ...
COLUMN_FEW_ROWS = 256  # ... while the rows are fewer than this many per SM (then one thread per row suffices)
SPLIT_MIN_LENGTH = 1 << 15  # rows at least this long, fewer than the device's SMs, are split across blocks


class ScanNest(LoopNest):
    """The loop nest of a scan region: every member per element, the scan axis the loop axis."""

    def __init__(self, region: Region, layouts: Mapping[Node, ArrayLayout]):
        axis = region.space.scan_axis
        if axis is None:
            raise ValueError(f"{region.name} is not a scan region")
        self.scan_axis = axis
        super().__init__(region, layouts)

    def full(self, node: Node) -> bool:
        return True

    def _collapse(self) -> None:
        self.reduced = {self.scan_axis}  # the loop axis; adjacent axes never merge into it
        super()._collapse()

    @property
    def n_rows(self) -> int:
        """Rows to scan: none when the scan axis is empty (every output is empty too)."""
        return self.n_kept if self.n_loop > 0 else 0

    def along_rows(self) -> bool:
        """Whether every array that moves along the scan axis steps by at most one element there (a row is
        contiguous in memory, forwards or backwards)."""
        if not self.loop_idx:
            return True
        k = self.loop_idx[0]
        return all(abs(self.axes[k].strides[i]) <= 1 for i, info in enumerate(self.infos) if info.pointer is not None)

    def chained(self) -> bool:
        """Whether a scan reads another scan's result (through any members): a split row then cannot fold its
        segments' totals before it knows the carries."""
        after_scan: set[Node] = set()
        for n in self.members:
            if any(o in self.inside and (o.kind is Kind.SCAN or o in after_scan) for o in n.operands):
                if n.kind is Kind.SCAN:
                    return True
                after_scan.add(n)
        return False

    def widest(self) -> int:
        """The largest itemsize among the arrays read and written, and the scans' accumulators (8 for 64-bit)."""
        sizes = [info.dtype.itemsize for info in self.infos if info.dtype is not None]
        sizes += [n.dtype.itemsize for n in self.members]
        return max(sizes, default=4)


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def choose(nest: ScanNest, device: DeviceProperties = H200) -> ScanSchedule:
    """The scan schedule fusec runs ``nest``'s region with on ``device``."""
    return _defaults(nest, device, None)


def _defaults(nest: ScanNest, device: DeviceProperties, variant: str | None) -> ScanSchedule:
    length = nest.n_loop
    elems_max = ELEMS if nest.widest() <= 4 else ELEMS // 2
    few_rows = nest.n_kept < device.sm_count
    if variant is None:
        if not nest.along_rows():
            variant = "columns"
        elif length <= SEQUENTIAL_ROW_MAX:
            variant = "sequential"
        elif few_rows and length >= SPLIT_MIN_LENGTH and not nest.chained():
            variant = "split"
        else:
            variant = "rows"
    if variant == "sequential":
        return ScanSchedule("sequential", BLOCK, 1)
    if variant == "split":
        return ScanSchedule("split", BLOCK, elems_max)
    if variant == "columns":  # enough threads along each row that few rows still keep the device busy
        threads = COLUMN_THREADS if nest.n_kept < COLUMN_FEW_ROWS * device.sm_count else 1
        threads = max(1, min(threads, _pow2_at_least(-(-length // elems_max))))
        return ScanSchedule("columns", threads, elems_max)
    if length <= WARP * elems_max or length <= WARP_ROW_MAX:
        threads = WARP
        elems = min(elems_max, _pow2_at_least(max(1, -(-length // WARP))))
    else:
        elems = elems_max
        threads = min(BIG_BLOCK if few_rows else BLOCK, _pow2_at_least(-(-length // elems)))
    return ScanSchedule("rows", max(WARP, threads), elems)


def resolve(nest: ScanNest, forced: Any = None, device: DeviceProperties = H200) -> ScanSchedule:
    """The schedule of ``nest``'s region: the heuristic's, or ``forced`` completed and checked."""
    if forced is None:
        return choose(nest, device)
    forced = as_forced(forced)
    if forced.kind != "scan":
        raise ScheduleError(f"schedule {forced} is for a {forced.kind} kernel, but {nest.region.name} is a scan kernel")
    if isinstance(forced, ScheduleRequest):
        forced = forced.build(vars(_defaults(nest, device, forced.variant)))
    check(nest, forced, device)
    assert isinstance(forced, ScanSchedule)
    return forced


def check(nest: ScanNest, schedule: Any, device: DeviceProperties = H200) -> None:
    """Raise :class:`ScheduleError` with the reason when ``schedule`` cannot run ``nest``'s region."""
    def refuse(why: str) -> None:
        raise ScheduleError(f"schedule {schedule} does not fit kernel {nest.region.name}: {why}")

    if not isinstance(schedule, ScanSchedule):
        refuse("it is a scan kernel")
    if schedule.mapping == "sequential":
        if (schedule.row_threads, schedule.elems) != (BLOCK, 1):
            refuse("threads and elems belong to the rows mapping (sequential runs a thread per row)")
        return
    if schedule.mapping == "split" and nest.chained():
        refuse("a scan reads another scan's result: a split row cannot fold its segments before their carries "
               "are known (use rows)")
    g = schedule.row_threads
    if schedule.mapping == "columns":
        if not 1 <= g <= WARP or g & (g - 1):
            refuse("columns takes 1, 2, 4, 8, 16 or 32 threads along each row (32 rows per block)")
        if not 1 <= schedule.elems <= ELEMS_MAX:
            refuse(f"elems (elements per thread per chunk) is 1..{ELEMS_MAX}")
        return
    if g < WARP or g % WARP or g > min(1024, device.max_threads_per_block) or g & (g - 1):
        refuse("threads per row is 32, 64, 128, 256, 512 or 1024 (whole warps, a power of two)")
    if not 1 <= schedule.elems <= ELEMS_MAX:
        refuse(f"elems (elements per thread per chunk) is 1..{ELEMS_MAX}")


__all__ = ["ScanNest", "check", "choose", "resolve"]
