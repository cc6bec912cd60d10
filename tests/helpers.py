"""Test data and comparisons shared by the tests: random arrays with special values, and a compare
that applies CORRECTNESS.md's tolerances (values, dtype and shape; NaN positions and the sign of
infinities exact).

    rng = np.random.default_rng(seed)
    x = random_array(rng, (2, 3, 4), np.float32)     # NaN, +-inf, -0.0, 0 mixed in
    assert_matches_numpy(fused(x), reference(x))      # tolerant for floats
    assert_matches_numpy(fused(x), reference(x), exact=True)
"""

from __future__ import annotations

import zlib
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from fusec.ir.dtypes import BFLOAT16, kind

# (rtol, atol) of elementwise float results, from CORRECTNESS.md. bfloat16 has none there: like float16 (whose
# 1e-3 is one ULP, 2^-10) it is computed in float32 and rounded once, so a result is at most one bfloat16 ULP
# (2^-7 relative) from NumPy's (ml_dtypes') when the two float32 values straddle a rounding boundary; atol as
# float32's, the precision it is computed in.
TOLERANCES: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float16): (1e-3, 1e-5),
    np.dtype(np.float32): (1.3e-6, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-7),
    BFLOAT16: (2.0**-7, 1e-5),
}

SPECIAL_FLOATS = (np.nan, np.inf, -np.inf, -0.0, 0.0)


def seed_of(*parts: Any) -> int:
    """A deterministic seed from a test's parameters (``hash`` of str is salted per process)."""
    return zlib.crc32(repr(parts).encode())


def special_values(dtype: Any) -> np.ndarray:
    """The boundary values of ``dtype`` that tests mix into random data."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        values = [0, 1, info.min, info.max, info.max - 1]
        if dt.kind == "i":
            values += [-1, info.min + 1]
        return np.array(values, dtype=dt)
    return np.array(SPECIAL_FLOATS, dtype=dt)


def random_array(rng: np.random.Generator, shape: Any, dtype: Any, special: bool = True) -> np.ndarray:
    """Fresh random data of ``shape`` and ``dtype``; with ``special``, NaN, +-inf, -0.0 and zeros
    (floats) or 0, +-1 and ``iinfo`` min/max (integers) are mixed in at random positions, each at
    least once when the array is large enough. Integers are mostly small, some over the full range."""
    dt = np.dtype(dtype)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if dt.kind == "b":
        data = np.asarray(rng.random(shape) < 0.5)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        small = rng.integers(max(info.min, -20), min(info.max, 20), size=shape, endpoint=True).astype(dt)
        wide = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
        data = np.where(rng.random(shape) < 0.75, small, wide).astype(dt)
    else:
        scale = np.where(rng.random(shape) < 0.8, 3.0, 300.0)
        data = np.asarray(rng.standard_normal(shape) * scale).astype(dt)
        data = np.where(data == 0, dt.type(0.5), data).astype(dt)  # zeros come from the specials only
    data = np.array(data, dtype=dt).reshape(shape)
    if special and data.size:
        values = special_values(dt)
        flat = data.reshape(-1)
        mask = rng.random(flat.size) < 0.2
        flat[mask] = rng.choice(values, size=int(mask.sum()))
        if flat.size >= 2 * len(values):  # each special value at least once
            positions = rng.choice(flat.size, size=len(values), replace=False)
            flat[positions] = values
        data = flat.reshape(shape)
    return data


def _first_mismatch(bad: np.ndarray, actual: np.ndarray, expected: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return (
        f"{int(bad.sum())} of {bad.size} elements differ; first at {index}: "
        f"got {actual[index]!r}, expected {expected[index]!r}"
    )


def assert_matches_numpy(
    actual: Any,
    expected: Any,
    dtype: Any = None,
    *,
    exact: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """``actual`` equals NumPy's ``expected`` in dtype, shape and values.

    Bool and integer results are compared exactly. Floats: NaN positions and the sign of
    infinities exactly; finite values within the tolerance of ``dtype`` (the dtype the result was
    computed in; default the expected dtype), or bit for bit (-0.0 is not 0.0) when ``exact``.
    A 0-d array matches a NumPy scalar of the same dtype.
    """
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype, f"dtype {a.dtype}, expected {e.dtype}"
    assert a.shape == e.shape, f"shape {a.shape}, expected {e.shape}"
    if e.dtype.kind in "biu":
        bad = a != e
        assert not bad.any(), _first_mismatch(bad, a, e)
        return
    assert kind(e.dtype) == "f", f"unexpected dtype {e.dtype}"
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    bad = nan_a != nan_e
    assert not bad.any(), "NaN positions differ: " + _first_mismatch(bad, a, e)
    inf_a, inf_e = np.isinf(a), np.isinf(e)
    bad = (inf_a != inf_e) | (inf_e & (np.signbit(a) != np.signbit(e)))
    assert not bad.any(), "infinities differ: " + _first_mismatch(bad, a, e)
    finite = ~(nan_e | inf_e)
    if exact:
        bad = finite & ((a != e) | (np.signbit(a) != np.signbit(e)))
        assert not bad.any(), _first_mismatch(bad, a, e)
        return
    default_rtol, default_atol = TOLERANCES[np.dtype(dtype) if dtype is not None else e.dtype]
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(all="ignore"):
        bad = finite & ~(np.abs(a64 - e64) <= atol + rtol * np.abs(e64))
    assert not bad.any(), f"(rtol={rtol}, atol={atol}) " + _first_mismatch(bad, a, e)


def assert_same_bits(actual: Any, expected: Any) -> None:
    """``actual`` is ``expected`` bit for bit (-0.0 is not 0.0), except that a NaN matches any NaN: IEEE 754 leaves
    the sign and payload of the NaN an invalid operation makes to the machine (x86 makes -nan of inf - inf, and
    NumPy on x86 keeps it through float16; ARM makes +nan; a CUDA GPU makes its canonical +nan, 0x7fff in float16),
    so NumPy's NaN bits are its host's, not NumPy's semantics. NaN positions match exactly."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
    if kind(e.dtype) in "fc":
        nan_a, nan_e = np.isnan(a), np.isnan(e)
        bad = nan_a != nan_e
        assert not bad.any(), "NaN positions differ: " + _first_mismatch(bad, a, e)
        a, e = np.where(nan_e, 0, a).astype(e.dtype), np.where(nan_e, 0, e).astype(e.dtype)
    width = np.dtype(f"u{e.dtype.itemsize}") if e.dtype.itemsize in (1, 2, 4, 8) else np.dtype(np.uint8)
    bad = a.view(width) != e.view(width)
    assert not bad.any(), "bits differ: " + _first_mismatch(bad, a, e)


def assert_reduction_matches_numpy(actual: Any, expected: Any, reference: Any, *, bound: Any = None,
                                   unrounded: Any = None, float64: Any = None, rtol: float | None = None,
                                   atol: float | None = None) -> None:
    """A float result that fusec accumulates in an order of its own (a sum, product or scan, and what follows from
    it) against NumPy's ``expected`` and the ``reference`` (:mod:`tests.reference`: NumPy with every float
    accumulation exact and rounded once where NumPy rounds; where a test has none, its float64 evaluation).

    NaN and infinities as the reference's, exactly (or NumPy's own value): NumPy's float16 sums overflow or
    stagnate along a strided axis and in scans where the exact value does not (fusec accumulates in float32), so
    NumPy's are the reference's only where its accumulation rounds no differently. Where the reference before its
    final rounding (``unrounded``, else the reference) is within ``bound`` of the threshold where the dtype's
    rounding overflows, either side passes. A finite value passes where it is within the dtype's tolerance of NumPy
    (``rtol``, ``atol``), or no further from ``fn``'s float64 evaluation (``float64``, else the reference) than
    twice NumPy's own error (Inductor's rule), or within ``bound`` of the reference (the order's error bound:
    :meth:`tests.reference.Result.bound`, ``shared/CORRECTNESS.md``'s reduction rule)."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype, f"dtype {a.dtype}, expected {e.dtype}"
    assert a.shape == e.shape, f"shape {a.shape}, expected {e.shape}"
    if kind(e.dtype) != "f":
        assert_matches_numpy(a, e, exact=True)
        return
    with np.errstate(all="ignore"):
        r = np.asarray(reference).astype(e.dtype).astype(np.float64)  # the reference as the result's dtype holds it
        b = np.zeros(a.shape) if bound is None else np.broadcast_to(np.asarray(bound, dtype=np.float64), a.shape)
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        info = ml_dtypes.finfo(e.dtype)
        overflow = float(info.max) + 2.0 ** (info.maxexp - info.nmant - 2)  # rounds to inf from here on
        w = np.abs(np.asarray(unrounded if unrounded is not None else r, dtype=np.float64))
        # within the bound of the overflow threshold, finite and infinite both pass (with the reference's sign)
        at_threshold = (w - b < overflow) & (w + b >= overflow)
        at_threshold &= (np.isinf(a64) | np.isinf(r)) & ~np.isnan(a64) & ~np.isnan(r) & (np.sign(a64) == np.sign(r))
    numpys = (a64 == e64) | (np.isnan(a64) & np.isnan(e64))  # NumPy's own value passes too
    bad = (np.isnan(a64) != np.isnan(r)) & ~numpys
    assert not bad.any(), "NaN positions differ from the exactly accumulated reference: " + _first_mismatch(bad, a, e)
    bad = ((np.isinf(a64) != np.isinf(r)) | (np.isinf(r) & (np.signbit(a64) != np.signbit(r)))) & ~at_threshold
    bad &= ~numpys
    assert not bad.any(), "infinities differ from the exactly accumulated reference: " + _first_mismatch(bad, a, e)
    default_rtol, default_atol = TOLERANCES[e.dtype]
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    with np.errstate(all="ignore"):
        finite = np.isfinite(a64) & np.isfinite(r)
        close = np.isfinite(e64) & (np.abs(a64 - e64) <= atol + rtol * np.abs(e64))
        r64 = r if float64 is None else np.asarray(float64, dtype=np.float64)
        no_worse = np.isfinite(e64) & (np.abs(a64 - r64) <= 2 * np.abs(e64 - r64) + atol + rtol * np.abs(r64))
        bounded = np.abs(a64 - r) <= b
    bad = finite & ~(close | no_worse | bounded)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
        raise AssertionError("further from the exactly accumulated reference than twice NumPy's error and than the "
                             f"accumulation's error bound: {_first_mismatch(bad, a, e)} (reference {r[first]!r}, "
                             f"bound {b[first]!r})")


def gemm_bound(a: Any, b: Any, dtype: Any) -> np.ndarray:
    """The error bound of ``a @ b`` (NumPy's matmul broadcasting) computed with float32 accumulation (float64 for a
    float64 result) and rounded once to ``dtype``, against the exact product: ``K u sum|a||b|`` for the K products and
    K - 1 additions of each element in any order (Higham's gamma_K, u the accumulator's unit roundoff, 2^-24 or
    2^-53), plus one rounding of the result (its dtype's unit roundoff times the exact value's size) and, for
    float16, the rounding of the accumulator's value to it. ``shared/CORRECTNESS.md``'s GEMM rule."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    k = a64.shape[-1]
    u_acc = 2.0 ** -53 if np.dtype(dtype) == np.float64 else 2.0 ** -24
    u_out = ml_dtypes.finfo(np.dtype(dtype)).eps / 2
    magnitude = np.matmul(np.abs(a64), np.abs(b64))
    return 1.01 * k * u_acc * magnitude + u_out * (np.abs(np.matmul(a64, b64)) + k * u_acc * magnitude)


def assert_gemm_matches(actual: Any, a: Any, b: Any) -> None:
    """``actual`` is ``a @ b`` as a GEMM computes it: integers exactly as NumPy's matmul (wrapping), floats within
    :func:`gemm_bound` of the float64 product (its dtype NumPy's result type; finite inputs)."""
    want = np.matmul(a, b)
    got = np.asarray(actual)
    assert got.dtype == want.dtype, f"dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        assert_matches_numpy(got, want, exact=True)
        return
    exact = np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
    bound = gemm_bound(a, b, want.dtype)
    err = np.abs(got.astype(np.float64) - exact)
    bad = ~(err <= bound)
    if bad.any():
        first = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"further from the float64 product than the GEMM bound: {_first_mismatch(bad, got, want)} "
                             f"(exact {exact[first]!r}, bound {bound[first]!r})")


def assert_result_matches_numpy(actual: Any, result: Any, *, depth: int | None = None, rtol: float | None = None,
                                atol: float | None = None, exact: bool = False) -> None:
    """``actual`` against one :class:`tests.reference.Result` of :func:`tests.reference.expect`: bool and integer
    results exactly as NumPy's, float results by :func:`assert_reduction_matches_numpy` with the result's bound
    (``depth``: the additions on the longest path of the kernel's accumulation, where the test knows it). With
    ``exact``, the elements that depend on no accumulation (fusec rounds every step there as NumPy does) equal
    NumPy's bit for bit."""
    if kind(result.numpy.dtype) != "f":
        assert_matches_numpy(actual, result.numpy, exact=True)
        return
    a = np.asarray(actual)
    if exact and result.dependent is not None:
        assert a.dtype == result.numpy.dtype and a.shape == result.numpy.shape, (a.dtype, a.shape)
        keep = ~result.dependent
        assert_matches_numpy(a[keep], result.numpy[keep], exact=True)
    elif exact:
        assert_matches_numpy(a, result.numpy, exact=True)
        return
    assert_reduction_matches_numpy(a, result.numpy, result.reference, bound=result.bound(depth),
                                   unrounded=result.unrounded, float64=result.float64, rtol=rtol, atol=atol)


def assert_function_matches_numpy(actual: Any, fn: Any, *args: Any, rtol: float | None = None,
                                  atol: float | None = None) -> Any:
    """Each result of a fused ``fn`` (``actual``: one array, or a sequence of them) against NumPy's ``fn(*args)``
    by :func:`assert_result_matches_numpy`: exact for bool and integer results; for floats, NumPy's tolerance
    (``rtol``, ``atol``), or within the error bound of accumulating in another order, from NumPy with its
    accumulations exact (:func:`tests.reference.expect`). Returns the expectation (its arguments after the call
    for the tests of functions that write them)."""
    from tests.reference import expect

    expectation = expect(fn, *args)
    got = list(actual) if isinstance(actual, (tuple, list)) else [] if actual is None else [actual]
    assert len(got) == len(expectation.outputs), f"{len(got)} results, NumPy has {len(expectation.outputs)}"
    for i, (g, result) in enumerate(zip(got, expectation.outputs)):
        try:
            assert_result_matches_numpy(np.asarray(g), result, rtol=rtol, atol=atol)
        except AssertionError as exc:
            raise AssertionError(f"result {i}: {exc}") from None
    return expectation


def assert_scan_matches_numpy(actual: Any, fn: Any, *args: Any, depth: int) -> None:
    """A float scan (``fn(*args)``'s only result: cumsum, cumprod or nancumsum along an axis, and elementwise steps
    before and after it) against NumPy: :func:`assert_result_matches_numpy` with the bound of ``depth`` rounded
    operations on the longest path to a prefix (the kernel's schedule gives it: a thread's elements, the tree over
    the row's threads, the carry over the chunks before), each adding at most one unit roundoff of the accumulator
    (float32 for float16) times the magnitudes folded (for a product, times its magnitude)."""
    from tests.reference import expect

    (result,) = expect(fn, *args).outputs
    assert_result_matches_numpy(actual, result, depth=depth)


def numpy_error_class(exc: BaseException) -> type[BaseException]:
    """The public class of a NumPy exception: a builtin or one of ``numpy.exceptions``
    (``_UFuncNoLoopError`` -> ``TypeError``, ``AxisError`` -> ``AxisError``)."""
    for cls in type(exc).__mro__:
        if cls.__module__ in ("builtins", "numpy.exceptions"):
            return cls
    return Exception


def gpu_count() -> int:
    """CUDA GPUs CuPy sees (0 without CuPy, a driver or a device)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


# pytestmark of every GPU test module: selected by ``-m gpu``, skipped with the reason where there is no GPU
# (one reason for every GPU test, conftest's too: the one docs/tests.md quotes)
GPU_SKIP_REASON = "no CUDA GPU: run `pytest -m gpu` on a machine with one"
GPU_ONLY = [pytest.mark.gpu, pytest.mark.skipif(gpu_count() == 0, reason=GPU_SKIP_REASON)]


def gather_index_extents(graph: Any) -> dict[Any, int]:
    """Each graph input a gather reads as indices (directly or through layout ops): the smallest extent of
    the axes it indexes, so random indices can be drawn in range."""
    out: dict[Any, int] = {}
    for g in graph.nodes:
        if g.op != "gather":
            continue
        for a, idx in zip(g.attr("axes"), g.operands[1:]):
            while idx.op in ("expand_dims", "squeeze", "transpose", "broadcast_to", "slice"):
                idx = idx.operands[0]
            if idx.op == "input":
                out[idx] = min(out.get(idx, g.operands[0].shape[a]), g.operands[0].shape[a])
    return out


def random_arguments(rng: np.random.Generator, graph: Any) -> list[np.ndarray]:
    """:func:`random_array` for each input of ``graph``; gather indices in range (negative ones included)."""
    extents = gather_index_extents(graph)
    args = []
    for n in graph.inputs:
        if n in extents and extents[n] > 0:
            low = 0 if n.dtype.kind == "u" else -extents[n]
            args.append(rng.integers(low, extents[n], size=n.shape).astype(n.dtype))
        else:
            args.append(random_array(rng, n.shape, n.dtype))
    return args


def device_copy(x: np.ndarray) -> Any:
    """``x`` on the GPU (CuPy) with the same strides and offset into a copy of its whole base buffer, so a view
    (transposed, sliced, reversed) arrives as the same view of device memory."""
    import cupy

    base = x
    while base.base is not None:
        base = base.base
    dev = cupy.asarray(base)
    offset = x.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return cupy.ndarray(x.shape, x.dtype, dev.data + offset, x.strides)
