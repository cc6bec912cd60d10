"""Every kernel ``tests/gpu/test_contracts_gpu.py`` builds, rendered and compiled with NVRTC on the CPU.

The GPU test's own runs (``tests/contract_cases.py``: :func:`exercise` and :func:`exercise_dask`, every case,
dtype and offset) go through fusec's runtime on the fake GPU (``tests/fake_cupy.py``), which records the source of
every kernel the launcher builds (aligned and misaligned variants, ``out=`` and in-place kernels, fast-path
runners, Dask blocks) and checks each launch's vector addresses; each distinct source then compiles for sm_90.
The results are NumPy's too (the fake GPU runs the interpreter), so a CPU-only machine checks everything but the
CUDA code's arithmetic.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os

import pytest

from fusec.codegen.nvrtc import compile_cubin
from tests.contract_cases import CASE_NAMES, DASK_CASES, DTYPES, OFFSETS, case, exercise, exercise_dask
from tests.fake_cupy import fake_gpu
from tests.helpers import seed_of


def _gpu_test_sources(monkeypatch) -> set[str]:
    sources: set[str] = set()
    with fake_gpu(monkeypatch) as gpu:
        import cupy  # the fake

        for name in CASE_NAMES:
            for dtype in DTYPES:
                for elements in OFFSETS:
                    exercise(case(name), dtype, elements, cupy, seed_of("contracts gpu", name, dtype, elements))
        for name in DASK_CASES:
            for dtype in ("float32", "float16"):
                for elements in (1, 2, 3):
                    exercise_dask(case(name), dtype, elements, cupy, seed_of("contracts dask gpu", name, dtype))
        sources = {kernel.source for kernel in gpu.kernels.values()}
        assert not gpu.mislaunched, "\n".join(launch.problem for launch in gpu.mislaunched[:5])
    return sources


def test_contract_kernels_of_the_gpu_test_compile_with_nvrtc(monkeypatch):
    pytest.importorskip("cuda.bindings", reason="NVRTC's Python bindings are not installed")
    sources = _gpu_test_sources(monkeypatch)
    scalar = [s for s in sources if "// contract: any alignment" in s]
    vector = [s for s in sources if "-byte aligned" in s.split("// contract:", 1)[1].splitlines()[0]]
    assert len(scalar) >= 10 and len(vector) >= 10, (len(scalar), len(vector))  # both variants of the kinds
    context = multiprocessing.get_context("fork")  # NVRTC needs no GPU: compile side by side
    with concurrent.futures.ProcessPoolExecutor(min(4, os.cpu_count() or 1), mp_context=context) as pool:
        sizes = list(pool.map(_cubin_bytes, sorted(sources), chunksize=4))
    assert all(sizes)


def _cubin_bytes(source: str) -> int:
    return len(compile_cubin(source, "sm_90").cubin)
