"""``roll``, ``diff``, ``tile`` and ``repeat`` traced into the ops they are made of, so each fuses into the kernel
that reads it like those ops:

- ``roll``: per rolled axis a join of two slices (``x[-k:]`` then ``x[:-k]``), read through windows picked by an
  iota (:mod:`fusec.frontend.join_functions`); ``axis=None`` rolls the flattened array and reshapes it back;
- ``diff``: ``n`` times ``x[1:] - x[:-1]`` (``!=`` for booleans), after joining ``prepend``/``append``;
- ``tile`` and ``repeat`` (one repeat count for every element): a new size-1 axis broadcast to the count, merged
  with its neighbour by a reshape, which the ``reshapes`` pass makes index arithmetic.

The shifts, counts and ``n`` decide shapes, so they are static (a runtime scalar there becomes a constant).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fusec.frontend.indexing import basic_index
from fusec.frontend.join_functions import concatenate
from fusec.frontend.nodes import mark_shape_read, new_node
from fusec.frontend.registry import implements
from fusec.frontend.tracer import Tracer, apply_ufunc, as_node, static_number
from fusec.frontend.view_functions import ravel, reshape
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.infer import normalize_axes
from fusec.support.errors import FusecTypeError, FusecValueError, UnsupportedError


def _static_int(value: Any, what: str) -> int:
    value = static_number(value, what)
    try:
        return operator.index(value)
    except TypeError:
        raise FusecTypeError(f"the {what} must be an integer, got {type(value).__name__}") from None


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, (tuple, list)):
        return tuple(_static_int(v, what) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(_static_int(v, what) for v in value.reshape(-1).tolist())
    return (_static_int(value, what),)


def _ravel(x: Node) -> Node:
    return ravel(Tracer(x)).node


def _reshape(x: Node, shape: tuple[int, ...]) -> Node:
    return reshape(Tracer(x), shape).node


def _along(x: Node, axis: int, key: slice) -> Node:
    return basic_index(x, tuple(key if k == axis else slice(None) for k in range(x.ndim)))


@implements("roll")
def roll(a: Any, shift: Any, axis: Any = None) -> Tracer:
    """``numpy.roll``: elements shifted along ``axis`` (all of them, flattened, for None), wrapping around."""
    x = as_node(a, "roll")
    shifts = _ints(shift, "shift of roll")
    mark_shape_read()
    if axis is None:
        if len(shifts) != 1:
            raise FusecValueError("'shift' and 'axis' should be scalars or 1D sequences of the same length")
        return Tracer(_reshape(roll(Tracer(_ravel(x)), shifts[0], 0).node, x.shape))
    axes = [normalize_axes(ax, x.ndim, allow_tuple=False)[0]
            for ax in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise FusecValueError("'shift' and 'axis' should be scalars or 1D sequences of the same length")
    total: dict[int, int] = {}
    pairs = zip(shifts * len(axes) if len(shifts) == 1 else shifts, axes * len(shifts) if len(axes) == 1 else axes)
    for s, ax in pairs:  # shifts along one axis add up, as NumPy's
        total[ax] = total.get(ax, 0) + s
    for ax, s in total.items():
        n = x.shape[ax]
        k = s % n if n else 0
        if k:
            x = concatenate([Tracer(_along(x, ax, slice(n - k, None))), Tracer(_along(x, ax, slice(0, n - k)))],
                            axis=ax).node
    return Tracer(x)


@implements("diff")
def diff(a: Any, n: Any = 1, axis: Any = -1, prepend: Any = np._NoValue, append: Any = np._NoValue) -> Tracer:
    """``numpy.diff``: the ``n``-th difference along ``axis`` (``!=`` of neighbours for booleans)."""
    x = as_node(a, "diff")
    order = _static_int(n, "order n of diff")
    if order < 0:
        raise FusecValueError(f"order must be non-negative but got {order}")
    if order == 0:
        return Tracer(x)
    if x.ndim == 0:
        raise FusecValueError("diff requires input that is at least one dimensional")
    (ax,) = normalize_axes(axis, x.ndim, allow_tuple=False)
    parts = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append(None)
            continue
        e = as_node(extra, "diff")
        if e.ndim == 0:
            shape = list(x.shape)
            shape[ax] = 1
            e = new_node("broadcast_to", [e], {"shape": shape})
        parts.append(e)
    if parts[0] is not None or parts[1] is not None:
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
        x = concatenate([Tracer(p) for p in pieces], axis=ax).node
    mark_shape_read()
    for _ in range(order):
        later, earlier = _along(x, ax, slice(1, None)), _along(x, ax, slice(None, -1))
        if x.dtype == dtypes.BOOL:
            x = apply_ufunc(np.not_equal, (Tracer(later), Tracer(earlier))).node
        else:
            x = apply_ufunc(np.subtract, (Tracer(later), Tracer(earlier))).node
    return Tracer(x)


def _repeat_axis(x: Node, axis: int, count: int, inner: bool) -> Node:
    """``x`` with axis ``axis`` repeated ``count`` times: each element in turn (``inner``, ``repeat``) or the
    whole axis in turn (``tile``)."""
    new = axis + 1 if inner else axis
    grown = new_node("expand_dims", [x], {"axes": [new]})
    shape = list(grown.shape)
    shape[new] = count
    spread = new_node("broadcast_to", [grown], {"shape": shape})
    merged = list(x.shape)
    merged[axis] = x.shape[axis] * count
    return _reshape(spread, tuple(merged))


@implements("tile")
def tile(A: Any, reps: Any) -> Tracer:
    """``numpy.tile``: ``A`` repeated ``reps`` times along each axis (axes added in front as needed)."""
    x = as_node(A, "tile")
    counts = _ints(reps, "reps of tile")
    if any(c < 0 for c in counts):
        raise FusecValueError("negative dimensions are not allowed")
    mark_shape_read()
    ndim = max(len(counts), x.ndim)
    if x.ndim < ndim:
        x = new_node("expand_dims", [x], {"axes": list(range(ndim - x.ndim))})
    counts = (1,) * (ndim - len(counts)) + counts
    for ax, c in enumerate(counts):
        if c != 1:
            x = _repeat_axis(x, ax, c, inner=False)
    return Tracer(x)


@implements("repeat")
def repeat(a: Any, repeats: Any, axis: Any = None) -> Tracer:
    """``numpy.repeat`` with one count for every element (different counts per element are refused)."""
    x = as_node(a, "repeat")
    counts = _ints(repeats, "repeats of repeat")
    if len(set(counts)) > 1:
        raise UnsupportedError("repeat with a different count per element is not traced",
                               hint="repeat with one count (x.repeat(3, axis)), or call np.repeat outside the "
                                    "fused function")
    count = counts[0]
    if count < 0:
        raise FusecValueError("negative dimensions are not allowed")
    mark_shape_read()
    if axis is None:
        x = _ravel(x) if x.ndim != 1 else x
        ax = 0
    else:
        (ax,) = normalize_axes(axis, x.ndim, allow_tuple=False)
    if len(counts) not in (1, x.shape[ax]):
        raise FusecValueError(f"operands could not be broadcast together with shape ({x.shape[ax]},) "
                              f"({len(counts)},)")
    return Tracer(_repeat_axis(x, ax, count, inner=True) if count != 1 else x)


# for docs/ops.md (fusec.frontend.ops_doc)
DOCUMENTED = {"numpy": ("roll", "diff", "tile", "repeat")}

__all__ = ["DOCUMENTED", "diff", "repeat", "roll", "tile"]
