"""Contractions traced into elementwise products and sums: ``einsum``, and ``outer``, ``inner``, ``vecdot``, ``dot``,
``matmul`` (``@``), ``tensordot`` and ``average`` written as one.

``einsum`` takes each operand's axes to the positions of its letters (a repeated letter first takes the diagonal),
broadcasts them against each other, multiplies in the operands' result type, and sums over the letters the output
lacks in that type (as NumPy's ``einsum`` does: no integer widening). The product and the sum are one kernel: no
operand is copied.

A contraction whose loops outnumber the elements of every operand and of the result by more than
:data:`LOOP_LIMIT` times is a matrix product, which a GEMM does far faster: where it has two operands, of a
float or integer result type, whose letters group into batch letters (in both operands and the result), M letters
(in the first and the result), N letters (in the second and the result) and K letters (in both, summed), it is a
``matmul`` node (:func:`_as_matmul`: the operands cast to the result type and transposed to ``(batch..., M, K)``
and ``(batch..., K, N)`` by views; extra M and N letters become batch axes of size 1 in the other operand, several
K letters are reshaped into one; the result transposed back), which the matmul kind runs with cuBLAS. Any other
such contraction (three operands, a letter summed in one operand only, a repeated letter, bool) is refused with
the hint to call it outside. ``x @ w`` for a vector ``w`` stays a reduction; the choice is made again for every
call's sizes (a shape guard: a trace made for one choice is made again for sizes that want the other).
"""

from __future__ import annotations

import math
import string
from typing import Any

import numpy as np

from fusec.frontend.composite import ones_like
from fusec.frontend.nodes import add_shape_guard, cast, mark_shape_read, new_node
from fusec.frontend.registry import implements, implements_ufunc
from fusec.frontend.tracer import Tracer, apply_ufunc, as_node, reduction
from fusec.frontend.view_functions import diagonal, ravel
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.reshape_math import reshape_node
from fusec.support.errors import FusecValueError, UnsupportedError

LOOP_LIMIT = 16  # loops per element of the largest operand or result a traced contraction may run


def _parse(subscripts: str, ndims: list[int]) -> tuple[list[str], str]:
    """Each operand's letters (``...`` expanded, right-aligned across operands as NumPy broadcasts it) and the
    output's (implicit: the letters used once, in order, after the ellipsis's)."""
    text = subscripts.replace(" ", "")
    explicit = "->" in text
    inputs, output = text.split("->") if explicit else (text, "")
    terms = inputs.split(",")
    if len(terms) != len(ndims):
        raise FusecValueError("more operands provided to einstein sum function than specified in the subscripts "
                              "string" if len(ndims) > len(terms) else "fewer operands provided to einstein sum "
                              "function than specified in the subscripts string")
    used = set(c for c in text if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    widths = [n - len(t.replace("...", "")) if "..." in t else 0 for t, n in zip(terms, ndims)]
    width = max(widths, default=0)
    ell = "".join(spare[:width])
    letters = []
    for t, w, n in zip(terms, widths, ndims):
        if any(not (c.isalpha() or c == ".") for c in t):
            raise FusecValueError(f"invalid subscript in einstein sum subscripts string: {t!r}")
        full = t.replace("...", ell[width - w:]) if "..." in t else t
        if len(full) != n:
            raise FusecValueError(f"einstein sum subscripts string contains too many subscripts for operand "
                                  f"{len(letters)}" if len(full) > n else "operand has more dimensions than "
                                  "subscripts given in einstein sum")
        letters.append(full)
    if explicit:
        out = output.replace("...", ell)
    else:
        counts = {c: sum(term.count(c) for term in letters) for c in set("".join(letters))}
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return letters, out


@implements("einsum")
def einsum(subscripts: Any, *operands: Any, out: Any = None, dtype: Any = None, order: str = "K",
           casting: str = "safe", optimize: Any = False) -> Tracer:
    """``numpy.einsum`` with a subscripts string (see the module docstring)."""
    if out is not None:
        raise UnsupportedError("the out= argument of einsum is not supported inside a fused function")
    if not isinstance(subscripts, str):
        raise UnsupportedError("einsum's sublist form is not traced", hint="write the subscripts as a string")
    nodes = [as_node(x, "einsum") for x in operands]
    letters, out_letters = _parse(subscripts, [n.ndim for n in nodes])
    extent = _extents(nodes, letters)
    if len(set(out_letters)) != len(out_letters) or any(c not in extent for c in out_letters):
        raise FusecValueError(f"invalid output subscripts {out_letters!r} in einstein sum")
    summed = [c for c in extent if c not in out_letters]
    order_ = list(out_letters) + summed
    result_dt = dtypes.as_dtype(np.dtype(dtype)) if dtype is not None else dtypes.as_dtype(
        np.result_type(*(n.dtype for n in nodes)))
    too_many = _loops_beyond_limit(nodes, letters, out_letters)
    # the decision is the sizes', not the first call's: a trace reused for other sizes checks it again
    gemm = too_many is not None
    add_shape_guard(tuple(nodes), lambda ns: (_loops_beyond_limit(list(ns), letters, out_letters) is not None) == gemm,
                    f"einsum {subscripts!r} runs {'at most' if not gemm else 'more than'} {LOOP_LIMIT} loops per "
                    "element at the sizes it was traced for, and not at these (a matmul or a product and a sum)")
    if too_many is not None:
        product = _as_matmul(nodes, letters, out_letters, extent, result_dt)
        if product is not None:
            return Tracer(product)
        loops, largest = too_many
        raise UnsupportedError(
            f"einsum {subscripts!r} runs {loops} loops for arrays of at most {largest} elements: a matrix product "
            "that fusec cannot map to a GEMM (two operands of a float or integer type, each letter a batch, M, N or K "
            "letter)", hint="call np.matmul/np.einsum (or a BLAS) outside the fused function")
    # float16 (bfloat16) products and their sum in float32, rounded once at the end: NumPy's matmul, dot, inner and
    # tensordot of float16 arrays accumulate so (its einsum rounds as it goes, less exactly); the matmul kind too
    accumulate = dtypes.compute_dtype(result_dt)  # float16 and bfloat16: float32
    placed = [_place(node, term, order_, accumulate) for node, term in zip(nodes, letters)]
    product = placed[0]
    for p in placed[1:]:
        product = new_node("mul" if product.dtype != dtypes.BOOL else "logical_and", [product, p])
    if len(placed) == 1 and product.shape != tuple(extent[c] for c in order_):
        product = new_node("broadcast_to", [product], {"shape": [extent[c] for c in order_]})
    if not summed:
        return Tracer(cast(product, result_dt))
    axes = tuple(range(len(out_letters), len(order_)))
    if result_dt == dtypes.BOOL:
        return reduction("any", Tracer(product), axes)
    return Tracer(cast(as_node(reduction("sum", Tracer(product), axes, dtype=accumulate), "einsum"), result_dt))


def _as_matmul(nodes: list[Node], letters: list[str], out: str, extent: dict[str, int],
               dt: np.dtype) -> Node | None:
    """The contraction as a ``matmul`` node (see the module docstring), or None where it is no batched matrix
    product."""
    if len(nodes) != 2 or dtypes.kind(dt) not in "iuf" or any(len(set(t)) != len(t) for t in letters):
        return None
    (a, b), (ta, tb) = nodes, letters
    batch = [c for c in out if c in ta and c in tb]
    m = [c for c in out if c in ta and c not in tb]
    n = [c for c in out if c in tb and c not in ta]
    k = [c for c in ta if c in tb and c not in out]
    if not k or set(ta) != set(batch + m + k) or set(tb) != set(batch + n + k):
        return None  # a letter summed in one operand only, or no letter summed: not a matrix product
    for c in k:  # a summed letter both operands run along in full (NumPy would broadcast one of size 1)
        if a.shape[ta.index(c)] != b.shape[tb.index(c)]:
            return None
    # the batch axes are the batch letters and all M and N letters but the last, in the result's order, each of size
    # 1 in the operand without it; then (M, K) and (K, N)
    lead = [c for c in out if c in batch or c in m[:-1] or c in n[:-1]]
    x = _arranged(cast(a, dt), ta, [c if c in ta else "-" for c in lead] + m[-1:] + k, k)
    y = _arranged(cast(b, dt), tb, [c if c in tb else "-" for c in lead] + k + n[-1:], k)
    if not m:  # no M letter: a row of one (a vector's matmul)
        x = new_node("expand_dims", [x], {"axes": [x.ndim - 1]})
    if not n:
        y = new_node("expand_dims", [y], {"axes": [y.ndim]})
    product = new_node("matmul", [x, y])
    got = lead + (m[-1:] or ["-"]) + (n[-1:] or ["-"])
    ones = [i for i, c in enumerate(got) if c == "-"]
    if ones:
        product = new_node("squeeze", [product], {"axes": ones})
        got = [c for c in got if c != "-"]
    perm = [got.index(c) for c in out]
    if perm != list(range(len(perm))):
        product = new_node("transpose", [product], {"perm": perm})
    return product


def _arranged(x: Node, term: str, order: list[str], k: list[str]) -> Node:
    """``x`` (axes lettered by ``term``) with its axes in ``order`` (``-``: a new axis of size 1), its K letters
    ``k`` (adjacent in ``order``) merged into one axis."""
    have = [c for c in order if c != "-"]
    perm = [term.index(c) for c in have]
    if perm != list(range(len(perm))):
        x = new_node("transpose", [x], {"perm": perm})
    ones = [i for i, c in enumerate(order) if c == "-"]
    if ones:
        x = new_node("expand_dims", [x], {"axes": ones})
    if len(k) > 1:
        first = order.index(k[0])
        shape = list(x.shape)
        shape[first:first + len(k)] = [math.prod(shape[first:first + len(k)])]
        mark_shape_read()  # the merged extent is an attribute: other sizes trace again
        x = reshape_node(x, shape, x.loc)
    return x


def _extents(nodes: list[Node], letters: list[str]) -> dict[str, int]:
    """Each subscript letter's extent over the operands (broadcast: 1 gives way)."""
    extent: dict[str, int] = {}
    for node, term in zip(nodes, letters):
        for c, d in zip(term, node.shape):
            if extent.get(c, d) != d and 1 not in (extent.get(c), d):
                raise FusecValueError(f"operands could not be broadcast together: subscript {c!r} has extents "
                                      f"{extent[c]} and {d}")
            extent[c] = max(extent.get(c, d), d)
    return extent


def _loops_beyond_limit(nodes: list[Node], letters: list[str], out_letters: str) -> tuple[int, int] | None:
    """(loops, elements of the largest operand or result) where a contraction of ``nodes`` runs more than
    :data:`LOOP_LIMIT` loops per element of the largest (a matrix product), else None."""
    extent = _extents(nodes, letters)
    loops = math.prod(extent.values())
    largest = max([n.size for n in nodes] + [math.prod(extent[c] for c in out_letters)])
    return (loops, largest) if loops > LOOP_LIMIT * max(largest, 1) else None


def _place(node: Node, term: str, order: list[str], dt: np.dtype) -> Node:
    """``node`` (axes lettered by ``term``) with its axes at their letters' positions in ``order`` (size 1 for the
    letters it lacks), in dtype ``dt``; a repeated letter takes the diagonal first."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        p = term.index(c)
        q = term.index(c, p + 1)
        node = diagonal(Tracer(node), 0, p, q).node
        term = "".join(x for k, x in enumerate(term) if k not in (p, q)) + c
    node = cast(node, dt)
    perm = sorted(range(len(term)), key=lambda k: order.index(term[k]))
    if perm != list(range(len(term))):
        node = new_node("transpose", [node], {"perm": perm})
    present = sorted(order.index(c) for c in term)
    missing = [k for k in range(len(order)) if k not in present]
    return new_node("expand_dims", [node], {"axes": missing}) if missing else node


def _letters(n: int, skip: str = "") -> str:
    return "".join(c for c in string.ascii_lowercase if c not in skip)[:n]


@implements("outer")
def outer(a: Any, b: Any, out: Any = None) -> Tracer:
    x = ravel(Tracer(as_node(a, "outer"))).node
    y = ravel(Tracer(as_node(b, "outer"))).node
    return einsum("i,j->ij", Tracer(x), Tracer(y), out=out)


@implements("inner")
def inner(a: Any, b: Any) -> Tracer:
    """``numpy.inner``: the sum over the last axes (a product where either is 0-d)."""
    x, y = as_node(a, "inner"), as_node(b, "inner")
    if x.ndim == 0 or y.ndim == 0:
        return apply_ufunc(np.multiply, (Tracer(x), Tracer(y)))
    left = _letters(x.ndim - 1, "z") + "z"
    right = _letters(y.ndim - 1, left) + "z"
    return einsum(f"{left},{right}->{left[:-1]}{right[:-1]}", Tracer(x), Tracer(y))


def _as_gufunc_loop(gufunc: np.ufunc, x: Node, y: Node) -> tuple[Node, Node]:
    """``x`` and ``y`` cast to the loop NumPy's gufunc (``matmul``, ``vecdot``) picks for their dtypes: the result
    type where the gufunc has a loop for it, else the nearest it can cast to (bfloat16 has no matmul loop:
    NumPy casts its operands to float32 and returns float32, unlike ``dot`` and ``tensordot``, which keep
    bfloat16)."""
    try:
        loop = gufunc.resolve_dtypes((x.dtype, y.dtype, None))
    except (TypeError, ValueError):  # no loop: the contraction's own result type decides (and may refuse)
        return x, y
    return cast(x, dtypes.as_dtype(loop[0])), cast(y, dtypes.as_dtype(loop[1]))


@implements("vecdot")
@implements_ufunc("vecdot")  # NumPy's gufunc
def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, **kwargs: Any) -> Tracer:
    """``numpy.vecdot``: ``sum(x1 * x2, axis)`` over the broadcast operands (real dtypes), in the gufunc's loop
    dtype."""
    x1, x2 = _as_gufunc_loop(np.vecdot, as_node(x1, "vecdot"), as_node(x2, "vecdot"))
    product = apply_ufunc(np.multiply, (Tracer(x1), Tracer(x2)))
    return reduction("sum", product, axis, dtype=product.node.dtype)


@implements("dot")
def dot(a: Any, b: Any, out: Any = None) -> Tracer:
    """``numpy.dot``: a product with 0-d operands, else the sum over ``a``'s last axis and ``b``'s second-to-last
    (its only one when 1-d)."""
    x, y = as_node(a, "dot"), as_node(b, "dot")
    if x.ndim == 0 or y.ndim == 0:
        return apply_ufunc(np.multiply, (Tracer(x), Tracer(y)))
    left = _letters(x.ndim - 1, "z") + "z"
    if y.ndim == 1:
        return einsum(f"{left},z->{left[:-1]}", Tracer(x), Tracer(y), out=out)
    rest = _letters(y.ndim - 1, left)
    right = rest[:-1] + "z" + rest[-1]
    return einsum(f"{left},{right}->{left[:-1]}{rest}", Tracer(x), Tracer(y), out=out)


@implements("matmul")
@implements_ufunc("matmul")  # NumPy's gufunc
def matmul(a: Any, b: Any, /, out: Any = None, **kwargs: Any) -> Tracer:
    """``numpy.matmul`` (``@``): vectors promoted and their axis removed after, stacks broadcast; in the gufunc's
    loop dtype."""
    x, y = _as_gufunc_loop(np.matmul, as_node(a, "matmul"), as_node(b, "matmul"))
    if x.ndim == 0 or y.ndim == 0:
        raise FusecValueError("matmul: Input operand does not have enough dimensions")
    if x.ndim == 1 and y.ndim == 1:
        return einsum("z,z->", Tracer(x), Tracer(y), out=out)
    if y.ndim == 1:
        return einsum("...iz,z->...i", Tracer(x), Tracer(y), out=out)
    if x.ndim == 1:
        return einsum("z,...zk->...k", Tracer(x), Tracer(y), out=out)
    return einsum("...iz,...zk->...ik", Tracer(x), Tracer(y), out=out)


@implements("tensordot")
def tensordot(a: Any, b: Any, axes: Any = 2) -> Tracer:
    """``numpy.tensordot``: the sum over ``axes`` (a count: ``a``'s last and ``b``'s first; or two lists)."""
    x, y = as_node(a, "tensordot"), as_node(b, "tensordot")
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        ax_a, ax_b = list(range(x.ndim - n, x.ndim)), list(range(n))
    else:
        ax_a, ax_b = ([axes[0]] if isinstance(axes[0], (int, np.integer)) else list(axes[0]),
                      [axes[1]] if isinstance(axes[1], (int, np.integer)) else list(axes[1]))
    ax_a = [k % x.ndim for k in ax_a]
    ax_b = [k % y.ndim for k in ax_b]
    if len(ax_a) != len(ax_b):
        raise FusecValueError("shape-mismatch for sum")
    left = list(_letters(x.ndim))
    right = list(_letters(y.ndim, "".join(left)))
    for i, j in zip(ax_a, ax_b):
        right[j] = left[i]
    kept = [c for k, c in enumerate(left) if k not in ax_a] + [c for k, c in enumerate(right) if k not in ax_b]
    return einsum(f"{''.join(left)},{''.join(right)}->{''.join(kept)}", Tracer(x), Tracer(y))


@implements("average")
def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *, keepdims: Any = False) -> Any:
    """``numpy.average``: the mean, or NumPy's weighted steps (weights along ``axis`` or of ``a``'s shape; sums in
    the result type, at least float64 for integer data). A zero weight sum gives inf or NaN (NumPy raises)."""
    x = as_node(a, "average")
    keep = bool(keepdims) if keepdims is not np._NoValue else False
    if weights is None:
        avg = reduction("mean", Tracer(x), axis, keepdims=keep)
        if not returned:
            return avg
        count = reduction("sum", ones_like(Tracer(x), dtype=avg.node.dtype), axis, keepdims=keep)
        return avg, count
    w = as_node(weights, "average")
    float_data = x.dtype.kind not in "biu"
    result_dt = dtypes.as_dtype(np.result_type(x.dtype, w.dtype) if float_data else np.result_type(x.dtype, w.dtype,
                                                                                                     "f8"))
    if x.shape != w.shape:
        if axis is None:
            raise TypeError("Axis must be specified when shapes of a and weights differ.")
        if w.ndim != 1:
            raise TypeError("1D weights expected when shapes of a and weights differ.")
        from fusec.ir.infer import normalize_axes

        (ax,) = normalize_axes(axis, x.ndim, allow_tuple=False)
        if w.shape[0] != x.shape[ax]:
            raise FusecValueError("Length of weights not compatible with specified axis.")
        others = [k for k in range(x.ndim) if k != ax]
        w = new_node("expand_dims", [w], {"axes": others}) if others else w
    scale = reduction("sum", Tracer(new_node("broadcast_to", [w], {"shape": list(x.shape)}) if w.shape != x.shape
                                    else w), axis, dtype=result_dt, keepdims=keep)
    product = new_node("mul", [cast(x, result_dt), cast(w, result_dt)])
    total = reduction("sum", Tracer(product), axis, dtype=result_dt, keepdims=keep)
    avg = apply_ufunc(np.true_divide, (total, scale))
    return (avg, scale) if returned else avg


# for docs/ops.md (fusec.frontend.ops_doc): the functions traced into products and sums
DOCUMENTED = {"numpy": ("einsum", "outer", "inner", "vecdot", "dot", "matmul", "tensordot", "average")}

__all__ = ["DOCUMENTED", "LOOP_LIMIT", "average", "dot", "einsum", "inner", "matmul", "outer", "tensordot", "vecdot"]
