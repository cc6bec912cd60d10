"""``explain(..., run=True)``: run a plan on the GPU and time it with CUDA events.

:func:`measure` launches each kernel of a plan alone (through the runtime's launcher, so with the
same compiled kernel and launch a call uses), then the whole fused call, then the unfused reference
(the NumPy reference interpreter over CuPy: one CuPy call per op), and reports medians. Nothing here
imports CuPy until it is called; without a usable GPU :func:`require_gpu` raises a
:class:`fusec.FusecError` saying why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.ir import dtypes
from fusec.ir.arrayspec import ArraySpec
from fusec.ir.graph import Node
from fusec.ir.interpret import to_xp
from fusec.kinds import ForcedSchedules
from fusec.runtime.gpu import require_gpu, time_ms
from fusec.runtime.plan import Plan

# --- measured times -----------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelTime:
    """One kernel's measured time: the median over ``Timings.reps`` launches, and the launch it made."""

    name: str
    ms: float
    bytes_moved: int
    grid: int
    block: tuple[int, ...]

    @property
    def gb_per_s(self) -> float:
        """Bytes the kernel must move (its reads and writes, once each) per second, in 10^9 B/s."""
        return self.bytes_moved / self.ms / 1e6 if self.ms > 0 else math.inf


@dataclass(frozen=True)
class Timings:
    """What ``explain(..., run=True)`` measured on the GPU (CUDA events; times in milliseconds).

    ``kernels``: each kernel launched alone; ``fused_ms``: one fused call (every kernel, with the
    dispatch); ``unfused_ms``: the same function run as one CuPy call per op (the reference
    interpreter on the GPU), which moves ``unfused_bytes``.
    """

    device: str
    reps: int
    kernels: tuple[KernelTime, ...]
    fused_ms: float
    fused_bytes: int
    unfused_ms: float
    unfused_bytes: int


# --- measuring ------------------------------------------------------------------------


def to_device(value: Any, cupy: Any, seed: int = 0) -> Any:
    """``value`` as a CuPy array for ``run=True``: an :class:`ArraySpec` becomes random data of its shape
    and dtype (C-contiguous; its ``strides`` are not reproduced), a NumPy array is copied to the GPU,
    anything else (CuPy arrays, Python scalars) is returned as it is."""
    if isinstance(value, ArraySpec):
        rng = np.random.default_rng(seed)
        dt = np.dtype(value.dtype)
        if dtypes.kind(dt) == "f":
            host = rng.standard_normal(value.shape).astype(dt)
        elif dt.kind == "b":
            host = rng.random(value.shape) < 0.5
        elif dt.kind == "u":
            host = rng.integers(0, 100, value.shape).astype(dt)
        else:
            host = rng.integers(-100, 100, value.shape).astype(dt)
        return to_xp(cupy, host)
    if isinstance(value, np.ndarray):
        return cupy.asarray(value)
    return value


def measure(plan: Plan, arrays: Sequence[Any], reps: int = 20, schedules: ForcedSchedules | None = None
            ) -> Timings:
    """Time ``plan`` on CuPy ``arrays`` (one per graph input): each kernel alone, the whole fused call,
    and the unfused reference (one CuPy call per op). Compiles first; every time is a median of ``reps``.
    ``schedules`` forces kernels' schedules by name."""
    cupy = require_gpu()
    from fusec.ir.interpret import interpret
    from fusec.runtime.executable import Executable
    from fusec.runtime.launch import default_launcher
    from fusec.support.progress import progress

    launcher = default_launcher()
    memory: dict[Node, Any] = dict(zip(plan.graph.inputs, arrays))
    kernels = []
    device = cupy.cuda.runtime.getDevice()
    for k in progress(plan.kernels, "compile and time", unit="kernel"):
        schedule = (schedules or {}).get(k.name)
        recipe = launcher.cached_recipe(k.region, [memory[n] for n in k.inputs], device, schedule=schedule)
        launch = (lambda k=k, schedule=schedule: launcher.run_region(k.region, memory, schedule=schedule))
        ms = time_ms(launch, cupy, reps)
        memory.update(launch())
        kernels.append(KernelTime(k.label, ms, k.bytes_moved, recipe.grid, tuple(recipe.block)))
    executable = Executable(plan, schedules=schedules, launcher=launcher)
    runner = executable.runner(list(arrays))
    fused = (lambda: runner(arrays)) if runner is not None else (lambda: executable(list(arrays)))
    fused_ms = time_ms(fused, cupy, reps)
    unfused_ms = time_ms(lambda: interpret(plan.traced, list(arrays), xp=cupy), cupy, reps)
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return Timings(device, reps, tuple(kernels), fused_ms, plan.bytes_moved, unfused_ms, plan.bytes_moved_unfused)


__all__ = ["KernelTime", "Timings", "measure", "require_gpu", "time_ms", "to_device"]
