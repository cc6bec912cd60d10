"""Bad inputs to a fused function: each a clear fusec error (deriving from the builtin class NumPy would raise,
naming the argument or ``out=`` and saying what to do), never a crash inside NumPy/CuPy or a wrong answer.

``ERRORS`` is shared with ``tests/gpu/test_correctness_gpu.py``, which runs the same calls with CuPy arrays
(plus what needs a GPU: real CuPy arguments mixed with NumPy ones, arrays on another GPU). Arguments are
built with ``xp`` (``numpy`` or ``cupy``); ``other`` is the other library's array type, faked here by a
class whose module is ``cupy`` (fusec tells the libraries apart by the type's module).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import fusec
from fusec.support.errors import FusecError
from tests.helpers import assert_matches_numpy


@dataclass(frozen=True)
class ErrorCase:
    id: str
    fn: Callable[..., Any]
    make: Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]  # xp -> (args, kwargs)
    raises: type[BaseException]
    match: str  # a regex the message must match (the argument's name, the fix)
    hint: bool = True  # the error carries a hint
    kinds: tuple[str, ...] = field(default=("numpy", "cupy"))  # the backends it applies to


def add(a: Any, b: Any) -> Any:
    return a + b


def two_results(a: Any) -> Any:
    return a * 2, a.sum(axis=0)


def _f32(xp: Any, shape: tuple[int, ...] = (3, 4)) -> Any:
    return xp.asarray(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


ERRORS: list[ErrorCase] = [
    # argument count
    ErrorCase("too_few_arguments_names_the_missing_one", add, lambda xp: ((_f32(xp),), {}),
              TypeError, r"add\(\): missing a required argument: 'b'"),
    ErrorCase("too_many_arguments", add, lambda xp: ((_f32(xp), _f32(xp), _f32(xp)), {}),
              TypeError, r"add\(\): too many positional arguments"),
    ErrorCase("unknown_keyword_argument", add, lambda xp: ((_f32(xp), _f32(xp)), {"c": _f32(xp)}),
              TypeError, r"add\(\): .*'c'(.|\n)*hint: call it as add\(a, b\)"),
    # unsupported dtypes (complex until supported, object, strings, structured, datetime, byte order)
    *[ErrorCase(f"unsupported_dtype_{name}_names_the_argument", add,
                lambda xp, d=dtype: ((_f32(xp), np.zeros((3, 4), d)), {}),
                TypeError, rf"argument 'b' of add has dtype {re.escape(str(np.dtype(dtype)))}.*not support",
                kinds=("numpy",))
      for name, dtype in [("complex64", np.complex64), ("complex128", np.complex128), ("object", object),
                          ("unicode_string", "U3"), ("byte_string", "S3"), ("structured", [("v", "f4")]),
                          ("datetime64", "M8[s]"), ("timedelta64", "m8[ms]")]],
    ErrorCase("unsupported_dtype_complex_on_the_gpu", add,
              lambda xp: ((_f32(xp), xp.zeros((3, 4), np.complex64)), {}), TypeError,
              r"argument 'b' of add has dtype complex64", kinds=("cupy",)),
    ErrorCase("non_native_byte_order_says_how_to_convert", add,
              lambda xp: ((_f32(xp), np.zeros((3, 4), ">f4")), {}), TypeError,
              r"argument 'b' .*byte order(.|\n)*newbyteorder", kinds=("numpy",)),
    ErrorCase("set_argument_names_it", add, lambda xp: ((_f32(xp), {1.0, 2.0}), {}), TypeError, r"argument 'b'"),
    ErrorCase("foreign_array_type_names_it", add, lambda xp: ((_f32(xp), _Foreign()), {}), TypeError,
              r"argument 'b' of add is a tests\._Foreign(.|\n)*asarray"),
    # out=
    ErrorCase("out_of_the_wrong_shape", add, lambda xp: ((_f32(xp), 1.0), {"out": xp.zeros((4, 3), np.float32)}),
              ValueError, r"out= of add has shape \(4, 3\), the result has shape \(3, 4\)"),
    ErrorCase("out_of_an_int_dtype_for_a_float_result", add,
              lambda xp: ((_f32(xp), 1.0), {"out": xp.zeros((3, 4), np.int32)}),
              TypeError, r"float32 result into an array of dtype int32 with casting rule 'same_kind'"),
    ErrorCase("out_of_bool_dtype_for_an_int_result", add,
              lambda xp: ((xp.ones(3, np.int16), 1), {"out": xp.zeros(3, bool)}),
              TypeError, r"int16 result .* dtype bool"),
    ErrorCase("out_of_the_other_library", add, lambda xp: ((_f32(xp), 1.0), {"out": _other(xp)}),
              TypeError, r"out= of add must be a (numpy|cupy)\.ndarray like the arguments, got (cupy|numpy)\."),
    ErrorCase("out_as_a_python_list", two_results, lambda xp: ((_f32(xp),), {"out": [[0.0] * 4] * 3 + [None]}),
              ValueError, r"two_results returns 2 array\(s\) but out= has 4"),
    ErrorCase("out_with_too_few_arrays", two_results, lambda xp: ((_f32(xp),), {"out": xp.zeros((3, 4), np.float32)}),
              ValueError, r"two_results returns 2 array\(s\) but out= has 1(.|\n)*tuple of 2"),
    ErrorCase("out_tuple_with_a_bad_second_array", two_results,
              lambda xp: ((_f32(xp),), {"out": (xp.zeros((3, 4), np.float32), xp.zeros((3,), np.float32))}),
              ValueError, r"out\[1\] of two_results has shape \(3,\), the result has shape \(4,\)"),
    ErrorCase("read_only_out", add, lambda xp: ((_f32(xp), 1.0), {"out": _read_only((3, 4))}),
              ValueError, r"out= of add is read-only", kinds=("numpy",)),
]


class _Foreign:
    """An array of some other library (a torch tensor, say): it has a shape and a dtype."""

    __module__ = "tests"
    shape = (3, 4)
    dtype = np.dtype(np.float32)


class _FakeCupyArray:
    """Stands for a CuPy array (no GPU here): fusec tells libraries apart by the type's module."""

    __module__ = "cupy._core.core"

    def __init__(self, shape: tuple[int, ...], dtype: Any):
        self.shape, self.dtype = shape, np.dtype(dtype)


def _other(xp: Any) -> Any:
    """An array of the library the arguments are not from."""
    if xp is np:
        return _FakeCupyArray((3, 4), np.float32)
    return np.zeros((3, 4), np.float32)


def _read_only(shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, np.float32)
    out.flags.writeable = False
    return out


def check_error(case: ErrorCase, xp: Any) -> None:
    """``case`` raises its class (a fusec error) with the message and a hint; no out= array was written."""
    args, kwargs = case.make(xp)
    out = kwargs.get("out")
    outs = out if isinstance(out, tuple) else (out,)
    before = [o.copy() for o in outs if isinstance(o, (np.ndarray, xp.ndarray))]
    with pytest.raises(case.raises) as info:
        fusec.fuse(case.fn)(*args, **kwargs)
    err = info.value
    assert isinstance(err, FusecError), f"{type(err).__name__} is not a fusec error: {err}"
    assert re.search(case.match, str(err)), f"message {str(err)!r} does not match {case.match!r}"
    assert not case.hint or err.hint, f"no hint in {str(err)!r}"
    assert err.loc and err.loc.startswith(f"{__file__}:"), f"the error does not name the calling line: {err.loc}"
    after = [o for o in outs if isinstance(o, (np.ndarray, xp.ndarray))]
    for a, b in zip(after, before):
        assert (a == b).all(), "an out= array was written before the error"


CPU_ERRORS = [c for c in ERRORS if "numpy" in c.kinds]


@pytest.mark.parametrize("case", CPU_ERRORS, ids=[c.id for c in CPU_ERRORS])
def test_input_error(case: ErrorCase) -> None:
    check_error(case, np)


def test_mixed_numpy_and_cupy_arguments_raise_type_error_naming_the_arguments() -> None:
    with pytest.raises(fusec.FusecTypeError) as info:
        fusec.fuse(add)(np.ones(3, np.float32), _FakeCupyArray((3,), np.float32))
    assert isinstance(info.value, TypeError)
    assert re.search(r"add got cupy argument 'b' and numpy argument 'a'", str(info.value)), str(info.value)
    assert "cupy.asarray" in info.value.hint


def test_out_overlapping_inputs_gives_results_as_if_the_inputs_were_copied() -> None:
    a = np.arange(5)
    expected = np.arange(5)
    np.add(expected[:-1], expected[1:], out=expected[1:])
    result = fusec.fuse(add)(a[:-1], a[1:], out=a[1:])
    assert_matches_numpy(a, np.array([0, 1, 3, 5, 7]), exact=True)
    assert_matches_numpy(a, expected, exact=True)
    assert result.base is a


def test_out_of_a_float16_array_for_a_float64_result_casts_same_kind() -> None:
    out = np.zeros(4, np.float16)
    result = fusec.fuse(add)(np.linspace(0, 1, 4), 0.5, out=out)
    assert result is out
    assert_matches_numpy(out, (np.linspace(0, 1, 4) + 0.5).astype(np.float16), exact=True)


def test_datetime_argument_never_reaches_numpy_buffers() -> None:
    # a datetime array's .data raises ValueError inside NumPy: the dispatch fast path must not touch it
    with pytest.raises(fusec.FusecTypeError, match="datetime64"):
        fusec.fuse(lambda t: t + 1)(np.zeros(3, "M8[s]"))


# ---- dtype spellings and array subclasses (issue 18: silent wrong results) ------------------------------------


def test_astype_i8_means_numpys_int64_not_int8() -> None:
    a = np.array([100, -100, 7], np.int8)
    got = fusec.fuse(lambda a: a.astype("i8") * 1000)(a)
    assert_matches_numpy(got, a.astype("i8") * 1000)
    assert got.dtype == np.int64


def test_sum_with_dtype_i8_of_int8_gives_300_not_44() -> None:
    a = np.array([100, 100, 100], np.int8)
    got = fusec.fuse(lambda a: a.sum(dtype="i8"))(a)
    assert got == 300 and got.dtype == np.int64


@pytest.mark.parametrize("code", ["u8", "i4", "f8", "<f4", "b1", "uint16", "float16"])
def test_dtype_codes_in_traced_code_mean_what_numpy_says(code: str) -> None:
    a = np.array([1.5, -2.0, 3.25], np.float32)
    got = fusec.fuse(lambda a: a.astype(code))(a)
    with np.errstate(invalid="ignore"):
        assert_matches_numpy(got, a.astype(code))


def test_fusec_short_names_in_traced_code_are_refused_with_numpys_spelling() -> None:
    a = np.ones(3, np.float32)
    with pytest.raises(FusecError, match=r"'f32' is not a dtype") as info:
        fusec.fuse(lambda a: a.astype("f32"))(a)
    assert "NumPy spells it 'float32'" in str(info.value) and __file__ in str(info.value)
    with pytest.raises(FusecError, match="dtype float128 is not supported"):  # NumPy's "f16" is 16 bytes
        fusec.fuse(lambda a: a.astype("f16"))(a)
    assert fusec.ArraySpec.parse("i8[3]").dtype == np.int8  # the command line's f32[...] names stay fusec's


def test_array_spec_error_names_the_callers_line_not_string() -> None:
    """ArraySpec's errors pointed at ``<string>:6`` (the dataclass's generated ``__init__``)."""
    line = sys._getframe().f_lineno + 2
    with pytest.raises(FusecError) as info:
        fusec.ArraySpec((4,), "floaty")
    assert info.value.loc == f"{__file__}:{line}", info.value.loc


@pytest.mark.parametrize(("shape", "strides", "raises", "fragment"), [
    ((4.5, 4), None, TypeError, "dimension 0 is float 4.5, not an integer"),
    (("4",), None, TypeError, "dimension 0 is str '4', not an integer"),
    ((True, 2), None, TypeError, "dimension 0 is bool True, not an integer"),
    ((2, np.bool_(True)), None, TypeError, "dimension 1 is numpy.bool True, not an integer"),
    ((2, np.float64(3.0)), None, TypeError, "dimension 1 is numpy.float64 3.0, not an integer"),
    ("44", None, TypeError, "shape must be an integer or a sequence of integers, got str '44'"),
    (4.0, None, TypeError, "shape must be an integer or a sequence of integers, got float 4.0"),
    ((-1, 2), None, ValueError, "negative dimension"),
    ((4, 4), (1.5, 1), TypeError, "stride 0 is float 1.5, not an integer"),
    ((4, 4), (1,), ValueError, "give 1 stride(s) for the 2 dimension(s)"),
], ids=["float", "str", "bool", "numpy_bool", "numpy_float", "str_shape", "float_shape", "negative",
        "float_stride", "strides_of_another_rank"])
def test_array_spec_float_str_or_bool_dimension_is_refused_not_truncated(shape, strides, raises, fragment) -> None:
    """``ArraySpec((4.5, 4))`` became ``[4, 4]``, and ``"4"`` and ``True`` were taken as dimensions."""
    line = sys._getframe().f_lineno + 2
    with pytest.raises(raises) as info:
        fusec.ArraySpec(shape, "float32", strides)
    assert isinstance(info.value, FusecError) and fragment in info.value.message, str(info.value)
    assert info.value.loc == f"{__file__}:{line}"


def test_array_spec_takes_python_and_numpy_integers() -> None:
    spec = fusec.ArraySpec([np.int32(2), 3, np.uint8(0)], "float32", (np.int64(-1), 2, 1))
    assert spec.shape == (2, 3, 0) and all(type(d) is int for d in spec.shape) and spec.strides == (-1, 2, 1)
    assert fusec.ArraySpec(np.int64(5)).shape == (5,) and fusec.ArraySpec(np.array([2, 3])).shape == (2, 3)
    assert fusec.ArraySpec(()).shape == ()


def test_masked_array_argument_is_refused_not_silently_unmasked() -> None:
    m = np.ma.masked_array([1.0, 100.0], mask=[False, True])
    with pytest.raises(FusecError, match="is a masked array: its mask would be lost") as info:
        fusec.fuse(lambda a: a.sum())(m)
    assert "numpy.ma.filled(a, 0)" in str(info.value)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # NumPy's own, on creating a matrix
def test_numpy_matrix_argument_is_refused_not_multiplied_elementwise() -> None:
    with pytest.raises(FusecError, match=r"is a numpy.matrix, whose \* is a matrix product"):
        fusec.fuse(lambda a, b: a * b)(np.matrix([[1.0, 2.0]]), np.matrix([[3.0], [4.0]]))


@pytest.mark.parametrize("operand", [None, object(), "s", b"x"], ids=["None", "object", "str", "bytes"])
def test_operand_numpy_refuses_raises_numpys_type_error(operand: Any) -> None:
    """An operand NumPy refuses with a TypeError (issue 33, item 3): fusec's error is a TypeError too, so ``except
    TypeError`` around a fused call catches it, and it keeps fusec's message at the user's line and its hint."""
    x = np.ones(4)

    def fn(a):
        return a + operand

    with pytest.raises(TypeError):
        fn(x)
    with pytest.raises(TypeError) as info:
        fusec.fuse(fn)(x)
    assert isinstance(info.value, FusecError) and __file__ in str(info.value) and info.value.hint


def test_out_that_is_no_array_raises_numpys_type_error_and_a_captured_one_stays_unsupported() -> None:
    x = np.ones(4)
    with pytest.raises(TypeError):
        np.add(x, 1, out=3)
    with pytest.raises(TypeError, match="not int") as info:
        fusec.fuse(lambda a: np.add(a, 1, out=3))(x)
    assert isinstance(info.value, FusecError)
    elsewhere = np.zeros(4)
    with pytest.raises(FusecError) as info:  # NumPy takes it; fusec does not write to arrays it was not given
        fusec.fuse(lambda a: np.add(a, 1, out=elsewhere))(x)
    assert not isinstance(info.value, TypeError)


def test_a_list_operand_is_taken_as_numpy_takes_it_and_a_ragged_one_is_numpys_value_error() -> None:
    """NumPy takes a list of numbers as an operand (as np.asarray makes it), and so does fusec; a ragged nesting is
    NumPy's ValueError, as a fusec error at the user's line."""
    a = np.arange(4.0)
    np.testing.assert_array_equal(fusec.fuse(lambda a: a + [1.0, 2.0, 3.0, 4.0])(a), a + [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(FusecError, match="inhomogeneous") as info:
        fusec.fuse(lambda a: a + [1, [2, 3]])(a)
    assert isinstance(info.value, ValueError) and __file__ in str(info.value)
