"""A kernel kind added in one file plus its template (``naive.cu.j2`` beside it): what a new kind takes.

``naive`` runs pointwise regions the simplest way there is: a grid-stride loop, one element per thread per step,
every array addressed through its strides (no vectors, no tiles). The heuristics never choose it (the pointwise
kind's do not name it); a forced schedule ``naive:strided`` or the autotuner's candidates (it proposes nothing)
reach it. Registered for a test with ``fusec.kinds.registered(KIND)``; fusec's own kinds are listed in
``fusec/kinds/registry.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fusec.codegen.lower import launch_policy, lower_loops
from fusec.codegen.spec import KernelSpec, LaunchPolicy, Phase
from fusec.ir.region import POINTWISE
from fusec.kinds.kind import KernelKind
from fusec.schedule.base import Schedule
from fusec.schedule.device import DeviceProperties
from fusec.schedule.nest import LoopNest


@dataclass(frozen=True)
class NaiveSchedule(Schedule):
    """One thread per element, strided offsets: nothing to choose but the one variant."""

    kind: ClassVar[str] = "naive"
    variants: ClassVar[tuple[str, ...]] = ("strided",)
    variant_field: ClassVar[str] = "loop"
    loop: str = "strided"



class NaiveKind(KernelKind):
    name = "naive"
    schedule_type = NaiveSchedule
    template = str(Path(__file__).with_name("naive.cu.j2"))
    runs = (POINTWISE,)

    def defaults(self, nest: LoopNest, device: DeviceProperties, variant: str | None) -> NaiveSchedule:
        return NaiveSchedule()

    def lower(self, nest: LoopNest, schedule: NaiveSchedule, name: str | None = None) -> KernelSpec:
        def launch(vec: int, phases: tuple[Phase, ...]) -> LaunchPolicy:
            return launch_policy(schedule, nest.n_loop, schedule.block[0])

        return lower_loops(nest, schedule, name, template=self.template, launch=launch, flat=True)


KIND = NaiveKind()
