"""The build-only mode of the GPU tests (``tests/gpu_build``), checked on the CPU: the stand-in's arrays keep CuPy's
pointers and refuse what CuPy refuses, its modules take only whole sm_90 cubins, the sample is seeded and covers
every case-id token, and, in child processes with the mode on, a GPU test passes through it, a launch on arrays
laid out otherwise than its kernel was built for fails the launch check, and a kernel NVRTC rejects fails its test.
The mode is off unless asked for."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests import backends
from tests.gpu_build import gpu_only
from tests.gpu_build.sample import choose
from tests.gpu_build.standin import cuda, memory
from tests.gpu_build.standin.array import ndarray, to_device, to_host
from tests.helpers import GPU_SKIP_REASON, gpu_count

ROOT = Path(__file__).resolve().parents[1]


# ---- the stand-in's arrays and memory ------------------------------------------------------------------------------


def test_standin_views_keep_cupys_pointer_offsets_and_alignment() -> None:
    a = to_device(np.arange(24, dtype=np.float32).reshape(4, 6))
    assert a.data.ptr % memory.ALIGNMENT == 0 and type(a).__module__ == "cupy"
    assert a[1:].data.ptr == a.data.ptr + 24 and a[:, 1:].data.ptr == a.data.ptr + 4
    assert a.T.data.ptr == a.data.ptr and a.T.strides == (4, 24) and a[::-1].strides == (-24, 4)
    assert a[1:].data.mem is a.data.mem  # a view of the same allocation
    view = ndarray((3, 5), np.float32, a.data + 28, (24, 4))  # as device_copy builds one
    assert to_host(view).tolist() == to_host(a)[1:, 1:].tolist()
    with pytest.raises(ValueError):  # past the allocation's end: a fault on a GPU
        ndarray((4, 6), np.float32, a.data + 4)
    interface = a[:, 1:].__cuda_array_interface__
    assert interface["data"] == (a.data.ptr + 4, False) and interface["strides"] == (24, 4)


def test_standin_arrays_compute_on_the_device_and_refuse_what_cupy_refuses() -> None:
    a = to_device(np.arange(6, dtype=np.int32))
    b = np.add(a, 1)
    assert isinstance(b, ndarray) and to_host(b).tolist() == [1, 2, 3, 4, 5, 6]
    assert isinstance(a.sum(), ndarray) and a.sum().shape == () and int(a.sum()) == 15
    assert isinstance(np.transpose(a.reshape(2, 3)), ndarray)
    out = to_device(np.zeros(6, np.int32))
    assert np.multiply(a, 2, out=out) is out and to_host(out).tolist() == [0, 2, 4, 6, 8, 10]
    assert to_device(np.array(-0.0, np.float32)).shape == ()  # 0-d stays 0-d
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError, match="NumPy array"):
        np.add(a, np.ones(6, np.int32))


def test_standin_memset_and_pointer_lookups_stay_inside_allocations() -> None:
    a = to_device(np.zeros(8, np.uint8))
    cuda.runtime.memsetAsync(a.data.ptr + 2, 0xAB, 4)
    assert to_host(a).tolist() == [0, 0, 171, 171, 171, 171, 0, 0]
    with pytest.raises(ValueError, match="past the end"):
        cuda.runtime.memsetAsync(a.data.ptr + 6, 0, 4)


def test_standin_modules_take_whole_sm90_cubins_and_their_functions_only() -> None:
    from fusec.codegen.nvrtc import compile_cubin

    source = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'
    module = cuda.Module()
    module.load(compile_cubin(source, "sm_90").cubin)
    assert module.get_function("k").name == "k"
    with pytest.raises(cuda.CUDARuntimeError, match="NOT_FOUND"):
        module.get_function("absent")
    with pytest.raises(cuda.CUDARuntimeError, match="sm_80"):
        cuda.Module().load(compile_cubin(source, "sm_80").cubin)
    with pytest.raises(cuda.CUDARuntimeError, match="INVALID_IMAGE"):
        cuda.Module().load(compile_cubin(source, "sm_90").cubin[:200])
    with pytest.raises(cuda.RawLaunch):
        module.get_function("k")((1,), (1,), ())


# ---- the sample and the skip lists -------------------------------------------------------------------------------


def _items(function: str, ids: list[str]) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=f"tests/gpu/test_x.py::{function}[{i}]", callspec=SimpleNamespace(id=i))
            for i in ids]


def test_sample_is_seeded_covers_every_id_token_and_keeps_every_function() -> None:
    ids = [f"{w}-{d}-{lay}" for w in ("a", "b", "e", "d") for d in ("f16", "f32", "i32") for lay in ("c", "t", "s")]
    items = _items("test_one", ids) + _items("test_two", ["x-1", "y-2"]) + [SimpleNamespace(nodeid="tests/gpu/t.py::t")]
    first = choose(items, 0.25, seed=7)
    assert {i.nodeid for i in first} == {i.nodeid for i in choose(list(reversed(items)), 0.25, seed=7)}
    assert first != choose(items, 0.25, seed=8)
    one = [i for i in first if "test_one" in i.nodeid]
    assert len(one) == 9  # a quarter of 36
    assert set().union(*(set(i.callspec.id.split("-")) for i in one)) == {"a", "b", "e", "d", "f16", "f32", "i32",
                                                                           "c", "t", "s"}
    assert any("test_two" in i.nodeid for i in first) and any(i.nodeid.endswith("::t") for i in first)
    assert choose(items, 1, seed=7) == items


def test_skip_lists_name_tests_that_exist() -> None:
    for table in (gpu_only.NEEDS_GPU, gpu_only.RAW_LAUNCHES):
        for key in table:
            path, _, function = key.partition("::")
            assert (ROOT / path).is_file(), key
            assert not function or f"def {function}(" in (ROOT / path).read_text(encoding="utf-8"), key
    assert gpu_only.reason(gpu_only.NEEDS_GPU, "tests/gpu/test_dispatch_gpu.py::test_a[x]")
    assert gpu_only.reason(gpu_only.NEEDS_GPU, "tests/gpu/test_views_gpu.py::test_view_index_gpu_matches_numpy") is None


def test_backend_files_are_the_files_whose_tests_run_on_both_backends() -> None:
    """``tests.backends.FILES`` (what build-only mode and the GPU check add to ``tests/gpu``) names every test file
    with a CuPy half, and only those."""
    users = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
             if backends.runs_on_both_backends(p.read_text(encoding="utf-8"))}
    assert users == set(backends.FILES)


# ---- the mode, in child processes ------------------------------------------------------------------------------------

NEEDS_NO_GPU = pytest.mark.skipif(gpu_count() > 0, reason="build-only mode refuses to start where there is a GPU")


def _pytest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@NEEDS_NO_GPU
def test_gpu_build_mode_runs_a_gpu_test_and_says_so_and_is_off_by_default() -> None:
    """A test of tests/gpu, and of a test on both backends the CuPy half only (the NumPy half is deselected)."""
    test = "tests/gpu/test_regressions_gpu.py::test_negative_zero_constant_output_keeps_its_sign"
    both = "tests/ir/test_numpy_functions.py::test_numpy_function_matches_numpy"
    on = _pytest(test, both, "--gpu-build", "-k", "negative_zero or add_accumulate", "-v")
    assert on.returncode == 0, on.stdout[-3000:]
    assert "fusec GPU BUILD-ONLY MODE" in on.stdout and "4 passed" in on.stdout
    assert "distinct kernel sources generated and compiled for sm_90" in on.stdout
    ran = [line.split(" PASSED")[0] for line in on.stdout.splitlines() if " PASSED" in line]
    assert ran[0] == test and len(ran) == 4 and all("-cupy-" in line for line in ran[1:]), ran
    assert "-numpy-" not in on.stdout
    off = _pytest(test)
    assert off.returncode == 0 and "BUILD-ONLY" not in off.stdout and GPU_SKIP_REASON in off.stdout


@NEEDS_NO_GPU
def test_gpu_build_mode_fails_a_test_whose_kernel_nvrtc_rejects(tmp_path: Path) -> None:
    """A GPU test through the mode with every generated kernel broken (``break_kernels`` in a conftest of its
    own): the compile error is the test's failure, as on a GPU."""
    plugin = tmp_path / "break_kernels_plugin.py"
    plugin.write_text(textwrap.dedent("""
        import pytest

        @pytest.fixture(autouse=True)
        def broken(monkeypatch):
            from tests.correctness.test_runtime import break_kernels
            break_kernels(monkeypatch)
    """))
    test = "tests/gpu/test_regressions_gpu.py::test_negative_zero_constant_output_keeps_its_sign"
    done = _pytest(test, "--gpu-build", "-p", "break_kernels_plugin",
                   env={"PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])})
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 failed" in done.stdout and "deliberately_undefined" in done.stdout


@NEEDS_NO_GPU
def test_gpu_build_launch_check_fails_a_kernel_launched_on_other_layouts() -> None:
    script = textwrap.dedent("""
        from tests.gpu_build.mode import switch_on
        switch_on()
        import cupy, numpy as np, fusec
        from fusec.runtime.launch import KernelLauncher
        plan = fusec.fuse(lambda x: x * 2 + 1).plan(fusec.ArraySpec((64, 64), "float32"))
        region = plan.kernels[0].region
        launcher = KernelLauncher()
        x = cupy.asarray(np.ones((64, 64), np.float32))
        out = launcher.run_region(region, {plan.graph.inputs[0]: x})
        assert float(cupy.asnumpy(out[region.outputs[0]]).sum()) == 3 * 64 * 64
        recipe = launcher.recipes(region)[0]
        try:  # the kernel of the contiguous, aligned array launched on a transposed view at an odd offset
            view = cupy.asarray(np.ones((65, 64), np.float32))[1:].T
            args = recipe.arguments([view], [cupy.empty((64, 64), np.float32)], None)
            recipe.function((recipe.grid, 1, 1), recipe.block, tuple(args))
        except AssertionError as exc:
            print("REFUSED:", str(exc).splitlines()[0])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "REFUSED: kernel k0" in done.stdout and "was built for other layouts" in done.stdout
