"""Independent elementwise groups merged into one kernel, on the GPU: against NumPy, outputs poisoned first,
with inputs of different layouts in the one kernel (contiguous, transposed, every other element, offset)."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.runtime.launch import KernelLauncher, run_plan
from tests.helpers import GPU_ONLY, assert_matches_numpy, random_array, seed_of

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


def two_outputs(a, b):
    return a * 2 + 1, np.exp(b) - 3


def three_with_dtypes(a, b, c):
    return a * 2, (b + 1).astype(np.float16), c > 0


LAYOUTS = ("c", "t", "step", "offset")  # see _as_layout


@pytest.mark.parametrize("layout_a", LAYOUTS)
@pytest.mark.parametrize("layout_b", LAYOUTS)
@pytest.mark.parametrize("shape", [(1029, 917), (7, 3), (1, 4097)])
def test_gpu_independent_groups_match_numpy(layout_a, layout_b, shape) -> None:
    rng = np.random.default_rng(seed_of("independent", layout_a, layout_b, shape))
    a = random_array(rng, shape, "float32", special=False)
    b = random_array(rng, shape, "float32", special=False)
    plan = fusec.fuse(two_outputs).plan(fusec.ArraySpec(shape, "float32"), fusec.ArraySpec(shape, "float32"))
    assert len(plan.kernels) == 1
    da, db = (cupy.asarray(x) for x in (a, b))
    da, db = _as_layout(da, layout_a), _as_layout(db, layout_b)
    got = run_plan(plan, [da, db], launcher=KernelLauncher(poison=True, compiler="nvrtc"))
    with np.errstate(over="ignore"):
        want = two_outputs(a, b)
    for g, w in zip(got, want, strict=True):
        assert_matches_numpy(cupy.asnumpy(g), w)


def _as_layout(x, layout):
    """The CuPy array ``x`` with the same values laid out as ``layout`` says."""
    if layout == "t":
        return cupy.asfortranarray(x)
    if layout == "step":
        return cupy.repeat(x, 2, axis=1)[:, ::2]
    if layout == "offset":
        flat = cupy.concatenate([x.ravel()[:1], x.ravel()])
        return flat[1:].reshape(x.shape)
    return x


def test_gpu_independent_groups_of_mixed_dtypes() -> None:
    rng = np.random.default_rng(seed_of("independent", "dtypes"))
    xs = [random_array(rng, (513, 33), dt, special=False) for dt in ("float32", "float64", "int32")]
    fused = fusec.fuse(three_with_dtypes)
    assert len(fused.plan(*[fusec.ArraySpec(x.shape, x.dtype) for x in xs]).kernels) == 1
    got = fused(*[cupy.asarray(x) for x in xs])
    for g, w in zip(got, three_with_dtypes(*xs), strict=True):
        assert_matches_numpy(cupy.asnumpy(g), w)
