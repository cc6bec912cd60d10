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


def test_compile_time_chain_has_one_node_per_op():
    fn, specs = compile_time.chain(50)
    assert len(fusec.fuse(fn).trace(*specs).nodes) == 53  # the input and two constants besides


def test_compile_time_main_prints_a_row_per_size_and_writes_json(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert compile_time.main(["--sizes", "10,30", "--out", str(out)]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].startswith("| family | size | nodes | kernels | trace s")
    assert len(table) == 2 + 4  # header, rule, two sizes of each family
    rows = json.loads(out.read_text())["rows"]
    assert [(r["family"], r["size"]) for r in rows] == [("chain", 10), ("chain", 30), ("dag", 10), ("dag", 30)]
    for r in rows:
        assert r["kernels"] >= 1 and r["nodes"] > 0 and r["nvrtc_s"] is None
        assert min(r["trace_s"], r["passes_s"], r["plan_s"], r["source_s"]) >= 0
