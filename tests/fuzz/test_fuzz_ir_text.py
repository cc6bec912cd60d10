"""The IR-text fuzzer: ``fusec opt`` on thousands of mutated ``.fir`` texts never shows a traceback.

The seeds are the committed pass cases (``tests/passes/cases/*.fir``, directive lines dropped). Each case
mutates one seed a few times (characters and tokens deleted, inserted or replaced, lines duplicated, dropped
or swapped, numbers replaced by boundary values, lists nested, ops and dtypes swapped for others) and runs
``fusec opt FILE -p canonicalize,fold,cse,dce,fuse`` through the command line's ``main``. It must print IR
that parses again, or fail with one line ``fusec: error: FILE:LINE: ...`` naming a line of the file, never an
internal error; each case within :data:`SECONDS_PER_CASE` (a hard bound: an alarm interrupts a hang).

``FUSEC_IR_FUZZ_CASES`` (default 3000) and ``FUSEC_IR_FUZZ_SEED`` (default 0) choose the cases; a failure
prints the seed file, the case number and the mutated text, which ``fusec opt`` reproduces.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from fusec.__main__ import main
from fusec.ir.dtypes import FROM_SHORT
from fusec.ir.ops import OPS
from fusec.ir.region import REGION_KINDS
from fusec.ir.text import parse

CASES = int(os.environ.get("FUSEC_IR_FUZZ_CASES", "3000"))
SEED = int(os.environ.get("FUSEC_IR_FUZZ_SEED", "0"))
SECONDS_PER_CASE = 5.0
PASSES = "canonicalize,fold,cse,dce,fuse"
CASES_DIR = Path(__file__).resolve().parent.parent / "passes" / "cases"

_TOKEN = re.compile(r"%[A-Za-z0-9_.]+|@[A-Za-z0-9_.\"]+|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[A-Za-z_][\w-]*|\S")
_NUMBER = re.compile(r"(?<![%\w])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_BOUNDARY_NUMBERS = ["0", "-1", "1", "2", "-2", "33", "255", "256", "65504", "65536", "2147483647", "2147483648",
                     "-2147483649", "4294967296", "9223372036854775807", "9223372036854775808",
                     "-9223372036854775809", "18446744073709551616", "1e308", "1e309", "-0.0", "0.5", "nan", "-nan",
                     "inf", "-inf", "1.5", "100000000000000000000000000000000000000000"]
_WORDS = (sorted(OPS) + sorted(FROM_SHORT) + list(REGION_KINDS)
          + ["func", "kernel", "return", "recomputes", "no", "kernels", "true", "false", "none", "axes", "keepdims",
             "perm", "shape", "value", "name", "index", "%x", "%0", "%1", "%99", "@k0", "@k1", "@f", "->"])
_PUNCT = list("()[]{},:=%@#\"\\-+.") + ["->", "\n", " ", "\t", "\x00", "é", "{}"]


def seeds() -> list[tuple[str, str]]:
    """(case name, IR text without its ``//`` directive lines) for every committed pass case."""
    out = []
    for path in sorted(CASES_DIR.glob("*.fir")):
        text = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("//"))
        out.append((path.stem, text + "\n"))
    return out


def mutate(text: str, rng: random.Random) -> str:
    """``text`` with 1 to 4 random mutations."""
    for _ in range(rng.randint(1, 4)):
        lines = text.split("\n")
        kind = rng.randrange(10)
        if kind == 0 and len(text) > 1:  # delete a span of characters
            i = rng.randrange(len(text))
            text = text[:i] + text[i + rng.randint(1, 6):]
        elif kind == 1:  # insert punctuation or a word
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(_PUNCT + _WORDS) + text[i:]
        elif kind == 2:  # replace a token by another token of the text, or a word
            tokens = list(_TOKEN.finditer(text))
            if tokens:
                m = rng.choice(tokens)
                other = rng.choice(tokens).group() if rng.random() < 0.5 else rng.choice(_WORDS)
                text = text[:m.start()] + other + text[m.end():]
        elif kind == 3:  # a number becomes a boundary value
            numbers = list(_NUMBER.finditer(text))
            if numbers:
                m = rng.choice(numbers)
                text = text[:m.start()] + rng.choice(_BOUNDARY_NUMBERS) + text[m.end():]
        elif kind == 4 and len(lines) > 1:  # duplicate a line
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
            text = "\n".join(lines)
        elif kind == 5 and len(lines) > 1:  # drop a line
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif kind == 6 and len(lines) > 2:  # swap two lines
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif kind == 7:  # nest a list (or an attribute) deeply
            depth = rng.choice([2, 17, 300, 5000])
            i = text.find("[", rng.randrange(len(text) + 1))
            if i >= 0:
                text = text[:i] + "[" * depth + text[i + 1:].replace("]", "]" * depth, 1)
        elif kind == 8:  # a dimension list grows or a shape changes
            text = re.sub(r"\[(\d+(?:,\d+)*)\]", lambda m: "[" + ",".join([m.group(1)] * rng.randint(1, 12)) + "]"
                          if rng.random() < 0.3 else m.group(), text)
        else:  # truncate
            text = text[:rng.randrange(len(text) + 1)]
    return text


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _time_bound(seconds: float):
    """Raise :class:`_Timeout` in this (the main) thread after ``seconds``: a hang fails the case."""
    def on_alarm(signum, frame):
        raise _Timeout(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_opt(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["opt", str(path), "-p", PASSES])
    return code, out.getvalue(), err.getvalue()


def check_case(path: Path) -> str | None:
    """What is wrong with ``fusec opt`` on the file at ``path``, or None."""
    code, out, err = run_opt(path)
    if code == 0:
        try:
            parse(out, filename="output.fir")
        except Exception as exc:  # the printed result must be IR text again
            return f"the output does not parse: {type(exc).__name__}: {exc}"
        return None
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("fusec: error: "):
        return f"not a one-line error: {err!r}"
    if "internal error" in err or "Traceback" in err:
        return f"an internal error: {lines[0]}"
    if not re.search(rf"{re.escape(path.name)}:\d+", lines[0]):
        return f"the error names no line of {path.name}: {lines[0]}"
    return None


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the time bound uses SIGALRM")
def test_fuzz_ir_text_mutations_give_one_line_errors_with_a_line(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    pool = seeds()
    assert len(pool) >= 40
    start = time.perf_counter()
    failures: list[str] = []
    slowest = 0.0
    recursion_limit = sys.getrecursionlimit()
    for case in range(CASES):
        name, seed_text = pool[case % len(pool)]
        text = mutate(seed_text, rng)
        path = tmp_path / f"case{case}.fir"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        t0 = time.perf_counter()
        try:
            with _time_bound(SECONDS_PER_CASE):
                problem = check_case(path)
        except _Timeout as exc:
            problem = f"took {exc}"
        slowest = max(slowest, time.perf_counter() - t0)
        if problem is not None:
            failures.append(f"case {case} (from {name}.fir, seed {SEED}): {problem}\n--- text ---\n{text}\n------")
            if len(failures) >= 5:
                break
        path.unlink()
    assert sys.getrecursionlimit() == recursion_limit
    print(f"\n{CASES} mutated IR texts in {time.perf_counter() - start:.1f} s (slowest {slowest:.2f} s)")
    assert not failures, f"{len(failures)} failing cases:\n" + "\n".join(failures)


def test_fuzz_ir_text_mutations_are_deterministic() -> None:
    (_, text), *_ = seeds()
    assert mutate(text, random.Random(7)) == mutate(text, random.Random(7))
    assert any(mutate(text, random.Random(s)) != text for s in range(5))
