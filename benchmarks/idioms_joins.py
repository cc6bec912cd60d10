"""Join idioms as benchmark builders, in the style of ``benchmarks/workloads.py`` (``build_softmax``,
``torch_softmax``): each a plain function written once against an array namespace ``xp`` (NumPy, CuPy, or
``jax.numpy``), and its PyTorch counterpart. ``fusec.fuse(build_rope(cupy))`` is one kernel: the rotate-half join
reads ``x`` through clamped indices, never through a copy.

RoPE (rotary position embedding): ``x`` float32 of shape ``(B, S, H, D)`` with ``D = ROPE_D`` (128), ``cos`` and
``sin`` of shape ``(S, 1, D)`` (broadcast over the batch and the heads); ``rope_inputs`` makes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

ROPE_D = 128
ROPE_SHAPE = (8, 2048, 16, ROPE_D)  # (B, S, H, D): 128 MiB of float32


def build_rope(xp: Any) -> Callable:
    """``x * cos + rotate_half(x) * sin`` with ``rotate_half(x) = concatenate([-x2, x1], -1)``."""
    def rope(x, cos, sin):
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        rot = xp.concatenate([-x2, x1], axis=-1)
        return x * cos + rot * sin

    return rope


def torch_rope(torch: Any) -> Callable:
    """The same RoPE in torch ops (``torch.cat`` of the negated second half and the first)."""
    def rope(x, cos, sin):
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        rot = torch.cat((-x2, x1), dim=-1)
        return x * cos + rot * sin

    return rope


def rope_inputs(shape: tuple[int, int, int, int] = ROPE_SHAPE, seed: int = 0) -> tuple[np.ndarray, ...]:
    """``(x, cos, sin)`` for :func:`build_rope` as NumPy float32 arrays: ``cos``/``sin`` of the positions' angles
    (shape ``(S, 1, D)``), as a transformer's rotary tables are."""
    b, s, h, d = shape
    x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    inv = 1.0 / (10000.0 ** (np.arange(0, d, 2, dtype=np.float64) / d))
    angles = np.arange(s, dtype=np.float64)[:, None] * inv[None, :]
    angles = np.concatenate([angles, angles], axis=-1)[:, None, :]
    return x, np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
