"""fusec: a graph-level kernel-fusion compiler for NumPy/CuPy-style functions on NVIDIA GPUs.

Decorate a function written with NumPy or CuPy calls with :func:`fuse`; call it with CuPy arrays to
run it as fused CUDA kernels, with NumPy arrays to run the NumPy reference backend::

    import numpy as np
    import fusec

    @fusec.fuse
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    spec = fusec.ArraySpec((8192, 8192), "float32")
    print(softmax.explain(spec))        # IR, kernels, refusals, bytes moved: no data, no GPU needed
    print(softmax.cuda_source(spec))    # the generated CUDA C

Public names:

- :func:`fuse`: the decorator (``help(fusec.fuse)`` tells everything it takes and returns);
- :class:`Fused`: what it returns (call it; ``trace``, ``plan``, ``explain``, ``cuda_source``, ``ptxas``);
- :class:`ArraySpec`: an argument described by shape and dtype alone (``ArraySpec.parse("f32[8192,8192]")``);
- the errors: :class:`FusecError` is the base of every error fusec raises; :class:`TraceError`
  (:class:`UnsupportedError`) for what cannot be traced, :class:`FusecTypeError`,
  :class:`FusecValueError`, :class:`FusecAxisError` and :class:`FusecOverflowError` where NumPy
  raises the like (they also derive from NumPy's/Python's class), :class:`ParseError` and
  :class:`VerifyError` for IR text and graphs, :class:`ScheduleError` for a forced schedule that does
  not parse or does not fit its kernel (``fusec.fuse(f, schedules={"k0": "rows:warp"})``).

- :func:`cache_info`: what fusec's caches did in this process (``f.cache_info()`` for one function);
  :func:`set_logs` (or ``FUSEC_LOG=trace,recompile,compile,schedule,cache``) prints fusec's log records
  (:mod:`fusec.support.logs`); :class:`RecompileWarning` is warned once when a function traces again more often
  than ``FUSEC_RECOMPILE_LIMIT`` (default 8).

The command line ``fusec`` (``python -m fusec``) has ``demo``, ``explain``, ``opt`` and ``cache``.
"""

import fusec.dask as _dask  # noqa: F401  (registers Dask arrays with the frontend; imports no Dask)
from fusec.frontend import random_numbers as random
from fusec.frontend.api import Fused, fuse
from fusec.frontend.recompile import RecompileWarning
from fusec.ir.arrayspec import ArraySpec
from fusec.schedule.base import ScheduleError
from fusec.support import logs as _logs
from fusec.support.counters import CacheInfo, cache_info
from fusec.support.errors import (
    FusecAxisError,
    FusecError,
    FusecOverflowError,
    FusecTypeError,
    FusecValueError,
    ParseError,
    TraceError,
    UnsupportedError,
    VerifyError,
)
from fusec.support.logs import set_logs

_logs.configure_from_environment()

__version__ = "0.1.0"

__all__ = [
    "ArraySpec",
    "CacheInfo",
    "Fused",
    "FusecAxisError",
    "FusecError",
    "FusecOverflowError",
    "FusecTypeError",
    "FusecValueError",
    "ParseError",
    "RecompileWarning",
    "ScheduleError",
    "TraceError",
    "UnsupportedError",
    "VerifyError",
    "cache_info",
    "fuse",
    "random",
    "set_logs",
]
