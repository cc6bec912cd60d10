"""Shapes through ``fusec.fuse`` on NumPy inputs: empty and 0-d arrays, size-1 dims, odd sizes,
axis errors, broadcasting forms, several outputs, retracing versus rebinding, mixed libraries and
``out=``. Every result is compared with NumPy's (values, dtype and shape)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fusec
from tests.helpers import assert_matches_numpy, numpy_error_class, random_array, seed_of


def _numpy(fn: Callable[..., Any], *args: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def _check(fn: Callable[..., Any], *args: Any, exact: bool = True) -> Any:
    """``fusec.fuse(fn)(*args)`` matches NumPy's ``fn(*args)`` (each output of a tuple too)."""
    expected = _numpy(fn, *args)
    actual = fusec.fuse(fn)(*args)
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for got, want in zip(actual, expected):
            assert_matches_numpy(got, want, exact=exact)
    else:
        assert isinstance(actual, np.ndarray) == isinstance(expected, np.ndarray), (type(actual), type(expected))
        assert_matches_numpy(actual, expected, exact=exact)
    return actual


def _array(shape: tuple[int, ...], dtype: Any = np.float32, special: bool = False) -> np.ndarray:
    return random_array(np.random.default_rng(seed_of("shapes", shape, np.dtype(dtype).str)), shape, dtype, special)


# --- empty and 0-d ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)], ids=str)
def test_reduction_of_empty_gives_identity(shape: tuple[int, ...]) -> None:
    x = np.zeros(shape, dtype=np.float32)
    assert _check(lambda a: np.sum(a), x) == 0
    assert _check(lambda a: np.prod(a), x) == 1
    assert not _check(lambda a: np.any(a), x)
    assert _check(lambda a: np.all(a), x)
    assert _check(lambda a: np.sum(a.astype(np.int8)), x).dtype == np.int64
    assert _check(lambda a: np.sum(a > 0), x) == 0


def test_reduction_mean_of_empty_is_nan() -> None:
    x = np.zeros((0,), dtype=np.float64)
    with pytest.warns(RuntimeWarning):
        assert np.isnan(np.mean(x))  # NumPy warns "Mean of empty slice"
    result = _check(lambda a: np.mean(a), x)
    assert result.shape == () and np.isnan(result)
    assert np.isnan(_check(lambda a: a.mean(), x.astype(np.float16)))


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin", "nanmax", "nanmin", "amax", "nanargmax",
                                  "nanargmin"])
@pytest.mark.parametrize("shape", [(0,), (0, 3)], ids=str)
def test_reduction_without_identity_of_empty_raises_numpys_message(name: str, shape: tuple[int, ...]) -> None:
    """argmax of an empty axis said "zero-size array to reduction operation maximum" where NumPy says "attempt
    to get argmax of an empty sequence" (nanmax's names fmax, not maximum)."""
    x = np.zeros(shape, dtype=np.float32)
    with pytest.raises(ValueError) as numpys:
        getattr(np, name)(x, axis=0)
    with pytest.raises(fusec.FusecValueError) as info:
        fusec.fuse(lambda a: getattr(np, name)(a, axis=0))(x)
    assert isinstance(info.value, ValueError)
    assert str(numpys.value) in str(info.value), (str(numpys.value), str(info.value))


INITIAL_OF_EMPTY = {
    "max_all": (lambda a: a.max(initial=0.0), (0,), np.float32),
    "min_all_int": (lambda a: a.min(initial=5), (0,), np.int32),
    "max_axis": (lambda a: np.max(a, axis=1, initial=-1.0), (3, 0), np.float32),
    "min_axis_keepdims": (lambda a: np.min(a, axis=0, keepdims=True, initial=2), (0, 4), np.int16),
    "amax_axes_tuple": (lambda a: np.amax(a, axis=(0, 2), initial=1.5), (2, 0, 3), np.float64),
    "nanmax_all": (lambda a: np.nanmax(a, initial=2.0), (0, 3), np.float32),
    "nanmin_nan_initial": (lambda a: np.nanmin(a, axis=0, initial=np.nan), (0, 3), np.float32),
    "max_where": (lambda a: np.max(a, axis=1, initial=7, where=a > 0), (2, 0), np.int64),
    "max_float16_initial_overflows_to_inf": (lambda a: a.max(initial=1e6), (0,), np.float16),
    "max_bool": (lambda a: a.max(axis=1, initial=3), (2, 0), np.bool_),
    "max_int_float_initial": (lambda a: a.max(initial=2.5), (0,), np.int32),
    "max_then_elementwise": (lambda a: a.max(axis=1, initial=-1.0) * 2 + a.sum(axis=1), (3, 0), np.float32),
    "max_nonempty_axis_of_empty": (lambda a: np.max(a, axis=1, initial=1.0), (0, 3), np.float32),
}


@pytest.mark.parametrize("case", list(INITIAL_OF_EMPTY))
def test_reduction_max_min_with_initial_of_empty_gives_initial(case: str) -> None:
    """``a.max(initial=0.0)`` of a zero-size array raised "zero-size array to reduction operation maximum"
    where NumPy returns the initial value (with ``axis=``, NumPy's result shape filled with it)."""
    fn, shape, dtype = INITIAL_OF_EMPTY[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # float16(1e6) overflows, in NumPy as in fusec
        _check(fn, np.zeros(shape, dtype))


@pytest.mark.parametrize("initial", [300, -1])
def test_reduction_max_with_initial_out_of_range_of_empty_raises_overflow_error(initial: int) -> None:
    x = np.zeros((0,), np.uint8)
    with pytest.raises(OverflowError):
        x.max(initial=initial)
    with pytest.raises(OverflowError):
        fusec.fuse(lambda a: a.max(initial=initial))(x)


def test_reduction_max_over_nonempty_axis_of_empty_array_is_empty() -> None:
    x = np.zeros((0, 3), dtype=np.float32)
    result = _check(lambda a: np.max(a, axis=1), x)
    assert result.shape == (0,)
    assert _check(lambda a: np.argmin(a, axis=1), x).shape == (0,)
    assert _check(lambda a: np.sum(a, axis=0), x).shape == (3,)


def test_reduction_max_over_empty_axis_raises_value_error() -> None:
    x = np.zeros((3, 0), dtype=np.float32)
    with pytest.raises(ValueError):
        np.max(x, axis=1)
    with pytest.raises(fusec.FusecValueError):
        fusec.fuse(lambda a: np.max(a, axis=1))(x)
    assert _check(lambda a: np.max(a, axis=0), x).shape == (0,)  # nothing to reduce per output


@pytest.mark.parametrize("axis", [3, -4, (0, 5)], ids=str)
def test_reduction_axis_out_of_range_raises_axis_error(axis: Any) -> None:
    x = _array((2, 3, 4))
    with pytest.raises(np.exceptions.AxisError):
        np.sum(x, axis=axis)
    with pytest.raises(np.exceptions.AxisError) as info:
        fusec.fuse(lambda a: np.sum(a, axis=axis))(x)
    assert isinstance(info.value, fusec.FusecAxisError)
    assert "out of bounds" in str(info.value)


@pytest.mark.parametrize("axis", [(0, 0), (1, -2)], ids=str)
def test_reduction_duplicate_axis_raises_value_error(axis: Any) -> None:
    x = _array((2, 3, 4))
    with pytest.raises(ValueError):
        np.sum(x, axis=axis)
    with pytest.raises(fusec.FusecValueError, match="duplicate"):
        fusec.fuse(lambda a: np.sum(a, axis=axis))(x)


def test_broadcast_mismatch_raises_value_error_naming_both_shapes() -> None:
    x, y = _array((3, 2)), _array((4,))
    with pytest.raises(ValueError):
        x + y
    with pytest.raises(fusec.FusecValueError) as info:
        fusec.fuse(lambda a, b: a + b)(x, y)
    assert isinstance(info.value, ValueError)
    assert "(3, 2)" in str(info.value) and "(4,)" in str(info.value)


def test_zero_d_inputs_and_outputs_match_numpy() -> None:
    x, y = np.array(2.5, dtype=np.float32), np.array(-3, dtype=np.int16)
    result = _check(lambda a, b: a * b + 1, x, y)
    assert result.shape == () and result.dtype == np.float32
    assert _check(lambda a: np.sum(a), x).shape == ()
    # a reduction over no axis of a 0-d argument is the argument: returned as it is (NumPy: a scalar of it)
    assert fusec.fuse(lambda a: np.max(a, axis=()))(x) is x
    assert _check(lambda a: np.argmax(a), x) == 0
    assert _check(lambda a: np.mean(a, keepdims=True), x).shape == ()
    assert _check(lambda a, b: a + b, x, _array((3,))).shape == (3,)


ZERO_D_AXIS_REDUCTIONS = ["sum", "prod", "max", "min", "amax", "amin", "nanmax", "nanmin", "nansum", "argmax",
                          "argmin", "any", "all", "mean", "var", "std"]


@pytest.mark.parametrize("name", ZERO_D_AXIS_REDUCTIONS)
@pytest.mark.parametrize("axis", [0, -1, 1, (0,), ()], ids=str)
def test_zero_d_reduction_axis_behaves_like_numpy(name: str, axis: Any) -> None:
    """NumPy's ufunc reductions take ``axis=0`` (or -1) of a 0-d array as no axis (mean, var and std raise
    AxisError); fusec raised AxisError for every one."""
    fn = getattr(np, name)
    x = np.array(2.5, dtype=np.float32)
    try:
        expected = _numpy(lambda a: fn(a, axis=axis), x)
    except Exception as exc:
        with pytest.raises(numpy_error_class(exc)):
            fusec.fuse(lambda a: fn(a, axis=axis))(x)
        return
    actual = fusec.fuse(lambda a: fn(a, axis=axis))(x)
    assert_matches_numpy(actual, expected, exact=True)


@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 5), (5, 1), (1, 5, 1), (3, 1, 4)], ids=str)
def test_size_one_dims_match_numpy(shape: tuple[int, ...]) -> None:
    x = _array(shape, special=True)
    _check(lambda a: a * 2 - np.max(a, axis=-1, keepdims=True), x)
    _check(lambda a: np.sum(a, axis=0), x)
    _check(lambda a: np.argmax(a, axis=-1), x)
    _check(lambda a: np.var(a, axis=-1, ddof=0), x, exact=False)


def test_odd_sizes_match_numpy() -> None:
    x, v = _array((1029, 917)), _array((23,), np.float64, special=True)
    _check(lambda a: np.sum(a, axis=1), x)
    _check(lambda a: np.max(a * 2, axis=0), x)
    _check(lambda a: a - a.mean(axis=-1, keepdims=True), x, exact=False)
    _check(lambda a: (np.exp(a), np.sum(a), np.argmin(a)), v)


# --- broadcasting forms -------------------------------------------------------------------------
BROADCAST_FORMS: dict[str, tuple[Callable[..., Any], tuple[tuple[int, ...], ...]]] = {
    "implicit": (lambda a, b: a + b, ((3, 1, 4), (5, 4))),
    "x[None, :]": (lambda a, b: a[None, :] * b, ((4,), (3, 4))),
    "x[:, np.newaxis]": (lambda a, b: a[:, np.newaxis] - b, ((3,), (3, 4))),
    "x[..., None]": (lambda a, b: a[..., None] / b, ((2, 3), (2, 3, 4))),
    "x[:, None, :]": (lambda a, b: a[:, None, :] + b, ((2, 4), (3, 1))),
    "np.expand_dims": (lambda a, b: np.expand_dims(a, (0, 2)) + b, ((3,), (2, 3, 4))),
    "np.broadcast_to": (lambda a, b: np.broadcast_to(a, (3, 4)) * b, ((4,), (1, 4))),
    "x.T": (lambda a, b: a.T + b, ((4, 3), (3, 4))),
    "np.transpose(x, (1, 0, 2))": (lambda a, b: np.transpose(a, (1, 0, 2)) * b, ((3, 2, 4), (2, 3, 4))),
    "x.transpose(2, 0, 1)": (lambda a, b: a.transpose(2, 0, 1) - b, ((2, 3, 4), (4, 1, 3))),
    "np.squeeze": (lambda a, b: np.squeeze(a, axis=1) + b, ((3, 1, 4), (4,))),
    "x.T of a reduction": (lambda a, b: np.sum(a, axis=0).T + b, ((2, 3, 4), (4, 1))),
}


@pytest.mark.parametrize("form", list(BROADCAST_FORMS))
def test_broadcasting_form_matches_numpy(form: str) -> None:
    fn, shapes = BROADCAST_FORMS[form]
    args = [_array(shape, special=True) for shape in shapes]
    _check(fn, *args)


@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=4),
    data=st.data(),
)
def test_broadcasting_random_shapes_with_reduction_match_numpy(shapes: Any, data: st.DataObject) -> None:
    (sa, sb), result_shape = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    a, b = random_array(rng, sa, np.float32), random_array(rng, sb, np.int16)
    axes = data.draw(
        st.lists(st.integers(0, max(len(result_shape) - 1, 0)), unique=True, max_size=3)
        if result_shape
        else st.just([]),
        label="axes",
    )
    keepdims = data.draw(st.booleans(), label="keepdims")
    axis = tuple(axes)
    _check(lambda x, y: (x * y, np.sum(x - y, axis=axis, keepdims=keepdims)), a, b)
    fn = lambda x, y: np.max(x + y, axis=axis, keepdims=keepdims)  # noqa: E731
    try:
        expected = _numpy(fn, a, b)
    except ValueError as exc:  # an empty extent without identity
        with pytest.raises(numpy_error_class(exc)):
            fusec.fuse(fn)(a, b)
    else:
        assert_matches_numpy(fusec.fuse(fn)(a, b), expected, exact=True)


# --- outputs ------------------------------------------------------------------------------------
def test_several_outputs_are_a_tuple_matching_numpy() -> None:
    x = _array((3, 4), special=True)
    result = _check(lambda a: (a + 1, np.sum(a, axis=0), a > 0, np.max(a)), x)
    assert [r.shape for r in result] == [(3, 4), (4,), (3, 4), ()]


def test_outputs_returned_as_list_stay_a_list() -> None:
    x = _array((3,))
    result = fusec.fuse(lambda a: [a * 2, a - 1])(x)
    assert isinstance(result, list) and len(result) == 2
    assert_matches_numpy(result[0], x * 2, exact=True)
    assert_matches_numpy(result[1], x - 1, exact=True)


def test_returning_an_input_unchanged_gives_its_values() -> None:
    x, y = _array((3, 4)), _array((4,))
    first, second = fusec.fuse(lambda a, b: (a, b * 2))(x, y)
    assert_matches_numpy(first, x, exact=True)
    assert_matches_numpy(second, y * 2, exact=True)
    assert_matches_numpy(fusec.fuse(lambda a: a)(x), x, exact=True)


def test_inputs_are_not_modified() -> None:
    x = _array((3, 4), special=True)
    before = x.copy()
    fusec.fuse(lambda a: (a * 2, np.sum(a), a.astype(np.int8)))(x)
    assert_matches_numpy(x, before, exact=True)


def test_scalar_result_is_a_numpy_scalar_as_numpys() -> None:
    x = _array((5,))
    total = fusec.fuse(lambda a: np.sum(a))(x)
    assert isinstance(total, np.float32) and type(total) is type(np.sum(x))
    assert_matches_numpy(np.asarray(total), np.sum(x), exact=True)
    constant = fusec.fuse(lambda a: 3.0)(x)
    assert isinstance(constant, np.float64) and constant.shape == () and constant == 3.0  # a float, as returned
    pair = fusec.fuse(lambda a: (np.max(a), 7))(x)
    assert pair[1].shape == () and pair[1].dtype == np.int64 and pair[1] == 7


# --- retracing ----------------------------------------------------------------------------------
def test_new_size_of_same_signature_does_not_retrace() -> None:
    calls = []

    def centered_sum(a, b):
        return np.sum(a - np.mean(a, axis=-1, keepdims=True), axis=-1) * b

    fused = fusec.fuse(lambda a, b: calls.append(1) or centered_sum(a, b))
    for shape in [(4, 7), (6, 9), (2, 3), (4, 7)]:
        x, y = _array(shape, special=True), _array((shape[0],))
        result = fused(x, y)  # (6, 9) and (2, 3): the graph of (4, 7) rebound to the new sizes
        assert_matches_numpy(result, _numpy(centered_sum, x, y), exact=False)
    assert len(calls) == 1


def test_new_size_giving_a_size_one_dim_retraces() -> None:
    calls = []
    fused = fusec.fuse(lambda a: calls.append(1) or np.max(a, axis=0))
    x = _array((4, 7))
    fused(x)
    fused(_array((5, 3)))
    assert len(calls) == 1
    small = _array((1, 3))
    assert_matches_numpy(fused(small), np.max(small, axis=0), exact=True)
    assert len(calls) == 2  # dims of size 1 broadcast: a new signature
    assert_matches_numpy(fused(x), np.max(x, axis=0), exact=True)
    assert len(calls) == 2


def test_new_dtype_retraces() -> None:
    calls = []
    fused = fusec.fuse(lambda a: calls.append(1) or a + 1)
    assert fused(np.zeros(3, np.uint8)).dtype == np.uint8
    assert fused(np.zeros(3, np.float16)).dtype == np.float16
    assert len(calls) == 2


def test_function_reading_shape_retraces_for_a_new_size() -> None:
    calls = []

    @fusec.fuse
    def mean_by_hand(a):
        calls.append(1)
        return np.sum(a, axis=0) / a.shape[0]

    for n in (4, 9, 4):
        x = _array((n, 3))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert_matches_numpy(mean_by_hand(x), np.sum(x, axis=0) / n, exact=True)
    assert len(calls) == 2  # 4 and 9; 4 again is cached


def test_python_scalar_argument_type_not_value_is_part_of_the_signature() -> None:
    calls = []
    fused = fusec.fuse(lambda a, s: calls.append(1) or a * s)
    x = _array((3,))
    assert_matches_numpy(fused(x, 2.0), x * 2.0, exact=True)
    assert_matches_numpy(fused(x, 3.0), x * 3.0, exact=True)
    assert_matches_numpy(fused(x, -0.0), x * -0.0, exact=True)
    assert_matches_numpy(fused(x, np.float64(2.0)), x * np.float64(2.0), exact=True)
    assert len(calls) == 2  # a Python float (weak) and a NumPy float64 (strong): runtime scalars both


# --- arguments ----------------------------------------------------------------------------------
class _FakeCupyArray:
    """Stands for a CuPy array (no GPU here): fusec tells libraries apart by the type's module."""

    __module__ = "cupy._core.core"

    def __init__(self, shape: tuple[int, ...], dtype: Any):
        self.shape, self.dtype = shape, np.dtype(dtype)


def test_mixed_numpy_and_cupy_arguments_raise_type_error_naming_them() -> None:
    fused = fusec.fuse(lambda host, device: host + device)
    with pytest.raises(fusec.FusecTypeError) as info:
        fused(np.ones(3, np.float32), _FakeCupyArray((3,), np.float32))
    assert isinstance(info.value, TypeError)
    assert "'host'" in str(info.value) and "'device'" in str(info.value)


def test_set_argument_raises_type_error_naming_it() -> None:
    with pytest.raises(fusec.FusecTypeError, match="'values'"):  # (lists, tuples and dicts are containers)
        fusec.fuse(lambda values: values * 2)({1.0, 2.0})


def test_array_spec_call_raises_type_error() -> None:
    with pytest.raises(fusec.FusecTypeError, match="ArraySpec"):
        fusec.fuse(lambda a: a * 2)(fusec.ArraySpec((3,), "float32"))


# --- out= ---------------------------------------------------------------------------------------
def test_out_writes_into_and_returns_the_given_array() -> None:
    x = _array((3, 4), special=True)
    out = np.empty((3, 4), np.float32)
    result = fusec.fuse(lambda a: a * 2)(x, out=out)
    assert result is out
    assert_matches_numpy(out, x * 2, exact=True)


def test_out_tuple_for_several_outputs() -> None:
    x = _array((3, 4))
    outs = (np.empty((3, 4), np.float64), np.empty((4,), np.float32))
    result = fusec.fuse(lambda a: (a + 1, np.max(a, axis=0)))(x, out=outs)
    assert isinstance(result, tuple) and result[0] is outs[0] and result[1] is outs[1]
    assert_matches_numpy(outs[0], (x + 1).astype(np.float64), exact=True)
    assert_matches_numpy(outs[1], np.max(x, axis=0), exact=True)


def test_out_same_kind_downcast_matches_numpy() -> None:
    x = _array((5,), np.float64)
    out, expected = np.empty(5, np.float16), np.empty(5, np.float16)
    np.multiply(x, 3, out=expected)
    fusec.fuse(lambda a: a * 3)(x, out=out)
    assert_matches_numpy(out, expected, exact=True)


def test_out_of_integer_dtype_for_float_result_raises_type_error() -> None:
    x, out = _array((3,)), np.zeros(3, np.int64)
    with pytest.raises(TypeError):
        np.multiply(x, 2.5, out=np.zeros(3, np.int64))
    with pytest.raises(fusec.FusecTypeError, match="same_kind"):
        fusec.fuse(lambda a: a * 2.5)(x, out=out)
    assert not out.any()


def test_out_of_wrong_shape_or_count_raises_value_error() -> None:
    x = _array((3,))
    fused = fusec.fuse(lambda a: a * 2)
    with pytest.raises(fusec.FusecValueError, match="shape"):
        fused(x, out=np.empty(4, np.float32))
    with pytest.raises(fusec.FusecValueError):
        fused(x, out=(np.empty(3, np.float32), np.empty(3, np.float32)))
