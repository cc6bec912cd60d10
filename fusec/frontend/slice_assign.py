"""Assignment to part of an argument while tracing: ``x[:, k] = v``, ``x[a:b] = v``, ``x[..., ::2] = v``,
``x[1:, None] += v`` (any basic index; ``v`` broadcast and cast as NumPy's ``setitem`` does).

On an argument such an assignment changes exactly the selected elements of the caller's array, as NumPy does:
the trace records a :class:`PartialUpdate` (the argument, the index as written, the value cast to the
argument's dtype, each value a graph output after the whole-array updates' values), and after the kernels the
runtime writes the values into those elements (:func:`fusec.runtime.write_backs.commit`), in the order of the
assignments, after any whole-array update (a whole-array assignment after them, ``x[...] = 0``, replaces
them). The argument's tracer is rebound to its new value everywhere (:func:`fusec.frontend.part_update.updated`), for
what reads it after the assignment, and so are its live views (:func:`fusec.frontend.aliases.rebind`). On a value
computed in the function, assignment to part of it is a functional update (:mod:`fusec.frontend.part_update`).

A write through a view (``t = x[1:, ::2]; t[0] = v``, ``x.T[0] += 1``, ``np.flip(x, 0)[1:] = v``, through any
number of steps) is an assignment to the array it views (:func:`assign_through_view`): to part of it where the
view selects part of it.
``x[key] op= v`` is Python's ``t = x[key]; t op= v; x[key] = t``: the update of ``t`` is that write (so ``t``
sees its new values, as NumPy's view does), and the assignment that follows writes the same values again
(recorded once: :func:`echo`).

Every update of a traced array, whole or in part, goes through :func:`assign`: the tracer's new node (or, for a
view, the write through it), then its views made again. It sits here, below :mod:`fusec.frontend.tracer` (whose
in-place operators and item assignment call it), and works on the Tracer's ``node`` and ``_view`` alone.
"""

from __future__ import annotations

import operator
import threading
import weakref
from typing import Any

from fusec.frontend import aliases
from fusec.frontend.nodes import new_node
from fusec.frontend.part_update import updated
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.reshape_math import reshape_node
from fusec.runtime.write_backs import PartialUpdate
from fusec.support.errors import UnsupportedError


class _State(threading.local):
    def __init__(self) -> None:
        self.arguments: dict[int, tuple[weakref.ref, int]] = {}  # id(tracer) -> (tracer, argument index)
        self.parts: list[PartialUpdate] = []
        self.before: dict[int, Node] = {}  # argument index -> its value before its first partial update
        self.echoes: dict[int, Any] = {}  # id(view) -> the index of x[key] op= v, whose x[key] = view is a repeat
        self.new_values: dict[int, Node] = {}  # argument index -> its value after its latest partial update


_state = _State()


def begin(arguments: list[Any]) -> None:
    _state.arguments = {id(t): (weakref.ref(t), i) for i, t in enumerate(arguments)}
    _state.parts, _state.before, _state.echoes, _state.new_values = [], {}, {}, {}


def end() -> tuple[list[PartialUpdate], dict[int, Node], dict[int, Node]]:
    """The partial updates in order, each partially updated argument's value before the first of them, and its
    value after the latest (which the function read)."""
    out = (_state.parts, _state.before, _state.new_values)
    _state.arguments, _state.parts, _state.before, _state.echoes = {}, [], {}, {}
    _state.new_values = {}
    return out


def _in_parts(t: Any, index: int) -> bool:
    """Whether argument ``index`` (tracer ``t``) was last assigned in part (no whole assignment since)."""
    return _state.new_values.get(index) is t.node


def is_argument(t: Any) -> bool:
    """Whether ``t`` is the tracer of an argument of the function being traced."""
    return _argument_index(t) is not None


def _argument_index(t: Any) -> int | None:
    entry = _state.arguments.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else None


def _normal_key(key: Any) -> tuple[Any, ...]:
    """``key`` as a tuple of Python ints, slices, None and Ellipsis (NumPy integers made ints)."""
    out = []
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, slice):
            out.append(slice(*(None if p is None else operator.index(p) for p in (k.start, k.stop, k.step))))
        elif k is None or k is Ellipsis:
            out.append(k)
        else:
            out.append(operator.index(k))
    return tuple(out)


def key_text(key: Any) -> str:
    """``key`` as written in ``x[key]`` (for messages)."""
    out = []
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, slice):
            text = ":".join("" if p is None else str(p) for p in (k.start, k.stop))
            out.append(text if k.step is None else f"{text}:{k.step}")
        else:
            out.append("..." if k is Ellipsis else "None" if k is None else repr(k))
    return ", ".join(out)


def assign(target: Any, node: Node, what: str) -> Any:
    """Rebind ``target`` (a Tracer) to ``node`` (its new value, of its dtype and shape), and its views to theirs;
    where ``target`` is a view, through it into the array it views (refused where that cannot be done)."""
    if target._view is not None:
        if assign_through_view(target, node, what):
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


def _describe(t: Any) -> str:
    return f"{dtypes.short(t.node.dtype)}{list(t.node.shape)}"


def assign_part(target: Any, key: Any, v: Node) -> None:
    """``target[key] = v`` for the tracer of an argument (:func:`is_argument`), ``v`` the value cast to its
    dtype."""
    index = _argument_index(target)
    assert index is not None, "assignment to part of a value that is no argument (fusec.frontend.part_update)"
    new = updated(target.node, key, v)  # its new value everywhere (the index and v's shape checked as NumPy's)
    if not _in_parts(target, index):  # the first assignment to part of it since it was last assigned whole
        _state.parts = [p for p in _state.parts if p.index != index]
        _state.before[index] = target.node
    _state.parts.append(PartialUpdate(index, _normal_key(key), v))
    target.node = _state.new_values[index] = new
    aliases.rebind(target, f"x[{key_text(key)}] = v")  # NumPy's views of the argument see the assignment


def assign_through_view(view: Any, node: Node, what: str) -> bool:
    """``view``'s new value is ``node`` (``view op= v``, ``view[k] = v``): the same elements of the array it views
    get it (True), and every view of that array sees them. ``view`` reads its root through layout ops (slices,
    transposes, squeeze/expand_dims, reshapes of size-1 axes), each inverted in turn: a slice by an assignment to
    part of its operand (on an argument, the one written after the kernels), the others by their inverse.
    False where NumPy may have made a copy instead of the view, or where a step has no inverse (a broadcast: NumPy's
    is read-only)."""
    made = view._view
    if made is None or not made.definite:
        return False
    root = made.root
    chain = _layout_chain(view.node, root.node)  # the view's node down to the op that reads the root
    if chain is None:
        return False
    value = node
    for op in chain[:-1]:  # the new value of each op's operand, down to the root's reader's
        value = _operand_value(op, value)
        if value is None:
            return False
    bottom = chain[-1] if chain else None
    if bottom is not None and bottom.op == "slice" and is_argument(root):  # those elements of the argument
        assign_part(root, _slice_key(bottom), value)
    else:
        value = value if bottom is None else _operand_value(bottom, value)
        if value is None:
            return False
        assign(root, value, what)
    if made.key is not aliases.NOT_INDEXED:
        _state.echoes[id(view)] = made.key
    return True


def _layout_chain(node: Node, root: Node) -> list[Node] | None:
    """The layout ops from ``node`` down to the one reading ``root`` (empty when ``node`` is ``root``), or None
    where ``node`` does not read ``root`` through one-operand layout ops alone."""
    chain = []
    while node is not root:
        if node.kind is not Kind.LAYOUT or len(node.operands) != 1:
            return None
        chain.append(node)
        node = node.operands[0]
    return chain


def _operand_value(op: Node, new: Node) -> Node | None:
    """The new value of layout op ``op``'s operand for ``op`` to read ``new`` (None: ``op`` has no inverse)."""
    x = op.operands[0]
    if op.op == "slice":
        return updated(x, _slice_key(op), new)
    if op.op == "transpose":
        perm = op.attr("perm")
        return new_node("transpose", [new], {"perm": [perm.index(k) for k in range(len(perm))]})
    if op.op == "expand_dims":
        return new_node("squeeze", [new], {"axes": list(op.attr("axes"))})
    if op.op == "squeeze":
        return new_node("expand_dims", [new], {"axes": list(op.attr("axes"))})
    if op.op == "reshape":
        return reshape_node(new, x.shape, op.loc)
    return None


def _slice_key(op: Node) -> tuple[slice, ...]:
    """The basic index of a ``slice`` op, each axis kept (an integer index, step 0, as a one-element slice)."""
    key = []
    for start, stop, step, d in zip(op.attr("start"), op.attr("stop"), op.attr("step"), op.operands[0].shape):
        if step == 0:
            k = start + d if start < 0 else start
            key.append(slice(k, k + 1))
        else:
            key.append(slice(start, stop, step))
    return tuple(key)


def echo(target: Any, key: Any, value: Any) -> bool:
    """Whether ``target[key] = value`` only repeats ``value op= v`` (Python's second step of ``x[key] op= v``),
    which has written it already."""
    made = getattr(value, "_view", None)
    if made is None or made.parent() is not target or id(value) not in _state.echoes:
        return False
    if _normal_key(_state.echoes[id(value)]) != _normal_key(key):
        return False
    del _state.echoes[id(value)]
    return True


def final_updates(arguments: list[Any], inputs: list[Node], parts: list[PartialUpdate], before: dict[int, Node],
                  new_values: dict[int, Node]) -> tuple[list[tuple[int, Node]], list[PartialUpdate]]:
    """The whole-array updates ``(argument index, new value)`` and the assignments to part of an argument that
    follow them, from the arguments' tracers at the end of a trace (``new_values``: each argument's value after its
    latest partial update): an argument last assigned in part keeps the value it had before those parts, which
    are written after the kernels; one assigned whole after them drops them."""
    def in_parts(i: int) -> bool:
        return new_values.get(i) is arguments[i].node

    updates = []
    for i, t in enumerate(arguments):
        node = before[i] if in_parts(i) else t.node
        if node is not inputs[i]:
            updates.append((i, node))
    kept = [p for p in parts if in_parts(p.index)]
    return updates, kept


__all__ = ["assign", "assign_part", "assign_through_view", "begin", "echo", "end", "final_updates",
           "is_argument", "key_text"]
