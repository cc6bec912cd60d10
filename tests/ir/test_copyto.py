"""``numpy.copyto(dst, src, casting=..., where=...)`` inside a fused function (issue 33, item 4): ``dst`` updated in
place as NumPy updates it (``src`` broadcast to its shape and cast under ``casting``, only where ``where`` holds), a
function whose only effect it is runs as one kernel and returns None; NumPy's refusals (a cast the rule forbids, a
Python int out of range, a shape that does not broadcast) are fusec errors of NumPy's classes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fusec
from tests.fake_cupy import fake_gpu, to_device
from tests.helpers import numpy_error_class, random_array, seed_of


def _copy(dst, src):
    np.copyto(dst, src)


def _copy_where(dst, src, mask):
    np.copyto(dst, src, where=mask)


def _copy_unsafe(dst, src):
    np.copyto(dst, src, casting="unsafe")


def _run_both(fn: Any, dst: np.ndarray, *rest: Any) -> None:
    """``fn`` on copies by NumPy and by fusec: the same updated ``dst`` (bit for bit) and the same result, or the same
    error class."""
    want, got = dst.copy(), dst.copy()
    try:
        with np.errstate(all="ignore"):
            expected = fn(want, *rest)
    except Exception as exc:
        with pytest.raises(numpy_error_class(exc)) as info:
            fusec.fuse(fn)(got, *rest)
        assert isinstance(info.value, fusec.FusecError)
        np.testing.assert_array_equal(got, dst)  # nothing written
        return
    with np.errstate(all="ignore"):
        result = fusec.fuse(fn)(got, *rest)
    assert result is expected is None
    np.testing.assert_array_equal(got, want)  # NaN where NumPy has NaN
    assert np.array_equal(np.signbit(got), np.signbit(want))


DTYPES = ["bool", "int8", "uint8", "int64", "float16", "float32", "float64"]


@pytest.mark.parametrize("src_dt", DTYPES)
@pytest.mark.parametrize("dst_dt", DTYPES)
def test_copyto_dtype_pair_as_numpy(dst_dt: str, src_dt: str) -> None:
    """same_kind casting (refused as NumPy refuses), unsafe casting of defined values, a broadcast source."""
    rng = np.random.default_rng(seed_of("copyto", dst_dt, src_dt))
    dst = random_array(rng, (5, 7), dst_dt)
    src = random_array(rng, (7,), src_dt, special=False)
    _run_both(_copy, dst, src)
    if np.dtype(src_dt).kind != "f" or np.dtype(dst_dt).kind == "f":  # float-to-int casts of any value: undefined
        _run_both(_copy_unsafe, dst, src)


@pytest.mark.parametrize("dst_dt", DTYPES)
@pytest.mark.parametrize("value", [5, -1, 300, 1.5, -0.0, float("nan"), True, 2**70])
def test_copyto_python_number_as_numpy(dst_dt: str, value: Any) -> None:
    """A Python number is NumPy 2's weak scalar: of dst's dtype where its kind allows (an int out of range:
    OverflowError), else float64/int64 under the casting rule."""
    dst = np.zeros((3, 2), dtype=dst_dt)
    _run_both(lambda d: np.copyto(d, value), dst)


def test_copyto_where_mask_and_broadcasts() -> None:
    rng = np.random.default_rng(1)
    dst, src = rng.standard_normal((4, 1029)), rng.standard_normal((1029,))
    mask = rng.random((4, 1)) < 0.5
    _run_both(_copy_where, dst, src, mask)
    _run_both(_copy_where, dst, 2.5, rng.random((4, 1029)) < 0.5)
    _run_both(_copy_where, dst, src, rng.integers(0, 2, (4, 1029)))  # an int mask: TypeError, as NumPy's


@pytest.mark.parametrize("src_shape", [(3,), (2, 1, 5), (0,), (5,)])
def test_copyto_shapes_as_numpy(src_shape: tuple[int, ...]) -> None:
    """A source that does not broadcast to dst's shape exactly: ValueError; empty arrays."""
    dst = np.zeros((2, 5))
    _run_both(_copy, dst, np.ones(src_shape))
    _run_both(_copy, np.zeros((0, 5)), np.ones(src_shape[-1:]))


def test_copyto_alone_is_one_kernel_writing_dst_and_returns_none() -> None:
    spec, src = fusec.ArraySpec((1029, 917), "float32"), fusec.ArraySpec((917,), "float64")
    mask = fusec.ArraySpec((1029, 917), "bool")
    assert len(fusec.fuse(_copy).plan(spec, src).kernels) == 1
    assert len(fusec.fuse(_copy_where).plan(spec, src, mask).kernels) == 1


def test_copyto_on_the_fake_gpu_writes_dst(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU path (tests/fake_cupy.py: fusec's launcher for real, the kernel run by the interpreter): dst written
    once, None returned."""
    rng = np.random.default_rng(2)
    dst, src, mask = rng.standard_normal((33, 65)), rng.standard_normal((65,)), rng.random((33, 65)) < 0.5
    want = dst.copy()
    np.copyto(want, src, where=mask)
    with fake_gpu(monkeypatch) as gpu:
        d = to_device(dst)
        assert fusec.fuse(_copy_where)(d, to_device(src), to_device(mask)) is None
        np.testing.assert_array_equal(np.asarray(d), want)
        assert len(gpu.launches) == 1 and not gpu.mislaunched


def test_copyto_into_a_value_of_the_function_and_then_read() -> None:
    """dst a value computed inside: later reads see the copy, as NumPy's."""
    def f(x, y):
        z = x * 2
        np.copyto(z, y, where=y > 0)
        return z + 1

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((6, 7)), rng.standard_normal((7,))
    np.testing.assert_array_equal(fusec.fuse(f)(x, y), f(x, y))


def test_copyto_into_a_number_is_type_error() -> None:
    with pytest.raises(TypeError):
        fusec.fuse(lambda x: np.copyto(3.0, x))(np.ones(3))
