"""Elementwise NumPy functions traced into the op table's elementwise ops, each as NumPy computes it:

- ``deg2rad``/``radians`` and ``rad2deg``/``degrees``: one multiplication by NumPy's constant (``pi / 180`` or
  ``180 / pi`` in the loop's type; float16 computed in float32 and rounded once, as NumPy's loop does);
- ``heaviside``: 0 below zero, 1 above, ``x2`` at zero, NaN for NaN;
- ``nan_to_num``: NaN and the infinities replaced (by default 0 and the dtype's largest and smallest values);
- ``sinc``: ``sin(y) / y`` with ``y = pi * x`` (the dtype's ``eps`` where that is 0), NumPy 2's own steps;
- ``fix``: ``trunc`` (NumPy 2's ``fix`` is ``trunc``, whose values are its old ceil-or-floor-by-sign's, -0.0 included;
  integers and bool stay as they are);
- ``frexp``: the ops ``frexp_mantissa`` and ``frexp_exponent``; ``i0``: NumPy's Chebyshev series (Cephes'
  coefficients), in the input's float dtype, ``where(|x| <= 8, ...)`` of its two pieces;
- ``copyto``: ``dst`` updated in place to ``where(where, src, dst)``, ``src`` cast under ``casting``;
- ``select``: ``where`` chained from the last condition to the first;
- ``divmod``: ``(floor_divide, remainder)``; ``modf``: ``(x - trunc(x), trunc(x))``; ``float_power``: ``power``
  in float64; ``scipy.special.xlogy``: ``x * log(y)``, 0 where ``x == 0``;
- ``polyval`` (numbers as coefficients): Horner's steps; ``unravel_index`` (C order): floor divisions.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from fusec.frontend.composite import float_loop, zeros_like
from fusec.frontend.nodes import cast, const, new_node
from fusec.frontend.registry import implements, implements_ufunc
from fusec.frontend.slice_assign import assign
from fusec.frontend.tracer import Tracer, WeakScalar, as_node, call_ufunc, operand, static_number, to_dtype, where
from fusec.ir import dtypes
from fusec.ir.ops import OPS
from fusec.support.errors import FusecOverflowError, FusecTypeError, FusecValueError, UnsupportedError


def _scaled(ufunc: np.ufunc, name: str, x: Any, factor: float) -> Tracer:
    """``x * factor`` as NumPy's ``deg2rad``-type loops compute it: the factor rounded to the loop's type."""
    (v,), compute, out = float_loop(ufunc, name, x)
    if compute == dtypes.FLOAT64:
        c = np.float64(factor)
    else:  # float32 loops (float16's too): NPY_PIf / 180.0f
        c = np.float32(np.float32(np.pi) / np.float32(180)) if factor < 1 else np.float32(
            np.float32(180) / np.float32(np.pi))
    return Tracer(cast(new_node("mul", [v, const(c, compute)]), out))


@implements_ufunc("deg2rad", "radians")
def deg2rad(x: Any, /, **kwargs: Any) -> Tracer:
    _no_kwargs("deg2rad", kwargs)
    return _scaled(np.deg2rad, "deg2rad", x, np.pi / 180.0)


@implements_ufunc("rad2deg", "degrees")
def rad2deg(x: Any, /, **kwargs: Any) -> Tracer:
    _no_kwargs("rad2deg", kwargs)
    return _scaled(np.rad2deg, "rad2deg", x, 180.0 / np.pi)


@implements_ufunc("heaviside")
def heaviside(x1: Any, x2: Any, /, **kwargs: Any) -> Tracer:
    """``numpy.heaviside``: 0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0``, NaN where NaN."""
    _no_kwargs("heaviside", kwargs)
    (x, h), compute, out = float_loop(np.heaviside, "heaviside", x1, x2)
    zero, one = const(0, compute), const(1, compute)
    value = new_node("where", [new_node("lt", [x, zero]), zero, new_node("where", [new_node("gt", [x, zero]), one, h])])
    value = new_node("where", [new_node("isnan", [x]), x, value])
    return Tracer(cast(value, out))


def _no_kwargs(name: str, kwargs: dict) -> None:
    if kwargs:
        raise UnsupportedError(f"the {next(iter(kwargs))}= argument of {name} is not supported inside a fused "
                               "function")


@implements("nan_to_num")
def nan_to_num(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Tracer:
    """``numpy.nan_to_num``: NaN -> ``nan``, +inf -> ``posinf`` (the dtype's largest), -inf -> ``neginf`` (its
    smallest); integers and booleans as they are. A new array, or with ``copy=False`` ``x`` itself, updated in
    place (as NumPy does)."""
    v = as_node(x, "nan_to_num")
    in_place = not copy and isinstance(x, Tracer)
    if dtypes.kind(v.dtype) != "f":
        return x if in_place else Tracer(v)
    info = ml_dtypes.finfo(v.dtype)
    big = info.max if posinf is None else posinf
    small = info.min if neginf is None else neginf
    out = new_node("where", [new_node("isnan", [v]), const(nan, v.dtype), v])
    inf = new_node("isinf", [v])
    positive = new_node("gt", [v, const(0, v.dtype)])
    out = new_node("where", [new_node("logical_and", [inf, positive]), const(big, v.dtype), out])
    negative = new_node("lt", [v, const(0, v.dtype)])
    out = new_node("where", [new_node("logical_and", [inf, negative]), const(small, v.dtype), out])
    if in_place:
        return assign(x, out, "np.nan_to_num(x, copy=False)")
    return Tracer(out)


@implements("sinc")
@implements_ufunc("sinc")
def sinc(x: Any) -> Tracer:
    """``numpy.sinc`` as NumPy 2 computes it: ``x = pi * x``, ``y = where(x, x, eps)`` (``eps`` the float dtype's),
    then ``sin(y) / y``."""
    t = call_ufunc(np.multiply, np.pi, as_node(x, "sinc"))  # integers and bool: float64
    y = where(t, t, Tracer(const(ml_dtypes.finfo(t.dtype).eps, t.dtype)))  # ml_dtypes' finfo: bfloat16 too
    return call_ufunc(np.true_divide, call_ufunc(np.sin, y), y)


@implements("fix")
@implements_ufunc("fix")
def fix(x: Any, out: Any = None) -> Tracer:
    """``numpy.fix``: ``numpy.trunc(x, out=out)``, as NumPy 2 writes it (the values of its old definition, ``ceil``
    below zero and ``floor`` above, -0.0 and NaN included; integers and bool as they are)."""
    return call_ufunc(np.trunc, x) if out is None else np.trunc(x, out=out)


@implements_ufunc("frexp")
def frexp(x: Any, /, **kwargs: Any) -> tuple[Tracer, Tracer]:
    """``numpy.frexp``: ``(m, e)`` with ``x == m * 2**e`` and ``0.5 <= |m| < 1``: the ops ``frexp_mantissa`` (the
    loop's float dtype) and ``frexp_exponent`` (int32), on the operand as NumPy's loop casts it."""
    _no_kwargs("frexp", kwargs)
    return call_ufunc(OPS["frexp_mantissa"].ufunc, x), call_ufunc(OPS["frexp_exponent"].ufunc, x)


_I0_A = (
    -4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16, 1.715391285555133e-15,
    -1.1685332877993451e-14, 7.676185498604936e-14, -4.856446783111929e-13, 2.95505266312964e-12,
    -1.726826291441556e-11, 9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07, 1.1173875391201037e-06,
    -4.4167383584587505e-06, 1.6448448070728896e-05, -5.754195010082104e-05, 0.00018850288509584165,
    -0.0005763755745385824, 0.0016394756169413357, -0.004324309995050576, 0.010546460394594998, -0.02373741480589947,
    0.04930528423967071, -0.09490109704804764, 0.17162090152220877, -0.3046826723431984, 0.6767952744094761,
)
_I0_B = (
    -7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17, 3.461222867697461e-17,
    -2.8276239805165836e-16, -3.425485619677219e-16, 1.7725601330565263e-15, 3.8116806693526224e-15,
    -9.554846698828307e-15, -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
    7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11, -3.1499165279632416e-11,
    1.1889147107846439e-11, 4.94060238822497e-10, 3.3962320257083865e-09, 2.266668990498178e-08,
    2.0489185894690638e-07, 2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943, 0.8044904110141088,
)


def _chbevl(x: Tracer, vals: tuple[float, ...]) -> Tracer:
    """NumPy's ``_chbevl``: Clenshaw's recurrence of a Chebyshev series, with the coefficients as Python floats."""
    b0: Any = vals[0]
    b1: Any = 0.0
    b2: Any = 0.0
    for v in vals[1:]:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + v
    return 0.5 * (b0 - b2)


@implements("i0")
@implements_ufunc("i0")
def i0(x: Any) -> Tracer:
    """``numpy.i0``: ``|x|`` (integers and bool as float64), then NumPy's ``piecewise`` of ``_i0_1`` (``|x| <= 8``)
    and ``_i0_2`` (the rest, NaN included), each the same steps as NumPy's, in the input's float dtype."""
    v = as_node(x, "i0")
    if dtypes.kind(v.dtype) != "f":
        v = cast(v, dtypes.FLOAT64)
    t = call_ufunc(np.absolute, v)
    small = call_ufunc(np.exp, t) * _chbevl(t / 2.0 - 2, _I0_A)
    large = call_ufunc(np.exp, t) * _chbevl(32.0 / t - 2.0, _I0_B) / call_ufunc(np.sqrt, t)
    return where(call_ufunc(np.less_equal, t, 8.0), small, large)


@implements("copyto")
def copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """``numpy.copyto``: ``dst`` (a traced array: an argument, updated in place, or a value of the function) becomes
    ``where(where, src, dst)``, ``src`` broadcast to ``dst``'s shape and cast under ``casting`` as NumPy checks it (a
    Python number as NumPy 2 takes it: of ``dst``'s dtype where its kind allows, an int checked against its range)."""
    if not isinstance(dst, Tracer):
        raise FusecTypeError(f"copyto() argument 1 must be an array, not {type(dst).__name__}",
                             hint="copy into an argument of the fused function or an array computed in it")
    target = dst.node.dtype
    value = operand(src, "source of copyto")
    if isinstance(value, WeakScalar):
        number = value.probe
        fits_kind = target.kind in ("iuf" if isinstance(number, int) else "f")
        source = target if fits_kind else dtypes.as_dtype(np.result_type(type(number)))
        if isinstance(number, int) and source.kind in "iu" and not dtypes.fits(number, source):
            raise FusecOverflowError(f"Python integer {number} out of bounds for {source}")
        what = "scalar"
    else:
        source, what = value.dtype, "array data"
    if not np.can_cast(source, target, casting):
        raise FusecTypeError(f"Cannot cast {what} from dtype('{source}') to dtype('{target}') according to the rule "
                             f"'{casting}' (numpy.copyto)", hint="cast the source first, or pass casting='unsafe'")
    node = cast(to_dtype(value, source), target)
    node = _broadcast_into(node, dst.node.shape, "input array")
    if not (isinstance(where, (bool, np.bool_)) and bool(where)):
        mask = operand(where, "where= of copyto")
        if isinstance(mask, WeakScalar) or mask.dtype != dtypes.BOOL:
            shown = mask.probe_type.__name__ if isinstance(mask, WeakScalar) else mask.dtype
            raise FusecTypeError(f"Cannot cast array data from dtype('{shown}') to dtype('bool') according to the rule "
                                 "'safe' (where= of numpy.copyto)", hint="pass a boolean mask")
        node = new_node("where", [_broadcast_into(mask, dst.node.shape, "where= mask"), node, dst.node])
    assign(dst, node, "numpy.copyto")
    return None


def _broadcast_into(node: Any, shape: tuple[int, ...], what: str) -> Any:
    """``node`` broadcast to ``shape`` (NumPy's ValueError where it does not broadcast to exactly that)."""
    if node.shape == shape:
        return node
    try:
        fits = np.broadcast_shapes(node.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise FusecValueError(f"could not broadcast {what} from shape {node.shape} into shape {shape} (numpy.copyto)")
    return new_node("broadcast_to", [node], {"shape": list(shape)})


@implements("select")
def select(condlist: Any, choicelist: Any, default: Any = 0) -> Tracer:
    """``numpy.select``: for each element the choice of the first true condition, else ``default``."""
    if len(condlist) != len(choicelist):
        raise FusecValueError("list of cases must be same length as list of conditions")
    if not condlist:
        raise FusecValueError("select with an empty condition list is not possible")
    conds = [as_node(c, "select") for c in condlist]
    for k, c in enumerate(conds):
        if c.dtype != dtypes.BOOL:
            raise TypeError(f"invalid entry {k} in condlist: should be boolean ndarray")
    result = default
    for c, choice in reversed(list(zip(conds, choicelist))):
        result = where(Tracer(c), choice, result)
    return result


@implements_ufunc("divmod")
def divmod_(x1: Any, x2: Any, /, **kwargs: Any) -> tuple[Tracer, Tracer]:
    _no_kwargs("divmod", kwargs)
    return call_ufunc(np.floor_divide, x1, x2), call_ufunc(np.remainder, x1, x2)


@implements_ufunc("modf")
def modf(x: Any, /, **kwargs: Any) -> tuple[Tracer, Tracer]:
    """``numpy.modf``: ``(x - trunc(x), trunc(x))``, the fraction with ``x``'s sign (0 for an infinity), as C's."""
    _no_kwargs("modf", kwargs)
    v = as_node(x, "modf")
    if dtypes.kind(v.dtype) != "f":  # NumPy's loops: float16, float32, float64 (others through float64)
        v = cast(v, dtypes.FLOAT64)
    whole = new_node("trunc", [v])  # both parts are exact in the argument's own type
    frac = new_node("where", [new_node("isinf", [v]), const(0, v.dtype), new_node("sub", [v, whole])])
    return Tracer(new_node("copysign", [frac, v])), Tracer(whole)  # both parts of x's sign, as C's modf


@implements_ufunc("float_power")
def float_power(x1: Any, x2: Any, /, **kwargs: Any) -> Tracer:
    """``numpy.float_power``: ``power`` in float64 (or wider)."""
    _no_kwargs("float_power", kwargs)
    (a, b), _, _ = float_loop(np.float_power, "float_power", x1, x2)
    return call_ufunc(np.power, a, b)


@implements_ufunc("xlogy")
def xlogy(x: Any, y: Any, /, **kwargs: Any) -> Tracer:
    """``scipy.special.xlogy``: ``x * log(y)``, 0 where ``x == 0`` and ``y`` is no NaN."""
    _no_kwargs("xlogy", kwargs)
    (a, b), compute, out = float_loop(_scipy_ufunc("xlogy"), "xlogy", x, y)
    if compute != dtypes.FLOAT64:  # SciPy's float32 loop calls its float64 function, rounding once
        a, b, compute = cast(a, dtypes.FLOAT64), cast(b, dtypes.FLOAT64), dtypes.FLOAT64
    zero = const(0, compute)
    product = new_node("mul", [a, new_node("log", [b])])
    exempt = new_node("logical_and", [new_node("eq", [a, zero]), new_node("logical_not", [new_node("isnan", [b])])])
    return Tracer(cast(new_node("where", [exempt, zero, product]), out))


def _scipy_ufunc(name: str) -> Any:
    import scipy.special

    return getattr(scipy.special, name)


@implements("polyval")
def polyval(p: Any, x: Any) -> Tracer:
    """``numpy.polyval`` with the coefficients as numbers (or traced 0-d values): Horner's steps, as NumPy's."""
    if isinstance(p, Tracer):
        raise UnsupportedError("polyval with traced coefficients is not traced",
                               hint="pass the coefficients as a list of numbers")
    coefficients = list(np.asanyarray(p))  # NumPy scalars of the coefficients' dtype, as NumPy iterates them
    v = as_node(x, "polyval")
    y: Any = zeros_like(Tracer(v))
    for c in coefficients:
        y = call_ufunc(np.add, call_ufunc(np.multiply, y, Tracer(v)), c)
    return y


@implements("unravel_index")
def unravel_index(indices: Any, shape: Any, order: str = "C") -> tuple[Tracer, ...]:
    """``numpy.unravel_index`` (C order): the coordinates by repeated floor division and remainder."""
    if order != "C":
        raise UnsupportedError("unravel_index with order='F' is not traced", hint="use order='C'")
    dims = tuple(int(static_number(d, "shape of unravel_index")) for d in
                 (shape if isinstance(shape, (tuple, list)) else (shape,)))
    flat = as_node(indices, "unravel_index")
    if flat.dtype.kind not in "iu":
        raise TypeError("only int indices permitted")
    flat = cast(flat, dtypes.INT64)
    out = []
    for d in reversed(dims):
        out.append(call_ufunc(np.remainder, flat, d))
        flat = call_ufunc(np.floor_divide, flat, d).node
    return tuple(reversed(out))


# for docs/ops.md (fusec.frontend.ops_doc)
DOCUMENTED = {"numpy": ("deg2rad", "radians", "rad2deg", "degrees", "heaviside", "divmod", "modf", "float_power",
                        "nan_to_num", "sinc", "select", "polyval", "unravel_index", "fix", "frexp", "i0", "copyto"),
              "scipy.special": ("xlogy",)}
__all__ = ["DOCUMENTED"]
