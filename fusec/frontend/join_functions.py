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

from fusec.frontend import trace as _trace
from fusec.frontend.trace import Tracer, _as_node, _check_no_out, _const, _mark_shape_read, _node, cast, static_number
from fusec.ir import dtypes, iota, windows
from fusec.ir.graph import Node
from fusec.ir.infer import normalize_axes
from fusec.support.errors import FusecTypeError, FusecValueError, UnsupportedError

_INT32 = np.dtype(np.int32)


# --- iota ----------------------------------------------------------------------------------------------------
def _static_bound(value: Any, what: str) -> Any:
    return static_number(value, f"{what} of arange")


def iota_node(count: int, dt: np.dtype, start: Any = 0, nxt: Any = None) -> Node:
    """An iota of ``count`` elements (``start``, ``next``, ...: by default 0, 1, 2, ...)."""
    if count == 0:
        return _node("broadcast_to", [_const(0, dt)], {"shape": [0]})
    if nxt is None:
        nxt = start + 1 if count > 1 else start
    return _node("iota", (), {"count": count, "start": dtypes.scalar_constant(start, dt),
                              "next": dtypes.scalar_constant(nxt, dt)}, dtype=dt)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, device: Any = None,
           like: Any = None) -> Tracer:
    """``numpy.arange``: an iota, its values bit for bit NumPy's (see :mod:`fusec.ir.iota`)."""
    _check_no_out("arange", like=like)
    start, stop, step = (None if v is None else _static_bound(v, what)
                         for v, what in ((start, "start"), (stop, "stop"), (step, "step")))
    dt, count, b0, b1 = iota.resolve(start, stop, step, dtype)
    return Tracer(iota_node(count, dtypes.as_dtype(dt), b0, b1))


def _along(node: Node, axis: int, ndim: int) -> Node:
    """A 1-d ``node`` as axis ``axis`` of an ``ndim``-d array (size 1 along the others)."""
    others = [k for k in range(ndim) if k != axis]
    return _node("expand_dims", [node], {"axes": others}) if others else node


def indices(dimensions: Any, dtype: Any = int, sparse: bool = False) -> Any:
    """``numpy.indices``: one iota per axis, broadcast (stacked along a new first axis unless ``sparse``)."""
    dims = tuple(operator.index(_static_bound(d, "dimension")) for d in dimensions)
    dt = dtypes.as_dtype(np.dtype(dtype))
    parts = [_along(iota_node(d, dt), k, len(dims)) for k, d in enumerate(dims)]
    if sparse:
        return tuple(Tracer(p) for p in parts)
    if not dims:
        return Tracer(_node("broadcast_to", [_const(0, dt)], {"shape": [0]}))
    full = [_node("broadcast_to", [p], {"shape": list(dims)}) if p.shape != dims else p for p in parts]
    return stack(tuple(Tracer(p) for p in full))


# --- windows -------------------------------------------------------------------------------------------------
def edge_window(x: Node, pads: list[tuple[int, int]]) -> Node:
    """``x`` padded by ``pads`` (before, after) per axis, repeating its edge elements."""
    if not any(b or a for b, a in pads):
        return x
    axes = [(-b, 1, n + b + a, 0, max(n - 1, 0)) for (b, a), n in zip(pads, x.shape)]
    _mark_shape_read()
    return _node("window", [x], windows.attrs_of(axes))


def _join(nodes: list[Node], axis: int) -> Node:
    """The nodes (one dtype, one shape but along ``axis``) joined along ``axis``."""
    _mark_shape_read()
    total = sum(n.shape[axis] for n in nodes)
    shape = list(nodes[0].shape)
    shape[axis] = total
    parts, offset = [], 0
    for n in nodes:
        if n.shape[axis]:
            parts.append((n, offset))
        offset += n.shape[axis]
    if not parts or 0 in shape:
        return _node("broadcast_to", [_const(0, nodes[0].dtype)], {"shape": shape})
    if len(parts) == 1:
        return parts[0][0]
    ndim = len(shape)

    def placed(n: Node, off: int) -> Node:
        pads = [(0, 0)] * ndim
        pads[axis] = (off, total - off - n.shape[axis])
        return edge_window(n, pads)

    idt = _INT32 if total < 2**31 else dtypes.INT64
    position = _along(iota_node(total, idt), axis, ndim)
    result = placed(*parts[-1])
    for n, off in reversed(parts[:-1]):
        inside = _node("lt", [position, _const(off + n.shape[axis], idt)])
        result = _node("where", [inside, placed(n, off), result])
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
    if isinstance(arrays, Tracer) or not isinstance(arrays, (list, tuple)):
        raise UnsupportedError(f"{what} takes a list or tuple of arrays",
                               hint=f"write np.{what}([a, b, ...]); to split one array use np.split")
    nodes = [_as_node(a, what) for a in arrays]
    if not nodes:
        raise FusecValueError("need at least one array to concatenate")
    return nodes


def concatenate(arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None,
                casting: str = "same_kind") -> Tracer:
    """``numpy.concatenate`` (``axis=None`` joins the flattened arrays)."""
    _check_no_out("concatenate", out=out)
    nodes = _arrays(arrays, "concatenate")
    if axis is None:
        nodes = [_trace.FUNCTIONS["ravel"](Tracer(n)).node for n in nodes]
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


def stack(arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    """``numpy.stack``: each array gets a new axis ``axis``, then they are joined along it."""
    _check_no_out("stack", out=out)
    nodes = _arrays(arrays, "stack")
    if any(n.shape != nodes[0].shape for n in nodes):
        raise FusecValueError("all input arrays must have the same shape")
    (ax,) = normalize_axes(axis, nodes[0].ndim + 1, allow_tuple=False)
    expanded = [_node("expand_dims", [n], {"axes": [ax]}) for n in nodes]
    return Tracer(_join(_cast_all(expanded, dtype, casting, "stack"), ax))


def _at_least(n: Node, ndim: int) -> Node:
    """``np.atleast_2d``/``atleast_3d``'s placement of a smaller array (and ``atleast_1d``'s)."""
    if n.ndim >= ndim:
        return n
    if n.ndim == 0:
        return _node("expand_dims", [n], {"axes": list(range(ndim))})
    if n.ndim == 1:
        return _node("expand_dims", [n], {"axes": [0] if ndim == 2 else [0, 2]})
    return _node("expand_dims", [n], {"axes": [2]})


def hstack(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    nodes = [_at_least(n, 1) for n in _arrays(tup, "hstack")]
    return concatenate([Tracer(n) for n in nodes], 0 if nodes[0].ndim == 1 else 1, dtype=dtype, casting=casting)


def vstack(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> Tracer:
    nodes = [_at_least(n, 2) for n in _arrays(tup, "vstack")]
    return concatenate([Tracer(n) for n in nodes], 0, dtype=dtype, casting=casting)


def dstack(tup: Any) -> Tracer:
    nodes = [_at_least(n, 3) for n in _arrays(tup, "dstack")]
    return concatenate([Tracer(n) for n in nodes], 2)


def column_stack(tup: Any) -> Tracer:
    nodes = []
    for n in _arrays(tup, "column_stack"):
        if n.ndim < 2:  # np.array(v, ndmin=2).T: a column
            n = _node("expand_dims", [n], {"axes": [1] if n.ndim == 1 else [0, 1]})
        nodes.append(n)
    return concatenate([Tracer(n) for n in nodes], 1)


def append(arr: Any, values: Any, axis: Any = None) -> Tracer:
    """``numpy.append``: ``concatenate((arr, values), axis)``, both flattened when ``axis`` is None."""
    a, v = _as_node(arr, "append"), _as_node(values, "append")
    if axis is None:
        ravel = _trace.FUNCTIONS["ravel"]
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


def pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Tracer:
    """``numpy.pad`` with mode ``"edge"`` (a window), ``"constant"`` (``constant_values``), and ``"wrap"``,
    ``"reflect"``, ``"symmetric"`` (joins of slices, axis by axis) for pads no wider than the axis."""
    x = _as_node(array, "pad")
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
    _mark_shape_read()
    if x.size:
        result = edge_window(x, widths)
    else:
        result = _node("broadcast_to", [_const(0, x.dtype)], {"shape": shape})
    idt = _INT32 if max(shape) < 2**31 else dtypes.INT64
    for k, ((b, a), n, (cb, ca)) in enumerate(zip(widths, x.shape, constants)):
        position = _along(iota_node(shape[k], idt), k, x.ndim) if (b or a) else None
        if b:
            result = _node("where", [_node("lt", [position, _const(b, idt)]), _const(_stored(cb, x.dtype), x.dtype),
                                     result])
        if a:
            result = _node("where", [_node("ge", [position, _const(b + n, idt)]),
                                     _const(_stored(ca, x.dtype), x.dtype), result])
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
                parts.append(_trace.basic_index(result, key))
        result = _join(parts, k)
    return Tracer(result)


FUNCTIONS = {
    "arange": arange, "indices": indices, "concatenate": concatenate, "stack": stack, "hstack": hstack,
    "vstack": vstack, "dstack": dstack, "column_stack": column_stack, "append": append, "pad": pad,
}
# for docs/ops.md (fusec.frontend.ops_doc): the functions traced into the op table's ops
DOCUMENTED = {"numpy": ("arange", "indices", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack",
                        "append", "pad")}
# functions that make an array from numbers alone (no traced argument): called from the traced function's own
# code while it is traced, they make an iota instead of a concrete array
CREATORS = ("arange", "indices")
_trace.FUNCTIONS.update(FUNCTIONS)
