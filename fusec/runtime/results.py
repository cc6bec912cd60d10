"""How a call returns the function's results: the one place that packs them.

A trace records its result structure as ``structure`` and ``nones``:

- ``structure`` ``"single"`` (one array), ``"tuple"`` or ``"list"`` (a sequence of entries), or ``"none"`` (the
  function returns None: with or without updating its arguments in place);
- ``nones``: for a tuple or list, the positions of its entries that are None (returned as None there; the other
  entries are the graph's results, in order). ``return ()`` is a tuple with no entries.

:func:`pack_results` packs a call's results, and :func:`pack_source` writes the same packing as a Python
expression for the dispatch fast path's generated runner (:mod:`fusec.runtime.dispatch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STRUCTURES = ("single", "tuple", "list", "none")  # how a call returns its results ("none": the function returns None)


def check_structure(structure: str, nones: Sequence[int] = ()) -> None:
    """A ValueError for a structure fusec does not know, or None entries outside a tuple or list."""
    if structure not in STRUCTURES:
        raise ValueError(f"structure must be one of {STRUCTURES}, not {structure!r}")
    if nones and structure not in ("tuple", "list"):
        raise ValueError(f"None entries are positions in a returned tuple or list, not in a {structure!r} result")


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
    return tuple(entries) if structure == "tuple" else entries


def pack_source(names: Sequence[str], structure: str, nones: Sequence[int] = ()) -> str:
    """:func:`pack_results` as a Python expression of the results' variable ``names``."""
    if structure == "none":
        return "None"
    if structure == "single":
        return names[0]
    entries = ", ".join(_entries(names, nones, "None"))
    if structure == "list":
        return f"[{entries}]"
    return f"({entries},)" if entries else "()"


__all__ = ["STRUCTURES", "check_structure", "pack_results", "pack_source"]
