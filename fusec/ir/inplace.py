"""In-place updates while tracing: ``x += v``, ``x[mask] = v``, ``x[...] = v`` (assignment to part of an argument,
``x[:, k] = v``: :mod:`fusec.ir.slice_assign`).

An update is functional in the IR (a new node) and rebinds the :class:`Tracer` object's node, so every
Python name bound to that object sees it, as with NumPy (``a = x; a += 1`` changes ``x``). Updating a traced
*input* makes the trace write the new value back into the caller's array (``trace_function`` reports which
inputs changed; :mod:`fusec.api` writes them). The casting rules are NumPy's: augmented assignment casts
the ufunc's result to the array's dtype under ``same_kind`` (``int_array += 1.5`` is a TypeError); item
assignment casts the value as ``setitem`` does (unsafe, with NumPy's errors for out-of-range Python ints
and NaN into integers).

Views: NumPy writes through a view into the array it views. fusec tracks the views a trace makes (``x.T``,
``x[None]``, ``np.expand_dims(x, 0)``, ...): updating a view, or an array while a view of it is still
referenced, is refused with the reason, never computed with stale values.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from fusec.errors import FusecTypeError, FusecValueError, UnsupportedError
from fusec.ir import dtypes, part_update, slice_assign
from fusec.ir.graph import Node
from fusec.ir.scalars import Scalar
from fusec.ir.trace import (
    FUNCTIONS,
    Tracer,
    _node,
    _operand,
    _to_dtype,
    _Weak,
    apply_ufunc,
    cast,
)

# functions and methods whose result is a view of their (first) argument in NumPy
VIEW_FUNCTIONS = ("expand_dims", "squeeze", "broadcast_to", "transpose", "reshape", "ravel", "swapaxes",
                  "moveaxis", "split", "array_split", "hsplit", "vsplit", "atleast_1d", "atleast_2d", "atleast_3d")
VIEW_METHODS = ("__getitem__", "transpose", "squeeze", "reshape", "ravel", "swapaxes", "view")
VIEW_PROPERTIES = ("T", "mT")


class _Views(threading.local):
    def __init__(self) -> None:
        self.active = False
        self.views: list[tuple[weakref.ref, Tracer]] = []  # (view, the array it views)


_views = _Views()


def begin() -> None:
    _wrap_views()
    _views.active, _views.views = True, []


def end() -> None:
    _views.active, _views.views = False, []


def _note_views(result: Any, base: Any) -> None:
    if not _views.active or not isinstance(base, Tracer):
        return
    root = base._view_of if base._view_of is not None else base
    for view in result if isinstance(result, (tuple, list)) else (result,):
        if isinstance(view, Tracer) and view is not base and view.node.op != "gather":  # a gather is a copy
            view._view_of = root
            _views.views.append((weakref.ref(view), root))


def _as_view(fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(fn, "_fusec_view", False):
        return fn

    indexing = fn.__name__ == "__getitem__"

    @functools.wraps(fn)
    def wrapper(a: Any, *args: Any, **kwargs: Any) -> Any:
        result = fn(a, *args, **kwargs)
        _note_views(result, a)
        if indexing and _views.active and isinstance(a, Tracer) and isinstance(result, Tracer):
            slice_assign.note_index(result, a, args[0])  # for x[key] op= v
        return result

    wrapper._fusec_view = True  # type: ignore[attr-defined]
    return wrapper


def _wrap_views() -> None:
    """Track the views that the functions and methods of :data:`VIEW_FUNCTIONS`, :data:`VIEW_METHODS` and
    :data:`VIEW_PROPERTIES` make, whichever module defined them and whenever (checked at each trace)."""
    for name in VIEW_FUNCTIONS:
        if name in FUNCTIONS:
            FUNCTIONS[name] = _as_view(FUNCTIONS[name])
    for name in VIEW_METHODS:
        if name in vars(Tracer):
            setattr(Tracer, name, _as_view(vars(Tracer)[name]))
    for name in VIEW_PROPERTIES:
        prop = vars(Tracer).get(name)
        if isinstance(prop, property) and not getattr(prop.fget, "_fusec_view", False):
            setattr(Tracer, name, property(_as_view(prop.fget)))


def live_views(base: Tracer) -> list[Tracer]:
    """The views of ``base`` made while tracing that are still referenced."""
    return [view for ref, root in _views.views if root is base and (view := ref()) is not None]


def assign(target: Tracer, node: Node, what: str) -> Tracer:
    """Rebind ``target`` to ``node`` (its new value, of its dtype and shape), unless views forbid it."""
    if target._view_of is not None:
        if slice_assign.assign_through_view(target, node):  # x[key] op= v on an argument
            return target
        raise UnsupportedError(
            f"{what} on a view ({_describe(target)}) is not supported: NumPy would write through it into the "
            "array it views", hint="update the array itself, or copy the view first (y = x.T.copy())")
    live = [ref() for ref, base in _views.views if base is target and ref() is not None]
    if live:
        raise UnsupportedError(
            f"{what} on an array that has a view still in use ({_describe(live[0])}): NumPy would change the "
            "view too", hint="make the view after the update, or take a copy (x.T.copy()) if it must keep the "
                             "old values")
    assert node.shape == target.node.shape and node.dtype == target.node.dtype
    target.node = node
    return target


def _describe(t: Tracer) -> str:
    return f"{dtypes.short(t.node.dtype)}{list(t.node.shape)} from {t.node.op}"


# --- augmented assignment ----------------------------------------------------------------------------
_AUGMENTED = (("+", "iadd", "add", "add"), ("-", "isub", "sub", "subtract"), ("*", "imul", "mul", "multiply"),
              ("/", "itruediv", "truediv", "divide"), ("//", "ifloordiv", "floordiv", "floor_divide"),
              ("%", "imod", "mod", "remainder"), ("**", "ipow", "pow", "power"), ("&", "iand", "and", "bitwise_and"),
              ("|", "ior", "or", "bitwise_or"), ("^", "ixor", "xor", "bitwise_xor"),
              ("<<", "ilshift", "lshift", "left_shift"), (">>", "irshift", "rshift", "right_shift"))


def _augmented(symbol: str, binary: str, ufunc_name: str) -> Callable[[Tracer, Any], Tracer]:
    def method(self: Tracer, other: Any) -> Tracer:
        result = getattr(Tracer, f"__{binary}__")(self, other)  # x ** 2 is square here too, as in NumPy
        if not isinstance(result, Tracer):
            return NotImplemented
        if result.shape != self.node.shape:
            raise FusecValueError(f"non-broadcastable output operand with shape {self.node.shape} doesn't match "
                                  f"the broadcast shape {result.node.shape} ('x {symbol}= y')",
                                  hint=f"write 'x = x {symbol} y' for a new, larger array")
        if not np.can_cast(result.dtype, self.dtype, "same_kind"):
            raise FusecTypeError(f"Cannot cast ufunc '{ufunc_name}' output from dtype('{result.dtype}') to "
                                 f"dtype('{self.dtype}') with casting rule 'same_kind' ('x {symbol}= y')",
                                 hint=f"write 'x = x {symbol} y' for a result of a new dtype, or cast y first")
        return assign(self, cast(result.node, self.dtype), f"'{symbol}='")

    method.__name__ = f"__i{binary}__"
    return method


for _symbol, _inplace, _binary, _ufunc in _AUGMENTED:
    setattr(Tracer, f"__{_inplace}__", _augmented(_symbol, _binary, _ufunc))


def ufunc_into(ufunc: Any, args: tuple, kwargs: dict, qualified: str) -> Tracer:
    """``ufunc(*args, out=t)`` for a traced ``t``: the ufunc's result (its own loop, as NumPy computes it), broadcast
    to ``t``'s shape and cast to its dtype under ``casting`` (``same_kind`` by default), written into ``t``."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    casting = kwargs.pop("casting", "same_kind")
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], Tracer):
        raise UnsupportedError(f"the out= argument of {qualified} must be one traced array (an argument of the "
                               "fused function or a value computed in it)",
                               hint="write the result to a name (y = ...), or use out= on the call")
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
        node = _node("broadcast_to", [node], {"shape": list(target.node.shape)})
    if not np.can_cast(node.dtype, target.dtype, casting):
        raise FusecTypeError(f"Cannot cast ufunc '{ufunc.__name__}' output from dtype('{node.dtype}') to "
                             f"dtype('{target.dtype}') with casting rule '{casting}' ({qualified})",
                             hint="cast the operands first, or pass casting='unsafe'")
    return assign(target, cast(node, target.dtype), f"out= of {qualified}")


# --- item assignment -----------------------------------------------------------------------------------
def _is_whole(key: Any, ndim: int) -> bool:
    """Whether ``key`` selects the whole array: ``...``, ``:``, ``()``, or a tuple of those."""
    keys = key if isinstance(key, tuple) else (key,)
    plain = [k for k in keys if not (isinstance(k, slice) and k == slice(None))]
    return (plain == [] or plain == [Ellipsis]) and len(keys) - len(plain) <= ndim


def _value_node(value: Any, dt: np.dtype, where: str) -> Node:
    """The assigned value as a node of ``dt``, cast as NumPy's setitem casts it."""
    x = _operand(value, f"value assigned to {where}")
    if isinstance(x, _Weak):
        if isinstance(x.scalar, Scalar) and dt.kind in "biu" and isinstance(x.probe, float):
            x.scalar.concrete("a float assigned into an integer array")  # NaN raises, 1.7 truncates: by value
        return _to_dtype(x, dt)
    return cast(x, dt)


def setitem(self: Tracer, key: Any, value: Any) -> None:
    if slice_assign.echo(self, key, value):  # x[key] op= v: the update through x[key] wrote it already
        return
    shape, dt = self.node.shape, self.node.dtype
    if isinstance(key, Tracer) and key.dtype == dtypes.BOOL:
        if key.node.shape != shape:
            raise UnsupportedError(f"x[mask] = v with a mask of shape {key.node.shape} on an array of shape {shape}",
                                   hint="use a mask of the array's shape (broadcast it: np.broadcast_to(mask, "
                                        "x.shape)), or np.where(mask, v, x)")
        v = _value_node(value, dt, "x[mask]")
        if v.ndim:
            raise UnsupportedError("x[mask] = array: NumPy puts the array's values, in order, at the True "
                                   "positions, which depends on the data",
                                   hint="np.where(mask, v, x) puts v's values at the same positions")
        new = _node("where", [key.node, _node("broadcast_to", [v], {"shape": list(shape)}) if shape else v,
                              self.node])
        assign(self, new, "x[mask] = v")
        return
    if isinstance(key, Tracer):
        raise UnsupportedError("assignment with an integer index array (x[idx] = v) is not supported",
                               hint="build the result with np.where(mask, v, x)")
    if not _is_whole(key, len(shape)):
        if slice_assign.assign_part(self, key, value, live_views(self)):  # on an argument: those elements of it
            return
        # a value computed in the function: its new value, where(mask, v placed, old) (fusec.ir.part_update)
        v = _value_node(value, dt, f"x[{_key_text(key)}]")
        assign(self, part_update.updated(self.node, key, v), f"x[{_key_text(key)}] = v")
        return
    v = _value_node(value, dt, "x[...]")
    if v.shape != shape:
        try:
            target = np.broadcast_shapes(v.shape, shape)
        except ValueError:
            target = None
        if target != shape:
            raise FusecValueError(f"could not broadcast input array from shape {v.shape} into shape {shape}")
        v = _node("broadcast_to", [v], {"shape": list(shape)})
    assign(self, v, "x[...] = v")


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


Tracer.__setitem__ = setitem  # type: ignore[method-assign]
_wrap_views()

__all__ = ["assign", "begin", "end", "live_views", "setitem", "apply_ufunc"]
