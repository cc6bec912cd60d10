"""A fusion region -> :class:`KernelSpec`: the plain data one kernel template turns into CUDA source.

``kernel_spec(region, space, layouts, name)`` works in six steps:

1. **Arrays.** The region's array inputs (graph inputs and intermediates materialized by earlier
   kernels) become ``in<k>`` pointer parameters and its outputs ``out<k>``; ``const`` inputs become
   literals and ``size`` inputs scalar parameters whose value is computed here, on the host.
2. **Accesses.** Every (array, axis map) pair that a member reads, every output and every
   argmax/argmin position is an *access*: for each region axis, how many elements one step along it
   moves in that array (its strides through the map; 0 where it is broadcast).
3. **Collapse.** Size-1 region axes are dropped; adjacent axes of the same class (kept or reduced)
   merge when every access steps through them contiguously (``stride[a] == stride[a+1] * extent[a+1]``).
4. **Index width.** ``int`` when every extent and every access's largest offset stays below
   :data:`INT32_LIMIT`, else ``long long``.
5. **Schedule.** The variant of the kind's template: pointwise ``contiguous``/``vector``/``strided``;
   rows ``warp_regs`` / ``block_regs`` (a (sub-)warp or a block per row, the row read once into registers:
   when the row is one contiguous axis and short enough, see :data:`ROW_REGS_TABLE`), else ``warp`` (a
   warp per row) or ``block`` (a block per row), which re-read the row in every phase; cols ``tiles``;
   reduce-all ``last_block`` or ``grid_barrier``.
6. **Body.** Member nodes as C++ lines built from the op table's CUDA expressions
   (:mod:`fusec.codegen.cuda_ops`), placed in the scope that computes them: once per kernel (uniform
   loads), once per row (reduced values and what depends only on them), per element of each pass over
   the row (what a pass's reductions consume), and per element of the epilogue (full outputs). In rows
   held in registers, a float division by a per-row value takes ``fc::div_invariant`` (a reciprocal
   per row), and each loop that has one keeps an IEEE-division twin of its body (``body_exact``) that
   the kernel runs instead where an operand is outside that helper's checked range.

The rendered source depends only on the spec without its ``args`` (and without ``launch.work``):
dtypes, ranks, the region's structure, which accesses are contiguous, broadcast or aligned, and the
index width. Sizes, strides and ``size`` values are kernel parameters, so a new size of the same
signature reuses the compiled kernel.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.codegen import cuda_ops
from fusec.codegen.spec import (
    ACC_FIELD_BOUND,
    BLOCK,
    COLS_SPLIT,
    COLS_TILE,
    HOLD_MAX_VALUES,
    HOLD_MIN_COST,
    INT32_LIMIT,
    ROW_BLOCK_MIN,
    ROW_REGS,
    ROW_REGS_TABLE,
    VECTOR_BYTES,
    WARP,
    Access,
    AccField,
    ArrayLayout,
    Axis,
    KernelSpec,
    LaunchPolicy,
    Param,
    Phase,
    Store,
    alignment,
)
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import Region, RegionSpace, operand_map

__all__ = [
    "INT32_LIMIT", "AccField", "Access", "ArrayLayout", "Axis", "KernelSpec", "LaunchPolicy", "Param", "Phase",
    "Store", "alignment", "kernel_label", "kernel_spec",
]

_WIDE_CTYPES = ("double", "long long", "unsigned long long")

# ---- building ---------------------------------------------------------------------------------------------


def _is_array(node: Node) -> bool:
    """Whether a region input is an array in memory (constants and sizes are not)."""
    return node.op not in ("const", "size")


def kernel_label(region: Region, kind: str, name: str | None = None) -> str:
    """A readable C identifier saying what the kernel fuses: ``k0_rows_max_sub_exp_sum_div``."""
    ops = list(dict.fromkeys(n.op for n in region.nodes if n.kind is not Kind.LAYOUT))[:6]
    text = "_".join([name or region.name, kind.replace("-", "")] + ops)
    text = re.sub(r"[^0-9A-Za-z_]", "_", text)
    return text if re.match(r"[A-Za-z_]", text) else f"k_{text}"


@dataclass
class _AccessInfo:
    var: str
    node: Node  # the array (or, for a position, the reduction)
    pointer: str | None
    dtype: np.dtype | None
    vector: list[int]  # elements per step along each region axis


class _Builder:
    """Turns one region into a KernelSpec (see the module docstring for the steps)."""

    def __init__(self, region: Region, space: RegionSpace, layouts: Mapping[Node, ArrayLayout]):
        self.region, self.space, self.layouts = region, space, layouts
        self.members = [n for n in region.nodes if n.kind is not Kind.SOURCE]
        self.inside = set(self.members)
        self.kind = space.kind
        self.shape = tuple(space.shape)
        self.reduced = set(space.reduced)
        self.array_inputs = [n for n in region.inputs if _is_array(n)]
        self.pointer = {n: f"in{k}" for k, n in enumerate(self.array_inputs)}
        self.sizes = [n for n in region.inputs if n.op == "size"]
        self.size_param = {n: f"size{k}" for k, n in enumerate(self.sizes)}
        self.out_pointer = {n: f"out{k}" for k, n in enumerate(region.outputs)}
        self.accesses: dict[tuple, _AccessInfo] = {}
        self.counts = {"ld": 0, "st": 0, "ix": 0}
        self.var: dict[Node, str] = {}
        for k, n in enumerate(self.members):
            if n.kind is not Kind.LAYOUT:
                self.var[n] = f"v{k}"
        self.reductions = [n for n in self.members if n.kind is Kind.REDUCTION]
        self.red_cuda = {r: cuda_ops.reduction(r.op, r.operands[0].dtype) for r in self.reductions}

    # -- accesses ----------------------------------------------------------------------------------
    def _layout(self, node: Node) -> ArrayLayout:
        layout = self.layouts.get(node)
        if layout is None:
            layout = ArrayLayout.c_contiguous(node.shape)
        if len(layout.strides) != node.ndim:
            raise ValueError(f"layout of {node!r} has {len(layout.strides)} strides for {node.ndim} axes")
        return layout

    def _vector(self, strides: Sequence[int], amap: Sequence[int | None], shape: Sequence[int]) -> list[int]:
        vec = [0] * len(self.shape)
        for j, a in enumerate(amap):
            if a is None or shape[j] == 1:
                continue
            if self.shape[a] == 0:
                vec[a] = 1  # an empty axis: never stepped along, but never uniform either
            else:
                vec[a] += int(strides[j])
        return vec

    def _access(self, key: tuple, prefix: str, node: Node, pointer: str | None, dtype: np.dtype | None,
                vector: list[int]) -> _AccessInfo:
        info = self.accesses.get(key)
        if info is None:
            info = _AccessInfo(f"{prefix}{self.counts[prefix]}", node, pointer, dtype, vector)
            self.counts[prefix] += 1
            self.accesses[key] = info
        return info

    def load(self, node: Node, amap: tuple) -> _AccessInfo:
        layout = self._layout(node)
        return self._access(("ld", node, amap), "ld", node, self.pointer[node], node.dtype,
                            self._vector(layout.strides, amap, node.shape))

    def store(self, node: Node) -> _AccessInfo:
        layout = self._layout(node)
        return self._access(("st", node), "st", node, self.out_pointer[node], node.dtype,
                            self._vector(layout.strides, self.space.maps[node], node.shape))

    def position(self, r: Node) -> _AccessInfo:
        """The flat C-order index over the reduced axes of ``r``'s operand (argmax/argmin)."""
        x = r.operands[0]
        axes = tuple(r.attr("axes"))
        strides, step = [0] * x.ndim, 1
        for j in reversed(axes):
            strides[j] = step
            step *= x.shape[j]
        return self._access(("ix", r), "ix", r, None, None, self._vector(strides, self.space.reduce_maps[r], x.shape))

    # -- values --------------------------------------------------------------------------------------
    def value(self, node: Node, user: Node | None, refs: set | None = None) -> str:
        """The C++ expression of ``node`` as ``user`` reads it (``refs`` collects the accesses used)."""
        if node in self.inside:
            if node.kind is Kind.LAYOUT:
                return self.value(node.operands[0], node, refs)
            return self.var[node]
        if node.op == "const":
            return cuda_ops.literal(node.attr("value"), node.dtype)
        if node.op == "size":
            return self.size_param[node]
        assert user is not None
        info = self.load(node, operand_map(user, node, self.space))
        if refs is not None:
            refs.add(info.var)
        return info.var

    def full(self, node: Node) -> bool:
        return self.kind == "pointwise" or self.space.varies_along_reduction(node)

    def closure(self, roots: list[tuple[Node, Node | None]], refs: set) -> list[Node]:
        """The full members that computing ``roots`` needs in a loop (per-row values are available)."""
        need: set[Node] = set()
        stack = list(roots)
        while stack:
            node, user = stack.pop()
            if node in self.inside:
                if node.kind is Kind.LAYOUT:
                    stack.append((node.operands[0], node))
                    continue
                if node.kind is Kind.REDUCTION or not self.full(node) or node in need:
                    continue
                need.add(node)
                stack.extend((o, node) for o in node.operands)
            elif _is_array(node):
                self.value(node, user, refs)
        return [n for n in self.members if n in need]

    def invariant_division(self, node: Node) -> bool:
        """A float32 (or float16, computed in float32) division in a loop whose divisor stays the same over
        the loop (a per-row value, a constant or a ``size``): ``fc::div_invariant`` can divide it with a
        reciprocal hoisted per row."""
        if (node.op != "div" or not self.full(node)
                or any(d.dtype not in (np.float32, np.float16) or d.dtype != node.dtype for d in node.operands)):
            return False
        divisor = node.operands[1]  # (the helper is exact for any divisor: this only decides where it pays)
        if divisor in self.inside:
            return not self.full(divisor)
        return divisor.op in ("const", "size")

    def line(self, node: Node, refs: set, fast_flag: str | None = None) -> str:
        """``node``'s C++ line; with ``fast_flag``, a division by a loop-invariant divisor takes
        ``fc::div_invariant``, which clears ``fast_flag`` where its operands are out of its range."""
        operands = [self.value(o, node, refs) for o in node.operands]
        if cuda_ops.is_float_cube(node):  # x ** 3 as two multiplies: powf costs ~40 instructions
            expr = f"fc::cube({operands[0]})"
        elif fast_flag is not None and self.invariant_division(node):
            expr = f"fc::div_invariant({operands[0]}, {operands[1]}, {fast_flag})"
        else:
            expr = cuda_ops.expression(node.op, operands, [o.dtype for o in node.operands], node.dtype)
        return f"const {cuda_ops.ctype(node.dtype)} {self.var[node]} = {expr};"


def _collapse(shape: tuple[int, ...], reduced: set[int], vectors: list[list[int]]) -> list[tuple[int, bool, list[int]]]:
    """Merge adjacent same-class axes that every access steps through contiguously; drop size-1 axes.

    Returns (extent, reduced, per-access stride) per collapsed axis, outer to inner.
    """
    groups: list[tuple[int, bool, list[int]]] = []
    for a, extent in enumerate(shape):
        if extent == 1:
            continue
        red = a in reduced
        strides = [v[a] for v in vectors]
        if groups:
            g_extent, g_red, g_strides = groups[-1]
            if g_red == red and all(gs == s * extent for gs, s in zip(g_strides, strides)):
                groups[-1] = (g_extent * extent, red, strides)
                continue
        groups.append((extent, red, strides))
    return groups


def kernel_spec(region: Region, space: RegionSpace, layouts: Mapping[Node, ArrayLayout] | None = None,
                name: str | None = None) -> KernelSpec:
    """The :class:`KernelSpec` of ``region`` (iteration space ``space``).

    ``layouts`` gives the layout of each array the kernel reads or writes (region inputs that are arrays,
    and region outputs); a missing one is taken as C-contiguous and 16-byte aligned. ``name`` is the
    kernel's base name (default ``region.name``); the kernel is called ``<name>_<kind>_<ops...>``.
    """
    b = _Builder(region, space, layouts or {})
    kind = b.kind
    spec_name = kernel_label(region, kind, name)
    members = b.members

    # -- body, by scope ---------------------------------------------------------------------------------
    row_refs: set[str] = set()  # accesses referenced outside loops (per row / uniform)
    phase_refs: list[set[str]] = []
    phase_needed: list[list[Node]] = []
    phases_raw = []
    n_phases = 1 + max((space.phase[r] for r in b.reductions), default=-1)
    per_row = [n for n in members if not b.full(n) and n.kind is Kind.ELEMENTWISE]
    prologue = [b.line(n, row_refs) for n in per_row if space.phase[n] == 0]
    for p in range(n_phases):
        reds = [r for r in b.reductions if space.phase[r] == p]
        refs: set[str] = set()
        needed = b.closure([(r.operands[0], r) for r in reds], refs)
        phase_needed.append(needed)
        body = [b.line(n, refs) for n in needed]
        body_fast = [b.line(n, refs, f"fast{p}") for n in needed]
        fields, finish, field_reductions = [], [], []
        update: dict[str, list[str]] = {state: [] for state in cuda_ops.UPDATE_STATES}
        pairs = {r.operands[0]: r for r in reds if b.red_cuda[r].pair_helper is not None}
        field_of: dict[Node, str] = {}
        for r in reds:
            cu = b.red_cuda[r]
            pair = pairs.get(r.operands[0])
            if pair is not None and b.red_cuda[pair].pair_gives(r.op):
                continue  # read off the argmax/argmin pair of the same operand below
            fname = field_of[r] = f"r{len(fields)}"
            acc = f"acc{p}.{fname}"
            value = b.value(r.operands[0], r, refs)
            index = ""
            if cu.pair_helper is not None:
                index = b.position(r).var
                refs.add(index)
            for state, lines in update.items():
                lines.append(cu.update(acc, value, index, state))
            fields.append(AccField(fname, cu.acc_ctype, cu.identity, cu.combine(f"a.{fname}", f"b.{fname}")))
            field_reductions.append(cu)
        for r in reds:
            if r in field_of:
                result = b.red_cuda[r].result(f"acc{p}.{field_of[r]}")
            else:
                pair = pairs[r.operands[0]]
                result = b.red_cuda[pair].pair_value(f"acc{p}.{field_of[pair]}")
            finish.append(f"const {cuda_ops.ctype(r.dtype)} {b.var[r]} = {result};")
        finish += [b.line(n, row_refs) for n in per_row if space.phase[n] == p + 1]
        phase_refs.append(refs)
        phases_raw.append((p, tuple(fields), tuple(body), tuple(body_fast), {k: tuple(v) for k, v in update.items()},
                           tuple(finish), tuple(field_reductions)))

    full_outputs = [n for n in region.outputs if b.full(n)]
    row_outputs = [n for n in region.outputs if not b.full(n)]
    epi_refs: set[str] = set()
    epi_needed = b.closure([(n, None) for n in full_outputs], epi_refs)
    epilogue_body = [b.line(n, epi_refs) for n in epi_needed]
    epilogue_fast = [b.line(n, epi_refs, "fast_epilogue") for n in epi_needed]
    epilogue_store_raw = [(b.store(n), b.value(n, None, epi_refs)) for n in full_outputs]
    row_store_raw = [(b.store(n), b.value(n, None, row_refs)) for n in row_outputs]

    # -- collapse and index math ----------------------------------------------------------------------
    infos = list(b.accesses.values())
    groups = _collapse(b.shape, b.reduced, [i.vector for i in infos])
    loop_class = kind != "pointwise"  # pointwise loops over every axis; reductions over the reduced ones
    kept_idx = [k for k, g in enumerate(groups) if loop_class and not g[1]]
    loop_idx = [k for k, g in enumerate(groups) if not (loop_class and not g[1])]
    extents = [g[0] for g in groups]
    n_kept = math.prod(extents[k] for k in kept_idx)
    n_loop = math.prod(extents[k] for k in loop_idx)
    def varying(info_index: int) -> bool:
        return any(groups[k][2][info_index] != 0 for k in loop_idx)

    biggest = max([n_kept, n_loop, *extents] + [
        sum(abs(g[2][i]) * max(g[0] - 1, 0) for g in groups) for i in range(len(infos))], default=0)
    index_ctype = "int" if biggest < INT32_LIMIT else "long long"
    index_np = np.int32 if index_ctype == "int" else np.int64

    # contiguous: no kept axis, and one loop axis (or none) that every varying access steps along by 1
    if kept_idx or len(loop_idx) > 1:
        contiguous = False
    else:
        contiguous = all(groups[k][2][i] == 1 for k in loop_idx for i in range(len(infos)) if varying(i))

    # rows in registers: one loop axis along which every varying access steps by 1, and a bucket that fits
    regs = None
    if kind == "rows" and ROW_REGS and len(loop_idx) == 1 and n_loop > 0:
        k = loop_idx[0]
        if all(groups[k][2][i] in (0, 1) for i in range(len(infos))):
            regs = _row_regs(b, infos, groups, kept_idx, k, n_loop)

    # schedule
    vec = 1
    if kind == "pointwise" or kind == "reduce-all":
        if contiguous:
            vec = _vector_width(b, infos, [i for i in range(len(infos)) if varying(i)])
    if kind == "pointwise":
        schedule = "vector" if vec > 1 else ("contiguous" if contiguous else "strided")
    elif kind == "reduce-all":
        schedule = "grid_barrier" if (n_phases > 1 or full_outputs) else "last_block"
    elif kind == "rows" and regs is not None:
        row_threads, elems, vec = regs
        schedule = "warp_regs" if row_threads <= WARP else "block_regs"
    elif kind == "rows":
        schedule = "block" if n_loop >= ROW_BLOCK_MIN else "warp"
    else:
        schedule = "tiles"

    # axes, accesses with offset expressions
    axes = [Axis(f"c{k}", f"e{k}", k not in loop_idx if loop_class else False) for k in range(len(groups))]
    kept_axes = tuple(axes[k] for k in kept_idx)
    loop_axes = tuple(axes[k] for k in loop_idx)
    scalar_params: list[tuple[Param, Any]] = []
    use_extents = not contiguous
    if kind in ("pointwise", "reduce-all"):
        scalar_params.append((Param("n", index_ctype, "scalar"), index_np(n_loop)))
    else:
        scalar_params.append((Param("nk", index_ctype, "scalar"), index_np(n_kept)))
        scalar_params.append((Param("nr", index_ctype, "scalar"), index_np(n_loop)))
    if use_extents:
        for k, ax in enumerate(axes):
            scalar_params.append((Param(ax.extent, index_ctype, "scalar"), index_np(extents[k])))

    built: dict[str, Access] = {}
    for i, info in enumerate(infos):
        def dot(indices: list[int], i: int = i, info: _AccessInfo = info) -> str | None:
            terms = []
            for k in indices:
                s = groups[k][2][i]
                if s == 0:
                    continue
                if contiguous or (regs is not None and k in loop_idx):
                    terms.append("i")
                    continue
                pname = f"{info.var}_s{k}"
                scalar_params.append((Param(pname, index_ctype, "scalar"), index_np(s)))
                terms.append(f"{axes[k].coord} * {pname}")
            return " + ".join(terms) if terms else None

        ctype = cuda_ops.ctype(info.dtype) if info.dtype is not None else index_ctype
        built[info.var] = Access(info.var, info.pointer, ctype, dot(kept_idx), dot(loop_idx),
                                 info.dtype.itemsize if info.dtype is not None else 0)
    for node in b.sizes:
        count = math.prod(node.operands[0].shape[a] for a in node.attr("axes"))
        scalar_params.append((Param(b.size_param[node], cuda_ops.ctype(node.dtype), "scalar"),
                              np.asarray(count, dtype=node.dtype)[()]))

    def split(refs: set[str]) -> tuple[list[Access], list[Access], list[Access]]:
        uni, row, loop = [], [], []
        for var in sorted(refs, key=_var_order):
            a = built[var]
            if a.is_index:
                loop.append(a)
            elif a.uniform:
                uni.append(a)
            elif a.loop is None:
                row.append(a)
            else:
                loop.append(a)
        return uni, row, loop

    uniform_loads: dict[str, Access] = {}
    row_loads: dict[str, Access] = {}
    all_refs = [row_refs, epi_refs, *phase_refs]
    for refs in all_refs:
        uni, row, _ = split(refs)
        uniform_loads.update((a.var, a) for a in uni)
        row_loads.update((a.var, a) for a in row)
    # rows in registers: divisions by a per-row divisor take fc::div_invariant, and a loop where one of them
    # left its range runs again with the IEEE division (``body_exact``); other schedules divide as IEEE does
    fast_division = regs is not None
    phases = []
    for (p, fields, body, body_fast, update, finish, reductions), refs in zip(phases_raw, phase_refs):
        # 8-byte fields (an argmax pair of an int-indexed kernel is two 4-byte words)
        wide = any(cu.acc_dtype.itemsize == 8 or (cu.pair_helper is not None and index_ctype in _WIDE_CTYPES)
                   for cu in reductions)
        align = 8 if wide else 4
        body, body_exact = _with_ieee_rerun(body, body_fast, fast_division)
        phases.append(Phase(p, f"Acc{p}", align, fields, tuple(split(refs)[2]), body, update["any"], finish,
                            update["first"], update["held"], body_exact))
    epilogue_loads = tuple(split(epi_refs)[2])
    epilogue_body, epilogue_exact = _with_ieee_rerun(epilogue_body, epilogue_fast, fast_division)

    # parameters: arrays, workspace, scalars
    params = [Param(b.pointer[n], cuda_ops.ctype(n.dtype), "input") for n in b.array_inputs]
    params += [Param(b.out_pointer[n], cuda_ops.ctype(n.dtype), "output") for n in region.outputs]
    if kind == "reduce-all":
        params.append(Param("ws", "unsigned char", "workspace"))
    params += [p for p, _ in scalar_params]
    args = tuple(v for _, v in scalar_params)

    held: tuple[Access, ...] = ()
    held_values: tuple[tuple[str, str], ...] = ()
    row_threads = elems = 0
    if regs is not None:
        row_threads, elems = regs[0], regs[1]
        seen = {a.var: a for p in phases for a in p.loads if not a.is_index}
        seen.update((a.var, a) for a in epilogue_loads if not a.is_index)
        held = tuple(sorted(seen.values(), key=lambda a: _var_order(a.var)))
        budget = HOLD_MAX_VALUES - sum(elems * (2 if a.ctype in _WIDE_CTYPES else 1) for a in held)
        kept = _values_to_hold(b, phase_needed, epi_needed, elems, budget)
        if kept:
            phases, (epilogue_body, epilogue_exact), held_values = _hold_values(
                b, kept, phases, (epilogue_body, epilogue_exact), vec, [v for _, v in epilogue_store_raw])
    launch = _launch_policy(kind, schedule, vec, n_kept, n_loop, phases, row_threads)
    return KernelSpec(
        name=spec_name, kind=kind, schedule=schedule, index_ctype=index_ctype, contiguous=contiguous, vec=vec,
        params=tuple(params), args=args, inputs=tuple(b.array_inputs), outputs=tuple(region.outputs),
        kept_axes=kept_axes, loop_axes=loop_axes,
        uniform_loads=tuple(sorted(uniform_loads.values(), key=lambda a: _var_order(a.var))),
        row_loads=tuple(sorted(row_loads.values(), key=lambda a: _var_order(a.var))),
        prologue=tuple(prologue), phases=tuple(phases),
        epilogue_loads=epilogue_loads, epilogue_body=tuple(epilogue_body), epilogue_exact=tuple(epilogue_exact),
        epilogue_stores=tuple(Store(built[s.var], v) for s, v in epilogue_store_raw),
        row_stores=tuple(Store(built[s.var], v) for s, v in row_store_raw),
        launch=launch, row_threads=row_threads, elems=elems, held=held, held_values=held_values,
        full_rows=regs is not None and n_loop == row_threads * elems,
    )


def _with_ieee_rerun(body: Sequence[str], body_fast: Sequence[str], fast_division: bool,
                     ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A loop's body and its IEEE-division twin for the rerun: ``body_fast`` (its invariant divisions by
    fc::div_invariant) and ``body`` where the schedule allows it and they differ, else ``body`` and none."""
    if fast_division and tuple(body_fast) != tuple(body):
        return tuple(body_fast), tuple(body)
    return tuple(body), ()


def _values_to_hold(b: _Builder, phase_needed: list[list[Node]], epi_needed: list[Node], elems: int,
                    budget: int) -> dict[Node, int]:
    """Rows in registers: the element values (op cost >= HOLD_MIN_COST) that a phase computes and a later
    phase or the epilogue needs again, each with the phase that computes it first; within ``budget``
    4-byte registers per thread (``elems`` per value)."""
    kept: dict[Node, int] = {}
    for p, needed in enumerate(phase_needed):
        later = {n for s in phase_needed[p + 1:] for n in s} | set(epi_needed)
        for n in needed:
            if n in kept or n not in later or n.opdef.cost < HOLD_MIN_COST:
                continue
            size = elems * max(1, n.dtype.itemsize // 4)
            if size > budget:
                continue
            budget -= size
            kept[n] = p
    return kept


def _hold_values(b: _Builder, kept: dict[Node, int], phases: list[Phase], epilogue_bodies: Sequence[list[str]],
                 vec: int, epilogue_uses: Sequence[str]):
    """Rewrite the phase and epilogue bodies: the first phase that computes a kept value also stores it in
    ``<var>_h[c * vec + j]`` (the element's register slot, as the row's loads); later phases and the
    epilogue read it from there, and the lines (and register loads) only the recomputation needed go.
    ``epilogue_bodies``: the epilogue's body and its IEEE-division body (or []); ``epilogue_uses``: the
    values the epilogue stores."""
    slot = f"[c * {vec} + j]"
    decl = {n: f"const {cuda_ops.ctype(n.dtype)} {b.var[n]} = " for n in kept}

    def rewrite(lines: tuple[str, ...] | list[str], p: int | None) -> tuple[str, ...]:
        out = []
        for line in lines:
            node = next((n for n in kept if line.startswith(decl[n])), None)
            if node is None:
                out.append(line)
            elif p is not None and kept[node] == p:
                out += [line, f"{b.var[node]}_h{slot} = {b.var[node]};"]
            else:
                out.append(f"{decl[node]}{b.var[node]}_h{slot};")
        return tuple(out)

    new_phases = []
    for ph in phases:
        updates = ph.update + ph.update_first + ph.update_held
        body = _without_dead_values(rewrite(ph.body, ph.index), updates)
        body_exact = _without_dead_values(rewrite(ph.body_exact, ph.index), updates) if ph.body_exact else ()
        used = " ".join(body + body_exact + updates)
        loads = tuple(a for a in ph.loads if re.search(rf"\b{a.var}\b", used))
        new_phases.append(dataclasses.replace(ph, body=body, body_exact=body_exact, loads=loads))
    epilogues = [list(_without_dead_values(rewrite(lines, None), epilogue_uses)) if lines else []
                 for lines in epilogue_bodies]
    values = tuple((cuda_ops.ctype(n.dtype), b.var[n]) for n in kept)
    return new_phases, epilogues, values


_DECLARATION = re.compile(r"const [^=]+? (v\d+) = ")


def _without_dead_values(lines: tuple[str, ...], uses: Sequence[str]) -> tuple[str, ...]:
    """``lines`` without the value declarations that no later line and none of ``uses`` reads (what a value
    read back from its register slot left behind: its operands' lines)."""
    out = list(lines)
    for k in range(len(out) - 1, -1, -1):
        m = _DECLARATION.match(out[k])
        if m and not any(re.search(rf"\b{m.group(1)}\b", line) for line in [*out[k + 1:], *uses]):
            del out[k]
    return tuple(out)


def _var_order(var: str) -> tuple[str, int]:
    m = re.match(r"([a-z]+)(\d+)$", var)
    assert m is not None
    return (m.group(1), int(m.group(2)))


def _vector_width(b: _Builder, infos: list[_AccessInfo], varying: list[int]) -> int:
    """Elements per thread per vector step: 16 bytes of the widest varying array, when every varying
    array's pointer is aligned to the bytes it moves; 1 (scalar) otherwise."""
    pointers = [infos[i] for i in varying if infos[i].pointer is not None]
    if not pointers:
        return 1
    width = VECTOR_BYTES // max(i.dtype.itemsize for i in pointers)
    if width < 2:
        return 1
    for info in pointers:
        if b._layout(info.node).align < width * info.dtype.itemsize:
            return 1
    return width


def _row_regs(b: _Builder, infos: list[_AccessInfo], groups: list, kept_idx: list[int], k: int,
              n_loop: int) -> tuple[int, int, int] | None:
    """(threads per row, elements per thread, vector width) of a register-resident row of ``n_loop``
    elements along collapsed axis ``k`` (every access steps along it by 0 or 1), or None when no bucket of
    :data:`ROW_REGS_TABLE` holds it. The vector width is the widest power of two up to 16 bytes of the
    widest varying array (and up to the elements per thread) that keeps every varying array's row starts
    aligned: its pointer alignment and each kept stride allow it."""
    varying = [i for i in range(len(infos)) if groups[k][2][i] != 0]
    arrays = [i for i in varying if infos[i].pointer is not None]
    itemsize = max((infos[i].dtype.itemsize for i in arrays), default=4)
    table = ROW_REGS_TABLE[8 if itemsize > 4 else 4]
    bucket = next((t for t in table if n_loop <= t[0]), None)
    if bucket is None:
        return None
    _, threads, elems = bucket
    vec = min(VECTOR_BYTES // itemsize, elems)
    while vec > 1:
        if all(b._layout(infos[i].node).align >= vec * infos[i].dtype.itemsize
               and all(groups[g][2][i] % vec == 0 for g in kept_idx) for i in arrays):
            break
        vec //= 2
    return threads, elems, vec


def _launch_policy(kind: str, schedule: str, vec: int, n_kept: int, n_loop: int,
                   phases: list[Phase], row_threads: int = 0) -> LaunchPolicy:
    if kind == "pointwise":
        return LaunchPolicy((BLOCK, 1), -(-n_loop // vec), BLOCK)
    if kind == "reduce-all":
        partial = tuple(max(8, ACC_FIELD_BOUND * len(p.fields)) for p in phases)
        return LaunchPolicy((BLOCK, 1), -(-n_loop // vec), BLOCK, min_blocks=1, persistent=True,
                            cooperative=schedule == "grid_barrier", partial_bytes=partial)
    if schedule == "block_regs":
        return LaunchPolicy((row_threads, 1), n_kept, 1, min_resident=max(1, 512 // row_threads))
    if schedule == "warp_regs":
        return LaunchPolicy((BLOCK, 1), n_kept, BLOCK // row_threads)
    if kind == "rows":
        per_block = 1 if schedule == "block" else BLOCK // WARP
        return LaunchPolicy((BLOCK, 1), n_kept, per_block)
    return LaunchPolicy((COLS_TILE, COLS_SPLIT), n_kept, COLS_TILE, persistent=True)
