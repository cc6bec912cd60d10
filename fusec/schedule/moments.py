"""Variances a kernel can compute in one pass: the reductions that are sums of squared deviations from a mean
the same region computes.

NumPy's ``x.var(axis)`` (and its written-out form ``((x - x.mean(axis, keepdims=True)) ** 2).mean(axis)``)
is two reductions, the second reading the first's result::

    s  = sum(x)                       over the reduced axes
    m  = s / n                        per row (any float casts around it)
    m2 = sum((x - m) ** 2)            over the same axes: square(d), d * d or (m - x) ** 2 alike

As written, the second sum needs a second pass over the data. Welford's update folds one element into a
(count, mean, M2) triple and Chan's formula combines two triples, so M2 comes out of the *first* pass, at
least as accurately as the two-pass form (the usual analysis: its error does not grow with the mean's
magnitude, unlike the textbook ``sum(x*x) - sum(x)**2 / n``). :func:`moment_sources` finds such ``m2``
reductions in a region; the schedule says whether a kernel computes them that way
(``welford=1``), and the loop nest then reads ``x`` for them instead of ``(x - m) ** 2``.

Only exact rewrites of what the reduction means are taken: ``x`` and the summed ``x'`` are the same values
(equal up to casts that change no value), the mean is that sum over the same axes divided by their element
count, and every dtype is a float.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np

from fusec.ir.graph import Node
from fusec.ir.region import RegionSpace


@dataclass(frozen=True)
class MomentSource:
    """Reduction ``m2`` is the sum of squared deviations of ``x`` from its mean ``mean_sum / count``:
    ``reader`` is the member subtracting the mean from ``x`` (a one-pass loop reads ``x`` as it does)."""

    x: Node
    reader: Node
    mean_sum: Node


def _is_float(node: Node) -> bool:
    return node.dtype.kind == "f"


def _value_preserving_source(node: Node) -> Node:
    """``node`` without the casts that change no value (int32 -> float64, float16 -> float32, ...)."""
    while node.op == "cast" and np.can_cast(node.operands[0].dtype, node.dtype, "safe"):
        node = node.operands[0]
    return node


def _without_float_casts(node: Node) -> Node:
    """``node`` without casts between float dtypes (rounding a mean does not change what it is the mean of)
    and without squeezes and inserted size-1 axes (which move no element)."""
    while (node.op == "cast" and _is_float(node) and _is_float(node.operands[0])) or \
            node.op in ("squeeze", "expand_dims"):
        node = node.operands[0]
    return node


def _reduced_axes(r: Node, space: RegionSpace) -> frozenset[int]:
    """The region axes reduction ``r`` folds."""
    amap = space.reduce_maps[r]
    return frozenset(a for j in r.attr("axes") if (a := amap[j]) is not None)


def _count(r: Node) -> int:
    count = 1
    for j in r.attr("axes"):
        count *= r.operands[0].shape[j]
    return count


def _is_count_of(divisor: Node, r: Node) -> bool:
    """Whether ``divisor`` is the element count of ``r``'s reduced axes (a ``size`` node or a constant)."""
    if divisor.op == "size":
        x = divisor.operands[0]
        return int(np.prod([x.shape[a] for a in divisor.attr("axes")])) == _count(r)
    if divisor.op == "const":
        return float(divisor.attr("value")) == float(_count(r))
    return False


def _chain(top: Node, bottom: Node) -> list[Node]:
    """The nodes from ``top`` down its first operands to ``bottom``, both included."""
    chain = [top]
    while chain[-1] is not bottom:
        chain.append(chain[-1].operands[0])
    return chain


def _deviation(q: Node) -> Node | None:
    """The ``d`` of ``q = d ** 2`` (``square(d)``, ``d * d``, ``d ** 2``, possibly widened to a float
    accumulator)."""
    if q.op == "cast" and _is_float(q) and _is_float(q.operands[0]) \
            and q.dtype.itemsize >= q.operands[0].dtype.itemsize:
        q = q.operands[0]
    if q.op == "square":
        return q.operands[0]
    if q.op == "mul" and q.operands[0] is q.operands[1]:
        return q.operands[0]
    if q.op == "pow" and q.operands[1].op == "const" and float(q.operands[1].attr("value")) == 2.0:
        return q.operands[0]
    return None


def moment_sources(reductions: Collection[Node], inside: Collection[Node], space: RegionSpace,
                   full: Callable[[Node], bool]) -> Mapping[Node, MomentSource]:
    """The region's ``m2`` reductions (see the module docstring) with their sources; ``full(n)``: whether
    member ``n`` varies along the reduced axes."""
    found: dict[Node, MomentSource] = {}
    for r in reductions:
        if r.op != "sum" or not _is_float(r):
            continue
        d = _deviation(r.operands[0])
        if d is None or d.op != "sub" or d not in inside or not _is_float(d):
            continue
        a, b = d.operands
        if a in inside and not full(a) and (b not in inside or full(b)):
            mean, x = a, b
        elif b in inside and not full(b):
            mean, x = b, a
        else:
            continue
        quotient = _without_float_casts(mean)
        if quotient.op != "div" or quotient not in inside or any(n not in inside for n in _chain(mean, quotient)):
            continue
        total = _without_float_casts(quotient.operands[0])
        if total.op != "sum" or total not in inside or total is r or not _is_count_of(quotient.operands[1], r):
            continue
        same_values = _value_preserving_source(total.operands[0]) is _value_preserving_source(x)
        if not same_values or total.operands[0].shape != x.shape or x.shape != r.operands[0].shape:
            continue
        if _reduced_axes(total, space) != _reduced_axes(r, space) or not _is_float(x):
            continue
        found[r] = MomentSource(x, d, total)
    return found


__all__ = ["MomentSource", "moment_sources"]
