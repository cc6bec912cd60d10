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

