"""A chain of 10,000 ops goes through every stage without recursion: trace, verify, the text form both
ways, the passes, the plan, the reference interpreter. (Each stage walks graphs with explicit stacks;
canonicalize compares operands without nesting keys.)"""

from __future__ import annotations

import contextlib
import inspect
import sys

import numpy as np

import fusec
from benchmarks.compile_time import chain, kernel_sources, random_dag
from fusec.ir.graph import make_node
from fusec.ir.interpret import interpret
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.ir.verify import verify
from fusec.passes.canonicalize import canonicalize
from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline
from fusec.runtime.plan import make_plan
from tests.ir.test_text import inp

DEPTH = 10_000


def test_deep_chain_traces_verifies_prints_parses_plans_and_runs():
    fn, _ = chain(DEPTH)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    graph = fusec.fuse(fn).trace(x)
    assert len(graph.nodes) == DEPTH + 3  # the input, two constants, the ops
    verify(graph)
    assert parse(print_graph(graph)) == graph
    assert run_pipeline(graph, CLEANUP_PIPELINE) is not None
    plan = make_plan(graph)
    assert len(plan.kernels) == 1
    assert parse(print_graph(plan.graph)) == plan.graph
    (got,) = interpret(graph, [x])
    want = x
    for i in range(DEPTH):
        want = np.sin(want) if i % 3 == 0 else want * np.float32(1.0001) if i % 3 == 1 else want + np.float32(0.5)
    np.testing.assert_array_equal(got, want)


def test_canonicalize_orders_operands_of_two_deep_chains_without_recursion():
    x, y = inp("x", 0, "f32", (4,)), inp("y", 1, "f32", (4,))
    a, b = x, y
    for _ in range(DEPTH):  # two chains equal but for their inputs: comparing them walks all the way down
        a, b = make_node("exp", (a,)), make_node("exp", (b,))
    from fusec.ir.graph import Graph

    g = Graph("g", (x, y), (make_node("add", (b, a)),))
    out = canonicalize(g)
    assert out.outputs[0].operands == (a, b)  # x's chain sorts first, as "x" < "y" in the input attributes


@contextlib.contextmanager
def _stack_allowance(frames: int):
    """Allow only ``frames`` frames beyond the current depth: recursion that grows with the program fails."""
    depth = len(inspect.stack(0))
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def test_deep_chain_of_250_non_commutative_ops_then_a_commutative_one_plans_on_a_shallow_stack():
    """250 non-commutative ops, then one commutative op over two such chains: canonicalize's structural keys
    recursed once per op (a RecursionError, depending on what the process had traced before)."""

    def fn(x, y):
        a, b = x, y
        for i in range(250):
            a, b = a - np.float32(i), b / np.float32(i + 1)
        return a * b + (b - a)

    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    f = fusec.fuse(fn)
    with _stack_allowance(150):
        plan = f.plan(x, x + 1)
        source = f.cuda_source(x, x + 1)
    assert len(plan.kernels) == 1 and "__global__" in source
    np.testing.assert_array_equal(f(x, x + 1), fn(x, x + 1))


LONG_CHAIN = 100_000
RANDOM_DAG = 10_000


def test_long_program_100000_op_chain_traces_plans_and_renders():
    """The acceptance case of issue 18: a traced chain of 100,000 ops through every stage without recursion
    (about 40 s here: trace 8, cleanup 5, plan 24, source 4; near linear, 10,000 ops take 3.7 s)."""
    fn, specs = chain(LONG_CHAIN)
    graph = fusec.fuse(fn).trace(*specs)
    assert len(graph.nodes) == LONG_CHAIN + 3
    plan = make_plan(graph)
    assert len(plan.kernels) == 1 and len(plan.kernels[0].nodes) == LONG_CHAIN
    (source,) = kernel_sources(plan)
    sins = source.count("fc::sin(")  # every third op is a sin, in each copy of the loop body the schedule emits
    assert sins >= (LONG_CHAIN + 2) // 3 and sins % ((LONG_CHAIN + 2) // 3) == 0


def test_long_program_random_dag_of_10000_nodes_traces_plans_and_renders():
    fn, specs = random_dag(RANDOM_DAG, seed=18)
    graph = fusec.fuse(fn).trace(*specs)
    assert 0.75 * RANDOM_DAG <= len(graph.nodes) <= 1.3 * RANDOM_DAG
    plan = make_plan(graph)
    sources = kernel_sources(plan)
    assert len(sources) == len(plan.kernels) > 10 and all("__global__" in s for s in sources)
