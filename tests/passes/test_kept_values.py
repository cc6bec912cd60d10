"""Values kept in memory for their views (``fusec.passes.kept_values``): sinking views computes a value again for
each view that reads it, up to ``VIEWS_PER_VALUE`` different views; a value read through more is computed once,
into memory. Planning the stencils and view chains that used to explode is linear in their length (work counted,
not timed), their results are NumPy's, and a value read through a few views still fuses with them.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import fusec
from benchmarks.compile_time import reversed_chain, roll_stencil, shrinking_stencil, view_dag
from fusec import ArraySpec
from fusec.passes import fuse as fusion
from fusec.passes.kept_values import VIEWS_PER_VALUE, kept_in_memory
from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline
from tests.helpers import assert_matches_numpy, seed_of


def _cleaned(fn, specs):
    return run_pipeline(fusec.fuse(fn).trace(*specs), CLEANUP_PIPELINE)


def _work(fn, specs) -> Counter:
    """Sinking's work on ``fn`` as traced (every view still where the program took it), and partitioning's and the
    size of the graph fusion partitions after the cleanup passes."""
    counts: Counter = Counter()
    fusion.fusion_form(fusec.fuse(fn).trace(*specs), counts)
    form = fusion.fusion_form(_cleaned(fn, specs))
    part = fusion.PartitionCounts()
    fusion.partition(form, part)
    counts["nodes"] = len(form.nodes)
    counts["merges_tried"] = part.merges_tried
    counts["cycle_steps"] = part.steps["cycle_steps"]
    counts["slot_steps"] = part.space.slot_steps
    return counts


@pytest.mark.parametrize("family, small", [(roll_stencil, 40), (shrinking_stencil, 40), (reversed_chain, 1000),
                                           (view_dag, 2000)])
def test_kept_values_planning_work_doubles_with_program_length(family, small):
    """Twice the steps, at most about twice the work: before, the 20-step roll stencil took minutes (every step
    recomputed through some 5^n compositions of windows) and the reversed chain rebuilt n^2/2 nodes."""
    a, b = _work(*family(small)), _work(*family(2 * small))
    for key in ("sink_steps", "nodes", "merges_tried", "slot_steps"):
        assert b[key] <= 2.3 * max(a[key], 8), (key, a[key], b[key])


def test_kept_values_roll_stencil_keeps_a_value_every_few_steps():
    fn, specs = roll_stencil(20)
    kept = kept_in_memory(_cleaned(fn, specs))
    assert 3 <= len(kept) <= 20
    plan = fusec.fuse(fn).plan(*specs)
    assert len(plan.kernels) <= 20


def _three_point(x):
    y = np.exp(x)
    return y[2:] - 2 * y[1:-1] + y[:-2]


def _nine_views(x):
    y = np.exp(x)
    return sum(y[k:len(y) - 8 + k] * (k + 1) for k in range(9))


def test_kept_values_a_value_read_through_a_few_views_is_computed_where_each_reads_it():
    """``exp(x)`` read through three slices: one kernel, exp computed for each slice (three views <= the limit)."""
    assert VIEWS_PER_VALUE >= 3
    plan = fusec.fuse(_three_point).plan(ArraySpec((4096,), "float32"))
    assert len(plan.kernels) == 1


def test_kept_values_a_value_read_through_more_views_than_the_limit_is_computed_once():
    """``exp(x)`` read through nine slices: computed once into memory, then one kernel reads the nine slices; the
    refusal says why."""
    assert VIEWS_PER_VALUE < 9
    fused = fusec.fuse(_nine_views)
    plan = fused.plan(ArraySpec((4096,), "float32"))
    assert len(plan.kernels) == 2
    assert f"(exp) is read through more than {VIEWS_PER_VALUE} different views" in str(
        fused.explain(ArraySpec((4096,), "float32")))


@pytest.mark.parametrize("fn", [_three_point, _nine_views, roll_stencil(12)[0], shrinking_stencil(30)[0],
                                reversed_chain(41)[0]], ids=["three_point", "nine_views", "roll", "shrinking",
                                                             "reversed"])
def test_kept_values_stencils_match_numpy(fn):
    rng = np.random.default_rng(seed_of("kept values", fn.__name__))
    x = rng.standard_normal(4096 + 60).astype(np.float32)
    with np.errstate(all="ignore"):
        want = fn(x.copy())
    assert_matches_numpy(fusec.fuse(fn)(x), want)


def test_kept_values_two_dimensional_roll_stencil_matches_numpy():
    """Game of life's neighbour count, eight rolls of a computed value (sixteen windows): kept, and NumPy's."""

    def life(board):
        b = (board > 0).astype(np.int32)
        n = sum(np.roll(np.roll(b, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))
        return ((n == 3) | ((b == 1) & (n == 2))).astype(np.int8)

    board = np.random.default_rng(seed_of("life")).standard_normal((67, 45)).astype(np.float32)
    assert_matches_numpy(fusec.fuse(life)(board), life(board))
    assert kept_in_memory(_cleaned(life, [ArraySpec((67, 45), "float32")]))


def test_kept_values_are_a_fixpoint_of_sinking():
    """Fusion's sinking after canonicalize's keeps the same values: the graph canonicalize leaves has nothing left
    to sink."""
    fn, specs = roll_stencil(10)
    cleaned = _cleaned(fn, specs)
    assert fusion.fusion_form(cleaned).nodes == cleaned.nodes
