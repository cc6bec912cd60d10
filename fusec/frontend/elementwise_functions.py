"""Elementwise NumPy functions traced into the op table's elementwise ops, each as NumPy computes it:

- ``deg2rad``/``radians`` and ``rad2deg``/``degrees``: one multiplication by NumPy's constant (``pi / 180`` or
  ``180 / pi`` in the loop's type; float16 computed in float32 and rounded once, as NumPy's loop does);
- ``heaviside``: 0 below zero, 1 above, ``x2`` at zero, NaN for NaN;
- ``nan_to_num``: NaN and the infinities replaced (by default 0 and the dtype's largest and smallest values);
- ``sinc``: ``sin(y) / y`` with ``y = pi * x`` (``pi * 1e-20`` where ``x == 0``), NumPy's own steps;
- ``select``: ``where`` chained from the last condition to the first;
- ``divmod``: ``(floor_divide, remainder)``; ``modf``: ``(x - trunc(x), trunc(x))``; ``float_power``: ``power``
  in float64; ``scipy.special.xlogy``: ``x * log(y)``, 0 where ``x == 0``;
- ``polyval`` (numbers as coefficients): Horner's steps; ``unravel_index`` (C order): floor divisions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusec.frontend.composite import float_loop, zeros_like
from fusec.frontend.nodes import cast, const, new_node
from fusec.frontend.registry import implements, implements_ufunc
from fusec.frontend.slice_assign import assign
from fusec.frontend.tracer import Tracer, as_node, call_ufunc, static_number, where
from fusec.ir import dtypes
from fusec.support.errors import FusecValueError, UnsupportedError


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
    info = np.finfo(v.dtype)
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
def sinc(x: Any) -> Tracer:
    """``numpy.sinc``: ``y = pi * where(x == 0, 1e-20, x)``, then ``sin(y) / y``, NumPy's steps."""
    v = as_node(x, "sinc")
    if dtypes.kind(v.dtype) != "f":
        v = cast(v, dtypes.FLOAT64)
    nonzero = new_node("where", [new_node("eq", [v, const(0, v.dtype)]), const(1.0e-20, v.dtype), v])
    y = call_ufunc(np.multiply, np.pi, nonzero)
    return call_ufunc(np.true_divide, call_ufunc(np.sin, y), y)


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
                        "nan_to_num", "sinc", "select", "polyval", "unravel_index"),
              "scipy.special": ("xlogy",)}
__all__ = ["DOCUMENTED"]
