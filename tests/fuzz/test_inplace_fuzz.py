"""The in-place program fuzzer (``tests/fuzz/inplace_programs.py``): random programs of copies, views, assignments
and augmented assignments to parts of arguments, intermediates and views, run through ``fusec.fuse`` and compared
with NumPy (results and final argument contents). A refusal must be a ``FusecError`` (counted); a wrong result or
any other exception fails the test, printing each failing program in full.

On the NumPy backend: ``FUSEC_INPLACE_FUZZ_COUNT`` programs (default 500) of seed ``FUSEC_INPLACE_FUZZ_SEED``
(default: a new seed each day, printed with the counts). On the GPU (``pytest -m gpu -s
tests/fuzz/test_inplace_fuzz.py``; skipped where CuPy sees no GPU): the programs with CuPy arguments, every kernel's
outputs poisoned before its launch, ``FUSEC_INPLACE_FUZZ_COUNT`` programs (default 300) of seed
``FUSEC_INPLACE_FUZZ_SEED`` (default 0). A failure reproduces on the CPU first with ``python -m
tests.fuzz.inplace_programs --seed S --show I``.
"""

from __future__ import annotations

import datetime
import os

import numpy as np
import pytest

from tests.backends import on_backends
from tests.fuzz import inplace_programs

COUNT = int(os.environ.get("FUSEC_INPLACE_FUZZ_COUNT", "500"))
SEED = int(os.environ.get("FUSEC_INPLACE_FUZZ_SEED", datetime.date.today().toordinal()))
GPU_COUNT = int(os.environ.get("FUSEC_INPLACE_FUZZ_COUNT", "300"))
GPU_SEED = int(os.environ.get("FUSEC_INPLACE_FUZZ_SEED", "0"))
MOSTLY_RUN = 0.6  # at least this share of the programs run (the others are refused): what the fuzzer tests


@pytest.mark.parametrize("backend, count, seed", on_backends(numpy=[(COUNT, SEED)], cupy=[(GPU_COUNT, GPU_SEED)]),
                         ids=["numpy", "cupy"])
def test_inplace_programs_match_numpy(backend, count: int, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    backend.poison_outputs(monkeypatch)
    summary = inplace_programs.run_programs(count, seed, xp=backend.xp)
    where = " on the GPU" if backend.gpu else ""
    print(f"\n{summary.line()}{where} (FUSEC_INPLACE_FUZZ_COUNT, FUSEC_INPLACE_FUZZ_SEED)")
    assert not summary.failures, summary.report(limit=10)
    if not backend.gpu:  # the share of programs that run: the NumPy half's check
        assert summary.ran >= MOSTLY_RUN * count, summary.report() + "\nrefusals:\n" + "\n".join(
            f"{n:5d}  {reason}" for reason, n in sorted(summary.refusals.items(), key=lambda kv: -kv[1]))


def test_inplace_programs_are_deterministic_and_run_in_numpy() -> None:
    first = [inplace_programs.generate(SEED, i) for i in range(20)]
    again = [inplace_programs.generate(SEED, i) for i in range(20)]
    assert [p.source for p in first] == [p.source for p in again]
    for a, b in zip(first, again):
        assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a.arguments, b.arguments))
    for program in first:  # each runs in NumPy and leaves its arguments unchanged
        before = [a.copy() for a in program.arguments]
        with np.errstate(all="ignore"):
            program.function()(*[a.copy() for a in program.arguments])
        assert all(np.array_equal(x, y) for x, y in zip(program.arguments, before))


def test_inplace_fuzzer_tells_a_wrong_result_from_a_refusal() -> None:
    """The comparison itself: a FusecError is a refusal, a difference in values or dtype a mismatch."""
    plain = inplace_programs.Program(0, 0, "def f(a):\n    a[0] = 1\n    return a\n", (np.zeros(3),))
    assert inplace_programs.run(plain).kind == "ok"
    source = "def f(a):\n    t = a.ravel()\n    t += 1\n    return a\n"
    verdict = inplace_programs.run(inplace_programs.Program(0, 1, source, (np.zeros((2, 2)),)))
    assert verdict.kind == "refused" and "view" in verdict.detail
    differs = inplace_programs._difference("result 0", np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    assert differs is not None and "3.0" in differs
    assert inplace_programs._difference("result 0", np.array([1, 2]), np.array([1.0, 2.0])) is not None  # dtype
    summary = inplace_programs.Summary(0)
    for kind in ("ok", "refused", "mismatch", "error"):
        summary.add(inplace_programs.Verdict(plain, kind, "why"))
    assert (summary.ran, summary.refused, summary.mismatched, summary.errors) == (2, 1, 1, 1)
    assert [v.kind for v in summary.failures] == ["mismatch", "error"]
