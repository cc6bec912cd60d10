"""Values kept in memory for their views (``fusec.passes.kept_values``) on the GPU: stencils whose values are read
through more different views than sinking recomputes (unrolled ``np.roll`` and shrinking-slice stencils, nine
shifted slices of ``exp``, game of life's eight rolls) run as kernels that write the kept value and kernels that
read it back through slices and clamped windows, against NumPy on the same data, with every output poisoned before
its launch, for contiguous, offset and reversed inputs: ``pytest -m gpu tests/gpu/test_kept_values_gpu.py``
(skipped where CuPy sees no GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from benchmarks.compile_time import roll_stencil, shrinking_stencil
from fusec.passes.kept_values import kept_in_memory
from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline
from fusec.runtime.launch import KernelLauncher
from tests.helpers import GPU_ONLY, assert_function_matches_numpy, device_copy, seed_of
from tests.passes.test_kept_values import _nine_views

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

TOLERANCE = {"float32": (2e-5, 1e-5), "float16": (4e-3, 2e-3)}


def _life(board):
    b = (board > 0).astype(np.int32)
    n = sum(np.roll(np.roll(b, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))
    return ((n == 3) | ((b == 1) & (n == 2))).astype(np.int8)


def _laplacian_steps(u):
    """Four explicit steps of the 2-d heat equation, five-point stencil on slices, borders kept."""
    for _ in range(4):
        inner = u[1:-1, 1:-1] + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
        u = np.pad(inner, 1, mode="edge")
    return u


CASES = {
    "roll_stencil": (roll_stencil(12)[0], (1000,)),
    "shrinking_stencil": (shrinking_stencil(30)[0], (1000,)),
    "nine_views": (_nine_views, (1003,)),
    "life": (_life, (67, 45)),
    "laplacian_steps": (_laplacian_steps, (131, 70)),
}


def _layout(x: np.ndarray, layout: str) -> np.ndarray:
    if layout == "offset":
        wide = np.empty((x.size + 3,), x.dtype)
        wide[3:] = x.ravel()
        return wide[3:].reshape(x.shape)
    if layout == "reversed":
        return np.ascontiguousarray(x[(slice(None, None, -1),) * x.ndim])[(slice(None, None, -1),) * x.ndim]
    return x


@pytest.mark.parametrize("layout", ["contiguous", "offset", "reversed"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kept_values_gpu_match_numpy(name, dtype, layout):
    fn, shape = CASES[name]
    rng = np.random.default_rng(seed_of("kept values gpu", name, dtype, layout))
    x = _layout(rng.standard_normal(shape).astype(dtype), layout)
    fused = fusec.fuse(fn)
    xd = device_copy(x)
    plan = fused.plan(xd)
    assert kept_in_memory(run_pipeline(fused.trace(xd), CLEANUP_PIPELINE)), "the case keeps no value"
    got = fusec.runtime.launch.run_plan(plan, [xd], launcher=KernelLauncher(poison=True))[0]
    rtol, atol = TOLERANCE[dtype]
    assert_function_matches_numpy(cupy.asnumpy(got), fn, x, rtol=rtol, atol=atol)
