"""The module objects of the host stand-in for CuPy, and :func:`install`, which puts them in ``sys.modules``
(``cupy``, ``cupy.cuda`` with ``runtime`` and ``function``, ``cupy.random``, ``cupy.linalg``, ``cupyx.scipy.special``
and ``cupy_backends.cuda.api.driver``) so that ``import cupy`` anywhere gets them.

``cupy.<name>`` is NumPy's ``<name>`` run on the host: ufuncs, dtypes and constants as NumPy's own (the arrays'
``__array_ufunc__`` keeps results on the stand-in device, and Tracers trace through them as through NumPy's),
functions wrapped to take stand-in arrays and give them back (views stay views of their allocation). Only what
CuPy does differently is written out: ``asarray``/``asnumpy`` cross between host and device, creators allocate
on the device, ``random`` draws on the host.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from tests.gpu_build.standin import cuda
from tests.gpu_build.standin.array import _arrays_in, ndarray, to_device, to_host, unwrap, wrap
from tests.gpu_build.standin.memory import MemoryPointer

VERSION = "14.2.0"  # the CuPy the project's test extra installs, whose behaviour the stand-in follows


def host_function(fn: Any, qualified: str) -> Any:
    """``fn`` (NumPy's, SciPy's) taking and returning stand-in arrays."""

    def function(*args: Any, **kwargs: Any) -> Any:
        return wrap(fn(*unwrap(args), **unwrap(kwargs)), _arrays_in((args, kwargs)))

    function.__name__ = getattr(fn, "__name__", qualified.rsplit(".", 1)[-1])
    function.__qualname__ = qualified
    function.__wrapped__ = fn  # type: ignore[attr-defined]
    return function


class HostNamespace(types.ModuleType):
    """A module whose missing attributes are those of ``source`` (NumPy, ``numpy.linalg``, ``scipy.special``):
    ufuncs, types and constants as they are, functions through :func:`host_function`; each made once. The
    source's attributes are taken as they are now, before any tracing: fusec's tracer swaps some of NumPy's
    functions while it traces (``numpy.empty`` makes traced arrays then), and a name first asked for during a
    trace must still get NumPy's own."""

    def __init__(self, name: str, source: Any):
        super().__init__(name)
        self._source = source
        self._originals = dict(vars(source))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = self._originals[name] if name in self._originals else getattr(self._source, name)
        if callable(value) and not isinstance(value, (np.ufunc, type)):
            value = host_function(value, f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class Random(types.ModuleType):
    """``cupy.random``: NumPy's legacy generator on the host, its draws copied to the device (``dtype=`` as CuPy
    takes it: the draw cast, or ``randint``'s own)."""

    def __init__(self) -> None:
        super().__init__("cupy.random")
        self._state = np.random.RandomState(0)

    def seed(self, seed: Any = None) -> None:
        self._state = np.random.RandomState(seed)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        draw = getattr(np.random.RandomState, name)

        def function(*args: Any, dtype: Any = None, **kwargs: Any) -> Any:
            if name == "randint" and dtype is not None:
                return to_device(draw(self._state, *args, dtype=dtype, **kwargs))
            return to_device(draw(self._state, *args, **kwargs), dtype)

        function.__name__ = name
        return function


def _array(obj: Any, dtype: Any = None, copy: bool = True, order: str = "K", ndmin: int = 0) -> ndarray:
    """``cupy.array``: a copy on the device (of a device array too)."""
    if isinstance(obj, ndarray):
        host = np.array(obj.host, dtype=dtype, copy=copy, order=order, ndmin=ndmin)
        return wrap(host, {id(obj.host): obj})
    return to_device(np.array(unwrap(obj), dtype=dtype, order=order, ndmin=ndmin), order=order)


def _matmul(a: Any, b: Any, out: Any = None, **kwargs: Any) -> Any:
    """``cupy.matmul`` as cuBLAS computes it (CuPy 14's default compute type): float16 accumulates in float32 and
    rounds once (NumPy's float16 matmul rounds at every step); other dtypes as NumPy's."""
    x, y = unwrap(a), unwrap(b)
    host = (np.matmul(x.astype(np.float32), y.astype(np.float32)).astype(np.float16)
            if x.dtype == np.float16 and y.dtype == np.float16 else np.matmul(x, y, **kwargs))
    if out is None:
        return wrap(host, _arrays_in((a, b)))
    np.copyto(unwrap(out), host, casting="same_kind")
    return out


def _from_dlpack(x: Any, **kwargs: Any) -> ndarray:
    if isinstance(x, ndarray):
        return ndarray.view_of(x.host, x.memory)
    raise cuda.NeedsGpu(f"cupy.from_dlpack of a {type(x).__name__} needs a GPU (the stand-in shares only its own "
                        "arrays)")


def _module(name: str, attributes: dict[str, Any], base: type[types.ModuleType] = types.ModuleType,
            *args: Any) -> types.ModuleType:
    module = base(name, *args) if args else base(name)
    for key, value in attributes.items():
        setattr(module, key, value)
    return module


def _nvrtc_version() -> tuple[int, int]:
    from fusec.codegen.nvrtc import nvrtc_version

    return nvrtc_version()


def build() -> dict[str, types.ModuleType]:
    """Fresh module objects of the stand-in, by the names they take in ``sys.modules``."""
    import scipy.special

    function = _module("cupy.cuda.function", {"Module": cuda.Module, "Function": cuda.Function})
    runtime = _module("cupy.cuda.runtime", {name: getattr(cuda.runtime, name) for name in dir(cuda.Runtime)
                                            if not name.startswith("_")})
    # the stand-in's RawModule compiles with fusec's NVRTC (cuda.bindings), so that is the version CuPy's reports
    nvrtc = _module("cupy.cuda.nvrtc", {"getVersion": _nvrtc_version})
    cuda_module = _module("cupy.cuda", {
        "Device": cuda.Device, "Stream": cuda.Stream, "ExternalStream": cuda.ExternalStream, "Event": cuda.Event,
        "get_current_stream": cuda.get_current_stream, "get_elapsed_time": cuda.get_elapsed_time,
        "MemoryPointer": MemoryPointer, "runtime": runtime, "function": function, "nvrtc": nvrtc,
    })
    special = _module("cupyx.scipy.special", {}, HostNamespace, scipy.special)
    cupy = _module("cupy", {
        "__version__": VERSION, "__path__": [], "ndarray": ndarray, "asarray": to_device, "asnumpy": to_host,
        "array": _array, "from_dlpack": _from_dlpack, "matmul": _matmul, "RawModule": cuda.RawModule,
        "RawKernel": cuda.RawKernel,
        "get_default_memory_pool": cuda.get_default_memory_pool, "cuda": cuda_module, "random": Random(),
        "linalg": _module("cupy.linalg", {}, HostNamespace, np.linalg),
    }, HostNamespace, np)
    driver = _module("cupy_backends.cuda.api.driver", {name: getattr(cuda.driver, name) for name in dir(cuda.Driver)
                                                       if not name.startswith("_")})
    api = _module("cupy_backends.cuda.api", {"driver": driver, "__path__": []})
    backends_cuda = _module("cupy_backends.cuda", {"api": api, "__path__": []})
    scipy_module = _module("cupyx.scipy", {"special": special, "__path__": []})
    return {
        "cupy": cupy, "cupy.cuda": cuda_module, "cupy.cuda.runtime": runtime, "cupy.cuda.function": function,
        "cupy.cuda.nvrtc": nvrtc,
        "cupy.random": cupy.random, "cupy.linalg": cupy.linalg,
        "cupyx": _module("cupyx", {"scipy": scipy_module, "__path__": []}), "cupyx.scipy": scipy_module,
        "cupyx.scipy.special": special,
        "cupy_backends": _module("cupy_backends", {"cuda": backends_cuda, "__path__": []}),
        "cupy_backends.cuda": backends_cuda, "cupy_backends.cuda.api": api, "cupy_backends.cuda.api.driver": driver,
    }


def install() -> types.ModuleType:
    """Put the stand-in's modules in ``sys.modules``; returns its ``cupy``. Refuses when CuPy (the real one) is
    imported already: modules holding it would run real CuPy beside the stand-in."""
    modules = build()
    imported = sorted(name for name in modules if name in sys.modules)
    if imported:
        raise RuntimeError(f"the CuPy stand-in must be installed before CuPy is imported, but {imported} are "
                           "imported already")
    sys.modules.update(modules)
    return modules["cupy"]
