"""Random graphs of the fuzz corpus (``tests.fuzz.corpus``: exact families, NaN/inf/extremes in the inputs)
run on Dask arrays of random chunkings (one chunk, chunks of one element, uneven last chunks) agree with
the reference interpreter bit for bit: split reductions (any/all/max/min/argmax, integer sums and products)
combine exactly, argmax ties and NaNs resolve as NumPy's. ``FUSEC_DASK_FUZZ`` graphs (default 150)."""

from __future__ import annotations

import os

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")

import dask.array as da  # noqa: E402

from fusec.dask import run_graph  # noqa: E402
from fusec.ir.interpret import interpret  # noqa: E402
from tests.dask.chunkings import dask_runs, random_chunks  # noqa: E402
from tests.fuzz import corpus  # noqa: E402

COUNT = int(os.environ.get("FUSEC_DASK_FUZZ", "200"))  # graphs drawn; those the Dask path refuses are skipped


@pytest.fixture(scope="module")
def graphs():
    return corpus.generate(COUNT, seed=20)


def test_dask_fuzz_graphs_match_interpreter_on_random_chunkings(graphs):
    failures = []
    split_reductions = ran = 0
    for i, graph in enumerate(graphs):
        if not dask_runs(graph):
            continue  # scans, gathers and reshapes are refused on Dask arrays (README)
        ran += 1
        seed = corpus.graph_seed(graph)
        inputs = corpus.make_inputs(graph, seed)
        want = interpret(graph, inputs)
        rng = np.random.default_rng(seed)
        chunked = [da.from_array(a, chunks=random_chunks(rng, a.shape, whole=0.1)) for a in inputs]
        try:
            lazy = run_graph(graph, chunked)
            got = dask.compute(*lazy, scheduler="threads" if i % 2 else "sync")
        except Exception as exc:  # reported with the graph below
            failures.append(f"graph {i}: {type(exc).__name__}: {exc}\n{graph}")
            continue
        split_reductions += _split_count(graph, chunked)
        free = corpus.zero_sign_free(graph)
        for k, (g, w) in enumerate(zip(got, want)):
            diff = corpus.differences(g, w, graph.outputs[k] in free)
            if diff:
                chunks = [a.chunks for a in chunked]
                failures.append(f"graph {i} output {k} (chunks {chunks}): {diff}\n{graph}")
    assert not failures, f"{len(failures)} of {len(graphs)} graphs differ:\n" + "\n\n".join(failures[:3])
    assert ran >= 100 and split_reductions >= 20, (ran, split_reductions)


def _split_count(graph, chunked) -> int:
    from fusec.dask import _chunks_of, dask_plan
    from fusec.dask.views import inputs_through_views, picked

    graph, picks = inputs_through_views(graph)  # slices of arguments taken as Dask slices, as run_graph does
    plan = dask_plan(graph, _chunks_of(picked(chunked, picks)))  # (an iota's values: a one-chunk array)
    return len(plan.reductions)
