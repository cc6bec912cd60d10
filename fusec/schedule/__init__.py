"""The schedule layer: how each region runs on the GPU, decided as a plain value between fusion and CUDA.

- :mod:`fusec.schedule.layout`: array layouts, and the one helper turning arguments into layouts;
- :mod:`fusec.schedule.nest`: a region over its argument layouts (scopes, accesses, collapsed axes);
- :mod:`fusec.schedule.base`: what every kind's schedule has, their text form, the request a user writes;
- :mod:`fusec.schedule.contract`: launch contracts, what a kernel needs of the arrays it is launched on;
- :mod:`fusec.schedule.device`: the device properties the heuristics read;
- :mod:`fusec.schedule.heuristics`: heuristic helpers the kinds share (flat loops, vector widths, one pass);
- :mod:`fusec.schedule.one_pass`: which statistics can take one pass.

Each kernel kind's own schedule class and heuristics are in :mod:`fusec.kinds`, which also chooses, completes and
checks schedules. This layer imports the IR and nothing above it.
"""

from fusec.schedule.base import ForcedSchedule, Schedule, ScheduleError, ScheduleRequest
from fusec.schedule.device import H200, DeviceProperties
from fusec.schedule.layout import ArrayLayout, alignment, layout_of, layouts_of
from fusec.schedule.nest import LoopNest

__all__ = [
    "H200", "ArrayLayout", "DeviceProperties", "ForcedSchedule", "LoopNest", "Schedule", "ScheduleError",
    "ScheduleRequest", "alignment", "layout_of", "layouts_of",
]
