"""Scans (``cumsum``, ``cumprod``, ``nancumsum``, ``nancumprod``, ``x.cumsum(axis)``) through ``fusec.fuse`` on NumPy
inputs, against NumPy bit for bit: axes (negative, None), dtypes (bool, int8/int32/uint8 accumulate in 64 bits,
``dtype=``), empty and size-1 axes, 0-d inputs, long rows, NaN, integer overflow wrapping; the traced IR and
its text round trip; the op's shape rule; errors naming the user's line."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fusec
from fusec import ArraySpec
from fusec.ir.dtypes import ir_dtype
from fusec.ir.graph import make_node
from fusec.ir.interpret import interpret
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.support.errors import FusecError, FusecValueError
from tests.helpers import assert_matches_numpy, random_array, seed_of


def _check(fn: Callable[..., Any], *args: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = fn(*args)
    actual = fusec.fuse(fn)(*args)
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for got, want in zip(actual, expected):
            assert_matches_numpy(got, want, exact=True)
    else:
        assert_matches_numpy(actual, expected, exact=True)
    return actual


DTYPES = ["bool", "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
SHAPES = [(0,), (1,), (7,), (1029,), (3, 0), (0, 5), (1, 1), (4, 1), (1, 9), (5, 17), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "nancumsum", "nancumprod"])
def test_scan_functions_match_numpy_every_axis(name: str, dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(seed_of(name, dtype, shape))
    x = random_array(rng, shape, dtype)
    fn = getattr(np, name)
    for axis in [*range(-len(shape), len(shape))]:
        _check(lambda a, axis=axis: fn(a, axis=axis), x)
    _check(lambda a: fn(a), x)  # axis=None flattens (a reshape read back between kernels where axes merge)


@pytest.mark.parametrize("dtype", ["int8", "int32", "float16", "float32", "bool"])
@pytest.mark.parametrize("acc", ["int64", "int32", "uint16", "float32", "float64"])
def test_scan_dtype_argument_casts_first(dtype: str, acc: str) -> None:
    x = random_array(np.random.default_rng(seed_of(dtype, acc)), (6, 50), dtype)
    _check(lambda a: (np.cumsum(a, axis=1, dtype=acc), np.cumprod(a, axis=0, dtype=acc)), x)


def test_scan_methods_match_numpy() -> None:
    x = random_array(np.random.default_rng(1), (9, 33), "float32")
    _check(lambda a: (a.cumsum(), a.cumsum(0), a.cumsum(axis=-1), a.cumprod(1), a.cumsum(1, dtype=np.float64)),
           x[:1])
    _check(lambda a: (a.cumsum(0), a.cumsum(axis=-1), a.cumprod(1), a.cumsum(1, dtype=np.float64)), x)


def test_scan_zero_d_input_gives_one_element() -> None:
    _check(lambda a: (np.cumsum(a), np.cumprod(a), a.cumsum()), np.array(3.5, np.float32))
    _check(lambda a: np.cumsum(a), np.array(7, np.int8))


def test_scan_integer_overflow_wraps_as_numpy() -> None:
    big = np.iinfo(np.int64).max
    x = np.array([[big, 1, 1, -3], [2**40, 2**40, 2**40, 2**40]], np.int64)
    _check(lambda a: (np.cumsum(a, axis=1), np.cumprod(a, axis=1)), x)
    u = np.array([np.iinfo(np.uint64).max, 2, 3], np.uint64)
    _check(lambda a: (np.cumsum(a), np.cumprod(a)), u)


def test_scan_nan_and_infinities_propagate_as_numpy() -> None:
    x = np.array([[1.0, np.nan, 2.0, 3.0], [np.inf, 1.0, -np.inf, 2.0], [-0.0, -0.0, 0.0, -0.0]], np.float32)
    _check(lambda a: (np.cumsum(a, axis=1), np.cumprod(a, axis=1), np.nancumsum(a, axis=1),
                      np.nancumprod(a, axis=0)), x)


def test_scan_long_rows_and_float16_rounding_match_numpy() -> None:
    rng = np.random.default_rng(5)
    x = (rng.random((3, 70_001)) * 0.1).astype(np.float16)  # NumPy rounds every prefix: the sums stall
    _check(lambda a: np.cumsum(a, axis=1), x)
    y = random_array(rng, (2, 1 << 17), "float32", special=False)
    _check(lambda a: np.cumsum(np.exp(a * 0.01), axis=-1) / 7.0, y)


def test_scan_fused_workloads_match_numpy() -> None:
    rng = np.random.default_rng(7)
    x = random_array(rng, (33, 129), "float32")
    m = rng.random((33, 129)) < 0.5
    _check(lambda a, t: np.exp(a).cumsum(-1) / t, x, np.float32(3))
    _check(lambda a, mask: np.cumsum(a * mask, axis=1) - a, x, m)
    _check(lambda a: (np.cumsum(a, axis=0), np.cumsum(np.cumsum(a, axis=1), axis=1),
                      a.cumsum(1) / a.sum(1, keepdims=True)), x)


def test_scan_of_views_matches_numpy() -> None:
    x = random_array(np.random.default_rng(11), (20, 30), "int32")
    _check(lambda a: (np.cumsum(a[::-1], axis=0), np.cumsum(a.T, axis=1), np.cumsum(a[:, ::3], axis=1),
                      np.cumsum(a, axis=1)[:, :7], np.cumsum(a, axis=1)[:, 5:], np.cumsum(a[:, None, :], axis=1)), x)
    _check(lambda a: np.cumsum(np.broadcast_to(a[0], (4, 30)), axis=0), x)


def test_scan_traces_to_one_op_after_a_cast() -> None:
    graph = fusec.fuse(lambda a: np.cumsum(a, axis=-1)).trace(ArraySpec((4, 5), "int32"))
    ops = [n.op for n in graph.nodes if n.op != "input"]
    assert ops == ["cast", "cumsum"]
    (out,) = graph.outputs
    assert out.dtype == np.int64 and out.attr("axis") == 1 and out.shape == (4, 5)


def test_scan_ir_text_round_trips() -> None:
    fused = fusec.fuse(lambda a, m: (np.nancumprod(a * m, axis=0), np.cumsum(a, axis=1) - a))
    specs = (ArraySpec((6, 7), "float32"), ArraySpec((6, 7), "bool"))
    for graph in (fused.trace(*specs), fused.plan(*specs).graph):
        text = print_graph(graph)
        again = parse(text)
        assert print_graph(again) == text
        assert again.outputs == graph.outputs
    assert "cumprod %" in text and "{axis=0}" in text and "kernel @k0 scan {" in text


def test_scan_interpreter_matches_numpy_on_parsed_ir() -> None:
    graph = parse("""\
func @f(%x: i64[3,5]) -> (i64[3,5], i64[3,5]) {
  %0 = cumsum %x {axis=1} : i64[3,5]
  %1 = cumprod %x {axis=0} : i64[3,5]
  return %0, %1
}""")
    x = np.arange(15, dtype=np.int64).reshape(3, 5) - 4
    got = interpret(graph, [x])
    assert_matches_numpy(got[0], np.cumsum(x, axis=1), exact=True)
    assert_matches_numpy(got[1], np.cumprod(x, axis=0), exact=True)


def test_scan_op_rejects_bad_axis_and_dtype() -> None:
    x = make_node("input", (), {"name": "x", "index": 0}, dtype=ir_dtype("f32"), shape=(3, 4))
    with pytest.raises(FusecValueError, match="non-negative axis below 2"):
        make_node("cumsum", (x,), {"axis": -1})
    with pytest.raises(FusecValueError, match="non-negative axis below 2"):
        make_node("cumsum", (x,), {"axis": 2})
    b = make_node("input", (), {"name": "b", "index": 0}, dtype="bool", shape=(3,))
    with pytest.raises(FusecError, match="integer or float operand"):
        make_node("cumprod", (b,), {"axis": 0})


def _out_argument(x):
    return np.cumsum(x, out=x)  # <- error


def _bool_accumulator(x):
    return np.cumsum(x, dtype=bool)  # <- error


@pytest.mark.parametrize("fn, match", [(_out_argument, "out= argument"), (_bool_accumulator, "dtype=bool")])
def test_scan_errors_name_the_line(fn: Callable[..., Any], match: str) -> None:
    with pytest.raises(FusecError) as info:
        fusec.fuse(fn)(np.ones((3, 4), np.float32))
    text = str(info.value) + str(getattr(info.value, "hint", ""))
    assert match in text
    assert "test_scans.py" in str(info.value)


def test_scan_axis_out_of_range_is_an_axis_error() -> None:
    with pytest.raises(np.exceptions.AxisError):
        fusec.fuse(lambda a: np.cumsum(a, axis=2))(np.ones((3, 4)))
