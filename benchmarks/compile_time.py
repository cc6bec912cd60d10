"""Compile-time scaling: how long fusec takes to trace, clean up, plan and render programs of growing size.

    PYTHONPATH=. python benchmarks/compile_time.py                       # the default sizes, a markdown table
    PYTHONPATH=. python benchmarks/compile_time.py --family chain --sizes 100,1000
    PYTHONPATH=. python benchmarks/compile_time.py --nvrtc-up-to 300 --out build/compile_time.json
    PYTHONPATH=. python benchmarks/compile_time.py --nvrtc [--kinds rows --mixes transc --sizes 10,30]

Program families, all plain NumPy-style functions traced with :class:`fusec.ArraySpec` arguments:

- ``chain``: ``n`` elementwise ops in a row (``sin``, then ``x * 1.0001``, then ``+ 0.5``, again and
  again): one kernel, a graph as deep as it is long;
- ``dag``: a seeded random DAG of about ``n`` nodes (:func:`random_dag`): unary and binary elementwise ops
  with fan-out and reuse, broadcasting against smaller inputs, reductions over rows, columns or everything
  (with and without ``keepdims``) followed by epilogues that broadcast them back, a few transposes,
  ``expand_dims`` and ``where``, five inputs and several outputs;
- ``view_dag``: the same with views and gathers among the steps (:func:`view_dag`): reversed and rolled
  values, rows and columns picked by index arrays;
- ``roll_stencil``: ``n`` steps of the heat equation, ``u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))``;
- ``shrinking_stencil``: ``n`` steps of the same on slices, ``u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])``;
- ``reversed_chain``: ``n`` ops alternating ``x = x[::-1] + x`` and ``x = x * 1.01``.

The stencils and the reversed chain read every value through several views: each is computed where a view
reads it, or (past a few different views of one value) kept in memory for them
(:mod:`fusec.passes.kept_values`), so their planning grows linearly too.

For each size the table gives the nodes of the traced graph, the kernels of the plan and the seconds of
each stage: ``trace`` (``Fused.trace``), ``passes`` (the cleanup pipeline: canonicalize, fold, cse, dce,
each verified), ``plan`` (fusion and the :class:`fusec.runtime.plan.Plan`), ``source`` (the CUDA source of every
kernel, :func:`kernel_sources`) and ``nvrtc`` (every distinct source compiled to a cubin for sm_90, only up
to ``--nvrtc-up-to`` nodes since it costs about 0.3 s a kernel; ``-`` above that).

``--nvrtc`` gives instead NVRTC's time against the number of ops, per kernel kind and op mix (:data:`NVRTC_KINDS`,
:data:`MIXES`: ``arith`` ``* 1.0001`` and ``+ 0.5`` in turn, ``transc`` ``sin`` and ``cos`` in turn, ``mixed``
``*``, ``+`` and ``tanh`` in turn; sizes 10, 30, 100, 300), each program one kernel of that kind whose elementwise
part is the ``n`` ops, and the first calls of issue 34's acceptance (:data:`FIRST_CALLS`: trace + plan + source,
then NVRTC). Each NVRTC time is the process's CPU seconds (NVRTC compiles on the calling thread; CPU time is what
other work on a shared machine changes least) and the wall seconds beside it. Past ``--nvrtc-limit`` seconds
the larger sizes of that kind and mix are left out (``-``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import fusec
from fusec.ir.graph import Graph
from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline
from fusec.runtime.plan import Plan, make_plan

DEFAULT_SIZES = {"chain": (10, 30, 100, 300, 1000, 3000), "dag": (100, 300, 1000, 3000, 10000),
                 "view_dag": (100, 300, 1000, 3000, 10000), "roll_stencil": (5, 10, 20, 40, 80),
                 "shrinking_stencil": (10, 20, 40, 80, 160), "reversed_chain": (250, 500, 1000, 2000, 4000)}
ROWS, COLS = 256, 512
NODES_PER_DAG_STEP = 1.65  # about how many graph nodes one step of random_dag adds (tests/test_compile_time.py)
NODES_PER_VIEW_DAG_STEP = 1.8  # and of view_dag
STENCIL_N = 4096


# --- the program families ------------------------------------------------------------------------------


def chain(n_ops: int) -> tuple[Callable[..., Any], list[fusec.ArraySpec]]:
    """``n_ops`` elementwise ops in a row over one (1024, 1024) float32 input."""

    def fn(x):
        for i in range(n_ops):
            step = i % 3
            x = np.sin(x) if step == 0 else x * 1.0001 if step == 1 else x + 0.5
        return x

    fn.__name__ = f"chain{n_ops}"
    return fn, [fusec.ArraySpec((1024, 1024), "float32")]


def random_dag(n_nodes: int, seed: int = 0) -> tuple[Callable[..., Any], list[fusec.ArraySpec]]:
    """A random DAG of about ``n_nodes`` nodes over five float32 inputs: ``x`` and ``y`` (rows x cols), a
    bias ``b`` (cols,), a column ``c`` (rows, 1) and ``t`` (cols x rows, for values that were transposed).
    The same ``(n_nodes, seed)`` gives the same graph."""
    fn, specs = _dag(max(1, round(n_nodes / NODES_PER_DAG_STEP)), seed, views=False)
    fn.__name__ = f"dag{n_nodes}"
    return fn, specs


def view_dag(n_nodes: int, seed: int = 0) -> tuple[Callable[..., Any], list[fusec.ArraySpec]]:
    """:func:`random_dag` with views and gathers among its steps (about one step in four): a value reversed
    along an axis, rolled along one, or its rows or columns picked by the int64 index arguments ``p`` (rows,)
    and ``q`` (cols,) (permutations when run). About ``n_nodes`` nodes; the same ``(n_nodes, seed)``, the same
    graph."""
    fn, specs = _dag(max(1, round(n_nodes / NODES_PER_VIEW_DAG_STEP)), seed, views=True)
    fn.__name__ = f"view_dag{n_nodes}"
    return fn, specs


def _dag(steps: int, seed: int, views: bool) -> tuple[Callable[..., Any], list[fusec.ArraySpec]]:
    def fn(x, y, b, c, t, p=None, q=None):
        rng = random.Random(seed)
        pool: list[Any] = [x, y, b, c, t]
        unused: dict[int, Any] = {}  # id -> value not read yet (becomes part of an output)

        def push(v: Any) -> Any:
            pool.append(v)
            unused[id(v)] = v
            return v

        def pick(ndim: int | None = None) -> Any:
            for _ in range(16):
                i = len(pool) - 1 - min(len(pool) - 1, int(rng.expovariate(1 / 6)))
                v = pool[i]
                if ndim is None or v.ndim == ndim:
                    unused.pop(id(v), None)
                    return v
            return x

        def partner(a: Any) -> Any:
            for _ in range(12):
                v = pick()
                try:
                    shape = np.broadcast_shapes(a.shape, v.shape)
                except ValueError:
                    continue
                if shape in ((ROWS, COLS), (COLS, ROWS), a.shape):
                    return v
            return rng.choice((0.5, 2.0, -1.25))

        unary = (np.sin, np.exp, np.tanh, np.abs, np.negative, np.square,
                 lambda v: np.sqrt(np.abs(v)), lambda v: v * 0.75 + 0.25, lambda v: np.log1p(np.abs(v)))
        binary = (np.add, np.subtract, np.multiply, np.maximum, np.minimum,
                  lambda p, q: p / (np.abs(q) + 1.0))
        def view(a: Any) -> Any:
            """``a`` reversed, rolled, or gathered along one of its axes (same shape)."""
            axis = rng.randrange(a.ndim)
            kind = rng.choice(("reverse", "roll", "gather"))
            if kind == "reverse":
                return np.flip(a, axis)
            if kind == "roll":
                return np.roll(a, rng.choice((1, -1, 3)), axis=axis)
            index = p if a.shape[axis] == ROWS else q
            return np.take(a, index, axis=axis)

        for _ in range(steps):
            if views and rng.random() < 0.25:
                a = pick(2)
                push(view(a) if a.shape in ((ROWS, COLS), (COLS, ROWS)) else a * 1.5)
                continue
            r = rng.random()
            if r < 0.34:
                push(rng.choice(unary)(pick()))
            elif r < 0.74:
                a = pick()
                push(rng.choice(binary)(a, partner(a)))
            elif r < 0.86:
                a = pick(2)
                axis = rng.choice((1, 1, 0, None))
                keep = rng.random() < 0.7
                red = getattr(a, rng.choice(("sum", "max", "mean", "min")))(axis=axis, keepdims=keep)
                push(red)
                if rng.random() < 0.6 and axis is not None:  # an epilogue that broadcasts it back
                    back = red if keep else np.expand_dims(red, axis)
                    push(a - back if rng.random() < 0.5 else a / (np.abs(back) + 1.0))
            elif r < 0.92:
                a = pick(2)
                push(np.where(a > partner(a), a, a * 0.5))
            elif r < 0.97:
                a = pick(2)
                push(a.T)
            else:
                a = pick()
                if a.ndim == 2 and 1 in a.shape:
                    push(np.squeeze(a, a.shape.index(1)))
                else:
                    push(a[None])
        outputs: dict[tuple, Any] = {}
        for v in unused.values():  # what nothing read, summed per shape: a few outputs
            acc = outputs.get(v.shape)
            outputs[v.shape] = v if acc is None else acc + v
        return tuple(outputs.values()) or (pool[-1],)

    specs = [fusec.ArraySpec((ROWS, COLS), "float32"), fusec.ArraySpec((ROWS, COLS), "float32"),
             fusec.ArraySpec((COLS,), "float32"), fusec.ArraySpec((ROWS, 1), "float32"),
             fusec.ArraySpec((COLS, ROWS), "float32")]
    if views:
        specs += [fusec.ArraySpec((ROWS,), "int64"), fusec.ArraySpec((COLS,), "int64")]
    else:
        fn = _without_indices(fn)
    return fn, specs


def _without_indices(fn: Callable[..., Any]) -> Callable[..., Any]:
    def dag(x, y, b, c, t):
        return fn(x, y, b, c, t)

    return dag


def roll_stencil(steps: int) -> tuple[Callable[..., Any], list[fusec.ArraySpec]]:
    """``steps`` explicit steps of the 1-d heat equation on a ring, ``np.roll`` for the neighbours."""

    def fn(u):
        for _ in range(steps):
            u = u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
        return u

    fn.__name__ = f"roll_stencil{steps}"
    return fn, [fusec.ArraySpec((STENCIL_N,), "float32")]


def shrinking_stencil(steps: int) -> tuple[Callable[..., Any], list[fusec.ArraySpec]]:
    """``steps`` steps of the heat equation on slices: each step two elements shorter."""

    def fn(u):
        for _ in range(steps):
            u = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
        return u

    fn.__name__ = f"shrinking_stencil{steps}"
    return fn, [fusec.ArraySpec((STENCIL_N + 2 * steps,), "float32")]


def reversed_chain(n_ops: int) -> tuple[Callable[..., Any], list[fusec.ArraySpec]]:
    """``n_ops`` ops alternating ``x = x[::-1] + x`` and ``x = x * 1.01``."""

    def fn(x):
        for i in range(n_ops):
            x = x[::-1] + x if i % 2 == 0 else x * 1.01
        return x

    fn.__name__ = f"reversed_chain{n_ops}"
    return fn, [fusec.ArraySpec((STENCIL_N,), "float32")]


FAMILIES: dict[str, Callable[..., tuple[Callable[..., Any], list[fusec.ArraySpec]]]] = {
    "chain": chain,
    "dag": random_dag,
    "view_dag": view_dag,
    "roll_stencil": roll_stencil,
    "shrinking_stencil": shrinking_stencil,
    "reversed_chain": reversed_chain,
}
SEEDED = ("dag", "view_dag")


# --- the stages ----------------------------------------------------------------------------------------


def kernel_sources(plan: Plan) -> list[str]:
    """The CUDA source of every kernel of ``plan`` (C-contiguous inputs, as ArraySpec arguments give).

    Through :func:`fusec.kinds.generate_plan`, the entry point the runtime and ``cuda_source`` use
    (schedule, lowering, rendering)."""
    from fusec.kinds import generate_plan

    return [k.source for k in generate_plan(plan, {})]


def measure(family: str, size: int, *, nvrtc: bool, seed: int = 0) -> dict[str, Any]:
    """One row of the table: node and kernel counts and the seconds of each stage."""
    fn, specs = FAMILIES[family](size, seed) if family in SEEDED else FAMILIES[family](size)
    fused = fusec.fuse(fn)
    t0 = time.perf_counter()
    traced: Graph = fused.trace(*specs)
    t1 = time.perf_counter()
    cleaned = run_pipeline(traced, CLEANUP_PIPELINE)
    t2 = time.perf_counter()
    plan = make_plan(cleaned, ("fuse",))
    t3 = time.perf_counter()
    sources = kernel_sources(plan)
    t4 = time.perf_counter()
    row: dict[str, Any] = {"family": family, "size": size, "nodes": len(traced.nodes), "kernels": len(plan.kernels),
                           "trace_s": t1 - t0, "passes_s": t2 - t1, "plan_s": t3 - t2, "source_s": t4 - t3,
                           "nvrtc_s": None}
    if nvrtc:
        from fusec.codegen.nvrtc import compile_cubin

        distinct = list(dict.fromkeys(sources))
        t5 = time.perf_counter()
        for source in distinct:
            compile_cubin(source, "sm_90")
        row["nvrtc_s"] = time.perf_counter() - t5
        row["nvrtc_kernels"] = len(distinct)
    return row


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a markdown table."""
    lines = ["| family | size | nodes | kernels | trace s | passes s | plan s | source s | nvrtc s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        nvrtc = "-" if r["nvrtc_s"] is None else f"{r['nvrtc_s']:.2f}"
        lines.append(f"| {r['family']} | {r['size']} | {r['nodes']} | {r['kernels']} | {r['trace_s']:.3f} | "
                     f"{r['passes_s']:.3f} | {r['plan_s']:.3f} | {r['source_s']:.3f} | {nvrtc} |")
    return "\n".join(lines)


# --- NVRTC time per op count and kernel kind --------------------------------------------------------------


def _ops(x: Any, n_ops: int, mix: str) -> Any:
    """``n_ops`` elementwise ops of ``mix`` applied to ``x`` in a row."""
    for i in range(n_ops):
        if mix == "transc":
            x = np.sin(x) if i % 2 == 0 else np.cos(x)
        elif mix == "arith" or i % 3 < 2:
            x = x * 1.0001 if i % 2 == 0 else x + 0.5
        else:
            x = np.tanh(x)
    return x


def _softmax_rows(x: Any) -> Any:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# kind -> (what follows the ops, the argument): one kernel of that kind each
NVRTC_KINDS: dict[str, tuple[Callable[[Any], Any], fusec.ArraySpec]] = {
    "pointwise": (lambda y: y, fusec.ArraySpec((1 << 20,), "float32")),
    "reduce_all": (lambda y: y.sum(), fusec.ArraySpec((1 << 20,), "float32")),
    "rows": (_softmax_rows, fusec.ArraySpec((4096, 1024), "float32")),
    "cols": (lambda y: y.sum(axis=0), fusec.ArraySpec((1024, 4096), "float32")),
    "scan": (lambda y: np.cumsum(y, axis=-1), fusec.ArraySpec((4096, 1024), "float32")),
}
MIXES = ("arith", "transc", "mixed")
NVRTC_SIZES = (10, 30, 100, 300)
# issue 34's first calls: name -> (kind, mix, ops); under 3 s (1000-op chain: 10 s) on the 2-core CPU
FIRST_CALLS = {"120-op sin/cos chain": ("pointwise", "transc", 120),
               "softmax rows of 1024 after 30 ops (*, +, tanh)": ("rows", "mixed", 30),
               "softmax rows of 1024 after 30 ops (sin, cos)": ("rows", "transc", 30),
               "1000-op arithmetic chain": ("pointwise", "arith", 1000)}


def nvrtc_program(kind: str, mix: str, n_ops: int) -> tuple[Callable[..., Any], list[fusec.ArraySpec]]:
    after, spec = NVRTC_KINDS[kind]

    def fn(x):
        return after(_ops(x, n_ops, mix))

    fn.__name__ = f"{kind}_{mix}{n_ops}"
    return fn, [spec]


def measure_nvrtc(kind: str, mix: str, n_ops: int, arch: str = "sm_90", inline: bool = False) -> dict[str, Any]:
    """One first call without a GPU: trace + plan + source (wall seconds), then NVRTC of every distinct source
    (CPU and wall seconds), with the schedules and ptxas's registers. ``inline``: a pointwise kernel's body
    inline (``outline=0``, the code before outlining) whatever the heuristics say."""
    from fusec.codegen.nvrtc import compile_cubin
    from fusec.kinds import generate_plan

    fn, specs = nvrtc_program(kind, mix, n_ops)
    t0 = time.perf_counter()
    schedules = {"k0": "pointwise:vector,outline=0"} if inline and kind == "pointwise" else {}
    fused = fusec.fuse(fn, schedules=schedules)
    plan = fused.plan(*specs)
    kernels = generate_plan(plan, dict(zip(plan.graph.inputs, specs)), schedules)
    t1 = time.perf_counter()
    c1 = time.process_time()
    registers = []
    for source in dict.fromkeys(k.source for k in kernels):
        result = compile_cubin(source, arch)
        registers += [r.registers for r in (result.kernels or {}).values()]
    return {"kind": kind, "mix": mix, "ops": n_ops, "kernels": len(kernels),
            "schedules": [str(k.schedule) for k in kernels], "plan_s": t1 - t0,
            "nvrtc_cpu_s": time.process_time() - c1, "nvrtc_s": time.perf_counter() - t1, "registers": registers}


def nvrtc_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| kind | mix | ops | schedule | trace+plan+source s | NVRTC CPU s | NVRTC wall s |",
             "| --- | --- | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['kind']} | {r['mix']} | {r['ops']} | - | - | - | - |")
            continue
        lines.append(f"| {r['kind']} | {r['mix']} | {r['ops']} | {'; '.join(r['schedules'])} | {r['plan_s']:.2f} | "
                     f"{r['nvrtc_cpu_s']:.2f} | {r['nvrtc_s']:.2f} |")
    return "\n".join(lines)


def nvrtc_main(args: argparse.Namespace) -> int:
    kinds = args.kinds.split(",") if args.kinds else list(NVRTC_KINDS)
    mixes = args.mixes.split(",") if args.mixes else list(MIXES)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(NVRTC_SIZES)
    measure_nvrtc("pointwise", "arith", 2)  # warm up: imports, NVRTC's headers
    rows: list[dict[str, Any]] = []
    cases = [(k, m, n) for k in kinds for m in mixes for n in sizes]
    if not args.no_first_calls:
        cases += [(k, m, n) for k, m, n in FIRST_CALLS.values()]
    slow_at: dict[tuple[str, str], int] = {}  # kind and mix -> the ops past --nvrtc-limit
    for kind, mix, n in cases:
        if (kind, mix) in slow_at and n > slow_at[(kind, mix)]:
            row = {"kind": kind, "mix": mix, "ops": n, "skipped": True}
        else:
            row = measure_nvrtc(kind, mix, n, inline=args.inline)
            if row["nvrtc_cpu_s"] > args.nvrtc_limit:
                slow_at[(kind, mix)] = min(n, slow_at.get((kind, mix), n))
        rows.append(row)
        print(nvrtc_markdown([row]).splitlines()[-1], file=sys.stderr, flush=True)
    _report(rows, nvrtc_markdown, args.out, "nvrtc_rows")
    return 0


def _report(rows: list[dict], table: Callable[[list[dict]], str], out: str | None, key: str) -> None:
    """The rows as a markdown table on stdout, and as JSON (under ``key``, with the Python version) in ``out``."""
    print(table(rows))
    if out:
        with open(out, "w") as f:
            json.dump({"python": sys.version.split()[0], key: rows}, f, indent=1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nvrtc", action="store_true",
                        help="NVRTC time per op count and kernel kind, and issue 34's first calls, instead")
    parser.add_argument("--kinds", help=f"with --nvrtc: comma-separated kinds (default {','.join(NVRTC_KINDS)})")
    parser.add_argument("--mixes", help=f"with --nvrtc: comma-separated op mixes (default {','.join(MIXES)})")
    parser.add_argument("--nvrtc-limit", type=float, default=60.0, metavar="S",
                        help="with --nvrtc: past this many CPU seconds, skip the larger sizes of that kind and mix")
    parser.add_argument("--inline", action="store_true",
                        help="with --nvrtc: pointwise bodies inline (outline=0), as before outlining")
    parser.add_argument("--no-first-calls", action="store_true", help="with --nvrtc: leave out the first calls")
    parser.add_argument("--family", choices=[*FAMILIES, "all"], default="all")
    parser.add_argument("--sizes", help="comma-separated sizes (default: each family's own list)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random DAG")
    parser.add_argument("--nvrtc-up-to", type=int, default=0, metavar="NODES",
                        help="compile the kernels with NVRTC for programs of at most this many nodes (default: none)")
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args(argv)
    if args.nvrtc:
        return nvrtc_main(args)
    families = list(FAMILIES) if args.family == "all" else [args.family]
    measure("chain", 3, nvrtc=False)  # warm up: imports, template loading, first-call caches
    rows = []
    for family in families:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else DEFAULT_SIZES[family]
        for size in sizes:
            row = measure(family, size, nvrtc=False, seed=args.seed)
            if args.nvrtc_up_to and row["nodes"] <= args.nvrtc_up_to:
                row = measure(family, size, nvrtc=True, seed=args.seed)
            rows.append(row)
            print(markdown([row]).splitlines()[-1], file=sys.stderr, flush=True)
    _report(rows, markdown, args.out, "rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
