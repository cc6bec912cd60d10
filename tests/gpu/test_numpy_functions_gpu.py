"""The everyday NumPy functions of ``tests/ir/test_numpy_functions.py`` on the GPU: each case through ``fusec.fuse``
with CuPy arguments (one of them a transposed view), against NumPy on the same data, with every kernel's outputs
poisoned before its launch: ``pytest -m gpu tests/gpu/test_numpy_functions_gpu.py`` (skipped where CuPy sees no
GPU). Transcendental results (``sinc``) are not among them; float sums compare within the reduction tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
import fusec.runtime.launch
from fusec.runtime.launch import KernelLauncher
from tests.helpers import GPU_ONLY, device_copy
from tests.ir.test_numpy_functions import CASES, FLOAT_ONLY, _inputs, check_result

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_function_gpu_matches_numpy(name: str, dtype: str) -> None:
    fn, reordered = CASES[name]
    if name in FLOAT_ONLY and dtype == "int32":
        pytest.skip("a float function")
    x, y, w = _inputs(name, dtype)
    y = np.ascontiguousarray(y.T).T  # the same values, transposed in memory
    with np.errstate(all="ignore"):
        want = fn(x, y, w)
    args = [device_copy(a) for a in (x, y, w)]
    fused = fusec.fuse(fn)
    got = fusec.runtime.launch.run_plan(fused.plan(*args), args, launcher=KernelLauncher(poison=True))[0]
    for result in (got, fused(*args)):
        check_result(cupy.asnumpy(result), want, reordered, dtype, float16_rtol=4e-3)
