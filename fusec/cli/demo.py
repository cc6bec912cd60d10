"""``fusec demo``: trace sum(abs(x)) and a row softmax, show their IR and plan, run and check them.

By default it prints a short story (one screen: each function's IR and plan with the bytes moved, then the
run: timings on a GPU, the NumPy reference backend without one, each result checked against NumPy);
``--verbose`` adds each kernel's CUDA source (helper headers folded, as ``cuda_source()``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

import fusec
from fusec.ir.infer import MAX_ELEMENTS
from fusec.ir.ops import Kind
from fusec.runtime.gpu import gpu_status
from fusec.support.errors import FusecValueError
from fusec.support.progress import progress


def _sum_abs(x: Any) -> Any:
    return abs(x).sum()


def _softmax(x: Any) -> Any:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_softmax(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_sum_abs(x: np.ndarray) -> np.ndarray:
    return np.abs(x).sum(dtype=np.float64)


# name, formula, function, reference on the host, shape for the 2^28-element traffic estimate
DEMO_CASES = [
    ("sum_abs", "abs(x).sum()", _sum_abs, _np_sum_abs, (1 << 28,)),
    ("softmax", "exp(x - x.max(-1)) / sum over the row", _softmax, _np_softmax, (1 << 14, 1 << 14)),
]


def traffic(graph: Any) -> tuple[int, int, int]:
    """(unfused kernels, unfused bytes, minimum bytes) of a graph.

    Unfused: one CuPy call per elementwise or reduction node, each reading its operands and writing
    its result (layout nodes are views; a broadcast operand is read at its stored size). Minimum:
    every input read once and every output written once, which is what one fused kernel moves.
    """

    def stored(node: Any) -> Any:
        while node.opdef.kind is Kind.LAYOUT:
            node = node.operands[0]
        return node

    kernels = moved = 0
    for node in graph.nodes:
        if node.opdef.kind in (Kind.ELEMENTWISE, Kind.REDUCTION):
            kernels += 1
            moved += node.nbytes + sum(stored(o).nbytes for o in node.operands)
    minimum = sum(n.nbytes for n in graph.inputs) + sum(stored(n).nbytes for n in set(graph.outputs))
    return kernels, moved, minimum


MAX_SIZE = MAX_ELEMENTS // 4  # float32 elements of the largest array (2^63 - 1 bytes, NumPy's limit)


def _parse_size(text: str) -> int:
    """``--size``: a positive integer (``67108864``, ``2^26``, ``0x4000000``) no larger than an array of float32
    can be; whether the machine has the memory to run it is :func:`_check_memory`'s."""
    expected = f"expected a positive integer such as 67108864 or 2^26, got '{text[:40]}'"
    try:
        if text.startswith("2^"):
            exponent = int(text[2:])
            if exponent > MAX_SIZE.bit_length():  # 2^400000: refused before it is computed
                raise argparse.ArgumentTypeError(f"{text} is more than {MAX_SIZE} float32 elements, the most an "
                                                 "array can hold (2^63 - 1 bytes)")
            value = 2**exponent
        else:
            value = int(text, 0)
    except ValueError:
        if text.isdigit():  # more digits than Python converts: far more than any array holds
            raise argparse.ArgumentTypeError(f"{text[:20]}... ({len(text)} digits) is more than {MAX_SIZE} float32 "
                                             "elements, the most an array can hold (2^63 - 1 bytes)") from None
        raise argparse.ArgumentTypeError(expected) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"the size must be at least 1, got {value}")
    if value > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"{value} is more than {MAX_SIZE} float32 elements, the most an array "
                                         "can hold (2^63 - 1 bytes)")
    return value


def _available_memory(gpu: bool) -> int | None:
    """Bytes free on the GPU (CuPy's device) or available on the host (``MemAvailable``, else the physical
    memory); None when unknown."""
    if gpu:
        from fusec.runtime.gpu import cupy_module

        return int(cupy_module().cuda.runtime.memGetInfo()[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _check_memory(size: int | None, gpu: bool) -> None:
    """Refuse, before anything is printed, a ``--size`` whose run needs more memory than there is: the sum_abs
    input and a temporary as large (the unfused run's ``abs(x)``, the reference's), float32, on the GPU (when
    the run is there) and on the host."""
    if size is None:
        return
    needed = 2 * 4 * size
    for device in (True, False) if gpu else (False,):  # a GPU run checks its results on the host too
        available = _available_memory(device)
        if available is not None and needed > available:
            where = "GPU memory free" if device else "memory available on this machine"
            raise FusecValueError(f"--size {size} needs about {_gib(needed)} to run (the float32 input and a "
                                  f"temporary as large), more than the {_gib(available)} of {where}: choose a "
                                  f"--size of at most {available // 8}", loc="")


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def _show_case(fused: fusec.Fused, name: str, formula: str, shape: tuple[int, ...], verbose: bool) -> None:
    spec = fusec.ArraySpec(shape, "float32")
    graph = fused.trace(spec)
    print(f"== {name}: {formula}, x = {spec} ==")
    print(graph)
    print(fused.plan(spec))
    if verbose:
        print(fused.cuda_source(spec))
    print()


def _close(got: Any, want: Any, rtol: float, atol: float) -> tuple[bool, float]:
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = float(np.max(np.abs(got64 - want64) / (atol + rtol * np.abs(want64)))) if got64.size else 0.0
    return got64.shape == want64.shape and bool(np.all(np.isfinite(got64))) and err <= 1.0, err


def _demo_numpy(fns: dict[str, fusec.Fused], size: int | None) -> bool:
    rng = np.random.default_rng(0)
    ok = True
    for name, shape in (("sum_abs", (size or 1 << 16,)), ("softmax", (256, 512))):
        x = rng.standard_normal(shape, dtype=np.float32)
        reference = _np_sum_abs(x) if name == "sum_abs" else _np_softmax(x)
        good, err = _close(fns[name](x), reference, rtol=1e-5, atol=1e-7)
        ok &= good
        label = f"{name} {fusec.ArraySpec(shape, 'float32')}"
        print(f"  {label:24s} {'ok' if good else 'MISMATCH'} (worst error / tolerance = {err:.2g})")
    return ok



def _demo_gpu(fns: dict[str, fusec.Fused], size: int | None) -> bool:
    import cupy

    from fusec.inspect.timing import time_ms
    from fusec.ir.interpret import interpret

    name_dev = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    name_dev = name_dev.decode() if isinstance(name_dev, bytes) else name_dev
    print(f"GPU: {name_dev}; median of 20 runs after warm-up, timed with CUDA events")
    rows, ok = [], True
    cases = [("sum_abs", (size or 1 << 26,)), ("softmax", (8192, 8192)), ("softmax", (4096, 4096))]
    for name, shape in progress(cases, "compile, time and check", unit="case"):
        fused = fns[name]
        x = cupy.random.standard_normal(shape, dtype=cupy.float32)
        graph = fused.trace(x)
        _, _, minimum = traffic(graph)
        t_fused = time_ms(lambda f=fused, a=x: f(a), cupy, reps=20)
        t_unfused = time_ms(lambda g=graph, a=x: interpret(g, [a], xp=cupy), cupy, reps=20)
        xh = cupy.asnumpy(x)
        reference = _np_sum_abs(xh) if name == "sum_abs" else _np_softmax(xh)
        good, _ = _close(cupy.asnumpy(fused(x)), reference, rtol=1e-4, atol=1e-7)
        ok &= good
        label = f"{name} {fusec.ArraySpec(shape, 'float32')}"
        rows.append((label, t_unfused, t_fused, minimum, "ok" if good else "MISMATCH"))
        del x
    print(f"{'case':28s} {'unfused ms':>10s} {'fused ms':>9s} {'speedup':>8s} {'fused GB/s':>10s}  check")
    for label, tu, tf, nbytes, check in rows:
        print(f"{label:28s} {tu:10.3f} {tf:9.3f} {tu / tf:7.2f}x {nbytes / tf / 1e6:10.1f}  {check}")
    print("(GB/s: bytes a single fused kernel must move, each input read once and each output written once)")
    return ok


def cmd_demo(args: argparse.Namespace) -> int:
    """Run ``fusec demo`` (see the module docstring); 0 when every result matches NumPy."""
    usable, why = (False, "--no-gpu given") if args.no_gpu else gpu_status()
    _check_memory(args.size, usable)
    fns = {name: fusec.fuse(fn, name=name) for name, _, fn, _, _ in DEMO_CASES}
    what = "IR, plan, bytes moved and CUDA source" if args.verbose else "IR, plan and bytes moved"
    print(f"fusec demo: trace sum(abs(x)) and a row softmax, show their {what}, run and check them"
          + ("" if args.verbose else " (--verbose adds the CUDA source)") + "\n")
    for name, formula, _, _, shape in DEMO_CASES:
        if name == "sum_abs" and args.size:
            shape = (args.size,)
        _show_case(fns[name], name, formula, shape, args.verbose)
    try:
        if usable:
            ok = _demo_gpu(fns, args.size)
        else:
            if not args.no_gpu:
                why += "; `fusec demo --no-gpu` runs this without looking for a GPU"
            print(f"no CUDA GPU found: running the NumPy reference backend on small inputs ({why})")
            ok = _demo_numpy(fns, args.size)
    except MemoryError as exc:  # CuPy's OutOfMemoryError too: more than _check_memory could foresee
        raise FusecValueError(f"the demo ran out of memory ({type(exc).__name__}): choose a smaller --size",
                              loc="") from None
    if not ok:
        print("fusec: error: a result differs from NumPy beyond the tolerance", file=sys.stderr)
        return 1
    print("result checked against NumPy: OK")
    return 0


def add_parser(sub: Any) -> None:
    """The ``demo`` subcommand, on the command line's subparsers ``sub``."""
    demo = sub.add_parser("demo", help="the main job: trace, fuse, run and check two functions",
                          description="Trace sum(abs(x)) and a row softmax, print their IR and their plan "
                                      "(kernels and bytes moved fused vs unfused), then run them: on a CUDA GPU "
                                      "(CuPy), time fused vs one CuPy call per op; without one, run the NumPy "
                                      "reference backend on small inputs. Every result is checked against NumPy.")
    demo.add_argument("--size", type=_parse_size, metavar="N",
                      help="elements of the sum_abs input, shown and run (default: 2^28 shown; run with 2^26 on a "
                           "GPU, 2^16 on the CPU); refused up front when the run needs more memory than there is")
    demo.add_argument("--no-gpu", action="store_true", help="use the NumPy reference backend even if a GPU is there")
    demo.add_argument("--verbose", action="store_true", help="also print each kernel's CUDA source")
    demo.set_defaults(run=cmd_demo)
