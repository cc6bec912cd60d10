"""What ``cuda_source()`` and ``fusec explain --source`` show: the kernel's body with its helper headers included
and its accumulator types folded into a note that accounts for every line it stands for, so that the softmax
example's ``--source`` fits in 150 lines; ``full=True``/``--full`` is the exact source. A loop that divides with
``fc::div_invariant`` is written once (two unrolled passes), not twice."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.__main__ import main
from fusec.codegen.render import render_body
from fusec.inspect.kernel_report import fold_accumulators, shown_body
from fusec.kinds import generate_plan
from fusec.runtime.plan import make_plan
from tests.fuzz.corpus import generate, input_layouts, plan_specs
from tests.workloads import softmax

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = str(ROOT / "examples" / "softmax.py")
F32 = "float32"
_NOTE = re.compile(r"^\s*// (?P<what>.*) \((?P<n>\d+) lines folded; full=True or --full shows them\)$")


def unfold(shown: str, full: str) -> list[str]:
    """Check ``shown`` against ``full`` (one kernel's body) line by line: a shown line is the full line, or a
    note standing for exactly the lines it says (an accumulator namespace, one line per struct). Returns the
    notes' first lines."""
    shown_lines, full_lines = shown.splitlines(), full.splitlines()
    notes, i, j = [], 0, 0
    while i < len(shown_lines):
        m = _NOTE.match(shown_lines[i])
        if not m:
            assert shown_lines[i] == full_lines[j], (i, shown_lines[i], full_lines[j])
            i, j = i + 1, j + 1
            continue
        notes.append(shown_lines[i])
        count, folded = int(m["n"]), full_lines[j:j + int(m["n"])]
        assert len(folded) == count
        extra = []
        while i + 1 + len(extra) < len(shown_lines) and shown_lines[i + 1 + len(extra)].lstrip().startswith("//   "):
            extra.append(shown_lines[i + 1 + len(extra)])
        assert folded[0].startswith("namespace ") and folded[0].endswith("_acc {")
        assert folded[-1] == "}  // namespace " + folded[0].split()[1]
        structs = [line.split()[2] for line in folded if line.startswith("struct ")]
        assert [line.split()[1] for line in extra] == structs, "one line per accumulator struct"
        i, j = i + 1 + len(extra), j + count
    assert j == len(full_lines), "the shown text ends where the body ends"
    return notes


def test_explain_source_of_softmax_is_under_150_lines_and_full_is_the_exact_source(capsys) -> None:
    argv = ["explain", f"{SOFTMAX}:softmax", "--arg", "f32[8192,8192]"]
    assert main([*argv, "--source"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) < 150
    assert out.count('extern "C" __global__') == 1 and "lines folded" in out
    assert main([*argv, "--full"]) == 0
    full_out = capsys.readouterr().out
    report = out[:out.index("// fusec helper headers")]
    assert full_out.startswith(report) and "lines folded" not in full_out
    spec = fusec.ArraySpec((8192, 8192), F32)
    assert full_out[len(report):].rstrip("\n") == fusec.fuse(softmax, name="softmax").cuda_source(
        spec, full=True).rstrip("\n")


def test_softmax_source_folds_the_accumulators_and_writes_the_division_loop_once() -> None:
    spec = fusec.ArraySpec((8192, 8192), F32)
    f = fusec.fuse(softmax, name="softmax")
    (kernel,) = generate_plan(f.plan(spec), {f.plan(spec).graph.inputs[0]: spec})
    body = render_body(kernel.spec)
    shown = shown_body(kernel.spec, body)
    notes = unfold(shown, body)
    assert len(notes) == 1 and "namespace k0_rows_max_sub_exp_sum_div_acc" in notes[0]
    assert "Acc0 { float r0 = " in shown and "combine: a.r0 = fc::reduce_max(a.r0, b.r0)" in shown
    # the epilogue divides by the row's sum once in the text; its second pass (IEEE division) is the same lines
    assert body.count("fc::div_invariant(v2, v3, fast_epilogue, exact_pass)") == 1
    assert "fc::div(" not in body and body.count("for (int exact_pass = 0; exact_pass < 2; ++exact_pass)") == 1


def _kernels(fn, *specs, schedules=None):
    f = fusec.fuse(fn, schedules=schedules) if schedules else fusec.fuse(fn)
    plan = f.plan(*specs)
    return generate_plan(plan, dict(zip(plan.graph.inputs, specs)))


CASES = {
    "softmax_warp": (softmax, ((64, 100),), {"k0": "rows:warp"}),
    "softmax_block": (softmax, ((64, 3000),), {"k0": "rows:block"}),
    "softmax_warp_regs": (softmax, ((512, 96),), {"k0": "rows:warp_regs"}),
    "layernorm": (lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5),
                  ((128, 1000),), None),
    "col_sums_split": (lambda x: x.sum(axis=0) * 2, ((4096, 8),), {"k0": "cols:last_block"}),
    "reduce_all_epilogue": (lambda x: x / np.sqrt((x * x).sum()), ((1000,),), None),
    "grid_barrier": (lambda x: np.abs(x).max(), ((1 << 16,),), {"k0": "reduce-all:grid_barrier"}),
    "transpose": (lambda x, y: x.T * 2 + y, ((256, 128), (128, 256)), None),
    "strided_pointwise": (lambda x: np.exp(x) + 1, ((100, 33),), {"k0": "pointwise:strided"}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_folded_source_accounts_for_every_line(name: str) -> None:
    fn, shapes, schedules = CASES[name]
    for kernel in _kernels(fn, *(fusec.ArraySpec(s, F32) for s in shapes), schedules=schedules):
        body = render_body(kernel.spec)
        unfold(shown_body(kernel.spec, body), body)


def test_folded_source_of_random_graphs_accounts_for_every_line() -> None:
    folds = 0
    for graph in generate(40, seed=7):
        for spec in plan_specs(make_plan(graph), input_layouts(graph, None)):
            body = render_body(spec)
            folds += len(unfold(shown_body(spec, body), body))
    assert folds > 0


def test_fold_accumulators_without_phases_changes_nothing() -> None:
    class NoPhases:
        name = "k0_pointwise_exp"
        phases = ()

    lines = ["namespace k0_pointwise_exp_acc {", "}  // namespace k0_pointwise_exp_acc", "x"]
    assert fold_accumulators(lines, NoPhases()) == lines
