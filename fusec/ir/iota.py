"""``numpy.arange`` as NumPy computes it, for the ``iota`` op.

NumPy 2's ``arange(start, stop, step, dtype)`` (``PyArray_ArangeObj``):

- the dtype, when not given, is the promotion of ``intp`` with each bound's own dtype (``np.asarray(v).dtype``,
  so a Python float makes it float64 and ``np.float32`` bounds still give float64);
- the length is ``ceil((stop - start) / step)``, computed on the bounds as given (Python or NumPy scalars),
  at least 0; a zero step, a NaN length or one beyond ``intp`` is an error;
- element 0 is ``start`` and element 1 is ``start + step`` (both computed on the bounds as given, then stored
  into the dtype as item assignment stores them); every later element ``i`` is NumPy's ``fill``:
  ``start + i * (next - start)`` in the dtype's own arithmetic (``next - start`` rounded to the dtype, then
  ``i`` converted to the dtype, one multiply and one add, each rounded; float16 computes in float32 and rounds
  once; integers wrap as C's 64-bit arithmetic does). Booleans allow at most two elements.

An ``iota`` node keeps the dtype, ``count`` and the two stored values ``start`` and ``next``; :func:`values`
evaluates it with NumPy (the reference interpreter's rule) and the kernels compute the same formula with
round-to-nearest intrinsics (``fc::iota_float`` and friends), so the values are bit for bit NumPy's.
"""

from __future__ import annotations

import math
import operator
from functools import reduce
from typing import Any

import numpy as np

from fusec.ir import dtypes
from fusec.support.errors import FusecOverflowError, FusecTypeError, FusecValueError

INTP_MAX = float(np.iinfo(np.intp).max)


def result_dtype(start: Any, stop: Any, step: Any) -> np.dtype:
    """arange's dtype when none is given: ``intp`` promoted with each bound's own dtype."""
    found = [np.asarray(v).dtype for v in (start, stop, step)]
    return reduce(np.promote_types, found, np.dtype(np.intp))


def length(start: Any, stop: Any, step: Any) -> int:
    """The number of elements, as NumPy computes it (on the bounds as given)."""
    if step == 0:
        raise FusecValueError("arange: the step is zero (NumPy raises ZeroDivisionError)",
                              hint="give a nonzero step")
    value = float((stop - start) / step)
    if math.isnan(value):
        raise FusecValueError("arange: cannot compute length", hint="the bounds and the step must be finite")
    ceiled = math.ceil(value) if math.isfinite(value) else value
    if ceiled >= INTP_MAX or ceiled < -INTP_MAX:
        raise FusecValueError("arange: Maximum allowed size exceeded")
    return max(0, int(ceiled))


def first_values(start: Any, step: Any, count: int, dt: np.dtype) -> tuple[Any, Any]:
    """``(start, next)`` as Python scalars of ``dt``, stored as NumPy stores them (item assignment); ``next``
    is ``start`` when there is at most one element."""
    buf = np.zeros(2, dt)
    if count == 0:  # NumPy stores nothing (and checks nothing) for an empty range
        return buf[0].item(), buf[1].item()
    try:
        with np.errstate(all="ignore"):
            buf[0] = start
            if count > 1:
                buf[1] = start + step
    except OverflowError as exc:
        raise FusecOverflowError(f"arange: {exc}", hint=f"use bounds inside {dt}'s range") from exc
    if count <= 1:
        buf[1] = buf[0]
    return buf[0].item(), buf[1].item()


def resolve(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> tuple[np.dtype, int, Any, Any]:
    """``(dtype, count, start, next)`` of ``numpy.arange(start, stop, step, dtype)`` (concrete scalars)."""
    for v in (start, stop, step):
        if v is not None and not isinstance(v, (int, float, np.integer, np.floating, np.bool_)):
            raise FusecTypeError(f"arange takes numbers as bounds, not {type(v).__name__}",
                                 hint="an array's length is x.shape[k]; np.arange(n) needs a number n")
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    dt = np.dtype(dtype) if dtype is not None else result_dtype(start, stop, step)
    if dt not in dtypes.SHORT_NAMES:
        raise FusecTypeError(f"arange of dtype {dt} is not supported", hint="use a bool, integer or float dtype")
    count = length(start, stop, step)
    if dt == dtypes.BOOL and count > 2:
        raise FusecTypeError("arange() is only supported for booleans when the result has at most length 2.")
    b0, b1 = first_values(start, step, count, dt)
    return dt, count, b0, b1


def _compute_type(dt: np.dtype) -> type:
    return dtypes.compute_dtype(dt).type


def values(xp: Any, count: int, start: Any, nxt: Any, dt: np.dtype) -> Any:
    """The ``count`` values of an iota, computed in ``xp`` (NumPy or CuPy) as NumPy's ``fill`` computes them."""
    i = xp.arange(count, dtype=np.int64)
    if dtypes.kind(dt) == "f":
        ct = _compute_type(dt)
        b0 = ct(start)
        delta = ct(nxt) - b0
        out = (b0 + i.astype(ct) * delta).astype(dt)
    elif dt.kind in "iu":
        with np.errstate(all="ignore"):  # wraps in the dtype, as fill's `delta -= start`
            delta = operator.index(np.array(nxt, dt) - np.array(start, dt))
        b0 = np.uint64(operator.index(start) % 2**64)
        out = (b0 + i.astype(np.uint64) * np.uint64(delta % 2**64)).astype(dt)
    else:
        out = xp.asarray(np.array([start, nxt][:count], dtype=dt))
    if count > 0:
        out[0] = start
    if count > 1:
        out[1] = nxt
    return out


def delta(start: Any, nxt: Any, dt: np.dtype) -> Any:
    """``next - start`` as fill computes it: in the compute type (float32 for float16), wrapping for integers."""
    if dtypes.kind(dt) == "f":
        ct = _compute_type(dt)
        return (ct(nxt) - ct(start)).item()
    if dt.kind in "iu":
        with np.errstate(all="ignore"):
            return operator.index(np.array(nxt, dt) - np.array(start, dt))
    return 0
