"""The GEMM suite (issue 32, item 5): matrix products with their epilogues, fusec against its peers and against
the GEMM alone, in bfloat16, float16 and float32, in one process and one run.

    PYTHONPATH=. python -m benchmarks.gemm [--quick] [--dtypes bf16,fp16] [--cases mlp_gelu,router_top1]
                                           [--no-compile] [--out FILE] [--cpu-check]

Every case is one NumPy-style function of ``tests/workloads.py`` (``gelu(x @ w1 + b1)``, SwiGLU, attention scores,
``layernorm(x @ w + b + residual)``, the MoE router with top-1, and decode shapes of the MLP) at LLM shapes. For each
case and dtype it times, with CUDA events after warm-up (median of N runs):

- fusec: ``fusec.fuse(fn)(*args)`` on the PyTorch tensors (``--fusec-arrays cupy``: CuPy views of the same memory,
  float16 and float32 only); a ``fusec.FusecError`` makes the row ``refused: <message>`` and the run goes on;
- the GEMM alone (cuBLAS, no epilogue, into a preallocated output): ``torch.matmul(..., out=)`` and
  ``cupy.matmul(..., out=)``, the faster of the two being the ceiling;
- the peers: torch eager, ``torch.compile`` (default, and ``mode="max-autotune"``), CuPy naive (the same function
  run eagerly on CuPy arrays).

The bound each case is held to (issue 32's acceptance): ``1.05 x GEMM alone + extra bytes / copy bandwidth``, the
extra bytes being the epilogue's extra inputs (bias, residual, mask) and the outputs beyond what the GEMM alone
writes, the copy bandwidth that of a 1 GiB device-to-device copy measured in the same run. fusec meets the case when
its time is within the bound and at most the fastest peer's.

Every result (fusec's and the peers') is checked against a float64 NumPy reference on the host, computed from the
very inputs on the device, on a sample of rows (every row with ``--cpu-check``), elementwise within a bound derived
from the dtype's unit roundoff u and K: the float32-accumulation bound ``K u_acc sum|a||b|`` on the product, the
roundings at each store, carried through the epilogue (see ``tolerance`` and benchmarks/README.md). A mismatch is
printed and the row is not timed.

``--cpu-check`` needs no GPU and no PyTorch: every workload at tiny shapes through fusec's NumPy reference backend
(``fusec.fuse(fn)`` called on NumPy arrays) and NumPy itself, both checked against the float64 reference.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import math
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

try:
    from benchmarks import run as R
    from tests import workloads as TW
except ImportError:  # run as a script without PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import run as R
    from tests import workloads as TW

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results"
GIB = 1 << 30
BOUND_GEMM_FACTOR = 1.05  # issue 32: at most 1.05x the GEMM alone, plus the epilogue's unavoidable traffic
LN_EPS = 1e-5  # tests/workloads.py's layernorm default
ROUNDINGS = 4  # roundings to the storage dtype a peer may make along the epilogue (each op of a naive one)
SAFETY = 2.0  # the first-order bounds below, doubled
SAMPLE_ROWS = 32  # rows (tokens, or query rows per head) checked against the host reference, besides the first/last
LAST_REPORT: dict | None = None  # the report of the last main() call, for tests

say = R.say
one_line = R.one_line


# --- dtypes ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DType:
    """A storage dtype of the suite: its unit roundoff ``u`` (half an ulp of 1), the absolute slack of its smallest
    values ``atol`` (a subnormal step for float16; flush-to-zero of float32-range types otherwise), and its names."""

    key: str
    numpy: str  # NumPy's name ("bfloat16": ml_dtypes')
    torch: str
    u: float
    atol: float
    itemsize: int

    def numpy_dtype(self) -> np.dtype | None:
        """NumPy's dtype, or None (bfloat16 without ml_dtypes)."""
        if self.numpy != "bfloat16":
            return np.dtype(self.numpy)
        try:
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            return None


U_ACC = 2.0**-24  # every GEMM of the suite accumulates in float32 (float32 GEMMs without TF32)
DTYPES = {
    "bf16": DType("bf16", "bfloat16", "bfloat16", 2.0**-8, 4 * 2.0**-126, 2),
    "fp16": DType("fp16", "float16", "float16", 2.0**-11, 4 * 2.0**-24, 2),
    "fp32": DType("fp32", "float32", "float32", 2.0**-24, 4 * 2.0**-126, 4),
}
DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


# --- the workloads ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Operand:
    """One argument: its name, shape, how it is drawn (``normal`` times ``scale``, or the causal ``mask``) and
    whether the GEMM alone reads it too (``gemm``) or only the epilogue does (an extra input)."""

    name: str
    shape: tuple[int, ...]
    scale: float = 1.0
    gemm: bool = True
    kind: str = "normal"  # "normal" or "causal_mask"


@dataclass(frozen=True)
class GemmWorkload:
    """One function of the suite. ``operands(dims)`` gives its arguments; ``gemms`` names the operand pairs of the
    GEMM(s) alone (``"k^T"``: the last two axes of ``k`` swapped); ``rowwise`` says how rows are sampled: ``"rows"``
    (the first axis of the token-major arguments and outputs) or ``"heads"`` (heads x query rows);
    ``torch_fn(torch)`` is the same function with PyTorch ops; ``reference`` gives the float64 outputs and their
    elementwise error bounds from float64 inputs."""

    name: str
    title: str
    fn: Callable
    torch_fn: Callable[[Any], Callable]
    dims_names: str
    operands: Callable[[tuple[int, ...]], tuple[Operand, ...]]
    gemms: tuple[tuple[str, str], ...]
    reference: Callable[[dict[str, np.ndarray], DType], tuple[tuple[np.ndarray, ...], tuple[Any, ...]]]
    row_operands: tuple[str, ...]  # the operands sliced with the sampled rows
    rowwise: str = "rows"
    float_outputs: int = 1  # outputs in the operands' dtype; the rest are int64 indices (top-1)


def _gemm_ref(a: np.ndarray, b: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """``a @ b`` in float64 and its error bound: K u_acc sum|a||b| (float32 accumulation) + u |a @ b| (the store)."""
    k = a.shape[-1]
    h = a @ b
    return h, k * U_ACC * (np.abs(a) @ np.abs(b)) + dtype.u * np.abs(h)


def _softmax_bound(z: np.ndarray, dz: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """softmax over the last axis in float64 and its bound: logits off by at most ``dz`` move each probability p by
    at most p (exp(2 max dz) - 1) (masked logits, -inf, are exact), then ROUNDINGS roundings of p."""
    p = TW.softmax(z)
    finite = np.isfinite(z)
    spread = np.max(np.where(finite, dz, 0.0), axis=-1, keepdims=True)
    return p, p * np.expm1(2.0 * spread) + ROUNDINGS * dtype.u * p


def ref_mlp_gelu(a: dict[str, np.ndarray], dtype: DType) -> tuple[tuple, tuple]:
    h, dh = _gemm_ref(a["x"], a["w1"], dtype)
    y = h + a["b1"]
    dy = dh + ROUNDINGS * dtype.u * (np.abs(h) + np.abs(a["b1"]))
    out = TW.gelu(y)  # |gelu'| <= 1.13
    return (out,), (SAFETY * (1.13 * dy + ROUNDINGS * dtype.u * (np.abs(out) + np.abs(y))) + dtype.atol,)


def ref_swiglu(a: dict[str, np.ndarray], dtype: DType) -> tuple[tuple, tuple]:
    g, dg = _gemm_ref(a["x"], a["wg"], dtype)
    v, dv = _gemm_ref(a["x"], a["wu"], dtype)
    s = TW.silu(g)  # |silu'| <= 1.1
    out = s * v
    bound = 1.1 * dg * np.abs(v) + np.abs(s) * dv + dg * dv + ROUNDINGS * dtype.u * (np.abs(out) + np.abs(g * v))
    return (out,), (SAFETY * bound + dtype.atol,)


def ref_attention_scores(a: dict[str, np.ndarray], dtype: DType) -> tuple[tuple, tuple]:
    q, k, mask = a["q"], a["k"], a["mask"]
    s = float(q.shape[-1]) ** -0.5
    h, dh = _gemm_ref(q, np.swapaxes(k, -1, -2), dtype)
    z = h * s + mask
    with np.errstate(invalid="ignore"):
        dz = s * dh + ROUNDINGS * dtype.u * np.where(np.isfinite(z), np.abs(z), 0.0)
    p, dp = _softmax_bound(z, dz, dtype)
    return (p,), (SAFETY * dp + dtype.atol,)


def ref_layernorm_residual(a: dict[str, np.ndarray], dtype: DType) -> tuple[tuple, tuple]:
    h, dh = _gemm_ref(a["x"], a["w"], dtype)
    y = h + a["b"] + a["residual"]
    dy = dh + ROUNDINGS * dtype.u * (np.abs(h) + np.abs(a["b"]) + np.abs(a["residual"]))
    out = TW.layernorm(y, eps=LN_EPS)
    sigma = np.sqrt(np.var(y, axis=-1, keepdims=True) + LN_EPS)
    spread = np.max(dy, axis=-1, keepdims=True)
    # (y - mean) / sigma moves by at most (|dy_i| + max dy + |out_i| max dy) / sigma; the mean and variance are
    # sums of N terms in float32 at least: their roundings are as many u's of the row's scale
    bound = (dy + spread * (1.0 + np.abs(out))) / sigma + ROUNDINGS * dtype.u * (np.abs(out) + 1.0)
    return (out,), (SAFETY * bound + dtype.atol,)


def ref_router_top1(a: dict[str, np.ndarray], dtype: DType) -> tuple[tuple, tuple]:
    h, dh = _gemm_ref(a["x"], a["w_r"], dtype)
    p, dp = _softmax_bound(h, dh + ROUNDINGS * dtype.u * np.abs(h), dtype)
    top = p.argmax(axis=-1)
    pmax = np.take_along_axis(p, top[..., None], axis=-1)[..., 0]
    dmax = np.take_along_axis(dp, top[..., None], axis=-1)[..., 0]
    # an index is right when its logit is within the logits' error of the largest: a near-tie either way is fine
    slack = SAFETY * 2.0 * np.max(dh + ROUNDINGS * dtype.u * np.abs(h), axis=-1)
    return (pmax, top), (SAFETY * dmax + dtype.atol, ("argmax", h, slack))


def _torch_mlp_gelu(torch: Any) -> Callable:
    def mlp_gelu(x, w1, b1):  # nn.Linear's addmm (the bias in cuBLAS's epilogue), then one GELU kernel
        return torch.nn.functional.gelu(torch.addmm(b1, x, w1), approximate="tanh")

    return mlp_gelu


def _torch_swiglu(torch: Any) -> Callable:
    def swiglu(x, wg, wu):
        return torch.nn.functional.silu(x @ wg) * (x @ wu)

    return swiglu


def _torch_attention_scores(torch: Any) -> Callable:
    def attention_scores(q, k, mask):
        return torch.softmax(q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5) + mask, dim=-1)

    return attention_scores


def _torch_layernorm_residual(torch: Any) -> Callable:
    def layernorm_residual(x, w, b, residual):
        y = torch.addmm(b, x, w) + residual
        return torch.nn.functional.layer_norm(y, (y.shape[-1],), eps=LN_EPS)

    return layernorm_residual


def _torch_router_top1(torch: Any) -> Callable:
    def router_top1(x, w_r):
        values, indices = torch.max(torch.softmax(x @ w_r, dim=-1), dim=-1)
        return values, indices

    return router_top1


WORKLOADS: dict[str, GemmWorkload] = {w.name: w for w in (
    GemmWorkload(
        "mlp_gelu", "MLP up-projection gelu(x @ w1 + b1)", TW.mlp_gelu, _torch_mlp_gelu, "TxHxI",
        lambda d: (Operand("x", (d[0], d[1])), Operand("w1", (d[1], d[2]), d[1] ** -0.5),
                   Operand("b1", (d[2],), 0.1, gemm=False)),
        (("x", "w1"),), ref_mlp_gelu, ("x",)),
    GemmWorkload(
        "swiglu", "SwiGLU silu(x @ wg) * (x @ wu)", TW.swiglu, _torch_swiglu, "TxHxI",
        lambda d: (Operand("x", (d[0], d[1])), Operand("wg", (d[1], d[2]), d[1] ** -0.5),
                   Operand("wu", (d[1], d[2]), d[1] ** -0.5)),
        (("x", "wg"), ("x", "wu")), ref_swiglu, ("x",)),
    GemmWorkload(
        "attention_scores", "attention scores softmax(q @ k.T * s + causal_mask)", TW.attention_scores,
        _torch_attention_scores, "headsxSxd",
        lambda d: (Operand("q", (d[0], d[1], d[2])), Operand("k", (d[0], d[1], d[2])),
                   Operand("mask", (d[1], d[1]), gemm=False, kind="causal_mask")),
        (("q", "k^T"),), ref_attention_scores, ("q", "mask"), rowwise="heads"),
    GemmWorkload(
        "layernorm_residual", "layernorm(x @ w + b + residual)", TW.layernorm_residual, _torch_layernorm_residual,
        "TxHxN",
        lambda d: (Operand("x", (d[0], d[1])), Operand("w", (d[1], d[2]), d[1] ** -0.5),
                   Operand("b", (d[2],), 0.1, gemm=False), Operand("residual", (d[0], d[2]), gemm=False)),
        (("x", "w"),), ref_layernorm_residual, ("x", "residual")),
    GemmWorkload(
        "router_top1", "MoE router softmax(x @ w_r), top-1 probability and expert", TW.router_top1,
        _torch_router_top1, "TxHxE",
        lambda d: (Operand("x", (d[0], d[1])), Operand("w_r", (d[1], d[2]), d[1] ** -0.5)),
        (("x", "w_r"),), ref_router_top1, ("x",)),
)}


@dataclass(frozen=True)
class Case:
    """A workload at one shape; ``quick`` cases make up ``--quick``; ``tiny`` is the shape of ``--cpu-check``."""

    name: str
    workload: str
    dims: tuple[int, ...]
    tiny: tuple[int, ...]
    quick: bool = False

    @property
    def w(self) -> GemmWorkload:
        return WORKLOADS[self.workload]

    def shape_text(self, dims: tuple[int, ...] | None = None) -> str:
        return "x".join(str(d) for d in (dims or self.dims))


def _case(workload: str, dims: tuple[int, ...], tiny: tuple[int, ...], quick: bool = False,
          prefix: str = "") -> Case:
    return Case(f"{prefix}{workload}_{'x'.join(map(str, dims))}", workload, dims, tiny, quick)


# LLM shapes: tokens 4096-16384, hidden 4096, intermediate 11008 (LLaMA-7B) to 14336 (LLaMA-3-8B); decode: 1-16 tokens
CASES: tuple[Case, ...] = (
    _case("mlp_gelu", (4096, 4096, 11008), (16, 32, 48)),
    _case("mlp_gelu", (8192, 4096, 11008), (16, 32, 48), quick=True),
    _case("mlp_gelu", (16384, 4096, 14336), (24, 40, 56)),
    _case("swiglu", (4096, 4096, 11008), (16, 32, 48), quick=True),
    _case("swiglu", (8192, 4096, 14336), (24, 40, 56)),
    _case("swiglu", (16384, 4096, 14336), (24, 40, 56)),
    _case("attention_scores", (32, 2048, 128), (2, 16, 8), quick=True),
    _case("attention_scores", (8, 8192, 128), (2, 24, 8)),
    _case("layernorm_residual", (8192, 4096, 4096), (16, 32, 32), quick=True),
    _case("layernorm_residual", (16384, 4096, 4096), (24, 40, 40)),
    _case("router_top1", (16384, 4096, 64), (16, 32, 8), quick=True),
    _case("router_top1", (16384, 4096, 256), (16, 32, 24)),
    _case("router_top1", (65536, 4096, 64), (24, 32, 8)),
    _case("mlp_gelu", (1, 4096, 11008), (1, 32, 48), prefix="decode_"),
    _case("mlp_gelu", (16, 4096, 11008), (4, 32, 48), quick=True, prefix="decode_"),
    _case("swiglu", (16, 4096, 14336), (4, 32, 48), prefix="decode_"),
)
CASES_BY_NAME = {c.name: c for c in CASES}


def select_cases(spec: str | None, quick: bool) -> list[Case]:
    """``--cases``: comma-separated case names or workload names (every case of it); default every case, or the
    ``quick`` ones."""
    if not spec:
        return [c for c in CASES if c.quick or not quick]
    chosen: list[Case] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item in CASES_BY_NAME:
            matches = [CASES_BY_NAME[item]]
        else:
            matches = [c for c in CASES if c.workload == item or c.name.startswith(item + "_")]
            matches = [c for c in matches if c.quick] if quick and any(c.quick for c in matches) else matches
        if not matches:
            raise ValueError(f"unknown case {item!r}; workloads: {', '.join(WORKLOADS)}; "
                             f"cases: {', '.join(CASES_BY_NAME)}")
        chosen += [c for c in matches if c not in chosen]
    return chosen


def select_dtypes(spec: str | None) -> list[DType]:
    keys = [DTYPE_ALIASES.get(s.strip(), s.strip()) for s in (spec or "bf16,fp16,fp32").split(",") if s.strip()]
    bad = [k for k in keys if k not in DTYPES]
    if bad:
        raise ValueError(f"unknown dtype(s) {', '.join(bad)}; known: {', '.join(DTYPES)}")
    return [DTYPES[k] for k in dict.fromkeys(keys)]


# --- bytes and the bound ---------------------------------------------------------------------------------------
def output_bytes(w: GemmWorkload, dims: tuple[int, ...], dtype: DType) -> int:
    """What the fused function writes: its float outputs in the dtype, its indices as int64."""
    shapes = output_shapes(w, dims)
    return sum(math.prod(s) * (dtype.itemsize if i < w.float_outputs else 8) for i, s in enumerate(shapes))


def output_shapes(w: GemmWorkload, dims: tuple[int, ...]) -> list[tuple[int, ...]]:
    if w.name == "attention_scores":
        return [(dims[0], dims[1], dims[1])]
    if w.name == "router_top1":
        return [(dims[0],), (dims[0],)]
    return [(dims[0], dims[2])]


def gemm_shapes(w: GemmWorkload, dims: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The (a, b) operand shapes of each GEMM alone."""
    ops = {o.name: o.shape for o in w.operands(dims)}
    out = []
    for a, b in w.gemms:
        bshape = ops[b[:-2]][:-2] + ops[b[:-2]][-2:][::-1] if b.endswith("^T") else ops[b]
        out.append((ops[a], bshape))
    return out


def traffic(case: Case, dtype: DType, dims: tuple[int, ...] | None = None) -> dict[str, int]:
    """Bytes: the GEMM alone's (operands read, products written), the epilogue's extra inputs, the outputs beyond
    what the GEMM alone writes (never below 0), and the GEMM flops."""
    dims = dims or case.dims
    w = case.w
    gemm_in = gemm_out = flops = 0
    for a, b in gemm_shapes(w, dims):
        m_shape = a[:-1] + b[-1:]
        gemm_in += (math.prod(a) + math.prod(b)) * dtype.itemsize
        gemm_out += math.prod(m_shape) * dtype.itemsize
        flops += 2 * math.prod(m_shape) * a[-1]
    extra_in = sum(math.prod(o.shape) * dtype.itemsize for o in w.operands(dims) if not o.gemm)
    out = output_bytes(w, dims, dtype)
    return {"gemm_read": gemm_in, "gemm_write": gemm_out, "extra_inputs": extra_in, "outputs": out,
            "extra_outputs": max(0, out - gemm_out), "extra": extra_in + max(0, out - gemm_out), "flops": flops}


def bound_ms(gemm_ms: float | None, extra_bytes: int, copy_gbps: float | None) -> float | None:
    """Issue 32's bound: 1.05 x the GEMM alone + the extra bytes at the copy bandwidth (bytes read + written)."""
    if gemm_ms is None or not copy_gbps:
        return None
    return BOUND_GEMM_FACTOR * gemm_ms + extra_bytes / (copy_gbps * 1e9) * 1e3


# --- arrays: the device's (PyTorch, CuPy) and the host's ---------------------------------------------------------
def host64(a: Any) -> np.ndarray:
    """A float64 (or int64) NumPy copy of a NumPy, CuPy or PyTorch array of any dtype of the suite."""
    mod = type(a).__module__.split(".")[0]
    if mod == "torch":
        t = a.detach()
        if t.is_floating_point():
            return t.to(dtype=__import__("torch").float64).cpu().numpy()
        return t.cpu().numpy().astype(np.int64)
    if mod == "cupy":
        import cupy

        if a.dtype.kind in "iu":
            return cupy.asnumpy(a).astype(np.int64)
        return cupy.asnumpy(a.astype(cupy.float32)).astype(np.float64)
    arr = np.asarray(a)
    return arr.astype(np.int64) if arr.dtype.kind in "iu" else arr.astype(np.float64)


@dataclass
class Sample:
    """Which rows are checked: ``rows`` (first axis) or ``heads`` x ``rows`` (attention)."""

    rows: np.ndarray
    heads: np.ndarray | None = None

    def take(self, a: Any, axis_rows: int = 0) -> Any:
        """The sampled part of ``a``: rows of its first axis (or heads, then query rows) as the same library's array."""
        rows = self.rows.tolist()
        if self.heads is None:
            return a[rows] if len(rows) < a.shape[0] else a
        return a[self.heads.tolist()][:, rows]


def make_sample(case_w: GemmWorkload, dims: tuple[int, ...], seed: int, every: bool) -> Sample:
    """Rows to check: all (``every``), else the first, the last and SAMPLE_ROWS random ones (per sampled head: the
    first and the last head)."""
    rng = np.random.default_rng(seed)
    if case_w.rowwise == "heads":
        heads, n = dims[0], dims[1]
        head_pick = np.arange(heads) if every else np.unique([0, heads - 1])
    else:
        n, head_pick = dims[0], None
    if every or n <= SAMPLE_ROWS + 2:
        rows = np.arange(n)
    else:
        rows = np.unique(np.concatenate([[0, n - 1], rng.choice(n, SAMPLE_ROWS, replace=False)]))
    return Sample(rows, head_pick)


def check(got: tuple, ref: tuple, bounds: tuple, finite: bool | None = None) -> dict[str, Any]:
    """Compare sampled outputs (float64/int64 host arrays) with the reference: |got - ref| <= bound elementwise,
    argmax indices within the logits' error of the largest; also the outputs' count, shapes and dtype."""
    res: dict[str, Any] = {"ok": True, "max_abs": 0.0, "worst_of_bound": 0.0, "rel_norm": 0.0, "bad": 0,
                           "problems": []}

    def problem(text: str) -> None:
        res["ok"] = False
        res["problems"].append(text)

    if len(got) != len(ref):
        problem(f"{len(got)} outputs, the reference has {len(ref)}")
        return res
    if finite is False:
        problem("NaN or inf among the outputs")
    for i, (g, r, b) in enumerate(zip(got, ref, bounds)):
        if tuple(g.shape) != tuple(r.shape):
            problem(f"output {i} has shape {tuple(g.shape)} where its sample should be {tuple(r.shape)}")
            continue
        if isinstance(b, tuple) and b[0] == "argmax":
            _, logits, slack = b
            gi = g.astype(np.int64)
            inside = (gi >= 0) & (gi < logits.shape[-1])
            picked = np.take_along_axis(logits, np.clip(gi, 0, logits.shape[-1] - 1)[..., None], axis=-1)[..., 0]
            ok = inside & (picked >= logits.max(axis=-1) - slack)
            bad = int(np.count_nonzero(~ok))
            res["bad"] += bad
            res[f"index_differs_{i}"] = int(np.count_nonzero(ok & (gi != r)))
            if bad:
                problem(f"output {i}: {bad} of {gi.size} indices are not a top-1 within the logits' error")
            continue
        err = np.abs(g - r)
        if not np.all(np.isfinite(g)):
            problem(f"output {i}: {int(np.count_nonzero(~np.isfinite(g)))} NaN/inf values")
            res["max_abs"] = res["worst_of_bound"] = math.inf
            continue
        bad = int(np.count_nonzero(~(err <= b)))
        res["bad"] += bad
        if err.size:
            res["max_abs"] = max(res["max_abs"], float(err.max()))
            res["worst_of_bound"] = max(res["worst_of_bound"], float(np.max(err / b)))
            norm = float(np.sqrt(np.sum(r * r)))
            res["rel_norm"] = max(res["rel_norm"], float(np.sqrt(np.sum(err * err))) / max(norm, 1e-300))
        if bad:
            j = int(np.argmax(err / b))
            problem(f"output {i}: {bad} of {err.size} sampled elements beyond the bound (worst: {err.flat[j]:.3g} "
                    f"where the bound is {np.ravel(b)[j]:.3g})")
    return res


def describe(c: dict[str, Any]) -> str:
    text = (f"max abs err {c['max_abs']:.3g}, worst err/bound {c['worst_of_bound']:.3g}, "
            f"||err||/||ref|| {c['rel_norm']:.3g}")
    ties = sum(v for k, v in c.items() if k.startswith("index_differs_"))
    if ties:
        text += f", {ties} top-1 near-ties resolved otherwise"
    if not c["ok"]:
        text += "; " + "; ".join(c["problems"])
    return text


# --- the run -----------------------------------------------------------------------------------------------------
@dataclass
class Run:
    args: argparse.Namespace
    start: float = field(default_factory=time.perf_counter)
    torch: Any = None
    cp: Any = None
    copy_gbps: float | None = None
    reps: int = 20
    warmup: int = 3

    def stamp(self) -> str:
        return f"[{time.perf_counter() - self.start:6.1f}s]"

    def over_budget(self) -> str | None:
        budget = self.args.budget
        if budget is not None and time.perf_counter() - self.start > budget:
            return f"time budget of {budget:.0f} s spent (--budget)"
        return None


def time_calls(run: Run, call: Callable[[], Any], clock: str) -> tuple[list[float], str]:
    """Milliseconds per call: ``run.reps`` calls after ``run.warmup``, a CUDA event before and after each (PyTorch's
    on its current stream, or CuPy's on CuPy's), back to back, one synchronization at the end."""
    out = None
    for _ in range(run.warmup):
        out = call()
    if clock == "host":
        times = []
        for _ in range(run.reps):
            t0 = time.perf_counter()
            out = call()
            times.append((time.perf_counter() - t0) * 1e3)
        return times, "host clock per call"
    if clock == "torch":
        torch = run.torch
        torch.cuda.synchronize()
        make = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
        elapsed = lambda s, e: s.elapsed_time(e)  # noqa: E731
    else:
        run.cp.cuda.runtime.deviceSynchronize()
        make = run.cp.cuda.Event
        elapsed = run.cp.cuda.get_elapsed_time
    pairs = [(make(), make()) for _ in range(run.reps)]
    for s, e in pairs:
        s.record()
        out = call()
        e.record()
    pairs[-1][1].synchronize()
    del out
    return [float(elapsed(s, e)) for s, e in pairs], f"CUDA events ({clock} stream) around each call"


def sync(run: Run) -> None:
    if run.torch is not None:
        run.torch.cuda.synchronize()
    elif run.cp is not None:
        run.cp.cuda.runtime.deviceSynchronize()


def measure_copy(run: Run) -> dict[str, Any]:
    """The copy ceiling: a 1 GiB device-to-device cudaMemcpyAsync (bytes read + written), as benchmarks/run.py."""
    cp = run.cp
    src = cp.random.default_rng(0).standard_normal(GIB // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    rt = cp.cuda.runtime

    def memcpy() -> None:
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice,
                       cp.cuda.get_current_stream().ptr)

    times, how = time_calls(run, memcpy, "cupy")
    st = R.stats(times)
    return {"what": "cudaMemcpyAsync device to device, 1 GiB (bytes read + written)", "bytes": 2 * GIB,
            "ms": st, "gbps": 2 * GIB / (st["median"] * 1e-3) / 1e9, "timing": how}


def tiny_host_args(case: Case, npdt: np.dtype, rng: np.random.Generator) -> list[np.ndarray]:
    """The operands at the case's tiny shape as NumPy arrays of ``npdt``: normal(0, 1) x scale, the causal mask."""
    args = []
    for op in case.w.operands(case.tiny):
        mask = op.kind == "causal_mask"
        a = np.triu(np.full(op.shape, -np.inf), 1) if mask else rng.standard_normal(op.shape) * op.scale
        args.append(a.astype(npdt))
    return args


def numpy_dtypes(case: Case, dtype: DType) -> list[str] | None:
    """The dtypes of NumPy's own results of the workload in ``dtype`` (at its tiny shape): what fusec must give.
    They need not be the peers' (NumPy's matmul of bfloat16 is float32; PyTorch's is bfloat16). None without
    ml_dtypes for bfloat16."""
    npdt = dtype.numpy_dtype()
    if npdt is None:
        return None
    with np.errstate(all="ignore"):
        out = as_tuple(case.w.fn(*tiny_host_args(case, npdt, np.random.default_rng(0))))
    return [str(np.asarray(o).dtype) for o in out]


def make_inputs(run: Run, case: Case, dtype: DType, seed: int) -> dict[str, Any]:
    """The operands as PyTorch CUDA tensors of the dtype: normal(0, 1) x scale drawn in float32 then rounded, and the
    causal mask (0 on and below the diagonal, -inf above)."""
    torch = run.torch
    gen = torch.Generator(device="cuda").manual_seed(seed)
    tdt = getattr(torch, dtype.torch)
    out: dict[str, Any] = {}
    for op in case.w.operands(case.dims):
        if op.kind == "causal_mask":
            n = op.shape[-1]
            out[op.name] = torch.full((n, n), -math.inf, device="cuda").triu(1).to(tdt)
        else:
            t = torch.randn(op.shape, generator=gen, device="cuda", dtype=torch.float32)
            out[op.name] = (t * op.scale).to(tdt) if op.scale != 1.0 else t.to(tdt)
    return out


def host_sample(case: Case, inputs: dict[str, Any], sample: Sample) -> dict[str, np.ndarray]:
    """The float64 host copy of the inputs a sample of the outputs needs."""
    host = {}
    for name, a in inputs.items():
        if name not in case.w.row_operands:
            host[name] = host64(a[sample.heads.tolist()] if sample.heads is not None and name == "k" else a)
        elif case.w.rowwise == "heads" and name == "mask":
            host[name] = host64(a[sample.rows.tolist()])
        else:
            host[name] = host64(sample.take(a))
    return host


@dataclass
class Impl:
    """An implementation ready to run: ``call()`` runs it once; its result's outputs go through ``outputs``."""

    name: str
    call: Callable[[], Any]
    clock: str
    note: str = ""


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def run_impl(run: Run, rec: dict, impl_name: str, setup: Callable[[], Impl], sample: Sample, ref: tuple,
             bounds: tuple, want: list[str] | None, deadline_s: float | None = None) -> dict[str, Any]:
    """Set up, call once, check (sampled outputs against the reference, every element finite), then time."""
    res: dict[str, Any] = {"name": impl_name, "status": "failed"}
    try:
        t0 = time.perf_counter()
        with R.deadline(deadline_s, f"{impl_name} set-up"):
            impl = setup()
            out = as_tuple(impl.call())
            sync(run)
        res["first_call_s"] = time.perf_counter() - t0
        if impl.note:
            res["note"] = impl.note
        finite = all(_all_finite(o) for o in out[: rec["float_outputs"]])
        got = tuple(host64(sample.take(o)) for o in out)
        c = check(got, ref, bounds, finite=finite)
        if want is not None:
            have = [_dtype_name(o) for o in out]
            if have != want:
                c["ok"] = False
                c["problems"].append(f"dtypes {have}, NumPy gives {want}")
        res["check"] = c
        del out, got
        if not c["ok"]:
            res.update(status="mismatch", reason=describe(c))
            say(f"  {impl_name}: MISMATCH against the float64 reference: {describe(c)}")
            return res
        times, how = time_calls(run, impl.call, impl.clock)
        res.update(status="ok", ms=R.stats(times), timing=how)
        say(f"  {impl_name}: {R.fmt_stats(res['ms'], False)}; check OK ({describe(c)})"
            + (f" ({impl.note})" if impl.note else ""))
    except Refused as exc:
        res.update(status="refused", reason=str(exc))
        say(f"  {impl_name}: refused: {exc}")
    except Skipped as exc:
        res.update(status="skipped", reason=str(exc))
        say(f"  {impl_name}: skipped: {exc}")
    except (Exception, R.Timeout) as exc:
        res.update(status="failed", reason=one_line(exc))
        say(f"  {impl_name}: failed: {one_line(exc)}")
        if impl_name == "fusec":
            traceback.print_exc(file=sys.stdout)
    return res


class Refused(Exception):
    """fusec refused the case (a ``fusec.FusecError``)."""


class Skipped(Exception):
    """A peer that does not run here (a dtype CuPy lacks, a flag, the time budget)."""


def _all_finite(a: Any) -> bool:
    mod = type(a).__module__.split(".")[0]
    if mod == "torch":
        import torch

        return bool(torch.isfinite(a).all())
    xp = sys.modules["cupy"] if mod == "cupy" else np
    return bool(xp.isfinite(a).all())


def _dtype_name(a: Any) -> str:
    return str(a.dtype).replace("torch.", "")


def cupy_view(run: Run, t: Any, dtype: DType) -> Any:
    """A CuPy view of a PyTorch tensor (no copy); Skipped where CuPy cannot hold the dtype."""
    try:
        return run.cp.from_dlpack(t)
    except Exception as exc:
        raise Skipped(f"CuPy {run.cp.__version__} cannot hold {dtype.numpy} arrays here ({one_line(exc)}); "
                      "CuPy's bfloat16 needs ml_dtypes") from None


def run_case(run: Run, case: Case, dtype: DType, seed: int) -> dict[str, Any]:
    torch, cp = run.torch, run.cp
    w = case.w
    t = traffic(case, dtype)
    rec: dict[str, Any] = {
        "case": case.name, "workload": w.name, "title": w.title, "dtype": dtype.key, "shape": list(case.dims),
        "dims": w.dims_names, "float_outputs": w.float_outputs, "traffic": t, "impls": []}
    say(f"{run.stamp()} {case.name} {dtype.key}: {w.title}; {w.dims_names} = {case.shape_text()}; GEMM "
        f"{t['flops'] / 1e12:.2f} TFLOP, extra traffic {t['extra'] / 1e6:.2f} MB")
    inputs: dict[str, Any] = {}
    try:
        inputs = make_inputs(run, case, dtype, seed)
        args = [inputs[o.name] for o in w.operands(case.dims)]
        sample = make_sample(w, case.dims, seed, every=False)
        t0 = time.perf_counter()
        ref, bounds = w.reference(host_sample(case, inputs, sample), dtype)
        rec["reference_s"] = time.perf_counter() - t0
        rec["sample"] = {"rows": int(sample.rows.size),
                         "heads": None if sample.heads is None else int(sample.heads.size)}
        want = numpy_dtypes(case, dtype)
        say(f"  reference: float64 NumPy on {sample.rows.size} sampled rows"
            f"{'' if sample.heads is None else f' of {sample.heads.size} heads'} in {rec['reference_s']:.2f} s")
        common = (sample, ref, bounds)

        # the GEMM alone: cuBLAS into preallocated outputs
        gemm_pairs = []
        for a_name, b_name in w.gemms:
            a = inputs[a_name]
            b = inputs[b_name[:-2]].transpose(-2, -1) if b_name.endswith("^T") else inputs[b_name]
            gemm_pairs.append((a, b, torch.empty(a.shape[:-1] + b.shape[-1:], dtype=a.dtype, device="cuda")))

        def gemm_torch() -> Impl:
            def call() -> Any:
                for a, b, o in gemm_pairs:
                    torch.matmul(a, b, out=o)
                return gemm_pairs[0][2]
            return Impl("GEMM alone (torch.matmul)", call, "torch", f"{len(gemm_pairs)} cuBLAS call(s), out=")

        def gemm_cupy() -> Impl:
            pairs = [(cupy_view(run, a, dtype), cupy_view(run, b, dtype), cupy_view(run, o, dtype))
                     for a, b, o in gemm_pairs]

            def call() -> Any:
                for a, b, o in pairs:
                    cp.matmul(a, b, out=o)
                return pairs[0][2]
            return Impl("GEMM alone (cupy.matmul)", call, "cupy", f"{len(pairs)} cuBLAS call(s), out=")

        for name, setup in (("GEMM alone (torch.matmul)", gemm_torch), ("GEMM alone (cupy.matmul)", gemm_cupy)):
            rec["impls"].append(_time_only(run, name, setup))

        # fusec
        def fusec_setup() -> Impl:
            import fusec

            fused = fusec.fuse(w.fn)
            use_cupy = run.args.fusec_arrays == "cupy"
            call_args = [cupy_view(run, a, dtype) for a in args] if use_cupy else args
            try:
                fused(*call_args)
            except fusec.FusecError as exc:
                raise Refused(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from None
            return Impl("fusec", lambda: fused(*call_args), "cupy" if use_cupy else "torch",
                        "on CuPy views" if use_cupy else "on PyTorch tensors")

        rec["impls"].append(run_impl(run, rec, "fusec", fusec_setup, *common, want))

        # peers
        tfn = w.torch_fn(torch)

        def eager() -> Impl:
            return Impl("torch eager", lambda: tfn(*args), "torch")

        def compiled(mode: str | None) -> Callable[[], Impl]:
            def setup() -> Impl:
                why = "--no-compile" if run.args.no_compile else run.over_budget()
                if mode == "max-autotune" and not run.args.autotune:
                    why = why or "--quick (pass --autotune to run it)"
                if why:
                    raise Skipped(why)
                fn = torch.compile(tfn, fullgraph=True, dynamic=False, **({"mode": mode} if mode else {}))
                fn(*args)  # compiles (and autotunes), once per shape
                torch.cuda.synchronize()
                return Impl("torch.compile", lambda: fn(*args), "torch", f"mode={mode or 'default'}")
            return setup

        def naive() -> Impl:
            cargs = [cupy_view(run, a, dtype) for a in args]
            try:
                w.fn(*cargs)
            except Exception as exc:
                if dtype.key == "bf16":  # CuPy 14.2's bfloat16 (through ml_dtypes) lacks some ufuncs and matmul
                    raise Skipped(f"CuPy {cp.__version__} cannot run this in bfloat16 ({one_line(exc)})") from None
                raise
            return Impl("cupy naive", lambda: w.fn(*cargs), "cupy")

        peers = (("torch eager", eager, None), ("torch.compile", compiled(None), run.args.compile_timeout),
                 ("torch.compile max-autotune", compiled("max-autotune"), run.args.compile_timeout * 3),
                 ("cupy naive", naive, None))
        for name, setup, limit in peers:
            rec["impls"].append(run_impl(run, rec, name, setup, *common, None, limit))
    except (Exception, R.Timeout) as exc:
        rec["error"] = one_line(exc)
        say(f"  {case.name} {dtype.key}: FAILED before timing: {one_line(exc)}")
        traceback.print_exc(file=sys.stdout)
    finally:
        inputs.clear()
        release(run)
    summarize(rec, run.copy_gbps)
    return rec


def _time_only(run: Run, name: str, setup: Callable[[], Impl]) -> dict[str, Any]:
    res: dict[str, Any] = {"name": name, "status": "failed", "gemm_alone": True}
    try:
        impl = setup()
        times, how = time_calls(run, impl.call, impl.clock)
        res.update(status="ok", ms=R.stats(times), timing=how, note=impl.note)
        say(f"  {name}: {R.fmt_stats(res['ms'], False)}")
    except Skipped as exc:
        res.update(status="skipped", reason=str(exc))
        say(f"  {name}: skipped: {exc}")
    except Exception as exc:
        res.update(status="failed", reason=one_line(exc))
        say(f"  {name}: failed: {one_line(exc)}")
    return res


def release(run: Run) -> None:
    gc.collect()
    if run.torch is not None:
        with contextlib.suppress(Exception):
            run.torch.cuda.synchronize()
            run.torch._dynamo.reset()  # compiled graphs (and max-autotune's CUDA graph pools) of this case
            run.torch.cuda.empty_cache()
    if run.cp is not None:
        with contextlib.suppress(Exception):
            run.cp.get_default_memory_pool().free_all_blocks()


def summarize(rec: dict[str, Any], copy_gbps: float | None) -> None:
    """The GEMM alone (the faster cuBLAS call), the bound, the fastest peer that passed its check, and the verdicts."""
    impls = rec["impls"]
    gemm = [i for i in impls if i.get("gemm_alone") and i["status"] == "ok"]
    peers = [i for i in impls if not i.get("gemm_alone") and i["name"] != "fusec" and i["status"] == "ok"]
    fusec = next((i for i in impls if i["name"] == "fusec"), None)
    best_gemm = min(gemm, key=lambda i: i["ms"]["median"], default=None)
    best = min(peers, key=lambda i: i["ms"]["median"], default=None)
    rec["gemm_ms"] = best_gemm["ms"]["median"] if best_gemm else None
    rec["gemm_impl"] = best_gemm["name"] if best_gemm else None
    rec["extra_ms"] = rec["traffic"]["extra"] / (copy_gbps * 1e9) * 1e3 if copy_gbps else None
    rec["bound_ms"] = bound_ms(rec["gemm_ms"], rec["traffic"]["extra"], copy_gbps)
    rec["best_peer"] = _label(best) if best else None
    rec["best_peer_ms"] = best["ms"]["median"] if best else None
    rec["fusec_status"] = fusec["status"] if fusec else "missing"
    f_ms = fusec["ms"]["median"] if fusec and fusec["status"] == "ok" else None
    rec["fusec_ms"] = f_ms
    rec["fusec_over_bound"] = f_ms / rec["bound_ms"] if f_ms and rec["bound_ms"] else None
    rec["speedup_vs_best_peer"] = rec["best_peer_ms"] / f_ms if f_ms and rec["best_peer_ms"] else None
    rec["meets_bound"] = None if rec["fusec_over_bound"] is None else rec["fusec_over_bound"] <= 1.0
    rec["beats_peers"] = None if rec["speedup_vs_best_peer"] is None else rec["speedup_vs_best_peer"] >= 1.0
    if rec["meets_bound"] is None or (rec["beats_peers"] is None and best is not None):
        rec["met"] = None
    else:
        rec["met"] = rec["meets_bound"] and rec["beats_peers"] is not False


def _label(impl: dict) -> str:
    return impl["name"]


# --- the tables --------------------------------------------------------------------------------------------------
PEER_COLUMNS = (("torch eager", "eager"), ("torch.compile", "compile"), ("torch.compile max-autotune", "max-autotune"),
                ("cupy naive", "cupy naive"))


def _ms(v: float | None) -> str:
    return "-" if v is None else R.fmt_ms(v, False).replace(" ms", "")


def _cell(rec: dict, name: str) -> str:
    impl = next((i for i in rec["impls"] if i["name"] == name), None)
    if impl is None:
        return "-"
    if impl["status"] == "ok":
        return _ms(impl["ms"]["median"])
    return {"mismatch": "MISMATCH", "refused": "refused", "skipped": "skip", "failed": "failed"}.get(impl["status"],
                                                                                                   impl["status"])


def table(report: dict) -> tuple[list[str], list[list[str]]]:
    head = ["case", "dtype", "shape", "fusec ms", "GEMM ms", "bound ms", *(c for _, c in PEER_COLUMNS),
            "fusec/bound", "vs fastest peer", "met"]
    rows = []
    for rec in report["cases"]:
        fusec = _cell(rec, "fusec")
        ratio = "-" if rec.get("fusec_over_bound") is None else f"{rec['fusec_over_bound']:.2f}"
        speed = "-" if rec.get("speedup_vs_best_peer") is None else (
            f"x{rec['speedup_vs_best_peer']:.2f} ({rec['best_peer']})")
        met = {True: "yes", False: "NO", None: "-"}[rec.get("met")]
        if rec.get("met") is False:
            met = "NO (" + ", ".join(w for w, bad in (("bound", rec.get("meets_bound") is False),
                                                      ("peer", rec.get("beats_peers") is False)) if bad) + ")"
        rows.append([rec["case"], rec["dtype"], rec["dims"] + " " + "x".join(map(str, rec["shape"])), fusec,
                     _ms(rec.get("gemm_ms")), _ms(rec.get("bound_ms")), *(_cell(rec, n) for n, _ in PEER_COLUMNS),
                     ratio, speed, met])
    return head, rows


def notes(report: dict) -> list[str]:
    """One line per fusec refusal, mismatch or failure, and per peer reason (grouped)."""
    out = []
    for rec in report["cases"]:
        fusec = next((i for i in rec["impls"] if i["name"] == "fusec"), None)
        if rec.get("error"):
            out.append(f"{rec['case']} {rec['dtype']}: failed before timing: {rec['error']}")
        elif fusec and fusec["status"] != "ok":
            out.append(f"{rec['case']} {rec['dtype']}: fusec {fusec['status']}: {fusec.get('reason', '')}")
    groups: dict[tuple[str, str, str], list[str]] = {}
    for rec in report["cases"]:
        for impl in rec["impls"]:
            if impl["name"] != "fusec" and impl["status"] not in ("ok",):
                groups.setdefault((impl["name"], impl["status"], impl.get("reason", "")), []).append(
                    f"{rec['case']} {rec['dtype']}")
    every = len(report["cases"])
    for (name, status, why), where in groups.items():
        cases = "every case" if len(where) == every and every > 1 else ", ".join(where)
        out.append(f"{name} {status} ({cases}): {why}")
    return out


def verdict_lines(report: dict) -> list[str]:
    recs = report["cases"]
    timed = [r for r in recs if r.get("fusec_ms") is not None]
    refused = [r for r in recs if r.get("fusec_status") == "refused"]
    bad = [r for r in recs if r.get("fusec_status") in ("mismatch", "failed", "missing") or r.get("error")]
    line = (f"fusec: {len(timed)} of {len(recs)} cases timed, {len(refused)} refused, {len(bad)} mismatched or failed; "
            f"within the bound (1.05 x GEMM alone + extra bytes at the copy bandwidth): "
            f"{sum(1 for r in timed if r.get('meets_bound'))} of {len(timed)}; at least as fast as the fastest peer: "
            f"{sum(1 for r in timed if r.get('beats_peers'))} of {len(timed)}")
    return [line]


def header_line(report: dict) -> str:
    parts = [f"{report['gpu']['name']}, {report['date']}, {report['settings']['reps']} runs per median"]
    if report.get("copy", {}).get("gbps"):
        parts.append(f"copy ceiling {report['copy']['gbps']:.0f} GB/s")
    parts.append(f"TF32 {'on' if report['settings'].get('tf32') else 'off'}")
    return "; ".join(parts)


def print_tables(report: dict, markdown: bool = False) -> None:
    head, rows = table(report)
    render = R.render_markdown if markdown else R.render_text
    say("")
    say(("GEMM suite: " if not markdown else "Measured: ") + header_line(report))
    say(render(head, rows))
    for line in notes(report) + verdict_lines(report):
        say(("- " if markdown else "") + line)


# --- the CPU check -------------------------------------------------------------------------------------------------
def cpu_check(cases: list[Case], dtypes: list[DType], seed: int) -> list[dict[str, Any]]:
    """Every case at its tiny shape on NumPy arrays: fusec (its NumPy reference backend) and NumPy itself, each
    checked on every row against the float64 reference with the dtype's bound."""
    import fusec

    recs = []
    seen: set[tuple[str, tuple, str]] = set()
    for case in cases:
        for dtype in dtypes:
            key = (case.workload, case.tiny, dtype.key)
            if key in seen:
                continue
            seen.add(key)
            w = case.w
            rec: dict[str, Any] = {"case": case.name, "workload": w.name, "dtype": dtype.key, "shape": list(case.tiny),
                                   "impls": []}
            recs.append(rec)
            npdt = dtype.numpy_dtype()
            if npdt is None:
                rec["impls"].append({"name": "fusec", "status": "skipped",
                                     "reason": "bfloat16 on the CPU needs ml_dtypes, not installed"})
                say(f"{case.name} {dtype.key} {case.shape_text(case.tiny)}: skipped: no ml_dtypes")
                continue
            args = tiny_host_args(case, npdt, np.random.default_rng([seed, len(recs)]))
            host = {op.name: a.astype(np.float64) for op, a in zip(w.operands(case.tiny), args)}
            ref, bounds = w.reference(host, dtype)
            want = numpy_dtypes(case, dtype)
            runs = (("fusec", lambda fn=w.fn, a=args: fusec.fuse(fn)(*a)), ("numpy", lambda fn=w.fn, a=args: fn(*a)))
            for name, call in runs:
                res: dict[str, Any] = {"name": name}
                try:
                    with np.errstate(over="ignore", under="ignore"):
                        out = as_tuple(call())
                    c = check(tuple(host64(o) for o in out), ref, bounds)
                    have = [str(np.asarray(o).dtype) for o in out]
                    if have != want:
                        c["ok"] = False
                        c["problems"].append(f"dtypes {have}, NumPy gives {want}")
                    res.update(status="ok" if c["ok"] else "mismatch", check=c)
                    if not c["ok"]:
                        res["reason"] = describe(c)
                except fusec.FusecError as exc:
                    res.update(status="refused", reason=(str(exc).strip().splitlines() or [type(exc).__name__])[0])
                except Exception as exc:
                    res.update(status="failed", reason=one_line(exc))
                rec["impls"].append(res)
            cells = "; ".join(f"{i['name']} {i['status']}" + (f" ({describe(i['check'])})" if i["status"] == "ok"
                                                                 else f": {i.get('reason', '')}")
                              for i in rec["impls"])
            say(f"{case.name} {dtype.key} {case.shape_text(case.tiny)}: {cells}")
    return recs


# --- main ------------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gemm", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one case per workload at an LLM shape (every dtype), 5 runs "
                   "per median, torch.compile default only (about 2 minutes on an H100)")
    p.add_argument("--dtypes", help="comma-separated: bf16,fp16,fp32 (default all)")
    p.add_argument("--cases", help=f"comma-separated case or workload names ({', '.join(WORKLOADS)}, decode_...)")
    p.add_argument("--out", metavar="FILE", help="the JSON results (default benchmarks/results/<date>-<gpu>-gemm.json; "
                   "none with --cpu-check unless given)")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile peers (slow to compile)")
    p.add_argument("--autotune", action="store_true", help="run torch.compile mode='max-autotune' with --quick too")
    p.add_argument("--cpu-check", action="store_true", help="no GPU, no PyTorch: every workload at tiny shapes through "
                   "fusec's NumPy backend and NumPy, checked against float64")
    p.add_argument("--fusec-arrays", choices=("torch", "cupy"), default="torch", help="what fusec is called on: the "
                   "PyTorch tensors (default) or CuPy views of them (bf16 then needs CuPy's bfloat16)")
    p.add_argument("--reps", type=int, help="timed runs per median (default 20, 5 with --quick)")
    p.add_argument("--seed", type=int, help="seed of the inputs (default: a fresh one, recorded)")
    p.add_argument("--budget", type=float, metavar="S", help="seconds after which the torch.compile peers are skipped "
                   "(default none; 120 with --quick)")
    p.add_argument("--compile-timeout", type=float, default=180.0, help="seconds one torch.compile may take (x3 for "
                   "max-autotune; default 180)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--from-json", metavar="FILE", help="print the table of a saved run and exit")
    args = p.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        p.error("--reps must be at least 1")
    if args.budget is None and args.quick:
        args.budget = 120.0
    if not args.quick:
        args.autotune = True
    return args


def main(argv: list[str] | None = None) -> int:
    """0 when no fusec result mismatched or failed (refusals are reported, not failures); 1 otherwise; 2 on a
    usage error or without a GPU (outside --cpu-check)."""
    global LAST_REPORT
    args = parse_args(argv)
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
        LAST_REPORT = report
        print_tables(report, args.markdown)
        return 0
    try:
        cases = select_cases(args.cases, args.quick)
        dtypes = select_dtypes(args.dtypes)
    except ValueError as exc:
        say(f"benchmarks.gemm: error: {exc}")
        return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    now = dt.datetime.now(dt.timezone.utc)
    report: dict[str, Any] = {
        "schema": 1, "suite": "gemm", "date": now.strftime("%Y-%m-%d"), "time_utc": now.strftime("%H:%M:%S"),
        "command": " ".join(["python -m benchmarks.gemm", *(argv if argv is not None else sys.argv[1:])]),
        "mode": "cpu-check" if args.cpu_check else "gpu", "quick": args.quick, "git": R.git_commit(),
        "settings": {"seed": seed, "dtypes": [d.key for d in dtypes], "bound_factor": BOUND_GEMM_FACTOR,
                     "roundings": ROUNDINGS, "safety": SAFETY, "sample_rows": SAMPLE_ROWS},
    }
    if args.cpu_check:
        say(f"GEMM suite, CPU check (fusec's NumPy backend and NumPy, tiny shapes), seed {seed}")
        report["cases"] = cpu_check(cases, dtypes, seed)
        impls = [i for r in report["cases"] for i in r["impls"] if i["name"] == "fusec"]
        counts = {s: sum(1 for i in impls if i["status"] == s) for s in ("ok", "refused", "mismatch", "failed",
                                                                         "skipped")}
        say("fusec: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        report["fusec_ok"] = counts["mismatch"] == 0 and counts["failed"] == 0
        LAST_REPORT = report
        if args.out:
            write_json(report, Path(args.out))
        return 0 if report["fusec_ok"] else 1

    try:
        import cupy
        import torch

        if not torch.cuda.is_available() or cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as exc:
        say(f"benchmarks.gemm: error: no usable CUDA GPU through PyTorch and CuPy ({one_line(exc)}); --cpu-check runs "
            "the workloads without one")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 GEMMs in float32, as NumPy users expect
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    run = Run(args, torch=torch, cp=cupy)
    run.reps = args.reps or (5 if args.quick else 20)
    run.warmup = 2 if args.quick else 3
    report["gpu"] = {"name": torch.cuda.get_device_name(0), "slug": R.slugify(torch.cuda.get_device_name(0)),
                     "capability": ".".join(map(str, torch.cuda.get_device_capability(0)))}
    report["settings"].update(reps=run.reps, warmup=run.warmup, tf32=bool(torch.backends.cuda.matmul.allow_tf32),
                              fusec_arrays=args.fusec_arrays,
                              budget_s=args.budget, no_compile=args.no_compile, autotune=args.autotune)
    say(f"{run.stamp()} GEMM suite: {report['gpu']['name']}; {len(cases)} case(s) x {len(dtypes)} dtype(s), "
        f"{run.reps} runs per median, seed {seed}")
    report["copy"] = measure_copy(run)
    run.copy_gbps = report["copy"]["gbps"]
    say(f"{run.stamp()} copy ceiling: {run.copy_gbps:.0f} GB/s ({report['copy']['what']})")
    release(run)
    report["cases"] = []
    for i, case in enumerate(cases):
        for j, dtype in enumerate(dtypes):
            report["cases"].append(run_case(run, case, dtype, seed + 1000 * i + j))
    report["versions"] = {"python": platform.python_version(), "numpy": np.__version__, "cupy": cupy.__version__,
                          "torch": torch.__version__, "fusec": getattr(sys.modules.get("fusec"), "__version__", None)}
    report["elapsed_s"] = time.perf_counter() - run.start
    report["fusec_ok"] = all(r.get("fusec_status") in ("ok", "refused") and not r.get("error") for r in report["cases"])
    LAST_REPORT = report
    path = Path(args.out) if args.out else R.result_path(DEFAULT_OUT, report["date"], report["gpu"]["slug"] + "-gemm")
    write_json(report, path)
    print_tables(report, args.markdown)
    return 0 if report["fusec_ok"] else 1


def write_json(report: dict, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        report["json_path"] = str(path)
        path.write_text(json.dumps(R.json_safe(report), indent=1, allow_nan=False) + "\n")
        say(f"wrote {path}")
    except OSError as exc:
        say(f"could not write {path}: {one_line(exc)}")


if __name__ == "__main__":
    sys.exit(main())
