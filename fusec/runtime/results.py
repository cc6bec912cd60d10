"""How a call returns the function's results: the one place that packs them.

A trace records its result structure as ``structure`` and ``nones``:

- ``structure`` ``"single"`` (one array), ``"tuple"`` or ``"list"`` (a sequence of entries), ``"dict"`` (a
  :class:`DictStructure`, which holds the keys), or ``"none"`` (the function returns None: with or without updating
  its arguments in place);
- ``nones``: for a tuple, list or dict, the positions of its entries that are None (returned as None there; the other
  entries are the graph's results, in order). ``return ()`` is a tuple with no entries.

:func:`pack_results` packs a call's results, and :func:`pack_source` writes the same packing as a Python
expression for the dispatch fast path's generated runner (:mod:`fusec.runtime.dispatch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STRUCTURES = ("single", "tuple", "list", "dict", "none")  # how a call returns its results ("none": returns None)


class DictStructure(str):
    """The structure ``"dict"`` of a function returning a dict: ``keys``, in order (strings or ints), one per entry."""

    keys: tuple[str | int, ...]

    def __new__(cls, keys: Sequence[str | int]) -> DictStructure:
        self = super().__new__(cls, "dict")
        self.keys = tuple(keys)
        return self


def check_structure(structure: str, nones: Sequence[int] = ()) -> None:
    """A ValueError for a structure fusec does not know, or None entries outside a tuple, list or dict."""
    if structure not in STRUCTURES or (structure == "dict" and not isinstance(structure, DictStructure)):
        raise ValueError(f"structure must be one of {STRUCTURES} (a dict's a DictStructure), not {structure!r}")
    if nones and structure not in ("tuple", "list", "dict"):
        raise ValueError(f"None entries are positions in a returned tuple, list or dict, not in a {structure!r} "
                         "result")


def _entries(values: Sequence[Any], nones: Sequence[int], none: Any) -> list[Any]:
    """The returned sequence's entries: ``none`` at the positions ``nones``, ``values`` in order elsewhere."""
    if not nones:
        return list(values)
    given = iter(values)
    return [none if i in nones else next(given) for i in range(len(values) + len(nones))]


def pack_results(values: Sequence[Any], structure: str, nones: Sequence[int] = ()) -> Any:
    """A call's results (``values``: its array results, in order) as the function returns them: ``structure``
    ``"single"`` (the first), ``"tuple"``, ``"list"`` (with None at the positions ``nones``), or ``"none"``
    (None)."""
    if structure == "none":
        return None
    if structure == "single":
        return values[0]
    entries = _entries(values, nones, None)
    if isinstance(structure, DictStructure):
        return dict(zip(structure.keys, entries))
    return tuple(entries) if structure == "tuple" else entries


def pack_source(names: Sequence[str], structure: str, nones: Sequence[int] = ()) -> str:
    """:func:`pack_results` as a Python expression of the results' variable ``names``."""
    if structure == "none":
        return "None"
    if structure == "single":
        return names[0]
    if isinstance(structure, DictStructure):
        return "{" + ", ".join(f"{k!r}: {e}" for k, e in zip(structure.keys, _entries(names, nones, "None"))) + "}"
    entries = ", ".join(_entries(names, nones, "None"))
    if structure == "list":
        return f"[{entries}]"
    return f"({entries},)" if entries else "()"


__all__ = ["STRUCTURES", "DictStructure", "check_structure", "pack_results", "pack_source"]
