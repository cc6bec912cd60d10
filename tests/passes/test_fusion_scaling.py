"""Fusion's incremental bookkeeping: every iteration space it builds is region_space's, and the work it does
grows in proportion to the graph (counted, not timed: ``PartitionCounts``).

With ``fusec.ir.space_state.CHECK_AGAINST_SCRATCH`` on, every space the partitioner computes for a merge it
tries (legal or not) is compared with :func:`fusec.ir.region.region_space` from scratch: legality, shape,
reduced axes, maps, reduction maps and phases. The graphs are the hypothesis strategies of
``tests/strategies.py`` (as they come, in the fuzz corpus's families, and drawn for outer products), the
compile-time benchmark's families and the kernel-count workloads.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fusec
from benchmarks.compile_time import chain, random_dag
from fusec.ir import space_state
from fusec.ir.graph import Graph
from fusec.ir.region import region_space
from fusec.passes import fuse as fusion
from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline
from tests.fuzz.corpus import COMMON_OPTIONS, FAMILIES
from tests.strategies import graphs

RELAXED = dict(deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture
def check_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(space_state, "CHECK_AGAINST_SCRATCH", True)


def _partition(graph: Graph, counts: fusion.PartitionCounts | None = None) -> Graph:
    return fusion.partition(fusion.fusion_form(graph), counts)


def _assert_regions_match_scratch(fused: Graph) -> None:
    for region in fused.regions or ():
        want = region_space(region.nodes)
        got = region.space
        assert (got.shape, got.reduced) == (want.shape, want.reduced)
        assert list(got.maps.items()) == list(want.maps.items())
        assert list(got.reduce_maps.items()) == list(want.reduce_maps.items())
        assert list(got.phase.items()) == list(want.phase.items())


def _check(graph: Graph) -> None:
    for g in (graph, run_pipeline(graph, CLEANUP_PIPELINE)):
        _assert_regions_match_scratch(_partition(g))  # each trial is compared inside, on the way
        fusion.partition_unfused(fusion.fusion_form(g))


@settings(max_examples=300, **RELAXED)
@given(graphs(max_nodes=24))
def test_partition_spaces_equal_region_space_on_random_graphs(check_spaces, g):
    _check(g)


@settings(max_examples=300, **RELAXED)
@given(st.sampled_from(sorted(FAMILIES)).flatmap(lambda f: graphs(**{**FAMILIES[f], **COMMON_OPTIONS})))
def test_partition_spaces_equal_region_space_on_fuzz_families(check_spaces, g):
    _check(g)


# outer products: sums and expand_dims, transposes and broadcasts of axes that all have one extent (2), so that two
# axes of a node meet in one class of slots, or in two classes that get one number (siblings)
OUTER_OPS = ["add", "mul", "neg", "maximum", "where", "sum", "max", "any", "argmax", "cumsum", "expand_dims",
             "transpose", "squeeze", "broadcast_to", "reshape"]


@settings(max_examples=300, **RELAXED)
@given(graphs(max_nodes=24, max_dim=2, allow_empty=False, ops=OUTER_OPS, dtypes=["float32", "bool", "int64"],
              allow_consts=False))
def test_partition_spaces_equal_region_space_on_outer_products(check_spaces, g):
    _check(g)


@pytest.mark.parametrize("size", [30, 200])
def test_partition_spaces_equal_region_space_on_benchmark_families(check_spaces, size):
    for fn, specs in (chain(size), random_dag(size, seed=size)):
        _check(fusec.fuse(fn).trace(*specs))


def test_partition_spaces_equal_region_space_on_workloads(check_spaces):
    from tests.passes import test_kernel_counts as w

    x, row = fusec.ArraySpec((64, 32), "float32"), fusec.ArraySpec((32,), "float32")
    for fn, specs in ((w.softmax, [x]), (w.layernorm, [x]), (w.moe_router, [x]), (w.adam, [x] * 4),
                      (w.mean_var, [x]), (w.gelu, [x]), (w.rmsnorm, [x, row]), (w.l2_norm, [x]), (w.sum_abs, [x])):
        _check(fusec.fuse(fn).trace(*specs))


# -- work grows with the graph ------------------------------------------------------------------------


def _counts(fn, specs) -> dict[str, int]:
    counts = fusion.PartitionCounts()
    _partition(run_pipeline(fusec.fuse(fn).trace(*specs), CLEANUP_PIPELINE), counts)
    flat = {k: v for k, v in dataclasses.asdict(counts).items() if isinstance(v, int)}
    flat.update(dataclasses.asdict(counts.space))
    flat.update(counts.steps)
    return flat


def _total(c: dict[str, int]) -> int:
    """Every step counted: slots inserted and linked, classes visited, twins' partners visited, phases raised,
    candidates replayed, members walked by rebuilds and by region_space, groups searched for cycles, groups
    examined."""
    return sum(c.get(k, 0) for k in ("slot_steps", "class_steps", "twin_steps", "phase_steps", "rescanned",
                                     "rebuilt_nodes", "oracle_nodes", "cycle_steps", "groups_examined"))


def test_partition_work_doubles_with_chain_length():
    small, large = _counts(*chain(500)), _counts(*chain(1000))
    assert small["merges"] == 499 and large["merges"] == 999
    for key, value in large.items():
        assert value <= 2.2 * small[key] or value <= 2, (key, small[key], value)
    assert _total(large) <= 2.05 * _total(small)


def test_partition_work_quadruples_with_random_dag_size():
    small: dict[str, int] = {}
    large: dict[str, int] = {}
    for seed in (0, 1, 2):  # summed over three graphs, sizes 4x apart: one random graph's counts are noisy
        for total, size in ((small, 2000), (large, 8000)):
            for key, value in _counts(*random_dag(size, seed)).items():
                total[key] = total.get(key, 0) + value
    for key in ("slot_steps", "class_steps", "phase_steps", "cycle_steps", "groups_examined", "merges_tried"):
        assert large[key] <= 4.4 * small[key], (key, small[key], large[key])
    assert _total(large) <= 4.4 * _total(small), (_total(small), _total(large))


def test_partition_counts_chain_merges_each_node_once_without_rebuilding():
    fn, specs = chain(100)
    counts = fusion.PartitionCounts()
    fused = _partition(run_pipeline(fusec.fuse(fn).trace(*specs), CLEANUP_PIPELINE), counts)
    assert len(fused.regions) == 1
    assert counts.merges == counts.merges_tried == 99
    assert counts.space.rebuilds == counts.space.oracle_calls == counts.space.rescans == 0
