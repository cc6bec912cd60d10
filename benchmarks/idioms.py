"""The idioms suite: NumPy written the way people write it, each expected to be one kernel at the copy ceiling.

Issue 17's named cases: logsumexp through ``m[:, 0]``, SwiGLU through ``np.split``, an AdamW step written with
in-place updates (``p -= ...``), cross-entropy through ``take_along_axis``, RoPE through slicing and
``concatenate``, groupnorm through ``reshape``. Each case is one kernel and takes at most 1.1x the copy
ceiling's time for its bytes (``target_pct_copy``: 100 / 1.1 = 90.9% of the copy ceiling); torch.compile runs
beside it. ``python benchmarks/run.py --suite idioms``.

A case whose function updates its arguments in place (``mutates``) returns them too, and every implementation
gets its own copy of the inputs, so each checked call starts from the same values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from benchmarks.idioms_joins import build_rope, torch_rope
from benchmarks.idioms_reshape import build_groupnorm, torch_groupnorm
from benchmarks.workloads import CUPY_FUSE, NAIVE, TORCH_COMPILE, TORCH_EAGER, Workload

IDIOM_PEERS = (NAIVE, CUPY_FUSE, TORCH_EAGER, TORCH_COMPILE)
TARGET_PCT_COPY = 100.0 / 1.1  # within 10% of the copy ceiling's time for the bytes
ADAMW = dict(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.01, step=10)


def _n(shape: tuple) -> int:
    return math.prod(shape)


def idiom(name: str, title: str, build: Callable[[Any], Callable], torch_fn: Callable[[Any], Callable],
          shape: tuple, dry_shape: tuple, nbytes: Callable[[tuple], int], formula: str, *,
          inputs: Callable[[Callable, tuple], tuple] | None = None, tolerances: tuple = ((1e-4, 1e-5),),
          mutates: bool = False) -> Workload:
    return Workload(
        name=name, title=title, build=build, torch_fn=torch_fn, shape=shape, dry_shape=dry_shape,
        make_inputs=inputs or (lambda normal, s: (normal(s),)), bytes_formula=formula, bytes_of=nbytes,
        kind="whole", tolerances=tolerances, peers=IDIOM_PEERS,
        target=f"1 kernel, >= {TARGET_PCT_COPY:.1f}% of copy", target_ms=None, perf_best="",
        target_pct_copy=TARGET_PCT_COPY, target_kernels=1, mutates=mutates)


# --- logsumexp with m[:, 0] ------------------------------------------------------------------------------
def build_logsumexp(xp: Any) -> Callable:
    def logsumexp(x):
        m = x.max(axis=1, keepdims=True)
        return xp.log(xp.exp(x - m).sum(axis=1)) + m[:, 0]

    return logsumexp


def torch_logsumexp(torch: Any) -> Callable:
    return lambda x: torch.logsumexp(x, dim=1)


# --- SwiGLU with np.split ----------------------------------------------------------------------------------
def build_swiglu(xp: Any) -> Callable:
    def swiglu(x):
        a, b = xp.split(x, 2, axis=-1)
        return a / (1 + xp.exp(-a)) * b

    return swiglu


def torch_swiglu(torch: Any) -> Callable:
    def swiglu(x):
        a, b = torch.chunk(x, 2, dim=-1)
        return torch.nn.functional.silu(a) * b

    return swiglu


# --- AdamW written in place --------------------------------------------------------------------------------
def build_adamw_inplace(xp: Any) -> Callable:
    lr, b1, b2, eps, wd, t = (ADAMW[k] for k in ("lr", "b1", "b2", "eps", "wd", "step"))

    def adamw(p, g, m, v):
        p *= 1 - lr * wd
        m *= b1
        m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * g * g
        p -= lr * (m / (1 - b1**t)) / (xp.sqrt(v / (1 - b2**t)) + eps)
        return p, m, v

    return adamw


def torch_adamw_inplace(torch: Any) -> Callable:
    lr, b1, b2, eps, wd, t = (ADAMW[k] for k in ("lr", "b1", "b2", "eps", "wd", "step"))

    def adamw(p, g, m, v):
        p.mul_(1 - lr * wd)
        m.mul_(b1).add_((1 - b1) * g)
        v.mul_(b2).add_((1 - b2) * g * g)
        p.sub_(lr * (m / (1 - b1**t)) / (torch.sqrt(v / (1 - b2**t)) + eps))
        return p, m, v

    return adamw


# --- cross-entropy with take_along_axis (the per-row losses: the mean adds a reduce-all kernel) ---------------
def build_cross_entropy_rows(xp: Any) -> Callable:
    def cross_entropy(logits, targets):
        m = logits.max(1, keepdims=True)
        lse = xp.log(xp.exp(logits - m).sum(1)) + m[:, 0]
        return lse - xp.take_along_axis(logits, targets[:, None], axis=1)[:, 0]

    return cross_entropy


def torch_cross_entropy_rows(torch: Any) -> Callable:
    return lambda logits, targets: torch.nn.functional.cross_entropy(logits, targets, reduction="none")


def cross_entropy_inputs(normal: Callable[[tuple], Any], shape: tuple) -> tuple:
    """Logits ~ N(0, 1) and int64 targets in [0, classes), both in the run's namespace."""
    rows, classes = shape
    targets = (abs(normal((rows,))) * 1000).astype("int64") % classes
    return normal(shape), targets


def groupnorm_inputs(normal: Callable[[tuple], Any], shape: tuple) -> tuple:
    """x ~ N(0, 1) of (N, C, H, W), gamma and beta ~ N(0, 1) of (C,)."""
    return normal(shape), normal((shape[1],)), normal((shape[1],))


def rope_inputs(normal: Callable[[tuple], Any], shape: tuple) -> tuple:
    """x ~ N(0, 1) of (B, S, H, D); cos and sin tables of (S, 1, D) (random here: the kernel reads them the same)."""
    return normal(shape), normal((shape[1], 1, shape[3])), normal((shape[1], 1, shape[3]))


def adamw_inputs(normal: Callable[[tuple], Any], shape: tuple) -> tuple:
    """param ~ N(0,1), grad ~ 0.1 N, m ~ 0.01 N, v = 0.01 |N| (v must not be negative)."""
    return normal(shape), normal(shape) * 0.1, normal(shape) * 0.01, abs(normal(shape)) * 0.01


IDIOMS: tuple[Workload, ...] = (
    idiom("logsumexp_m0", "logsumexp over rows through m[:, 0]", build_logsumexp, torch_logsumexp,
          (8192, 32768), (64, 1000), lambda s: 4 * _n(s) + 4 * s[0], "4RC read + 4R written",
          tolerances=((1e-5, 1e-5),)),
    idiom("swiglu_split", "SwiGLU through np.split(x, 2, axis=-1)", build_swiglu, torch_swiglu,
          (16384, 2 * 5120), (64, 2 * 300), lambda s: 4 * _n(s) + 2 * _n(s), "4RC read + 2RC written"),
    idiom("cross_entropy_rows", "cross-entropy per row through take_along_axis (int64 targets)",
          build_cross_entropy_rows, torch_cross_entropy_rows, (8192, 32768), (64, 1000),
          lambda s: 4 * _n(s) + 8 * s[0] + 4 * s[0], "4RC + 8R read + 4R written", inputs=cross_entropy_inputs,
          tolerances=((1e-5, 1e-4),)),
    idiom("rope_concat", "RoPE: x * cos + concatenate([-x2, x1], -1) * sin, (B, S, H, 128)", build_rope, torch_rope,
          (8, 2048, 16, 128), (2, 16, 2, 8), lambda s: 8 * _n(s) + 8 * s[1] * s[3], "4BSHD read + 4BSHD written",
          inputs=rope_inputs),
    idiom("groupnorm_reshape", "group norm through x.reshape(N, G, -1) and back, 32 groups, affine",
          build_groupnorm, torch_groupnorm, (32, 256, 64, 64), (2, 64, 4, 4), lambda s: 8 * _n(s) + 8 * s[1],
          "4NCHW read + 4NCHW written", inputs=groupnorm_inputs, tolerances=((1e-4, 1e-4),)),
    idiom("adamw_inplace", "AdamW step written in place (p -= ..., m *= b1; m += ...), 4 in, 3 updated",
          build_adamw_inplace, torch_adamw_inplace, (1 << 26,), (1 << 14,), lambda s: 28 * _n(s),
          "4 x 4n read + 3 x 4n written", inputs=adamw_inputs,
          tolerances=((1e-4, 1e-6), (1e-4, 1e-7), (1e-4, 1e-9)), mutates=True),
)

BY_NAME = {w.name: w for w in IDIOMS}
