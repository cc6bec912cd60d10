"""bfloat16 (``ml_dtypes.bfloat16``) through ``fusec.fuse`` on the NumPy backend, against a float64 computation
rounded once and against ml_dtypes: casts from every dtype (overflow to inf, subnormals, NaN, -0.0), the
correctly rounded ops bit for bit, float32 accumulation of sums, products, means and scans (where ml_dtypes'
own loops round at every step), NaN and tie rules of maximum/minimum, empty and odd sizes; and the kernels:
``cuda_bf16.h`` only in kernels that hold a bfloat16, every kind compiled with NVRTC for sm_90."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import fusec
from fusec.ir.dtypes import BFLOAT16, SUPPORTED
from tests.helpers import assert_matches_numpy, assert_same_bits, random_array, seed_of

BF16_MAX = float(ml_dtypes.finfo(BFLOAT16).max)  # 3.3895e38
BF16_TINY = float(ml_dtypes.finfo(BFLOAT16).smallest_subnormal)  # 2**-133


def _rounded_once(x64: np.ndarray) -> np.ndarray:
    """float64 values rounded once to bfloat16 (ml_dtypes' float64 cast is a single correct rounding)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(x64, dtype=np.float64).astype(BFLOAT16)


def test_bfloat16_cast_rounds_once_from_the_exact_value() -> None:
    # ties to even at bfloat16's 8 significant bits, and values that a detour through float32 would round twice
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-40, 2**24 + 2**16 + 1, -(2**60 + 2**52 + 2**8)], np.float64)
    got = fusec.fuse(lambda a: a.astype(BFLOAT16))(x)
    assert got.astype(np.float64).tolist() == [1.0, 1 + 2**-6, 1 + 2**-7, 2**24 + 2**17, -(2**60 + 2**53)]
    i = np.array([2**24 + 2**16 + 1, -(2**60 + 2**52 + 1), 2**63 - 1, -(2**63), 0, -1], np.int64)
    assert fusec.fuse(lambda a: a.astype(BFLOAT16))(i).astype(np.float64).tolist() == [
        2**24 + 2**17, -(2**60 + 2**53), 2**63, -(2**63), 0.0, -1.0]


@pytest.mark.parametrize("source", [d for d in SUPPORTED if d != BFLOAT16], ids=str)
def test_bfloat16_cast_from_every_dtype_matches_ml_dtypes(source: np.dtype) -> None:
    x = random_array(np.random.default_rng(seed_of("bf16 cast", source)), (1029,), source)
    got = fusec.fuse(lambda a: a.astype(BFLOAT16))(x)
    assert_same_bits(got, x.astype(BFLOAT16))
    if source.kind == "f" or source.itemsize < 8:  # exact in float64: rounding once from it is the rule
        assert_same_bits(got, _rounded_once(x.astype(np.float64)))


@pytest.mark.parametrize("target", [d for d in SUPPORTED if d != BFLOAT16 and d.kind in "bf"], ids=str)
def test_bfloat16_cast_to_floats_and_bool_is_exact(target: np.dtype) -> None:
    x = random_array(np.random.default_rng(seed_of("bf16 to", target)), (1029,), BFLOAT16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = x.astype(target)  # float16 overflows to inf and flushes below its subnormals, as NumPy's
    assert_same_bits(fusec.fuse(lambda a: a.astype(target))(x), expected)


def test_bfloat16_special_values_survive_casts_from_float32() -> None:
    f32 = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 3.3e38, 3.4e38, -3.4e38,
                    BF16_MAX, 1.17549435e-38, 1e-40, BF16_TINY, BF16_TINY / 2, BF16_TINY * 0.75], np.float32)
    got = fusec.fuse(lambda a: a.astype(BFLOAT16))(f32).astype(np.float64)
    assert np.isnan(got[:2]).all() and np.signbit(got[1]) == np.signbit(f32[1])
    assert got[2] == np.inf and got[3] == -np.inf
    assert got[4] == 0 and np.signbit(got[4]) and not np.signbit(got[5])
    assert abs(got[6] - 3.3e38) <= 2.0**120  # finite: within half an ULP (2^120 there) of float32's 3.3e38
    assert got[7] == np.inf and got[8] == -np.inf  # past the largest finite value's half ULP: inf
    assert got[9] == BF16_MAX
    assert got[10] == 2.0**-126  # the smallest normal
    assert 0 < got[11] < 2.0**-126  # a subnormal, not flushed
    assert got[12] == BF16_TINY and got[13] == 0.0 and got[14] == BF16_TINY  # ties to even at the bottom
    assert_same_bits(fusec.fuse(lambda a: a.astype(BFLOAT16))(f32), f32.astype(BFLOAT16))


@pytest.mark.parametrize("n", [0, 1, 23, 1029])
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "sqrt", "maximum", "minimum", "negative",
                                "absolute", "copysign"])
def test_bfloat16_correctly_rounded_ops_match_float64_rounded_once(op: str, n: int) -> None:
    rng = np.random.default_rng(seed_of("bf16 exact", op, n))
    ufunc = getattr(np, op)
    xs = [random_array(rng, (n,), BFLOAT16) for _ in range(ufunc.nin)]
    got = fusec.fuse(lambda *a: ufunc(*a))(*xs)
    assert got.dtype == BFLOAT16 and got.shape == (n,)
    with np.errstate(all="ignore"):
        wide = ufunc(*(x.astype(np.float64) for x in xs))
    assert_matches_numpy(got, _rounded_once(wide), exact=op not in ("maximum", "minimum"))
    if op in ("maximum", "minimum"):  # NaN wins; ties of +0.0 and -0.0 give the second operand (ml_dtypes')
        assert_matches_numpy(got, ufunc(*xs), exact=True)
    else:
        assert_same_bits(got, ufunc(*xs))


def test_bfloat16_maximum_minimum_fmax_fmin_nan_and_zero_ties() -> None:
    a = np.array([np.nan, 1.0, 0.0, -0.0, np.nan], BFLOAT16)
    b = np.array([1.0, np.nan, -0.0, 0.0, np.nan], BFLOAT16)
    for ufunc in (np.maximum, np.minimum, np.fmax, np.fmin):
        got = fusec.fuse(lambda x, y, u=ufunc: u(x, y))(a, b)
        assert_matches_numpy(got, ufunc(a, b), exact=True)
    assert np.isnan(fusec.fuse(lambda x, y: np.maximum(x, y))(a, b)[:2]).all()
    assert fusec.fuse(lambda x, y: np.fmax(x, y))(a, b)[:2].astype(np.float64).tolist() == [1.0, 1.0]


def test_bfloat16_sum_mean_and_cumsum_accumulate_in_float32() -> None:
    ones = np.ones(100_000, BFLOAT16)
    assert float(np.sum(ones)) == 256.0  # ml_dtypes' own loop: rounds to bfloat16 at every step and stagnates
    total, mean, prefix, product = fusec.fuse(lambda x: (x.sum(), x.mean(), np.cumsum(x), np.prod(x * 1.0)))(ones)
    assert total.dtype == mean.dtype == prefix.dtype == product.dtype == BFLOAT16
    assert float(total) == float(_rounded_once(100_000.0)) == 99840.0
    assert float(mean) == 1.0 and float(product) == 1.0
    assert_same_bits(prefix, _rounded_once(np.arange(1, 100_001, dtype=np.float64)))


@pytest.mark.parametrize("shape, axis", [((1029,), None), ((23, 917), 1), ((917, 23), 0), ((5, 0), 1)])
def test_bfloat16_reductions_against_float64_rounded_once(shape: tuple[int, ...], axis: int | None) -> None:
    x = random_array(np.random.default_rng(seed_of("bf16 sums", shape, axis)), shape, BFLOAT16, special=False)
    x64 = x.astype(np.float64)
    got_sum, got_mean, got_var = fusec.fuse(lambda a: (a.sum(axis=axis), a.mean(axis=axis), a.var(axis=axis)))(x)
    n = x.size if axis is None else x.shape[axis]
    # float32 accumulation: |error| <= n * eps32 * sum|x| before the one rounding to bfloat16 (half an ULP, 2^-8)
    bound = n * 2.0**-23 * np.abs(x64).sum(axis=axis) + 2.0**-8 * np.abs(x64.sum(axis=axis))
    assert np.all(np.abs(got_sum.astype(np.float64) - x64.sum(axis=axis)) <= bound + BF16_TINY)
    with np.errstate(all="ignore"):
        mean64, var64 = x64.mean(axis=axis), x64.var(axis=axis)
    assert_matches_numpy(np.isnan(got_mean.astype(np.float64)), np.isnan(mean64))
    finite = ~np.isnan(mean64)
    assert np.all(np.abs(got_mean.astype(np.float64) - mean64)[finite] <= (bound / max(n, 1) + 2.0**-8 * np.abs(
        mean64))[finite] + BF16_TINY)
    assert np.allclose(got_var.astype(np.float64)[finite], var64[finite], rtol=2.0**-6, atol=1e-6)


def test_bfloat16_empty_reductions_follow_numpy() -> None:
    empty = np.zeros((0,), BFLOAT16)
    total, product = fusec.fuse(lambda a: (a.sum(), a.prod()))(empty)
    assert total.dtype == BFLOAT16 and float(total) == 0.0 and float(product) == 1.0
    with pytest.raises(ValueError):
        fusec.fuse(lambda a: a.max())(empty)


def test_bfloat16_argmax_takes_the_first_nan_else_the_first_maximum() -> None:
    x = np.array([[1.0, 3.0, 3.0, -np.inf], [2.0, np.nan, 5.0, np.nan]], BFLOAT16)
    got = fusec.fuse(lambda a: (a.argmax(axis=1), a.argmin(axis=1), a.max(axis=1)))(x)
    assert got[0].tolist() == [1, 1] and got[1].tolist() == [3, 1]
    assert float(got[2][0]) == 3.0 and np.isnan(float(got[2][1]))


def test_bfloat16_ir_text_round_trips() -> None:
    from fusec.ir.text import parse

    graph = fusec.fuse(lambda a: (a * -0.0 + 0.1, a.astype(np.float32))).trace(fusec.ArraySpec((3,), "bfloat16"))
    text = str(graph)
    assert "bf16[3]" in text and "-0.0" in text and "0.10009765625" in text
    assert str(parse(text)) == text


def _kinds_sources() -> dict[str, str]:
    spec = fusec.ArraySpec((37, 129), "bfloat16")
    functions = {
        "pointwise": lambda a: np.tanh(a) * 0.5 + a.astype(np.float32),
        "reduce-all": lambda a: (np.abs(a).sum(), a.max(), a.argmax()),
        "rows": lambda a: np.exp(a - a.max(axis=-1, keepdims=True)) / np.exp(a).sum(axis=-1, keepdims=True),
        "cols": lambda a: (a.mean(axis=0), a.var(axis=0)),
        "scan": lambda a: np.cumsum(a, axis=1),
    }
    return {kind: fusec.fuse(fn).cuda_source(spec, full=True) for kind, fn in functions.items()}


def test_bfloat16_header_only_in_kernels_holding_a_bfloat16() -> None:
    for kind, source in _kinds_sources().items():
        assert "fusec_bf16.cuh" in source or "FUSEC_BF16_CUH" in source, kind
    f32 = fusec.fuse(lambda a: np.exp(a).sum(axis=-1)).cuda_source(fusec.ArraySpec((37, 129), "float32"), full=True)
    assert "cuda_bf16.h" not in f32 and "__nv_bfloat16" not in f32


@pytest.mark.parametrize("kind", ["pointwise", "reduce-all", "rows", "cols", "scan"])
def test_bfloat16_kernels_of_every_kind_compile_with_nvrtc(kind: str) -> None:
    from fusec.codegen.nvrtc import compile_cubin

    source = _kinds_sources()[kind]
    assert f"\n// schedule: {kind}:" in source  # the kind the planner picked
    assert "const __nv_bfloat16* __restrict__" in source  # the bfloat16 argument, read as itself
    result = compile_cubin(source, arch="sm_90")
    assert result.cubin[:4] == b"\x7fELF"
