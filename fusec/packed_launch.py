"""One kernel launch with its parameters packed once: the launch of the dispatch fast path.

CuPy's ``Function.__call__`` converts every argument on every call: 7.7 us per launch of a two-array
kernel on the H200 machine's host (2026-12-03, ``python benchmarks/profile_gpu.py dispatch``). A
:class:`PackedLaunch` writes the scalar parameters once into a buffer of 8-byte slots that the
kernel-parameter array points into; a call only writes the array pointers into their slots and calls
the driver's ``cuLaunchKernel`` (CuPy's binding of it) on CuPy's current stream. The driver copies the
parameters when the launch is enqueued, so the buffer is free again when the call returns; a lock
keeps two threads from interleaving their pointer writes.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

SLOT_BYTES = 8  # every parameter gets an 8-byte slot: pointers, and scalars of at most 8 bytes


class PackedLaunch:
    """Launch ``function`` (a CuPy ``Function``) over ``grid`` x ``block`` with parameters: the data
    pointers of the arrays given to each call (``n_arrays`` of them, first), then ``scalars`` (NumPy
    scalars of the kernel's exact parameter types, frozen)."""

    def __init__(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int], n_arrays: int,
                 scalars: Sequence[Any]):
        from cupy.cuda import get_current_stream
        from cupy_backends.cuda.api.driver import launchKernel

        count = n_arrays + len(scalars)
        self._buffer = ctypes.create_string_buffer(SLOT_BYTES * max(count, 1))
        base = ctypes.addressof(self._buffer)
        for i, value in enumerate(scalars):
            raw = np.asarray(value).tobytes()
            if len(raw) > SLOT_BYTES:
                raise ValueError(f"scalar parameter {value!r} takes {len(raw)} bytes, more than a slot")
            ctypes.memmove(base + SLOT_BYTES * (n_arrays + i), raw, len(raw))
        self._params = (ctypes.c_void_p * max(count, 1))(*[base + SLOT_BYTES * i for i in range(count)])
        self._params_address = ctypes.addressof(self._params)
        self._write_pointers = struct.Struct(f"<{n_arrays}Q").pack_into
        self._function = function  # keeps the module (and so the CUfunction) alive
        self._launch_args = (function.ptr, *grid, *block, 0)
        self._n_arrays = n_arrays
        self._launch = launchKernel
        self._stream = get_current_stream
        self._lock = threading.Lock()

    def __call__(self, arrays: Sequence[Any]) -> None:
        pointers = [a.data.ptr for a in arrays]
        with self._lock:
            self._write_pointers(self._buffer, 0, *pointers)
            self._launch(*self._launch_args, self._stream().ptr, self._params_address, 0)


def packed_launch(function: Any, grid: tuple[int, int, int], block: tuple[int, int, int], n_arrays: int,
                  scalars: Sequence[Any]) -> Any:
    """A :class:`PackedLaunch`, or (where CuPy lacks the driver binding, or a scalar is wider than a slot)
    a plain CuPy launch taking the same arrays."""
    try:
        return PackedLaunch(function, grid, block, n_arrays, scalars)
    except (ImportError, AttributeError, ValueError):
        frozen = tuple(scalars)
        return lambda arrays: function(grid, block, (*arrays, *frozen))


__all__ = ["PackedLaunch", "packed_launch"]
