"""PyTorch tensors through ``fusec.fuse``, against NumPy: ``pytest -m gpu tests/gpu/test_torch_gpu.py`` (skipped
where CuPy sees no GPU or PyTorch is not installed; the CPU-tensor tests need only PyTorch).

- CUDA tensors in, CUDA tensors out, zero copy (in-place updates land in the tensors' own memory, an updated
  argument returned is the very tensor), on PyTorch's current stream (a side stream included);
- CPU tensors run the NumPy backend and return CPU tensors;
- torch and CuPy arguments mixed; non-contiguous tensors; a tensor that requires grad is a clear error.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.ir.dtypes import BFLOAT16
from fusec.support.errors import FusecTypeError
from tests.helpers import assert_matches_numpy, gpu_count, random_array
from tests.ir.test_inplace import _adamw  # the in-place AdamW step of the CPU tests
from tests.workloads import softmax

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
cupy = pytest.importorskip("cupy")

needs_cuda = pytest.mark.skipif(gpu_count() == 0 or not torch.cuda.is_available(),
                                reason="no CUDA GPU visible to CuPy and PyTorch")


def test_torch_cpu_tensors_run_the_numpy_backend():
    x = random_array(np.random.default_rng(1), (6, 9), np.float32, special=False)
    got = fusec.fuse(softmax)(torch.from_numpy(x.copy()))
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
    assert_matches_numpy(got.numpy(), softmax(x))


def test_torch_cpu_in_place_update_writes_the_tensor():
    rng = np.random.default_rng(2)
    host = [random_array(rng, (50,), np.float32, special=False) for _ in range(4)]
    host[3] = np.abs(host[3])
    tensors = [torch.from_numpy(a.copy()) for a in host]
    fusec.fuse(_adamw)(*tensors, 1e-3, 1)
    _adamw(*host, 1e-3, 1)
    for t, a in zip(tensors, host):
        assert_matches_numpy(t.numpy(), a, exact=True)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_torch_cuda_tensors_in_and_out_zero_copy(dtype):
    x = torch.randn(300, 257, device="cuda", dtype=dtype)
    got = fusec.fuse(softmax)(x)
    assert isinstance(got, torch.Tensor) and got.device == x.device and got.dtype == dtype
    tol = dict(rtol=2e-3, atol=1e-3) if dtype == torch.float16 else {}
    assert_matches_numpy(got.cpu().numpy(), softmax(x.cpu().numpy()), **tol)


def _bf16_host(t):
    """A bfloat16 tensor's values as a NumPy ml_dtypes array (torch's .numpy() has no bfloat16)."""
    return t.detach().view(torch.int16).cpu().numpy().view(BFLOAT16)


@pytest.mark.gpu
@needs_cuda
def test_torch_cuda_bfloat16_tensors_in_and_out_zero_copy():
    """bfloat16 in, bfloat16 out: the tensor travels as its int16 bits (no copy) and comes back as a bfloat16
    tensor; the reference is the NumPy backend on the same values (float32 sums, one rounding per op)."""
    x = torch.randn(300, 257, device="cuda", dtype=torch.bfloat16) * 4
    got = fusec.fuse(softmax)(x)
    assert isinstance(got, torch.Tensor) and got.device == x.device and got.dtype == torch.bfloat16
    assert_matches_numpy(_bf16_host(got), fusec.fuse(softmax)(_bf16_host(x)))
    # against float64: each step rounds once to bfloat16 (unit roundoff u = 2**-8), so z = x - max carries |z| u,
    # which exp makes a relative error of |z| u (up to 12% for |z| near 30: one bfloat16 ULP of rtol was too tight,
    # its first GPU run found 68 elements past it); the row's sum carries the exact-weighted mean of those, and exp,
    # the sum's rounding and the division about u each
    xh = _bf16_host(x).astype(np.float64)
    z = xh - xh.max(axis=-1, keepdims=True)
    exact = softmax(xh)
    u = 2.0 ** -8
    bound = exact * (np.abs(z) * u + (exact * np.abs(z) * u).sum(axis=-1, keepdims=True) + 4 * u)
    error = np.abs(_bf16_host(got).astype(np.float64) - exact)
    assert np.all(error <= bound), float((error / np.maximum(bound, 1e-300)).max())


@pytest.mark.gpu
@needs_cuda
def test_torch_cuda_bfloat16_in_place_update_writes_the_tensor():
    def step(p, g, lr):
        p -= lr * g

    p = torch.randn(1029, 33, device="cuda", dtype=torch.bfloat16)[:, 1:]  # a strided view too
    g = torch.randn(1029, 32, device="cuda", dtype=torch.bfloat16)
    host_p, host_g = _bf16_host(p).copy(), _bf16_host(g)
    pointer = p.data_ptr()
    assert fusec.fuse(step)(p, g, 0.25) is None
    torch.cuda.synchronize()
    fusec.fuse(step)(host_p, host_g, 0.25)  # the NumPy backend, the same arithmetic
    assert p.data_ptr() == pointer
    assert_matches_numpy(_bf16_host(p), host_p, exact=True)


@pytest.mark.gpu
@needs_cuda
def test_torch_cuda_in_place_adamw_against_numpy():
    rng = np.random.default_rng(3)
    host = [random_array(rng, (1024, 33), np.float32, special=False) for _ in range(4)]
    host[3] = np.abs(host[3])
    tensors = [torch.from_numpy(a.copy()).cuda() for a in host]
    pointers = [t.data_ptr() for t in tensors]
    fused = fusec.fuse(_adamw)
    for step in range(1, 4):
        assert fused(*tensors, 1e-3 * step, step) is None
        _adamw(*host, 1e-3 * step, step)
    assert [t.data_ptr() for t in tensors] == pointers
    for t, a in zip(tensors, host):
        assert_matches_numpy(t.cpu().numpy(), a, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@needs_cuda
def test_torch_cuda_runs_on_torchs_current_stream():
    step = fusec.fuse(lambda x, y: (x * 2 + y, (x * y).sum()))
    side = torch.cuda.Stream()
    x = torch.randn(4096, 1024, device="cuda")
    y = torch.randn(4096, 1024, device="cuda")
    with torch.cuda.stream(side):
        x2 = x * 3  # queued on the side stream: fusec's kernels must come after it
        out, total = step(x2, y)
        out2 = out + 1  # and this after fusec's
    side.synchronize()
    xs, ys = x.cpu().numpy() * 3, y.cpu().numpy()
    assert_matches_numpy(out2.cpu().numpy(), xs * 2 + ys + 1)
    assert_matches_numpy(total.cpu().numpy(), np.asarray((xs * ys).sum()), rtol=1e-4, atol=1e-2)


@pytest.mark.gpu
@needs_cuda
def test_torch_cuda_mixed_with_cupy_and_non_contiguous():
    add = fusec.fuse(lambda a, b: a * b + 1)
    a = torch.randn(64, 128, device="cuda").T  # a transposed view
    b = cupy.asarray(np.random.default_rng(4).standard_normal((128, 64)).astype(np.float32))
    got = add(a, b)
    assert isinstance(got, torch.Tensor)
    assert_matches_numpy(got.cpu().numpy(), a.cpu().numpy() * cupy.asnumpy(b) + 1)
    got_cupy = add(b, a)
    assert isinstance(got_cupy, cupy.ndarray)


def test_torch_requires_grad_is_a_clear_error():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(FusecTypeError) as info:
        fusec.fuse(softmax)(x)
    assert "detach" in (info.value.hint or "")
