"""Gather idioms for the benchmark suite (issue 17, item 3), in the style of ``benchmarks/workloads.py``:
each written once against an array namespace ``xp`` (``build_*``), with PyTorch's spelling beside it
(``torch_*``). The lead wires them into a suite.

Cross-entropy: logits float32 ``(8192, 32768)``, targets int64 ``(8192,)``. fusec runs it as two kernels: a row
kernel that computes each row's log-sum-exp (one pass: an online max and rescaled sum) and reads the target's
logit at its index (one more element per row), then a reduce-all kernel for the mean over rows. The logits are
read once: ``4RC + 8R`` bytes read, 4 written (and ``4R`` between the kernels).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

CROSS_ENTROPY_SHAPE = (8192, 32768)  # (rows, classes)
CROSS_ENTROPY_DRY_SHAPE = (64, 1024)


def build_cross_entropy(xp: Any) -> Callable:
    """Mean cross-entropy of ``logits`` (rows, classes) against integer ``targets`` (rows,)."""

    def cross_entropy(logits, targets):
        m = logits.max(1, keepdims=True)
        lse = xp.log(xp.exp(logits - m).sum(1)) + m[:, 0]
        picked = xp.take_along_axis(logits, targets[:, None], axis=1)[:, 0]
        return (lse - picked).mean()

    return cross_entropy


def torch_cross_entropy(torch: Any) -> Callable:
    return lambda logits, targets: torch.nn.functional.cross_entropy(logits, targets)


def cross_entropy_inputs(normal: Callable[[tuple], Any], shape: tuple[int, int]) -> tuple[Any, Any]:
    """Logits from ``normal(shape)`` (float32) and targets in ``[0, classes)`` as int64 NumPy values (move them
    to the device as the suite moves arrays)."""
    rows, classes = shape
    targets = np.random.default_rng(0).integers(0, classes, rows, dtype=np.int64)
    return normal(shape), targets


def cross_entropy_bytes(shape: tuple[int, int]) -> int:
    rows, classes = shape
    return 4 * rows * classes + 8 * rows + 4
