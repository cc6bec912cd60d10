"""What fusec's caches did: counts per fused function and for the whole process.

``Fused.cache_info()`` and ``fusec.cache_info()`` return a :class:`CacheInfo`. Where work happens (a trace
in the front end, a compile in NVRTC, a disk read in the cubin cache) the code calls :func:`count`; the
count goes to the process's totals and, when the work is done for a fused function (inside
:func:`charging`), to that function's too. A new counter is one field of :class:`CacheInfo` and one
:func:`count` call where its event happens.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class CacheInfo:
    """Counts since the process started (or since the function was made).

    - ``traces``: functions traced (the first call of each signature, and every retrace);
    - ``retraces``: traces of a function after its first (each has a reason: ``FUSEC_LOG=recompile``);
    - ``shape_reuses``: a known signature re-inferred for new shapes, without tracing;
    - ``plans``: plans made (passes run, kernels formed);
    - ``kernels_compiled``: kernels compiled (NVRTC, or CuPy's compiler with ``FUSEC_COMPILER=cupy``);
    - ``disk_hits``: compiled kernels read from the disk cache instead;
    - ``autotune_runs``: kernels timed to pick a schedule.
    """

    traces: int = 0
    retraces: int = 0
    shape_reuses: int = 0
    plans: int = 0
    kernels_compiled: int = 0
    disk_hits: int = 0
    autotune_runs: int = 0

    def __str__(self) -> str:
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


NAMES = tuple(f.name for f in fields(CacheInfo))


class Counters:
    """Mutable counts behind a :class:`CacheInfo` (thread-safe)."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(NAMES, 0)
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(**self._counts)

    def clear(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(NAMES, 0)


PROCESS = Counters()
_CHARGED: contextvars.ContextVar[Counters | None] = contextvars.ContextVar("fusec_counters", default=None)


def count(name: str, n: int = 1) -> None:
    """Count ``n`` events ``name`` (a field of :class:`CacheInfo`) for the process and the function charged."""
    if name not in PROCESS._counts:
        raise KeyError(f"no counter {name!r}: the counters are {', '.join(NAMES)}")
    PROCESS.add(name, n)
    charged = _CHARGED.get()
    if charged is not None:
        charged.add(name, n)


@contextlib.contextmanager
def charging(counters: Counters) -> Iterator[None]:
    """Inside, :func:`count` also counts for ``counters`` (a fused function's)."""
    token = _CHARGED.set(counters)
    try:
        yield
    finally:
        _CHARGED.reset(token)


def cache_info() -> CacheInfo:
    """The process's counts (every fused function, and compiles made outside any)."""
    return PROCESS.info()


__all__ = ["CacheInfo", "Counters", "cache_info", "charging", "count"]
