"""Hypothesis strategies for random fusec IR graphs, shared by the IR, pass and codegen tests.

    from tests.strategies import graphs

    @given(graphs())                                        # anything the op table allows
    def test_...(g): ...

    @given(graphs(dtypes=("f32",), allow_reductions=False))  # f32 pointwise graphs only
    @given(graphs(ops={"add", "exp", "sum"}))               # only these ops (plus casts and consts)

A graph has 1-``max_inputs`` inputs named ``x, y, z, ...`` whose small shapes (rank 0-``max_rank``,
dims 0-``max_dim``, size-1 dims for broadcasting, zero-size extents now and then) mostly broadcast
together, then up to ``max_nodes`` steps, each building one op from the op table over earlier nodes
(fan-out is common): elementwise ops through one of their NumPy loops (``ufunc_loops``), with
``cast`` nodes inserted so each operand has the loop's dtype and scalar ``const`` operands now and
then; reductions over random axes with random ``keepdims``; scans along a random axis; ``expand_dims``,
``squeeze``, ``transpose``, ``broadcast_to``, ``slice`` (any bounds and steps, integer indices), ``reshape``
(merging adjacent axes, splitting one, flattening, size-1 axes), ``window`` (clamped indices); ``cast``;
``size``; and variances as ``x.var`` traces them (a sum of squared deviations from the mean, which
one-pass kernels take). It returns 1-``max_outputs`` outputs (sometimes an input, sometimes the same
node twice). Every node is built with ``make_node``, so every graph passes ``verify``; a step that
``make_node`` refuses (a broadcast mismatch, an empty extent for a
reduction without identity) is skipped, so graphs are never filtered out and generation stays fast.

Every node's dtype is in ``dtypes``: ops whose loops need other dtypes are not drawn, ``where``
needs ``bool`` among them, ``argmax``/``argmin`` need ``i64``. Values are not controlled: graphs
may divide by zero, take the log of negatives or cast NaN to an integer
(``float_to_int_casts=False`` keeps float-to-integer casts out); tests comparing two evaluations
should mask or compare with ``equal_nan``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

import numpy as np
from hypothesis import strategies as st

from fusec.ir import dtypes as fdt
from fusec.ir.graph import Graph, Node, make_node
from fusec.ir.ops import NO_IDENTITY, OPS, Kind, ufunc_loops
from fusec.ir.region import REGION_KINDS, Refusal, make_regions, members_problem, region_space
from fusec.support.errors import FusecError

__all__ = ["graphs", "partitioned_graphs", "ALL_DTYPES", "FLOAT_DTYPES"]

ALL_DTYPES: tuple[str, ...] = tuple(fdt.SHORT_NAMES.values())
FLOAT_DTYPES: tuple[str, ...] = ("f16", "f32", "f64", "bf16")
_INPUT_NAMES = ("x", "y", "z", "w")
_DIMS = (1, 2, 3, 4, 5, 1, 2, 3, 0)  # a draw shrinks to the front: 1
_FLOAT_CONSTS = (1.0, 0.5, -2.0, 0.0, -0.0, 3.25, 1e-07, float("nan"), float("inf"), float("-inf"))
_INT_CONSTS = (1, 2, 0, -1, 3, 7, -5, 100)


class _Skip(Exception):
    """This step cannot be built with the choices drawn: try the next one."""


@functools.cache
def _loops(op: str, allowed: frozenset[np.dtype]) -> tuple[tuple[np.dtype, ...], ...]:
    return tuple(loop for loop in ufunc_loops(OPS[op]) if set(loop) <= allowed)


class _Builder:
    def __init__(self, draw: st.DrawFn, allowed: frozenset[np.dtype], float_to_int_casts: bool,
                 allow_consts: bool, max_dim: int, allow_empty: bool):
        self.draw, self.allowed, self.float_to_int = draw, allowed, float_to_int_casts
        self.allow_consts = allow_consts
        self.dims = st.sampled_from([d for d in _DIMS if d <= max_dim and (d or allow_empty)] or [1])
        self.dtype_list = sorted(allowed, key=str)
        self.pool: list[Node] = []

    def pick(self) -> Node:
        """An earlier node; two times in three one of the two newest, which makes graphs deep."""
        newest = self.draw(st.integers(0, 2)) > 0
        last = min(1, len(self.pool) - 1) if newest else len(self.pool) - 1
        return self.pool[-1 - self.draw(st.integers(0, last))]

    def cast(self, node: Node, dt: np.dtype) -> Node:
        if node.dtype == dt:
            return node
        if not self.float_to_int and fdt.kind(node.dtype) == "f" and dt.kind in "iu":
            raise _Skip
        return make_node("cast", (node,), dtype=dt)

    def const(self, dt: np.dtype) -> Node:
        if dt.kind == "b":
            value: object = self.draw(st.booleans())
        elif fdt.kind(dt) == "f":
            width = 8 * dt.itemsize
            value = self.draw(st.one_of(st.sampled_from(_FLOAT_CONSTS), st.floats(width=width)))
        else:
            info = np.iinfo(dt)
            small = [v for v in _INT_CONSTS if info.min <= v <= info.max]
            value = self.draw(st.one_of(st.sampled_from(small), st.integers(int(info.min), int(info.max))))
        return make_node("const", (), {"value": value}, dtype=dt)

    def axes_subset(self, ndim: int) -> list[int]:
        return [a for a in range(ndim) if self.draw(st.booleans())]

    def elementwise(self, ops: list[str]) -> Node:
        op = self.draw(st.sampled_from(ops))
        loop = self.draw(st.sampled_from(_loops(op, self.allowed)))
        operands = []
        for dt in loop[:-1]:
            if self.allow_consts and self.draw(st.integers(0, 5)) == 0:
                operands.append(self.const(dt))
            else:
                operands.append(self.cast(self.pick(), dt))
        return make_node(op, operands)

    def reduction(self, ops: list[str]) -> Node:
        op = OPS[self.draw(st.sampled_from(ops))]
        x = self.pick()
        if op.accepts == "b":
            if fdt.BOOL not in self.allowed:
                raise _Skip
            x = self.cast(x, fdt.BOOL)
        if op.index_result and fdt.INT64 not in self.allowed:
            raise _Skip
        axes = self.axes_subset(x.ndim)
        if op.index_result and len(axes) not in (1, x.ndim):
            axes = axes[:1]
        if op.name in NO_IDENTITY and any(x.shape[a] == 0 for a in axes):
            raise _Skip
        return make_node(op.name, (x,), {"axes": axes, "keepdims": self.draw(st.booleans())})

    def scan(self, ops: list[str]) -> Node:
        """A scan (``cumsum``/``cumprod``) along a random axis of a picked node (bool cast to int64 first, as
        ``np.cumsum`` does)."""
        x = self.pick()
        if x.ndim == 0:
            raise _Skip
        if x.dtype == fdt.BOOL:
            if fdt.INT64 not in self.allowed:
                raise _Skip
            x = self.cast(x, fdt.INT64)
        axis = self.draw(st.integers(0, x.ndim - 1))
        return make_node(self.draw(st.sampled_from(ops)), (x,), {"axis": axis})

    def moments(self) -> Node:
        """The sum of squared deviations of a float node from its own mean over random axes, as ``x.var``
        traces it (the pattern one-pass variance kernels take: fusec/schedule/one_pass.py)."""
        floats = [dt for dt in self.dtype_list if fdt.kind(dt) == "f"]
        if not floats:
            raise _Skip
        x = self.pick()
        x = self.cast(x, x.dtype if fdt.kind(x.dtype) == "f" else self.draw(st.sampled_from(floats)))
        axes = self.axes_subset(x.ndim)
        if not axes:
            raise _Skip
        total = make_node("sum", (x,), {"axes": axes, "keepdims": True})
        count = make_node("size", (x,), {"axes": axes}, dtype=x.dtype)
        deviation = make_node("sub", (x, make_node("div", (total, count))))
        squared = make_node("square", (deviation,)) if self.draw(st.booleans()) else \
            make_node("mul", (deviation, deviation))
        return make_node("sum", (squared,), {"axes": axes, "keepdims": self.draw(st.booleans())})

    def gather(self) -> Node:
        """``take_along_axis(x, idx, a)`` of an earlier node ``x`` along a random axis of ``n > 0`` elements, ``idx``
        an earlier integer node (right-aligned: it broadcasts against ``x`` on the other axes) as ``v % n`` or
        ``v % n - n``."""
        x = self.pick()
        if x.ndim == 0:
            raise _Skip
        a = self.draw(st.integers(0, x.ndim - 1))
        n = x.shape[a]
        if n == 0:
            raise _Skip

        def fits(v: Node) -> bool:
            off = x.ndim - v.ndim
            return off >= 0 and all(j + off == a or d in (1, x.shape[j + off]) for j, d in enumerate(v.shape))

        ints = [v for v in self.pool if v.dtype.kind in "iu" and v.dtype.itemsize >= 2 and fits(v)]
        if not ints:
            raise _Skip
        v = ints[-1 - self.draw(st.integers(0, len(ints) - 1))]
        idx = make_node("mod", (v, make_node("const", (), {"value": n}, dtype=v.dtype)))
        if v.dtype.kind == "i" and self.draw(st.booleans()):
            idx = make_node("sub", (idx, make_node("const", (), {"value": n}, dtype=v.dtype)))
        if idx.ndim < x.ndim:
            idx = make_node("expand_dims", (idx,), {"axes": list(range(x.ndim - idx.ndim))})
        return make_node("gather", (x, idx), {"axes": [a], "dims": [j for j in range(x.ndim) if j != a]})

    def update(self) -> Node:
        """``y[key] = v`` on an earlier node ``y`` as the tracer makes it (:mod:`fusec.frontend.part_update`): a random
        basic index (integers, slices of any step, None, ``...``), ``v`` a constant or a basic index of another
        earlier node of ``y``'s shape (cast to ``y``'s dtype), sometimes with size-1 axes to broadcast."""
        from fusec.frontend.indexing import basic_index
        from fusec.frontend.part_update import updated

        y = self.pick()
        if y.ndim == 0:
            raise _Skip
        key = []
        for d in y.shape:
            choice = self.draw(st.integers(0, 3))
            if choice == 0 and d > 0:
                key.append(self.draw(st.integers(-d, d - 1)))
            elif choice == 1:
                key.append(slice(None))
            else:
                bound = st.one_of(st.none(), st.integers(-d - 1, d + 1))
                key.append(slice(self.draw(bound), self.draw(bound), self.draw(st.sampled_from([1, -1, 2, -2, 3]))))
        if self.draw(st.integers(0, 3)) == 0:
            key.insert(self.draw(st.integers(0, len(key))), None)
        if self.draw(st.integers(0, 3)) == 0:  # trailing axes whole through an Ellipsis
            cut = self.draw(st.integers(0, len(key)))
            key = [*key[:cut], Ellipsis] if None not in key[cut:] else key
        key_t = tuple(key)
        if basic_index(y, key_t).size == 0 and self.draw(st.integers(0, 3)):
            raise _Skip  # an empty selection changes nothing: drawn rarely
        same = [o for o in self.pool if o.shape == y.shape and o is not y]
        if same and self.draw(st.booleans()):
            v = self.cast(basic_index(same[-1 - self.draw(st.integers(0, len(same) - 1))], key_t), y.dtype)
            if v.ndim and self.draw(st.integers(0, 2)) == 0:  # one axis left to broadcast
                a = self.draw(st.integers(0, v.ndim - 1))
                bounds = [slice(0, 1) if j == a else slice(None) for j in range(v.ndim)]
                v = basic_index(v, tuple(bounds))
        else:
            v = self.const(y.dtype)
        return updated(y, key_t, v)

    def layout(self, ops: list[str]) -> Node:
        op = self.draw(st.sampled_from(ops))
        x = self.pick()
        if op == "expand_dims":
            k = self.draw(st.integers(1, 2))
            axes = self.draw(st.lists(st.integers(0, x.ndim + k - 1), min_size=k, max_size=k, unique=True))
            return make_node(op, (x,), {"axes": sorted(axes)})
        if op == "squeeze":
            ones = [a for a, d in enumerate(x.shape) if d == 1]
            if not ones:
                raise _Skip
            return make_node(op, (x,), {"axes": [a for a in ones if self.draw(st.booleans())] or ones[:1]})
        if op == "transpose":
            return make_node(op, (x,), {"perm": self.draw(st.permutations(range(x.ndim)))})
        if op == "slice":
            return make_node(op, (x,), self.slice_attrs(x.shape))
        if op == "reshape":
            return make_node(op, (x,), {"shape": list(self.reshape_target(x.shape))})
        if op == "window":
            return make_node(op, (x,), self.window_attrs(x.shape))
        lead = [self.draw(self.dims) for _ in range(self.draw(st.integers(0, 1)))]
        shape = lead + [self.draw(self.dims) if d == 1 else d for d in x.shape]
        return make_node(op, (x,), {"shape": shape})

    def reshape_target(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape of the same size that merges a run of adjacent axes, splits one axis into two factors,
        flattens everything, or adds and drops size-1 axes (each has a common refinement with ``shape``)."""
        form = self.draw(st.sampled_from(["merge", "split", "flatten", "units"]))
        if form == "merge" and len(shape) >= 2:
            i = self.draw(st.integers(0, len(shape) - 2))
            j = self.draw(st.integers(i + 2, len(shape)))
            return (*shape[:i], math.prod(shape[i:j]), *shape[j:])
        if form == "split":
            splittable = [(k, a) for k, d in enumerate(shape) for a in range(2, d) if d % a == 0]
            if splittable:
                k, a = self.draw(st.sampled_from(splittable))
                return (*shape[:k], a, shape[k] // a, *shape[k + 1:])
        if form == "units":
            kept = [d for d in shape if d != 1]
            for _ in range(self.draw(st.integers(1, 2))):
                kept.insert(self.draw(st.integers(0, len(kept))), 1)
            return tuple(kept)
        return (math.prod(shape),)

    def slice_attrs(self, shape: tuple[int, ...]) -> dict[str, list]:
        """Per axis a Python slice (bounds past either end, negative, none; steps of either sign) or, now and
        then, an integer index in range (step 0)."""
        starts, stops, steps = [], [], []
        for d in shape:
            if d and self.draw(st.integers(0, 4)) == 0:
                starts.append(self.draw(st.integers(-d, d - 1)))
                stops.append(None)
                steps.append(0)
                continue
            bound = st.none() | st.integers(-d - 2, d + 2)
            starts.append(self.draw(bound))
            stops.append(self.draw(bound))
            steps.append(self.draw(st.sampled_from([None, 1, 1, 2, -1, -2, 3])))
        return {"start": starts, "stop": stops, "step": steps}

    def window_attrs(self, shape: tuple[int, ...]) -> dict[str, list]:
        """Per axis an index clamped into the operand: a start before or past it, a step of either sign (or 0),
        a count up to a few past the extent, and a clamp range inside it."""
        axes = []
        for d in shape:
            if d == 0:
                axes.append((0, 1, 0, 0, 0))
                continue
            lo = self.draw(st.integers(0, d - 1))
            hi = self.draw(st.integers(lo, d - 1))
            axes.append((self.draw(st.integers(-3, d + 2)), self.draw(st.sampled_from([1, 1, -1, 2, 0])),
                         self.draw(st.integers(0, d + 3)), lo, hi))
        return {name: [a[k] for a in axes] for k, name in enumerate(("start", "step", "count", "lo", "hi"))}

    def iota(self) -> Node:
        """``numpy.arange``'s values as long as a picked node's last axis (so they broadcast against it), of a
        numeric dtype, from a small start by a small step (a fraction for floats)."""
        numeric = [dt for dt in self.dtype_list if fdt.kind(dt) in "iuf"]
        x = self.pick()
        count = x.shape[-1] if x.ndim and x.shape[-1] else self.draw(self.dims)
        dt = self.draw(st.sampled_from(numeric))
        start = self.draw(st.integers(0 if dt.kind == "u" else -5, 5))
        step = self.draw(st.sampled_from([1, 2, -1] if fdt.kind(dt) != "f" else [1, 0.25, -0.75, 0.1]))
        if dt.kind == "u" and step < 0:
            step = 1
        from fusec.ir import iota as _iota

        dt_, count, b0, b1 = _iota.resolve(start, start + step * count, step, dt)
        if count == 0:
            raise _Skip
        return make_node("iota", (), {"count": count, "start": b0, "next": b1}, dtype=dt_)

    def size(self) -> Node:
        numeric = [dt for dt in self.dtype_list if fdt.kind(dt) in "iuf"]
        if not numeric:
            raise _Skip
        x = self.pick()
        dt = self.draw(st.sampled_from(numeric))
        return make_node("size", (x,), {"axes": self.axes_subset(x.ndim)}, dtype=dt)

    def shape(self, base: tuple[int, ...], max_rank: int) -> tuple[int, ...]:
        if self.draw(st.integers(0, 9)) == 0:  # now and then one that need not broadcast with the rest
            return tuple(self.draw(self.dims) for _ in range(self.draw(st.integers(0, max_rank))))
        rank = self.draw(st.integers(0, len(base)))
        suffix = base[len(base) - rank:]
        return tuple(1 if d != 1 and self.draw(st.integers(0, 3)) == 0 else d for d in suffix)


@st.composite
def graphs(draw: st.DrawFn, max_nodes: int = 12, dtypes: Iterable[str | np.dtype] = ALL_DTYPES, *,
           allow_reductions: bool = True, allow_layout: bool = True, allow_consts: bool = True,
           allow_size: bool = True, allow_scans: bool = True, ops: Iterable[str] | None = None, max_inputs: int = 3,
           max_outputs: int = 3, max_rank: int = 3, max_dim: int = 5, allow_empty: bool = True,
           float_to_int_casts: bool = True, allow_gather: bool = False, allow_updates: bool = False,
           name: str = "g") -> Graph:
    """A random valid :class:`Graph` (see the module docstring).

    ``max_nodes``: at most this many build steps (each adds one op, plus the casts and consts it
    needs); ``dtypes``: the dtypes every node may have (one dtype: no casts); ``ops``: the
    elementwise, reduction, layout and ``size`` ops that may be drawn (default: all; ``cast`` and
    ``const`` nodes still come where operands need them, see ``allow_consts``); the ``allow_*``
    flags switch whole kinds off; ``allow_empty``: whether a dimension may be 0; ``allow_gather``: gathers
    (``take_along_axis`` form, over a random axis of an input or a computed value) at indices computed from an
    integer node as ``v % n`` or ``v % n - n``, so every index is in range, negative ones included;
    ``allow_updates``: assignments to part of a computed value, ``y[key] = v`` (:meth:`_Builder.update`).
    """
    allowed = frozenset(fdt.ir_dtype(d) for d in dtypes)
    chosen = set(OPS) if ops is None else set(ops)
    b = _Builder(draw, allowed, float_to_int_casts, allow_consts, max_dim, allow_empty)
    ew = sorted(o.name for o in OPS.values() if o.kind is Kind.ELEMENTWISE and o.name != "cast"
                and o.name in chosen and _loops(o.name, allowed))
    red = sorted(o.name for o in OPS.values() if o.kind is Kind.REDUCTION and o.name in chosen)
    lay = sorted(o.name for o in OPS.values() if o.kind is Kind.LAYOUT and o.name in chosen)
    scans = sorted(o.name for o in OPS.values() if o.kind is Kind.SCAN and o.name in chosen)
    steps = [("elementwise", ew)] * 4 if ew else []
    steps += [("reduction", red)] * 2 if allow_reductions and red else []
    steps += [("layout", lay)] * 2 if allow_layout and lay else []
    steps += [("scan", scans)] if allow_scans and scans else []
    steps += [("cast", [])] if len(allowed) > 1 else []
    steps += [("gather", [])] * 2 if allow_gather else []
    steps += [("update", [])] * 4 if allow_updates else []
    steps += [("size", [])] if allow_size and "size" in chosen else []
    steps += [("iota", [])] if ops is not None and "iota" in chosen and any(
        fdt.kind(d) in "iuf" for d in allowed) else []
    steps += [("moments", [])] if allow_reductions and allow_size and "sum" in chosen and any(
        fdt.kind(d) == "f" for d in allowed) else []

    base = tuple(draw(b.dims) for _ in range(draw(st.integers(0, max_rank))))
    n_inputs = draw(st.integers(1, max_inputs))
    for i in range(n_inputs):
        input_name = _INPUT_NAMES[i] if i < len(_INPUT_NAMES) else f"x{i}"
        b.pool.append(make_node("input", (), {"name": input_name, "index": i},
                                dtype=draw(st.sampled_from(b.dtype_list)), shape=b.shape(base, max_rank)))
    inputs = tuple(b.pool)
    for _ in range(draw(st.integers(1, max_nodes)) if steps else 0):
        kind, choices = draw(st.sampled_from(steps))
        try:
            if kind == "elementwise":
                node = b.elementwise(choices)
            elif kind == "reduction":
                node = b.reduction(choices)
            elif kind == "layout":
                node = b.layout(choices)
            elif kind == "scan":
                node = b.scan(choices)
            elif kind == "size":
                node = b.size()
            elif kind == "iota":
                node = b.iota()
            elif kind == "moments":
                node = b.moments()
            elif kind == "gather":
                node = b.gather()
            elif kind == "update":
                node = b.update()
            else:
                node = b.cast(b.pick(), draw(st.sampled_from(b.dtype_list)))
        except (_Skip, FusecError):
            continue
        b.pool.append(node)
    outputs = [b.pool[-1]]  # the newest node, then any others (an input, a repeat)
    for _ in range(draw(st.integers(0, max_outputs - 1))):
        outputs.append(b.pool[-1 - draw(st.integers(0, len(b.pool) - 1))])
    return Graph(name, inputs, tuple(outputs))



@st.composite
def partitioned_graphs(draw: st.DrawFn, **graph_options: object) -> Graph:
    """A graph from :func:`graphs` (``graph_options`` are passed on) with regions that are well formed
    (they pass ``verify``) but not chosen by fusion: contiguous runs of ``graph.nodes`` (a run that is not
    one kernel split into single nodes), each sometimes recomputing an elementwise or layout node of an
    earlier region, and of the kind of their iteration space; ``const`` nodes are sometimes left at the top
    level. For the text form and the verifier, not for codegen."""
    g = draw(graphs(**graph_options))  # type: ignore[arg-type]
    body = [n for n in g.nodes if n.op != "input"]
    runs: list[list[Node]] = []
    for node in body:
        if node.op == "const" and draw(st.booleans()):
            continue  # stays at the top level
        if not runs or draw(st.integers(0, 2)) == 0:
            runs.append([])
        runs[-1].append(node)
    runs = [part for run in runs for part in ([run] if _space_kind(run) else [[n] for n in run])]
    index = {n: i for i, n in enumerate(g.nodes)}
    for i in range(1, len(runs)):
        earlier = [n for run in runs[:i] for n in run if n.kind in (Kind.ELEMENTWISE, Kind.LAYOUT)]
        if earlier and draw(st.integers(0, 2)) == 0:
            wider = sorted({*runs[i], draw(st.sampled_from(earlier))}, key=index.__getitem__)
            runs[i] = wider if _space_kind(wider) else runs[i]
    specs = [(f"k{i}", _space_kind(run) or draw(st.sampled_from(REGION_KINDS)), run) for i, run in enumerate(runs)]
    return Graph(g.name, g.inputs, g.outputs, make_regions(specs, g.users, g.outputs))


def _space_kind(nodes: list[Node]) -> str | None:
    """The kind of the one iteration space of ``nodes``, or None (none, or only sources, or nodes that cannot be one
    kernel for another reason: a slice of a value it computes, scans it cannot run together)."""
    try:
        space = region_space(nodes)
    except Refusal:
        return None
    return None if members_problem(nodes, space) is not None else space.kind
