"""The pass cases: ``tests/passes/cases/*.fir``, one behaviour each, run by one driver (MLIR lit style).

A case is IR text with ``//`` directive lines (ignored by the IR, kept as blank lines so that parse
errors name the file's own line numbers)::

    // what the case shows, in a sentence
    // RUN: canonicalize,fold           passes, run through fusec.passes.manager.optimize_text
    func @f(%x: f32[4]) -> f32[4] { ... }
    // CHECK: func @f(%x: f32[4]) -> f32[4] {       the full expected output, line by line
    // CHECK:   return %x
    // CHECK: }
    // CHECK-REFUSAL: different iteration space    each refusal to fuse is matched by one of these
    // CHECK-ERROR: bad.fir:4: unknown op          instead of CHECK: optimize_text must raise this
                                                   (``line 4: unknown op`` says the same: the error's place)

``optimize_text`` is the code path of ``fusec opt FILE -p PASSES``; the refusals come from the graph
its ``dump`` callback sees after the last pass. Every case that is not an error also has its input
and its expected output checked to compute the same values, and its expected text to be canonical.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from fusec.ir.graph import Graph
from fusec.ir.interpret import interpret
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.passes.manager import optimize_text
from fusec.runtime.plan import execute_numpy, make_plan
from fusec.support.errors import FusecError
from tests.helpers import assert_matches_numpy, random_arguments, seed_of

CASES_DIR = Path(__file__).parent / "cases"
CASE_FILES = sorted(CASES_DIR.glob("*.fir"))


@dataclass(frozen=True)
class Case:
    name: str
    passes: str
    ir: str  # the file with directive lines blanked
    expected: str | None  # the CHECK lines joined, or None for an error case
    error: str | None
    refusals: tuple[str, ...]


def _directive(line: str, word: str) -> str | None:
    prefix = f"// {word}:"
    if line.startswith(prefix):
        rest = line[len(prefix):]
        return rest[1:] if rest.startswith(" ") else rest
    return None


def load_case(path: Path) -> Case:
    passes, error, checks, refusals, ir = None, None, [], [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("//"):
            ir.append("")
            if (value := _directive(line, "RUN")) is not None:
                assert passes is None, f"{path.name}: two RUN lines"
                passes = value.strip()
            elif (value := _directive(line, "CHECK")) is not None:
                checks.append(value)
            elif (value := _directive(line, "CHECK-ERROR")) is not None:
                error = value.strip()
            elif (value := _directive(line, "CHECK-REFUSAL")) is not None:
                refusals.append(value.strip())
        else:
            ir.append(line)
    assert passes is not None, f"{path.name}: no '// RUN: passes' line"
    assert (error is None) != (not checks), f"{path.name}: needs CHECK lines or one CHECK-ERROR line, not both"
    if error is not None and (m := re.fullmatch(r"line (\d+): (.*)", error)):
        error = f"{path.stem}.fir:{m[1]}: {m[2]}"  # errors name their place as FILE:LINE
    return Case(path.stem, passes, "\n".join(ir), "\n".join(checks) if checks else None, error, tuple(refusals))


CASES = [load_case(p) for p in CASE_FILES]
GOOD_CASES = [c for c in CASES if c.error is None]


def run_case(case: Case) -> tuple[str, Graph | None]:
    """The printed result of the case's passes, and the graph after the last pass (None if no passes)."""
    last: list[Graph] = []
    text = optimize_text(case.ir, case.passes, filename=f"{case.name}.fir", dump=lambda _, g: last.append(g))
    return text, (last[-1] if last else None)


def _diff(expected: str, actual: str, name: str) -> str:
    return "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                          f"{name}.fir (CHECK)", f"{name}.fir (actual)", lineterm=""))


def test_cases_are_many_and_cover_every_pass() -> None:
    assert len(CASES) >= 45
    for name in ("canonicalize", "fold", "cse", "dce", "fuse"):
        assert any(name in c.passes.split(",") for c in CASES), name
    assert any(c.error for c in CASES) and any(c.refusals for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case) -> None:
    if case.error is not None:
        with pytest.raises(FusecError) as info:
            run_case(case)
        assert case.error in str(info.value), f"expected an error containing {case.error!r}, got:\n{info.value}"
        return
    actual, graph = run_case(case)
    assert case.expected is not None
    if actual != case.expected:
        pytest.fail(f"{case.name}: output differs from the CHECK lines\n{_diff(case.expected, actual, case.name)}",
                    pytrace=False)
    refusals = graph.refusals if graph is not None else ()
    for want in case.refusals:
        assert any(want in r for r in refusals), f"no refusal contains {want!r}; refusals: {list(refusals)}"
    for got in refusals:
        assert any(want in got for want in case.refusals), f"refusal not expected by a CHECK-REFUSAL line: {got!r}"


@pytest.mark.parametrize("case", GOOD_CASES, ids=[c.name for c in GOOD_CASES])
def test_case_expected_is_canonical_and_equivalent(case: Case) -> None:
    """The CHECK text re-prints as itself, computes what the input computes (exactly, on data with
    NaN, inf and -0.0), and so does the input run kernel by kernel through its plan."""
    assert case.expected is not None
    before, after = parse(case.ir), parse(case.expected)
    assert print_graph(after) == case.expected
    rng = np.random.default_rng(seed_of(case.name))
    args = random_arguments(rng, before)
    try:
        want = interpret(before, args)
    except ValueError:  # NumPy raises for this input (an integer to a negative power): so must the result
        with pytest.raises(ValueError):
            interpret(after, args)
        return
    for got in (interpret(after, args), execute_numpy(make_plan(before), args)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_matches_numpy(g, w, exact=True)
