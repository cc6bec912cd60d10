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

from fusec.errors import FusecTypeError, FusecValueError, UnsupportedError, user_location
from fusec.ir import trace as _trace
from fusec.ir.graph import Node
from fusec.ir.infer import broadcast_shapes, normalize_axes
from fusec.ir.reshape_math import only_unit_axes_differ, reshape_node
from fusec.ir.trace import Tracer, _as_node, _mark_shape_read, _node, basic_index, transpose


def _axis(axis: Any, ndim: int) -> int:
    (a,) = normalize_axes(axis, ndim, allow_tuple=False)
    return a


def swapaxes(a: Any, axis1: Any, axis2: Any) -> Tracer:
    x = _as_node(a, "swapaxes")
    i, j = _axis(axis1, x.ndim), _axis(axis2, x.ndim)
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(Tracer(x), perm)


def moveaxis(a: Any, source: Any, destination: Any) -> Tracer:
    x = _as_node(a, "moveaxis")
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


def rollaxis(a: Any, axis: Any, start: Any = 0) -> Tracer:
    x = _as_node(a, "rollaxis")
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


def matrix_transpose(a: Any) -> Tracer:
    """``x.mT``: the last two axes swapped."""
    x = _as_node(a, "mT")
    if x.ndim < 2:
        raise FusecValueError("matrix transpose with ndim < 2 is undefined")
    return swapaxes(Tracer(x), -1, -2)


def flip(m: Any, axis: Any = None) -> Tracer:
    x = _as_node(m, "flip")
    axes = set(normalize_axes(axis, x.ndim))
    return Tracer(basic_index(x, tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))))


def broadcast_arrays(*args: Any, subok: bool = False) -> tuple[Tracer, ...]:
    nodes = [_as_node(a, "broadcast_arrays") for a in args]
    _mark_shape_read()  # the common shape is a broadcast_to attribute
    shape = broadcast_shapes(*(n.shape for n in nodes), what="arguments of broadcast_arrays")
    return tuple(Tracer(n if n.shape == shape else _node("broadcast_to", [n], {"shape": list(shape)}))
                 for n in nodes)


def _sections(x: Node, indices_or_sections: Any, axis: Any, equal: bool) -> list[Tracer]:
    a = _axis(axis, x.ndim)
    n = x.shape[a]
    _mark_shape_read()  # the split points are slice bounds resolved against this size
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


def split(ary: Any, indices_or_sections: Any, axis: Any = 0) -> list[Tracer]:
    return _sections(_as_node(ary, "split"), indices_or_sections, axis, equal=True)


def array_split(ary: Any, indices_or_sections: Any, axis: Any = 0) -> list[Tracer]:
    return _sections(_as_node(ary, "array_split"), indices_or_sections, axis, equal=False)


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
    x = _as_node(a, "reshape")
    if order not in ("C", "F", "A"):
        raise FusecValueError(f"order must be one of 'C', 'F', 'A' (got {order!r})")
    if len(shape) == 1:
        shape = shape[0]
    _mark_shape_read()  # the target's extents are attributes
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


def ravel(a: Any, order: str = "C") -> Tracer:
    x = _as_node(a, "ravel")
    return reshape(Tracer(x), (x.size,), order=order)


def _numpy_reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Tracer:
    if shape is None:
        shape = newshape
    if shape is None:
        raise FusecTypeError("reshape() missing the shape argument")
    return reshape(a, shape, order=order)


FUNCTIONS = {
    "swapaxes": swapaxes, "moveaxis": moveaxis, "rollaxis": rollaxis, "flip": flip,
    "broadcast_arrays": broadcast_arrays, "split": split, "array_split": array_split,
    "reshape": _numpy_reshape, "ravel": ravel, "matrix_transpose": matrix_transpose,
}
DOCUMENTED = {"numpy": ("swapaxes", "moveaxis", "rollaxis", "flip", "broadcast_arrays", "split", "array_split",
                        "reshape", "ravel")}
_trace.FUNCTIONS.update(FUNCTIONS)
