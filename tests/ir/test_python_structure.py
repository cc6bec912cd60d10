"""Python as people write it around arrays: unpacking and loops over a traced array's first axis, and Python lists
(or tuples) of arrays, numbers and nested lists wherever NumPy takes an array (``np.concatenate([[0.0], c])``,
``np.mean([a, b], 0)``, ``a + [1, 2, 3]``), each against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.frontend.tracer import ITERATION_LIMIT
from fusec.support.errors import FusecTypeError, TraceError
from tests.helpers import assert_matches_numpy, random_array, seed_of


def _data(shape, dtype=np.float32, salt=0):
    return random_array(np.random.default_rng(seed_of("python structure", shape, salt)), shape, dtype, special=False)


def attention_from_packed(qkv):
    q, k, v = qkv  # unpacking along the first axis
    return (q * k).sum(axis=-1, keepdims=True) * v


def sum_of_rows(x):
    total = 0
    for row in x:  # a loop over the first axis
        total = total + np.abs(row)
    return total


def zero_first_column(x):
    for row in x:
        row[0] = 0  # rows are views: x changes, as in NumPy
    return x.sum()


@pytest.mark.parametrize("fn, shape", [(attention_from_packed, (3, 5, 8)), (sum_of_rows, (7, 6)),
                                       (sum_of_rows, (1, 3)), (zero_first_column, (4, 5))])
def test_iterating_a_traced_array_yields_its_first_axis_views(fn, shape) -> None:
    x = _data(shape)
    want_x = x.copy()
    want = fn(want_x)
    got = fusec.fuse(fn)(x)
    assert_matches_numpy(got, want)
    np.testing.assert_array_equal(x, want_x)  # the writes through the rows reached the argument


def test_unpacking_follows_the_first_axis_size() -> None:
    f = fusec.fuse(lambda x: sum(row * (k + 1) for k, row in enumerate(x)))
    for n in (2, 5):
        x = _data((n, 4), salt=n)
        assert_matches_numpy(f(x), sum(row * (k + 1) for k, row in enumerate(x)))
    with pytest.raises(ValueError, match="unpack"):
        fusec.fuse(attention_from_packed)(_data((4, 5, 8)))  # Python's own error: four entries for three names


def test_iterating_more_entries_than_the_limit_or_a_0d_array_is_refused() -> None:
    with pytest.raises(TraceError, match=f"at most {ITERATION_LIMIT}") as info:
        fusec.fuse(sum_of_rows)(_data((ITERATION_LIMIT + 1, 2)))
    assert "vectorized" in str(info.value) and __file__ in str(info.value)
    with pytest.raises(FusecTypeError, match="0-d"):
        fusec.fuse(lambda x: list(x.sum()))(_data((3,)))


LISTS = {
    "concatenate_number_list": lambda a, b: np.concatenate([[0.0], a]),
    "concatenate_rows_of_a_2d": lambda a, b: np.concatenate(np.stack([a, b])),
    "mean_of_a_list": lambda a, b: np.mean([a, b], 0),
    "max_of_a_tuple": lambda a, b: np.max((a, b)),
    "sum_of_a_list_axis0": lambda a, b: np.sum([a, b, a], axis=0),
    "add_a_number_list": lambda a, b: a + [1, 2, 3, 4, 5],
    "where_with_a_list": lambda a, b: np.where(a > 0, [9, 8, 7, 6, 5], b),
    "stack_array_and_list": lambda a, b: np.stack([a, [1.5, 2.5, 3.5, 4.5, 5.5]]),
    "array_of_arrays_transposed": lambda a, b: np.array([a, b]).T,
    "nested_list_with_arrays": lambda a, b: np.asarray([[a, b], [b, a]]).sum(axis=1),
}


@pytest.mark.parametrize("name", sorted(LISTS))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_python_lists_where_numpy_takes_an_array_match_numpy(name, dtype) -> None:
    fn = LISTS[name]
    a, b = _data((5,), dtype, 1), _data((5,), dtype, 2)
    want = fn(a, b)
    got = fusec.fuse(fn)(a, b)
    assert got.dtype == want.dtype
    assert_matches_numpy(got, want)


ZERO_D = {
    "sum": lambda x: x.sum(),
    "max_and_argmax": lambda x: (x.max(), x.argmax()),
    "scalar_index": lambda x: x[1, 2],
    "ufunc_of_a_reduction": lambda x: np.sqrt(x.sum() ** 2),
    "mean_in_a_list": lambda x: [x.mean(), x * 2],
}


@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_zero_d_results_on_the_numpy_backend_are_numpy_scalars_as_numpys(name) -> None:
    fn = ZERO_D[name]
    x = _data((2, 3))
    want, got = fn(x), fusec.fuse(fn)(x)
    for w, g in zip(want if isinstance(want, (tuple, list)) else [want], got if isinstance(got, (tuple, list))
                    else [got]):
        assert type(g) is type(w) and g.dtype == w.dtype
        assert_matches_numpy(np.asarray(g), np.asarray(w))


def test_a_returned_zero_d_argument_is_the_argument_itself() -> None:
    x = np.array(3.5, np.float32)
    assert fusec.fuse(lambda x: x)(x) is x
