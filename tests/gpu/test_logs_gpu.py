"""On a GPU: a first call logs and counts each kernel's NVRTC compile (a disk cache miss), a new process
(here a new launcher) reads the same kernels from the disk cache, and the counts match."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.runtime import launch as runtime
from tests.helpers import GPU_ONLY
from tests.workloads import softmax

pytestmark = GPU_ONLY


def two_kernels(x):
    return (x - x.mean(axis=0)).sum(axis=1)


@pytest.mark.parametrize("fn, kernels", [(softmax, 1), (two_kernels, 2)])
def test_gpu_first_call_logs_compiles_then_a_new_launcher_hits_the_disk_cache(
        fn, kernels: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import cupy

    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(tmp_path))
    monkeypatch.setenv("FUSEC_COMPILER", "nvrtc")
    monkeypatch.setattr(runtime, "_DEFAULT", None)  # a launcher with nothing loaded: as a new process
    caplog.set_level(logging.INFO, logger="fusec.compile")
    x = np.random.default_rng(7).standard_normal((333, 1000)).astype(np.float32)
    f = fusec.fuse(fn)
    np.testing.assert_allclose(cupy.asnumpy(f(cupy.asarray(x))), fn(x.astype(np.float64)), rtol=2e-5, atol=1e-4)
    info = f.cache_info()
    assert (info.traces, info.plans, info.kernels_compiled, info.disk_hits) == (1, 1, kernels, 0)
    compiled = [r.getMessage() for r in caplog.records if r.name == "fusec.compile"]
    assert len(compiled) == kernels and all("compiled with NVRTC in" in m and "disk cache miss" in m
                                            for m in compiled)
    assert {m.split(" ")[0] for m in compiled} == {k.name for k in f._kernels((x,), {})}
    f(cupy.asarray(x))  # the fast path: nothing new
    assert f.cache_info() == info
    caplog.clear()
    monkeypatch.setattr(runtime, "_DEFAULT", None)
    g = fusec.fuse(fn)
    np.testing.assert_allclose(cupy.asnumpy(g(cupy.asarray(x))), fn(x.astype(np.float64)), rtol=2e-5, atol=1e-4)
    assert (g.cache_info().kernels_compiled, g.cache_info().disk_hits) == (0, kernels)
    hits = [r.getMessage() for r in caplog.records if r.name == "fusec.compile"]
    assert len(hits) == kernels and all("disk cache hit" in m for m in hits)


def test_gpu_new_layout_of_the_same_kernel_is_logged_as_a_recompile_with_what_changed(
        caplog: pytest.LogCaptureFixture) -> None:
    import cupy

    caplog.set_level(logging.INFO, logger="fusec.recompile")
    f = fusec.fuse(softmax)
    base = np.random.default_rng(8).standard_normal((64, 200)).astype(np.float32)
    dense = cupy.asarray(base[:, :100])  # C-contiguous, rows of 100
    strided = cupy.asarray(base)[:, ::2]  # the same shape, every other element
    np.testing.assert_allclose(cupy.asnumpy(f(dense)), softmax(base[:, :100].astype(np.float64)), rtol=2e-5)
    np.testing.assert_allclose(cupy.asnumpy(f(strided)), softmax(base[:, ::2].astype(np.float64)), rtol=2e-5)
    notes = [r.getMessage() for r in caplog.records if r.name == "fusec.recompile"]
    assert len(notes) == 1 and notes[0].startswith("k0: a new kernel for a new layout: array 0: strides ")
    assert f.cache_info().traces == 1  # the trace and the plan served both
