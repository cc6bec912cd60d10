"""A value the function read keeps what it read, whatever the writes that follow it: copies, views and arithmetic
on arguments before an in-place write, on the NumPy backend, against NumPy on copies of the same inputs (the
results and what each argument holds afterwards). The GPU path's bookkeeping around the same programs is
``tests/correctness/test_run_plan_cpu.py``'s; the random programs of ``tests/fuzz/test_inplace_fuzz.py`` mix
all of it."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from tests.helpers import assert_matches_numpy


def _check(fn, *args):
    """Run ``fn`` fused and plain on copies of ``args``: the same results, and the same arguments afterwards."""
    mine = [a.copy() for a in args]
    theirs = [a.copy() for a in args]
    got = fusec.fuse(fn)(*mine)
    want = fn(*theirs)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_matches_numpy(np.asarray(g), np.asarray(w), exact=True)
    for m, t in zip(mine, theirs):
        assert_matches_numpy(m, t, exact=True)


COPIES_BEFORE_A_PART_WRITE = {
    "copy": lambda x: x.copy(),
    "column_copy": lambda x: x[:, 1].copy(),
    "times_one": lambda x: x[0] * 1,
    "plus_zero": lambda x: x + 0,
    "astype_same_dtype": lambda x: x.astype(x.dtype),
    "np_array_of_a_view": lambda x: np.array(x[1:]),
    "reversed_copy": lambda x: x[::-1].copy(),
}


@pytest.mark.parametrize("name", sorted(COPIES_BEFORE_A_PART_WRITE))
def test_copy_before_partial_write_keeps_old_values(name: str) -> None:
    take = COPIES_BEFORE_A_PART_WRITE[name]

    def f(x):
        old = take(x)
        x[:2] = -1
        return old

    _check(f, np.arange(12.0).reshape(3, 4))


def test_copy_before_whole_write_keeps_old_values() -> None:
    def f(x):
        old = x.copy()
        x += 1
        return old, x

    _check(f, np.arange(4.0))


def test_ring_buffer_shift_returns_the_old_last_element() -> None:
    def push(s, new):
        prev = s[-1].copy()
        s[:-1] = s[1:]
        s[-1] = new
        return prev

    _check(push, np.arange(4.0), np.array(7.0))


def test_part_written_after_another_reads_the_first_ones_old_value() -> None:
    def f(x):
        y = x[0].copy()
        x[0] = 5
        x[1] = y
        return x

    _check(f, np.arange(6.0).reshape(3, 2))


def test_reversed_self_assignment_writes_and_returns_the_reversed_array() -> None:
    def f(p):
        p[::-1] = p
        return p

    _check(f, np.arange(4.0))


def test_swap_through_a_copy_exchanges_two_arguments() -> None:
    def f(x, y):
        t = x.copy()
        x[...] = y
        y[...] = t
        return t

    _check(f, np.arange(4.0), np.arange(4.0) + 10)


def test_argument_assigned_to_another_then_written_in_part_is_returned_as_itself() -> None:
    def f(a, c):
        c[...] = a
        c[::2] += 1
        return a, c

    _check(f, np.arange(4.0), np.zeros(4))


def test_copy_of_a_whole_update_before_a_part_write_keeps_the_whole_update() -> None:
    def f(x):
        x += 1
        y = x.copy()
        x[0] = 5
        return y, x

    _check(f, np.arange(4.0))


def test_asarray_of_a_view_sees_a_later_write() -> None:
    def f(p):
        r = np.asarray(p[::2])  # p's view itself, as NumPy returns it
        p[...] = 0
        return r + 0

    _check(f, np.arange(4.0))


def test_overlapping_reversed_right_hand_side_is_read_before_the_write() -> None:
    def f(p):
        p[:] = p[::-1]
        return p

    _check(f, np.arange(4.0))


VIEWS_READ_AFTER_A_WRITE = {
    "flip": lambda x: np.flip(x, 0),
    "transpose": lambda x: x.T,
    "broadcast_arrays": lambda x: np.broadcast_arrays(x, x[:1])[1],
    "atleast_2d": lambda x: np.atleast_2d(x[0]),
    "diagonal": lambda x: np.diagonal(x),
    "split": lambda x: np.split(x, 3, axis=0)[1],
    "asarray_of_a_transpose": lambda x: np.asarray(x.T),
    "array_copy_false": lambda x: np.array(x[1:], copy=False),
    "astype_copy_false": lambda x: x.astype(x.dtype, copy=False)[::-1],
    "view_of_a_view": lambda x: np.moveaxis(x[::-1], 0, 1)[1:],
}


@pytest.mark.parametrize("name", sorted(VIEWS_READ_AFTER_A_WRITE))
def test_view_read_after_a_write_of_its_array_sees_the_write(name: str) -> None:
    make = VIEWS_READ_AFTER_A_WRITE[name]

    def f(x):
        v = make(x)
        x[1] += 10
        x *= 2
        return v + 0

    _check(f, np.arange(9.0).reshape(3, 3))


WRITES_THROUGH_VIEWS = {
    "asarray": lambda x: np.asarray(x[1:]),
    "astype_copy_false": lambda x: x.astype(x.dtype, copy=False),
    "index_of_an_index": lambda x: x[1:][::-1, 1],
    "index_of_an_intermediates_index": lambda x: (x * 1)[::2][0],
    "transpose": lambda x: x.T,
    "flip_then_index": lambda x: np.flip(x, 0)[1:],
    "index_then_moveaxis": lambda x: np.moveaxis(x[None, 1:], 0, -1),
    "expand_dims_of_a_column": lambda x: np.expand_dims(x[:, 2], 1),
    "rot90": lambda x: np.rot90(x),
}


@pytest.mark.parametrize("name", sorted(WRITES_THROUGH_VIEWS))
def test_write_through_a_view_changes_the_array_it_views(name: str) -> None:
    make = WRITES_THROUGH_VIEWS[name]

    def f(x):
        v = make(x)
        v[0] = -1
        v += 1
        return v, x

    _check(f, np.arange(12.0).reshape(4, 3))


COPIES_NOT_CHANGED_BY_A_WRITE = {
    "flatten": lambda x: x.flatten(),
    "np_copy": lambda x: np.copy(x),
    "asarray_new_dtype": lambda x: np.asarray(x, dtype=np.float32),
    "gathered": lambda x: x[[0, 2]],
    "reshape_copy_true": lambda x: x.reshape(-1, copy=True),
    "np_reshape_copy_true": lambda x: np.reshape(x.T, (2, 6), copy=True),
}


@pytest.mark.parametrize("name", sorted(COPIES_NOT_CHANGED_BY_A_WRITE))
def test_copy_is_not_changed_by_a_later_write(name: str) -> None:
    take = COPIES_NOT_CHANGED_BY_A_WRITE[name]

    def f(x):
        old = take(x)
        x[0] = -1
        x += 1
        return old

    _check(f, np.arange(12.0).reshape(3, 4))


def test_element_taken_by_integers_is_a_scalar_copy() -> None:
    def f(x):
        t = x[1]  # NumPy's scalar: a copy
        u = x[1, ...]  # a 0-d view
        x[1] = -1
        return t + 0, u + 0

    _check(f, np.arange(4.0))


def test_augmented_assignment_of_a_scalar_makes_a_new_one() -> None:
    def f(b, c):
        b[-2] -= c[2]  # t = b[-2] (an int64 scalar); t = t - c[2] (a float64 one); b[-2] = t
        s = b.sum()
        t = s
        s += 1.5  # a new float64 scalar: t keeps the old one
        return s, t, b

    _check(f, np.array([4, 4, 0]), np.array([0.0, 3.0, -4.5]))


def test_nan_to_num_without_a_copy_updates_its_argument() -> None:
    def f(x, n):
        y = x.copy()
        r = np.nan_to_num(x, copy=False)
        r[0] += 1  # r is x
        return y, np.nan_to_num(n, copy=False) is n

    _check(f, np.array([np.nan, np.inf, -np.inf, 1.0]), np.arange(3))
