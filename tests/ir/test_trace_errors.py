"""Constructs fusec cannot trace raise the right FusecError class, and the message names this file
and the line of the offending statement (marked ``# <- error`` below). Where NumPy itself would
raise, the fusec error is also an instance of NumPy's class."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fusec
from fusec.ir.ops import by_numpy_name

MARKER = "# <- error"
THIS_FILE = os.path.basename(__file__)
CAPTURED = np.arange(4.0)


def _marked_line(fn: Callable[..., Any]) -> int:
    """The line number of the statement marked ``# <- error`` in ``fn``'s source."""
    lines, first = inspect.getsourcelines(fn)
    marked = [first + i for i, line in enumerate(lines) if line.rstrip().endswith(MARKER)]
    assert len(marked) == 1, f"{fn.__name__} needs exactly one '{MARKER}' line"
    return marked[0]


def _raises_at_marker(
    fn: Callable[..., Any], error: type[BaseException], *args: Any, match: str | None = None
) -> BaseException:
    """Calling ``fusec.fuse(fn)`` raises ``error`` (a FusecError) whose message names the marked line."""
    if not args:
        args = (np.arange(4.0),)
    with pytest.raises(error, match=match) as info:
        fusec.fuse(fn)(*args)
    assert isinstance(info.value, fusec.FusecError), repr(info.value)
    where = f"{THIS_FILE}:{_marked_line(fn)}"
    assert where in str(info.value), f"expected {where!r} in: {info.value}"
    return info.value


# --- Python control flow and conversions --------------------------------------------------------
def if_on_traced(x):
    if x > 0:  # <- error
        return x
    return -x


def bool_of_traced(x):
    y = x * 2
    return bool(y)  # <- error


def float_of_traced(x):
    return float(np.sum(x))  # <- error


def int_of_traced(x):
    return x + int(np.max(x))  # <- error


def while_on_traced(x):
    while np.any(x > 10):  # <- error
        x = x / 2
    return x


def and_of_traced(x):
    return (x > 0) and (x < 3)  # <- error


def range_of_traced(x):
    return [x * i for i in range(np.sum(x > 0))]  # <- error


@pytest.mark.parametrize(
    "fn",
    [
        if_on_traced,
        bool_of_traced,
        float_of_traced,
        int_of_traced,
        while_on_traced,
        and_of_traced,
        range_of_traced,
    ],
    ids=lambda f: f.__name__,
)
def test_trace_error_python_control_flow_names_the_line(fn: Callable[..., Any]) -> None:
    error = _raises_at_marker(fn, fusec.TraceError)
    assert error.hint, "a hint says what to do instead"


# --- indexing and mutation ----------------------------------------------------------------------
def fancy_index(x):
    y = x + 1
    return y[[[1, 0, 2]] * 22]  # a constant index array of more than 64 elements # <- error


def boolean_mask_index(x):
    return x[x > 0]  # <- error


def item_assignment(x):
    y = x * 2
    y[np.argmax(x, axis=0)] = 1  # <- error
    return y


def in_place_multiply_then_sort(x):
    x *= 3
    return np.sort(x)  # <- error


def reshape(x):
    return x.reshape(2, 2, order="A")  # <- error


@pytest.mark.parametrize(
    "fn",
    [fancy_index, boolean_mask_index, item_assignment, in_place_multiply_then_sort, reshape],
    ids=lambda f: f.__name__,
)
def test_trace_error_unsupported_indexing_and_mutation_names_the_line(fn: Callable[..., Any]) -> None:
    _raises_at_marker(fn, fusec.UnsupportedError)


def test_trace_error_after_an_in_place_update_leaves_the_input_unchanged() -> None:
    x = np.arange(4.0)
    with pytest.raises(fusec.UnsupportedError):
        fusec.fuse(in_place_multiply_then_sort)(x)
    assert (x == np.arange(4.0)).all()


# --- functions, arguments and values ------------------------------------------------------------
def asarray_of_traced(x):
    return np.asarray(x).tolist()  # <- error


def sort(x):
    return np.sort(x)  # <- error


def median(x):
    return np.median(x)  # <- error


def captured_array(x):
    return x + CAPTURED  # <- error


def one_argument_where(x):
    return np.where(x > 1)  # <- error


_OUTSIDE = np.empty(4)  # out= a NumPy array: refused (out= a traced array is an in-place update)


def out_inside(x):
    np.add(x, 1, out=_OUTSIDE)  # <- error
    return _OUTSIDE


def where_kwarg_inside(x):
    return np.exp(x, where=x > 0)  # <- error


def ufunc_accumulate(x):
    return np.subtract.accumulate(x)  # <- error


def var_with_where(x):
    return np.var(x, where=x > 0)  # <- error


@pytest.mark.parametrize(
    "fn",
    [
        asarray_of_traced,
        sort,
        median,
        captured_array,
        one_argument_where,
        out_inside,
        where_kwarg_inside,
        ufunc_accumulate,
        var_with_where,
    ],
    ids=lambda f: f.__name__,
)
def test_trace_error_unsupported_function_names_the_line(fn: Callable[..., Any]) -> None:
    _raises_at_marker(fn, fusec.TraceError)


UNSUPPORTED_UFUNC = next(
    u for u in (np.gcd, np.lcm, np.spacing) if u.__name__ not in by_numpy_name()
)


def unsupported_ufunc(x):
    return UNSUPPORTED_UFUNC(x, x)  # <- error


def test_trace_error_ufunc_not_in_the_op_table_names_it_and_the_line() -> None:
    error = _raises_at_marker(unsupported_ufunc, fusec.UnsupportedError)
    assert UNSUPPORTED_UFUNC.__name__ in str(error)


def complex_scalar(x):
    return x * (1 + 2j)  # <- error


def test_trace_error_complex_scalar_is_type_error_at_the_line() -> None:
    _raises_at_marker(complex_scalar, fusec.FusecTypeError, match="complex")


def no_loop(x):
    return np.bitwise_and(x, x)  # <- error


def test_trace_error_no_loop_for_dtype_is_type_error_at_the_line() -> None:
    with pytest.raises(TypeError):
        np.bitwise_and(np.arange(4.0), np.arange(4.0))
    _raises_at_marker(no_loop, fusec.FusecTypeError)


def returns_none(x):
    y = x + 1  # noqa: F841 - forgot to return y


def test_trace_error_returning_none_returns_none_as_numpy_does() -> None:
    # not an error (issue 33): the function returns None, so the call does (tests/correctness/test_none_results.py)
    assert fusec.fuse(returns_none)(np.arange(4.0)) is None


def test_trace_error_set_argument_names_the_argument_and_call_line() -> None:
    fused = fusec.fuse(lambda values: values * 2)  # (lists, tuples and dicts are containers of arguments)
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(fusec.FusecTypeError) as info:
        fused({1.0, 2.0})
    assert "'values'" in str(info.value)
    assert f"{THIS_FILE}:{line}" in str(info.value)


def test_trace_error_bad_out_on_the_call_is_type_error() -> None:
    fused = fusec.fuse(lambda a: a * 2)
    with pytest.raises(fusec.FusecTypeError):
        fused(np.arange(4.0), out=3.0)


# --- errors NumPy raises too: the fusec error is also NumPy's class -----------------------------
def broadcast_mismatch(x, y):
    z = x * 2
    return z + y  # <- error


def bad_axis(x):
    return np.sum(x, axis=2)  # <- error


def duplicate_axis(x):
    return np.max(x, axis=(1, -1))  # <- error


def overflowing_int(x):
    return x + 300  # <- error


def argmax_tuple_axis(x):
    return np.argmax(x, axis=(0,))  # <- error


NUMPY_ERRORS = [
    (broadcast_mismatch, ValueError, fusec.FusecValueError, (np.ones((3, 2)), np.ones(4))),
    (bad_axis, np.exceptions.AxisError, fusec.FusecAxisError, (np.ones((3, 2)),)),
    (duplicate_axis, ValueError, fusec.FusecValueError, (np.ones((3, 2)),)),
    (overflowing_int, OverflowError, fusec.FusecOverflowError, (np.ones(3, np.uint8),)),
    (argmax_tuple_axis, TypeError, fusec.FusecTypeError, (np.ones((3, 2)),)),
]


@pytest.mark.parametrize("fn, numpy_error, fusec_error, args", NUMPY_ERRORS, ids=lambda v: getattr(v, "__name__", ""))
def test_trace_error_where_numpy_raises_is_numpy_class_at_the_line(
    fn: Callable[..., Any], numpy_error: type[BaseException], fusec_error: type[BaseException], args: tuple
) -> None:
    with pytest.raises(numpy_error):
        fn(*args)
    error = _raises_at_marker(fn, fusec_error, *args)
    assert isinstance(error, numpy_error)


def helper_with_error(x):
    return np.sort(x)  # <- error


def test_trace_error_inside_a_helper_names_the_helper_line() -> None:
    def outer(x):
        return helper_with_error(x) + 1

    with pytest.raises(fusec.UnsupportedError) as info:
        fusec.fuse(outer)(np.arange(4.0))
    assert f"{THIS_FILE}:{_marked_line(helper_with_error)}" in str(info.value)


# --- issue 17: other libraries' spellings, unknown attributes, returns, true module names ---------
def torch_dim_method(x):
    return x.sum(dim=0)  # <- error


def torch_dim_function(x):
    return np.sum(x, dim=0)  # <- error


def torch_keepdim_method(x):
    return x.max(axis=0, keepdim=True)  # <- error


def squeeze_dim(x):
    return x.squeeze(dim=0)  # <- error


@pytest.mark.parametrize("fn", [torch_dim_method, torch_dim_function, torch_keepdim_method, squeeze_dim],
                         ids=lambda f: f.__name__)
def test_trace_error_torch_keyword_is_type_error_with_numpy_spelling(fn: Callable[..., Any]) -> None:
    error = _raises_at_marker(fn, fusec.FusecTypeError, np.ones((1, 3)))
    assert "axis=" in str(error.hint) or "keepdims=" in str(error.hint), error.hint


def view_as(x):
    return x.view(np.int32)  # <- error


def torch_unsqueeze(x):
    return x.unsqueeze(0)  # <- error


def misspelled(x):
    return x.summ()  # <- error


@pytest.mark.parametrize("fn,name", [(view_as, "view"), (torch_unsqueeze, "unsqueeze"), (misspelled, "summ")],
                         ids=lambda v: getattr(v, "__name__", v))
def test_trace_error_unknown_attribute_names_it_the_line_and_a_hint(fn: Callable[..., Any], name: str) -> None:
    error = _raises_at_marker(fn, fusec.UnsupportedError, np.ones((2, 3)))
    assert isinstance(error, AttributeError)  # hasattr() keeps working on traced arrays
    assert f"'{name}'" in str(error) and error.hint


def test_trace_error_hasattr_on_a_traced_array_is_false_not_an_error() -> None:
    out = fusec.fuse(lambda x: x * 2 if not hasattr(x, "unsqueeze") else x)(np.ones(3))
    assert out.tolist() == [2.0, 2.0, 2.0]


def returns_dict(x):
    y = x + 1
    if y.ndim > 5:
        return (y,)
    return {("y", 0): y, "z": y * 2}  # <- error


def returns_string_in_tuple(x):
    y = x + 1
    return y, "done"  # <- error


@pytest.mark.parametrize("fn", [returns_dict, returns_string_in_tuple], ids=lambda f: f.__name__)
def test_trace_error_bad_return_points_at_the_return_line(fn: Callable[..., Any]) -> None:
    error = _raises_at_marker(fn, fusec.UnsupportedError)
    if fn is returns_dict:
        assert "dict with keys other than strings" in str(error) and "by strings" in str(error.hint)


def scipy_gamma(x):
    import scipy.special

    return scipy.special.gamma(x)  # <- error


def test_trace_error_scipy_ufunc_is_named_by_its_true_module() -> None:
    error = _raises_at_marker(scipy_gamma, fusec.UnsupportedError)
    assert "scipy.special.gamma" in str(error) and "numpy.gamma" not in str(error)


def scipy_erf_int_loop_dtype(x):
    import scipy.special

    return scipy.special.erf(x, dtype=np.int32)  # <- error


def test_trace_error_scipy_erf_loop_error_names_scipy() -> None:
    error = _raises_at_marker(scipy_erf_int_loop_dtype, fusec.FusecTypeError)
    assert "scipy.special.erf" in str(error) and "numpy.erf" not in str(error)


def keyword_only(x, *, eps=1e-5, scale=2.0):
    return x * scale / (x.std() + eps)


def test_trace_keyword_only_parameters_work_passed_or_not() -> None:
    x = np.arange(5.0)
    fused = fusec.fuse(keyword_only)
    np.testing.assert_allclose(fused(x), keyword_only(x))
    np.testing.assert_allclose(fused(x, eps=1.0, scale=3.0), keyword_only(x, eps=1.0, scale=3.0))
    np.testing.assert_allclose(fused(x, scale=x), keyword_only(x, scale=x))  # an array by keyword


def varargs_and_kwargs(x, *rest, scale=2.0, **named):
    out = x * scale
    for r in rest:
        out = out + r
    return out - named.get("shift", 0)


def test_trace_varargs_keyword_only_and_kwargs_together() -> None:
    x = np.arange(4.0)
    fused = fusec.fuse(varargs_and_kwargs)
    np.testing.assert_allclose(fused(x, x, x, scale=0.5, shift=x), varargs_and_kwargs(x, x, x, scale=0.5, shift=x))
    np.testing.assert_allclose(fused(x), varargs_and_kwargs(x))


def user_type_error(x):
    return len(x, 2)  # <- error


def test_trace_error_raw_type_error_in_user_code_becomes_a_fusec_error_at_its_line() -> None:
    _raises_at_marker(user_type_error, fusec.FusecTypeError)


@pytest.mark.parametrize("shape, fragment", [
    ((1,) * 33, "an input of 33 dimensions: fusec supports at most 32"),
    ((2**63,), "is too big: more than 2**63 - 1 elements or bytes"),
    ((2**62, 2, 2), "is too big"),
    ((2**61, 2), "is too big"),  # 2**62 elements of 4 bytes: 2**64 bytes
], ids=["rank_33", "dim_2_63", "product_2_64", "bytes_2_64"])
def test_trace_shape_beyond_limits_is_a_clear_error(shape: tuple[int, ...], fragment: str) -> None:
    """Rank > 32 and sizes of 2**63 or more were an internal error (an OverflowError in codegen) or
    planned as if fine; now a FusecValueError when the input is traced."""
    with pytest.raises(fusec.FusecValueError, match=re.escape(fragment)):
        fusec.fuse(lambda x: x.sum(0) + 1).plan(fusec.ArraySpec(shape, "float32"))


def test_trace_broadcast_to_2_64_elements_is_a_clear_error() -> None:
    spec_col, spec_row = fusec.ArraySpec((2**32, 1), "float32"), fusec.ArraySpec((1, 2**32), "float32")
    with pytest.raises(fusec.FusecValueError, match="the result of add of shape .* is too big"):
        fusec.fuse(lambda x, y: x + y).plan(spec_col, spec_row)


def test_function_compiled_under_a_file_that_is_not_its_source_traces(tmp_path) -> None:
    """A function whose code names a file that holds other text (code run by ``exec`` under a real file name,
    a file edited since it was imported): reading its source to find the return line raised
    ``tokenize.TokenError`` from inside fusec. It runs, and its errors still name the file and line."""
    path = tmp_path / "edited.py"
    path.write_text("x = (\n  1,\n")  # an unfinished statement: tokenizing from line 1 reaches EOF inside it
    namespace: dict[str, Any] = {}
    source = "def f(a):\n    return a * 2\n\ndef g(a):\n    if a.sum() > 0:\n        return a\n    return -a\n"
    exec(compile(source, str(path), "exec"), namespace)
    np.testing.assert_array_equal(fusec.fuse(namespace["f"])(np.arange(3.0)), [0.0, 2.0, 4.0])
    with pytest.raises(fusec.TraceError) as info:
        fusec.fuse(namespace["g"])(np.arange(3.0))
    assert str(path) in str(info.value)
