"""The reference semantics of ``gather`` (see the op table): NumPy's integer-array indexing with the op's axis
placement, and NumPy's bounds rule (negative indices wrap once; anything else out of range is an
:class:`IndexError`, raised here naming the user's line that wrote the gather).

``gather(x, i_0, ..., i_{k-1}) {axes, dims}`` is ``out[p] = x[q]`` where ``q[axes[t]] = i_t[p]`` (wrapped) and
every other axis ``j`` of ``x`` (the s-th) runs along result axis ``dims[s]`` (position 0 where ``x`` has
extent 1 there: broadcast). With ``start``/``stop``/``step`` the array is first read through that window (a
slice's attributes), and indices count within the window.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusec.ir.graph import Node
from fusec.ir.infer import gather_window
from fusec.support.errors import FusecIndexError


def check_bounds(xp: Any, index: Any, extent: int, axis: int, loc: str | None) -> None:
    """NumPy's IndexError for the first (C order) element of ``index`` outside ``[-extent, extent)``."""
    if index.size == 0:
        return
    bad = (index >= extent) if index.dtype.kind == "u" else ((index < -extent) | (index >= extent))
    if bool(xp.any(bad)):
        first = int(index.reshape(-1)[int(xp.argmax(bad.reshape(-1)))])  # int() of CuPy's 0-d array: its value
        raise FusecIndexError(f"index {first} is out of bounds for axis {axis} with size {extent}", loc=loc,
                              hint="indices must lie in [-n, n) for an axis of n elements (negative ones count "
                                   "from the end)")


def gather(xp: Any, node: Node, x: Any, indices: list[Any]) -> Any:
    """The value of the ``gather`` node ``node`` on ``x`` and its index arrays, as NumPy computes it."""
    axes, dims = tuple(node.attr("axes")), tuple(node.attr("dims"))
    window = gather_window(x.shape, dict(node.attrs))
    if window is not None:  # the window first, as a slice reads it
        x = x[tuple(slice(f, f + s * c if f + s * c >= 0 else None, s) if c else slice(0, 0) for f, s, c in window)]
    shape = node.shape
    rank = len(shape)
    key: list[Any] = [None] * x.ndim
    for a, idx in zip(axes, indices):
        idx = xp.asarray(idx)
        check_bounds(xp, idx, x.shape[a], a, node.loc)
        if idx.dtype.kind == "u":
            idx = idx.astype(np.int64) if idx.dtype.itemsize < 8 else idx.astype(np.uint64)
        key[a] = xp.broadcast_to(idx, shape)
    kept = [j for j in range(x.ndim) if j not in axes]
    for j, d in zip(kept, dims):
        along = xp.arange(x.shape[j]) if x.shape[j] != 1 else xp.zeros(1, dtype=np.int64)
        key[j] = xp.broadcast_to(along.reshape([x.shape[j] if k == d else 1 for k in range(rank)]), shape)
    if 0 in shape:
        return xp.empty(shape, x.dtype)
    return x[tuple(key)]
