"""The compile-time benchmark script (``benchmarks/compile_time.py``) on small sizes, without NVRTC: its
program families have the sizes they promise, and it prints and saves one row per size."""

from __future__ import annotations

import json

import pytest

import fusec
from benchmarks import compile_time


@pytest.mark.parametrize("size", [100, 1000])
def test_compile_time_random_dag_has_about_the_requested_nodes(size):
    fn, specs = compile_time.random_dag(size, seed=0)
    nodes = len(fusec.fuse(fn).trace(*specs).nodes)
    assert 0.75 * size <= nodes <= 1.3 * size


@pytest.mark.parametrize("size", [300, 3000])
def test_compile_time_view_dag_has_about_the_requested_nodes(size):
    fn, specs = compile_time.view_dag(size, seed=0)
    nodes = len(fusec.fuse(fn).trace(*specs).nodes)
    assert 0.75 * size <= nodes <= 1.3 * size


@pytest.mark.parametrize("family", ["roll_stencil", "shrinking_stencil", "reversed_chain"])
def test_compile_time_view_families_grow_linearly_with_their_steps(family):
    make = compile_time.FAMILIES[family]
    small, large = (len(fusec.fuse(fn).trace(*specs).nodes) for fn, specs in (make(10), make(20)))
    assert 1.8 * small <= large <= 2.2 * small


def test_compile_time_chain_has_one_node_per_op():
    fn, specs = compile_time.chain(50)
    assert len(fusec.fuse(fn).trace(*specs).nodes) == 53  # the input and two constants besides


def test_compile_time_main_prints_a_row_per_size_and_writes_json(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert compile_time.main(["--sizes", "10,30", "--out", str(out)]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].startswith("| family | size | nodes | kernels | trace s")
    families = list(compile_time.FAMILIES)
    assert len(table) == 2 + 2 * len(families)  # header, rule, two sizes of each family
    rows = json.loads(out.read_text())["rows"]
    assert [(r["family"], r["size"]) for r in rows] == [(f, n) for f in families for n in (10, 30)]
    for r in rows:
        assert r["kernels"] >= 1 and r["nodes"] > 0 and r["nvrtc_s"] is None
        assert min(r["trace_s"], r["passes_s"], r["plan_s"], r["source_s"]) >= 0


def test_compile_time_nvrtc_table_gives_a_row_per_kind_mix_and_size(tmp_path, capsys):
    """``--nvrtc``: one kernel of the kind asked for per row, its schedule (outlined where the heuristics say, inline
    with ``--inline``), NVRTC's CPU and wall seconds; the JSON holds the rows."""
    pytest.importorskip("cuda.core")
    out = tmp_path / "nvrtc.json"
    argv = ["--nvrtc", "--kinds", "pointwise", "--mixes", "transc,arith", "--sizes", "10", "--no-first-calls"]
    assert compile_time.main([*argv, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["nvrtc_rows"]
    assert [(r["kind"], r["mix"], r["ops"], r["kernels"]) for r in rows] == [("pointwise", "transc", 10, 1),
                                                                               ("pointwise", "arith", 10, 1)]
    assert rows[0]["schedules"] == ["pointwise:vector,vec=4,outline=1"]
    assert rows[1]["schedules"] == ["pointwise:vector,vec=4"]
    assert all(r["nvrtc_cpu_s"] > 0 and r["nvrtc_s"] > 0 for r in rows)
    assert "| pointwise | transc | 10 | pointwise:vector,vec=4,outline=1 |" in capsys.readouterr().out
    assert compile_time.main([*argv[:4], "transc", *argv[5:], "--inline", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["nvrtc_rows"][0]["schedules"] == ["pointwise:vector,vec=4"]


def test_compile_time_nvrtc_programs_are_one_kernel_of_their_kind():
    for kind in compile_time.NVRTC_KINDS:
        fn, specs = compile_time.nvrtc_program(kind, "mixed", 12)
        plan = fusec.fuse(fn).plan(*specs)
        assert [k.kind for k in plan.kernels] == ["reduce-all" if kind == "reduce_all" else kind], kind
