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

import numpy as np
import pytest

# (rtol, atol) of elementwise float results, from CORRECTNESS.md
TOLERANCES: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float16): (1e-3, 1e-5),
    np.dtype(np.float32): (1.3e-6, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-7),
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
    assert e.dtype.kind == "f", f"unexpected dtype {e.dtype}"
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


def assert_reduction_matches_numpy(actual: Any, expected: Any, reference: Any, *, rtol: float | None = None,
                                   atol: float | None = None) -> None:
    """A float reduction's ``actual`` against NumPy's ``expected``: as :func:`assert_matches_numpy`, except that a
    finite value outside the tolerance also passes where its error against the float64 ``reference`` is at most
    twice NumPy's own (``shared/CORRECTNESS.md``'s rule for reductions, Inductor's): NumPy sums float16 in
    float16 and strided axes in order, fusec accumulates float16 in float32 and in a tree."""
    a, e = np.asarray(actual), np.asarray(expected)
    r = np.asarray(reference, dtype=np.float64)
    try:
        assert_matches_numpy(a, e, rtol=rtol, atol=atol)
        return
    except AssertionError:
        if a.dtype != e.dtype or a.shape != e.shape or e.dtype.kind != "f":
            raise
    finite = np.isfinite(e) & np.isfinite(r)
    assert_matches_numpy(np.where(finite, e, a), e, exact=True)  # NaN and infinities exactly where NumPy has them
    default_rtol, default_atol = TOLERANCES[e.dtype]
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(all="ignore"):
        close = np.abs(a64 - e64) <= atol + rtol * np.abs(e64)
        no_worse = np.abs(a64 - r) <= 2 * np.abs(e64 - r) + atol + rtol * np.abs(r)
    bad = finite & ~(close | no_worse)
    assert not bad.any(), "further from the float64 result than twice NumPy's error: " + _first_mismatch(bad, a, e)


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
# (one reason for every GPU test, conftest's too: the one the README quotes)
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
def assert_scan_matches_numpy(actual: Any, expected: Any, x: Any, *, product: bool = False, depth: int) -> None:
    """A float scan's ``actual`` (cumsum, or cumprod with ``product``, of ``x`` along the last axis) against
    NumPy's ``expected``: NaN and infinities where NumPy has them, and each finite value within NumPy's tolerance,
    or no further from the float64 scan than twice NumPy's error (:func:`assert_reduction_matches_numpy`), or within
    the error bound of ``depth`` rounded operations on its path (each adds at most one unit roundoff of the
    accumulator times the sum of the magnitudes folded in, or for a product times its magnitude; shared/
    CORRECTNESS.md's reduction bound), plus the final rounding to the result's dtype."""
    a, e = np.asarray(actual), np.asarray(expected)
    x64 = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        reference = np.cumprod(x64, axis=-1) if product else np.cumsum(x64, axis=-1)
    try:
        assert_reduction_matches_numpy(a, e, reference)
        return
    except AssertionError:
        if a.dtype != e.dtype or a.shape != e.shape or e.dtype.kind != "f":
            raise
    finite = np.isfinite(e) & np.isfinite(reference)
    assert_matches_numpy(np.where(finite, e, a), e, exact=True)
    unit = 2.0 ** -53 if e.dtype == np.float64 else 2.0 ** -24  # float16 accumulates in float32
    with np.errstate(all="ignore"):
        scale = np.abs(reference) if product else np.cumsum(np.abs(x64), axis=-1)
        bound = 2 * unit * depth * scale + np.abs(reference) * float(np.finfo(e.dtype).eps) + 1e-30
        bad = finite & ~(np.abs(a.astype(np.float64) - reference) <= bound)
    assert not bad.any(), f"beyond {depth} roundings from the float64 scan: " + _first_mismatch(bad, a, e)


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
