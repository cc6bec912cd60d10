"""A kernel kind added from one file outside fusec (``tests/kinds/naive_kind.py``) runs on the GPU: forced on a
fused function's kernel, it gives NumPy's result on fresh random data (special values included), on contiguous
arrays and on offset, strided views."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.kinds import registered
from tests.helpers import GPU_ONLY, assert_matches_numpy, random_array, seed_of
from tests.kinds.naive_kind import KIND as NAIVE

cupy = pytest.importorskip("cupy")
pytestmark = GPU_ONLY


def affine(x, w):
    return x * w + 1.0


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32"])
@pytest.mark.parametrize("view", ["contiguous", "offset", "strided"])
def test_kinds_gpu_plugin_kind_matches_numpy(dtype: str, view: str) -> None:
    rng = np.random.default_rng(seed_of("kinds_gpu", dtype, view))
    x = random_array(rng, (67, 2 * 131 + 3), dtype)
    w = random_array(rng, (131,), dtype)
    x_view = {"contiguous": x[:, :131], "offset": x[:, 1:132], "strided": x[:, ::2][:, :131]}[view]
    if view == "contiguous":
        x_view = np.ascontiguousarray(x_view)
    with np.errstate(all="ignore"):  # (inf * 0 and the like: NaN, as on the GPU)
        expected = affine(x_view, w)
    with registered(NAIVE):
        fused = fusec.fuse(affine, schedules={"k0": "naive:strided"})
        xd = cupy.asarray(x)
        xd_view = {"contiguous": cupy.ascontiguousarray(xd[:, :131]), "offset": xd[:, 1:132],
                   "strided": xd[:, ::2][:, :131]}[view]
        got = fused(xd_view, cupy.asarray(w))
        assert "naive:strided" in str(fused.explain(xd_view, cupy.asarray(w)))
    assert_matches_numpy(cupy.asnumpy(got), expected)
