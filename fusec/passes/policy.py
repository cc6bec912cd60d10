"""Profitability: whether a legal fusion is worth doing, and what to recompute.

Legality lives in ``fuse.py`` (and ``fusec/ir/region.py``); this module only answers "should it".
The numbers are the op table's relative costs (``OpDef.cost``) and a few budgets, each named
and explained here rather than scattered through the pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.ir.region import RegionSpace

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


def cone_cost(nodes: Iterable[Node]) -> int:
    return sum(n.opdef.cost for n in nodes)


def should_recompute(cone: list[Node]) -> bool:
    """Recompute ``cone`` (pointwise nodes) where it is used instead of materializing it."""
    if any(n.kind is Kind.REDUCTION for n in cone):
        return False
    return cone_cost(cone) <= RECOMPUTE_BUDGET


def over_budget(nodes: list[Node], space: RegionSpace, n_arrays: int) -> str | None:
    """Why a region of ``nodes`` is too big for one kernel, or None."""
    reductions = [n for n in nodes if n.kind is Kind.REDUCTION]
    if len(reductions) > MAX_REDUCTIONS:
        return f"register budget: {len(reductions)} reductions in one kernel (at most {MAX_REDUCTIONS})"
    phases = 1 + max((space.phase[r] for r in reductions), default=-1)
    if phases > MAX_PHASES:
        return f"register budget: {phases} dependent reductions in sequence (at most {MAX_PHASES})"
    if n_arrays > MAX_ARRAYS:
        return f"register budget: {n_arrays} arrays read or written (at most {MAX_ARRAYS})"
    return None
