"""Lowering: a loop nest and its schedule -> :class:`KernelSpec`, the kernel with every body decided.

``lower_loops(nest, schedule, name, ...)`` (the pointwise and reduction kinds; a scan kind lowers through the same
:class:`Lowering`) decides, on structured data and before any text exists, what each scope
of the kernel computes, and only then prints each decided statement from the op table's CUDA expressions
(:mod:`fusec.codegen.cuda_ops`):

- **Scopes.** Once per kernel (uniform loads), once per row (reduced values and what depends only on
  them: the prologue and each phase's finish), per element of each pass over the row (what the phase's
  reductions consume), and per element of the epilogue (the full outputs).
- **Held values.** In rows held in registers, the schedule's ``hold`` values are computed by the first
  phase that needs them, which keeps them in a register array (``<var>_h``); later loops read them there.
  So a later loop computes only what its roots need *given* the held values: the operands only a held
  value needed are never emitted (:class:`LoadHeld` is a leaf of the scope's closure).
- **Invariant division.** With the schedule's ``fast_division``, a float division by a per-row divisor is
  ``fc::div_invariant`` (a reciprocal hoisted per row); such a loop runs in two passes (``two_pass``): the
  second, compiled with IEEE division, runs only where an operand left that helper's checked range.
- **Accesses.** Offsets as C++ expressions over the collapsed axes: ``i`` where one flat index addresses
  the array (contiguous loops, rows in registers), else coordinates times stride parameters.
- **Views.** An array read through a slice gets a pointer of its own, the array's plus an offset parameter
  (``in0_ld3 = in0 + ld3_o``), and strides times the slice's steps: a view costs no copy and no kernel. A read
  through a window adds, per clamped axis, ``fc::clamp_index(first + step * c, lo, hi) * stride``; an iota's
  value is ``fc::iota_*`` of its access's offset (``index_views.cuh``, included only where needed).
- **Gathers.** A gather's read is one expression (``fc::gather_read``): its base position (``gx<k>``, an index
  access over the axes it does not gather) plus each gathered axis's checked index times its stride; an index
  out of range reads nothing (the value is 0) and writes the gather's code into the error word ``err``, a
  parameter the launcher points at a word it checks after the launch (null: no check). A gather of an iota (an
  array without memory) is ``fc::gather_compute``: the same positions and checks, the element computed there.
- **Parameters.** Arrays (``input``/``output``), the workspace where the schedule needs one, then scalars
  (extents, strides, ``size`` values), each with its role; the runtime passes arguments by role.

The rendered source depends only on the spec without its ``args`` (and without ``launch.work``): dtypes,
ranks, the region's structure, which accesses are contiguous, broadcast or aligned, the index width and
the schedule. Sizes, strides and ``size`` values are kernel parameters, so a new size of the same
signature reuses the compiled kernel.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.codegen import cuda_ops
from fusec.codegen.spec import (
    Access,
    AccField,
    Axis,
    KernelSpec,
    LaunchPolicy,
    Param,
    Phase,
    Store,
)
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import POINTWISE, Region, operand_map
from fusec.schedule.base import Schedule
from fusec.schedule.nest import AccessInfo, LoopNest, declaration_order

_WIDE_CTYPES = ("double", "long long", "unsigned long long")
ERROR_PARAM = "err"  # the scalar parameter holding the address of a kernel's error word (gathers)
# a two-pass loop's pass (0, then 1 where fc::div_invariant declined): the loop variable of the templates
EXACT_PASS = "exact_pass"


def error_code(node: Node) -> int:
    """The nonzero code a gather writes into the error word for an index out of range: from its source line,
    so the same program gives the same source (and compile-cache key) in every process."""
    return (zlib.crc32((node.loc or "").encode()) & 0x7FFFFFFF) | 1


def kernel_label(region: Region, kind: str, name: str | None = None) -> str:
    """A readable C identifier saying what the kernel fuses: ``k0_rows_max_sub_exp_sum_div``."""
    ops = list(dict.fromkeys(n.op for n in region.nodes if n.kind is not Kind.LAYOUT))[:6]
    text = "_".join([name or region.name, kind.replace("-", "")] + ops)
    text = "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in text)
    return text if text[0].isalpha() or text[0] == "_" else f"k_{text}"


# ---- statements -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Compute:
    """``const T v = <the node's expression>;``"""

    node: Node


@dataclass(frozen=True)
class StoreHeld:
    """``v_h[slot] = v;``: keep a computed value for the later loops (rows in registers)."""

    node: Node


@dataclass(frozen=True)
class LoadHeld:
    """``const T v = v_h[slot];``: a value an earlier phase computed and held."""

    node: Node


Statement = Compute | StoreHeld | LoadHeld


class Lowering:
    """One nest under one schedule (see the module docstring). ``flat``: the schedule's loop is one flat index
    (its ``loop``, strided where it has none, and ``vec``, 1 where it has none, say how it steps); rows in registers
    (``schedule.in_registers``) read each row once, ``vec`` elements at a time, and keep the schedule's ``hold``
    values."""

    def __init__(self, nest: LoopNest, schedule: Schedule, flat: bool = False):
        self.nest, self.schedule = nest, schedule
        self.regs = schedule.in_registers
        self.fast_division = self.regs and schedule.fast_division
        self.contiguous = nest.contiguous and (not flat or getattr(schedule, "loop", "strided") != "strided")
        self.vec = getattr(schedule, "vec", 1) if (flat or self.regs) else 1
        sources = nest.one_pass_sources
        self.red_cuda = {r: cuda_ops.one_pass(sources[r].kind, sources[r].x.dtype, r.dtype) if r in sources
                         else cuda_ops.reduction(r.op, r.operands[0].dtype) for r in nest.reductions}
        self.gather_params: dict[str, Any] = {}  # extents and strides of gathered axes, by parameter name
        self.error_sites: dict[int, str] = {}  # error code -> the user's line of the gather that writes it
        hold = {nest.members[k] for k in schedule.hold} if self.regs else set()
        self.kept: dict[Node, int] = {}  # held value -> the phase that computes it first
        for ph in nest.phases:
            for n in ph.needed:
                if n in hold and n not in self.kept:
                    self.kept[n] = ph.index

    # -- values ------------------------------------------------------------------------------------------
    def value(self, node: Node, user: Node | None) -> str:
        """The C++ expression of ``node`` as ``user`` reads it."""
        nest = self.nest
        if node in nest.inside:
            if node.kind is Kind.LAYOUT:
                return self.value(node.operands[0], node)
            return nest.var[node]
        if node.op == "const":
            return cuda_ops.literal(node.attr("value"), node.dtype)
        if node.op == "size":
            return nest.size_param[node]
        assert user is not None
        if node.op == "iota":  # a virtual array: its value is computed from the offset its access gives
            info = nest.accesses[("ld", node, operand_map(user, node, nest.space), nest.view(user, node))]
            return self.computed_element(node, f"{info.var} + {info.offset}" if info.offset else info.var)
        return nest.load_var(node, user)

    @staticmethod
    def computed_element(node: Node, position: str) -> str:
        """The element at ``position`` (a C++ expression) of ``node``, an array without memory whose elements
        are computed from their position (an iota; :func:`fusec.schedule.nest.is_read` but not
        :func:`~fusec.schedule.nest.is_array`)."""
        assert node.op == "iota", node.op
        return cuda_ops.iota_expression(position, node.attr("start"), node.attr("next"), node.dtype)

    def gather_expression(self, node: Node) -> str:
        """A gather's read: ``fc::gather_read(array, base, position, stride, ...)``, one position per gathered
        axis by ``fc::gather_index`` (NumPy's wrap of negative indices; an index out of range reads nothing and
        writes the gather's code into the kernel's error word). Extents and strides are parameters."""
        nest = self.nest
        x, indices = node.operands[0], node.operands[1:]
        info = nest.gather_access(node)
        strides, shape = nest.gather_strides(node)
        code = error_code(node)
        self.error_sites[code] = node.loc or "a gather"
        terms = []
        for t, (a, idx) in enumerate(zip(node.attr("axes"), indices)):
            n, s = f"{info.var}_n{t}", f"{info.var}_g{t}"
            self.gather_params.setdefault(n, np.int64(shape[a]))
            self.gather_params.setdefault(s, np.int64(strides[a]))
            terms.append(f"fc::gather_index({self.value(idx, node)}, {n}, {ERROR_PARAM}, {code}u), {s}")
        base = info.var
        if node.attr("start") is not None:  # read through a window: from its first element
            self.gather_params.setdefault(f"{info.var}_o", np.int64(nest.gather_offset(node)))
            base = f"{info.var} + ({nest.index_ctype}){info.var}_o"
        types = f"{cuda_ops.ctype(x.dtype)}, {nest.index_ctype}"
        if x not in nest.pointer:  # an array without memory: its element at the gathered position is computed
            element = f"[](long long q) {{ return {self.computed_element(x, 'q')}; }}"
            return f"fc::gather_compute<{types}>({element}, {base}, {', '.join(terms)})"
        return f"fc::gather_read<{types}>({nest.pointer[x]}, {base}, {', '.join(terms)})"

    def line(self, node: Node, fast_flag: str | None = None) -> str:
        """``node``'s C++ line; with ``fast_flag``, a division by a loop-invariant divisor takes
        ``fc::div_invariant``, which clears ``fast_flag`` where its operands are out of its range and divides as
        IEEE division does in the loop's second pass (``EXACT_PASS``)."""
        if node.kind is Kind.GATHER:
            return f"const {cuda_ops.ctype(node.dtype)} {self.nest.var[node]} = {self.gather_expression(node)};"
        operands = [self.value(o, node) for o in node.operands]
        if cuda_ops.is_float_cube(node):  # x ** 3 as two multiplies: powf costs ~40 instructions
            expr = f"fc::cube({operands[0]})"
        elif fast_flag is not None and self.nest.invariant_division(node):
            expr = f"fc::div_invariant({operands[0]}, {operands[1]}, {fast_flag}, {EXACT_PASS})"
        else:
            expr = cuda_ops.expression(node.op, operands, [o.dtype for o in node.operands], node.dtype)
        return f"const {cuda_ops.ctype(node.dtype)} {self.nest.var[node]} = {expr};"

    # -- scopes ----------------------------------------------------------------------------------------------
    def loop_statements(self, roots: Iterable[tuple[Node, Node | None]], phase: int | None) -> list[Statement]:
        """What a loop computes for ``roots``: the full members they need, where a value held by an earlier
        phase (every held value, in the epilogue: ``phase`` None) is read from its register array and its
        operands are not computed for it; the first phase computing a held value keeps it."""
        kept = self.kept
        held = {n for n, first in kept.items() if phase is None or first < phase}  # read from registers
        out: list[Statement] = []
        for n in self.nest.closure(roots, leaves=held):
            if n in held:
                out.append(LoadHeld(n))
            else:
                out.append(Compute(n))
                if n in kept and kept[n] == phase:
                    out.append(StoreHeld(n))
        return out

    def statement_refs(self, statements: Sequence[Statement], refs: set[str]) -> None:
        for s in statements:
            if isinstance(s, Compute):
                self.nest.operand_refs(s.node, refs)

    def render(self, statements: Sequence[Statement], fast_flag: str | None) -> tuple[str, ...]:
        """The statements as C++ lines (``fast_flag``: divisions by invariant divisors take the fast helper)."""
        slot = f"[c * {self.vec} + j]"
        lines = []
        for s in statements:
            var = self.nest.var[s.node]
            if isinstance(s, Compute):
                lines.append(self.line(s.node, fast_flag))
            elif isinstance(s, StoreHeld):
                lines.append(f"{var}_h{slot} = {var};")
            else:
                lines.append(f"const {cuda_ops.ctype(s.node.dtype)} {var} = {var}_h{slot};")
        return tuple(lines)

    def has_invariant_division(self, statements: Iterable[Statement]) -> bool:
        """Whether a loop of ``statements`` divides by an invariant divisor it computes (with the schedule's
        fast division): then it runs in two passes, the second with IEEE division where the first declined."""
        return self.fast_division and any(isinstance(s, Compute) and self.nest.invariant_division(s.node)
                                          for s in statements)


# ---- the spec ----------------------------------------------------------------------------------------------


SpecFields = Callable[[Lowering, dict[str, Access], list[Axis], tuple[Access, ...]], dict[str, Any]]
LaunchOf = Callable[[int, Sequence[Phase]], LaunchPolicy]


def lower_loops(nest: LoopNest, schedule: Schedule, name: str | None, *, template: str, launch: LaunchOf,
                flat: bool = False, spec_fields: SpecFields | None = None) -> KernelSpec:
    """The :class:`KernelSpec` of ``nest``'s region under ``schedule`` (already checked against it, see
    :func:`fusec.kinds.resolve`) for a kind whose kernel loops over the elements in phases and an epilogue (the
    pointwise and reduction kinds), rendered by ``template``; the kernel is called ``<name>_<kind>_<ops...>``
    (``name``: the region's by default). The kind says how the launch is sized (``launch(vec, phases)``), whether
    its loop is one flat index (``flat``), and what its template reads besides the common fields
    (``spec_fields(lowering, accesses by variable, axes, epilogue loads)``)."""
    lo = Lowering(nest, schedule, flat)
    kind = nest.kind
    region = nest.region

    prologue = tuple(lo.line(n) for n in nest.prologue)
    phases_raw = []
    for ph in nest.phases:
        p = ph.index
        statements = lo.loop_statements([nest.reduced_value(r) for r in ph.reductions], p)
        refs: set[str] = set()
        lo.statement_refs(statements, refs)
        two_pass = lo.has_invariant_division(statements)
        body = lo.render(statements, f"fast{p}" if two_pass else None)
        fields, finish, field_reductions = [], [], []
        update: dict[str, list[str]] = {state: [] for state in cuda_ops.UPDATE_STATES}
        pairs = {r.operands[0]: r for r in ph.reductions if lo.red_cuda[r].pair_helper is not None}
        field_of: dict[Node, str] = {}
        for r in ph.reductions:
            cu = lo.red_cuda[r]
            pair = pairs.get(r.operands[0])
            if pair is not None and lo.red_cuda[pair].pair_gives(r.op):
                continue  # read off the argmax/argmin pair of the same operand below
            fname = field_of[r] = f"r{len(fields)}"
            acc = f"acc{p}.{fname}"
            value = lo.value(*nest.reduced_value(r))
            nest.value_refs(*nest.reduced_value(r), refs)
            index = ""
            if cu.pair_helper is not None:
                index = nest.position_access(r).var
                refs.add(index)
            for state, lines in update.items():
                lines.append(cu.update(acc, value, index, state))
            fields.append(AccField(fname, cu.acc_ctype, cu.identity, cu.combine(f"a.{fname}", f"b.{fname}"),
                                   cu.acc_bound))
            field_reductions.append(cu)
        for r in ph.reductions:
            if r in field_of:
                result = lo.red_cuda[r].result(f"acc{p}.{field_of[r]}")
            else:
                pair = pairs[r.operands[0]]
                result = lo.red_cuda[pair].pair_value(f"acc{p}.{field_of[pair]}")
            finish.append(f"const {cuda_ops.ctype(r.dtype)} {nest.var[r]} = {result};")
        finish += [lo.line(n) for n in ph.finish]
        phases_raw.append((p, fields, body, two_pass, update, finish, field_reductions, refs))

    epilogue = lo.loop_statements([(n, None) for n in nest.full_outputs], None)
    epilogue_refs: set[str] = set()
    lo.statement_refs(epilogue, epilogue_refs)
    for n in nest.full_outputs:
        nest.value_refs(n, None, epilogue_refs)
    epilogue_two_pass = lo.has_invariant_division(epilogue)
    epilogue_body = lo.render(epilogue, "fast_epilogue" if epilogue_two_pass else None)

    # -- accesses with offset expressions, parameters -----------------------------------------------------
    index_ctype = nest.index_ctype
    index_np = np.int32 if index_ctype == "int" else np.int64
    kept_idx, loop_idx = nest.kept_idx, nest.loop_idx
    axes = [Axis(f"c{k}", f"e{k}", k not in loop_idx if kind != POINTWISE else False)
            for k in range(len(nest.axes))]
    scalar_params: list[tuple[Param, Any]] = []
    if flat:
        scalar_params.append((Param("n", index_ctype, "scalar"), index_np(nest.n_loop)))
    else:
        scalar_params.append((Param("nk", index_ctype, "scalar"), index_np(nest.n_kept)))
        scalar_params.append((Param("nr", index_ctype, "scalar"), index_np(nest.n_loop)))
    built = extents_and_accesses(lo, nest, axes, scalar_params)
    for pname, value in lo.gather_params.items():
        scalar_params.append((Param(pname, "long long", "scalar"), value))
    if lo.error_sites:  # the error word's address: null here, the launcher's own word when it runs the kernel
        scalar_params.append((Param(ERROR_PARAM, "unsigned long long", "scalar"), np.uint64(0)))
    scalar_params.extend(size_params(nest))

    def accesses(infos: Iterable[AccessInfo]) -> tuple[Access, ...]:
        return tuple(built[info.var] for info in infos)

    uniform_loads: dict[str, Access] = {}
    row_loads: dict[str, Access] = {}
    for refs in (nest.row_refs, nest.epilogue_refs, *(ph.refs for ph in nest.phases)):
        uni, row, _ = nest.split(refs)
        uniform_loads.update((a.var, built[a.var]) for a in uni)
        row_loads.update((a.var, built[a.var]) for a in row)
    phases = []
    for p, fields, body, two_pass, update, finish, reductions, refs in phases_raw:
        # 8-byte fields (an argmax pair of an int-indexed kernel is two 4-byte words)
        wide = any(cu.acc_dtype.itemsize == 8 or (cu.pair_helper is not None and index_ctype in _WIDE_CTYPES)
                   for cu in reductions)
        phases.append(Phase(p, f"Acc{p}", 8 if wide else 4, tuple(fields), accesses(nest.split(refs)[2]), body,
                            tuple(update["any"]), tuple(finish), tuple(update["first"]), tuple(update["held"]),
                            two_pass))
    epilogue_loads = accesses(nest.split(epilogue_refs)[2])

    params = [Param(nest.pointer[n], cuda_ops.ctype(n.dtype), "input") for n in nest.array_inputs]
    view_pointers = slice_pointers(nest, built)
    params += [Param(nest.out_pointer[n], cuda_ops.ctype(n.dtype), "output") for n in region.outputs]
    if schedule.workspace:
        params.append(Param("ws", "unsigned char", "workspace"))
    params += [p for p, _ in scalar_params]

    loop_fields = spec_fields(lo, built, axes, epilogue_loads) if spec_fields is not None else {}
    held: tuple[Access, ...] = ()
    if lo.regs:  # every array the loops read along the row sits in registers
        loads = {a.var: a for ph in nest.phases for a in nest.split(ph.refs)[2] if a.pointer is not None}
        loads.update((a.var, a) for a in nest.split(nest.epilogue_refs)[2] if a.pointer is not None)
        held = accesses(sorted(loads.values(), key=lambda a: a.key))
    return KernelSpec(
        name=kernel_label(region, kind, name), kind=schedule.kind, template=template, schedule=schedule,
        index_ctype=index_ctype,
        contiguous=lo.contiguous, vec=lo.vec, params=tuple(params), args=tuple(v for _, v in scalar_params),
        inputs=tuple(nest.array_inputs), outputs=tuple(region.outputs),
        kept_axes=tuple(axes[k] for k in kept_idx), loop_axes=tuple(axes[k] for k in loop_idx),
        uniform_loads=tuple(sorted(uniform_loads.values(), key=lambda a: declaration_order(a.var))),
        row_loads=tuple(sorted(row_loads.values(), key=lambda a: declaration_order(a.var))),
        prologue=prologue, phases=tuple(phases),
        epilogue_loads=epilogue_loads, epilogue_body=epilogue_body, epilogue_two_pass=epilogue_two_pass,
        epilogue_stores=tuple(Store(built[nest.store_access(n).var], lo.value(n, None)) for n in nest.full_outputs),
        row_stores=tuple(Store(built[nest.store_access(n).var], lo.value(n, None)) for n in nest.row_outputs),
        launch=launch(lo.vec, phases), held=held, view_pointers=view_pointers,
        held_values=tuple((cuda_ops.ctype(n.dtype), nest.var[n]) for n in lo.kept), **loop_fields,
        error_sites=tuple(sorted(lo.error_sites.items())),
        gathered=tuple(sorted({nest.pointer[n.operands[0]] for n in nest.members
                               if n.kind is Kind.GATHER and n.operands[0] in nest.pointer})),
        headers=cuda_ops.value_headers(nest.members) + cuda_ops.extra_headers(n.op for n in nest.members) + (
            (cuda_ops.ONE_PASS_HEADER,) if nest.one_pass_sources else ()) + (
            (cuda_ops.INDEX_HEADER,) if nest.reads_index_views else ()),
    )


def extents_and_accesses(lo: Lowering, nest: LoopNest, axes: list[Axis],
                         scalar_params: list[tuple[Param, Any]]) -> dict[str, Access]:
    """Every access of ``nest`` by variable, appending to ``scalar_params`` the axes' extents (where the loop is
    not one flat contiguous index) and then each access's stride and offset parameters."""
    index_np = np.int32 if nest.index_ctype == "int" else np.int64
    if not lo.contiguous:
        for k, ax in enumerate(axes):
            scalar_params.append((Param(ax.extent, nest.index_ctype, "scalar"), index_np(nest.extents[k])))
    return {info.var: _access(lo, nest, i, info, axes, scalar_params, nest.index_ctype, index_np)
            for i, info in enumerate(nest.infos)}


def slice_pointers(nest: LoopNest, built: dict[str, Access]) -> tuple[tuple[str, str, str, str], ...]:
    """(C++ type, pointer, array, offset parameter) of each read through a slice of an array in memory: its own
    pointer, ``const T* in0_ld3 = in0 + ld3_o;`` (an iota read through a slice has no pointer: its offset is
    part of the position its value is computed from)."""
    return tuple((cuda_ops.ctype(info.dtype), built[info.var].pointer, info.pointer, f"{info.var}_o")
                 for info in nest.infos if info.offset is not None and info.pointer is not None)


def size_params(nest: LoopNest) -> list[tuple[Param, Any]]:
    """The ``size<k>`` parameters of ``nest`` (element counts over a size node's axes) with their values."""
    return [(Param(nest.size_param[node], cuda_ops.ctype(node.dtype), "scalar"),
             np.asarray(math.prod(node.operands[0].shape[a] for a in node.attr("axes")), dtype=node.dtype)[()])
            for node in nest.sizes]


def _access(lo: Lowering, nest: LoopNest, i: int, info: AccessInfo, axes: list[Axis],
            scalar_params: list[tuple[Param, Any]], index_ctype: str, index_np: Any) -> Access:
    """Access ``i`` with its offset expressions over the kept and the loop axes (stride parameters added
    to ``scalar_params`` as needed)."""
    def dot(indices: Sequence[int]) -> str | None:
        terms = []
        for a, first, step, low, high, stride in info.clamps:  # read through a window: a clamped index per axis
            k = nest.group_of[a]
            if k not in indices:
                continue
            pname = f"{info.var}_s{k}"
            scalar_params.append((Param(pname, index_ctype, "scalar"), index_np(stride)))
            inner = axes[k].coord if step == 1 else f"{step} * {axes[k].coord}"
            inner = f"{inner} + {first}" if first > 0 else (f"{inner} - {-first}" if first < 0 else inner)
            terms.append(f"fc::clamp_index<index_t>({inner}, {low}, {high}) * {pname}")
        for k in indices:
            s = nest.axes[k].strides[i]
            if s == 0:
                continue
            if lo.contiguous or (lo.regs and k in nest.loop_idx):
                terms.append("i")
                continue
            pname = f"{info.var}_s{k}"
            scalar_params.append((Param(pname, index_ctype, "scalar"), index_np(s)))
            terms.append(f"{axes[k].coord} * {pname}")
        return " + ".join(terms) if terms else None

    ctype = cuda_ops.ctype(info.dtype) if info.dtype is not None else index_ctype
    kept = dot(nest.kept_idx)
    pointer = info.pointer
    if info.offset is not None and info.pointer is not None:  # a read through a slice: its own pointer, offset
        scalar_params.append((Param(f"{info.var}_o", index_ctype, "scalar"), index_np(info.offset)))
        pointer = f"{info.pointer}_{info.var}"
    return Access(info.var, pointer, ctype, kept, dot(nest.loop_idx),
                  info.dtype.itemsize if info.dtype is not None else 0)


def launch_policy(schedule: Schedule, work: int, per_block: int, partial: tuple[int, ...] = (),
                  **split: int) -> LaunchPolicy:
    """How the runtime sizes a launch of ``schedule``: ``work`` units (vector steps of a flat loop, rows, tiles or
    kept indices), ``per_block`` of them per block and step, ``partial`` bytes per block of each phase's partials
    in the workspace, and (``split``) the limits of a reduced extent split across blocks; the rest is the
    schedule's grid policy."""
    return LaunchPolicy(schedule.block, work, per_block, min_blocks=1 if schedule.workspace and not split else 0,
                        persistent=schedule.persistent, cooperative=schedule.cooperative, partial_bytes=partial,
                        min_resident=schedule.min_resident, **split)


def phase_partials(schedule: Schedule, phases: Sequence[Phase]) -> tuple[int, ...]:
    """Bytes of each phase's partial (its accumulator fields, at least 8) where the schedule has a workspace."""
    return tuple(max(8, sum(f.bound for f in p.fields)) for p in phases) if schedule.workspace else ()
