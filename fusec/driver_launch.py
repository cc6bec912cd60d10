"""Kernel launches straight through the CUDA driver's ``cuLaunchKernel``, for the dispatch fast path.

CuPy's ``Function.__call__`` converts every argument on every call (type checks, a fresh parameter
buffer); a :class:`DriverLaunch` builds its parameter buffers once per thread, with the scalar
arguments already in place, so a call writes the array pointers into their slots and calls the driver
through ``ctypes``. ``FUSEC_LAUNCH=driver`` turns it on (the default is CuPy's launch, see
:data:`LAUNCH`); the launch goes to the CUDA context current on the calling thread, as CuPy's does.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from fusec.errors import FusecError

LAUNCH = os.environ.get("FUSEC_LAUNCH", "cupy")  # cupy | driver: how PlanRunner launches

_SCALAR_CTYPES: dict[np.dtype, Any] = {
    np.dtype(np.int8): ctypes.c_int8, np.dtype(np.uint8): ctypes.c_uint8,
    np.dtype(np.int16): ctypes.c_int16, np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.int32): ctypes.c_int32, np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.bool_): ctypes.c_bool,
}
_LAUNCH_KERNEL: Any = None


def launch_kernel() -> Any:
    """libcuda's ``cuLaunchKernel`` with its argument types declared (loaded once)."""
    global _LAUNCH_KERNEL
    if _LAUNCH_KERNEL is None:
        function = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
        function.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        function.restype = ctypes.c_int
        _LAUNCH_KERNEL = function
    return _LAUNCH_KERNEL


def scalar_slot(value: Any) -> Any:
    """A ctypes object holding ``value`` (a NumPy scalar of a kernel parameter's exact type)."""
    dtype = np.asarray(value).dtype
    ctype = _SCALAR_CTYPES.get(dtype)
    if ctype is None:
        raise TypeError(f"no ctypes type for a kernel scalar of dtype {dtype}")
    return ctype(value.item())


class DriverLaunch:
    """One kernel's launch: ``n_pointers`` array arguments (given per call), then ``scalars`` (fixed)."""

    def __init__(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                 n_pointers: int, scalars: tuple[Any, ...]):
        self.function = function  # keeps the module (and so the handle) alive
        self.handle = int(function.ptr)
        self.grid = tuple(int(g) for g in grid)
        self.block = tuple(int(b) for b in block)
        self.n_pointers = n_pointers
        self.scalars = tuple(scalars)
        for value in self.scalars:
            scalar_slot(value)  # every scalar type is known now, not at the first launch
        self._local = threading.local()

    def buffers(self) -> tuple[list[Any], Any]:
        """This thread's (pointer slots, parameter array): cuLaunchKernel reads the argument values
        through the array of their addresses, and copies them before it returns."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            slots = [ctypes.c_void_p() for _ in range(self.n_pointers)]
            fixed = [scalar_slot(v) for v in self.scalars]
            params = (ctypes.c_void_p * (len(slots) + len(fixed)))(
                *[ctypes.addressof(s) for s in slots + fixed])
            buffers = self._local.buffers = (slots, params, fixed)
        return buffers[0], buffers[1]

    def __call__(self, pointers: list[int], stream: int) -> None:
        slots, params = self.buffers()
        for slot, pointer in zip(slots, pointers):
            slot.value = pointer
        g, b = self.grid, self.block
        status = launch_kernel()(self.handle, g[0], g[1], g[2], b[0], b[1], b[2], 0, stream, params, None)
        if status:
            raise FusecError(f"cuLaunchKernel failed with CUDA error {status}",
                             hint="run with FUSEC_LAUNCH=cupy to launch through CuPy instead")
