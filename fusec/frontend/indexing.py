"""Indexing while tracing, as IR nodes: ``x[key]`` for NumPy's basic indexing (:func:`basic_index`: integers,
slices, None, ``...``, a view of ``x``) and advanced indexing with integer arrays (:func:`index`: ``x[idx]``,
``x[:, idx]``, ``x[i, j]``, read by one ``gather``), the ``gather`` node itself (:func:`gather`, with the record of
the gathers a trace makes), and constant arrays (:func:`constant_array`: a list of numbers in the traced function,
``np.array([0.299, 0.587, 0.114])`` or ``x[[0, 2, 1]]``).

Advanced indexing follows NumPy's rules: the index arrays (and integers, which count as advanced indices
beside an array) broadcast to one shape ``B``; where they sit next to each other in the key, ``B``'s axes
replace theirs in place, else they come first. The basic part of the key (slices, None, ``...``) is applied
first as a view (:func:`basic_index`, with every advanced entry kept whole), then one ``gather`` reads that view at
the index arrays, each expanded to the result's rank.

A boolean mask (``x[mask]``) selects a number of elements only known at run time: it is refused with what to
write instead. A Python list of integers is a constant index array: one that is one-dimensional, the only
advanced index, and an arithmetic progression (``[3]``, ``[0, 2, 4]``, ``[5, 4, 3]``) is the slice it equals;
any other (``[0, 2, 1]``, nested, beside other indices) is a constant array of at most :data:`CONSTANT_LIMIT`
elements read by a gather.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fusec.frontend.nodes import TracedArray, const, iota_node, mark_shape_read, new_node, squeeze_axes
from fusec.frontend.scalars import Scalar
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.infer import broadcast_shapes
from fusec.ir.reshape_math import reshape_node
from fusec.support.errors import FusecIndexError, FusecTypeError, FusecValueError, UnsupportedError, user_location

_INT32 = np.dtype(np.int32)


def index_bound(value: Any, what: str) -> int | None:
    """A slice bound or an integer index as an int (NumPy's ``operator.index`` rule)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise UnsupportedError(f"a boolean {what} ({value!r}) is not supported inside a fused function",
                               hint="select with np.where(mask, x, other), or index before the call")
    try:
        return operator.index(value)
    except TypeError:
        raise FusecTypeError(f"slice indices must be integers or None, got {type(value).__name__} {value!r}",
                             hint="use Python ints for indices and slice bounds") from None


def basic_index(x: Node, key: Any) -> Node:
    """``x[key]`` for NumPy's basic indexing: integers (negative too), slices of any step, None/np.newaxis and
    one Ellipsis, in any combination. One ``slice`` node (integers as single-element ranges, step 0), then a
    ``squeeze`` of the integer axes and an ``expand_dims`` of the new ones."""
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        if k is None or k is Ellipsis or isinstance(k, slice):
            continue
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            what = "a traced array" if isinstance(k, TracedArray) else type(k).__name__
            raise UnsupportedError(
                f"indexing with {what} is not supported inside a fused function (only integers, slices, "
                "None/np.newaxis, ... and integer arrays)",
                hint="index with integers, slices, None, ... or integer arrays (x[idx], np.take_along_axis)",
            )
    if sum(k is Ellipsis for k in keys) > 1:
        raise FusecIndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise FusecIndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {n_real} were indexed")
    if Ellipsis not in keys:
        keys = keys + (Ellipsis,)
    expanded: list[Any] = []
    for k in keys:
        expanded.extend([slice(None)] * (x.ndim - n_real) if k is Ellipsis else [k])
    starts: list[int | None] = []
    stops: list[int | None] = []
    steps: list[int | None] = []
    squeezed, new_axes, out_axis = [], [], 0
    for k in expanded:
        if k is None:
            new_axes.append(out_axis)
            out_axis += 1
        elif isinstance(k, slice):
            step = index_bound(k.step, "slice step")
            if step == 0:
                raise FusecValueError("slice step cannot be zero")
            starts.append(index_bound(k.start, "slice start"))
            stops.append(index_bound(k.stop, "slice stop"))
            steps.append(step)
            out_axis += 1
        else:
            squeezed.append(len(starts))
            starts.append(index_bound(k, "index"))
            stops.append(None)
            steps.append(0)
    if any(not (a is None and b is None and c in (None, 1)) for a, b, c in zip(starts, stops, steps)):
        x = new_node("slice", [x], {"start": starts, "stop": stops, "step": steps})
    x = squeeze_axes(x, tuple(squeezed))
    return new_node("expand_dims", [x], {"axes": new_axes}) if new_axes else x


def is_view_index(key: Any, ndim: int) -> bool:
    """Whether NumPy's ``x[key]`` (of ``ndim`` dimensions) is a view of ``x``: basic indexing, unless every axis is
    indexed by an integer (a scalar then, a copy: ``x[0]`` of a 1-d ``x``, not ``x[0, ...]``). An index array makes
    a copy."""
    keys = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (TracedArray, list, np.ndarray)) or type(k).__module__.startswith("cupy") for k in keys):
        return False
    return ndim > 0 or any(k is Ellipsis for k in keys)


MASK_HINT = ("select with np.where(mask, x, 0) (same shape), or fold the mask into the reduction: "
             "np.where(mask, x, 0).sum(), (x * mask).sum(), np.where(mask, x, -np.inf).max()")
LIST_HINT = "pass the indices as an integer array argument of the fused function (np.asarray(indices))"


def expand_to(idx: Node, rank: int, start: int) -> Node:
    """Index operand ``idx`` (rank at most ``len(B)``) placed at result axes ``start..start+ndim`` of a
    ``rank``-d result (NumPy's right-aligned broadcasting within ``B``; size-1 axes elsewhere)."""
    new = [k for k in range(rank) if not start <= k < start + idx.ndim]
    return new_node("expand_dims", [idx], {"axes": new}) if new else idx


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
    node = new_node("gather", [x, *indices], {"axes": list(axes), "dims": list(dims)})
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


def is_advanced(k: Any) -> bool:
    """Whether index entry ``k`` is an advanced index (a traced array, a list, an array captured from outside)."""
    return isinstance(k, (TracedArray, list, np.ndarray)) or type(k).__module__.startswith("cupy")


def check_index_entry(k: Any) -> None:
    """Refuse an index array fusec does not gather with: a boolean mask, a float array, an array captured from
    outside the function."""
    if isinstance(k, TracedArray) and k.node.dtype.kind == "b":
        raise UnsupportedError(
            f"boolean mask indexing (x[mask], mask of shape {k.node.shape}) selects a number of elements known only "
            "when the kernel runs, which a fused function cannot return", hint=MASK_HINT)
    if isinstance(k, TracedArray) and k.node.dtype.kind not in "iu":
        raise FusecIndexError(f"arrays used as indices must be of integer (or boolean) type, got {k.node.dtype}")
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


def _constant_index(values: Any, extent: int) -> Node:
    """A list of integers (nested too) as a constant index array (:func:`constant_array`), its values checked
    against the axis's extent as NumPy checks them."""
    array = np.array(values)
    if array.dtype.kind not in "iu" or array.size > CONSTANT_LIMIT:
        raise UnsupportedError(f"the index list {values!r} is not a list of at most {CONSTANT_LIMIT} integers",
                               hint=LIST_HINT)
    bad = array[(array < -extent) | (array >= extent)]
    if bad.size:
        raise FusecIndexError(f"index {int(bad.reshape(-1)[0])} is out of bounds for axis with size {extent}")
    return constant_array(np.where(array < 0, array + extent, array))


def index(x: Node, key: Any) -> Node:
    """``x[key]`` for any key NumPy takes that fusec traces: basic indexing, or advanced indexing with integer
    arrays (see the module docstring)."""
    keys = key if isinstance(key, tuple) else (key,)
    if not any(is_advanced(k) for k in keys):
        return basic_index(x, key)
    for k in keys:
        check_index_entry(k)
    if sum(k is Ellipsis for k in keys) > 1:
        raise FusecIndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise FusecIndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {n_real} were indexed")
    expanded: list[Any] = []
    for k in keys + (() if any(k is Ellipsis for k in keys) else (Ellipsis,)):
        expanded.extend([slice(None)] * (x.ndim - n_real) if k is Ellipsis else [k])
    advanced = [p for p, k in enumerate(expanded) if is_advanced(k) or isinstance(k, (int, np.integer, Scalar))
                and not isinstance(k, (bool, np.bool_))]
    lists = [p for p in advanced if isinstance(expanded[p], list)]
    if lists:
        mark_shape_read()  # the list's values are checked and wrapped against the axis's extent
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
        if isinstance(k, TracedArray):
            index_nodes.append(k.node)
        elif isinstance(k, Node):  # a list of integers, as a constant array (_constant_index)
            index_nodes.append(k)
        else:
            index_nodes.append(const(index_bound(k, "index"), dtypes.INT64))
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
        n = new_node("expand_dims", [n], {"axes": list(range(lead))}) if lead else n
        operands.append(expand_to(n, rank, start))
    return gather(view, positions, operands, dims)


CONSTANT_LIMIT = 64  # elements of a constant array made in the function (each read picks its value by index)


def constant_array(values: np.ndarray) -> Node:
    """``values`` as a traced array: each element picks its value by comparing its flat index with the positions
    where the value changes (a ``where`` chain over an iota), reshaped to ``values``' shape."""
    dt = dtypes.as_dtype(values.dtype)
    flat = values.reshape(-1)
    if flat.size == 0 or bool(np.all(flat == flat[0])) and not np.isnan(flat.astype(float)).any():
        value = const(flat[0].item() if flat.size else 0, dt)
        return new_node("broadcast_to", [value], {"shape": list(values.shape)}) if values.shape else value
    mark_shape_read()
    i = iota_node(flat.size, _INT32)
    result = const(flat[-1].item(), dt)
    for k in range(flat.size - 2, -1, -1):
        result = new_node("where", [new_node("eq", [i, const(k, _INT32)]), const(flat[k].item(), dt), result])
    if result.shape != (flat.size,):
        result = new_node("broadcast_to", [result], {"shape": [flat.size]})
    return reshape_node(result, values.shape, user_location()) if values.shape != (flat.size,) else result


__all__ = ["CONSTANT_LIMIT", "LIST_HINT", "MASK_HINT", "basic_index", "begin", "check_index_entry", "constant_array",
           "end", "expand_to", "gather", "index", "index_bound", "is_view_index", "unread_index_checks"]
