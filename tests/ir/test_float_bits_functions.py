"""``numpy.fix``, ``ldexp``, ``frexp``, ``nextafter``, ``sinc`` and ``i0`` inside a fused function (issue 33, item 4),
against NumPy on the NumPy backend: every dtype (NumPy's loops, its casts and its refusals), the special values
(NaN, +-inf, -0.0, subnormals, the largest values, overflow and underflow of ``ldexp``), odd and empty shapes, and
CuPy's ufuncs of the same names traced to the same ops. The op sweep (``tests/ir/test_op_sweep.py``) covers the op
table's ``ldexp``, ``nextafter``, ``frexp_mantissa`` and ``frexp_exponent`` loop by loop; the GPU's helpers are
checked in ``tests/gpu/test_float_bits_functions_gpu.py`` and ``tests/gpu/test_cuda_ops_gpu.py``."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import cupy
import ml_dtypes
import numpy as np
import pytest

import fusec
from fusec.ir.interpret import interpret
from tests.helpers import assert_matches_numpy, numpy_error_class, random_array, seed_of

DTYPES = ["bool", "int8", "uint16", "int32", "uint64", "float16", "float32", "float64"]
SHAPES = [(1029,), (7, 3, 5), (0,), (3, 0), ()]
UNARY: dict[str, Callable[[Any], Any]] = {
    "fix": np.fix, "sinc": np.sinc, "i0": np.i0, "frexp": np.frexp,
}


def special(dt: Any) -> np.ndarray:
    """NaN, +-inf, +-0, the subnormal and normal extremes and values either side of i0's 8 (floats)."""
    info = ml_dtypes.finfo(dt)
    values = [np.nan, np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal,
              info.smallest_normal, info.max, -info.max, 0.5, -0.5, 1.5, -2.5, 7.9, 8.0, 8.1, -8.0, 30.0, 700.0]
    return np.array(values).astype(dt)


def _numpy(fn: Callable[..., Any], *args: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def _same(actual: Any, expected: Any, exact: bool) -> None:
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert_matches_numpy(a, e, exact=exact)
        if e.dtype.kind == "f":  # the sign of zeros and infinities, NaN positions
            assert np.array_equal(np.isnan(a), np.isnan(e))
            assert np.array_equal(np.signbit(a[~np.isnan(e)]), np.signbit(e[~np.isnan(e)]))


def _check(fn: Callable[..., Any], args: list[Any], exact: bool = True) -> None:
    try:
        expected = _numpy(fn, *args)
    except Exception as exc:
        with pytest.raises(numpy_error_class(exc)) as info:
            fusec.fuse(fn)(*args)
        assert isinstance(info.value, fusec.FusecError)
        return
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        actual = fusec.fuse(fn)(*args)
    _same(actual, expected, exact)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_function_matches_numpy(name: str, dt: str, shape: tuple[int, ...]) -> None:
    """Same steps as NumPy's (its own ufuncs on the NumPy backend): bit for bit, dtype and shape included."""
    function = UNARY[name]
    x = random_array(np.random.default_rng(seed_of(name, dt, shape)), shape, dt)
    _check(lambda a: function(a), [x])


@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_function_special_values_match_numpy(name: str, dt: str) -> None:
    function = UNARY[name]
    _check(lambda a: function(a), [special(dt)])


def test_fix_is_ceil_below_zero_and_floor_above() -> None:
    """NumPy 2's fix is trunc; its values are the old definition's (ceil where negative, floor elsewhere)."""
    x = np.array([-2.5, -0.5, -0.0, 0.0, 0.5, 2.5, np.nan, -np.inf], dtype=np.float32)
    got = fusec.fuse(lambda a: np.fix(a))(x)
    with np.errstate(invalid="ignore"):
        old = np.where(x < 0, np.ceil(x), np.floor(x))
    _same(got, old, exact=True)
    assert np.fix(np.int16(3)).dtype == fusec.fuse(lambda a: np.fix(a))(np.int16([3])).dtype == np.int16


def test_fix_out_writes_into_the_array() -> None:
    def f(x, y):
        np.fix(x, out=y)

    x, y = np.array([-1.5, 2.5, -0.2]), np.zeros(3)
    assert fusec.fuse(f)(x, y) is None
    _same(y, np.fix(x), exact=True)


LDEXP_EXPONENTS = np.array([0, 1, -1, 10, -10, 127, 128, -126, -149, -150, 1023, 1024, -1022, -1074, -1075, 5000,
                            -5000, 2**31 - 1, -(2**31)])


@pytest.mark.parametrize("n_dt", ["int32", "int64", "int8", "uint16", "bool"])
@pytest.mark.parametrize("dt", ["float16", "float32", "float64", "int16"])
def test_ldexp_matches_numpy(dt: str, n_dt: str) -> None:
    """Overflow to inf, results rounded into the subnormals and to zero, exponents at int's ends and int64's beyond
    them (NumPy clamps those), float16; the loops NumPy casts to (int8 to int32, int16 to float32) and refuses."""
    x = special(dt if dt.startswith("float") else "float64")
    if not dt.startswith("float"):
        x = np.arange(-5, 6).astype(dt)
    n = LDEXP_EXPONENTS.astype(np.int64)
    if n_dt == "int64":
        n = np.concatenate([n, [2**40, -(2**40), 2**63 - 1, -(2**63)]])
    else:
        n = n[(n >= np.iinfo(n_dt).min) & (n <= np.iinfo(n_dt).max)] if n_dt != "bool" else np.array([0, 1])
    n = n.astype(n_dt)
    _check(lambda a, b: np.ldexp(a, b), [x[:, None], n[None, :]])


def test_ldexp_of_subnormal_results_rounds_once() -> None:
    """A result in the subnormals is x * 2**n rounded once, half to even (never rounded twice on the way)."""
    x = np.float32(1.0) + np.arange(1, 64, dtype=np.float32) * ml_dtypes.finfo(np.float32).eps
    n = np.arange(-150, -125, dtype=np.int32)
    _check(lambda a, b: np.ldexp(a, b), [x[:, None], n[None, :]])
    _check(lambda a, b: np.ldexp(a, b), [x.astype(np.float64)[:, None] * 3, (n.astype(np.int64) * 8)[None, :]])


def test_ldexp_python_exponent_is_int32_and_too_large_overflows() -> None:
    x = np.array([1.5, -3.0], dtype=np.float16)
    _check(lambda a: np.ldexp(a, 3), [x])
    _check(lambda a: np.ldexp(a, 2**40), [x])  # NumPy: OverflowError (does not fit the int32 loop)
    _check(lambda a: np.ldexp(a, 2.0), [x])  # no loop for a float exponent: TypeError


@pytest.mark.parametrize("dt", ["float16", "float32", "float64", "int8", "int64", "bool"])
def test_nextafter_matches_numpy_bit_for_bit(dt: str) -> None:
    """Towards +-inf, +-0 (the installed NumPy's answer: the reference backend is NumPy), NaN, from zeros and
    subnormals, past the largest value."""
    x = special(dt) if dt.startswith("float") else random_array(np.random.default_rng(0), (9,), dt)
    _check(lambda a, b: np.nextafter(a, b), [x[:, None], x[None, :]])


def test_frexp_parts_and_ldexp_give_x_back() -> None:
    """``ldexp(*frexp(x)) == x`` for finite x, as in NumPy, the subnormals included; both parts in one kernel."""
    x = special("float64")

    def f(a):
        m, e = np.frexp(a)
        return m, e, np.ldexp(m, e)

    m, e, back = fusec.fuse(f)(x)
    _same((m, e, back), _numpy(f, x), exact=True)
    assert len(fusec.fuse(f).plan(x).kernels) == 1


@pytest.mark.parametrize("name", ["fix", "sinc", "i0", "frexp"])
def test_cupy_ufunc_of_the_name_traces_to_numpys_steps(name: str) -> None:
    """CuPy's fix, sinc, i0 and frexp are ufuncs (and cupyx.scipy.special.sinc is cupy.sinc): traced to the same ops as
    NumPy's functions, so NumPy's results."""
    x = special("float32")
    graph = fusec.fuse(lambda a: getattr(cupy, name)(a)).trace(fusec.ArraySpec(x.shape, x.dtype))
    actual = tuple(interpret(graph, [x]))
    _same(actual if len(actual) > 1 else actual[0], _numpy(UNARY[name], x), exact=True)


def test_cupyx_scipy_special_sinc_traces_to_numpys_sinc() -> None:
    special_module = pytest.importorskip("cupyx.scipy.special")
    x = special("float64")
    graph = fusec.fuse(lambda a: special_module.sinc(a)).trace(fusec.ArraySpec(x.shape, x.dtype))
    (actual,) = interpret(graph, [x])
    _same(actual, _numpy(np.sinc, x), exact=True)


def test_i0_coefficients_are_numpys() -> None:
    """fusec holds the Cephes coefficients NumPy's i0 uses (read from NumPy's module where it still has them)."""
    impl = pytest.importorskip("numpy.lib._function_base_impl")
    if not hasattr(impl, "_i0A"):
        pytest.skip("this NumPy keeps its i0 coefficients elsewhere")
    from fusec.frontend import elementwise_functions

    assert list(elementwise_functions._I0_A) == list(impl._i0A)
    assert list(elementwise_functions._I0_B) == list(impl._i0B)


def test_i0_and_sinc_fuse_into_one_kernel() -> None:
    spec = fusec.ArraySpec((1029, 917), "float32")
    assert len(fusec.fuse(lambda a: np.i0(a) * np.sinc(a) + np.fix(a)).plan(spec).kernels) == 1


def test_i0_of_complex_and_frexp_of_bool() -> None:
    """NumPy's refusals are fusec's (complex: TypeError); frexp of bool is float16's loop, as NumPy's."""
    _check(lambda a: np.frexp(a), [np.array([True, False])])
    with pytest.raises(TypeError):
        fusec.fuse(lambda a: np.i0(a * 1j))(np.ones(3))
