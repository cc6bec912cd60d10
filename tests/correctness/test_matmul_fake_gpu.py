"""The matmul kind's runtime path on the CPU's fake GPU (``tests/fake_cupy.py``: fusec's launcher, run_plan and the
Executable for real, ``cupy.matmul`` accumulating float16 in float32 as cuBLAS does): the library call runs on the
checked path (no dispatch runner), into fresh, poisoned or ``out=`` arrays, on views of its arguments, for empty
extents and K = 1 too; CuPy's compute type is set for the call and put back."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import fusec
from fusec.ir.dtypes import SHORT_NAMES
from fusec.ir.text import parse
from fusec.kinds.matmul import compute_type, cublas_matmul
from fusec.runtime import launch as runtime
from fusec.runtime.plan import make_plan
from tests.fake_cupy import fake_gpu, to_device
from tests.helpers import assert_gemm_matches, seed_of


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed_of("matmul fake gpu", seed, shape, dtype))
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


def _host(x):
    return np.array(x).view(np.ndarray)


def _plan(a_shape, b_shape, dtype):
    result = _type(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1]), dtype)
    return make_plan(parse(f"func @mm(%a: {_type(a_shape, dtype)}, %b: {_type(b_shape, dtype)}) -> {result} {{\n"
                           f"  %0 = matmul %a, %b : {result}\n  return %0\n}}\n"))


def _type(shape, dtype):
    return f"{SHORT_NAMES[np.dtype(dtype)]}[{','.join(map(str, shape))}]"


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32"])
@pytest.mark.parametrize("a_shape, b_shape", [
    ((67, 33), (33, 129)), ((3, 40, 1), (3, 1, 50)), ((0, 33), (33, 48)), ((64, 33), (33, 0)), ((64, 0), (0, 48)),
    ((4, 1, 40, 24), (3, 24, 50)), ((2, 30, 40), (40, 50)),
], ids=["odd", "k1", "m0", "n0", "k0", "batch_broadcast", "stack_times_matrix"])
def test_matmul_fake_gpu_poisoned_outputs_are_written_whole(monkeypatch, dtype, a_shape, b_shape):
    """A plan of one matmul node (K = 1 and empty extents included, which the frontend keeps product-and-sum) run by
    a poisoning launcher: every output element written (K = 0: zeros)."""
    plan = _plan(a_shape, b_shape, dtype)
    a, b = _data(a_shape, dtype, 0), _data(b_shape, dtype, 1)
    with fake_gpu(monkeypatch) as gpu:
        launcher = runtime.KernelLauncher(poison=True)
        (got,) = runtime.run_plan(plan, [to_device(a), to_device(b)], launcher=launcher)
        assert launcher.plan_runner(plan, [to_device(a), to_device(b)]) is None  # poisoning: the checked path
        plain = runtime.KernelLauncher()
        runner = plain.plan_runner(plan, [to_device(a), to_device(b)])  # the fast path calls the GEMM in line
        fast = [runner.run((to_device(a), to_device(b)))[0] for _ in range(3)]  # recycled outputs among them
    assert not gpu.mislaunched
    for result in (got, *fast):
        assert_gemm_matches(_host(result), a, b)


@pytest.mark.parametrize("layout", ["transposed", "strided", "offset"])
def test_matmul_fake_gpu_views_of_arguments_and_out(monkeypatch, layout):
    base_a, base_b = _data((70, 90), "float32", 2), _data((90, 140), "float32", 3)
    views = {"transposed": (lambda x: x.T, lambda y: y.T), "strided": (lambda x: x[::2, ::2], lambda y: y[::2, ::2]),
             "offset": (lambda x: x[3:, 5:50], lambda y: y[7:52, 1:])}
    va, vb = views[layout]
    host_a = va(base_a if layout != "transposed" else np.ascontiguousarray(base_a.T))
    host_b = vb(base_b if layout != "transposed" else np.ascontiguousarray(base_b.T))
    fn = lambda a, b: a @ b  # noqa: E731
    with fake_gpu(monkeypatch) as gpu:
        dev_a = va(to_device(base_a if layout != "transposed" else np.ascontiguousarray(base_a.T)))
        dev_b = vb(to_device(base_b if layout != "transposed" else np.ascontiguousarray(base_b.T)))
        f = fusec.fuse(fn)
        got = f(dev_a, dev_b)
        out = to_device(np.full(got.shape, np.nan, np.float32))
        returned = f(dev_a, dev_b, out=out)
        again = [f(dev_a, dev_b) for _ in range(3)]  # repeat calls: the fast path, the GEMM called in line
        assert f._fast, "a plan with a GEMM has a dispatch runner"
    assert not gpu.mislaunched and returned is out
    for result in (got, out, *again):
        assert_gemm_matches(_host(result), host_a, host_b)


def test_matmul_fake_gpu_epilogue_reads_the_product(monkeypatch):
    x, w, bias = _data((64, 32), "float32", 4), _data((32, 96), "float32", 5), _data((96,), "float32", 6)
    fn = lambda x, w, b: np.tanh(x @ w + b)  # noqa: E731
    with fake_gpu(monkeypatch) as gpu:
        f = fusec.fuse(fn)
        args = [to_device(x), to_device(w), to_device(bias)]
        results = [f(*args) for _ in range(3)]  # the checked path, then the runner (GEMM, then the epilogue kernel)
    assert not gpu.mislaunched
    for got in results:
        np.testing.assert_allclose(_host(got), fn(x, w, bias), rtol=1e-5, atol=1e-5)


def test_matmul_fake_gpu_torch_free_call_summary_names_the_transposes(monkeypatch):
    """What ``cuda_source`` names is the layout the call takes: ``a.T @ b`` of C-contiguous matrices is ``transa=T``
    (CuPy passes it to cuBLAS as a transpose), a stepped view is copied."""
    a, b = _data((33, 67), "float32", 7), _data((33, 129), "float32", 8)
    f = fusec.fuse(lambda a, b: a.T @ b)
    assert "transa=T, transb=N" in f.cuda_source(a, b)
    assert "transa=copy" in fusec.fuse(lambda a, b: a[:, ::2] @ b).cuda_source(_data((67, 66), "float32", 9), b)


class _Linalg(types.ModuleType):
    """A stand-in for ``cupy._core._routines_linalg``'s compute-type switch, recording what it was set to."""

    COMPUTE_TYPE_DEFAULT, COMPUTE_TYPE_TF32 = 1, 7

    def __init__(self):
        super().__init__("cupy._core._routines_linalg")
        self.types = {np.dtype(np.float16): 1, np.dtype(np.float32): 7}  # as after CUPY_TF32=1
        self.during = []

    def get_compute_type(self, dtype):
        return self.types[np.dtype(dtype)]

    def set_compute_type(self, dtype, value):
        self.types[np.dtype(dtype)] = value


@pytest.mark.parametrize("tf32", [False, True])
def test_matmul_compute_type_is_float32_unless_tf32_and_put_back(monkeypatch, tf32):
    linalg = _Linalg()
    xp = types.SimpleNamespace(__name__="cupyish")
    monkeypatch.setitem(sys.modules, "cupyish._core._routines_linalg", linalg)
    a, b = _data((40, 30), "float32", 10), _data((30, 20), "float32", 11)
    out = np.empty((40, 20), np.float32)

    def matmul(x, y, out):
        linalg.during.append(linalg.get_compute_type(np.float32))
        np.matmul(x, y, out=out)

    xp.matmul = matmul
    cublas_matmul(xp, a, b, out, tf32)
    assert linalg.during == [7 if tf32 else 1]  # TF32 only when asked for, whatever CuPy had
    assert linalg.types[np.dtype(np.float32)] == 7  # and CuPy's setting back afterwards
    assert_gemm_matches(out, a, b)
    with compute_type(xp, np.dtype(np.float64), True):  # float64 (and integers): nothing to set
        assert linalg.types[np.dtype(np.float32)] == 7
