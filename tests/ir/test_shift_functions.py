"""``roll``, ``diff``, ``tile`` and ``repeat`` (``fusec/frontend/shift_functions.py``) through ``fusec.fuse`` on the
NumPy
backend against NumPy: shapes, axes, negative and oversized shifts, several axes, ``prepend``/``append``, booleans
(``diff`` is ``!=``), empty arrays; one kernel with an elementwise consumer; NumPy's errors; and the CuPy names.
``CASES`` is shared with ``tests/gpu/test_shift_functions_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.support.errors import FusecError, UnsupportedError
from tests.helpers import assert_matches_numpy, random_array, seed_of

CASES = {
    "roll_flat": lambda x: np.roll(x, 2),
    "roll_flat_negative": lambda x: np.roll(x, -7) * 2,
    "roll_axis": lambda x: np.roll(x, -3, axis=1) * 2,
    "roll_two_axes": lambda x: np.roll(x, (1, 2), axis=(0, 1)),
    "roll_oversized": lambda x: np.roll(x, 9, axis=0) + 1,
    "roll_same_axis_twice": lambda x: np.roll(x, (1, 3), axis=(1, 1)),
    "roll_then_sum": lambda x: (np.roll(x, 1, axis=-1) * x).sum(axis=-1),
    "diff": lambda x: np.diff(x),
    "diff_second_order_axis0": lambda x: np.diff(x, n=2, axis=0),
    "diff_prepend_scalar": lambda x: np.diff(x, prepend=0),
    "diff_append_array": lambda x: np.diff(x, append=x[:, :1]),
    "diff_bool": lambda x: np.diff(x > 0, axis=-1),
    "diff_order_zero": lambda x: np.diff(x, n=0) + 1,
    "tile": lambda x: np.tile(x, 2),
    "tile_more_axes": lambda x: np.tile(x, (2, 1, 3)) + 1,
    "tile_row": lambda x: np.tile(x[0], (3, 2)),
    "repeat_flat": lambda x: np.repeat(x, 3),
    "repeat_axis0": lambda x: np.repeat(x, 2, axis=0),
    "repeat_method_then_sum": lambda x: x.repeat(3, axis=1).sum(axis=1),
    "repeat_equal_counts": lambda x: np.repeat(x, [2] * x.shape[-1], axis=-1),
}


@pytest.mark.parametrize("shape", [(5, 7), (1, 4), (6, 1)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_shift_function_matches_numpy(name: str, dtype: str, shape: tuple[int, int]) -> None:
    fn = CASES[name]
    x = random_array(np.random.default_rng(seed_of("shift", name, dtype, shape)), shape, dtype)
    with np.errstate(all="ignore"):
        want = fn(x)
        got = fusec.fuse(fn)(x)
    assert_matches_numpy(got, want, exact=True)


# a flat roll of a 2-d array read further: the shift crosses rows, so no index arithmetic over (rows, columns)
# does it; the rolled array is written, and its reshape read back by the kernel after it
KERNELS = {"roll_flat_negative": 2}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shift_function_kernel_counts(name: str) -> None:
    x = fusec.ArraySpec((64, 48), "float32")
    assert len(fusec.fuse(CASES[name]).plan(x).kernels) == KERNELS.get(name, 1)


def test_shift_functions_of_empty_arrays_match_numpy() -> None:
    x = np.zeros((0, 3), np.float32)
    for fn in (lambda x: np.roll(x, 2, axis=0), lambda x: np.diff(x, axis=0), lambda x: np.tile(x, 2),
               lambda x: np.repeat(x, 2, axis=1)):
        assert_matches_numpy(fusec.fuse(fn)(x), fn(x), exact=True)


def test_shift_functions_take_a_runtime_scalar_as_a_constant() -> None:
    fused = fusec.fuse(lambda x, k: np.roll(x, k, axis=0))
    x = random_array(np.random.default_rng(seed_of("roll scalar")), (5, 3), "float32")
    for k in (1, -2, 4):
        assert_matches_numpy(fused(x, k), np.roll(x, k, axis=0), exact=True)


@pytest.mark.parametrize("fn, error, text", [
    (lambda x: np.repeat(x, [1, 2, 3], axis=1), UnsupportedError, "different count per element"),
    (lambda x: np.diff(x, n=-1), ValueError, "order must be non-negative"),
    (lambda x: np.tile(x, -1), ValueError, "negative dimensions"),
    (lambda x: np.roll(x, (1, 2, 3), axis=(0, 1)), ValueError, "should be scalars or 1D sequences"),
], ids=["repeat_counts", "diff_negative_order", "tile_negative", "roll_mismatch"])
def test_shift_function_errors(fn, error: type, text: str) -> None:
    x = random_array(np.random.default_rng(seed_of("shift errors")), (4, 3), "float32")
    with pytest.raises(error, match=text) as info:
        fusec.fuse(fn)(x)
    assert isinstance(info.value, FusecError)
    assert __file__ in str(info.value)
