"""Matrix products on the GPU (the matmul kind: cuBLAS through CuPy), against NumPy: ``pytest -m gpu
tests/gpu/test_matmul_gpu.py``; ``pytest --gpu-build`` runs them on the CPU's CuPy stand-in, whose ``matmul``
accumulates float16 in float32 as cuBLAS does.

- every dtype, odd M, N, K, transposed, strided and offset operands, batch broadcasting, a stack times a matrix:
  within the float32-accumulation bound of the float64 product (integers exactly, wrapping as NumPy's);
- ``out=`` arrays (contiguous and strided) and poisoned outputs (a launcher that fills them with 0xAB first);
- the epilogues of LLM code: ``gelu(x @ w1 + b1)``, ``softmax(q @ k.T * s + mask)``, ``layernorm(x @ w + b + r)``,
  ``argmax(softmax(x @ w_r))``, one kernel after the GEMM reading its product once;
- float32 is not TF32, whatever CuPy's own switch says: a product whose every partial sum float32 holds exactly
  (``1 + 2^-12`` summed 1024 times is ``1024.25``) and that TF32's 10-bit mantissa rounds (to 1024);
- PyTorch CUDA tensors in and out.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fusec
from fusec.runtime import launch as runtime
from tests.helpers import GPU_ONLY, assert_gemm_matches, assert_matches_numpy, device_copy, seed_of
from tests.workloads import gelu, layernorm, softmax

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

DTYPES = ["float16", "float32", "float64", "int32", "int8", "uint8"]


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed_of("matmul gpu", seed, shape, dtype))
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0 if np.dtype(dtype).kind == "u" else -60, 60, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


SHAPES = {  # name: (function, operand shapes), each a matrix product beyond the loop limit
    "odd": (lambda a, b: a @ b, [(131, 67), (67, 257)]),
    "k_large_odd": (lambda a, b: a @ b, [(40, 1029), (1029, 33)]),
    "transposed_a": (lambda a, b: a.T @ b, [(67, 131), (67, 257)]),
    "transposed_b": (lambda a, b: a @ b.T, [(131, 67), (257, 67)]),
    "batched": (lambda a, b: a @ b, [(3, 45, 67), (3, 67, 51)]),
    "batch_broadcast": (lambda a, b: a @ b, [(4, 1, 45, 37), (3, 37, 51)]),
    "stack_times_matrix": (lambda x, w: x @ w, [(2, 45, 67), (67, 51)]),
    "attention_einsum": (lambda q, k: np.einsum("bqd,bkd->bqk", q, k), [(3, 65, 24), (3, 77, 24)]),
    "tensordot": (lambda a, b: np.tensordot(a, b), [(40, 6, 7), (6, 7, 50)]),
}


def _assert_within_the_gemm_bound(fn, host, got):
    """``got`` (of the result's dtype) within the float32-accumulation bound (float64 for float64) of ``fn``'s exact
    product of ``host``: ``K u sum|a||b|`` plus one rounding to the result's dtype, K at least each case's."""
    exact = fn(*[h.astype(np.float64) for h in host])
    magnitude = fn(*[np.abs(h.astype(np.float64)) for h in host])
    k = max(h.shape[-1] for h in host)
    u = 2.0 ** -53 if got.dtype == np.float64 else 2.0 ** -24
    bound = 1.01 * k * u * magnitude + ml_dtypes.finfo(got.dtype).eps / 2 * (np.abs(exact) + k * u * magnitude)
    err = np.abs(got.astype(np.float64) - exact)
    assert (err <= bound).all(), f"error {err.max()} over the float32-accumulation bound"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(SHAPES))
def test_matmul_gpu_matches_numpy_within_the_gemm_bound(name, dtype):
    fn, shapes = SHAPES[name]
    host = [_data(s, dtype, i) for i, s in enumerate(shapes)]
    f = fusec.fuse(fn)
    assert "matmul" in [k.kind for k in f.plan(*host).kernels]
    got = cupy.asnumpy(f(*[cupy.asarray(h) for h in host]))
    want = fn(*host)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "iu":
        assert_matches_numpy(got, want, exact=True)
        return
    _assert_within_the_gemm_bound(fn, host, got)


@pytest.mark.parametrize("layout", ["strided", "offset", "reversed"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_matmul_gpu_views_of_arguments(layout, dtype):
    base_a, base_b = _data((140, 90), dtype, 1), _data((100, 270), dtype, 2)
    view = {"strided": lambda x: x[::2, ::3], "offset": lambda x: x[3:, 1:], "reversed": lambda x: x[::-1]}[layout]
    a, b = view(base_a), view(base_b)[: view(base_a).shape[1]]
    f = fusec.fuse(lambda a, b: a @ b)
    got = f(device_copy(a), device_copy(b))
    assert_gemm_matches(cupy.asnumpy(got), a, b)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
def test_matmul_gpu_out_arrays_contiguous_and_strided(dtype):
    a, b = _data((67, 45), dtype, 3), _data((45, 129), dtype, 4)
    f = fusec.fuse(lambda a, b: a @ b)
    dev = [cupy.asarray(a), cupy.asarray(b)]
    out = cupy.full((67, 129), 7, dtype)
    assert f(*dev, out=out) is out
    assert_gemm_matches(cupy.asnumpy(out), a, b)
    wide = cupy.full((67, 2 * 129), 7, dtype)
    strided = wide[:, ::2]
    f(*dev, out=strided)
    assert_gemm_matches(cupy.asnumpy(strided), a, b)
    assert (cupy.asnumpy(wide[:, 1::2]) == 7).all()  # nothing written between the out= array's elements


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [[(131, 67), (67, 257)], [(3, 1, 45, 37), (2, 37, 51)], [(2, 45, 67), (67, 51)]],
                         ids=["matrix", "broadcast", "stack_times_matrix"])
def test_matmul_gpu_poisoned_outputs_are_written_whole(dtype, shapes):
    fn = lambda a, b: np.tanh(a @ b) if np.dtype(dtype).kind == "f" else (a @ b) + 1  # noqa: E731
    host = [_data(s, dtype, i) for i, s in enumerate(shapes)]
    plan = fusec.fuse(fn).plan(*host)
    assert [k.kind for k in plan.kernels] == ["matmul", "pointwise"]
    (got,) = runtime.run_plan(plan, [cupy.asarray(h) for h in host], launcher=runtime.KernelLauncher(poison=True))
    got = cupy.asnumpy(got)
    if np.dtype(dtype).kind == "f":
        tol = dict(rtol=2e-3, atol=2e-3) if dtype == "float16" else dict(rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got.astype(np.float64), np.tanh(np.matmul(*[h.astype(np.float64) for h in host])),
                                   **tol)
    else:
        assert_matches_numpy(got, fn(*host), exact=True)


def _causal(n):
    return np.where(np.tril(np.ones((n, n), bool)), 0.0, -np.inf).astype(np.float32)


EPILOGUES = {
    "mlp_gelu": (lambda x, w, b: gelu(x @ w + b), [(257, 96), (96, 384), (384,)], "pointwise"),
    "attention_scores": (lambda q, k, m: softmax(q @ k.T * 0.125 + m), [(129, 64), (129, 64), None], "rows"),
    "layernorm_residual": (lambda x, w, b, r: layernorm(x @ w + b + r), [(257, 96), (96, 384), (384,), (257, 384)],
                           "rows"),
    "router_top1": (lambda x, w: np.argmax(softmax(x @ w), axis=-1), [(1029, 96), (96, 64)], "rows"),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(EPILOGUES))
def test_matmul_gpu_epilogues_one_kernel_after_the_gemm(name, dtype):
    fn, shapes, kind = EPILOGUES[name]
    host = [(_causal(shapes[0][0]) if s is None else _data(s, np.float32, i) / 4).astype(dtype)
            for i, s in enumerate(shapes)]
    f = fusec.fuse(fn)
    assert [k.kind for k in f.plan(*host).kernels] == ["matmul", kind]
    got = cupy.asnumpy(f(*[cupy.asarray(h) for h in host]))
    want64 = fn(*[h.astype(np.float64) for h in host])
    if name == "router_top1":  # the same expert, but where two are within the GEMM's error of each other
        product = np.matmul(host[0].astype(np.float64), host[1].astype(np.float64))
        picked = np.take_along_axis(product, got[:, None].astype(np.int64), axis=-1)[:, 0]
        slack = 4 * 96 * ml_dtypes.finfo(dtype).eps * np.matmul(np.abs(host[0]).astype(np.float64),
                                                         np.abs(host[1]).astype(np.float64)).max(axis=-1)
        assert (picked >= product.max(axis=-1) - slack).all()
        return
    tol = dict(rtol=5e-3, atol=5e-3) if dtype == "float16" else dict(rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got.astype(np.float64), want64, **tol)


def test_matmul_gpu_float32_is_not_tf32():
    """``1 + 2^-12`` (exact in float32, 1 in TF32) summed 1024 times: every partial sum float32 holds exactly, in any
    order or split, so a float32 GEMM gives 1024.25 everywhere and TF32's gives 1024. CuPy's own switch set to TF32
    beforehand (as ``CUPY_TF32=1`` does) must not reach fusec's GEMM, nor stay changed after it."""
    k = 1024
    a = np.full((64, k), 1 + 2.0 ** -12, np.float32)
    b = np.ones((k, 48), np.float32)
    linalg = None
    try:
        from cupy._core import _routines_linalg as linalg
    except ImportError:  # the CPU's stand-in: it has no compute type to set
        pass
    before = None
    if linalg is not None:
        before = linalg.get_compute_type(np.float32)
        linalg.set_compute_type(np.float32, linalg.COMPUTE_TYPE_TF32)
    try:
        for fn, shapes in ((lambda a, b: a @ b, None), (lambda a, b: a @ b, (3,))):
            args = [a, b] if shapes is None else [np.broadcast_to(a, shapes + a.shape).copy(), b]
            got = cupy.asnumpy(fusec.fuse(fn)(*[cupy.asarray(x) for x in args]))
            assert (got == np.float32(1024.25)).all(), f"not float32: {np.unique(got)[:4]}"
        loose = cupy.asnumpy(fusec.fuse(lambda a, b: a @ b, tf32=True)(cupy.asarray(a), cupy.asarray(b)))
        assert np.isin(loose, [np.float32(1024), np.float32(1024.25)]).all()  # TF32 allowed, not required
        if linalg is not None:
            assert linalg.get_compute_type(np.float32) == linalg.COMPUTE_TYPE_TF32  # CuPy's setting put back
    finally:
        if linalg is not None:
            linalg.set_compute_type(np.float32, before)


torch_module = None
try:
    import torch as torch_module
except ImportError:
    pass


@pytest.mark.skipif(torch_module is None or not torch_module.cuda.is_available(),
                    reason="PyTorch with CUDA is not installed")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_matmul_gpu_torch_tensors_in_and_out(dtype):
    torch = torch_module
    x, w, b = _data((257, 96), dtype, 5) / 4, _data((96, 384), dtype, 6) / 4, _data((384,), dtype, 7)
    fn = lambda x, w, b: gelu(x @ w + b)  # noqa: E731
    tensors = [torch.from_numpy(h).cuda() for h in (x, w, b)]
    got = fusec.fuse(fn)(*tensors)
    assert isinstance(got, torch.Tensor) and got.device == tensors[0].device and str(got.dtype).endswith(dtype)
    tol = dict(rtol=5e-3, atol=5e-3) if dtype == "float16" else dict(rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got.cpu().numpy().astype(np.float64), fn(*[h.astype(np.float64) for h in (x, w, b)]),
                               **tol)


@pytest.mark.parametrize("name", list(SHAPES))
def test_matmul_gpu_bfloat16_is_the_float32_gemm_rounded_once(name):
    """bfloat16 products run as float32 GEMMs of the (exactly cast) operands, rounded once: the bits of the same
    float32 product on the host, wherever cuBLAS's float32 summation order leaves the rounding alone, and within
    the float32-accumulation bound everywhere."""
    fn, shapes = SHAPES[name]
    bf16 = np.dtype(ml_dtypes.bfloat16)
    host = [_data(s, np.float32, i).astype(bf16) for i, s in enumerate(shapes)]
    f = fusec.fuse(fn)
    assert "matmul" in [k.kind for k in f.plan(*host).kernels]
    got = cupy.asnumpy(f(*[cupy.asarray(h) for h in host]))
    try:  # NumPy's matmul returns float32 for bfloat16 (no loop of its own), its dot and tensordot bfloat16
        want = fn(*host).dtype
    except TypeError:  # NumPy's einsum refuses bfloat16; fusec's keeps the operands' dtype
        want = bf16
    assert got.dtype == want
    _assert_within_the_gemm_bound(fn, host, got)
