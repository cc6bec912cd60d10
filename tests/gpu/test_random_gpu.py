"""fusec.random on a GPU: a fused draw gives the bits NumPy computes outside a fused function with the same key
(uniform, bernoulli, integers: integer operations and exact conversions only; normal within a few ulps, the GPU's
logf/cosf not being glibc's), for sizes with a tail and beyond 2**32 indices' low word; dropout in one kernel.
``tests/ir/test_random_numbers.py`` checks the generator (known answers) and the NumPy backend on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from tests.helpers import GPU_ONLY, assert_matches_numpy

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

EXACT = {
    "uniform32": lambda k, shape: fusec.random.uniform(k, shape),
    "uniform64": lambda k, shape: fusec.random.uniform(k, shape, np.float64, -2.0, 3.0),
    "bernoulli": lambda k, shape: fusec.random.bernoulli(k, 0.3, shape),
    "integers": lambda k, shape: fusec.random.integers(k, -5, 7, shape),
    "bits": lambda k, shape: fusec.random.bits(k, shape, 4)[3],
}


@pytest.mark.parametrize("shape", [(1 << 20,), (1029, 33), (7,)])
@pytest.mark.parametrize("name", sorted(EXACT))
def test_gpu_random_draws_are_numpys_bits(name, shape) -> None:
    draw = EXACT[name]
    x = cupy.zeros(shape, cupy.float32)
    f = fusec.fuse(lambda x, key: draw(key, x.shape))
    for key in [(3, 0), (3, 1), (0xFFFFFFFF, 0xFFFFFFFF)]:
        got = cupy.asnumpy(f(x, key))
        want = draw(key, shape)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert f.cache_info().traces == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_random_normal_is_numpys_within_ulps(dtype) -> None:
    shape = (1 << 18,)
    f = fusec.fuse(lambda x, key: fusec.random.normal(key, x.shape, x.dtype))
    got = cupy.asnumpy(f(cupy.zeros(shape, dtype), 12))
    assert_matches_numpy(got, fusec.random.normal(12, shape, dtype), rtol=8 * np.finfo(dtype).eps,
                         atol=8 * np.finfo(dtype).eps)  # log, sqrt, cos: a few ulps each, |z| < 6


def test_gpu_dropout_is_one_kernel_with_numpys_mask() -> None:
    def dropout(x, key, rate):
        return np.where(fusec.random.bernoulli(key, 1 - rate, x.shape), x / (1 - rate), 0)

    host = np.random.default_rng(4).standard_normal((4096, 257)).astype(np.float32)
    f = fusec.fuse(dropout)
    assert len(f.plan(host, (1, 0), 0.1).kernels) == 1
    for step in range(3):
        got = cupy.asnumpy(f(cupy.asarray(host), (1, step), 0.1))
        assert np.array_equal(got, dropout(host, (1, step), 0.1))
