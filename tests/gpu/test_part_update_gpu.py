"""Assignment to part of a value computed in the function (issue 17, item 4) on the GPU:
``tests/ir/test_part_update.py``'s keys and values through ``fusec.fuse`` with CuPy arguments laid out several
ways, against NumPy on the same data, in float32, float16 and int32, with every kernel's outputs poisoned before
its launch: ``pytest -m gpu tests/gpu/test_part_update_gpu.py`` (skipped where CuPy sees no GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
import fusec.runtime.launch
from fusec.runtime.launch import KernelLauncher
from tests.helpers import GPU_ONLY, assert_matches_numpy, device_copy
from tests.ir.test_part_update import KEYS, SHAPE, VALUES, build
from tests.schedule.test_view_accesses import _layouts

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


@pytest.mark.parametrize("layout", ["contiguous", "offset", "strided", "reversed", "transposed"])
@pytest.mark.parametrize("kind", VALUES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(KEYS))
def test_part_update_gpu_matches_numpy(name: str, dtype: str, kind: str, layout: str) -> None:
    x = _layouts(SHAPE, dtype)[layout]
    for augmented in (False, True):
        fn = build(KEYS[name], kind, augmented)
        with np.errstate(all="ignore"):
            want = fn(x)
        dev = device_copy(x)
        fused = fusec.fuse(fn)
        got = fusec.runtime.launch.run_plan(fused.plan(dev), [dev], launcher=KernelLauncher(poison=True))[0]
        assert_matches_numpy(cupy.asnumpy(got), want, exact=True)
        assert_matches_numpy(cupy.asnumpy(fused(dev)), want, exact=True)  # the public call, its dispatch path
