"""Assignment to part of an argument while tracing: ``x[:, k] = v``, ``x[a:b] = v``, ``x[..., ::2] = v``,
``x[1:, None] += v`` (any basic index; ``v`` broadcast and cast as NumPy's ``setitem`` does).

On an argument such an assignment changes exactly the selected elements of the caller's array, as NumPy does:
the trace records a :class:`PartialUpdate` (the argument, the index as written, the value cast to the
argument's dtype, each value a graph output after the whole-array updates' values), and after the kernels the
runtime writes the values into those elements (:func:`fusec.update.write_parts`), in the order of the
assignments, after any whole-array update (a whole-array assignment after them, ``x[...] = 0``, replaces
them). The argument's tracer is rebound to its new value everywhere (:func:`fusec.ir.part_update.updated`), for
what reads it after the assignment, and so are its live views made by indexing; any other live view of it
(``x.T``) is rebound to a *poisoned* node, and a graph that reads one is refused with the line that reads it
(:func:`check_unread`). On a value computed in the function, assignment to part of it is a functional update
(:mod:`fusec.ir.part_update`).

``x[key] op= v`` is Python's ``t = x[key]; t op= v; x[key] = t``: the update of ``t``, a view of the argument
made by indexing, is this partial update (so ``t`` sees its new values, as NumPy's view does), and the
assignment that follows writes the same values again (recorded once).
"""

from __future__ import annotations

import operator
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from fusec.errors import UnsupportedError, user_location
from fusec.ir.graph import Graph, Node, make_node
from fusec.ir.reshape_math import reshape_node


@dataclass(frozen=True)
class PartialUpdate:
    """``arguments[index][key] = value``: ``key`` is the basic index as written (integers, slices, None, ...),
    ``value`` the assigned value cast to the argument's dtype, in any shape that broadcasts to ``x[key]``'s."""

    index: int
    key: tuple[Any, ...]
    value: Node


class _State(threading.local):
    def __init__(self) -> None:
        self.arguments: dict[int, tuple[weakref.ref, int]] = {}  # id(tracer) -> (tracer, argument index)
        self.parts: list[PartialUpdate] = []
        self.before: dict[int, Node] = {}  # argument index -> its value before its first partial update
        self.keys: dict[int, tuple[weakref.ref, Any, Any]] = {}  # id(view) -> (view, its root tracer, the index)
        self.echoes: dict[int, Any] = {}  # id(view) -> the index of x[key] op= v, whose x[key] = view is a repeat
        self.new_values: dict[int, Node] = {}  # argument index -> its value after its latest partial update


_state = _State()


def begin(arguments: list[Any]) -> None:
    _state.arguments = {id(t): (weakref.ref(t), i) for i, t in enumerate(arguments)}
    _state.parts, _state.before, _state.keys, _state.echoes, _state.new_values = [], {}, {}, {}, {}


def end() -> tuple[list[PartialUpdate], dict[int, Node], dict[int, Node]]:
    """The partial updates in order, each partially updated argument's value before the first of them, and its
    value after the latest (which the function read)."""
    out = (_state.parts, _state.before, _state.new_values)
    _state.arguments, _state.parts, _state.before, _state.keys, _state.echoes = {}, [], {}, {}, {}
    _state.new_values = {}
    return out


def _in_parts(t: Any, index: int) -> bool:
    """Whether argument ``index`` (tracer ``t``) was last assigned in part (no whole assignment since)."""
    return _state.new_values.get(index) is t.node


def _argument_index(t: Any) -> int | None:
    entry = _state.arguments.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else None


def note_index(view: Any, root: Any, key: Any) -> None:
    """``view`` is ``root[key]`` (basic indexing), for ``root[key] op= v``."""
    _state.keys[id(view)] = (weakref.ref(view), root, key)


def _index_of_view(view: Any) -> tuple[Any, Any] | None:
    entry = _state.keys.get(id(view))
    return (entry[1], entry[2]) if entry is not None and entry[0]() is view else None


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


def _key_text(key: Any) -> str:
    out = []
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, slice):
            text = ":".join("" if p is None else str(p) for p in (k.start, k.stop))
            out.append(text if k.step is None else f"{text}:{k.step}")
        else:
            out.append("..." if k is Ellipsis else "None" if k is None else repr(k))
    return ", ".join(out)


def _poison(t: Any, what: str) -> Node:
    """A node of ``t``'s type that no kernel can compute: a graph reading it is refused (:func:`check_unread`)."""
    node = t.node
    name = node.attr("name", "the argument") if node.op == "input" else "a view of the argument"
    return make_node("input", (), {"name": name, "index": -1, "poisoned": what}, dtype=node.dtype, shape=node.shape)


def assign_part(target: Any, key: Any, value: Any, live_views: list[Any], node: Node | None = None) -> bool:
    """``target[key] = value`` for an argument's tracer (True), or False when ``target`` is no argument.
    ``live_views`` are the views of ``target`` still referenced (NumPy would write through them); ``node``, where
    given, is the value already cast (an update through a view)."""
    from fusec.ir.inplace import _value_node
    from fusec.ir.trace import basic_index

    index = _argument_index(target)
    if index is None:
        return False
    text = f"x[{_key_text(key)}] = v"
    from fusec.ir.part_update import updated

    v = node if node is not None else _value_node(value, target.node.dtype, f"x[{_key_text(key)}]")
    new = updated(target.node, key, v)  # its new value everywhere (the index and v's shape checked as NumPy's)
    if not _in_parts(target, index):  # the first assignment to part of it since it was last assigned whole
        _state.parts = [p for p in _state.parts if p.index != index]
        _state.before[index] = target.node
    _state.parts.append(PartialUpdate(index, _normal_key(key), v))
    what = f"{text} at {user_location() or 'an assignment'}"
    for other in live_views:  # NumPy's views of the argument see the assignment
        same = _index_of_view(other)
        if same is not None and same[0] is target:
            other.node = basic_index(new, same[1])
        elif not poisoned(other.node):
            other.node = _poison(other, what)
    target.node = _state.new_values[index] = new
    return True


def assign_through_view(view: Any, node: Node) -> bool:
    """``view op= v`` where ``view`` is ``x[key]`` of an argument ``x``: the partial update of ``x`` (True), which
    the view then shows; False for any other view."""
    found = _index_of_view(view)
    if found is None:
        return False
    root, key = found
    from fusec.ir.inplace import _is_whole, live_views

    others = [v for v in live_views(root) if v is not view]
    if _argument_index(root) is None:  # a value computed in the function: its new value (fusec.ir.part_update)
        if others or getattr(root, "_view_of", None) is not None:
            return False  # NumPy would change those views too (or the array this one views): refused
        from fusec.ir.part_update import updated

        root.node = updated(root.node, key, node)
        view.node = node
        _state.echoes[id(view)] = key
        return True
    if _is_whole(key, root.node.ndim) and not others:  # x[...] op= v: the whole argument, which stays readable
        root.node = reshape_node(node, root.node.shape, user_location())
    else:
        assign_part(root, key, None, others, node=node)
    view.node = node
    _state.echoes[id(view)] = key
    return True


def echo(target: Any, key: Any, value: Any) -> bool:
    """Whether ``target[key] = value`` only repeats ``value op= v`` (Python's second step of ``x[key] op= v``),
    which has written it already."""
    found = _index_of_view(value)
    if found is None or found[0] is not target or id(value) not in _state.echoes:
        return False
    if _normal_key(_state.echoes[id(value)]) != _normal_key(key):
        return False
    del _state.echoes[id(value)]
    return True



def poisoned(node: Node) -> bool:
    """Whether ``node`` stands for an argument (or a view of one) after an assignment to part of it."""
    return node.op == "input" and node.attr("poisoned") is not None


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


def check_unread(graph: Graph) -> None:
    """Raise :class:`UnsupportedError` where ``graph`` reads a view of an argument (not made by indexing) after an
    assignment to part of the argument."""
    users = graph.users
    for n in graph.nodes:
        if poisoned(n):
            reader = next(iter(users.get(n, ())), None)
            raise UnsupportedError(
                f"{n.attr('name')} is read after {n.attr('poisoned')}, which NumPy writes through into it: fusec "
                "follows an assignment only into views made by indexing (x[...])",
                loc=reader.loc if reader is not None else None,
                hint="make the view after the assignment, or index instead (x[:, 0] rather than x.T[0])")


__all__ = ["PartialUpdate", "assign_part", "assign_through_view", "begin", "check_unread", "echo", "end",
           "final_updates", "note_index", "poisoned"]
