"""Profitability: whether a legal fusion is worth doing, and what to recompute.

Legality lives in ``legality.py`` (and ``fusec/ir/region.py``); this module only answers "should it",
and holds the budgets legality enforces.
The numbers are the op table's relative costs (``OpDef.cost``) and a few budgets, each named
and explained here rather than scattered through the pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from fusec.ir.graph import Node
from fusec.ir.ops import Kind

# A producer cone at most this expensive (sum of op costs) is recomputed in each region that
# reads it instead of being written to memory and read back: one transcendental (cost 4-8) plus
# a little arithmetic costs less than a round trip through HBM at ~4 TB/s.
RECOMPUTE_BUDGET = 10

# Reductions (accumulators live in registers, each needs a cross-thread combine) per region.
MAX_REDUCTIONS = 16

# Passes over the reduced extent (phases) per row region; each extra phase re-reads the row.
MAX_PHASES = 4

# Distinct arrays one kernel may read or write (kernel parameter space and registers for
# addresses and strides).
MAX_ARRAYS = 32

# A cols kernel (a reduction over outer axes) that also writes values over its elements (batch-norm's
# normalize, x - x.mean(0), a softmax over axis 0) folds its data, waits for every block of the grid, then
# reads the data again for the epilogue. Past this many elements the data has left the L2 cache (50 MB on the
# H200) by then, and the reduction kernel followed by a pointwise kernel, with its wide vector loop, moves the
# same bytes faster than the cols epilogue does.
COLS_EPILOGUE_MAX_ELEMENTS = 1 << 22


def cone_cost(nodes: Iterable[Node]) -> int:
    return sum(n.opdef.cost for n in nodes)


def should_recompute(cone: list[Node]) -> bool:
    """Recompute ``cone`` (pointwise nodes) where it is used instead of materializing it."""
    if any(n.kind in (Kind.REDUCTION, Kind.SCAN) for n in cone):
        return False
    return cone_cost(cone) <= RECOMPUTE_BUDGET


def rules_out_recompute(part: Iterable[Node]) -> bool:
    """Whether :func:`should_recompute` refuses every cone that contains ``part`` (costs are never
    negative), so that a caller can stop collecting a cone early."""
    return not should_recompute(list(part))


def cols_epilogue_refusal(n_elements: int) -> str | None:
    """Why a cols kernel over ``n_elements`` elements should leave its outputs over the elements to a
    pointwise kernel, or None (small enough that its epilogue re-reads the data from L2)."""
    if n_elements <= COLS_EPILOGUE_MAX_ELEMENTS:
        return None
    return (f"data on chip: a reduction over outer axes re-reads its {n_elements} elements for the outputs "
            f"over them after a grid-wide wait (over {COLS_EPILOGUE_MAX_ELEMENTS}, they are no longer in L2); "
            "a pointwise kernel after it reads them faster")


def over_budget(n_reductions: int, phases: int, n_arrays: int) -> str | None:
    """Why a kernel with ``n_reductions`` reductions, ``phases`` passes over its rows and ``n_arrays``
    arrays read or written is too big, or None."""
    if n_reductions > MAX_REDUCTIONS:
        return f"register budget: {n_reductions} reductions in one kernel (at most {MAX_REDUCTIONS})"
    if phases > MAX_PHASES:
        return f"register budget: {phases} dependent reductions in sequence (at most {MAX_PHASES})"
    if n_arrays > MAX_ARRAYS:
        return f"register budget: {n_arrays} arrays read or written (at most {MAX_ARRAYS})"
    return None
