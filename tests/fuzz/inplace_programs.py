"""Random in-place programs, run through ``fusec.fuse`` and compared with plain NumPy.

Each program is Python source text: a function of one to three array arguments that mixes copies
(``.copy()``, ``np.array``, ``astype``, ``x * 1``), views (slices with any step, negative steps, integer
indices, ``None``, transposes, reshapes, ``np.asarray``, flips, broadcasts), assignments and augmented
assignments to parts of arguments, of intermediates and of views (``x[1:, ::2] = v``, ``v[0] += 1``,
``x += y``, ``x[...] = v``, ``x[x > 0] = 1``, ``np.add(x, y, out=x)``), arithmetic and reductions, and returns a
few of its names (arguments and views among them). The generator runs every statement on NumPy as it writes it (so each
program runs in NumPy, and every shape is known); a statement NumPy refuses is dropped, and so is an assignment
whose result in NumPy depends on the order its loop reads an overlapping right-hand side (:meth:`_Writer.keep`):
fusec reads every right-hand side before writing, as CORRECTNESS.md says.

A run compares, on fresh copies of the same inputs, ``fusec.fuse(f)(*args)`` (NumPy arguments: fusec's NumPy
backend; CuPy arguments: the GPU) with ``f(*args)`` in NumPy: the results (dtype, shape and values, exactly: the
data are small integers, the arithmetic exact) and what each argument holds afterwards. A ``FusecError`` is a
refusal (counted); any other exception is an error; anything that differs is a mismatch.

    python -m tests.fuzz.inplace_programs --count 10000 --seed 0      # ran, refused, mismatched, errors
    python -m tests.fuzz.inplace_programs --seed 0 --show 17           # program 17 of seed 0, and its verdict

Program ``i`` of seed ``s`` is the same on every machine (``numpy.random.default_rng([s, i])``).
"""

from __future__ import annotations

import argparse
import linecache
import re
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fusec
from fusec.support.errors import FusecError

DTYPES = ("float64", "float32", "int64")
MAX_STATEMENTS = 9
_TRIES = 40  # candidate statements drawn per statement kept


@dataclass(frozen=True)
class Program:
    """A generated function: its source (``def f(...)``) and the arguments it is called with."""

    seed: int
    index: int
    source: str
    arguments: tuple[np.ndarray, ...]

    @property
    def name(self) -> str:
        return f"inplace-fuzz seed {self.seed} program {self.index}"

    def function(self) -> Callable[..., Any]:
        """The program as a Python function (its source registered with ``linecache``, so tracebacks and fusec's
        messages show its lines)."""
        filename = f"<{self.name}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        namespace: dict[str, Any] = {"np": np}
        exec(compile(self.source, filename, "exec"), namespace)  # noqa: S102 - our own generated source
        return namespace["f"]


@dataclass
class Verdict:
    """One program's run: ``kind`` is ``"ok"``, ``"refused"`` (a FusecError), ``"mismatch"`` or ``"error"``."""

    program: Program
    kind: str
    detail: str = ""


@dataclass
class Summary:
    """Counts over a run of programs, and the failures in full."""

    seed: int
    ran: int = 0  # programs fusec ran (ok or mismatched)
    refused: int = 0
    mismatched: int = 0
    errors: int = 0
    seconds: float = 0.0
    failures: list[Verdict] = field(default_factory=list)
    refusals: dict[str, int] = field(default_factory=dict)  # first line of each refusal message -> count

    def add(self, verdict: Verdict) -> None:
        if verdict.kind == "refused":
            self.refused += 1
            reason = _reason(verdict.detail)
            self.refusals[reason] = self.refusals.get(reason, 0) + 1
            return
        if verdict.kind == "error":
            self.errors += 1
        else:
            self.ran += 1
            self.mismatched += verdict.kind == "mismatch"
        if verdict.kind != "ok":
            self.failures.append(verdict)

    def line(self) -> str:
        total = self.ran + self.refused + self.errors
        return (f"inplace fuzz: seed {self.seed}, {total} programs: {self.ran} ran, {self.refused} refused, "
                f"{self.mismatched} mismatched, {self.errors} errors ({self.seconds:.1f} s)")

    def report(self, limit: int = 5) -> str:
        parts = [self.line()]
        for verdict in self.failures[:limit]:
            parts.append(f"--- {verdict.program.name}: {verdict.kind}\n{verdict.program.source}"
                         f"arguments: {list(verdict.program.arguments)}\n{verdict.detail}")
        if len(self.failures) > limit:
            parts.append(f"... and {len(self.failures) - limit} more")
        return "\n".join(parts)


def _reason(message: str) -> str:
    """A refusal's message without its location (``file:line: ``) and hint: what groups refusals."""
    first = message.splitlines()[0] if message else ""
    first = re.sub(r"<inplace-fuzz [^>]*>(:\d+)?", "<program>", re.sub(r"^<inplace-fuzz [^>]*>:\d+: ", "", first))
    first = first.replace(" made at <program>", "")
    first = re.sub(r"\b[a-z]+\d*\[[-0-9, ]*\]", "T", first)  # f32[3, 4] -> T
    return re.sub(r"x\[[^\]]*\]", "x[key]", first)[:100]


# --- generation -------------------------------------------------------------------------------------------
class _Writer:
    """Draws statements for one program, running each on NumPy as it is kept (``env``: the program's names)."""

    def __init__(self, rng: np.random.Generator, arguments: dict[str, np.ndarray]) -> None:
        self.rng = rng
        self.initial = arguments
        self.env: dict[str, Any] = {name: a.copy() for name, a in arguments.items()}
        self.arguments = tuple(arguments)
        self.lines: list[str] = []
        self.count = 0

    # -- random pieces
    def pick(self, options: list[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def name(self) -> str:
        """An existing name, arguments more often than the others."""
        names = [n for n, v in self.env.items() if isinstance(v, np.ndarray)]
        weights = np.array([3.0 if n in self.arguments else 1.0 for n in names])
        return names[int(self.rng.choice(len(names), p=weights / weights.sum()))]

    def scalar(self, dtype: np.dtype) -> str:
        value = int(self.rng.integers(-4, 5))
        return f"{value}.0" if dtype.kind == "f" and self.chance(0.5) else str(value)

    def key(self, shape: tuple[int, ...]) -> str:
        """A basic index of an array of ``shape``: per axis ``:``, an integer, or a slice with a step; sometimes
        ``...`` or ``None``."""
        parts = []
        for d in shape:
            r = self.rng.random()
            if r < 0.3:
                parts.append(":")
            elif r < 0.5 and d > 0:
                parts.append(str(int(self.rng.integers(-d, d))))
            else:
                start = self.pick(["", "", str(int(self.rng.integers(-d, d + 1)))])
                stop = self.pick(["", "", str(int(self.rng.integers(-d, d + 1)))])
                step = self.pick(["", "", "2", "-1", "-1", "-2", "3"])
                parts.append(f"{start}:{stop}" + (f":{step}" if step else ""))
        if parts and self.chance(0.15):
            parts = parts[:int(self.rng.integers(len(parts)))] + ["..."]
        if self.chance(0.1):
            parts.insert(int(self.rng.integers(len(parts) + 1)), "None")
        return ", ".join(parts) if parts else "..."

    def factor_shape(self, size: int) -> tuple[int, ...]:
        """A random shape of ``size`` elements."""
        dims: list[int] = []
        rest = size
        for f in (2, 3, 2, 5):
            if rest % f == 0 and rest > f and self.chance(0.5):
                dims.append(f)
                rest //= f
        dims.append(rest)
        self.rng.shuffle(dims)
        return tuple(dims)

    # -- expressions (text), each of an existing name
    def view(self, x: str) -> str:
        a = self.env_value(x)
        options = [f"{x}[{self.key(a.shape)}]", f"{x}[::-1]", f"np.asarray({x})", f"{x}[None]"]
        if a.ndim >= 2:
            perm = tuple(int(p) for p in self.rng.permutation(a.ndim))
            options += [f"{x}.T", f"{x}.transpose{perm}", f"np.swapaxes({x}, 0, -1)", f"np.moveaxis({x}, 0, -1)"]
        if a.ndim >= 1:
            options += [f"np.flip({x}, {int(self.rng.integers(a.ndim))})", f"{x}[..., ::-2]",
                        f"np.expand_dims({x}, {int(self.rng.integers(a.ndim + 1))})"]
        if a.size:
            options += [f"{x}.reshape({self.factor_shape(a.size)})", f"{x}.ravel()", f"np.ravel({x})"]
        if a.ndim and 1 in a.shape:
            options.append(f"np.squeeze({x})")
        options.append(f"np.broadcast_to({x}, {(2, *a.shape)})")
        options.append(f"np.atleast_2d({x})")
        return self.pick(options)

    def copy(self, x: str) -> str:
        options = [f"{x}.copy()", f"np.array({x})", f"{x}.astype({x}.dtype)", f"{x}.astype(np.float64)",
                   f"{x} * 1", f"{x} + 0", f"np.asarray({x}, dtype=np.float32)", f"np.ascontiguousarray({x})",
                   f"{x}.flatten()", f"np.copy({x})"]
        a = self.env_value(x)
        if a.ndim and a.shape[0] <= 8:  # a loop over the first axis, and the rows in a list
            options += [f"np.stack(list({x}))", f"np.array([r for r in {x}])"]
        return self.pick(options)

    def arithmetic(self, x: str, y: str) -> str:
        a = self.env_value(x)
        axis = int(self.rng.integers(a.ndim)) if a.ndim else None
        options = [f"{x} + {y}", f"{x} - {y}", f"{x} * 2", f"np.maximum({x}, {y})", f"-{x}", f"np.abs({x})",
                   f"np.where({x} > 0, {x}, {y})", f"{x} * {y}", f"{x} + {self.scalar(a.dtype)}"]
        if axis is not None:
            options += [f"{x}.sum(axis={axis})", f"{x}.max(axis={axis}, keepdims=True)", f"np.cumsum({x}, axis={axis})"]
        # Python lists where NumPy takes an array (NumPy refuses mismatched shapes: such candidates are dropped)
        options += [f"np.mean([{x}, {y}], axis=0)", f"np.max(({x}, {y}), axis=0)"]
        if a.ndim and a.shape[-1] <= 8:
            options.append(f"{x} + {[int(v) for v in self.rng.integers(-3, 4, a.shape[-1])]}")
        return self.pick(options)

    def operand(self) -> str:
        """A name, or a view of one."""
        x = self.name()
        return self.view(x) if self.chance(0.3) else x

    def expression(self) -> str:
        r = self.rng.random()
        x = self.name()
        if r < 0.4:
            return self.view(x)
        if r < 0.65:
            return self.copy(self.view(x) if self.chance(0.4) else x)
        return self.arithmetic(self.operand(), self.operand())

    def env_value(self, text: str) -> np.ndarray:
        return np.asarray(eval(text, {"np": np}, dict(self.env)))  # noqa: S307 - our own generated text

    def value_for(self, shape: tuple[int, ...], dtype: np.dtype) -> str:
        """Text of a value that broadcasts to ``shape``: a number, or a name, view or expression that fits."""
        if self.chance(0.25):
            return self.scalar(dtype)
        for _ in range(_TRIES):
            text = self.pick([self.name, self.operand, self.expression, self.expression])()
            if self.fits(text, shape):
                return text
            x = self.name()  # an index of another name that selects the same shape (s[:-1] = s[1:])
            text = f"{x}[{self.key(self.env[x].shape)}]"
            if self.fits(text, shape):
                return text
        return self.scalar(dtype)

    def fits(self, text: str, shape: tuple[int, ...]) -> bool:
        try:
            with np.errstate(all="ignore"):
                value = self.env_value(text)
            return np.broadcast_shapes(value.shape, shape) == shape
        except Exception:
            return False

    # -- statements
    def statement(self) -> tuple[str, str | None]:
        """A statement, and for an assignment ``x[key] = v`` the same with ``v`` copied first."""
        r = self.rng.random()
        target = self.name()
        a = self.env[target]
        if r < 0.3:
            return f"v{self.count} = {self.expression()}", None
        if r < 0.62:
            key = self.key(a.shape)
            try:
                selected = a[eval(f"np.s_[{key}]", {"np": np})].shape  # noqa: S307
            except Exception:
                return "", None
            op = self.pick(["=", "=", "=", "+=", "-=", "*="])
            value = self.value_for(selected, a.dtype)
            return f"{target}[{key}] {op} {value}", (f"{target}[{key}] = np.array({value})" if op == "=" else None)
        if r < 0.77:
            op = self.pick(["+=", "-=", "*="])
            return f"{target} {op} {self.value_for(a.shape, a.dtype)}", None
        if r < 0.87:
            whole = self.pick(["...", ":"]) if a.ndim else "..."
            value = self.value_for(a.shape, a.dtype)
            return f"{target}[{whole}] = {value}", f"{target}[{whole}] = np.array({value})"
        if r < 0.92:
            ufunc = self.pick(["add", "subtract", "maximum", "multiply"])
            return f"np.{ufunc}({target}, {self.value_for(a.shape, a.dtype)}, out={target})", None
        if r < 0.96:
            return f"{target}[{target} > {self.scalar(a.dtype)}] = {self.scalar(a.dtype)}", None
        return f"v{self.count} = {target}", None

    def replay(self, lines: list[str]) -> dict[str, Any] | None:
        """The program's names after ``lines``, run on fresh copies of the arguments (None where NumPy raises)."""
        env: dict[str, Any] = {name: a.copy() for name, a in self.initial.items()}
        try:
            with np.errstate(all="ignore"):
                for line in lines:
                    exec(line, {"np": np}, env)  # noqa: S102 - our own generated text
        except Exception:
            return None
        return env

    def keep(self, line: str, copied_first: str | None = None) -> bool:
        """Keep ``line`` if NumPy runs it (and it binds an array). An assignment whose right-hand side overlaps its
        target is kept only where NumPy's result is the one of the right-hand side copied first (``copied_first``):
        NumPy copies it where its loop would read elements it wrote, except for a 1-d target read with a stride of
        the same sign and another size (``a[:, -1] = a[-2, :]``), where its result is its loop's order."""
        if not line:
            return False
        env = self.replay([*self.lines, line])
        if env is None:
            return False  # NumPy refuses it (a shape, a cast, a read-only view)
        if copied_first is not None:
            other = self.replay([*self.lines, copied_first])
            if other is None or any(isinstance(v, np.ndarray) and not np.array_equal(v, other[n], equal_nan=True)
                                    for n, v in env.items()):
                return False
        if line.startswith(f"v{self.count} ="):
            if not isinstance(env[f"v{self.count}"], np.ndarray):
                return False
            self.count += 1
        self.env = env
        self.lines.append(line)
        return True

    def returns(self) -> str:
        names = [n for n, v in self.env.items() if isinstance(v, np.ndarray)]
        chosen = list(dict.fromkeys(self.pick(names) for _ in range(int(self.rng.integers(1, 4)))))
        if self.chance(0.3):
            chosen.append(f"{self.pick(names)} + 0")
        return chosen[0] if len(chosen) == 1 and self.chance(0.5) else "(" + ", ".join(chosen) + ",)"


def _arguments(rng: np.random.Generator) -> dict[str, np.ndarray]:
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(d) for d in rng.integers(2, 5, size=ndim))
    out = {}
    for name in ("a", "b", "c")[:int(rng.integers(1, 4))]:
        dtype = np.dtype(DTYPES[int(rng.integers(len(DTYPES)))])
        this = shape if rng.random() < 0.7 else tuple(int(d) for d in rng.integers(2, 5, size=int(rng.integers(1, 4))))
        out[name] = rng.integers(-4, 5, size=this).astype(dtype)
    return out


def generate(seed: int, index: int) -> Program:
    """Program ``index`` of ``seed``."""
    rng = np.random.default_rng([seed, index])
    arguments = _arguments(rng)
    writer = _Writer(rng, arguments)
    wanted = int(rng.integers(2, MAX_STATEMENTS + 1))
    for _ in range(wanted * 4):
        if len(writer.lines) >= wanted:
            break
        writer.keep(*writer.statement())
    body = "".join(f"    {line}\n" for line in writer.lines)
    source = f"def f({', '.join(arguments)}):\n{body}    return {writer.returns()}\n"
    return Program(seed, index, source, tuple(arguments.values()))


def programs(count: int, seed: int, start: int = 0) -> Iterable[Program]:
    for i in range(start, start + count):
        yield generate(seed, i)


# --- running ----------------------------------------------------------------------------------------------
def _as_tuple(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _difference(what: str, got: Any, want: Any) -> str | None:
    want = np.asarray(want)
    got = np.asarray(got)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: {got.dtype}{list(got.shape)} where NumPy gives {want.dtype}{list(want.shape)}"
    if not np.array_equal(got, want, equal_nan=want.dtype.kind == "f"):
        return f"{what}: {got.tolist()} where NumPy gives {want.tolist()}"
    return None


def run(program: Program, xp: Any = np) -> Verdict:
    """Run ``program`` through ``fusec.fuse`` on ``xp`` copies of its arguments (``numpy``: the NumPy backend;
    ``cupy``: the GPU) and compare with NumPy on copies of the same inputs."""
    fn = program.function()
    expected_args = [a.copy() for a in program.arguments]
    with np.errstate(all="ignore"):
        expected = _as_tuple(fn(*expected_args))
    to_host = (lambda a: a) if xp is np else xp.asnumpy
    args = [xp.asarray(a.copy()) for a in program.arguments]
    try:
        with np.errstate(all="ignore"):
            got = _as_tuple(fusec.fuse(fn)(*args))
    except FusecError as exc:
        return Verdict(program, "refused", str(exc))
    except Exception:
        return Verdict(program, "error", traceback.format_exc(limit=-4))
    problems = []
    if len(got) != len(expected):
        problems.append(f"{len(got)} results where NumPy gives {len(expected)}")
    for k, (g, w) in enumerate(zip(got, expected)):
        problems.append(_difference(f"result {k}", to_host(g) if not np.isscalar(g) else g, w))
    for name, g, w in zip("abc", args, expected_args):
        problems.append(_difference(f"argument {name} afterwards", to_host(g), w))
    problems = [p for p in problems if p]
    return Verdict(program, "mismatch" if problems else "ok", "\n".join(problems))


def run_programs(count: int, seed: int, xp: Any = np, start: int = 0, time_limit: float | None = None) -> Summary:
    """Run ``count`` programs of ``seed`` (from ``start``) on ``xp`` arrays; stop early past ``time_limit``
    seconds."""
    summary = Summary(seed)
    began = time.perf_counter()
    for program in programs(count, seed, start):
        summary.add(run(program, xp))
        if time_limit is not None and time.perf_counter() - began > time_limit:
            break
    summary.seconds = time.perf_counter() - began
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Random in-place programs: fusec against NumPy.")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--show", type=int, default=None, help="print one program and its verdict")
    parser.add_argument("--failures", type=int, default=5, help="how many failures to print in full")
    parser.add_argument("--refusals", action="store_true", help="print the refusals by reason")
    args = parser.parse_args(argv)
    if args.show is not None:
        verdict = run(generate(args.seed, args.show))
        print(verdict.program.source, f"arguments: {list(verdict.program.arguments)}", verdict.kind, verdict.detail,
              sep="\n")
        return 0
    summary = run_programs(args.count, args.seed, start=args.start)
    print(summary.report(args.failures))
    if args.refusals:
        for reason, n in sorted(summary.refusals.items(), key=lambda kv: -kv[1]):
            print(f"{n:6d}  {reason}")
    return 1 if summary.mismatched or summary.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
