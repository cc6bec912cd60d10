"""The find of a union-find kept as a plain ``{key: parent}`` dict (a root is its own parent): the classes of axes
that run together (:mod:`fusec.passes.reshapes`, :mod:`fusec.dask.axes`) and of nodes that share data
(:mod:`fusec.inspect.siblings`)."""

from __future__ import annotations

from typing import Any, TypeVar

K = TypeVar("K")


def find_root(parent: dict[Any, Any], key: K) -> K:
    """The root of ``key``'s class (``key`` must be in ``parent``), every key on the way pointed at it."""
    root = key
    while parent[root] != root:
        root = parent[root]
    while parent[key] != root:
        parent[key], key = root, parent[key]
    return root


__all__ = ["find_root"]
