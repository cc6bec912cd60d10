"""Gathers as NumPy spells them, traced into the ``gather`` op: integer-array (advanced) indexing ``x[idx]``,
``x[:, idx]``, ``x[i, j]`` (mixed with slices, integers, None and ``...``), ``np.take`` / ``x.take`` and
``np.take_along_axis``.

Advanced indexing follows NumPy's rules: the index arrays (and integers, which count as advanced indices
beside an array) broadcast to one shape ``B``; where they sit next to each other in the key, ``B``'s axes
replace theirs in place, else they come first. The basic part of the key (slices, None, ``...``) is applied
first as a view (:func:`fusec.frontend.trace.basic_index`, with every advanced entry kept whole), then one
``gather`` reads that view at the index arrays, each expanded to the result's rank.

A boolean mask (``x[mask]``) selects a number of elements only known at run time: it is refused with what to
write instead. A Python list of integers is a constant index array: one that is one-dimensional, the only
advanced index, and an arithmetic progression (``[3]``, ``[0, 2, 4]``, ``[5, 4, 3]``) is the slice it equals;
any other (``[0, 2, 1]``, nested, beside other indices) is a constant array of at most 64 elements
(:func:`fusec.frontend.creation_functions.array`) read by a gather.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fusec.frontend import trace as _trace
from fusec.frontend.scalars import Scalar as _Scalar
from fusec.frontend.trace import Tracer, _as_node, _const, _index_bound, _mark_shape_read, _node, basic_index
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.infer import broadcast_shapes, normalize_axes
from fusec.support.errors import FusecIndexError, FusecValueError, UnsupportedError

MASK_HINT = ("select with np.where(mask, x, 0) (same shape), or fold the mask into the reduction: "
             "np.where(mask, x, 0).sum(), (x * mask).sum(), np.where(mask, x, -np.inf).max()")
LIST_HINT = "pass the indices as an integer array argument of the fused function (np.asarray(indices))"


def _expand_to(idx: Node, rank: int, start: int) -> Node:
    """Index operand ``idx`` (rank at most ``len(B)``) placed at result axes ``start..start+ndim`` of a
    ``rank``-d result (NumPy's right-aligned broadcasting within ``B``; size-1 axes elsewhere)."""
    new = [k for k in range(rank) if not start <= k < start + idx.ndim]
    return _node("expand_dims", [idx], {"axes": new}) if new else idx


_made: list[Node] | None = None  # the gathers made while a function traces (begin/end: trace_function's)


def begin() -> None:
    global _made
    _made = []


def end() -> list[Node]:
    """The gathers made since :func:`begin`."""
    global _made
    made, _made = _made or [], None
    return made


def gather(x: Node, axes: list[int], indices: list[Node], dims: list[int]) -> Node:
    """The ``gather`` node reading ``x`` at ``indices`` along ``axes`` (each already of the result's rank)."""
    for i in indices:
        if i.dtype.kind not in "iu":
            raise FusecIndexError("arrays used as indices must be of integer (or boolean) type, got "
                                  f"{i.dtype}", hint=MASK_HINT if i.dtype.kind == "b" else None)
    node = _node("gather", [x, *indices], {"axes": list(axes), "dims": list(dims)})
    if _made is not None:
        _made.append(node)
    return node


# what an index array goes through and still holds every element of the argument it views, in range or not
_WHOLE_VIEWS = ("expand_dims", "broadcast_to", "transpose", "reshape", "squeeze")


def unread_index_checks(reached: set[Node], gathers: list[Node], inputs: tuple[Node, ...]) -> tuple:
    """For each gather made while tracing that no result depends on (``reached`` holds what they do), and each of
    its index arrays that is an argument (or a whole view of one): ``(argument position, extent, axis, line)``,
    the check NumPy makes when it gathers (an unread gather is dropped with its kernel, its check is not). Index
    arrays computed from arguments are not covered (docs/limitations.md)."""
    checks = []
    for g in dict.fromkeys(gathers):
        if g in reached:
            continue
        x = g.operands[0]
        for axis, index in zip(g.attr("axes"), g.operands[1:]):
            base = index
            while base.op in _WHOLE_VIEWS:
                base = base.operands[0]
            if base.op == "input" and base in inputs:
                checks.append((inputs.index(base), int(x.shape[axis]), int(axis), g.loc))
    return tuple(dict.fromkeys(checks))


# ---- advanced indexing ---------------------------------------------------------------------------------


def _is_advanced(k: Any) -> bool:
    return isinstance(k, (Tracer, list, np.ndarray)) or type(k).__module__.startswith("cupy")


def _check_entry(k: Any) -> None:
    if isinstance(k, Tracer) and k.dtype.kind == "b":
        raise UnsupportedError(
            f"boolean mask indexing (x[mask], mask of shape {k.shape}) selects a number of elements known only "
            "when the kernel runs, which a fused function cannot return", hint=MASK_HINT)
    if isinstance(k, Tracer) and k.dtype.kind not in "iu":
        raise FusecIndexError(f"arrays used as indices must be of integer (or boolean) type, got {k.dtype}")
    if isinstance(k, np.ndarray) or type(k).__module__.startswith("cupy"):
        raise UnsupportedError(f"an array captured from outside the function ({type(k).__name__} of shape "
                               f"{k.shape}) is used as an index", hint=LIST_HINT)


def _list_as_slice(values: list[Any], extent: int) -> slice | None:
    """A 1-d list of Python ints that is an arithmetic progression, as the slice it equals (NumPy's bounds); None
    for a list of other integers."""
    ints = []
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise UnsupportedError(f"the index list {values!r} is not a list of integers inside a fused function",
                                   hint=LIST_HINT)
        v = operator.index(v)
        if not -extent <= v < extent:
            raise FusecIndexError(f"index {v} is out of bounds for axis with size {extent}")
        ints.append(v + extent if v < 0 else v)
    if not ints:
        return slice(0, 0)
    step = ints[1] - ints[0] if len(ints) > 1 else 1
    if step == 0 or any(b - a != step for a, b in zip(ints, ints[1:])):
        return None
    stop = ints[-1] + step
    return slice(ints[0], stop if stop >= 0 else None, step)


def _constant_index(values: Any, extent: int) -> Tracer:
    """A list of integers (nested too) as a constant index array (``fusec.frontend.creation_functions``), its values
    checked against the axis's extent as NumPy checks them."""
    from fusec.frontend.creation_functions import CONSTANT_LIMIT, _constant_array

    array = np.array(values)
    if array.dtype.kind not in "iu" or array.size > CONSTANT_LIMIT:
        raise UnsupportedError(f"the index list {values!r} is not a list of at most {CONSTANT_LIMIT} integers",
                               hint=LIST_HINT)
    bad = array[(array < -extent) | (array >= extent)]
    if bad.size:
        raise FusecIndexError(f"index {int(bad.reshape(-1)[0])} is out of bounds for axis with size {extent}")
    return Tracer(_constant_array(np.where(array < 0, array + extent, array)))


def index(x: Node, key: Any) -> Node:
    """``x[key]`` for any key NumPy takes that fusec traces: basic indexing, or advanced indexing with integer
    arrays (see the module docstring)."""
    keys = key if isinstance(key, tuple) else (key,)
    if not any(_is_advanced(k) for k in keys):
        return basic_index(x, key)
    for k in keys:
        _check_entry(k)
    if sum(k is Ellipsis for k in keys) > 1:
        raise FusecIndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise FusecIndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {n_real} were indexed")
    expanded: list[Any] = []
    for k in keys + (() if any(k is Ellipsis for k in keys) else (Ellipsis,)):
        expanded.extend([slice(None)] * (x.ndim - n_real) if k is Ellipsis else [k])
    advanced = [p for p, k in enumerate(expanded) if _is_advanced(k) or isinstance(k, (int, np.integer, _Scalar))
                and not isinstance(k, (bool, np.bool_))]
    lists = [p for p in advanced if isinstance(expanded[p], list)]
    if lists:
        _mark_shape_read()  # the list's values are checked and wrapped against the axis's extent
        if len(advanced) == 1 and np.ndim(expanded[lists[0]]) == 1:
            axis = sum(1 for k in expanded[:lists[0]] if k is not None)
            as_slice = _list_as_slice(expanded[lists[0]], x.shape[axis])
            if as_slice is not None:
                return basic_index(x, tuple(expanded[:lists[0]] + [as_slice] + expanded[lists[0] + 1:]))
        for p in lists:  # any other list: a constant index array
            axis = sum(1 for k in expanded[:p] if k is not None)
            expanded[p] = _constant_index(expanded[p], x.shape[axis] if axis < x.ndim else 0)
    # the view: every advanced entry kept whole (its axis stays where it is)
    view = basic_index(x, tuple(slice(None) if p in advanced else k for p, k in enumerate(expanded)))
    index_nodes = []
    for p in advanced:
        k = expanded[p]
        if isinstance(k, Tracer):
            index_nodes.append(k.node)
        else:
            index_nodes.append(_const(_index_bound(k, "index"), dtypes.INT64))
    b_rank = max(n.ndim for n in index_nodes)
    broadcast_shapes(*(n.shape for n in index_nodes), what="index arrays")  # NumPy's error for a mismatch
    # every entry of the view's key (slices, None, advanced entries kept whole) is one axis of the view
    positions = advanced
    adjacent = all(b == a + 1 for a, b in zip(positions, positions[1:]))
    start = positions[0] if adjacent else 0
    rank = view.ndim - len(advanced) + b_rank
    others = [j for j in range(view.ndim) if j not in positions]
    if adjacent:
        dims = [j if j < start else j - len(advanced) + b_rank for j in others]
    else:
        dims = [b_rank + t for t in range(len(others))]
    operands = []
    for n in index_nodes:
        lead = b_rank - n.ndim
        n = _node("expand_dims", [n], {"axes": list(range(lead))}) if lead else n
        operands.append(_expand_to(n, rank, start))
    return gather(view, positions, operands, dims)


# ---- functions ---------------------------------------------------------------------------------------


def _index_operand(indices: Any, what: str) -> Node:
    if isinstance(indices, Tracer):
        _check_entry(indices)
        return indices.node
    if isinstance(indices, (list, np.ndarray)) or type(indices).__module__.startswith("cupy"):
        _check_entry(indices)
        raise UnsupportedError(f"constant index arrays ({type(indices).__name__}) in {what} are not supported",
                               hint=LIST_HINT)
    if isinstance(indices, (bool, np.bool_)):
        raise FusecIndexError(f"{what}: a boolean is not an index")
    return _const(_index_bound(indices, "index"), dtypes.INT64)


def _flat_only(x: Node, what: str) -> None:
    if x.ndim > 1:
        raise UnsupportedError(f"{what} with axis=None reads the array flattened, which merges axes (not traced "
                               f"yet for shape {x.shape})",
                               hint="pass an axis, or ravel the argument before the call")


def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Tracer:
    """``np.take_along_axis``: ``indices`` has ``arr``'s rank; the other axes broadcast."""
    x = _as_node(arr, "take_along_axis")
    i = _index_operand(indices, "take_along_axis")
    if axis is None:
        _flat_only(x, "take_along_axis")
        if i.ndim != 1:
            raise FusecValueError("when axis=None, `indices` must have a single dimension.")
        if x.ndim == 0:
            raise FusecValueError("take_along_axis of a 0-d array")
        return Tracer(gather(x, [0], [i], []))
    if i.ndim != x.ndim:
        raise FusecValueError("`indices` and `arr` must have the same number of dimensions")
    (a,) = normalize_axes(axis, x.ndim, allow_tuple=False)
    return Tracer(gather(x, [a], [i], [j for j in range(x.ndim) if j != a]))


def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tracer:
    """``np.take`` (mode 'raise'): the result's axes are ``a``'s before ``axis``, ``indices``', then ``a``'s
    after it; ``axis=None`` reads a 1-d ``a``."""
    if out is not None:
        raise UnsupportedError("take(..., out=) is not supported inside a fused function",
                               hint="return the result and write it after the call")
    if mode != "raise":
        raise UnsupportedError(f"take(..., mode={mode!r}) is not supported inside a fused function",
                               hint="use mode='raise' (the default): out-of-range indices are an IndexError")
    x = _as_node(a, "take")
    if isinstance(indices, list):  # a constant list: as x[..., indices] along the axis (a slice where it is one)
        if axis is None:
            _flat_only(x, "take")
        ax = 0 if axis is None else normalize_axes(axis, x.ndim, allow_tuple=False)[0]
        return Tracer(index(x, (slice(None),) * ax + (indices,)))
    i = _index_operand(indices, "take")
    if axis is None:
        _flat_only(x, "take")
        if x.ndim == 0:
            raise FusecIndexError("cannot take from a 0-d array")
        axis = 0
    (ax,) = normalize_axes(axis, x.ndim, allow_tuple=False)
    rank = x.ndim - 1 + i.ndim
    dims = [j if j < ax else j - 1 + i.ndim for j in range(x.ndim) if j != ax]
    return Tracer(gather(x, [ax], [_expand_to(i, rank, ax)], dims))


def _take_method(self: Tracer, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tracer:
    return take(self, indices, axis, out, mode)

_trace.FUNCTIONS.update(take=take, take_along_axis=take_along_axis)
Tracer.take = _take_method  # type: ignore[attr-defined]
DOCUMENTED = {"numpy": ("take", "take_along_axis")}
