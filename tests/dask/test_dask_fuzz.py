"""Random graphs of the fuzz corpus (``tests.fuzz.corpus``: exact families, NaN/inf/extremes in the inputs)
run on Dask arrays of random chunkings (one chunk, chunks of one element, uneven last chunks) agree with
the reference interpreter bit for bit: split reductions (any/all/max/min/argmax, integer sums and products)
combine exactly, argmax ties and NaNs resolve as NumPy's. ``FUSEC_DASK_FUZZ`` graphs (default 240)."""

from __future__ import annotations

import os

import pytest

dask = pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")

import dask.array as da  # noqa: E402

from tests.dask.chunkings import fuzz_run  # noqa: E402
from tests.fuzz import corpus  # noqa: E402

COUNT = int(os.environ.get("FUSEC_DASK_FUZZ", "240"))  # graphs drawn; those the Dask path refuses are skipped


@pytest.fixture(scope="module")
def graphs():
    return corpus.generate(COUNT, seed=20)


def test_dask_fuzz_graphs_match_interpreter_on_random_chunkings(graphs):
    failures, ran = fuzz_run(graphs, lambda a, chunks: da.from_array(a, chunks=chunks),
                             lambda i, lazy: dask.compute(*lazy, scheduler="threads" if i % 2 else "sync"))
    assert not failures, f"{len(failures)} of {len(graphs)} graphs differ:\n" + "\n\n".join(failures[:3])
    split_reductions = sum(_split_count(graph, chunked) for graph, chunked in ran)
    assert len(ran) >= 100 and split_reductions >= 20, (len(ran), split_reductions)


def _split_count(graph, chunked) -> int:
    from fusec.dask import _chunks_of, dask_plan
    from fusec.dask.views import inputs_through_views, picked

    graph, picks = inputs_through_views(graph)  # slices of arguments taken as Dask slices, as run_graph does
    plan = dask_plan(graph, _chunks_of(picked(chunked, picks)))  # (an iota's values: a one-chunk array)
    return len(plan.reductions)
