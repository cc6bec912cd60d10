"""Python structure inside a fused function (issue 33, item 5): a fused function called from another is inlined into
the caller's trace (one plan, kernels fused across the call; called twice, with keyword and static arguments, with
in-place updates of the caller's arrays; its errors name its own lines); ``cupy.get_array_module`` answers NumPy for
NumPy arguments and CuPy for CuPy ones (on the CPU's fake GPU, ``tests/fake_cupy.py``), with ``xp.exp(x)`` traced
either way; a function returning ``()`` returns ``()``."""

from __future__ import annotations

import cupy
import numpy as np
import pytest

import fusec
from tests.fake_cupy import fake_gpu, to_device


@fusec.fuse
def pair(x, y):
    return x - y * 2, x + y


@fusec.fuse
def combined(x, y, z):
    a, b = pair(x + z, z - x * 3)
    c, d = pair(x - y, y=y - z)  # a keyword argument
    return a + b * c - d


@fusec.fuse
def outer(x, y):
    a, b = pair(x + y * 2, y * 3)
    return a - b * combined(x - 2, x - 3, -y)


def _plain(x, y):
    def p(x, y):
        return x - y * 2, x + y

    def c(x, y, z):
        a, b = p(x + z, z - x * 3)
        e, d = p(x - y, y - z)
        return a + b * e - d

    a, b = p(x + y * 2, y * 3)
    return a - b * c(x - 2, x - 3, -y)


@pytest.mark.parametrize("dtype", ["int64", "float32", "float64", "uint8"])
def test_nested_fused_functions_compose_as_cupys_test(dtype: str) -> None:
    """CuPy's TestFusionComposition: f called twice by g, g and f by h: the plain functions' results exactly."""
    x = np.arange(9).reshape(3, 3).astype(dtype)
    y = x[::-1].copy()
    np.testing.assert_array_equal(outer(x, y), _plain(x, y))
    assert outer(x, y).dtype == _plain(x, y).dtype


def test_nested_call_is_inlined_into_one_plan() -> None:
    """No kernel of its own for the inner function: the whole chain is one pointwise kernel, and a reduction in the
    inner function fuses with the caller's epilogue (a rows kernel)."""
    spec = fusec.ArraySpec((1029, 917), "float32")
    assert len(outer.plan(spec, spec).kernels) == 1
    graph = outer.trace(spec, spec)
    assert all(n.op != "call" for n in graph.nodes) and len(graph.outputs) == 1

    @fusec.fuse
    def row_max(x):
        return x.max(axis=-1, keepdims=True)

    @fusec.fuse
    def softmax(x):
        e = np.exp(x - row_max(x))
        return e / e.sum(axis=-1, keepdims=True)

    assert len(softmax.plan(spec).kernels) == 1
    x = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(softmax(x), e / e.sum(axis=-1, keepdims=True), rtol=1.3e-6)


def test_nested_static_arguments_and_in_place_updates() -> None:
    @fusec.fuse(static_argnames=("axis",))
    def total(x, axis=0):
        return x.sum(axis=axis)

    @fusec.fuse
    def scale_in_place(p, g):
        p -= 0.5 * g  # updates the caller's array, as the plain call would

    @fusec.fuse
    def step(p, g):
        scale_in_place(p, g)
        return total(p, axis=1), total(p)

    p, g = np.arange(12.0).reshape(3, 4), np.ones((3, 4))
    want = p - 0.5 * g
    rows, cols = step(p, g)
    np.testing.assert_array_equal(p, want)
    np.testing.assert_array_equal(rows, want.sum(axis=1))
    np.testing.assert_array_equal(cols, want.sum(axis=0))


@fusec.fuse
def _inner_raises(x):
    return x.no_such_method()  # <- inner error


@fusec.fuse
def _outer_calls_raising(x):
    return _inner_raises(x + 1)


def test_error_in_nested_function_names_its_line() -> None:
    with pytest.raises(fusec.FusecError) as info:
        _outer_calls_raising(np.ones(3))
    lines = open(__file__).read().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.endswith("# <- inner error"))
    assert info.value.loc == f"{__file__}:{line}"
    assert isinstance(info.value, AttributeError)


def test_nested_call_with_wrong_arguments_is_type_error() -> None:
    @fusec.fuse
    def wrong(x):
        return pair(x)  # y missing

    with pytest.raises(TypeError) as info:
        wrong(np.ones(3))
    assert isinstance(info.value, fusec.FusecError)


def test_nested_out_argument_is_refused_with_a_hint() -> None:
    @fusec.fuse
    def with_out(x, y):
        return pair(x, x, out=(y, y))

    with pytest.raises(fusec.UnsupportedError, match="out="):
        with_out(np.ones(3), np.ones(3))


def test_nested_function_still_runs_on_its_own() -> None:
    x, y = np.arange(4.0), np.ones(4)
    a, b = pair(x, y)
    np.testing.assert_array_equal(a, x - y * 2)
    np.testing.assert_array_equal(b, x + y)


# --- get_array_module ----------------------------------------------------------------------------------------------
@fusec.fuse
def _module_query(x):
    xp = cupy.get_array_module(x)
    return xp.exp(x), xp is np


def test_get_array_module_of_numpy_arguments_is_numpy() -> None:
    x = np.linspace(-1, 1, 7)
    y, is_numpy = _module_query(x)
    assert bool(is_numpy)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-15)


def test_get_array_module_outside_a_trace_is_cupys_own() -> None:
    assert cupy.get_array_module(np.ones(2)) is np
    assert getattr(cupy.get_array_module, "__wrapped__", None) is None  # restored after tracing
    _module_query(np.ones(2))
    assert getattr(cupy.get_array_module, "__wrapped__", None) is None


def test_get_array_module_of_cupy_arguments_is_cupy_and_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    """With CuPy arrays (the fake GPU's), the module asked for; ``xp.exp`` traces the same op. A function traced
    for NumPy first and then called with CuPy arrays is traced again for CuPy: each call gets its own answer."""
    @fusec.fuse
    def query(x):
        xp = cupy.get_array_module(x)
        return xp.exp(x), xp is cupy

    x = np.linspace(-1, 1, 7)
    assert bool(query(x)[1]) is False
    with fake_gpu(monkeypatch) as gpu:
        y, is_cupy = query(to_device(x))
        assert bool(np.asarray(is_cupy)) and not gpu.mislaunched
        np.testing.assert_allclose(np.asarray(y), np.exp(x), rtol=1e-15)
    assert bool(query(x)[1]) is False and query.cache_info().traces == 2


def test_get_array_module_of_an_array_spec_is_cupy() -> None:
    graph = _module_query.trace(fusec.ArraySpec((3,), "float32"))
    assert [n.op for n in graph.outputs] == ["exp", "const"] and graph.outputs[1].attr("value") is False


def test_function_returning_empty_tuple_returns_empty_tuple() -> None:
    assert fusec.fuse(lambda x: ())(np.ones(3)) == ()
