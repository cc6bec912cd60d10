"""Gathers as NumPy's functions spell them, traced into the ``gather`` op: ``np.take`` (``x.take``) and
``np.take_along_axis``. Integer-array (advanced) indexing, ``x[idx]``, ``x[:, idx]``, ``x[i, j]``, is
:func:`fusec.frontend.indexing.index`, which a constant list of indices (``np.take(x, [0, 2, 1])``) goes through.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusec.frontend.indexing import LIST_HINT, check_index_entry, expand_to, gather, index, index_bound
from fusec.frontend.nodes import const
from fusec.frontend.registry import implements
from fusec.frontend.tracer import Tracer, as_node
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.infer import normalize_axes
from fusec.support.errors import FusecIndexError, FusecValueError, UnsupportedError

# ---- functions ---------------------------------------------------------------------------------------


def _index_operand(indices: Any, what: str) -> Node:
    if isinstance(indices, Tracer):
        check_index_entry(indices)
        return indices.node
    if isinstance(indices, (list, np.ndarray)) or type(indices).__module__.startswith("cupy"):
        check_index_entry(indices)
        raise UnsupportedError(f"constant index arrays ({type(indices).__name__}) in {what} are not supported",
                               hint=LIST_HINT)
    if isinstance(indices, (bool, np.bool_)):
        raise FusecIndexError(f"{what}: a boolean is not an index")
    return const(index_bound(indices, "index"), dtypes.INT64)


def _flat_only(x: Node, what: str) -> None:
    if x.ndim > 1:
        raise UnsupportedError(f"{what} with axis=None reads the array flattened, which merges axes (not traced "
                               f"yet for shape {x.shape})",
                               hint="pass an axis, or ravel the argument before the call")


@implements("take_along_axis")
def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Tracer:
    """``np.take_along_axis``: ``indices`` has ``arr``'s rank; the other axes broadcast."""
    x = as_node(arr, "take_along_axis")
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


@implements("take")
def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tracer:
    """``np.take`` (mode 'raise'): the result's axes are ``a``'s before ``axis``, ``indices``', then ``a``'s
    after it; ``axis=None`` reads a 1-d ``a``."""
    if out is not None:
        raise UnsupportedError("take(..., out=) is not supported inside a fused function",
                               hint="return the result and write it after the call")
    if mode != "raise":
        raise UnsupportedError(f"take(..., mode={mode!r}) is not supported inside a fused function",
                               hint="use mode='raise' (the default): out-of-range indices are an IndexError")
    x = as_node(a, "take")
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
    return Tracer(gather(x, [ax], [expand_to(i, rank, ax)], dims))


# for docs/ops.md (fusec.frontend.ops_doc)
DOCUMENTED = {"numpy": ("take", "take_along_axis")}
