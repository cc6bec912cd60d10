"""The one way a region becomes a kernel: ``generate(region, layouts, schedule)``.

It analyses the region over its argument layouts (:func:`fusec.kinds.analyze`), takes the heuristics'
schedule or completes and checks a forced one (:func:`fusec.kinds.resolve`), lowers the pair to a
:class:`KernelSpec` with the schedule's kind (:meth:`fusec.kinds.kind.KernelKind.lower`), states its launch contract
and renders its CUDA source; a kind whose kernel is a library's function gives its call instead
(:meth:`fusec.kinds.kind.KernelKind.library`), whose source is a comment naming it. The runtime, the
``cuda_source``/``ptxas`` inspections and ``explain`` all go through it, so what they show is what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fusec.codegen.kernel import GeneratedKernel
from fusec.codegen.render import render_kernel
from fusec.ir.graph import Node
from fusec.ir.region import Region
from fusec.kinds.registry import KINDS, kind_of
from fusec.kinds.select import analyze, resolve
from fusec.schedule.base import ForcedSchedule, ScheduleError
from fusec.schedule.contract import launch_contract
from fusec.schedule.device import H200, DeviceProperties
from fusec.schedule.heuristics import nest_for
from fusec.schedule.layout import ArrayLayout, layouts_of
from fusec.support import logs

ForcedSchedules = Mapping[str, ForcedSchedule]  # region name -> Schedule, a request, or its text ("rows:warp")


def generate(region: Region, layouts: Mapping[Node, ArrayLayout] | None = None,
             schedule: ForcedSchedule | None = None, *,
             device: DeviceProperties = H200, name: str | None = None) -> GeneratedKernel:
    """``region``'s kernel over ``layouts`` (arrays left out are fresh C-contiguous ones) with ``schedule``
    (None: the heuristics'; a :class:`Schedule` or its text, possibly partial, is completed and checked,
    raising :class:`fusec.schedule.ScheduleError` when it does not fit). ``name`` renames the kernel's
    base (default: the region's name). The spec carries the kernel's launch contract (what it needs of its
    arrays' addresses and layouts), which the source names on its ``// contract:`` line."""
    nest = analyze(region, layouts)
    chosen = resolve(nest, schedule, device)
    call = kind_of(chosen).library(nest, chosen, name)
    if call is not None:  # a library's kernel: nothing to lower or render, the source names the call
        if logs.on("schedule"):
            logs.emit("schedule", "%s: %s (%s)", call.name, chosen, "forced" if schedule is not None else "heuristics")
        return GeneratedKernel(chosen, None, call.source, call)
    computed = nest_for(nest, chosen)
    spec = replace(kind_of(chosen).lower(computed, chosen, name), contract=launch_contract(computed, chosen))
    if logs.on("schedule"):
        logs.emit("schedule", "%s: %s (%s)", spec.name, chosen, "forced" if schedule is not None else "heuristics")
    return GeneratedKernel(chosen, spec, render_kernel(spec))


def is_library(region: Region) -> bool:
    """Whether ``region``'s kernel is a library's call (its kind is not generated CUDA): the runtime runs it with
    :attr:`GeneratedKernel.library` instead of launching a compiled kernel."""
    return not KINDS[region.kind].generated


def check_forced(forced: ForcedSchedules | None, names: list[str]) -> None:
    """Raise :class:`ScheduleError` when ``forced`` names a kernel that is not among ``names``."""
    unknown = sorted(set(forced or {}) - set(names))
    if unknown:
        raise ScheduleError(f"no kernel {', '.join(unknown)} to schedule: the kernels are {', '.join(names)}")


def generate_plan(plan: Any, values: Mapping[Node, Any], forced: ForcedSchedules | None = None, *,
                  device: DeviceProperties = H200) -> list[GeneratedKernel]:
    """Every kernel of ``plan`` (a :class:`fusec.runtime.plan.Plan`), its graph inputs laid out as ``values``
    (arrays or :class:`fusec.ArraySpec`) say, the intermediates between kernels fresh C-contiguous arrays;
    ``forced`` maps kernel names to schedules."""
    check_forced(forced, [k.name for k in plan.kernels])
    out = []
    for kernel in plan.kernels:
        layouts = layouts_of(kernel.inputs, values)
        out.append(generate(kernel.region, layouts, (forced or {}).get(kernel.name), device=device))
    return out


__all__ = ["ForcedSchedules", "check_forced", "generate", "generate_plan", "is_library"]
