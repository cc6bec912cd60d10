"""Reshapes (issue 17, item 1) on the GPU: ``tests/ir/test_reshape.py``'s workloads through ``fusec.fuse`` with CuPy
arrays, against NumPy on the same data, in float32, float16 and int32, for arguments laid out several ways
(contiguous, offset, strided, reversed, transposed), and group norm against NumPy in float64:
``pytest -m gpu tests/gpu/test_reshape_gpu.py`` (skipped where CuPy sees no GPU). Outputs are poisoned before each
launch (the launcher's ``poison``); each check also runs through the public call (the dispatch path).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from benchmarks.idioms_reshape import build_groupnorm, groupnorm_inputs
from fusec.runtime.launch import KernelLauncher
from tests.helpers import (
    GPU_ONLY,
    assert_function_matches_numpy,
    device_copy,
    random_array,
    seed_of,
)
from tests.ir.test_reshape import READ_BACK, WORKLOADS
from tests.schedule.test_view_accesses import _layouts

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

LAYOUTS = ["contiguous", "offset", "strided", "reversed", "transposed"]
TOLERANCE = {"float32": (4e-6, 1e-5), "float16": (4e-3, 1e-3)}




def _compare(got: np.ndarray, fn, x: np.ndarray) -> None:
    """Exact for integers; floats within NumPy's tolerance, or within the error bound of summing in another order
    (float16 in float32) from NumPy with exact sums (tests.reference)."""
    rtol, atol = TOLERANCE.get(str(x.dtype), (1e-7, 1e-7))
    assert_function_matches_numpy(got, fn, x, rtol=rtol, atol=atol)


def _check(fn, x: np.ndarray, one_kernel: bool = True) -> None:
    fused = fusec.fuse(fn)
    xd = device_copy(x)
    before = cupy.asnumpy(xd)
    got = fusec.runtime.launch.run_plan(fused.plan(xd), [xd], launcher=KernelLauncher(poison=True))[0]
    _compare(cupy.asnumpy(got), fn, x)
    _compare(cupy.asnumpy(fused(xd)), fn, x)  # the public call, its dispatch path
    assert np.array_equal(cupy.asnumpy(xd), before, equal_nan=True)  # the argument is never written
    assert len(fused.plan(xd).kernels) == 1 or not one_kernel


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_reshape_workload_gpu_matches_numpy(name: str, dtype: str, layout: str) -> None:
    for shape in [(130, 36), (2, 4104), (1030, 12)]:
        _check(WORKLOADS[name], _layouts(shape, dtype)[layout])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(READ_BACK))
def test_reshape_read_back_gpu_matches_numpy(name: str, dtype: str, layout: str) -> None:
    """Reshapes read back between kernels: the view of what one kernel wrote, taken on each call, read by the
    next (poisoned outputs, so a kernel reading the buffer before it is written fails)."""
    _check(READ_BACK[name][0], _layouts((6, 4), dtype)[layout], one_kernel=False)


@pytest.mark.parametrize("shape", [(2, 64, 5, 7), (4, 96, 33, 17), (32, 256, 64, 64)], ids=str)
def test_reshape_groupnorm_gpu_matches_numpy_in_one_kernel(shape: tuple[int, int, int, int]) -> None:
    x, gamma, beta = groupnorm_inputs(np, shape, seed=seed_of("groupnorm gpu", shape))
    fused = fusec.fuse(build_groupnorm(cupy))
    args = [cupy.asarray(a) for a in (x, gamma, beta)]
    got = fusec.runtime.launch.run_plan(fused.plan(*args), args, launcher=KernelLauncher(poison=True))[0]
    want = build_groupnorm(np)(x.astype(np.float64), gamma.astype(np.float64), beta.astype(np.float64))
    np.testing.assert_allclose(cupy.asnumpy(got), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cupy.asnumpy(fused(*args)), want, rtol=1e-4, atol=1e-4)
    assert len(fused.plan(*args).kernels) == 1


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_reshape_head_split_of_strided_argument_gpu_matches_numpy(dtype: str) -> None:
    rng = np.random.default_rng(seed_of("heads gpu", dtype))
    qkv = random_array(rng, (4, 33, 3 * 8 * 16 + 5), dtype)[:, :, 5:]  # an offset, rows longer than their data
    fn = lambda t: t.reshape(4, 33, 3, 8, 16)[:, :, 1].transpose(0, 2, 1, 3) * 3  # noqa: E731
    _check(fn, qkv)


def test_reshape_returned_view_out_gpu_writes_the_callers_array() -> None:
    x = device_copy(_layouts((64, 48), "float32")["transposed"])
    fused = fusec.fuse(lambda x: np.exp(x).reshape(-1))
    out = cupy.full(x.size, np.nan, np.float32)
    result = fused(x, out=out)
    assert result is out
    np.testing.assert_allclose(cupy.asnumpy(out), np.exp(cupy.asnumpy(x)).reshape(-1), rtol=4e-6)
