"""Kernel kinds as plug-ins: each kind in one module, listed in one table, called by the drivers here.

A kind (:class:`fusec.kinds.kind.KernelKind`) holds its schedule class, its heuristics, its legality checks, the
candidates the autotuner times, its lowering and its template's name:

- :mod:`fusec.kinds.pointwise`: no reduction (flat vector, inner-axis vector, tiled and strided loops);
- :mod:`fusec.kinds.reduce_all`: every axis reduced, in one launch;
- :mod:`fusec.kinds.rows`: the innermost axes reduced, a row at a time (re-read, or held in registers);
- :mod:`fusec.kinds.cols`: outer axes reduced, tiles of kept indices (and rows strided in memory);
- :mod:`fusec.kinds.scan`: inclusive scans with their prologue and epilogue;
- :mod:`fusec.kinds.matmul`: a matrix product, computed by a GEMM library (a library call, no generated CUDA).

:mod:`fusec.kinds.registry` is the table (adding a kind is its module, its template and a line there);
:mod:`fusec.kinds.select` chooses, completes and checks schedules and lists candidates; :mod:`fusec.kinds.pipeline`
turns a region into a kernel. The layer sits on codegen (lowering machinery, specs, templates) and the schedule layer
(loop nests, schedules as values, launch contracts); the runtime, inspection and the frontend call it.
"""

from fusec.kinds.cols import ColSchedule
from fusec.kinds.kind import KernelKind
from fusec.kinds.matmul import MatmulSchedule
from fusec.kinds.pipeline import ForcedSchedules, check_forced, generate, generate_plan, is_library
from fusec.kinds.pointwise import PointwiseSchedule
from fusec.kinds.reduce_all import ReduceAllSchedule
from fusec.kinds.registry import KINDS, as_forced, kind_of, parse_schedule, registered
from fusec.kinds.rows import RowSchedule
from fusec.kinds.scan import ScanNest, ScanSchedule
from fusec.kinds.select import MAX_CANDIDATES, analyze, candidates, check, choose, resolve

__all__ = [
    "KINDS", "MAX_CANDIDATES", "ColSchedule", "ForcedSchedules", "KernelKind", "MatmulSchedule", "PointwiseSchedule",
    "ReduceAllSchedule", "RowSchedule", "ScanNest", "ScanSchedule", "analyze", "as_forced", "candidates", "check",
    "check_forced", "choose", "generate", "generate_plan", "is_library", "kind_of", "parse_schedule", "registered",
    "resolve",
]
