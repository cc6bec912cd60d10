"""The GPU fuzzer's corpus, checked without a GPU: ``FUSEC_FUZZ_EXAMPLES`` graphs (default 300, seed
``FUSEC_FUZZ_SEED``, default a fresh random one per session, printed in pytest's header and in every failure:
``tests/fuzz/seed.py``) from ``tests.fuzz.corpus.generate``, so each run draws other graphs:

- generation is deterministic, and the corpus file round-trips (``save``/``load``, ``print_graph``/``parse``);
- every graph obeys its family's rules (the ops and dtypes an exact comparison allows) and has no sign
  hazard; the comparator and the hazard analysis do what the module docstring says;
- the plan, run kernel by kernel with NumPy (``execute_numpy``), matches the interpreter exactly, on
  C-contiguous inputs and, every 5th graph, on the same non-contiguous views the GPU test uses: the GPU
  test's own harness (``run_corpus``) with NumPy in place of CuPy;
- every kernel source the GPU test would compile renders, and NVRTC compiles them for sm_90 and sm_80. SAMPLED: at
  most ``FUSEC_FUZZ_COMPILE`` distinct kernels (default 400, which covers all of the default 300 graphs
  most of the time), taken family by family in turn (``corpus.FAMILIES``: every family's kernels are in every
  sample), renamed per graph and compiled 40 to a module (``render_module``) to keep NVRTC's per-compile cost
  down; a module NVRTC rejects is compiled kernel by kernel (the first 3 such modules) to name the graphs whose
  kernels fail.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from fusec.codegen.render import render_kernel, render_module
from fusec.ir.dtypes import ir_dtype
from fusec.ir.graph import Graph, make_node
from fusec.ir.ops import Kind
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.runtime.plan import execute_numpy, make_plan
from tests.fuzz import corpus
from tests.fuzz.seed import SEED

EXAMPLES = int(os.environ.get("FUSEC_FUZZ_EXAMPLES", "300"))
COMPILE_AT_MOST = int(os.environ.get("FUSEC_FUZZ_COMPILE", "400"))
KERNELS_PER_MODULE = 40


@pytest.fixture(scope="module")
def graphs() -> list[Graph]:
    start = time.perf_counter()
    out = corpus.generate(EXAMPLES, SEED)
    print(f"\nfuzz corpus: {len(out)} graphs, seed {SEED} (FUSEC_FUZZ_EXAMPLES, FUSEC_FUZZ_SEED), "
          f"generated in {time.perf_counter() - start:.1f} s")
    return out


def test_generation_is_deterministic() -> None:
    a = corpus.generate(25, SEED + 7)
    b = corpus.generate(25, SEED + 7)
    assert len(a) == 25
    assert [print_graph(g) for g in a] == [print_graph(g) for g in b]
    assert len({g.name for g in a}) == 25


def test_corpus_round_trips(graphs: list[Graph], tmp_path) -> None:
    path = tmp_path / "corpus.fir"
    corpus.save(path, graphs)
    loaded = corpus.load(path)
    assert len(loaded) == len(graphs)
    for g, h in zip(graphs, loaded):
        text = print_graph(g)
        assert print_graph(h) == text
        assert h == g
        assert print_graph(parse(text)) == text
    assert corpus.dumps(loaded) == path.read_text()


def _family(graph: Graph) -> str:
    return graph.name.split("_", 1)[1]


def _rule_violations(g: Graph) -> list[str]:
    family = _family(g)
    assert family in corpus.FAMILIES, g.name
    bad = []
    for n in g.nodes:
        operand_kinds = {o.dtype.kind for o in n.operands}
        touches_float = "f" in operand_kinds or n.dtype.kind == "f"
        if n.op == "cast":
            if operand_kinds == {"f"} and n.dtype.kind in "iu":
                bad.append(f"float -> int cast {n!r}")
        elif n.kind is Kind.ELEMENTWISE and touches_float and n.op not in corpus.EXACT_FLOAT_OPS:
            bad.append(f"inexact float op {n!r}")
        elif n.kind is Kind.REDUCTION and "f" in operand_kinds and n.op not in corpus.EXACT_REDUCTIONS:
            bad.append(f"inexact float reduction {n!r}")
        if n.op == "pow" and operand_kinds - {"u"}:
            bad.append(f"signed pow {n!r}")
        if n.op == "reciprocal" and n.dtype.kind != "f":
            bad.append(f"integer reciprocal {n!r}")
    return bad + corpus.hazards(g)


def test_graphs_follow_the_family_rules(graphs: list[Graph]) -> None:
    bad = {g.name: v for g in graphs if (v := _rule_violations(g))}
    assert not bad, (f"FUSEC_FUZZ_SEED={SEED}", bad)
    families = {_family(g) for g in graphs}
    assert families == set(corpus.FAMILIES), (f"FUSEC_FUZZ_SEED={SEED}", families)
    assert all(make_plan(g).kernels for g in graphs[:50])


def test_comparator_and_hazards() -> None:
    f32 = np.float32
    assert corpus.differences(np.array([np.nan, 1.0], f32), np.array([-np.nan, 1.0], f32)) is None
    assert "1 of 2" in corpus.differences(np.array([0.0, 1.0], f32), np.array([-0.0, 1.0], f32))
    assert corpus.differences(np.array([0.0, 1.0], f32), np.array([-0.0, 1.0], f32), True) is None
    assert corpus.differences(np.array([1.0], f32), np.array([-1.0], f32), True) is not None
    assert corpus.differences(np.array([np.inf], f32), np.array([-np.inf], f32), True) is not None
    assert "dtype" in corpus.differences(np.zeros(2, np.float64), np.zeros(2, f32))
    assert "shape" in corpus.differences(np.zeros(2, f32), np.zeros(3, f32))
    poisoned = np.array([0xAB, 1], np.uint8).view(np.bool_)
    assert corpus.differences(poisoned, np.array([True, True])) is not None
    assert corpus.differences(np.array(5, np.int8), np.array(5, np.int8)) is None

    x = make_node("input", (), {"name": "x", "index": 0}, dtype=ir_dtype("f32"), shape=(3, 2))
    i = make_node("input", (), {"name": "i", "index": 1}, dtype=ir_dtype("i32"), shape=(3, 2))
    m = make_node("max", (x,), {"axes": [1], "keepdims": True})
    neg_m = make_node("neg", (m,))
    as_float = make_node("cast", (i,), dtype=ir_dtype("f32"))

    def graph(*outs):
        return Graph("h", (x, i), tuple(outs))

    assert corpus.hazards(graph(make_node("signbit", (x,)))) == []
    assert corpus.hazards(graph(make_node("signbit", (as_float,)))) == []
    assert corpus.hazards(graph(make_node("signbit", (make_node("add", (x, x)),))))
    assert corpus.hazards(graph(make_node("copysign", (x, make_node("sqrt", (x,))))))
    assert corpus.hazards(graph(make_node("copysign", (m, x)))) == []
    assert corpus.hazards(graph(make_node("div", (x, neg_m))))
    assert corpus.hazards(graph(make_node("div", (neg_m, x)))) == []
    g = graph(neg_m, make_node("abs", (m,)), make_node("div", (neg_m, x)), x)
    assert [o in corpus.zero_sign_free(g) for o in g.outputs] == [True, False, True, False]


@pytest.mark.parametrize("kind", ["c", "t", "step", "neg"])
def test_views_hold_the_values(kind: str) -> None:
    rng = np.random.default_rng(3)
    for shape in [(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4)]:
        for dt in (np.bool_, np.int8, np.float16, np.float64):
            a = (rng.random(shape) * 10).astype(dt)
            view, base = corpus.place(np, a, kind)
            assert view.shape == a.shape and view.dtype == a.dtype
            assert np.array_equal(view, a)
            layout = corpus.host_layout(view, base)
            assert len(layout.strides) == a.ndim
            if kind == "neg" and a.ndim and a.shape[0] > 1 and a.size:
                assert layout.align == corpus.alignment(view.strides[0] * (a.shape[0] - 1) + 256)


def test_plan_matches_interpreter_exactly(graphs: list[Graph]) -> None:
    """The GPU test's harness with NumPy as the device: ``execute_numpy`` on the same inputs and views."""
    result = corpus.run_corpus(graphs, np, lambda plan, arrays, schedules: execute_numpy(plan, arrays))
    print("\n" + result.summary())
    assert result.runs > result.graphs  # the layout variants ran too
    assert not result.failures, result.report() + "\n" + result.summary() + f" (FUSEC_FUZZ_SEED={SEED})"


def test_schedule_runs_force_split_tiled_and_vector_schedules() -> None:
    """Graph 2 (a schedule run) of each kind gets a schedule the heuristics would not pick for it, one that
    fits: cols split across blocks, rows as cols, a tiled transpose, vectors along a broadcast row."""
    import fusec

    def forced(fn, *specs, views=None):
        graph = fusec.fuse(fn).trace(*specs)
        plan = make_plan(graph)
        original = corpus._view_kinds
        corpus._view_kinds = lambda index, g: views  # the input views of the run
        try:
            return corpus.schedule_variants(2, graph, plan)
        finally:
            corpus._view_kinds = original

    f32 = fusec.ArraySpec((40, 24), "float32")
    assert forced(lambda x: x.sum(axis=0), f32) == (None, {"k0": "cols:grid_barrier,blocks=2"})
    assert forced(lambda x: x.max(axis=1, keepdims=True) - x, f32)[1]["k0"].startswith("cols:grid_barrier,tile=1")
    assert forced(lambda x: x.T * 2, f32) == (None, {"k0": "pointwise:tiled,tile=8"})
    assert forced(lambda x: x.T * 2, f32, views=("t",)) is None  # read back in order: nothing else fits
    row = fusec.ArraySpec((24,), "float32")
    assert forced(lambda x, w: x * w, f32, row)[1] == {"k0": "pointwise:inner_vector,vec=2"}
    assert corpus.schedule_variants(3, fusec.fuse(lambda x: x.sum(0)).trace(f32),
                                    make_plan(fusec.fuse(lambda x: x.sum(0)).trace(f32))) is None


FUZZ3727 = """\
func @fuzz3727_views(%x: i32[], %y: f32[], %z: i32[2,4]) -> (f16[2,2,2,4], f16[4,1,1]) {
  %0 = cast %y : f16[]
  %1 = cast %z : f16[2,4]
  %2 = maximum %0, %1 : f16[2,4]
  %3 = cast %2 : bool[2,4]
  %4 = any %3 {axes=[0], keepdims=true} : bool[1,4]
  %5 = reshape %4 {shape=[4, 1, 1]} : bool[4,1,1]
  %6 = transpose %5 {perm=[0, 1, 2]} : bool[4,1,1]
  %7 = cast %6 : f16[4,1,1]
  %8 = where %3, %7, %7 : f16[4,2,4]
  %9 = reshape %8 {shape=[2, 2, 2, 4]} : f16[2,2,2,4]
  %10 = cast %6 : i64[4,1,1]
  %11 = const 189081066 : i64[]
  %12 = add %10, %11 : i64[4,1,1]
  %13 = cast %12 : f16[4,1,1]
  %14 = neg %13 : f16[4,1,1]
  return %9, %14
}
"""


def test_schedule_runs_choose_for_the_layouts_of_argument_reshapes() -> None:
    """The GPU check's corpus (seed 20261207) graph 3727: a kernel reads a reshape of a transposed argument (a
    view taken before the kernels, its innermost stride 2); the schedule run chose ``inner_vector`` as if the
    view were contiguous, and the run's kernel refused it (ScheduleError while building the corpus). The choice
    is made for the layouts the run hands over, so every forced schedule builds."""
    graph = parse(FUZZ3727)
    plan = make_plan(graph)
    kinds, forced = corpus.schedule_variants(3727, graph, plan)
    assert kinds == ("c", "c", "t") and forced
    specs = corpus.plan_specs(plan, corpus.input_layouts(graph, kinds), schedules=forced)
    assert [s.name.split("_")[0] for s in specs] == [k.name for k in plan.kernels]


def _by_family_in_turn(items: list[tuple[int, object]], graphs: list[Graph], limit: int) -> list[tuple[int, object]]:
    """At most ``limit`` of ``items`` ((graph index, kernel) pairs), one family's next kernel after another's (in
    corpus order within a family), so that a sample holds every family's kernels; in corpus order."""
    queues: dict[str, list[int]] = {}
    for position, (index, _) in enumerate(items):
        queues.setdefault(_family(graphs[index]), []).append(position)
    chosen: list[int] = []
    depth = 0
    while len(chosen) < min(limit, len(items)):
        chosen += [queue[depth] for queue in queues.values() if depth < len(queue)][:limit - len(chosen)]
        depth += 1
    return [items[position] for position in sorted(chosen)]


def _first_error(exc: Exception) -> str:
    return next((ln.strip() for ln in str(exc).splitlines() if "error" in ln), " ".join(str(exc).split())[:200])


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_kernel_sources_compile_with_nvrtc(graphs: list[Graph], arch: str) -> None:
    """SAMPLED (see the module docstring): at most FUSEC_FUZZ_COMPILE distinct kernels, 40 to a module."""
    from fusec.codegen.nvrtc import CompileError, compile_cubin

    kernels: dict[str, tuple[int, object]] = {}  # source -> (graph index, renamed spec)
    for index, g in enumerate(graphs):
        plan = make_plan(g)
        for run, (kinds, schedules) in enumerate(corpus.graph_runs(index, g, plan)):
            layouts = corpus.input_layouts(g, kinds)
            plain = corpus.plan_specs(plan, layouts, schedules=schedules)
            renamed = corpus.plan_specs(plan, layouts, prefix=f"g{index}r{run}", schedules=schedules)
            for spec, named in zip(plain, renamed):
                kernels.setdefault(render_kernel(spec), (index, named))
    items = list(kernels.values())
    sample = _by_family_in_turn(items, graphs, COMPILE_AT_MOST or len(items))
    families = {_family(graphs[index]) for index, _ in sample}
    assert families == set(corpus.FAMILIES), f"families without a compiled kernel (seed {SEED}): " \
                                             f"{sorted(set(corpus.FAMILIES) - families)}"
    print(f"\nNVRTC: {len(sample)} of {len(items)} distinct kernel sources of seed {SEED}, every family's, "
          f"{KERNELS_PER_MODULE} to a module")
    start = time.perf_counter()
    failed_modules = []
    for k in range(0, len(sample), KERNELS_PER_MODULE):
        chunk = sample[k:k + KERNELS_PER_MODULE]
        try:
            compile_cubin(render_module([spec for _, spec in chunk]), arch)
        except CompileError as exc:
            failed_modules.append((chunk, _first_error(exc)))
    print(f"compiled in {time.perf_counter() - start:.1f} s")
    if not failed_modules:
        return
    lines = [f"{len(failed_modules)} of {-(-len(sample) // KERNELS_PER_MODULE)} modules failed to compile "
             f"(FUSEC_FUZZ_SEED={SEED})"]
    for chunk, module_error in failed_modules[:3]:
        lines.append(f"module of graphs {chunk[0][0]}..{chunk[-1][0]}: {module_error}")
        for index, spec in chunk:
            try:
                compile_cubin(render_kernel(spec), arch)
            except CompileError as one:
                error = _first_error(one)
                lines.append(f"graph {index} ({graphs[index].name}), kernel {spec.name}: {error}\n"
                             + print_graph(graphs[index]))
    pytest.fail("\n".join(lines[:12]) + ("\n..." if len(lines) > 12 else ""), pytrace=False)
