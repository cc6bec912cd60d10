"""What a kernel kind is: the one protocol every kind's module implements (:class:`KernelKind`).

A kind brings, in its own module: its schedule class (a frozen :class:`fusec.schedule.base.Schedule`), how the
heuristics choose its schedule for a region (:meth:`KernelKind.defaults`) and complete a forced one
(:meth:`KernelKind.complete`), whether a schedule fits a region (:meth:`KernelKind.check_fields`), what the
autotuner times beside the heuristics' choice (:meth:`KernelKind.proposals`), how a region and a schedule lower to a
:class:`fusec.codegen.spec.KernelSpec` (:meth:`KernelKind.lower`) and the template that renders it
(:attr:`KernelKind.template`). A kind whose kernel is a library's function (a GEMM) sets
:attr:`KernelKind.generated` false and returns the call from :meth:`KernelKind.library` instead of lowering.
:mod:`fusec.kinds.registry` lists the kinds; :mod:`fusec.kinds.select` and :mod:`fusec.kinds.pipeline` are the
drivers that call them, and nothing else dispatches on a kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NoReturn

from fusec.codegen.kernel import LibraryCall
from fusec.codegen.spec import KernelSpec
from fusec.ir.graph import Node
from fusec.ir.region import Region
from fusec.schedule.base import Schedule
from fusec.schedule.contract import layout_problem
from fusec.schedule.device import DeviceProperties
from fusec.schedule.layout import ArrayLayout
from fusec.schedule.nest import LoopNest

Refuse = Callable[[str], NoReturn]  # raises ScheduleError("schedule ... does not fit kernel ...: <why>")


class KernelKind:
    """One kernel kind. Subclasses set the class attributes and implement :meth:`defaults` and :meth:`lower`; the
    other methods have defaults that fit a kind without options."""

    name: ClassVar[str]  # the kind's word in schedule text (``rows`` in ``rows:warp``), its schedule class's kind
    schedule_type: ClassVar[type[Schedule]]
    template: ClassVar[str]  # the Jinja template under fusec/templates/ that renders its KernelSpec
    runs: ClassVar[tuple[str, ...]]  # the region kinds (fusec.ir.region.REGION_KINDS) its schedules run
    one_pass: ClassVar[bool] = False  # whether its schedules may compute variances and softmax denominators in one pass
    generated: ClassVar[bool] = True  # its kernels are generated CUDA; False: a library's call (:meth:`library`)

    def nest(self, region: Region, layouts: Mapping[Node, ArrayLayout]) -> LoopNest:
        """The loop nest of ``region`` (a region of this kind) over ``layouts``."""
        return LoopNest(region, layouts)

    def prefers(self, nest: LoopNest, device: DeviceProperties) -> str:
        """The kind whose schedule the heuristics give ``nest``'s region (a region of this kind): this one, unless
        another kind runs it better (rows regions strided in memory run as cols)."""
        return self.name

    def defaults(self, nest: LoopNest, device: DeviceProperties, variant: str | None) -> Schedule:
        """The heuristics' schedule of this kind for ``nest`` on ``device``, or (``variant``) its best of that
        variant. May not fit the region (a forced variant): :meth:`check` says why."""
        raise NotImplementedError

    def complete(self, nest: LoopNest, target: LoopNest, given: Mapping[str, Any], defaults: dict[str, Any]) -> None:
        """Adjust ``defaults`` (the heuristics' fields for a forced request's variant over ``target``, the nest the
        kernel computes) to the fields the request ``given`` sets: a field that depends on another one given."""

    def check(self, nest: LoopNest, schedule: Schedule, device: DeviceProperties, refuse: Refuse) -> None:
        """Refuse ``schedule`` (of this kind) where it cannot run ``nest``'s region: its one-pass flag, its block
        size, its own fields (:meth:`check_fields`) and the alignment of every vector access it makes (what the
        launch contract rests on)."""
        if getattr(schedule, "one_pass", None):
            if not nest.one_pass_candidates:
                refuse("one_pass=1 computes variances and softmax denominators in one pass, and this kernel has none")
            nest = nest.with_one_pass()
        if schedule.threads > device.max_threads_per_block or schedule.threads < 1:
            refuse(f"{schedule.threads} threads per block (1..{device.max_threads_per_block})")
        self.check_fields(nest, schedule, device, refuse)
        problem = layout_problem(nest, schedule)
        if problem is not None:
            refuse(problem)

    def check_fields(self, nest: LoopNest, schedule: Any, device: DeviceProperties, refuse: Refuse) -> None:
        """Refuse ``schedule`` where one of its own fields does not fit ``nest`` (the nest it computes)."""

    def proposals(self, nest: LoopNest, base: Any) -> list[str]:
        """Schedule lines worth timing beside ``base``, the heuristics' schedule of ``nest`` (partial lines: what
        they leave out is the heuristics' for their variant)."""
        return []

    def lower(self, nest: LoopNest, schedule: Any, name: str | None = None) -> KernelSpec:
        """The :class:`KernelSpec` of ``nest``'s region under ``schedule`` (checked against it); the kernel is
        called ``<name>_<kind>_<ops...>`` (``name``: the region's by default)."""
        raise NotImplementedError

    def library(self, nest: Any, schedule: Any, name: str | None = None) -> LibraryCall | None:
        """The library call computing ``nest``'s region under ``schedule`` (a kind that is not :attr:`generated`),
        named ``<name>_<kind>``; None for a kind whose kernels are generated CUDA (:meth:`lower`)."""
        return None


__all__ = ["KernelKind", "Refuse"]
