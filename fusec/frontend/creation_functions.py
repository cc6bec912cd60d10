"""Arrays made inside the function from numbers alone, and the triangle and diagonal masks, traced into the ops:

- ``array``/``asarray``/``ascontiguousarray``/``copy``: a traced array as it is, a list of them stacked, numbers a
  constant array of at most :data:`CONSTANT_LIMIT` elements (``np.array([0.299, 0.587, 0.114])``: each element
  read picks its value by comparing its index, a ``where`` chain over an iota). As in NumPy, ``np.array(x)`` and
  ``np.copy(x)`` are new arrays, ``np.asarray(x)`` is ``x`` itself (a view stays a view: :mod:`fusec.frontend.aliases`)
  and ``np.ascontiguousarray(x)`` may be either;

- ``zeros``, ``ones``, ``full``, ``empty`` (zeros: its values are NumPy's to choose): a constant broadcast;
- ``eye``, ``identity``, ``tri``: comparisons of two iotas (``j - i == k``, ``j <= i + k``), cast;
- ``tril``, ``triu``: ``where`` over the same comparison on the last two axes;
- ``linspace`` (numbers as bounds): NumPy's own arithmetic on an iota (``i * step + start`` in the result's
  float type, the last element ``stop``), so every value is NumPy's bit for bit;
- ``meshgrid``: each array raveled along its own axis, broadcast (``indexing='xy'`` swaps the first two).

Called from the traced function's own code, the creators (registered with ``creates=True``:
:func:`fusec.frontend.trace.created_functions`) make traced arrays instead of concrete ones; shapes, counts and
offsets are numbers (a runtime scalar there becomes static).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fusec.frontend.composite import fill_node, zeros_like
from fusec.frontend.indexing import CONSTANT_LIMIT, constant_array
from fusec.frontend.join_functions import stack
from fusec.frontend.nodes import as_axis, cast, const, iota_node, mark_shape_read, new_node
from fusec.frontend.registry import implements
from fusec.frontend.scalars import Scalar
from fusec.frontend.tracer import Tracer, as_node, static_number
from fusec.frontend.view_functions import ravel
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.support.errors import FusecValueError, UnsupportedError

_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)


def _shape(shape: Any) -> tuple[int, ...]:
    shape = static_number(shape, "shape")
    if isinstance(shape, (tuple, list)):
        dims = tuple(operator.index(static_number(d, "shape")) for d in shape)
    else:
        dims = (operator.index(shape),)
    if any(d < 0 for d in dims):
        raise FusecValueError("negative dimensions are not allowed")
    return dims


def _spread(value: Node, shape: tuple[int, ...]) -> Tracer:
    return Tracer(value if value.shape == shape else new_node("broadcast_to", [value], {"shape": list(shape)}))


@implements("full", creates=True)
def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", *, device: Any = None,
         like: Any = None) -> Tracer:
    """``numpy.full``: ``fill_value`` (of its own dtype, or ``dtype``) over ``shape``."""
    dims = _shape(shape)
    mark_shape_read()  # the shape is an attribute
    return _spread(fill_node(fill_value, dtype, "full"), dims)


@implements("zeros", creates=True)
def zeros(shape: Any, dtype: Any = float, order: str = "C", *, device: Any = None, like: Any = None) -> Tracer:
    return full(shape, 0, dtype if dtype is not None else float)


@implements("ones", creates=True)
def ones(shape: Any, dtype: Any = float, order: str = "C", *, device: Any = None, like: Any = None) -> Tracer:
    return full(shape, 1, dtype if dtype is not None else float)


@implements("empty", creates=True)
def empty(shape: Any, dtype: Any = float, order: str = "C", *, device: Any = None, like: Any = None) -> Tracer:
    """``numpy.empty``: its values are unspecified; fusec's are zeros."""
    return zeros(shape, dtype)


@implements("empty_like")
def empty_like(prototype: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None, *,
               device: Any = None) -> Tracer:
    """``numpy.empty_like``: unspecified values; fusec's are zeros."""
    return zeros_like(prototype, dtype=dtype, shape=shape)


def _rows_and_columns(n: int, m: int, ndim: int = 2) -> tuple[Node, Node]:
    """Iotas along the last two of ``ndim`` axes: the row index ``i`` (n, 1) and the column index ``j`` (1, m)."""
    dt = _INT32 if max(n, m) < 2**30 else _INT64
    return as_axis(iota_node(n, dt), ndim - 2, ndim), as_axis(iota_node(m, dt), ndim - 1, ndim)


def _band(n: int, m: int, k: int, op: str, ndim: int = 2) -> Node:
    """Where ``j - i`` (column minus row, over the last two of ``ndim`` axes) relates to ``k`` as ``op``."""
    i, j = _rows_and_columns(n, m, ndim)
    dt = i.dtype
    if n == 0 or m == 0:
        return new_node("broadcast_to", [const(False, dtypes.BOOL)], {"shape": [1] * (ndim - 2) + [n, m]})
    return new_node(op, [new_node("sub", [j, i]), const(k, dt)])


@implements("eye", creates=True)
def eye(N: Any, M: Any = None, k: Any = 0, dtype: Any = float, order: str = "C", *, device: Any = None,
        like: Any = None) -> Tracer:
    """``numpy.eye``: ones on the ``k``-th diagonal, zeros elsewhere."""
    n = operator.index(static_number(N, "N of eye"))
    m = n if M is None else operator.index(static_number(M, "M of eye"))
    offset = operator.index(static_number(k, "k of eye"))
    mark_shape_read()
    return Tracer(cast(_band(n, m, offset, "eq"), dtypes.as_dtype(np.dtype(dtype))))


@implements("identity", creates=True)
def identity(n: Any, dtype: Any = None, *, like: Any = None) -> Tracer:
    return eye(n, dtype=float if dtype is None else dtype)


@implements("tri", creates=True)
def tri(N: Any, M: Any = None, k: Any = 0, dtype: Any = float, *, like: Any = None) -> Tracer:
    """``numpy.tri``: ones at and below the ``k``-th diagonal."""
    n = operator.index(static_number(N, "N of tri"))
    m = n if M is None else operator.index(static_number(M, "M of tri"))
    mark_shape_read()
    offset = operator.index(static_number(k, "k of tri"))
    return Tracer(cast(_band(n, m, offset, "le"), dtypes.as_dtype(np.dtype(dtype))))


def _triangle(m: Any, k: Any, op: str, what: str) -> Tracer:
    x = as_node(m, what)
    if x.ndim < 2:
        raise UnsupportedError(f"{what} of a {x.ndim}-d array (NumPy makes a 2-d one from it) is not traced",
                               hint=f"pass a 2-d array: np.{what}(np.broadcast_to(v, (n, n)))")
    mark_shape_read()
    keep = _band(x.shape[-2], x.shape[-1], operator.index(static_number(k, f"k of {what}")), op, x.ndim)
    return Tracer(new_node("where", [keep, x, const(0, x.dtype) if x.dtype.kind != "b" else const(False, x.dtype)]))


@implements("tril")
def tril(m: Any, k: Any = 0) -> Tracer:
    """``numpy.tril``: the elements at and below the ``k``-th diagonal of the last two axes, zeros above."""
    return _triangle(m, k, "le", "tril")


@implements("triu")
def triu(m: Any, k: Any = 0) -> Tracer:
    """``numpy.triu``: the elements at and above the ``k``-th diagonal of the last two axes, zeros below."""
    return _triangle(m, k, "ge", "triu")


@implements("linspace", creates=True)
def linspace(start: Any, stop: Any, num: Any = 50, endpoint: bool = True, retstep: bool = False, dtype: Any = None,
             axis: Any = 0, *, device: Any = None) -> Any:
    """``numpy.linspace`` with numbers as bounds: NumPy's steps (``i * step + start`` in the computation's float
    type, or ``i / div * delta`` where the step underflows to 0; the last element ``stop``; floored for an integer
    ``dtype``), so every element is NumPy's."""
    if isinstance(start, Tracer) or isinstance(stop, Tracer) or np.ndim(start) or np.ndim(stop):
        raise UnsupportedError("linspace with array bounds is not traced",
                               hint="use numbers as bounds, or start + (stop - start) * np.linspace(0, 1, n)[:, None]")
    start, stop = static_number(start, "start of linspace"), static_number(stop, "stop of linspace")
    count = operator.index(static_number(num, "num of linspace"))
    if count < 0:
        raise FusecValueError(f"Number of samples, {count}, must be non-negative.")
    dt = dtypes.as_dtype(np.result_type(start, stop, 1.0))
    target = dtypes.as_dtype(np.dtype(dtype)) if dtype is not None else dt
    div = count - 1 if endpoint else count
    first, last = dt.type(start), dt.type(stop)
    delta = np.subtract(last, first, dtype=dt)
    mark_shape_read()
    i = iota_node(count, dt)
    step: Any
    with np.errstate(all="ignore"):
        if div > 0:
            step = delta / dt.type(div)
            y = new_node("mul", [new_node("div", [i, const(div, dt)]), const(delta, dt)]) if step == 0 else \
                new_node("mul", [i, const(step, dt)])
        else:
            step = np.nan
            y = new_node("mul", [i, const(delta, dt)])
    y = new_node("add", [y, const(first, dt)])
    if endpoint and count > 1:
        y = new_node("where", [new_node("eq", [i, const(count - 1, dt)]), const(last, dt), y])
    if target.kind in "iu":
        y = new_node("floor", [y])
    result = Tracer(cast(y, target))
    return (result, step) if retstep else result


@implements("meshgrid")
def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple[Tracer, ...]:
    """``numpy.meshgrid``: each array raveled along an axis of its own, broadcast to the grid (``'xy'``: the first
    two axes swapped; ``sparse``: not broadcast)."""
    if indexing not in ("xy", "ij"):
        raise FusecValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nodes = [ravel(Tracer(as_node(x, "meshgrid"))).node for x in xi]
    ndim = len(nodes)
    axis_of = list(range(ndim))
    if indexing == "xy" and ndim > 1:
        axis_of[0], axis_of[1] = 1, 0
    mark_shape_read()
    placed = []
    for node, axis in zip(nodes, axis_of):
        others = [k for k in range(ndim) if k != axis]
        placed.append(new_node("expand_dims", [node], {"axes": others}) if others else node)
    if sparse:
        return tuple(Tracer(p) for p in placed)
    shape = [1] * ndim
    for node, axis in zip(nodes, axis_of):
        shape[axis] = node.shape[0]
    return tuple(_spread(p, tuple(shape)) for p in placed)




@implements("array", creates=True)
def array(obj: Any, dtype: Any = None, *, copy: Any = True, order: str = "K", subok: bool = False, ndmin: int = 0,
          like: Any = None) -> Tracer:
    """``numpy.array`` in the traced function: a traced array as it is (``dtype`` cast), a list of them stacked
    (NumPy's promotion), and numbers as a constant array of at most :data:`CONSTANT_LIMIT` elements (each element
    of a read picks its value with an iota comparison: no array in memory). A new array, unless ``copy`` is False
    or None and a traced array needs no change: then that array itself, as NumPy returns it."""
    if (copy is not True and isinstance(obj, Tracer) and obj.ndim >= ndmin
            and (dtype is None or dtypes.as_dtype(np.dtype(dtype)) == obj.dtype)):
        return obj
    node = _array_node(obj, "array")
    if dtype is not None:
        node = cast(node, dtypes.as_dtype(np.dtype(dtype)))
    if node.ndim < ndmin:
        node = new_node("expand_dims", [node], {"axes": list(range(ndmin - node.ndim))})
    return Tracer(node)


@implements("asarray", creates=True)
def asarray(a: Any, dtype: Any = None, order: Any = None, *, device: Any = None, copy: Any = None,
            like: Any = None) -> Tracer:
    return array(a, dtype, copy=copy)


@implements("copy")
def copy(a: Any, order: str = "K", subok: bool = False) -> Tracer:
    return array(a)


@implements("ascontiguousarray", creates=True)
def ascontiguousarray(a: Any, dtype: Any = None, *, like: Any = None) -> Tracer:
    return array(a, dtype, ndmin=1)


def _array_node(obj: Any, what: str) -> Node:
    if isinstance(obj, Tracer):
        return obj.node
    if isinstance(obj, (list, tuple)) and any(_holds_tracer(o) for o in obj):
            return stack([Tracer(_array_node(o, what)) for o in obj]).node
    if isinstance(obj, Scalar):  # a runtime scalar argument: a 0-d traced value
        return as_node(obj, what)
    try:
        values = np.array(obj)
    except ValueError as exc:  # a ragged nesting: NumPy's ValueError, at the user's line
        raise FusecValueError(str(exc), hint="nest lists of equal lengths") from None
    if dtypes.kind(values.dtype) not in "biuf":
        raise UnsupportedError(f"np.{what} of {values.dtype} values is not traced", hint="use numbers")
    if values.size > CONSTANT_LIMIT:
        raise UnsupportedError(f"a constant array of {values.size} elements made in the function (at most "
                               f"{CONSTANT_LIMIT} are traced)", hint="pass it as an argument of the fused function")
    return constant_array(values)


def _holds_tracer(o: Any) -> bool:
    return isinstance(o, Tracer) or (isinstance(o, (list, tuple)) and any(_holds_tracer(x) for x in o))


# for docs/ops.md (fusec.frontend.ops_doc)
DOCUMENTED = {"numpy": ("array", "asarray", "ascontiguousarray", "copy", "zeros", "ones", "full", "empty", "empty_like",
                        "eye", "identity", "tri", "tril", "triu", "linspace", "meshgrid")}

__all__ = ["CONSTANT_LIMIT", "DOCUMENTED"]
