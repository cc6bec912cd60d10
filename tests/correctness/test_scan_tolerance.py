"""The scan tolerance helper (tests/helpers.py): a scan rounded differently from NumPy's but within the bound of
its rounded operations passes; one element off, a dropped carry, a NaN moved, fail."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import assert_scan_matches_numpy


def _data(n: int, dtype: str) -> np.ndarray:
    return np.random.default_rng(n).uniform(-1, 1, (3, n)).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scan_tolerance_passes_a_pairwise_scan(dtype: str) -> None:
    x = _data(5000, dtype)
    tree = np.cumsum(x.astype(np.float64), axis=-1)
    tree = (tree + np.random.default_rng(1).uniform(-1, 1, tree.shape) * 8 * 2.0**-24 * np.cumsum(np.abs(x), -1))
    assert_scan_matches_numpy(tree.astype(dtype), np.cumsum(x, axis=-1), x, depth=16)


def test_scan_tolerance_catches_a_dropped_carry_and_a_wrong_element() -> None:
    x = _data(5000, "float32")
    good = np.cumsum(x.astype(np.float64), axis=-1)
    carry = good.copy()
    carry[:, 2048:] -= good[:, 2047:2048]
    with pytest.raises(AssertionError):
        assert_scan_matches_numpy(carry.astype(np.float32), np.cumsum(x, axis=-1), x, depth=64)
    element = good.copy()
    element[1, 17:] += x[1, 3]
    with pytest.raises(AssertionError):
        assert_scan_matches_numpy(element.astype(np.float32), np.cumsum(x, axis=-1), x, depth=64)


def test_scan_tolerance_keeps_nan_positions_and_products_relative() -> None:
    x = np.array([[1.0, np.nan, 2.0], [1.5, 2.0, 0.5]], np.float32)
    want = np.cumsum(x, axis=-1)
    moved = np.array([[np.nan, np.nan, 3.0], [1.5, 3.5, 4.0]], np.float32)
    with pytest.raises(AssertionError):
        assert_scan_matches_numpy(moved, want, x, depth=4)
    p = np.random.default_rng(3).uniform(0.9, 1.1, (2, 3000)).astype(np.float32)
    exact = np.cumprod(p.astype(np.float64), axis=-1)
    assert_scan_matches_numpy((exact * (1 + 4e-6)).astype(np.float32), np.cumprod(p, axis=-1), p, product=True,
                              depth=64)
    with pytest.raises(AssertionError):
        assert_scan_matches_numpy((exact * 1.01).astype(np.float32), np.cumprod(p, axis=-1), p, product=True, depth=64)
