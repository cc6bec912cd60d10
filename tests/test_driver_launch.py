"""The driver launch's parameter buffers (no GPU needed: nothing here calls the driver)."""

from __future__ import annotations

import ctypes
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from fusec import driver_launch
from fusec.driver_launch import DriverLaunch, scalar_slot


@pytest.mark.parametrize("value", [np.int32(-7), np.int64(1 << 40), np.uint64(0), np.float32(1.5),
                                   np.float64(-2.25), np.uint8(200), np.bool_(True)])
def test_driver_launch_scalar_slot_holds_the_exact_bytes(value) -> None:
    slot = scalar_slot(value)
    assert ctypes.sizeof(slot) == value.nbytes
    assert ctypes.string_at(ctypes.addressof(slot), value.nbytes) == value.tobytes()


def test_driver_launch_unknown_scalar_type_is_refused_up_front() -> None:
    with pytest.raises(TypeError, match="complex64"):
        DriverLaunch(SimpleNamespace(ptr=1), (1, 1, 1), (32, 1, 1), 1, (np.complex64(1),))


def _params(launch: DriverLaunch, pointers: list[int]) -> list[bytes]:
    slots, params = launch.buffers()
    for slot, pointer in zip(slots, pointers):
        slot.value = pointer
    sizes = [8] * launch.n_pointers + [v.nbytes for v in launch.scalars]
    return [ctypes.string_at(params[k], size) for k, size in enumerate(sizes)]


def test_driver_launch_parameter_array_points_at_pointers_then_scalars() -> None:
    scalars = (np.int32(1029), np.int64(917), np.uint64(0))
    launch = DriverLaunch(SimpleNamespace(ptr=0x1234), (8, 1, 1), (256, 1, 1), 2, scalars)
    got = _params(launch, [0x7F0000001000, 0x7F0000002000])
    assert got == [np.uint64(0x7F0000001000).tobytes(), np.uint64(0x7F0000002000).tobytes(),
                   *[v.tobytes() for v in scalars]]
    assert launch.handle == 0x1234 and launch.grid == (8, 1, 1) and launch.block == (256, 1, 1)


def test_driver_launch_buffers_are_per_thread() -> None:
    launch = DriverLaunch(SimpleNamespace(ptr=1), (1, 1, 1), (32, 1, 1), 1, (np.int32(5),))
    mine = launch.buffers()
    seen = []
    thread = threading.Thread(target=lambda: seen.append(launch.buffers()))
    thread.start()
    thread.join()
    assert seen[0][1] is not mine[1] and launch.buffers()[1] is mine[1]


def test_driver_launch_is_off_unless_asked_for(monkeypatch) -> None:
    assert driver_launch.LAUNCH in ("cupy", "driver")
    monkeypatch.delenv("FUSEC_LAUNCH", raising=False)
    import importlib

    fresh = importlib.reload(driver_launch)
    try:
        assert fresh.LAUNCH == "cupy"
    finally:
        importlib.reload(driver_launch)
