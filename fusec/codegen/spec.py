"""The plain data of one kernel: array layouts in, and the :class:`KernelSpec` that
:func:`fusec.codegen.plan.kernel_spec` builds and a template (``templates/<kind>.cu.j2``) renders.

Everything here is a frozen dataclass of strings, ints and nodes; nothing computes. The constants say how
the schedules are sized (threads per block, the row length from which rows get a block each, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fusec.ir.graph import Node

# int32 index math while every extent and offset is below this: the 2**24 margin keeps grid-stride
# increments (at most MAX_GRID * BLOCK * 16 elements past a bound below the limit) from overflowing.
INT32_LIMIT = 2**31 - 2**24
BLOCK = 256  # threads per block of every schedule (cols: COLS_TILE x COLS_SPLIT)
WARP = 32
ROW_BLOCK_MIN = 1024  # rows with at least this many elements get a block each, shorter ones a warp
ROW_REGS = True  # rows held in registers (schedules warp_regs / block_regs) where ROW_REGS_TABLE allows

# Register-resident rows: by the widest itemsize of the arrays held (1, 2 and 4 bytes share one column),
# the buckets (longest row, threads per row, elements per thread). A row of length n takes the first bucket
# with n <= longest row; the threads and elements per thread are compile-time constants of the kernel, so
# every row length of one bucket shares a kernel. Threads per row below 256 are (sub-)warps: 256 / threads
# rows per block, all phases by shuffles; 256 and up are one block per row. At most 32 elements (16 for
# 8-byte values) per thread: the held values plus the row's working set stay within the 64..128 registers
# that __launch_bounds__(threads, MIN_RESIDENT) allows. Longer rows (and rows that are not contiguous)
# keep the re-reading schedules warp/block.
ROW_REGS_TABLE: dict[int, tuple[tuple[int, int, int], ...]] = {
    4: ((32, 8, 4), (64, 4, 16), (128, 16, 8), (256, 32, 8), (512, 32, 16), (1024, 32, 32),
        (2048, 256, 8), (4096, 256, 16), (8192, 256, 32), (16384, 512, 32)),
    8: ((16, 8, 2), (32, 8, 4), (64, 8, 8), (128, 16, 8), (256, 32, 8), (512, 32, 16),
        (1024, 256, 4), (2048, 256, 8), (4096, 256, 16), (8192, 512, 16)),
}
COLS_TILE = 32  # cols: kept indices per block (threadIdx.x, coalesced)
COLS_SPLIT = 8  # cols: threads splitting the reduced extent of one kept index (threadIdx.y)
HOLD_MIN_COST = 2  # rows in registers: an element value of at least this op cost (exp, div, ...) that a later
# phase or the epilogue needs again is kept in registers (<var>_h) rather than recomputed there
HOLD_MAX_VALUES = 64  # ... while the row's loads and the kept values take at most this many 4-byte registers
MIN_RESIDENT = 2  # __launch_bounds__(threads, 2): up to 128 registers per thread
MAX_GRID = 65535  # upper bound on any grid (grid-stride loops cover the rest)
VECTOR_BYTES = 16  # vectorized loads/stores move this many bytes per array per thread
WORKSPACE_HEADER = 128  # reduce-all workspace: arrival counter + barrier generation, then partials
ACC_FIELD_BOUND = 16  # bytes any accumulator field takes at most (argmax pairs: value + long long)


# ---- inputs ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArrayLayout:
    """How one array lies in memory: ``strides`` in elements per its own axes (negative and zero allowed;
    the element offset is already in the pointer), whether it is C-contiguous, and the pointer's alignment
    in bytes (a power of two, at most 16)."""

    strides: tuple[int, ...]
    contiguous: bool = True
    align: int = VECTOR_BYTES

    @staticmethod
    def c_contiguous(shape: Sequence[int]) -> ArrayLayout:
        """A fresh C-contiguous, 16-byte aligned array of ``shape``."""
        strides, step = [], 1
        for d in reversed(tuple(shape)):
            strides.append(step)
            step *= max(int(d), 1)
        return ArrayLayout(tuple(reversed(strides)), True, VECTOR_BYTES)

    @staticmethod
    def of(array: Any) -> ArrayLayout:
        """The layout of a NumPy or CuPy array."""
        itemsize = array.dtype.itemsize
        if any(s % itemsize for s in array.strides):
            raise ValueError(f"strides {array.strides} are not multiples of the itemsize {itemsize}")
        ptr = array.data.ptr if hasattr(array, "__cuda_array_interface__") else array.ctypes.data
        return ArrayLayout(tuple(s // itemsize for s in array.strides), bool(array.flags.c_contiguous),
                           alignment(ptr))


def alignment(ptr: int) -> int:
    """The largest power of two up to 16 that divides ``ptr``."""
    align = VECTOR_BYTES
    while align > 1 and ptr % align:
        align //= 2
    return align


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
    # ``fast<index>`` for operands out of its range): the body again with IEEE division, for the loop's rerun
    body_exact: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchPolicy:
    """How the runtime sizes the launch: ``work`` units, ``per_block`` of them per block and grid-stride
    step. A ``persistent`` grid is capped at the resident capacity (SMs x blocks per SM), each block looping
    over many units: reduce-all (every block adds a partial that the last one combines) and cols. The
    others launch a block per ``per_block`` units, up to :data:`MAX_GRID` (measured on the H200: gelu,
    layernorm and the router 7-10% faster than with the grid capped at the resident capacity).
    ``cooperative`` kernels wait on a grid barrier, so their grid must never exceed that capacity.
    ``min_blocks`` is 1 where an empty iteration space still has outputs to write (reduce-all of nothing);
    0 launches nothing."""

    block: tuple[int, int]
    work: int
    per_block: int
    min_blocks: int = 0
    persistent: bool = False
    cooperative: bool = False
    partial_bytes: tuple[int, ...] = ()  # reduce-all: per phase, an upper bound on one block's partial
    min_resident: int = MIN_RESIDENT  # the kernel's second launch bound: blocks per SM ptxas plans for

    @property
    def blocks(self) -> int:
        """Blocks the work asks for: one per ``per_block`` units (at least ``min_blocks``)."""
        return max(-(-self.work // self.per_block) if self.work > 0 else 0, self.min_blocks)

    def grid(self, capacity: int) -> int:
        """Blocks to launch on a device that keeps ``capacity`` of these blocks resident (0: skip)."""
        blocks = self.blocks
        if blocks == 0:
            return 0
        return max(1, min(blocks, capacity if self.persistent else blocks, MAX_GRID))

    def describe(self) -> str:
        """The grid as far as it is known without a GPU, e.g. ``grid min(1024, SMs x resident blocks)``."""
        blocks = self.blocks
        if blocks == 0:
            return "nothing to launch (empty)"
        if self.persistent:
            return f"grid min({blocks}, SMs x resident blocks)"
        return f"grid {blocks}" if blocks <= MAX_GRID else f"grid {MAX_GRID} (grid-stride over {blocks})"

    def workspace_bytes(self, grid: int) -> int:
        """Bytes of the (zero-initialized, reusable) workspace a launch of ``grid`` blocks uses: none for one
        block, whose own combination is the result (the runtime passes a null pointer)."""
        if not self.partial_bytes or grid <= 1:
            return 0
        return WORKSPACE_HEADER + sum(_round_up(grid * b, 128) for b in self.partial_bytes)


@dataclass(frozen=True)
class KernelSpec:
    """Everything the template of ``kind`` needs; ``args`` and ``launch.work`` hold the sizes."""

    name: str
    kind: str  # pointwise | reduce-all | rows | cols
    schedule: str  # contiguous | vector | strided | warp | block | warp_regs | block_regs | tiles | last_block
    # | grid_barrier
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
    epilogue_exact: tuple[str, ...]  # as Phase.body_exact, for the epilogue (flag ``fast_epilogue``)
    epilogue_stores: tuple[Store, ...]
    row_stores: tuple[Store, ...]
    launch: LaunchPolicy = field(compare=False)
    # warp_regs / block_regs: threads per row, elements each thread holds (compile-time constants), and the
    # loads held in registers (the arrays varying along the row, read once at offset <var>_kb + i)
    row_threads: int = 0
    elems: int = 0
    held: tuple[Access, ...] = ()
    # warp_regs / block_regs: values computed in one phase and kept in registers for the later phases and
    # the epilogue instead of being computed again ((C++ type, variable); the array is <variable>_h)
    held_values: tuple[tuple[str, str], ...] = ()
    # warp_regs / block_regs: the row length is exactly row_threads x elems, so no element is past its end
    # and the kernel checks none (a row length of the bucket's other sizes gets the checked kernel)
    full_rows: bool = False

    @property
    def block(self) -> tuple[int, int]:
        return self.launch.block

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
