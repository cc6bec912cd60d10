"""The scan kind: inclusive scans along one axis (``cumsum``, ``cumprod``) with their prologue and epilogue
(``templates/scan_rows.cu.j2``): the loop nest of a scan region, the heuristics of its :class:`ScanSchedule`, and
its lowering.

**The nest.** A scan region (:func:`fusec.ir.region.region_space` gives it a ``scan_axis``) computes every member
per element: the elementwise prologue, the scans along the scan axis, the epilogue on the scanned values. Its loop
nest (:class:`ScanNest`) is :class:`LoopNest`'s (arrays, accesses, strides, index width) with every member *full*
and the scan axis as the loop axis (the one axis a row walks), the other axes collapsed into the kept axes that
number the rows.

**The heuristic** (:meth:`ScanKind.defaults`): ``columns`` when the scan axis is not the one the arrays step along
by one element (a scan along an outer axis: a warp takes 32 neighbouring rows, coalesced, with several threads
along each row while the rows are too few to fill the device); a thread per row (``sequential``) for very short
rows; otherwise a warp per row for rows up to :data:`WARP_ROW_MAX` elements, a block beyond; rows fewer than the
device's SMs and at least :data:`SPLIT_MIN_LENGTH` long are split across blocks (``split``), unless a scan reads
another's result (then a block of :data:`BIG_BLOCK` threads per row).

**Lowering** (:meth:`ScanKind.lower`).:class:`KernelSpec` for ``templates/scan_rows.cu.j2``.

Every member is computed per element, in member order, as a :class:`ScanStep`: an elementwise member is its
line from the op table (:meth:`Lowering.line`, the same as every other kernel's), a scan is its reduction's
CUDA pieces (``cumsum`` folds like ``sum``, ``cumprod`` like ``prod``: :func:`fusec.codegen.cuda_ops.reduction`,
so float16 accumulates in float32 and integers wrap as NumPy's do). A float16 scan keeps its running value in
float32 in every schedule, ``sequential`` too, and rounds each prefix once to float16: NumPy's ``cumsum`` rounds
the running value to float16 at every step (it stagnates: 512 + 0.25 is 512, and it stays inf once it overflows),
which no parallel schedule can reproduce, and a schedule must not change a result beyond its rounding error (the
autotuner picks among them). Each prefix is thus the exact prefix within float32's error, rounded once
(``tests/reference.py`` is what the tests compare it with). The float sum starts from -0.0, the
identity that keeps a leading -0.0 (NumPy's first prefix is the first element itself). Accesses, offsets and
parameters are :func:`fusec.codegen.lower._access`'s: the scan axis is the loop axis, the others number the
rows. In the ``rows`` mapping every value is an array over a thread's ``elems`` elements (``<var>_a[j]``),
in ``sequential`` a scalar (``split`` is ``rows`` run twice over a segment of the row: its totals, then its
outputs from the totals of the segments before it, which the blocks exchange through the workspace); an array
that steps by one element along the row is read and written in vectors of up to 16 bytes where the thread's
elements lie aligned and inside the row (checked when the kernel runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from fusec.codegen import cuda_ops
from fusec.codegen.lower import Lowering, extents_and_accesses, kernel_label, size_params, slice_pointers
from fusec.codegen.spec import Axis, KernelSpec, LaunchPolicy, Param, ScanStep, Store
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import SCAN, Region
from fusec.kinds.kind import KernelKind, Refuse
from fusec.schedule.base import BLOCK, WARP, Schedule
from fusec.schedule.device import DeviceProperties
from fusec.schedule.layout import VECTOR_BYTES, ArrayLayout
from fusec.schedule.nest import LoopNest, declaration_order

SEQUENTIAL_ROW_MAX = 8  # contiguous rows this short take a thread each (a warp reads 32 neighbouring rows)
WARP_ROW_MAX = 1024  # contiguous rows up to this long take a warp each (8 rows per block), longer ones a block
ELEMS = 8  # elements per thread per chunk (4-byte values; 4 for 8-byte values)
BIG_BLOCK = 1024  # threads per row when the rows are fewer than the device's SMs (and cannot be split)
ELEMS_MAX = 16
COLUMN_THREADS = 8  # columns: threads along each row (8 x 32 = 256 per block) ...
COLUMN_FEW_ROWS = 256  # ... while the rows are fewer than this many per SM (then one thread per row suffices)
SPLIT_MIN_LENGTH = 1 << 15  # rows at least this long, fewer than the device's SMs, are split across blocks
SCAN_HEADER = "scan.cuh"
_SCAN_AS_REDUCTION = {"add": "sum", "mul": "prod", "maximum": "max", "minimum": "min"}


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

    kind: ClassVar[str] = SCAN
    variant_field: ClassVar[str] = "mapping"
    variants: ClassVar[tuple[str, ...]] = ("rows", "sequential", "split", "columns")
    keys: ClassVar[dict[str, str]] = {"threads": "row_threads", "elems": "elems"}
    mapping: str = "rows"
    row_threads: int = BLOCK
    elems: int = 4


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


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


class ScanKind(KernelKind):
    name = SCAN
    schedule_type = ScanSchedule
    template = "scan_rows.cu.j2"
    runs = (SCAN,)

    def nest(self, region: Region, layouts: Mapping[Node, ArrayLayout]) -> ScanNest:
        return ScanNest(region, layouts)

    def defaults(self, nest: ScanNest, device: DeviceProperties, variant: str | None) -> ScanSchedule:  # type: ignore[override]
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

    def check(self, nest: ScanNest, schedule: ScanSchedule, device: DeviceProperties,  # type: ignore[override]
              refuse: Refuse) -> None:
        """Refuse ``schedule`` where it cannot run ``nest``'s region (a scan schedule has no vector accesses to
        align: a row moves in vectors only where its address is aligned, checked when the kernel runs)."""
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

    def proposals(self, nest: LoopNest, base: ScanSchedule) -> list[str]:
        """Threads per row and elements per thread halved and doubled; a thread per row or a warp per row."""
        out: list[str] = []
        if base.mapping == "rows":
            out += [f"scan:rows,threads={t},elems={base.elems}" for t in (base.row_threads // 2, base.row_threads * 2)]
            out += [f"scan:rows,threads={base.row_threads},elems={e}" for e in (base.elems // 2, base.elems * 2)]
        out.append("scan:rows" if base.mapping == "sequential" else "scan:sequential")
        return out

    def lower(self, nest: ScanNest, schedule: ScanSchedule, name: str | None = None) -> KernelSpec:  # type: ignore[override]
        """The :class:`KernelSpec` of ``nest``'s scan region under ``schedule`` (checked against it)."""
        """The :class:`KernelSpec` of ``nest``'s scan region under ``schedule`` (checked against it)."""
        lo = Lowering(nest, schedule)
        rows = schedule.mapping in ("rows", "split", "columns")
        region = nest.region
        index_ctype = nest.index_ctype
        index_np = np.int32 if index_ctype == "int" else np.int64
        axes = [Axis(f"c{k}", f"e{k}", k in nest.loop_idx) for k in range(len(nest.axes))]
        scalar_params: list[tuple[Param, Any]] = [(Param("nk", index_ctype, "scalar"), index_np(nest.n_kept)),
                                                  (Param("nr", index_ctype, "scalar"), index_np(nest.n_loop))]
        built = extents_and_accesses(lo, nest, axes, scalar_params)
        scalar_params.extend(size_params(nest))

        uniform, per_row, loop = nest.split(nest.epilogue_refs)
        loop_loads = tuple(built[a.var] for a in loop)
        # the values that vary along the row, and their C++ types: arrays over j in the rows mapping
        varying: dict[str, str] = {a.var: a.ctype for a in loop_loads}
        varying.update((nest.var[n], cuda_ops.ctype(n.dtype)) for n in nest.members if n in nest.var)

        def element(name_: str) -> str:
            return f"{name_}_a[j]" if rows and name_ in varying else name_

        def element_reads(n: Node) -> list[str]:
            """In the rows mapping, the lines taking element j of every varying value ``n``'s expression names: its
            operands' variables and the accesses it reads (an iota's value is an expression of its access's offset,
            which the kernel holds in ``<access>_a``)."""
            if not rows:
                return []
            refs: set[str] = set()
            nest.operand_refs(n, refs)
            names = sorted(refs, key=declaration_order)
            for o in n.operands:
                while o in nest.inside and o.kind is Kind.LAYOUT:
                    o = o.operands[0]
                if o in nest.var:
                    names.append(nest.var[o])
            return [f"const {varying[v]} {v} = {v}_a[j];" for v in dict.fromkeys(names) if v in varying]

        steps = []
        for n in nest.members:
            if n.kind is Kind.LAYOUT:
                continue  # index arithmetic: its readers read through it (Lowering.value)
            var = nest.var[n]
            if n.kind is Kind.SCAN:
                k = len([s for s in steps if s.scan])
                red = scan_pieces(n)
                identity = scan_identity(n, red)
                result = red.result(f"op{k}(pre{k}, {var}_p[j])" if rows else f"carry{k}")
                steps.append(ScanStep(k, var, cuda_ops.ctype(n.dtype), tuple(element_reads(n)), True, red.acc_ctype,
                                      identity, red.combine("a", "b"), red.lift(lo.value(n.operands[0], n)), result))
                continue
            lines = element_reads(n)
            lines.append(lo.line(n))
            if rows:
                lines.append(f"{var}_a[j] = {var};")
            steps.append(ScanStep(len(steps), var, cuda_ops.ctype(n.dtype), tuple(lines)))

        vectors: list[tuple[str, int]] = []
        if rows and nest.loop_idx:
            k = nest.loop_idx[0]
            for i, info in enumerate(nest.infos):
                if info.pointer is not None and nest.axes[k].strides[i] == 1 and info.dtype is not None:
                    width = vector_width(schedule.elems, info.dtype.itemsize)
                    if width > 1:
                        vectors.append((info.var, width))
        stores = tuple(Store(built[nest.store_access(n).var], element(lo.value(n, None))) for n in region.outputs)
        params = [Param(nest.pointer[n], cuda_ops.ctype(n.dtype), "input") for n in nest.array_inputs]
        params += [Param(nest.out_pointer[n], cuda_ops.ctype(n.dtype), "output") for n in region.outputs]
        if schedule.workspace:
            params.append(Param("ws", "unsigned char", "workspace"))
        params += [p for p, _ in scalar_params]
        view_pointers = slice_pointers(nest, built)
        launch = LaunchPolicy(schedule.block, nest.n_rows, schedule.rows_per_block, min_resident=schedule.min_resident)
        if schedule.mapping == "split":  # a row's segments across blocks: as many as fill the device, each a chunk
            chunk = schedule.row_threads * schedule.elems
            launch = replace(launch, persistent=True, cooperative=True,
                             partial_bytes=tuple(scan_pieces(n).acc_dtype.itemsize for n in nest.members
                                                 if n.kind is Kind.SCAN),
                             split_limit=max(1, -(-nest.n_loop // chunk)))
        return KernelSpec(
            name=kernel_label(region, SCAN, name), kind=SCAN, template=self.template, schedule=schedule,
        index_ctype=index_ctype,
            contiguous=lo.contiguous, vec=1, params=tuple(params), args=tuple(v for _, v in scalar_params),
            inputs=tuple(nest.array_inputs), outputs=tuple(region.outputs),
            kept_axes=tuple(axes[k] for k in nest.kept_idx), loop_axes=tuple(axes[k] for k in nest.loop_idx),
            uniform_loads=tuple(sorted((built[a.var] for a in uniform), key=lambda a: declaration_order(a.var))),
            row_loads=tuple(sorted((built[a.var] for a in per_row), key=lambda a: declaration_order(a.var))),
            prologue=(), phases=(), epilogue_loads=loop_loads, epilogue_body=(), epilogue_two_pass=False,
            epilogue_stores=stores, row_stores=(), launch=launch, view_pointers=view_pointers,
            headers=cuda_ops.value_headers(nest.members) + cuda_ops.extra_headers(n.op for n in nest.members) + (
                SCAN_HEADER,) + (
                (cuda_ops.INDEX_HEADER,) if nest.reads_index_views else ()),
            scan_steps=tuple(steps),
            scan_vectors=tuple(vectors),
        )


def scan_pieces(node: Node) -> cuda_ops.CudaReduction:
    """The CUDA accumulator of scan ``node``: that of the reduction combining as it does."""
    combine = node.opdef.combine
    assert combine is not None, node.op
    return cuda_ops.reduction(_SCAN_AS_REDUCTION[combine], node.dtype)


def scan_identity(node: Node, red: cuda_ops.CudaReduction) -> str:
    """The prefix before the first element: the reduction's identity, -0.0 for a float sum."""
    if red.op == "sum" and red.acc_dtype.kind == "f":
        return cuda_ops.literal(-0.0, red.acc_dtype)
    return red.identity


def vector_width(elems: int, itemsize: int) -> int:
    """Elements per vector access of a thread's ``elems`` consecutive elements of ``itemsize`` bytes: the most that
    fit 16 bytes and divide ``elems`` (1: scalar accesses)."""
    width = 1
    while width * 2 * itemsize <= VECTOR_BYTES and elems % (width * 2) == 0:
        width *= 2
    return width


KIND = ScanKind()

__all__ = ["KIND", "SCAN_HEADER", "ScanKind", "ScanNest", "ScanSchedule", "scan_identity", "scan_pieces",
           "vector_width"]
