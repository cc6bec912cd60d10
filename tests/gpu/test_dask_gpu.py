"""fusec on Dask arrays of CuPy chunks (the fused GPU kernels per chunk) against NumPy: every example, fuzz
graphs on random chunkings (bit-exact families), argmax ties, float reductions split across chunks, and
``dask.distributed``: two worker processes on one GPU (the multi-GPU path, testable on one card) and
``dask_cuda.LocalCUDACluster`` where ``dask_cuda`` imports. Run on the H200:
``pytest -m gpu tests/gpu/test_dask_gpu.py -q``."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import GPU_ONLY, assert_matches_numpy

pytestmark = GPU_ONLY
dask = pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")

import dask.array as da  # noqa: E402

from fusec.dask import blocks  # noqa: E402
from tests.dask.chunkings import coarse_chunks, fuzz_run  # noqa: E402
from tests.fuzz import corpus  # noqa: E402
from tests.test_examples import NAMES, TOLERANCE, _as_tuple, load_example  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _gpu_chunks(a: np.ndarray, chunks) -> da.Array:
    import cupy as cp

    return da.from_array(cp.asarray(a), chunks=chunks, asarray=False)


def _host(x):
    import cupy as cp

    return cp.asnumpy(x) if isinstance(x, cp.ndarray) else np.asarray(x)


@pytest.mark.parametrize("name", NAMES)
def test_dask_gpu_every_example_matches_numpy(name, rng):
    module = load_example(name)
    args = module.example_inputs(rng)
    dargs = [_gpu_chunks(a, coarse_chunks(rng, a.shape)) if isinstance(a, np.ndarray) else a for a in args]
    lazy = _as_tuple(getattr(module, name)(*dargs))
    got = dask.compute(*lazy, scheduler="threads")
    rtol, atol = TOLERANCE.get(name, (1e-5, 1e-6))
    for g, w in zip(got, _as_tuple(module.reference(*args))):
        assert type(g).__module__.startswith("cupy")
        assert_matches_numpy(_host(g), w, rtol=rtol, atol=atol)


def test_dask_gpu_fuzz_graphs_match_interpreter_exactly():
    graphs = corpus.generate(int(os.environ.get("FUSEC_DASK_FUZZ", "200")), seed=20)
    failures, _ = fuzz_run(graphs, _gpu_chunks, lambda i, lazy: dask.compute(*lazy, scheduler="threads"), host=_host)
    assert not failures, f"{len(failures)} of {len(graphs)} graphs differ:\n" + "\n\n".join(failures[:3])


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_dask_gpu_argmax_ties_and_nans_as_numpy(op, rng):
    import fusec

    x = rng.integers(0, 3, size=(130, 170)).astype(np.float32)
    x[40, 90] = x[40, 20] = np.nan

    @fusec.fuse
    def f(a):
        return getattr(a, op)(axis=1), getattr(a, op)(axis=0), getattr(a, op)()

    for chunks in [(13, 17), (130, 9), (1, 170)]:
        got = dask.compute(*f(_gpu_chunks(x, chunks)))
        for g, w in zip(got, (getattr(x, op)(axis=1), getattr(x, op)(axis=0), getattr(x, op)())):
            np.testing.assert_array_equal(_host(g), w)


@pytest.mark.parametrize("op", ["sum", "mean", "var", "std", "prod"])
def test_dask_gpu_float_reductions_split_across_chunks(op, rng):
    import fusec

    x = (rng.standard_normal((1000, 3000)) * 0.01 + (1.0 if op == "prod" else 0.5)).astype(np.float32)

    @fusec.fuse
    def f(a):
        return getattr(a, op)(axis=1), getattr(a, op)()

    got = dask.compute(*f(_gpu_chunks(x, (250, 700))))
    x64 = x.astype(np.float64)
    for g, w in zip(got, (getattr(x64, op)(axis=1), getattr(x64, op)())):
        # atol: a product of 3e6 numbers near 1 underflows float32 (NumPy's float32 result is 0 too)
        np.testing.assert_allclose(_host(g), w, rtol=1e-4 if op == "prod" else 2e-5, atol=np.finfo(np.float32).tiny)


def test_dask_gpu_two_worker_processes_on_one_gpu(rng, monkeypatch):
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    softmax = load_example("softmax").softmax
    x = rng.standard_normal((4096, 2048)).astype(np.float32)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            distributed.Client(c) as client:
        dx = client.persist(_gpu_chunks(x, (512, 512)))  # rows split in 4: partial statistics on both workers
        first = _host(softmax(dx).compute())
        planned = client.run(blocks.programs_planned)
        second = _host((softmax(dx) + 0).compute())
        assert client.run(blocks.programs_planned) == planned  # each worker planned (compiled) once
    e = np.exp(x - x.max(1, keepdims=True))
    for got in (first, second):
        assert_matches_numpy(got, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_dask_gpu_local_cuda_cluster(rng):
    pytest.importorskip("distributed", reason="dask.distributed is not installed")
    dask_cuda = pytest.importorskip("dask_cuda", reason="dask-cuda is not installed (pip install dask-cuda)")
    from distributed import Client

    layernorm = load_example("layernorm").layernorm
    x = (rng.standard_normal((8192, 4096)) * 3 + 1).astype(np.float32)
    with dask_cuda.LocalCUDACluster() as cluster, Client(cluster):
        got = _host(layernorm(_gpu_chunks(x, (1024, 1024))).compute())
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    assert_matches_numpy(got, want, rtol=1e-4, atol=1e-5)
