"""The reduction tolerance of ``tests.helpers.assert_reduction_matches_numpy`` (``shared/CORRECTNESS.md``): a
float reduction passes when it is within the dtype's tolerance of NumPy, or no further from the float64 result
than twice NumPy's own error; NaN and infinities must match exactly."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import (
    assert_function_matches_numpy,
    assert_reduction_matches_numpy,
    assert_result_matches_numpy,
    assert_same_bits,
    random_array,
    seed_of,
)
from tests.reference import LAMBDA, accumulation_error, expect


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


# The float32 sums the GPU run of 2026-12-07 (shared/gpu-runs/2026-12-07-h100) failed, each with the GPU's printed
# value at its first mismatch: sums of tens to thousands of terms with much cancellation, where NumPy's own error
# happened to be nearly nothing, so "twice NumPy's error" asked for NumPy's bits. Each GPU error is under one unit
# roundoff of float32 times the sum of the magnitudes (0.2 to 0.9 u * sum|x|), far inside the bound of any order.
GPU_SUMS = [
    ("views", "slice_of_reduction", "contiguous", (1029, 33), (255,), 15.526245),
    ("views", "slice_of_reduction", "offset", (64, 4099), (27,), 101.61182),
    ("views", "slice_of_reduction", "reversed", (1029, 33), (194,), 1.6426392),
    ("views", "sliced_row_sum", "contiguous", (64, 4099), (55,), -13.950073),
    ("views", "sliced_row_sum", "strided", (64, 4099), (57,), -0.9375),
    ("reshape", "group_index", "contiguous", (130, 36), (30, 0, 2), 0.7246399),
    ("reshape", "group_index", "offset", (130, 36), (121, 1, 2), -1.0799007),
    ("reshape", "group_index", "strided", (130, 36), (13, 0, 1), -0.47389984),
    ("reshape", "group_index", "reversed", (130, 36), (26, 1, 2), 0.6502609),
    ("reshape", "group_index", "transposed", (130, 36), (43, 0, 6), -4.0292063),
    ("reshape", "split_of_slice", "strided", (130, 36), (78, 0), -0.9086304),
    ("joins", "concat_col_sum", "transposed", None, (5,), -3.1567535),
]


def _gpu_sum_case(suite: str, name: str, layout: str, shape):
    from tests.ir.test_joins import WORKLOADS as JOINS
    from tests.ir.test_joins import _args
    from tests.ir.test_reshape import WORKLOADS as RESHAPES
    from tests.ir.test_views import WORKLOADS as VIEWS
    from tests.schedule.test_join_accesses import _laid_out
    from tests.schedule.test_view_accesses import _layouts

    if suite == "joins":
        return JOINS[name][0], [_laid_out(a, layout) for a in _args(name, "float32")]
    return (VIEWS if suite == "views" else RESHAPES)[name], [_layouts(shape, "float32")[layout]]


@pytest.mark.parametrize(("suite", "name", "layout", "shape", "index", "gpu"), GPU_SUMS,
                         ids=[f"{c[1]}-{c[2]}" for c in GPU_SUMS])
def test_reduction_tolerance_passes_the_gpu_runs_float32_sums(suite, name, layout, shape, index, gpu) -> None:
    fn, args = _gpu_sum_case(suite, name, layout, shape)
    (result,) = expect(fn, *args).outputs
    actual = result.numpy.copy()
    actual[index] = gpu
    assert_function_matches_numpy(actual, fn, *args, rtol=4e-6, atol=1e-5)  # the GPU tests' float32 tolerance
    with pytest.raises(AssertionError, match="twice NumPy's error"):  # the rule without the bound: the old check
        assert_reduction_matches_numpy(actual, result.numpy, result.reference, float64=result.float64, rtol=4e-6,
                                       atol=1e-5)
    error = abs(gpu - float(result.float64[index]))
    assert error < 2.0**-24 * float(result.magnitude[index])  # under one unit roundoff times sum|x|
    wrong = actual.copy()
    wrong[index] += result.magnitude[index] / result.terms  # a typical term dropped or counted twice
    with pytest.raises(AssertionError, match="error bound"):
        assert_function_matches_numpy(wrong, fn, *args, rtol=4e-6, atol=1e-5)


def test_reduction_tolerance_bound_grows_as_the_order_allows() -> None:
    """gamma_(n-1) u for short sums (any order, Higham (4.4)); lambda sqrt(n) u beyond (Higham & Mary)."""
    u = 2.0**-24
    assert accumulation_error(12, u) == pytest.approx(11 * u, rel=1e-5)
    assert accumulation_error(4099, u) == pytest.approx(LAMBDA * 4099**0.5 * u)
    assert accumulation_error(4099, u, depth=24) == pytest.approx(24 * u, rel=1e-5)
    r = expect(lambda x: x.sum(axis=1) * 2 - x[:, 0], np.ones((3, 100), np.float32)).outputs[0]
    assert (r.terms, r.folds, r.steps, r.unit) == (100, 1, 2, u)
    assert np.all(r.magnitude == 201) and r.dependent.all()
    r = expect(lambda x: (x * 2, x.sum()), np.ones((3, 4), np.float32)).outputs[0]
    assert not r.dependent.any() and np.all(r.bound() == 0)  # no accumulation: NumPy's bits
    assert expect(lambda x: np.exp(x).sum(), np.ones(3, np.float32)).outputs[0].bound() is None


def _emulated_half_products_sum(x: np.ndarray, other: np.ndarray) -> np.ndarray:
    """fusec's float16 kernel for (other * x).sum(axis=1): each product rounded to float16 (NumPy's product array),
    the row summed in float32 (here in order), rounded once."""
    products = (other * x).astype(np.float16)
    total = np.zeros(x.shape[0], np.float32)
    for j in range(x.shape[1]):
        total = np.add(total, products[:, j].astype(np.float32), dtype=np.float32)
    return total.astype(np.float16)


def test_reduction_tolerance_float16_infinities_are_the_exact_sums_not_numpys_strided_ones() -> None:
    """tests/gpu/test_joins_gpu.py iota_rows-float16-transposed and test_shift_functions_gpu.py
    roll_then_sum-float16-transposed: NumPy's float16 sum along a strided axis rounds every step and overflows on
    the way (-inf, NaN) where the contiguous copy of the same values, and fusec, sum to a finite value or to one
    infinity. The GPU printed 4.368e+04 and 1.042e+03 for the first; the emulation gives those."""
    from tests.ir.test_joins import WORKLOADS as JOINS
    from tests.ir.test_joins import _args
    from tests.schedule.test_join_accesses import _laid_out
    from tests.schedule.test_view_accesses import _layouts

    with np.errstate(all="ignore"):
        (x,) = [_laid_out(a, "transposed") for a in _args("iota_rows", "float16")]
        iota = np.arange(x.shape[1]).astype(np.float16)
        fused_like = _emulated_half_products_sum(x, iota)
        assert fused_like[0] == np.float16(4.368e4) and fused_like[5] == np.float16(1.042e3)
        assert np.isneginf(JOINS["iota_rows"][0](x)[[0, 5]]).all()  # NumPy's strided float16 running sums
        assert np.array_equal(JOINS["iota_rows"][0](np.ascontiguousarray(x)), fused_like)
        assert_function_matches_numpy(fused_like, JOINS["iota_rows"][0], x, rtol=4e-3, atol=1e-3)
        unrounded = (x.astype(np.float32) * iota).sum(axis=1).astype(np.float16)  # products not rounded to float16
        with pytest.raises(AssertionError, match="infinities differ"):
            assert_function_matches_numpy(unrounded, JOINS["iota_rows"][0], x, rtol=4e-3, atol=1e-3)

        y = _layouts((130, 1030), "float16")["transposed"]
        roll_then_sum = lambda a: (np.roll(a, 1, axis=-1) * a).sum(axis=-1)  # noqa: E731
        fused_like = _emulated_half_products_sum(y, np.roll(y, 1, axis=-1))
        assert (np.isnan(roll_then_sum(y)) != np.isnan(fused_like)).sum() == 17  # the GPU run's 17 of 130
        assert_function_matches_numpy(fused_like, roll_then_sum, y, rtol=4e-3, atol=1e-3)


def test_reduction_tolerance_float16_column_sum_written_into_the_argument() -> None:
    """tests/gpu/test_slice_assign_gpu.py two_parts-float16: y = x.sum(axis=0) (NumPy: one float16 rounding per
    row added) written into x[0]: the GPU's float32 sums, rounded once ([126.25, -141.8, 512.0, ...] as it
    printed), pass for the result and the buffer; everything not from the sum stays NumPy's bits."""
    from tests.ir.test_slice_assign import CASES

    rng = np.random.default_rng(seed_of("slice assign gpu", "two_parts", "float16", "contiguous"))
    big = random_array(rng, (12, 18), "float16", special=False)
    index = (slice(None, 6), slice(None, 9))
    v = random_array(rng, big[index].shape, "float16", special=False)
    y = big[index].astype(np.float32).sum(axis=0).astype(np.float16)
    assert list(y[:4]) == [np.float16(126.25), np.float16(-141.8), np.float16(512.0), np.float16(-284.2)]
    buffer = big.copy()
    view = buffer[index]
    view[0], view[-1], view[0, :2] = y, v[-1] * 3, 7
    expectation = expect(lambda b, w: CASES["two_parts"](b[index], w), big, v)
    assert not np.array_equal(expectation.outputs[0].numpy, y)
    assert_result_matches_numpy(y, expectation.outputs[0], exact=True)
    assert_result_matches_numpy(buffer, expectation.arguments[0], exact=True)
    buffer[5, 17] += 1  # an element no sum reaches: NumPy's bits
    with pytest.raises(AssertionError):
        assert_result_matches_numpy(buffer, expectation.arguments[0], exact=True)


def test_same_bits_takes_any_nan_and_nothing_else() -> None:
    """tests/gpu/test_joins_gpu.py arange (1e8, 1e8 + 40) float16: inf, inf, then fill's inf + i * (inf - inf):
    NaN, which NumPy on x86 stores as 0xfe00 and the GPU as its canonical 0x7fff."""
    with np.errstate(all="ignore"):
        want = np.arange(1e8, 1e8 + 40, dtype=np.float16)
    gpu = np.array([0x7C00, 0x7C00] + [0x7FFF] * 38, np.uint16).view(np.float16)
    assert_same_bits(gpu, want)
    with pytest.raises(AssertionError, match="NaN positions"):
        assert_same_bits(np.where(np.arange(40) == 3, np.float16(np.inf), gpu), want)
    with pytest.raises(AssertionError, match="bits differ"):
        assert_same_bits(np.array([0.0, 1.0], np.float32), np.array([-0.0, 1.0], np.float32))


def test_reduction_tolerance_float32_sum_after_a_part_update() -> None:
    """tests/gpu/test_slice_assign_gpu.py sum_after-contiguous: x[0] = 1, then x.sum() of 54 float32 values, which
    the test compared bit for bit with NumPy's pairwise sum; the GPU's block sum gave 273.69568 for 273.69565."""
    from tests.ir.test_slice_assign import READ_AFTER

    rng = np.random.default_rng(seed_of("slice assign read after gpu", "sum_after", "contiguous"))
    big = random_array(rng, (12, 18), "float32", special=False)
    index = (slice(None, 6), slice(None, 9))  # the GPU test's contiguous layout
    expectation = expect(lambda b, w: READ_AFTER["sum_after"](b[index]), big, np.zeros(1, np.float32))
    (result,) = expectation.outputs
    assert result.numpy == np.float32(273.69565)
    assert_result_matches_numpy(np.array(273.69568, np.float32), result, exact=True)
    with pytest.raises(AssertionError):
        assert_result_matches_numpy(np.array(273.8, np.float32), result, exact=True)  # beyond the 54 terms' bound
    buffer = big.copy()
    buffer[index][0] = 1
    assert_result_matches_numpy(buffer, expectation.arguments[0], exact=True)
