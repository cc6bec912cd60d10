"""Views (issue 17, item 1) on the GPU: ``tests/ir/test_views.py``'s workloads and indexing keys through
``fusec.fuse`` with CuPy arrays, against NumPy on the same data, in float32, float16 and int32, for inputs laid
out several ways (contiguous, offset, strided, reversed, transposed): ``pytest -m gpu tests/gpu/test_views_gpu.py``
(skipped where CuPy sees no GPU). Outputs are poisoned before each launch (the launcher's ``poison``).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.runtime.launch import KernelLauncher
from tests.helpers import GPU_ONLY, assert_function_matches_numpy, device_copy
from tests.ir.test_views import KEYS, WORKLOADS, _ids
from tests.schedule.test_view_accesses import _layouts

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

LAYOUTS = ["contiguous", "offset", "strided", "reversed", "transposed"]
TOLERANCE = {"float32": (4e-6, 1e-5), "float16": (4e-3, 1e-3)}




def _check(fn, x: np.ndarray, dtype: str) -> None:
    """``fn(x)`` fused on the GPU against NumPy: exact for integers; floats within NumPy's tolerance, or within the
    error bound of summing in another order (float16 in float32) from NumPy with exact sums (tests.reference)."""
    fused = fusec.fuse(fn)
    xd = device_copy(x)
    assert np.array_equal(cupy.asnumpy(xd), x)
    got = fusec.runtime.launch.run_plan(fused.plan(xd), [xd], launcher=KernelLauncher(poison=True))[0]
    rtol, atol = TOLERANCE.get(dtype, (1e-7, 1e-7))
    assert_function_matches_numpy(cupy.asnumpy(got), fn, x, rtol=rtol, atol=atol)
    assert len(fused.plan(xd).kernels) <= 1


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_view_workload_gpu_matches_numpy(name: str, dtype: str, layout: str) -> None:
    if dtype == "int32" and name == "logsumexp":
        pytest.skip("logsumexp computes in float")
    for shape in [(1029, 33), (64, 4099), (9, 10)]:
        _check(WORKLOADS[name], _layouts(shape, dtype)[layout], dtype)


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("key", [k for k in KEYS if not isinstance(k, tuple) or len([a for a in k if a is not None
                                                                                       and a is not Ellipsis]) <= 2],
                         ids=_ids)
def test_view_index_gpu_matches_numpy(key: object, dtype: str, layout: str) -> None:
    x = _layouts((37, 45), dtype)[layout]
    _check(lambda x: x[key] * 2, x, dtype)
    _check(lambda x: x[key].astype(np.float64).sum(), x, dtype)
