"""Shape and dtype rules of every op kind: what a node's type must be, given its operands.

One function, :func:`infer`, used when a node is built (tracer, parser, passes) and again by the
verifier. IR ops are strict: an elementwise op's operands already have the dtypes of NumPy's loop
(the tracer inserts the casts), so ``add(i32, u32)`` is an error here, while ``add(i64, i64)``
after two casts is fine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fusec.ir import dtypes, windows
from fusec.ir.ops import NO_IDENTITY, OPS, Kind, OpDef, arity_ok
from fusec.support.errors import FusecAxisError, FusecIndexError, FusecTypeError, FusecValueError

Shape = tuple[int, ...]

MAX_RANK = 32  # dimensions of an array fusec takes (NumPy's own limit is 64)
MAX_ELEMENTS = 2**63 - 1  # elements, and bytes, of an array: NumPy's limit (a size must fit an intp)


def check_shape(shape: Shape, dtype: np.dtype, what: str = "array") -> None:
    """Raise a clear error for a shape fusec cannot index: a negative extent, more than :data:`MAX_RANK`
    dimensions, or more than :data:`MAX_ELEMENTS` elements or bytes (as NumPy refuses "array is too big")."""
    if len(shape) > MAX_RANK:
        raise FusecValueError(f"{what} of {len(shape)} dimensions: fusec supports at most {MAX_RANK}",
                              hint="reshape it to fewer dimensions before calling")
    if any(d < 0 for d in shape):
        raise FusecValueError(f"{what} shape {tuple(shape)} has a negative dimension")
    size = 1
    for d in shape:
        size *= d
    if size * max(1, dtype.itemsize) > MAX_ELEMENTS:
        raise FusecValueError(f"{what} of shape {tuple(shape)} and dtype {dtype} is too big: more than 2**63 - 1 "
                              "elements or bytes", hint="NumPy refuses such an array too")


def broadcast_shapes(*shapes: Shape, what: str = "operands") -> Shape:
    """NumPy's broadcasting of ``shapes`` (right-aligned; each extent equal to the others or 1), with an
    error naming them all."""
    first = tuple(int(d) for d in shapes[0]) if shapes else ()
    if all(s == first for s in shapes[1:]):
        return first
    out = [1] * max(len(s) for s in shapes)
    for s in shapes:
        off = len(out) - len(s)
        for i, d in enumerate(s):
            d, cur = int(d), out[off + i]
            if d != cur and d != 1:
                if cur != 1:
                    listed = " and ".join(str(tuple(s)) for s in shapes)
                    raise FusecValueError(
                        f"{what} could not be broadcast together with shapes {listed}",
                        hint="make the trailing dimensions equal or 1 (x[:, None], np.expand_dims, x.T)",
                    )
                out[off + i] = d
    return tuple(out)


def normalize_axes(axes: Any, ndim: int, *, allow_tuple: bool = True) -> tuple[int, ...]:
    """NumPy's axis argument (None, int, negative, tuple) as a sorted tuple of non-negative ints."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (tuple, list)):
        if not allow_tuple:
            raise FusecTypeError("axis must be an int or None here, not a tuple")
        items = list(axes)
    else:
        items = [axes]
    out = []
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise FusecTypeError(f"axis {a!r} is not an integer")
        a = int(a)
        if not -ndim <= a < ndim:
            raise FusecAxisError(f"axis {a} is out of bounds for array of dimension {ndim}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise FusecValueError(f"duplicate value in 'axis': {tuple(items)}")
    return tuple(sorted(out))


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


Bound = tuple[int, int, int]  # (first element, step, count) along one axis


def slice_bounds(shape: Shape, attrs: Mapping[str, Any]) -> list[Bound]:
    """Each axis of a ``slice`` node's operand of ``shape`` as (first index, step, count), resolved as Python's
    ``slice(start, stop, step).indices(extent)`` does (NumPy's basic indexing); step 0 is the integer index
    ``start`` (negative counts from the end), one element, an :class:`IndexError` when out of range."""
    starts, stops, steps = (list(attrs[k]) for k in ("start", "stop", "step"))
    if not len(starts) == len(stops) == len(steps) == len(shape):
        raise FusecValueError(f"slice needs start, stop and step for each of the {len(shape)} axes of {shape}, got "
                              f"{len(starts)}, {len(stops)} and {len(steps)}")
    out = []
    for axis, (start, stop, step, extent) in enumerate(zip(starts, stops, steps, shape)):
        for v in (start, stop, step):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
                raise FusecTypeError(f"slice bounds must be integers or none, got {v!r}")
        if step == 0:
            if start is None or stop is not None:
                raise FusecValueError("an integer index (step 0) needs a start and no stop")
            if not -extent <= start < extent:
                raise FusecIndexError(f"index {start} is out of bounds for axis {axis} with size {extent}",
                                      hint="an integer index must lie in [-size, size)")
            out.append((int(start) % extent, 1, 1))
            continue
        first, end, stride = slice(start, stop, step).indices(extent)
        count = len(range(first, end, stride))
        out.append((first, stride, count) if count else (0, 1, 0))
    return out


def slice_attrs(bounds: list[Bound]) -> dict[str, list]:
    """The canonical ``slice`` attributes of resolved ``bounds`` (an empty axis is ``0:0:1``)."""
    starts, stops, steps = [], [], []
    for first, step, count in bounds:
        if count == 0:
            first, step = 0, 1
        stop = first + step * count
        starts.append(first)
        stops.append(stop if stop >= 0 else None)
        steps.append(step)
    return {"start": starts, "stop": stops, "step": steps}


def _elementwise_dtype(op: OpDef, in_dtypes: list[np.dtype]) -> np.dtype:
    if op.name == "where":
        cond, a, b = in_dtypes
        if cond != dtypes.BOOL or a != b:
            raise FusecTypeError(f"where needs (bool, T, T) operands, got ({cond}, {a}, {b})")
        return a
    assert op.ufunc is not None
    try:
        resolved = op.ufunc.resolve_dtypes(tuple(in_dtypes) + (None,) * op.ufunc.nout)
    except TypeError:
        raise FusecTypeError(
            f"{op.name} has no loop for dtypes ({', '.join(map(str, in_dtypes))})"
        ) from None
    ins, out = list(resolved[: op.ufunc.nin]), resolved[op.ufunc.nin]
    if ins != in_dtypes:
        raise FusecTypeError(
            f"{op.name} operands ({', '.join(map(str, in_dtypes))}) need casts to "
            f"({', '.join(map(str, ins))}) first"
        )
    return out


def matmul_result(shapes: list[Shape], in_dtypes: list[np.dtype]) -> tuple[np.dtype, Shape]:
    """The (dtype, shape) of ``matmul`` of operands of ``shapes`` (``(..., M, K)`` and ``(..., K, N)``, batch axes
    broadcast as NumPy's matmul does) and ``in_dtypes`` (one dtype, integer or float: the frontend casts first)."""
    (a, b), (da, db) = shapes, in_dtypes
    if len(a) < 2 or len(b) < 2:
        raise FusecValueError(f"matmul takes operands of at least 2 dimensions, got shapes {list(a)} and {list(b)}")
    if da != db or dtypes.kind(da) not in "iuf":
        raise FusecTypeError(f"matmul takes two integer or float operands of one dtype, got {da} and {db}")
    if a[-1] != b[-2]:
        raise FusecValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
                              f"(n?,k),(k,m?)->(n?,m?) (size {b[-2]} is different from {a[-1]})")
    batch = broadcast_shapes(a[:-2], b[:-2], what="operands of matmul")
    return da, (*batch, a[-2], b[-1])


def gather_window(x_shape: Shape, attrs: Mapping[str, Any]) -> list[Bound] | None:
    """A gather's window on its array (``start``/``stop``/``step``, resolved as a slice's), or None."""
    return slice_bounds(x_shape, attrs) if "start" in attrs else None


def gather_window_shape(x_shape: Shape, attrs: Mapping[str, Any]) -> Shape:
    """The shape of the array a gather reads: its operand's, or its window's."""
    window = gather_window(x_shape, attrs)
    return x_shape if window is None else tuple(c for _, _, c in window)


def gather_shape(x_shape: Shape, index_shapes: list[Shape], index_dtypes: list[np.dtype],
                 attrs: Mapping[str, Any]) -> Shape:
    """The result shape of ``gather`` (see the op table): every index operand has the result's rank; result
    axis k is the broadcast of the index operands' extents there and of the axes of ``x`` that ``dims`` puts
    there."""
    axes, dims = tuple(attrs["axes"]), tuple(attrs["dims"])
    if len(axes) != len(index_shapes):
        raise FusecValueError(f"gather has {len(index_shapes)} index operands for axes {list(axes)}")
    if len(set(axes)) != len(axes) or not all(0 <= a < len(x_shape) for a in axes):
        raise FusecValueError(f"gather axes {list(axes)} are not distinct axes of an array of shape {x_shape}")
    if len(dims) != len(x_shape) - len(axes):
        raise FusecValueError(f"gather dims {list(dims)} must place the {len(x_shape) - len(axes)} axes not gathered")
    if any(dt.kind not in "iu" for dt in index_dtypes):
        raise FusecTypeError(f"gather indices must be integers, got {', '.join(map(str, index_dtypes))}")
    ranks = {len(s) for s in index_shapes}
    if len(ranks) != 1:
        raise FusecValueError(f"gather index operands must have one rank, got shapes {index_shapes}")
    (rank,) = ranks
    if len(set(dims)) != len(dims) or not all(0 <= d < rank for d in dims):
        raise FusecValueError(f"gather dims {list(dims)} are not distinct axes of a {rank}-d result")
    placed = [1] * rank
    kept = [j for j in range(len(x_shape)) if j not in axes]
    for j, d in zip(kept, dims):
        placed[d] = x_shape[j]
    return broadcast_shapes(tuple(placed), *index_shapes, what="gather indices")


def infer(op_name: str, operands: list[Any], attrs: Mapping[str, Any], dtype: np.dtype | None,
          shape: Shape | None) -> tuple[np.dtype, Shape]:
    """The (dtype, shape) a node must have. ``dtype``/``shape`` are given for ops that need them
    (``input``, ``const``, ``size``, ``cast`` need a dtype; ``input`` and ``broadcast_to`` a shape).
    A shape beyond fusec's limits (:func:`check_shape`) is an error."""
    out_dtype, out_shape = _infer(op_name, operands, attrs, dtype, shape)
    if out_shape and op_name in _MAY_GROW:
        check_shape(out_shape, out_dtype, "an input" if op_name == "input" else f"the result of {op_name}")
    return out_dtype, out_shape


# ops whose result may have more dimensions, elements or bytes than each operand
_MAY_GROW = frozenset(n for n, op in OPS.items() if op.kind is Kind.ELEMENTWISE) | {"input", "broadcast_to",
                                                                                    "expand_dims", "gather", "matmul"}


def _infer(op_name: str, operands: list[Any], attrs: Mapping[str, Any], dtype: np.dtype | None,
           shape: Shape | None) -> tuple[np.dtype, Shape]:
    op = OPS.get(op_name)
    if op is None:
        raise FusecValueError(f"unknown op '{op_name}'")
    if not arity_ok(op, len(operands)):
        raise FusecValueError(f"{op_name} takes {op.arity if op.arity >= 0 else 'at least 2'} operands, "
                              f"got {len(operands)}")
    shapes = [o.shape for o in operands]
    in_dtypes = [o.dtype for o in operands]

    if op.kind is Kind.SOURCE:
        if dtype is None:
            raise FusecTypeError(f"{op_name} needs a dtype")
        if op_name == "input":
            if shape is None:
                raise FusecValueError("input needs a shape")
            return dtype, tuple(shape)
        if op_name == "const":
            return dtype, ()
        if op_name == "iota":
            count = attrs.get("count")
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise FusecValueError(f"iota needs a non-negative int count, got {count!r}")
            for key in ("start", "next"):
                dtypes.scalar_constant(attrs.get(key), dtype)  # a value of the dtype
            return dtype, (count,)
        normalize_axes(list(attrs["axes"]), len(shapes[0]))  # size: check axes only
        return dtype, ()

    if op.kind is Kind.ELEMENTWISE:
        out_shape = broadcast_shapes(*shapes, what=f"operands of {op_name}")
        if op_name == "cast":
            if dtype is None:
                raise FusecTypeError("cast needs a target dtype")
            return dtype, out_shape
        return _elementwise_dtype(op, in_dtypes), out_shape

    if op.kind is Kind.REDUCTION:
        (x_shape,), (x_dtype,) = shapes, in_dtypes
        axes = normalize_axes(list(attrs["axes"]), len(x_shape))
        if tuple(attrs["axes"]) != axes:
            raise FusecValueError(f"{op_name} axes must be sorted and non-negative, got {attrs['axes']}")
        if op.accepts and dtypes.kind(x_dtype) not in op.accepts:
            raise FusecTypeError(f"{op_name} needs a {op.accepts} operand, got {x_dtype}")
        if op_name in NO_IDENTITY and any(x_shape[a] == 0 for a in axes):
            if op.index_result:  # NumPy's words: argmax and argmin have no value to give for an empty axis
                raise FusecValueError(f"attempt to get {op_name} of an empty sequence",
                                      hint=f"{op_name} of an empty extent is undefined; check the shape before "
                                           "calling")
            raise FusecValueError(
                f"zero-size array to reduction operation {op.combine} which has no identity",  # NumPy's ufunc
                hint=f"{op_name} of an empty extent is undefined: pass initial= (its value there) or check the "
                     "shape before calling",
            )
        if op_name in ("argmax", "argmin") and not axes and x_shape:
            raise FusecValueError(f"{op_name} reduces at least one axis (the flat index over them), got none")
        out_dtype = dtypes.INT64 if op.index_result else x_dtype
        return out_dtype, reduced_shape(x_shape, axes, bool(attrs["keepdims"]))

    if op.kind is Kind.GATHER:
        return in_dtypes[0], gather_shape(gather_window_shape(shapes[0], attrs), shapes[1:], in_dtypes[1:], attrs)
    if op.kind is Kind.CONTRACTION:
        return matmul_result(shapes, in_dtypes)
    if op.kind is Kind.SCAN:
        (x_shape,), (x_dtype,) = shapes, in_dtypes
        axis = attrs.get("axis")
        if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)) \
                or not 0 <= axis < len(x_shape):
            raise FusecValueError(f"{op_name} needs a non-negative axis below {len(x_shape)}, got {axis!r}")
        if op.accepts and dtypes.kind(x_dtype) not in op.accepts:
            raise FusecTypeError(f"{op_name} needs an integer or float operand, got {x_dtype} (cast it first, as "
                                 "NumPy's accumulate does)")
        return x_dtype, tuple(x_shape)

    # layout
    (x_shape,) = shapes
    (x_dtype,) = in_dtypes
    if op_name == "expand_dims":
        axes = tuple(attrs["axes"])
        out_ndim = len(x_shape) + len(axes)
        if normalize_axes(list(axes), out_ndim) != axes:
            raise FusecValueError(f"expand_dims axes must be sorted and non-negative, got {axes}")
        it = iter(x_shape)
        return x_dtype, tuple(1 if i in axes else next(it) for i in range(out_ndim))
    if op_name == "squeeze":
        axes = normalize_axes(list(attrs["axes"]), len(x_shape))
        if tuple(attrs["axes"]) != axes:
            raise FusecValueError(f"squeeze axes must be sorted and non-negative, got {attrs['axes']}")
        if any(x_shape[a] != 1 for a in axes):
            raise FusecValueError(f"cannot squeeze axes {axes} of shape {x_shape}: not of size 1")
        return x_dtype, tuple(d for i, d in enumerate(x_shape) if i not in axes)
    if op_name == "transpose":
        perm = tuple(attrs["perm"])
        if sorted(perm) != list(range(len(x_shape))):
            raise FusecValueError(f"axes {perm} don't match an array of dimension {len(x_shape)}")
        return x_dtype, tuple(x_shape[p] for p in perm)
    if op_name == "slice":
        return x_dtype, tuple(count for _, _, count in slice_bounds(x_shape, attrs))
    if op_name == "reshape":
        shape = attrs.get("shape")
        if not isinstance(shape, (list, tuple)) or any(
                isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) for d in shape):
            raise FusecValueError(f"reshape needs `shape`, a list of integers, got {shape!r}")
        target = tuple(int(d) for d in shape)
        if any(d < 0 for d in target) or math.prod(target) != math.prod(x_shape):
            raise FusecValueError(f"cannot reshape an array of shape {x_shape} into shape {target}")
        return x_dtype, target
    if op_name == "window":
        return x_dtype, windows.check(windows.axes_of(attrs), x_shape)
    # broadcast_to
    target = attrs.get("shape")
    if not isinstance(target, (list, tuple)) or any(
            isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) for d in target):
        raise FusecValueError(f"broadcast_to needs `shape`, a list of integers, got {target!r}")
    target = tuple(int(d) for d in target)
    if len(target) < len(x_shape) or broadcast_shapes(x_shape, target, what="broadcast_to") != target:
        raise FusecValueError(f"cannot broadcast an array of shape {x_shape} to {target}")
    return x_dtype, target
