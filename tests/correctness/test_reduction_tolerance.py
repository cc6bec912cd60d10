"""The reduction tolerance of ``tests.helpers.assert_reduction_matches_numpy`` (``shared/CORRECTNESS.md``): a
float reduction passes when it is within the dtype's tolerance of NumPy, or no further from the float64 result
than twice NumPy's own error; NaN and infinities must match exactly."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import assert_reduction_matches_numpy


def test_reduction_tolerance_accepts_a_result_closer_to_float64_than_numpys():
    x = (np.random.default_rng(0).standard_normal(4099) * 30).astype(np.float16)
    exact = x.astype(np.float64).sum()
    numpy_sum = x[::-1].sum()  # a strided float16 sum: NumPy's own rounding
    fusec_like = np.float16(x.astype(np.float32).sum())  # float32 accumulation
    assert_reduction_matches_numpy(np.asarray(fusec_like), np.asarray(numpy_sum), exact)


def test_reduction_tolerance_refuses_a_result_worse_than_twice_numpys_error():
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    exact = x.astype(np.float64).sum()
    numpy_sum = x.sum()
    wrong = np.float32(exact + 20 * abs(float(numpy_sum) - exact) + 1e-3)
    with pytest.raises(AssertionError, match="twice NumPy's error"):
        assert_reduction_matches_numpy(np.asarray(wrong), np.asarray(numpy_sum), exact)


def test_reduction_tolerance_keeps_nan_and_infinities_exact():
    with pytest.raises(AssertionError, match="NaN positions differ"):
        assert_reduction_matches_numpy(np.array([1.0, 2.0], np.float32), np.array([np.nan, 2.0], np.float32),
                                       np.array([np.nan, 2.0]))
    with pytest.raises(AssertionError, match="infinities differ"):
        assert_reduction_matches_numpy(np.array([-np.inf], np.float32), np.array([np.inf], np.float32),
                                       np.array([np.inf]))
