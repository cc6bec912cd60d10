"""Lowering a scan region: a :class:`~fusec.schedule.scan.ScanNest` and its :class:`ScanSchedule` ->
:class:`KernelSpec` for ``templates/scan_rows.cu.j2``.

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

from dataclasses import replace
from typing import Any

import numpy as np

from fusec.codegen import cuda_ops
from fusec.codegen.lower import Lowering, extents_and_accesses, kernel_label, size_params, slice_pointers
from fusec.codegen.spec import Axis, KernelSpec, LaunchPolicy, Param, ScanStep, Store
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.schedule.kinds import ScanSchedule
from fusec.schedule.layout import VECTOR_BYTES
from fusec.schedule.nest import declaration_order
from fusec.schedule.scan import ScanNest

SCAN_HEADER = "scan.cuh"
_SCAN_AS_REDUCTION = {"add": "sum", "mul": "prod", "maximum": "max", "minimum": "min"}


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


def lower_scan(nest: ScanNest, schedule: ScanSchedule, name: str | None = None) -> KernelSpec:
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
    if schedule.mapping == "split":  # a row's segments across blocks: as many as fill the device, each a chunk or more
        chunk = schedule.row_threads * schedule.elems
        launch = replace(launch, persistent=True, cooperative=True,
                         partial_bytes=tuple(scan_pieces(n).acc_dtype.itemsize for n in nest.members
                                             if n.kind is Kind.SCAN),
                         split_limit=max(1, -(-nest.n_loop // chunk)))
    return KernelSpec(
        name=kernel_label(region, "scan", name), kind="scan", schedule=schedule, index_ctype=index_ctype,
        contiguous=lo.contiguous, vec=1, params=tuple(params), args=tuple(v for _, v in scalar_params),
        inputs=tuple(nest.array_inputs), outputs=tuple(region.outputs),
        kept_axes=tuple(axes[k] for k in nest.kept_idx), loop_axes=tuple(axes[k] for k in nest.loop_idx),
        uniform_loads=tuple(sorted((built[a.var] for a in uniform), key=lambda a: declaration_order(a.var))),
        row_loads=tuple(sorted((built[a.var] for a in per_row), key=lambda a: declaration_order(a.var))),
        prologue=(), phases=(), epilogue_loads=loop_loads, epilogue_body=(), epilogue_exact=(),
        epilogue_stores=stores, row_stores=(), launch=launch, view_pointers=view_pointers,
        headers=cuda_ops.extra_headers(n.op for n in nest.members) + (SCAN_HEADER,) + (
            (cuda_ops.INDEX_HEADER,) if nest.reads_index_views else ()),
        scan_steps=tuple(steps),
        scan_vectors=tuple(vectors),
    )


def vector_width(elems: int, itemsize: int) -> int:
    """Elements per vector access of a thread's ``elems`` consecutive elements of ``itemsize`` bytes: the most that
    fit 16 bytes and divide ``elems`` (1: scalar accesses)."""
    width = 1
    while width * 2 * itemsize <= VECTOR_BYTES and elems % (width * 2) == 0:
        width *= 2
    return width


__all__ = ["SCAN_HEADER", "lower_scan", "scan_identity", "scan_pieces", "vector_width"]
