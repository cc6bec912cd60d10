"""The ``fusec`` command line: ``opt``, ``explain`` and ``demo``.

    fusec opt FILE.fir -p canonicalize,fold,cse,dce,fuse [--dump] [--no-verify]
    fusec explain FILE.py:FUNC --arg f32[8192,8192] [--schedule K=S] [--svg OUT] [--source] [--ptxas] [--run]
                  [--color WHEN]
    fusec demo [--size N] [--no-gpu]

Every error a user can cause (a missing file, a bad spec, IR that does not parse or verify, an unknown
pass, a function that does not trace or raises, ``--svg`` without Graphviz, ``--run`` without a GPU)
ends in one line ``fusec: error: ...`` on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

import fusec
from fusec.errors import FusecError, VerifyError, entry_point
from fusec.gpu import gpu_status as gpu_available
from fusec.gpu import require_gpu
from fusec.ir.ops import Kind
from fusec.schedule import ScheduleError

PROG = "fusec"


class CliError(Exception):
    """A user error the CLI reports as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (naming the command's ``--help``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see `{self.prog} --help`)\n")


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        what = f"cannot read '{exc.filename}': " if exc.filename else ""
        return what + exc.strerror
    text = str(exc) or type(exc).__name__
    out = ""
    for line in (ln.strip() for ln in text.splitlines()):
        if line:
            out += (line if not out else (" " if out.endswith(":") else "; ") + line)
    return out


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 1


# --- fusec opt -----------------------------------------------------------------------------------


def _read_text(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    if os.path.isdir(path):
        raise CliError(f"'{path}' is a directory, not a .fir file")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except UnicodeDecodeError:
        raise CliError(f"'{path}' is not UTF-8 text") from None


def cmd_opt(args: argparse.Namespace) -> int:
    from fusec.ir.text import print_graph
    from fusec.passes.manager import optimize_text

    text, filename = _read_text(args.file)
    dumped: list[str] = []

    def dump(name: str, g: Any) -> None:
        dumped.append(name)
        print(f"# after {name}\n{print_graph(g)}", flush=True)

    try:
        result = optimize_text(text, args.passes or "", filename, check=not args.no_verify,
                               dump=dump if args.dump else None)
    except VerifyError as exc:  # the verifier names the function and node; add the file
        raise CliError(f"{filename}: {_one_line(exc)}") from None
    if not dumped:
        print(result)
    return 0


# --- fusec explain -------------------------------------------------------------------------------


def _import_file(path: str) -> Any:
    if not path.endswith(".py"):
        raise CliError(f"expected a Python file (FILE.py:FUNC), got '{path}'")
    if not os.path.isfile(path):
        raise CliError(f"no such file: '{path}'")
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if stem.isidentifier() and stem not in sys.modules else f"_fusec_user_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import '{path}'")
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise CliError(f"{exc.filename}:{exc.lineno}: syntax error: {exc.msg}") from None
    except SystemExit as exc:  # sys.exit() at the module's top level (not under `if __name__ == "__main__":`)
        sys.modules.pop(name, None)
        raise CliError(f"importing '{path}' called sys.exit({exc.code!r}) at its top level: nothing to explain "
                       "(put the script's own run under `if __name__ == \"__main__\":`)") from None
    except Exception as exc:  # the user's module raised while importing
        sys.modules.pop(name, None)
        raise CliError(f"importing '{path}' failed: {type(exc).__name__}: {_one_line(exc)}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def load_function(target: str) -> fusec.Fused:
    """``FILE.py:FUNC`` -> a Fused object (a plain function is wrapped with ``fusec.fuse``)."""
    path, sep, func = target.rpartition(":")
    if not sep or not path or not func:
        raise CliError(f"expected FILE.py:FUNC (such as examples/softmax.py:softmax), got '{target}'")
    module = _import_file(path)
    obj = getattr(module, func, None)
    if obj is None:
        defined = sorted(k for k, v in vars(module).items() if not k.startswith("_") and (
            isinstance(v, fusec.Fused) or (callable(v) and getattr(v, "__module__", None) == module.__name__)))
        hint = f" (it defines: {', '.join(defined)})" if defined else ""
        raise CliError(f"'{path}' has no function '{func}'{hint}")
    if isinstance(obj, fusec.Fused):
        return obj
    if callable(obj) and not isinstance(obj, type):
        return fusec.fuse(obj)
    raise CliError(f"'{func}' in '{path}' is a {type(obj).__name__}, not a function")


def parse_specs(texts: Sequence[str]) -> list[fusec.ArraySpec]:
    specs = []
    for text in texts:
        try:
            specs.append(fusec.ArraySpec.parse(text))
        except (ValueError, FusecError) as exc:
            msg = exc.message if isinstance(exc, FusecError) else _one_line(exc)
            raise CliError(f"bad --arg '{text}': {msg} (expected DTYPE[DIMS] such as f32[8192,8192] or i64[])"
                           ) from None
    return specs


def use_color(choice: str, stream: Any) -> bool:
    """``--color``: ``always``, ``never``, or ``auto`` (colour when ``stream`` is a terminal and the
    ``NO_COLOR`` environment variable is unset or empty)."""
    if choice != "auto":
        return choice == "always"
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


def parse_schedules(texts: Sequence[str]) -> dict[str, str]:
    """``--schedule KERNEL=SCHEDULE`` options -> {kernel name: schedule text} (checked when planned)."""
    out = {}
    for text in texts:
        name, sep, schedule = text.partition("=")
        if not sep or not name.strip() or not schedule.strip():
            raise CliError(f"bad --schedule '{text}': expected KERNEL=SCHEDULE such as k0=rows:warp "
                           "(explain prints each kernel's schedule in this form)")
        out[name.strip()] = schedule.strip()
    return out


def cmd_explain(args: argparse.Namespace) -> int:
    fused = load_function(args.target)
    specs = parse_specs(args.arg or [])
    if args.svg:
        _check_drawing_path(args.svg)
    if args.measure:
        require_gpu("fusec explain --run", hint="drop --run to see the plan without a GPU")
    try:
        if args.schedule:
            fused = fused.with_schedules(parse_schedules(args.schedule))
        explanation = fused.explain(*specs, run=args.measure)
    except ScheduleError as exc:
        raise CliError(f"--schedule: {exc.message}") from None
    except FusecError:
        raise
    except Exception as exc:  # the user's function itself raised while fusec traced it
        where = _raised_in_user_code(exc)
        if where is None:
            raise
        raise CliError(f"{where}: {fused.name} raised {type(exc).__name__} while fusec traced it: "
                       f"{_one_line(exc)}") from None
    print(explanation.render(color=use_color(args.color, sys.stdout)))
    if args.source:
        print(fused.cuda_source(*specs))
    if args.ptxas:
        print(fused.ptxas(*specs))
    if args.svg:
        try:
            written, missing_graphviz = explanation._save(args.svg)
        except OSError as exc:
            raise CliError(f"cannot write '{args.svg}': {exc.strerror or exc}") from None
        if missing_graphviz:
            raise CliError(missing_graphviz)
        print(f"wrote {written}")
    return 0


def _raised_in_user_code(exc: BaseException) -> str | None:
    """``file:line`` where ``exc`` was raised when that is the user's code (not fusec, NumPy or CuPy);
    None when it came from inside fusec (a bug, reported as an internal error)."""
    from fusec.errors import _skipped

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or _skipped(frames[-1].filename):
        return None
    return f"{frames[-1].filename}:{frames[-1].lineno}"


def _check_drawing_path(path: str) -> None:
    """Fail before any work when ``--svg`` names a file the drawing cannot go to."""
    from fusec.explain import DOT_SUFFIXES, RENDERED_SUFFIXES

    suffix = os.path.splitext(path)[1].lower()
    if suffix not in RENDERED_SUFFIXES + DOT_SUFFIXES:
        raise CliError(f"--svg '{path}': the drawing's format follows the suffix: use .svg (or .png, .pdf, .dot)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CliError(f"--svg '{path}': no such directory '{folder}'")


# --- fusec demo ----------------------------------------------------------------------------------


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


def _parse_size(text: str) -> int:
    try:
        value = 2 ** int(text[2:]) if text.startswith("2^") else int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer such as 67108864 or 2^26, got '{text}'"
                                         ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"the size must be at least 1, got {value}")
    return value


def _show_case(fused: fusec.Fused, name: str, formula: str, shape: tuple[int, ...]) -> None:
    spec = fusec.ArraySpec(shape, "float32")
    graph = fused.trace(spec)
    print(f"== {name}: {formula}, x = {spec} ==")
    print(graph)
    print(fused.plan(spec))
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

    from fusec.explain_run import time_ms
    from fusec.ir.interpret import interpret

    name_dev = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    name_dev = name_dev.decode() if isinstance(name_dev, bytes) else name_dev
    print(f"GPU: {name_dev}; median of 20 runs after warm-up, timed with CUDA events")
    rows, ok = [], True
    cases = [("sum_abs", (size or 1 << 26,)), ("softmax", (8192, 8192)), ("softmax", (4096, 4096))]
    for name, shape in cases:
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
    fns = {name: fusec.fuse(fn, name=name) for name, _, fn, _, _ in DEMO_CASES}
    print("fusec demo: trace sum(abs(x)) and a row softmax, show their IR, plan, bytes moved and CUDA source, "
          "run and check them\n")
    for name, formula, _, _, shape in DEMO_CASES:
        _show_case(fns[name], name, formula, shape)
    usable, why = (False, "--no-gpu given") if args.no_gpu else gpu_available()
    if usable:
        ok = _demo_gpu(fns, args.size)
    else:
        print(f"no CUDA GPU found: running the NumPy reference backend on small inputs ({why})")
        ok = _demo_numpy(fns, args.size)
    if not ok:
        return _fail("a result differs from NumPy beyond the tolerance")
    print("result checked against NumPy: OK")
    return 0


# --- the parser and main -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="fusec: a graph-level kernel-fusion compiler for NumPy/CuPy-style "
                                            "functions on NVIDIA GPUs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {fusec.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    opt = sub.add_parser("opt", help="parse a .fir IR file, run passes, print the result",
                         description="Parse FILE (IR text; '-' reads stdin), verify it, run the passes named "
                                     "with -p in order (verifying after each) and print the resulting IR.")
    opt.add_argument("file", metavar="FILE.fir", help="IR text file, or '-' for stdin")
    opt.add_argument("-p", "--passes", metavar="P1,P2,...",
                     help="comma-separated passes to run, such as canonicalize,fold,cse,dce,fuse (default: none)")
    opt.add_argument("--dump", action="store_true", help="print the IR after each pass under a '# after PASS' line")
    opt.add_argument("--no-verify", action="store_true", help="do not run the verifier before and after the passes")
    opt.set_defaults(run=cmd_opt)

    explain = sub.add_parser("explain", help="trace a function from a Python file and explain its fusion",
                             description="Import FILE.py, take FUNC (a @fusec.fuse function or a plain one), "
                                         "trace it for the argument specs given with --arg, and print the "
                                         "explanation: the IR before and after the passes, each kernel (kind, "
                                         "nodes, bytes, schedule, launch), every refusal to fuse and why, and "
                                         "the bytes moved fused vs unfused. No GPU needed (except for --run).")
    explain.add_argument("target", metavar="FILE.py:FUNC", help="the file and the function in it")
    explain.add_argument("--arg", action="append", metavar="SPEC",
                         help="one argument as DTYPE[DIMS], such as f32[8192,8192] or i64[]; repeat in order")
    explain.add_argument("--source", action="store_true", help="also print the generated CUDA source")
    explain.add_argument("--ptxas", action="store_true", help="also compile with NVRTC and print the ptxas report")
    explain.add_argument("--svg", metavar="OUT",
                         help="draw the fused DAG (each kernel a coloured cluster) to OUT with Graphviz's dot; "
                              "the suffix picks the format: .svg, .png, .pdf, or .dot for the DOT text")
    explain.add_argument("--run", action="store_true", dest="measure",
                         help="also run it on the GPU (random inputs) and report each kernel's time and GB/s, "
                              "fused vs unfused (needs a CUDA GPU with CuPy)")
    explain.add_argument("--schedule", action="append", metavar="KERNEL=SCHEDULE",
                         help="force a kernel's schedule, such as k0=rows:block_regs,threads=512 (fields left out "
                              "are the heuristics'; the report prints each kernel's schedule in this form); repeat "
                              "for other kernels")
    explain.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                         help="colour the report: auto (default) colours on a terminal unless NO_COLOR is set")
    explain.set_defaults(run=cmd_explain)

    demo = sub.add_parser("demo", help="the main job: trace, fuse, run and check two functions",
                          description="Trace sum(abs(x)) and a row softmax, print their IR, their plan (kernels "
                                      "and bytes moved fused vs unfused) and their CUDA source, then run them: "
                                      "on a CUDA GPU (CuPy), time fused vs one CuPy call per op; without one, "
                                      "run the NumPy reference backend on small inputs. Every result is checked "
                                      "against NumPy.")
    demo.add_argument("--size", type=_parse_size, metavar="N",
                      help="elements of the sum_abs input (default: 2^26 on a GPU, 2^16 on the CPU)")
    demo.add_argument("--no-gpu", action="store_true", help="use the NumPy reference backend even if a GPU is there")
    demo.set_defaults(run=cmd_demo)
    return parser


@entry_point
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.run(args)
    except CliError as exc:
        return _fail(str(exc))
    except (FusecError, OSError, ValueError) as exc:
        if isinstance(exc, BrokenPipeError):
            return 1
        return _fail(_one_line(exc))
    except KeyboardInterrupt:
        return _fail("interrupted")
    except Exception as exc:  # a bug in fusec: one line, and the traceback on request
        if os.environ.get("FUSEC_TRACEBACK"):
            raise
        return _fail(f"internal error: {type(exc).__name__}: {_one_line(exc)} "
                     "(set FUSEC_TRACEBACK=1 to see the traceback)")


if __name__ == "__main__":
    sys.exit(main())
