"""Tracing: run the user's NumPy/CuPy-style function on :class:`Tracer` values, recording a Graph.

A Tracer stands for an array. It answers Python's operators, NumPy's ``__array_ufunc__`` and
``__array_function__`` protocols, CuPy's ``__cupy_override_elementwise_kernel__`` (what CuPy's
ufuncs call on a foreign argument) and the ndarray methods CuPy's functions forward to
(``cp.sum(t)`` calls ``t.sum()``). Each call becomes IR nodes with NumPy 2's dtype rules: the loop
NumPy would pick (``ufunc.resolve_dtypes``, weak Python scalars) decides the casts inserted before
the op, so every IR op sees operands of one loop's dtypes.

Anything else (Python control flow on a traced value, an unsupported function) raises a fusec
error naming the user's file and line.
"""

from __future__ import annotations

import ast
import inspect
import operator
import sys
import textwrap
import threading
import tokenize
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from fusec.frontend import aliases, scalars
from fusec.frontend.hints import (
    KEYWORD_HINTS,
    attribute_hint,
    call_checked,
    checked_method,
    keyword_hint,
    unsupported_hint,
)
from fusec.frontend.scalars import Scalar
from fusec.ir import dtypes
from fusec.ir.graph import Node, make_node
from fusec.ir.infer import broadcast_shapes, normalize_axes, reduced_shape
from fusec.ir.ops import OPS
from fusec.support.errors import (
    FusecAttributeError,
    FusecError,
    FusecIndexError,
    FusecOverflowError,
    FusecTypeError,
    FusecValueError,
    TraceError,
    UnsupportedError,
    library_file,
    user_location,
)

_UFUNC_OPS = {op.ufunc.__name__: op for op in OPS.values() if op.ufunc is not None}
_UFUNC_OPS["true_divide"] = OPS["div"]  # CuPy's divide is named cupy_true_divide (NumPy 2's is "divide")
# ufuncs traced into several IR ops (fusec.frontend.composite fills it): name -> tracing function
COMPOSITE_UFUNCS: dict[str, Callable[..., Tracer]] = {}
_state = threading.local()


def shape_was_read() -> bool:
    """Whether the function being traced read a concrete size (``x.shape``, ``len(x)``, ``x.size``)."""
    return getattr(_state, "shape_read", False)


def reset_shape_read() -> None:
    _state.shape_read = False


def _mark_shape_read() -> None:
    _state.shape_read = True


def _node(op: str, operands: list[Node] | tuple[Node, ...] = (), attrs: dict | None = None, **kw: Any) -> Node:
    return make_node(op, operands, attrs, loc=user_location(), **kw)


def _const(value: Any, dt: np.dtype) -> Node:
    return _node("const", (), {"value": dtypes.scalar_constant(value, dt)}, dtype=dt)


def cast(node: Node, dt: np.dtype) -> Node:
    """``node`` as ``dt`` (itself when it already is)."""
    return node if node.dtype == dt else _node("cast", [node], dtype=dt)


# --- operands ------------------------------------------------------------------------------------
class _Weak:
    """A Python int/float operand: NEP 50's weak scalar. ``probe`` is its value, or for a runtime scalar
    (``scalar`` set) the value of the call being traced, which only class-dependent rules may read
    (its type; for an int, the dtypes it fits and its sign: see :func:`fusec.frontend.scalars.scalar_class`);
    ``value`` is the value to fold, which a runtime scalar does not have (it asks for a static one)."""

    __slots__ = ("probe", "scalar")

    def __init__(self, value: int | float, scalar: Scalar | None = None):
        self.probe = value
        self.scalar = scalar

    @property
    def value(self) -> int | float:
        if self.scalar is not None:
            self.scalar.concrete("folding this value into the trace")
        return self.probe


def _operand(value: Any, what: str = "operand") -> Node | _Weak:
    """A traced node, a weak Python scalar, or a strong NumPy scalar turned into a const node."""
    if isinstance(value, Tracer):
        return value.node
    if isinstance(value, Scalar):  # a runtime scalar: Python int/float weak, NumPy scalars and bools strong
        if isinstance(value.value, (int, float)) and not isinstance(value.value, (bool, np.generic)):
            return _Weak(value.value, value)
        return value.node()
    if isinstance(value, (bool, np.bool_)):
        return _const(bool(value), dtypes.BOOL)
    if isinstance(value, (complex, np.complexfloating)):
        raise FusecTypeError(f"complex {what} {value!r} is not supported", hint="complex dtypes come later")
    # NumPy scalars are strong (NEP 50), even np.float64, which subclasses Python's float
    if isinstance(value, (int, float)) and not isinstance(value, np.generic):
        return _Weak(value)
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        dt = dtypes.as_dtype(value.dtype)
        return _const(value.item(), dt)
    if isinstance(value, np.ndarray) or type(value).__module__.startswith("cupy"):
        raise UnsupportedError(
            f"an array captured from outside the function ({type(value).__name__} of shape "
            f"{getattr(value, 'shape', '?')}) is used as an {what}",
            hint="pass every array as an argument of the fused function",
        )
    raise UnsupportedError(f"{type(value).__name__} {value!r} as an {what} is not supported",
                           hint="use arrays, NumPy scalars or Python numbers")


def _dtype_or_weak(x: Node | _Weak) -> Any:
    return type(x.probe) if isinstance(x, _Weak) else x.dtype


def _result_type(*xs: Node | _Weak) -> np.dtype:
    """``np.result_type`` with weak Python scalars passed by value (by type they would be strong)."""
    return dtypes.as_dtype(np.result_type(*(x.probe if isinstance(x, _Weak) else x.dtype for x in xs)))


def _to_dtype(x: Node | _Weak, dt: np.dtype) -> Node:
    if isinstance(x, _Weak):
        if x.scalar is not None:  # NumPy's checks of the value (u8 + 300) hold for its whole class
            dtypes.scalar_constant(x.probe, dt)
            return cast(x.scalar.node(), dt)
        return _const(x.value, dt)
    return cast(x, dt)


def _weak_default(x: _Weak) -> Node:
    """A weak Python scalar on its own: int64 or float64, as ``np.asarray`` makes it."""
    return _to_dtype(x, dtypes.as_dtype(np.result_type(type(x.probe))))


_MIRRORED = {"equal": "equal", "not_equal": "not_equal", "less": "greater", "less_equal": "greater_equal",
             "greater": "less", "greater_equal": "less_equal"}


def _compare_beyond_range(name: str, xs: list[Node | _Weak]) -> Node | None:
    """NumPy 2 compares an integer array with a Python int beyond its dtype's range exactly (``u8 < 300``
    and ``i64 < 2**63`` are True everywhere, ``i64 == 2**63`` False): every element gets the same answer,
    decided by which side of the range the int lies. None when that is not the case at hand."""
    if name not in _MIRRORED or len(xs) != 2:
        return None
    for k, (x, v) in enumerate((xs, xs[::-1])):
        if isinstance(x, Node) and x.dtype.kind in "iu" and isinstance(v, _Weak) and isinstance(v.probe, int) \
                and not isinstance(v.probe, bool) and not dtypes.fits(v.probe, x.dtype):
            op = name if k == 0 else _MIRRORED[name]  # as "x op v" (fits and sign: the runtime scalar's class)
            above = v.probe > np.iinfo(x.dtype).max
            truth = {"equal": False, "not_equal": True, "less": above, "less_equal": above,
                     "greater": not above, "greater_equal": not above}[op]
            answer = _const(truth, dtypes.BOOL)
            return _node("broadcast_to", [answer], {"shape": list(x.shape)}) if x.ndim else answer
    return None


def ufunc_origin(ufunc: Any) -> tuple[str, str]:
    """``(module, name)`` of a ufunc as users find it: ``("numpy", "exp")``, ``("scipy.special", "erf")``,
    ``("cupy", "exp")`` for ``cupy_exp``, ``("cupyx.scipy.special", "erf")`` for
    ``cupyx_scipy_special_erf`` (and for CuPy's ``cupy_expit``, which lives there too)."""
    raw = getattr(ufunc, "__name__", None) or getattr(ufunc, "name", "?")
    module = getattr(ufunc, "module", None) or getattr(ufunc, "__module__", None)  # SpecialUfunc, NumPy
    for prefix, cupy_module in (("cupyx_scipy_special_", "cupyx.scipy.special"), ("cupy_", "cupy")):
        if raw.startswith(prefix):
            name = raw.removeprefix(prefix)
            special = sys.modules.get("cupyx.scipy.special")
            if special is not None and getattr(special, name, None) is ufunc:
                cupy_module = "cupyx.scipy.special"
            return cupy_module, name
    if module and module != "numpy._core.umath":
        return ("numpy" if module.startswith("numpy") else module), raw
    for candidate in ("numpy", "scipy.special"):
        if getattr(sys.modules.get(candidate), raw, None) is ufunc:
            return candidate, raw
    return "numpy" if isinstance(ufunc, np.ufunc) and getattr(np, raw, None) is ufunc else "a ufunc of", raw


def apply_ufunc(ufunc: Any, args: tuple, kwargs: dict | None = None) -> Tracer:
    """Trace ``ufunc(*args, **kwargs)`` (a NumPy or SciPy ufunc, or a CuPy one mapped to NumPy's by name)."""
    module, name = ufunc_origin(ufunc)
    qualified = f"{module}.{name}"
    kwargs = dict(kwargs or {})
    if kwargs.get("out") is not None:  # np.add(x, y, out=x): an in-place update of a traced array
        from fusec.frontend.inplace import ufunc_into

        return ufunc_into(ufunc, args, kwargs, qualified)
    out_dtype = kwargs.pop("dtype", None)
    for key in ("out", "where", "casting", "order", "subok", "signature", "axes", "axis"):
        if kwargs.get(key) not in (None, True) or (key == "where" and kwargs.get(key) is False):
            raise UnsupportedError(f"the {key}= argument of {qualified} is not supported inside a fused function",
                                   hint="compute the full result and select with np.where, or use out= on the call")
        kwargs.pop(key, None)
    if kwargs:
        raise UnsupportedError(f"arguments {sorted(kwargs)} of {qualified} are not supported")
    if name == "where":
        return where(*args)
    if name == "clip":
        return clip(*args)
    composite = COMPOSITE_UFUNCS.get(name)
    if composite is not None:
        if out_dtype is not None:
            raise UnsupportedError(f"the dtype= argument of {qualified} is not supported inside a fused function",
                                   hint="cast the operands (x.astype(...)) or the result instead")
        return composite(*args)
    op = _UFUNC_OPS.get(name)
    if op is None or (op.module != module and module in ("numpy", "scipy.special")):
        raise UnsupportedError(f"{qualified} is not supported by fusec",
                               hint="see the list of supported ops in fusec's docs/ops.md")
    if len(args) != op.arity:
        raise FusecTypeError(f"{qualified} takes {op.arity} arguments, got {len(args)}")
    if op.name == "pow" and len(args) == 2 and isinstance(args[1], Scalar):
        args[1].concrete("an exponent")  # NumPy checks its sign (ints), x ** 2 is square: static
    xs = [_operand(a, f"argument of {name}") for a in args]
    decided = _compare_beyond_range(op.ufunc.__name__, xs) if out_dtype is None else None
    if decided is not None:
        return Tracer(decided)
    probe = tuple(_dtype_or_weak(x) for x in xs)
    try:
        if out_dtype is not None:
            sig = (None,) * op.arity + (dtypes.as_dtype(out_dtype),)
            loop = op.ufunc.resolve_dtypes(probe + (None,), signature=sig)
        else:
            loop = op.ufunc.resolve_dtypes(probe + (None,))
    except TypeError:
        shown = ", ".join(t.__name__ if isinstance(t, type) else str(t) for t in probe)
        raise FusecTypeError(
            f"{qualified} has no loop for ({shown})",
            hint="cast the operands first (x.astype(...)) to dtypes the op supports",
        ) from None
    for dt in loop:
        if dt not in dtypes.SHORT_NAMES:
            raise FusecTypeError(f"{qualified} would compute in {dt}, which fusec does not support")
    operands = [_to_dtype(x, dt) for x, dt in zip(xs, loop)]
    exponent = operands[1] if op.name == "pow" else None
    while exponent is not None and exponent.op == "cast":  # np.int8(-2) promoted to the loop's int16
        exponent = exponent.operands[0]
    if exponent is not None and exponent.op == "const" and loop[1].kind == "i" and exponent.attr("value") < 0:
        raise FusecValueError("Integers to negative integer powers are not allowed.",
                              hint="use a float base or exponent (x ** -1.0, or x.astype(float) ** n)")
    return Tracer(_node(op.name, operands))


# --- array functions -----------------------------------------------------------------------------
def where(cond: Any, a: Any = None, b: Any = None) -> Tracer:
    if a is None or b is None:
        raise UnsupportedError("np.where with one argument (nonzero) is not supported",
                               hint="use np.where(cond, a, b)")
    c = _to_dtype_cond(_operand(cond, "argument of where"))
    xa, xb = _operand(a, "argument of where"), _operand(b, "argument of where")
    result = _result_type(xa, xb)
    return Tracer(_node("where", [c, _to_dtype(xa, result), _to_dtype(xb, result)]))


def _to_dtype_cond(x: Node | _Weak) -> Node:
    if isinstance(x, _Weak):
        return _const(bool(x.value), dtypes.BOOL)
    return cast(x, dtypes.BOOL)


def clip(a: Any, a_min: Any = None, a_max: Any = None) -> Tracer:
    """``np.clip`` as ``minimum(maximum(a, lo), hi)``, with the dtype NumPy's clip loop picks."""
    x = _operand(a, "argument of clip")
    if a_min is None and a_max is None:
        return Tracer(x) if isinstance(x, Node) else Tracer(_to_dtype(x, np.dtype(type(x.value))))
    bounds = [_operand(v, "bound of clip") if v is not None else None for v in (a_min, a_max)]
    dt = _result_type(x, *(v for v in bounds if v is not None))
    out = _to_dtype(x, dt)
    if dt.kind in "iu":  # NumPy clips u8 to a Python int bound outside its range (clip(u8, -1, 300))
        info = np.iinfo(dt)
        bounds = [_Weak(min(max(v.value, info.min), info.max)) if isinstance(v, _Weak) and isinstance(v.value, int)
                  else v for v in bounds]
    lo, hi = bounds
    if lo is not None:
        out = apply_ufunc(np.maximum, (Tracer(out), Tracer(_to_dtype(lo, dt)))).node
    if hi is not None:
        out = apply_ufunc(np.minimum, (Tracer(out), Tracer(_to_dtype(hi, dt)))).node
    return Tracer(out)


def _check_no_out(name: str, **kwargs: Any) -> None:
    for key, value in kwargs.items():
        if value is not None and value is not np._NoValue:
            raise UnsupportedError(f"the {key}= argument of {name} is not supported inside a fused function")


def _reduce(op: str, x: Node, axes: tuple[int, ...], keepdims: bool) -> Node:
    r = _node(op, [x], {"axes": list(axes), "keepdims": True})
    return _squeeze(r, axes) if not keepdims else r


def _squeeze(x: Node, axes: tuple[int, ...]) -> Node:
    return _node("squeeze", [x], {"axes": list(axes)}) if axes else x


def reduction(name: str, a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
              keepdims: Any = False, ddof: Any = 0, initial: Any = None, where: Any = None, **unknown: Any) -> Tracer:
    """Trace ``np.<name>(a, axis, dtype, keepdims, ddof)`` for every reduction fusec supports."""
    if unknown:
        raise FusecTypeError(f"{name}() takes no keyword argument '{next(iter(unknown))}'",
                             hint=keyword_hint(unknown))
    _check_no_out(name, out=out)
    if keepdims is np._NoValue:
        keepdims = False
    x = _operand(a, f"argument of {name}")
    if isinstance(x, _Weak):
        x = _weak_default(x)
    keepdims = bool(keepdims)
    if initial is np._NoValue:
        initial = None
    if where is np._NoValue or where is True:
        where = None
    if initial is not None or where is not None:
        return _masked_reduction(name, x, axis, dtype, keepdims, initial, where)
    is_arg = name in ("argmax", "argmin")
    if x.ndim == 0 and name not in ("mean", "var", "std") and _is_axis_zero_or_last(axis):
        axes: tuple[int, ...] = ()  # NumPy's ufunc reductions take axis 0 (or -1) of a 0-d array as no axis
    else:
        axes = normalize_axes(axis, x.ndim, allow_tuple=not is_arg)
    acc = dtypes.as_dtype(dtype) if dtype is not None else None

    if name in ("sum", "prod", "nansum"):
        acc = acc or dtypes.sum_dtype(x.dtype)
        if name == "nansum":
            if x.dtype.kind == "f":
                isnan = _node("isnan", [x])
                x = _node("where", [isnan, _const(0, x.dtype), x])
            name = "sum"
        return Tracer(_reduce(name, cast(x, acc), axes, keepdims))
    if name in ("max", "amax", "min", "amin", "nanmax", "nanmin"):
        op = {"amax": "max", "amin": "min"}.get(name, name)
        return Tracer(_reduce(op, x, axes, keepdims))
    if is_arg:
        return Tracer(_reduce(name, x, axes, keepdims))
    if name in ("any", "all"):
        return Tracer(_reduce(name, cast(x, dtypes.BOOL), axes, keepdims))
    if name == "mean":
        acc_dt, result_dt = (acc, acc) if acc is not None else dtypes.mean_dtype(x.dtype)
        m = _mean(cast(x, acc_dt), axes)
        return Tracer(_squeeze(cast(m, result_dt), axes) if not keepdims else cast(m, result_dt))
    if name in ("var", "std"):
        return Tracer(_variance(x, axes, keepdims, acc, ddof, name == "std"))
    raise UnsupportedError(f"numpy.{name} is not supported by fusec")


_IDENTITY = {"sum": 0, "nansum": 0, "prod": 1, "any": False, "all": True, "mean": 0}


def _masked_reduction(name: str, x: Node, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any) -> Tracer:
    """``np.<name>(x, ..., initial=, where=)``: the elements ``where`` leaves out replaced by the reduction's
    identity (by ``initial`` for max and min, which have none, as NumPy requires), then ``initial`` combined
    into the result as one more element; a mean divides by the count ``where`` selects."""
    op = {"amax": "max", "amin": "min"}.get(name, name)
    if op in ("var", "std", "argmax", "argmin") or (op == "mean" and initial is not None):
        bad = "where=" if where is not None else "initial="
        raise UnsupportedError(f"the {bad} argument of {name} is not supported inside a fused function",
                               hint="select the elements with np.where first")
    maximal = op in ("max", "min", "nanmax", "nanmin")
    if where is not None and maximal and initial is None:
        raise FusecValueError(f"reduction operation '{'maximum' if 'max' in op else 'minimum'}' does not have an "
                              "identity, so to use a where mask one has to specify 'initial'")
    if where is not None:
        mask = cast(_as_node(where, f"where= of {name}"), dtypes.BOOL)
        shape = broadcast_shapes(x.shape, mask.shape, what=f"where= of {name}")
        if shape != x.shape:
            raise FusecValueError(f"where= of shape {mask.shape} does not broadcast to the array's {x.shape}")
        fill = initial if maximal else _IDENTITY[op]
        x = _node("where", [mask, x, _weak_to(fill, x.dtype)])
        if op == "mean":
            total = reduction("sum", Tracer(x), axis, dtype, keepdims=keepdims).node
            count = reduction("sum", Tracer(_node("broadcast_to", [mask], {"shape": list(shape)})
                                            if mask.shape != shape else mask), axis, keepdims=keepdims).node
            result_dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.mean_dtype(x.dtype)[1]
            return Tracer(cast(_node("div", [cast(total, dtypes.FLOAT64), cast(count, dtypes.FLOAT64)]), result_dt))
    empty = _reduced_shape_if_empty(x, axis, keepdims) if maximal and initial is not None else None
    if empty is not None:  # max/min over an empty extent: ``initial`` alone, as NumPy gives it
        fill = _weak_to(initial, x.dtype)
        result = Tracer(_node("broadcast_to", [fill], {"shape": list(empty)}) if empty else fill)
    else:
        result = reduction(name, Tracer(x), axis, dtype, keepdims=keepdims)
    if initial is None:
        return result
    combine = {"sum": np.add, "nansum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
               "nanmax": np.fmax, "nanmin": np.fmin, "any": np.logical_or, "all": np.logical_and}[op]
    return Tracer(cast(apply_ufunc(combine, (result, initial)).node, result.node.dtype))


def _reduced_shape_if_empty(x: Node, axis: Any, keepdims: bool) -> tuple[int, ...] | None:
    """The result shape of reducing ``x`` over ``axis`` when an axis reduced is empty (nothing to combine), else
    None."""
    if x.ndim == 0:
        return None
    axes = normalize_axes(axis, x.ndim, allow_tuple=True)
    return reduced_shape(x.shape, axes, keepdims) if any(x.shape[a] == 0 for a in axes) else None


def _weak_to(value: Any, dt: np.dtype) -> Node:
    """A Python number (or a traced value) as ``dt``, cast as NumPy's where would cast it."""
    if isinstance(value, Tracer):
        return cast(value.node, dt)
    return _const(bool(value) if dt.kind == "b" else value, dt)


def _running_extreme(name: str, a: Any, axis: Any = 0, dtype: Any = None, out: Any = None) -> Tracer:
    """``np.maximum.accumulate`` / ``np.minimum.accumulate``: the ``cummax`` / ``cummin`` scan along ``axis``."""
    _check_no_out(f"{name}.accumulate", out=out)
    x = _as_node(a, f"{name}.accumulate")
    if dtype is not None:
        x = cast(x, dtypes.as_dtype(np.dtype(dtype)))
    if x.ndim == 0:
        raise FusecValueError("cannot accumulate on a scalar")
    (ax,) = normalize_axes(axis, x.ndim, allow_tuple=False)
    op = "cummax" if name == "maximum" else "cummin"
    if x.dtype == dtypes.BOOL:  # over 0/1 bytes, the same order
        return Tracer(cast(_node(op, [cast(x, np.dtype(np.uint8))], {"axis": ax}), dtypes.BOOL))
    return Tracer(_node(op, [x], {"axis": ax}))


def _is_axis_zero_or_last(axis: Any) -> bool:
    """Whether ``axis`` is the integer 0 or -1 (not a tuple, not a bool)."""
    return (isinstance(axis, (int, np.integer)) and not isinstance(axis, (bool, np.bool_))
            and int(axis) in (0, -1))


def _divide_by_count(total: Node, count: Node) -> Node:
    """NumPy divides a sum by an intp count: in float64, then back to the sum's dtype."""
    quotient = _node("div", [cast(total, dtypes.FLOAT64), count])
    return cast(quotient, total.dtype)


def _count(x: Node, axes: tuple[int, ...]) -> Node:
    """The element count of ``x`` over ``axes`` (canonicalize re-points it at an input)."""
    return _node("size", [x], {"axes": list(axes)}, dtype=dtypes.FLOAT64)


def _mean(x: Node, axes: tuple[int, ...]) -> Node:
    total = _node("sum", [x], {"axes": list(axes), "keepdims": True})
    return _divide_by_count(total, _count(x, axes))


def _variance(x: Node, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype | None, ddof: Any,
              take_sqrt: bool) -> Node:
    """NumPy's ``_var``: mean in the sum dtype, squared deviations, their sum over ``n - ddof``."""
    if not isinstance(ddof, (int, np.integer)) or isinstance(ddof, bool):
        raise UnsupportedError("ddof must be a Python int inside a fused function")
    if dtype is None and x.dtype.kind in "biu":
        dtype = dtypes.FLOAT64
    acc = dtype or x.dtype
    mean = _mean(cast(x, acc), axes)
    deviation = apply_ufunc(np.subtract, (Tracer(x), Tracer(mean))).node
    squared = _node("square", [deviation]) if deviation.dtype.kind == "f" else \
        apply_ufunc(np.square, (Tracer(deviation),)).node
    total = _node("sum", [cast(squared, acc)], {"axes": list(axes), "keepdims": True})
    count = _count(x, axes)
    if ddof:
        count = _node("maximum", [_node("sub", [count, _const(float(ddof), dtypes.FLOAT64)]),
                                  _const(0.0, dtypes.FLOAT64)])
    result = _divide_by_count(total, count)
    if take_sqrt:
        result = _node("sqrt", [result])
    return _squeeze(result, axes) if not keepdims else result


def expand_dims(a: Any, axis: Any) -> Tracer:
    x = _as_node(a, "expand_dims")
    n_new = len(axis) if isinstance(axis, (tuple, list)) else 1
    axes = normalize_axes(axis, x.ndim + n_new)
    return Tracer(_node("expand_dims", [x], {"axes": list(axes)}))


def squeeze(a: Any, axis: Any = None) -> Tracer:
    x = _as_node(a, "squeeze")
    if axis is None:
        _mark_shape_read()
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(axis, x.ndim)
    return Tracer(_squeeze(x, axes))


def broadcast_to(a: Any, shape: Any) -> Tracer:
    x = _as_node(a, "broadcast_to")
    target = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    return Tracer(_node("broadcast_to", [x], {"shape": list(target)}))


def transpose(a: Any, axes: Any = None) -> Tracer:
    x = _as_node(a, "transpose")
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        perm = tuple(int(p) % max(x.ndim, 1) for p in axes)
        if sorted(perm) != list(range(x.ndim)):
            raise FusecTypeError(f"axes {tuple(axes)} don't match an array of dimension {x.ndim}")
    return Tracer(_node("transpose", [x], {"perm": list(perm)}))


def _index_bound(value: Any, what: str) -> int | None:
    """A slice bound or an integer index as an int (NumPy's ``operator.index`` rule)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise UnsupportedError(f"a boolean {what} ({value!r}) is not supported inside a fused function",
                               hint="select with np.where(mask, x, other), or index before the call")
    try:
        return operator.index(value)
    except TypeError:
        raise FusecTypeError(f"slice indices must be integers or None, got {type(value).__name__} {value!r}",
                             hint="use Python ints for indices and slice bounds") from None


def basic_index(x: Node, key: Any) -> Node:
    """``x[key]`` for NumPy's basic indexing: integers (negative too), slices of any step, None/np.newaxis and
    one Ellipsis, in any combination. One ``slice`` node (integers as single-element ranges, step 0), then a
    ``squeeze`` of the integer axes and an ``expand_dims`` of the new ones."""
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        if k is None or k is Ellipsis or isinstance(k, slice):
            continue
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            what = "a traced array" if isinstance(k, Tracer) else type(k).__name__
            raise UnsupportedError(
                f"indexing with {what} is not supported inside a fused function (only integers, slices, "
                "None/np.newaxis, ... and integer arrays)",
                hint="index with integers, slices, None, ... or integer arrays (x[idx], np.take_along_axis)",
            )
    if sum(k is Ellipsis for k in keys) > 1:
        raise FusecIndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise FusecIndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {n_real} were indexed")
    if Ellipsis not in keys:
        keys = keys + (Ellipsis,)
    expanded: list[Any] = []
    for k in keys:
        expanded.extend([slice(None)] * (x.ndim - n_real) if k is Ellipsis else [k])
    starts: list[int | None] = []
    stops: list[int | None] = []
    steps: list[int | None] = []
    squeezed, new_axes, out_axis = [], [], 0
    for k in expanded:
        if k is None:
            new_axes.append(out_axis)
            out_axis += 1
        elif isinstance(k, slice):
            step = _index_bound(k.step, "slice step")
            if step == 0:
                raise FusecValueError("slice step cannot be zero")
            starts.append(_index_bound(k.start, "slice start"))
            stops.append(_index_bound(k.stop, "slice stop"))
            steps.append(step)
            out_axis += 1
        else:
            squeezed.append(len(starts))
            starts.append(_index_bound(k, "index"))
            stops.append(None)
            steps.append(0)
    if any(not (a is None and b is None and c in (None, 1)) for a, b, c in zip(starts, stops, steps)):
        x = _node("slice", [x], {"start": starts, "stop": stops, "step": steps})
    x = _squeeze(x, tuple(squeezed))
    return _node("expand_dims", [x], {"axes": new_axes}) if new_axes else x


def is_view_index(key: Any, ndim: int) -> bool:
    """Whether NumPy's ``x[key]`` (of ``ndim`` dimensions) is a view of ``x``: basic indexing, unless every axis is
    indexed by an integer (a scalar then, a copy: ``x[0]`` of a 1-d ``x``, not ``x[0, ...]``). An index array makes
    a copy."""
    keys = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (Tracer, list, np.ndarray)) or type(k).__module__.startswith("cupy") for k in keys):
        return False
    return ndim > 0 or any(k is Ellipsis for k in keys)


def static_number(value: Any, what: str) -> Any:
    """A number that decides a shape, a count or an offset (``np.zeros(n)``, ``np.roll(x, k)``): a Python or NumPy
    number as it is, a runtime scalar made static (a new value retraces), a traced array refused."""
    if isinstance(value, Tracer):
        raise FusecTypeError(f"the {what} is a traced array: it decides the result's shape, so it must be a number",
                             hint="use x.shape[k] or a Python number; an array's values are not known while tracing")
    if isinstance(value, Scalar):
        return value.concrete(f"the {what} (it decides the result's shape)")
    return value


def _as_node(a: Any, what: str) -> Node:
    x = _operand(a, f"argument of {what}")
    if isinstance(x, _Weak):
        x = _weak_default(x)
    return x


def _reduction_function(name: str) -> Callable[..., Tracer]:
    def fn(a: Any, axis: Any = None, *args: Any, **kwargs: Any) -> Tracer:
        if args:
            raise UnsupportedError(f"pass the arguments of {name} after axis by keyword")
        return reduction(name, a, axis, **kwargs)

    return fn


FUNCTIONS: dict[str, Callable[..., Tracer]] = {
    name: _reduction_function(name)
    for name in ("sum", "prod", "max", "amax", "min", "amin", "nanmax", "nanmin", "mean", "var", "std",
                 "argmax", "argmin", "any", "all", "nansum")
}
FUNCTIONS.update(where=where, clip=clip, expand_dims=expand_dims, squeeze=squeeze,
                 broadcast_to=broadcast_to, transpose=transpose)


def call_function(name: str, qualified: str, args: tuple, kwargs: dict) -> Any:
    """``FUNCTIONS[name](*args, **kwargs)``, as the traced function called it (``qualified``: ``numpy.flip``,
    ``x.T``; :func:`fusec.frontend.hints.call_checked`'s errors); a result that NumPy makes a view of an argument is
    recorded as one (:mod:`fusec.frontend.aliases`), so that in-place updates of either show in the other."""
    impl = FUNCTIONS[name]
    result = call_checked(qualified, impl, args, kwargs)
    kind = aliases.kind_of(name, args, result) if kwargs.get("copy") is not True else None  # copy=True: a copy
    if kind == aliases.EACH and isinstance(result, (tuple, list)) and len(result) == len(args):
        for i, (a, r) in enumerate(zip(args, result)):
            if isinstance(a, Tracer):
                aliases.note(a, r, lambda n, i=i: impl(*args[:i], Tracer(n), *args[i + 1:], **kwargs)[i].node, name)
    elif kind is not None and isinstance(args[0], Tracer):
        aliases.note_results(args[0], result, lambda n: impl(Tracer(n), *args[1:], **kwargs), name,
                             definite=kind != aliases.MAYBE_VIEW)
    return result


# --- the tracer value ----------------------------------------------------------------------------
def _binary(ufunc: np.ufunc, reflected: bool = False) -> Callable[[Tracer, Any], Tracer]:
    if reflected:
        return lambda self, other: apply_ufunc(ufunc, (other, self))
    return lambda self, other: apply_ufunc(ufunc, (self, other))


_FAST_SCALAR_POWER = {(int, 2): np.square, (int, -1): np.reciprocal, (float, 0.5): np.sqrt}


class Tracer:
    """A traced array: what the user's function sees in place of each array argument."""

    __slots__ = ("node", "_view", "__weakref__")  # _view: what this one is a view of (fusec.frontend.aliases)
    __array_priority__ = 1000

    def __init__(self, node: Node):
        self.node = node  # rebound by in-place updates (x += 1), which every reference to this Tracer sees
        self._view: aliases.View | None = None

    # -- introspection
    @property
    def dtype(self) -> np.dtype:
        return self.node.dtype

    @property
    def ndim(self) -> int:
        return self.node.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        _mark_shape_read()
        return self.node.shape

    @property
    def size(self) -> int:
        _mark_shape_read()
        return self.node.size

    def __len__(self) -> int:
        if self.node.ndim == 0:
            raise FusecTypeError("len() of a 0-d array")
        _mark_shape_read()
        return self.node.shape[0]

    def __repr__(self) -> str:
        return f"Tracer({dtypes.short(self.dtype)}{list(self.node.shape)})"

    # -- protocols
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Tracer:
        if method == "__call__":
            return apply_ufunc(ufunc, inputs, kwargs)
        if method == "reduce":
            reducer = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "fmax": "nanmax",
                       "fmin": "nanmin", "logical_or": "any", "logical_and": "all"}.get(ufunc.__name__)
            if reducer is not None and len(inputs) == 1:
                kwargs.setdefault("axis", 0)
                return reduction(reducer, inputs[0], **kwargs)
        if method == "accumulate" and ufunc.__name__ in ("add", "multiply") and len(inputs) == 1:
            x = _as_node(inputs[0], f"{ufunc.__name__}.accumulate")  # np.cumsum / np.cumprod along axis 0
            if x.dtype != dtypes.BOOL:
                kwargs.setdefault("axis", 0)
                return FUNCTIONS["cumsum" if ufunc.__name__ == "add" else "cumprod"](Tracer(x), **kwargs)
        if method == "accumulate" and ufunc.__name__ in ("maximum", "minimum") and len(inputs) == 1:
            return _running_extreme(ufunc.__name__, inputs[0], **kwargs)
        module, name = ufunc_origin(ufunc)
        raise UnsupportedError(f"{module}.{name}.{method} is not supported by fusec")

    def __getattr__(self, name: str) -> Any:  # only for names a Tracer does not have
        raise FusecAttributeError(f"traced arrays have no attribute '{name}' (x.{name})", hint=attribute_hint(name))

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Tracer:
        module = getattr(func, "__module__", None) or "numpy"
        module = "numpy" if module.startswith("numpy._") else module  # numpy._core.fromnumeric: numpy
        key = func.__name__ if module == "numpy" else f"{module.removeprefix('numpy.')}.{func.__name__}"
        impl = FUNCTIONS.get(key)
        if impl is None:
            raise UnsupportedError(f"{module}.{func.__name__} is not supported by fusec",
                                   hint=unsupported_hint(func.__name__))
        return call_function(key, f"{module}.{func.__name__}", args, kwargs)

    def __cupy_override_elementwise_kernel__(self, kernel: Any, *args: Any, **kwargs: Any) -> Tracer:
        return apply_ufunc(kernel, args, kwargs)

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TraceError("a traced value cannot become a concrete NumPy array while tracing "
                         "(np.asarray/np.array, or mixing with a non-array library)",
                         hint="keep the computation in NumPy/CuPy calls on the traced arrays")

    # -- Python control flow and conversions
    def __bool__(self) -> bool:
        raise TraceError("Python control flow on a traced value ('if', 'while', 'and', 'or', bool()) "
                         "cannot be traced: the value is not known until the kernel runs",
                         hint="select values with np.where(cond, a, b)")

    def _conversion(self, kind: str) -> Any:
        raise TraceError(f"{kind}() of a traced value cannot be traced: the value is not known until the kernel runs",
                         hint="keep it as an array (0-d results are fine), or compute it outside the function")

    def __float__(self) -> float:
        return self._conversion("float")

    def __int__(self) -> int:
        return self._conversion("int")

    def __index__(self) -> int:
        return self._conversion("index")

    def __complex__(self) -> complex:
        return self._conversion("complex")

    def __iter__(self) -> Any:
        raise TraceError("iterating over a traced array is not supported",
                         hint="use vectorized operations (reductions with axis=...)")

    def __getitem__(self, key: Any) -> Tracer:
        from fusec.frontend.gather_trace import index  # basic indexing, or a gather for integer-array indices

        result = Tracer(index(self.node, key))
        if is_view_index(key, result.ndim):
            aliases.note(self, result, lambda n: index(n, key), "indexing", key=key)
        return result

    # -- methods CuPy's functions forward to, and ndarray's own
    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("sum", self, axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

    def prod(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("prod", self, axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

    def max(self, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("max", self, axis, out=out, keepdims=keepdims, **kw)

    def min(self, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("min", self, axis, out=out, keepdims=keepdims, **kw)

    def mean(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("mean", self, axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

    def var(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
            **kw: Any) -> Tracer:
        return reduction("var", self, axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)

    def std(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
            **kw: Any) -> Tracer:
        return reduction("std", self, axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)

    def argmax(self, axis: Any = None, out: Any = None, *, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("argmax", self, axis, out=out, keepdims=keepdims, **kw)

    def argmin(self, axis: Any = None, out: Any = None, *, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("argmin", self, axis, out=out, keepdims=keepdims, **kw)

    def any(self, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("any", self, axis, out=out, keepdims=keepdims, **kw)

    def all(self, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("all", self, axis, out=out, keepdims=keepdims, **kw)

    def astype(self, dtype: Any, order: Any = "K", casting: Any = "unsafe", subok: Any = True,
               copy: Any = True) -> Tracer:
        dt = dtypes.as_dtype(dtype)
        if casting != "unsafe" and not np.can_cast(self.dtype, dt, casting):
            raise FusecTypeError(f"cannot cast {self.dtype} to {dt} with casting={casting!r}")
        if not copy and dt == self.dtype:
            return self  # NumPy returns the array itself
        return Tracer(_node("cast", [self.node], dtype=dt))  # a new array, even of the same dtype

    def clip(self, min: Any = None, max: Any = None, **kw: Any) -> Tracer:  # noqa: A002
        _check_no_out("clip", **kw)
        return clip(self, min, max)

    def transpose(self, *axes: Any) -> Tracer:
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return call_function("transpose", "x.transpose", (self, axes or None), {})

    @property
    def T(self) -> Tracer:
        return call_function("transpose", "x.T", (self,), {})

    def squeeze(self, axis: Any = None) -> Tracer:
        return call_function("squeeze", "x.squeeze", (self, axis), {})

    def copy(self, *args: Any, **kwargs: Any) -> Tracer:
        return Tracer(self.node)  # a new array: an in-place update of the copy leaves this one alone

    def round(self, decimals: int = 0, out: Any = None) -> Tracer:
        return FUNCTIONS["round"](self, decimals, out)

    def __round__(self, ndigits: int | None = None) -> Tracer:
        raise FusecTypeError("round() of a traced array (NumPy arrays do not support Python's round either)",
                             hint="use np.round(x, decimals) or x.round(decimals)")

    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> Tracer:
        return call_function("reshape", "x.reshape", (self, shape[0] if len(shape) == 1 else shape),
                             {"order": order, "copy": copy})

    def ravel(self, order: str = "C") -> Tracer:
        return call_function("ravel", "x.ravel", (self, order), {})

    def flatten(self, order: str = "C") -> Tracer:
        return Tracer(FUNCTIONS["ravel"](self, order).node)  # a copy, unlike ravel

    def swapaxes(self, axis1: Any, axis2: Any) -> Tracer:
        return call_function("swapaxes", "x.swapaxes", (self, axis1, axis2), {})

    @property
    def mT(self) -> Tracer:
        return call_function("matrix_transpose", "x.mT", (self,), {})

    def __matmul__(self, other: Any) -> Tracer:
        raise UnsupportedError("matrix multiplication (@) is not supported by fusec",
                               hint="fusec fuses elementwise ops and reductions; call a BLAS outside")

    __rmatmul__ = __matmul__

    __add__ = _binary(np.add)
    __radd__ = _binary(np.add, True)
    __sub__ = _binary(np.subtract)
    __rsub__ = _binary(np.subtract, True)
    __mul__ = _binary(np.multiply)
    __rmul__ = _binary(np.multiply, True)
    __truediv__ = _binary(np.true_divide)
    __rtruediv__ = _binary(np.true_divide, True)
    __floordiv__ = _binary(np.floor_divide)
    __rfloordiv__ = _binary(np.floor_divide, True)
    __mod__ = _binary(np.remainder)
    __rmod__ = _binary(np.remainder, True)
    def __pow__(self, other: Any) -> Tracer:
        """``x ** p``: NumPy's ``ndarray.__pow__`` takes a float array to the Python int 2 or -1 or the Python
        float 0.5 with ``square``, ``reciprocal`` or ``sqrt`` (its fast_scalar_power), which differ from
        ``power`` (float16 ``-0.0 ** 0.5`` is -0.0, ``-inf ** 0.5`` NaN); ``np.power(x, p)`` stays ``power``."""
        if isinstance(other, Scalar):
            other.concrete("an exponent")  # x ** 2 is square, x ** 0.5 sqrt: which op depends on the value
        fast = _FAST_SCALAR_POWER.get((type(other), other)) if type(other) in (int, float) else None
        if fast is not None and self.dtype.kind == "f":
            return apply_ufunc(fast, (self,))
        return apply_ufunc(np.power, (self, other))

    __rpow__ = _binary(np.power, True)
    __and__ = _binary(np.bitwise_and)
    __rand__ = _binary(np.bitwise_and, True)
    __or__ = _binary(np.bitwise_or)
    __ror__ = _binary(np.bitwise_or, True)
    __xor__ = _binary(np.bitwise_xor)
    __rxor__ = _binary(np.bitwise_xor, True)
    __lshift__ = _binary(np.left_shift)
    __rlshift__ = _binary(np.left_shift, True)
    __rshift__ = _binary(np.right_shift)
    __rrshift__ = _binary(np.right_shift, True)
    __lt__ = _binary(np.less)
    __le__ = _binary(np.less_equal)
    __gt__ = _binary(np.greater)
    __ge__ = _binary(np.greater_equal)
    __eq__ = _binary(np.equal)  # type: ignore[assignment]
    __ne__ = _binary(np.not_equal)  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]

    def __neg__(self) -> Tracer:
        return apply_ufunc(np.negative, (self,))

    def __pos__(self) -> Tracer:
        return apply_ufunc(np.positive, (self,))

    def __abs__(self) -> Tracer:
        return apply_ufunc(np.absolute, (self,))

    def __invert__(self) -> Tracer:
        return apply_ufunc(np.invert, (self,))

    def __divmod__(self, other: Any) -> tuple[Tracer, Tracer]:
        return apply_ufunc(np.floor_divide, (self, other)), apply_ufunc(np.remainder, (self, other))


# argument mismatches of the methods are FusecTypeErrors (x.squeeze(dim=1), x.astype()), never raw TypeErrors
for _name in ("sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any", "all", "astype", "clip",
              "transpose", "squeeze", "copy", "reshape", "round", "ravel", "flatten", "swapaxes"):
    setattr(Tracer, _name, checked_method(_name, getattr(Tracer, _name)))

# ``u8 + 300`` raises during const creation; keep the OverflowError class visible to users.
__all__ = ["Tracer", "apply_ufunc", "reduction", "FUNCTIONS", "FusecOverflowError"]


# --- tracing a whole function --------------------------------------------------------------------
_trace_lock = threading.RLock()


# Library functions that never reach a Tracer by themselves, wrapped while tracing to let Tracers through:
# (module, attribute, fusec's FUNCTIONS name). CuPy's functions type-check their argument in Cython or build
# CuPy arrays of their own (``cupy.take_along_axis`` indexes with ``cupy.arange``), so every function fusec
# traces is wrapped in ``cupy`` under its name (:func:`wrapped_functions`: whatever FUNCTIONS holds, so a new
# traced function reaches CuPy users without a list to update; ufuncs are not wrapped, they dispatch to
# Tracers themselves; the array creators of :data:`CREATED` are wrapped their own way); SciPy's and cupyx's
# softmax family convert it to an array first.
_SOFTMAX_FAMILY = ("logsumexp", "softmax", "log_softmax")
WRAPPED: tuple[tuple[str, str, str], ...] = (
    ("cupy.linalg", "norm", "linalg.norm"),
    *(("scipy.special", name, name) for name in _SOFTMAX_FAMILY),
    *(("cupyx.scipy.special", name, name) for name in _SOFTMAX_FAMILY),
)


def wrapped_functions() -> tuple[tuple[str, str, str], ...]:
    """What tracing wraps: :data:`WRAPPED` and every dotless name of :data:`FUNCTIONS` in ``cupy``."""
    created = {name for _, name, _ in CREATED}
    return (*(("cupy", name, name) for name in sorted(FUNCTIONS) if "." not in name and name not in created),
            *WRAPPED)


def _has_tracer(args: tuple, kwargs: dict) -> bool:
    """Whether a Tracer is among the arguments, or in a list or tuple of them (``np.concatenate([a, b])``)."""
    def traced(x: Any) -> bool:
        return isinstance(x, Tracer) or (isinstance(x, (list, tuple)) and any(isinstance(y, Tracer) for y in x))
    return any(traced(x) for x in args) or any(traced(x) for x in kwargs.values())


# Functions that make an array from numbers alone (``np.arange``): a call from the traced function's own code
# (not from a library's) makes fusec's traced array instead of a concrete one: (module, attribute, FUNCTIONS name)
CREATED: tuple[tuple[str, str, str], ...] = tuple(
    (module, name, name) for module in ("numpy", "cupy") for name in ("arange", "indices"))


def _creator_wrapper(original: Any, qualified: str, impl: str, thread: int) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_code.co_filename
        if threading.get_ident() != thread or library_file(caller):
            return original(*args, **kwargs)
        return call_function(impl, qualified, args, kwargs)

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def _wrapper(original: Any, qualified: str, impl: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _has_tracer(args, kwargs):
            return call_function(impl, qualified, args, kwargs)
        return original(*args, **kwargs)

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def _patch_libraries(fn: Callable[..., Any]) -> list[tuple[Any, str, Any]]:
    """Wrap the :func:`wrapped_functions` of the libraries already imported, in their modules and where the
    traced function's globals (``from scipy.special import softmax``) or closure cells hold them. A function
    reached any other way (a default argument, another module's helper) is SciPy's own, and fails with
    the tracer's error for converting a traced value. Returns what to restore."""
    patched: list[tuple[Any, str, Any]] = []
    originals: dict[int, Any] = {}
    thread = threading.get_ident()
    for (module_name, name, impl), creator in [*((w, False) for w in wrapped_functions()),
                                               *((c, True) for c in CREATED)]:
        module = sys.modules.get(module_name)
        original = getattr(module, name, None) if module is not None else None
        if original is None or not callable(original) or hasattr(original, "nin"):  # absent, or a ufunc
            continue
        if creator:
            wrapper = _creator_wrapper(original, f"{module_name}.{name}", impl, thread)
        else:
            wrapper = _wrapper(original, f"{module_name}.{name}", impl)
        originals[id(original)] = wrapper
        patched.append((module, name, original))
        setattr(module, name, wrapper)
    user_fn = inspect.unwrap(fn)
    user_globals = getattr(user_fn, "__globals__", None)
    if isinstance(user_globals, dict):
        for key, value in list(user_globals.items()):
            wrapper = originals.get(id(value))
            if wrapper is not None:
                patched.append((user_globals, key, value))
                user_globals[key] = wrapper
    for cell in getattr(user_fn, "__closure__", None) or ():  # a function captured by the traced closure
        try:
            wrapper = originals.get(id(cell.cell_contents))
        except ValueError:  # an empty cell
            continue
        if wrapper is not None:
            patched.append((cell, "cell_contents", cell.cell_contents))
            cell.cell_contents = wrapper
    return patched


def _restore(patched: list[tuple[Any, str, Any]]) -> None:
    for target, name, original in reversed(patched):
        if isinstance(target, dict):
            target[name] = original
        else:
            setattr(target, name, original)


class Traced(NamedTuple):
    """What :func:`trace_function` found: the graph's inputs (arrays, then runtime scalars), the function's
    result as returned, whether it read a concrete size, the runtime scalars that are inputs (in input
    order), the inputs it updated in place: ``(input index, new value)``, and its assignments to part of an
    argument (written after those)."""

    inputs: list[Node]
    result: Any
    shape_read: bool
    scalars: list[Scalar]
    updates: list[tuple[int, Node]]
    parts: list[Any] = []  # assignments to part of an argument, in order (fusec.frontend.slice_assign.PartialUpdate)
    gathers: list[Node] = []  # every gather made, read or not (fusec.frontend.gather_trace.unread_index_checks)


def trace_function(fn: Callable[..., Any], params: list[tuple[str, Any]], n_positional: int | None = None,
                   runtime: frozenset[str] = frozenset()) -> Traced:
    """Call ``fn`` with a Tracer for every ``(name, ArraySpec-like)`` and the other values as given.

    ``params`` lists each argument by name: array-likes (anything with ``shape`` and ``dtype`` that
    is not a scalar) become ``input`` nodes; the scalars named in ``runtime`` become
    :class:`fusec.frontend.scalars.Scalar` values (graph inputs after the arrays, where they meet an array);
    everything else is passed through unchanged. The first ``n_positional`` (all by default) are passed
    by position, the others by keyword under their names (keyword-only parameters, ``**kwargs``). Returns
    a :class:`Traced` (a graph only valid for these shapes when it read a size). A use of a runtime
    scalar that needs its value raises :class:`fusec.frontend.scalars.NeedsConcrete`. A raw TypeError or
    AttributeError raised while tracing (NumPy's dispatcher refusing ``np.sum(x, dim=1)``, the user's own)
    becomes a FusecError at the user's line that raised it.
    """
    inputs: list[Node] = []
    tracers: list[Tracer] = []
    call_args: list[Any] = []
    for name, value in params:
        if name in runtime:
            call_args.append(Scalar.argument(name, value))
        elif _is_array_like(value):
            node = make_node("input", (), {"name": name, "index": len(inputs)},
                             dtype=dtypes.as_dtype(value.dtype), shape=tuple(value.shape))
            inputs.append(node)
            tracers.append(Tracer(node))
            call_args.append(tracers[-1])
        else:
            call_args.append(value)
    n = len(params) if n_positional is None else n_positional
    keywords = {name: value for (name, _), value in zip(params[n:], call_args[n:])}
    from fusec.frontend import gather_trace

    with _trace_lock:
        patched = _patch_libraries(fn)
        reset_shape_read()
        scalars.begin(len(inputs), _scalar_input, {name for name, _ in params})
        aliases.begin()
        gather_trace.begin()
        fusec.frontend.slice_assign.begin(tracers)
        try:
            result = fn(*call_args[:n], **keywords)
            for value in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(value, Scalar):  # a scalar returned as it is: an input of its own
                    value.node()
        except (TypeError, AttributeError) as exc:
            if isinstance(exc, FusecError):
                raise
            raise _located(exc) from exc
        finally:
            runtime_inputs = scalars.end()
            aliases.end()
            gathers = gather_trace.end()
            parts, before, new_values = fusec.frontend.slice_assign.end()
            _restore(patched)
        updates, parts = fusec.frontend.slice_assign.final_updates(tracers, inputs, parts, before, new_values)
        return Traced(inputs + [s.node() for s in runtime_inputs], result, shape_was_read(), runtime_inputs, updates,
                      parts, gathers)


def _scalar_input(name: str, index: int, dt: np.dtype) -> Node:
    return make_node("input", (), {"name": name, "index": index}, dtype=dt, shape=())


def _located(exc: TypeError | AttributeError) -> FusecError:
    """``exc`` as a FusecError of the same kind, at the innermost line of the user's that raised it."""
    loc = None
    tb = exc.__traceback__
    while tb is not None:
        if not library_file(tb.tb_frame.f_code.co_filename):
            loc = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    text = str(exc)
    hint = next((h for key, h in KEYWORD_HINTS.items() if f"keyword argument '{key}'" in text), None)
    if isinstance(exc, AttributeError):
        return FusecAttributeError(text, loc=loc, hint=hint)
    return FusecTypeError(text, loc=loc, hint=hint)


def _is_array_like(value: Any) -> bool:
    if isinstance(value, (np.generic, int, float, bool, complex)) or value is None:
        return False
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return True
    return hasattr(value, "shape") and hasattr(value, "dtype")


def return_site(fn: Callable[..., Any], *, returning_dict: bool = False) -> str | None:
    """``file:line`` of the ``return`` statement of ``fn`` that gave its result: the one returning a dict
    display or ``dict(...)`` with ``returning_dict``, else the only one; the ``def`` (or ``lambda``) line
    when that is not decided by the source, None without a code object."""
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    fallback = f"{code.co_filename}:{code.co_firstlineno}"
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, tokenize.TokenError):  # the file under its name is not its source
        return fallback
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        return fallback  # a lambda: its line is its return
    returns = [n for n in _own_nodes(defs[0]) if isinstance(n, ast.Return)]
    if returning_dict:
        dicts = [r for r in returns if isinstance(r.value, (ast.Dict, ast.DictComp)) or (
            isinstance(r.value, ast.Call) and isinstance(r.value.func, ast.Name) and r.value.func.id == "dict")]
        returns = dicts or returns
    if len(returns) != 1:
        return fallback
    return f"{code.co_filename}:{first + returns[0].lineno - 1}"


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The nodes of ``function``'s body, not those of functions or lambdas defined inside it."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def output_node(value: Any, index: int, loc: str | None = None) -> Node:
    """The node of one returned value (a Tracer, or a constant that becomes a 0-d const); errors name
    ``loc`` (the ``return`` line) when given."""
    if isinstance(value, Tracer):
        return value.node
    if value is None:
        raise TraceError(f"output {index} of the fused function is None", loc=loc,
                         hint="return the arrays it computes (a tuple for several)")
    if isinstance(value, dict):
        raise UnsupportedError(f"output {index} of the fused function is a dict", loc=loc,
                               hint="return a tuple (or a list) of arrays; name them at the call site")
    try:
        x = _operand(value, f"output {index}")
    except FusecError as exc:
        raise type(exc)(exc.message, loc=loc or exc.loc, hint=exc.hint) from None
    if isinstance(x, _Weak):
        return _weak_default(x)
    return x


# the everyday functions built from the ops above (logsumexp, softmax, nanmean, ...) register themselves,
# and so do in-place updates (x += 1, x[mask] = v) and the view bookkeeping they need
import fusec.frontend.composite  # noqa: E402, F401
import fusec.frontend.contraction_functions  # noqa: E402, F401
import fusec.frontend.creation_functions  # noqa: E402, F401
import fusec.frontend.elementwise_functions  # noqa: E402, F401
import fusec.frontend.gather_trace  # noqa: E402, F401
import fusec.frontend.inplace  # noqa: E402, F401
import fusec.frontend.join_functions  # noqa: E402, F401
import fusec.frontend.scan_functions  # noqa: E402, F401
import fusec.frontend.shift_functions  # noqa: E402, F401
import fusec.frontend.slice_assign  # noqa: E402, F401
import fusec.frontend.view_functions  # noqa: E402, F401
