"""The layout sweep: fusec against its peers off the showcased path, one case per layout family.

Columns and middle axes, several axes at once, row lengths from 1 to 2^20, transposes, inputs passed in
transposed or strided, broadcasts along a trailing axis, sibling reductions, reductions broadcast back
without ``keepdims``, float16/float64/int32/bool/uint8 data, multi-output rows, a long chain, a wide
fan-in, and a tiny call. Each case is written once against an array namespace (``build(xp)``, as in
``workloads.py``) plus its PyTorch spelling; ``python benchmarks/run.py --suite sweep`` runs them with
every peer in the same run. The target of every case is 0.9x the fastest peer or better; the summary
adds the geometric mean of fusec's speed ratio to the fastest peer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes  # noqa: F401  (registers np.dtype("bfloat16"))
import numpy as np

from benchmarks.workloads import CUPY_FUSE, KEEPDIMS, NAIVE, TORCH_COMPILE, TORCH_EAGER, Workload

EPS = 1e-5
SWEEP_PEERS = (NAIVE, CUPY_FUSE, TORCH_EAGER, TORCH_COMPILE)
TARGET_RATIO = 0.9  # fusec's speed over the fastest peer's, at least


def _n(shape: tuple) -> int:
    return math.prod(shape)


def sum_tol(n: int) -> tuple[tuple[float, float]]:
    """The tolerance of a float32 sum of ``n`` standard normal values (CORRECTNESS.md's reduction bound,
    ``eps * log2(n) * sum |x_i|``, with ``E|x| = 0.8``): a sum that cancels to nearly 0 keeps its absolute
    rounding error, which no relative tolerance covers."""
    return ((1e-4, 1.19e-7 * max(math.log2(n), 1.0) * 0.8 * n),)


def _same(fn: Callable[[Any], Any]) -> Callable[[Any], Callable]:
    """``build`` and ``torch_fn`` for a function written with methods and operators only (no namespace)."""
    return lambda _: fn


def case(name: str, title: str, build: Callable[[Any], Callable], torch_fn: Callable[[Any], Callable],
         shape: tuple, dry_shape: tuple, nbytes: Callable[[tuple], int], formula: str, *,
         inputs: Callable[[Callable, tuple], tuple] | None = None, tolerances: tuple = ((1e-4, 1e-5),),
         cupy_fuse_cannot: str | None = None, dispatch: bool = False) -> Workload:
    return Workload(
        name=name, title=title, build=build, torch_fn=torch_fn, shape=shape, dry_shape=dry_shape,
        make_inputs=inputs or (lambda normal, s: (normal(s),)), bytes_formula=formula, bytes_of=nbytes,
        kind="whole", tolerances=tolerances, peers=SWEEP_PEERS, target=f">= {TARGET_RATIO}x best peer",
        target_ms=None, perf_best="", cupy_fuse_cannot=cupy_fuse_cannot, dispatch=dispatch,
        target_ratio=TARGET_RATIO)


# --- functions written once for NumPy/CuPy (xp) and once for PyTorch ----------------------------------------
def softmax_xp(axis: int) -> Callable[[Any], Callable]:
    def build(xp: Any) -> Callable:
        def softmax(x):
            e = xp.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)

        return softmax

    return build


def softmax_torch(dim: int) -> Callable[[Any], Callable]:
    return lambda torch: (lambda x: torch.softmax(x, dim=dim))


def layernorm_xp(xp: Any) -> Callable:
    def layernorm(x):
        m = x.mean(axis=-1, keepdims=True)
        d = x - m
        return d / xp.sqrt((d * d).mean(axis=-1, keepdims=True) + EPS)

    return layernorm


def layernorm_torch(torch: Any) -> Callable:
    return lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=EPS)


def layernorm_f16_xp(xp: Any) -> Callable:
    inner = layernorm_xp(xp)
    return lambda x: inner(x.astype(xp.float32)).astype(xp.float16)


def layernorm_f16_torch(torch: Any) -> Callable:
    return lambda x: torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), eps=EPS).half()


def layernorm_bf16_xp(xp: Any) -> Callable:
    inner = layernorm_xp(xp)
    return lambda x: inner(x.astype(xp.float32)).astype(np.dtype("bfloat16"))  # ml_dtypes' (import fusec loads it)


def layernorm_bf16_torch(torch: Any) -> Callable:
    return lambda x: torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), eps=EPS).bfloat16()


def mean_var_xp(axis: int) -> Callable[[Any], Callable]:
    return _same(lambda x: (x.mean(axis=axis), x.var(axis=axis)))


def mean_var_torch(dim: int) -> Callable[[Any], Callable]:
    def build(torch: Any) -> Callable:
        def mean_var(x):
            var, mean = torch.var_mean(x, dim=dim, correction=0)
            return mean, var

        return mean_var

    return build


def batchnorm_xp(xp: Any) -> Callable:
    def batchnorm(x):
        m = x.mean(axis=0, keepdims=True)
        d = x - m
        return d / xp.sqrt((d * d).mean(axis=0, keepdims=True) + EPS)

    return batchnorm


def batchnorm_torch(torch: Any) -> Callable:
    def batchnorm(x):
        m = x.mean(0, keepdim=True)
        d = x - m
        return d / torch.sqrt((d * d).mean(0, keepdim=True) + EPS)

    return batchnorm


def gelu_xp(xp: Any) -> Callable:
    return lambda x: 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def gelu_torch(torch: Any) -> Callable:
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh")


def cosine_xp(xp: Any) -> Callable:
    return lambda a, b: (a * b).sum(axis=-1) / xp.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))


def cosine_torch(torch: Any) -> Callable:
    return lambda a, b: (a * b).sum(-1) / torch.sqrt((a * a).sum(-1) * (b * b).sum(-1))


def clip_norm_xp(xp: Any) -> Callable:
    return lambda g: g * xp.minimum(1.0, 1.0 / xp.sqrt((g * g).sum()))


def clip_norm_torch(torch: Any) -> Callable:
    return lambda g: g * torch.clamp(1.0 / torch.sqrt((g * g).sum()), max=1.0)


def nhwc_xp(xp: Any) -> Callable:
    return lambda img, mean, std: (img.astype(xp.float32) * (1.0 / 255.0) - mean) / std


def nhwc_torch(torch: Any) -> Callable:
    return lambda img, mean, std: (img.float() * (1.0 / 255.0) - mean) / std


def softmax_lse_xp(xp: Any) -> Callable:
    def softmax_lse(x):
        m = x.max(axis=-1, keepdims=True)
        e = xp.exp(x - m)
        s = e.sum(axis=-1, keepdims=True)
        return e / s, (m + xp.log(s)).squeeze(axis=-1)

    return softmax_lse


def softmax_lse_torch(torch: Any) -> Callable:
    return lambda x: (torch.softmax(x, dim=-1), torch.logsumexp(x, dim=-1))


def chain_xp(xp: Any) -> Callable:
    def chain(x):
        for k in range(8):  # 32 ops
            x = xp.sin(x) * (0.5 + 0.01 * k) + x * 0.25 - 0.125
        return x

    return chain


def chain_torch(torch: Any) -> Callable:
    def chain(x):
        for k in range(8):
            x = torch.sin(x) * (0.5 + 0.01 * k) + x * 0.25 - 0.125
        return x

    return chain


def masked_xp(xp: Any) -> Callable:
    return lambda mask, x: xp.where(mask, x, 0.0).sum(axis=-1)


def masked_torch(torch: Any) -> Callable:
    return lambda mask, x: torch.where(mask, x, 0.0).sum(-1)


# --- inputs ------------------------------------------------------------------------------------------------------
def transposed(normal: Callable, shape: tuple) -> tuple:
    """An array of ``shape`` laid out transposed (Fortran order for 2-D): the transpose of a C array."""
    return (normal(tuple(reversed(shape))).T,)


def every_other(normal: Callable, shape: tuple) -> tuple:
    """An array of ``shape`` that is every other element along the last axis of a buffer twice as wide."""
    return (normal(shape[:-1] + (2 * shape[-1],))[..., ::2],)


def two(normal: Callable, shape: tuple) -> tuple:
    return normal(shape), normal(shape)


def transpose_pair(normal: Callable, shape: tuple) -> tuple:
    return normal(tuple(reversed(shape))), normal(shape)


def image_u8(normal: Callable, shape: tuple) -> tuple:
    img = (normal(shape) * 40.0 + 128.0).clip(0, 255).astype("uint8")
    return img, abs(normal((shape[-1],))) * 0.1 + 0.45, abs(normal((shape[-1],))) * 0.1 + 0.22


def outer(normal: Callable, shape: tuple) -> tuple:
    return normal((shape[0], 1)), normal((1, shape[1]))


def as_dtype(dtype: str) -> Callable[[Callable, tuple], tuple]:
    return lambda normal, shape: (normal(shape).astype(dtype),)


def int32s(normal: Callable, shape: tuple) -> tuple:
    return ((normal(shape) * 1000.0).astype("int32"),)


def mask_and_values(normal: Callable, shape: tuple) -> tuple:
    return normal(shape) > 0.3, normal(shape)


def eight(normal: Callable, shape: tuple) -> tuple:
    return tuple(normal(shape) for _ in range(8))


def fan_in_xp(xp: Any) -> Callable:
    return lambda a, b, c, d, e, f, g, h: a * b + c * d - e * f + g * h


F4 = 4
SWEEP: tuple[Workload, ...] = (
    # -- reductions over outer and middle axes
    case("col_sum_tall", "x.sum(axis=0), tall and narrow", _same(lambda x: x.sum(axis=0)),
         _same(lambda x: x.sum(0)), (1 << 24, 8), (4096, 8), lambda s: F4 * _n(s) + F4 * s[1], "4n + 4C",
         tolerances=sum_tol(1 << 24)),
    case("col_sum_square", "x.sum(axis=0), square", _same(lambda x: x.sum(axis=0)), _same(lambda x: x.sum(0)),
         (8192, 8192), (256, 256), lambda s: F4 * _n(s) + F4 * s[1], "4n + 4C", tolerances=sum_tol(8192)),
    case("col_sum_wide", "x.sum(axis=0), short and wide", _same(lambda x: x.sum(axis=0)),
         _same(lambda x: x.sum(0)), (64, 1 << 20), (16, 4096), lambda s: F4 * _n(s) + F4 * s[1], "4n + 4C",
         tolerances=sum_tol(64)),
    case("col_mean_var", "mean and variance over axis 0 (batch statistics)", mean_var_xp(0), mean_var_torch(0),
         (1 << 19, 512), (1024, 64), lambda s: F4 * _n(s) + 8 * s[1], "4n + 8C", tolerances=((1e-4, 1e-5),) * 2),
    case("batchnorm", "batch-norm normalize over axis 0, keepdims", batchnorm_xp, batchnorm_torch,
         (1 << 19, 256), (1024, 64), lambda s: 8 * _n(s), "4n + 4n", tolerances=((1e-3, 1e-4),),
         cupy_fuse_cannot=KEEPDIMS),
    case("middle_axis_sum", "x.sum(axis=1) of a 3-D array", _same(lambda x: x.sum(axis=1)),
         _same(lambda x: x.sum(1)), (64, 65536, 64), (8, 256, 16), lambda s: F4 * _n(s) + F4 * s[0] * s[2],
         "4n + 4AC", tolerances=sum_tol(65536)),
    case("nchw_channel_sum", "x.sum(axis=(0, 2, 3)) of NCHW", _same(lambda x: x.sum(axis=(0, 2, 3))),
         _same(lambda x: x.sum((0, 2, 3))), (64, 256, 56, 56), (4, 8, 8, 8), lambda s: F4 * _n(s) + F4 * s[1],
         "4n + 4C", tolerances=sum_tol(64 * 56 * 56)),
    case("col_softmax", "softmax over axis 0", softmax_xp(0), softmax_torch(0), (8192, 8192), (256, 256),
         lambda s: 8 * _n(s), "4n + 4n", tolerances=((1e-4, 1e-8),), cupy_fuse_cannot=KEEPDIMS),
    case("center_cols", "x - x.mean(axis=0) (no keepdims)", _same(lambda x: x - x.mean(axis=0)),
         _same(lambda x: x - x.mean(0)), (8192, 8192), (256, 256), lambda s: 8 * _n(s), "4n + 4n",
         tolerances=((1e-4, 1e-5),)),
    # -- layout changes
    case("transpose_add", "x.T + y", _same(lambda x, y: x.T + y), _same(lambda x, y: x.T + y), (16384, 4096),
         (512, 256), lambda s: 12 * _n(s), "4n + 4n + 4n", inputs=transpose_pair),
    case("transpose_3d", "x.transpose(0, 2, 1) * 2", _same(lambda x: x.transpose(0, 2, 1) * 2.0),
         _same(lambda x: x.transpose(1, 2) * 2.0), (64, 1024, 1024), (4, 64, 32), lambda s: 8 * _n(s), "4n + 4n"),
    case("rowsum_of_transposed", "x.sum(axis=-1), x passed in transposed", _same(lambda x: x.sum(axis=-1)),
         _same(lambda x: x.sum(-1)), (8192, 8192), (256, 256), lambda s: F4 * _n(s) + F4 * s[0], "4n + 4R",
         inputs=transposed, tolerances=sum_tol(8192)),
    case("strided_input", "x * 2 + 1, x passed in as every other column", _same(lambda x: x * 2.0 + 1.0),
         _same(lambda x: x * 2.0 + 1.0), (8192, 8192), (256, 256), lambda s: 8 * _n(s), "4n + 4n",
         inputs=every_other),
    case("outer_broadcast", "a (column) * b (row)", _same(lambda a, b: a * b), _same(lambda a, b: a * b),
         (16384, 8192), (256, 128), lambda s: F4 * _n(s) + F4 * (s[0] + s[1]), "4RC + 4R + 4C", inputs=outer),
    case("nhwc_normalize_u8", "uint8 NHWC image normalized by per-channel mean and std", nhwc_xp, nhwc_torch,
         (64, 224, 224, 3), (2, 16, 16, 3), lambda s: 5 * _n(s) + 24, "1n + 4n", inputs=image_u8,
         tolerances=((1e-5, 1e-5),)),
    # -- row lengths
    case("rows_len1_softmax", "softmax over rows of length 1", softmax_xp(-1), softmax_torch(-1), (1 << 26, 1),
         (4096, 1), lambda s: 8 * _n(s), "4n + 4n", tolerances=((1e-5, 1e-8),), cupy_fuse_cannot=KEEPDIMS),
    case("rows_len3_sum", "x.sum(axis=-1), rows of length 3", _same(lambda x: x.sum(axis=-1)),
         _same(lambda x: x.sum(-1)), (1 << 25, 3), (4096, 3), lambda s: F4 * _n(s) + F4 * s[0], "4n + 4R",
         tolerances=sum_tol(3)),
    case("rows_len100_softmax", "softmax over rows of length 100", softmax_xp(-1), softmax_torch(-1),
         (1 << 20, 100), (1024, 100), lambda s: 8 * _n(s), "4n + 4n", tolerances=((1e-4, 1e-8),),
         cupy_fuse_cannot=KEEPDIMS),
    case("rows_len1000_layernorm", "layernorm over rows of length 1000", layernorm_xp, layernorm_torch,
         (65536, 1000), (256, 1000), lambda s: 8 * _n(s), "4n + 4n", tolerances=((1e-3, 1e-4),),
         cupy_fuse_cannot=KEEPDIMS),
    case("rows_long_sum", "x.sum(axis=-1), 64 rows of 2^20", _same(lambda x: x.sum(axis=-1)),
         _same(lambda x: x.sum(-1)), (64, 1 << 20), (4, 1 << 14), lambda s: F4 * _n(s) + F4 * s[0], "4n + 4R",
         tolerances=sum_tol(1 << 20)),
    case("rows_long_softmax", "softmax over 64 rows of 2^20", softmax_xp(-1), softmax_torch(-1), (64, 1 << 20),
         (4, 1 << 14), lambda s: 8 * _n(s), "4n + 4n", tolerances=((1e-4, 1e-10),), cupy_fuse_cannot=KEEPDIMS),
    # -- siblings and broadcasts back
    case("cosine_rows", "cosine similarity of row pairs", cosine_xp, cosine_torch, (8192, 8192), (256, 256),
         lambda s: 8 * _n(s) + F4 * s[0], "4n + 4n + 4R", inputs=two, tolerances=((1e-4, 1e-6),)),
    case("row_ratio", "x.sum(1) / (x * x).sum(1) (no keepdims)",
         _same(lambda x: x.sum(axis=1) / (x * x).sum(axis=1)), _same(lambda x: x.sum(1) / (x * x).sum(1)),
         (8192, 8192), (256, 256), lambda s: F4 * _n(s) + F4 * s[0], "4n + 4R", tolerances=((1e-3, 1e-4),)),
    case("clip_grad_norm", "g * min(1, 1 / ||g||)", clip_norm_xp, clip_norm_torch, (1 << 26,), (1 << 14,),
         lambda s: 8 * _n(s), "4n + 4n", tolerances=((1e-4, 1e-9),)),
    case("rows_mean_var", "mean and variance over rows", mean_var_xp(-1), mean_var_torch(-1), (8192, 8192),
         (256, 256), lambda s: F4 * _n(s) + 8 * s[0], "4n + 8R", tolerances=((1e-4, 1e-5),) * 2),
    case("softmax_logsumexp", "softmax and logsumexp over rows", softmax_lse_xp, softmax_lse_torch, (8192, 8192),
         (256, 256), lambda s: 8 * _n(s) + F4 * s[0], "4n + 4n + 4R", tolerances=((1e-4, 1e-8), (1e-5, 1e-5)),
         cupy_fuse_cannot=KEEPDIMS),
    # -- dtypes
    case("layernorm_f16", "layernorm of float16 computed in float32", layernorm_f16_xp, layernorm_f16_torch,
         (8192, 8192), (256, 256), lambda s: 4 * _n(s), "2n + 2n", inputs=as_dtype("float16"),
         tolerances=((2e-3, 2e-3),), cupy_fuse_cannot=KEEPDIMS),
    # bfloat16 beside float16: the same bytes, so the same bandwidth is the target; two bfloat16 ULP (2^-6), as
    # float16's 2e-3 is two of its ULP
    case("layernorm_bf16", "layernorm of bfloat16 computed in float32", layernorm_bf16_xp, layernorm_bf16_torch,
         (8192, 8192), (256, 256), lambda s: 4 * _n(s), "2n + 2n", inputs=as_dtype("bfloat16"),
         tolerances=((2.0**-6, 2.0**-6),), cupy_fuse_cannot=KEEPDIMS),
    case("gelu_f64", "gelu of float64", gelu_xp, gelu_torch, (1 << 26,), (1 << 14,), lambda s: 16 * _n(s),
         "8n + 8n", inputs=as_dtype("float64"), tolerances=((1e-12, 1e-14),)),
    case("rowsum_int32", "x.sum(axis=-1) of int32 (int64 result)", _same(lambda x: x.sum(axis=-1)),
         _same(lambda x: x.sum(-1)), (8192, 8192), (256, 256), lambda s: F4 * _n(s) + 8 * s[0], "4n + 8R",
         inputs=int32s, tolerances=((0, 0),)),
    case("masked_rowsum", "where(mask, x, 0).sum(axis=-1)", masked_xp, masked_torch, (8192, 8192), (256, 256),
         lambda s: 5 * _n(s) + F4 * s[0], "1n + 4n + 4R", inputs=mask_and_values, tolerances=sum_tol(8192)),
    # -- program shapes and sizes
    case("long_chain", "32 elementwise ops", chain_xp, chain_torch, (1 << 26,), (1 << 14,), lambda s: 8 * _n(s),
         "4n + 4n", tolerances=((1e-4, 1e-5),)),
    case("fan_in_8", "a*b + c*d - e*f + g*h, 8 inputs", fan_in_xp, fan_in_xp, (1 << 24,), (1 << 12,),
         lambda s: 36 * _n(s), "8 x 4n + 4n", inputs=eight, tolerances=((1e-4, 1e-5),)),
    case("tiny_pointwise", "x * 2 + 1 of 1024 elements: time per call", _same(lambda x: x * 2.0 + 1.0),
         _same(lambda x: x * 2.0 + 1.0), (1024,), (1024,), lambda s: 8 * _n(s), "4n + 4n", dispatch=True),
)

BY_NAME = {w.name: w for w in SWEEP}
