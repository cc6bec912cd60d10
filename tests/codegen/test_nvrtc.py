"""NVRTC without a GPU: cubins, the ptxas report, and compile errors that show the log and the source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fusec.codegen import nvrtc, templates
from fusec.support.errors import FusecError

TRIVIAL = r"""
#include <cuda_fp16.h>
extern "C" __global__ void scale(const float* __restrict__ x, __half* __restrict__ y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(a * x[i]);
}
"""

SHARED = r"""
template <class T> __global__ void block_sum(const T* x, T* out) {
  __shared__ T partial[256];
  partial[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
"""

BROKEN = """extern "C" __global__ void k(float* x) {
  int i = threadIdx.x;
  float y = x[i];
  x[i] = y + undefined_name;
  x[i + 1] = y;
}
"""


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_nvrtc_trivial_kernel_report_has_registers_and_no_spills(arch: str) -> None:
    result = nvrtc.compile_cubin(TRIVIAL, arch=arch)
    assert result.cubin[:4] == b"\x7fELF" and result.arch == arch
    assert result.kernels is not None and set(result.kernels) == {"scale"}
    k = result.kernel("scale")
    assert k.registers > 0
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.spills == 0
    assert k.stack_frame == 0 and k.shared_memory == 0
    assert f"for '{arch}'" in result.log


def test_nvrtc_name_expressions_give_lowered_names_and_shared_memory() -> None:
    result = nvrtc.compile_cubin(SHARED, name_expressions=["block_sum<float>", "block_sum<double>"])
    assert set(result.lowered_names) == {"block_sum<float>", "block_sum<double>"}
    f32, f64 = result.kernel("block_sum<float>"), result.kernel("block_sum<double>")
    assert (f32.shared_memory, f64.shared_memory) == (256 * 4, 256 * 8)
    assert f32.barriers >= 1 and f32.registers > 0
    assert result.kernel(result.lowered_names["block_sum<float>"]) == f32


def test_nvrtc_compile_error_shows_log_and_offending_line() -> None:
    with pytest.raises(nvrtc.CompileError) as info:
        nvrtc.compile_cubin(BROKEN, arch="sm_90")
    err = info.value
    assert isinstance(err, FusecError)
    text = str(err)
    assert 'identifier "undefined_name" is undefined' in text  # NVRTC's log
    assert "fusec_kernel.cu(4): error" in text
    assert "> 4 |   x[i] = y + undefined_name;" in text  # numbered, marked
    assert "  3 |   float y = x[i];" in text  # context around it
    assert err.source == BROKEN and err.arch == "sm_90" and "undefined_name" in err.log


def test_nvrtc_compile_error_points_at_the_template_instantiation() -> None:
    source = "template <class T> __device__ T twice(T x) { return x.nope; }\n" + "\n" * 5
    source += 'extern "C" __global__ void k(float* x) { x[0] = twice(x[0]); }\n'
    with pytest.raises(nvrtc.CompileError) as info:
        nvrtc.compile_cubin(source)
    text = str(info.value)
    assert "source around line 1:" in text and "source around line 7:" in text
    assert "> 7 | extern" in text


def test_nvrtc_rejects_a_bad_arch() -> None:
    with pytest.raises(nvrtc.CompileError, match="not a GPU architecture"):
        nvrtc.compile_cubin(TRIVIAL, arch="hopper")


def test_nvrtc_finds_cuda_fp16_header() -> None:
    dirs = nvrtc.cuda_include_dirs()
    assert dirs and os.path.isfile(os.path.join(dirs[0], "cuda_fp16.h"))
    assert nvrtc.include_options() == (f"-I{templates.header_dir()}", f"-I{dirs[0]}")  # fusec's headers first


def test_nvrtc_parse_ptxas_report_reads_every_field() -> None:
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
ptxas         .     288 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 372 bytes cmem[0]
ptxas info    : Compile time = 17.278 ms
ptxas info    : Function properties for _Z3foof
ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""
    report = nvrtc.parse_ptxas_report(log)
    assert report == {"k": nvrtc.KernelResources("k", 40, 288, 8, 12, 2048, 1)}
    assert nvrtc.parse_ptxas_report("no report here") is None


FIRST_CALLS_SCRIPT = r"""
import threading
from concurrent.futures import ThreadPoolExecutor

barrier = threading.Barrier(16)
SOURCE = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= %d.0f; }'


def first_call(i):
    from fusec.codegen.nvrtc import compile_cubin

    barrier.wait()  # every thread's first compile at once, in a process that has not used NVRTC yet
    try:
        return "ok" if compile_cubin(SOURCE % i, "sm_90").cubin[:4] == b"\x7fELF" else "not an ELF"
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"


with ThreadPoolExecutor(16) as pool:
    print("\n".join(pool.map(first_call, range(16))))
"""


@pytest.mark.parametrize("run", range(3))
def test_nvrtc_sixteen_threads_first_compile_all_succeed(run: int) -> None:
    """16 threads making their first compile in a fresh process: 1 to 15 of them failed with "compiling CUDA
    needs the cuda-core packages" (the concurrent first import of cuda.core). Each run is a new process."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, "-c", FIRST_CALLS_SCRIPT], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok"] * 16, result.stdout


def test_header_dir_of_an_installed_fusec_is_the_templates_folder(tmp_path, monkeypatch) -> None:
    """Installed from a wheel, ``fusec.templates`` is a namespace package (no ``__init__``): its ``files()`` is a
    MultiplexedPath whose ``str`` is not a path. The include path must be the folder itself (CI's packaging check
    compiled nothing with the wheel until this held)."""
    import sys

    import fusec

    installed = tmp_path / "site" / "fusec" / "templates"
    installed.mkdir(parents=True)
    for name in ("fusec_device.cuh", "schedule.cuh"):
        (installed / name).write_text(templates.source(name))
    monkeypatch.setattr(fusec, "__path__", [*fusec.__path__, str(installed.parent)])
    monkeypatch.delitem(sys.modules, "fusec.templates", raising=False)
    monkeypatch.setattr(templates, "_CHECKOUT_ROOT", tmp_path / "not-a-checkout")
    clear = getattr(templates.header_dir, "cache_clear", lambda: None)
    clear()
    try:
        assert templates.header_dir() == str(installed)
    finally:
        clear()
