"""The everyday ops of issue 17 item 5 against NumPy and SciPy themselves, on the NumPy backend.

``erf``/``erfc`` are op-table primitives (the op sweep in ``test_op_sweep.py`` covers every loop); the
others trace into existing primitives (``fusec.frontend.composite``). Each case runs on fresh random data
with NaN, +-inf, -0.0 and integer boundaries, on odd and empty shapes and 0-d arrays, and compares
values, dtype and shape with the NumPy/SciPy call, or checks that fusec raises NumPy's exception
class where NumPy raises. Then: their NumPy, CuPy, ``scipy.special`` and ``cupyx.scipy.special``
names, their IR text round trip, one kernel each, and the CUDA source of each compiling with NVRTC.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import cupy
import cupyx.scipy.special as cupyx_special
import numpy as np
import pytest
import scipy.special

import fusec
from fusec.codegen import nvrtc
from fusec.ir import special
from fusec.ir.interpret import interpret
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from tests.helpers import assert_matches_numpy, numpy_error_class, random_array, seed_of

SHAPES = [(2, 3, 4), (1029,), (3, 0), ()]
FLOATS = [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)]
INTS = [np.dtype(np.int32), np.dtype(np.uint8), np.dtype(np.bool_)]
# NumPy's own C routines (logaddexp), SciPy's algorithm (logsumexp) or summation order (norm's dot, the
# nan statistics' sums) against fusec's steps: the elementwise tolerance, a few ULP more for transcendentals
TOLERANCE = {
    np.dtype(np.float16): (4e-3, 1e-4), np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-12, 1e-12),
}


def _numpy(fn: Callable[..., Any], *args: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def _check(fn: Callable[..., Any], *args: Any, exact: bool = False) -> None:
    """``fusec.fuse(fn)(*args)`` is ``fn(*args)`` (dtype, shape, values), or raises NumPy's class."""
    try:
        expected = _numpy(fn, *args)
    except Exception as exc:
        with pytest.raises(numpy_error_class(exc)) as info:
            _numpy(fusec.fuse(fn), *args)
        assert isinstance(info.value, fusec.FusecError), repr(info.value)
        return
    actual = _numpy(fusec.fuse(fn), *args)
    expected = np.asarray(expected)
    if exact or expected.dtype.kind != "f":
        assert_matches_numpy(actual, expected, exact=True)
    else:
        rtol, atol = TOLERANCE[expected.dtype]
        assert_matches_numpy(actual, expected, rtol=rtol, atol=atol)


def _calling(function: Callable[..., Any], **kwargs: Any) -> Callable[[Any], Any]:
    """``lambda a: function(a, **kwargs)`` with ``kwargs`` bound now (a default argument would be traced as
    a parameter of the fused function)."""
    return lambda a: function(a, **kwargs)


def _data(name: str, shape: tuple[int, ...], dt: np.dtype, special_values: bool = True) -> np.ndarray:
    return random_array(np.random.default_rng(seed_of(name, shape, dt, special_values)), shape, dt,
                        special=special_values)


def _axes(shape: tuple[int, ...]) -> list[Any]:
    return [None] + list(range(-len(shape), len(shape)))[-2:]


# --- elementwise ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dt", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("name", ["erf", "erfc", "expit", "log_expit"])
def test_special_unary_matches_scipy(name: str, dt: np.dtype, shape: tuple[int, ...]) -> None:
    x = _data(name, shape, dt)
    function = getattr(scipy.special, name)
    _check(lambda a: function(a), x, exact=name in ("erf", "erfc"))


@pytest.mark.parametrize("dt", [np.dtype(np.float16), np.dtype(np.int32), np.dtype(np.bool_), np.dtype(np.uint8)],
                         ids=str)
def test_special_erf_dtype_rule_is_scipys(dt: np.dtype) -> None:
    x = _data("erf dtype", (5,), dt)
    assert fusec.fuse(lambda a: scipy.special.erf(a))(x).dtype == scipy.special.erf(x).dtype == np.float64
    assert fusec.fuse(lambda a: scipy.special.erf(a)).trace(x).outputs[0].dtype == np.float64


def test_special_erf_of_float32_stays_float32_and_of_python_scalar_is_float64() -> None:
    x = _data("erf f32", (7,), np.dtype(np.float32))
    assert fusec.fuse(lambda a: scipy.special.erf(a))(x).dtype == np.float32
    out = fusec.fuse(lambda a: a + scipy.special.erf(0.5))(x)
    assert_matches_numpy(out, x + scipy.special.erf(0.5), exact=True)


def test_special_ufunc_without_scipy_matches_scipy() -> None:
    """The stand-in computes the C library's erf per element when SciPy is missing: SciPy's values."""
    x = _data("stand-in", (2, 3, 4), np.dtype(np.float64))
    for ufunc in (special.erf, special.erfc):
        fallback = np.vectorize(ufunc._scalar, otypes=[np.float64])(x)
        assert_matches_numpy(fallback, ufunc(x), rtol=1e-15, atol=1e-300)
    x32 = x.astype(np.float32)
    assert special.erf.resolve_dtypes((x32.dtype, None)) == (np.float32, np.float32)
    assert special.erf.resolve_dtypes((np.dtype(np.int8), None)) == (np.float64, np.float64)
    with pytest.raises(TypeError):
        special.erf.resolve_dtypes((np.dtype(np.complex64), None))


def test_special_exact_gelu_matches_numpy() -> None:
    x = _data("gelu", (64, 33), np.dtype(np.float32))
    _check(lambda a: 0.5 * a * (1.0 + scipy.special.erf(a / np.float32(np.sqrt(2.0)))), x, exact=True)


@pytest.mark.parametrize("dt", FLOATS + [np.dtype(np.int32), np.dtype(np.int8)], ids=str)
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_matches_numpy(name: str, dt: np.dtype) -> None:
    ufunc = getattr(np, name)
    x, y = _data(name, (2, 3, 4), dt), _data(name + "y", (4,), dt)
    _check(lambda a, b: ufunc(a, b), x, y)
    _check(lambda a: ufunc(a, 1.5), x)
    _check(lambda a: ufunc(a, a), x)  # x == y: x + log(2), infinities kept
    special_pairs = np.array([np.inf, -np.inf, np.nan, 0.0, -np.inf, 1e30], dtype=np.float64)
    _check(lambda a, b: ufunc(a, b), special_pairs, special_pairs[::-1].copy())


@pytest.mark.parametrize("dt", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("decimals", [0, 1, 2, -1, -2])
def test_round_matches_numpy(decimals: int, dt: np.dtype) -> None:
    x = _data("round", (1029,), dt)
    if dt.kind == "f":
        x = _numpy(lambda v: (v * np.asarray(10.0 ** -decimals, dtype=dt)).astype(dt), x) if decimals < 0 else x
        halves = _numpy(lambda v: v.astype(dt), np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.25, 0.35, 1e300]))
        _check(lambda a: np.round(a, decimals), halves, exact=True)
    _check(lambda a: np.round(a, decimals), x, exact=True)
    _check(lambda a: np.around(a, decimals=decimals), x, exact=True)
    _check(lambda a: a.round(decimals), x, exact=True)


def test_round_of_ints_keeps_the_dtype_and_wraps_like_numpy() -> None:
    x = np.array([125, -125, 115, 127, -128, 5], dtype=np.int8)
    for decimals in (0, -1, -2):
        _check(_calling(np.round, decimals=decimals), x, exact=True)
    assert fusec.fuse(lambda a: np.round(a))(x).dtype == np.int8


# --- reductions -------------------------------------------------------------------------------------
def _reduction_cases(names: list[str], dts: list[np.dtype]) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
    return [(n, dt, s) for n in names for dt in dts for s in SHAPES]


@pytest.mark.parametrize("name,dt,shape", _reduction_cases(["logsumexp", "softmax", "log_softmax"],
                                                           FLOATS + [np.dtype(np.int32), np.dtype(np.int8)]),
                         ids=str)
def test_softmax_family_matches_scipy(name: str, dt: np.dtype, shape: tuple[int, ...]) -> None:
    function = getattr(scipy.special, name)
    for special_values in (True, False):
        x = _data(name, shape, dt, special_values)
        for axis in _axes(shape):
            if name == "logsumexp" and axis is None and x.size == 0:  # SciPy 1.17 raises IndexError there
                assert fusec.fuse(_calling(function, axis=axis))(x) == -np.inf
                continue
            _check(_calling(function, axis=axis), x)
            if name == "logsumexp":
                _check(_calling(function, axis=axis, keepdims=True), x)


def test_logsumexp_infinities_and_all_minus_inf_rows() -> None:
    x = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, -np.inf], [np.nan, 0.0, 1.0], [1e300, 1e300, 0.0],
                  [-1e300, -1e300, -np.inf]])
    _check(lambda a: scipy.special.logsumexp(a, axis=1), x)
    _check(lambda a: scipy.special.logsumexp(a, axis=0), x)
    _check(lambda a: scipy.special.log_softmax(a, axis=1), x)
    _check(lambda a: scipy.special.logsumexp(a, axis=1), np.zeros((3, 0)))  # -inf per row


def test_logsumexp_weights_match_scipy() -> None:
    x = _data("lse b", (4, 9), np.dtype(np.float64), special_values=False)
    b = _data("lse weights", (4, 9), np.dtype(np.float64), special_values=False)
    b[:, ::3] = 0.0
    x[0, 0] = np.inf  # weight 0: left out
    _check(lambda a, w: scipy.special.logsumexp(a, axis=1, b=w), x, np.abs(b))
    _check(lambda a, w: scipy.special.logsumexp(a, axis=-1, b=w), x, b)  # negative sums: NaN
    _check(lambda a: scipy.special.logsumexp(a, b=2.0), x)


@pytest.mark.parametrize("name,dt,shape", _reduction_cases(["count_nonzero", "ptp"], FLOATS + INTS), ids=str)
def test_count_nonzero_and_ptp_match_numpy(name: str, dt: np.dtype, shape: tuple[int, ...]) -> None:
    function = getattr(np, name)
    x = _data(name, shape, dt)
    for axis in _axes(shape) + ([(0, 1)] if len(shape) == 3 else []):
        for keepdims in (False, True):
            _check(_calling(function, axis=axis, keepdims=keepdims), x, exact=True)


def test_count_nonzero_of_all_is_int64_and_counts_nan_as_true() -> None:
    x = np.array([0.0, -0.0, np.nan, 1.0, np.inf])
    out = fusec.fuse(lambda a: np.count_nonzero(a))(x)
    assert out.dtype == np.int64 and int(out) == np.count_nonzero(x) == 3


NAN_STATS = ["nanmean", "nanvar", "nanstd", "nanprod", "nanargmax", "nanargmin", "nansum", "nanmax", "nanmin"]


@pytest.mark.parametrize("name,dt,shape", _reduction_cases(NAN_STATS, FLOATS + [np.dtype(np.int32)]), ids=str)
def test_nan_statistics_match_numpy(name: str, dt: np.dtype, shape: tuple[int, ...]) -> None:
    function = getattr(np, name)
    arg = name in ("nanargmax", "nanargmin")
    x = _data(name, shape, dt)
    if arg and dt.kind == "f":  # no all-NaN slice (NumPy raises there; see the test below)
        x = x.copy() if x.ndim else np.asarray(1.5, dtype=dt)
        if x.ndim:
            x[..., :1] = 1
    for axis in _axes(shape):
        kwargs: list[dict[str, Any]] = [{"axis": axis}, {"axis": axis, "keepdims": True}]
        if name in ("nanvar", "nanstd"):
            kwargs.append({"axis": axis, "ddof": 1})
        for kw in kwargs:
            _check(_calling(function, **kw), x, exact=arg or name in ("nanmax", "nanmin"))


@pytest.mark.parametrize("name", ["nanargmax", "nanargmin"])
def test_nanargmax_of_an_all_nan_slice_is_minus_one_as_cupy(name: str) -> None:
    x = np.array([[np.nan, np.nan, np.nan], [np.nan, 2.0, -np.inf], [1.0, np.nan, 1.0]], dtype=np.float32)
    out = fusec.fuse(lambda a: getattr(np, name)(a, axis=1))(x)
    rows = [getattr(np, name)(r) for r in x[1:]]
    assert out.dtype == np.int64 and out.tolist() == [-1, *rows]
    assert int(fusec.fuse(lambda a: getattr(np, name)(a))(np.full(4, np.nan))) == -1


def test_nanmean_dtype_argument_and_all_nan_slices_match_numpy() -> None:
    x = _data("nanmean dtype", (5, 6), np.dtype(np.float16))
    x[1] = np.nan
    _check(lambda a: np.nanmean(a, axis=1), x)
    _check(lambda a: np.nanmean(a, axis=1, dtype=np.float64), x)
    _check(lambda a: np.nanvar(a, axis=1, dtype=np.float64, ddof=5), x)


# --- arrays of one value, norms, closeness ------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dt", [np.dtype(np.float16), np.dtype(np.int32), np.dtype(np.bool_)], ids=str)
def test_like_functions_match_numpy(dt: np.dtype, shape: tuple[int, ...]) -> None:
    x = _data("like", shape, dt)
    _check(lambda a: np.zeros_like(a), x, exact=True)
    _check(lambda a: np.ones_like(a, dtype=np.float32), x, exact=True)
    _check(lambda a: np.full_like(a, 2.7), x, exact=True)  # cast unsafely: 2 for integers
    _check(lambda a: np.full_like(a, -1, dtype=np.int8), x, exact=True)
    _check(lambda a: np.full_like(a, np.float32(np.nan), dtype=np.float64), x, exact=True)
    _check(lambda a: a + np.ones_like(a), x, exact=True)
    _check(lambda a: np.zeros_like(a, shape=(2, 5)), x, exact=True)
    _check(lambda a: np.full_like(a, a.sum()), x, exact=True)  # a traced fill value


def test_full_like_out_of_range_python_int_is_numpys_overflow_error() -> None:
    _check(lambda a: np.full_like(a, 300), np.zeros(3, np.int8))


@pytest.mark.parametrize("dt", FLOATS + [np.dtype(np.int32), np.dtype(np.bool_)], ids=str)
@pytest.mark.parametrize("ord_", [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1])
def test_vector_norm_along_an_axis_matches_numpy(ord_: Any, dt: np.dtype) -> None:
    for shape in [(2, 3, 4), (1029,), (3, 0)]:
        x = _data("norm", shape, dt, special_values=ord_ is None)
        for axis in list(range(len(shape))) + [-1]:
            for keepdims in (False, True):
                _check(_calling(np.linalg.norm, ord=ord_, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("ord_", [None, "fro", 1, -1, np.inf, -np.inf])
def test_matrix_and_whole_array_norms_match_numpy(ord_: Any) -> None:
    x = _data("matrix norm", (3, 4, 5), np.dtype(np.float32), special_values=False)
    for axis in [(0, 1), (2, 0), (-1, -2)]:
        for keepdims in (False, True):
            _check(_calling(np.linalg.norm, ord=ord_, axis=axis, keepdims=keepdims), x)
    _check(_calling(np.linalg.norm, ord=ord_), x[0])
    _check(lambda a: np.linalg.norm(a), x)
    _check(lambda a: np.linalg.norm(a, keepdims=True), x)


def test_matrix_two_norm_is_an_unsupported_error_with_a_hint() -> None:
    with pytest.raises(fusec.UnsupportedError, match="singular values"):
        fusec.fuse(lambda a: np.linalg.norm(a, 2, axis=(0, 1)))(np.ones((3, 3)))


def _closeness(function: Callable[..., Any], kwargs: dict[str, Any]) -> Callable[[Any, Any], Any]:
    return lambda a, b: function(a, b, **kwargs)


@pytest.mark.parametrize("dt", FLOATS + [np.dtype(np.int32), np.dtype(np.uint8)], ids=str)
def test_isclose_matches_numpy(dt: np.dtype) -> None:
    x = _data("isclose", (2, 3, 4), dt)
    y = (x + np.asarray(1e-6, dtype=x.dtype) if dt.kind == "f" else x).astype(dt)
    y.reshape(-1)[::5] = _data("isclose y", (y.size,), dt).reshape(-1)[::5]
    for kwargs in ({}, {"equal_nan": True}, {"rtol": 1e-3, "atol": 0.0}, {"atol": 1}):
        _check(_closeness(np.isclose, kwargs), x, y)
        _check(_calling(np.isclose, b=1, **kwargs), x)
        _check(_calling(lambda a, **kw: np.isclose(0.5, a, **kw), **kwargs), x)
    _check(lambda a, b: np.allclose(a, b), x, x.copy())
    _check(lambda a, b: np.allclose(a, b, equal_nan=True), x, x.copy())


# --- names: NumPy, CuPy, scipy.special, cupyx.scipy.special ---------------------------------------
CUPY_CASES: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("erf", cupyx_special.erf, scipy.special.erf),
    ("erfc", cupyx_special.erfc, scipy.special.erfc),
    ("expit", cupyx_special.expit, scipy.special.expit),
    ("logaddexp", lambda a: cupy.logaddexp(a, 0.5), lambda a: np.logaddexp(a, 0.5)),
    ("logsumexp", lambda a: cupyx_special.logsumexp(a, axis=1), lambda a: scipy.special.logsumexp(a, axis=1)),
    ("softmax", lambda a: cupyx_special.softmax(a, axis=1), lambda a: scipy.special.softmax(a, axis=1)),
    ("log_softmax", lambda a: cupyx_special.log_softmax(a, axis=1), lambda a: scipy.special.log_softmax(a, axis=1)),
    ("count_nonzero", lambda a: cupy.count_nonzero(a, axis=1), lambda a: np.count_nonzero(a, axis=1)),
    ("nanmean", lambda a: cupy.nanmean(a, axis=0), lambda a: np.nanmean(a, axis=0)),
    ("nanstd", lambda a: cupy.nanstd(a, axis=0), lambda a: np.nanstd(a, axis=0)),
    ("nanargmax", lambda a: cupy.nanargmax(a, axis=1), lambda a: np.nanargmax(a, axis=1)),
    ("ptp", lambda a: cupy.ptp(a, axis=1), lambda a: np.ptp(a, axis=1)),
    ("around", lambda a: cupy.around(a, 1), lambda a: np.around(a, 1)),
    ("round", lambda a: cupy.round(a), lambda a: np.round(a)),
    ("zeros_like", cupy.zeros_like, np.zeros_like),
    ("full_like", lambda a: cupy.full_like(a, 3), lambda a: np.full_like(a, 3)),
    ("norm", lambda a: cupy.linalg.norm(a, axis=1), lambda a: np.linalg.norm(a, axis=1)),
    ("isclose", lambda a: cupy.isclose(a, 1.0), lambda a: np.isclose(a, 1.0)),
]


@pytest.mark.parametrize("case", CUPY_CASES, ids=lambda c: c[0])
def test_cupy_names_trace_to_numpy_semantics(case: tuple[str, Any, Any]) -> None:
    """Looked up while tracing, as user code does; the graph run by NumPy is NumPy's (SciPy's) result."""
    _, cupy_fn, numpy_fn = case
    x = _data("cupy names", (6, 9), np.dtype(np.float32))
    x[:, 0] = 1.0  # no all-NaN row (nanargmax)
    graph = fusec.fuse(lambda a: cupy_fn(a)).trace(fusec.ArraySpec(x.shape, x.dtype))
    (actual,) = _numpy(interpret, graph, [x])
    expected = np.asarray(_numpy(numpy_fn, x))
    rtol, atol = TOLERANCE[np.dtype(np.float32)]
    assert_matches_numpy(actual, expected, rtol=rtol, atol=atol)


def test_scipy_special_imported_by_name_traces() -> None:
    """``from scipy.special import softmax`` binds SciPy's function before fusec sees it."""
    from scipy.special import log_softmax, logsumexp, softmax

    x = _data("from import", (5, 7), np.dtype(np.float64))
    _check(lambda a: softmax(a, axis=1) + log_softmax(a, axis=0) + logsumexp(a, axis=1, keepdims=True), x)
    assert softmax is scipy.special.softmax  # restored after tracing


# --- IR text, fusion, CUDA ------------------------------------------------------------------------
WORKLOADS: dict[str, Callable[[Any], Any]] = {
    "gelu_erf": lambda a: 0.5 * a * (1 + scipy.special.erf(a * np.float32(0.7071067811865476))),
    "erfc": lambda a: scipy.special.erfc(a),
    "erf_f64": lambda a: scipy.special.erf(a.astype(np.float64)),
    "logsumexp": lambda a: scipy.special.logsumexp(a, axis=1),
    "softmax": lambda a: scipy.special.softmax(a, axis=-1),
    "log_softmax": lambda a: scipy.special.log_softmax(a, axis=1),
    "logaddexp": lambda a: np.logaddexp(a, a * 2),
    "expit": lambda a: scipy.special.expit(a),
    "count_nonzero": lambda a: np.count_nonzero(a, axis=1),
    "nanmean": lambda a: np.nanmean(a, axis=1),
    "nanvar": lambda a: np.nanvar(a, axis=0),
    "nanargmax": lambda a: np.nanargmax(a, axis=1),
    "ptp": lambda a: np.ptp(a, axis=1),
    "round": lambda a: np.round(a, 2),
    "norm": lambda a: np.linalg.norm(a, axis=-1, keepdims=True),
    "isclose": lambda a: np.isclose(a, a * 2),
    "ones_like": lambda a: np.ones_like(a) - a,
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_everyday_op_graph_text_round_trips(name: str) -> None:
    graph = fusec.fuse(WORKLOADS[name]).trace(fusec.ArraySpec((33, 65), "float16"))
    text = print_graph(graph)
    again = parse(text)
    assert print_graph(again) == text
    x = _data("round trip", (33, 65), np.dtype(np.float16))
    for got, want in zip(_numpy(interpret, again, [x]), _numpy(interpret, graph, [x])):
        assert_matches_numpy(got, want, exact=True)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_everyday_op_fuses_into_one_kernel(name: str) -> None:
    plan = fusec.fuse(WORKLOADS[name]).plan(fusec.ArraySpec((4096, 1000), "float32"))
    assert len(plan.kernels) == 1, [k.name for k in plan.kernels]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_everyday_op_cuda_source_compiles_with_nvrtc(name: str, dtype: str) -> None:
    source = fusec.fuse(WORKLOADS[name]).cuda_source(fusec.ArraySpec((1029, 917), dtype), full=True)
    uses_erf = "fc::erf" in source
    assert ("FUSEC_SPECIAL_CUH" in source) == uses_erf  # the special header only where a kernel calls it
    assert uses_erf == name.startswith(("gelu_erf", "erf"))
    result = nvrtc.compile_cubin(source, arch="sm_90")
    assert result.cubin[:4] == b"\x7fELF" and len(result.kernels) == 1
