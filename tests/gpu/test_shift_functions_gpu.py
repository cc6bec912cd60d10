"""``roll``, ``diff``, ``tile`` and ``repeat`` on the GPU: ``tests/ir/test_shift_functions.py``'s cases through
``fusec.fuse`` with CuPy arguments laid out several ways, against NumPy on the same data, with every kernel's
outputs poisoned before its launch: ``pytest -m gpu tests/gpu/test_shift_functions_gpu.py`` (skipped where CuPy
sees no GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
import fusec.runtime.launch
from fusec.runtime.launch import KernelLauncher
from tests.helpers import GPU_ONLY, assert_function_matches_numpy, assert_matches_numpy, device_copy
from tests.ir.test_shift_functions import CASES
from tests.schedule.test_view_accesses import _layouts

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


REDUCING = {"roll_then_sum", "repeat_method_then_sum"}  # float sums: the reduction tolerance
TOLERANCE = {"float32": (4e-6, 1e-5), "float16": (4e-3, 1e-3)}


@pytest.mark.parametrize("layout", ["contiguous", "offset", "strided", "reversed", "transposed"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_shift_function_gpu_matches_numpy(name: str, dtype: str, layout: str) -> None:
    fn = CASES[name]
    for shape in [(5, 7), (130, 1030)]:
        x = _layouts(shape, dtype)[layout]
        with np.errstate(all="ignore"):
            want = fn(x)
        dev = device_copy(x)
        fused = fusec.fuse(fn)
        got = fusec.runtime.launch.run_plan(fused.plan(dev), [dev], launcher=KernelLauncher(poison=True))[0]
        if name in REDUCING and dtype != "int32":
            # sums in fusec's order, float16 in float32: NumPy's tolerance, or that order's error bound from NumPy
            # with exact sums (tests.reference); NumPy's own float16 sum along a strided axis rounds every step
            # and overflows where the exact sum does not
            rtol, atol = TOLERANCE[dtype]
            assert_function_matches_numpy(cupy.asnumpy(got), fn, x, rtol=rtol, atol=atol)
        else:
            assert_matches_numpy(cupy.asnumpy(got), want, exact=True)
        assert_matches_numpy(cupy.asnumpy(fused(dev)), cupy.asnumpy(got), exact=True)  # the dispatch path
