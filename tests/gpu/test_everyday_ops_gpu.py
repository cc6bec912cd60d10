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


MIXED_U64 = np.array([0, 1, 5, 2**63 - 1, 2**63, 2**64 - 1], dtype=np.uint64)
MIXED_I64 = np.array([-(2**63), -1, 0, 1, 5, 6, 2**63 - 1], dtype=np.int64)


@pytest.mark.parametrize("other", ["int64", "int32", "int8"])
def test_mixed_sign_comparisons_gpu_are_exact(other: str) -> None:
    """uint64 against signed integers, every comparison, as NumPy 2 does them (no float64 detour): each pair of
    the designed values (equal values, 2**64-1 against -1, 2**63 against the int64 extremes) and random ones."""
    rng = np.random.default_rng(seed_of("mixed sign gpu", other))
    u = np.concatenate([MIXED_U64, rng.integers(0, 2**64, 500, dtype=np.uint64, endpoint=False)])
    info = np.iinfo(other)
    s = np.concatenate([MIXED_I64[(MIXED_I64 >= info.min) & (MIXED_I64 <= info.max)].astype(other),
                        rng.integers(info.min, info.max, 500, dtype=other, endpoint=True)])
    u, s = u[:, None], s[None, :]
    fused = fusec.fuse(lambda a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b, b < a, b >= a))
    expected = fused(u, s)
    assert [e.tolist() for e in expected] == [e.tolist() for e in (u == s, u != s, u < s, u <= s, u > s, u >= s,
                                                                  s < u, s >= u)]
    got = fused(cupy.asarray(u), cupy.asarray(s))
    for g, e in zip(got, expected):
        assert_matches_numpy(g.get(), e, exact=True)
