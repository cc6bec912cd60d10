"""The pointwise kind: regions without a reduction, one thread per output element (``templates/pointwise.cu.j2``).

Its schedule (:class:`PointwiseSchedule`) picks the loop: one flat index in vectors where every array is contiguous
and aligned, an inner-axis vector loop where the arrays step by one or by nothing along the innermost axis (a bias
row, a per-row scale), a tiled loop through shared memory where the arrays disagree on their fastest axis
(``x.T + y``), else a strided loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

from fusec.codegen.lower import Lowering, launch_policy, lower_loops
from fusec.codegen.spec import Access, Axis, KernelSpec, LaunchPolicy, Phase
from fusec.ir.region import POINTWISE
from fusec.kinds.kind import KernelKind, Refuse
from fusec.schedule.base import BLOCK, Schedule
from fusec.schedule.contract import VectorAccess
from fusec.schedule.device import DeviceProperties
from fusec.schedule.heuristics import check_flat_loop, flat_loop, outline_pays, power_of_two
from fusec.schedule.layout import VECTOR_BYTES
from fusec.schedule.nest import LoopNest

TILE_EDGE = 64  # pointwise tiled: tiles of 64 x 64 elements, a 64 x 4 block (16 rows per thread); H200, x.T * 2
# + y of 16384 x 4096 float32: 0.234 ms (tile 64), 0.281 (32), 0.706 (16)
OUTLINED_LOOPS = ("vector", "contiguous", "strided")  # the loops that may call their body as a function
TILE_MIN_EXTENT = 32  # pointwise tiled: both tiled axes at least this long (shorter ones waste the tile)


@dataclass(frozen=True)
class PointwiseSchedule(Schedule):
    """One thread per output element, grid-stride. ``loop``: ``vector`` (every array contiguous along
    the flat index, ``vec`` elements per 16-byte access, then a scalar tail), ``contiguous`` (the same,
    one element at a time), ``strided`` (the flat index unravelled over the collapsed shape and dotted
    with each array's strides), ``inner_vector`` (strided, ``vec`` elements per step along the innermost
    axis, where every array steps by one or by nothing: ``x * w + b`` with ``w``, ``b`` broadcast rows) or
    ``tiled`` (the arrays disagree on their fastest axis, as in ``x.T + y``: a block of ``tile`` x
    256 / ``tile`` threads takes ``tile`` x ``tile`` tiles of the two axes, reads the inputs contiguous
    along the other axis into shared memory with the warp along that axis, and computes and writes with
    the warp along the outputs' fastest axis; grid-stride over tiles)."""

    kind: ClassVar[str] = POINTWISE
    variant_field: ClassVar[str] = "loop"
    variants: ClassVar[tuple[str, ...]] = ("vector", "contiguous", "strided", "inner_vector", "tiled")
    keys: ClassVar[dict[str, str]] = {"vec": "vec", "tile": "tile", "outline": "outline"}
    loop: str = "strided"
    vec: int = 1
    tile: int = 32  # tiled: the tile's edge (the block is tile x 256 / tile threads)
    # vector, contiguous and strided loops: the element's body is one __noinline__ function called per element
    # instead of a copy per element of a vector and one in the tail (:func:`fusec.schedule.heuristics.outline_pays`)
    outline: bool = False


    @property
    def block(self) -> tuple[int, int]:
        return (self.tile, max(1, BLOCK // self.tile)) if self.loop == "tiled" else (BLOCK, 1)

    def scalar(self) -> Schedule:
        if self.loop == "vector":
            return replace(self, loop="contiguous", vec=1)
        if self.loop == "inner_vector":
            return replace(self, loop="strided", vec=1)
        return self

    def text(self) -> str:
        if self.loop == "tiled":
            text = f"{self.kind}:tiled,tile={self.tile}" + (f",vec={self.vec}" if self.vec != 1 else "")
        else:
            text = f"{self.kind}:{self.loop},vec={self.vec}"
        return text + (",outline=1" if self.outline else "")

    def vector_accesses(self, nest: LoopNest) -> list[VectorAccess]:
        """``vector``: every array the loop moves along (loads and stores), ``vec`` elements of the flat index at a
        time; ``inner_vector``: every array moving along the innermost axis, and every store (a store is always a
        vector there), ``vec`` elements along that axis; the other loops none."""
        if self.vec <= 1:
            return []
        out: list[VectorAccess] = []
        if self.loop == "vector":
            loop_axis = nest.loop_idx[0] if len(nest.loop_idx) == 1 else None
            for info in nest.split(nest.epilogue_refs)[2]:
                if info.pointer is not None:
                    out.append(VectorAccess(info, self.vec, loop_axis))
            for node in nest.full_outputs:
                info = nest.store_access(node)
                if nest.varying(nest.info_index[info.var]):  # a store the loop does not move along: one element
                    out.append(VectorAccess(info, self.vec, loop_axis))
        elif self.loop == "inner_vector":
            inner = len(nest.axes) - 1
            for info in nest.split(nest.epilogue_refs)[2]:
                if info.pointer is not None and nest.axes[inner].strides[nest.info_index[info.var]] != 0:
                    out.append(VectorAccess(info, self.vec, inner, whole_axis=True))
            for node in nest.full_outputs:
                out.append(VectorAccess(nest.store_access(node), self.vec, inner, whole_axis=True))
        return out


class PointwiseKind(KernelKind):
    name = POINTWISE
    schedule_type = PointwiseSchedule
    template = "pointwise.cu.j2"
    runs = (POINTWISE,)

    def defaults(self, nest: LoopNest, device: DeviceProperties, variant: str | None) -> PointwiseSchedule:
        if variant == "tiled" or (variant is None and tile_axes(nest, TILE_MIN_EXTENT) is not None):
            return PointwiseSchedule("tiled", 1, max([8] + [e for e in (TILE_EDGE, 32, 16)
                                                            if tile_bytes(nest, e) <= device.shared_memory_per_block]))
        if variant == "inner_vector" or (variant is None and inner_vector_width(nest) > 1):
            return PointwiseSchedule("inner_vector", max(2, inner_vector_width(nest)))
        loop, vec = flat_loop(nest, variant)
        return PointwiseSchedule(loop, vec, outline=outline_pays(nest.epilogue_needed, vec + 1 if vec > 1 else 1))

    def check_fields(self, nest: LoopNest, schedule: PointwiseSchedule, device: DeviceProperties,
                     refuse: Refuse) -> None:
        if schedule.outline and schedule.loop not in OUTLINED_LOOPS:
            refuse(f"outline=1 takes the vector, contiguous or strided loops, not {schedule.loop}")
        if schedule.loop == "inner_vector":
            if nest.contiguous or not nest.axes:
                refuse("an inner_vector loop is for several axes; this loop is one flat index (use vector)")
            if schedule.vec < 2 or not power_of_two(schedule.vec):
                refuse("an inner_vector loop takes vec = 2, 4, 8 or 16")
            misfit = inner_vector_misfit(nest, schedule.vec)
            if misfit is not None:
                refuse(misfit)
            if schedule.tile != PointwiseSchedule.tile:
                refuse("tile belongs to the tiled loop")
        elif schedule.loop == "tiled":
            if schedule.vec != 1:
                refuse("a tiled loop reads and writes one element at a time: vec=1")
            if tile_axes(nest) is None:
                refuse("a tiled loop needs an input contiguous along another axis than the outputs; these agree")
            if schedule.tile not in (8, 16, 32, 64):
                refuse("tile (the tile's edge) is 8, 16, 32 or 64")
            if tile_bytes(nest, schedule.tile) > device.shared_memory_per_block:
                refuse(f"tiles of {schedule.tile} take {tile_bytes(nest, schedule.tile)} bytes of shared memory "
                       f"(at most {device.shared_memory_per_block})")
        else:
            check_flat_loop(nest, schedule.loop, schedule.vec, refuse)
            if schedule.tile != PointwiseSchedule.tile:
                refuse("tile belongs to the tiled loop")

    def proposals(self, nest: LoopNest, base: PointwiseSchedule) -> list[str]:
        """The tile edge of a tiled loop, the vector width of a vector or inner-vector loop (and no vectors)."""
        out: list[str] = []
        if base.loop == "tiled":
            out += [f"pointwise:tiled,tile={t}" for t in (64, 32, 16) if t != base.tile]
        elif base.loop in ("vector", "inner_vector"):
            out += [f"pointwise:{base.loop},vec={v}" for v in (base.vec // 2, base.vec * 2) if v >= 2]
            if base.loop == "vector":
                out.append("pointwise:contiguous")
        return out

    def lower(self, nest: LoopNest, schedule: PointwiseSchedule, name: str | None = None) -> KernelSpec:
        def launch(vec: int, phases: tuple[Phase, ...]) -> LaunchPolicy:
            if schedule.loop == "tiled":  # a tile per block, grid-stride over tiles
                out_axis, in_axis = tile_axes(nest)
                edge = schedule.block[0]
                tiles = math.prod(-(-e // edge) if k in (out_axis, in_axis) else e for k, e in enumerate(nest.extents))
                return launch_policy(schedule, tiles, 1)
            return launch_policy(schedule, -(-nest.n_loop // vec), schedule.block[0])

        def fields(lo: Lowering, built: dict[str, Access], axes: list[Axis],
                   epilogue_loads: tuple[Access, ...]) -> dict[str, object]:
            """What the tiled and inner_vector loops read besides the common fields."""
            if schedule.loop == "tiled":
                out_axis, in_axis = tile_axes(nest)
                staged = [built[nest.infos[i].var] for i in staged_inputs(nest)
                          if built[nest.infos[i].var] in epilogue_loads]
                return dict(tile_axes=(axes[out_axis], axes[in_axis]), staged=tuple(staged),
                            batch_axes=tuple(a for k, a in enumerate(axes) if k not in (out_axis, in_axis)))
            if schedule.loop == "inner_vector":
                return dict(inner_broadcast=tuple(info.var for i, info in enumerate(nest.infos)
                                                  if (info.pointer is not None or info.var.startswith("gx")
                                                      or info.is_iota)
                                                  and nest.axes[-1].strides[i] == 0))
            return {}

        return lower_loops(nest, schedule, name, template=self.template, launch=launch, flat=True, spec_fields=fields)


# ---- the heuristics' helpers -----------------------------------------------------------------------------------


def tile_axes(nest: LoopNest, min_extent: int = 2) -> tuple[int, int] | None:
    """A pointwise region whose arrays disagree on their fastest axis: (the axis the outputs are contiguous
    along, the axis the most input bytes are contiguous along instead), as collapsed-axis indices, both
    at least ``min_extent`` long; None when every array agrees (or nothing is contiguous)."""
    if nest.kind != POINTWISE or len(nest.axes) < 2:
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

def inner_vector_width(nest: LoopNest) -> int:
    """Elements per step of a pointwise loop over several axes with vectors along the innermost one: 16
    bytes of the widest array that moves along it, when every array moving there steps by one element
    (its other strides multiples of the width, its pointer aligned to it) and the others stay put (one
    scalar read per step, as a bias row or a per-row scale is); the innermost extent a multiple of the
    width. 1 when that does not hold (or the flat vector loop applies)."""
    if nest.kind != POINTWISE or nest.contiguous or not nest.axes:
        return 1
    width = VECTOR_BYTES // max((i.dtype.itemsize for i in nest.infos if i.pointer is not None), default=16)
    while width > 1 and inner_vector_misfit(nest, width) is not None:
        width //= 2
    return width

def inner_vector_misfit(nest: LoopNest, vec: int) -> str | None:
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

KIND = PointwiseKind()

__all__ = ["KIND", "TILE_EDGE", "TILE_MIN_EXTENT", "PointwiseKind", "PointwiseSchedule", "inner_vector_misfit",
           "inner_vector_width", "staged_inputs", "tile_axes", "tile_bytes"]
