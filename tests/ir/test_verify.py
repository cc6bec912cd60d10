"""The verifier: good graphs pass; each kind of bad node or region is reported, by its text name.

``make_node`` checks types and interns nodes, so a bad node cannot be built through it. The negative
tests forge one with :func:`forge`: a fresh ``Node`` object (``object.__new__``) whose slots are set
with ``object.__setattr__``, outside the intern table, so no real node is altered.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from fusec.ir.dtypes import ir_dtype
from fusec.ir.graph import Graph, Node, make_node
from fusec.ir.region import Region, make_regions
from fusec.ir.verify import verify
from fusec.support.errors import VerifyError
from tests.ir.test_text import inp, softmax_graph, softmax_region_graph
from tests.strategies import graphs, partitioned_graphs


def forge(op: str, operands: tuple[Node, ...], attrs: dict[str, Any], dtype: str, shape: tuple[int, ...],
          loc: str | None = None) -> Node:
    """A node that make_node would refuse (or normalize): built slot by slot, never interned."""
    node = object.__new__(Node)
    for name, value in (("op", op), ("dtype", ir_dtype(dtype)), ("shape", shape), ("operands", operands),
                        ("attrs", tuple(sorted(attrs.items()))), ("loc", loc)):
        object.__setattr__(node, name, value)
    return node


def problems(graph: Graph) -> str:
    with pytest.raises(VerifyError) as info:
        verify(graph)
    return info.value.message


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_verify_accepts_random_graphs(g):
    assert verify(g) is None


@settings(max_examples=100, deadline=None)
@given(partitioned_graphs())
def test_verify_accepts_random_well_formed_regions(g):
    assert verify(g) is None


def test_verify_accepts_softmax_with_and_without_regions():
    assert verify(softmax_graph()) is None
    assert verify(softmax_region_graph()) is None


def test_verify_reports_wrong_dtype_by_text_name():
    x = inp("x", 0, "f32", (4,))
    e = make_node("exp", (x,))
    bad = forge("neg", (e,), {}, "f64", (4,), loc="model.py:12")
    message = problems(Graph("f", (x,), (bad,)))
    assert "%1 (neg, at model.py:12): has type f64[4] but its operands and attributes give f32[4]" in message
    assert message.startswith("1 problem in the IR")


def test_verify_reports_wrong_shape_of_reduction():
    x = inp("x", 0, "f32", (4, 5))
    bad = forge("sum", (x,), {"axes": (1,), "keepdims": False}, "f32", (4, 1))
    assert "%0 (sum): has type f32[4,1] but its operands and attributes give f32[4]" in problems(
        Graph("f", (x,), (bad,)))


def test_verify_reports_operand_count():
    x = inp("x", 0, "f32", (4,))
    bad = forge("add", (x,), {}, "f32", (4,))
    assert "%0 (add): has 1 operands, add takes 2" in problems(Graph("f", (x,), (bad,)))


def test_verify_reports_unknown_op_and_missing_attribute():
    x = inp("x", 0, "f32", (4,))
    frob = forge("frob", (x,), {}, "f32", (4,))
    no_axes = forge("sum", (x,), {"keepdims": False}, "f32", ())
    message = problems(Graph("f", (x,), (frob, no_axes)))
    assert "%0 (frob): unknown op" in message
    assert "%1 (sum): missing or bad attribute 'axes'" in message
    assert message.startswith("2 problems in the IR")


def test_verify_reports_const_value_of_the_wrong_type():
    bad = forge("const", (), {"value": 1.5}, "i32", ())
    assert "%0 (const): value 1.5 is not a i32 scalar" in problems(Graph("f", (), (bad,)))


def test_verify_reports_bad_input_index():
    x = inp("x", 1, "f32", (4,))
    message = problems(Graph("f", (x,), (make_node("exp", (x,)),)))
    assert "%x (input): has index 1 but is argument 0" in message


def test_verify_reports_duplicate_input_names():
    a, b = inp("x", 0, "f32", (4,)), inp("x", 1, "f32", (4,))
    message = problems(Graph("f", (a, b), (make_node("add", (a, b)),)))
    assert "%x (input): name 'x' is also argument 0's" in message


def test_verify_reports_input_missing_from_the_signature():
    x, y = inp("x", 0, "f32", (4,)), inp("y", 1, "f32", (4,))
    message = problems(Graph("f", (x,), (make_node("add", (x, y)),)))
    assert "%y (input): is used but is not among the graph's inputs" in message


def test_verify_reports_non_input_argument_and_bad_input_name():
    x = inp("x", 0, "f32", (4,))
    e = make_node("exp", (x,))
    weird = make_node("input", (), {"name": "1st", "index": 1}, dtype=ir_dtype("f32"), shape=(4,))
    message = problems(Graph("f", (x, e, weird), (e,)))
    assert "%0 (exp): argument 1 is not an input node" in message
    assert "name '1st' is not an identifier" in message


def test_verify_reports_every_bad_node_at_once():
    x = inp("x", 0, "f32", (4,))
    a = forge("exp", (x,), {}, "f64", (4,))
    b = forge("neg", (a,), {}, "f32", (4,))  # f32 is wrong too: neg of f64 gives f64
    message = problems(Graph("f", (x,), (b,)))
    assert "%0 (exp): has type f64[4]" in message
    assert "%1 (neg): has type f32[4] but its operands and attributes give f64[4]" in message


# --- regions -----------------------------------------------------------------------------------


def chain():
    """x -> a=exp -> b=neg -> c=log -> d=sum, and the region-less graph over it."""
    x = inp("x", 0, "f32", (4, 8))
    a = make_node("exp", (x,))
    b = make_node("neg", (a,))
    c = make_node("log", (b,))
    d = make_node("sum", (c,), {"axes": [1], "keepdims": False})
    return x, a, b, c, d, Graph("f", (x,), (d,))


def with_regions(g: Graph, *groups: tuple[str, str, list[Node]]) -> Graph:
    return Graph(g.name, g.inputs, g.outputs, make_regions(groups, g.users, g.outputs))


def test_verify_accepts_regions_in_dependency_order():
    x, a, b, c, d, g = chain()
    assert verify(with_regions(g, ("k0", "pointwise", [a, b]), ("k1", "rows", [c, d]))) is None


def test_verify_reports_cycle_between_regions_naming_them():
    x, a, b, c, d, g = chain()
    bad = with_regions(g, ("k0", "rows", [a, c, d]), ("k1", "pointwise", [b]))
    message = problems(bad)
    assert "regions form a cycle: region @k" in message
    assert "region @k0" in message and "region @k1" in message


def test_verify_reports_regions_listed_out_of_order():
    x, a, b, c, d, g = chain()
    bad = with_regions(g, ("k1", "rows", [c, d]), ("k0", "pointwise", [a, b]))
    message = problems(bad)
    assert "not in dependency order: %0 (log) in kernel @k1 reads %3" in message


def test_verify_reports_node_in_no_region_and_reduction_in_two():
    x, a, b, c, d, g = chain()
    bad = with_regions(g, ("k0", "pointwise", [a, b]), ("k1", "rows", [d]), ("k2", "rows", [d]))
    message = problems(bad)
    assert "%2 (log): is in no region" in message
    assert ("%3 (sum): is in regions @k1, @k2; only elementwise, layout and source nodes may be recomputed"
            in message)


def test_verify_accepts_recomputed_elementwise_node():
    x, a, b, c, d, g = chain()
    ok = with_regions(g, ("k0", "pointwise", [a, b]), ("k1", "rows", [b, c, d]))
    assert verify(ok) is None


def test_verify_reports_region_outputs_unlike_make_regions():
    x, a, b, c, d, g = chain()
    good = with_regions(g, ("k0", "pointwise", [a, b]), ("k1", "rows", [c, d]))
    k0 = good.regions[0]
    assert k0.outputs == (b,)
    wrong = Region(k0.name, k0.kind, k0.nodes, (a, b), k0.inputs)
    message = problems(Graph(g.name, g.inputs, g.outputs, (wrong, good.regions[1])))
    assert "region @k0: outputs are (%0, %1) but make_regions gives (%1)" in message


def test_verify_reports_bad_region_kind_name_order_and_members():
    x, a, b, c, d, g = chain()
    good = with_regions(g, ("k0", "pointwise", [a, b]), ("k1", "rows", [c, d]))
    k0, k1 = good.regions
    unordered = Region("k0", "blocks", (b, a), k0.outputs, k0.inputs)
    holds_input = Region("k0", "rows", (x, c, d), k1.outputs, k1.inputs)
    message = problems(Graph(g.name, g.inputs, g.outputs, (unordered, holds_input)))
    assert "region @k0: unknown kind 'blocks'" in message
    assert "region @k0: nodes are not in graph.nodes order" in message
    assert "region @k0: the name is used by another region" in message
    assert "region @k0: holds the input %x; inputs are never region members" in message
