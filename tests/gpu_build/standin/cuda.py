"""``cupy.cuda`` (and ``cupy_backends.cuda.api.driver``) of the host stand-in: one device that NVRTC compiles
for (sm_90, an H200's limits), streams and events that keep no time, and modules that hold real cubins.

A module loads only a whole cubin built for sm_90, and hands out only functions its symbol table has (as the
driver would refuse them). Launching a raw function runs nothing: kernels only fusec's build-only launcher
interprets (``tests/gpu_build/launcher.py``) can run here, so a raw launch raises :class:`RawLaunch`, which
the plugin turns into a skip for the tests it lists as launching hand-written kernels. Timing with events
raises :class:`NeedsGpu`: a test that times needs a GPU.
"""

from __future__ import annotations

import itertools
import struct
import threading
from typing import Any

from fusec.runtime.cubin_cache import elf_complete
from tests.gpu_build.standin import memory

COMPUTE_CAPABILITY = "90"
NAME = "fusec build-only stand-in (sm_90, the limits of an H200)"
ATTRIBUTES = {  # cudaDeviceProp's values of an H100/H200 (SXM): the ones fusec and the tests read, and more
    "MultiProcessorCount": 132, "MaxThreadsPerBlock": 1024, "MaxThreadsPerMultiProcessor": 2048,
    "MaxSharedMemoryPerBlock": 48 * 1024, "MaxSharedMemoryPerBlockOptin": 227 * 1024,
    "MaxSharedMemoryPerMultiprocessor": 228 * 1024, "MaxRegistersPerBlock": 65536,
    "MaxRegistersPerMultiprocessor": 65536, "WarpSize": 32, "ComputeCapabilityMajor": 9,
    "ComputeCapabilityMinor": 0, "MaxBlockDimX": 1024, "MaxGridDimX": 2**31 - 1, "L2CacheSize": 50 * 1024 * 1024,
}


class NeedsGpu(RuntimeError):
    """What the stand-in cannot do without a GPU (time kernels, ...)."""


class RawLaunch(NeedsGpu):
    """A launch of a raw kernel function: it compiled, but nothing here can run it."""


class CUDARuntimeError(RuntimeError):
    pass


# ---- the device ------------------------------------------------------------------------------------------------
_CURRENT = threading.local()


def _current_device() -> int:
    return getattr(_CURRENT, "device", 0)


class Device:
    """``cupy.cuda.Device``: only device 0 exists."""

    def __init__(self, device: Any = None):
        self.id = _current_device() if device is None else int(device)
        if self.id != 0:
            raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal (the stand-in has one device)")
        self._previous: list[int] = []

    compute_capability = COMPUTE_CAPABILITY
    attributes = property(lambda self: dict(ATTRIBUTES))

    def use(self) -> None:
        _CURRENT.device = self.id

    def synchronize(self) -> None:
        pass

    def __enter__(self) -> Device:
        self._previous.append(_current_device())
        self.use()
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.device = self._previous.pop()

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id} (stand-in)>"


class Runtime:
    """``cupy.cuda.runtime``."""

    CUDARuntimeError = CUDARuntimeError

    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802 (CUDA's names)
        return 1

    @staticmethod
    def getDevice() -> int:  # noqa: N802
        return _current_device()

    @staticmethod
    def setDevice(device: int) -> None:  # noqa: N802
        Device(device).use()

    @staticmethod
    def getDeviceProperties(device: int) -> dict[str, Any]:  # noqa: N802
        Device(device)
        return {"name": NAME.encode(), "major": 9, "minor": 0, "multiProcessorCount": 132,
                "totalGlobalMem": 141 * 1024**3, "sharedMemPerBlock": 48 * 1024, "warpSize": 32,
                "maxThreadsPerBlock": 1024, "regsPerBlock": 65536}

    @staticmethod
    def deviceSynchronize() -> None:  # noqa: N802
        pass

    @staticmethod
    def memsetAsync(ptr: int, value: int, size: int, stream: int = 0) -> None:  # noqa: N802
        mem, offset = memory.at(int(ptr), int(size))
        mem.bytes[offset:offset + size] = value & 0xFF


runtime = Runtime()


# ---- streams and events -------------------------------------------------------------------------------------------
_STREAM_IDS = itertools.count(0x5000)


class Stream:
    """``cupy.cuda.Stream``: work is done when it is issued; ``with stream:`` makes it current (per thread)."""

    null: Stream

    def __init__(self, null: bool = False, non_blocking: bool = False, ptr: int | None = None):
        self.ptr = 0 if null else (ptr if ptr is not None else next(_STREAM_IDS))

    def synchronize(self) -> None:
        pass

    def use(self) -> Stream:
        _CURRENT.stream = self
        return self

    def __enter__(self) -> Stream:
        stack = _CURRENT.__dict__.setdefault("streams", [])
        stack.append(get_current_stream())
        self.use()
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.stream = _CURRENT.streams.pop()

    def record(self, event: Event | None = None) -> Event:
        return event or Event()

    def wait_event(self, event: Event) -> None:
        pass

    def __repr__(self) -> str:
        return f"<Stream 0x{self.ptr:x} (stand-in)>"


Stream.null = Stream(null=True)


def ExternalStream(ptr: int, device_id: int = -1) -> Stream:  # noqa: N802 (CuPy's name)
    return Stream(ptr=int(ptr))


def get_current_stream(device_id: int = -1) -> Stream:
    return getattr(_CURRENT, "stream", Stream.null)


class Event:
    """``cupy.cuda.Event``: recording and waiting are immediate; there is no time to read."""

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False):
        self.done = True

    def record(self, stream: Stream | None = None) -> None:
        pass

    def synchronize(self) -> None:
        pass


def get_elapsed_time(start: Event, end: Event) -> float:
    raise NeedsGpu("timing kernels with CUDA events needs a GPU (the build-only stand-in runs no kernel)")


# ---- modules of compiled code ----------------------------------------------------------------------------------------
_FUNCTION_PTRS = itertools.count(0x10000, 0x100)


def cubin_arch(cubin: bytes) -> int:
    """The SM version (90 for sm_90) a cubin's ELF header names."""
    (flags,) = struct.unpack_from("<I", cubin, 0x30)
    return (flags >> 8) & 0xFF


def cubin_functions(cubin: bytes) -> set[str]:
    """The names of the function symbols (kernels, device functions) in a cubin's symbol table."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQII", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _, kind, _, _, offset, size, link, _ in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strings_at = sections[link][4]
        for k in range(offset, offset + size, 24):
            name_at, info = struct.unpack_from("<IB", cubin, k)
            if info & 0xF == 2:  # STT_FUNC
                end = cubin.index(b"\0", strings_at + name_at)
                names.add(cubin[strings_at + name_at:end].decode())
    return names


class Function:
    """A kernel of a loaded module: ``ptr`` is its handle; calling it is a raw launch (see the module docstring)."""

    def __init__(self, module: Module, name: str):
        self.module = module
        self.name = name
        self.ptr = next(_FUNCTION_PTRS)

    def __call__(self, grid: Any, block: Any, args: Any, shared_mem: int = 0, stream: Any = None) -> None:
        raise RawLaunch(f"a raw launch of kernel {self.name!r}: it compiled for sm_{COMPUTE_CAPABILITY}, but the "
                        "build-only stand-in can only run the kernels of fusec's launcher (by interpretation)")


class Module:
    """``cupy.cuda.function.Module``: ``load(cubin)`` takes a whole sm_90 cubin."""

    def __init__(self) -> None:
        self.cubin: bytes | None = None
        self.functions: set[str] = set()

    def load(self, cubin: bytes) -> None:
        cubin = bytes(cubin)
        if not elf_complete(cubin):
            raise CUDARuntimeError("CUDA_ERROR_INVALID_IMAGE: not a whole cubin (ELF) image")
        if cubin_arch(cubin) != int(COMPUTE_CAPABILITY):
            raise CUDARuntimeError(f"CUDA_ERROR_NO_BINARY_FOR_GPU: a cubin for sm_{cubin_arch(cubin)} on an "
                                   f"sm_{COMPUTE_CAPABILITY} device")
        self.cubin = cubin
        self.functions = cubin_functions(cubin)

    def get_function(self, name: str) -> Function:
        if self.cubin is None:
            raise CUDARuntimeError("CUDA_ERROR_INVALID_HANDLE: the module holds no cubin")
        if name not in self.functions:
            raise CUDARuntimeError(f"CUDA_ERROR_NOT_FOUND: no function {name!r} in the module")
        return Function(self, name)


class RawKernel:
    """What ``RawModule.get_function`` returns: ``.kernel`` is the function; calling it is a raw launch."""

    def __init__(self, function: Function):
        self.kernel = function

    def __call__(self, grid: Any, block: Any, args: Any, **kwargs: Any) -> None:
        self.kernel(grid, block, args, **kwargs)


class RawModule:
    """``cupy.RawModule(code=...)``: compiled for sm_90 with NVRTC now (fusec's ``compile_cubin``; CuPy would add
    ``-ftz=true``, which only changes what the kernel computes, not whether it compiles)."""

    def __init__(self, code: str | None = None, *, path: str | None = None, options: tuple = (), backend: str = "nvrtc",
                 translate_cucomplex: bool = False, enable_cooperative_groups: bool = False,
                 name_expressions: Any = None, jitify: bool = False):
        from fusec.codegen.nvrtc import compile_cubin

        if code is None:
            raise NeedsGpu("RawModule(path=...) loads a prebuilt module; the stand-in compiles code only")
        self.module = Module()
        self.module.load(compile_cubin(code, f"sm_{COMPUTE_CAPABILITY}").cubin)

    def get_function(self, name: str) -> RawKernel:
        return RawKernel(self.module.get_function(name))


class Driver:
    """``cupy_backends.cuda.api.driver``: occupancy from the thread count alone (no register count without a
    device: an upper bound, which only sizes persistent grids); launching raw parameter blocks needs a GPU."""

    @staticmethod
    def occupancyMaxActiveBlocksPerMultiprocessor(func: int, threads: int, shared: int) -> int:  # noqa: N802
        return max(1, min(32, ATTRIBUTES["MaxThreadsPerMultiProcessor"] // max(1, int(threads))))

    @staticmethod
    def launchKernel(*args: Any) -> None:  # noqa: N802
        raise RawLaunch("a pre-packed driver launch (the dispatch fast path) needs a GPU")

    @staticmethod
    def funcGetAttribute(attribute: int, func: int) -> int:  # noqa: N802
        raise NeedsGpu("kernel attributes need a GPU")


driver = Driver()


class MemoryPool:
    """``cupy.get_default_memory_pool()``: host memory goes back when its last array does."""

    def free_all_blocks(self, stream: Any = None) -> None:
        pass


_POOL = MemoryPool()


def get_default_memory_pool() -> MemoryPool:
    return _POOL


__all__ = ["Device", "Event", "ExternalStream", "Function", "Module", "NeedsGpu", "RawKernel", "RawLaunch",
           "RawModule", "Stream", "driver", "get_current_stream", "get_elapsed_time", "runtime"]
