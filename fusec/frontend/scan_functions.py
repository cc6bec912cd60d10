"""The cumulative functions traced into the scan ops: ``cumsum``, ``cumprod``, ``nancumsum``, ``nancumprod``
(NumPy's, CuPy's, and the ``x.cumsum(axis)``/``x.cumprod(axis)`` methods).

NumPy's rules: the result has the accumulator dtype of ``sum``/``prod`` (bool and small ints to int64, small
unsigned ints to uint64, floats their own) or ``dtype=``, which the operand is cast to first (the ``cast``
node before the op); ``axis=None`` scans the flattened array (traced where the flattening is a view fusec
traces: at most one axis of more than one element), and a 0-d operand gives a 1-element array; the ``nan``
forms replace NaN with the identity (0 or 1) first. The op itself keeps its operand's dtype and shape.
"""

from __future__ import annotations

from typing import Any

from fusec.frontend.hints import keyword_hint
from fusec.frontend.nodes import cast, const, new_node
from fusec.frontend.registry import implements
from fusec.frontend.tracer import Tracer, as_node, check_no_out
from fusec.frontend.view_functions import ravel
from fusec.ir import dtypes
from fusec.ir.infer import normalize_axes
from fusec.support.errors import FusecTypeError, UnsupportedError


def cumulative(name: str, a: Any, axis: Any = None, dtype: Any = None, out: Any = None, **unknown: Any) -> Tracer:
    """Trace ``np.<name>(a, axis, dtype)`` for ``cumsum``, ``cumprod``, ``nancumsum`` and ``nancumprod``."""
    if unknown:
        raise FusecTypeError(f"{name}() takes no keyword argument '{next(iter(unknown))}'",
                             hint=keyword_hint(unknown))
    check_no_out(name, out=out)
    x = as_node(a, name)
    op = "cumprod" if name.endswith("cumprod") else "cumsum"
    acc = dtypes.as_dtype(dtype) if dtype is not None else dtypes.sum_dtype(x.dtype)
    if acc.kind == "b":  # np.cumsum(b, dtype=bool) is logical_or.accumulate: not a scan fusec has
        raise UnsupportedError(f"{name} with dtype=bool is not supported", hint="use dtype=np.int64 (the default)")
    if name.startswith("nan") and dtypes.kind(x.dtype) == "f":  # NumPy's _replace_nan: NaN becomes the identity
        x = new_node("where", [new_node("isnan", [x]), const(1 if op == "cumprod" else 0, x.dtype), x])
    if axis is None:
        x = _flattened(name, x)
        axis = 0
    else:
        (axis,) = normalize_axes(axis, x.ndim, allow_tuple=False)
    x = cast(x, acc)
    return Tracer(new_node(op, [x], {"axis": axis}))


def _flattened(name: str, x: Any) -> Any:
    """``x`` as the 1-d array ``axis=None`` scans: ``x.ravel()`` (where axes merge, the reshapes pass reads that
    reshape back between kernels: a scan along a merged axis is no index arithmetic)."""
    if x.ndim == 1:
        return x
    if x.ndim == 0:
        return new_node("expand_dims", [x], {"axes": [0]})
    return ravel(Tracer(x)).node


@implements("cumsum")
def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, **kwargs: Any) -> Tracer:
    return cumulative("cumsum", a, axis, dtype, out, **kwargs)


@implements("cumprod")
def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, **kwargs: Any) -> Tracer:
    return cumulative("cumprod", a, axis, dtype, out, **kwargs)


@implements("nancumsum")
def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, **kwargs: Any) -> Tracer:
    return cumulative("nancumsum", a, axis, dtype, out, **kwargs)


@implements("nancumprod")
def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, **kwargs: Any) -> Tracer:
    return cumulative("nancumprod", a, axis, dtype, out, **kwargs)


# for docs/ops.md (fusec.frontend.ops_doc): the functions traced into the scan ops
DOCUMENTED = {"numpy": ("nancumsum", "nancumprod")}

__all__ = ["DOCUMENTED", "cumprod", "cumsum", "cumulative", "nancumprod", "nancumsum"]
