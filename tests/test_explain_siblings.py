"""``explain`` shows the siblings a kernel merged (independent reductions folded in one pass, independent groups
in one launch) and the bytes merging them saved, computed from what each sibling would read on its own."""

from __future__ import annotations

import numpy as np

import fusec
from fusec.inspect.siblings import bytes_saved, siblings
from fusec.ir.ops import Kind
from fusec.ir.printer import node_names

F32 = "float32"


def _explain(fn, *shapes):
    return fusec.fuse(fn).explain(*(fusec.ArraySpec(s, F32) for s in shapes))


def _lines(e, word="siblings"):
    return [line for line in str(e).splitlines() if word in line]


def cosine(a, b):
    return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))


def test_cosine_similarity_shows_three_sibling_reductions_and_one_read_of_each_input_saved():
    e = _explain(cosine, (64, 1000), (64, 1000))
    assert e.kernel_count == 1
    (s,) = siblings(e.plan.kernels[0])
    names = node_names(e.plan.graph)
    assert s.kind == "reductions" and [[n.op for n in h] for h in s.heads] == [["sum"]] * 3
    a, b = e.plan.graph.inputs
    assert [set(r) for r in s.reads] == [{a, b}, {a}, {b}]
    assert (s.bytes_apart, s.bytes_merged, s.bytes_saved) == (4 * a.nbytes, 2 * a.nbytes, 2 * a.nbytes)
    first, second = _lines(e)[0], str(e).splitlines()[str(e).splitlines().index(_lines(e)[0]) + 1]
    assert first == (f"  siblings: 3 independent reductions in one kernel: {names[s.heads[0][0]]} sum (reads %a, %b); "
                     f"{names[s.heads[1][0]]} sum (reads %a); {names[s.heads[2][0]]} sum (reads %b)")
    assert second == ("            apart they would read 1000.000 KiB (1024000 B), merged 500.000 KiB (512000 B): "
                      "500.000 KiB (512000 B) saved")
    assert _lines(e, "merging siblings") == [
        "  of which merging siblings saves 500.000 KiB (512000 B) (see each kernel's siblings)"]
    # in one pass indeed: the kernel folds the three sums into one accumulator, over one read of a and b
    (kernel,) = e.kernels
    assert [len(ph.fields) for ph in kernel.spec.phases] == [3]
    assert set(kernel.passes().values()) == {1}


def test_independent_elementwise_groups_share_a_launch_and_save_no_bytes():
    e = _explain(lambda x, y: (np.exp(x), np.sin(y) * 2), (300, 7), (300, 7))
    assert e.kernel_count == 1
    (s,) = siblings(e.plan.kernels[0])
    assert s.kind == "groups" and s.bytes_saved == 0 and len(s.heads) == 2
    assert [n.op for n in s.heads[0]] == ["exp"] and [n.op for n in s.heads[1]] == ["sin", "mul"]
    text = str(e)
    assert "  siblings: 2 independent groups in one launch: %1 exp (reads %x); %2 sin, %3 mul (reads %y)\n" in text
    assert "            no input in common: no bytes saved, one launch instead of 2\n" in text
    assert "merging siblings saves" not in text


def test_two_reductions_of_one_array_are_sibling_groups_reading_it_once():
    e = _explain(lambda x: (x.sum(0), x.max(0)), (1000, 64))
    (kernel,) = e.plan.kernels
    (s,) = siblings(kernel)
    (x,) = e.plan.graph.inputs
    assert s.kind == "groups" and s.bytes_saved == x.nbytes == kernel.bytes_read
    assert [[n.op for n in h if n.kind is not Kind.LAYOUT] for h in s.heads] == [["sum"], ["max"]]
    assert bytes_saved(e.plan.kernels) == x.nbytes


def test_dependent_reductions_are_not_siblings():
    softmax = _explain(lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(
        x - x.max(-1, keepdims=True)).sum(-1, keepdims=True), (64, 100))
    layernorm = _explain(lambda x: (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True), (64, 100))
    for e in (softmax, layernorm):
        assert e.kernel_count == 1 and siblings(e.plan.kernels[0]) == [] and _lines(e) == []


def test_reductions_of_one_level_after_a_shared_one_are_siblings_of_that_level():
    # mean first (level 0), then the sum of squares and the max of deviations (level 1): siblings
    e = _explain(lambda x: (((x - x.mean(-1, keepdims=True)) ** 2).sum(-1),
                            np.abs(x - x.mean(-1, keepdims=True)).max(-1)), (64, 100))
    assert e.kernel_count == 1
    found = siblings(e.plan.kernels[0])
    assert [(s.kind, [[n.op for n in h] for h in s.heads]) for s in found] == [("reductions", [["sum"], ["max"]])]
    (x,) = e.plan.graph.inputs
    assert found[0].bytes_saved == x.nbytes
    # the rows held in registers: the mean's pass, then one pass holding both siblings' accumulators
    assert [len(ph.fields) for ph in e.kernels[0].spec.phases] == [1, 2]


def test_kernels_without_siblings_print_no_siblings_line():
    e = _explain(lambda x, y: (x.sum(-1), y.sum(-1)), (64, 100), (64, 100))  # rows of different arrays: apart
    assert e.kernel_count == 2 and _lines(e) == []


def test_many_siblings_are_counted_past_the_first_six():
    e = _explain(lambda x: tuple((x * k).sum(-1) for k in range(1, 10)), (64, 100))
    (kernel,) = e.plan.kernels
    (s,) = siblings(kernel)
    assert len(s.heads) == 9 and s.bytes_saved == 8 * e.plan.graph.inputs[0].nbytes
    (line,) = [x for x in _lines(e) if x.startswith("  siblings:")]
    assert line.startswith("  siblings: 9 independent groups in one launch: ") and line.endswith("; and 3 more")
    assert line.count("(reads %x)") == 6
