"""On a GPU (``pytest -m gpu tests/gpu/test_float_bits_functions_gpu.py``): ``numpy.ldexp``, ``frexp``, ``nextafter``,
``fix``, ``sinc``, ``i0`` and ``copyto`` and nested fused functions through ``fusec.fuse`` with CuPy arrays, against
NumPy on the same data (issue 33). ldexp, frexp, nextafter and fix bit for bit (designed values: results rounded
into the subnormals and to zero, overflow to inf, exponents beyond int's range, float16's own nextafter rules);
sinc and i0 (sin, exp and sqrt are CUDA's) within CORRECTNESS.md's elementwise tolerance with a few ULP more, NaN
positions and infinities exact."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import fusec
from tests.helpers import GPU_ONLY, assert_matches_numpy, random_array, seed_of
from tests.ir.test_everyday_ops import TOLERANCE

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

FLOATS = ["float16", "float32", "float64"]
EXPONENTS = np.array([0, 1, -1, 10, -10, 15, 16, -14, -24, -25, 127, 128, -126, -149, -150, -151, 1023, 1024, -1022,
                      -1074, -1075, -1076, 5000, -5000, 2**31 - 1, -(2**31)])


def special(dt: str) -> np.ndarray:
    info = ml_dtypes.finfo(dt)
    mantissas = 1.0 + np.arange(0, 16) * float(info.eps)  # rounding bits just above 1
    values = [np.nan, np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal,
              3 * info.smallest_subnormal, info.smallest_normal, -info.smallest_normal, info.max, -info.max,
              0.5, -0.75, 1.5, 7.9, 8.0, 8.1, -30.0, 700.0, *mantissas, *(-mantissas * 1.5)]
    return np.array(values).astype(dt)


def _numpy(fn, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def _bit_exact(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    bad = ~nan & (got.view(bits) != want.view(bits))
    assert not bad.any(), f"first difference at {np.argwhere(bad)[0]}: {got[bad][:4]} vs {want[bad][:4]}"


@pytest.mark.parametrize("n_dt", ["int32", "int64"])
@pytest.mark.parametrize("dt", FLOATS)
def test_ldexp_gpu_is_bit_exact(dt: str, n_dt: str) -> None:
    x = special(dt)
    n = EXPONENTS if n_dt == "int32" else np.concatenate([EXPONENTS, [2**40, -(2**40), 2**63 - 1, -(2**63)]])
    x, n = np.broadcast_arrays(x[:, None], n.astype(n_dt)[None, :])
    x, n = np.ascontiguousarray(x), np.ascontiguousarray(n)
    fused = fusec.fuse(lambda a, b: np.ldexp(a, b))
    _bit_exact(fused(cupy.asarray(x), cupy.asarray(n)).get(), _numpy(np.ldexp, x, n))


@pytest.mark.parametrize("dt", FLOATS)
def test_frexp_gpu_is_bit_exact(dt: str) -> None:
    x = np.concatenate([special(dt), random_array(np.random.default_rng(seed_of("frexp gpu", dt)), 1029, dt)])
    m, e = fusec.fuse(lambda a: np.frexp(a))(cupy.asarray(x))
    want_m, want_e = _numpy(np.frexp, x)
    _bit_exact(m.get(), want_m)
    _bit_exact(e.get(), want_e)


@pytest.mark.parametrize("dt", FLOATS)
def test_nextafter_gpu_is_bit_exact(dt: str) -> None:
    """Every pair of the designed values: +-0 both ways (y, as C and NumPy 2.5 give it), NaN, from the subnormals,
    past the largest value to inf. NumPy 2.4's float16 loop kept x at the signed-zero tie (numpy/numpy#31472, fixed
    in 2.5): the kernels follow the fix, so with an older NumPy installed those two cells are not compared."""
    s = special(dt)
    x, y = np.ascontiguousarray(np.broadcast_arrays(s[:, None], s[None, :]))
    got = fusec.fuse(lambda a, b: np.nextafter(a, b))(cupy.asarray(x), cupy.asarray(y)).get()
    expected = _numpy(np.nextafter, x, y)
    zero = np.zeros((), dt)
    if np.signbit(np.nextafter(zero, -zero)) != np.signbit(-zero):  # NumPy before the fix: skip the tie
        tie = (x == y) & (np.signbit(x) != np.signbit(y))
        got, expected = got[~tie], expected[~tie]
    _bit_exact(got, expected)


@pytest.mark.parametrize("shape", [(1029, 917), (7, 3), (0, 5)], ids=str)
@pytest.mark.parametrize("dt", FLOATS)
def test_fix_sinc_i0_gpu_match_numpy(dt: str, shape: tuple[int, int]) -> None:
    x = random_array(np.random.default_rng(seed_of("fix sinc i0 gpu", dt, shape)), shape, dt) * 4
    x[..., :1] = 0  # sinc's eps where x is 0
    fused = fusec.fuse(lambda a: (np.fix(a), np.sinc(a), np.i0(a)))
    fix, sinc, i0 = (r.get() for r in fused(cupy.asarray(x)))
    _bit_exact(fix, np.fix(x))
    rtol, atol = TOLERANCE[np.dtype(dt)]
    # the Chebyshev steps, divisions and sqrt are correctly rounded on both sides: only CUDA's sin and exp (a few ULP
    # from glibc's) differ, each once per element, so the transcendental allowance of the other GPU tests holds
    assert_matches_numpy(sinc, _numpy(np.sinc, x), rtol=4 * rtol, atol=4 * atol)
    assert_matches_numpy(i0, _numpy(np.i0, x), rtol=4 * rtol, atol=4 * atol)
    assert len(fused.plan(cupy.asarray(x)).kernels) <= 1


def test_copyto_gpu_is_one_kernel_writing_dst() -> None:
    def f(dst, src, mask):
        np.copyto(dst, src, where=mask)

    rng = np.random.default_rng(7)
    dst, src, mask = rng.standard_normal((1029, 917)), rng.standard_normal((917,)), rng.random((1029, 917)) < 0.5
    want = dst.copy()
    np.copyto(want, src, where=mask)
    d = cupy.asarray(dst)
    fused = fusec.fuse(f)
    assert fused(d, cupy.asarray(src), cupy.asarray(mask)) is None
    np.testing.assert_array_equal(d.get(), want)
    assert len(fused.plan(d, cupy.asarray(src), cupy.asarray(mask)).kernels) == 1


def test_nested_fused_gpu_is_one_kernel() -> None:
    @fusec.fuse
    def pair(x, y):
        return x - y * 2, x + y

    @fusec.fuse
    def outer(x, y):
        a, b = pair(x + y, y=y * 3)
        c, d = pair(a, b)
        return c * d

    x, y = np.arange(1029.0), np.linspace(-1, 1, 1029)
    got = outer(cupy.asarray(x), cupy.asarray(y))
    a, b = x + y - y * 3 * 2, x + y + y * 3
    np.testing.assert_array_equal(got.get(), (a - b * 2) * (a + b))
    assert len(outer.plan(cupy.asarray(x), cupy.asarray(y)).kernels) == 1


def test_nextafter_gpu_bfloat16_is_bit_exact() -> None:
    """bfloat16's nextafter steps its own bits (through float the next value would round back to x): every one of
    the 65,536 bfloat16 values towards -inf, -1, -0, +0, 1, +inf and NaN, against ml_dtypes' loop."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
    y = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], dtype=ml_dtypes.bfloat16)
    xs, ys = np.ascontiguousarray(np.broadcast_arrays(x[:, None], y[None, :]))
    got = fusec.fuse(lambda a, b: np.nextafter(a, b))(cupy.asarray(xs), cupy.asarray(ys)).get()
    expected = _numpy(np.nextafter, xs, ys)
    assert np.array_equal(got.view(np.uint16), expected.view(np.uint16))
