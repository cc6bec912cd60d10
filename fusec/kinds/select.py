"""Choosing a region's schedule, completing a partial one, checking a forced one, and the candidates to time.

``choose(nest, device)`` is the heuristic: the region kind's kernel kind picks the schedule fusec runs with (its
own, or another kind's that runs the region better), then the one-pass statistics and the alignment of its vector
accesses are settled the same way for every kind. ``resolve(nest, forced, device)`` is what every caller uses: the
heuristic's schedule, or the forced one completed (fields it leaves out take the heuristic's values for that
variant) and checked against the region (:class:`ScheduleError` says why one does not fit).

``candidates(nest, device)``: the few schedules worth timing for a region, the heuristics' own first. As Triton's
``Config`` lists and tinygrad's ``Opt`` lists, candidates are data: each kind proposes a short table of schedule lines
(:meth:`fusec.kinds.kind.KernelKind.proposals`), each completed and checked against the region; the ones that do not
fit are dropped, duplicates too. The heuristics' schedule is always the first candidate (the reference the others'
results are checked against, and the winner of a tie). Nothing here times anything: :mod:`fusec.runtime.autotune`
does, on a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NoReturn

from fusec.ir.graph import Node
from fusec.ir.region import Region
from fusec.kinds.registry import KINDS, as_forced, kind_of
from fusec.schedule.base import ForcedSchedule, Schedule, ScheduleError, ScheduleRequest
from fusec.schedule.contract import layout_problem
from fusec.schedule.device import H200, DeviceProperties
from fusec.schedule.heuristics import nest_for, one_pass_pays
from fusec.schedule.layout import ArrayLayout
from fusec.schedule.nest import LoopNest

MAX_CANDIDATES = 8  # schedules timed per region at most (the heuristics' included)


def analyze(region: Region, layouts: Mapping[Node, ArrayLayout] | None = None) -> LoopNest:
    """The loop nest of ``region`` over ``layouts`` (arrays missing there are fresh C-contiguous ones), as the
    region kind's kernel kind builds it (a scan region's is a :class:`fusec.kinds.scan.ScanNest`)."""
    return KINDS[region.kind].nest(region, layouts or {})


def defaults(nest: LoopNest, device: DeviceProperties, variant: str | None = None, kind: str | None = None) -> Schedule:
    """The heuristic's schedule, or (``variant`` of schedule ``kind``) its best schedule of that variant."""
    kind = kind or KINDS[nest.kind].prefers(nest, device)
    return KINDS[kind].defaults(nest, device, variant)


def choose(nest: LoopNest, device: DeviceProperties = H200) -> Schedule:
    """The schedule fusec runs ``nest``'s region with on ``device``."""
    schedule = defaults(nest, device)
    if not kind_of(schedule).generated:  # a library's call: no loops, vectors or contract of fusec's
        return schedule
    if one_pass_pays(nest, schedule):
        schedule = replace(defaults(nest.with_one_pass(), device, None, schedule.kind), one_pass=True)
    elif nest.one_pass_candidates and kind_of(schedule).one_pass:
        schedule = replace(schedule, one_pass=False)
    if layout_problem(nest_for(nest, schedule), schedule) is not None:  # (the kinds' rules should not allow it)
        schedule = schedule.scalar()
    return schedule


def resolve(nest: LoopNest, forced: ForcedSchedule | None = None,
            device: DeviceProperties = H200) -> Schedule:
    """The schedule of ``nest``'s region: the heuristic's, or ``forced`` completed and checked."""
    if forced is None:
        return choose(nest, device)
    forced = as_forced(forced)
    kind = kind_of(forced)
    if nest.kind not in kind.runs:
        raise ScheduleError(f"schedule {forced} is for a {forced.kind} kernel, but {nest.region.name} is a "
                            f"{nest.kind} kernel")
    if isinstance(forced, ScheduleRequest):
        given = dict(forced.given)
        one_pass = given.get("one_pass")
        if one_pass is None and nest.one_pass_candidates and kind.one_pass and kind.generated:
            one_pass = one_pass_pays(nest, kind.defaults(nest, device, forced.variant))
        target = nest.with_one_pass() if one_pass else nest
        fields: dict[str, Any] = dict(vars(kind.defaults(target, device, forced.variant)))
        if kind.one_pass:
            fields["one_pass"] = one_pass
        kind.complete(nest, target, given, fields)
        forced = forced.build(fields)
    check(nest, forced, device)
    return forced


def check(nest: LoopNest, schedule: Schedule, device: DeviceProperties = H200) -> None:
    """Raise :class:`ScheduleError` with the reason when ``schedule`` cannot run ``nest``'s region."""
    def refuse(why: str) -> NoReturn:
        raise ScheduleError(f"schedule {schedule} does not fit kernel {nest.region.name}: {why}")

    kind = kind_of(schedule)
    if nest.kind not in kind.runs:
        refuse(f"it is a {nest.kind} kernel")
    kind.check(nest, schedule, device, refuse)


def candidates(nest: LoopNest, device: DeviceProperties = H200, limit: int = MAX_CANDIDATES) -> tuple[Schedule, ...]:
    """The schedules to time for ``nest``'s region on ``device``: the heuristics' first, then the fitting,
    distinct proposals of its kind, at most ``limit`` in all."""
    base = choose(nest, device)
    out = [base]
    for text in kind_of(base).proposals(nest, base):
        try:
            schedule = resolve(nest, text, device)
        except ScheduleError:
            continue
        if schedule not in out:
            out.append(schedule)
        if len(out) >= limit:
            break
    return tuple(out)


__all__ = ["MAX_CANDIDATES", "analyze", "candidates", "check", "choose", "defaults", "resolve"]
