"""The kernel kinds fusec has, in one table: adding a kind is its module, its template and a line here.

Every region kind (:data:`fusec.ir.region.REGION_KINDS`) has the kernel kind of the same name, whose heuristics
choose its schedule (which may be another kind's: :meth:`fusec.kinds.kind.KernelKind.prefers`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from fusec.ir.region import REGION_KINDS
from fusec.kinds import cols, matmul, pointwise, reduce_all, rows, scan
from fusec.kinds.kind import KernelKind
from fusec.schedule.base import ForcedSchedule, Schedule, ScheduleError, ScheduleRequest, parse_schedule_text

KINDS: dict[str, KernelKind] = {k.name: k for k in (pointwise.KIND, reduce_all.KIND, rows.KIND, cols.KIND, scan.KIND,
                                                          matmul.KIND)}
assert set(REGION_KINDS) <= set(KINDS), "every region kind needs the kernel kind of its name"


def schedule_types() -> Mapping[str, type[Schedule]]:
    """Each kind's schedule class, by the kind's name."""
    return {name: k.schedule_type for name, k in KINDS.items()}


def kind_of(schedule: Schedule | ScheduleRequest) -> KernelKind:
    """The kind ``schedule`` (or a request for one) belongs to."""
    return KINDS[schedule.kind]


def parse_schedule(text: str) -> ScheduleRequest:
    """``rows:block_regs,threads=256,elems=32`` -> a :class:`ScheduleRequest` (raises :class:`ScheduleError`
    naming what is wrong)."""
    return parse_schedule_text(text, schedule_types())


def as_forced(schedule: ForcedSchedule) -> Schedule | ScheduleRequest:
    """A forced schedule as given: a whole :class:`Schedule`, or a request (its text parsed)."""
    if isinstance(schedule, (Schedule, ScheduleRequest)):
        return schedule
    if isinstance(schedule, str):
        return parse_schedule(schedule)
    raise ScheduleError(f"a schedule is a Schedule or its text (such as 'rows:warp'), not {type(schedule).__name__}")


@contextlib.contextmanager
def registered(kind: KernelKind) -> Iterator[KernelKind]:
    """``with registered(kind):`` adds ``kind`` to :data:`KINDS` for the block (a test's own kind)."""
    if kind.name in KINDS:
        raise ValueError(f"a kernel kind {kind.name!r} is already registered")
    KINDS[kind.name] = kind
    try:
        yield kind
    finally:
        del KINDS[kind.name]


__all__ = ["KINDS", "as_forced", "kind_of", "parse_schedule", "registered", "schedule_types"]
