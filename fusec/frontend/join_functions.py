"""Array creation and joins traced into index arithmetic: ``arange``/``indices`` (the ``iota`` op), ``pad``
(``window`` views, ``where`` for constants) and ``concatenate``/``stack``/``hstack``/``vstack``/``dstack``/
``column_stack``/``append``.

A join is never a copy: along the joined axis of extent ``L``, part ``p`` (at offset ``o``, ``n`` long) is read
through a window that clamps the index ``i - o`` into ``[0, n - 1]``, and ``where(iota < o + n, part, rest)``
picks it, so ``concatenate([P, Q], axis)`` is ``where(iota < len(P), window(P), window(Q))``. The windows sink
to the arrays they read (:mod:`fusec.passes.windows`), so a join of computed values, a slice of a join, a join
under a reduction all stay in the kernel that consumes them. ``np.pad(x, w, mode="edge")`` is one window;
``mode="constant"`` puts ``where`` over it, axis by axis as NumPy fills it (a corner takes the constant of the
last axis it lies outside of); ``"wrap"``, ``"reflect"`` and ``"symmetric"`` are joins of slices of the array,
axis by axis (pads no wider than the axis).

Windows depend on the arrays' sizes, so a function that joins or pads traces again for each new size (as one
that reads ``x.shape`` does).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fusec.frontend.indexing import basic_index
from fusec.frontend.nodes import as_axis, cast, const, iota_node, mark_shape_read, new_node
from fusec.frontend.registry import implements
from fusec.frontend.tracer import Tracer, as_node, check_no_out, static_number
from fusec.frontend.view_functions import ravel
from fusec.ir import dtypes, iota, windows
from fusec.ir.graph import Node
from fusec.ir.infer import normalize_axes
from fusec.support.errors import FusecTypeError, FusecValueError, UnsupportedError

_INT32 = np.dtype(np.int32)


# --- iota ----------------------------------------------------------------------------------------------------
def _static_bound(value: Any, what: str) -> Any:
    return static_number(value, f"{what} of arange")


@implements("arange", creates=True)
def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, device: Any = None,
           like: Any = None) -> Tracer:
    """``numpy.arange``: an iota, its values bit for bit NumPy's (see :mod:`fusec.ir.iota`)."""
    check_no_out("arange", like=like)
    start, stop, step = (None if v is None else _static_bound(v, what)
                         for v, what in ((start, "start"), (stop, "stop"), (step, "step")))
    dt, count, b0, b1 = iota.resolve(start, stop, step, dtype)
    return Tracer(iota_node(count, dtypes.as_dtype(dt), b0, b1))


@implements("indices", creates=True)
def indices(dimensions: Any, dtype: Any = int, sparse: bool = False) -> Any:
    """``numpy.indices``: one iota per axis, broadcast (stacked along a new first axis unless ``sparse``)."""
    dims = tuple(operator.index(_static_bound(d, "dimension")) for d in dimensions)
    dt = dtypes.as_dtype(np.dtype(dtype))
    parts = [as_axis(iota_node(d, dt), k, len(dims)) for k, d in enumerate(dims)]
    if sparse:
        return tuple(Tracer(p) for p in parts)
    if not dims:
        return Tracer(new_node("broadcast_to", [const(0, dt)], {"shape": [0]}))
    full = [new_node("broadcast_to", [p], {"shape": list(dims)}) if p.shape != dims else p for p in parts]
    return stack(tuple(Tracer(p) for p in full))


# --- windows -------------------------------------------------------------------------------------------------
def edge_window(x: Node, pads: list[tuple[int, int]]) -> Node:
    """``x`` padded by ``pads`` (before, after) per axis, repeating its edge elements."""
    if not any(b or a for b, a in pads):
        return x
    axes = [(-b, 1, n + b + a, 0, max(n - 1, 0)) for (b, a), n in zip(pads, x.shape)]
    mark_shape_read()
    return new_node("window", [x], windows.attrs_of(axes))


def _join(nodes: list[Node], axis: int) -> Node:
    """The nodes (one dtype, one shape but along ``axis``) joined along ``axis``."""
    mark_shape_read()
    total = sum(n.shape[axis] for n in nodes)
    shape = list(nodes[0].shape)
    shape[axis] = total
    parts, offset = [], 0
    for n in nodes:
        if n.shape[axis]:
            parts.append((n, offset))
        offset += n.shape[axis]
    if not parts or 0 in shape:
        return new_node("broadcast_to", [const(0, nodes[0].dtype)], {"shape": shape})
    if len(parts) == 1:
        return parts[0][0]
    ndim = len(shape)

    def placed(n: Node, off: int) -> Node:
        pads = [(0, 0)] * ndim
        pads[axis] = (off, total - off - n.shape[axis])
        return edge_window(n, pads)

    idt = _INT32 if total < 2**31 else dtypes.INT64
    position = as_axis(iota_node(total, idt), axis, ndim)
    result = placed(*parts[-1])
    for n, off in reversed(parts[:-1]):
        inside = new_node("lt", [position, const(off + n.shape[axis], idt)])
        result = new_node("where", [inside, placed(n, off), result])
    return result


def _cast_all(nodes: list[Node], dtype: Any, casting: str, what: str) -> list[Node]:
    dt = dtypes.as_dtype(np.dtype(dtype)) if dtype is not None else dtypes.as_dtype(
        np.result_type(*(n.dtype for n in nodes)))
    for n in nodes:
        if not np.can_cast(n.dtype, dt, casting=casting):
            raise FusecTypeError(f"{what}: Cannot cast array data from dtype('{n.dtype}') to dtype('{dt}') "
                                 f"according to the rule '{casting}'", hint="pass casting='unsafe' or cast first")
    return [cast(n, dt) for n in nodes]


def _arrays(arrays: Any, what: str) -> list[Node]:
    """The joined arrays: a list or tuple of arrays, numbers or nested lists (each as ``np.asarray`` makes it), or
    one traced array's entries along its first axis (NumPy iterates it)."""
    if not isinstance(arrays, (list, tuple, Tracer)):
        raise UnsupportedError(f"{what} takes a list or tuple of arrays",
                               hint=f"write np.{what}([a, b, ...]); to split one array use np.split")
    nodes = [as_node(a, what) for a in arrays]
    if not nodes:
        raise FusecValueError("need at least one array to concatenate")
    return nodes


@implements("concatenate")
def concatenate(arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None,
                casting: str = "same_kind") -> Tracer:
    """``numpy.concatenate`` (``axis=None`` joins the flattened arrays)."""
    check_no_out("concatenate", out=out)
    nodes = _arrays(arrays, "concatenate")
    if axis is None:
        nodes = [ravel(Tracer(n)).node for n in nodes]
        axis = 0
    if any(n.ndim == 0 for n in nodes):
        raise FusecValueError("zero-dimensional arrays cannot be concatenated")
    ndim = nodes[0].ndim
    for k, n in enumerate(nodes[1:], 1):
        if n.ndim != ndim:
            raise FusecValueError(f"all the input arrays must have same number of dimensions, but the array at "
                                  f"index 0 has {ndim} dimension(s) and the array at index {k} has {n.ndim} "
                                  "dimension(s)")
    (ax,) = normalize_axes(axis, ndim, allow_tuple=False)
    for k, n in enumerate(nodes[1:], 1):
        for d in range(ndim):
            if d != ax and n.shape[d] != nodes[0].shape[d]:
                raise FusecValueError(
                    "all the input array dimensions except for the concatenation axis must match exactly, but "
                    f"along dimension {d}, the array at index 0 has size {nodes[0].shape[d]} and the array at "
                    f"index {k} has size {n.shape[d]}")
    return Tracer(_join(_cast_all(nodes, dtype, casting, "concatenate"), ax))


@implements("stack")
def stack(arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    """``numpy.stack``: each array gets a new axis ``axis``, then they are joined along it."""
    check_no_out("stack", out=out)
    nodes = _arrays(arrays, "stack")
    if any(n.shape != nodes[0].shape for n in nodes):
        raise FusecValueError("all input arrays must have the same shape")
    (ax,) = normalize_axes(axis, nodes[0].ndim + 1, allow_tuple=False)
    expanded = [new_node("expand_dims", [n], {"axes": [ax]}) for n in nodes]
    return Tracer(_join(_cast_all(expanded, dtype, casting, "stack"), ax))


def _at_least(n: Node, ndim: int) -> Node:
    """``np.atleast_2d``/``atleast_3d``'s placement of a smaller array (and ``atleast_1d``'s)."""
    if n.ndim >= ndim:
        return n
    if n.ndim == 0:
        return new_node("expand_dims", [n], {"axes": list(range(ndim))})
    if n.ndim == 1:
        return new_node("expand_dims", [n], {"axes": [0] if ndim == 2 else [0, 2]})
    return new_node("expand_dims", [n], {"axes": [2]})


@implements("hstack")
def hstack(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    nodes = [_at_least(n, 1) for n in _arrays(tup, "hstack")]
    return concatenate([Tracer(n) for n in nodes], 0 if nodes[0].ndim == 1 else 1, dtype=dtype, casting=casting)


@implements("vstack")
def vstack(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    nodes = [_at_least(n, 2) for n in _arrays(tup, "vstack")]
    return concatenate([Tracer(n) for n in nodes], 0, dtype=dtype, casting=casting)


@implements("dstack")
def dstack(tup: Any) -> Tracer:
    nodes = [_at_least(n, 3) for n in _arrays(tup, "dstack")]
    return concatenate([Tracer(n) for n in nodes], 2)


@implements("column_stack")
def column_stack(tup: Any) -> Tracer:
    nodes = []
    for n in _arrays(tup, "column_stack"):
        if n.ndim < 2:  # np.array(v, ndmin=2).T: a column
            n = new_node("expand_dims", [n], {"axes": [1] if n.ndim == 1 else [0, 1]})
        nodes.append(n)
    return concatenate([Tracer(n) for n in nodes], 1)


@implements("append")
def append(arr: Any, values: Any, axis: Any = None) -> Tracer:
    """``numpy.append``: ``concatenate((arr, values), axis)``, both flattened when ``axis`` is None."""
    a, v = as_node(arr, "append"), as_node(values, "append")
    if axis is None:
        a = a if a.ndim == 1 else ravel(Tracer(a)).node
        v = ravel(Tracer(v)).node
        axis = a.ndim - 1
    return concatenate([Tracer(a), Tracer(v)], axis)


# --- pad -----------------------------------------------------------------------------------------------------
def _pairs(value: Any, ndim: int, what: str, integral: bool) -> list[tuple[Any, Any]]:
    arr = np.asarray(value)
    if integral:
        if arr.dtype.kind not in "iu":
            raise FusecTypeError("`pad_width` must be of integral type.")
        if (arr < 0).any():
            raise FusecValueError("index can't contain negative values")
    try:
        pairs = np.broadcast_to(arr, (ndim, 2))
    except ValueError as exc:
        raise FusecValueError(f"{what} {value!r} does not fit an array of {ndim} dimension(s): {exc}") from exc
    if integral:
        return [(pairs[k, 0].item(), pairs[k, 1].item()) for k in range(ndim)]
    return [(pairs[k, 0], pairs[k, 1]) for k in range(ndim)]  # NumPy scalars: stored with NumPy's cast


def _stored(value: Any, dt: np.dtype) -> Any:
    buf = np.zeros((), dt)
    try:
        with np.errstate(all="ignore"):
            buf[()] = value
    except (OverflowError, ValueError) as exc:
        raise FusecValueError(f"pad: constant {value!r} cannot be stored in {dt}: {exc}") from exc
    return buf.item()


@implements("pad")
def pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Tracer:
    """``numpy.pad`` with mode ``"edge"`` (a window), ``"constant"`` (``constant_values``), and ``"wrap"``,
    ``"reflect"``, ``"symmetric"`` (joins of slices, axis by axis) for pads no wider than the axis."""
    x = as_node(array, "pad")
    if mode not in ("constant", "edge", *_MIRRORS):
        raise UnsupportedError(f"np.pad mode {mode!r} is not traced",
                               hint="modes 'constant', 'edge', 'wrap', 'reflect' and 'symmetric' are; pad on the "
                                    "argument before the call")
    if mode in _MIRRORS:
        return _mirror_pad(x, pad_width, mode, kwargs)
    allowed = {"constant_values"} if mode == "constant" else set()
    unknown = set(kwargs) - allowed
    if unknown:
        raise FusecValueError(f"unsupported keyword arguments for mode '{mode}': {sorted(unknown)}")
    widths = [(int(b), int(a)) for b, a in _pairs(pad_width, x.ndim, "pad_width", True)]
    if not any(b or a for b, a in widths):
        return Tracer(x)
    shape = [n + b + a for n, (b, a) in zip(x.shape, widths)]
    if mode == "edge":
        for k, ((b, a), n) in enumerate(zip(widths, x.shape)):
            if n == 0 and (b or a):
                raise FusecValueError(f"can't extend empty axis {k} using modes other than 'constant' or 'empty'")
        return Tracer(edge_window(x, widths))
    constants = _pairs(kwargs.get("constant_values", 0), x.ndim, "constant_values", False)
    mark_shape_read()
    if x.size:
        result = edge_window(x, widths)
    else:
        result = new_node("broadcast_to", [const(0, x.dtype)], {"shape": shape})
    idt = _INT32 if max(shape) < 2**31 else dtypes.INT64
    for k, ((b, a), n, (cb, ca)) in enumerate(zip(widths, x.shape, constants)):
        position = as_axis(iota_node(shape[k], idt), k, x.ndim) if (b or a) else None
        if b:
            result = new_node("where", [new_node("lt", [position, const(b, idt)]), const(_stored(cb, x.dtype), x.dtype),
                                     result])
        if a:
            result = new_node("where", [new_node("ge", [position, const(b + n, idt)]),
                                     const(_stored(ca, x.dtype), x.dtype), result])
    return Tracer(result)


# mode -> (the slice before the array, the slice after it) along one axis of n elements, b and a wide
def _backwards(start: int, stop: int) -> slice:
    """Elements ``start`` down to ``stop`` (excluded; below 0: down to the first)."""
    return slice(start, stop if stop >= 0 else None, -1)


_MIRRORS: dict[str, Any] = {
    "wrap": (lambda n, b: slice(n - b, n), lambda n, a: slice(0, a), lambda n: n),
    "reflect": (lambda n, b: _backwards(b, 0), lambda n, a: _backwards(n - 2, n - 2 - a), lambda n: n - 1),
    "symmetric": (lambda n, b: _backwards(b - 1, -1), lambda n, a: _backwards(n - 1, n - 1 - a), lambda n: n),
}


def _mirror_pad(x: Node, pad_width: Any, mode: str, kwargs: dict) -> Tracer:
    """``np.pad`` in a mode that copies the array's own elements: per axis (in order, as NumPy pads them) a join
    of a slice before, the array, and a slice after."""
    unknown = set(kwargs) - ({"reflect_type"} if mode != "wrap" else set())
    if unknown or kwargs.get("reflect_type", "even") != "even":
        raise UnsupportedError(f"np.pad mode {mode!r} with {sorted(kwargs)} is not traced",
                               hint="the default reflect_type='even' is")
    before, after, widest = _MIRRORS[mode]
    result = x
    for k, (b, a) in enumerate((int(b), int(a)) for b, a in _pairs(pad_width, x.ndim, "pad_width", True)):
        n = x.shape[k]
        if not (b or a):
            continue
        if n == 0:
            raise FusecValueError(f"can't extend empty axis {k} using modes other than 'constant' or 'empty'")
        if n == 1:  # every mode repeats the one element
            pads = [(0, 0)] * x.ndim
            pads[k] = (b, a)
            result = edge_window(result, pads)
            continue
        if max(b, a) > widest(n):
            raise UnsupportedError(f"np.pad mode {mode!r} wider than the axis ({max(b, a)} > {widest(n)} along "
                                   f"axis {k}) is not traced", hint="pad in several calls, or before the call")
        parts = []
        for width, part in ((b, before(n, b)), (None, None), (a, after(n, a))):
            if width is None:
                parts.append(result)
            elif width:
                key = (slice(None),) * k + (part,)
                parts.append(basic_index(result, key))
        result = _join(parts, k)
    return Tracer(result)


# for docs/ops.md (fusec.frontend.ops_doc): the functions traced into the op table's ops
DOCUMENTED = {"numpy": ("arange", "indices", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack",
                        "append", "pad")}

