"""NumPy 2 promotion (NEP 50) through ``fusec.fuse`` on NumPy inputs: every case of CORRECTNESS.md,
then tables of operators against Python and NumPy scalars, forward and reflected.

Python int/float are weak (they take the array's dtype, and an int that does not fit raises
OverflowError); NumPy scalars and 0-d arrays are strong. Each case is checked against NumPy's own
result (dtype and value) on the same input, and against the dtype CORRECTNESS.md states.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fusec
from fusec.ir import dtypes as fdt
from tests.helpers import assert_matches_numpy, numpy_error_class, random_array, seed_of


def _numpy(fn: Callable[..., Any], *args: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def _array(dtype: Any, shape: tuple[int, ...] = (7,)) -> np.ndarray:
    return random_array(
        np.random.default_rng(seed_of("promotion", np.dtype(dtype).str, shape)), shape, dtype, special=False
    )


# (label, function, input dtypes, the result dtype CORRECTNESS.md states)
CASES: list[tuple[str, Callable[..., Any], tuple[str, ...], str]] = [
    ("u8 + 1", lambda x: x + 1, ("uint8",), "uint8"),
    ("i8 + 1.0", lambda x: x + 1.0, ("int8",), "float64"),
    ("f16 + 1.0", lambda x: x + 1.0, ("float16",), "float16"),
    ("bool + 1", lambda x: x + 1, ("bool",), "int64"),
    ("u8 + np.int64(1)", lambda x: x + np.int64(1), ("uint8",), "int64"),
    ("f32 + np.float64(1)", lambda x: x + np.float64(1), ("float32",), "float64"),
    ("f32 + 0-d f64 array", lambda x: x + np.array(1.0), ("float32",), "float64"),
    ("int32 + uint32", lambda x, y: x + y, ("int32", "uint32"), "int64"),
    ("int64 + uint64", lambda x, y: x + y, ("int64", "uint64"), "float64"),
    ("f16 + int16", lambda x, y: x + y, ("float16", "int16"), "float32"),
    ("u8 < 300", lambda x: x < 300, ("uint8",), "bool"),
    ("u8 == -1", lambda x: x == -1, ("uint8",), "bool"),
    ("i8 >= 2**70", lambda x: x >= 2**70, ("int8",), "bool"),
    ("u64 != -1", lambda x: x != -1, ("uint64",), "bool"),
    ("i32 / 2", lambda x: x / 2, ("int32",), "float64"),
    ("f16 * 2", lambda x: x * 2, ("float16",), "float16"),
    ("u8 - 255", lambda x: x - 255, ("uint8",), "uint8"),
    ("i16 + True", lambda x: x + True, ("int16",), "int16"),
    ("bool & True", lambda x: x & True, ("bool",), "bool"),
    ("bool + 1.5", lambda x: x + 1.5, ("bool",), "float64"),
    ("i8 + np.uint8(1)", lambda x: x + np.uint8(1), ("int8",), "int16"),
    ("f16 + np.float32(1)", lambda x: x + np.float32(1), ("float16",), "float32"),
    ("u8 + np.float16(1)", lambda x: x + np.float16(1), ("uint8",), "float16"),
    ("u32 * np.int8(-1)", lambda x: x * np.int8(-1), ("uint32",), "int64"),
    ("int32 where float32", lambda c, x, y: np.where(c, x, y), ("bool", "int32", "float32"), "float64"),
    ("where(c, u8, 1)", lambda c, x: np.where(c, x, 1), ("bool", "uint8"), "uint8"),
    ("where(c, f16, 2.5)", lambda c, x: np.where(c, x, 2.5), ("bool", "float16"), "float16"),
    ("clip(u8, 0, 7)", lambda x: np.clip(x, 0, 7), ("uint8",), "uint8"),
    ("clip(u8, -1, 300)", lambda x: np.clip(x, -1, 300), ("uint8",), "uint8"),
    ("clip(u8, 5, 300)", lambda x: np.clip(x, 5, 300), ("uint8",), "uint8"),
    ("clip(i8, -1000, 7)", lambda x: x.clip(-1000, 7), ("int8",), "int8"),
    ("clip(f16, 0, 2.5)", lambda x: np.clip(x, 0, 2.5), ("float16",), "float16"),
    ("clip(i16, np.int32(0), 3)", lambda x: np.clip(x, np.int32(0), 3), ("int16",), "int32"),
    # reflected: the scalar on the left
    ("1 + u8", lambda x: 1 + x, ("uint8",), "uint8"),
    ("2.0 * i8", lambda x: 2.0 * x, ("int8",), "float64"),
    ("1.0 - f16", lambda x: 1.0 - x, ("float16",), "float16"),
    ("3 // i16", lambda x: 3 // x, ("int16",), "int16"),
    ("np.int64(1) + u8", lambda x: np.int64(1) + x, ("uint8",), "int64"),
    ("np.float64(1) - f32", lambda x: np.float64(1) - x, ("float32",), "float64"),
    ("np.float32(2) * f16", lambda x: np.float32(2) * x, ("float16",), "float32"),
    ("np.uint8(1) + i8", lambda x: np.uint8(1) + x, ("int8",), "int16"),
    ("300 > u8", lambda x: 300 > x, ("uint8",), "bool"),
    ("2 ** u8", lambda x: 2**x, ("uint8",), "uint8"),
    ("1 / f32", lambda x: 1 / x, ("float32",), "float32"),
    # bfloat16 (ml_dtypes): NumPy's answers with ml_dtypes loaded, the rules docs/ops.md states
    ("bf16 + bf16", lambda x, y: x + y, ("bfloat16", "bfloat16"), "bfloat16"),
    ("bf16 + f16", lambda x, y: x + y, ("bfloat16", "float16"), "float32"),
    ("f16 * bf16", lambda x, y: x * y, ("float16", "bfloat16"), "float32"),
    ("bf16 + f32", lambda x, y: x + y, ("bfloat16", "float32"), "float32"),
    ("bf16 - f64", lambda x, y: x - y, ("bfloat16", "float64"), "float64"),
    ("bf16 + bool", lambda x, y: x + y, ("bfloat16", "bool"), "bfloat16"),
    ("bf16 + i8", lambda x, y: x + y, ("bfloat16", "int8"), "bfloat16"),
    ("u8 * bf16", lambda x, y: x * y, ("uint8", "bfloat16"), "bfloat16"),
    ("bf16 + i16", lambda x, y: x + y, ("bfloat16", "int16"), "float32"),
    ("bf16 + u16", lambda x, y: x + y, ("bfloat16", "uint16"), "float32"),
    ("bf16 + i32", lambda x, y: x + y, ("bfloat16", "int32"), "float64"),
    ("bf16 / i64", lambda x, y: x / y, ("bfloat16", "int64"), "float64"),
    ("bf16 + u64", lambda x, y: x + y, ("bfloat16", "uint64"), "float64"),
    ("bf16 + 1", lambda x: x + 1, ("bfloat16",), "bfloat16"),
    ("bf16 + 1.0", lambda x: x + 1.0, ("bfloat16",), "bfloat16"),
    ("1.0 - bf16", lambda x: 1.0 - x, ("bfloat16",), "bfloat16"),
    ("bf16 / 3", lambda x: x / 3, ("bfloat16",), "bfloat16"),
    ("bf16 ** 2", lambda x: x**2, ("bfloat16",), "bfloat16"),
    ("bf16 * np.float32(2)", lambda x: x * np.float32(2), ("bfloat16",), "float32"),
    ("i8 + np bf16 scalar", lambda x: x + np.dtype("bfloat16").type(1.5), ("int8",), "bfloat16"),
    ("bf16 < 0.5", lambda x: x < 0.5, ("bfloat16",), "bool"),
    ("bf16 == i32", lambda x, y: x == y, ("bfloat16", "int32"), "bool"),
    ("where(c, bf16, 2.5)", lambda c, x: np.where(c, x, 2.5), ("bool", "bfloat16"), "bfloat16"),
    ("where(c, bf16, f16)", lambda c, x, y: np.where(c, x, y), ("bool", "bfloat16", "float16"), "float32"),
    ("clip(bf16, 0, 2.5)", lambda x: np.clip(x, 0, 2.5), ("bfloat16",), "float32"),  # no bfloat16 clip loop
    ("bf16.astype(i32)", lambda x: x.astype(np.int32), ("bfloat16",), "int32"),
    ("i64.astype(bf16)", lambda x: x.astype("bfloat16"), ("int64",), "bfloat16"),
    ("sum(bf16)", lambda x: x.sum(), ("bfloat16",), "bfloat16"),
    ("mean(bf16)", lambda x: np.mean(x), ("bfloat16",), "bfloat16"),
    ("argmax(bf16)", lambda x: np.argmax(x), ("bfloat16",), "int64"),
]


@pytest.mark.parametrize("label, fn, in_dtypes, result", CASES, ids=[c[0] for c in CASES])
def test_promotion_matches_numpy(label: str, fn: Callable[..., Any], in_dtypes: tuple[str, ...], result: str) -> None:
    args = [_array(dt) for dt in in_dtypes]
    expected = _numpy(fn, *args)
    assert np.asarray(expected).dtype == np.dtype(result), "NumPy itself changed: update CORRECTNESS.md"
    actual = fusec.fuse(fn)(*args)
    assert_matches_numpy(actual, expected, exact=True)


def test_promotion_python_int_out_of_range_raises_overflow_error() -> None:
    x = _array("uint8")
    with pytest.raises(OverflowError):
        x + 300  # noqa: B018 - NumPy's behaviour, the reference
    with pytest.raises(fusec.FusecOverflowError) as info:
        fusec.fuse(lambda a: a + 300)(x)
    assert isinstance(info.value, OverflowError)
    assert "300" in str(info.value) and "uint8" in str(info.value)


@pytest.mark.parametrize(
    "fn",
    [lambda a: 300 - a, lambda a: a * -1, lambda a: np.add(a, 256)],
    ids=["300 - u8", "u8 * -1", "np.add(u8, 256)"],
)
def test_promotion_reflected_and_ufunc_overflow_raise_overflow_error(fn: Callable[..., Any]) -> None:
    x = _array("uint8")
    with pytest.raises(OverflowError):
        fn(x)
    with pytest.raises(fusec.FusecOverflowError):
        fusec.fuse(fn)(x)


@pytest.mark.parametrize(
    "fn",
    [lambda a: a**-1, lambda a: a ** np.int8(-2), lambda a: np.power(a, -3)],
    ids=["x ** -1", "x ** np.int8(-2)", "np.power(x, -3)"],
)
def test_promotion_integer_to_negative_constant_power_raises_value_error(fn: Callable[..., Any]) -> None:
    x = _array("int16")
    with pytest.raises(ValueError, match="negative integer powers"):
        fn(x)
    with pytest.raises(fusec.FusecValueError, match="negative integer powers"):
        fusec.fuse(fn)(x)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("exponent", [0.5, 2, -1, 2.0, -1.0, 3, np.float64(0.5), np.float32(0.5)], ids=repr)
def test_pow_operator_matches_numpy_at_negative_zero_and_infinities(dtype: str, exponent: Any) -> None:
    """``x ** 0.5`` is NumPy's sqrt for float arrays (``**`` takes the Python scalars 2, -1 and 0.5 through
    square, reciprocal and sqrt), so float16 -0.0 gives -0.0 and -inf NaN; fusec traced ``power``, which
    gave 0.0 and inf. ``np.power(x, 0.5)`` is power, in fusec as in NumPy."""
    x = np.array([-0.0, 0.0, -np.inf, np.inf, -1.0, 0.25, 4.0, np.nan], dtype=dtype)
    for fn in (lambda a: a ** exponent, lambda a: np.power(a, exponent)):
        with np.errstate(all="ignore"):
            expected = fn(x)
            actual = fusec.fuse(fn)(x)
        assert_matches_numpy(actual, expected, exact=True)
        assert np.array_equal(np.signbit(actual), np.signbit(expected))


@pytest.mark.xfail(
    strict=True,
    raises=fusec.FusecOverflowError,
    reason="NumPy's where silently wraps a Python int that does not fit (np.where(c, u8, 300) "
    "holds 44); fusec raises OverflowError as for u8 + 300",
)
def test_promotion_where_with_out_of_range_python_int_matches_numpy() -> None:
    c, x = np.array([True, False]), np.array([3, 4], dtype=np.uint8)
    expected = np.where(c, x, 300)
    assert_matches_numpy(fusec.fuse(lambda a, b: np.where(a, b, 300))(c, x), expected, exact=True)


def test_promotion_comparison_with_out_of_range_int_is_exact() -> None:
    x = np.array([0, 1, 254, 255], dtype=np.uint8)
    actual = fusec.fuse(lambda a: (a < 300, a == 256, a > -1))(x)
    expected = (x < 300, x == 256, x > -1)
    for got, want in zip(actual, expected):
        assert_matches_numpy(got, want, exact=True)
    assert actual[0].all() and not actual[1].any() and actual[2].all()


def test_promotion_complex_scalar_is_unsupported_type_error() -> None:
    x = _array("float32")
    assert (x + 1j).dtype == np.complex64  # what NumPy does; fusec has no complex dtypes yet
    with pytest.raises(fusec.FusecTypeError, match="complex"):
        fusec.fuse(lambda a: a + 1j)(x)


def test_promotion_complex_input_is_unsupported_type_error() -> None:
    with pytest.raises(fusec.FusecTypeError, match="complex"):
        fusec.fuse(lambda a: a + 1)(np.ones(3, dtype=np.complex64))


def test_promotion_python_scalar_argument_is_weak() -> None:
    """A Python scalar passed as an argument is weak, like a literal in the body."""
    x = _array("float16")
    fused = fusec.fuse(lambda a, s: a * s)
    assert_matches_numpy(fused(x, 2.5), x * 2.5, exact=True)
    assert fused(x, 2.5).dtype == np.float16
    assert_matches_numpy(fused(x, np.float64(2.5)), x * np.float64(2.5), exact=True)
    assert fused(x, np.float64(2.5)).dtype == np.float64


def test_promotion_zero_d_array_argument_is_strong() -> None:
    x, s = _array("float16"), np.array(2.5, dtype=np.float64)
    actual = fusec.fuse(lambda a, b: a * b)(x, s)
    assert_matches_numpy(actual, x * s, exact=True)
    assert actual.dtype == np.float64


# --- operator tables: every dtype against Python and NumPy scalars, forward and reflected ---------
BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}
SCALARS = [
    1,
    3,
    -1,
    300,
    2.5,
    -0.0,
    True,
    np.int8(-2),
    np.uint16(7),
    np.int64(5),
    np.float16(0.5),
    np.float32(1.5),
    np.float64(-2.0),
    np.bool_(True),
]


def _scalar_id(value: Any) -> str:
    return f"{type(value).__name__}({value!r})"


@pytest.mark.parametrize("scalar", SCALARS, ids=_scalar_id)
@pytest.mark.parametrize("dt", fdt.SUPPORTED, ids=fdt.short)
def test_promotion_operator_with_scalar_matches_numpy(dt: np.dtype, scalar: Any) -> None:
    x = random_array(np.random.default_rng(seed_of("operators", dt, _scalar_id(scalar))), (5,), dt)
    if dt.kind in "iu":
        x = np.where(x < 0, 1, x).astype(dt)  # int ** negative int raises ValueError in NumPy, per value
    for symbol, op in BINARY.items():
        for reflected in (False, True):
            fn = (lambda a, op=op: op(scalar, a)) if reflected else (lambda a, op=op: op(a, scalar))
            where = f"{'scalar ' + symbol + ' x' if reflected else 'x ' + symbol + ' scalar'}"
            try:
                expected = _numpy(fn, x)
            except Exception as exc:
                with pytest.raises(numpy_error_class(exc)) as info:
                    fusec.fuse(fn)(x)
                assert isinstance(info.value, fusec.FusecError), f"{where}: {info.value!r}"
                continue
            try:
                actual = fusec.fuse(fn)(x)
            except Exception as exc:
                raise AssertionError(
                    f"{where} with {dt}: NumPy gives {np.asarray(expected).dtype}, fusec raised {exc!r}"
                ) from exc
            try:
                assert_matches_numpy(actual, expected, exact=True)
            except AssertionError as exc:
                raise AssertionError(f"{where} with {dt}: {exc}") from None


# ---- comparisons with Python ints beyond the array's range (issue 18: silent wrong results) --------------------


@pytest.mark.parametrize("dtype, big", [("int64", 2**63), ("int64", -2**63 - 1), ("uint64", 2**64), ("uint64", -1),
                                        ("uint8", 300), ("int8", -129), ("int32", 2**70)])
def test_int64_compared_with_2_to_the_63_is_exact_not_float64(dtype: str, big: int) -> None:
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, 0, info.max - 1], dtype)
    for fn in (lambda x: x == big, lambda x: x != big, lambda x: x < big, lambda x: x <= big,
               lambda x: x > big, lambda x: x >= big, lambda x: big < x, lambda x: big >= x):
        got, want = fusec.fuse(fn)(x), fn(x)
        assert got.dtype == want.dtype and np.array_equal(got, want), (dtype, big, got, want)
        assert got.flags.writeable  # an array of its own, not a view of one constant
    assert not fusec.fuse(lambda x: x == big)(np.array(info.max, dtype))  # 0-d too
