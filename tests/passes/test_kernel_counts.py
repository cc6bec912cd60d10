"""Kernel counts and bytes through the public API: ``fusec.fuse(fn).plan(ArraySpec(...))`` (no data,
no GPU). Each workload the fusion pass is built for must become the number of kernels its shape
allows, and the bytes a plan reports must be what those kernels read and write.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec import ArraySpec
from tests.workloads import adam, layernorm, mean_var, rmsnorm, softmax, sum_abs

F32 = "float32"
ROWS = ArraySpec((4096, 1024), F32)


def gelu(x):  # examples/gelu.py's form (x**3), not tests/workloads.py's (x * x * x)
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def moe_router(logits):
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    return probs.max(axis=-1), probs.argmax(axis=-1)


def l2_norm(x):
    return np.sqrt(np.sum(x * x))


def column_sums(x):
    return x.sum(axis=0)


def row_then_column(x):
    return (x - x.sum(axis=1, keepdims=True)).sum(axis=0)


def center_columns(x):
    return x - x.mean(axis=0)  # no keepdims: the mean broadcast back along the trailing axis


def row_ratio(x):
    return x.sum(axis=1) / (x * x).sum(axis=1)  # two squeezed row sums combined


def cosine_rows(a, b):
    return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))  # three sibling row sums


def minus_row_max(x):
    return x - x.max(axis=1)[:, None]


KERNEL_COUNTS = [
    (sum_abs, [ArraySpec((1 << 20,), F32)], 1, "reduce-all"),
    (gelu, [ROWS], 1, "pointwise"),
    (softmax, [ROWS], 1, "rows"),
    (layernorm, [ROWS], 1, "rows"),
    (moe_router, [ArraySpec((65536, 64), F32)], 1, "rows"),
    (mean_var, [ROWS], 1, "reduce-all"),
    (l2_norm, [ArraySpec((1 << 20,), F32)], 1, "reduce-all"),
    (rmsnorm, [ROWS, ArraySpec((1024,), F32)], 1, "rows"),
    (column_sums, [ROWS], 1, "cols"),
    (center_columns, [ROWS], 1, "cols"),
    (row_ratio, [ROWS], 1, "rows"),
    (cosine_rows, [ROWS, ROWS], 1, "rows"),
    (minus_row_max, [ROWS], 1, "rows"),
]


@pytest.mark.parametrize(("fn", "specs", "count", "kind"), KERNEL_COUNTS, ids=[c[0].__name__ for c in KERNEL_COUNTS])
def test_kernel_count_of_workload(fn, specs, count, kind) -> None:
    plan = fusec.fuse(fn).plan(*specs)
    assert len(plan.kernels) == count, str(plan.graph)
    assert [k.kind for k in plan.kernels] == [kind] * count
    assert plan.refusals == ()
    assert plan.bytes_moved <= plan.bytes_moved_unfused  # equal for a single op (column_sums)


def test_kernel_count_adam_one_kernel_three_outputs() -> None:
    vec = ArraySpec((1 << 20,), F32)
    plan = fusec.fuse(adam).plan(vec, vec, vec, vec)
    (kernel,) = plan.kernels
    assert kernel.kind == "pointwise"
    assert len(kernel.outputs) == 3
    assert len(kernel.inputs) == 4
    assert plan.bytes_moved == 7 * vec.size * 4


def test_kernel_count_moe_router_outputs_two_dtypes() -> None:
    plan = fusec.fuse(moe_router).plan(ArraySpec((65536, 64), F32))
    (kernel,) = plan.kernels
    assert sorted(str(n.dtype) for n in kernel.outputs) == ["float32", "int64"]
    assert sum(n.op in ("max", "sum", "argmax") for n in kernel.nodes) == 4  # max, sum, max, argmax


def test_kernel_count_sum_abs_bytes_moved() -> None:
    """sum(|x|) over 2**28 float32: fused, x is read once (2**30 bytes) and 4 bytes written; unfused,
    abs reads x and writes |x|, and the sum reads |x| again."""
    plan = fusec.fuse(sum_abs).plan(ArraySpec((1 << 28,), F32))
    assert len(plan.kernels) == 1
    assert plan.bytes_moved == 2**30 + 4
    assert plan.bytes_moved_unfused == 3 * 2**30 + 4


def test_kernel_count_explain_softmax_shows_one_kernel() -> None:
    report = fusec.fuse(softmax).explain(ROWS)
    assert report.kernel_count == 1
    text = str(report)
    assert "-- kernels: 1 --" in text
    assert "nothing was refused" in text
    assert text.count("kernel @k") == 1  # the IR after the passes marks one region


def test_kernel_count_row_reduction_feeding_column_reduction() -> None:
    plan = fusec.fuse(row_then_column).plan(ArraySpec((1024, 512), F32))
    assert [k.kind for k in plan.kernels] == ["rows", "cols"]
    assert len(plan.refusals) == 1
    assert "different iteration space" in plan.refusals[0]
    text = str(fusec.fuse(row_then_column).explain(ArraySpec((1024, 512), F32)))
    assert "different iteration space" in text


def batchnorm(x):
    m = x.mean(axis=0, keepdims=True)
    return (x - m) / np.sqrt(x.var(axis=0, keepdims=True) + 1e-5)


def center_cols(x):
    return x - x.mean(axis=0)


@pytest.mark.parametrize("fn", [batchnorm, center_cols])
def test_kernel_count_cols_epilogue_stays_fused_while_its_data_fits_on_chip(fn) -> None:
    """A reduction over axis 0 whose result is broadcast back: one kernel while the elements its epilogue
    re-reads fit in L2; past COLS_EPILOGUE_MAX_ELEMENTS, the reduction kernel then a pointwise kernel (which
    reads the data at its vector loop's speed), and the plan says why."""
    from fusec.passes.policy import COLS_EPILOGUE_MAX_ELEMENTS

    small = fusec.fuse(fn).plan(ArraySpec((4096, 256), F32))
    assert [k.region.kind for k in small.kernels] == ["cols"]
    rows = 2 * COLS_EPILOGUE_MAX_ELEMENTS // 256
    big = fusec.fuse(fn).explain(ArraySpec((rows, 256), F32))
    assert [k.region.kind for k in big.plan.kernels] == ["cols", "pointwise"]
    assert big.plan.kernels[0].bytes_written <= 2 * 256 * 4  # the statistics only
    assert "data on chip" in str(big) or fn is batchnorm  # (batchnorm's text names the cycle it would close)
