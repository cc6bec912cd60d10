"""The everyday ops of issue 17 (``tests/ir/test_everyday_ops.py``'s workloads) on the GPU through ``fusec.fuse``
with CuPy arrays, against the NumPy backend on the same data: ``pytest -m gpu tests/gpu/test_everyday_ops_gpu.py``
(skipped where CuPy sees no GPU). Odd shapes with NaN, +-inf and -0.0; float16, float32, float64 and bfloat16; results
within CORRECTNESS.md's tolerances with a few ULP more for transcendentals (CUDA's erff is not SciPy's
double-rounded erf), NaN positions, infinities and integer results exact.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusec
from fusec.ir.dtypes import BFLOAT16, kind
from tests.helpers import GPU_ONLY, assert_matches_numpy, random_array, seed_of
from tests.ir.test_everyday_ops import TOLERANCE, WORKLOADS

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

SHAPES = [(1029, 917), (64, 8192), (7, 3)]
GPU_TOLERANCE = {dt: (4 * rtol, 4 * atol) for dt, (rtol, atol) in TOLERANCE.items()}
# bfloat16 against the NumPy backend, which computes as the kernels do (float32, one rounding per op): the float32
# values differ by a few ULP of float32 (CUDA's expf is not glibc's, sums in another order), which after the rounding
# is at most one bfloat16 ULP apart, or two where a step's input already differed by one; atol as float16's
GPU_TOLERANCE[BFLOAT16] = (2.0**-6, 4e-4)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_everyday_op_gpu_matches_numpy_backend(name: str, dtype: str, shape: tuple[int, int]) -> None:
    x = random_array(np.random.default_rng(seed_of("everyday gpu", name, dtype, shape)), shape, dtype)
    if name == "nanargmax":
        x[:, 0] = 1  # no all-NaN row: -1 there on both backends, but keep the argmax itself tested
    fused = fusec.fuse(WORKLOADS[name])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = fused(x)
    got = fused(cupy.asarray(x)).get()
    if kind(expected.dtype) == "f":
        rtol, atol = GPU_TOLERANCE[expected.dtype]
        assert_matches_numpy(got, expected, rtol=rtol, atol=atol)
    else:
        assert_matches_numpy(got, expected, exact=True)
    assert len(fused.plan(cupy.asarray(x)).kernels) == 1
