"""Assignment to part of a value computed in the function (issue 17, item 4): ``y[key] = v`` and ``y[key] op= v``
for every kind of basic index, as a functional update (``fusec/frontend/part_update.py``), against NumPy on fresh
random data in several dtypes; one kernel where the update's consumer is one; the errors NumPy raises and the
refusals (views that NumPy would write through). ``KEYS`` and ``build`` are shared with
``tests/gpu/test_part_update_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.support.errors import FusecError, UnsupportedError
from tests.helpers import assert_matches_numpy, random_array, seed_of

SHAPE = (7, 6)
KEYS = {
    "column": (slice(None), 0),
    "row": 0,
    "last_row": -1,
    "rows": slice(1, 5),
    "reversed": slice(None, None, -1),
    "reversed_rows_every_other_col": (slice(5, 0, -1), slice(None, None, 2)),
    "ellipsis_last": (Ellipsis, -1),
    "every_third_row": slice(None, None, 3),
    "backwards_by_three": (slice(6, None, -3), 2),
    "newaxis": (None, 2),
    "block_with_newaxis": (slice(1, 3), None, slice(2, 4)),
    "empty": slice(3, 3),
    "odd_columns": (slice(None), slice(1, None, 2)),
    "whole": Ellipsis,
    "both_reversed_strided": (slice(None, None, -2), slice(None, None, -4)),
    "point": (3, -2),
    "out_of_range_slice": slice(5, 100),
}
VALUES = ["scalar", "row_vector", "computed"]


def _value(x: np.ndarray, key, kind: str):
    shape = np.empty(x.shape, np.int8)[key].shape
    if kind == "scalar":
        return 5
    if kind == "row_vector":  # broadcast along the selection's leading axes (0-d for a single element)
        return (np.arange(shape[-1]) % 7).astype(x.dtype) if shape else x.dtype.type(3)
    return np.abs(x)[key] + 1  # computed from the argument, the selection's shape


def build(key, kind: str, augmented: bool = False):
    def f(x):
        y = x * 2
        if augmented:
            y[key] += _value(x, key, kind)
        else:
            y[key] = _value(x, key, kind)
        return y - 1

    return f


@pytest.mark.parametrize("augmented", [False, True], ids=["assign", "augmented"])
@pytest.mark.parametrize("kind", VALUES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
@pytest.mark.parametrize("name", sorted(KEYS))
def test_part_update_matches_numpy(name: str, dtype: str, kind: str, augmented: bool) -> None:
    x = random_array(np.random.default_rng(seed_of("part update", name, dtype, kind, augmented)), SHAPE, dtype)
    fn = build(KEYS[name], kind, augmented)
    with np.errstate(all="ignore"):
        want = fn(x)
        got = fusec.fuse(fn)(x)
    assert_matches_numpy(got, want, exact=True)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_part_update_is_no_kernel_of_its_own(name: str) -> None:
    """The update is index arithmetic inside the kernel that uses the new value: x * 2, the update and - 1 are
    one pointwise kernel, whatever the index and step (a gather reads x for steps other than 1 and -1)."""
    x = random_array(np.random.default_rng(seed_of("part update kernels", name)), SHAPE, "float32")
    assert len(fusec.fuse(build(KEYS[name], "computed")).plan(x).kernels) == 1


@pytest.mark.parametrize("name", sorted(KEYS))
def test_part_update_kernels_compile_for_sm90(name: str) -> None:
    """The update's kernel renders and NVRTC compiles. A row vector written through a strided key is read through a
    gather of the iota that numbers the selected positions (the value is ``arange(...) % 7``): a gather of an array
    without memory, whose element the kernel computes (it used to look up a pointer the iota has not: KeyError)."""
    from fusec.codegen import nvrtc

    x = random_array(np.random.default_rng(seed_of("part update compile", name)), SHAPE, "float32")
    source = fusec.fuse(build(KEYS[name], "row_vector")).cuda_source(x, full=True)
    assert nvrtc.compile_cubin(source, "sm_90").cubin[:4] == b"\x7fELF"


def test_part_update_inside_a_row_reduction_is_one_kernel() -> None:
    def masked_softmax(x):
        y = x - x.max(axis=1, keepdims=True)
        y[:, -1] = -np.inf  # the last column never attends
        e = np.exp(y)
        return e / e.sum(axis=1, keepdims=True)

    x = random_array(np.random.default_rng(seed_of("masked softmax")), (33, 130), "float32")
    fused = fusec.fuse(masked_softmax)
    assert_matches_numpy(fused(x), masked_softmax(x), rtol=1e-6, atol=1e-7)
    assert len(fused.plan(x).kernels) == 1


def test_part_updates_in_sequence_and_reads_between_them_match_numpy() -> None:
    def f(x):
        y = np.exp(x)
        y[0] = 0
        s = y.sum()  # reads the updated value
        y[1:, ::2] *= 3
        y[..., -1] = s
        return y, s

    x = random_array(np.random.default_rng(seed_of("part updates in sequence")), (5, 9), "float32")
    got, want = fusec.fuse(f)(x), f(x)
    for g, w in zip(got, want):
        assert_matches_numpy(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["bool", "float64"])
def test_part_update_of_bool_and_float64_casts_as_numpy(dtype: str) -> None:
    def f(x):
        y = x > 0 if dtype == "bool" else x * 1.5
        y[::2, 1] = 2.7  # cast to y's dtype as NumPy's setitem casts (True for bool)
        y[-1] = x[0] < 0
        return y

    x = random_array(np.random.default_rng(seed_of("part update cast", dtype)), SHAPE, "float64")
    assert_matches_numpy(fusec.fuse(f)(x), f(x), exact=True)


def test_part_update_zero_d_and_empty_arrays_match_numpy() -> None:
    def f(x):
        y = x.copy()
        y[...] = 4
        return y + 1

    def g(x):
        y = x + 1
        y[:, 1:1] = 4
        y[0:0] = 7
        return y

    for shape in [(), (0, 3), (4, 0)]:
        x = random_array(np.random.default_rng(seed_of("part update odd", shape)), shape, "float32")
        assert_matches_numpy(fusec.fuse(f)(x), f(x), exact=True)
        if len(shape) == 2:
            assert_matches_numpy(fusec.fuse(g)(x), g(x), exact=True)


@pytest.mark.parametrize("fn, error, text", [
    (lambda x: (x * 2).__setitem__(7, 1), IndexError, "out of bounds"),
    (lambda x: (x * 2).__setitem__((slice(None), slice(0, 2)), x[0, :3]), ValueError,
     "could not broadcast"),
    (lambda x: (x * 2).__setitem__((0, 0, 0), 1), IndexError, "too many indices"),
], ids=["index_out_of_range", "bad_broadcast", "too_many_indices"])
def test_part_update_errors_are_numpys(fn, error: type, text: str) -> None:
    x = random_array(np.random.default_rng(seed_of("part update errors")), SHAPE, "float32")
    with pytest.raises(error, match=text):
        fn(x)  # NumPy's own error
    with pytest.raises(error, match=text) as info:
        fusec.fuse(fn)(x)
    assert isinstance(info.value, FusecError)


def test_part_update_of_a_value_shows_in_its_live_views() -> None:
    def f(x):
        y = x * 2
        t = y.T  # NumPy changes t too
        y[0] = 1
        return y * 3, t + 1

    def g(x):
        y = x * 2
        t = y[1:]
        u = t[0]
        u[1] = 5  # writes through u and t into y
        return y, t

    x = random_array(np.random.default_rng(seed_of("part update views")), SHAPE, "float32")
    for fn in (f, g):
        for got, want in zip(fusec.fuse(fn)(x), fn(x)):
            assert_matches_numpy(got, want, exact=True)


def test_part_update_through_a_transpose_writes_the_value_it_views() -> None:
    def f(x):
        y = x * 2
        y.T[0] = 1  # NumPy writes through the transpose into y
        np.flip(y, 1)[1:3, ::2] += 10
        return y

    x = random_array(np.random.default_rng(seed_of("part update through transpose")), SHAPE, "float32")
    assert_matches_numpy(fusec.fuse(f)(x), f(x), exact=True)


def test_part_update_through_a_broadcast_is_refused() -> None:
    def f(x):
        y = x * 2
        np.broadcast_to(y, (2, *y.shape))[0, 0] = 1  # NumPy's broadcast is read-only
        return y

    x = random_array(np.random.default_rng(seed_of("part update through broadcast")), SHAPE, "float32")
    with pytest.raises(UnsupportedError, match="view made by broadcast_to") as info:
        fusec.fuse(f)(x)
    assert __file__ in str(info.value)


def test_part_update_through_an_index_view_writes_the_value_it_views() -> None:
    def f(x):
        y = x * 2
        t = y[2]
        t[1:4] = -1  # NumPy writes through t into y
        t += 1
        return y, t

    x = random_array(np.random.default_rng(seed_of("part update through view")), SHAPE, "float32")
    for got, want in zip(fusec.fuse(f)(x), f(x)):
        assert_matches_numpy(got, want, exact=True)


@pytest.mark.parametrize("key", [(1, 0, 3, None), (1, None, 0), (None, 1, slice(None), None),
                                 (0, None, slice(1, None))])
def test_part_update_with_none_after_an_integer_index_matches_numpy(key) -> None:
    """A ``None`` axis of the selection counted among the selection's axes, not the array's (``b[1, 0, 3, None]``
    selects one element as a 1-d array)."""
    def of_argument(x):
        x[key] = -1
        return x

    def of_value(x):
        y = x * 2
        y[key] = -1
        return y

    x = np.arange(24.0).reshape(2, 3, 4)
    for fn in (of_argument, of_value):
        mine, theirs = x.copy(), x.copy()
        assert_matches_numpy(fusec.fuse(fn)(mine), fn(theirs), exact=True)
        assert_matches_numpy(mine, theirs, exact=True)
