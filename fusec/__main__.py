"""The ``fusec`` command line: ``opt``, ``explain``, ``demo`` (:mod:`fusec.cli.demo`) and ``cache``
(:mod:`fusec.cli.cache`).

    fusec opt FILE.fir -p canonicalize,fold,cse,dce,fuse [--dump] [--no-verify]
    fusec explain FILE.py:FUNC --arg f32[8192,8192] [--scalar NAME=VALUE] [--schedule K=S] [--svg OUT]
                  [--source] [--full] [--ptxas] [--run] [--color WHEN]
    fusec demo [--size N] [--no-gpu] [--verbose]
    fusec cache [clear]

Every error a user can cause (a missing file, a bad spec, IR that does not parse or verify, an unknown
pass, a function that does not trace or raises, ``--svg`` without Graphviz, ``--run`` without a GPU)
ends in one line ``fusec: error: ...`` on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import sys
import textwrap
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import fusec
from fusec.cli import cache as cli_cache
from fusec.cli import demo as cli_demo
from fusec.cli.demo import DEMO_CASES, cmd_demo, traffic  # noqa: F401  (the demo's pieces, as before)
from fusec.runtime.gpu import gpu_status as gpu_available  # noqa: F401  (tests and users import it from here)
from fusec.runtime.gpu import require_gpu
from fusec.schedule import ScheduleError
from fusec.support.errors import FusecError, VerifyError, entry_point

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


def passes_epilog() -> str:
    """The registered passes, one line each, for ``fusec opt --help``."""
    from fusec.passes.manager import DEFAULT_PIPELINE, PASSES, get_pass

    get_pass(DEFAULT_PIPELINE[0])  # registers them all
    width = max(len(n) for n in PASSES)
    lines = [f"  {name:{width}}  {PASSES[name].summary}" for name in sorted(PASSES)]
    return ("passes (-p, in the order given):\n" + "\n".join(lines) + "\n\n"
            + textwrap.fill(f"fusec.fuse runs {','.join(DEFAULT_PIPELINE)}.", 100))


def cmd_opt(args: argparse.Namespace) -> int:
    from fusec.ir.printer import print_graph
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


def parse_scalars(texts: Sequence[str]) -> dict[str, Any]:
    """``--scalar NAME=VALUE`` options -> {name: a Python number}: an int, a float (``nan``, ``inf``, ``1e-3``)
    or a bool (``True``/``False``)."""
    out: dict[str, Any] = {}
    words = {"true": True, "false": False, "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
             "+inf": float("inf")}
    for text in texts:
        name, sep, value = (part.strip() for part in text.partition("="))
        if not sep or not name.isidentifier() or not value:
            raise CliError(f"bad --scalar '{text}': expected NAME=VALUE such as temperature=0.5")
        if value.lower() in words:
            out[name] = words[value.lower()]
            continue
        try:
            out[name] = int(value, 0)
        except ValueError:
            try:
                out[name] = float(value)
            except ValueError:
                raise CliError(f"bad --scalar '{text}': '{value}' is not a number (an int, a float such as 0.5 "
                               "or nan, or True/False)") from None
    return out


def call_arguments(fused: fusec.Fused, specs: list[Any], scalars: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments of one call of ``fused``: its parameters in order, each named in
    ``scalars`` taking that value, every other positional one the next of ``specs`` (``*args`` the rest)."""
    params = inspect.signature(fused.fn).parameters
    unknown = sorted(set(scalars) - set(params))
    if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        raise CliError(f"--scalar {unknown[0]}: {fused.name} has no parameter '{unknown[0]}' (its parameters: "
                       f"{', '.join(params)})")
    positional, keywords, queue, left = [], {}, list(specs), dict(scalars)
    for p in params.values():
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            if p.name in left:
                positional.append(left.pop(p.name))
            elif queue:
                positional.append(queue.pop(0))
            else:
                break
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            positional += queue
            queue = []
    positional += queue  # too many --arg: the call's own error says so
    keywords.update(left)
    return positional, keywords


def cmd_explain(args: argparse.Namespace) -> int:
    fused = load_function(args.target)
    specs, scalars = call_arguments(fused, parse_specs(args.arg or []), parse_scalars(args.scalar or []))
    if args.svg:
        _check_drawing_path(args.svg)
    if args.measure:
        require_gpu("fusec explain --run", hint="drop --run to see the plan without a GPU")
    try:
        if args.schedule:
            fused = fused.with_schedules(parse_schedules(args.schedule))
        explanation = fused.explain(*specs, run=args.measure, **scalars)
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
    if args.source or args.full:
        print(fused.cuda_source(*specs, full=args.full, **scalars))
    if args.ptxas:
        print(fused.ptxas(*specs, **scalars))
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
    from fusec.support.errors import library_file

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or library_file(frames[-1].filename):
        return None
    return f"{frames[-1].filename}:{frames[-1].lineno}"


def _check_drawing_path(path: str) -> None:
    """Fail before any work when ``--svg`` names a file the drawing cannot go to."""
    from fusec.inspect.explain import DOT_SUFFIXES, RENDERED_SUFFIXES

    suffix = os.path.splitext(path)[1].lower()
    if suffix not in RENDERED_SUFFIXES + DOT_SUFFIXES:
        raise CliError(f"--svg '{path}': the drawing's format follows the suffix: use .svg (or .png, .pdf, .dot)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CliError(f"--svg '{path}': no such directory '{folder}'")


# --- the parser and main -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="fusec: a graph-level kernel-fusion compiler for NumPy/CuPy-style "
                                            "functions on NVIDIA GPUs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {fusec.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    opt = sub.add_parser("opt", help="parse a .fir IR file, run passes, print the result",
                         description="Parse FILE (IR text; '-' reads stdin), verify it, run the passes named "
                                     "with -p in order (verifying after each) and print the resulting IR.",
                         epilog=passes_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
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
    explain.add_argument("--scalar", action="append", metavar="NAME=VALUE",
                         help="a Python-number parameter of FUNC, such as temperature=0.5 (an int, a float, nan, "
                              "inf, True/False); repeat for others. --arg fills the other parameters in order")
    explain.add_argument("--source", action="store_true",
                         help="also print each kernel's CUDA source, its helper headers and accumulator notes")
    explain.add_argument("--full", action="store_true",
                         help="with --source (or alone): each kernel's exact translation unit, headers included")
    explain.add_argument("--ptxas", action="store_true",
                         help="also compile with NVRTC (no GPU needed) and print a table per kernel: registers, "
                              "spills, stack, shared memory, threads, blocks and occupancy per SM")
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

    cli_demo.add_parser(sub)
    cli_cache.add_parser(sub)
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
