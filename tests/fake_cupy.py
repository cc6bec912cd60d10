"""A CPU stand-in for CuPy and the CUDA driver, to run fusec's GPU path (the launcher, the dispatch fast path, the
Dask path) on a machine without a GPU and check every launch's pointers against what its kernel was built for.

Device arrays are NumPy arrays (:class:`DeviceArray`, a subclass whose module name starts with ``cupy``, so fusec
takes them for CuPy's) whose ``data.ptr`` is their real address: a fresh array starts on a 512-byte boundary, as
CuPy's memory pool gives, and a view (a slice, a Dask chunk) lies at its true offset from it. Kernels are not
compiled: :func:`fake_gpu` replaces the launcher's compiled functions by :class:`FakeKernel` objects, which a launch
(CuPy's ``function(grid, block, args)`` or the driver's ``launchKernel`` of a packed launch) calls with the real
pointers. Each launch is checked: the kernel's source must be the one fusec generates for the arrays it is launched
on (their strides and pointer alignment) with the same schedule, else the launch is recorded in
:attr:`FakeGpu.mislaunched` (on a GPU that is a kernel reading or writing with vectors its pointers are not aligned
for). Then the kernel runs as the reference interpreter over its region, writing its outputs in place, so what
follows computes on the right values.

    with fake_gpu(monkeypatch) as gpu:
        run(...)                        # fusec's CuPy path, on DeviceArrays
    assert not gpu.mislaunched
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import sys
import threading
import types
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ALLOCATION_ALIGN = 512  # CuPy's memory pool hands out blocks on 512-byte boundaries


class _Memory:
    """An allocation (what CuPy's ``MemoryPointer.mem`` is): the host buffer behind a fresh device array."""

    __slots__ = ("buffer", "ptr", "size", "__weakref__")

    def __init__(self, buffer: np.ndarray, ptr: int, size: int):
        self.buffer, self.ptr, self.size = buffer, ptr, size


class _Pointer:
    """What CuPy's ``ndarray.data`` is: the array's first element's address, its device, its allocation."""

    __slots__ = ("ptr", "device_id", "mem")

    def __init__(self, ptr: int, mem: _Memory | None):
        self.ptr, self.device_id, self.mem = ptr, 0, mem


class DeviceArray(np.ndarray):
    """A NumPy array posing as a ``cupy.ndarray`` (see the module docstring)."""

    def __new__(cls, shape: Any = (), dtype: Any = float, *args: Any, **kwargs: Any) -> DeviceArray:
        if args or kwargs:  # NumPy's own constructor (buffer=, offset=, strides=)
            return np.ndarray.__new__(cls, shape, dtype, *args, **kwargs)
        dtype = np.dtype(dtype)
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        buffer = np.zeros(nbytes + ALLOCATION_ALIGN, np.uint8)
        offset = -buffer.ctypes.data % ALLOCATION_ALIGN
        return np.ndarray.__new__(cls, shape, dtype, buffer=buffer, offset=offset)

    @property
    def data(self) -> _Pointer:  # type: ignore[override]
        pointer = self.__dict__.get("_pointer")
        if pointer is None:
            pointer = self.__dict__["_pointer"] = _Pointer(self.__array_interface__["data"][0], _memory_of(self))
        return pointer

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False), "version": 3,
                "strides": self.strides}

    def __getitem__(self, key: Any) -> Any:
        # as CuPy's: an element is a 0-d array (a view at its address), never a NumPy scalar
        key = key if isinstance(key, tuple) else (key,)
        return super().__getitem__(key if any(k is Ellipsis for k in key) else (*key, Ellipsis))

    def set(self, host: np.ndarray) -> None:
        np.copyto(self.view(np.ndarray), host)

    def get(self) -> np.ndarray:
        return np.array(self).view(np.ndarray)

    @property
    def device(self) -> Any:
        return types.SimpleNamespace(id=0)


DeviceArray.__module__ = "cupy_fake"  # fusec takes it for CuPy's; Dask does not load its CuPy backend for it

# id(buffer) -> the allocation of every array whose pointer was taken, while anything refers to it (so a recycled
# array is free exactly when nothing outside the recycler holds it, its pointer or its allocation: as with CuPy)
_ALLOCATIONS: weakref.WeakValueDictionary[int, _Memory] = weakref.WeakValueDictionary()
_ALLOCATIONS_LOCK = threading.Lock()  # Dask's threads allocate and launch at once


def _memory_of(a: np.ndarray) -> _Memory:
    """The allocation ``a`` lies in: the buffer at the end of its chain of bases (registered on first sight)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    with _ALLOCATIONS_LOCK:
        mem = _ALLOCATIONS.get(id(root))
        if mem is None:
            ptr = root.__array_interface__["data"][0]
            mem = _ALLOCATIONS[id(root)] = _Memory(root, ptr, root.nbytes)
    return mem


def fresh(shape: Any, dtype: Any) -> DeviceArray:
    """A zeroed device array on a 512-byte boundary."""
    return DeviceArray(shape, dtype)


def to_device(a: Any, dtype: Any = None) -> DeviceArray:
    """A device copy of ``a`` (``cupy.asarray``), or ``a`` itself when it is one already."""
    if isinstance(a, DeviceArray) and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    host = np.asarray(a, dtype=dtype)
    out = fresh(host.shape, host.dtype)
    out[...] = host
    return out


def offset_view(a: np.ndarray, elements: int) -> DeviceArray:
    """A device copy of ``a`` starting ``elements`` elements past a 512-byte boundary (its allocation's start)."""
    a = np.asarray(a)
    base = fresh((a.size + elements,), a.dtype)
    view = base[elements:].reshape(a.shape)
    view[...] = a
    return view


def _wrap(value: Any) -> Any:
    if isinstance(value, np.ndarray) and not isinstance(value, DeviceArray):
        return value.view(DeviceArray)
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _device_function(fn: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        return _wrap(fn(*args, **kwargs))

    return call


@dataclass
class Launch:
    """One launch a fake kernel saw: the kernel, its arguments by parameter name, how it was launched."""

    kernel: str
    schedule: str
    pointers: dict[str, int]
    path: str  # "function" (CuPy's call: the checked path) or "driver" (a packed launch: the fast path)
    problem: str = ""  # why the launch does not fit its kernel ("" when it does)


@dataclass
class FakeGpu:
    """What :func:`fake_gpu` records: every launch, and the ones whose arrays the kernel was not built for."""

    run_kernels: bool = True
    launches: list[Launch] = field(default_factory=list)
    kernels: dict[int, Any] = field(default_factory=dict)  # function pointer -> FakeKernel

    @property
    def mislaunched(self) -> list[Launch]:
        return [launch for launch in self.launches if launch.problem]


_FUNCTION_POINTERS = itertools.count(0x7000_0000)


class FakeKernel:
    """A compiled kernel on the fake GPU: launching it checks its arrays and runs its region by the interpreter."""

    def __init__(self, gpu: FakeGpu, region: Any, layouts: dict, kernel: Any):
        self.gpu, self.source = gpu, kernel.source
        self.generated = (region, layouts, kernel)  # what the launcher generated it from
        self.ptr = next(_FUNCTION_POINTERS)
        self.checked: dict[tuple, str] = {}  # the check's verdict per layout launched on (shapes, strides, ptr % 16)

    # CuPy's Function.__call__
    def __call__(self, grid: tuple, block: tuple, args: tuple) -> None:
        if not self.gpu.run_kernels:
            return
        spec = self.generated[2].spec
        arrays = {p.name: a for p, a in zip(spec.params, args) if p.role in ("input", "output")}
        self._launch({name: a.data.ptr for name, a in arrays.items()}, arrays, "function")

    def launch_packed(self, parameters: int) -> None:
        """A launch through the driver's ``launchKernel``: the pointers read from the packed parameter block."""
        spec = self.generated[2].spec
        names = [p.name for p in spec.params if p.role in ("input", "output")]
        slots = (ctypes.c_uint64 * len(names)).from_address(parameters) if names else []
        pointers = {name: ctypes.c_uint64.from_address(int(slot)).value for name, slot in zip(names, slots)}
        self._launch(pointers, None, "driver")

    def _launch(self, pointers: dict[str, int], arrays: dict[str, Any] | None, path: str) -> None:
        region, layouts, kernel = self.generated
        spec = kernel.spec
        launch = Launch(spec.name, str(kernel.schedule), pointers, path)
        self.gpu.launches.append(launch)
        if arrays is None:
            arrays = self._arrays_at(pointers, layouts)
        key = tuple((name, a.shape, a.strides, a.data.ptr & 15) for name, a in arrays.items())
        problem = self.checked.get(key)
        if problem is None:
            problem = self.checked[key] = self._problem(arrays)
        launch.problem = problem
        self._run(arrays)

    def _arrays_at(self, pointers: dict[str, int], layouts: dict) -> dict[str, Any]:
        """The arrays a packed launch's pointers address, laid out as the kernel was built for (a runner is keyed
        by its arrays' exact shapes and strides; only where they start is read from the launch)."""
        from fusec.schedule import ArrayLayout

        spec = self.generated[2].spec
        nodes = {**{f"in{k}": n for k, n in enumerate(spec.inputs)},
                 **{f"out{k}": n for k, n in enumerate(spec.outputs)}}
        out = {}
        for name, ptr in pointers.items():
            node = nodes[name]
            layout = layouts.get(node) or ArrayLayout.c_contiguous(node.shape)
            with _ALLOCATIONS_LOCK:
                mem = next(m for m in list(_ALLOCATIONS.values()) if m.ptr <= ptr <= m.ptr + m.size)
            base = np.ctypeslib.as_array((ctypes.c_uint8 * max(mem.size, 1)).from_address(mem.ptr))
            start = ptr - mem.ptr
            strides = tuple(s * node.dtype.itemsize for s in layout.strides)
            out[name] = np.ndarray(node.shape, node.dtype, buffer=base, offset=start, strides=strides).view(DeviceArray)
        return out

    def _problem(self, arrays: dict[str, Any]) -> str:
        """Why these arrays are not the ones the kernel was built for ("" when they are): the kernel fusec
        generates for them with the same schedule differs, or the schedule does not fit them."""
        from fusec.kinds import generate
        from fusec.schedule import ArrayLayout, ScheduleError

        region, _, kernel = self.generated
        spec = kernel.spec
        actual = {**{n: ArrayLayout.of(arrays[f"in{k}"]) for k, n in enumerate(spec.inputs)},
                  **{n: ArrayLayout.of(arrays[f"out{k}"]) for k, n in enumerate(spec.outputs)}}
        try:
            again = generate(region, actual, kernel.schedule, device=_device_props())
        except ScheduleError as exc:
            return f"{spec.name} ({kernel.schedule}) launched on arrays it does not fit: {exc}"
        if again.source != self.source:
            where = {name: f"{a.data.ptr & 15}" for name, a in arrays.items()}
            return (f"{spec.name} ({kernel.schedule}) launched on arrays laid out otherwise than it was built for "
                    f"(pointers mod 16: {where})")
        problem = vector_address_problem(spec, {name: a.data.ptr for name, a in arrays.items()})
        return f"{spec.name} ({kernel.schedule}): {problem}" if problem else ""

    def _run(self, arrays: dict[str, Any]) -> None:
        from fusec.ir.interpret import run_nodes

        region, _, kernel = self.generated
        spec = kernel.spec
        env = {n: np.asarray(arrays[f"in{k}"]).view(np.ndarray) for k, n in enumerate(spec.inputs)}
        sources = [n for n in region.inputs if n not in env]
        with np.errstate(all="ignore"):
            run_nodes(np, sources + list(region.nodes), env)
        for k, n in enumerate(spec.outputs):
            np.copyto(arrays[f"out{k}"].view(np.ndarray), env[n], casting="unsafe")


STEPS_SIMULATED = 1 << 14  # vector steps (or rows) whose addresses a launch's check computes, at most


def vector_address_problem(spec: Any, pointers: dict[str, int]) -> str | None:
    """What a GPU would fault on among the kernel's vector loads and stores, launched with ``pointers`` (array
    parameter -> base address), or None: each vector's address computed as the template computes it (the
    access's offset expression from the spec, with the kernel's own scalar arguments) must be a multiple of the
    vector's bytes, and its lanes must be the elements the kernel means (the offsets of the lanes' own
    coordinates, consecutive). The templates' three vector forms: the flat loops' ``((Vec*)p)[iv]``, the
    inner_vector loop's ``*(Vec*)(p + offset(i))`` and the register rows' ``*(Vec*)(p + kb + i0)``."""
    width = spec.vec
    if width <= 1:
        return None
    params = {p.name: int(v) for p, v in zip(spec.scalar_params, spec.args)}

    def base(access: Any) -> int:
        array, _, view = access.pointer.partition("_")
        return pointers[array] + (params[f"{view}_o"] * access.itemsize if view else 0)

    def offset(expression: str | None, coords: dict[str, int]) -> int:
        if expression is None:
            return 0
        text = expression.replace("fc::clamp_index<index_t>", "clamp")
        return int(eval(text, {"clamp": lambda x, lo, hi: min(max(x, lo), hi)}, {**params, **coords}))

    def unravel(flat: int, axes: Any) -> dict[str, int]:
        coords = {}
        for ax in reversed(axes[1:]):
            coords[ax.coord] = flat % params[ax.extent]
            flat //= params[ax.extent]
        if axes:
            coords[axes[0].coord] = flat
        return coords

    def misaligned(access: Any, address: int) -> str | None:
        size = width * access.itemsize
        if address % size:
            return (f"a {size}-byte vector {'store' if access.var.startswith('st') else 'load'} of {access.var} at an "
                    f"address {address % size} bytes past a multiple of {size}")
        return None

    loop = getattr(spec.schedule, "loop", None)
    if loop == "vector":  # ((Vec*)p)[iv]: aligned wherever p is
        accesses = [a for a in spec.epilogue_loads if not a.is_index] + [
            s.access for s in spec.epilogue_stores if not s.access.uniform]
        accesses += [a for ph in spec.phases for a in ph.loads if not a.is_index]
        return next((p for a in accesses if (p := misaligned(a, base(a)))), None)
    if loop == "inner_vector":
        accesses = [a for a in spec.epilogue_loads if not a.is_index and a.var not in spec.inner_broadcast]
        accesses += [s.access for s in spec.epilogue_stores]
        for iv in range(min(params["n"] // width, STEPS_SIMULATED)):
            i = iv * width
            for a in accesses:
                first = offset(a.loop, unravel(i, spec.loop_axes))
                problem = misaligned(a, base(a) + first * a.itemsize)
                if problem:
                    return f"{problem} (vector step {iv})"
                lanes = [offset(a.loop, unravel(i + j, spec.loop_axes)) for j in range(width)]
                if lanes != list(range(first, first + width)):
                    return (f"the vector of {a.var} at step {iv} is elements {list(range(first, first + width))}, "
                            f"its lanes' own elements are {lanes}")
        return None
    if spec.row_threads:  # register rows: *(Vec*)(p + kb + i0), i0 a multiple of the width
        accesses = list(spec.held) + [s.access for s in spec.epilogue_stores]
        for row in range(min(params["nk"], STEPS_SIMULATED)):
            coords = unravel(row, spec.kept_axes)
            starts = {a.var: offset(a.kept, coords) for a in accesses}
            if spec.rows_aligned_at_run_time and any(kb % width for kb in starts.values()):
                continue  # the kernel checks the row's start and reads and writes this row one element at a time
            for a in accesses:
                problem = misaligned(a, base(a) + starts[a.var] * a.itemsize)
                if problem:
                    return f"{problem} (row {row})"
    return None


def _device_props() -> Any:
    from fusec.schedule import H200

    return H200  # what the fake GPU tells the launcher it is (fusec's own device_properties is never asked)


def _fake_cupy_module(gpu: FakeGpu) -> types.ModuleType:
    module = types.ModuleType("cupy")
    module.ndarray = DeviceArray
    module.asarray = to_device
    module.array = lambda a, dtype=None, copy=True: to_device(np.array(a, dtype=dtype), dtype)
    module.empty = fresh
    module.zeros = fresh
    module.asnumpy = lambda a, **_: np.array(a).view(np.ndarray)
    module.may_share_memory = np.may_share_memory
    module.matmul = _matmul
    stream = types.SimpleNamespace(ptr=0)
    device = types.SimpleNamespace(compute_capability="90", attributes={"MultiProcessorCount": 132},
                                   synchronize=lambda: None, id=0)

    def memset(ptr: int, value: int, nbytes: int, _stream: int) -> None:
        ctypes.memset(ptr, value, nbytes)

    runtime = types.SimpleNamespace(getDevice=lambda: 0, setDevice=lambda d: None, getDeviceCount=lambda: 1,
                                    memsetAsync=memset)
    module.cuda = types.SimpleNamespace(runtime=runtime, get_current_stream=lambda: stream,
                                        Device=lambda d=0: device)

    def fallback(name: str) -> Any:
        value = getattr(np, name)
        return _device_function(value) if callable(value) and not isinstance(value, type) else value

    module.__getattr__ = fallback  # type: ignore[attr-defined]
    return module


def _matmul(a: Any, b: Any, out: Any = None) -> Any:
    """``cupy.matmul`` as cuBLAS computes it: float16 accumulates in float32 and rounds once."""
    host = (np.matmul(np.asarray(a, np.float32), np.asarray(b, np.float32)).astype(np.float16)
            if a.dtype == np.float16 else np.matmul(np.asarray(a), np.asarray(b)))
    if out is None:
        return to_device(host)
    np.copyto(out, host, casting="same_kind")
    return out


def _fake_driver(gpu: FakeGpu) -> types.ModuleType:
    driver = types.ModuleType("cupy_backends.cuda.api.driver")

    def launch_kernel(function: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,
                      stream: int, parameters: int, extra: int) -> None:
        if gpu.run_kernels:
            gpu.kernels[function].launch_packed(parameters)

    driver.launchKernel = launch_kernel
    driver.occupancyMaxActiveBlocksPerMultiprocessor = lambda function, threads, shared: 4
    return driver


@contextlib.contextmanager
def fake_gpu(monkeypatch: Any, run_kernels: bool = True) -> Iterator[FakeGpu]:
    """fusec's GPU path on the CPU (see the module docstring): CuPy and the driver faked, kernels generated for real
    but run by the interpreter, every launch checked. A fresh default launcher for the duration. ``run_kernels``
    False: a launch does nothing at all (no check, no interpreter: for timing what happens around launches)."""
    import fusec.runtime.launch as runtime

    gpu = FakeGpu(run_kernels=run_kernels)
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy_module(gpu))
    import cupy_backends.cuda.api as api

    driver = _fake_driver(gpu)
    monkeypatch.setattr(api, "driver", driver, raising=False)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.api.driver", driver)
    last = threading.local()  # the kernel the current thread generated last
    real_generate = runtime.generate
    real_recipe = runtime.KernelLauncher.recipe

    def generate(region: Any, layouts: Any = None, schedule: Any = None, **kwargs: Any) -> Any:
        kernel = real_generate(region, layouts, schedule, **kwargs)
        last.generated = (region, dict(layouts or {}), kernel)
        return kernel

    def recipe(self: Any, *args: Any, **kwargs: Any) -> Any:
        built = real_recipe(self, *args, **kwargs)
        region, layouts, kernel = last.generated
        assert kernel.source == built.source
        built.function = FakeKernel(gpu, region, layouts, kernel)  # one per recipe: a source serves many shapes
        gpu.kernels[built.function.ptr] = built.function
        return built

    monkeypatch.setattr(runtime, "generate", generate)
    monkeypatch.setattr(runtime.KernelLauncher, "recipe", recipe)
    monkeypatch.setattr(runtime.KernelLauncher, "function", lambda self, source, name: None)
    monkeypatch.setattr(runtime.KernelLauncher, "capacity", lambda self, fn, threads: 132 * 4)
    monkeypatch.setattr(runtime, "device_properties", lambda device: _device_props())
    monkeypatch.setattr(runtime, "_DEFAULT", None)
    # the Dask path's plans and block programs hold runners (fake kernels): fresh caches, dropped afterwards
    import fusec.dask as dask_path
    import fusec.dask.blocks as blocks

    monkeypatch.setattr(dask_path, "_PLANS", type(dask_path._PLANS)(dask_path._PLANS_KEPT))
    # fusec.fuse's calls take a DeviceArray for CuPy's (it is a NumPy subclass underneath), fast path included
    import fusec.frontend.api as api
    from fusec.frontend import arguments

    real_backend = arguments.backend_of
    monkeypatch.setattr(arguments, "backend_of", lambda v: "cupy" if isinstance(v, DeviceArray) else real_backend(v))
    monkeypatch.setattr(api, "_cupy_ndarray", DeviceArray)
    monkeypatch.setattr(blocks, "_PARSED", type(blocks._PARSED)(blocks._PROGRAMS_KEPT))
    yield gpu
