"""The op sweep: every op of the op table, every dtype loop, against NumPy itself.

The cases are read from ``fusec.ir.ops`` (``elementwise_ops``, ``ufunc_loops``, ``reduction_ops``),
so a new op is swept as soon as it is in the table. Each case runs a fused function on fresh random
data with NaN, +-inf, -0.0, zeros and integer boundaries (values an op's ``sweep_mask`` marks as
undefined replaced by 1) and compares values, dtype and shape with NumPy's own call. Where NumPy
raises, fusec must raise a FusecError that is also NumPy's exception class.
"""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Callable
from typing import Any

import cupy
import numpy as np
import pytest

import fusec
from fusec.ir import dtypes as fdt
from fusec.ir.interpret import interpret
from fusec.ir.ops import OpDef, elementwise_ops, reduction_ops, reference, ufunc_loops
from tests.helpers import assert_matches_numpy, numpy_error_class, random_array, seed_of

SHAPE = (2, 3, 4)
VECTOR = (1029,)  # 1024 + 5: a vector body and a tail
UFUNC_OPS = [op for op in elementwise_ops() if op.ufunc is not None]
LOOP_CASES = [(op, loop) for op in UFUNC_OPS for loop in ufunc_loops(op)]
DTYPES = list(fdt.SUPPORTED)

BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
    "floor_divide": operator.floordiv,
    "remainder": operator.mod,
    "power": operator.pow,
    "bitwise_and": operator.and_,
    "bitwise_or": operator.or_,
    "bitwise_xor": operator.xor,
    "left_shift": operator.lshift,
    "right_shift": operator.rshift,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
    "equal": operator.eq,
    "not_equal": operator.ne,
}
UNARY_OPERATORS: dict[str, Callable[[Any], Any]] = {
    "negative": operator.neg,
    "positive": operator.pos,
    "absolute": abs,
    "invert": operator.invert,
}
OPERATOR_CASES = [
    (op, loop)
    for op, loop in LOOP_CASES
    if op.ufunc.__name__ in BINARY_OPERATORS or op.ufunc.__name__ in UNARY_OPERATORS
]


def _loop_id(case: Any) -> str:
    op, loop = case
    return f"{op.name}-" + "-".join(fdt.short(d) for d in loop)


def _shapes(arity: int, layout: str) -> list[tuple[int, ...]]:
    if layout == "vector":
        return [VECTOR] * arity
    # broadcasting: (2,3,4) against (3,1) against (4,)
    return [SHAPE, (3, 1), (4,)][:arity]


def _inputs(op: OpDef, in_dtypes: tuple[np.dtype, ...], layout: str, seed: int) -> list[np.ndarray]:
    """Random operands for ``op``; where ``op.sweep_mask`` says NumPy's result is undefined, 1."""
    rng = np.random.default_rng(seed)
    xs = [random_array(rng, shape, dt) for shape, dt in zip(_shapes(len(in_dtypes), layout), in_dtypes)]
    if op.sweep_mask is not None:
        xs = [np.broadcast_to(x, np.broadcast_shapes(*(v.shape for v in xs))) for x in xs]
        mask = op.sweep_mask(in_dtypes[0], xs)
        xs = [np.where(mask, x.dtype.type(1), x).astype(x.dtype) for x in xs]
    return xs


def _numpy(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


def _check_same(fn: Callable[..., Any], args: list[Any], *, exact: bool = True) -> None:
    """``fusec.fuse(fn)(*args)`` is ``fn(*args)``, or raises NumPy's exception class as a FusecError."""
    try:
        expected = _numpy(fn, *args)
    except Exception as exc:  # NumPy refuses: fusec must refuse with the same class
        with pytest.raises(numpy_error_class(exc)) as info:
            fusec.fuse(fn)(*args)
        assert isinstance(info.value, fusec.FusecError), repr(info.value)
        return
    actual = fusec.fuse(fn)(*args)
    assert_matches_numpy(actual, expected, exact=exact)


# --- elementwise ufuncs ---------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["vector", "broadcast"])
@pytest.mark.parametrize("case", LOOP_CASES, ids=_loop_id)
def test_ufunc_loop_matches_numpy(case: tuple[OpDef, tuple[np.dtype, ...]], layout: str) -> None:
    op, loop = case
    xs = _inputs(op, loop[:-1], layout, seed_of(op.name, loop, layout))
    fused = fusec.fuse(lambda *args: op.ufunc(*args))
    actual = fused(*xs)
    expected = _numpy(op.ufunc, *xs)
    assert actual.dtype == loop[-1]
    assert_matches_numpy(actual, expected, exact=True)


@pytest.mark.parametrize("dt", DTYPES, ids=fdt.short)
@pytest.mark.parametrize("op", UFUNC_OPS, ids=lambda op: op.name)
def test_ufunc_every_dtype_matches_numpy_or_raises(op: OpDef, dt: np.dtype) -> None:
    """All operands of one dtype, whichever loop NumPy picks (implicit casts included)."""
    xs = _inputs(op, (dt,) * op.arity, "broadcast", seed_of(op.name, dt))
    _check_same(lambda *args: op.ufunc(*args), xs)


@pytest.mark.parametrize("case", OPERATOR_CASES, ids=_loop_id)
def test_operator_loop_matches_numpy(case: tuple[OpDef, tuple[np.dtype, ...]]) -> None:
    op, loop = case
    name = op.ufunc.__name__
    fn = BINARY_OPERATORS.get(name) or UNARY_OPERATORS[name]
    xs = _inputs(op, loop[:-1], "broadcast", seed_of("operator", op.name, loop))
    _check_same(lambda *args: fn(*args), xs)


@pytest.mark.parametrize("dt", [d for d in DTYPES if d.kind != "b"], ids=fdt.short)
def test_divmod_matches_numpy(dt: np.dtype) -> None:
    rng = np.random.default_rng(seed_of("divmod", dt))
    x, y = random_array(rng, SHAPE, dt), random_array(rng, (4,), dt)
    fused = fusec.fuse(lambda a, b: divmod(a, b))
    quotient, remainder = fused(x, y)
    expected_q, expected_r = _numpy(divmod, x, y)
    assert_matches_numpy(quotient, expected_q, exact=True)
    assert_matches_numpy(remainder, expected_r, exact=True)


@pytest.mark.parametrize("case", LOOP_CASES, ids=_loop_id)
def test_cupy_ufunc_loop_traces_to_numpy_semantics(case: tuple[OpDef, tuple[np.dtype, ...]]) -> None:
    """``cupy.<ufunc>(tracer)`` dispatches to the tracer; the graph run by NumPy is NumPy's result."""
    op, loop = case
    cupy_ufunc = reference(op, cupy)  # cupyx.scipy.special's for the scipy.special ops
    xs = _inputs(op, loop[:-1], "broadcast", seed_of("cupy", op.name, loop))
    graph = fusec.fuse(lambda *args: cupy_ufunc(*args)).trace(*(fusec.ArraySpec(x.shape, x.dtype) for x in xs))
    (actual,) = interpret(graph, xs)
    expected = _numpy(op.ufunc, *xs)
    assert graph.outputs[0].dtype == loop[-1]
    assert_matches_numpy(actual, expected, exact=True)


# --- where and cast -------------------------------------------------------------------------------
@pytest.mark.parametrize("b_dt", DTYPES, ids=fdt.short)
@pytest.mark.parametrize("a_dt", DTYPES, ids=fdt.short)
def test_where_dtype_pair_matches_numpy(a_dt: np.dtype, b_dt: np.dtype) -> None:
    rng = np.random.default_rng(seed_of("where", a_dt, b_dt))
    cond = random_array(rng, SHAPE, np.bool_)
    a, b = random_array(rng, (3, 1), a_dt), random_array(rng, (4,), b_dt)
    _check_same(lambda c, x, y: np.where(c, x, y), [cond, a, b])


@pytest.mark.parametrize("cond_dt", DTYPES, ids=fdt.short)
def test_where_condition_of_any_dtype_is_its_truth(cond_dt: np.dtype) -> None:
    rng = np.random.default_rng(seed_of("where-cond", cond_dt))
    cond = random_array(rng, SHAPE, cond_dt)  # NaN and -0.0 included: NaN is true, -0.0 false
    a, b = random_array(rng, SHAPE, np.float32), random_array(rng, SHAPE, np.float32)
    _check_same(lambda c, x, y: np.where(c, x, y), [cond, a, b])


@pytest.mark.parametrize("dt", DTYPES, ids=fdt.short)
def test_cupy_where_traces_to_numpy_semantics(dt: np.dtype) -> None:
    rng = np.random.default_rng(seed_of("cupy-where", dt))
    cond, a, b = random_array(rng, SHAPE, np.bool_), random_array(rng, (4,), dt), random_array(rng, SHAPE, dt)
    graph = fusec.fuse(lambda c, x, y: cupy.where(c, x, y)).trace(
        *(fusec.ArraySpec(v.shape, v.dtype) for v in (cond, a, b))
    )
    (actual,) = interpret(graph, [cond, a, b])
    assert_matches_numpy(actual, np.where(cond, a, b), exact=True)


def _defined_cast_input(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """``x`` with the values whose cast to ``dst`` is undefined (NaN, inf, out of range) set to 1."""
    if x.dtype.kind != "f" or dst.kind not in "iu":
        return x
    bits = dst.itemsize * 8
    low, high = (0.0, 2.0**bits) if dst.kind == "u" else (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1))
    with np.errstate(invalid="ignore"):
        t = np.trunc(x.astype(np.float64))
        undefined = ~np.isfinite(t) | (t < low) | (t >= high)
    return np.where(undefined, x.dtype.type(1), x).astype(x.dtype)


@pytest.mark.parametrize("dst", DTYPES, ids=fdt.short)
@pytest.mark.parametrize("src", DTYPES, ids=fdt.short)
def test_cast_dtype_pair_matches_numpy(src: np.dtype, dst: np.dtype) -> None:
    rng = np.random.default_rng(seed_of("cast", src, dst))
    x = _defined_cast_input(random_array(rng, VECTOR, src), dst)
    actual = fusec.fuse(lambda a: a.astype(dst))(x)
    assert_matches_numpy(actual, _numpy(x.astype, dst), exact=True)


# --- reductions -----------------------------------------------------------------------------------
# every NumPy name of a reduction op in the table, and the reductions fusec builds from several ops
REDUCTION_NAMES = sorted({name for op in reduction_ops() for name in op.numpy_names} | {"mean", "var", "std", "nansum"})
REDUCTION_CASES = [(name, {}) for name in REDUCTION_NAMES if name not in ("var", "std")] + [
    (name, {"ddof": ddof}) for name in ("var", "std") for ddof in (0, 1)
]
AXES = [None, 0, -1, (0, 2), ()]
METHODS = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any", "all"]
# decomposed into sum, divide and square as NumPy's _methods do: nearly exact
TOLERANT = {"mean", "var", "std"}


def _reduction_id(case: Any) -> str:
    name, kwargs = case
    return name + "".join(f"-{k}{v}" for k, v in kwargs.items())


def _calling(function: Callable[..., Any], **kwargs: Any) -> Callable[[Any], Any]:
    """``lambda a: function(a, **kwargs)``, with ``kwargs`` bound now."""
    return lambda a: function(a, **kwargs)


def _float32_reference(function: Callable[..., Any], x: np.ndarray, **kwargs: Any) -> Any:
    """NumPy's ``function(x, **kwargs)`` as fusec computes a bfloat16 result (CORRECTNESS.md): ml_dtypes' own
    loops would sum and multiply in bfloat16, rounding at every step (a sum of 100000 ones is 256); fusec
    accumulates in float32 and rounds once. So: bfloat16 operands (after a ``dtype=bfloat16`` cast, as NumPy
    casts them) in float32, a float32 accumulator for a bfloat16 one, and the result rounded once."""
    if kwargs.get("dtype") == fdt.BFLOAT16:
        x, kwargs = x.astype(fdt.BFLOAT16), {**kwargs, "dtype": np.float32}
    return _numpy(function, x.astype(np.float32) if x.dtype == fdt.BFLOAT16 else x, **kwargs).astype(fdt.BFLOAT16)


def _check_reduction(fn: Callable[[Any], Any], x: np.ndarray, tolerant: bool,
                     reference: Callable[[Any], Any] | None = None) -> None:
    """``fusec.fuse(fn)(x)`` is NumPy's ``fn(x)``; where that is bfloat16, ``reference(x)``'s (float32 steps)."""
    try:
        expected = _numpy(fn, x)
        if reference is not None and expected.dtype == fdt.BFLOAT16:
            expected = reference(x)
    except Exception as exc:
        with pytest.raises(numpy_error_class(exc)) as info:
            fusec.fuse(fn)(x)
        assert isinstance(info.value, fusec.FusecError), repr(info.value)
        return
    actual = fusec.fuse(fn)(x)
    assert isinstance(actual, np.ndarray) == isinstance(expected, np.ndarray), (type(actual), type(expected))
    assert_matches_numpy(actual, expected, exact=not tolerant)


@pytest.mark.parametrize("axis", AXES, ids=repr)
@pytest.mark.parametrize("dt", DTYPES, ids=fdt.short)
@pytest.mark.parametrize("case", REDUCTION_CASES, ids=_reduction_id)
def test_reduction_matches_numpy(case: tuple[str, dict], dt: np.dtype, axis: Any) -> None:
    name, kwargs = case
    function = getattr(np, name)
    rng = np.random.default_rng(seed_of(name, dt, axis))
    for special in (True, False):  # finite data too, or NaN would hide most values
        x = random_array(rng, SHAPE, dt, special=special)
        for keepdims in (False, True):
            _check_reduction(_calling(function, axis=axis, keepdims=keepdims, **kwargs), x, name in TOLERANT,
                             functools.partial(_float32_reference, function, axis=axis, keepdims=keepdims, **kwargs))


@pytest.mark.parametrize("axis", AXES, ids=repr)
@pytest.mark.parametrize("dt", [np.dtype(np.bool_), np.dtype(np.int16), np.dtype(np.float32)], ids=fdt.short)
@pytest.mark.parametrize("name", METHODS)
def test_reduction_method_matches_numpy(name: str, dt: np.dtype, axis: Any) -> None:
    x = random_array(np.random.default_rng(seed_of("method", name, dt, axis)), SHAPE, dt)
    for keepdims in (False, True):
        _check_reduction(
            _calling(lambda a, **kw: getattr(a, name)(**kw), axis=axis, keepdims=keepdims), x, name in TOLERANT
        )


@pytest.mark.parametrize("acc", DTYPES, ids=fdt.short)
@pytest.mark.parametrize("dt", DTYPES, ids=fdt.short)
@pytest.mark.parametrize("name", ["sum", "prod", "mean"])
def test_reduction_dtype_argument_matches_numpy(name: str, dt: np.dtype, acc: np.dtype) -> None:
    function = getattr(np, name)
    x = random_array(np.random.default_rng(seed_of("dtype=", name, dt, acc)), SHAPE, dt, special=False)
    if acc.kind in "iu":  # float-to-int casts of NaN/inf/out-of-range values are undefined
        x = _defined_cast_input(x, acc)
    for axis in (None, 1, (0, 2)):
        _check_reduction(_calling(function, axis=axis, dtype=acc), x, name in TOLERANT,
                         functools.partial(_float32_reference, function, axis=axis, dtype=acc))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)], ids=repr)
@pytest.mark.parametrize("dt", [np.dtype(np.int32), np.dtype(np.float32)], ids=fdt.short)
@pytest.mark.parametrize("case", REDUCTION_CASES, ids=_reduction_id)
def test_cupy_reduction_traces_to_numpy_semantics(case: tuple[str, dict], dt: np.dtype, axis: Any) -> None:
    name, kwargs = case
    if name in ("argmax", "argmin") and isinstance(axis, tuple):
        pytest.skip("NumPy and CuPy take one axis or None for argmax/argmin")
    x = random_array(np.random.default_rng(seed_of("cupy", name, dt, axis)), SHAPE, dt)
    # looked up while tracing, as user code does: fusec wraps cupy.any/all/nan* for the trace
    graph = fusec.fuse(lambda a: getattr(cupy, name)(a, axis=axis, keepdims=True, **kwargs)).trace(
        fusec.ArraySpec(x.shape, x.dtype)
    )
    (actual,) = interpret(graph, [x])
    expected = _numpy(getattr(np, name), x, axis=axis, keepdims=True, **kwargs)
    assert_matches_numpy(actual, expected, exact=name not in TOLERANT)
