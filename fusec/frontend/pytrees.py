"""Containers of arrays as arguments: lists, tuples (named ones too), dicts and dataclasses, nested, flattened into
one parameter per leaf and built again, of traced values, for the traced call.

``f(params, grads)`` with ``params = {"w": w, "b": b}`` is traced as if called with the leaves ``params['w']`` and
``params['b']`` (each an array argument: a graph input), and the function receives a dict of traced arrays. A leaf's
name (:class:`LeafName`, a ``str``) says where it sits; the signature a trace is cached under holds every leaf's path,
so another structure (other keys, another length, a list for a tuple) traces again. Leaves that are numbers are
runtime scalars like any number argument (``hyper["lr"]``), static where the value decides the trace (``axes=(0, 1)``
used as an axis); other leaves (None, strings) pass through as they are, and a container of nothing else is a static
value, cached by value.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from fusec.frontend import arguments
from fusec.frontend.scalars import is_runtime_candidate

_CONTAINERS = (list, tuple, dict)


class LeafName(str):
    """The parameter name of one leaf of a container argument, as a user reads it (``params['w']``, ``xs[0]``): its
    ``root`` (the argument's name), its ``path`` (``(container type, key)`` from the argument down) and ``ident``, an
    identifier for the graph input it becomes (``params_w``)."""

    root: str
    path: tuple[tuple[type, Any], ...]
    ident: str

    def __new__(cls, root: str, path: tuple[tuple[type, Any], ...]) -> LeafName:
        text = root + "".join(f"[{key!r}]" for _, key in path)
        self = super().__new__(cls, text)
        self.root, self.path = root, path
        self.ident = re.sub(r"\W+", "_", "_".join([root, *(str(key) for _, key in path)])).strip("_") or "leaf"
        return self


def _is_dataclass(value: Any) -> bool:
    """A dataclass instance that is not itself an array argument (an ArraySpec is a dataclass)."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and not _array_like(value)


def _items(value: Any) -> Any:
    """A container's (key, item) pairs: a dict's, a dataclass's fields by name, a list's or tuple's by position."""
    if isinstance(value, dict):
        return value.items()
    if _is_dataclass(value):  # the fields its __init__ takes (what building it again passes)
        return ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value) if f.init)
    return enumerate(value)


def leaves(value: Any) -> Iterator[Any]:
    """Every leaf of ``value`` through lists, tuples, dicts and dataclasses (an array is a leaf), in order."""
    if _is_container(value):
        for _, item in _items(value):
            yield from leaves(item)
    else:
        yield value


def map_leaves(fn: Callable[[Any, str], Any], value: Any, what: str) -> Any:
    """``value`` with each leaf replaced by ``fn(leaf, its path)`` (``what``, then ``[key]``/``.field``), every
    container built again of its type."""
    if not _is_container(value):
        return fn(value, what)
    if _is_dataclass(value):
        return dataclasses.replace(value, **{k: map_leaves(fn, v, f"{what}.{k}") for k, v in _items(value)})
    children = {k: map_leaves(fn, v, f"{what}[{k!r}]") for k, v in _items(value)}
    if isinstance(value, dict):
        return _dict_like(type(value), children)
    if hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*children.values())
    return type(value)(children.values())


def _is_container(value: Any) -> bool:
    return isinstance(value, _CONTAINERS) or _is_dataclass(value)


def holds_array(value: Any) -> bool:
    """Whether ``value`` is, or is a container with somewhere inside, an array (NumPy, CuPy, ArraySpec) or a number
    (a runtime scalar unless its value decides the trace)."""
    if _is_container(value):
        return any(holds_array(v) for _, v in _items(value))
    return _array_like(value) or is_runtime_candidate(value)


def _array_like(value: Any) -> bool:
    """An array of any library (NumPy, CuPy, an ArraySpec, a Dask array, a PyTorch tensor), not a NumPy scalar."""
    return arguments.backend_of(value) is not None or (
        hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (np.generic, type)))


def is_tree(value: Any) -> bool:
    """Whether an argument is flattened: a list, tuple, dict or dataclass holding an array or a number."""
    return _is_container(value) and holds_array(value)


def flatten(root: str, value: Any) -> list[tuple[LeafName, Any]]:
    """The leaves of the container argument ``root`` = ``value``, in order (a dict's in its key order)."""
    return list(_leaves(root, (), value))


def _leaves(root: str, path: tuple[tuple[type, Any], ...], value: Any) -> Iterator[tuple[LeafName, Any]]:
    if is_tree(value):
        for key, item in _items(value):
            yield from _leaves(root, (*path, (type(value), key)), item)
    else:
        yield LeafName(root, path), value


def rebuild(leaves: list[tuple[LeafName, Any]]) -> Any:
    """The container whose leaves (names and new values, all of one root, in :func:`flatten`'s order) are given."""
    return _build(0, leaves)


def _build(depth: int, leaves: list[tuple[LeafName, Any]]) -> Any:
    if len(leaves) == 1 and len(leaves[0][0].path) == depth:
        return leaves[0][1]
    kind = leaves[0][0].path[depth][0]
    groups: dict[Any, list[tuple[LeafName, Any]]] = {}
    for name, value in leaves:
        groups.setdefault(name.path[depth][1], []).append((name, value))
    children = {key: _build(depth + 1, group) for key, group in groups.items()}
    if dataclasses.is_dataclass(kind):  # its fields by name (every field an argument of its __init__)
        return kind(**children)
    if issubclass(kind, dict):
        return kind(children) if kind is dict else _dict_like(kind, children)
    items = [children[k] for k in range(len(children))]
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):  # a namedtuple
        return kind(*items)
    return kind(items)


def _dict_like(kind: type, children: Mapping[Any, Any]) -> Any:
    try:
        return kind(children)
    except TypeError:  # a dict subclass that takes no mapping: a plain dict of the same items
        return dict(children)


def static_key(value: Any) -> Any:
    """A hashable key of a container argument holding no array (cached by value)."""
    if isinstance(value, dict):
        return (type(value).__name__, tuple((k, static_key(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(static_key(v) for v in value))
    try:
        hash(value)
    except TypeError:
        return (type(value).__name__, id(value))
    return (type(value).__name__, value)


__all__ = ["LeafName", "flatten", "holds_array", "is_tree", "leaves", "map_leaves", "rebuild", "static_key"]
