"""The workloads of shared/PERF.md, each written once against an array namespace ``xp``.

``Workload.build(xp)`` returns the plain function for one namespace, and every implementation
that can share it does:

- fusec: ``fusec.fuse(build(cupy))`` on CuPy arrays (``fusec.fuse(build(numpy))`` in a dry run,
  which runs fusec's NumPy reference backend);
- CuPy naive: ``build(cupy)`` called directly, one CuPy kernel per op;
- the reference: ``build(numpy)`` on float64 copies of the inputs, on the CPU;
- ``cupy.fuse(build(cupy))`` and ``jax.jit(build(jax.numpy))``.

Peers that need code of their own (PyTorch, a CuPy ``ReductionKernel``, ``cuda.compute``) are
defined here too, as ``setup(ctx, workload, inputs) -> Prepared`` functions. ``ctx`` is the run's
context (``benchmarks.run.Context``): it says whether this is a dry run, imports the optional
libraries and converts arrays between them. A setup raises :class:`Skip` when the peer is not
available here and :class:`Cannot` when the peer cannot express the workload; anything else it
raises is recorded as a failure of that peer alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
LN_EPS = 1e-5
ADAM_LR, ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_STEP = 1e-3, 0.9, 0.999, 1e-8, 10


class Skip(Exception):
    """The peer is not available here (not installed, no GPU, no GPU backend)."""


class Cannot(Exception):
    """The peer cannot express this workload (for example cupy.fuse and ``keepdims``)."""


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


@dataclass
class Prepared:
    """One implementation, ready to run on the workload's inputs.

    ``call()`` runs it once and returns its result. ``outputs(result)`` turns the result into a
    tuple of arrays of the run's namespace (CuPy, or NumPy in a dry run) for checking; the default
    is ``as_tuple``. ``clock`` says how to time it: ``"device"`` (CUDA events on CuPy's current
    stream), ``"torch"`` (CUDA events on PyTorch's current stream) or ``"host"`` (a host clock,
    waiting for each result with ``block``).
    """

    call: Callable[[], Any]
    outputs: Callable[[Any], tuple] | None = None
    clock: str = "device"
    block: Callable[[Any], Any] | None = None
    note: str = ""


@dataclass(frozen=True)
class Peer:
    key: str  # short name for --peers
    name: str  # as printed and stored
    setup: Callable[[Any, Workload, tuple], Prepared]
    slow: bool = False  # a costly set-up (compilation): skipped once the time budget is spent


# --- the functions, written once ---------------------------------------------------------------
def build_sum_abs(xp: Any) -> Callable:
    def sum_abs(x):
        return xp.sum(xp.abs(x))

    return sum_abs


def build_gelu(xp: Any) -> Callable:
    def gelu(x):
        return 0.5 * x * (1.0 + xp.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))

    return gelu


def build_softmax(xp: Any) -> Callable:
    def softmax(x):
        e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
        return e / xp.sum(e, axis=-1, keepdims=True)

    return softmax


def build_layernorm(xp: Any) -> Callable:
    def layernorm(x):
        m = xp.mean(x, axis=-1, keepdims=True)
        d = x - m
        v = xp.mean(d * d, axis=-1, keepdims=True)
        return d / xp.sqrt(v + LN_EPS)

    return layernorm


def build_moe_router(xp: Any) -> Callable:
    def moe_router(logits):
        e = xp.exp(logits - xp.max(logits, axis=-1, keepdims=True))
        probs = e / xp.sum(e, axis=-1, keepdims=True)
        return xp.max(probs, axis=-1), xp.argmax(probs, axis=-1)

    return moe_router


def build_adam(xp: Any) -> Callable:
    def adam(param, grad, m, v):
        m = ADAM_BETA1 * m + (1.0 - ADAM_BETA1) * grad
        v = ADAM_BETA2 * v + (1.0 - ADAM_BETA2) * (grad * grad)
        m_hat = m / (1.0 - ADAM_BETA1**ADAM_STEP)
        v_hat = v / (1.0 - ADAM_BETA2**ADAM_STEP)
        return param - ADAM_LR * m_hat / (xp.sqrt(v_hat) + ADAM_EPS), m, v

    return adam


# --- the same in PyTorch (eager, and what torch.compile compiles) -------------------------------
def torch_sum_abs(torch: Any) -> Callable:
    return lambda x: torch.sum(torch.abs(x))


def torch_gelu(torch: Any) -> Callable:
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh")  # one hand-fused kernel in eager


def torch_softmax(torch: Any) -> Callable:
    return lambda x: torch.softmax(x, dim=-1)


def torch_layernorm(torch: Any) -> Callable:
    return lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=LN_EPS)


def torch_moe_router(torch: Any) -> Callable:
    def moe_router(logits):
        values, indices = torch.max(torch.softmax(logits, dim=-1), dim=-1)
        return values, indices

    return moe_router


def torch_adam(torch: Any) -> Callable:
    def adam(param, grad, m, v):
        m = ADAM_BETA1 * m + (1.0 - ADAM_BETA1) * grad
        v = ADAM_BETA2 * v + (1.0 - ADAM_BETA2) * (grad * grad)
        m_hat = m / (1.0 - ADAM_BETA1**ADAM_STEP)
        v_hat = v / (1.0 - ADAM_BETA2**ADAM_STEP)
        return param - ADAM_LR * m_hat / (torch.sqrt(v_hat) + ADAM_EPS), m, v

    return adam


TRIG_CHAIN_OPS = 120  # issue 34's first-call case: sin and cos in turn
PROLOGUE_OPS = 30  # issue 34's softmax after a prologue: *, + and tanh in turn


def _trig_chain(sin: Callable, cos: Callable) -> Callable:
    def trig_chain(x):
        for i in range(TRIG_CHAIN_OPS):
            x = sin(x) if i % 2 == 0 else cos(x)
        return x

    return trig_chain


def _prologue_softmax(tanh: Callable, softmax: Callable) -> Callable:
    def prologue_softmax(x):
        for i in range(PROLOGUE_OPS):
            x = x * 1.0001 if i % 3 == 0 else (x + 0.5 if i % 3 == 1 else tanh(x))
        return softmax(x)

    return prologue_softmax


def build_trig_chain(xp: Any) -> Callable:
    return _trig_chain(xp.sin, xp.cos)


def build_prologue_softmax(xp: Any) -> Callable:
    return _prologue_softmax(xp.tanh, build_softmax(xp))


def torch_trig_chain(torch: Any) -> Callable:
    return _trig_chain(torch.sin, torch.cos)


def torch_prologue_softmax(torch: Any) -> Callable:
    return _prologue_softmax(torch.tanh, torch_softmax(torch))


# --- inputs ------------------------------------------------------------------------------------
def one_normal(normal: Callable[[tuple], Any], shape: tuple) -> tuple:
    return (normal(shape),)


def adam_inputs(normal: Callable[[tuple], Any], shape: tuple) -> tuple:
    """param ~ N(0,1), grad ~ 0.1 N, m ~ 0.01 N, v = 0.01 |N| (v must not be negative)."""
    return normal(shape), normal(shape) * 0.1, normal(shape) * 0.01, abs(normal(shape)) * 0.01


# --- peers -------------------------------------------------------------------------------------
def setup_naive(ctx: Any, w: Workload, inputs: tuple) -> Prepared:
    fn = w.build(ctx.xp)
    return Prepared(lambda: fn(*inputs), note="NumPy (dry run)" if ctx.dry else "")


def setup_cupy_fuse(ctx: Any, w: Workload, inputs: tuple) -> Prepared:
    cp = ctx.need_gpu()
    fused = cp.fuse(w.build(cp))
    try:  # traces and compiles (on copies where the workload updates its arguments); an op it cannot express fails
        fused(*(tuple(a.copy() for a in inputs) if w.mutates else inputs))
    except Exception as exc:
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        raise Cannot(f"{w.cupy_fuse_cannot} (first error: {why})" if w.cupy_fuse_cannot else why) from None
    return Prepared(lambda: fused(*inputs))


def setup_reduction_kernel(ctx: Any, w: Workload, inputs: tuple) -> Prepared:
    cp = ctx.need_gpu()
    kernel = cp.ReductionKernel("T x", "T y", "abs(x)", "a + b", "y = a", "0", "bench_sum_abs")
    (x,) = inputs
    return Prepared(lambda: kernel(x))


def setup_torch_eager(ctx: Any, w: Workload, inputs: tuple) -> Prepared:
    torch = ctx.import_torch()
    fn = w.torch_fn(torch)
    args = [ctx.to_torch(a) for a in inputs]
    return Prepared(lambda: fn(*args), outputs=lambda out: tuple(ctx.from_torch(t) for t in as_tuple(out)),
                    clock="host" if ctx.dry else "torch", note="CPU (dry run)" if ctx.dry else "")


def setup_torch_compile(ctx: Any, w: Workload, inputs: tuple) -> Prepared:
    ctx.need_gpu()
    torch = ctx.import_torch()
    fn = torch.compile(w.torch_fn(torch), fullgraph=True, dynamic=False)
    args = [ctx.to_torch(a) for a in inputs]
    fn(*([a.clone() for a in args] if w.mutates else args))  # compiles (slow, once per shape), under a deadline
    torch.cuda.synchronize()
    return Prepared(lambda: fn(*args), outputs=lambda out: tuple(ctx.from_torch(t) for t in as_tuple(out)),
                    clock="torch")


def setup_jax(ctx: Any, w: Workload, inputs: tuple) -> Prepared:
    jax, jnp = ctx.import_jax()
    fn = jax.jit(w.build(jnp))
    args = [ctx.to_jax(a) for a in inputs]
    jax.block_until_ready(fn(*args))  # compiles
    return Prepared(lambda: fn(*args), outputs=lambda out: tuple(ctx.from_jax(a) for a in as_tuple(out)),
                    clock="host", block=jax.block_until_ready,
                    note=f"host-timed, {jax.default_backend()} backend")


def _abs_f32(a: np.float32) -> np.float32:
    return abs(a)


def setup_cuda_compute(ctx: Any, w: Workload, inputs: tuple) -> Prepared:
    """sum(abs(x)) as one CUB reduction over a TransformIterator, temp storage allocated once."""
    cp = ctx.need_gpu()
    try:
        import cuda.compute as cc
    except Exception as exc:
        raise Skip(f"cuda.compute does not import ({type(exc).__name__}: {exc})") from None
    (x,) = inputs
    n = int(x.size)
    d_out = cp.empty(1, dtype=cp.float32)
    h_init = np.zeros(1, dtype=np.float32)
    try:
        it = cc.TransformIterator(x, _abs_f32)
    except TypeError:  # older releases took (op, iterator)
        it = cc.TransformIterator(_abs_f32, x)
    note = ""
    try:
        reducer = cc.make_reduce_into(it, d_out, cc.OpKind.PLUS, h_init)
        temp = cp.empty(max(int(reducer(None, it, d_out, n, h_init)), 1), dtype=cp.uint8)

        def call() -> Any:
            reducer(temp, it, d_out, n, h_init)
            return d_out
    except Exception as exc:  # no object API in this release: the one-shot call allocates each time
        note = f"reduce_into allocates temp storage per call ({type(exc).__name__})"

        def call() -> Any:
            cc.reduce_into(it, d_out, cc.OpKind.PLUS, n, h_init)
            return d_out

    return Prepared(call, outputs=lambda out: (out.reshape(()),), note=note)


# fusec with its heavy element bodies inline (outline=0), beside fusec's own schedule (outline=1 where the heuristics
# outline): issue 34 asks the outlined kernel to run within 5% of the inline one
INLINE_SCHEDULES = {"trig_chain": {"k0": "pointwise:vector,outline=0"}}


def setup_fusec_inline(ctx: Any, w: Workload, inputs: tuple) -> Prepared:
    import fusec

    schedules = INLINE_SCHEDULES.get(w.name)
    if schedules is None:
        raise Cannot("no inline schedule for this workload")
    fused = fusec.fuse(w.build(ctx.xp), schedules=schedules)
    fused(*inputs)  # compiles
    return Prepared(lambda: fused(*inputs))


NAIVE = Peer("naive", "cupy naive", setup_naive)
CUPY_FUSE = Peer("cupy.fuse", "cupy.fuse", setup_cupy_fuse)
REDUCTION_KERNEL = Peer("reductionkernel", "cupy ReductionKernel", setup_reduction_kernel)
TORCH_EAGER = Peer("torch", "torch eager", setup_torch_eager)
TORCH_COMPILE = Peer("torch.compile", "torch.compile", setup_torch_compile, slow=True)
JAX = Peer("jax", "jax.jit", setup_jax, slow=True)
CUDA_COMPUTE = Peer("cuda.compute", "cuda.compute", setup_cuda_compute)
FUSEC_INLINE = Peer("fusec-inline", "fusec outline=0", setup_fusec_inline)
ALL_PEERS = (NAIVE, CUPY_FUSE, REDUCTION_KERNEL, TORCH_EAGER, TORCH_COMPILE, JAX, CUDA_COMPUTE, FUSEC_INLINE)
COMMON_PEERS = (NAIVE, CUPY_FUSE, TORCH_EAGER, TORCH_COMPILE, JAX)
SUM_ABS_PEERS = (NAIVE, CUPY_FUSE, REDUCTION_KERNEL, TORCH_EAGER, TORCH_COMPILE, JAX, CUDA_COMPUTE)

KEEPDIMS = "keepdims unsupported"


# --- the workloads -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """One row of PERF.md (or of the layout sweep, ``benchmarks/sweep.py``, or the idioms, ``benchmarks/idioms.py``).

    ``kind`` says how the CPU reference is split into chunks: ``"pointwise"`` and ``"rows"`` along
    the first axis, ``"reduce_all"`` into partial sums, ``"whole"`` not at all. ``tolerances`` has one
    entry per output: ``(rtol, atol)``, or ``"argmax"`` for an index that may differ from the reference
    only on a tie of the logits. ``dispatch`` marks the small-input rows, timed per call on the host.
    The target is a time (``target_ms``), a speed relative to the fastest peer (``target_ratio``) or a share
    of the copy ceiling in at most ``target_kernels`` kernels (``target_pct_copy``). A ``mutates`` workload
    updates its arguments in place and returns them: each implementation runs on its own copy of the inputs.
    """

    name: str
    title: str
    build: Callable[[Any], Callable]
    torch_fn: Callable[[Any], Callable]
    shape: tuple[int, ...]
    dry_shape: tuple[int, ...]
    make_inputs: Callable[[Callable[[tuple], Any], tuple], tuple]
    bytes_formula: str
    bytes_of: Callable[[tuple], int]
    kind: str
    tolerances: tuple
    peers: tuple[Peer, ...]
    target: str  # PERF.md's fusec target
    target_ms: float | None
    perf_best: str  # PERF.md's best peer, for the record
    cupy_fuse_cannot: str | None = None
    dispatch: bool = False
    target_ratio: float | None = None  # fusec's speed over the fastest peer's, at least
    target_pct_copy: float | None = None  # fusec's GB/s as % of the copy ceiling, at least (the idioms suite)
    target_kernels: int | None = None  # fusec's kernels, at most (the idioms suite)
    mutates: bool = False  # the function updates its arguments in place (and returns them)
    target_of_impl: str | None = None  # fusec's time within 5% of this implementation's (fusec outline=0)


def _n(shape: tuple) -> int:
    return math.prod(shape)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        name="sum_abs", title="sum(abs(x))", build=build_sum_abs, torch_fn=torch_sum_abs,
        shape=(1 << 28,), dry_shape=(1 << 16,), make_inputs=one_normal,
        bytes_formula="4n read + 4 written", bytes_of=lambda s: 4 * _n(s) + 4,
        kind="reduce_all", tolerances=((1e-4, 1e-3),), peers=SUM_ABS_PEERS,
        target="<= 0.27 ms", target_ms=0.27, perf_best="cuda.compute 0.248-0.266 ms"),
    Workload(
        name="gelu", title="gelu, tanh form", build=build_gelu, torch_fn=torch_gelu,
        shape=(1 << 28,), dry_shape=(1 << 16,), make_inputs=one_normal,
        bytes_formula="4n read + 4n written", bytes_of=lambda s: 8 * _n(s),
        kind="pointwise", tolerances=((1e-4, 1e-5),), peers=COMMON_PEERS,
        target="<= 0.515 ms", target_ms=0.515, perf_best="torch eager F.gelu 0.518 ms"),
    Workload(
        name="softmax", title="softmax over rows", build=build_softmax, torch_fn=torch_softmax,
        shape=(8192, 8192), dry_shape=(64, 1024), make_inputs=one_normal,
        bytes_formula="4RC read + 4RC written", bytes_of=lambda s: 8 * _n(s),
        kind="rows", tolerances=((1e-4, 1e-8),), peers=COMMON_PEERS,
        target="<= 0.15 ms", target_ms=0.15, perf_best="torch.compile 0.207-0.224 ms", cupy_fuse_cannot=KEEPDIMS),
    Workload(
        name="layernorm", title="layernorm over rows, no affine, eps 1e-5", build=build_layernorm,
        torch_fn=torch_layernorm, shape=(8192, 8192), dry_shape=(64, 1024), make_inputs=one_normal,
        bytes_formula="4RC read + 4RC written", bytes_of=lambda s: 8 * _n(s),
        kind="rows", tolerances=((1e-4, 1e-4),), peers=COMMON_PEERS,
        target="<= 0.15 ms", target_ms=0.15, perf_best="torch.compile 0.190-0.210 ms", cupy_fuse_cannot=KEEPDIMS),
    Workload(
        name="moe_router", title="MoE router: softmax over the experts, then max and argmax",
        build=build_moe_router, torch_fn=torch_moe_router, shape=(1 << 20, 64), dry_shape=(4096, 64),
        make_inputs=one_normal, bytes_formula="4TE read + 4T (max) + 8T (int64 argmax) written",
        bytes_of=lambda s: 4 * _n(s) + 12 * s[0],
        kind="rows", tolerances=((1e-4, 1e-7), "argmax"), peers=COMMON_PEERS,
        target="<= 0.085 ms", target_ms=0.085, perf_best="torch.compile 0.189-0.227 ms", cupy_fuse_cannot=KEEPDIMS),
    Workload(
        name="adam", title="Adam step (lr 1e-3, b1 0.9, b2 0.999, eps 1e-8, t 10), 4 in, 3 out",
        build=build_adam, torch_fn=torch_adam, shape=(1 << 26,), dry_shape=(1 << 14,), make_inputs=adam_inputs,
        bytes_formula="4 x 4n read + 3 x 4n written", bytes_of=lambda s: 28 * _n(s),
        kind="pointwise", tolerances=((1e-4, 1e-6), (1e-4, 1e-7), (1e-4, 1e-9)), peers=COMMON_PEERS,
        target="<= 0.48 ms", target_ms=0.48, perf_best="torch.compile 0.497-0.532 ms"),
    Workload(
        name="trig_chain", title=f"{TRIG_CHAIN_OPS} ops of sin and cos in turn (first call: issue 34)",
        build=build_trig_chain, torch_fn=torch_trig_chain, shape=(1 << 26,), dry_shape=(1 << 12,),
        make_inputs=one_normal, bytes_formula="4n read + 4n written", bytes_of=lambda s: 8 * _n(s),
        kind="pointwise", tolerances=((1e-4, 1e-5),), peers=(NAIVE, TORCH_EAGER, TORCH_COMPILE, FUSEC_INLINE),
        target="within 5% of fusec outline=0", target_ms=None, perf_best="-", target_of_impl="fusec outline=0"),
    Workload(
        name="prologue_softmax", title=f"softmax over rows after {PROLOGUE_OPS} ops of *, + and tanh (issue 34)",
        build=build_prologue_softmax, torch_fn=torch_prologue_softmax, shape=(8192, 1024), dry_shape=(64, 1024),
        make_inputs=one_normal, bytes_formula="4RC read + 4RC written", bytes_of=lambda s: 8 * _n(s),
        kind="rows", tolerances=((1e-4, 1e-8),), peers=(NAIVE, TORCH_EAGER, TORCH_COMPILE),
        target="as fast as before the outlining (same kernel)", target_ms=None, perf_best="-",
        cupy_fuse_cannot=KEEPDIMS),
    Workload(
        name="sum_abs_small", title="sum(abs(x)), small input: time per call", build=build_sum_abs,
        torch_fn=torch_sum_abs, shape=(1024,), dry_shape=(1024,), make_inputs=one_normal,
        bytes_formula="4n read + 4 written", bytes_of=lambda s: 4 * _n(s) + 4,
        kind="reduce_all", tolerances=((1e-5, 1e-5),), peers=SUM_ABS_PEERS,
        target="<= 6 us", target_ms=0.006, perf_best="torch eager 17-26 us", dispatch=True),
    Workload(
        name="gelu_small", title="gelu, small input: time per call", build=build_gelu, torch_fn=torch_gelu,
        shape=(1024,), dry_shape=(1024,), make_inputs=one_normal,
        bytes_formula="4n read + 4n written", bytes_of=lambda s: 8 * _n(s),
        kind="pointwise", tolerances=((1e-4, 1e-5),), peers=COMMON_PEERS,
        target="<= 6 us", target_ms=0.006, perf_best="torch eager 7.4-11 us", dispatch=True),
)

BY_NAME = {w.name: w for w in WORKLOADS}
NAMES = tuple(BY_NAME)
