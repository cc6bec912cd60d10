"""The random-graph corpus of the differential GPU fuzzer: graphs whose results a GPU must reproduce
exactly, a text file to ship them in, their inputs, and the kernel sources they compile to.

    graphs = generate(1000, seed=0)        # deterministic for (count, seed, Hypothesis version)
    save(".fuzz/corpus.fir", graphs)       # print_graph texts, each followed by a line "// ----"
    graphs = load(".fuzz/corpus.fir")      # the same graphs, parsed (what the GPU machine runs)
    graph_sources(i, g, make_plan(g))      # every kernel source the GPU test compiles for graph i
    run_corpus(graphs, cupy, run)          # the differential run (NumPy in place of CuPy on a CPU)

**Families.** Each example is drawn from one family (``FAMILIES``), each a set of ``tests.strategies.graphs``
options, so that NumPy defines every result exactly and an exact comparison is valid on a GPU:

- ``int``: bool and every integer dtype, every op except ``pow`` (a signed integer to a negative power
  raises in NumPy) and ``reciprocal`` (NumPy's integer ``1/0`` is undefined); all reductions and scans
  (integer sums, products and their prefixes wrap, exactly);
- ``uint``: bool and the unsigned dtypes, every op except ``reciprocal`` (``pow`` included; scans of the narrow
  unsigned dtypes wrap in them);
- ``float``: f16, f32, f64, bf16 with bool, i8, i32, i64, u8 (for ``where``, comparisons, ``argmax``, and
  int -> float casts), only the exactly rounded ops ``EXACT_FLOAT_OPS`` (plus the integer-only bit ops,
  which have no float loop) and only the exact reductions ``EXACT_REDUCTIONS`` (float sum/prod and float
  scans are tested elsewhere, with tolerances);
- ``int_reduce``, ``float_reduce``: the same rules, with reductions drawn more often (no layout ops, a few
  elementwise ops) and up to 16 steps, for rows/cols kernels and multi-phase reductions;
- ``views``: slices (any bounds and steps, integer indices), transposes, squeeze/expand_dims and reshapes
  (merges, splits, flattening) of inputs and of computed values beside the exact reductions and a few exact
  elementwise ops, up to 16 steps: slices moved below reductions and elementwise ops, reshapes rewritten over
  refined shapes, read through offsets and strides in every kernel kind; where cuts do not nest or a slice
  reads part of a merged axis, the reshape is read back between kernels (its operand written, then viewed). A
  graph fusec still refuses (a reshape of a constant: ``UnsupportedError`` when planning) is skipped;
- ``gathers``: ``take_along_axis`` gathers of inputs and of computed values over random axes, the indices
  computed from integer nodes as ``v % n`` (or ``v % n - n``: negative), so every one is in range; gathers
  moved to the arguments through elementwise ops and read at computed positions in every kernel kind;
- ``updates``: assignments to part of computed values (``y[key] = v`` with any basic index, as the tracer
  makes them: ``where`` over iota masks, ``v`` read through a window or a gather) beside reductions and slices;
- ``joins``: iotas (``numpy.arange``'s values), windows (clamped indices, as pads and joins read) and slices
  beside the exact reductions and a few exact elementwise ops (``where`` and ``lt`` as joins use them):
  windows moved below reductions and elementwise ops, iotas computed from indices in every kernel kind.

No family casts floats to integers (``float_to_int_casts=False``).

**Signs that NumPy does not fix.** Two sign bits are not part of NumPy's semantics: the sign of a NaN an
operation produces (x86 makes ``0/0`` a negative NaN, CUDA a positive one), and which zero
``maximum(-0.0, 0.0)`` returns (it differs between NumPy's own loops; the same for ``minimum``, ``fmax``,
``fmin`` and the ``max``/``min``/``nanmax``/``nanmin`` reductions). So a graph is dropped when it reads such a
sign (:func:`hazards`): ``signbit(x)`` or ``copysign(_, x)`` where ``x`` is not an input, a constant or an
int -> float cast (through layout ops), and ``div(_, x)`` where ``x`` may be a zero of free sign
(``x / +-0`` is ``+-inf``). A zero of free sign that reaches an output is allowed there:
:func:`zero_sign_free` names those outputs and :func:`differences` ignores the sign of their zeros. NaNs
are compared by position (their sign and payload are free); everything else bit for bit.

**Schedules.** Every ``SCHEDULE_EVERY``-th graph (offset 2) also runs on the input views its layout run would
take, with other schedules forced on its kernels (:func:`schedule_variants`): cols reductions split across
blocks, rows regions as cols, tiled transposes, vectors along broadcast rows, whichever fit.

**Layouts.** Graph ``i`` runs on C-contiguous inputs; every ``LAYOUT_EVERY``-th graph also on
non-contiguous views (:func:`layout_variants`, :func:`place`): transposed (ndim >= 2), every other element
along the last axis of a larger buffer, or reversed along axis 0 (a negative stride, a pointer that is
not 16-byte aligned). The kernel source depends on the layout class, so :func:`graph_sources` renders
both, mirroring what ``fusec.runtime.launch.run_plan`` does (graph inputs as given, intermediates fresh and
C-contiguous, pointers 16-byte aligned unless offset).
"""

from __future__ import annotations

import contextlib
import re
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from fusec.codegen.render import render_kernel
from fusec.codegen.spec import KernelSpec
from fusec.ir.dtypes import kind as dtype_kind
from fusec.ir.graph import Graph, Node
from fusec.ir.interpret import to_xp
from fusec.ir.ops import OPS, Kind, ufunc_loops
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.kinds import generate as generate_kernel
from fusec.runtime.plan import Plan, make_plan
from fusec.schedule import ArrayLayout, alignment, layouts_of
from fusec.support.errors import UnsupportedError
from tests.helpers import random_array
from tests.strategies import graphs

SEPARATOR = "// ----"
LAYOUT_EVERY = 5  # graph i with i % LAYOUT_EVERY == 0 also runs on non-contiguous input views
SCHEDULE_EVERY = 5  # graph i with i % SCHEDULE_EVERY == 2 also runs with other schedules forced (SCHEDULE_CHOICES)
# per region kind, schedules the heuristics seldom pick for the corpus's small shapes: cols reductions split
# across blocks (by the last block, after a grid barrier, warps along the reduction), rows run as cols,
# transposes through shared-memory tiles, vectors along a broadcast row
SCHEDULE_CHOICES = {
    "cols": ("cols:grid_barrier,blocks=2", "cols:last_block,blocks=3", "cols:grid_barrier,tile=1,split=32,blocks=3",
             "cols:tiles,tile=4,split=8"),
    "rows": ("cols:grid_barrier,tile=1,split=32,blocks=2", "cols:last_block,tile=2,split=16,blocks=3",
             "cols:grid_barrier,tile=8,split=4,blocks=2"),
    "pointwise": ("pointwise:tiled,tile=8", "pointwise:inner_vector,vec=2", "pointwise:tiled,tile=16"),
}

# float ops NumPy computes exactly (one correct rounding, or no rounding at all)
EXACT_FLOAT_OPS = frozenset({
    "add", "sub", "mul", "div", "sqrt", "neg", "abs", "pos", "square", "maximum", "minimum", "fmax", "fmin",
    "where", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "signbit", "floor", "ceil",
    "trunc", "rint", "copysign", "logical_and", "logical_or", "logical_xor", "logical_not",
})
EXACT_REDUCTIONS = frozenset({"max", "min", "nanmax", "nanmin", "argmax", "argmin", "any", "all"})
# elementwise ops without a float loop (bit ops): exact on the integers they apply to
INT_ONLY_OPS = frozenset(
    op.name for op in OPS.values()
    if op.kind is Kind.ELEMENTWISE and op.name != "cast" and not any(dtype_kind(d) == "f" for loop in ufunc_loops(op)
                                                                     for d in loop))
LAYOUT_OPS = frozenset(op.name for op in OPS.values() if op.kind is Kind.LAYOUT)
ALL_OPS = frozenset(OPS)

_INT_DTYPES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
_FLOAT_DTYPES = ("bool", "i8", "i32", "i64", "u8", "f16", "f32", "f64", "bf16")
FAMILIES: dict[str, dict[str, Any]] = {
    "int": dict(dtypes=_INT_DTYPES, ops=ALL_OPS - {"pow", "reciprocal"}),
    "uint": dict(dtypes=("bool", "u8", "u16", "u32", "u64"), ops=ALL_OPS - {"reciprocal"}),
    "float": dict(dtypes=_FLOAT_DTYPES,
                  ops=EXACT_FLOAT_OPS | INT_ONLY_OPS | EXACT_REDUCTIONS | LAYOUT_OPS | {"size"}),
    # reductions more often (no layout ops, no size), next to the elementwise ops that feed and follow
    # them, and deeper graphs: rows/cols kernels, several reductions in one kernel, several phases
    "int_reduce": dict(dtypes=_INT_DTYPES, allow_layout=False, allow_size=False, max_nodes=16,
                       ops={op.name for op in OPS.values() if op.kind is Kind.REDUCTION}
                       | {"add", "sub", "mul", "maximum", "minimum", "where", "lt", "eq", "neg", "abs",
                          "bitwise_xor", "floordiv", "mod"}),
    "float_reduce": dict(dtypes=_FLOAT_DTYPES, allow_layout=False, allow_size=False, max_nodes=16,
                         ops=EXACT_REDUCTIONS | {"add", "sub", "mul", "div", "maximum", "minimum", "fmax",
                                                 "where", "lt", "eq", "neg", "abs", "sqrt", "isnan"}),
    # views: slices (any bounds and steps, integer indices) and transposes of inputs and of computed values, next
    # to reductions and elementwise ops, so slices move below reductions and into rows and cols kernels
    "views": dict(dtypes=("bool", "i32", "i64", "f16", "f32", "bf16"), allow_size=False, max_nodes=16,
                  ops=EXACT_REDUCTIONS | {"slice", "transpose", "expand_dims", "squeeze", "reshape", "add", "sub",
                                          "mul", "maximum", "where", "lt", "neg", "abs"}),
    # gathers: take_along_axis of inputs and computed values over random axes, at indices computed in range
    # (negative ones too) from integer inputs and values, next to elementwise ops and the exact reductions
    "gathers": dict(dtypes=("bool", "i16", "i32", "i64", "f16", "f32", "bf16"), allow_size=False, allow_gather=True,
                    max_nodes=14, ops=EXACT_REDUCTIONS | {"transpose", "expand_dims", "slice", "add", "sub", "mul",
                                                          "maximum", "where", "lt", "neg", "abs"}),
    # joins: iotas (numpy.arange's values), windows (clamped indices: pads and the parts of joins), slices and
    # where over them, next to reductions: windows moved below reductions and elementwise ops, read through
    # clamped indices and index arithmetic in every kernel kind
    "joins": dict(dtypes=("bool", "i32", "i64", "f16", "f32", "bf16"), allow_size=False, max_nodes=16,
                  ops=EXACT_REDUCTIONS | {"iota", "window", "slice", "transpose", "expand_dims", "broadcast_to",
                                          "add", "sub", "mul", "maximum", "where", "lt", "neg", "abs"}),
    # updates: assignments to part of computed values (y[key] = v, any basic index: a where over iota masks, v
    # read through a window or a gather), next to reductions, slices and elementwise ops
    "updates": dict(dtypes=("bool", "i32", "i64", "f16", "f32", "bf16"), allow_size=False, allow_updates=True,
                    max_nodes=12,
                    ops=EXACT_REDUCTIONS | {"slice", "transpose", "expand_dims", "add", "sub", "mul", "maximum",
                                            "where", "lt", "neg", "abs"}),
}
FAMILY_WEIGHTS = (("float",) * 3 + ("int",) * 2 + ("uint",) + ("int_reduce", "float_reduce") * 2 + ("views",) * 2
                  + ("gathers",) * 2 + ("joins",) * 2 + ("updates",) * 2)
# (drawn uniformly)
COMMON_OPTIONS: dict[str, Any] = dict(float_to_int_casts=False)

# ---- signs NumPy leaves free ---------------------------------------------------------------------------

ZERO_SIGN_FREE_OPS = frozenset({"maximum", "minimum", "fmax", "fmin", "max", "min", "nanmax", "nanmin"})
ZERO_SIGN_FIXING_OPS = frozenset({"abs", "square"})  # +0.0 whatever the operand's zero


def zero_sign_free(graph: Graph) -> set[Node]:
    """Float nodes that may be a zero whose sign NumPy does not fix: the results of maximum/minimum-type
    ops and whatever carries such a zero's sign on (``neg``, ``mul``, ``sqrt``, ``where``, casts, layout
    ops, ``copysign`` through its sign operand, ...)."""
    free: set[Node] = set()
    for n in graph.nodes:
        if dtype_kind(n.dtype) != "f" or not n.operands or n.op == "size" or n.op in ZERO_SIGN_FIXING_OPS:
            continue
        if n.op in ZERO_SIGN_FREE_OPS:
            free.add(n)
        elif n.op == "copysign":
            if n.operands[1] in free:
                free.add(n)
        elif any(o in free for o in n.operands):
            free.add(n)
    return free


def _sign_exact(node: Node) -> bool:
    """Whether NumPy and a GPU agree on every sign bit of ``node``: no computed NaN, no free zero."""
    while node.kind is Kind.LAYOUT:
        node = node.operands[0]
    if dtype_kind(node.dtype) != "f" or node.op in ("input", "const", "size", "iota"):
        return True
    return node.op == "cast" and node.operands[0].dtype.kind in "biu"


def hazards(graph: Graph) -> list[str]:
    """Why the results of ``graph`` are not defined bit for bit (empty: they are); see the module docstring."""
    free = zero_sign_free(graph)
    found = []
    for n in graph.nodes:
        if n.op == "signbit" and not _sign_exact(n.operands[0]):
            found.append("signbit of a computed float (its NaNs' sign is free)")
        elif n.op == "copysign" and not _sign_exact(n.operands[1]):
            found.append("copysign from a computed float (its NaNs' sign is free)")
        elif n.op == "div" and n.operands[1] in free:
            found.append("division by a maximum/minimum result (x / +-0 is +-inf)")
    return found


# ---- generating -------------------------------------------------------------------------------------------


@st.composite
def fuzz_graphs(draw: st.DrawFn, families: Sequence[str] = FAMILY_WEIGHTS) -> tuple[str, Graph]:
    """A (family, graph) pair: the family drawn from ``families``, then a graph of its options."""
    family = draw(st.sampled_from(list(families)))
    return family, draw(graphs(**COMMON_OPTIONS, **FAMILIES[family]))


def _degenerate(graph: Graph) -> bool:
    """Whether the graph has reductions but none reduces an axis longer than 1 (Hypothesis draws
    ``axes=[]`` often): :func:`generate` keeps only a quarter of those."""
    reductions = [n for n in graph.nodes if n.kind is Kind.REDUCTION]
    return bool(reductions) and not any(n.operands[0].shape[a] > 1 for n in reductions for a in n.attr("axes"))


def _key(graph: Graph) -> str:
    return print_graph(Graph("g", graph.inputs, graph.outputs))


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis (6.131+) mixes literals of the loaded non-test modules of the project into its draws,
    which would make :func:`generate` depend on which fusec modules happen to be imported and on their
    source: switch that off (Hypothesis internals; where they differ, nothing is patched)."""
    try:
        from hypothesis.internal.conjecture import providers

        empty = providers.Constants()
        original = providers._get_local_constants
        cache = providers.CONSTANTS_CACHE.cache
    except (ImportError, AttributeError, TypeError):
        yield
        return
    providers._get_local_constants = lambda: empty
    cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.clear()


def generate(count: int, seed: int = 0) -> list[Graph]:
    """``count`` distinct hazard-free graphs named ``fuzz<i>_<family>``, the same ones for the same
    ``(count, seed)`` and Hypothesis version (whatever fusec modules are loaded, whatever their source):
    a ``@given`` run with ``@seed``, no database, the generate phase only and no project constants
    (:func:`_no_local_constants`), collecting what it draws. Skipped: graphs with :func:`hazards`,
    repeats, three in four graphs whose reductions reduce nothing longer than 1 (:func:`_degenerate`),
    and graphs that plan to no kernel at all (everything folds to constants, outputs that are inputs;
    this filter depends on the passes). More runs (seeds ``seed``, ``seed + 1_000_003``, ...) follow
    until there are ``count``."""
    out: list[Graph] = []
    seen: set[str] = set()
    run = 0
    drawn: list[tuple[str, Graph]] = []
    while len(out) < count:
        need = count - len(out)
        drawn.clear()

        @settings(max_examples=need + need // 2 + 10, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), derandomize=False)
        @hypothesis_seed(seed + 1_000_003 * run)
        @given(fuzz_graphs())
        def collect(pair: tuple[str, Graph]) -> None:
            drawn.append(pair)

        with _no_local_constants():
            collect()
        run += 1
        for family, g in drawn:
            if len(out) == count:
                break
            key = _key(g)
            if key in seen or hazards(g) or (_degenerate(g) and zlib.crc32(key.encode()) % 4):
                continue
            try:
                if not make_plan(g).kernels:
                    continue
            except UnsupportedError:  # a documented refusal (a reshape of a constant that no cut holds): not a bug
                continue
            except Exception:  # kept: planning crashes are for the fuzz run to report
                pass
            seen.add(key)
            out.append(Graph(f"fuzz{len(out)}_{family}", g.inputs, g.outputs))
        if run > 50:
            raise RuntimeError(f"generated only {len(out)} of {count} distinct graphs")
    return out


# ---- the corpus file -----------------------------------------------------------------------------------------


def dumps(graphs_: Iterable[Graph]) -> str:
    return "".join(print_graph(g) + "\n" + SEPARATOR + "\n" for g in graphs_)


def loads(text: str, filename: str | None = None) -> list[Graph]:
    chunks, current = [], []
    for line in text.splitlines():
        if line.strip() == SEPARATOR:
            chunks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if "\n".join(current).strip():
        chunks.append("\n".join(current))
    return [parse(c, filename) for c in chunks if c.strip()]


def save(path: str | Path, graphs_: Iterable[Graph]) -> None:
    """Write the graphs as ``print_graph`` texts, each followed by a line ``// ----``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(graphs_))


def load(path: str | Path) -> list[Graph]:
    """The graphs of a corpus file written by :func:`save`."""
    return loads(Path(path).read_text(), str(path))


# ---- inputs and layouts -----------------------------------------------------------------------------------------


def graph_seed(graph: Graph) -> int:
    """The seed of a graph's input data: crc32 of its text (which names its index and family)."""
    return zlib.crc32(print_graph(graph).encode())


def make_inputs(graph: Graph, seed: int) -> list[np.ndarray]:
    """Fresh random inputs with special values (NaN, +-inf, -0.0 / integer extremes) mixed in."""
    rng = np.random.default_rng(seed)
    return [random_array(rng, n.shape, n.dtype) for n in graph.inputs]


def layout_variants(index: int, graph: Graph) -> tuple[str, ...] | None:
    """The view kind of each input for graph ``index``'s layout run, or None when it has none (not a
    ``LAYOUT_EVERY``-th graph, or only 0-d inputs). Kinds: ``t`` transposed (ndim >= 2), ``step`` every other
    element of the last axis, ``neg`` reversed along axis 0; ``c`` for a 0-d input."""
    if index % LAYOUT_EVERY:
        return None
    return _view_kinds(index, graph)


def _view_kinds(index: int, graph: Graph) -> tuple[str, ...] | None:
    kinds = []
    for k, n in enumerate(graph.inputs):
        options = (["t"] if n.ndim >= 2 else []) + (["step", "neg"] if n.ndim >= 1 else [])
        kinds.append(options[(index // LAYOUT_EVERY + k) % len(options)] if options else "c")
    return tuple(kinds) if any(k != "c" for k in kinds) else None


def schedule_variants(index: int, graph: Graph, plan: Plan) -> tuple[tuple[str, ...] | None, dict[str, str]] | None:
    """Graph ``index``'s schedule run: (the input views, as :func:`layout_variants` would choose them, or
    None; the schedule forced on each kernel that one of :data:`SCHEDULE_CHOICES` fits), or None (not a
    ``SCHEDULE_EVERY``-th graph, or no choice fits any kernel)."""
    from fusec.kinds import analyze, resolve
    from fusec.schedule import ScheduleError

    if index % SCHEDULE_EVERY != 2:
        return None
    kinds = _view_kinds(index, graph)
    layouts: dict[Node, ArrayLayout] = dict(zip(plan.graph.inputs, input_layouts(graph, kinds)))
    forced: dict[str, str] = {}
    for k, kernel in enumerate(plan.kernels):
        nest = analyze(kernel.region, kernel_layouts(kernel, layouts))
        choices = SCHEDULE_CHOICES.get(nest.kind, ())
        for j in range(len(choices)):
            choice = choices[(index // SCHEDULE_EVERY + k + j) % len(choices)]
            try:
                resolve(nest, choice)
            except ScheduleError:
                continue
            forced[kernel.name] = choice
            break
        for n in kernel.outputs:
            layouts[n] = fresh_layout(n)
    return (kinds, forced) if forced else None


def _gap_fill(a: np.ndarray) -> np.ndarray:
    """What fills the elements between a ``step`` view's: 0x5A bytes (bool: the negated values)."""
    if a.dtype.kind == "b":
        return ~a
    return np.full(a.shape + (a.dtype.itemsize,), 0x5A, np.uint8).view(a.dtype).reshape(a.shape)


def place(xp: Any, a: np.ndarray, kind: str) -> tuple[Any, Any]:
    """``(view, base)``: an ``xp`` array with the values of ``a`` laid out as ``kind`` says, and the
    contiguous buffer it views (the whole of which must stay unchanged)."""
    if kind == "c" or a.ndim == 0:
        base = to_xp(xp, a)
        return base, base
    if kind == "t":
        perm = tuple(reversed(range(a.ndim)))  # its own inverse
        base = to_xp(xp, a.transpose(perm))
        return base.transpose(perm), base
    if kind == "step":
        host = np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        host[..., ::2] = a
        host[..., 1::2] = _gap_fill(a)
        base = to_xp(xp, host)
        return base[..., ::2], base
    if kind == "neg":
        base = to_xp(xp, a[::-1])
        return base[::-1], base
    raise ValueError(f"unknown layout kind {kind!r}")


def host_layout(view: np.ndarray, base: np.ndarray) -> ArrayLayout:
    """The layout the GPU sees for ``view`` of ``base`` when ``base`` sits at a 256-byte aligned address
    (as CuPy's allocations do): strides from the view, alignment from its offset into the base."""
    itemsize = view.dtype.itemsize
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0] if view.size else 0
    return ArrayLayout(tuple(s // itemsize for s in view.strides), bool(view.flags.c_contiguous),
                       alignment(offset + 256))


def fresh_layout(node: Node) -> ArrayLayout:
    """The layout of a fresh C-contiguous array (``cupy.empty``): all strides 0 when it is empty."""
    if 0 in node.shape:
        return ArrayLayout((0,) * node.ndim, True, 16)
    return ArrayLayout.c_contiguous(node.shape)


def plan_specs(plan: Plan, input_layouts: Sequence[ArrayLayout], prefix: str | None = None,
               schedules: Mapping[str, str] | None = None) -> list[KernelSpec]:
    """The kernel specs ``run_plan`` builds for ``plan`` given the graph inputs' layouts (intermediates
    fresh and contiguous) and the ``schedules`` forced by kernel name. ``prefix`` renames the kernels
    ``<prefix>_<region>`` (for one module of many)."""
    layouts: dict[Node, ArrayLayout] = dict(zip(plan.graph.inputs, input_layouts))
    specs = []
    for kernel in plan.kernels:
        name = None if prefix is None else f"{prefix}_{kernel.region.name}"
        specs.append(generate_kernel(kernel.region, kernel_layouts(kernel, layouts),
                                             (schedules or {}).get(kernel.name), name=name).spec)
        for n in kernel.outputs:
            layouts[n] = fresh_layout(n)
    return specs


def kernel_layouts(kernel: Any, layouts: Mapping[Node, ArrayLayout]) -> dict[Node, ArrayLayout]:
    """The layouts of the arrays ``kernel`` reads, as ``run_plan`` hands them over: ``layouts`` has the graph's
    inputs and earlier kernels' outputs; reshapes of arguments (views taken before the kernels) are computed
    from them. A schedule chosen for other layouts (a reshape of a transposed argument taken as contiguous)
    may not fit the kernel the run builds. Arrays left out are fresh C-contiguous ones (a reshape CuPy copies)."""
    arrays = [n for n in kernel.region.inputs if n.op not in ("const", "size", "iota")]
    views = layouts_of([n for n in arrays if n not in layouts], layouts)  # reshapes of arguments
    return {n: layout for n in arrays if (layout := layouts.get(n) or views.get(n)) is not None}


def input_layouts(graph: Graph, kinds: Sequence[str] | None) -> list[ArrayLayout]:
    """The layouts of the graph's inputs as :func:`place` lays them out (``kinds`` None: contiguous)."""
    out = []
    for k, n in enumerate(graph.inputs):
        host = np.zeros(n.shape, n.dtype)
        view, base = place(np, host, kinds[k] if kinds else "c")
        out.append(host_layout(view, base))
    return out


def graph_sources(index: int, graph: Graph, plan: Plan) -> list[str]:
    """Every kernel source the GPU test compiles for graph ``index``: contiguous inputs, then its layout and
    schedule runs."""
    sources = [render_kernel(s) for s in plan_specs(plan, input_layouts(graph, None))]
    for kinds, schedules in graph_runs(index, graph, plan)[1:]:
        sources += [render_kernel(s) for s in plan_specs(plan, input_layouts(graph, kinds), schedules=schedules)]
    return sources


def graph_runs(index: int, graph: Graph, plan: Plan) -> list[tuple[tuple[str, ...] | None, dict[str, str] | None]]:
    """Graph ``index``'s runs: (input views or None, forced schedules or None) each, contiguous first."""
    runs: list[tuple[tuple[str, ...] | None, dict[str, str] | None]] = [(None, None)]
    if layout_variants(index, graph) is not None:
        runs.append((layout_variants(index, graph), None))
    forced = schedule_variants(index, graph, plan)
    if forced is not None:
        runs.append(forced)
    return runs


# ---- comparing -------------------------------------------------------------------------------------------------


def _show(a: np.ndarray, index: tuple[int, ...]) -> str:
    v = a[index]
    if a.dtype.kind == "b":
        return f"{bool(v)} (byte {int(np.asarray(v).view(np.uint8))})"
    return repr(v.item()) if a.dtype.kind in "iu" else f"{v!r}"


def differences(got: Any, want: Any, zero_sign_free_output: bool = False, limit: int = 5) -> str | None:
    """None when ``got`` is ``want`` exactly (dtype, shape, every element: bools byte for byte, integers
    equal, floats bit for bit except that NaNs match NaNs and, with ``zero_sign_free_output``, 0.0 matches
    -0.0); else what differs, with the first ``limit`` differing elements."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind == "b":
        bad = got.view(np.uint8) != want.view(np.uint8)
    elif want.dtype.kind in "iu":
        bad = got != want
    else:
        both_nan = np.isnan(got) & np.isnan(want)
        bad = ~((got == want) | both_nan)
        signs = (np.signbit(got) != np.signbit(want)) & ~both_nan
        if zero_sign_free_output:
            signs &= want != 0
        bad |= signs
    bad = np.asarray(bad)
    if not bad.any():
        return None
    where = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:limit]] if bad.ndim else [()]
    shown = "; ".join(f"{list(ix)}: got {_show(got, ix)}, expected {_show(want, ix)}" for ix in where)
    return f"{int(bad.sum())} of {bad.size} elements differ: {shown}"


# ---- the differential run ------------------------------------------------------------------------------------


@dataclass
class Failure:
    """One run (graph ``index`` on contiguous inputs, or on the views ``layout``) that did not match."""

    index: int
    graph: Graph
    seed: int
    layout: tuple[str, ...] | None
    kind: str  # "compile" (NVRTC rejected a kernel), "crash", "values", "inputs" (an input was written),
    # "plan" (the interpreter or make_plan raised)
    message: str
    plan_text: str = ""
    schedules: Mapping[str, str] | None = None  # forced by kernel name (a schedule run)

    @property
    def signature(self) -> str:
        """What groups failures of one cause: the kind and the message with numbers blanked."""
        first = self.message.splitlines()[0] if self.message else ""
        if self.kind == "values":
            return "values"  # every wrong value is shown in full
        return f"{self.kind}: {re.sub(r'[0-9]+', 'N', first)}"

    def describe(self) -> str:
        where = "C-contiguous inputs" if self.layout is None else f"input views {list(self.layout)}"
        if self.schedules:
            where += ", schedules " + ", ".join(f"{k}={v}" for k, v in self.schedules.items())
        return (f"graph {self.index} @{self.graph.name}, seed {self.seed}, {where}: {self.kind}\n"
                + _indent(self.message) + "\n" + _indent(print_graph(self.graph))
                + ("\n  plan:\n" + _indent(self.plan_text, 4) if self.plan_text else ""))


def _indent(text: str, n: int = 2) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


@dataclass
class FuzzResult:
    graphs: int = 0  # graphs run (all their runs)
    runs: int = 0  # graph x layout runs
    kernels: int = 0  # kernel launches
    failures: list[Failure] = field(default_factory=list)
    compiled_here: int = 0  # kernels that were not in the cubin cache
    compiled_graphs: list[int] = field(default_factory=list)
    stopped: str | None = None  # why the run ended before the last graph
    seconds: float = 0.0

    @property
    def failed_graphs(self) -> list[int]:
        return sorted({f.index for f in self.failures})

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for f in self.failures:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        line = f"fuzz: {self.graphs} graphs, {self.kernels} kernels, {len(self.failed_graphs)} mismatches"
        detail = (f"  ({self.runs} runs in {self.seconds:.1f} s; failed runs: "
                  + (", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none")
                  + f"; {self.compiled_here} kernels compiled during the run"
                  + (f", first in graphs {self.compiled_graphs[:10]}" if self.compiled_graphs else "") + ")")
        if self.stopped:
            detail += f"\n  stopped early: {self.stopped}"
        return line + "\n" + detail

    def report(self, full_every_kind: int = 3) -> str:
        """Every failure grouped by signature: the first ``full_every_kind`` of a group in full (every
        wrong-values failure in full), the others by graph index."""
        groups: dict[str, list[Failure]] = {}
        for f in self.failures:
            groups.setdefault(f.signature, []).append(f)
        parts = []
        for sig, fs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            first = sorted({f.index for f in fs})[:full_every_kind]
            shown = fs if sig == "values" else [f for f in fs if f.index in first]
            parts.append(f"=== {len(fs)} x {sig}")
            parts += [f.describe() for f in shown]
            rest = sorted({f.index for f in fs} - {f.index for f in shown})
            if rest:
                parts.append(f"  ... and graphs {rest}")
        return "\n".join(parts)


def run_corpus(graphs_: Sequence[Graph], xp: Any, run: Callable[[Plan, list[Any], Any], list[Any]], *,
               to_host: Callable[[Any], np.ndarray] = np.asarray, synchronize: Callable[[], None] = lambda: None,
               compiles: Callable[[], int] = lambda: 0, known_failed: Mapping[str, str] | None = None,
               digest: Callable[[str], str] | None = None, time_limit: float | None = None,
               on_failure: Callable[[Failure], None] | None = None,
               progress: Callable[[str], None] | None = None) -> FuzzResult:
    """Run every graph with ``run(plan, arrays, schedules)`` on ``xp`` arrays (``schedules``: None, or the
    schedules forced by kernel name) and compare with the NumPy reference.

    Each graph gets fresh inputs (:func:`make_inputs`, seed :func:`graph_seed`), is interpreted by NumPy,
    planned, and run on C-contiguous copies; every ``LAYOUT_EVERY``-th graph also on views
    (:func:`layout_variants`), every ``SCHEDULE_EVERY``-th with other schedules (:func:`schedule_variants`).
    Each output must match exactly (:func:`differences`) and every input buffer must be unchanged. A run
    whose predicted kernel source is in ``known_failed`` (by ``digest(source)``: NVRTC rejected it while
    precompiling) is a ``compile`` failure and is not launched. An exception is a ``crash``; if
    ``synchronize`` then raises too, the device is unusable and the run stops. New graphs stop
    starting after ``time_limit`` seconds."""
    from fusec.ir.interpret import interpret

    result = FuzzResult()
    start = time.perf_counter()
    for index, graph in enumerate(graphs_):
        if time_limit and time.perf_counter() - start > time_limit:
            result.stopped = (f"time limit of {time_limit:.0f} s reached after {index} of {len(graphs_)} graphs "
                              "(FUSEC_FUZZ_TIME_LIMIT)")
            break
        if progress and index and index % 500 == 0:
            progress(f"  {index} graphs, {result.kernels} kernels, {len(result.failed_graphs)} mismatches, "
                     f"{time.perf_counter() - start:.1f} s")
        seed = graph_seed(graph)
        host = make_inputs(graph, seed)
        result.graphs += 1
        try:
            want = interpret(graph, host)
            plan = make_plan(graph)
        except Exception as exc:  # not the device's fault, but a failure all the same
            failure = Failure(index, graph, seed, None, "plan", f"{type(exc).__name__}: {exc}")
            result.failures.append(failure)
            if on_failure:
                on_failure(failure)
            continue
        free = zero_sign_free(graph)
        for kinds, schedules in graph_runs(index, graph, plan):
            failure = _run_one(index, graph, seed, kinds, schedules, host, want, free, plan, xp, run, to_host,
                               synchronize, compiles, known_failed, digest, result)
            if failure is None:
                continue
            result.failures.append(failure)
            if on_failure:
                on_failure(failure)
            if failure.kind == "crash" and DEVICE_LOST in failure.message:
                result.stopped = f"the device became unusable at graph {index}: no later graph was run"
                break
        if result.stopped:
            break
    result.seconds = time.perf_counter() - start
    return result


DEVICE_LOST = "the device is unusable after this"


def _run_one(index: int, graph: Graph, seed: int, kinds: tuple[str, ...] | None,
             schedules: Mapping[str, str] | None, host: list[np.ndarray],
             want: list[np.ndarray], free: set[Node], plan: Plan, xp: Any, run: Callable, to_host: Callable,
             synchronize: Callable[[], None], compiles: Callable[[], int], known_failed: Mapping[str, str] | None,
             digest: Callable[[str], str] | None, result: FuzzResult) -> Failure | None:
    def fail(kind: str, message: str) -> Failure:
        return Failure(index, graph, seed, kinds, kind, message, print_graph(plan.graph), schedules)

    result.runs += 1
    result.kernels += len(plan.kernels)
    if known_failed and digest is not None:
        sources = [render_kernel(s) for s in plan_specs(plan, input_layouts(graph, kinds), schedules=schedules)]
        rejected = [known_failed[d] for d in map(digest, sources) if d in known_failed]
        if rejected:
            return fail("compile", f"NVRTC rejected a kernel while precompiling: {rejected[0]}")
    placed = [place(xp, a, k) for a, k in zip(host, kinds or ["c"] * len(host))]
    expected_bases = [place(np, a, k)[1] for a, k in zip(host, kinds or ["c"] * len(host))]
    before = compiles()
    try:
        got = run(plan, [view for view, _ in placed], schedules)
        got_host = [to_host(g) for g in got]
        synchronize()
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        try:
            synchronize()
        except Exception as again:
            message += f"\n{DEVICE_LOST}: {type(again).__name__}: {again}"
        return fail("crash", message)
    finally:
        if compiles() > before:
            result.compiled_here += compiles() - before
            result.compiled_graphs.append(index)
    problems = []
    if len(got_host) != len(want):
        problems.append(f"{len(got_host)} outputs, expected {len(want)}")
    for k, (g, w) in enumerate(zip(got_host, want)):
        diff = differences(g, w, graph.outputs[k] in free)
        if diff is not None:
            w = np.asarray(w)
            problems.append(f"output {k} ({w.dtype}{list(w.shape)}"
                            + (", zero sign free" if graph.outputs[k] in free else "") + f"): {diff}")
    if problems:
        return fail("values", "\n".join(problems))
    for k, ((_, base), expected) in enumerate(zip(placed, expected_bases)):
        diff = differences(to_host(base), expected)
        if diff is not None:
            return fail("inputs", f"input {k} ({graph.inputs[k].attr('name')}) was written: {diff}")
    return None
