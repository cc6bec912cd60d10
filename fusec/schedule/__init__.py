"""The schedule layer: how each region runs on the GPU, decided as a plain value between fusion and CUDA.

- :mod:`fusec.schedule.layout`: array layouts, and the one helper turning arguments into layouts;
- :mod:`fusec.schedule.nest`: a region over its argument layouts (scopes, accesses, collapsed axes);
- :mod:`fusec.schedule.kinds`: the frozen schedule dataclasses, one per kernel kind, and their text form;
- :mod:`fusec.schedule.device`: the device properties the heuristics read;
- :mod:`fusec.schedule.heuristics`: choosing a schedule, completing and checking a forced one;
- :mod:`fusec.schedule.scan`: the same for scan regions (their nest, their heuristic).

It imports the IR and nothing above it: codegen (lowering, rendering) and the runtime import it.
"""

from fusec.schedule.device import H200, DeviceProperties
from fusec.schedule.heuristics import check, choose, resolve
from fusec.schedule.kinds import (
    ColSchedule,
    ForcedSchedule,
    PointwiseSchedule,
    ReduceAllSchedule,
    RowSchedule,
    ScanSchedule,
    Schedule,
    ScheduleError,
    ScheduleRequest,
    parse_schedule,
)
from fusec.schedule.layout import ArrayLayout, alignment, layout_of, layouts_of
from fusec.schedule.nest import LoopNest, analyze

__all__ = [
    "H200", "ArrayLayout", "ColSchedule", "DeviceProperties", "ForcedSchedule", "LoopNest", "PointwiseSchedule",
    "ReduceAllSchedule", "RowSchedule", "ScanSchedule", "Schedule", "ScheduleError", "ScheduleRequest", "alignment",
    "analyze", "check", "choose", "layout_of", "layouts_of", "parse_schedule", "resolve",
]
