"""A region whose node has two axes running along one region axis is refused (``region_space``): the kernel would
iterate that axis once and compute only the diagonal of the outer product. Found by the GPU fuzzer (2026-12-07,
graphs 3726/3727): a cols kernel wrote 8 of its 32 float16 outputs and left the rest poisoned."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fusec.ir import space_state
from fusec.ir.axis_slots import AxisSlots
from fusec.ir.graph import Graph, Node
from fusec.ir.interpret import interpret
from fusec.ir.ops import Kind
from fusec.ir.region import Refusal, region_space
from fusec.ir.space_state import SpaceState, refusal_text
from fusec.ir.text import parse
from fusec.runtime.plan import execute_numpy, make_plan
from tests.helpers import assert_matches_numpy, random_array

FUZZ_3727 = """func @fuzz3727_views(%x: i32[], %y: f32[], %z: i32[2,4]) -> (f16[2,2,2,4], f16[4,2,4]) {
  %0 = cast %y : f16[]
  %1 = cast %z : f16[2,4]
  %2 = maximum %0, %1 : f16[2,4]
  %3 = cast %2 : bool[2,4]
  %4 = any %3 {axes=[0], keepdims=true} : bool[1,4]
  %5 = reshape %4 {shape=[4, 1, 1]} : bool[4,1,1]
  %6 = transpose %5 {perm=[0, 1, 2]} : bool[4,1,1]
  %7 = cast %6 : f16[4,1,1]
  %8 = where %3, %7, %7 : f16[4,2,4]
  %9 = neg %8 : f16[4,2,4]
  %10 = reshape %9 {shape=[2, 2, 2, 4]} : f16[2,2,2,4]
  return %10, %9
}"""

# from tests.fuzz.corpus.generate(5000, seed=0) here: its cols kernel placed maximum (4x4x1x4) along (0, 1, -, 1)
FUZZ_2835 = """func @fuzz2835_views(%x: i32[1,4,1]) -> (bool[0,4,1,0], f32[4,4,1,4], bool[4]) {
  %0 = cast %x : bool[1,4,1]
  %1 = reshape %0 {shape=[4]} : bool[4]
  %2 = cast %1 : i64[4]
  %3 = squeeze %0 {axes=[0]} : bool[4,1]
  %4 = cast %3 : i64[4,1]
  %5 = lt %2, %4 : bool[4,4]
  %6 = transpose %5 {perm=[0, 1]} : bool[4,4]
  %7 = expand_dims %6 {axes=[2, 3]} : bool[4,4,1,1]
  %8 = slice %7 {start=[6, none, none, none], step=[1, 1, 3, 1], stop=[5, none, 2, -3]} : bool[0,4,1,0]
  %9 = cast %7 : f32[4,4,1,1]
  %10 = any %5 {axes=[0], keepdims=false} : bool[4]
  %11 = cast %10 : f32[4]
  %12 = maximum %9, %11 : f32[4,4,1,4]
  return %8, %12, %10
}"""

OUTER = """func @outer(%x: f32[6,5]) -> f32[5,5] {
  %0 = sum %x {axes=[0], keepdims=false} : f32[5]
  %1 = expand_dims %0 {axes=[1]} : f32[5,1]
  %2 = expand_dims %0 {axes=[0]} : f32[1,5]
  %3 = mul %1, %2 : f32[5,5]
  return %3
}"""


# s[i] * e[a, b] with s = e.sum(0): the product's axes 0 and 2 run along region axis 1 (one class of slots)
COLUMN_SUM_TIMES_VALUES = """func @f(%x: f32[3,4]) -> f32[4,3,4] {
  %0 = exp %x : f32[3,4]
  %1 = sum %0 {axes=[0], keepdims=false} : f32[4]
  %2 = expand_dims %1 {axes=[1, 2]} : f32[4,1,1]
  %3 = mul %2, %0 : f32[4,3,4]
  return %3
}"""

# two sibling column sums (nothing links them): each numbers its own classes 0 and 1, so the product of the
# one's result (along region axis 1) with the other's (along region axis 1 too) has two axes on one
SIBLING_SUMS_OUTER = """func @f(%x: f32[5,5], %y: f32[5,5]) -> f32[5,5] {
  %0 = exp %x : f32[5,5]
  %1 = exp %y : f32[5,5]
  %2 = sum %0 {axes=[0], keepdims=false} : f32[5]
  %3 = sum %1 {axes=[0], keepdims=false} : f32[5]
  %4 = expand_dims %2 {axes=[1]} : f32[5,1]
  %5 = expand_dims %3 {axes=[0]} : f32[1,5]
  %6 = mul %4, %5 : f32[5,5]
  return %6
}"""

# max's kept axis runs along the region's reduced axis 1, and its free reduced axis is placed there too: its
# operand map (not a member's map) has two axes on region axis 1
REDUCTION_OPERAND = """func @f(%a: f32[4,4], %b: f32[4,4]) -> f32[4,4] {
  %0 = exp %a : f32[4,4]
  %1 = sum %0 {axes=[1], keepdims=true} : f32[4,1]
  %2 = max %b {axes=[1], keepdims=false} : f32[4]
  %3 = expand_dims %2 {axes=[0]} : f32[1,4]
  %4 = add %1, %3 : f32[4,4]
  return %4
}"""

DIAGONAL = "the kernel would compute only the diagonal of their outer product"
REFUSED = {
    "column_sum_times_values": (COLUMN_SUM_TIMES_VALUES, "different iteration space: two axes of mul of shape "
                                "[4, 3, 4] (0 and 2) run along region axis 1 of the region's 3x4 reducing [0]: "
                                + DIAGONAL),
    "sibling_sums_outer": (SIBLING_SUMS_OUTER, "different iteration space: two axes of mul of shape [5, 5] (0 and 1) "
                           f"run along region axis 1 of the region's 5x5 reducing [0]: {DIAGONAL}"),
    "reduction_operand": (REDUCTION_OPERAND, "different iteration space: two axes of max of shape [4, 4] (0 and 1) "
                          f"run along region axis 1 of the region's 4x4 reducing [1]: {DIAGONAL}"),
}


def _members(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if n.kind is not Kind.SOURCE]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_region_space_refuses_two_axes_along_one(name: str) -> None:
    text, message = REFUSED[name]
    with pytest.raises(Refusal) as info:
        region_space(_members(parse(text)))
    assert str(info.value) == message


def _grown(slots: AxisSlots, order: list[Node]) -> tuple[Any, int]:
    """The space of ``order``'s members grown one member at a time (a union with each one's own space), up to the
    first union refused: the last union (a refused trial, not applied, or the state of all), and how many members
    it holds."""
    state = SpaceState.single(slots, order[0])
    for i, n in enumerate(order[1:], 2):
        trial = state.union(SpaceState.single(slots, n))
        if not trial.legal:
            return trial, i
        state = trial.commit()
    return state, len(order)


@pytest.mark.parametrize("name", sorted(REFUSED))
@pytest.mark.parametrize("seed_first", [False, True], ids=["topological", "seed_first"])
def test_incremental_space_refuses_two_axes_along_one(name: str, seed_first: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Grown one member at a time (in topological order, or the first reduction first), the incremental space
    refuses the last member only, as region_space does (every trial is compared with it), and its refusal's text
    is region_space's."""
    monkeypatch.setattr(space_state, "CHECK_AGAINST_SCRATCH", True)
    text, message = REFUSED[name]
    graph = parse(text)
    members = _members(graph)
    slots = AxisSlots(graph.nodes, graph.users)
    order = [n for n in members if n.kind is Kind.REDUCTION][:1] if seed_first else []
    order += [n for n in members if n not in order]
    trial, held = _grown(slots, order)
    assert (trial.legal, held) == (False, len(members))
    assert not SpaceState.build(slots, members).legal
    assert refusal_text(slots, members) == message


# a column sum's region grown from its seed (nothing but the seed numbers classes), then a group with a sibling
# column sum and the product of the two sums: the sibling numbers its own classes, 0 and 1, in that union
SIBLING_JOINS_LATER = """func @f(%x: f32[5,5], %y: f32[5,5]) -> (f32[5,5], f32[5,5]) {
  %0 = exp %x : f32[5,5]
  %1 = neg %0 : f32[5,5]
  %2 = abs %1 : f32[5,5]
  %3 = sum %0 {axes=[0], keepdims=false} : f32[5]
  %4 = expand_dims %3 {axes=[1]} : f32[5,1]
  %5 = exp %y : f32[5,5]
  %6 = sum %5 {axes=[0], keepdims=false} : f32[5]
  %7 = expand_dims %6 {axes=[0]} : f32[1,5]
  %8 = mul %4, %7 : f32[5,5]
  return %2, %8
}"""


def test_incremental_space_refuses_a_sibling_numbering_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A union on the fast path (the larger group's numbers carried) in which the smaller group's sibling numbers
    classes itself: the product's axis along the sibling's class and its axis along the seed's share a number."""
    monkeypatch.setattr(space_state, "CHECK_AGAINST_SCRATCH", True)
    graph = parse(SIBLING_JOINS_LATER)
    exp_x, neg, abs_, sum_x, col, exp_y, sum_y, row, outer = _members(graph)
    slots = AxisSlots(graph.nodes, graph.users)
    grown, held = _grown(slots, [sum_x, exp_x, neg, abs_, col])
    assert grown.legal and held == 5
    trial = grown.union(SpaceState.build(slots, [exp_y, sum_y, row, outer]))
    assert trial.fast and not trial.legal
    assert refusal_text(slots, _members(graph)) == (
        "different iteration space: two axes of mul of shape [5, 5] (0 and 1) run along region axis 1 of the "
        f"region's 5x5 reducing [0]: {DIAGONAL}")


def test_outer_product_of_a_reduction_is_not_one_kernel() -> None:
    graph = parse(OUTER)
    with pytest.raises(Refusal, match="two axes of|axes don't line up"):
        region_space([n for n in graph.nodes if n.operands])


@pytest.mark.parametrize("text", [FUZZ_3727, FUZZ_2835, OUTER], ids=["fuzz3727", "fuzz2835", "outer"])
def test_outer_product_kernels_cover_their_outputs(text: str) -> None:
    """Every kernel's outputs lie in its iteration space (each output element has one point of the space), and
    the plan computes what the interpreter computes."""
    graph = parse(text)
    plan = make_plan(graph)
    for kernel in plan.kernels:
        space = kernel.region.space
        for out in kernel.outputs:
            placed = [a for a in space.maps[out] if a is not None]
            assert len(set(placed)) == len(placed), (kernel.name, out, space.maps[out])
            assert out.size <= int(np.prod(space.shape)), (kernel.name, out.shape, space.shape)
    rng = np.random.default_rng(3727)
    inputs = [random_array(rng, n.shape, n.dtype) for n in graph.inputs]
    with np.errstate(all="ignore"):
        want = interpret(graph, inputs)
        got = execute_numpy(plan, inputs)
    for g, w in zip(got, want):
        assert_matches_numpy(np.asarray(g), np.asarray(w), exact=True)
