"""The semantic oracle of the passes: on random graphs and fresh random data (NaN, +-inf, -0.0,
integer extremes mixed in), every pass and the whole pipeline leave the reference interpreter's
results unchanged, exactly: dtype, shape, NaN positions, and every other value bit for bit (the
sign of zero included). The passes are exact by design: canonicalize only applies identities that
hold under IEEE 754 and NumPy's integer rules, and fold computes each constant with the very NumPy
call the interpreter would make on the same 0-d operands, so float16 rounding and NumPy's own
transcendental results are reproduced, not approximated. The plan, run kernel by kernel, must
agree too, and so must every example in ``examples/``.

``FUSEC_FUZZ_EXAMPLES`` sets the number of random graphs (default 300).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import fusec
from fusec.ir.graph import Graph
from fusec.ir.interpret import interpret
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.passes.manager import DEFAULT_PIPELINE, run_pipeline
from fusec.runtime.plan import execute_numpy, make_plan
from tests.helpers import assert_matches_numpy, random_array, seed_of
from tests.strategies import graphs

FUZZ_EXAMPLES = int(os.environ.get("FUSEC_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"


def _inputs(graph: Graph, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [random_array(rng, n.shape, n.dtype) for n in graph.inputs]


def _run(graph: Graph, args: list[np.ndarray]) -> list[np.ndarray] | type[BaseException]:
    """The interpreter's results, or the class of the error NumPy raised (ValueError for an integer
    to a negative power)."""
    try:
        return interpret(graph, args)
    except ValueError as exc:
        return type(exc)


def _assert_same(got: list[Any] | type[BaseException], want: list[Any] | type[BaseException], what: str) -> None:
    """``got`` is ``want``. Where the original raised, anything goes: the interpreter evaluates every
    node, so a pass may rightly drop a raising node whose value no output needs (``size`` reads
    only a shape)."""
    if isinstance(want, type):
        return
    assert not isinstance(got, type), f"{what}: raised {got.__name__}, the original graph did not"
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        try:
            assert_matches_numpy(g, w, exact=True)
        except AssertionError as exc:
            raise AssertionError(f"{what}, output {i}: {exc}") from None


def _check_passes(graph: Graph, seed: int) -> None:
    with contextlib.suppress(InvalidArgument):  # a falsifying example's report shows the graph as IR text
        note(f"the graph as IR text (FOUND takes it):\n{print_graph(graph)}")
    args = _inputs(graph, seed)
    want = _run(graph, args)
    for names in [(name,) for name in DEFAULT_PIPELINE] + [DEFAULT_PIPELINE]:
        after = run_pipeline(graph, names)  # verifies after each pass
        _assert_same(_run(after, args), want, f"after {','.join(names)}\n{after}\nfrom\n{graph}")
    if isinstance(want, type):
        return  # NumPy raised: nothing to compare the plan with
    plan = make_plan(graph)
    _assert_same(execute_numpy(plan, args), want, f"plan, kernel by kernel\n{plan.graph}\nfrom\n{graph}")


# graphs the fuzzer found (CI, 2026-12-06): a reshape merging an argument's axes, then an op reading part of
# the merged axis; refused by the reshapes pass before reshapes could be read back between kernels
FOUND = {
    "cumprod_of_merge": """func @g(%x: bool[], %y: bool[2,2], %z: bool[]) -> i64[4] {
  %0 = reshape %y {shape=[4]} : bool[4]
  %1 = cast %0 : i64[4]
  %2 = cumprod %1 {axis=0} : i64[4]
  return %2
}""",
    "window_of_merge": """func @g(%x: bool[], %y: bool[2,2], %z: bool[]) -> bool[2] {
  %0 = reshape %y {shape=[4]} : bool[4]
  %1 = window %0 {count=[2], hi=[0], lo=[0], start=[0], step=[1]} : bool[2]
  return %1
}""",
    "slice_of_merge": """func @g(%x: bool[], %y: bool[2,2], %z: bool[]) -> bool[1] {
  %0 = reshape %y {shape=[4]} : bool[4]
  %1 = slice %0 {start=[0], step=[0], stop=[none]} : bool[1]
  return %1
}""",
    "slice_of_computed_merge": """func @g(%y: f32[3,4]) -> f32[6] {
  %0 = exp %y : f32[3,4]
  %1 = reshape %0 {shape=[12]} : f32[12]
  %2 = slice %1 {start=[1], step=[2], stop=[none]} : f32[6]
  return %2
}""",
    # found by the in-place fuzzer (tests/fuzz/inplace_programs.py): a reshape of a value that gathers a computed
    # value (b = a * 1; b[::2, :1] -= b[-1, 1]; b.reshape(-1)), an internal error of the reshapes pass before
    "reshape_of_a_gather_of_a_value": """func @g(%a: f32[3,4]) -> f32[3,4] {
  %0 = iota {count=3, next=1, start=0} : i32[3]
  %1 = expand_dims %0 {axes=[1]} : i32[3,1]
  %2 = const 2 : i32[]
  %3 = mod %1, %2 : i32[3,1]
  %4 = const 0 : i32[]
  %5 = eq %3, %4 : bool[3,1]
  %6 = iota {count=4, next=1, start=0} : i32[4]
  %7 = expand_dims %6 {axes=[0]} : i32[1,4]
  %8 = le %7, %4 : bool[1,4]
  %9 = logical_and %5, %8 : bool[3,4]
  %10 = const 1.0 : f32[]
  %11 = mul %a, %10 : f32[3,4]
  %12 = slice %11 {start=[none, none], step=[2, none], stop=[none, 1]} : f32[2,1]
  %13 = slice %11 {start=[-1, 1], step=[0, 0], stop=[none, none]} : f32[1,1]
  %14 = squeeze %13 {axes=[0, 1]} : f32[]
  %15 = sub %12, %14 : f32[2,1]
  %16 = sub %1, %4 : i32[3,1]
  %17 = floordiv %16, %2 : i32[3,1]
  %18 = maximum %17, %4 : i32[3,1]
  %19 = const 1 : i32[]
  %20 = minimum %18, %19 : i32[3,1]
  %21 = gather %15, %20 {axes=[0], dims=[1]} : f32[3,1]
  %22 = where %9, %21, %11 : f32[3,4]
  %23 = reshape %22 {shape=[12]} : f32[12]
  %24 = max %23 {axes=[0], keepdims=true} : f32[1]
  %25 = add %22, %24 : f32[3,4]
  return %25
}""",
    # and a group left without a recomputed producer that had no iteration space of its own (a window read along
    # part of an axis), an internal error of the recomputation before
    "recompute_leaves_a_window": """func @g(%a: f64[4,3]) -> (f64[4,3], f64[2,4,2]) {
  %0 = iota {count=4, next=1, start=0} : i32[4]
  %1 = expand_dims %0 {axes=[1]} : i32[4,1]
  %2 = const 2 : i32[]
  %3 = le %1, %2 : bool[4,1]
  %4 = mod %1, %2 : i32[4,1]
  %5 = const 0 : i32[]
  %6 = eq %4, %5 : bool[4,1]
  %7 = logical_and %3, %6 : bool[4,1]
  %8 = const 1 : i32[]
  %9 = le %1, %8 : bool[4,1]
  %10 = iota {count=3, next=1, start=0} : i32[3]
  %11 = expand_dims %10 {axes=[0]} : i32[1,3]
  %12 = le %11, %5 : bool[1,3]
  %13 = logical_and %9, %12 : bool[4,3]
  %14 = const 3 : i32[]
  %15 = mod %11, %14 : i32[1,3]
  %16 = eq %15, %5 : bool[1,3]
  %17 = logical_and %13, %16 : bool[4,3]
  %18 = eq %1, %5 : bool[4,1]
  %19 = const 2.0 : f64[]
  %20 = expand_dims %19 {axes=[0]} : f64[1]
  %21 = expand_dims %20 {axes=[0]} : f64[1,1]
  %22 = const 1.0 : f64[]
  %23 = mul %a, %22 : f64[4,3]
  %24 = where %18, %21, %23 : f64[4,3]
  %25 = slice %24 {start=[1, none], step=[-1, 3], stop=[none, none]} : f64[2,1]
  %26 = slice %24 {start=[0, 2], step=[0, 0], stop=[none, none]} : f64[1,1]
  %27 = squeeze %26 {axes=[0, 1]} : f64[]
  %28 = expand_dims %27 {axes=[0]} : f64[1]
  %29 = add %25, %28 : f64[2,1]
  %30 = window %29 {count=[4, 1], hi=[1, 0], lo=[0, 0], start=[1, 0], step=[-1, 1]} : f64[4,1]
  %31 = where %17, %30, %24 : f64[4,3]
  %32 = slice %31 {start=[none, none], step=[2, none], stop=[none, none]} : f64[2,3]
  %33 = sub %32, %32 : f64[2,3]
  %34 = sub %1, %5 : i32[4,1]
  %35 = floordiv %34, %2 : i32[4,1]
  %36 = maximum %35, %5 : i32[4,1]
  %37 = minimum %36, %8 : i32[4,1]
  %38 = gather %33, %37 {axes=[0], dims=[1]} : f64[4,3]
  %39 = where %7, %38, %31 : f64[4,3]
  %40 = broadcast_to %39 {shape=[2, 4, 3]} : f64[2,4,3]
  %41 = slice %40 {start=[none, none, none], step=[none, none, -2], stop=[none, none, none]} : f64[2,4,2]
  return %39, %41
}""",
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_passes_preserve_semantics_on_graphs_found(name: str) -> None:
    for seed in range(3):
        _check_passes(parse(FOUND[name]), seed)


# A float-to-integer cast of NaN, inf or an out-of-range value is undefined (CORRECTNESS.md), and NumPy's own
# result depends on the array's length (uint32 of -inf: 0 for fewer than 4 elements, 2147483648 from 4 on, its
# scalar and SIMD loops), which the reshape and view passes change: the graphs that reshape leave such casts out
# (the focused cast_round_trips family, whose arrays keep their length, keeps them).
@FUZZ
@given(graph=graphs(float_to_int_casts=False), seed=st.integers(0, 2**32 - 1))
def test_passes_preserve_semantics_on_random_graphs(graph: Graph, seed: int) -> None:
    _check_passes(graph, seed)


@FUZZ
@given(graph=graphs(allow_updates=True, max_nodes=10, float_to_int_casts=False), seed=st.integers(0, 2**32 - 1))
def test_passes_preserve_semantics_on_graphs_with_part_updates(graph: Graph, seed: int) -> None:
    """Assignments to part of computed values (iota masks, windows and gathers of the assigned values) among
    the other ops."""
    _check_passes(graph, seed)


@FUZZ
@given(graph=graphs(dtypes=("f16", "f32", "f64", "bool", "i64"), max_nodes=16, allow_empty=False),
       seed=st.integers(0, 2**32 - 1))
def test_passes_preserve_semantics_on_float_graphs(graph: Graph, seed: int) -> None:
    """Floats only (plus bool and i64 for where/argmax), deeper and without empty arrays: where the
    IEEE traps (signed zeros, NaN, inf) live."""
    _check_passes(graph, seed)


# Graphs made of the ops the canonicalize rules and their traps are about, where a generic graph
# rarely puts them side by side: each found a real bug (float maximum operands swapped, abs(-x) of
# unsigned, int64 -> float64 -> int64 treated as exact).
FOCUSED = {
    "float_traps": dict(dtypes=("f16", "f32", "f64", "bool"), allow_reductions=False, max_nodes=14,
                        ops={"add", "sub", "mul", "div", "neg", "abs", "pow", "square", "sqrt", "maximum",
                             "minimum", "fmax", "fmin", "where", "isnan", "copysign", "sign"}),
    "unsigned_wraparound": dict(dtypes=("u8", "u16", "u32", "u64"), ops={"neg", "abs", "add", "sub", "mul",
                                                                          "invert", "bitwise_or", "bitwise_xor"}),
    "cast_round_trips": dict(dtypes=("bool", "i8", "i32", "i64", "u64", "f16", "f32", "f64"),
                             ops={"add", "neg", "logical_not"}, allow_reductions=False, max_nodes=14),
}
FOCUSED_SETTINGS = settings(FUZZ, max_examples=max(25, FUZZ_EXAMPLES // 3))


@pytest.mark.parametrize("family", sorted(FOCUSED))
def test_passes_preserve_semantics_on_focused_graphs(family: str) -> None:
    @FOCUSED_SETTINGS
    @given(graph=graphs(**FOCUSED[family]), seed=st.integers(0, 2**32 - 1))
    def check(graph: Graph, seed: int) -> None:
        _check_passes(graph, seed)

    check()


# --- the examples ------------------------------------------------------------------------------

def _example_modules() -> list[Path]:
    if not EXAMPLES_DIR.is_dir():
        return []
    return sorted(p for p in EXAMPLES_DIR.glob("*.py") if not p.name.startswith("_"))


def _import(path: Path) -> Any:
    name = f"_fusec_example_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # the examples import their `_common` helper
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    sys.modules[name] = module
    return module


EXAMPLES = _example_modules()


@pytest.mark.skipif(not EXAMPLES, reason="no examples/ directory")
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_through_plan_matches_interpreter(path: Path) -> None:
    module = _import(path)
    fused = [v for v in vars(module).values() if isinstance(v, fusec.Fused)]
    assert fused, f"{path.name} defines no fusec.fuse function"
    example_inputs = getattr(module, "example_inputs", None)
    if example_inputs is None:
        pytest.skip(f"{path.name} has no example_inputs")
    for f in fused:
        args = list(example_inputs(np.random.default_rng(seed_of(path.name))))
        want = interpret(f.trace(*args), args)
        got = f(*args)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        _assert_same(execute_numpy(f.plan(*args), args), want, f"{path.stem}: plan")
        _assert_same(got, want, f"{path.stem}: {f.name}(...)")
        reference = getattr(module, "reference", None)
        if reference is not None:  # the hand-written NumPy reference, to its tolerance
            ref = reference(*args)
            for g, r in zip(got, ref if isinstance(ref, (tuple, list)) else [ref]):
                assert_matches_numpy(g, r, rtol=1e-4, atol=1e-5)
