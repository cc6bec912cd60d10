"""Assignment to part of a value computed in the function, ``y[key] = v`` (any basic index: integers, slices of
any step, None, ``...``), as a functional update: ``where(mask, placed(v), y)``.

``mask`` is true at the selected elements: per indexed axis a condition on an iota along it (``i == k`` for an
integer, ``first <= i < end`` and ``(i - first) % step == 0`` for a slice; none for an axis selected whole).
``placed(v)`` puts ``v``'s elements at the positions they go to: ``v`` broadcast to the selection's rank,
its None axes dropped and its integer axes kept as size 1, then read along each slice axis where ``v`` varies
through a ``window`` when every such step is 1 or -1 (element ``i`` reads ``v[i - first]`` or
``v[first - i]``, clamped), else through one ``gather`` (``v[(i - first) // step]``, clamped). Outside the
mask the clamped reads are never used. All of it is index arithmetic in the kernel that uses the new value:
no copy, no kernel of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusec.frontend.indexing import basic_index, gather
from fusec.frontend.nodes import as_axis, const, iota_node, new_node
from fusec.ir import dtypes, windows
from fusec.ir.graph import Node
from fusec.support.errors import FusecValueError

_INT32 = np.dtype(np.int32)


def updated(x: Node, key: Any, v: Node) -> Node:
    """``x`` with ``x[key] = v``: ``v`` of ``x``'s dtype, in a shape that broadcasts to ``x[key]``'s (else a
    FusecValueError as NumPy's); ``key`` a basic index (checked as NumPy checks it)."""
    view = selection(x, key, v)
    axes = _per_axis(x.shape, key)
    if any(kind == "slice" and count == 0 for kind, _, _, count in axes):
        return x  # nothing selected
    placed = _place(v, view.ndim, key, axes, x.shape)
    mask = _mask(axes, x.shape)
    if mask is None:  # every element selected: the value, broadcast
        return placed if placed.shape == x.shape else new_node("broadcast_to", [placed], {"shape": list(x.shape)})
    return new_node("where", [mask, placed, x])


def selection(x: Node, key: Any, v: Node) -> Node:
    """``x[key]``, checked as NumPy checks the index and that ``v`` broadcasts to its shape (FusecIndexError,
    FusecValueError as NumPy's)."""
    view = basic_index(x, key)
    try:
        fits = np.broadcast_shapes(v.shape, view.shape) == view.shape
    except ValueError:
        fits = False
    if not fits:
        raise FusecValueError(f"could not broadcast input array from shape {v.shape} into shape {view.shape}")
    return view


def _expanded(key: Any, ndim: int) -> list[Any]:
    keys = key if isinstance(key, tuple) else (key,)
    n_real = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if Ellipsis not in keys:
        keys = keys + (Ellipsis,)
    out: list[Any] = []
    for k in keys:
        out.extend([slice(None)] * (ndim - n_real) if k is Ellipsis else [k])
    return out


def _per_axis(shape: tuple[int, ...], key: Any) -> list[tuple[str, int, int, int]]:
    """Per axis of the array: ``("int", k, 0, 1)`` or ``("slice", first, step, count)`` (``basic_index`` has
    checked the index)."""
    out = []
    entries = [k for k in _expanded(key, len(shape)) if k is not None]
    for k, d in zip(entries, shape):
        if isinstance(k, slice):
            first, stop, step = k.indices(d)
            out.append(("slice", first, step, len(range(first, stop, step))))
        else:
            out.append(("int", int(k) + d if int(k) < 0 else int(k), 0, 1))
    return out


def _place(v: Node, view_ndim: int, key: Any, axes: list[tuple[str, int, int, int]], shape: tuple[int, ...]) -> Node:
    """``v`` in the array's rank, each element where it is assigned (see the module docstring)."""
    if v.ndim < view_ndim:
        v = new_node("expand_dims", [v], {"axes": list(range(view_ndim - v.ndim))})
    kept = [k for k in _expanded(key, len(shape)) if isinstance(k, slice) or k is None]  # the selection's axes
    gone = [j for j, k in enumerate(kept) if k is None]  # None axes: size 1 in the selection, not in the array
    if gone:
        v = new_node("squeeze", [v], {"axes": gone})
    ints = [a for a, (kind, _, _, _) in enumerate(axes) if kind == "int"]
    if ints:
        v = new_node("expand_dims", [v], {"axes": ints})
    mapped = [(a, first, step, count, d) for a, ((kind, first, step, count), d) in enumerate(zip(axes, shape))
              if kind == "slice" and v.shape[a] > 1 and not (step == 1 and (first, count) == (0, d))]
    if any(abs(step) > 1 for _, _, step, _, _ in mapped):  # one gather reads every mapped axis
        return _gather(v, mapped)
    wins = [windows.whole(n) for n in v.shape]
    for a, first, step, count, d in mapped:
        wins[a] = (-first if step == 1 else first, step, d, 0, count - 1)
    return new_node("window", [v], windows.attrs_of(wins)) if mapped else v


def _gather(v: Node, mapped: list[tuple[int, int, int, int, int]]) -> Node:
    """``v`` read along each mapped axis ``a`` at ``clip((i - first) // step, 0, count - 1)`` for ``i`` in
    ``0 .. d - 1`` (one gather, so it reads ``v`` itself: a gather's array is read from memory)."""
    indices = []
    for a, first, step, count, d in mapped:
        i = _iota_along(d, a, v.ndim)
        dt = i.dtype
        j = new_node("floordiv", [new_node("sub", [i, const(first, dt)]), const(step, dt)])
        indices.append(new_node("minimum", [new_node("maximum", [j, const(0, dt)]), const(count - 1, dt)]))
    gathered = [a for a, *_ in mapped]
    return gather(v, gathered, indices, [k for k in range(v.ndim) if k not in gathered])


def _iota_along(d: int, axis: int, ndim: int) -> Node:
    return as_axis(iota_node(d, _INT32 if d < 2**31 else dtypes.INT64), axis, ndim)


def _mask(axes: list[tuple[str, int, int, int]], shape: tuple[int, ...]) -> Node | None:
    """Where the selected elements are (None: everywhere)."""
    mask = None
    for a, ((kind, first, step, count), d) in enumerate(zip(axes, shape)):
        conditions = []
        if kind == "int" or count == d and step in (1, -1) and d > 0:
            if kind == "int":
                conditions.append(("eq", first))
        else:
            lo, hi = (first, first + step * (count - 1)) if step > 0 else (first + step * (count - 1), first)
            if lo > 0:
                conditions.append(("ge", lo))
            if hi < d - 1:
                conditions.append(("le", hi))
            if abs(step) > 1:
                conditions.append(("mod", (first % abs(step), abs(step))))
        if not conditions:
            continue
        i = _iota_along(d, a, len(shape))
        dt = i.dtype
        for op, value in conditions:
            if op == "mod":
                rest, period = value
                c = new_node("eq", [new_node("mod", [i, const(period, dt)]), const(rest, dt)])
            else:
                c = new_node(op, [i, const(value, dt)])
            mask = c if mask is None else new_node("logical_and", [mask, c])
    return mask


__all__ = ["selection", "updated"]
