"""Everyday functions traced into the op table's primitives, the way :mod:`fusec.frontend.tracer` traces
``mean`` and ``var``: ``logaddexp``, ``expit``, ``logsumexp``, ``softmax``, ``count_nonzero``, the
``nan*`` statistics, ``ptp``, ``round``, ``*_like``, ``linalg.norm`` and ``isclose``.

Each follows the NumPy (or SciPy) implementation step by step, with the dtypes NumPy's ufunc loops
give, so results and dtypes are NumPy's (bit for bit where the steps are the same ufuncs; within
CORRECTNESS.md's transcendental tolerance where NumPy calls a C function of its own, as for
``logaddexp``). They become ordinary elementwise ops and reductions, so they fuse like any others:
``logsumexp`` over the last axis is one rows kernel. Where a NumPy result depends on data in a way a
kernel cannot raise (``nanargmax`` of an all-NaN slice raises ValueError in NumPy), the result is
CuPy's (-1) and docs/limitations.md says so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusec.frontend.nodes import cast, const, new_node, squeeze_axes
from fusec.frontend.registry import implements, implements_ufunc
from fusec.frontend.tracer import Tracer, WeakScalar, as_node, call_ufunc, operand, reduction, to_dtype, where
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.infer import normalize_axes, reduced_shape
from fusec.ir.special import scipy_float_dtype
from fusec.support.errors import FusecOverflowError, FusecTypeError, FusecValueError, UnsupportedError

_LN2 = math.log(2.0)
_LOG2E = 1.0 / _LN2


def _t(node: Node) -> Tracer:
    return Tracer(node)


_u = call_ufunc  # ufunc(*args) traced, nodes as tracers: short, for the steps below


def _no_extra(name: str, **kwargs: Any) -> None:
    for key, value in kwargs.items():
        if value is not None and value is not np._NoValue and value is not False:
            raise UnsupportedError(f"the {key}= argument of {name} is not supported inside a fused function")


def _shape_full(value: Any, dt: np.dtype, shape: tuple[int, ...]) -> Tracer:
    """``value`` (a constant) spread over ``shape``."""
    c = const(value, dt)
    return _t(new_node("broadcast_to", [c], {"shape": list(shape)}) if shape else c)


# --- binary and unary ufuncs traced into several ops ----------------------------------------------
def float_loop(ufunc: np.ufunc, name: str, *args: Any) -> tuple[list[Node], np.dtype, np.dtype]:
    """The operands of ``ufunc``'s NumPy loop, as nodes, in the dtype to compute in (float32 for a
    float16 loop, which NumPy computes in float and rounds once), with the loop's result dtype."""
    xs = [operand(a, f"argument of {name}") for a in args]
    probe = tuple(x.probe_type if isinstance(x, WeakScalar) else x.dtype for x in xs)
    try:
        loop = ufunc.resolve_dtypes(probe + (None,))
    except TypeError:
        raise FusecTypeError(f"numpy.{name} has no loop for {probe}",
                             hint="cast the operands to a float dtype first") from None
    out = loop[-1]
    compute = dtypes.compute_dtype(out)
    nodes = [(const(x.value, compute) if x.scalar is None else to_dtype(x, compute)) if isinstance(x, WeakScalar)
             else cast(cast(x, dt), compute)
             for x, dt in zip(xs, loop[:-1])]
    return nodes, compute, out


@implements("logaddexp")
@implements_ufunc("logaddexp")
def logaddexp(x1: Any, x2: Any) -> Tracer:
    """``numpy.logaddexp`` as NumPy's ``npy_logaddexp``: ``x + log(2)`` where ``x == y`` (infinities of
    one sign), else ``max(x, y) + log1p(exp(-|x - y|))`` (NaN in, NaN out)."""
    (x, y), compute, out = float_loop(np.logaddexp, "logaddexp", x1, x2)
    return _log_add(x, y, compute, out, lambda d: _u(np.log1p, _u(np.exp, d)), _LN2)


@implements("logaddexp2")
@implements_ufunc("logaddexp2")
def logaddexp2(x1: Any, x2: Any) -> Tracer:
    """``numpy.logaddexp2`` as NumPy's ``npy_logaddexp2``: ``x + 1`` where ``x == y``, else
    ``max(x, y) + log1p(exp2(-|x - y|)) / log(2)``."""
    (x, y), compute, out = float_loop(np.logaddexp2, "logaddexp2", x1, x2)
    return _log_add(x, y, compute, out, lambda d: _u(np.multiply, _u(np.log1p, _u(np.exp2, d)), _LOG2E), 1.0)


def _log_add(x: Node, y: Node, compute: np.dtype, out: np.dtype, log_1p_exp: Any, equal_term: float) -> Tracer:
    tx, ty = _t(x), _t(y)
    minus_gap = _u(np.negative, _u(np.absolute, _u(np.subtract, tx, ty)))
    general = _u(np.add, _u(np.maximum, tx, ty), log_1p_exp(minus_gap))
    equal = _u(np.add, tx, const(equal_term, compute))
    result = where(_u(np.equal, tx, ty), equal, general)
    return _t(cast(result.node, out))


@implements("expit")
@implements_ufunc("expit")
def expit(x: Any) -> Tracer:
    """``scipy.special.expit``: ``1 / (1 + exp(-x))`` in float32 for float32, else float64."""
    node = as_node(x, "expit")
    node = cast(node, scipy_float_dtype(node.dtype))
    one = const(1.0, node.dtype)
    return _u(np.true_divide, _t(one), _u(np.add, _t(one), _u(np.exp, _u(np.negative, _t(node)))))


@implements("log_expit")
@implements_ufunc("log_expit")
def log_expit(x: Any) -> Tracer:
    """``scipy.special.log_expit``: ``-log1p(exp(-x))`` for x >= 0, ``x - log1p(exp(x))`` below (no
    overflow either way), in float32 for float32, else float64."""
    node = as_node(x, "log_expit")
    t = _t(cast(node, scipy_float_dtype(node.dtype)))
    positive = _u(np.negative, _u(np.log1p, _u(np.exp, _u(np.negative, t))))
    negative = _u(np.subtract, t, _u(np.log1p, _u(np.exp, t)))
    return where(_u(np.less, t, 0), negative, positive)


# --- softmax family (scipy.special signatures) ----------------------------------------------------
def _floating(x: Any, name: str) -> Node:
    """``x`` as SciPy's ``xp_promote(force_floating=True)`` leaves it: floats kept, others float64."""
    node = as_node(x, name)
    return node if dtypes.kind(node.dtype) == "f" else cast(node, dtypes.FLOAT64)


def _finite_or_zero(m: Tracer) -> Tracer:
    return where(_u(np.isfinite, m), m, _t(const(0, m.dtype)))


@implements("logsumexp")
def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False) -> Tracer:
    """``scipy.special.logsumexp``: ``log(sum(b * exp(a - m))) + m`` with ``m`` the finite maximum (0 where
    the maximum is infinite or NaN), so all ``-inf`` gives ``-inf``, a ``+inf`` gives ``inf``, a NaN NaN, and
    a negative weighted sum NaN; ``-inf`` for an empty reduction. Elements with weight 0 are left out."""
    if return_sign:
        raise UnsupportedError("logsumexp(..., return_sign=True) is not supported inside a fused function",
                               hint="compute the signed sum yourself: s = (b * np.exp(a - m)).sum(axis)")
    x = _floating(a, "logsumexp")
    if x.ndim == 0:
        x = new_node("expand_dims", [x], {"axes": [0]})
    axes = normalize_axes(axis, x.ndim)
    if b is not None:
        weights = operand(b, "weight of logsumexp")
        bt = _t(weights) if isinstance(weights, Node) else weights.value
        x = where(_u(np.equal, bt, 0), _t(const(-np.inf, x.dtype)), _t(x)).node
        weight = _u(np.multiply, bt, _t(const(1, x.dtype)))  # b promoted as SciPy promotes a and b
        if weight.dtype != x.dtype:
            x = cast(x, weight.dtype)
    if any(x.shape[k] == 0 for k in axes):
        return _shape_full(-np.inf, x.dtype, reduced_shape(x.shape, axes, bool(keepdims)))
    tx = _t(x)
    m = _finite_or_zero(reduction("max", tx, axes, keepdims=True))
    e = _u(np.exp, _u(np.subtract, tx, m))
    if b is not None:
        e = _u(np.multiply, weight, e)
    s = reduction("sum", e, axes, keepdims=True)
    out = _u(np.add, _u(np.log, s), m)
    return out if keepdims else _t(squeeze_axes(out.node, axes))


@implements("softmax")
def softmax(x: Any, axis: Any = None) -> Tracer:
    """``scipy.special.softmax``: ``e / e.sum(axis)`` with ``e = exp(x - x.max(axis))``."""
    t = _t(as_node(x, "softmax"))
    axes = normalize_axes(axis, t.ndim)
    e = _u(np.exp, _u(np.subtract, t, reduction("max", t, axes, keepdims=True)))
    return _u(np.true_divide, e, reduction("sum", e, axes, keepdims=True))


@implements("log_softmax")
def log_softmax(x: Any, axis: Any = None) -> Tracer:
    """``scipy.special.log_softmax``: ``t - log(sum(exp(t)))`` with ``t = x - m`` and ``m`` the maximum over
    ``axis``, 0 where that is not finite."""
    t = _t(as_node(x, "log_softmax"))
    axes = normalize_axes(axis, t.ndim)
    shifted = _u(np.subtract, t, _finite_or_zero(reduction("max", t, axes, keepdims=True)))
    total = reduction("sum", _u(np.exp, shifted), axes, keepdims=True)
    return _u(np.subtract, shifted, _u(np.log, total))


# --- counting and NaN-ignoring statistics ---------------------------------------------------------
@implements("count_nonzero")
def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Tracer:
    """``numpy.count_nonzero``: the number of true (nonzero; NaN counts) elements, as int64 (intp)."""
    truth = cast(as_node(a, "count_nonzero"), dtypes.BOOL)
    return reduction("sum", _t(truth), axis, dtype=dtypes.INT64, keepdims=keepdims)


def _nan_mask(a: Any, name: str) -> tuple[Node, Tracer | None]:
    node = as_node(a, name)
    return node, (_u(np.isnan, _t(node)) if dtypes.kind(node.dtype) == "f" else None)


def _replace(node: Node, mask: Tracer, value: float) -> Tracer:
    return where(mask, _t(const(value, node.dtype)), _t(node))


@implements("nanmean")
def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False,
            *, where: Any = None) -> Tracer:
    """``numpy.nanmean``: the sum of the non-NaN elements over their count (NaN for none), as NumPy's
    ``_divide_by_count`` (in float64, rounded to the sum's dtype); ``mean`` for non-float dtypes."""
    _no_extra("nanmean", out=out, where=where)
    node, mask = _nan_mask(a, "nanmean")
    if mask is None:
        return reduction("mean", _t(node), axis, dtype=dtype, keepdims=keepdims)
    axes = normalize_axes(axis, node.ndim)
    keep = bool(keepdims) and keepdims is not np._NoValue
    count = reduction("sum", _u(np.logical_not, mask), axes, dtype=dtypes.INT64, keepdims=keep)
    total = reduction("sum", _replace(node, mask, 0), axes, dtype=dtype, keepdims=keep)
    return _divide(total, count)


def _divide(total: Tracer, count: Tracer) -> Tracer:
    """``np.true_divide(total, count, out=total, casting='unsafe')``."""
    return _t(cast(_u(np.true_divide, total, count).node, total.dtype))


@implements("nanvar")
def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: Any = False,
           *, where: Any = None, mean: Any = None, correction: Any = None) -> Tracer:
    """``numpy.nanvar`` as NumPy's ``_nanvar``: deviations from the non-NaN mean (rounded to the input's
    dtype, as NumPy's in-place subtract does), NaN slots zeroed, squared, summed, over ``count - ddof``; NaN
    where that is not positive. ``var`` for non-float dtypes."""
    _no_extra("nanvar", out=out, where=where, mean=mean, correction=correction)
    return _nan_variance("nanvar", a, axis, dtype, ddof, keepdims, take_sqrt=False)


@implements("nanstd")
def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: Any = False,
           *, where: Any = None, mean: Any = None, correction: Any = None) -> Tracer:
    """``numpy.nanstd``: the square root of :func:`nanvar`."""
    _no_extra("nanstd", out=out, where=where, mean=mean, correction=correction)
    return _nan_variance("nanstd", a, axis, dtype, ddof, keepdims, take_sqrt=True)


def _nan_variance(name: str, a: Any, axis: Any, dtype: Any, ddof: Any, keepdims: Any, take_sqrt: bool) -> Tracer:
    node, mask = _nan_mask(a, name)
    if mask is None:
        return reduction("std" if take_sqrt else "var", _t(node), axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    if not isinstance(ddof, (int, np.integer)) or isinstance(ddof, bool):
        raise UnsupportedError(f"ddof of {name} must be a Python int inside a fused function")
    axes = normalize_axes(axis, node.ndim)
    arr = _replace(node, mask, 0)
    count = reduction("sum", _u(np.logical_not, mask), axes, dtype=dtypes.INT64, keepdims=True)
    avg = _divide(reduction("sum", arr, axes, dtype=dtype, keepdims=True), count)
    deviation = _t(cast(_u(np.subtract, arr, avg).node, node.dtype))  # np.subtract(arr, avg, out=arr)
    deviation = _replace(deviation.node, mask, 0)
    squares = _u(np.multiply, deviation, deviation)
    total = reduction("sum", squares, axes, dtype=dtype, keepdims=True)
    dof = _u(np.subtract, count, int(ddof))
    var = _divide(total, dof)
    var = where(_u(np.less_equal, dof, 0), _t(const(np.nan, var.dtype)), var)
    if take_sqrt:
        var = _u(np.sqrt, var)
    keep = bool(keepdims) and keepdims is not np._NoValue
    return var if keep else _t(squeeze_axes(var.node, axes))


def _nan_arg(name: str, a: Any, axis: Any, out: Any, keepdims: Any) -> Tracer:
    """``numpy.nanargmax``/``nanargmin``: the arg of the array with NaN as -inf (+inf); for an all-NaN
    slice, where NumPy raises ValueError, -1 (as CuPy)."""
    _no_extra(name, out=out)
    node, mask = _nan_mask(a, name)
    arg = name.removeprefix("nan")
    keep = bool(keepdims) and keepdims is not np._NoValue
    if mask is None:
        return reduction(arg, _t(node), axis, keepdims=keep)
    filled = _replace(node, mask, -np.inf if arg == "argmax" else np.inf)
    index = reduction(arg, filled, axis, keepdims=keep)
    axes = normalize_axes(axis, node.ndim, allow_tuple=False)
    all_nan = reduction("all", mask, axes, keepdims=keep)
    return where(all_nan, _t(const(-1, dtypes.INT64)), index)


@implements("nanargmax")
def nanargmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Tracer:
    return _nan_arg("nanargmax", a, axis, out, keepdims)


@implements("nanargmin")
def nanargmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Tracer:
    return _nan_arg("nanargmin", a, axis, out, keepdims)


@implements("nanprod")
def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False,
            initial: Any = None, where: Any = None) -> Tracer:
    """``numpy.nanprod``: the product with NaN as 1."""
    _no_extra("nanprod", out=out, initial=initial, where=where)
    node, mask = _nan_mask(a, "nanprod")
    x = _t(node) if mask is None else _replace(node, mask, 1)
    return reduction("prod", x, axis, dtype=dtype, keepdims=keepdims)


@implements("ptp")
def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: Any = False) -> Tracer:
    """``numpy.ptp``: ``max - min`` with ``numpy.subtract`` (integers wrap; bool is a TypeError)."""
    _no_extra("ptp", out=out)
    t = _t(as_node(a, "ptp"))
    keep = bool(keepdims) and keepdims is not np._NoValue
    return _u(np.subtract, reduction("max", t, axis, keepdims=keep), reduction("min", t, axis, keepdims=keep))


# --- rounding ---------------------------------------------------------------------------------------
@implements("round", "around", "round_")
def round_(a: Any, decimals: Any = 0, out: Any = None) -> Tracer:
    """``numpy.round``/``around`` (NumPy's ``PyArray_Round``): floats ``rint`` (half to even) of
    ``x * 10**decimals`` divided back (``x / 10**-decimals`` multiplied back for negative decimals), in the
    input's dtype; integers and bool unchanged for ``decimals >= 0``, else rounded through float64 and cast
    back."""
    _no_extra("round", out=out)
    if isinstance(decimals, (bool, np.bool_)) or not isinstance(decimals, (int, np.integer)):
        raise FusecTypeError(f"decimals of round must be an integer, got {decimals!r}")
    decimals = int(decimals)
    node = as_node(a, "round")
    if node.dtype.kind == "b":  # not an integer to NumPy: rint's bool loop gives float16; a scale cannot cast back
        if decimals:
            raise FusecTypeError("Cannot cast ufunc 'multiply' output from dtype('float64') to dtype('bool')",
                                 hint="round x.astype(np.float32) instead")
        return _u(np.rint, node)
    if node.dtype.kind in "iu" and decimals >= 0:
        return _t(node)
    t = _t(node) if dtypes.kind(node.dtype) == "f" else _t(cast(node, dtypes.FLOAT64))
    if decimals == 0:
        y = _u(np.rint, t)
    else:
        scale = float(10.0 ** abs(decimals))
        first, second = (np.multiply, np.true_divide) if decimals > 0 else (np.true_divide, np.multiply)
        y = _u(second, _u(np.rint, _u(first, t, scale)), scale)
    return y if dtypes.kind(node.dtype) == "f" else _t(cast(y.node, node.dtype))


# --- arrays of one value ----------------------------------------------------------------------------
@implements("full_like")
def full_like(a: Any, fill_value: Any, dtype: Any = None, order: Any = "K", subok: Any = True,
              shape: Any = None, *, device: Any = None) -> Tracer:
    """``numpy.full_like``: ``fill_value`` (cast unsafely, as NumPy's ``copyto``) over ``a``'s shape (or
    ``shape``), of ``a``'s dtype (or ``dtype``)."""
    node = as_node(a, "full_like")
    if shape is None:
        target = node.shape
    else:
        target = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    filled = fill_node(fill_value, dtype if dtype is not None else node.dtype, "full_like")
    if filled.shape == target:
        return _t(filled)
    return _t(new_node("broadcast_to", [filled], {"shape": list(target)}))


@implements("zeros_like")
def zeros_like(a: Any, dtype: Any = None, order: Any = "K", subok: Any = True, shape: Any = None,
               *, device: Any = None) -> Tracer:
    return full_like(a, 0, dtype=dtype, shape=shape)


@implements("ones_like")
def ones_like(a: Any, dtype: Any = None, order: Any = "K", subok: Any = True, shape: Any = None,
              *, device: Any = None) -> Tracer:
    return full_like(a, 1, dtype=dtype, shape=shape)


# --- norms and closeness ----------------------------------------------------------------------------
@implements("linalg.norm")
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tracer:  # noqa: A002
    """``numpy.linalg.norm`` for vector norms (``ord`` None/2, 1, inf, -inf, 0 or another number) along
    one axis or of a whole array (``ord`` None: the 2-norm of all elements), and the matrix norms that
    are reductions (``'fro'``, 1, -1, inf, -inf over two axes). Integers and bool are float64 first."""
    node = as_node(x, "linalg.norm")
    if dtypes.kind(node.dtype) != "f":
        node = cast(node, dtypes.FLOAT64)
    t = _t(node)
    if axis is None:
        if ord is None or (ord in ("f", "fro") and t.ndim == 2) or (ord == 2 and t.ndim == 1):
            axes = tuple(range(t.ndim))
            total = reduction("sum", _u(np.multiply, t, t), axes, keepdims=bool(keepdims))
            return _u(np.sqrt, total)
        axis = tuple(range(t.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normalized = normalize_axes(axes, t.ndim)
    if len(axes) == 1:
        return _vector_norm(t, ord, normalized, bool(keepdims))
    if len(axes) == 2:
        return _matrix_norm(t, ord, tuple(a % t.ndim for a in axes), bool(keepdims))
    raise FusecValueError("Improper number of dimensions to norm.")


def _vector_norm(t: Tracer, ord: Any, axes: tuple[int, ...], keepdims: bool) -> Tracer:  # noqa: A002
    if ord is None or ord == 2:
        return _u(np.sqrt, reduction("sum", _u(np.multiply, t, t), axes, keepdims=keepdims))
    if isinstance(ord, str):
        raise FusecValueError(f"Invalid norm order '{ord}' for vectors")
    absolute = _u(np.absolute, t)
    if ord == np.inf:
        return _max_or_zero(absolute, axes, keepdims)
    if ord == -np.inf:
        return reduction("min", absolute, axes, keepdims=keepdims)
    if ord == 0:
        nonzero = _t(cast(_u(np.not_equal, t, 0).node, t.dtype))
        return reduction("sum", nonzero, axes, keepdims=keepdims)
    if ord == 1:
        return reduction("sum", absolute, axes, keepdims=keepdims)
    power = float(ord)
    total = reduction("sum", _u(np.power, absolute, power), axes, keepdims=keepdims)
    exponent = np.reciprocal(np.asarray(power, dtype=total.dtype))[()]  # reciprocal(ord, dtype=ret.dtype)
    return _u(np.power, total, exponent)


def _max_or_zero(t: Tracer, axes: tuple[int, ...], keepdims: bool) -> Tracer:
    """``t.max(axis=axes, keepdims=keepdims, initial=0)`` of a non-negative (or NaN) ``t``: 0 for an empty
    extent, as NumPy's norms give it."""
    if any(t.shape[a] == 0 for a in axes):
        return _shape_full(0, t.dtype, reduced_shape(t.node.shape, axes, keepdims))
    return reduction("max", t, axes, keepdims=keepdims)


def _matrix_norm(t: Tracer, ord: Any, axes: tuple[int, int], keepdims: bool) -> Tracer:  # noqa: A002
    row_axis, col_axis = axes
    if row_axis == col_axis:
        raise FusecValueError("Duplicate axes given.")
    if ord is None or ord in ("fro", "f"):
        result = _u(np.sqrt, reduction("sum", _u(np.multiply, t, t), tuple(sorted(axes)), keepdims=True))
    elif ord in (1, -1, np.inf, -np.inf):
        # 1: max over columns of the column sums of |x| (sum over rows); inf: max over rows of row sums
        summed, then = (row_axis, col_axis) if ord in (1, -1) else (col_axis, row_axis)
        sums = reduction("sum", _u(np.absolute, t), (summed,), keepdims=True)
        result = _max_or_zero(sums, (then,), True) if ord in (1, np.inf) else \
            reduction("min", sums, (then,), keepdims=True)
    else:
        raise UnsupportedError(f"linalg.norm with ord={ord!r} over two axes needs singular values, "
                               "which fusec does not compute", hint="call numpy.linalg.norm outside the function")
    return result if keepdims else _t(squeeze_axes(result.node, tuple(sorted(axes))))


@implements("isclose")
def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Tracer:
    """``numpy.isclose`` as NumPy 2 writes it: ``y`` as ``result_type(y, 1.0)``, then
    ``(|x - y| <= atol + rtol * |y|) & isfinite(y) | (x == y)``, or'ed with both-NaN for ``equal_nan``."""
    xt = operand(a, "argument of isclose")
    yt = operand(b, "argument of isclose")
    x = xt.value if isinstance(xt, WeakScalar) else _t(xt)
    if isinstance(yt, WeakScalar):
        y = float(yt.value) if isinstance(yt.value, int) else yt.value
    else:
        y = _t(cast(yt, dtypes.as_dtype(np.result_type(yt.dtype, 1.0))))
    if not isinstance(x, Tracer) and not isinstance(y, Tracer):
        raise UnsupportedError("isclose of two Python numbers inside a fused function",
                               hint="compare them outside the function, or pass one as an array")
    close = _u(np.less_equal, _u(np.absolute, _u(np.subtract, x, y)),
               _u(np.add, atol, _u(np.multiply, rtol, _u(np.absolute, y))))
    result = _u(np.logical_or, _u(np.logical_and, close, _u(np.isfinite, y)), _u(np.equal, x, y))
    if equal_nan:
        result = _u(np.logical_or, result, _u(np.logical_and, _u(np.isnan, x), _u(np.isnan, y)))
    return result


def fill_node(fill_value: Any, dtype: Any, what: str) -> Node:
    """``fill_value`` as ``dtype`` (None: the fill value's own, NumPy's for a Python number), cast unsafely as
    NumPy's ``copyto`` (a Python int that does not fit: OverflowError)."""
    value = operand(fill_value, f"fill value of {what}")
    if dtype is None:
        dt = dtypes.as_dtype(np.result_type(value.probe_type)) if isinstance(value, WeakScalar) else value.dtype
    else:
        dt = dtypes.as_dtype(np.dtype(dtype))
    if not isinstance(value, WeakScalar):
        return cast(value, dt)
    if isinstance(value.value, int) and dt.kind in "iu" and not dtypes.fits(value.value, dt):
        raise FusecOverflowError(f"Python integer {value.value} out of bounds for {dt}")
    return const(value.value, dt) if dt.kind != "b" else const(bool(value.value), dt)


@implements("allclose")
def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Tracer:
    """``numpy.allclose``: ``all(isclose(...))``, as a 0-d bool array (NumPy returns a Python bool)."""
    return reduction("all", isclose(a, b, rtol, atol, equal_nan), None)


# for docs/ops.md (fusec.frontend.ops_doc): the functions traced into the op table's ops, by the module users call
DOCUMENTED = {
    "numpy": ("mean", "var", "std", "nansum", "nanmean", "nanvar", "nanstd", "nanprod", "nanargmax", "nanargmin",
              "count_nonzero", "ptp", "round", "around", "clip", "logaddexp", "logaddexp2", "zeros_like", "ones_like",
              "full_like", "isclose", "allclose"),
    "numpy.linalg": ("norm",),
    "scipy.special": ("expit", "log_expit", "logsumexp", "softmax", "log_softmax"),
}
