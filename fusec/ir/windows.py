"""The ``window`` op's index rule: per axis, element ``i`` reads the operand at ``clamp(start + step * i, lo, hi)``.

A window is how ``np.pad(x, ..., mode="edge")`` reads ``x`` (``start = -before``, ``step = 1``, the clamp the
array's own extent) and how each part of a join is read over the joined extent. A ``slice`` is a window whose
clamp never binds. Windows compose with windows and slices into one window (:func:`compose`): for a clamp
``u = clamp(a + b * i, l, h)`` read through ``v = clamp(s + t * u, lo, hi)``, ``t * clamp(w, l, h)`` is a clamp of
``t * w`` to ``t * l`` and ``t * h`` (in order), and two nested clamps are one clamp to the intersection (or, where
the ranges miss each other, to the bound the inner range lies beyond).

A window's attributes, per axis: ``start``, ``step``, ``count`` (the result's extent), ``lo`` and ``hi``
(``0 <= lo <= hi < n`` for an operand extent ``n > 0``; an empty result axis reads nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fusec.support.errors import FusecValueError

AxisWindow = tuple[int, int, int, int, int]  # start, step, count, lo, hi


def axes_of(attrs: Mapping[str, Any]) -> list[AxisWindow]:
    """The per-axis windows of a ``window`` node's attributes (a FusecValueError for missing or non-integer ones)."""
    names = ("start", "step", "count", "lo", "hi")
    lists = [attrs.get(name) for name in names]
    if any(not isinstance(v, (list, tuple)) for v in lists) or len({len(v) for v in lists}) != 1:
        raise FusecValueError("window needs lists start, step, count, lo and hi, one entry per axis")
    if any(not isinstance(x, int) or isinstance(x, bool) for v in lists for x in v):
        raise FusecValueError("window's start, step, count, lo and hi are integers")
    return [tuple(t) for t in zip(*lists)]


def attrs_of(axes: Sequence[AxisWindow]) -> dict[str, list[int]]:
    """A ``window`` node's attributes from per-axis windows."""
    return {name: [int(w[k]) for w in axes] for k, name in enumerate(("start", "step", "count", "lo", "hi"))}


def whole(n: int) -> AxisWindow:
    return (0, 1, n, 0, max(n - 1, 0))


def of_slice(first: int, step: int, count: int, n: int) -> AxisWindow:
    """A slice's axis (first index, step, count) over an operand extent ``n`` as a window."""
    return (first, step, count, 0, max(n - 1, 0))


def clamps(w: AxisWindow) -> bool:
    """Whether the clamp binds for some element (else the axis is a plain strided slice)."""
    start, step, count, lo, hi = w
    if count == 0:
        return False
    last = start + step * (count - 1)
    return min(start, last) < lo or max(start, last) > hi


def compose(inner: AxisWindow, outer: AxisWindow) -> AxisWindow:
    """The window reading the operand of ``inner`` as ``outer`` reads ``inner``'s result."""
    s, t, _, lo, hi = inner
    a, b, count, lo_o, hi_o = outer
    low, high = sorted((s + t * lo_o, s + t * hi_o))
    if high < lo:
        low = high = lo
    elif low > hi:
        low = high = hi
    else:
        low, high = max(low, lo), min(high, hi)
    return (s + t * a, t * b, count, low, high)


def check(axes: Sequence[AxisWindow], shape: Sequence[int]) -> tuple[int, ...]:
    """The result shape of a window over ``shape``, or a FusecValueError for attributes that do not fit."""
    if len(axes) != len(shape):
        raise FusecValueError(f"window has {len(axes)} axes for an operand of {len(shape)}")
    for j, ((_start, _step, count, lo, hi), n) in enumerate(zip(axes, shape)):
        if count < 0:
            raise FusecValueError(f"window axis {j}: negative count {count}")
        if count and not 0 <= lo <= hi < n:
            raise FusecValueError(f"window axis {j}: clamp [{lo}, {hi}] is not inside the operand's extent {n}")
    return tuple(w[2] for w in axes)


def indices(w: AxisWindow, xp: Any) -> Any:
    """The operand indices an axis window reads, in ``xp``."""
    start, step, count, lo, hi = w
    return xp.clip(start + step * xp.arange(count, dtype="int64"), lo, hi)


def evaluate(x: Any, axes: Sequence[AxisWindow], xp: Any) -> Any:
    """The window of array ``x`` (a gather per clamped axis, a slice elsewhere)."""
    for j, w in enumerate(axes):
        if w[2] == 0:
            x = xp.take(x, xp.zeros(0, dtype="int64"), axis=j)
        else:
            x = xp.take(x, indices(w, xp), axis=j)
    return x
