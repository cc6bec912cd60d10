"""CORRECTNESS.md's items, the input errors and the runtime's robustness on the GPU, through ``fusec.fuse`` with
CuPy arrays: ``pytest -m gpu tests/gpu/test_correctness_gpu.py`` (skipped where CuPy sees no GPU).

- the cases of ``tests/correctness/cases.py`` with more than 2**31 elements, against CuPy eager on the device (the
  others run on both backends in ``tests/correctness/test_correctness.py``);
- every input error of ``tests/correctness/test_input_errors.py`` with CuPy arrays, real NumPy/CuPy mixes, and
  arrays or ``out=`` on another GPU than the current one (skipped with one GPU);
- concurrent calls from threads on their own streams (each source compiled once), a truncated on-disk cubin
  rebuilt, a compile error naming the function with NVRTC's log, and ``fusion=False`` / ``FUSEC_DISABLE_FUSION``
  running one kernel per op with NumPy's results.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.codegen.nvrtc import CompileError
from fusec.codegen.render import render_kernel
from fusec.runtime import cubin_cache
from fusec.runtime import launch as runtime
from tests.correctness import test_runtime as cpu_runtime
from tests.correctness.cases import CASES, Case
from tests.correctness.check import kernel_specs, rng_of
from tests.correctness.test_input_errors import ERRORS, ErrorCase, add, check_error
from tests.helpers import GPU_ONLY, assert_matches_numpy, gpu_count, random_array

cupy = pytest.importorskip("cupy")


pytestmark = GPU_ONLY

LARGE = [c for c in CASES if c.large]
GPU_ERRORS = [c for c in ERRORS if "cupy" in c.kinds]


@pytest.fixture(scope="module")
def launchers() -> tuple[runtime.KernelLauncher, runtime.KernelLauncher]:
    """A poisoning and a plain launcher, the unfused workloads' kernels compiled up front (in parallel processes)."""
    arch = "sm_" + cupy.cuda.Device().compute_capability
    sources = []
    for fn, shapes in cpu_runtime.WORKLOADS.values():
        args = tuple(cupy.zeros(s, np.float32) for s in shapes)
        sources += [render_kernel(s) for s in kernel_specs(fn, args, fusion=False)]
    runtime.precompile(sources, arch)
    return runtime.KernelLauncher(poison=True), runtime.KernelLauncher()


@pytest.fixture
def use_launcher(monkeypatch: pytest.MonkeyPatch):
    """``use_launcher(l)``: make ``l`` the launcher that fused calls use."""
    return lambda launcher: monkeypatch.setattr(runtime, "_DEFAULT", launcher)


@pytest.mark.parametrize("case", LARGE, ids=[c.id for c in LARGE])
def test_gpu_large_case_matches_cupy(case: Case) -> None:
    call = case.make(cupy, rng_of(case))
    got = fusec.fuse(case.fn)(*call.args)
    want = case.fn(*call.args)  # CuPy eager (NumPy's ufuncs dispatch to CuPy); integer results, exact
    small = case.fn(*[np.ones(5, a.dtype) for a in call.args])  # NumPy's result dtypes
    got, want, small = ([r] if not isinstance(r, tuple) else list(r) for r in (got, want, small))
    assert len(got) == len(want)
    for g, w, s in zip(got, want, small):
        assert g.dtype == np.asarray(s).dtype and g.shape == w.shape, (g.dtype, g.shape, np.asarray(s).dtype, w.shape)
        assert bool((g == w.astype(g.dtype)).all()), f"{case.id}: {int((g != w.astype(g.dtype)).sum())} elements differ"
    del call, got, want
    cupy.get_default_memory_pool().free_all_blocks()


# ---- input errors -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", GPU_ERRORS, ids=[c.id for c in GPU_ERRORS])
def test_gpu_input_error(case: ErrorCase) -> None:
    check_error(case, cupy)


def test_gpu_mixed_numpy_and_cupy_arguments_raise_type_error_naming_them() -> None:
    with pytest.raises(fusec.FusecTypeError, match=r"add got cupy argument 'a' and numpy argument 'b'") as info:
        fusec.fuse(add)(cupy.ones(3, np.float32), np.ones(3, np.float32))
    assert isinstance(info.value, TypeError)
    with pytest.raises(fusec.FusecTypeError, match=r"out= of add must be a cupy\.ndarray"):
        fusec.fuse(add)(cupy.ones(3, np.float32), 1.0, out=np.zeros(3, np.float32))


@pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")
def test_gpu_arrays_on_another_gpu_than_the_current_one() -> None:
    fused = fusec.fuse(lambda x, y: x * 2 + y)
    with cupy.cuda.Device(0):
        x0, y0 = cupy.arange(6, dtype=np.float32), cupy.ones(6, np.float32)
        for _ in range(2):  # the second call takes the fast path
            assert_matches_numpy(cupy.asnumpy(fused(x0, y0)), np.arange(6, dtype=np.float32) * 2 + 1)
    with cupy.cuda.Device(1):
        x1, y1 = cupy.arange(6, dtype=np.float32), cupy.ones(6, np.float32)
        with pytest.raises(fusec.FusecValueError, match=r"argument 'x' is on GPU 0 but the current device is GPU 1"):
            fused(x0, y1)
        with pytest.raises(fusec.FusecValueError, match=r"out= of .* is on GPU 0"):
            fused(x1, y1, out=_on(0, (6,)))
        for _ in range(2):  # same layout as the device-0 fast path, but on device 1
            got = fused(x1, y1)
            assert got.device.id == 1
            assert_matches_numpy(cupy.asnumpy(got), np.arange(6, dtype=np.float32) * 2 + 1)
    with cupy.cuda.Device(0):
        with pytest.raises(ValueError, match=r"on GPU 1 but the current device is GPU 0"):
            fused(x1, y1)  # the fast path of device 1 must not run here


def _on(device: int, shape: tuple[int, ...]):
    with cupy.cuda.Device(device):
        return cupy.zeros(shape, np.float32)


# ---- runtime robustness -------------------------------------------------------------------------------------------


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> runtime.KernelLauncher:
    """A new default launcher with an empty cubin cache: everything compiles here."""
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(tmp_path))
    launcher = runtime.KernelLauncher()
    monkeypatch.setattr(runtime, "_DEFAULT", launcher)
    return launcher


def test_gpu_concurrent_calls_from_threads_compile_each_kernel_once(fresh: runtime.KernelLauncher) -> None:
    fused = fusec.fuse(cpu_runtime.router)
    rng = np.random.default_rng(11)
    jobs = []  # whole numbers: the argmax of a row never hinges on a rounding
    for shape in [(5, 7), (64, 33), (300, 129), (2, 1030)] * 4:
        jobs.append((rng.integers(-30, 30, shape).astype(np.float32),
                     rng.integers(-5, 5, shape[-1:]).astype(np.float32)))
    barrier = threading.Barrier(8)

    def call(job):
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            try:
                barrier.wait(timeout=10)
            except threading.BrokenBarrierError:
                pass
            outs = [fused(cupy.asarray(job[0]), cupy.asarray(job[1])) for _ in range(3)]
            host = [[cupy.asnumpy(o) for o in out] for out in outs]
        stream.synchronize()
        return host

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, jobs))
    for job, host in zip(jobs, results):
        with np.errstate(all="ignore"):
            want = cpu_runtime.router(*job)
        for got in host:
            for g, w in zip(got, want):
                assert_matches_numpy(g, w)
    assert fresh.compiles == len(fresh._modules), f"{fresh.compiles} compiles of {len(fresh._modules)} sources"


def test_gpu_truncated_cache_entry_is_rebuilt(tmp_path: Path, fresh: runtime.KernelLauncher,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    x = cupy.asarray(random_array(np.random.default_rng(1), (33, 65), np.float32, special=False))
    want = cpu_runtime.softmax(cupy.asnumpy(x))
    assert_matches_numpy(cupy.asnumpy(fusec.fuse(cpu_runtime.softmax)(x)), want)
    assert fresh.compiles == 1
    entries = list(tmp_path.glob("*.cubin"))
    assert len(entries) == 1
    entries[0].write_bytes(entries[0].read_bytes()[:1000])
    again = runtime.KernelLauncher()
    monkeypatch.setattr(runtime, "_DEFAULT", again)
    assert_matches_numpy(cupy.asnumpy(fusec.fuse(cpu_runtime.softmax)(x)), want)
    assert again.compiles == 1, "the truncated entry was loaded"
    assert cubin_cache.read_cubin(entries[0]) is not None


def test_gpu_compile_error_names_the_function_and_shows_the_log(fresh: runtime.KernelLauncher,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cpu_runtime.break_kernels(monkeypatch)
    x = cupy.ones((8, 16), np.float32)
    with pytest.raises(CompileError) as info:
        fusec.fuse(cpu_runtime.softmax)(x)
    cpu_runtime.check_compile_error(info.value, "softmax")


@pytest.mark.parametrize("workload", list(cpu_runtime.WORKLOADS))
def test_gpu_fusion_false_runs_one_kernel_per_op_with_numpy_results(workload: str, launchers,
                                                                      use_launcher) -> None:
    fn, shapes = cpu_runtime.WORKLOADS[workload]
    use_launcher(launchers[0])
    host = [(np.random.default_rng(5).random(s) + 0.5).astype(np.float32) for s in shapes]  # sums do not cancel
    with np.errstate(all="ignore"):
        want = fn(*host)
    got = fusec.fuse(fn, fusion=False)(*[cupy.asarray(a) for a in host])
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert_matches_numpy(cupy.asnumpy(g), w, rtol=1e-5)


def test_gpu_fusec_disable_fusion_runs_the_unfused_plan(monkeypatch: pytest.MonkeyPatch, launchers,
                                                        use_launcher) -> None:
    use_launcher(launchers[0])
    monkeypatch.setenv("FUSEC_DISABLE_FUSION", "1")
    host = np.linspace(-3, 3, 64 * 33, dtype=np.float32).reshape(64, 33)
    fused = fusec.fuse(cpu_runtime.softmax)
    assert len(fused.plan(host).kernels) == 5
    assert_matches_numpy(cupy.asnumpy(fused(cupy.asarray(host))), cpu_runtime.softmax(host), rtol=1e-5)
