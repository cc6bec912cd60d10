"""What ``cuda_source()`` and ``fusec explain --source`` show: the kernel's body with the helper headers, the
accumulator types and repeated twin blocks folded into notes that account for every line they stand for, so
that the softmax example's ``--source`` fits in 150 lines; ``full=True``/``--full`` is the exact source."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.__main__ import main
from fusec.codegen.render import render_body
from fusec.inspect.source_fold import fold_accumulators, fold_twins, shown_body
from fusec.kinds import generate_plan
from fusec.runtime.plan import make_plan
from tests.fuzz.corpus import generate, input_layouts, plan_specs
from tests.workloads import softmax

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = str(ROOT / "examples" / "softmax.py")
F32 = "float32"
_NOTE = re.compile(r"^\s*// (?P<what>.*) \((?P<n>\d+) lines folded; full=True or --full shows them\)(?:, with)?$")
_TWIN = re.compile(r"the block that starts (\d+) lines above, again")
_CHANGE = re.compile(r'^\s*//   "(?P<new>.*)" in place of "(?P<old>.*)"$')


def unfold(shown: str, full: str) -> list[str]:
    """Check ``shown`` against ``full`` (one kernel's body) line by line: a shown line is the full line, or a
    note standing for exactly the lines it says (an accumulator namespace; a block equal to the one the note
    points at, but for the lines the note lists). Returns the notes' first lines."""
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
        twin = _TWIN.match(m["what"])
        if twin:
            original = shown_lines[i - int(twin[1]):i - int(twin[1]) + count]
            changes = [_CHANGE.match(line) for line in extra]
            assert all(changes), extra
            differ = [(a.strip(), b.strip()) for a, b in zip(folded, original) if a.strip() != b.strip()]
            assert differ == [(c["new"], c["old"]) for c in changes]
            assert not any(_NOTE.match(line) for line in original), "a twin points at shown lines only"
        else:
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


def test_softmax_source_folds_the_accumulators_and_the_division_rerun() -> None:
    spec = fusec.ArraySpec((8192, 8192), F32)
    f = fusec.fuse(softmax, name="softmax")
    (kernel,) = generate_plan(f.plan(spec), {f.plan(spec).graph.inputs[0]: spec})
    body = render_body(kernel.spec)
    shown = shown_body(kernel.spec, body)
    notes = unfold(shown, body)
    assert len(notes) == 2 and "namespace k0_rows_max_sub_exp_sum_div_acc" in notes[0]
    assert "Acc0 { float r0 = " in shown and "combine: a.r0 = fc::reduce_max(a.r0, b.r0)" in shown
    assert '"const float v4 = fc::div(v2, v3);" in place of "const float v4 = fc::div_invariant(v2, v3, ' in shown
    assert "fc::div(v2, v3)" in body and len(shown.splitlines()) < len(body.splitlines()) - 30


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


def test_fold_twins_folds_a_repeated_loop_and_names_the_changed_line() -> None:
    loop = ["for (int i = 0; i < n; ++i) {", "  const float a = x[i];", "  const float b = f(a);",
            "  const float c = g(b);", "  y[i] = c;", "  z[i] = a;", "}"]
    again = [line.replace("f(a)", "h(a)") for line in loop]
    lines = ["// head", *loop, "if (slow) {", *("  " + line for line in again), "}"]
    out = fold_twins(lines)
    assert out[:9] == lines[:9]
    assert out[9] == ("  // the block that starts 8 lines above, again (7 lines folded; "
                      "full=True or --full shows them), with")
    assert out[10] == '  //   "const float b = h(a);" in place of "const float b = f(a);"'
    assert out[11:] == ["}"]


def test_fold_twins_leaves_blocks_that_differ_in_more_lines_or_are_short() -> None:
    loop = ["for (int i = 0; i < n; ++i) {", *(f"  v{k} = f{k}(x);" for k in range(6)), "}"]
    two_changed = [line.replace("f1", "g1").replace("f2", "g2") for line in loop]  # a reader needs both loops
    assert fold_twins(loop + two_changed) == loop + two_changed
    short = ["if (a) {", "  b();", "}"]
    assert fold_twins(short + short) == short + short


def test_fold_accumulators_without_phases_changes_nothing() -> None:
    class NoPhases:
        name = "k0_pointwise_exp"
        phases = ()

    lines = ["namespace k0_pointwise_exp_acc {", "}  // namespace k0_pointwise_exp_acc", "x"]
    assert fold_accumulators(lines, NoPhases()) == lines
