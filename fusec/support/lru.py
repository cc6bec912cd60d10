"""A bounded mapping that forgets the least recently used entry: the in-memory caches of fusec use it, so that
a program calling fused functions with ever new arguments (a new Python float each call, a new shape) keeps a
bounded number of traces, plans and compiled modules."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; :meth:`get` of a present key makes it the most recent, :meth:`put` of a new one
    beyond ``size`` drops the least recent. Not locked: callers that share one across threads hold their own."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"an LRU holds at least one entry, not {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, default: V | None = None) -> V | None:
        try:
            self._entries.move_to_end(key)
            return self._entries[key]
        except KeyError:  # absent (or dropped by another thread in between: each step is atomic)
            return default

    def put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[K]:
        return list(self._entries)

    def values(self) -> list[V]:
        return list(self._entries.values())

    def clear(self) -> None:
        self._entries.clear()
