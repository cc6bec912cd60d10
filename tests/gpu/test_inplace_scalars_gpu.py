"""Runtime scalars and in-place updates on the GPU, against NumPy: ``pytest -m gpu
tests/gpu/test_inplace_scalars_gpu.py`` (skipped where CuPy sees no GPU).

- a 100-step training loop with a new Python-float learning rate and a Python-int step every call traces
  once and compiles once (the launcher's compile counter, a fresh cubin cache);
- in-place AdamW on CuPy arrays (float32, float16; contiguous and strided views) updates p, m, v in their
  own buffers in one kernel, as NumPy updates its arrays;
- an update that a kernel cannot write over its input (a row reduction of it in the same kernel) is copied in
  after the kernels, with NumPy's result; mask and whole assignments; int32 updates.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusec
from fusec.ir.dtypes import BFLOAT16
from fusec.runtime import launch as runtime
from tests.helpers import GPU_ONLY, assert_matches_numpy, assert_reduction_matches_numpy, random_array
from tests.ir.test_inplace import _adamw  # the in-place AdamW step of the CPU tests

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


def _adam(p, g, m, v, lr, step, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** step)
    v_hat = v / (1 - b2 ** step)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def test_runtime_scalars_gpu_training_loop_traces_once_compiles_once(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(tmp_path))
    monkeypatch.setattr(runtime, "_DEFAULT", None, raising=False)
    launcher = runtime.default_launcher()
    calls = []

    def traced(p, g, m, v, lr, step):
        calls.append(1)
        return _adam(p, g, m, v, lr, step)

    fused = fusec.fuse(traced)
    rng = np.random.default_rng(1)
    p, m, v = (random_array(rng, (1000, 37), np.float32, special=False) for _ in range(3))
    v = np.abs(v)
    dp, dm, dv = (cupy.asarray(a) for a in (p, m, v))
    before = launcher.compiles
    for step in range(1, 101):
        g = random_array(rng, (1000, 37), np.float32, special=False)
        lr = 1e-3 * math.cos(step / 100)
        dp, dm, dv = fused(dp, cupy.asarray(g), dm, dv, lr, step)
        p, m, v = _adam(p, g, m, v, lr, step)
    assert len(calls) == 1
    assert launcher.compiles - before <= 1
    for got, want in ((dp, p), (dm, m), (dv, v)):
        assert_matches_numpy(cupy.asnumpy(got), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BFLOAT16], ids=str)
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_inplace_gpu_adamw_updates_buffers_in_one_kernel(dtype, strided):
    rng = np.random.default_rng(2)
    shape = (513, 40) if strided else (513, 20)
    host = [random_array(rng, shape, dtype, special=False) for _ in range(4)]
    host[3] = np.abs(host[3])
    device = [cupy.asarray(a) for a in host]
    if strided:  # every other column: views into bigger buffers, updated in place through the view
        host = [a[:, ::2] for a in host]
        device = [a[:, ::2] for a in device]
    pointers = [a.data.ptr for a in device]
    fused = fusec.fuse(_adamw)
    assert len(fused.plan(*host, 1e-3, 1).kernels) == 1
    for step in range(1, 4):
        with np.errstate(all="ignore"):
            assert fused(*device, 1e-3 * step, step) is None
            _adamw(*host, 1e-3 * step, step)
    assert [a.data.ptr for a in device] == pointers
    # 16-bit floats: two ULP after three steps (bfloat16's 2^-7 each), every op rounded as NumPy's loop rounds it
    tol = {np.dtype(np.float16): dict(rtol=2e-3, atol=1e-3), BFLOAT16: dict(rtol=2.0**-6, atol=1e-3)}.get(
        np.dtype(dtype), dict(rtol=1e-5, atol=1e-6))
    for got, want in zip(device, host):
        assert_matches_numpy(cupy.asnumpy(got), want, **tol)


def test_inplace_gpu_row_reduction_then_update_copies_after():
    def f(x):
        s = x.sum(axis=1, keepdims=True)
        x -= x.max(axis=1, keepdims=True)
        return s

    x = random_array(np.random.default_rng(3), (300, 1000), np.float32, special=False)
    dx = cupy.asarray(x)
    s = fusec.fuse(f)(dx)
    reference = x.astype(np.float64).sum(axis=1, keepdims=True)
    want_s = f(x)
    assert_reduction_matches_numpy(cupy.asnumpy(s), want_s, reference, rtol=1e-5, atol=1e-4)
    assert_matches_numpy(cupy.asnumpy(dx), x, exact=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_inplace_gpu_mask_and_whole_assignment(dtype):
    def f(x, y):
        x[x > 0] = 3
        y[...] = x * 2
        x += 1
        return x

    rng = np.random.default_rng(4)
    x, y = random_array(rng, (77, 33), dtype), random_array(rng, (77, 33), dtype)
    dx, dy = cupy.asarray(x), cupy.asarray(y)
    with np.errstate(all="ignore"):
        got = fusec.fuse(f)(dx, dy)
        f(x, y)
    assert got is dx
    assert_matches_numpy(cupy.asnumpy(dx), x, exact=True)
    assert_matches_numpy(cupy.asnumpy(dy), y, exact=True)


def test_runtime_scalars_gpu_weak_and_strong_promotion():
    fused = fusec.fuse(lambda x, s: x * s + s)
    x = random_array(np.random.default_rng(5), (1000,), np.float32)
    dx = cupy.asarray(x)
    for s in (0.1, -3, np.float64(0.3), np.float32(2.5), np.int8(-2), float("nan"), float("inf")):
        with np.errstate(all="ignore"):
            want = x * s + s
        got = fused(dx, s)
        assert got.dtype == want.dtype
        assert_matches_numpy(cupy.asnumpy(got), want)
