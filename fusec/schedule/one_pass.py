"""Statistics a kernel can take in one pass: reductions that read another reduction of the same region over
the same axes, rewritten as one accumulator over the data itself.

Two families, as NumPy code writes them:

- **Variances.** ``x.var(axis)`` (and ``((x - x.mean(axis, keepdims=True)) ** 2).mean(axis)``) is
  ``m2 = sum((x - s / n) ** 2)`` after ``s = sum(x)``. Welford's update folds one element into a (count,
  mean, M2) partial and Chan's formula combines two partials, so M2 comes out of the mean's own pass, at
  least as accurately as the two-pass form on badly conditioned data (the partial is kept relative to one
  of its elements, see ``templates/one_pass.cuh``).
- **Softmax denominators.** ``sum(exp(x - max(x)))`` (softmax, logsumexp, cross-entropy) after ``max(x)``.
  The online form keeps a (running max, sum of exp(x - running max)) pair and rescales the sum when the max
  grows; two pairs combine the same way.

As written, the second reduction needs a second pass over the data. :func:`one_pass_sources` finds them in a
region; the schedule says whether a kernel computes them in one pass (``one_pass=1``), and the loop nest then
reads ``x`` for them, in the phase of the reduction they read. Only exact rewrites of what the reduction
means are taken: ``x`` and the data of the first reduction are the same values (equal up to casts that change
no value), the axes are the same, the mean divides by the element count, and every dtype is a float.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np

from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.region import RegionSpace


@dataclass(frozen=True)
class OnePassSource:
    """Reduction ``r`` folds ``kind`` statistics of ``x`` (``moments``: the sum of squared deviations from its
    mean ``first / count``; ``exp_sum``: the sum of ``exp(x - first)``) where ``first`` is the reduction it
    reads; ``reader`` is the member subtracting that from ``x`` (a one-pass loop reads ``x`` as it does)."""

    kind: str
    x: Node
    reader: Node
    first: Node


def _is_float(node: Node) -> bool:
    return dtypes.kind(node.dtype) == "f"


def _value_preserving_source(node: Node) -> Node:
    """``node`` without the casts that change no value (int32 -> float64, float16 -> float32, ...)."""
    while node.op == "cast" and np.can_cast(node.operands[0].dtype, node.dtype, "safe"):
        node = node.operands[0]
    return node


def _without_float_casts(node: Node) -> Node:
    """``node`` without casts between float dtypes (rounding a per-row value does not change what it is the
    mean or maximum of) and without squeezes and inserted size-1 axes (which move no element)."""
    while (node.op == "cast" and _is_float(node) and _is_float(node.operands[0])) or \
            node.op in ("squeeze", "expand_dims"):
        node = node.operands[0]
    return node


def _chain(top: Node, bottom: Node) -> list[Node]:
    """The nodes from ``top`` down its first operands to ``bottom``, both included."""
    chain = [top]
    while chain[-1] is not bottom:
        chain.append(chain[-1].operands[0])
    return chain


def _widened(q: Node) -> Node:
    """``q`` without a cast widening it to a float accumulator."""
    if q.op == "cast" and _is_float(q) and _is_float(q.operands[0]) \
            and q.dtype.itemsize >= q.operands[0].dtype.itemsize:
        return q.operands[0]
    return q


def _reduced_axes(r: Node, space: RegionSpace) -> frozenset[int]:
    """The region axes reduction ``r`` folds."""
    amap = space.reduce_maps[r]
    return frozenset(a for j in r.attr("axes") if (a := amap[j]) is not None)


def reduced_count(r: Node) -> int:
    """How many elements reduction ``r`` folds into each result."""
    count = 1
    for j in r.attr("axes"):
        count *= r.operands[0].shape[j]
    return count


def is_count_of(divisor: Node, r: Node) -> bool:
    """Whether ``divisor`` is the element count of ``r``'s reduced axes (a ``size`` node or a constant)."""
    if divisor.op == "size":
        x = divisor.operands[0]
        return int(np.prod([x.shape[a] for a in divisor.attr("axes")])) == reduced_count(r)
    if divisor.op == "const":
        return float(divisor.attr("value")) == float(reduced_count(r))
    return False


def squared_deviation(q: Node) -> Node | None:
    """The ``d`` of ``q = d ** 2`` (``square(d)``, ``d * d``, ``d ** 2``, possibly widened)."""
    q = _widened(q)
    if q.op == "square":
        return q.operands[0]
    if q.op == "mul" and q.operands[0] is q.operands[1]:
        return q.operands[0]
    if q.op == "pow" and q.operands[1].op == "const" and float(q.operands[1].attr("value")) == 2.0:
        return q.operands[0]
    return None


def exp_argument(q: Node) -> Node | None:
    """The ``d`` of ``q = exp(d)``, possibly widened."""
    q = _widened(q)
    return q.operands[0] if q.op == "exp" else None


def one_pass_sources(reductions: Collection[Node], inside: Collection[Node], space: RegionSpace,
                     full: Callable[[Node], bool]) -> Mapping[Node, OnePassSource]:
    """The region's reductions one pass can compute (see the module docstring), with their sources;
    ``full(n)``: whether member ``n`` varies along the reduced axes."""
    found: dict[Node, OnePassSource] = {}
    for r in reductions:
        if r.op != "sum" or not _is_float(r):
            continue
        d = squared_deviation(r.operands[0])
        kind = "moments"
        if d is None:
            d, kind = exp_argument(r.operands[0]), "exp_sum"
        if d is None or d.op != "sub" or d not in inside or not _is_float(d):
            continue
        a, b = d.operands
        if a in inside and not full(a) and (b not in inside or full(b)):
            per_row, x = a, b
            if kind == "exp_sum":  # exp(max - x) is not a softmax term
                continue
        elif b in inside and not full(b):
            per_row, x = b, a
        else:
            continue
        value = _without_float_casts(per_row)
        if value not in inside or any(n not in inside for n in _chain(per_row, value)):
            continue
        if kind == "moments":
            if value.op != "div":
                continue
            first = _without_float_casts(value.operands[0])
            if first.op != "sum" or not is_count_of(value.operands[1], r):
                continue
        else:
            first = value
            if first.op != "max":
                continue
        if first not in inside or first is r or first.operands[0].shape != x.shape or x.shape != r.operands[0].shape:
            continue
        if _value_preserving_source(first.operands[0]) is not _value_preserving_source(x):
            continue
        if _reduced_axes(first, space) != _reduced_axes(r, space) or not _is_float(x):
            continue
        found[r] = OnePassSource(kind, x, d, first)
    return found


__all__ = ["OnePassSource", "one_pass_sources"]
