"""The one way a region becomes a kernel: ``generate(region, layouts, schedule)``.

It analyses the region over its argument layouts (:func:`fusec.schedule.analyze`), takes the heuristics'
schedule or completes and checks a forced one (:func:`fusec.schedule.resolve`), lowers the pair to a
:class:`KernelSpec` (:func:`fusec.codegen.lower.lower`) and renders its CUDA source. The runtime, the
``cuda_source``/``ptxas`` inspections and ``explain`` all go through it, so what they show is what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fusec.codegen.lower import lower
from fusec.codegen.render import render_kernel
from fusec.codegen.spec import KernelSpec
from fusec.ir.graph import Node
from fusec.ir.region import Region
from fusec.schedule import (
    H200,
    ArrayLayout,
    DeviceProperties,
    ForcedSchedule,
    Schedule,
    ScheduleError,
    analyze,
    layouts_of,
    resolve,
)
from fusec.schedule.contract import LaunchContract, launch_contract
from fusec.schedule.heuristics import nest_for
from fusec.support import logs

ForcedSchedules = Mapping[str, ForcedSchedule]  # region name -> Schedule, a request, or its text ("rows:warp")


@dataclass(frozen=True)
class GeneratedKernel:
    """A region's kernel: the schedule it runs with, its spec, and its complete CUDA source."""

    schedule: Schedule
    spec: KernelSpec
    source: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def contract(self) -> LaunchContract:
        """What the kernel needs of the arrays it is launched on (:mod:`fusec.schedule.contract`)."""
        assert self.spec.contract is not None
        return self.spec.contract

    def passes(self) -> dict[Node, int]:
        """How many times the kernel reads each input array from memory: once per loop that loads it (each
        phase of a reduction that re-reads its rows, then the epilogue), once in all where the rows sit in
        registers (read into them once), and once for what it reads per row, once per kernel, or at gathered
        positions."""
        spec = self.spec
        count = {f"in{k}": 0 for k in range(len(spec.inputs))}
        if spec.held:
            loops: list[tuple] = [spec.held]
        else:
            loops = [ph.loads for ph in spec.phases] + [spec.epilogue_loads]
        for loads in loops:
            for pointer in {_array(a.pointer) for a in loads if _array(a.pointer) in count}:
                count[pointer] += 1
        for a in (*spec.uniform_loads, *spec.row_loads):
            if _array(a.pointer) in count and count[_array(a.pointer)] == 0:
                count[_array(a.pointer)] = 1
        for pointer in spec.gathered:  # a gather reads its elements once
            count[pointer] = max(count[pointer], 1)
        return {node: count[f"in{k}"] for k, node in enumerate(spec.inputs)}

    def bytes_read(self) -> int:
        """The bytes the kernel reads from memory: each input's size times its :meth:`passes`."""
        return sum(node.nbytes * n for node, n in self.passes().items())


def _array(pointer: str | None) -> str | None:
    """The array parameter an access reads: ``in0`` for ``in0`` and for a view of it, ``in0_ld3``."""
    return pointer.partition("_")[0] if pointer is not None else None


def generate(region: Region, layouts: Mapping[Node, ArrayLayout] | None = None,
             schedule: ForcedSchedule | None = None, *, device: DeviceProperties = H200,
             name: str | None = None) -> GeneratedKernel:
    """``region``'s kernel over ``layouts`` (arrays left out are fresh C-contiguous ones) with ``schedule``
    (None: the heuristics'; a :class:`Schedule` or its text, possibly partial, is completed and checked,
    raising :class:`fusec.schedule.ScheduleError` when it does not fit). ``name`` renames the kernel's
    base (default: the region's name). The spec carries the kernel's launch contract (what it needs of its
    arrays' addresses and layouts), which the source names on its ``// contract:`` line."""
    nest = analyze(region, layouts)
    chosen = resolve(nest, schedule, device)
    computed = nest_for(nest, chosen)
    spec = replace(lower(computed, chosen, name), contract=launch_contract(computed, chosen))
    if logs.on("schedule"):
        logs.emit("schedule", "%s: %s (%s)", spec.name, chosen, "forced" if schedule is not None else "heuristics")
    return GeneratedKernel(chosen, spec, render_kernel(spec))


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
