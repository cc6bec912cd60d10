"""Assignment to part of an argument (issue 17, item 4) on the GPU: ``tests/ir/test_slice_assign.py``'s cases and
indexing keys through ``fusec.fuse`` with CuPy arguments laid out several ways (each a view into a larger buffer),
against NumPy on the same data, in float32, float16 and int32: the selected elements change, nothing else of the
buffer does: ``pytest -m gpu tests/gpu/test_slice_assign_gpu.py`` (skipped where CuPy sees no GPU). Kernel outputs
are poisoned before each launch (the default launcher's ``poison``).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
import fusec.runtime.launch
from fusec.runtime.launch import KernelLauncher
from tests.helpers import GPU_ONLY, assert_result_matches_numpy, random_array, seed_of
from tests.ir.test_slice_assign import CASES, READ_AFTER, _add, _set
from tests.ir.test_views import KEYS, _ids
from tests.reference import expect

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


@pytest.fixture(autouse=True)
def _poisoned_outputs(monkeypatch):
    monkeypatch.setattr(fusec.runtime.launch, "_DEFAULT", KernelLauncher(poison=True))


def _check(fn, big: np.ndarray, index: tuple, v: np.ndarray) -> None:
    """``fn`` on ``big[index]`` (a view), fused on the GPU and plain on the host: the results and the whole
    buffer afterwards match, bit for bit except what follows from a float sum (fusec's order, float16 in float32:
    within its error bound from NumPy with exact sums, tests.reference; NumPy's own float16 column sums round
    every step)."""
    dev = cupy.asarray(big)
    with np.errstate(all="ignore"):
        got = fusec.fuse(fn)(dev[index], cupy.asarray(v))
    expectation = expect(lambda b, w: fn(b[index], w), big, v)
    if not expectation.outputs:
        assert got is None
    else:
        (result,) = expectation.outputs
        assert_result_matches_numpy(cupy.asnumpy(got), result, exact=True)
    assert_result_matches_numpy(cupy.asnumpy(dev), expectation.arguments[0], exact=True)


LAYOUTS = {"contiguous": (slice(None, 6), slice(None, 9)), "strided": (slice(1, None, 2), slice(None, None, 2)),
           "reversed": (slice(None, None, -2), slice(None, -1))}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_slice_assign_case_gpu_matches_numpy(name: str, dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed_of("slice assign gpu", name, dtype, layout))
    big = random_array(rng, (12, 18), dtype, special=False)
    index = LAYOUTS[layout]
    _check(CASES[name], big, index, random_array(rng, big[index].shape, dtype, special=False))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("key", KEYS, ids=_ids)
def test_slice_assign_key_gpu_matches_numpy(key: object, dtype: str) -> None:
    rng = np.random.default_rng(seed_of("slice assign key gpu", _ids(key), dtype))
    big = random_array(rng, (5, 6, 9), dtype)
    index = (slice(None), slice(None), slice(1, 8))
    v = random_array(rng, big[index][key].shape, dtype)
    _check(_set(key), big, index, v)
    _check(_add(key), big, index, v)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", sorted(READ_AFTER))
def test_slice_assign_argument_read_after_gpu_matches_numpy(name: str, layout: str) -> None:
    """The argument read after an assignment to part of it (its new value everywhere, in the kernels) while the
    caller's buffer gets only the selected elements."""
    rng = np.random.default_rng(seed_of("slice assign read after gpu", name, layout))
    big = random_array(rng, (12, 18), "float32", special=False)
    fn = READ_AFTER[name]
    _check(lambda x, v: fn(x), big, LAYOUTS[layout], np.zeros(1, np.float32))
