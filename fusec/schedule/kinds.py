"""Schedules: how one region runs on the GPU, as plain, frozen, hashable data, one class per kernel kind.

A schedule says everything about a kernel's shape on the GPU that is a choice rather than a fact of the
region: the block shape, the elements each thread handles and its vector width, what is held in
registers and what is recomputed, the grid policy and the workspace it needs. Heuristics
(:mod:`fusec.schedule.heuristics`) pick one; a user or a test may force one; lowering
(:mod:`fusec.codegen.lower`) reads it and nothing else to decide the kernel's shape.

Every schedule prints as one line that parses back (``explain`` shows it, ``--schedule`` takes it)::

    pointwise:vector,vec=4
    pointwise:tiled,tile=32
    reduce-all:last_block,loop=vector,vec=4
    rows:block_regs,threads=256,elems=32,vec=4,hold=3+5,fast_division=1,lengths=bucket
    rows:warp
    cols:tiles,tile=32,split=8
    cols:grid_barrier,tile=32,split=8,blocks=0,one_pass=0
    cols:grid_barrier,tile=1,split=256,blocks=0
    scan:rows,threads=256,elems=8
    scan:sequential

A line may leave fields out (``rows:warp_regs``): :func:`fusec.schedule.heuristics.complete` fills them
in for the region at hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from fusec.support.errors import FusecValueError

BLOCK = 256  # threads per block of the one-dimensional schedules
WARP = 32
MIN_RESIDENT = 2  # __launch_bounds__(threads, 2): up to 128 registers per thread
LAST_BLOCK_TILES = 30  # a split cols last_block kernel has an arrival counter per tile in the workspace's head
SPLIT_MIN_ELEMS = 16  # cols split across blocks: each thread folds at least this many elements of its block's part


class ScheduleError(FusecValueError):
    """A schedule that does not parse, or does not fit the region it is forced on."""


@dataclass(frozen=True)
class Schedule:
    """What every kind's schedule has. Subclasses add their own fields."""

    kind: ClassVar[str]
    variants: ClassVar[tuple[str, ...]]
    # text key -> field name, for the fields a schedule line may set
    keys: ClassVar[dict[str, str]] = {}
    # optional flags (``one_pass``): None where they do not apply to the region, else on or off; the text
    # leaves them out where they are None or have the value the heuristics give them (:meth:`natural`)
    quiet: ClassVar[tuple[str, ...]] = ()

    @property
    def variant(self) -> str:
        raise NotImplementedError

    @property
    def block(self) -> tuple[int, int]:
        """Threads per block (x, y)."""
        return (BLOCK, 1)

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def min_resident(self) -> int:
        """The kernel's second launch bound: blocks per SM that ptxas plans registers for."""
        return MIN_RESIDENT

    @property
    def persistent(self) -> bool:
        """A grid capped at the resident capacity (SMs x resident blocks), each block looping over many
        units; else a block per unit of work, up to the largest grid."""
        return False

    @property
    def cooperative(self) -> bool:
        """The kernel waits at a grid barrier, so every block must be resident at once."""
        return False

    @property
    def workspace(self) -> bool:
        """The kernel takes a zeroed global workspace (block partials, arrival counters)."""
        return False

    def text(self) -> str:
        """The schedule as one line, every field written out, that :func:`parse_schedule` reads back into
        this very schedule."""
        return ",".join([f"{self.kind}:{self.variant}"]
                        + [f"{key}={_value_text(getattr(self, name))}" for key, name in self.keys.items()
                           if name not in self.quiet or getattr(self, name) not in (None, self.natural(name))])

    def __str__(self) -> str:
        return self.text()

    def _flag_text(self, name: str) -> str:
        """``,name=0`` or ``,name=1`` for an optional flag the text shows, else nothing."""
        value = getattr(self, name)
        return "" if value in (None, self.natural(name)) else f",{name}={int(value)}"

    def natural(self, name: str) -> bool:
        """The value the heuristics give optional flag ``name`` where it applies: ``one_pass`` is on unless the
        rows sit in registers, where a second pass reads registers (:func:`fusec.schedule.heuristics.one_pass_pays`)."""
        return not getattr(self, "in_registers", False)

    def scalar(self) -> Schedule:
        """This schedule's scalar variant: the same kernel shape reading and writing one element at a time, which
        asks nothing of its arrays' alignment (itself where it has no vector accesses). The runtime runs it where
        a launch's arrays do not meet the vector kernel's launch contract (:mod:`fusec.schedule.contract`)."""
        return self


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

    kind: ClassVar[str] = "pointwise"
    variants: ClassVar[tuple[str, ...]] = ("vector", "contiguous", "strided", "inner_vector", "tiled")
    keys: ClassVar[dict[str, str]] = {"vec": "vec", "tile": "tile"}
    loop: str = "strided"
    vec: int = 1
    tile: int = 32  # tiled: the tile's edge (the block is tile x 256 / tile threads)

    @property
    def variant(self) -> str:
        return self.loop

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
            return f"{self.kind}:tiled,tile={self.tile}" + (f",vec={self.vec}" if self.vec != 1 else "")
        return f"{self.kind}:{self.loop},vec={self.vec}"


@dataclass(frozen=True)
class ReduceAllSchedule(Schedule):
    """Everything reduces to scalars in one launch: each block folds a grid-stride slice (``loop`` and
    ``vec`` as for pointwise) into a partial in the workspace. ``finish``: ``last_block`` (the last block
    to arrive combines the partials; one phase, scalar outputs only) or ``grid_barrier`` (every block
    waits at a grid barrier and combines the partials in the same order, for several phases or outputs
    over the elements). The grid is the resident capacity at most. ``one_pass``: see :class:`RowSchedule`."""

    kind: ClassVar[str] = "reduce-all"
    variants: ClassVar[tuple[str, ...]] = ("last_block", "grid_barrier")
    keys: ClassVar[dict[str, str]] = {"loop": "loop", "vec": "vec", "one_pass": "one_pass"}
    quiet: ClassVar[tuple[str, ...]] = ("one_pass",)
    finish: str = "grid_barrier"
    loop: str = "strided"
    vec: int = 1
    one_pass: bool | None = None

    @property
    def variant(self) -> str:
        return self.finish

    @property
    def persistent(self) -> bool:
        return True

    @property
    def cooperative(self) -> bool:
        return self.finish == "grid_barrier"

    @property
    def workspace(self) -> bool:
        return True

    def scalar(self) -> Schedule:
        return replace(self, loop="contiguous", vec=1) if self.loop == "vector" else self


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

    kind: ClassVar[str] = "rows"
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
    def variant(self) -> str:
        return self.mapping

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

    kind: ClassVar[str] = "cols"
    variants: ClassVar[tuple[str, ...]] = ("tiles", "last_block", "grid_barrier")
    keys: ClassVar[dict[str, str]] = {"tile": "tile", "split": "split", "blocks": "blocks", "one_pass": "one_pass"}
    quiet: ClassVar[tuple[str, ...]] = ("one_pass",)
    finish: str = "tiles"
    tile: int = 32
    split: int = 8
    blocks: int = 0
    one_pass: bool | None = None

    @property
    def variant(self) -> str:
        return self.finish

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


@dataclass(frozen=True)
class ScanSchedule(Schedule):
    """Inclusive scans along one axis (``cumsum``, ``cumprod``) with their prologue and epilogue, a row (all
    the other axes) at a time. ``mapping``:

    - ``rows``: ``threads`` threads per row (a warp, or whole warps up to a block; 256 / ``threads`` rows per
      block when fewer than 256), walking the row in chunks of ``threads`` x ``elems`` elements: each thread
      scans ``elems`` consecutive elements in registers, the row's threads exchange their totals (warp
      shuffles, then shared memory across warps), and a running carry joins the chunks;
    - ``sequential``: a thread per row scanning it element by element, 256 rows per block: for scans along an
      outer axis, where the threads of a warp read neighbouring rows (coalesced), and for very short rows;
    - ``columns``: for scans along an outer axis (the rows' neighbours in memory are other rows): 32 rows per
      block along the warp (coalesced), ``threads`` threads along each row (1..32), each scanning ``elems``
      consecutive elements per chunk, their totals exchanged through shared memory;
    - ``split``: as ``rows`` with a block per row, each row split across as many blocks as fill the device
      (chosen at launch): each block folds its segment's totals, the grid waits at a barrier, and each block
      scans its segment again from the totals of the segments before it (reduce, then scan: the data is read
      twice). For rows that are few and long; not where a scan reads another scan's result.

    Floats combine in a tree within a chunk (not NumPy's left-to-right order): CORRECTNESS.md's reduction
    tolerance; float16 accumulates in float32."""

    kind: ClassVar[str] = "scan"
    variants: ClassVar[tuple[str, ...]] = ("rows", "sequential", "split", "columns")
    keys: ClassVar[dict[str, str]] = {"threads": "row_threads", "elems": "elems"}
    mapping: str = "rows"
    row_threads: int = BLOCK
    elems: int = 4

    @property
    def variant(self) -> str:
        return self.mapping

    @property
    def rows_per_block(self) -> int:
        if self.mapping == "split":
            return 1
        if self.mapping == "columns":
            return WARP
        return max(1, BLOCK // self.row_threads) if self.mapping == "rows" else BLOCK

    @property
    def block(self) -> tuple[int, int]:
        if self.mapping == "columns":
            return (WARP, self.row_threads)
        return (self.row_threads, self.rows_per_block) if self.mapping != "sequential" else (BLOCK, 1)

    @property
    def persistent(self) -> bool:
        return self.mapping == "split"

    @property
    def cooperative(self) -> bool:
        return self.mapping == "split"

    @property
    def workspace(self) -> bool:
        return self.mapping == "split"

    @property
    def min_resident(self) -> int:
        return max(1, 512 // self.threads)

    def text(self) -> str:
        if self.mapping == "sequential":
            return f"{self.kind}:sequential"
        return super().text()


SCHEDULE_KINDS: dict[str, type[Schedule]] = {
    cls.kind: cls for cls in (PointwiseSchedule, ReduceAllSchedule, RowSchedule, ColSchedule, ScanSchedule)
}
_VARIANT_FIELD = {"pointwise": "loop", "reduce-all": "finish", "rows": "mapping", "cols": "finish", "scan": "mapping"}


@dataclass(frozen=True)
class ScheduleRequest:
    """A schedule as a user writes it: the kind, the variant, and the fields given (the rest are the
    heuristics' for the region). ``str()`` is the text it was parsed from, normalized."""

    kind: str
    variant: str
    given: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        names = {v: k for k, v in SCHEDULE_KINDS[self.kind].keys.items()}
        return ",".join([f"{self.kind}:{self.variant}"] + [f"{names[n]}={_value_text(v)}" for n, v in self.given])

    def build(self, defaults: Mapping[str, Any] = ()) -> Schedule:
        """The schedule: ``defaults`` (field values from the heuristics) overridden by the fields given."""
        cls = SCHEDULE_KINDS[self.kind]
        values = {f.name: v for f in fields(cls) if (v := dict(defaults).get(f.name)) is not None}
        variant_field = _VARIANT_FIELD[self.kind]
        if variant_field is not None:
            values[variant_field] = self.variant
        values.update(self.given)
        return cls(**values)


def parse_schedule(text: str) -> ScheduleRequest:
    """``rows:block_regs,threads=256,elems=32`` -> a :class:`ScheduleRequest` (raises :class:`ScheduleError`
    naming what is wrong)."""
    head, _, rest = text.strip().partition(",")
    kind, sep, variant = head.partition(":")
    kind, variant = kind.strip(), variant.strip()
    cls = SCHEDULE_KINDS.get(kind)
    if cls is None or not sep:
        raise ScheduleError(f"schedule {text!r}: expected KIND:VARIANT[,KEY=VALUE...] with KIND one of "
                            f"{', '.join(SCHEDULE_KINDS)}")
    if variant not in cls.variants:
        raise ScheduleError(f"schedule {text!r}: {kind} schedules are {', '.join(cls.variants)}, not {variant!r}")
    given: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in cls.keys:
            known = ", ".join(cls.keys) or "none"
            raise ScheduleError(f"schedule {text!r}: {item!r} is not KEY=VALUE with a {kind} key ({known})")
        name = cls.keys[key]
        default = next(f.default for f in fields(cls) if f.name == name)
        try:
            if isinstance(default, bool) or name in cls.quiet:
                if value.strip() not in ("0", "1", "true", "false"):
                    raise ValueError(value)
                given[name] = value.strip() in ("1", "true")
            elif isinstance(default, int):
                given[name] = int(value)
            elif isinstance(default, str):
                given[name] = value.strip()
            elif value.strip() == "none":  # a tuple of member indices, empty
                given[name] = ()
            else:  # a tuple of member indices
                given[name] = tuple(sorted({int(v) for v in value.split("+")}))
        except ValueError:
            raise ScheduleError(f"schedule {text!r}: {key}={value!r} is not a valid value") from None
    return ScheduleRequest(kind, variant, tuple(given.items()))


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, tuple):
        return "+".join(map(str, value)) if value else "none"
    return str(value)


# a schedule forced on a kernel, as a caller gives it: a whole Schedule, a request (fields left out), or its text
ForcedSchedule = Schedule | ScheduleRequest | str


def as_forced(schedule: ForcedSchedule) -> Schedule | ScheduleRequest:
    """A forced schedule as given: a whole :class:`Schedule`, or a request (its text parsed)."""
    if isinstance(schedule, (Schedule, ScheduleRequest)):
        return schedule
    if isinstance(schedule, str):
        return parse_schedule(schedule)
    raise ScheduleError(f"a schedule is a Schedule or its text (such as 'rows:warp'), not {type(schedule).__name__}")
