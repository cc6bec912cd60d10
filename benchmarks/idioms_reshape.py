"""Reshape idioms as people write them, in the style of :mod:`benchmarks.workloads`: group norm.

``build_groupnorm(xp)`` returns the plain function for one array namespace (``fusec.fuse(build_groupnorm(cupy))``
is one kernel: the reshape to groups, both statistics, the normalization and the per-channel scale and shift);
``torch_groupnorm(torch)`` is PyTorch's own. ``groupnorm_inputs(xp)`` makes the arguments of
:data:`GROUPNORM_SHAPE` (x of (N, C, H, W) float32, gamma and beta of (C,)).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

GN_EPS = 1e-5
GN_GROUPS = 32
GROUPNORM_SHAPE = (32, 256, 64, 64)  # (N, C, H, W)


def build_groupnorm(xp: Any, groups: int = GN_GROUPS) -> Callable:
    def groupnorm(x, gamma, beta):
        n, c, h, w = x.shape
        xr = x.reshape(n, groups, -1)
        m = xr.mean(-1, keepdims=True)
        v = xr.var(-1, keepdims=True)
        y = ((xr - m) / xp.sqrt(v + GN_EPS)).reshape(n, c, h, w)
        return y * gamma[:, None, None] + beta[:, None, None]

    return groupnorm


def torch_groupnorm(torch: Any, groups: int = GN_GROUPS) -> Callable:
    return lambda x, gamma, beta: torch.nn.functional.group_norm(x, groups, gamma, beta, eps=GN_EPS)


def groupnorm_inputs(xp: Any, shape: tuple[int, int, int, int] = GROUPNORM_SHAPE, seed: int = 0) -> tuple[Any, ...]:
    """x (float32, ``shape``), gamma and beta (float32, one per channel), on ``xp``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape, dtype=np.float32)
    gamma = rng.standard_normal(shape[1], dtype=np.float32)
    beta = rng.standard_normal(shape[1], dtype=np.float32)
    return tuple(xp.asarray(a) for a in (x, gamma, beta))


__all__ = ["GN_EPS", "GN_GROUPS", "GROUPNORM_SHAPE", "build_groupnorm", "groupnorm_inputs", "torch_groupnorm"]
