"""The dispatch fast path on the GPU (:mod:`fusec.runtime.dispatch`): ``pytest -m gpu tests/gpu/test_dispatch_gpu.py``.

Repeat calls go through pre-packed driver launches and recycle small outputs. Each workload (pointwise, a
one-block and a multi-block reduce-all, rows, several outputs, several kernels, an empty input) is called
many times on fresh random data and compared with NumPy every time; a result the caller dropped is poisoned
before the next call that may reuse it, so a recycled output must be written in full. A result still in use
(held, viewed, its ``.data`` held, exported through DLPack) keeps its values; another stream, a thread that
has not touched CUDA, and large outputs take fresh arrays."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusec
from fusec.runtime import dispatch
from tests.helpers import GPU_ONLY, assert_matches_numpy
from tests.workloads import softmax

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


WORKLOADS = {
    "pointwise": (lambda x, y: x * 2 + np.tanh(y), [(1000,), (1000,)]),
    "sum_abs one block": (lambda x: np.abs(x).sum(), [(1024,)]),
    "sum_abs many blocks": (lambda x: np.abs(x).sum(), [(3 << 20,)]),
    "softmax rows": (softmax, [(64, 33)]),
    "two outputs": (lambda x: (x.max(axis=1), x.sum(axis=1) * 0.5), [(40, 300)]),
    "empty": (lambda x: x + 1, [(0, 5)]),
}


def _fresh(rng, shapes):
    host = [(rng.random(s) + 0.5).astype(np.float32) for s in shapes]  # positive: sums do not cancel
    return host, [cupy.asarray(h) for h in host]


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "one kernel per op"])
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_repeat_calls_match_numpy_with_dropped_results_poisoned(workload, fusion):
    fn, shapes = WORKLOADS[workload]
    fused = fusec.fuse(fn, fusion=fusion)
    rng = np.random.default_rng(11)
    recycled = 0
    for i in range(6):
        host, args = _fresh(rng, shapes)
        kept = {id(a) for r in _recyclers(fused) if r is not None for a in r.spares} if i >= 2 else set()
        got = _as_tuple(fused(*args))
        recycled += any(id(g) in kept for g in got)  # (the spares are alive: their ids are theirs)
        for g, want in zip(got, _as_tuple(fn(*host))):
            assert_matches_numpy(cupy.asnumpy(g), want)
        for g in got:
            g.fill(np.nan)  # poison, then drop: a call that reuses it must write every element
        del got, g
    assert recycled == 4, "the fast path did not reuse the dropped results"


def test_a_result_in_use_keeps_its_values():
    fused = fusec.fuse(lambda x: x * 3 - 1)
    rng = np.random.default_rng(5)
    host, (x,) = _fresh(rng, [(777,)])
    fused(x)
    fused(x)  # the fast path exists from here
    held = fused(x)
    viewed = fused(x)[10:]
    pointer_owner = fused(x)
    pointer = pointer_owner.data
    del pointer_owner
    exported = cupy.from_dlpack(fused(x))
    want = host[0] * 3 - 1
    for _ in range(4):  # calls on other data that must not land in any of them
        other_host, (other,) = _fresh(rng, [(777,)])
        assert_matches_numpy(cupy.asnumpy(fused(other)), other_host[0] * 3 - 1)
    assert_matches_numpy(cupy.asnumpy(held), want)
    assert_matches_numpy(cupy.asnumpy(viewed), want[10:])
    assert_matches_numpy(cupy.asnumpy(exported), want)
    from_pointer = cupy.ndarray((777,), np.float32, memptr=pointer)
    assert_matches_numpy(cupy.asnumpy(from_pointer), want)


def test_another_stream_takes_fresh_outputs_and_matches_numpy():
    fused = fusec.fuse(lambda x: np.abs(x).sum())
    rng = np.random.default_rng(6)
    host, (x,) = _fresh(rng, [(4096,)])
    fused(x)
    fused(x)
    first = fused(x)
    recycler = _recyclers(fused)[0]
    on_default = recycler.stream
    del first
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        got = fused(x)
        stream.synchronize()
    assert recycler.stream == stream.ptr != on_default
    np.testing.assert_allclose(cupy.asnumpy(got), np.abs(host[0]).sum(dtype=np.float64), rtol=1e-5)


def test_a_thread_that_never_touched_cuda_takes_the_fast_path():
    fused = fusec.fuse(lambda x: x * 2 + 1)
    rng = np.random.default_rng(7)
    host, (x,) = _fresh(rng, [(512,)])
    fused(x)
    fused(x)
    results = {}

    def worker():
        try:
            results["got"] = cupy.asnumpy(fused(x))
        except Exception as exc:  # reported below
            results["error"] = exc

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert "error" not in results, results.get("error")
    assert_matches_numpy(results["got"], host[0] * 2 + 1)


def test_large_outputs_are_not_recycled():
    fused = fusec.fuse(lambda x: x + 1)
    n = dispatch.RECYCLE_MAX_BYTES // 4 + 1
    x = cupy.ones(n, np.float32)
    fused(x)
    fused(x)
    assert _recyclers(fused) == [None]


def _recyclers(fused):
    (fast,) = fused._fast.values()
    runner = fast.runner
    return [recycler for step in runner.steps for _, _, _, recycler in step.outputs]
