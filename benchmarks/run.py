"""Benchmark fusec against its peers on the workloads of shared/PERF.md, in one process and one run.

    PYTHONPATH=. python benchmarks/run.py [--quick] [--out DIR] [--only sum_abs,softmax] [--dry-run]

For each workload: fresh random normal float32 data; a float64 NumPy reference on the CPU; fusec's
result checked against it before anything is timed (a wrong result makes the row MISMATCH); then
fusec and every peer that runs here, timed with CUDA events after warm-up (median, min and max of
N runs), against the ceilings measured in the same run (a 1 GiB device-to-device copy and a plain
``cupy.sum`` of 1 GiB). The small-input rows are timed per call on the host over many calls.
Writes ``<date>-<gpu>.json`` and a bar chart into ``--out`` and prints a table last.

``--dry-run`` needs no GPU: it runs every workload on small NumPy inputs through fusec's NumPy
backend and the NumPy versions of the peers, checking every result, so the script's logic runs
anywhere. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import gc
import json
import math
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

try:
    from benchmarks import workloads as W
except ImportError:  # run as a script without PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import workloads as W

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results"
GIB = 1 << 30
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
SUITES = ("perf", "sweep", "idioms")
LAST_REPORT: dict | None = None  # the report of the last main() call, for tests and interactive use


def say(*parts: Any) -> None:
    print(*parts, flush=True)


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


class Timeout(BaseException):
    """Raised by the SIGALRM deadline; a BaseException so library code catching Exception lets it through."""


# --- the run's context ---------------------------------------------------------------------------
class Context:
    """What the workloads' peers need from the run: the namespace, optional libraries, conversions."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.dry = bool(args.dry_run)
        self.quick = bool(args.quick)
        self.start = time.perf_counter()
        self.seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
        if self.dry:
            self.reps = args.reps or 3
            self.warmup = 1
            self.dispatch_calls, self.dispatch_warmup = 10, 2
            self.budget_s = math.inf
        else:
            self.reps = args.reps or (5 if self.quick else 20)
            self.warmup = 2 if self.quick else 3
            self.dispatch_calls, self.dispatch_warmup = (200, 20) if self.quick else (1000, 50)
            self.budget_s = args.budget if args.budget is not None else (165.0 if self.quick else 420.0)
        self.compile_timeout_s = 60.0 if self.quick else 120.0
        self.threads = 2 if self.dry else max(1, min(16, os.cpu_count() or 1))
        self.cp: Any = None
        self.xp: Any = np
        self.ceilings: dict[str, Any] = {}
        self._torch: Any = None
        self._torch_error: str | None = None
        self._jax: Any = None
        self._jax_error: str | None = None
        self.rng_count = 0
        if not self.dry:
            import cupy

            self.cp = cupy
            self.xp = cupy

    # -- time
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def stamp(self) -> str:
        return f"[{self.elapsed():6.1f}s]"

    def over_budget(self, slow: bool) -> str | None:
        """Why to skip a peer now (None: run it). Slow set-ups stop at the budget, the rest at 1.25x."""
        limit = self.budget_s if slow else self.budget_s * 1.25
        if self.elapsed() > limit:
            return f"time budget of {self.budget_s:.0f} s spent (--budget)"
        return None

    # -- the device
    def sync(self) -> None:
        if self.cp is not None:
            self.cp.cuda.runtime.deviceSynchronize()

    def need_gpu(self) -> Any:
        if self.dry:
            raise W.Skip("needs a GPU (dry run)")
        return self.cp

    def normal(self, shape: tuple) -> Any:
        """Fresh standard normal float32 data of this shape (a new stream of the run's seed each call)."""
        self.rng_count += 1
        seq = np.random.SeedSequence([self.seed, self.rng_count])
        if self.dry:
            return np.random.default_rng(seq).standard_normal(shape, dtype=np.float32)
        cp = self.cp
        try:
            return cp.random.default_rng(seq).standard_normal(shape, dtype=cp.float32)
        except Exception:  # an older CuPy: the legacy generator
            rs = cp.random.RandomState(int(seq.generate_state(1)[0]))
            return rs.standard_normal(shape, dtype=cp.float32)

    def to_host(self, a: Any) -> np.ndarray:
        return np.asarray(a) if self.dry else self.cp.asnumpy(a)

    # -- optional libraries
    def import_torch(self) -> Any:
        if self._torch is None and self._torch_error is None:
            try:
                import torch

                if not self.dry and not torch.cuda.is_available():
                    raise RuntimeError("torch.cuda.is_available() is False (a CPU-only build?)")
                self._torch = torch
            except Exception as exc:
                self._torch_error = one_line(exc)
        if self._torch is None:
            raise W.Skip(f"torch unavailable ({self._torch_error})")
        return self._torch

    def import_jax(self) -> tuple[Any, Any]:
        if self._jax is None and self._jax_error is None:
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # else JAX takes 75% of the GPU
            try:
                import jax
                import jax.numpy as jnp

                backend = jax.default_backend()
                if not self.dry and backend != "gpu":
                    raise RuntimeError(f"JAX has no GPU backend here (default backend: {backend})")
                self._jax = (jax, jnp)
            except Exception as exc:
                self._jax_error = one_line(exc)
        if self._jax is None:
            raise W.Skip(f"jax unavailable ({self._jax_error})")
        return self._jax

    def to_torch(self, a: Any) -> Any:
        torch = self.import_torch()
        if np.dtype(a.dtype) == BFLOAT16:  # NumPy has no bfloat16 in DLPack or torch.from_numpy: its bits, no copy
            return self.to_torch(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a) if self.dry else torch.from_dlpack(a)

    def from_torch(self, t: Any) -> Any:
        if t.dtype == self.import_torch().bfloat16:
            return self.from_torch(t.view(self.import_torch().int16)).view(BFLOAT16)
        if self.dry:
            return t.detach().cpu().numpy()
        try:
            return self.cp.from_dlpack(t)
        except Exception:
            return self.cp.asarray(t.detach().cpu().numpy())

    def to_jax(self, a: Any) -> Any:
        jax, jnp = self.import_jax()
        if self.dry:
            return jnp.asarray(a)
        try:
            return jax.dlpack.from_dlpack(a)
        except Exception:
            return jax.device_put(self.cp.asnumpy(a))

    def from_jax(self, a: Any) -> Any:
        if self.dry:
            return np.asarray(a)
        try:
            return self.cp.from_dlpack(a)
        except Exception:
            return self.cp.asarray(np.asarray(a))

    def versions(self) -> dict[str, str]:
        out = {"python": platform.python_version(), "numpy": np.__version__}
        for name in ("cupy", "torch", "jax", "matplotlib", "fusec"):
            mod = sys.modules.get(name)
            if mod is not None:
                out[name] = str(getattr(mod, "__version__", "?"))
        for name in ("cuda.compute", "cuda.cccl"):
            mod = sys.modules.get(name)
            if mod is not None:
                out[name] = str(getattr(mod, "__version__", "imported"))
        try:
            from importlib.metadata import version

            out.setdefault("cuda-cccl", version("cuda-cccl"))
        except Exception:
            pass
        return out


@contextlib.contextmanager
def deadline(seconds: float | None, what: str) -> Iterator[None]:
    """Raise :class:`Timeout` in the main thread after ``seconds`` (POSIX only; no-op elsewhere)."""
    usable = seconds and hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Timeout(f"{what} took over {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --- reference and checks --------------------------------------------------------------------------
def reference(w: W.Workload, host_inputs: tuple, threads: int) -> tuple[np.ndarray, ...]:
    """``w.build(numpy)`` on float64 copies of the (float) inputs, in chunks of rows on a thread pool."""
    fn = w.build(np)

    def f64(a: np.ndarray) -> np.ndarray:  # float inputs in float64; integer ones (indices) as they are
        return a.astype(np.float64) if a.dtype.kind == "f" or a.dtype == BFLOAT16 else a

    if w.kind == "whole":
        return tuple(np.asarray(o) for o in W.as_tuple(fn(*(f64(a) for a in host_inputs))))
    first = host_inputs[0]
    rows = first.shape[0] if first.ndim else 1
    per_row = max(1, first.size // max(rows, 1))
    step = max(1, (1 << 21) // per_row)
    slices = [slice(i, min(i + step, rows)) for i in range(0, rows, step)]

    def part(sl: slice) -> tuple:
        return tuple(np.asarray(o) for o in W.as_tuple(fn(*(f64(a[sl]) for a in host_inputs))))

    with ThreadPoolExecutor(max(1, threads)) as pool:
        parts = list(pool.map(part, slices))
    n_out = len(parts[0])
    if w.kind == "reduce_all":  # the reduce-all workloads are sums: add the partial sums
        return tuple(np.asarray(np.sum([p[i] for p in parts], dtype=np.float64)) for i in range(n_out))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(n_out))


def expected_dtypes(w: W.Workload) -> tuple[np.dtype, ...]:
    """What NumPy returns for float32 inputs (fusec must return the same dtypes)."""
    rng = np.random.default_rng(0)
    tiny = w.make_inputs(lambda s: rng.standard_normal(s, dtype=np.float32), tuple(min(d, 8) for d in w.shape))
    return tuple(np.asarray(o).dtype for o in W.as_tuple(w.build(np)(*tiny)))


def check_outputs(w: W.Workload, got: Any, ref: tuple, inputs: tuple, xp: Any,
                  dtypes: tuple | None = None) -> dict[str, Any]:
    """Compare outputs with the float64 reference, elementwise: |got - ref| <= atol + rtol |ref|, no
    NaN or inf, same shapes (and dtypes when given). Reports max abs error, max relative error
    (|err| / (|ref| + atol)) and ||err|| / ||ref||."""
    got = W.as_tuple(got)
    res: dict[str, Any] = {"ok": True, "max_abs": 0.0, "max_rel": 0.0, "rel_norm": 0.0, "bad": 0, "problems": []}

    def problem(text: str) -> None:
        res["ok"] = False
        res["problems"].append(text)

    if len(got) != len(ref):
        problem(f"{len(got)} outputs, the reference has {len(ref)}")
        return res
    for i, (g, r) in enumerate(zip(got, ref)):
        g = xp.asarray(g)
        if tuple(g.shape) != tuple(r.shape):
            problem(f"output {i} has shape {tuple(g.shape)}, the reference {tuple(r.shape)}")
            continue
        if dtypes is not None and np.dtype(g.dtype) != dtypes[i]:
            problem(f"output {i} has dtype {g.dtype}, NumPy gives {dtypes[i]}")
        tol = w.tolerances[i]
        if tol == "argmax":
            bad, differ = _check_argmax(g, r, inputs[0], xp)
            res["bad"] += bad
            res[f"index_differs_{i}"] = differ
            if bad:
                problem(f"output {i}: {bad} indices are not an argmax of the logits")
            continue
        rtol, atol = tol
        gd, rd = g.astype(xp.float64), xp.asarray(r).astype(xp.float64)
        nonfinite = int(xp.count_nonzero(~xp.isfinite(gd)))
        err = xp.abs(gd - rd)
        bad = int(xp.count_nonzero(~(err <= atol + rtol * xp.abs(rd))))  # NaN counts as bad
        res["bad"] += bad
        if nonfinite:
            res["max_abs"] = res["max_rel"] = res["rel_norm"] = math.inf
            problem(f"output {i}: {nonfinite} NaN/inf values")
            continue
        if err.size:
            res["max_abs"] = max(res["max_abs"], float(xp.max(err)))
            res["max_rel"] = max(res["max_rel"], float(xp.max(err / (xp.abs(rd) + atol))))
            ref_norm = float(xp.sqrt(xp.sum(rd * rd)))
            res["rel_norm"] = max(res["rel_norm"], float(xp.sqrt(xp.sum(err * err))) / max(ref_norm, 1e-300))
        if bad:
            problem(f"output {i}: {bad} of {err.size} elements off by more than rtol={rtol:g}, atol={atol:g}")
    return res


def _check_argmax(g: Any, r: Any, logits: Any, xp: Any) -> tuple[int, int]:
    """(indices that are not an argmax, indices that differ from the reference but tie on the logits)."""
    gi, ri = g.astype(xp.int64), xp.asarray(r).astype(xp.int64)
    experts = logits.shape[-1]
    in_range = (gi >= 0) & (gi < experts)
    picked = xp.take_along_axis(logits, xp.clip(gi, 0, experts - 1)[..., None], axis=-1)[..., 0].astype(xp.float64)
    best = xp.take_along_axis(logits, ri[..., None], axis=-1)[..., 0].astype(xp.float64)
    tie = picked >= best - (1e-6 + 1e-6 * xp.abs(best))
    ok = in_range & ((gi == ri) | tie)
    return int(xp.count_nonzero(~ok)), int(xp.count_nonzero(ok & (gi != ri)))


def describe_check(c: dict) -> str:
    text = f"max abs {c['max_abs']:.3g}, max rel {c['max_rel']:.3g}, ||err||/||ref|| {c['rel_norm']:.3g}"
    ties = sum(v for k, v in c.items() if k.startswith("index_differs_"))
    if ties:
        text += f", {ties} argmax ties resolved differently"
    if not c["ok"]:
        text += "; " + "; ".join(c["problems"])
    return text


def poisoned(xp: Any, ref: tuple, dtypes: tuple) -> tuple:
    """Output buffers filled with NaN (floats) or -1 (integers), to catch elements never written."""
    return tuple(xp.full(r.shape, np.nan if np.dtype(d).kind == "f" or d == BFLOAT16 else -1, dtype=d)
                 for r, d in zip(ref, dtypes))


# --- timing ----------------------------------------------------------------------------------------
def finish(ctx: Context, prep: W.Prepared, out: Any) -> None:
    if prep.block is not None:
        prep.block(out)
    ctx.sync()


def time_calls(ctx: Context, prep: W.Prepared, reps: int, warmup: int) -> tuple[list[float], str]:
    """Milliseconds per call, ``reps`` of them after ``warmup`` calls, and how they were measured."""
    out = None
    for _ in range(warmup):
        out = prep.call()
    finish(ctx, prep, out)
    if ctx.dry or prep.clock == "host":
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            out = prep.call()
            finish(ctx, prep, out)
            times.append((time.perf_counter() - t0) * 1e3)
        return times, "host clock per call, synchronized after each"
    if prep.clock == "torch":
        torch = ctx.import_torch()
        make: Callable[[], Any] = lambda: torch.cuda.Event(enable_timing=True)
        elapsed: Callable[[Any, Any], float] = lambda s, e: s.elapsed_time(e)
    else:
        make = ctx.cp.cuda.Event
        elapsed = ctx.cp.cuda.get_elapsed_time
    pairs = [(make(), make()) for _ in range(reps)]
    for start, end in pairs:  # back to back; one synchronization at the end
        start.record()
        out = prep.call()
        end.record()
    pairs[-1][1].synchronize()
    ctx.sync()
    del out
    return [float(elapsed(s, e)) for s, e in pairs], f"CUDA events ({prep.clock} stream) around each call"


def time_dispatch(ctx: Context, prep: W.Prepared, reps: int) -> tuple[list[float], str]:
    """Milliseconds per call for small inputs: ``calls`` back-to-back calls, synchronized at the end."""
    calls = ctx.dispatch_calls
    out = None
    for _ in range(ctx.dispatch_warmup):
        out = prep.call()
    finish(ctx, prep, out)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = prep.call()
        finish(ctx, prep, out)
        times.append((time.perf_counter() - t0) * 1e3 / calls)
    return times, f"host clock over {calls} calls, synchronized at the end"


def stats(times: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "runs": times}


# --- one implementation ----------------------------------------------------------------------------
def measure(ctx: Context, w: W.Workload, prep: W.Prepared) -> dict[str, Any]:
    if w.dispatch:
        times, how = time_dispatch(ctx, prep, ctx.reps)
    else:
        times, how = time_calls(ctx, prep, ctx.reps, ctx.warmup)
    return {"ms": stats(times), "timing": how}


def run_fusec(ctx: Context, w: W.Workload, inputs: tuple, ref: tuple, dtypes: tuple,
              fresh: Callable[[], tuple] | None = None) -> dict[str, Any]:
    """``fresh()`` gives another copy of the inputs for the out= check (a ``mutates`` workload's call changes them)."""
    impl: dict[str, Any] = {"name": "fusec", "status": "failed"}
    try:
        import fusec

        fused = fusec.fuse(w.build(ctx.xp))
        try:
            plan = fused.plan(*inputs)
            impl["kernels"] = len(plan.kernels)
            impl["kernels_unfused"] = getattr(plan, "kernel_count_unfused", None)
            impl["plan_bytes"] = getattr(plan, "bytes_moved", None)
        except Exception as exc:
            impl["kernels"] = None
            impl["plan_error"] = one_line(exc)
            say(f"  fusec: plan() failed: {one_line(exc)}")
        t0 = time.perf_counter()
        with deadline(None if ctx.dry else 5 * ctx.compile_timeout_s, "fusec's first call"):
            out = fused(*inputs)
            ctx.sync()
        impl["first_call_s"] = time.perf_counter() - t0
        check = check_outputs(w, out, ref, inputs, ctx.xp, dtypes)
        impl["check"] = check
        del out
        if not check["ok"]:
            impl["status"] = "mismatch"
            impl["reason"] = describe_check(check)
            say(f"  fusec: MISMATCH against the NumPy reference: {describe_check(check)}")
            return impl
        # again into poisoned out= buffers: every element must be written
        try:
            outs = poisoned(ctx.xp, ref, dtypes)
            fused(*(fresh() if fresh else inputs), out=outs if len(outs) > 1 else outs[0])
            ctx.sync()
            check_out = check_outputs(w, outs, ref, inputs, ctx.xp, dtypes)
            impl["out_check"] = "ok" if check_out["ok"] else describe_check(check_out)
            del outs
            if not check_out["ok"]:
                impl["status"] = "mismatch"
                impl["reason"] = "out= into NaN-poisoned buffers: " + describe_check(check_out)
                say(f"  fusec: MISMATCH with out= (poisoned buffers): {describe_check(check_out)}")
                return impl
        except Exception as exc:
            impl["out_check"] = f"not run: {one_line(exc)}"
        kernels = impl.get("kernels")
        say(f"  fusec: {kernels if kernels is not None else '?'} kernel(s) planned "
            f"(unfused: {impl.get('kernels_unfused', '?')}), first call {impl['first_call_s']:.3f} s, "
            f"check OK ({describe_check(check)}), out= check: {impl['out_check']}")
        impl.update(measure(ctx, w, W.Prepared(lambda: fused(*inputs))))
        impl["status"] = "ok"
        say(f"  fusec: {fmt_stats(impl['ms'], w.dispatch)}")
    except (Exception, Timeout) as exc:
        impl["status"] = "failed"
        impl["reason"] = one_line(exc)
        say(f"  fusec: FAILED: {one_line(exc)}")
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
    return impl


def run_peer(ctx: Context, w: W.Workload, peer: W.Peer, inputs: tuple, ref: tuple) -> dict[str, Any]:
    impl: dict[str, Any] = {"name": peer.name, "status": "failed"}
    why_not = ctx.over_budget(peer.slow)
    if why_not:
        impl.update(status="skipped", reason=why_not)
        say(f"  {peer.name}: skipped: {why_not}")
        return impl
    try:
        t0 = time.perf_counter()
        with deadline(None if ctx.dry or not peer.slow else ctx.compile_timeout_s, f"{peer.name} set-up"):
            prep = peer.setup(ctx, w, inputs)
            out = prep.call()
            finish(ctx, prep, out)
        impl["first_call_s"] = time.perf_counter() - t0
        if prep.note:
            impl["note"] = prep.note
        got = prep.outputs(out) if prep.outputs is not None else W.as_tuple(out)
        check = check_outputs(w, got, ref, inputs, ctx.xp)
        impl["check"] = check
        del out, got
        if not check["ok"]:
            impl.update(status="mismatch", reason=describe_check(check))
            say(f"  {peer.name}: MISMATCH: {describe_check(check)}")
            return impl
        impl.update(measure(ctx, w, prep))
        impl["status"] = "ok"
        note = f" ({prep.note})" if prep.note else ""
        say(f"  {peer.name}: {fmt_stats(impl['ms'], w.dispatch)}{note}")
    except W.Skip as exc:
        impl.update(status="skipped", reason=str(exc))
        say(f"  {peer.name}: skipped: {exc}")
    except W.Cannot as exc:
        impl.update(status="cannot", reason=str(exc))
        say(f"  {peer.name}: cannot: {exc}")
    except (Exception, Timeout) as exc:
        impl.update(status="failed", reason=one_line(exc))
        say(f"  {peer.name}: failed: {one_line(exc)}")
    return impl


# --- one workload ----------------------------------------------------------------------------------
def run_workload(ctx: Context, w: W.Workload, peers: tuple[W.Peer, ...]) -> dict[str, Any]:
    shape = w.dry_shape if ctx.dry else w.shape
    rec: dict[str, Any] = {
        "name": w.name, "title": w.title, "dispatch": w.dispatch, "shape": list(shape),
        "bytes": w.bytes_of(shape), "bytes_formula": w.bytes_formula, "target": w.target,
        "target_ms": w.target_ms, "target_ratio": w.target_ratio, "target_pct_copy": w.target_pct_copy,
        "target_kernels": w.target_kernels, "mutates": w.mutates, "perf_best_peer": w.perf_best, "impls": [],
        "target_of_impl": w.target_of_impl,
    }
    say(f"{ctx.stamp()} {w.name}: {w.title}; shape {list(shape)}, {rec['bytes'] / 1e9:.3f} GB "
        f"({w.bytes_formula})")
    inputs: tuple = ()
    ref: tuple = ()
    try:
        inputs = w.make_inputs(ctx.normal, shape)
        for a in inputs:
            if not float(ctx.xp.max(ctx.xp.abs(a))) > 0:
                raise RuntimeError("the random inputs are all zero")
        t0 = time.perf_counter()
        ref_host = reference(w, tuple(ctx.to_host(a) for a in inputs), ctx.threads)
        ref = tuple(ctx.xp.asarray(r) for r in ref_host)
        del ref_host
        rec["reference_s"] = time.perf_counter() - t0
        dtypes = expected_dtypes(w)
        say(f"  reference: float64 NumPy on the CPU in {rec['reference_s']:.2f} s")
        # an in-place workload changes its arguments: each implementation (and fusec's out= check) gets a copy
        fresh = (lambda src=inputs: tuple(a.copy() for a in src)) if w.mutates else None
        rec["impls"].append(run_fusec(ctx, w, fresh() if fresh else inputs, ref, dtypes, fresh))
        for peer in w.peers:
            if peer in peers:
                rec["impls"].append(run_peer(ctx, w, peer, fresh() if fresh else inputs, ref))
    except (Exception, Timeout) as exc:
        rec["error"] = one_line(exc)
        say(f"  {w.name}: FAILED before timing: {one_line(exc)}")
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
    finally:
        del inputs, ref
        release_memory(ctx)
    summarize(rec, ctx.ceilings)
    return rec


def release_memory(ctx: Context) -> None:
    gc.collect()
    if ctx.cp is not None:
        with contextlib.suppress(Exception):
            ctx.sync()
            ctx.cp.get_default_memory_pool().free_all_blocks()
            ctx.cp.get_default_pinned_memory_pool().free_all_blocks()
    if ctx._torch is not None and not ctx.dry:
        with contextlib.suppress(Exception):
            ctx._torch.cuda.empty_cache()


def summarize(rec: dict[str, Any], ceilings: dict[str, Any]) -> None:
    """Add GB/s, % of the copy ceiling, and the speedup of fusec over the best peer."""
    copy_gbps = (ceilings.get("copy") or {}).get("gbps")
    sum_gbps = (ceilings.get("sum") or {}).get("gbps")
    for impl in rec["impls"]:
        ms = (impl.get("ms") or {}).get("median")
        if ms and not rec["dispatch"]:
            impl["gbps"] = rec["bytes"] / (ms * 1e-3) / 1e9
            impl["pct_copy"] = 100.0 * impl["gbps"] / copy_gbps if copy_gbps else None
            impl["pct_sum"] = 100.0 * impl["gbps"] / sum_gbps if sum_gbps else None
    fusec = next((i for i in rec["impls"] if i["name"] == "fusec"), None)
    timed = [i for i in rec["impls"] if i["name"] != "fusec" and i["status"] == "ok"]
    best = min(timed, key=lambda i: i["ms"]["median"], default=None)
    rec["fusec_status"] = fusec["status"] if fusec else "missing"
    rec["fusec_kernels"] = fusec.get("kernels") if fusec else None
    rec["best_peer"] = best["name"] if best else None
    rec["best_peer_ms"] = best["ms"]["median"] if best else None
    rec["speedup"] = None
    if best and fusec and fusec["status"] == "ok":
        rec["speedup"] = best["ms"]["median"] / fusec["ms"]["median"]
    rec["target_met"] = target_met(rec)


def target_met(rec: dict[str, Any]) -> bool | None:
    """Whether fusec met the workload's target: a time, or a speed ratio to the fastest peer (None: not
    known, as when fusec or every peer failed)."""
    fusec = next((i for i in rec["impls"] if i["name"] == "fusec"), None)
    if not fusec or fusec["status"] != "ok":
        return False if fusec else None
    if rec.get("target_ratio"):
        return None if rec.get("speedup") is None else rec["speedup"] >= rec["target_ratio"]
    if rec.get("target_pct_copy"):
        pct, kernels = fusec.get("pct_copy"), fusec.get("kernels")
        if pct is None or kernels is None:
            return None
        return pct >= rec["target_pct_copy"] and kernels <= (rec.get("target_kernels") or kernels)
    if rec.get("target_of_impl"):  # within 5% of another implementation's time (fusec with another schedule)
        other = next((i for i in rec["impls"] if i["name"] == rec["target_of_impl"] and i["status"] == "ok"), None)
        return None if other is None else fusec["ms"]["median"] <= 1.05 * other["ms"]["median"]
    if rec.get("target_ms") is None:
        return None
    return fusec["ms"]["median"] <= rec["target_ms"]


# --- ceilings --------------------------------------------------------------------------------------
def measure_ceilings(ctx: Context) -> dict[str, Any]:
    cp = ctx.cp
    n = GIB // 4
    src = ctx.normal((n,))
    dst = cp.empty_like(src)
    out: dict[str, Any] = {}
    rt = cp.cuda.runtime

    def memcpy() -> None:
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice,
                       cp.cuda.get_current_stream().ptr)

    cases = (("copy", "cudaMemcpyAsync device to device, 1 GiB (bytes read + written)", memcpy, 2 * GIB),
             ("copy_kernel", "cupy.copyto elementwise kernel, 1 GiB (bytes read + written)",
              lambda: cp.copyto(dst, src), 2 * GIB),
             ("sum", "cupy.sum of 1 GiB float32 (bytes read)", lambda: cp.sum(src), GIB))
    for key, what, fn, nbytes in cases:
        try:
            times, how = time_calls(ctx, W.Prepared(fn), max(ctx.reps, 10), ctx.warmup)
            st = stats(times)
            out[key] = {"what": what, "bytes": nbytes, "ms": st, "gbps": nbytes / (st["median"] * 1e-3) / 1e9,
                        "timing": how}
            say(f"  ceiling {key}: {out[key]['gbps']:.0f} GB/s ({what}; median {st['median']:.3f} ms)")
        except Exception as exc:
            out[key] = {"what": what, "error": one_line(exc)}
            say(f"  ceiling {key}: failed: {one_line(exc)}")
    return out


def gpu_info(ctx: Context) -> dict[str, Any]:
    if ctx.dry:
        return {"name": "dry run (NumPy, no GPU)", "slug": "dry-run"}
    cp = ctx.cp
    rt = cp.cuda.runtime
    props = rt.getDeviceProperties(0)
    name = props.get("name", b"?")
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    info: dict[str, Any] = {
        "name": name, "slug": slugify(name), "compute_capability": f"{props.get('major')}.{props.get('minor')}",
        "sm_count": props.get("multiProcessorCount"), "memory_bytes": props.get("totalGlobalMem"),
        "l2_bytes": props.get("l2CacheSize"), "device_count": rt.getDeviceCount(),
    }
    for key, fn in (("driver_cuda_version", rt.driverGetVersion), ("runtime_version", rt.runtimeGetVersion)):
        try:
            v = int(fn())
            info[key] = f"{v // 1000}.{(v % 1000) // 10}"
        except Exception as exc:
            info[key] = one_line(exc)
    with contextlib.suppress(Exception):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem,power.limit",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        if smi.returncode == 0:
            info["nvidia_smi"] = smi.stdout.strip().splitlines()[0]  # clocks read at idle, before the run
            info["driver_version"] = info["nvidia_smi"].split(",")[0].strip()
    return info


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def git_commit() -> str | None:
    """The checkout's commit (``+dirty`` with changes), or ``$FUSEC_GIT_COMMIT`` where the tree is a copy
    whose git metadata may be stale (the device machine's): pass ``FUSEC_GIT_COMMIT=$(git rev-parse
    --short HEAD)`` from the checkout that made the copy."""
    given = os.environ.get("FUSEC_GIT_COMMIT")
    if given:
        return given
    with contextlib.suppress(Exception):
        res = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        if res.returncode == 0:
            dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                                   timeout=10)
            return res.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    return None


# --- output ----------------------------------------------------------------------------------------
def fmt_ms(ms: float | None, dispatch: bool) -> str:
    if ms is None:
        return "-"
    if dispatch:
        return f"{ms * 1e3:.1f} us"
    return f"{ms:.4f} ms" if ms < 0.1 else f"{ms:.3f} ms"  # three significant digits at least (0.0902 ms)


def fmt_stats(st: dict, dispatch: bool) -> str:
    return (f"median {fmt_ms(st['median'], dispatch)} (min {fmt_ms(st['min'], dispatch)}, "
            f"max {fmt_ms(st['max'], dispatch)}, {len(st['runs'])} runs)")


def _status_cell(impl: dict) -> str:
    status = impl["status"]
    if status == "ok":
        return ""
    if status == "mismatch":
        return "MISMATCH"
    reason = impl.get("reason", "").split(" (first error:")[0]
    text = f"{status}: {reason}" if reason else status
    return text if len(text) <= 60 else text[:57] + "..."


def table_rows(report: dict) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """The per-implementation table and the per-workload summary, as header + rows of cells."""
    head = ["workload", "impl", "median", "min", "max", "GB/s", "% copy", "kernels", "fusec speedup", "note"]
    rows = []
    for rec in report["workloads"]:
        fusec = next((i for i in rec["impls"] if i["name"] == "fusec"), None)
        fusec_ms = (fusec.get("ms") or {}).get("median") if fusec and fusec["status"] == "ok" else None
        for impl in rec["impls"]:
            st = impl.get("ms") or {}
            d = rec["dispatch"]
            if impl["name"] == "fusec":
                speed = f"x{rec['speedup']:.2f}" if rec.get("speedup") else "-"
                kern = "-" if impl.get("kernels") is None else str(impl["kernels"])
            else:
                speed = f"x{st['median'] / fusec_ms:.2f}" if st.get("median") and fusec_ms else "-"
                kern = ""
            if impl["status"] == "skipped":
                continue  # listed once, below the tables
            rows.append([
                rec["name"] if not any(r[0] == rec["name"] for r in rows) else "", impl["name"],
                fmt_ms(st.get("median"), d), fmt_ms(st.get("min"), d),
                fmt_ms(st.get("max"), d), f"{impl['gbps']:.0f}" if impl.get("gbps") else "-",
                f"{impl['pct_copy']:.1f}" if impl.get("pct_copy") else "-", kern, speed,
                _status_cell(impl) or impl.get("note", ""),
            ])
        if not rec["impls"] and rec.get("error"):
            rows.append([rec["name"], "-", "-", "-", "-", "-", "-", "-", "-", f"failed: {rec['error']}"[:60]])
    shead = ["workload", "bytes", "fusec", "GB/s", "% copy", "kernels", "best peer", "peer time", "speedup",
             "target"]
    srows = []
    for rec in report["workloads"]:
        fusec = next((i for i in rec["impls"] if i["name"] == "fusec"), {"status": "missing"})
        d = rec["dispatch"]
        if fusec["status"] == "ok":
            ftime = fmt_ms(fusec["ms"]["median"], d)
            met = {True: "met", False: "missed", None: "unknown"}[target_met(rec)]
            if report.get("mode") == "dry-run":
                met = "(dry run)"
        else:
            ftime, met = ("MISMATCH" if fusec["status"] == "mismatch" else fusec["status"].upper()), "-"
        srows.append([
            rec["name"], "-" if d else f"{rec['bytes'] / 1e9:.2f} GB", ftime,
            f"{fusec['gbps']:.0f}" if fusec.get("gbps") else "-",
            f"{fusec['pct_copy']:.1f}" if fusec.get("pct_copy") else "-",
            "-" if fusec.get("kernels") is None else str(fusec["kernels"]),
            rec.get("best_peer") or "-", fmt_ms(rec.get("best_peer_ms"), d),
            f"x{rec['speedup']:.2f}" if rec.get("speedup") else "-", f"{rec['target']} {met}",
        ])
    return head, rows, shead, srows


def ratio_summary(report: dict, bandwidth_bytes: int = 256 << 20, bandwidth_pct: float = 80.0) -> list[str]:
    """For a suite with speed-ratio targets (the sweep): the geometric mean of fusec's speed ratio to the
    fastest peer, how many cases reach their ratio, and which bandwidth-bound cases of at least
    ``bandwidth_bytes`` stay under ``bandwidth_pct`` of the copy ceiling."""
    recs = [r for r in report["workloads"] if r.get("target_ratio")]
    if not recs:
        return []
    ratios = [r["speedup"] for r in recs if r.get("speedup")]
    met = [r["name"] for r in recs if target_met(r)]
    missed = [f"{r['name']} (x{r['speedup']:.2f})" if r.get("speedup") else f"{r['name']} (no ratio)"
              for r in recs if not target_met(r)]
    out = []
    if ratios:
        geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        out.append(f"geometric mean of fusec's speed ratio to the fastest peer over {len(ratios)} cases: "
                   f"x{geomean:.2f}")
    out.append(f"{len(met)} of {len(recs)} cases at >= x{recs[0]['target_ratio']} of the fastest peer"
               + (f"; below: {', '.join(missed)}" if missed else ""))
    slow = []
    for r in recs:
        fusec = next((i for i in r["impls"] if i["name"] == "fusec"), {})
        if not r["dispatch"] and r["bytes"] >= bandwidth_bytes and (fusec.get("pct_copy") or 0) < bandwidth_pct:
            slow.append(f"{r['name']} ({fusec.get('pct_copy') or 0:.0f}%)")
    if slow:
        out.append(f"bandwidth-bound cases of >= {bandwidth_bytes >> 20} MiB under {bandwidth_pct:.0f}% of the copy "
                   f"ceiling: {', '.join(slow)}")
    return out


def copy_target_summary(report: dict) -> list[str]:
    """For a suite with copy-ceiling targets (the idioms): how many cases are one kernel at their share of the
    copy ceiling, and for each miss its kernels and share."""
    recs = [r for r in report["workloads"] if r.get("target_pct_copy")]
    if not recs:
        return []
    if all(target_met(r) is None for r in recs):
        return [f"copy-ceiling targets of {len(recs)} cases not judged: no copy ceiling or no fusec time in this run"]
    missed = []
    for r in recs:
        if not target_met(r):
            fusec = next((i for i in r["impls"] if i["name"] == "fusec"), {})
            pct = fusec.get("pct_copy")
            missed.append(f"{r['name']} ({fusec.get('kernels', '?')} kernel(s), "
                          f"{'-' if pct is None else f'{pct:.0f}%'} of copy)")
    below = f"; below: {', '.join(missed)}" if missed else ""
    return [f"{len(recs) - len(missed)} of {len(recs)} cases in at most {recs[0]['target_kernels']} kernel at >= "
            f"{recs[0]['target_pct_copy']:.1f}% of the copy ceiling{below}"]


def skipped_lines(report: dict) -> list[str]:
    """One line per peer and reason: which workloads skipped it."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rec in report["workloads"]:
        for impl in rec["impls"]:
            if impl["status"] == "skipped":
                groups.setdefault((impl["name"], impl.get("reason", "")), []).append(rec["name"])
    every = len(report["workloads"])
    return [f"skipped {name} ({'all workloads' if len(names) == every and every > 1 else ', '.join(names)}): {why}"
            for (name, why), names in groups.items()]


def render_text(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render_markdown(head: list[str], rows: list[list[str]]) -> str:
    esc = lambda c: c.replace("|", "\\|")
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def header_line(report: dict) -> str:
    ceil = report.get("ceilings") or {}
    parts = [f"{report['gpu']['name']}, {report['date']}, {report['settings']['reps']} runs per median"]
    for key in ("copy", "sum"):
        if ceil.get(key, {}).get("gbps"):
            parts.append(f"{key} ceiling {ceil[key]['gbps']:.0f} GB/s")
    return "; ".join(parts)


def print_tables(report: dict, markdown: bool) -> None:
    head, rows, shead, srows = table_rows(report)
    say("")
    if markdown:
        say(f"Measured: {header_line(report)}. Command: `{report['command']}`.")
        say("")
        say(render_markdown(head, rows))
        say("")
        say(render_markdown(shead, srows))
        for line in skipped_lines(report) + ratio_summary(report) + copy_target_summary(report):
            say(f"- {line}")
        return
    say(header_line(report))
    say(render_text(head, rows))
    for line in skipped_lines(report):
        say(line)
    say("")
    say(render_text(shead, srows))
    for line in ratio_summary(report) + copy_target_summary(report):
        say(line)


CHART_COLORS = {"fusec": "#d62728", "cupy naive": "#9ecae1", "cupy.fuse": "#3182bd", "cupy ReductionKernel": "#c6dbef",
                "torch eager": "#bcbddc", "torch.compile": "#756bb1", "jax.jit": "#74c476", "cuda.compute": "#fdae6b"}


def draw_chart(report: dict, path: Path) -> str | None:
    """A grouped bar chart of the median time per workload and implementation (log scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        return f"matplotlib is missing ({one_line(exc)}): no chart"
    recs = [r for r in report["workloads"] if any(i.get("ms") for i in r["impls"])]
    if not recs:
        return "nothing was timed: no chart"
    names: list[str] = []
    for rec in recs:
        for impl in rec["impls"]:
            if impl.get("ms") and impl["name"] not in names:
                names.append(impl["name"])
    order = ["fusec"] + [p.name for p in W.ALL_PEERS]
    names.sort(key=lambda n: order.index(n) if n in order else len(order))
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(recs)), 5))
    for j, name in enumerate(names):
        xs, ys = [], []
        for i, rec in enumerate(recs):
            impl = next((m for m in rec["impls"] if m["name"] == name and m.get("ms")), None)
            if impl:
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(impl["ms"]["median"])
        is_fusec = name == "fusec"
        ax.bar(xs, ys, width, label=name, color=CHART_COLORS.get(name, "#bdbdbd"),
               edgecolor="black", linewidth=1.5 if is_fusec else 0.4, zorder=3 if is_fusec else 2)
    ax.set_yscale("log")
    ax.set_xticks(range(len(recs)))
    ax.set_xticklabels([r["name"] + ("\n(per call)" if r["dispatch"] else "") for r in recs])
    ax.set_ylabel("median time (ms, log scale; lower is better)")
    ax.set_title(f"fusec vs peers: {report['gpu']['name']}, {report['date']}")
    ax.grid(axis="y", which="both", alpha=0.3, zorder=0)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def result_path(out_dir: Path, date: str, slug: str) -> Path:
    path = out_dir / f"{date}-{slug}.json"
    k = 2
    while path.exists():
        path = out_dir / f"{date}-{slug}-{k}.json"
        k += 1
    return path


# --- main ------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="benchmarks/run.py",
        description="Benchmark fusec against its peers on the workloads of shared/PERF.md.")
    p.add_argument("--quick", action="store_true", help="5 timed runs instead of 20, fewer warm-ups and "
                   "small-input calls (under 3 minutes on an H200)")
    p.add_argument("--out", metavar="DIR", help="folder for the JSON and the chart (default benchmarks/results; "
                   "a new temporary folder with --dry-run)")
    p.add_argument("--suite", choices=SUITES, default="perf",
                   help="perf: the workloads of shared/PERF.md (default); sweep: the layout sweep of "
                        "benchmarks/sweep.py (axes, transposes, row lengths, dtypes, views); idioms: NumPy as "
                        "people write it, one kernel each (benchmarks/idioms.py)")
    p.add_argument("--only", metavar="NAMES", help=f"comma-separated workloads: {','.join(W.NAMES)} (perf), or "
                   "the sweep's (benchmarks/sweep.py)")
    p.add_argument("--peers", metavar="KEYS", help="comma-separated peers to run (default all; 'none' for fusec "
                   f"alone): {','.join(peer.key for peer in W.ALL_PEERS)}")
    p.add_argument("--dry-run", action="store_true", help="no GPU: small NumPy inputs through fusec's NumPy "
                   "backend and the NumPy/CPU versions of the peers, every result checked")
    p.add_argument("--markdown", action="store_true", help="print the final tables as Markdown (for BENCHMARKS.md)")
    p.add_argument("--reps", type=int, help="timed runs per median (default 20, 5 with --quick, 3 with --dry-run)")
    p.add_argument("--seed", type=int, help="seed of the random inputs (default: a fresh one, recorded)")
    p.add_argument("--budget", type=float, metavar="S", help="seconds after which slow peer set-ups "
                   "(torch.compile, jax.jit) are skipped, and all peers at 1.25x (default 420, 165 with --quick)")
    p.add_argument("--no-chart", action="store_true", help="do not draw the PNG chart")
    p.add_argument("--from-json", metavar="FILE", help="print the tables of a saved run (with --markdown: as "
                   "Markdown) and exit; measures nothing")
    args = p.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        p.error("--reps must be at least 1")
    return args


def suite_workloads(suite: str) -> dict[str, W.Workload]:
    """The workloads of a suite by name: PERF.md's, the layout sweep's or the idioms'."""
    if suite == "sweep":
        from benchmarks.sweep import BY_NAME

        return BY_NAME
    if suite == "idioms":
        from benchmarks.idioms import BY_NAME as IDIOMS

        return IDIOMS
    return W.BY_NAME


def select(args: argparse.Namespace) -> tuple[list[W.Workload], tuple[W.Peer, ...]]:
    by_name = suite_workloads(getattr(args, "suite", "perf"))
    names = [n.strip() for n in (args.only or "").split(",") if n.strip()] or list(by_name)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    norm = lambda s: re.sub(r"[\s_-]+", "", s.lower())
    peers = W.ALL_PEERS
    if args.peers is not None:
        keys = [norm(k) for k in args.peers.split(",") if k.strip()]
        if keys == ["none"]:
            peers = ()
        else:
            by_key = {norm(p.key): p for p in W.ALL_PEERS} | {norm(p.name): p for p in W.ALL_PEERS}
            bad = [k for k in keys if k not in by_key]
            if bad:
                raise ValueError(f"unknown peer(s) {', '.join(bad)}; known: {', '.join(p.key for p in W.ALL_PEERS)}")
            peers = tuple(p for p in W.ALL_PEERS if p in {by_key[k] for k in keys})
    return [by_name[n] for n in names], peers


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; 0 when every selected fusec row was checked and timed, 1 when one failed or
    mismatched, 2 on a usage error or when no GPU is found without --dry-run."""
    global LAST_REPORT
    args = parse_args(argv)
    if args.from_json:
        try:
            report = json.loads(Path(args.from_json).read_text())
        except (OSError, ValueError) as exc:
            say(f"run.py: error: cannot read {args.from_json}: {one_line(exc)}")
            return 2
        LAST_REPORT = report
        print_tables(report, args.markdown)
        return 0
    try:
        selected, peers = select(args)
    except ValueError as exc:
        say(f"run.py: error: {exc}")
        return 2
    if not args.dry_run:
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError("no CUDA device")
        except Exception as exc:
            say(f"run.py: error: no usable CUDA GPU through CuPy ({one_line(exc)}); use --dry-run to exercise "
                "the script without one")
            return 2
    ctx = Context(args)
    now = dt.datetime.now(dt.timezone.utc)
    report: dict[str, Any] = {
        "schema": 1, "suite": args.suite, "date": now.strftime("%Y-%m-%d"), "time_utc": now.strftime("%H:%M:%S"),
        "command": " ".join(["python", "benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]),
        "argv": list(argv if argv is not None else sys.argv[1:]), "mode": "dry-run" if ctx.dry else "gpu",
        "quick": ctx.quick, "git": git_commit(), "host": platform.node(), "gpu": gpu_info(ctx),
        "settings": {"reps": ctx.reps, "warmup": ctx.warmup, "dispatch_calls": ctx.dispatch_calls,
                     "dispatch_warmup": ctx.dispatch_warmup, "seed": ctx.seed, "budget_s": ctx.budget_s,
                     "compile_timeout_s": ctx.compile_timeout_s, "peers": [p.key for p in peers]},
        "ceilings": {}, "workloads": [],
    }
    say(f"{ctx.stamp()} fusec benchmarks: {report['gpu']['name']}; {len(selected)} workload(s), "
        f"{ctx.reps} runs per median, seed {ctx.seed}{' (dry run)' if ctx.dry else ''}")
    if not ctx.dry:
        say(f"{ctx.stamp()} ceilings (1 GiB)")
        ctx.ceilings = report["ceilings"] = measure_ceilings(ctx)
        release_memory(ctx)
    from fusec.support.progress import progress

    for w in progress(selected, "workloads", unit="workload"):
        report["workloads"].append(run_workload(ctx, w, peers))
    report["versions"] = ctx.versions()
    report["elapsed_s"] = ctx.elapsed()
    import fusec  # the process's counters: a run with warm disk caches shows 0 kernels compiled, 0 autotune runs

    report["fusec_cache_info"] = dataclasses.asdict(fusec.cache_info())
    say(f"{ctx.stamp()} fusec counters of this process: {fusec.cache_info()}")
    report["fusec_ok"] = all(r.get("fusec_status") == "ok" for r in report["workloads"])
    LAST_REPORT = report

    out_dir = Path(args.out) if args.out else (Path(tempfile.mkdtemp(prefix="fusec-bench-dry-")) if ctx.dry
                                                else DEFAULT_OUT)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        slug = report["gpu"]["slug"] + ("" if args.suite == "perf" else f"-{args.suite}")
        path = result_path(out_dir, report["date"], slug)
        report["json_path"] = str(path)
        path.write_text(json.dumps(json_safe(report), indent=1, allow_nan=False) + "\n")
        say(f"{ctx.stamp()} wrote {path}")
        if not args.no_chart:
            why = draw_chart(report, path.with_suffix(".png"))
            say(f"{ctx.stamp()} {why}" if why else f"{ctx.stamp()} wrote {path.with_suffix('.png')}")
    except OSError as exc:
        say(f"{ctx.stamp()} could not write the results into {out_dir}: {one_line(exc)}")
    print_tables(report, args.markdown)
    return 0 if report["fusec_ok"] else 1


def json_safe(value: Any) -> Any:
    """Plain JSON: NumPy scalars as Python numbers, inf and NaN as the strings "inf" and "nan"."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if value is None or isinstance(value, str):
        return value
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
