"""fusec on ``dask.distributed``: a ``LocalCluster`` of threads (two workers in this process) and one of
processes (the tasks and a ``Fused`` pickled to other processes). Results match NumPy, and 40 fuzz graphs on
random chunkings match the interpreter bit for bit on the threads cluster; each worker plans (and so
compiles) each block program at most once."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")
distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install 'fusec[dask]')")

import dask  # noqa: E402
import dask.array as da  # noqa: E402

import fusec  # noqa: E402
from fusec.dask import blocks  # noqa: E402
from tests import workloads  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@fusec.fuse
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@fusec.fuse
def stats(x, y):
    return (x * y).sum(axis=0), np.abs(x - y).argmax(axis=1), x + y


@pytest.fixture(scope="module")
def threads_client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0") as c, \
            distributed.Client(c) as client:
        yield client


def test_dask_distributed_threads_cluster_matches_numpy(threads_client, rng):
    x = rng.standard_normal((48, 40)).astype(np.float32)
    y = rng.standard_normal((48, 40)).astype(np.float32)
    dx, dy = da.from_array(x, chunks=(10, 9)), da.from_array(y, chunks=(12, 8))
    got = dask.compute(softmax(dx), *stats(dx, dy))
    np.testing.assert_allclose(got[0], workloads.softmax(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[1], (x * y).sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[2], np.abs(x - y).argmax(axis=1))
    np.testing.assert_array_equal(got[3], x + y)


def test_dask_distributed_fuzz_graphs_match_interpreter(threads_client):
    from tests.dask.chunkings import fuzz_run
    from tests.fuzz import corpus

    graphs = corpus.generate(int(os.environ.get("FUSEC_DASK_FUZZ_CLUSTER", "40")), seed=21)
    failures, _ = fuzz_run(graphs, lambda a, chunks: da.from_array(a, chunks=chunks),
                           lambda i, lazy: threads_client.compute(lazy, sync=True))
    assert not failures, "\n\n".join(failures[:3])


def test_dask_distributed_processes_cluster_plans_each_program_once(rng, monkeypatch):
    # workers are new processes: they import this checkout's fusec (and these tests, for the Fused below)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    x = rng.standard_normal((64, 30)).astype(np.float32)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            distributed.Client(c) as client:
        dx = da.from_array(x, chunks=(8, 7))
        first = softmax(dx).compute()
        planned = client.run(blocks.programs_planned)
        second = (softmax(dx) * 1).compute()  # a new graph of the same programs
        after = client.run(blocks.programs_planned)
        # each process plans each program at most once, however many graphs' blocks (40 per graph) it runs; which
        # worker runs which block is Dask's choice, so a worker may meet a program first in the second graph
        programs = sum(len(s.programs) for s in _plan_of(softmax, dx).stages)
        assert all(0 < n <= programs for n in planned.values()), (planned, programs)
        assert all(planned[w] <= after[w] <= programs for w in planned), (planned, after, programs)
        # a Fused travels to a worker without its compiled state and runs there
        remote = client.submit(softmax, x).result()
    np.testing.assert_allclose(first, workloads.softmax(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(second, workloads.softmax(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(remote, workloads.softmax(x), rtol=1e-5, atol=1e-7)


def _plan_of(fused, *args):
    from fusec.dask import _chunks_of, _prepare, dask_plan

    _, graph, arrays, _ = _prepare(fused, fused._params(args, {}))
    return dask_plan(graph, _chunks_of(arrays))
