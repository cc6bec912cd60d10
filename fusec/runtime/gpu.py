"""Whether a CUDA GPU is usable, and CuPy when it is: the one place fusec asks.

fusec imports without CuPy (planning, ``explain`` and ``cuda_source`` need no GPU); what runs on the GPU
gets CuPy from :func:`cupy_module`, and what cannot run without one calls :func:`require_gpu`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from fusec.support.errors import FusecError


def cupy_module() -> Any:
    """The ``cupy`` module (imported on first use)."""
    import cupy

    return cupy


def gpu_status() -> tuple[bool, str]:
    """Whether CuPy imports and sees a CUDA device, and if not, why (never raises)."""
    try:
        import cupy
    except ImportError:
        return False, ("CuPy is not installed: pip install 'fusec[cuda13]' (CUDA 13 driver) or 'fusec[cuda12]' "
                       "(CUDA 12 driver)")
    except Exception as exc:  # a broken CUDA install
        return False, f"CuPy does not import ({type(exc).__name__})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, a driver too old for this CuPy, ...
        return False, _why_no_device(cupy, exc)
    return (count > 0), ("" if count > 0 else "CuPy sees no CUDA device")


_INSUFFICIENT_DRIVER = 35  # cudaErrorInsufficientDriver: also what the runtime says when there is no driver


def _why_no_device(cupy: Any, exc: Exception) -> str:
    """Why CuPy's device count failed with ``exc``, in words: the CUDA runtime reports a missing driver as
    "CUDA driver version is insufficient", so the driver's version (0 when there is none) tells the two apart."""
    try:
        driver, runtime = cupy.cuda.runtime.driverGetVersion(), cupy.cuda.runtime.runtimeGetVersion()
    except Exception:
        driver = runtime = None
    if driver == 0:
        return "no NVIDIA GPU driver found: the CUDA driver library, libcuda, is not installed"
    if getattr(exc, "status", None) == _INSUFFICIENT_DRIVER and driver and runtime:
        return (f"the NVIDIA driver supports CUDA {_version(driver)}, older than this CuPy's CUDA "
                f"{_version(runtime)}: update the driver, or install the fusec extra of its CUDA version "
                "(fusec[cuda12] for a CUDA 12 driver)")
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}".rstrip(": ")


def _version(cuda: int) -> str:
    """A CUDA version number as CUDA writes it (12040 -> "12.4")."""
    return f"{cuda // 1000}.{cuda % 1000 // 10}"


def require_gpu(what: str = "explain(..., run=True)", hint: str = "leave run=False to see the plan without a GPU"
                ) -> Any:
    """CuPy, when it imports and sees a CUDA device; otherwise a :class:`FusecError` saying why
    (``what`` names what needs the GPU, ``hint`` what to do instead)."""
    usable, why = gpu_status()
    if not usable:
        raise FusecError(f"{what} needs a CUDA GPU with CuPy, and none is usable ({why})", loc="", hint=hint)
    return cupy_module()


def time_ms(fn: Callable[[], Any], cupy: Any, reps: int, warmup: int = 3) -> float:
    """Median over ``reps`` calls of ``fn`` of the GPU time between CUDA events around each call."""
    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return statistics.median(times)
