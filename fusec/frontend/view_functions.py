"""Array functions traced into the layout ops (``transpose``, ``squeeze``/``expand_dims``, ``slice``,
``broadcast_to``): ``swapaxes``, ``moveaxis``, ``rollaxis``, ``.mT``, ``flip``, ``broadcast_arrays``,
``split``/``array_split`` (slices) and ``reshape``/``ravel``/``flatten`` (the ``reshape`` op, or
``squeeze``/``expand_dims`` where only size-1 axes come and go). Each is a view in NumPy and index arithmetic
in the kernel that reads it here (a reshape through :mod:`fusec.passes.reshapes`).

A reshape whose shapes have no common refinement (``(2, 3) -> (3, 2)``) is read back between kernels (the
value written, then viewed reshaped; :mod:`fusec.passes.reshapes`), and the plan says so.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from fusec.frontend.indexing import basic_index, gather
from fusec.frontend.nodes import as_axis, const, iota_node, mark_shape_read, new_node
from fusec.frontend.registry import implements
from fusec.frontend.tracer import Tracer, as_node, reduction, transpose
from fusec.ir import windows
from fusec.ir.graph import Node
from fusec.ir.infer import broadcast_shapes, normalize_axes
from fusec.ir.reshape_math import only_unit_axes_differ, reshape_node
from fusec.support.errors import FusecTypeError, FusecValueError, UnsupportedError, user_location


def _axis(axis: Any, ndim: int) -> int:
    (a,) = normalize_axes(axis, ndim, allow_tuple=False)
    return a


@implements("swapaxes")
def swapaxes(a: Any, axis1: Any, axis2: Any) -> Tracer:
    x = as_node(a, "swapaxes")
    i, j = _axis(axis1, x.ndim), _axis(axis2, x.ndim)
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(Tracer(x), perm)


@implements("moveaxis")
def moveaxis(a: Any, source: Any, destination: Any) -> Tracer:
    x = as_node(a, "moveaxis")
    src = [source] if isinstance(source, (int, np.integer)) else list(source)
    dst = [destination] if isinstance(destination, (int, np.integer)) else list(destination)
    if len(src) != len(dst):
        raise FusecValueError("`source` and `destination` arguments must have the same number of elements")
    src = [_axis(s, x.ndim) for s in src]
    dst = [_axis(d, x.ndim) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise FusecValueError("repeated axis in `source` or `destination` argument")
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(Tracer(x), order)


@implements("rollaxis")
def rollaxis(a: Any, axis: Any, start: Any = 0) -> Tracer:
    x = as_node(a, "rollaxis")
    n = x.ndim
    axis = _axis(axis, n)
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise FusecValueError(f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return Tracer(x)
    order = [i for i in range(n) if i != axis]
    order.insert(start, axis)
    return transpose(Tracer(x), order)


@implements("matrix_transpose")
def matrix_transpose(a: Any) -> Tracer:
    """``x.mT``: the last two axes swapped."""
    x = as_node(a, "mT")
    if x.ndim < 2:
        raise FusecValueError("matrix transpose with ndim < 2 is undefined")
    return swapaxes(Tracer(x), -1, -2)


@implements("flip")
def flip(m: Any, axis: Any = None) -> Tracer:
    x = as_node(m, "flip")
    axes = set(normalize_axes(axis, x.ndim))
    return Tracer(basic_index(x, tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))))


@implements("broadcast_arrays")
def broadcast_arrays(*args: Any, subok: bool = False) -> tuple[Tracer, ...]:
    nodes = [as_node(a, "broadcast_arrays") for a in args]
    mark_shape_read()  # the common shape is a broadcast_to attribute
    shape = broadcast_shapes(*(n.shape for n in nodes), what="arguments of broadcast_arrays")
    return tuple(Tracer(n if n.shape == shape else new_node("broadcast_to", [n], {"shape": list(shape)}))
                 for n in nodes)


def _sections(x: Node, indices_or_sections: Any, axis: Any, equal: bool) -> list[Tracer]:
    a = _axis(axis, x.ndim)
    n = x.shape[a]
    mark_shape_read()  # the split points are slice bounds resolved against this size
    if isinstance(indices_or_sections, (int, np.integer)) and not isinstance(indices_or_sections, bool):
        k = int(indices_or_sections)
        if k <= 0:
            raise FusecValueError("number sections must be larger than 0.")
        if equal and n % k:
            raise FusecValueError("array split does not result in an equal division")
        each, extra = divmod(n, k)
        bounds = [0]
        for i in range(k):
            bounds.append(bounds[-1] + each + (1 if i < extra else 0))
    else:
        bounds = [0, *(operator.index(i) for i in indices_or_sections), n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        key = tuple(slice(lo, hi) if i == a else slice(None) for i in range(x.ndim))
        out.append(Tracer(basic_index(x, key)))
    return out


@implements("split")
def split(ary: Any, indices_or_sections: Any, axis: Any = 0) -> list[Tracer]:
    return _sections(as_node(ary, "split"), indices_or_sections, axis, equal=True)


@implements("array_split")
def array_split(ary: Any, indices_or_sections: Any, axis: Any = 0) -> list[Tracer]:
    return _sections(as_node(ary, "array_split"), indices_or_sections, axis, equal=False)


def _target_shape(shape: Any, size: int) -> tuple[int, ...]:
    dims = [operator.index(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,))]
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise FusecValueError("can only specify one unknown dimension")
    if any(d < -1 for d in dims):
        raise FusecValueError("negative dimensions not allowed")
    known = math.prod(d for d in dims if d != -1)
    if unknown:
        if known == 0 or size % known:
            raise FusecValueError(f"cannot reshape array of size {size} into shape {tuple(dims)}")
        dims[unknown[0]] = size // known
    if math.prod(dims) != size:
        raise FusecValueError(f"cannot reshape array of size {size} into shape {tuple(dims)}")
    return tuple(dims)


def reshape(a: Any, *shape: Any, order: str = "C") -> Tracer:
    """``reshape`` in C order (``'F'``: the reversed axes reshaped in C order, reversed back; ``'A'`` where only
    size-1 axes come and go). A ``reshape`` node, or ``squeeze``/``expand_dims`` for size-1 axes; the
    ``reshapes`` pass turns it into index arithmetic, or, where the two sides have no common refinement
    (``(2, 3) -> (3, 2)``), into a reshape read back between kernels."""
    x = as_node(a, "reshape")
    if order not in ("C", "F", "A"):
        raise FusecValueError(f"order must be one of 'C', 'F', 'A' (got {order!r})")
    if len(shape) == 1:
        shape = shape[0]
    mark_shape_read()  # the target's extents are attributes
    target = _target_shape(shape, x.size)
    if only_unit_axes_differ(x.shape, target):
        return Tracer(reshape_node(x, target, user_location()))
    if order == "A":
        raise UnsupportedError(
            f"reshape from {x.shape} to {target} with order='A' depends on the argument's memory layout",
            hint="say order='C' or order='F'")
    if order == "F":
        flipped = transpose(Tracer(x), list(range(x.ndim))[::-1]).node
        inner = reshape_node(flipped, target[::-1], user_location())
        return transpose(Tracer(inner), list(range(len(target)))[::-1])
    return Tracer(reshape_node(x, target, user_location()))


@implements("ravel")
def ravel(a: Any, order: str = "C") -> Tracer:
    x = as_node(a, "ravel")
    return reshape(Tracer(x), (x.size,), order=order)


@implements("reshape")
def _numpy_reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Tracer:
    if shape is None:
        shape = newshape
    if shape is None:
        raise FusecTypeError("reshape() missing the shape argument")
    return reshape(a, shape, order=order)


@implements("flipud")
def flipud(m: Any) -> Tracer:
    return flip(m, 0)


@implements("fliplr")
def fliplr(m: Any) -> Tracer:
    x = as_node(m, "fliplr")
    if x.ndim < 2:
        raise FusecValueError("Input must be >= 2-d.")
    return flip(Tracer(x), 1)


@implements("rot90")
def rot90(m: Any, k: Any = 1, axes: Any = (0, 1)) -> Tracer:
    """``numpy.rot90``: flips and a swap of ``axes``, as NumPy composes them."""
    x = as_node(m, "rot90")
    if len(axes) != 2:
        raise FusecValueError("len(axes) must be 2.")
    a0, a1 = (_axis(a, x.ndim) for a in axes)
    if a0 == a1:
        raise FusecValueError("Axes must be different.")
    turns = operator.index(k) % 4
    if turns == 0:
        return Tracer(x)
    if turns == 2:
        return flip(flip(Tracer(x), a0), a1)
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if turns == 1:
        return Tracer(new_node("transpose", [flip(Tracer(x), a1).node], {"perm": perm}))
    return flip(Tracer(new_node("transpose", [x], {"perm": perm})), a1)


def _atleast(ndim: int, arys: tuple) -> Any:
    out = []
    for a in arys:
        x = as_node(a, f"atleast_{ndim}d")
        if x.ndim < ndim:  # NumPy's placement: 1-d -> (1, n) or (1, n, 1), 2-d -> (m, n, 1)
            new = {1: {0: [0]}, 2: {0: [0, 1], 1: [0]}, 3: {0: [0, 1, 2], 1: [0, 2], 2: [2]}}[ndim][x.ndim]
            x = new_node("expand_dims", [x], {"axes": new})
        out.append(Tracer(x))
    return out[0] if len(out) == 1 else tuple(out)


@implements("atleast_1d")
def atleast_1d(*arys: Any) -> Any:
    return _atleast(1, arys)


@implements("atleast_2d")
def atleast_2d(*arys: Any) -> Any:
    return _atleast(2, arys)


@implements("atleast_3d")
def atleast_3d(*arys: Any) -> Any:
    return _atleast(3, arys)


@implements("diagonal")
def diagonal(a: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1) -> Tracer:
    """``numpy.diagonal``: the ``offset``-th diagonal over ``axis1`` and ``axis2``, as the last axis (a gather at
    iota positions: index arithmetic in the kernel that reads it)."""

    x = as_node(a, "diagonal")
    if x.ndim < 2:
        raise FusecValueError("diag requires an array of at least two dimensions")
    i, j = _axis(axis1, x.ndim), _axis(axis2, x.ndim)
    if i == j:
        raise FusecValueError("axis1 and axis2 cannot be the same")
    k = operator.index(offset)
    mark_shape_read()
    rows, cols = x.shape[i], x.shape[j]
    length = max(0, min(rows - max(0, -k), cols - max(0, k)))
    others = [d for d in range(x.ndim) if d not in (i, j)]
    rank = len(others) + 1
    if length == 0:
        shape = [x.shape[d] for d in others] + [0]
        return Tracer(new_node("broadcast_to", [const(0, x.dtype)], {"shape": shape}))
    dt = np.dtype(np.int32) if max(rows, cols) < 2**31 else np.dtype(np.int64)
    t = as_axis(iota_node(length, dt), rank - 1, rank)
    first = new_node("add", [t, const(max(0, -k), dt)]) if k < 0 else t
    second = new_node("add", [t, const(k, dt)]) if k > 0 else t
    return Tracer(gather(x, [i, j], [first, second], list(range(len(others)))))


@implements("trace")
def trace(a: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1, dtype: Any = None, out: Any = None) -> Tracer:
    """``numpy.trace``: the sum of :func:`diagonal` (in NumPy's sum dtype, or ``dtype``)."""
    return reduction("sum", diagonal(a, offset, axis1, axis2), -1, dtype=dtype, out=out)


@implements("diag")
def diag(v: Any, k: Any = 0) -> Tracer:
    """``numpy.diag``: a 2-d array's ``k``-th diagonal, or a 1-d array placed on the ``k``-th diagonal of a square
    array of zeros (``where`` over iota comparisons, the values read through a window)."""
    x = as_node(v, "diag")
    offset = operator.index(k)
    if x.ndim == 2:
        return diagonal(Tracer(x), offset)
    if x.ndim != 1:
        raise FusecValueError("Input must be 1- or 2-d.")
    n = x.shape[0] + abs(offset)
    mark_shape_read()
    if x.shape[0] == 0:
        return Tracer(new_node("broadcast_to", [const(0, x.dtype)], {"shape": [n, n]}))
    dt = np.dtype(np.int32) if n < 2**30 else np.dtype(np.int64)
    rows, cols = as_axis(iota_node(n, dt), 0, 2), as_axis(iota_node(n, dt), 1, 2)
    on = new_node("eq", [new_node("sub", [cols, rows]), const(offset, dt)])
    read_along = 0 if offset >= 0 else 1  # the value at (i, i + k) is v[i]; at (j - k, j), v[j]
    win = windows.whole(1), (0, 1, n, 0, x.shape[0] - 1)
    axes = [win[1], win[0]] if read_along == 0 else [win[0], win[1]]
    placed = new_node("window", [new_node("expand_dims", [x], {"axes": [1 - read_along]})], windows.attrs_of(axes))
    zero = const(0, x.dtype) if x.dtype.kind != "b" else const(False, x.dtype)
    return Tracer(new_node("where", [on, placed, zero]))


# for docs/ops.md (fusec.frontend.ops_doc)
DOCUMENTED = {"numpy": ("swapaxes", "moveaxis", "rollaxis", "flip", "broadcast_arrays", "split", "array_split",
                        "reshape", "ravel", "flipud", "fliplr", "rot90", "atleast_1d", "atleast_2d", "atleast_3d",
                        "diagonal", "trace", "diag")}
