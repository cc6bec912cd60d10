"""fusec on Dask vs plain Dask, on one GPU (the H200): does fusec add nothing to Dask's own cost, and remove
the unfused traffic under it?

For each case (2^32 float32 elements by default, fewer where the free device memory is smaller; chunks of 2^26 .. 2^30
elements), four ways to compute it:

- ``dask+cupy``: Dask's own array operations on CuPy chunks (one CuPy kernel per op per chunk);
- ``fusec-dask``: the ``@fusec.fuse`` function called on the Dask array (this integration);
- ``by-hand``: the same fused kernels applied by hand (``map_blocks``, ``dask.array.reduction``,
  ``apply_gufunc``), what a user would write without the integration;
- ``fusec``: the fused function on the whole CuPy array (no Dask).

Cases: ``sum(abs(x))``; layernorm over rows of 4096 (rows whole in each chunk); softmax over rows of 2^22
split in 4 chunks each (per-chunk (max, sum of exp) partials, their tree, the epilogue: by hand with
``dask.array.reduction`` on the same fused pair); one Adam step (4 arrays of a quarter of the elements each).
Each time is the median over ``--reps`` runs of building the graph and computing it on
Dask's threaded scheduler, bracketed by CUDA events (the device synchronized); ``build`` is the graph
construction alone (calling the function, or the Dask expressions). Dask's per-task cost is measured on
no-op tasks, and the table says from which chunk size the fused kernels' time per chunk exceeds it.
``--cluster`` adds ``fusec-dask`` and ``dask+cupy`` on a ``dask_cuda.LocalCUDACluster`` (one worker per
GPU) when ``dask_cuda`` imports, else on a ``distributed.LocalCluster`` of one worker (threads).

    python benchmarks/dask_bench.py            # the full table: n sized from the free device memory (2^32 on an
                                               # H200, 2^31 on an 80 GB H100); with the default 10 runs it had
                                               # not finished after 5 minutes on an H100 (2026-12-07): --reps 3
    python benchmarks/dask_bench.py --quick    # 2^30 elements, two chunk sizes, under 3 minutes
    python benchmarks/dask_bench.py --cpu      # NumPy chunks, tiny sizes: checks the script without a GPU
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fusec  # noqa: E402

ROWS_LN = 4096  # layernorm row length
ROW_SPLIT = 4  # softmax: chunks per row


@fusec.fuse
def sum_abs(x):
    return np.abs(x).sum()


@fusec.fuse
def layernorm(x, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


@fusec.fuse
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@fusec.fuse
def adam(param, grad, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=1):
    m = beta1 * m + (1.0 - beta1) * grad
    v = beta2 * v + (1.0 - beta2) * grad * grad
    m_hat = m / (1.0 - beta1**step)
    v_hat = v / (1.0 - beta2**step)
    return param - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


# the pieces of the split softmax, fused, for applying by hand: per-chunk (max, sum of exp(x - max)) pairs
# (one rows kernel), their online merge, and the epilogue
@fusec.fuse
def row_stats(x):
    m = x.max(axis=-1, keepdims=True)
    return m, np.exp(x - m).sum(axis=-1, keepdims=True)


row_epilogue = fusec.fuse(lambda x, m, s: np.exp(x - m) / s, name="row_epilogue")


def _stats_chunk(x: Any, axis: Any = None, keepdims: bool = True) -> dict:
    m, s = row_stats(x)
    return {"m": m, "s": s}


def _stats_merge(parts: Any, axis: Any = None, keepdims: bool = True) -> dict:
    parts = parts if isinstance(parts, list) else [parts]
    top = parts[0]["m"]
    for p in parts[1:]:
        top = np.maximum(top, p["m"])
    total = sum(p["s"] * np.exp(p["m"] - top) for p in parts)
    return {"m": top, "s": total}


def _stats_finish(parts: Any, axis: Any = None, keepdims: bool = True) -> Any:
    merged = _stats_merge(parts)
    xp = np if isinstance(merged["m"], np.ndarray) else __import__("cupy")
    return xp.concatenate([merged["m"], merged["s"]], axis=-1)


# ---- the four ways ---------------------------------------------------------------------------------------


def plain_dask(case: str, arrays: list[Any]) -> tuple:
    import dask.array as da

    if case == "sum_abs":
        return (da.abs(arrays[0]).sum(),)
    if case == "layernorm":
        x = arrays[0]
        m = x.mean(axis=-1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
        return ((x - m) / da.sqrt(v + 1e-5),)
    if case == "softmax":
        x = arrays[0]
        e = da.exp(x - x.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True),)
    p, g, m, v = arrays
    m = 0.9 * m + (1.0 - 0.9) * g
    v = 0.999 * v + (1.0 - 0.999) * g * g
    return (p - 1e-3 * (m / (1.0 - 0.9)) / (da.sqrt(v / (1.0 - 0.999)) + 1e-8), m, v)


def fusec_dask(case: str, arrays: list[Any]) -> tuple:
    out = {"sum_abs": sum_abs, "layernorm": layernorm, "softmax": softmax, "adam": adam}[case](*arrays)
    return out if isinstance(out, tuple) else (out,)


def _partial_sum_abs(block: Any, axis: Any = None, keepdims: bool = True) -> Any:
    return sum_abs(block).reshape((1,) * block.ndim)


def _total(partials: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return partials.sum(axis=axis, keepdims=keepdims)


def by_hand(case: str, arrays: list[Any]) -> tuple:
    import dask.array as da

    if case == "sum_abs":
        x = arrays[0]
        return (da.reduction(x, _partial_sum_abs, _total, combine=_total, dtype=np.float32),)
    if case == "layernorm":
        return (arrays[0].map_blocks(layernorm, dtype=np.float32),)
    if case == "softmax":  # dask.array.reduction with the fused pair per chunk, as Dask's own mean does
        x = arrays[0]
        stats = da.reduction(x, _stats_chunk, _stats_finish, combine=_stats_merge, axis=-1, keepdims=True,
                             concatenate=False, output_size=2, dtype=np.float32, meta=x._meta)
        return (da.map_blocks(row_epilogue, x, stats[:, :1], stats[:, 1:], dtype=np.float32),)
    return tuple(da.apply_gufunc(adam, "(),(),(),()->(),(),()", *arrays, output_dtypes=[np.float32] * 3))


def single_array(case: str, whole: list[Any]) -> tuple:
    out = {"sum_abs": sum_abs, "layernorm": layernorm, "softmax": softmax, "adam": adam}[case](*whole)
    return out if isinstance(out, tuple) else (out,)


# ---- data and timing ---------------------------------------------------------------------------------------


def shapes(case: str, n: int) -> list[tuple[int, ...]]:
    if case == "sum_abs":
        return [(n,)]
    if case == "layernorm":
        return [(n // ROWS_LN, ROWS_LN)]
    if case == "softmax":
        row = min(1 << 22, n // 16)
        return [(n // row, row)]
    return [(n // 4,)] * 4


def chunking(case: str, shape: tuple[int, ...], chunk: int) -> tuple[int, ...]:
    if case == "layernorm":
        return (max(1, chunk // shape[1]), shape[1])
    if case == "softmax":
        cols = shape[1] // ROW_SPLIT
        return (max(1, chunk // cols), cols)
    return (chunk // 4,) if case == "adam" else (chunk,)


class Timer:
    def __init__(self, xp: Any):
        self.xp = xp

    def sync(self) -> None:
        if self.xp is not np:
            self.xp.cuda.Device().synchronize()

    def run(self, fn: Callable[[], Any], reps: int, warmup: int) -> list[float]:
        """Milliseconds per call (CUDA events on a GPU, the host clock on the CPU), after ``warmup`` calls."""
        for _ in range(warmup):
            fn()
        self.sync()
        times = []
        for _ in range(reps):
            if self.xp is np:
                t = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t) * 1e3)
                continue
            start, end = self.xp.cuda.Event(), self.xp.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(self.xp.cuda.get_elapsed_time(start, end))
        return times


def per_task_cost(timer: Timer, tasks: int = 2000) -> float:
    """Microseconds of Dask overhead per task: a graph of ``tasks`` no-op tasks on 1-element chunks."""
    import dask
    import dask.array as da

    base = da.from_array(np.zeros(tasks, np.float32), chunks=1).persist(scheduler="threads")

    def run():
        dask.compute(base.map_blocks(_noop, dtype=np.float32), scheduler="threads")

    return statistics.median(timer.run(run, 5, 1)) * 1e3 / tasks


def task_count(outputs: tuple, inputs: list[Any]) -> int:
    """Tasks of the graph of ``outputs`` beyond the (persisted) chunks of ``inputs``."""
    from dask.highlevelgraph import HighLevelGraph

    keys = set(HighLevelGraph.merge(*[o.__dask_graph__() for o in outputs]).keys())
    return len(keys - {k for a in inputs for k in a.__dask_graph__().keys()})


def _noop(block: Any) -> Any:
    return block


def case_rows(case: str, n: int, chunks: list[int], xp: Any, timer: Timer, reps: int, cluster: Any) -> list[dict]:
    import dask
    import dask.array as da

    rng = np.random.default_rng(0)
    host_or_device = []
    for shape in shapes(case, n):
        if xp is np:
            host_or_device.append(rng.standard_normal(shape, dtype=np.float32))
        else:
            a = xp.random.standard_normal(shape, dtype=np.float32)
            host_or_device.append(a)
    if case == "adam":
        host_or_device[3] = xp.abs(host_or_device[3])
    rows = []
    whole = single_array(case, host_or_device)
    times = timer.run(lambda: single_array(case, host_or_device), reps, 2)
    rows.append(dict(case=case, chunk=None, impl="fusec", ms=statistics.median(times), build_ms=0.0, tasks=0))
    progress(rows[-1])
    reference = whole[0] if case != "adam" else None  # stays where it is: compared on the device below
    scale = max(1.0, largest_difference(xp, reference, None)) if reference is not None else 1.0
    for chunk in chunks:
        cshape = chunking(case, host_or_device[0].shape, chunk)
        if chunk < np.prod(cshape[1:]) or cshape[0] > host_or_device[0].shape[0]:
            continue
        arrays = [da.from_array(a, chunks=cshape, asarray=False).persist(scheduler="threads") for a in host_or_device]
        for impl, make in (("dask+cupy", plain_dask), ("fusec-dask", fusec_dask), ("by-hand", by_hand)):
            def build(make=make, arrays=arrays):
                return make(case, arrays)

            def run(make=make, arrays=arrays):
                return dask.compute(*make(case, arrays), scheduler="threads")

            out = run()
            if reference is not None:
                err = largest_difference(xp, out[0], reference) / scale
                if err > 1e-4:  # relative to the largest result: summation order, exp's last bits
                    print(f"  WARNING {case} {impl} chunk {chunk}: differs from single-array fusec by {err:.3g}")
            graph = build()
            tasks = task_count(graph, arrays)
            build_ms = statistics.median(timer.run(build, reps, 1))
            times = timer.run(run, reps, 1)
            rows.append(dict(case=case, chunk=chunk, impl=impl, ms=statistics.median(times), build_ms=build_ms,
                             tasks=tasks))
            progress(rows[-1])
        if cluster is not None:
            client = cluster
            for impl, make in (("dask+cupy@cluster", plain_dask), ("fusec-dask@cluster", fusec_dask)):
                persisted = [client.persist(a) for a in arrays]

                def run(make=make, persisted=persisted, client=client):
                    return client.compute(list(make(case, persisted)), sync=True)

                run()
                times = timer.run(run, reps, 1)
                rows.append(dict(case=case, chunk=chunk, impl=impl, ms=statistics.median(times), build_ms=None,
                                 tasks=None))
                progress(rows[-1])
                del run
                release(client, persisted, xp)
    return rows


def release(client: Any, futures: list[Any], xp: Any, wait_s: float = 30.0) -> None:
    """Drop the cluster's copies of ``futures`` and wait until its workers hold no data, then give the freed device
    memory back: the worker releases keys asynchronously, and on an 80 GB H100 a case's inputs still held there
    when the next case allocates its own ran out of memory (2026-12-08)."""
    client.cancel(futures)
    futures.clear()
    deadline = time.perf_counter() + wait_s
    while any(client.has_what().values()) and time.perf_counter() < deadline:
        time.sleep(0.05)
    held = sum(len(keys) for keys in client.has_what().values())
    if held:
        print(f"  WARNING: the cluster still holds {held} key(s) after {wait_s:.0f} s")
    import gc

    gc.collect()
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()


def largest_difference(xp: Any, a: Any, b: Any | None) -> float:
    """max |a - b| (max |a| without ``b``) in float64, on the array's device and without a temporary the size of
    the array: the outputs are 8 GiB or more, and copying them to the host and comparing there took most of the
    run (a full run had not finished in 5 minutes on an H100 on 2026-12-07)."""
    if xp is np:
        return float(np.abs(a.astype(np.float64) - (0.0 if b is None else b)).max())
    return float(_difference_kernel(xp)(a, xp.zeros((), a.dtype) if b is None else b))


@functools.cache
def _difference_kernel(xp: Any) -> Any:
    return xp.ReductionKernel(
        "T p, T q", "float64 z", "fabs((double)p - (double)q)", "max(a, b)", "z = a", "0", "largest_difference"
    )


_STARTED = time.perf_counter()


def progress(row: dict) -> None:
    """One line per timed row as it is done, so a run cut short still says how far it got."""
    chunk = "whole" if row["chunk"] is None else f"2^{int(np.log2(row['chunk']))}"
    print(f"  [{time.perf_counter() - _STARTED:6.0f} s] {row['case']} {chunk} {row['impl']}: {row['ms']:.2f} ms",
          flush=True)


def start_cluster(gpu: bool) -> Any:
    from distributed import Client

    try:
        if not gpu:
            raise ImportError
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster()
        kind = "LocalCUDACluster"
    except ImportError:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=1, processes=False, threads_per_worker=4, dashboard_address=":0")
        kind = "LocalCluster(1 worker, threads)"
    client = Client(cluster)
    print(f"cluster: {kind}, {len(client.scheduler_info()['workers'])} worker(s)")
    return client


def print_table(rows: list[dict], per_task_us: float) -> None:
    print(f"\n{'case':<10} {'chunk':>8} {'impl':<20} {'median ms':>10} {'build ms':>9} {'tasks':>6}"
          "  vs dask+cupy  vs by-hand")
    base = {(r["case"], r["chunk"]): r["ms"] for r in rows if r["impl"] == "dask+cupy"}
    hand = {(r["case"], r["chunk"]): r["ms"] for r in rows if r["impl"] == "by-hand"}
    for r in rows:
        chunk = "whole" if r["chunk"] is None else f"2^{int(np.log2(r['chunk']))}"
        build = "" if r["build_ms"] is None else f"{r['build_ms']:.2f}"
        tasks = "" if r["tasks"] is None else str(r["tasks"])
        versus = ""
        if r["impl"] == "fusec-dask":
            key = (r["case"], r["chunk"])
            versus = f"{base[key] / r['ms']:>10.2f}x  {r['ms'] / hand[key] - 1:>+8.1%}"
        print(f"{r['case']:<10} {chunk:>8} {r['impl']:<20} {r['ms']:>10.3f} {build:>9} {tasks:>6}  {versus}")
    print(f"\nDask per-task cost: {per_task_us:.1f} us per task (no-op tasks, threaded scheduler)")
    for case in dict.fromkeys(r["case"] for r in rows):
        single = next(r for r in rows if r["case"] == case and r["impl"] == "fusec")
        n = sum(int(np.prod(s)) for s in shapes(case, ARGS_N[0]))
        per_element_us = single["ms"] * 1e3 / n
        crossover = per_task_us / per_element_us if per_element_us else float("inf")
        print(f"  {case}: fused kernel {per_element_us * 1e6:.3f} us per 2^20 elements; the kernel per chunk "
              f"exceeds the per-task cost from chunks of ~2^{np.log2(max(crossover, 1)):.1f} elements")


ARGS_N = [0]
# The most float32 arrays of n elements a case holds on the device at once: its inputs, the single-array
# result, Dask's per-chunk intermediates over every chunk (dask+cupy's layernorm keeps x - m of all chunks), the
# per-chunk results and their concatenation, and with --cluster the workers' persisted copies and results.
ARRAYS_AT_PEAK = 7
LARGEST_N = 1 << 32


def elements_for(free_bytes: int, largest: int = LARGEST_N, arrays: int = ARRAYS_AT_PEAK) -> int:
    """The largest power of two of float32 elements, at most ``largest``, of which ``arrays`` arrays fit in 90%
    of ``free_bytes``: 2^32 on an H200 (141 GB), 2^31 on an 80 GB H100.

    >>> elements_for(139 * 2**30), elements_for(79 * 2**30), elements_for(2**30)
    (4294967296, 2147483648, 33554432)
    """
    fit = int(0.9 * free_bytes) // (arrays * 4)
    return min(largest, 1 << max(fit.bit_length() - 1, 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^30 elements, chunks 2^26 and 2^28, 3 runs")
    parser.add_argument("--cpu", action="store_true", help="NumPy chunks and tiny sizes (checks the script)")
    parser.add_argument("--cases", default="sum_abs,layernorm,softmax,adam")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--cluster", action="store_true", help="also time on a (CUDA) local cluster")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    try:
        import dask  # noqa: F401
    except ImportError:
        print("Dask is not installed: pip install 'fusec[dask]' (see docs/dask.md for the H200's wheels)")
        return 1
    if args.cpu:
        import numpy as xp

        n, chunks, reps = 1 << 20, [1 << 16, 1 << 18], args.reps or 3
    else:
        import cupy as xp

        free, total = xp.cuda.runtime.memGetInfo()
        n = elements_for(free, 1 << 30 if args.quick else LARGEST_N)
        chunks = [c for c in ([1 << 26, 1 << 28] if args.quick else [1 << 26, 1 << 28, 1 << 30]) if c <= n // 2]
        reps = args.reps or (3 if args.quick else 10)
        print(f"device memory: {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB: n = 2^{n.bit_length() - 1} "
              f"float32 elements per case ({ARRAYS_AT_PEAK} such arrays at most at once)")
    ARGS_N[0] = n
    timer = Timer(xp)
    cluster = start_cluster(xp is not np) if args.cluster else None
    started = time.perf_counter()
    per_task_us = per_task_cost(timer)
    rows = []
    for case in args.cases.split(","):
        rows += case_rows(case, n, chunks, xp, timer, reps, cluster)
        if xp is not np:
            xp.get_default_memory_pool().free_all_blocks()
    print_table(rows, per_task_us)
    print(f"(n = 2^{int(np.log2(n))} float32 elements per case; {time.perf_counter() - started:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"n": n, "per_task_us": per_task_us, "rows": rows}, indent=1))
    if cluster is not None:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
