"""Which traced arrays are views of which while tracing, so that in-place updates follow NumPy's aliasing.

A :class:`fusec.frontend.tracer.Tracer` stands for an array by its current node, and an in-place update rebinds it
(:func:`fusec.frontend.slice_assign.assign`). NumPy's views share memory with the array they view: a write to the
array shows in each view, a write through a view shows in the array. The tracer records each view it makes
(:func:`note`) as a :class:`View`: its *root* (the array, itself no view, whose memory it shares) and how to make the
view again from a new value of the root; a view's node is always that, made from the root's current node, so it
reads the root through layout ops alone.

- After an update of a root, :func:`rebind` gives each of its live views its new value, made again from the
  root's: ``t = x[:, 0]; x[0] = 5; t * 2`` sees the 5, as in NumPy, whatever made the view (indexing, ``.T``,
  ``np.flip``, ``np.broadcast_arrays``, ...).
- Some functions return a view or a copy depending on the memory layout (``ravel``, ``ascontiguousarray``, a
  ``reshape`` that merges or splits axes), which a trace does not know. After a write to its root such a result
  is stale: its node becomes a poisoned input, and a graph that reads it is refused with the line that reads it
  (:func:`check_unread`).
- A write *through* a view is its writer's business (:func:`fusec.frontend.slice_assign.assign_through_view`): the
  layout ops between the view's node and its root's, inverted.
- A copy (``.copy()``, ``np.array``, ``astype``, arithmetic) is never recorded: it is a value, which no later write
  changes (the runtime keeps what it read: :func:`fusec.runtime.write_backs.commit`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fusec.ir.graph import Graph, Node, make_node
from fusec.support.errors import UnsupportedError, user_location

VIEW = "view"  # NumPy's result is a view of the (first) argument
MAYBE_VIEW = "maybe a view"  # a view or a copy, depending on the argument's memory layout
EACH = "a view of each"  # result i is a view of argument i (np.broadcast_arrays, np.atleast_2d(a, b))

# the functions of the registry (fusec.frontend.registry.FUNCTIONS) whose results are views in NumPy (a name absent
# here makes a new array)
FUNCTION_KINDS: dict[str, str] = {
    **dict.fromkeys(("transpose", "matrix_transpose", "swapaxes", "moveaxis", "rollaxis", "squeeze", "expand_dims",
                     "broadcast_to", "flip", "flipud", "fliplr", "rot90", "split", "array_split", "diagonal"), VIEW),
    **dict.fromkeys(("atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays"), EACH),
    **dict.fromkeys(("reshape", "ravel", "ascontiguousarray"), MAYBE_VIEW),
    "diag": VIEW,  # of a 2-d array (its diagonal); of a 1-d array a new one (:func:`kind_of`)
}


def kind_of(name: str, args: Sequence[Any], result: Any) -> str | None:
    """How the result of the function registered as ``name``, called with ``args``, relates to its arguments:
    :data:`VIEW`, :data:`MAYBE_VIEW`, :data:`EACH`, or None for a new array."""
    kind = FUNCTION_KINDS.get(name)
    first = getattr(args[0], "node", None) if args else None
    if first is None or kind is None:
        return None
    if name == "diag" and first.ndim != 2:
        return None
    if name == "reshape" and _only_unit_axes_differ(first.shape, getattr(result, "node", first).shape):
        return VIEW  # size-1 axes come and go: NumPy never copies for that
    return kind


def _only_unit_axes_differ(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return [d for d in a if d != 1] == [d for d in b if d != 1]


@dataclass(eq=False)
class View:
    """What a traced view is of: ``root`` (the Tracer whose memory it shares), ``remake`` (its node from a node of
    the root), ``definite`` (False: NumPy may have made a copy instead), ``parent`` (the Tracer it was made from,
    while that lives) and ``key`` (the basic index that made it from its parent, or :data:`NOT_INDEXED`),
    ``made_by`` and ``made_at`` (what made it, where: for messages)."""

    root: Any
    remake: Callable[[Node], Node]
    definite: bool
    parent: weakref.ref
    key: Any
    made_by: str
    made_at: str | None


class _State(threading.local):
    def __init__(self) -> None:
        self.active = False
        self.remaking = False
        self.views: dict[int, list[weakref.ref]] = {}  # id(root) -> its views (weakly: a dead view needs no rebind)


_state = _State()
NOT_INDEXED = object()  # the key of a view made by something other than basic indexing


def begin() -> None:
    _state.active, _state.remaking, _state.views = True, False, {}


def end() -> None:
    _state.active, _state.remaking, _state.views = False, False, {}


def note(base: Any, result: Any, remake: Callable[[Node], Node], made_by: str, *, definite: bool = True,
         key: Any = NOT_INDEXED) -> None:
    """Record ``result`` (a Tracer) as a view of ``base`` (a Tracer) that ``remake`` makes again from a new node
    of ``base``; ``key`` is the basic index that made it, if that did."""
    if not _state.active or _state.remaking or result is base or getattr(result, "node", None) is None:
        return
    parent: View | None = base._view
    if parent is None:
        root, from_root = base, remake
    else:
        root, from_root = parent.root, _composed(remake, parent.remake)
        definite = definite and parent.definite
        if parent.made_by != made_by:
            made_by = f"{made_by} of a view made by {parent.made_by}"
    result._view = View(root, from_root, definite, weakref.ref(base), key, made_by, user_location())
    _state.views.setdefault(id(root), []).append(weakref.ref(result))


def note_results(base: Any, results: Any, remake: Callable[[Node], Any], made_by: str, *,
                 definite: bool = True) -> None:
    """:func:`note` for a function's result that is one Tracer or a tuple/list of them (``np.split``): ``remake``
    gives the function's result again for a new node of ``base``."""
    if isinstance(results, (tuple, list)):
        for i, r in enumerate(results):
            note(base, r, lambda n, i=i: remake(n)[i].node, made_by, definite=definite)
    else:
        note(base, results, lambda n: remake(n).node, made_by, definite=definite)


def _composed(outer: Callable[[Node], Node], inner: Callable[[Node], Node]) -> Callable[[Node], Node]:
    return lambda n: outer(inner(n))


def rebind(root: Any, what: str) -> None:
    """After ``root``'s node changed (by ``what``, ``"x[0] = v"``): each live view of it made again from its new
    node; a view that may be a copy instead (:data:`MAYBE_VIEW`) stale, so that a graph reading it is refused."""
    refs = _state.views.get(id(root))
    if not refs:
        return
    live = [ref for ref in refs if ref() is not None]
    _state.views[id(root)] = live
    _state.remaking = True
    try:
        for ref in live:
            view = ref()
            if view is None:
                continue
            if view._view.definite:
                view.node = view._view.remake(root.node)
            elif not stale(view.node):
                view.node = _stale_node(view, f"{what} at {user_location() or 'an assignment'}")
    finally:
        _state.remaking = False


def _stale_node(view: Any, what: str) -> Node:
    """A node of ``view``'s type that no kernel computes: a graph reading it is refused (:func:`check_unread`)."""
    v = view._view
    made = f"the {v.made_by} made at {v.made_at}" if v.made_at else f"a {v.made_by}"
    return make_node("input", (), {"name": made, "index": -1, "poisoned": what}, dtype=view.node.dtype,
                     shape=view.node.shape)


def stale(node: Node) -> bool:
    """Whether ``node`` stands for a view that may have changed (:func:`rebind`)."""
    return node.op == "input" and node.attr("poisoned") is not None


def check_unread(graph: Graph, returned_at: str | None = None) -> None:
    """Raise :class:`UnsupportedError` where ``graph`` reads a stale view (:func:`rebind`), at the line that reads
    it (``returned_at``, the ``return`` line, where the function returns it as it is)."""
    users = graph.users
    for n in graph.nodes:
        if stale(n):
            reader = next(iter(users.get(n, ())), None)
            raise UnsupportedError(
                f"{n.attr('name')} is read after {n.attr('poisoned')}; NumPy makes it a view or a copy depending on "
                "the memory layout, so whether that write changed it is not known while tracing",
                loc=reader.loc if reader is not None else returned_at,
                hint="copy it (.copy()) before the write to keep the old values, or make it after the write to see "
                     "the new ones")


__all__ = ["EACH", "FUNCTION_KINDS", "MAYBE_VIEW", "NOT_INDEXED", "VIEW", "View", "begin", "check_unread", "end",
           "kind_of", "note", "note_results", "rebind", "stale"]
