"""Second statistics over split axes in the same pass over the data as the first: variances (Chan's merge of
(sum, M2, count) partials) and softmax denominators (the online merge of (max, sum of exp(x - max)) pairs).

``x.var(axis)`` (and ``((x - x.mean(axis, keepdims=True)) ** 2).mean(axis)``) is ``M2 = sum((x - s / n) ** 2)``
after ``s = sum(x)``. Over axes split across chunks, as written, M2's partials need the tree's mean first: a
second pass over the data. Each chunk can instead give its own (sum, M2 about its own mean, count), and two
such partials merge exactly (Chan et al.): ``M2 = M2_a + M2_b + n_a n_b / n (mean_a - mean_b) ** 2``. The
pairs taken are the ones :mod:`fusec.schedule.one_pass` takes inside one kernel: same axes, the mean divides
by the element count, ``x`` is the first sum's data up to casts that change no value, every dtype a float.

Likewise ``sum(exp(x - max(x)))`` after ``max(x)``: each chunk gives (m_i, S_i = sum(exp(x_i - m_i))) and
``S = sum of S_i exp(m_i - m)`` over ``m = max of m_i`` (a chunk whose maximum is -inf adds nothing unless every
one is, where NumPy's NaN comes out as well).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.schedule.one_pass import exp_argument, is_count_of, squared_deviation


def _strip_float_casts(node: Node) -> Node:
    while (node.op == "cast" and dtypes.kind(node.dtype) == "f" and dtypes.kind(node.operands[0].dtype) == "f") or \
            node.op in ("squeeze", "expand_dims"):
        node = node.operands[0]
    return node


def _value_source(node: Node) -> Node:
    while node.op == "cast" and np.can_cast(node.operands[0].dtype, node.dtype, "safe"):
        node = node.operands[0]
    return node


def moment_pairs(split: Collection[Node]) -> dict[Node, tuple[Node, str]]:
    """Split reduction -> (the split reduction it reads, "moments" or "expsum"), for every pair one pass can
    compute: ``M2`` -> its sum, and ``sum(exp(x - max))`` -> its max."""
    pairs: dict[Node, tuple[Node, str]] = {}
    for r in split:
        if r.op != "sum" or dtypes.kind(r.dtype) != "f":
            continue
        kind = "moments"
        d = squared_deviation(r.operands[0])
        if d is None:
            kind, d = "expsum", exp_argument(r.operands[0])
        if d is None or d.op != "sub" or dtypes.kind(d.dtype) != "f":
            continue
        x, per_row = d.operands
        reduced = tuple(r.attr("axes"))
        if x.shape != r.operands[0].shape or per_row.ndim != x.ndim or any(per_row.shape[a] != 1 for a in reduced):
            continue
        value = _strip_float_casts(per_row)
        if kind == "moments":
            if value.op != "div" or not is_count_of(value.operands[1], r):
                continue
            first = _strip_float_casts(value.operands[0])
        else:
            first = value
        if first not in split or first.op != ("sum" if kind == "moments" else "max") or dtypes.kind(first.dtype) != "f":
            continue
        if tuple(first.attr("axes")) != reduced or not first.attr("keepdims") or first.operands[0].shape != x.shape:
            continue
        if _value_source(first.operands[0]) is not _value_source(x):
            continue
        if first not in {f for f, _ in pairs.values()}:  # one second statistic per first
            pairs[r] = (first, kind)
    return pairs
