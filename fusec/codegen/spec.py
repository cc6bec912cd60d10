"""The plain data of one kernel: the :class:`KernelSpec` that :mod:`fusec.kinds` lower from a
loop nest and a schedule, and that its kind's template (``templates/<template>``) renders.

Everything here is a frozen dataclass of strings, ints, nodes and the schedule; nothing computes but the
launch sizing (:class:`LaunchPolicy`). Body lines are already decided C++ statements: the templates place
them, they never look inside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fusec.ir.graph import Node
from fusec.schedule.base import Schedule
from fusec.schedule.contract import LaunchContract

MAX_GRID = 65535  # upper bound on any grid (grid-stride loops cover the rest)
WORKSPACE_HEADER = 128  # arrival counter + barrier generation (+ a split cols kernel's tile counters), then partials


# ---- the spec --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its name, C++ type, and role (``input``, ``output``, ``workspace``, ``scalar``)."""

    name: str
    ctype: str
    role: str

    @property
    def decl(self) -> str:
        if self.role == "input":
            return f"const {self.ctype}* __restrict__ {self.name}"
        if self.role in ("output", "workspace"):
            return f"{self.ctype}* __restrict__ {self.name}"
        return f"const {self.ctype} {self.name}"


@dataclass(frozen=True)
class Axis:
    """One collapsed region axis: its coordinate variable, its extent parameter, whether it is reduced."""

    coord: str
    extent: str
    reduced: bool


@dataclass(frozen=True)
class Access:
    """How the kernel reaches one array (or one argmax/argmin position) from region coordinates.

    ``var`` names the loaded value (``ld<k>``), the stored array's access (``st<k>``) or the position
    (``ix<k>``); the template names the offsets ``<var>_kb`` (kept part, once per row) and ``<var>_off``.
    ``kept``/``loop`` are the C++ expressions of the offset along the kept and the loop axes (None: 0).
    """

    var: str
    pointer: str | None  # in<k> / out<k>; None for an argmax/argmin position
    ctype: str
    kept: str | None
    loop: str | None
    itemsize: int = 0

    @property
    def uniform(self) -> bool:
        return self.kept is None and self.loop is None

    @property
    def is_index(self) -> bool:
        return self.pointer is None


@dataclass(frozen=True)
class Store:
    """``access.pointer[offset] = value``."""

    access: Access
    value: str


@dataclass(frozen=True)
class AccField:
    """One reduction's accumulator inside a phase's accumulator struct."""

    name: str
    ctype: str
    identity: str
    combine: str  # C++ expression combining ``a.<name>`` and ``b.<name>``
    bound: int  # bytes it takes at most (the workspace holds a block's partials in that many per field)


@dataclass(frozen=True)
class Phase:
    """One pass over the row: the full nodes its reductions consume, folded into ``acc<index>``.

    ``finish`` runs once per row after the partials are combined: it names the reduced values and
    computes the per-row nodes that depend on them (the next phase's inputs). A max (min) of the same
    operand as an argmax (argmin) of the phase takes no field of its own: it reads the pair's value.
    """

    index: int
    acc_type: str
    align: int  # of the accumulator struct: 8 when a field needs it, else 4 (shuffled as 32-bit words)
    fields: tuple[AccField, ...]
    loads: tuple[Access, ...]
    body: tuple[str, ...]
    update: tuple[str, ...]  # fold one element into the thread's partial (which may be the identity)
    finish: tuple[str, ...]
    update_first: tuple[str, ...] = ()  # ... where the partial is the identity (the thread's first element)
    update_held: tuple[str, ...] = ()  # ... where the partial already holds one of the thread's elements
    # rows in registers, where ``body`` divides by a per-row divisor with fc::div_invariant (which clears
    # ``fast<index>`` for operands out of its range): the loop runs in two passes, the second (compiled with
    # IEEE division, ``EXACT_PASS`` 1) only where the first cleared the flag
    two_pass: bool = False


@dataclass(frozen=True)
class ScanStep:
    """One member of a scan kernel (``templates/scan_rows.cu.j2``), in member order, per element.

    Elementwise (``scan`` False): ``lines`` compute ``var`` (of ``ctype``) from the values before it. A scan
    (``scan`` True): an accumulator of ``acc_ctype`` starting at ``identity``; ``combine`` is the body of the
    kernel's ``op<index>(a, b)``, ``lift`` the element folded in (an expression of the operand, after ``lines``),
    ``result`` the accumulator ``x`` as the node's value. In the ``rows`` mapping values live in arrays
    ``<var>_a[j]`` over a thread's elements, and ``lines`` start by taking element j of those the step reads; in
    ``sequential``, in scalars."""

    index: int
    var: str
    ctype: str
    lines: tuple[str, ...] = ()
    scan: bool = False
    acc_ctype: str = ""
    identity: str = ""
    combine: str = ""
    lift: str = ""
    result: str = ""


@dataclass(frozen=True)
class LaunchPolicy:
    """How the runtime sizes the launch: ``work`` units, ``per_block`` of them per block and grid-stride
    step. A ``persistent`` grid is capped at the resident capacity (SMs x blocks per SM), each block looping
    over many units: reduce-all (every block adds a partial that the last one combines) and cols. The
    others launch a block per ``per_block`` units, up to :data:`MAX_GRID` (measured on the H200: gelu,
    layernorm and the router 7-10% faster than with the grid capped at the resident capacity).
    ``cooperative`` kernels wait on a grid barrier, so their grid must never exceed that capacity.
    ``min_blocks`` is 1 where an empty iteration space still has outputs to write (reduce-all of nothing);
    0 launches nothing.

    ``split_limit`` > 1 (cols split across blocks): each block's unit (a tile of kept indices) may take up
    to that many blocks, each folding a part of the reduced extent: the grid is then exactly ``blocks x
    per_tile`` (the kernel reads ``per_tile`` back as ``gridDim.x / tiles``), with ``per_tile`` as many as
    fill the device when the units alone fill at most half of it (``split_fixed``: as many as forced), or
    at most ``blocks`` when it would be 1."""

    block: tuple[int, int]
    work: int
    per_block: int
    min_blocks: int = 0
    persistent: bool = False
    cooperative: bool = False
    partial_bytes: tuple[int, ...] = ()  # per phase, an upper bound on one block's partial
    min_resident: int = 2  # the kernel's second launch bound: blocks per SM ptxas plans for
    split_limit: int = 1
    split_fixed: int = 0

    @property
    def blocks(self) -> int:
        """Blocks the work asks for: one per ``per_block`` units (at least ``min_blocks``)."""
        return max(-(-self.work // self.per_block) if self.work > 0 else 0, self.min_blocks)

    def per_tile(self, capacity: int) -> int:
        """Blocks per unit of a split launch on a device that keeps ``capacity`` blocks resident (1: no split)."""
        units = self.blocks
        if self.split_limit <= 1 or units == 0:
            return 1
        if not self.split_fixed and 2 * units > capacity:
            return 1  # the tiles alone keep the device busy
        per_tile = min(self.split_fixed or max(1, capacity // units), self.split_limit, MAX_GRID // units)
        if self.cooperative:
            per_tile = min(per_tile, capacity // units)
        return max(1, per_tile)

    def grid(self, capacity: int) -> int:
        """Blocks to launch on a device that keeps ``capacity`` of these blocks resident (0: skip)."""
        blocks = self.blocks
        if blocks == 0:
            return 0
        per_tile = self.per_tile(capacity)
        if per_tile > 1:
            return blocks * per_tile
        return max(1, min(blocks, capacity if self.persistent else blocks, MAX_GRID))

    def describe(self) -> str:
        """The grid as far as it is known without a GPU, e.g. ``grid min(1024, SMs x resident blocks)``."""
        blocks = self.blocks
        if blocks == 0:
            return "nothing to launch (empty)"
        if self.split_limit > 1:
            how = f"{self.split_fixed} forced" if self.split_fixed else "as many as fill the device"
            return (f"grid {blocks} tile(s) x up to {min(self.split_limit, self.split_fixed or self.split_limit)} "
                    f"blocks each, splitting the reduced extent ({how}; none when the tiles fill it)")
        if self.persistent:
            return f"grid min({blocks}, SMs x resident blocks)"
        return f"grid {blocks}" if blocks <= MAX_GRID else f"grid {MAX_GRID} (grid-stride over {blocks})"

    def workspace_bytes(self, grid: int) -> int:
        """Bytes of the (zero-initialized, reusable) workspace a launch of ``grid`` blocks uses: none for one
        block, whose own combination is the result, nor for a split launch that did not split (the runtime
        passes a null pointer)."""
        if not self.partial_bytes or grid <= 1 or (self.split_limit > 1 and grid <= self.blocks):
            return 0
        return WORKSPACE_HEADER + sum(_round_up(grid * b, 128) for b in self.partial_bytes)


@dataclass(frozen=True)
class KernelSpec:
    """Everything the template of the kernel's kind needs; ``args`` and ``launch.work`` hold the sizes."""

    name: str
    kind: str  # the schedule's kind (its word in the schedule text)
    template: str  # the kind's Jinja template (templates/<template>) that renders the spec
    schedule: Schedule
    index_ctype: str  # int | long long
    contiguous: bool  # one flat loop index i addresses every array that varies along the loop
    vec: int  # elements per thread per vector step (1: scalar)
    params: tuple[Param, ...]
    args: tuple[Any, ...] = field(compare=False)  # values of the scalar params, in order (NumPy scalars)
    inputs: tuple[Node, ...]  # arrays bound to in0, in1, ...
    outputs: tuple[Node, ...]  # arrays bound to out0, out1, ...
    kept_axes: tuple[Axis, ...]
    loop_axes: tuple[Axis, ...]
    uniform_loads: tuple[Access, ...]
    row_loads: tuple[Access, ...]
    prologue: tuple[str, ...]
    phases: tuple[Phase, ...]
    epilogue_loads: tuple[Access, ...]
    epilogue_body: tuple[str, ...]
    epilogue_two_pass: bool  # as Phase.two_pass, for the epilogue (flag ``fast_epilogue``)
    epilogue_stores: tuple[Store, ...]
    row_stores: tuple[Store, ...]
    launch: LaunchPolicy = field(compare=False)
    # rows in registers: the loads held in registers (the arrays varying along the row, read once at offset
    # <var>_kb + i), and the values computed in one phase and kept for the later loops ((C++ type, variable);
    # the array is <variable>_h)
    held: tuple[Access, ...] = ()
    held_values: tuple[tuple[str, str], ...] = ()
    # rows in registers: the row length is exactly row_threads x elems, so no element is past its end and
    # the kernel checks none (a row length of the bucket's other sizes gets the checked kernel)
    full_rows: bool = False
    # rows in registers, one kernel for every row length of the bucket (``lengths=bucket``): whether a row's
    # start is aligned for the vector accesses is checked once per row when the kernel runs (row_vec), and a
    # misaligned row is read and written with scalar accesses into the same registers
    rows_aligned_at_run_time: bool = False
    # pointwise tiled: the two tiled axes (along the outputs' fastest axis, along the staged inputs'), the
    # other axes (unravelled per tile), and the loads read through a shared-memory tile
    tile_axes: tuple[Axis, ...] = ()
    batch_axes: tuple[Axis, ...] = ()
    staged: tuple[Access, ...] = ()
    # pointwise inner_vector: the loads that do not move along the innermost axis (one scalar per vector)
    inner_broadcast: tuple[str, ...] = ()
    # templates/ headers of device helpers beyond the common ones that the kernel needs
    # (cuda_ops.extra_headers for the ops it calls, one_pass.cuh for one-pass statistics)
    headers: tuple[str, ...] = ()
    # gathers: (code, the user's line) of each gather that writes its code into the error word (parameter
    # ``err``) for an index out of range; empty when the kernel has no gather
    error_sites: tuple[tuple[int, str], ...] = ()
    gathered: tuple[str, ...] = ()  # the array parameters gathers read (at computed positions, in body lines)
    # arrays read through a slice: (C++ type, the access's pointer, the array's pointer, the offset parameter),
    # declared at the kernel's start as ``const T* __restrict__ in0_ld3 = in0 + ld3_o;``
    view_pointers: tuple[tuple[str, str, str, str], ...] = ()
    # scan kernels: every member, per element, in order (the outputs are epilogue_stores); the accesses that
    # step by one element along the row, with their vector width (rows mapping: a thread's elements moved in
    # vectors where the row is aligned and the chunk full, checked when the kernel runs)
    scan_steps: tuple[ScanStep, ...] = ()
    scan_vectors: tuple[tuple[str, int], ...] = ()
    # what the kernel needs of its array arguments at launch (alignment of each pointer its vector accesses
    # read or write, the strides and shapes its index arithmetic was generated for, the index width):
    # :func:`fusec.kinds.generate` states it, the source names it, the runtime checks it at every launch
    contract: LaunchContract | None = None

    @property
    def block(self) -> tuple[int, int]:
        return self.launch.block

    @property
    def row_threads(self) -> int:
        """Rows in registers: threads per row (0 for other schedules)."""
        return getattr(self.schedule, "row_threads", 0) if getattr(self.schedule, "in_registers", False) else 0

    @property
    def elems(self) -> int:
        """Rows in registers: elements each thread holds (0 for other schedules)."""
        return getattr(self.schedule, "elems", 0) if getattr(self.schedule, "in_registers", False) else 0

    @property
    def scalar_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.role == "scalar")

    @property
    def kept_accesses(self) -> tuple[Access, ...]:
        """Accesses with a kept offset part (computed once per row)."""
        seen = {}
        for a in (*self.row_loads, *(s.access for s in self.row_stores), *self.epilogue_loads,
                  *(s.access for s in self.epilogue_stores), *(a for p in self.phases for a in p.loads)):
            if a.kept is not None:
                seen.setdefault(a.var, a)
        return tuple(seen.values())


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m
