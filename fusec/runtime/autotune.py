"""Autotuning: time a region's candidate schedules on the first call and keep the winner on disk.

With autotuning on (``FUSEC_AUTOTUNE=1`` in the environment, or ``fusec.fuse(f, autotune=True)``; an
argument wins over the environment), the first launch of a kernel over new argument layouts does not just
take the heuristics' schedule: it looks the kernel up in the tune cache (:mod:`fusec.runtime.tune_cache`, keyed by
device name, region and layouts) and, on a miss, times the candidates (:func:`fusec.kinds.candidates`: the
heuristics' schedule first, then a few alternatives) on the GPU, keeps the fastest whose
results agree with the heuristics' schedule's, and stores it. A second process finds it there and times
nothing. Forced schedules are never tuned, nor kernels writing into ``out=`` arrays, nor empty ones.

The default is off: timing costs a compile and a few launches per candidate on the first call (seconds for
a program of several kernels), candidates may sum in a different order (results within the reduction
tolerance, not bit for bit, of the heuristics' kernel), and the heuristics alone are what fusec's
benchmark targets hold for.

The choice itself (:func:`pick`, :func:`tuned_schedule`) takes the candidate runner and the timer as
functions, so it is tested without a GPU; :class:`fusec.runtime.launch.KernelLauncher` supplies CUDA ones
(median of CUDA-event times). :data:`COUNTERS` counts tunings and tune-cache hits.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import fusec.runtime.tune_cache as tune_cache
from fusec.ir import dtypes
from fusec.ir.graph import Node
from fusec.ir.region import Region
from fusec.kinds import analyze, candidates, generate, is_library, resolve
from fusec.schedule import ArrayLayout, DeviceProperties, Schedule, ScheduleError
from fusec.schedule.nest import is_array

if TYPE_CHECKING:
    from fusec.runtime.plan import Plan

ENV = "FUSEC_AUTOTUNE"
TUNE_REPS = 20  # timed launches per candidate (the median is kept)
_log = logging.getLogger("fusec.schedule")


def enabled(flag: bool | None = None) -> bool:
    """Whether to autotune: ``flag`` when given, else ``$FUSEC_AUTOTUNE`` (``1``, ``true``, ``yes``, ``on``)."""
    if flag is not None:
        return bool(flag)
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass
class TuneCounters:
    """``runs``: kernels tuned (candidates timed); ``cache_hits``: kernels whose schedule came from the tune
    cache, nothing timed; ``candidates_timed``: candidate schedules timed in all."""

    runs: int = 0
    cache_hits: int = 0
    candidates_timed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"runs": self.runs, "cache_hits": self.cache_hits, "candidates_timed": self.candidates_timed}


COUNTERS = TuneCounters()
_LOCK = threading.Lock()


def counters() -> dict[str, int]:
    """This process's autotuning counters (see :class:`TuneCounters`)."""
    return COUNTERS.as_dict()


def reset_counters() -> None:
    with _LOCK:
        COUNTERS.runs = COUNTERS.cache_hits = COUNTERS.candidates_timed = 0


@dataclass(frozen=True)
class Trial:
    """One candidate: its median time in ms, or None and why it was refused."""

    schedule: Schedule
    ms: float | None
    why: str = ""


@dataclass(frozen=True)
class Tuned:
    """The outcome for one kernel: the schedule, whether it came from the tune cache, the trials timed now."""

    schedule: Schedule
    from_cache: bool
    trials: tuple[Trial, ...] = ()
    key: str = ""


Runner = Callable[[Schedule], Sequence[Any]]  # runs a kernel of this schedule, returns its outputs
Timer = Callable[[Schedule], float]  # the median time of a kernel of this schedule, in ms


def _host(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


_RTOL = {2: 5e-3, 4: 1e-4, 8: 1e-9}  # by float itemsize: another summation order's error, with room


def results_agree(got: Sequence[Any], want: Sequence[Any]) -> bool:
    """Whether a candidate's outputs are the reference's: same shapes and dtypes; integers and bools equal;
    floats with NaN and infinities at the same places and finite values within a relative tolerance of the
    output's largest magnitude (another summation order)."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        g, w = _host(g), _host(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return False
        if dtypes.kind(g.dtype) not in "fc":
            if not np.array_equal(g, w):
                return False
            continue
        finite = np.isfinite(w)
        if not np.array_equal(np.isnan(g), np.isnan(w)) or not np.array_equal(g[np.isinf(w)], w[np.isinf(w)]):
            return False
        if not np.isfinite(g[finite]).all():
            return False
        wf, gf = w[finite].astype(np.float64), g[finite].astype(np.float64)
        scale = float(np.abs(wf).max()) if wf.size else 0.0
        if wf.size and np.abs(gf - wf).max() > _RTOL.get(g.dtype.itemsize, 1e-4) * max(scale, 1e-30):
            return False
    return True


def pick(schedules: Sequence[Schedule], run: Runner, timer: Timer,
         same: Callable[[Sequence[Any], Sequence[Any]], bool] = results_agree) -> tuple[Schedule, tuple[Trial, ...]]:
    """The fastest of ``schedules`` (the first, the heuristics', is the reference) whose outputs agree with
    the first's, and every trial. A candidate that fails (does not compile, does not launch) or whose
    results differ is refused, never chosen; a tie goes to the earlier candidate."""
    reference = run(schedules[0])
    trials = [Trial(schedules[0], timer(schedules[0]))]
    for schedule in schedules[1:]:
        try:
            outputs = run(schedule)
        except Exception as exc:  # a candidate that does not build or launch is not a winner
            trials.append(Trial(schedule, None, f"failed ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
                                if str(exc) else f"failed ({type(exc).__name__})"))
            continue
        if not same(outputs, reference):
            trials.append(Trial(schedule, None, "results differ from the heuristics' schedule's"))
            continue
        trials.append(Trial(schedule, timer(schedule)))
    best = min((t for t in trials if t.ms is not None), key=lambda t: t.ms)
    return best.schedule, tuple(trials)


def input_layouts(region: Region, layouts: Mapping[Node, ArrayLayout]) -> list[tuple[Any, ...]]:
    """Each array input's (shape, strides, alignment): the layouts part of the tune key."""
    out = []
    for n in region.inputs:
        if is_array(n):
            layout = layouts.get(n) or ArrayLayout.c_contiguous(n.shape)
            out.append((tuple(n.shape), tuple(layout.strides), layout.align))
    return out


def kernel_key(region: Region, layouts: Mapping[Node, ArrayLayout], device: DeviceProperties) -> str:
    """The tune-cache key of ``region`` over ``layouts`` on ``device``
    (see :func:`fusec.runtime.tune_cache.tune_key`)."""
    heuristic = generate(region, layouts, None, device=device)
    return tune_cache.tune_key(device.name, heuristic.source, input_layouts(region, layouts))


def lookup(region: Region, layouts: Mapping[Node, ArrayLayout], device: DeviceProperties,
           key: str | None = None) -> Schedule | None:
    """The schedule the tune cache holds for ``region`` over ``layouts`` on ``device`` (checked against the
    region), or None (always for a library's call, a matmul's GEMM: nothing of fusec's to tune)."""
    if is_library(region):
        return None
    entry = tune_cache.load(key or kernel_key(region, layouts, device))
    if entry is None:
        return None
    try:
        return resolve(analyze(region, layouts), entry.schedule, device)
    except ScheduleError:  # written by another fusec whose schedules differ: tune again
        return None


def tune_device() -> DeviceProperties:
    """The device the tune cache is consulted for outside a launch (``explain``, ``cuda_source``): the current
    GPU's, else the H200 fusec plans for without one."""
    from fusec.runtime.gpu import cupy_module, gpu_status
    from fusec.schedule import H200
    from fusec.schedule.device import device_properties

    if not gpu_status()[0]:
        return H200
    return device_properties(cupy_module().cuda.runtime.getDevice())


def cached_schedules(plan: Plan, values: Mapping[Node, Any], device: DeviceProperties) -> dict[str, Schedule]:
    """By kernel name, the schedules the tune cache holds for ``plan``'s kernels over its graph inputs laid out
    as ``values`` (arrays or :class:`fusec.ArraySpec`) say, intermediates fresh C-contiguous arrays."""
    from fusec.schedule import layouts_of

    out = {}
    for kernel in plan.kernels:
        schedule = lookup(kernel.region, layouts_of(kernel.inputs, values), device)
        if schedule is not None:
            out[kernel.name] = schedule
    return out


def tuned_schedule(region: Region, layouts: Mapping[Node, ArrayLayout], device: DeviceProperties,
                   run: Runner, timer: Timer) -> Tuned:
    """``region``'s schedule over ``layouts`` on ``device``: from the tune cache, or the winner of timing its
    candidates with ``run`` and ``timer`` (then stored in the cache)."""
    key = kernel_key(region, layouts, device)
    cached = lookup(region, layouts, device, key)
    if cached is not None:
        with _LOCK:
            COUNTERS.cache_hits += 1
        _log.info("%s: schedule %s from the tune cache", region.name, cached)
        return Tuned(cached, True, (), key)
    schedules = candidates(analyze(region, layouts), device)
    winner, trials = pick(schedules, run, timer)
    with _LOCK:
        COUNTERS.runs += 1
        COUNTERS.candidates_timed += sum(t.ms is not None for t in trials)
    tune_cache.store(tune_cache.TuneEntry(key, winner.text(), device.name,
                                          {t.schedule.text(): t.ms for t in trials}))
    _log.info("%s: autotuned schedule %s (%s)", region.name, winner,
              ", ".join(f"{t.schedule}: {f'{t.ms:.4f} ms' if t.ms is not None else t.why}" for t in trials))
    return Tuned(winner, False, trials, key)


__all__ = ["COUNTERS", "ENV", "Trial", "TuneCounters", "Tuned", "cached_schedules", "counters", "enabled", "kernel_key",
           "lookup", "pick", "reset_counters", "results_agree", "tune_device", "tuned_schedule"]
