"""The reduce-all kind: regions that reduce every axis to scalars, in one launch (``templates/reduce_all.cu.j2``).

Each block folds a grid-stride slice of the elements (a flat loop, in vectors where the arrays allow) into a
partial in the workspace; the last block to arrive, or every block after a grid barrier, combines the partials in
a fixed order (:class:`ReduceAllSchedule`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from fusec.codegen.lower import launch_policy, lower_loops, phase_partials
from fusec.codegen.spec import KernelSpec, LaunchPolicy, Phase
from fusec.ir.region import REDUCE_ALL
from fusec.kinds.kind import KernelKind, Refuse
from fusec.schedule.base import Schedule
from fusec.schedule.contract import VectorAccess
from fusec.schedule.device import DeviceProperties
from fusec.schedule.heuristics import check_flat_loop, flat_loop
from fusec.schedule.nest import LoopNest


@dataclass(frozen=True)
class ReduceAllSchedule(Schedule):
    """Everything reduces to scalars in one launch: each block folds a grid-stride slice (``loop`` and
    ``vec`` as for pointwise) into a partial in the workspace. ``finish``: ``last_block`` (the last block
    to arrive combines the partials; one phase, scalar outputs only) or ``grid_barrier`` (every block
    waits at a grid barrier and combines the partials in the same order, for several phases or outputs
    over the elements). The grid is the resident capacity at most. ``one_pass``: see :class:`RowSchedule`."""

    kind: ClassVar[str] = REDUCE_ALL
    variant_field: ClassVar[str] = "finish"
    variants: ClassVar[tuple[str, ...]] = ("last_block", "grid_barrier")
    keys: ClassVar[dict[str, str]] = {"loop": "loop", "vec": "vec", "one_pass": "one_pass"}
    quiet: ClassVar[tuple[str, ...]] = ("one_pass",)
    finish: str = "grid_barrier"
    loop: str = "strided"
    vec: int = 1
    one_pass: bool | None = None


    @property
    def persistent(self) -> bool:
        return True

    @property
    def cooperative(self) -> bool:
        return self.finish == "grid_barrier"

    @property
    def workspace(self) -> bool:
        return True

    def scalar(self) -> Schedule:
        return replace(self, loop="contiguous", vec=1) if self.loop == "vector" else self

    def vector_accesses(self, nest: LoopNest) -> list[VectorAccess]:
        """``loop=vector``: every array a phase reads, ``vec`` elements of the flat index at a time."""
        if self.vec <= 1 or self.loop != "vector":
            return []
        loop_axis = nest.loop_idx[0] if len(nest.loop_idx) == 1 else None
        out: list[VectorAccess] = []
        seen: set[str] = set()
        for ph in nest.phases:
            for info in nest.split(ph.refs)[2]:
                if info.pointer is not None and info.var not in seen:
                    seen.add(info.var)
                    out.append(VectorAccess(info, self.vec, loop_axis))
        return out


class ReduceAllKind(KernelKind):
    name = REDUCE_ALL
    schedule_type = ReduceAllSchedule
    template = "reduce_all.cu.j2"
    runs = (REDUCE_ALL,)
    one_pass = True

    def defaults(self, nest: LoopNest, device: DeviceProperties, variant: str | None) -> ReduceAllSchedule:
        finish = "grid_barrier" if (nest.n_phases > 1 or nest.full_outputs) else "last_block"
        return ReduceAllSchedule(variant or finish, *flat_loop(nest, None))

    def complete(self, nest: LoopNest, target: LoopNest, given: Any, defaults: dict[str, Any]) -> None:
        if "loop" in given and "vec" not in given:  # the loop's own best width
            defaults["vec"] = flat_loop(target, given["loop"])[1]

    def check_fields(self, nest: LoopNest, schedule: ReduceAllSchedule, device: DeviceProperties,
                     refuse: Refuse) -> None:
        check_flat_loop(nest, schedule.loop, schedule.vec, refuse)
        if schedule.finish == "last_block" and (nest.n_phases > 1 or nest.full_outputs):
            refuse("last_block combines one phase into scalar outputs; this kernel has "
                   f"{nest.n_phases} phase(s) and {len(nest.full_outputs)} output(s) over the elements: "
                   "use grid_barrier")

    def proposals(self, nest: LoopNest, base: ReduceAllSchedule) -> list[str]:
        """The vector width, the finish (last block vs grid barrier)."""
        out: list[str] = []
        if base.loop == "vector":
            out += [f"reduce-all:{base.finish},vec={v}" for v in (base.vec // 2,) if v >= 2]
        out.append("reduce-all:grid_barrier" if base.finish == "last_block" else "reduce-all:last_block")
        return out

    def lower(self, nest: LoopNest, schedule: ReduceAllSchedule, name: str | None = None) -> KernelSpec:
        def launch(vec: int, phases: tuple[Phase, ...]) -> LaunchPolicy:
            return launch_policy(schedule, -(-nest.n_loop // vec), schedule.block[0], phase_partials(schedule, phases))

        return lower_loops(nest, schedule, name, template=self.template, launch=launch, flat=True)


KIND = ReduceAllKind()

__all__ = ["KIND", "ReduceAllKind", "ReduceAllSchedule"]
