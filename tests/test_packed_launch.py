"""The packed launch of the dispatch fast path, without a GPU: the kernel-parameter array handed to
cuLaunchKernel is read back through its pointers, slot by slot, and must hold each array's data pointer
and each frozen scalar's bytes, on every call, also when threads launch at once."""

from __future__ import annotations

import ctypes
import threading
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("cupy_backends.cuda.api.driver")

from fusec.packed_launch import PackedLaunch, packed_launch  # noqa: E402

SCALARS = (np.int32(-7), np.int64(1 << 40), np.float32(0.1), np.float64(-2.5), np.uint8(200))


def _array(ptr: int) -> SimpleNamespace:
    return SimpleNamespace(data=SimpleNamespace(ptr=ptr))


def _captured(launch: PackedLaunch, n_params: int) -> list:
    """Replace the driver call by one that reads the parameter array as the driver would."""
    seen = []

    def driver(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        slots = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        seen.append(((fn, gx, gy, gz, bx, by, bz, smem, stream, extra),
                     [ctypes.string_at(slots[i], 8) for i in range(n_params)]))

    launch._launch = driver
    launch._stream = lambda: SimpleNamespace(ptr=0x5000)
    return seen


def test_packed_launch_passes_pointers_then_scalars() -> None:
    function = SimpleNamespace(ptr=0x1234)
    launch = PackedLaunch(function, (7, 1, 1), (256, 1, 1), 3, SCALARS)
    seen = _captured(launch, 3 + len(SCALARS))
    for base in (0x7F00_0000_1000, 0x7F00_0000_9000):  # pointers change from call to call
        launch([_array(base), _array(base + 16), _array(base + 32)])
        header, slots = seen[-1]
        assert header == (0x1234, 7, 1, 1, 256, 1, 1, 0, 0x5000, 0)
        assert [int.from_bytes(s, "little") for s in slots[:3]] == [base, base + 16, base + 32]
        for raw, value in zip(slots[3:], SCALARS):
            assert raw[:value.nbytes] == value.tobytes()


def test_packed_launch_threads_do_not_mix_pointers() -> None:
    launch = PackedLaunch(SimpleNamespace(ptr=1), (1, 1, 1), (32, 1, 1), 2, (np.int32(5),))
    seen = _captured(launch, 3)
    lock = threading.Lock()

    def worker(k: int) -> None:
        for i in range(200):
            p = (k << 32) + 256 * i
            launch([_array(p), _array(p + 8)])

    original = launch._launch

    def checked(*a):  # the driver's view at the moment of the launch
        original(*a)
        with lock:
            _, slots = seen[-1]
            first, second = (int.from_bytes(s, "little") for s in slots[:2])
            assert second == first + 8

    launch._launch = checked
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 800


def test_packed_launch_falls_back_to_cupy_for_wide_scalars() -> None:
    calls = []
    function = lambda grid, block, args: calls.append((grid, block, args))  # noqa: E731
    launch = packed_launch(function, (2, 1, 1), (64, 1, 1), 1, (np.complex128(1 + 2j),))
    assert not isinstance(launch, PackedLaunch)
    launch(["array"])
    assert calls == [((2, 1, 1), (64, 1, 1), ("array", np.complex128(1 + 2j)))]
