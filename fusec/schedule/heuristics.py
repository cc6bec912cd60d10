"""Choosing a region's schedule, completing a partial one, and checking that a forced one fits.

``choose(nest, device)`` is the heuristic: from the loop nest (the region over its argument layouts) and
the device's properties it picks the schedule fusec runs with. ``resolve(nest, forced, device)`` is what
every caller uses: the heuristic's schedule, or the forced one completed (fields it leaves out take the
heuristic's values for that variant) and checked against the region (:class:`ScheduleError` says why one
does not fit).

The constants below are the heuristics' tuning, measured on the H200 (``benchmarks/tune_rows.py`` times
alternatives by forcing schedules).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fusec.ir.graph import Node
from fusec.schedule import scan
from fusec.schedule.contract import layout_problem
from fusec.schedule.device import H200, DeviceProperties
from fusec.schedule.kinds import (
    BLOCK,
    LAST_BLOCK_TILES,
    WARP,
    ColSchedule,
    PointwiseSchedule,
    ReduceAllSchedule,
    RowSchedule,
    Schedule,
    ScheduleError,
    ScheduleRequest,
    as_forced,
)
from fusec.schedule.layout import VECTOR_BYTES
from fusec.schedule.nest import LoopNest

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
TILE_EDGE = 64  # pointwise tiled: tiles of 64 x 64 elements, a 64 x 4 block (16 rows per thread); H200, x.T * 2
# + y of 16384 x 4096 float32: 0.234 ms (tile 64), 0.281 (32), 0.706 (16)
TILE_MIN_EXTENT = 32  # pointwise tiled: both tiled axes at least this long (shorter ones waste the tile)
COLS_TILE_MAX = 32  # cols: at most this many kept indices per block (threadIdx.x, a warp's width)
COLS_THREADS = 1024  # cols: threads per block when the reduced extent is long enough
LONG_ROW = 1 << 15  # rows this long or longer, too few to give every SM ...
FEW_ROWS_PER_SM = 2  # ... this many rows each, run as cols schedules split across blocks


# ---- the heuristic -----------------------------------------------------------------------------------------


def choose(nest: LoopNest, device: DeviceProperties = H200) -> Schedule:
    """The schedule fusec runs ``nest``'s region with on ``device``."""
    if isinstance(nest, scan.ScanNest):
        return scan.choose(nest, device)
    schedule = _defaults(nest, device, None)
    if one_pass_pays(nest, schedule):
        schedule = replace(_defaults(nest.with_one_pass(), device, None, schedule.kind), one_pass=True)
    elif nest.one_pass_candidates and not isinstance(schedule, PointwiseSchedule):
        schedule = replace(schedule, one_pass=False)
    if layout_problem(nest_for(nest, schedule), schedule) is not None:  # (the rules above should not allow it)
        schedule = schedule.scalar()
    return schedule


def one_pass_pays(nest: LoopNest, schedule: Schedule) -> bool:
    """Whether the region's one-pass statistics (variances, softmax denominators) should take one pass under a
    schedule like ``schedule``: whenever it has some and does not hold its rows in registers, where the second
    pass reads registers, not memory, and costs less than the one-pass updates (a division or an exp more
    per element)."""
    if not nest.one_pass_candidates or isinstance(schedule, PointwiseSchedule):
        return False
    return schedule.natural("one_pass")


def nest_for(nest: LoopNest, schedule: Schedule) -> LoopNest:
    """The loop nest a kernel of ``schedule`` computes: ``nest``, or with ``one_pass`` its one-pass statistics."""
    return nest.with_one_pass() if getattr(schedule, "one_pass", None) else nest


def _defaults(nest: LoopNest, device: DeviceProperties, variant: str | None, kind: str | None = None) -> Schedule:
    """The heuristic's schedule, or (``variant`` of schedule ``kind``) its best schedule of that variant."""
    if kind is None and nest.kind == "rows" and rows_as_cols(nest, device):
        kind = "cols"
    kind = kind or nest.kind
    if kind == "pointwise":
        if variant == "tiled" or (variant is None and tile_axes(nest, TILE_MIN_EXTENT) is not None):
            return PointwiseSchedule("tiled", 1, max([8] + [e for e in (TILE_EDGE, 32, 16)
                                                            if tile_bytes(nest, e) <= device.shared_memory_per_block]))
        if variant == "inner_vector" or (variant is None and inner_vector_width(nest) > 1):
            return PointwiseSchedule("inner_vector", max(2, inner_vector_width(nest)))
        return PointwiseSchedule(*_flat_loop(nest, variant))
    if kind == "reduce-all":
        finish = "grid_barrier" if (nest.n_phases > 1 or nest.full_outputs) else "last_block"
        return ReduceAllSchedule(variant or finish, *_flat_loop(nest, None))
    if kind == "rows":
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
            bucket = _bucket_of(nest, mapping)
        threads, elems, vec = bucket
        lengths = row_lengths(nest, threads, elems)
        if lengths == "bucket" and nest.row_contiguous:
            vec = row_vector(nest, elems, exact=False)
        fast_division = any(nest.invariant_division(n) for n in nest.members)
        return RowSchedule(mapping, threads, elems, vec, values_to_hold(nest, elems), fast_division, lengths)
    tile, split = cols_block(nest, device, COLS_THREADS)
    tiles = -(-nest.n_kept // tile)
    resident_blocks = device.sm_count * min(32, device.max_threads_per_sm // (tile * split))
    if variant == "tiles" or (variant is None and 2 * tiles > resident_blocks):
        return ColSchedule("tiles", tile, split)  # the tiles fill the device: no split (and no code for it)
    tile, split = cols_block(nest, device, BLOCK)  # blocks split the reduction: more of them, smaller
    tiles = -(-nest.n_kept // tile)
    if variant is None:
        one_pass = nest.n_phases == 1 and not nest.full_outputs and tiles <= LAST_BLOCK_TILES
        variant = "last_block" if one_pass else "grid_barrier"
    return ColSchedule(variant, tile, split)


def fastest_axis(nest: LoopNest) -> str | None:
    """Along which axes the region's arrays are contiguous in memory: ``"kept"`` when the innermost kept
    axis is the one most of the bytes step along by one element, ``"reduced"`` when it is the innermost
    reduced (loop) axis, None when neither (every array strided there). Arrays vote by itemsize."""
    if not nest.kept_idx or not nest.loop_idx:
        return None
    inner_kept, inner_loop = nest.kept_idx[-1], nest.loop_idx[-1]
    votes = {"kept": 0, "reduced": 0}
    for i, info in enumerate(nest.infos):
        if info.pointer is None or not nest.varying(i):
            continue
        if abs(nest.axes[inner_kept].strides[i]) == 1:
            votes["kept"] += info.dtype.itemsize
        elif abs(nest.axes[inner_loop].strides[i]) == 1:
            votes["reduced"] += info.dtype.itemsize
    if not any(votes.values()):
        return None
    return "kept" if votes["kept"] >= votes["reduced"] else "reduced"


def tile_axes(nest: LoopNest, min_extent: int = 2) -> tuple[int, int] | None:
    """A pointwise region whose arrays disagree on their fastest axis: (the axis the outputs are contiguous
    along, the axis the most input bytes are contiguous along instead), as collapsed-axis indices, both
    at least ``min_extent`` long; None when every array agrees (or nothing is contiguous)."""
    if nest.kind != "pointwise" or len(nest.axes) < 2:
        return None

    def unit_axis(i: int) -> int | None:
        return next((k for k, g in enumerate(nest.axes) if abs(g.strides[i]) == 1), None)

    stores = {nest.store_access(n).var for n in nest.full_outputs}
    fast_out = {unit_axis(i) for i, info in enumerate(nest.infos) if info.var in stores}
    if len(fast_out) != 1 or None in fast_out:
        return None
    out_axis = fast_out.pop()
    votes: dict[int, int] = {}
    for i, info in enumerate(nest.infos):
        k = unit_axis(i)
        if info.var not in stores and info.pointer is not None and k is not None and k != out_axis \
                and (nest.axes[out_axis].strides[i] != 0 or out_axis in nest.clamped[i]):
            votes[k] = votes.get(k, 0) + info.dtype.itemsize
    if not votes:
        return None
    in_axis = max(sorted(votes), key=votes.__getitem__)
    if min(nest.extents[out_axis], nest.extents[in_axis]) < min_extent:
        return None
    return out_axis, in_axis


def staged_inputs(nest: LoopNest) -> tuple[int, ...]:
    """Positions (in ``nest.infos``) of the inputs a tiled loop reads through shared memory: those contiguous
    along the tiled input axis and not along the outputs' (none when the loop cannot be tiled)."""
    axes = tile_axes(nest)
    if axes is None:
        return ()
    out_axis, in_axis = axes
    return tuple(i for i, info in enumerate(nest.infos)
                 if info.pointer is not None and info.pointer.startswith("in")
                 and abs(nest.axes[in_axis].strides[i]) == 1 and abs(nest.axes[out_axis].strides[i]) != 1)


def tile_bytes(nest: LoopNest, edge: int) -> int:
    """Shared memory a tiled loop with tiles of ``edge`` x ``edge`` takes: a padded tile per staged input."""
    return sum(nest.infos[i].dtype.itemsize for i in staged_inputs(nest)) * edge * (edge + 1)


def cols_block(nest: LoopNest, device: DeviceProperties, threads: int) -> tuple[int, int]:
    """(tile, split) of a cols block of up to ``threads`` threads. Arrays contiguous along the reduced
    extent: tile 1 (a warp walks the reduction). Else the tile is the innermost kept axis's extent rounded
    up to a power of two, at most a warp (a warp covers whole rows of a narrow array and several
    consecutive reduced indices). ``split`` threads per kept index fill the block, fewer when the reduced
    extent is short; and when the kept indices alone outnumber the threads the device holds, fewer threads
    split the reduced extent (down to one: a thread folds a whole column, no combining) and the tile
    widens to keep :data:`BLOCK` threads.

    Blocks of :data:`COLS_THREADS` (1024) when the tiles alone fill the device: one block per tile then
    needs that many loads in flight (a 8192 x 8192 column sum moves 2.1 TB/s with 256-thread blocks, 4.0
    with 1024-thread ones on the H200); :data:`BLOCK` (256) when blocks split the reduction, whose extra
    code costs registers (H200: a (2^24, 8) column sum 0.137 ms with 256-thread blocks, 0.174 with 1024)."""
    if fastest_axis(nest) == "reduced":
        tile = 1
    else:
        extent = nest.extents[nest.kept_idx[-1]] if nest.kept_idx else COLS_TILE_MAX
        tile = min(COLS_TILE_MAX, 1 << max(0, extent - 1).bit_length())
    split = max(1, min(threads // tile, 1 << max(0, nest.n_loop - 1).bit_length()))
    resident_threads = device.sm_count * device.max_threads_per_sm
    while split > 1 and nest.n_kept * split > 2 * resident_threads:
        split //= 2
    return max(tile, BLOCK // split), split


def rows_as_cols(nest: LoopNest, device: DeviceProperties) -> bool:
    """A rows region the cols kernel runs better: rows that are strided in memory while the kept axis is
    contiguous (a transposed input: coalesced across rows), or rows too long for registers and too few to
    give every SM :data:`FEW_ROWS_PER_SM` of them (each row split across blocks)."""
    if fastest_axis(nest) == "kept":
        return True
    return (nest.n_loop >= LONG_ROW and row_bucket(nest) is None
            and nest.n_kept < FEW_ROWS_PER_SM * device.sm_count)


def _flat_loop(nest: LoopNest, loop: str | None) -> tuple[str, int]:
    """(loop, vec) of a flat loop: the heuristic's, or the best of the ``loop`` asked for."""
    vec = vector_width(nest) if nest.contiguous else 1
    if loop is None:
        return ("vector" if vec > 1 else ("contiguous" if nest.contiguous else "strided")), vec
    if loop == "vector":
        widest = max((i.dtype.itemsize for k, i in enumerate(nest.infos) if nest.varying(k) and i.pointer), default=4)
        return loop, vec if vec > 1 else max(2, VECTOR_BYTES // widest)  # (a misfit is refused with its reason)
    return loop, 1


def vector_width(nest: LoopNest) -> int:
    """Elements per thread per vector step of a contiguous loop: 16 bytes of the widest varying array, when
    every varying array's pointer is aligned to the bytes it moves; 1 (scalar) otherwise."""
    pointers = [info for i, info in enumerate(nest.infos) if nest.varying(i) and info.pointer is not None]
    if not pointers:
        return 1
    width = VECTOR_BYTES // max(i.dtype.itemsize for i in pointers)
    if width < 2:
        return 1
    for info in pointers:
        if nest.access_align(info) < width * info.dtype.itemsize:
            return 1
    return width


def inner_vector_width(nest: LoopNest) -> int:
    """Elements per step of a pointwise loop over several axes with vectors along the innermost one: 16
    bytes of the widest array that moves along it, when every array moving there steps by one element
    (its other strides multiples of the width, its pointer aligned to it) and the others stay put (one
    scalar read per step, as a bias row or a per-row scale is); the innermost extent a multiple of the
    width. 1 when that does not hold (or the flat vector loop applies)."""
    if nest.kind != "pointwise" or nest.contiguous or not nest.axes:
        return 1
    width = VECTOR_BYTES // max((i.dtype.itemsize for i in nest.infos if i.pointer is not None), default=16)
    while width > 1 and _inner_vector_misfit(nest, width) is not None:
        width //= 2
    return width


def _inner_vector_misfit(nest: LoopNest, vec: int) -> str | None:
    """Why vectors of ``vec`` elements along the innermost axis do not fit ``nest`` (None: they do)."""
    inner = nest.axes[-1]
    if inner.extent % vec:
        return f"the innermost axis ({inner.extent}) is not a multiple of vec={vec}"
    inner_k = len(nest.axes) - 1
    if any(inner_k in c for c in nest.clamped):
        return "an array is read through a clamped index along the innermost axis (a pad or a join)"
    if any(info.pointer is None and inner.strides[i] != 0 for i, info in enumerate(nest.infos)):
        return "an index (iota) moves along the innermost axis"
    moving = [(i, info) for i, info in enumerate(nest.infos) if info.pointer is not None and inner.strides[i] != 0]
    for i, info in enumerate(nest.infos):  # a gather's base position steps by one (vector lane j: + j) or stays
        if info.pointer is None and inner.strides[i] not in (0, 1):
            return f"{info.var} steps by {inner.strides[i]} along the innermost axis, not 1"
    if not moving:
        return "no array moves along the innermost axis"
    for node in nest.full_outputs:  # every store is a vector store: one that stays put would overlap its neighbours
        i = nest.info_index[nest.store_access(node).var]
        if inner.strides[i] != 1:
            return (f"{nest.out_pointer[node]} steps by {inner.strides[i]} along the innermost axis, not 1 (its "
                    f"vector stores would not be its consecutive elements)")
    for i, info in moving:
        if inner.strides[i] != 1:
            return f"{info.var} steps by {inner.strides[i]} along the innermost axis, not 1"
        if vec * info.dtype.itemsize > VECTOR_BYTES:
            return f"vec={vec} moves {vec * info.dtype.itemsize} bytes of {info.var} per step (at most {VECTOR_BYTES})"
        if nest.access_align(info) < vec * info.dtype.itemsize or any(
                g.strides[i] % vec for g in nest.axes[:-1]):
            return f"{info.var}'s start or strides are not aligned to vectors of {vec}"
    return None


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


def _bucket_of(nest: LoopNest, mapping: str) -> tuple[int, int, int]:
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


# ---- forced schedules ------------------------------------------------------------------------------------


def resolve(nest: LoopNest, forced: Schedule | ScheduleRequest | str | None = None,
            device: DeviceProperties = H200) -> Schedule:
    """The schedule of ``nest``'s region: the heuristic's, or ``forced`` completed and checked."""
    if isinstance(nest, scan.ScanNest):
        return scan.resolve(nest, forced, device)
    if forced is None:
        return choose(nest, device)
    forced = as_forced(forced)
    if not fits_kind(forced.kind, nest.kind):
        raise ScheduleError(f"schedule {forced} is for a {forced.kind} kernel, but {nest.region.name} is a "
                            f"{nest.kind} kernel")
    if isinstance(forced, ScheduleRequest):
        given = dict(forced.given)
        one_pass = given.get("one_pass")
        if one_pass is None and nest.one_pass_candidates and forced.kind != "pointwise":
            one_pass = one_pass_pays(nest, _defaults(nest, device, forced.variant, forced.kind))
        target = nest.with_one_pass() if one_pass else nest
        defaults: dict[str, Any] = dict(vars(_defaults(target, device, forced.variant, forced.kind)))
        if forced.kind != "pointwise":
            defaults["one_pass"] = one_pass
        if "loop" in given and "vec" not in given:  # reduce-all: the loop's own best width
            defaults["vec"] = _flat_loop(target, given["loop"])[1]
        if forced.kind == "rows" and defaults.get("elems") and "vec" not in given and nest.row_contiguous:
            # register rows: the widest vectors for the lengths policy and the elements per thread asked for
            exact = given.get("lengths", defaults.get("lengths")) == "exact"
            defaults["vec"] = row_vector(nest, given.get("elems", defaults["elems"]), exact=exact)
        forced = forced.build(defaults)
    check(nest, forced, device)
    return forced


def check(nest: LoopNest, schedule: Schedule, device: DeviceProperties = H200) -> None:
    """Raise :class:`ScheduleError` with the reason when ``schedule`` cannot run ``nest``'s region."""
    def refuse(why: str) -> None:
        raise ScheduleError(f"schedule {schedule} does not fit kernel {nest.region.name}: {why}")

    if isinstance(nest, scan.ScanNest) or schedule.kind == "scan":
        if not isinstance(nest, scan.ScanNest):
            refuse(f"it is a {nest.kind} kernel")
        return scan.check(nest, schedule, device)  # type: ignore[arg-type]
    if not fits_kind(schedule.kind, nest.kind):
        refuse(f"it is a {nest.kind} kernel")
    if getattr(schedule, "one_pass", None):
        if not nest.one_pass_candidates:
            refuse("one_pass=1 computes variances and softmax denominators in one pass, and this kernel has none")
        nest = nest.with_one_pass()
    if schedule.threads > device.max_threads_per_block or schedule.threads < 1:
        refuse(f"{schedule.threads} threads per block (1..{device.max_threads_per_block})")
    if isinstance(schedule, PointwiseSchedule) and schedule.loop == "inner_vector":
        if nest.contiguous or not nest.axes:
            refuse("an inner_vector loop is for several axes; this loop is one flat index (use vector)")
        if schedule.vec < 2 or not _power_of_two(schedule.vec):
            refuse("an inner_vector loop takes vec = 2, 4, 8 or 16")
        misfit = _inner_vector_misfit(nest, schedule.vec)
        if misfit is not None:
            refuse(misfit)
        if schedule.tile != PointwiseSchedule.tile:
            refuse("tile belongs to the tiled loop")
    elif isinstance(schedule, PointwiseSchedule) and schedule.loop == "tiled":
        if schedule.vec != 1:
            refuse("a tiled loop reads and writes one element at a time: vec=1")
        if tile_axes(nest) is None:
            refuse("a tiled loop needs an input contiguous along another axis than the outputs; these agree")
        if schedule.tile not in (8, 16, 32, 64):
            refuse("tile (the tile's edge) is 8, 16, 32 or 64")
        if tile_bytes(nest, schedule.tile) > device.shared_memory_per_block:
            refuse(f"tiles of {schedule.tile} take {tile_bytes(nest, schedule.tile)} bytes of shared memory "
                   f"(at most {device.shared_memory_per_block})")
    elif isinstance(schedule, (PointwiseSchedule, ReduceAllSchedule)):
        _check_flat_loop(nest, schedule.loop, schedule.vec, refuse)
        if isinstance(schedule, PointwiseSchedule) and schedule.tile != PointwiseSchedule.tile:
            refuse("tile belongs to the tiled loop")
        if isinstance(schedule, ReduceAllSchedule) and schedule.finish == "last_block" and (
                nest.n_phases > 1 or nest.full_outputs):
            refuse("last_block combines one phase into scalar outputs; this kernel has "
                   f"{nest.n_phases} phase(s) and {len(nest.full_outputs)} output(s) over the elements: "
                   "use grid_barrier")
    elif isinstance(schedule, RowSchedule):
        _check_rows(nest, schedule, refuse)
    elif isinstance(schedule, ColSchedule):
        _check_cols(nest, schedule, refuse)
    problem = layout_problem(nest, schedule)  # every vector access aligned: what the launch contract rests on
    if problem is not None:
        refuse(problem)


def _check_cols(nest: LoopNest, schedule: ColSchedule, refuse: Any) -> None:
    if schedule.tile < 1 or schedule.split < 1:
        refuse("tile and split must be at least 1")
    if schedule.blocks < 0 or (schedule.blocks and not schedule.splits):
        refuse("blocks (per tile) belongs to the split variants last_block and grid_barrier, and is >= 0")
    if schedule.finish == "last_block" and (nest.n_phases > 1 or nest.full_outputs):
        refuse("last_block combines one phase into outputs per kept index; this kernel has "
               f"{nest.n_phases} phase(s) and {len(nest.full_outputs)} output(s) over the elements: "
               "use grid_barrier")
    if schedule.finish == "last_block" and -(-nest.n_kept // schedule.tile) > LAST_BLOCK_TILES:
        refuse(f"last_block counts arrivals per tile, for at most {LAST_BLOCK_TILES} tiles; this kernel has "
               f"{-(-nest.n_kept // schedule.tile)}: use grid_barrier")


def fits_kind(schedule_kind: str, region_kind: str) -> bool:
    """Whether a schedule of ``schedule_kind`` can run a region of ``region_kind``: its own, and the cols
    schedules run rows regions too (a row is then a kept index whose reduced extent is one axis)."""
    return schedule_kind == region_kind or (schedule_kind, region_kind) == ("cols", "rows")


def _power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _check_flat_loop(nest: LoopNest, loop: str, vec: int, refuse: Any) -> None:
    if loop in ("vector", "contiguous") and not nest.contiguous:
        refuse(f"a {loop} loop needs every array to step by one element along one flat index; these do not")
    if loop == "vector":
        if vec < 2 or not _power_of_two(vec):
            refuse("a vector loop takes vec = 2, 4, 8 or 16")
        for i, info in enumerate(nest.infos):
            if nest.varying(i) and info.pointer is not None:
                if vec * info.dtype.itemsize > VECTOR_BYTES:
                    refuse(f"vec={vec} moves {vec * info.dtype.itemsize} bytes of {info.var} per step "
                           f"(at most {VECTOR_BYTES})")
                if nest.access_align(info) < vec * info.dtype.itemsize:
                    refuse(f"{info.var} is {nest.access_align(info)}-byte aligned, vec={vec} needs "
                           f"{vec * info.dtype.itemsize}")
    elif vec != 1:
        refuse(f"vec={vec} needs the vector loop")


def _check_rows(nest: LoopNest, s: RowSchedule, refuse: Any) -> None:
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
    if s.mapping == "warp_regs" and (not _power_of_two(s.row_threads) or not 1 <= s.row_threads <= WARP):
        refuse("warp_regs takes 1, 2, 4, 8, 16 or 32 threads per row")
    if s.mapping == "block_regs" and (s.row_threads % WARP or s.row_threads < WARP):
        refuse("block_regs takes a multiple of 32 threads per row")
    if s.elems < 1 or not _power_of_two(s.vec) or s.elems % s.vec:
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
