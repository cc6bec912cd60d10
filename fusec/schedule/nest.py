"""A region over its argument layouts: the loop nest every schedule of it shares.

A region's loop nest (:func:`fusec.kinds.analyze` builds it) answers, before any schedule is chosen, what a
kernel of the region must
compute where and how it reaches memory:

1. **Arrays.** The region's array inputs (graph inputs and intermediates materialized by earlier kernels)
   are the ``in<k>`` pointers and its outputs ``out<k>``; ``size`` inputs are scalar parameters
   ``size<k>``; ``const`` inputs become literals.
2. **Scopes.** Each member is *full* (it varies along the loop: every member of a pointwise region, and
   members of a reduction region that vary along a reduced axis) or *per-row*. Per-row members are
   computed once per row: the prologue (before any reduction) and each phase's *finish* (after the
   phase's reductions). Each phase's loop computes the full members its reductions consume (its
   *needed* members); the epilogue loop computes the full members the full outputs need.
3. **Accesses.** Every (array, axis map) pair that a member reads, every output, every argmax/argmin
   position and every gather's base position is an access (``ld<k>``, ``st<k>``, ``ix<k>``, ``gx<k>``,
   numbered in the order the scopes first read them): for each region axis, how many elements one step
   along it moves in that array (0 where it is broadcast). A read through a ``slice`` adds an offset and
   multiplies strides by its steps; a read through a ``window`` (pads, joins) also clamps the index along
   each axis where the clamp binds (``clamps``: the array index there is ``clamp(first + step * coordinate,
   lo, hi)``). An ``iota`` is read like an array without memory: its access gives the element offset, from
   which the kernel computes the value.
4. **Collapse.** Size-1 region axes are dropped; adjacent axes of the same class (kept or reduced) merge
   when every access steps through them contiguously (``stride[a] == stride[a+1] * extent[a+1]``); an axis
   some access reads through a clamp merges with none (its coordinate is read on its own).
5. **Index width.** ``int`` when every extent and every access's largest offset stays below
   :data:`INT32_LIMIT`, else ``long long``; and whether one flat loop index addresses every array
   (``contiguous``).

Nothing here depends on the GPU or on a schedule: each kernel kind's heuristics (:mod:`fusec.kinds`) read
the nest to choose a schedule, and its lowering reads both; :func:`fusec.kinds.analyze` builds it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fusec.ir import windows
from fusec.ir.graph import Node
from fusec.ir.infer import gather_window, slice_bounds
from fusec.ir.ops import Kind
from fusec.ir.region import POINTWISE, ROWS, Region, operand_map
from fusec.schedule.layout import ArrayLayout, alignment
from fusec.schedule.one_pass import OnePassSource, one_pass_sources

# int32 index math while every extent and offset is below this: the 2**24 margin keeps grid-stride
# increments (at most MAX_GRID * BLOCK * 16 elements past a bound below the limit) from overflowing.
INT32_LIMIT = 2**31 - 2**24


def declaration_order(var: str) -> tuple[str, int]:
    """``ld12`` -> ``("ld", 12)``: the order access variables are declared in."""
    prefix = var.rstrip("0123456789")
    return prefix, int(var[len(prefix):])


def is_array(node: Node) -> bool:
    """Whether a region input is an array in memory (constants, sizes and iotas are not)."""
    return node.op not in ("const", "size", "iota")


def is_read(node: Node) -> bool:
    """Whether a region input is read through an access: an array in memory, or an iota (a virtual array whose
    element at offset ``o`` is computed from ``o``: its access gives the offset, no pointer)."""
    return node.op not in ("const", "size")


@dataclass
class AccessInfo:
    """One access: its variable (``ld3``), the array (or, for a position, the reduction), its pointer
    parameter (None for a position), its dtype (None for a position) and its elements per step along
    each region axis."""

    var: str
    node: Node
    pointer: str | None
    dtype: np.dtype | None
    vector: list[int]
    offset: int | None = None  # elements from the array's start, for a read through a slice (else None)
    span: int = 0  # a gather's base position: the farthest element of the array a gathered index reaches
    # a read through a window: per clamped axis (region axis, first, step, lo, hi, stride): the array index
    # along it is clamp(first + step * coordinate, lo, hi), times the stride (its vector entry there is 0)
    clamps: tuple[tuple[int, int, int, int, int, int], ...] = ()

    @property
    def is_iota(self) -> bool:
        return self.pointer is None and self.node.op == "iota"

    @property
    def key(self) -> tuple[str, int]:
        """(prefix, number): the order variables are declared in."""
        return declaration_order(self.var)


@dataclass(frozen=True)
class PhaseScope:
    """One pass over the row: its reductions, the full members its loop computes (in member order), the
    accesses that loop reads, and the per-row members computed once its reductions are known."""

    index: int
    reductions: tuple[Node, ...]
    needed: tuple[Node, ...]
    refs: frozenset[str]
    finish: tuple[Node, ...]


@dataclass(frozen=True)
class CollapsedAxis:
    """One collapsed region axis: its extent, whether it is reduced, each access's stride along it."""

    extent: int
    reduced: bool
    strides: tuple[int, ...]


class LoopNest:
    """The analysis of one region over given argument layouts (see the module docstring).

    ``one_pass_candidates`` are the region's statistics a kernel can compute in one pass
    (:mod:`fusec.schedule.one_pass`: variances, softmax denominators); with ``one_pass`` the nest computes them
    so (``one_pass_sources``): the loop of such a reduction reads the data itself, in the phase of the
    reduction it reads, and what depends on it moves up accordingly. :meth:`with_one_pass` gives that nest of
    the same region and layouts."""

    def __init__(self, region: Region, layouts: Mapping[Node, ArrayLayout], one_pass: bool = False):
        space = region.space
        self.region, self.space, self.layouts = region, space, layouts
        self.members = [n for n in region.nodes if n.kind is not Kind.SOURCE]
        self.inside = set(self.members)
        self.kind = space.kind
        self.shape = tuple(space.shape)
        self.reduced = set(space.reduced)
        self.array_inputs = [n for n in region.inputs if is_array(n)]
        self.pointer = {n: f"in{k}" for k, n in enumerate(self.array_inputs)}
        self.sizes = [n for n in region.inputs if n.op == "size"]
        self.size_param = {n: f"size{k}" for k, n in enumerate(self.sizes)}
        self.out_pointer = {n: f"out{k}" for k, n in enumerate(region.outputs)}
        self.member_index = {n: k for k, n in enumerate(self.members)}
        self.var = {n: f"v{k}" for k, n in enumerate(self.members) if n.kind is not Kind.LAYOUT}
        self.reductions = [n for n in self.members if n.kind is Kind.REDUCTION]
        self.one_pass_candidates = one_pass_sources(self.reductions, self.inside, space, self.full)
        self.one_pass_sources: Mapping[Node, OnePassSource] = self.one_pass_candidates if one_pass else {}
        self.phase = self._phases()
        self._one_pass_nest: LoopNest | None = self if one_pass or not self.one_pass_candidates else None
        self.accesses: dict[tuple, AccessInfo] = {}
        self._counts = {"ld": 0, "st": 0, "ix": 0, "gx": 0}
        self._scopes()
        self._collapse()

    # -- scopes ---------------------------------------------------------------------------------------
    def full(self, node: Node) -> bool:
        """Whether ``node`` is computed per element of a loop (else once per row)."""
        return self.kind == POINTWISE or self.space.varies_along_reduction(node)

    @property
    def n_phases(self) -> int:
        return len(self.phases)

    def reduced_value(self, r: Node) -> tuple[Node, Node]:
        """(value, reader): what reduction ``r``'s loop folds in, read as ``reader`` reads it: its operand,
        or for a one-pass statistic the data it accumulates."""
        source = self.one_pass_sources.get(r)
        return (source.x, source.reader) if source is not None else (r.operands[0], r)

    def with_one_pass(self) -> LoopNest:
        """This region over the same layouts with its one-pass statistics computed so (``self`` when it has
        none)."""
        if self._one_pass_nest is None:
            self._one_pass_nest = LoopNest(self.region, self.layouts, one_pass=True)
        return self._one_pass_nest

    def _phases(self) -> Mapping[Node, int]:
        """The region's phases, or with one-pass statistics: a member's phase is the number of reductions on
        its longest path from the inputs, where a one-pass statistic reads its data instead of its operand."""
        if not self.one_pass_sources:
            return self.space.phase
        phase: dict[Node, int] = {}
        for n in self.members:
            operands = (self.one_pass_sources[n].x,) if n in self.one_pass_sources else n.operands
            phase[n] = max((phase[o] + (o.kind is Kind.REDUCTION) for o in operands if o in phase), default=0)
        return phase

    def _scopes(self) -> None:
        """The scopes, registering accesses in the order the kernel's lines first read them."""
        phase = self.phase
        self.row_refs: set[str] = set()  # accesses read outside loops (per row / uniform)
        per_row = [n for n in self.members if not self.full(n) and n.kind in (Kind.ELEMENTWISE, Kind.GATHER)]
        self.prologue = tuple(n for n in per_row if phase[n] == 0)
        for n in self.prologue:
            self.operand_refs(n, self.row_refs)
        n_phases = 1 + max((phase[r] for r in self.reductions), default=-1)
        phases = []
        for p in range(n_phases):
            reds = tuple(r for r in self.reductions if phase[r] == p)
            refs: set[str] = set()
            needed = self.closure([self.reduced_value(r) for r in reds], refs)
            for r in reds:
                self.value_refs(*self.reduced_value(r), refs)
                if r.opdef.index_result:
                    refs.add(self.position(r).var)
            finish = tuple(n for n in per_row if phase[n] == p + 1)
            for n in finish:
                self.operand_refs(n, self.row_refs)
            phases.append(PhaseScope(p, reds, tuple(needed), frozenset(refs), finish))
        self.phases = tuple(phases)
        outputs = self.region.outputs
        self.full_outputs = tuple(n for n in outputs if self.full(n))
        self.row_outputs = tuple(n for n in outputs if not self.full(n))
        epi_refs: set[str] = set()
        self.epilogue_needed = tuple(self.closure([(n, None) for n in self.full_outputs], epi_refs))
        for n in self.full_outputs:
            self.store(n)
            self.value_refs(n, None, epi_refs)
        for n in self.row_outputs:
            self.store(n)
            self.value_refs(n, None, self.row_refs)
        self.epilogue_refs = frozenset(epi_refs)

    def closure(self, roots: Iterable[tuple[Node, Node | None]], refs: set | None = None,
                leaves: Collection[Node] = ()) -> list[Node]:
        """The full members that computing ``roots`` needs in a loop (per-row values are available), in
        member order; ``refs`` collects the accesses they read. A member of ``leaves`` is needed but not
        computed from its operands (its value is at hand: held in registers)."""
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
                if node not in leaves:
                    stack.extend((o, node) for o in node.operands)
            elif is_read(node) and refs is not None:
                self.value_refs(node, user, refs)
        return [n for n in self.members if n in need]

    def value_refs(self, node: Node, user: Node | None, refs: set) -> None:
        """Record in ``refs`` the access ``user`` reads ``node`` through, if it reads memory."""
        if user is not None and user.kind is Kind.GATHER and node is user.operands[0]:
            refs.add(self.gather_access(user).var)
            if node not in user.operands[1:]:
                return
        if node in self.inside:
            if node.kind is Kind.LAYOUT:
                self.value_refs(node.operands[0], node, refs)
            return
        if is_read(node):
            assert user is not None
            refs.add(self.load(node, operand_map(user, node, self.space), self.view(user, node)).var)

    def operand_refs(self, node: Node, refs: set) -> None:
        for o in node.operands:
            self.value_refs(o, node, refs)

    # -- accesses ---------------------------------------------------------------------------------------
    def layout(self, node: Node) -> ArrayLayout:
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
                vector: list[int]) -> AccessInfo:
        info = self.accesses.get(key)
        if info is None:
            info = AccessInfo(f"{prefix}{self._counts[prefix]}", node, pointer, dtype, vector)
            self._counts[prefix] += 1
            self.accesses[key] = info
        return info

    @staticmethod
    def view(user: Node | None, node: Node) -> tuple[tuple[int, ...], ...] | None:
        """(first index, step) per axis of array ``node`` where member ``user`` is a slice of it, (first, step, lo,
        hi) where it is a window of it (the index clamped to [lo, hi]), else None."""
        if user is None or user.op not in ("slice", "window"):
            return None
        if user.op == "window":
            return tuple((w[0], w[1], w[3], w[4]) for w in windows.axes_of(dict(user.attrs)))
        return tuple((first, step) for first, step, _ in slice_bounds(node.shape, dict(user.attrs)))

    def load(self, node: Node, amap: tuple, view: tuple[tuple[int, int], ...] | None = None) -> AccessInfo:
        """The access reading array ``node`` under axis map ``amap``; through a slice (``view``: first index and
        step per axis), its strides times the steps, from an offset (a pointer of its own in the kernel)."""
        strides = self.layout(node).strides
        offset = None
        clamps = []
        if view is not None:
            offset, linear = 0, []
            for j, (v, s) in enumerate(zip(view, strides)):
                first, step = v[0], v[1]
                if len(v) == 4:  # a window's axis: clamped where the clamp binds over the region's extent
                    a = amap[j]
                    if a is None or node.shape[j] == 1:  # one element along it: a constant index
                        offset += min(max(first, v[2]), v[3]) * s
                        linear.append(0)
                        continue
                    if any(first + step * c < v[2] or first + step * c > v[3]
                           for c in (0, self.shape[a] - 1)) and self.shape[a] > 0:
                        clamps.append((a, first, step, v[2], v[3], int(s)))
                        linear.append(0)
                        continue
                offset += first * s
                linear.append(s * step)
            strides = tuple(linear)
        pointer = self.pointer.get(node)
        info = self._access(("ld", node, amap, view), "ld", node, pointer, node.dtype if pointer else None,
                            self._vector(strides, amap, node.shape))
        info.offset = offset
        info.clamps = tuple(clamps)
        return info

    def access_align(self, info: AccessInfo) -> int:
        """The alignment in bytes of the address an access starts at: its array's pointer, and its offset."""
        align = self.layout(info.node).align
        if info.offset and info.dtype is not None:
            align = min(align, alignment(info.offset * info.dtype.itemsize))
        for clamp in info.clamps if info.dtype is not None else ():  # any index along a clamped axis
            align = min(align, alignment(clamp[5] * info.dtype.itemsize))
        return align

    def store(self, node: Node) -> AccessInfo:
        layout = self.layout(node)
        return self._access(("st", node), "st", node, self.out_pointer[node], node.dtype,
                            self._vector(layout.strides, self.space.maps[node], node.shape))

    def position(self, r: Node) -> AccessInfo:
        """The flat C-order index over the reduced axes of ``r``'s operand (argmax/argmin)."""
        x = r.operands[0]
        axes = tuple(r.attr("axes"))
        strides, step = [0] * x.ndim, 1
        for j in reversed(axes):
            strides[j] = step
            step *= x.shape[j]
        return self._access(("ix", r), "ix", r, None, None, self._vector(strides, self.space.reduce_maps[r], x.shape))

    def gather_access(self, g: Node) -> AccessInfo:
        """A gather's base position (``gx<k>``): the offset in its array along the axes it does not gather
        (each runs along a region axis); the gathered axes add their index times their stride
        (:mod:`fusec.codegen.lower`)."""
        x = g.operands[0]
        layout = self.layout(x)
        axes = g.attr("axes")
        result_axis = dict(zip([j for j in range(x.ndim) if j not in axes], g.attr("dims")))
        amap = tuple(None if j in axes else self.space.maps[g][result_axis[j]] for j in range(x.ndim))
        strides, shape = self.gather_strides(g)
        info = self._access(("gx", g), "gx", g, None, None, self._vector(strides, amap, shape))
        info.span = sum(abs(int(st)) * max(d - 1, 0) for st, d in zip(layout.strides, x.shape))
        return info

    def gather_strides(self, g: Node) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The strides (elements) and extents of the array gather ``g`` reads: its operand's, or through its window
        (strides times the window's steps; :meth:`gather_offset` is where the window starts)."""
        x = g.operands[0]
        strides = tuple(int(s) for s in self.layout(x).strides)
        window = gather_window(x.shape, dict(g.attrs))
        if window is None:
            return strides, x.shape
        return tuple(s * step for s, (_, step, _) in zip(strides, window)), tuple(c for _, _, c in window)

    def gather_offset(self, g: Node) -> int:
        """Elements from the array's start to the first of gather ``g``'s window (0 without one)."""
        x = g.operands[0]
        window = gather_window(x.shape, dict(g.attrs))
        return 0 if window is None else sum(f * int(s) for (f, _, _), s in zip(window, self.layout(x).strides))

    def load_var(self, node: Node, user: Node) -> str:
        """The variable of the load through which member ``user`` reads array ``node``."""
        return self.accesses[("ld", node, operand_map(user, node, self.space), self.view(user, node))].var

    def store_access(self, node: Node) -> AccessInfo:
        return self.accesses[("st", node)]

    def position_access(self, r: Node) -> AccessInfo:
        return self.accesses[("ix", r)]

    # -- collapse and index math --------------------------------------------------------------------------
    def _collapse(self) -> None:
        self.infos = list(self.accesses.values())
        clamped_axes = {c[0] for info in self.infos for c in info.clamps}
        self.group_of: dict[int, int] = {}  # region axis -> its collapsed axis
        groups: list[tuple[int, bool, list[int]]] = []
        last_clamped = False
        for a, extent in enumerate(self.shape):
            if extent == 1:
                continue
            red = a in self.reduced
            strides = [i.vector[a] for i in self.infos]
            alone = a in clamped_axes or last_clamped  # a clamped coordinate is read on its own: never merged
            last_clamped = a in clamped_axes
            self.group_of[a] = len(groups) - 1
            if groups and not alone:
                g_extent, g_red, g_strides = groups[-1]
                if g_red == red and all(gs == s * extent for gs, s in zip(g_strides, strides)):
                    groups[-1] = (g_extent * extent, red, strides)
                    continue
            self.group_of[a] = len(groups)
            groups.append((extent, red, strides))
        self.axes = tuple(CollapsedAxis(e, r, tuple(s)) for e, r, s in groups)
        # per access, the collapsed axes along which it reads through a clamp
        self.clamped = [frozenset(self.group_of[c[0]] for c in info.clamps) for info in self.infos]
        loop_class = self.kind != POINTWISE  # pointwise loops over every axis; reductions over the reduced ones
        self.kept_idx = tuple(k for k, g in enumerate(self.axes) if loop_class and not g.reduced)
        self.loop_idx = tuple(k for k, g in enumerate(self.axes) if not (loop_class and not g.reduced))
        self.extents = tuple(g.extent for g in self.axes)
        self.n_kept = math.prod(self.extents[k] for k in self.kept_idx)
        self.n_loop = math.prod(self.extents[k] for k in self.loop_idx)
        biggest = max([self.n_kept, self.n_loop, *self.extents] + [info.span for info in self.infos] + [
            abs(self.infos[i].offset or 0) + sum(abs(g.strides[i]) * max(g.extent - 1, 0) for g in self.axes)
            + sum(abs(c[5]) * max(abs(c[3]), abs(c[4])) + abs(c[1]) + abs(c[2]) * self.shape[c[0]]
                  for c in self.infos[i].clamps)
            for i in range(len(self.infos))],
            default=0)
        self.index_ctype = "int" if biggest < INT32_LIMIT else "long long"
        # contiguous: no kept axis, and one loop axis (or none) that every varying access steps along by 1
        if self.kept_idx or len(self.loop_idx) > 1 or clamped_axes:
            self.contiguous = False
        else:
            self.contiguous = all(self.axes[k].strides[i] == 1 for k in self.loop_idx
                                  for i in range(len(self.infos)) if self.varying(i))

    @property
    def reads_index_views(self) -> bool:
        """Whether the kernel computes an iota's values (read directly or gathered) or clamps an index (a window):
        its source includes the index helpers (``index_views.cuh``)."""
        return any(i.is_iota or i.clamps for i in self.infos) or any(
            n.kind is Kind.GATHER and n.operands[0].op == "iota" for n in self.members)

    def varying(self, i: int) -> bool:
        """Whether access ``i`` (its position in :attr:`infos`) moves along the loop."""
        return any(self.axes[k].strides[i] != 0 or k in self.clamped[i] for k in self.loop_idx)

    def varies_along_kept(self, i: int) -> bool:
        return any(self.axes[k].strides[i] != 0 or k in self.clamped[i] for k in self.kept_idx)

    @cached_property
    def info_index(self) -> dict[str, int]:
        return {info.var: i for i, info in enumerate(self.infos)}

    def split(self, refs: frozenset[str] | set[str]) -> tuple[list[AccessInfo], list[AccessInfo], list[AccessInfo]]:
        """``refs`` by where the kernel reads them, each in declaration order: uniform (the same element
        everywhere: read once per kernel), per row (constant along the loop: read once per row), and in
        the loop (moving along it; positions of argmax/argmin are always there; a gather's base position
        where it moves, else with the uniform or per-row ones)."""
        uniform, row, loop = [], [], []
        for info in sorted((self.infos[self.info_index[v]] for v in refs), key=lambda a: a.key):
            i = self.info_index[info.var]
            if info.pointer is None and not info.is_iota and (info.var.startswith("ix") or self.varying(i)):
                loop.append(info)
            elif not self.varies_along_kept(i) and not self.varying(i):
                uniform.append(info)
            elif not self.varying(i):
                row.append(info)
            else:
                loop.append(info)
        return uniform, row, loop

    def invariant_division(self, node: Node) -> bool:
        """A float32 (or float16, computed in float32) division in a loop whose divisor stays the same over
        the loop (a per-row value, a constant or a ``size``): a reciprocal hoisted per row can divide it
        (``fc::div_invariant``, exact for any divisor: this only decides where it pays)."""
        if (node.op != "div" or not self.full(node)
                or any(d.dtype not in (np.float32, np.float16) or d.dtype != node.dtype for d in node.operands)):
            return False
        divisor = node.operands[1]
        if divisor in self.inside:
            return not self.full(divisor)
        return divisor.op in ("const", "size")

    @property
    def row_contiguous(self) -> bool:
        """One loop axis, along which every access steps by 0 or 1: a row can sit in registers."""
        if self.kind != ROWS or len(self.loop_idx) != 1 or self.n_loop <= 0:
            return False
        k = self.loop_idx[0]
        return all(s in (0, 1) for s in self.axes[k].strides) and not any(k in c for c in self.clamped)


__all__ = ["INT32_LIMIT", "AccessInfo", "CollapsedAxis", "LoopNest", "PhaseScope", "declaration_order",
           "is_array"]
