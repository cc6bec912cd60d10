"""benchmarks/dask_bench.py runs end to end without a GPU (``--cpu``: NumPy chunks, tiny sizes): every way of
computing each case gives a row, and fusec on Dask builds fewer tasks than Dask's own operations."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")

from benchmarks import dask_bench  # noqa: E402


def test_dask_bench_cpu_table(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert dask_bench.main(["--cpu", "--cases", "sum_abs,softmax", "--reps", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Dask per-task cost" in printed and "WARNING" not in printed
    report = json.loads(out.read_text())
    rows = report["rows"]
    for case in ("sum_abs", "softmax"):
        impls = {r["impl"] for r in rows if r["case"] == case}
        assert impls == {"fusec", "dask+cupy", "fusec-dask", "by-hand"}, impls
        for chunk in {r["chunk"] for r in rows if r["case"] == case and r["chunk"]}:
            tasks = {r["impl"]: r["tasks"] for r in rows if r["case"] == case and r["chunk"] == chunk}
            assert tasks["fusec-dask"] < tasks["dask+cupy"], (case, chunk, tasks)
    assert report["per_task_us"] > 0


def test_dask_bench_sizes_its_inputs_from_the_free_device_memory():
    """2^32 float32 elements where seven such arrays fit in 90% of the free memory (an H200's 139 GiB), 2^31 on an
    80 GB H100 (79 GiB free), never more than asked, and always a power of two."""
    gib = 1 << 30
    assert dask_bench.elements_for(139 * gib) == 1 << 32
    assert dask_bench.elements_for(79 * gib) == 1 << 31
    assert dask_bench.elements_for(139 * gib, largest=1 << 30) == 1 << 30
    for free in (3 * gib, 17 * gib + 12345, 200 * gib):
        n = dask_bench.elements_for(free)
        assert n & (n - 1) == 0 and dask_bench.ARRAYS_AT_PEAK * 4 * n <= 0.9 * free
