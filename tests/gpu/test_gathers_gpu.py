"""Gathers (issue 17, item 3) on the GPU: ``tests/gathers``' workloads and indexing keys through ``fusec.fuse``
with CuPy arrays, against NumPy on fresh random data, in float32, float16 and int32 with int32 and int64
indices (negative ones included), for contiguous and non-contiguous inputs; outputs poisoned before each launch.
An index out of range is fusec's IndexError naming the line, never an out-of-bounds read:
``pytest -m gpu tests/gpu/test_gathers_gpu.py`` (skipped where CuPy sees no GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.runtime.launch import KernelLauncher, run_plan
from fusec.support.errors import FusecIndexError
from tests.gathers.test_gathers import KEYS, SELECTING_VIEWS, I, J, K, _unread, _unread_in_tuple, _unread_then_update
from tests.gathers.workloads import WORKLOADS
from tests.helpers import GPU_ONLY, assert_function_matches_numpy, assert_matches_numpy, device_copy, seed_of

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

TOLERANCE = {"float32": (4e-6, 1e-5), "float16": (4e-3, 1e-3)}




def _strided(x: np.ndarray, how: str) -> np.ndarray:
    """``x``'s values laid out as ``how`` says: contiguous, every other element of a larger array, reversed."""
    if how == "contiguous" or x.ndim == 0:
        return x
    if how == "strided":
        big = np.zeros(tuple(2 * d + 1 for d in x.shape), x.dtype)
        view = big[tuple(slice(1, None, 2) for _ in x.shape)]
        view[...] = x
        return view
    rev = np.ascontiguousarray(x[tuple(slice(None, None, -1) for _ in x.shape)])
    return rev[tuple(slice(None, None, -1) for _ in x.shape)]


def _check(fn, args: tuple) -> None:
    fused = fusec.fuse(fn)
    dev = [device_copy(a) for a in args]
    got = cupy.asnumpy(run_plan(fused.plan(*dev), dev, launcher=KernelLauncher(poison=True))[0])
    rtol, atol = TOLERANCE.get(str(got.dtype), (1e-7, 1e-7))
    # exact for integers; floats: NumPy's tolerance, or the error bound of fusec's order of summing (tests.reference)
    assert_function_matches_numpy(got, fn, *args, rtol=rtol, atol=atol)


@pytest.mark.parametrize("layout", ["contiguous", "strided", "reversed"])
@pytest.mark.parametrize("it", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gather_workload_gpu_matches_numpy(name: str, dtype: str, it: str, layout: str) -> None:
    w = WORKLOADS[name]
    args = w.make(np.random.default_rng(seed_of(name, dtype, it, layout)), dtype, it)
    _check(w.fn, tuple(_strided(a, layout) for a in args))


@pytest.mark.parametrize("it", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("key", sorted(KEYS))
def test_gather_indexing_gpu_matches_numpy(key: str, dtype: str, it: str) -> None:
    rng = np.random.default_rng(seed_of(key, dtype, it))
    x = _strided((rng.standard_normal((5, 6, 7)) * 10).astype(dtype), "strided")
    _check(KEYS[key], (x, I.astype(it), J.astype(it), K.astype(it)))


def test_gather_cross_entropy_gpu_large_rows() -> None:
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((64, 32768)).astype(np.float32)
    t = rng.integers(-32768, 32768, 64)
    _check(WORKLOADS["cross_entropy"].fn, (logits, t))


@pytest.mark.parametrize("bad", [5, -6, 2**31 - 1])
def test_gather_gpu_index_out_of_range_is_an_index_error_at_the_line(bad: int) -> None:
    def f(x, i):
        return x[:, i] + 1

    x = cupy.zeros((3, 5), np.float32)
    i = cupy.asarray(np.array([0, bad, 1], np.int64))
    fused = fusec.fuse(f)
    with pytest.raises(FusecIndexError) as info:
        fused(x, i)
    assert info.value.loc is not None and info.value.loc.startswith(__file__)
    good = cupy.asarray(np.array([0, -1, 1], np.int64))  # the error word was cleared: the next call is fine
    assert_matches_numpy(cupy.asnumpy(fused(x, good)), f(np.zeros((3, 5), np.float32), np.array([0, -1, 1])))
    with pytest.raises(FusecIndexError):  # and a repeat call (the fast path's layout) checks again
        fused(x, i)


@pytest.mark.parametrize("name", sorted(SELECTING_VIEWS))
def test_gather_gpu_result_sliced_still_checks_every_index(name: str) -> None:
    """``x[i][::2]``, ``x[i][0]``: every index of ``i`` is checked (the gather is computed whole, the view reads
    it), on the first call and on the fast path's repeat call; good indices give NumPy's values."""
    fn = SELECTING_VIEWS[name]
    host = np.random.default_rng(seed_of("selecting views gpu", name)).standard_normal((4, 5)).astype(np.float32)
    x = cupy.asarray(host)
    bad = cupy.asarray(np.array([0, 100, 2, 100], np.int64))
    fused = fusec.fuse(fn)
    for _ in range(2):
        with pytest.raises(FusecIndexError):
            fused(x, bad)
    good = np.array([3, 0, -1, 2], np.int64)
    assert_matches_numpy(cupy.asnumpy(fused(x, cupy.asarray(good))), fn(host, good), exact=True)


@pytest.mark.parametrize("fn", [_unread, _unread_in_tuple, _unread_then_update])
def test_gather_gpu_no_result_reads_still_checks_its_indices(fn) -> None:
    """A gather no result reads: its indices (an argument) checked before the call runs, on every call (no fast
    path), the argument updated after it left alone; good indices give NumPy's values."""
    host = np.random.default_rng(seed_of("unread gather gpu", fn.__name__)).standard_normal((5, 5)).astype(np.float32)
    x = cupy.asarray(host)
    bad = cupy.asarray(np.array([0, 100, 2], np.int64))
    fused = fusec.fuse(fn)
    for _ in range(2):
        with pytest.raises(FusecIndexError):
            fused(x, bad)
    assert np.array_equal(cupy.asnumpy(x), host)
    good = np.array([4, -5, 1], np.int64)
    assert_matches_numpy(cupy.asnumpy(fused(cupy.asarray(host), cupy.asarray(good))), fn(host.copy(), good),
                         exact=True)


def test_gather_gpu_index_out_of_range_reads_nothing_when_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """With FUSEC_CHECK_INDICES=0 an element whose index is out of range is 0 (nothing is read)."""
    monkeypatch.setenv("FUSEC_CHECK_INDICES", "0")

    def f(x, i):
        return x[i]

    x = cupy.arange(1, 5, dtype=np.float32)
    got = cupy.asnumpy(fusec.fuse(f)(x, cupy.asarray(np.array([1, 10**9, -1], np.int64))))
    assert got.tolist() == [2.0, 0.0, 4.0]
    word = fusec.runtime.launch.default_launcher()._error_word(cupy.cuda.runtime.getDevice())
    assert int(word.get()[0]) == 0  # the unchecked kernel had no error word to write
