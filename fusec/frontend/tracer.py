"""The traced array, :class:`Tracer`, and the tracing of the calls all of the frontend builds on.

A Tracer stands for an array. It answers Python's operators, NumPy's ``__array_ufunc__`` and
``__array_function__`` protocols, CuPy's ``__cupy_override_elementwise_kernel__`` (what CuPy's
ufuncs call on a foreign argument) and the ndarray methods CuPy's functions forward to
(``cp.sum(t)`` calls ``t.sum()``). Each call becomes IR nodes with NumPy 2's dtype rules: the loop
NumPy would pick (``ufunc.resolve_dtypes``, weak Python scalars) decides the casts inserted before
the op, so every IR op sees operands of one loop's dtypes.

Here are what every function module builds on (operands and their NumPy 2 promotion, ufuncs, reductions, the
layout functions NumPy's methods are) and every method and operator of the Tracer. A method that is a NumPy
function of the array implemented in a function module above this one (``x.ravel()``, ``x @ y``, ``x.cumsum()``)
calls that implementation through the registry (:func:`fusec.frontend.registry.implementation` of ``np.ravel``),
as ``np.ravel(x)`` reaches it.

In-place updates: ``x += v``, ``x[mask] = v``, ``x[...] = v``, ``np.add(x, v, out=x)`` (assignment to part of an
argument, ``x[:, k] = v``: :mod:`fusec.frontend.slice_assign`). An update is functional in the IR (a new node) and
rebinds the Tracer object's node (:func:`fusec.frontend.slice_assign.assign`), so every Python name bound to that
object sees it, as with NumPy (``a = x; a += 1`` changes ``x``), and a value read before it keeps the node it read
(``y = x.copy(); x += 1``: ``y`` is ``x``'s old node). Updating a traced *input* makes the trace write the new value
back into the caller's array (``trace_function`` reports which inputs changed; :mod:`fusec.frontend.api` writes
them). The casting rules are NumPy's: augmented assignment casts the ufunc's result to the array's dtype under
``same_kind`` (``int_array += 1.5`` is a TypeError); item assignment casts the value as ``setitem`` does (unsafe,
with NumPy's errors for out-of-range Python ints and NaN into integers). A 0-d value computed in the function
(``x[0]`` of a 1-d ``x``, ``x.sum()``) is a NumPy scalar, which no update changes: ``s += v`` makes a new one (of
the dtype ``s + v`` has). Views (:mod:`fusec.frontend.aliases`): after an update of an array each live view of it
is made again from its new value; an update of a view (``t = x[1:]; t += 1``, ``x.T[0] = v``) writes through it
into the array it views; an update of what may be a view or a copy (``t = x.ravel(); t += 1``) or of a broadcast
is refused with the reason, never computed with stale values.

Anything else (Python control flow on a traced value, an unsupported function) raises a fusec
error naming the user's file and line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from fusec.frontend import aliases, registry, slice_assign
from fusec.frontend.hints import attribute_hint, call_checked, checked_method, keyword_hint, unsupported_hint
from fusec.frontend.indexing import index, is_view_index
from fusec.frontend.nodes import TracedArray, cast, const, mark_shape_read, new_node, squeeze_axes
from fusec.frontend.part_update import updated
from fusec.frontend.registry import implements
from fusec.frontend.scalars import Scalar, read_class
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.infer import broadcast_shapes, normalize_axes, reduced_shape
from fusec.ir.ops import OPS
from fusec.support.errors import (
    FusecAttributeError,
    FusecOverflowError,
    FusecTypeError,
    FusecValueError,
    TraceError,
    UnsupportedError,
)

_UFUNC_OPS = {op.ufunc.__name__: op for op in OPS.values() if op.ufunc is not None}
_UFUNC_OPS["true_divide"] = OPS["div"]  # CuPy's divide is named cupy_true_divide (NumPy 2's is "divide")


ITERATION_LIMIT = 64  # entries a loop over a traced array (or unpacking it) unrolls into the trace

# --- operands ------------------------------------------------------------------------------------
class WeakScalar:
    """A Python int/float operand: NEP 50's weak scalar. ``probe`` is its value, or for a runtime scalar
    (``scalar`` set) the value of the call being traced, which only class-dependent rules may read
    (its type; for an int, the dtypes it fits and its sign: see :func:`fusec.frontend.scalars.scalar_class`);
    ``value`` is the value to fold, which a runtime scalar does not have (it asks for a static one)."""

    __slots__ = ("_probe", "scalar")

    def __init__(self, value: int | float, scalar: Scalar | None = None):
        self._probe = value
        self.scalar = scalar

    @property
    def probe(self) -> int | float:
        """The value, for a rule that reads more than its type: of a runtime scalar, it ties the trace to its class
        (:func:`fusec.frontend.scalars.read_class`)."""
        if self.scalar is not None:
            read_class(self.scalar)
        return self._probe

    @property
    def probe_type(self) -> type:
        """The value's type (``int`` or ``float``), which every value of a runtime scalar shares."""
        return type(self._probe)

    @property
    def value(self) -> int | float:
        if self.scalar is not None:
            self.scalar.concrete("folding this value into the trace")
        return self.probe


def operand(value: Any, what: str = "operand") -> Node | WeakScalar:
    """A traced node, a weak Python scalar, or a strong NumPy scalar turned into a const node."""
    if isinstance(value, Tracer):
        return value.node
    if isinstance(value, Scalar):  # a runtime scalar: Python int/float weak, NumPy scalars and bools strong
        if isinstance(value.value, (int, float)) and not isinstance(value.value, (bool, np.generic)):
            return WeakScalar(value.value, value)
        return value.node()
    if isinstance(value, (bool, np.bool_)):
        return const(bool(value), dtypes.BOOL)
    if isinstance(value, (complex, np.complexfloating)):
        raise FusecTypeError(f"complex {what} {value!r} is not supported", hint="complex dtypes come later")
    # NumPy scalars are strong (NEP 50), even np.float64, which subclasses Python's float
    if isinstance(value, (int, float)) and not isinstance(value, np.generic):
        return WeakScalar(value)
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        dt = dtypes.as_dtype(value.dtype)
        return const(value.item(), dt)
    if isinstance(value, np.ndarray) or type(value).__module__.startswith("cupy"):
        raise UnsupportedError(
            f"an array captured from outside the function ({type(value).__name__} of shape "
            f"{getattr(value, 'shape', '?')}) is used as an {what}",
            hint="pass every array as an argument of the fused function",
        )
    if isinstance(value, (list, tuple)) and not numpy_refuses(value):  # NumPy takes it as np.asarray does
        return registry.FUNCTIONS["asarray"](value).node  # traced arrays in it stacked, numbers a constant array
    if numpy_refuses(value):  # None, a string, any object: NumPy raises TypeError, so does fusec (a FusecTypeError)
        raise FusecTypeError(f"{type(value).__name__} {value!r} as an {what} is not a number or an array (NumPy "
                             "refuses it too)", hint="use arrays, NumPy scalars or Python numbers")
    raise UnsupportedError(f"{type(value).__name__} {value!r} as an {what} is not supported",
                           hint="use arrays, NumPy scalars or Python numbers")


def numpy_refuses(value: Any) -> bool:
    """Whether NumPy's ufuncs refuse ``value`` as a numeric operand with a TypeError: None, strings, bytes and objects
    that do not convert to a numeric or boolean array (a list of numbers converts, in NumPy and in fusec)."""
    if value is None:
        return True
    try:
        kind = np.asarray(value).dtype.kind
    except Exception:  # (ragged nestings and the like: NumPy refuses them, as a ValueError or a TypeError)
        return False
    return kind not in "biufc"


def _dtype_or_weak(x: Node | WeakScalar) -> Any:
    return x.probe_type if isinstance(x, WeakScalar) else x.dtype


def _result_type(*xs: Node | WeakScalar) -> np.dtype:
    """``np.result_type`` with weak Python scalars passed by value (by type they would be strong). Only beside an
    integer or bool array does the value matter (``u8 + 300`` raises): elsewhere it is read without tying the trace
    to its class."""
    by_value = any(isinstance(x, Node) and x.dtype.kind in "biu" for x in xs)
    return dtypes.as_dtype(np.result_type(*((x.probe if by_value else x._probe) if isinstance(x, WeakScalar)
                                            else x.dtype for x in xs)))


def to_dtype(x: Node | WeakScalar, dt: np.dtype) -> Node:
    """Operand ``x`` as ``dt``: a weak scalar as a constant of ``dt`` (checked as NumPy checks the value), a node
    cast."""
    if isinstance(x, WeakScalar):
        if x.scalar is not None:  # NumPy's checks of the value (u8 + 300) hold for its whole class
            # the value decides only for a narrower int, an unsigned one (the sign) or bool: a float or int64 takes
            # every runtime int (within +-2**53)
            by_value = dt.kind in "bu" or (dt.kind == "i" and dt.itemsize < 8)
            dtypes.scalar_constant(x.probe if by_value else x._probe, dt)
            return cast(x.scalar.node(), dt)
        return const(x.value, dt)
    return cast(x, dt)


def weak_default(x: WeakScalar) -> Node:
    """A weak Python scalar on its own: int64 or float64, as ``np.asarray`` makes it."""
    return to_dtype(x, dtypes.as_dtype(np.result_type(x.probe_type)))


def static_number(value: Any, what: str) -> Any:
    """A number that decides a shape, a count or an offset (``np.zeros(n)``, ``np.roll(x, k)``): a Python or NumPy
    number as it is, a runtime scalar made static (a new value retraces), a traced array refused."""
    if isinstance(value, Tracer):
        raise FusecTypeError(f"the {what} is a traced array: it decides the result's shape, so it must be a number",
                             hint="use x.shape[k] or a Python number; an array's values are not known while tracing")
    if isinstance(value, Scalar):
        return value.concrete(f"the {what} (it decides the result's shape)")
    return value


def as_node(a: Any, what: str) -> Node:
    """Argument ``a`` of ``what`` as a node (a Python number as ``np.asarray`` makes it)."""
    x = operand(a, f"argument of {what}")
    if isinstance(x, WeakScalar):
        x = weak_default(x)
    return x


def check_no_out(name: str, **kwargs: Any) -> None:
    """Refuse the arguments ``kwargs`` of ``name`` (``out=``, ``like=``) where they are given."""
    for key, value in kwargs.items():
        if value is not None and value is not np._NoValue:
            raise UnsupportedError(f"the {key}= argument of {name} is not supported inside a fused function")


_MIRRORED = {"equal": "equal", "not_equal": "not_equal", "less": "greater", "less_equal": "greater_equal",
             "greater": "less", "greater_equal": "less_equal"}


def _compare_beyond_range(name: str, xs: list[Node | WeakScalar]) -> Node | None:
    """NumPy 2 compares an integer array with a Python int beyond its dtype's range exactly (``u8 < 300``
    and ``i64 < 2**63`` are True everywhere, ``i64 == 2**63`` False): every element gets the same answer,
    decided by which side of the range the int lies. None when that is not the case at hand."""
    if name not in _MIRRORED or len(xs) != 2:
        return None
    for k, (x, v) in enumerate((xs, xs[::-1])):
        if isinstance(x, Node) and x.dtype.kind in "iu" and isinstance(v, WeakScalar) and isinstance(v.probe, int) \
                and not isinstance(v.probe, bool) and not dtypes.fits(v.probe, x.dtype):
            op = name if k == 0 else _MIRRORED[name]  # as "x op v" (fits and sign: the runtime scalar's class)
            above = v.probe > np.iinfo(x.dtype).max
            truth = {"equal": False, "not_equal": True, "less": above, "less_equal": above,
                     "greater": not above, "greater_equal": not above}[op]
            answer = const(truth, dtypes.BOOL)
            return new_node("broadcast_to", [answer], {"shape": list(x.shape)}) if x.ndim else answer
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
        return ufunc_into(ufunc, args, kwargs, qualified)
    out_dtype = kwargs.pop("dtype", None)
    for key in ("out", "where", "casting", "order", "subok", "signature", "axes", "axis"):
        value = kwargs.get(key)  # (never ==: on a traced where= mask it would trace a comparison with None)
        if not (value is None or (isinstance(value, (bool, np.bool_)) and bool(value))):
            raise UnsupportedError(f"the {key}= argument of {qualified} is not supported inside a fused function",
                                   hint="compute the full result and select with np.where, or use out= on the call")
        kwargs.pop(key, None)
    if kwargs:
        raise UnsupportedError(f"arguments {sorted(kwargs)} of {qualified} are not supported")
    if name == "where":
        return where(*args)
    if name == "clip":
        return clip(*args)
    composite = registry.UFUNCS.get(name)  # a ufunc traced into several ops
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
    xs = [operand(a, f"argument of {name}") for a in args]
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
    operands = [to_dtype(x, dt) for x, dt in zip(xs, loop)]
    exponent = operands[1] if op.name == "pow" else None
    while exponent is not None and exponent.op == "cast":  # np.int8(-2) promoted to the loop's int16
        exponent = exponent.operands[0]
    if exponent is not None and exponent.op == "const" and loop[1].kind == "i" and exponent.attr("value") < 0:
        raise FusecValueError("Integers to negative integer powers are not allowed.",
                              hint="use a float base or exponent (x ** -1.0, or x.astype(float) ** n)")
    return Tracer(new_node(op.name, operands))


def ufunc_into(ufunc: Any, args: tuple, kwargs: dict, qualified: str) -> Tracer:
    """``ufunc(*args, out=t)`` for a traced ``t``: the ufunc's result (its own loop, as NumPy computes it), broadcast
    to ``t``'s shape and cast to its dtype under ``casting`` (``same_kind`` by default), written into ``t``."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    casting = kwargs.pop("casting", "same_kind")
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], Tracer):
        message = (f"the out= argument of {qualified} must be one traced array (an argument of the fused function or "
                   "a value computed in it)")
        hint = "write the result to a name (y = ...), or use out= on the call"
        if any(not hasattr(o, "shape") for o in outs):  # out=3, out=None inside a tuple: NumPy's TypeError too
            raise FusecTypeError(message + f", not {type(next(o for o in outs if not hasattr(o, 'shape'))).__name__}",
                                 hint=hint)
        raise UnsupportedError(message, hint=hint)
    target = outs[0]
    result = apply_ufunc(ufunc, args, kwargs)
    node = result.node
    if node.shape != target.node.shape:
        try:
            fits = np.broadcast_shapes(node.shape, target.node.shape) == target.node.shape
        except ValueError:
            fits = False
        if not fits:
            raise FusecValueError(f"non-broadcastable output operand with shape {target.node.shape} doesn't match "
                                  f"the broadcast shape {node.shape} ({qualified})")
        node = new_node("broadcast_to", [node], {"shape": list(target.node.shape)})
    if not np.can_cast(node.dtype, target.dtype, casting):
        raise FusecTypeError(f"Cannot cast ufunc '{ufunc.__name__}' output from dtype('{node.dtype}') to "
                             f"dtype('{target.dtype}') with casting rule '{casting}' ({qualified})",
                             hint="cast the operands first, or pass casting='unsafe'")
    return slice_assign.assign(target, cast(node, target.dtype), f"out= of {qualified}")


def call_ufunc(ufunc: np.ufunc, *args: Any) -> Tracer:
    """``ufunc(*args)`` traced with NumPy's loop selection (weak Python scalars included; nodes as tracers)."""
    return apply_ufunc(ufunc, tuple(Tracer(a) if isinstance(a, Node) else a for a in args))


# --- array functions -----------------------------------------------------------------------------
@implements("where")
def where(cond: Any, a: Any = None, b: Any = None) -> Tracer:
    if a is None or b is None:
        raise UnsupportedError("np.where with one argument (nonzero) is not supported",
                               hint="use np.where(cond, a, b)")
    c = _to_dtype_cond(operand(cond, "argument of where"))
    xa, xb = operand(a, "argument of where"), operand(b, "argument of where")
    result = _result_type(xa, xb)
    return Tracer(new_node("where", [c, to_dtype(xa, result), to_dtype(xb, result)]))


def _to_dtype_cond(x: Node | WeakScalar) -> Node:
    if isinstance(x, WeakScalar):
        return const(bool(x.value), dtypes.BOOL)
    return cast(x, dtypes.BOOL)


@implements("clip")
def clip(a: Any, a_min: Any = None, a_max: Any = None) -> Tracer:
    """``np.clip`` as ``minimum(maximum(a, lo), hi)``, with the dtype NumPy's clip loop picks."""
    x = operand(a, "argument of clip")
    if a_min is None and a_max is None:
        return Tracer(x) if isinstance(x, Node) else Tracer(to_dtype(x, np.dtype(type(x.value))))
    bounds = [operand(v, "bound of clip") if v is not None else None for v in (a_min, a_max)]
    dt = _result_type(x, *(v for v in bounds if v is not None))
    if dt == dtypes.BFLOAT16:  # ml_dtypes registers no clip loop: NumPy's clip resolves bfloat16 to float32
        dt = dtypes.FLOAT32
    out = to_dtype(x, dt)
    if dt.kind in "iu":  # NumPy clips u8 to a Python int bound outside its range (clip(u8, -1, 300))
        info = np.iinfo(dt)
        bounds = [WeakScalar(min(max(v.value, info.min), info.max))
                  if isinstance(v, WeakScalar) and isinstance(v.value, int) else v for v in bounds]
    lo, hi = bounds
    if lo is not None:
        out = apply_ufunc(np.maximum, (Tracer(out), Tracer(to_dtype(lo, dt)))).node
    if hi is not None:
        out = apply_ufunc(np.minimum, (Tracer(out), Tracer(to_dtype(hi, dt)))).node
    return Tracer(out)


def _reduce(op: str, x: Node, axes: tuple[int, ...], keepdims: bool) -> Node:
    r = new_node(op, [x], {"axes": list(axes), "keepdims": True})
    return squeeze_axes(r, axes) if not keepdims else r



def reduction(name: str, a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
              keepdims: Any = False, ddof: Any = 0, initial: Any = None, where: Any = None, **unknown: Any) -> Tracer:
    """Trace ``np.<name>(a, axis, dtype, keepdims, ddof)`` for every reduction fusec supports."""
    if unknown:
        raise FusecTypeError(f"{name}() takes no keyword argument '{next(iter(unknown))}'",
                             hint=keyword_hint(unknown))
    check_no_out(name, out=out)
    if keepdims is np._NoValue:
        keepdims = False
    x = operand(a, f"argument of {name}")
    if isinstance(x, WeakScalar):
        x = weak_default(x)
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
            if dtypes.kind(x.dtype) == "f":
                isnan = new_node("isnan", [x])
                x = new_node("where", [isnan, const(0, x.dtype), x])
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
        return Tracer(squeeze_axes(cast(m, result_dt), axes) if not keepdims else cast(m, result_dt))
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
        mask = cast(as_node(where, f"where= of {name}"), dtypes.BOOL)
        shape = broadcast_shapes(x.shape, mask.shape, what=f"where= of {name}")
        if shape != x.shape:
            raise FusecValueError(f"where= of shape {mask.shape} does not broadcast to the array's {x.shape}")
        fill = initial if maximal else _IDENTITY[op]
        x = new_node("where", [mask, x, _weak_to(fill, x.dtype)])
        if op == "mean":
            total = reduction("sum", Tracer(x), axis, dtype, keepdims=keepdims).node
            count = reduction("sum", Tracer(new_node("broadcast_to", [mask], {"shape": list(shape)})
                                            if mask.shape != shape else mask), axis, keepdims=keepdims).node
            result_dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.mean_dtype(x.dtype)[1]
            return Tracer(cast(new_node("div", [cast(total, dtypes.FLOAT64), cast(count, dtypes.FLOAT64)]), result_dt))
    empty = _reduced_shape_if_empty(x, axis, keepdims) if maximal and initial is not None else None
    if empty is not None:  # max/min over an empty extent: ``initial`` alone, as NumPy gives it
        fill = _weak_to(initial, x.dtype)
        result = Tracer(new_node("broadcast_to", [fill], {"shape": list(empty)}) if empty else fill)
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
    return const(bool(value) if dt.kind == "b" else value, dt)


def _running_extreme(name: str, a: Any, axis: Any = 0, dtype: Any = None, out: Any = None) -> Tracer:
    """``np.maximum.accumulate`` / ``np.minimum.accumulate``: the ``cummax`` / ``cummin`` scan along ``axis``."""
    check_no_out(f"{name}.accumulate", out=out)
    x = as_node(a, f"{name}.accumulate")
    if dtype is not None:
        x = cast(x, dtypes.as_dtype(np.dtype(dtype)))
    if x.ndim == 0:
        raise FusecValueError("cannot accumulate on a scalar")
    (ax,) = normalize_axes(axis, x.ndim, allow_tuple=False)
    op = "cummax" if name == "maximum" else "cummin"
    if x.dtype == dtypes.BOOL:  # over 0/1 bytes, the same order
        return Tracer(cast(new_node(op, [cast(x, np.dtype(np.uint8))], {"axis": ax}), dtypes.BOOL))
    return Tracer(new_node(op, [x], {"axis": ax}))


def _is_axis_zero_or_last(axis: Any) -> bool:
    """Whether ``axis`` is the integer 0 or -1 (not a tuple, not a bool)."""
    return (isinstance(axis, (int, np.integer)) and not isinstance(axis, (bool, np.bool_))
            and int(axis) in (0, -1))


def _divide_by_count(total: Node, count: Node) -> Node:
    """NumPy divides a sum by an intp count: in float64, then back to the sum's dtype."""
    quotient = new_node("div", [cast(total, dtypes.FLOAT64), count])
    return cast(quotient, total.dtype)


def _count(x: Node, axes: tuple[int, ...]) -> Node:
    """The element count of ``x`` over ``axes`` (canonicalize re-points it at an input)."""
    return new_node("size", [x], {"axes": list(axes)}, dtype=dtypes.FLOAT64)


def _mean(x: Node, axes: tuple[int, ...]) -> Node:
    total = new_node("sum", [x], {"axes": list(axes), "keepdims": True})
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
    squared = new_node("square", [deviation]) if dtypes.kind(deviation.dtype) == "f" else \
        apply_ufunc(np.square, (Tracer(deviation),)).node
    total = new_node("sum", [cast(squared, acc)], {"axes": list(axes), "keepdims": True})
    count = _count(x, axes)
    if ddof:
        count = new_node("maximum", [new_node("sub", [count, const(float(ddof), dtypes.FLOAT64)]),
                                  const(0.0, dtypes.FLOAT64)])
    result = _divide_by_count(total, count)
    if take_sqrt:
        result = new_node("sqrt", [result])
    return squeeze_axes(result, axes) if not keepdims else result


@implements("expand_dims")
def expand_dims(a: Any, axis: Any) -> Tracer:
    x = as_node(a, "expand_dims")
    n_new = len(axis) if isinstance(axis, (tuple, list)) else 1
    axes = normalize_axes(axis, x.ndim + n_new)
    return Tracer(new_node("expand_dims", [x], {"axes": list(axes)}))


@implements("squeeze")
def squeeze(a: Any, axis: Any = None) -> Tracer:
    x = as_node(a, "squeeze")
    if axis is None:
        mark_shape_read()
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(axis, x.ndim)
    return Tracer(squeeze_axes(x, axes))


@implements("broadcast_to")
def broadcast_to(a: Any, shape: Any) -> Tracer:
    x = as_node(a, "broadcast_to")
    target = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    return Tracer(new_node("broadcast_to", [x], {"shape": list(target)}))


@implements("transpose")
def transpose(a: Any, axes: Any = None) -> Tracer:
    x = as_node(a, "transpose")
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        perm = tuple(int(p) % max(x.ndim, 1) for p in axes)
        if sorted(perm) != list(range(x.ndim)):
            raise FusecTypeError(f"axes {tuple(axes)} don't match an array of dimension {x.ndim}")
    return Tracer(new_node("transpose", [x], {"perm": list(perm)}))


def _reduction_function(name: str) -> Callable[..., Tracer]:
    def fn(a: Any, axis: Any = None, *args: Any, **kwargs: Any) -> Tracer:
        if args:
            raise UnsupportedError(f"pass the arguments of {name} after axis by keyword")
        return reduction(name, a, axis, **kwargs)

    return fn


REDUCTIONS = ("sum", "prod", "max", "amax", "min", "amin", "nanmax", "nanmin", "mean", "var", "std", "argmax",
              "argmin", "any", "all", "nansum")
for _name in REDUCTIONS:
    implements(_name)(_reduction_function(_name))


def call_function(function: str | Callable[..., Any], qualified: str, args: tuple, kwargs: dict) -> Any:
    """The implementation of ``function`` (a registered name, or NumPy's function for a method of the array that is
    one: ``np.ravel`` for ``x.ravel()``) called as the traced function called it (``qualified``: ``numpy.flip``,
    ``x.T``; :func:`fusec.frontend.hints.call_checked`'s errors); a result that NumPy makes a view of an argument is
    recorded as one (:mod:`fusec.frontend.aliases`), so that in-place updates of either show in the other."""
    name = function if isinstance(function, str) else registry.name_of(function)
    impl = registry.FUNCTIONS[name]
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


def _augmented(symbol: str, binary: str, ufunc_name: str) -> Callable[[Tracer, Any], Tracer]:
    """``x <symbol>= y``: ``x <symbol> y`` (``Tracer.__<binary>__``, so ``x **= 2`` is square, as in NumPy) cast to
    ``x``'s dtype under ``same_kind`` and written into ``x``."""
    def method(self: Tracer, other: Any) -> Tracer:
        result = getattr(Tracer, f"__{binary}__")(self, other)  # x ** 2 is square here too, as in NumPy
        if not isinstance(result, Tracer):
            return NotImplemented
        if self.node.ndim == 0 and self._view is None and not slice_assign.is_argument(self):
            return result  # NumPy's scalar (x[0] of a 1-d x, x.sum()) is immutable: s += v binds s to a new one
        if result.shape != self.node.shape:
            raise FusecValueError(f"non-broadcastable output operand with shape {self.node.shape} doesn't match "
                                  f"the broadcast shape {result.node.shape} ('x {symbol}= y')",
                                  hint=f"write 'x = x {symbol} y' for a new, larger array")
        if not np.can_cast(result.dtype, self.dtype, "same_kind"):
            raise FusecTypeError(f"Cannot cast ufunc '{ufunc_name}' output from dtype('{result.dtype}') to "
                                 f"dtype('{self.dtype}') with casting rule 'same_kind' ('x {symbol}= y')",
                                 hint=f"write 'x = x {symbol} y' for a result of a new dtype, or cast y first")
        return slice_assign.assign(self, cast(result.node, self.dtype), f"'{symbol}='")

    method.__name__ = f"__i{binary}__"
    return method


def _is_whole(key: Any, ndim: int) -> bool:
    """Whether ``key`` selects the whole array: ``...``, ``:``, ``()``, or a tuple of those."""
    keys = key if isinstance(key, tuple) else (key,)
    plain = [k for k in keys if not (isinstance(k, slice) and k == slice(None))]
    return (plain == [] or plain == [Ellipsis]) and len(keys) - len(plain) <= ndim


def _value_node(value: Any, dt: np.dtype, where: str) -> Node:
    """The assigned value as a node of ``dt``, cast as NumPy's setitem casts it."""
    x = operand(value, f"value assigned to {where}")
    if isinstance(x, WeakScalar):
        if isinstance(x.scalar, Scalar) and dt.kind in "biu" and x.probe_type is float:
            x.scalar.concrete("a float assigned into an integer array")  # NaN raises, 1.7 truncates: by value
        return to_dtype(x, dt)
    return cast(x, dt)


def _key_text(key: Any) -> str:
    keys = key if isinstance(key, tuple) else (key,)
    out = []
    for k in keys:
        if isinstance(k, slice):
            out.append(":".join("" if p is None else str(p) for p in (k.start, k.stop, k.step)).rstrip(":") or ":")
        elif k is Ellipsis:
            out.append("...")
        else:
            out.append(repr(k))
    return ", ".join(out)


class Tracer(TracedArray):
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
        mark_shape_read()
        return self.node.shape

    @property
    def size(self) -> int:
        mark_shape_read()
        return self.node.size

    def __len__(self) -> int:
        if self.node.ndim == 0:
            raise FusecTypeError("len() of a 0-d array")
        mark_shape_read()
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
            x = as_node(inputs[0], f"{ufunc.__name__}.accumulate")  # np.cumsum / np.cumprod along axis 0
            if x.dtype != dtypes.BOOL:
                kwargs.setdefault("axis", 0)
                scan = np.cumsum if ufunc.__name__ == "add" else np.cumprod
                return registry.implementation(scan)(Tracer(x), **kwargs)
        if method == "accumulate" and ufunc.__name__ in ("maximum", "minimum") and len(inputs) == 1:
            return _running_extreme(ufunc.__name__, inputs[0], **kwargs)
        module, name = ufunc_origin(ufunc)
        raise UnsupportedError(f"{module}.{name}.{method} is not supported by fusec")

    def __getattr__(self, name: str) -> Any:  # only for names a Tracer does not have
        raise FusecAttributeError(f"traced arrays have no attribute '{name}' (x.{name})", hint=attribute_hint(name))

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Tracer:
        module = registry.numpy_module(func)  # numpy._core.fromnumeric: numpy
        key = registry.name_of(func)
        if key not in registry.FUNCTIONS:
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
        """Its first axis's entries, ``self[0]``, ``self[1]``, ... (views, as NumPy's): ``q, k, v = qkv``. The
        count is the first axis's size, which the trace then depends on; at most :data:`ITERATION_LIMIT`."""
        if self.node.ndim == 0:
            raise FusecTypeError("iteration over a 0-d array")
        n = len(self)
        if n > ITERATION_LIMIT:
            raise TraceError(f"iterating over a traced array of {n} entries along its first axis (fusec unrolls "
                             f"at most {ITERATION_LIMIT})",
                             hint="use vectorized operations (reductions with axis=..., broadcasting) instead of a "
                                  "Python loop over the entries")
        return iter([self[i] for i in range(n)])

    def __getitem__(self, key: Any) -> Tracer:
        result = Tracer(index(self.node, key))  # basic indexing, or a gather for integer-array indices
        if is_view_index(key, result.ndim):
            aliases.note(self, result, lambda n: index(n, key), "indexing", key=key)
        return result

    def __setitem__(self, key: Any, value: Any) -> None:
        if slice_assign.echo(self, key, value):  # x[key] op= v: the update through x[key] wrote it already
            return
        shape, dt = self.node.shape, self.node.dtype
        if isinstance(key, Tracer) and key.dtype == dtypes.BOOL:
            if key.node.shape != shape:
                raise UnsupportedError(f"x[mask] = v with a mask of shape {key.node.shape} on an array of shape "
                                       f"{shape}", hint="use a mask of the array's shape (broadcast it: "
                                                        "np.broadcast_to(mask, x.shape)), or np.where(mask, v, x)")
            v = _value_node(value, dt, "x[mask]")
            if v.ndim:
                raise UnsupportedError("x[mask] = array: NumPy puts the array's values, in order, at the True "
                                       "positions, which depends on the data",
                                       hint="np.where(mask, v, x) puts v's values at the same positions")
            new = new_node("where", [key.node, new_node("broadcast_to", [v], {"shape": list(shape)}) if shape else v,
                                     self.node])
            slice_assign.assign(self, new, "x[mask] = v")
            return
        if isinstance(key, Tracer):
            raise UnsupportedError("assignment with an integer index array (x[idx] = v) is not supported",
                                   hint="build the result with np.where(mask, v, x)")
        if not _is_whole(key, len(shape)):
            if slice_assign.is_argument(self):  # on an argument: those elements of it
                v = _value_node(value, dt, f"x[{slice_assign.key_text(key)}]")
                slice_assign.assign_part(self, key, v)
                return
            # a value computed in the function: its new value, where(mask, v placed, old) (fusec.frontend.part_update)
            v = _value_node(value, dt, f"x[{_key_text(key)}]")
            slice_assign.assign(self, updated(self.node, key, v), f"x[{_key_text(key)}] = v")
            return
        v = _value_node(value, dt, "x[...]")
        if v.shape != shape:
            try:
                target = np.broadcast_shapes(v.shape, shape)
            except ValueError:
                target = None
            if target != shape:
                raise FusecValueError(f"could not broadcast input array from shape {v.shape} into shape {shape}")
            v = new_node("broadcast_to", [v], {"shape": list(shape)})
        slice_assign.assign(self, v, "x[...] = v")

    # -- methods CuPy's functions forward to, and ndarray's own
    @checked_method
    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("sum", self, axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

    @checked_method
    def prod(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("prod", self, axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

    @checked_method
    def max(self, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("max", self, axis, out=out, keepdims=keepdims, **kw)

    @checked_method
    def min(self, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("min", self, axis, out=out, keepdims=keepdims, **kw)

    @checked_method
    def mean(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("mean", self, axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

    @checked_method
    def var(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
            **kw: Any) -> Tracer:
        return reduction("var", self, axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)

    @checked_method
    def std(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
            **kw: Any) -> Tracer:
        return reduction("std", self, axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)

    @checked_method
    def argmax(self, axis: Any = None, out: Any = None, *, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("argmax", self, axis, out=out, keepdims=keepdims, **kw)

    @checked_method
    def argmin(self, axis: Any = None, out: Any = None, *, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("argmin", self, axis, out=out, keepdims=keepdims, **kw)

    @checked_method
    def any(self, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("any", self, axis, out=out, keepdims=keepdims, **kw)

    @checked_method
    def all(self, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
        return reduction("all", self, axis, out=out, keepdims=keepdims, **kw)

    @checked_method
    def astype(self, dtype: Any, order: Any = "K", casting: Any = "unsafe", subok: Any = True,
               copy: Any = True) -> Tracer:
        dt = dtypes.as_dtype(dtype)
        if casting != "unsafe" and not np.can_cast(self.dtype, dt, casting):
            raise FusecTypeError(f"cannot cast {self.dtype} to {dt} with casting={casting!r}")
        if not copy and dt == self.dtype:
            return self  # NumPy returns the array itself
        return Tracer(new_node("cast", [self.node], dtype=dt))  # a new array, even of the same dtype

    @checked_method
    def clip(self, min: Any = None, max: Any = None, **kw: Any) -> Tracer:  # noqa: A002
        check_no_out("clip", **kw)
        return clip(self, min, max)

    @checked_method
    def transpose(self, *axes: Any) -> Tracer:
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return call_function(np.transpose, "x.transpose", (self, axes or None), {})

    @property
    def T(self) -> Tracer:
        return call_function(np.transpose, "x.T", (self,), {})

    @checked_method
    def squeeze(self, axis: Any = None) -> Tracer:
        return call_function(np.squeeze, "x.squeeze", (self, axis), {})

    @checked_method
    def copy(self, *args: Any, **kwargs: Any) -> Tracer:
        return Tracer(self.node)  # a new array: an in-place update of the copy leaves this one alone

    @checked_method
    def round(self, decimals: int = 0, out: Any = None) -> Tracer:
        return registry.implementation(np.round)(self, decimals, out)

    def __round__(self, ndigits: int | None = None) -> Tracer:
        raise FusecTypeError("round() of a traced array (NumPy arrays do not support Python's round either)",
                             hint="use np.round(x, decimals) or x.round(decimals)")

    @checked_method
    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> Tracer:
        return call_function(np.reshape, "x.reshape", (self, shape[0] if len(shape) == 1 else shape),
                             {"order": order, "copy": copy})

    @checked_method
    def ravel(self, order: str = "C") -> Tracer:
        return call_function(np.ravel, "x.ravel", (self, order), {})

    @checked_method
    def flatten(self, order: str = "C") -> Tracer:
        return Tracer(registry.implementation(np.ravel)(self, order).node)  # a copy, unlike ravel

    @checked_method
    def swapaxes(self, axis1: Any, axis2: Any) -> Tracer:
        return call_function(np.swapaxes, "x.swapaxes", (self, axis1, axis2), {})

    @property
    def mT(self) -> Tracer:
        return call_function(np.matrix_transpose, "x.mT", (self,), {})

    @checked_method
    def cumsum(self, axis: Any = None, dtype: Any = None, out: Any = None) -> Tracer:
        return registry.implementation(np.cumsum)(self, axis, dtype, out)

    @checked_method
    def cumprod(self, axis: Any = None, dtype: Any = None, out: Any = None) -> Tracer:
        return registry.implementation(np.cumprod)(self, axis, dtype, out)

    def take(self, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tracer:
        return registry.implementation(np.take)(self, indices, axis, out, mode)

    def repeat(self, repeats: Any, axis: Any = None) -> Tracer:
        return registry.implementation(np.repeat)(self, repeats, axis)

    def diagonal(self, offset: Any = 0, axis1: Any = 0, axis2: Any = 1) -> Tracer:
        return registry.implementation(np.diagonal)(self, offset, axis1, axis2)

    def trace(self, offset: Any = 0, axis1: Any = 0, axis2: Any = 1, dtype: Any = None, out: Any = None) -> Tracer:
        return registry.implementation(np.trace)(self, offset, axis1, axis2, dtype, out)

    def dot(self, b: Any, out: Any = None) -> Tracer:
        return registry.implementation(np.dot)(self, b, out)

    def __matmul__(self, other: Any) -> Tracer:
        return registry.implementation(np.matmul)(self, other)

    def __rmatmul__(self, other: Any) -> Tracer:
        return registry.implementation(np.matmul)(other, self)

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
        if fast is not None and dtypes.kind(self.dtype) == "f":
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

    # -- augmented assignment: an update of the array in place (the module docstring)
    __iadd__ = _augmented("+", "add", "add")
    __isub__ = _augmented("-", "sub", "subtract")
    __imul__ = _augmented("*", "mul", "multiply")
    __itruediv__ = _augmented("/", "truediv", "divide")
    __ifloordiv__ = _augmented("//", "floordiv", "floor_divide")
    __imod__ = _augmented("%", "mod", "remainder")
    __ipow__ = _augmented("**", "pow", "power")
    __iand__ = _augmented("&", "and", "bitwise_and")
    __ior__ = _augmented("|", "or", "bitwise_or")
    __ixor__ = _augmented("^", "xor", "bitwise_xor")
    __ilshift__ = _augmented("<<", "lshift", "left_shift")
    __irshift__ = _augmented(">>", "rshift", "right_shift")


# ``u8 + 300`` raises during const creation; keep the OverflowError class visible to users.
__all__ = ["REDUCTIONS", "FusecOverflowError", "Tracer", "WeakScalar", "apply_ufunc", "as_node", "broadcast_to",
           "call_function", "call_ufunc", "check_no_out", "clip", "expand_dims", "operand", "reduction", "squeeze",
           "numpy_refuses", "static_number", "to_dtype", "transpose", "ufunc_into", "ufunc_origin", "weak_default",
           "where"]
