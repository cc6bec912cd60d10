"""The dtypes fusec supports, their short names in IR text, and NumPy 2's promotion rules.

Promotion is NumPy's own (NEP 50: Python scalars are weak, NumPy scalars and arrays strong): the
tracer asks ``ufunc.resolve_dtypes`` and ``np.result_type`` rather than keeping a table of ours.

bfloat16 is ``ml_dtypes.bfloat16`` as a NumPy dtype (NumPy has none). Importing ``ml_dtypes`` registers its
casts, its ufunc loops and its promotion rules with NumPy, so the same questions answer for it too
(docs/ops.md, "bfloat16", states the rules). Its ``dtype.kind`` is ``'V'``: ask :func:`kind` instead.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from fusec.support.errors import FusecOverflowError, FusecTypeError, FusecValueError

SHORT_NAMES: dict[np.dtype, str] = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(ml_dtypes.bfloat16): "bf16",
}
FROM_SHORT: dict[str, np.dtype] = {v: k for k, v in SHORT_NAMES.items()}
SUPPORTED: tuple[np.dtype, ...] = tuple(SHORT_NAMES)

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
UINT64 = np.dtype(np.uint64)
FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
NARROW_FLOATS = (FLOAT16, BFLOAT16)  # stored in 16 bits, computed in float32 and rounded once


def as_dtype(spec: object) -> np.dtype:
    """A supported ``np.dtype`` from anything NumPy accepts as a dtype, meaning what NumPy says it means:
    ``"i8"`` is int64 and ``"u8"`` uint64 here, as in ``a.astype("i8")``. fusec's short names (``f32``,
    ``i64``) are IR text's and the command line's: :func:`ir_dtype` reads those."""
    try:
        dt = np.dtype(spec)  # type: ignore[call-overload]
    except TypeError as exc:
        hint = (f"{spec!r} is fusec's IR name of {FROM_SHORT[spec]}; NumPy spells it {str(FROM_SHORT[spec])!r}"
                if isinstance(spec, str) and spec in FROM_SHORT else None)
        raise FusecTypeError(f"{spec!r} is not a dtype", hint=hint) from exc
    if dt not in SHORT_NAMES:
        raise FusecTypeError(
            f"dtype {dt} is not supported by fusec",
            hint="supported: " + ", ".join(str(d) for d in SUPPORTED) + " (complex is not yet supported)",
        )
    return dt.newbyteorder("=") if dt.byteorder not in "=|" else dt


def ir_dtype(spec: object) -> np.dtype:
    """A dtype as IR text and the command line spell it: a short name (``f32``, ``i8`` = int8), else
    :func:`as_dtype` (an ``np.dtype``, a NumPy type, ``"float32"``)."""
    if isinstance(spec, str) and spec in FROM_SHORT:
        return FROM_SHORT[spec]
    return as_dtype(spec)


def node_dtype(spec: object) -> np.dtype:
    """The dtype a node is built with (:func:`fusec.ir.graph.make_node`): an ``np.dtype`` or anything NumPy reads as
    one (:func:`as_dtype`), never one of IR text's short names (``f32``, ``i8`` = int8), which NumPy would read
    otherwise or not at all: the text parser and the command line turn those into dtypes (:func:`ir_dtype`)."""
    if isinstance(spec, str) and spec in FROM_SHORT and spec != str(FROM_SHORT[spec]):
        raise FusecTypeError(f"{spec!r} is IR text's short name of {FROM_SHORT[spec]}, not a dtype",
                             hint=f"pass np.dtype({str(FROM_SHORT[spec])!r}), or read IR names with dtypes.ir_dtype")
    return as_dtype(spec)


def short(dt: np.dtype) -> str:
    """``float32`` -> ``f32``."""
    return SHORT_NAMES[np.dtype(dt)]


def kind(dt: np.dtype) -> str:
    """``dt.kind`` with bfloat16 as the float it is (``'f'``; ml_dtypes' dtype says ``'V'``)."""
    return "f" if dt == BFLOAT16 else dt.kind


def is_bool(dt: np.dtype) -> bool:
    return dt.kind == "b"


def is_float(dt: np.dtype) -> bool:
    return kind(dt) == "f"


def is_narrow_float(dt: np.dtype) -> bool:
    """float16 or bfloat16: computed in float32 and rounded once to the dtype."""
    return dt in NARROW_FLOATS


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype a value of ``dt`` is computed and accumulated in: float32 for float16 and bfloat16, else ``dt``."""
    return FLOAT32 if dt in NARROW_FLOATS else dt


def sum_dtype(dt: np.dtype) -> np.dtype:
    """NumPy's default accumulator of ``sum``/``prod``: small ints to int64, small uints to uint64."""
    if dt.kind == "b" or (dt.kind == "i" and dt.itemsize < 8):
        return INT64
    if dt.kind == "u" and dt.itemsize < 8:
        return UINT64
    return dt


def mean_dtype(dt: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(accumulator, result) of NumPy's ``mean``/``var``: ints to float64; float16 via float32, and bfloat16
    too (ml_dtypes' own loops would sum in bfloat16, rounding at every step)."""
    if dt.kind in "biu":
        return FLOAT64, FLOAT64
    if dt in NARROW_FLOATS:
        return FLOAT32, dt
    return dt, dt


def scalar_constant(value: object, dt: np.dtype) -> object:
    """``value`` (a bool or a number) converted to a Python scalar of ``dt``, raising OverflowError as NumPy 2
    does; NaN or an infinity for an integer or bool dtype is an error."""
    if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        raise FusecTypeError(f"a constant is a number or a bool, not {value!r}")
    if dt.kind in "biu" and isinstance(value, (float, np.floating)) and not np.isfinite(value):
        raise FusecValueError(f"{value!r} is not a value of {dt}",
                              hint="NaN and infinities exist only in float dtypes")
    try:
        arr = np.asarray(value, dtype=dt)
    except OverflowError as exc:
        raise FusecOverflowError(
            f"Python integer {value} does not fit {dt}",
            hint=f"use a value inside {dt}'s range, or cast the array first (x.astype(...))",
        ) from exc
    return arr.item()


def fits(value: int, dt: np.dtype) -> bool:
    """Whether the Python int ``value`` is representable in the integer or float dtype ``dt``."""
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return info.min <= value <= info.max
    return True
