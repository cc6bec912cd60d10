"""Assignment to part of an argument (issue 17, item 4): ``x[key] = v`` and ``x[key] op= v`` for any basic index,
``v`` broadcast and cast as NumPy's ``setitem`` does, through ``fusec.fuse`` on the NumPy backend against NumPy:
exactly the selected elements of the caller's array change (nothing else in its buffer), in order, after whole-array
updates; values computed from the old argument; kernel counts; the argument and its index views read afterwards
(its new value everywhere); the errors (a view not made by indexing read after the assignment); part of a
computed value: ``tests/ir/test_part_update.py``. ``CASES`` is shared with ``tests/gpu/test_slice_assign_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.support.errors import FusecError, UnsupportedError
from tests.helpers import assert_matches_numpy, random_array, seed_of
from tests.ir.test_views import KEYS, _ids


def _set(key):
    def f(x, v):
        x[key] = v

    return f


def _add(key):
    def f(x, v):
        x[key] += v

    return f


def _column(x, v):
    x[:, 1] = v[:, 0] * 2


def _rows(x, v):
    x[1:3] = v[0] - 1


def _every_other(x, v):
    x[..., ::2] = 0


def _shifted(x, v):
    x[1:] = x[:-1]  # the old values: NumPy copies the overlapping right-hand side first


def _newaxis_add(x, v):
    x[1:, None] += v[0]


def _whole_then_part(x, v):
    x *= 2
    x[::-1, 0] = v[:, 0]


def _two_parts(x, v):
    y = x.sum(axis=0)
    x[0] = y
    x[-1] = v[-1] * 3
    x[0, :2] = 7
    return y


def _view_then_update(x, v):
    t = x[1:3]
    t -= v[0]


def _mixed(x, v):
    m = x.max()
    x[:, ::3] = np.where(v[:, ::3] > 0, v[:, ::3], m)
    return m


CASES = {
    "column": _column, "rows": _rows, "every_other": _every_other, "shifted": _shifted, "newaxis_add": _newaxis_add,
    "whole_then_part": _whole_then_part, "two_parts": _two_parts, "view_then_update": _view_then_update,
    "mixed": _mixed,
}


def _check(fn, x: np.ndarray, v: np.ndarray) -> None:
    """``fn`` fused and plain on copies: the results and the arguments afterwards match, and the fused call
    changed nothing of the argument's buffer outside the argument."""
    base = x.base if x.base is not None else x
    mine_base, theirs_base = base.copy(), base.copy()
    offset = x.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    mine = np.ndarray(x.shape, x.dtype, mine_base, offset, x.strides)
    theirs = np.ndarray(x.shape, x.dtype, theirs_base, offset, x.strides)
    with np.errstate(all="ignore"):
        got = fusec.fuse(fn)(mine, v.copy())
        want = fn(theirs, v.copy())
    if want is None:
        assert got is None
    else:
        assert_matches_numpy(got, np.asarray(want), exact=True)
    assert np.array_equal(mine_base, theirs_base, equal_nan=True)  # the argument, and nothing else of its buffer


@pytest.mark.parametrize("key", KEYS, ids=_ids)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_slice_assign_of_argument_matches_numpy(key: object, dtype: str) -> None:
    rng = np.random.default_rng(seed_of("slice assign", _ids(key), dtype))
    x = random_array(rng, (5, 6, 7), dtype)
    view_shape = x[key].shape
    for shape in [view_shape, view_shape[1:], ()]:
        v = random_array(rng, shape, dtype)
        _check(_set(key), x, v)
        _check(_add(key), x, v)


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed", "reversed"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_slice_assign_case_matches_numpy(name: str, dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed_of("slice assign case", name, dtype, layout))
    big = random_array(rng, (14, 18), dtype, special=False)
    x = {"contiguous": big[:6, :9].copy(), "strided": big[1::2, ::2], "transposed": big[:9, :6].T,
         "reversed": big[::-2, ::-2][:6]}[layout]
    v = random_array(rng, x.shape, dtype, special=False)
    _check(CASES[name], x, v)


def test_slice_assign_casts_as_setitem() -> None:
    x = np.zeros((3, 4), np.int32)
    fusec.fuse(_set((slice(None), 0)))(x, np.array([1.7, -2.9, 3.5]))
    assert x[:, 0].tolist() == [1, -2, 3] and not x[:, 1:].any()
    u = np.zeros(4, np.uint8)
    with pytest.raises(OverflowError):
        fusec.fuse(lambda u: u.__setitem__(slice(1, 3), 300))(u)
    with pytest.raises(ValueError, match="could not broadcast"):
        fusec.fuse(_set(slice(0, 2)))(np.zeros((3, 4), np.float32), np.ones(3, np.float32))


def test_slice_assign_new_shape_resolves_the_key_again() -> None:
    fused = fusec.fuse(_set((slice(1, None, 2), -1)))
    for shape in [(5, 4), (8, 3), (1, 2)]:
        x = random_array(np.random.default_rng(seed_of("slice sizes", shape)), shape, "float32")
        want = x.copy()
        want[1::2, -1] = 5.0
        fused(x, np.float32(5.0))
        assert np.array_equal(x, want, equal_nan=True)


def test_slice_assign_kernel_counts() -> None:
    spec = fusec.ArraySpec((64, 32), "float32")
    vec = fusec.ArraySpec((64,), "float32")
    assert len(fusec.fuse(_column).plan(spec, spec).kernels) == 1  # v[:, 0] * 2, over the column's shape
    assert len(fusec.fuse(_set((slice(None), 0))).plan(spec, vec).kernels) == 0  # v itself: written as it is
    assert len(fusec.fuse(_two_parts).plan(spec, spec).kernels) == 2  # the column sums, then v[-1] * 3


READ_AFTER = {
    "sum_after": lambda x: (x.__setitem__(0, 1), x.sum())[1],
    "add_after": lambda x: (x.__setitem__((slice(None), 1), 1), x + 1)[1],
    "shift_then_add": lambda x: (x.__setitem__(slice(1, None), x[:-1]), x.__iadd__(2), x * 3)[2],
    "two_parts_then_max": lambda x: (x.__setitem__((slice(None), -1), -5), x.__setitem__((0, slice(None, None, 2)), 9),
                                     x.max(axis=1))[2],
}


@pytest.mark.parametrize("name", sorted(READ_AFTER))
def test_slice_assign_argument_read_after_the_assignment_matches_numpy(name: str) -> None:
    """The argument read after an assignment to part of it is its new value everywhere (the parts are still
    written into the caller's array after the kernels)."""
    fn = READ_AFTER[name]
    x = random_array(np.random.default_rng(seed_of("read after", name)), (3, 4), "float32")
    y = x.copy()
    assert_matches_numpy(fusec.fuse(fn)(x), fn(y), exact=True)
    assert np.array_equal(x, y, equal_nan=True)


def test_slice_assign_view_read_after_the_assignment_sees_it() -> None:
    def f(x):
        t = x[:, 0]
        x[0] = 5
        return t * 2  # NumPy's t sees the 5

    def g(x):
        t = x[1:]
        x[1:] = 3
        return t + 1  # the same index: t holds exactly the assigned values

    def h(x):
        t = x.T
        x[0] = 5
        return t * 2  # a view made otherwise sees it too

    def k(x):
        t = np.flip(x, 1)[::2]
        x[:, 1] = 7
        return t - 1, x

    for fn in (f, g, h, k):
        x, y = np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32)
        got, want = fusec.fuse(fn)(x), fn(y)
        for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert_matches_numpy(a, b, exact=True)
        assert np.array_equal(x, y)


def test_slice_assign_maybe_a_view_read_after_the_assignment_is_refused() -> None:
    def f(x):
        t = x.reshape(-1)  # a view of a C-contiguous x, a copy of a transposed one: not known while tracing
        x[0] = 5
        return t * 2

    with pytest.raises(UnsupportedError, match="read after") as info:
        fusec.fuse(f)(np.zeros((3, 4), np.float32))
    assert f"{__file__}:{f.__code__.co_firstlineno + 3}" in str(info.value)  # the line that reads it


def test_slice_assign_read_only_argument_is_an_error() -> None:
    x = np.zeros((3, 4), np.float32)
    x.flags.writeable = False
    with pytest.raises(FusecError, match="read-only"):
        fusec.fuse(_set(0))(x, np.float32(1))


def test_slice_assign_then_whole_assignment_replaces_the_parts() -> None:
    def f(x, v):
        x[0] = v[0]
        x[...] = 3
        x[1, ::2] = v[1, ::2]

    def g(x, v):
        x[:, 0] = v[:, 0]
        x[:] = v * 2

    rng = np.random.default_rng(seed_of("parts then whole"))
    for fn in (f, g):
        _check(fn, random_array(rng, (4, 5), "float32"), random_array(rng, (4, 5), "float32"))


def test_slice_assign_direct_write_only_where_nothing_else_touches_the_argument() -> None:
    """Which assigned parts a GPU kernel may write straight into the argument's view (``direct_parts``; NumPy
    arrays stand in for CuPy's here): the argument's only change, a computed value of the selection's shape that
    is not returned, no kernel reading the argument."""
    from fusec.runtime.write_backs import direct_parts

    def direct(fn, *args):
        fused = fusec.fuse(fn)
        traced, plan, _ = fused._plan(fused._params(args, {}))
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        return direct_parts(plan, traced.parts, traced.updates, arrays)

    x, v = np.zeros((6, 9), np.float32), np.ones((6, 9), np.float32)
    (view,) = direct(_column, x, v).values()
    assert view.shape == (6,) and np.shares_memory(view, x) and view.strides == (36,)

    def returned(x, v):
        y = v[:, 0] * 2
        x[:, 1] = y
        return y

    def broadcast(x, v):
        x[:, 1:3] = v[:, :1] * 2

    for fn in (_shifted, _two_parts, _whole_then_part, _mixed, returned, broadcast):
        assert direct(fn, x, v) == {}, fn.__name__


def test_slice_assign_maybe_a_view_returned_after_the_assignment_is_refused_at_the_return() -> None:
    def f(x):
        t = x.ravel()
        x[0] = 5
        return t

    with pytest.raises(UnsupportedError, match="read after") as info:
        fusec.fuse(f)(np.zeros((3, 4), np.float32))
    assert f"{__file__}:{f.__code__.co_firstlineno + 3}" in str(info.value)
