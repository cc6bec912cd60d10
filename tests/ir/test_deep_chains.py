"""A chain of 10,000 ops goes through every stage without recursion: trace, verify, the text form both
ways, the passes, the plan, the reference interpreter. (Each stage walks graphs with explicit stacks;
canonicalize compares operands without nesting keys.)"""

from __future__ import annotations

import numpy as np

import fusec
from benchmarks.compile_time import chain
from fusec.ir.graph import make_node
from fusec.ir.interpret import interpret
from fusec.ir.text import parse, print_graph
from fusec.ir.verify import verify
from fusec.passes.canonicalize import canonicalize
from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline
from fusec.plan import make_plan
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
