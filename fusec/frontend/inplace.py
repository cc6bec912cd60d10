"""In-place updates while tracing: ``x += v``, ``x[mask] = v``, ``x[...] = v``, ``np.add(x, v, out=x)``
(assignment to part of an argument, ``x[:, k] = v``: :mod:`fusec.frontend.slice_assign`).

An update is functional in the IR (a new node) and rebinds the :class:`Tracer` object's node, so every
Python name bound to that object sees it, as with NumPy (``a = x; a += 1`` changes ``x``), and a value read
before it keeps the node it read (``y = x.copy(); x += 1``: ``y`` is ``x``'s old node). Updating a traced
*input* makes the trace write the new value back into the caller's array (``trace_function`` reports which
inputs changed; :mod:`fusec.frontend.api` writes them). The casting rules are NumPy's: augmented assignment casts
the ufunc's result to the array's dtype under ``same_kind`` (``int_array += 1.5`` is a TypeError); item
assignment casts the value as ``setitem`` does (unsafe, with NumPy's errors for out-of-range Python ints
and NaN into integers). A 0-d value computed in the function (``x[0]`` of a 1-d ``x``, ``x.sum()``) is a NumPy
scalar, which no update changes: ``s += v`` makes a new one (of the dtype ``s + v`` has).

Views (:mod:`fusec.frontend.aliases`): NumPy's views share memory with the array they view. After an update of an
array each live view of it is made again from its new value; an update of a view (``t = x[1:]; t += 1``,
``x.T[0] = v``) writes through it into the array it views (:func:`fusec.frontend.slice_assign.assign_through_view`);
an update of what may be a view or a copy (``t = x.ravel(); t += 1``) or of a broadcast is refused with the
reason, never computed with stale values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fusec.frontend import aliases, part_update, slice_assign
from fusec.frontend.scalars import Scalar
from fusec.frontend.trace import (
    Tracer,
    _node,
    _operand,
    _to_dtype,
    _Weak,
    apply_ufunc,
    cast,
)
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.support.errors import FusecTypeError, FusecValueError, UnsupportedError


def assign(target: Tracer, node: Node, what: str) -> Tracer:
    """Rebind ``target`` to ``node`` (its new value, of its dtype and shape), and its views to theirs; where
    ``target`` is a view, through it into the array it views (refused where that cannot be done)."""
    if target._view is not None:
        if slice_assign.assign_through_view(target, node, what):
            return target
        made = target._view
        why = ("NumPy makes it a view or a copy depending on the memory layout, so whether the write reaches the "
               "array it was made from is not known while tracing") if not made.definite else \
            "its elements are not each one element of the array it views (NumPy's is read-only)"
        raise UnsupportedError(f"{what} on a view made by {made.made_by} ({_describe(target)}) is not supported: {why}",
                               hint="update the array itself, or copy the view first (y = x.ravel().copy())")
    assert node.shape == target.node.shape and node.dtype == target.node.dtype
    target.node = node
    aliases.rebind(target, what)
    return target


def _describe(t: Tracer) -> str:
    return f"{dtypes.short(t.node.dtype)}{list(t.node.shape)}"


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
        if slice_assign.assign_part(self, key, value):  # on an argument: those elements of it
            return
        # a value computed in the function: its new value, where(mask, v placed, old) (fusec.frontend.part_update)
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

__all__ = ["apply_ufunc", "assign", "setitem"]
