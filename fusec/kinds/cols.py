"""The cols kind: reductions over outer axes, and rows that are strided in memory or few and long
(``templates/reduce_cols.cu.j2``).

A block takes a tile of consecutive kept indices along x and splits the reduced extent along y, combined in a fixed
order; where the tiles alone would leave the GPU idle, each tile's reduced extent is split across blocks too, their
partials combined by the last block to arrive or after a grid barrier (:class:`ColSchedule`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fusec.codegen.lower import launch_policy, lower_loops, phase_partials
from fusec.codegen.spec import KernelSpec, LaunchPolicy, Phase
from fusec.ir.region import COLS, ROWS
from fusec.kinds.kind import KernelKind, Refuse
from fusec.schedule.base import BLOCK, Schedule
from fusec.schedule.device import DeviceProperties
from fusec.schedule.heuristics import fastest_axis
from fusec.schedule.nest import LoopNest

LAST_BLOCK_TILES = 30  # a split cols last_block kernel has an arrival counter per tile in the workspace's head
SPLIT_MIN_ELEMS = 16  # cols split across blocks: each thread folds at least this many elements of its block's part
COLS_TILE_MAX = 32  # cols: at most this many kept indices per block (threadIdx.x, a warp's width)
COLS_THREADS = 1024  # cols: threads per block when the reduced extent is long enough


@dataclass(frozen=True)
class ColSchedule(Schedule):
    """Reductions over outer axes (and rows that are few and long, or strided in memory): a block of
    ``tile`` x ``split`` threads, ``tile`` consecutive kept indices along x and the reduced extent split
    ``split`` ways along y, combined in a fixed order (shuffles inside a warp, then shared memory).
    ``tile`` 8..32 puts the warp along the kept indices (coalesced when the kept axis is the fastest in
    memory); ``tile`` 1 puts it along the reduced extent (when a reduced axis is the fastest).

    ``finish``: ``tiles`` (a block per tile of kept indices, grid-stride over tiles, at most the resident
    capacity) or, when the tiles alone would leave the GPU idle, the reduced extent of each tile split
    across ``blocks`` blocks too (0: as many as fill the device, chosen at launch): each block writes its
    partial to the workspace, and the partials of a tile are combined in block order, by the last block of
    the tile to arrive (``last_block``: one phase, outputs per kept index only, at most
    :data:`LAST_BLOCK_TILES` tiles) or by every block of the
    tile after a grid barrier (``grid_barrier``: several phases, or outputs over the elements). When the
    tiles fill the device the split variants run as ``tiles`` does. ``one_pass``: see :class:`RowSchedule`."""

    kind: ClassVar[str] = COLS
    variant_field: ClassVar[str] = "finish"
    variants: ClassVar[tuple[str, ...]] = ("tiles", "last_block", "grid_barrier")
    keys: ClassVar[dict[str, str]] = {"tile": "tile", "split": "split", "blocks": "blocks", "one_pass": "one_pass"}
    quiet: ClassVar[tuple[str, ...]] = ("one_pass",)
    finish: str = "tiles"
    tile: int = 32
    split: int = 8
    blocks: int = 0
    one_pass: bool | None = None


    @property
    def block(self) -> tuple[int, int]:
        return (self.tile, self.split)

    @property
    def persistent(self) -> bool:
        return True

    @property
    def min_resident(self) -> int:
        """Blocks per SM that ptxas plans registers for: 64 registers per thread at half the SM's threads."""
        return max(1, min(32, 1024 // self.threads))

    @property
    def splits(self) -> bool:
        """The reduced extent may be split across blocks."""
        return self.finish != "tiles"

    @property
    def cooperative(self) -> bool:
        return self.finish == "grid_barrier"

    @property
    def workspace(self) -> bool:
        return self.splits

    def blocks_per_tile_limit(self, n_reduced: int) -> int:
        """The most blocks one tile's reduced extent is split across: ``blocks`` when given, else enough
        that each thread still folds at least :data:`SPLIT_MIN_ELEMS` elements."""
        if not self.splits:
            return 1
        if self.blocks:
            return max(1, min(self.blocks, n_reduced))
        return max(1, n_reduced // (self.split * SPLIT_MIN_ELEMS))

    def text(self) -> str:
        if self.finish == "tiles":  # no split: blocks does not apply
            return f"{self.kind}:{self.finish},tile={self.tile},split={self.split}" + self._flag_text("one_pass")
        return super().text()


class ColsKind(KernelKind):
    name = COLS
    schedule_type = ColSchedule
    template = "reduce_cols.cu.j2"
    runs = (COLS, ROWS)  # a row is then a kept index whose reduced extent is one axis
    one_pass = True

    def defaults(self, nest: LoopNest, device: DeviceProperties, variant: str | None) -> ColSchedule:
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

    def check_fields(self, nest: LoopNest, schedule: ColSchedule, device: DeviceProperties, refuse: Refuse) -> None:
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

    def proposals(self, nest: LoopNest, base: ColSchedule) -> list[str]:
        """The block shape (kept indices per block x threads along the reduction), splitting the reduced extent
        across blocks or not, one pass or two."""
        out: list[str] = []
        shapes = ((base.tile, base.split * 2), (base.tile, base.split // 2), (base.tile * 2, base.split // 2))
        for tile, split in shapes:
            if tile >= 1 and split >= 1:
                out.append(f"cols:{base.finish},tile={tile},split={split}")
        out.append("cols:tiles" if base.splits else "cols:grid_barrier")
        if base.one_pass is not None:  # (two passes: two phases, which last_block cannot combine)
            out += [f"cols:{f},one_pass={int(not base.one_pass)}" for f in dict.fromkeys((base.finish, "grid_barrier"))]
        return out

    def lower(self, nest: LoopNest, schedule: ColSchedule, name: str | None = None) -> KernelSpec:
        def launch(vec: int, phases: tuple[Phase, ...]) -> LaunchPolicy:
            partial = tuple(b * schedule.tile for b in phase_partials(schedule, phases))  # one per kept index
            return launch_policy(schedule, nest.n_kept, schedule.block[0], partial,
                                 split_limit=schedule.blocks_per_tile_limit(nest.n_loop), split_fixed=schedule.blocks)

        return lower_loops(nest, schedule, name, template=self.template, launch=launch)


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


KIND = ColsKind()

__all__ = ["COLS_THREADS", "COLS_TILE_MAX", "KIND", "LAST_BLOCK_TILES", "SPLIT_MIN_ELEMS", "ColSchedule", "ColsKind",
           "cols_block"]
