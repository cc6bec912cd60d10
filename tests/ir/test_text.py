"""The IR text form: golden printing, exact round trips both ways, and parse errors naming the line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from fusec.ir.dtypes import ir_dtype
from fusec.ir.graph import Graph, make_node
from fusec.ir.interpret import interpret
from fusec.ir.printer import node_names, print_graph
from fusec.ir.region import make_regions
from fusec.ir.text import parse
from fusec.passes.fold import fold
from fusec.support.errors import ParseError, VerifyError
from tests.strategies import graphs, partitioned_graphs

SOFTMAX = """\
func @softmax(%x: f32[8192,8192]) -> f32[8192,8192] {
  %0 = max %x {axes=[1], keepdims=true} : f32[8192,1]
  %1 = sub %x, %0 : f32[8192,8192]
  %2 = exp %1 : f32[8192,8192]
  %3 = sum %2 {axes=[1], keepdims=true} : f32[8192,1]
  %4 = div %2, %3 : f32[8192,8192]
  return %4
}"""


def inp(name: str, index: int, dtype: str, shape: tuple[int, ...]):
    return make_node("input", (), {"name": name, "index": index}, dtype=ir_dtype(dtype), shape=shape)


def softmax_nodes():
    x = inp("x", 0, "f32", (8192, 8192))
    m = make_node("max", (x,), {"axes": [1], "keepdims": True})
    e = make_node("exp", (make_node("sub", (x, m)),))
    s = make_node("sum", (e,), {"axes": [1], "keepdims": True})
    return x, m, e, s, make_node("div", (e, s))


def softmax_graph() -> Graph:
    x, *_, out = softmax_nodes()
    return Graph("softmax", (x,), (out,))


def test_print_graph_softmax_golden():
    assert print_graph(softmax_graph()) == SOFTMAX


def test_graph_str_is_print_graph():
    assert str(softmax_graph()) == SOFTMAX


def test_parse_softmax_gives_the_same_nodes():
    g = softmax_graph()
    parsed = parse(SOFTMAX)
    assert parsed == g
    assert parsed.outputs[0] is g.outputs[0]
    assert parsed.inputs[0].attr("name") == "x" and parsed.inputs[0].attr("index") == 0


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_round_trip_random_graphs(g):
    text = print_graph(g)
    parsed = parse(text)
    assert parsed == g
    assert print_graph(parsed) == text


@settings(max_examples=200, deadline=None)
@given(partitioned_graphs())
def test_round_trip_random_graphs_with_regions(g):
    text = print_graph(g)
    parsed = parse(text)
    assert parsed == g
    assert [r.name for r in parsed.regions] == [r.name for r in g.regions]
    assert [r.inputs for r in parsed.regions] == [r.inputs for r in g.regions]
    assert print_graph(parsed) == text


def test_print_graph_multiple_outputs_and_input_returned():
    x = inp("x", 0, "f32", (4,))
    am = make_node("argmax", (x,), {"axes": [0], "keepdims": False})
    g = Graph("f", (x,), (make_node("exp", (x,)), am, x))
    text = print_graph(g)
    assert text.splitlines()[0] == "func @f(%x: f32[4]) -> (f32[4], i64[], f32[4]) {"
    assert text.splitlines()[-2] == "  return %0, %1, %x"
    assert parse(text) == g


def test_print_graph_zero_d_and_unused_input():
    x = inp("x", 0, "f64", ())
    unused = inp("y", 1, "i32", (0, 3))
    g = Graph("scalar", (x, unused), (make_node("neg", (x,)),))
    assert print_graph(g) == ("func @scalar(%x: f64[], %y: i32[0,3]) -> f64[] {\n"
                              "  %0 = neg %x : f64[]\n"
                              "  return %0\n"
                              "}")
    assert parse(print_graph(g)) == g


def test_print_graph_no_outputs():
    x = inp("x", 0, "f32", (2,))
    g = Graph("nothing", (x,), ())
    assert print_graph(g) == "func @nothing(%x: f32[2]) -> () {\n  return\n}"
    assert parse(print_graph(g)) == g


@pytest.mark.parametrize("dtype, value, text", [
    ("f64", float("nan"), "nan"),
    ("f64", -float("nan"), "-nan"),  # 0/0 on x86: the sign survives printing and parsing
    ("f16", -float("nan"), "-nan"),
    ("f64", float("inf"), "inf"),
    ("f64", float("-inf"), "-inf"),
    ("f64", -0.0, "-0.0"),
    ("f64", 1e-07, "1e-07"),
    ("f64", 0.1, "0.1"),
    ("f32", 0.1, "0.1"),  # shortest text that gives the same f32
    ("f16", 65504.0, "6.55e+04"),
    ("f32", 1.5, "1.5"),
    ("i64", -7, "-7"),
    ("u64", 2**64 - 1, str(2**64 - 1)),
    ("bool", True, "true"),
    ("bool", False, "false"),
])
def test_print_graph_constants_round_trip(dtype, value, text):
    c = make_node("const", (), {"value": value}, dtype=ir_dtype(dtype))
    g = Graph("c", (), (c,))
    printed = print_graph(g)
    assert printed.splitlines()[1] == f"  %0 = const {text} : {dtype}[]"
    back = parse(printed).outputs[0]
    assert back is c
    v = back.attr("value")
    if isinstance(v, float):
        assert math.copysign(1, v) == math.copysign(1, c.attr("value"))


def test_nan_constants_of_either_sign_are_different_nodes():
    """Interning keys NaN by its sign: a folded 0/0 (-nan) must not become an earlier +nan node, or
    copysign(1, 0/0) folds to 1 instead of NumPy's -1 (a fold bug that showed only after another graph
    had made a +nan constant)."""
    plus = make_node("const", (), {"value": float("nan")}, dtype=ir_dtype("f16"))
    minus = make_node("const", (), {"value": -float("nan")}, dtype=ir_dtype("f16"))
    assert plus is not minus
    assert make_node("const", (), {"value": math.copysign(float("nan"), -1)}, dtype=ir_dtype("f16")) is minus
    plus32 = make_node("const", (), {"value": float("nan")}, dtype=ir_dtype("f32"))  # alive while fold runs
    graph = parse("""func @g(%x: bool[]) -> f32[] {
  %0 = const 1.0 : f32[]
  %1 = const 0.0 : f16[]
  %2 = div %1, %1 : f16[]
  %3 = cast %2 : f32[]
  %4 = copysign %0, %3 : f32[]
  return %4
}""")
    with np.errstate(all="ignore"):
        want = interpret(graph, [np.array(True)])[0]
        got = interpret(fold(graph), [np.array(True)])[0]
    assert np.signbit(got) == np.signbit(want) and plus32.attr("value") != plus32.attr("value")


def test_print_graph_layout_cast_and_size_attributes():
    x = inp("x", 0, "f32", (3, 1))
    t = make_node("transpose", (x,), {"perm": [1, 0]})
    b = make_node("broadcast_to", (t,), {"shape": [2, 4, 3]})
    e = make_node("expand_dims", (x,), {"axes": [0, 3]})
    s = make_node("squeeze", (e,), {"axes": [0]})
    c = make_node("cast", (s,), dtype=ir_dtype("f64"))
    n = make_node("size", (x,), {"axes": [0]}, dtype=ir_dtype("i64"))
    g = Graph("layout", (x,), (b, c, n))
    assert print_graph(g).splitlines()[1:-2] == [
        "  %0 = transpose %x {perm=[1, 0]} : f32[1,3]",
        "  %1 = broadcast_to %0 {shape=[2, 4, 3]} : f32[2,4,3]",
        "  %2 = expand_dims %x {axes=[0, 3]} : f32[1,3,1,1]",
        "  %3 = squeeze %2 {axes=[0]} : f32[3,1,1]",
        "  %4 = cast %3 : f64[3,1,1]",
        "  %5 = size %x {axes=[0]} : i64[]",
    ]
    assert parse(print_graph(g)) == g


def test_parse_ignores_comments_and_blank_lines_and_renames():
    text = """
# a comment
func @softmax(%x: f32[8192,8192]) -> f32[8192,8192] {   # trailing comment

  %m = max %x {keepdims=true, axes=[1]} : f32[8192,1]
  %d = sub %x, %m : f32[8192,8192]
  %e = exp %d : f32[8192,8192]
  %s = sum %e {axes=[1], keepdims=true} : f32[8192,1]
  %r = div %e, %s : f32[8192,8192]
  return %r
}
"""
    assert print_graph(parse(text)) == SOFTMAX


def test_parse_quoted_function_name():
    x = inp("x", 0, "f32", (2,))
    g = Graph("<lambda>", (x,), (x,))
    text = print_graph(g)
    assert text.startswith('func @"<lambda>"(%x: f32[2])')
    assert parse(text) == g


# --- regions -----------------------------------------------------------------------------------

SOFTMAX_REGIONS = """\
func @softmax(%x: f32[8192,8192]) -> f32[8192,8192] {
  kernel @k0 rows {
    %0 = max %x {axes=[1], keepdims=true} : f32[8192,1]
    %1 = sub %x, %0 : f32[8192,8192]
    %2 = exp %1 : f32[8192,8192]
    %3 = sum %2 {axes=[1], keepdims=true} : f32[8192,1]
  }
  kernel @k1 pointwise recomputes %1, %2 {
    %4 = div %2, %3 : f32[8192,8192]
  }
  return %4
}"""


def softmax_region_graph() -> Graph:
    x, m, e, s, out = softmax_nodes()
    sub = e.operands[0]
    g = Graph("softmax", (x,), (out,))
    specs = [("k0", "rows", [m, sub, e, s]), ("k1", "pointwise", [sub, e, out])]
    return Graph("softmax", (x,), (out,), make_regions(specs, g.users, g.outputs))


def test_print_graph_regions_golden():
    assert print_graph(softmax_region_graph()) == SOFTMAX_REGIONS


def test_parse_regions_round_trip():
    g = softmax_region_graph()
    parsed = parse(SOFTMAX_REGIONS)
    assert parsed == g
    assert [r.name for r in parsed.regions] == ["k0", "k1"]
    assert [r.kind for r in parsed.regions] == ["rows", "pointwise"]
    x, m, e, s, out = softmax_nodes()
    assert parsed.regions[1].nodes == (e.operands[0], e, out)
    assert parsed.regions[1].inputs == (x, m, s)
    assert parsed.regions[1].outputs == (out,)  # %1 and %2 are k0's: k1 recomputes them
    assert parsed.regions[0].outputs == (m, s)
    assert print_graph(parsed) == SOFTMAX_REGIONS


def test_print_graph_regions_with_top_level_nodes():
    x = inp("x", 0, "f32", (4, 4))
    c = make_node("const", (), {"value": 2.0}, dtype=ir_dtype("f32"))
    a = make_node("mul", (x, c))
    t = make_node("transpose", (a,), {"perm": [1, 0]})
    out = make_node("exp", (t,))
    base = Graph("g", (x,), (out,))
    specs = [("k0", "pointwise", [a]), ("k1", "pointwise", [out])]
    g = Graph("g", (x,), (out,), make_regions(specs, base.users, base.outputs))
    text = print_graph(g)
    assert text == """\
func @g(%x: f32[4,4]) -> f32[4,4] {
  %0 = const 2.0 : f32[]
  kernel @k0 pointwise {
    %1 = mul %x, %0 : f32[4,4]
  }
  %2 = transpose %1 {perm=[1, 0]} : f32[4,4]
  kernel @k1 pointwise {
    %3 = exp %2 : f32[4,4]
  }
  return %3
}"""
    assert parse(text) == g
    assert node_names(g)[t] == "%2"


def test_print_graph_partitioned_without_regions():
    x = inp("x", 0, "f32", (4, 3))
    n = make_node("size", (x,), {"axes": [1]}, dtype=ir_dtype("i64"))
    g = Graph("g", (x,), (n, x), ())
    text = print_graph(g)
    assert text == """\
func @g(%x: f32[4,3]) -> (i64[], f32[4,3]) {
  %0 = size %x {axes=[1]} : i64[]
  no kernels
  return %0, %x
}"""
    parsed = parse(text)
    assert parsed.regions == ()
    assert parsed == g
    assert parse(text.replace("  no kernels\n", "")).regions is None


def test_print_graph_regions_out_of_dependency_order_raises():
    g = softmax_region_graph()
    swapped = Graph(g.name, g.inputs, g.outputs, g.regions[::-1])
    with pytest.raises(VerifyError, match="not in dependency order"):
        print_graph(swapped)


# --- parse errors ------------------------------------------------------------------------------

HEAD = "func @f(%x: f32[4]) -> f32[4] {\n"


@pytest.mark.parametrize("text, line, fragment", [
    ("", 1, "expected 'func"),
    ("fun @f() -> () {\n}", 1, "expected 'func'"),
    (HEAD + "  %0 = frob %x : f32[4]\n  return %0\n}", 2, "unknown op 'frob'"),
    (HEAD + "  %0 = exp %y : f32[4]\n  return %0\n}", 2, "%y is not defined"),
    (HEAD + "  %0 = exp %x ; f32[4]\n  return %0\n}", 2, "unexpected character ';'"),
    (HEAD + "  %0 = exp %x : f32[4]\n  %0 = neg %x : f32[4]\n  return %0\n}", 3, "%0 is already defined"),
    (HEAD + "  %x = exp %x : f32[4]\n  return %x\n}", 2, "%x is already defined"),
    ("func @f(%x: f32[4], %x: f32[4]) -> f32[4] {\n  return %x\n}", 1, "%x is already defined"),
    (HEAD + "  %0 = exp %x : f32[4]\n}", 3, "missing return"),
    (HEAD + "  %0 = exp %x : f32[4]\n  return %0\n", 3, "missing '}'"),
    (HEAD + "  return %x\n  %0 = exp %x : f32[4]\n}", 3, "statement after return"),
    (HEAD + "  return %x\n}\n}", 4, "after the end of the function"),
    (HEAD + "  %0 = exp %x : f64[4]\n  return %0\n}", 2, "does not match the inferred f32[4]"),
    (HEAD + "  %0 = exp %x : f32[5]\n  return %0\n}", 2, "does not match the inferred f32[4]"),
    (HEAD + "  %0 = exp %x : q32[4]\n  return %0\n}", 2, "unknown dtype 'q32'"),
    (HEAD + "  %0 = exp %x :\n  return %0\n}", 2, "found end of line"),
    (HEAD + "  %0 = sum %x {axes=[3], keepdims=true} : f32[1]\n  return %0\n}", 2, "out of bounds"),
    (HEAD + "  %0 = sum %x : f32[]\n  return %0\n}", 2, "missing or bad attribute"),
    ("func @f(%x: f32[4], %y: f32[3]) -> f32[4] {\n  %0 = add %x, %y : f32[4]\n  return %0\n}", 2,
     "could not be broadcast"),
    ("func @f(%x: f32[4], %i: i32[4]) -> f32[4] {\n  %0 = add %x, %i : f32[4]\n  return %0\n}", 2,
     "add operands (float32, int32) need casts to (float64, float64) first"),
    (HEAD + "  %0 = cast %x : f64[4]\n  return %0\n}", 3, "returns (f64[4]) but the signature says (f32[4])"),
    (HEAD + "  kernel @k0 blocks {\n  }\n  return %x\n}", 2, "unknown region kind 'blocks'"),
    (HEAD + "  kernel @k0 rows {\n    return %x\n  }\n}", 3, "return inside a kernel"),
    (HEAD + "  kernel @k0 rows {\n  kernel @k1 rows {\n  }\n  }\n  return %x\n}", 3, "do not nest"),
    (HEAD + "  kernel @k0 rows {\n  }\n  kernel @k0 rows {\n  }\n  return %x\n}", 4,
     "@k0 is already defined"),
    (HEAD + "  kernel @k0 rows recomputes %q {\n  }\n  return %x\n}", 2, "%q is not defined"),
    (HEAD + "  no kernels\n  kernel @k0 rows {\n  }\n  return %x\n}", 3, "kernel after 'no kernels'"),
    (HEAD + "  kernel @k0 rows {\n  }\n  no kernels\n  return %x\n}", 4, "'no kernels' after a kernel"),
    (HEAD + "  %0 = input : f32[4]\n  return %x\n}", 2, "declared in the signature"),
    (HEAD + "  %0 = exp %x, : f32[4]\n  return %0\n}", 2, "expected a name, found ':'"),
    (HEAD + "  %0 = sum %x {axes=[0], axes=[0]} : f32[]\n  return %0\n}", 2, "given twice"),
    (HEAD + "  %0 = const abc : f32[]\n  return %x\n}", 2, "expected a value, found 'abc'"),
])
def test_parse_error_names_the_line(text, line, fragment):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert fragment in info.value.message
    assert info.value.loc == f"<fir>:{line}"
    assert str(info.value).startswith(f"<fir>:{line}: ") and f"line {line}" not in info.value.message


def test_parse_error_loc_uses_the_filename():
    with pytest.raises(ParseError) as info:
        parse(HEAD + "  %0 = frob %x : f32[4]\n  return %0\n}", filename="cases/bad.fir")
    assert info.value.loc == "cases/bad.fir:2"
    assert str(info.value).startswith("cases/bad.fir:2: unknown op 'frob'")  # the line named once, as FILE:LINE


@pytest.mark.parametrize("where", ["const", "attribute", "dimension"])
def test_parse_integer_of_more_than_4300_digits_raises_parse_error_naming_file_and_line(where):
    """Python's int() refuses more than 4300 digits: the ValueError came out bare, with no file or line."""
    big = "9" * 5000
    text = {
        "const": HEAD + f"  %0 = const {big} : f32[]\n  return %x\n}}",
        "attribute": HEAD + f"  %0 = sum %x {{axes=[-{big}], keepdims=false}} : f32[]\n  return %x\n}}",
        "dimension": f"func @f(%x: f32[{big}]) -> f32[4] {{\n  return %x\n}}",
    }[where]
    with pytest.raises(ParseError) as info:
        parse(text, filename="cases/big.fir")
    assert info.value.loc == f"cases/big.fir:{1 if where == 'dimension' else 2}"
    assert "an integer of 5000 digits" in info.value.message


def test_parse_error_keeps_the_make_node_message_and_hint():
    with pytest.raises(ParseError) as info:
        parse("func @f(%x: f32[4], %y: f32[3]) -> f32[4] {\n  %0 = add %x, %y : f32[4]\n  return %0\n}")
    assert "operands of add could not be broadcast together with shapes (4,) and (3,)" in info.value.message
    assert info.value.hint is not None and "trailing dimensions" in info.value.hint


def test_parse_nodes_carry_the_line_as_location():
    g = parse(HEAD.replace("f32[4]", "f32[7]") + "  %0 = log1p %x : f32[7]\n  return %0\n}", filename="a.fir")
    assert g.outputs[0].loc == "a.fir:2"
