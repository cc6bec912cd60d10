"""What the schedule heuristics know of a GPU: its SM count and per-SM and per-block limits.

Planning needs no GPU: without one, heuristics plan for :data:`H200` (the GPU fusec is tuned on). The
runtime passes the properties of the device it launches on (:func:`device_properties`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceProperties:
    """The limits a schedule must respect and the sizes it scales with."""

    name: str
    sm_count: int
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    shared_memory_per_block: int = 48 * 1024  # without opting in to more
    shared_memory_per_sm: int = 228 * 1024
    registers_per_sm: int = 65536
    warp_size: int = 32


H200 = DeviceProperties("NVIDIA H200", sm_count=132)


@functools.cache
def device_properties(device_id: int) -> DeviceProperties:
    """The properties of CUDA device ``device_id`` (through CuPy; needs a GPU)."""
    import cupy

    attrs = cupy.cuda.Device(device_id).attributes
    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return DeviceProperties(
        name=name,
        sm_count=attrs["MultiProcessorCount"],
        max_threads_per_block=attrs["MaxThreadsPerBlock"],
        max_threads_per_sm=attrs["MaxThreadsPerMultiProcessor"],
        shared_memory_per_block=attrs["MaxSharedMemoryPerBlock"],
        shared_memory_per_sm=attrs["MaxSharedMemoryPerMultiprocessor"],
        registers_per_sm=attrs["MaxRegistersPerMultiprocessor"],
        warp_size=attrs["WarpSize"],
    )
