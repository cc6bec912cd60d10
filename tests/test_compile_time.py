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
