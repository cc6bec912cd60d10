"""Kernel specs and generated kernels, without a GPU.

Every workload below is traced, made into ONE region over all its non-source nodes, planned
(``fusec.kinds.generate``) under several layouts and dtypes, rendered, and compiled with NVRTC for sm_90 and
sm_80: each must compile with zero register spills. The kernels of one workload are rendered into one
source, so the suite runs one NVRTC compile per workload and arch (about 2 x 13).

The unit tests check what the planner decides from a signature: schedules (contiguous, vectorized,
strided; warp or block per row; last-block or grid-barrier), collapsed ranks, int32/int64 indexing,
launch sizes (never a grid of 0 blocks, one block for an empty reduce-all), argument types, and that
the source does not depend on sizes. ``WORKLOADS`` and :func:`single_region` are shared with the golden
and GPU tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from fusec.codegen.render import include_block, inline_headers, render_body, render_kernel, render_module, split_source
from fusec.codegen.spec import MAX_GRID, KernelSpec
from fusec.ir.graph import Graph
from fusec.ir.ops import Kind
from fusec.ir.region import Region, RegionSpace, make_region, region_space
from fusec.kinds import generate
from fusec.schedule import ArrayLayout
from fusec.schedule.nest import INT32_LIMIT
from tests.workloads import (
    adam_no_bias_correction,
    bias_add,
    center_all,
    col_max_argmax,
    col_softmax,
    col_sum,
    gelu,
    layernorm_centered,
    mean_var,
    router,
    row_min_argmin,
    row_sum,
    softmax,
    sum_abs,
)

ARCHS = ["sm_90", "sm_80"]
FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
ALL = ["bool", *INTS, *FLOATS]


# ---- workloads (the shared ones are tests/workloads.py's) -----------------------------------------------------


def col_any_all(x):
    return x.any(axis=0), x.all(axis=0)


def transpose_add(x, y):
    return x.T + y


def single_region(fn: Callable, *specs: fusec.ArraySpec, name: str = "k0") -> tuple[Graph, Region, RegionSpace]:
    """``fn`` traced over ``specs``, and one region over all its non-source nodes."""
    graph = fusec.fuse(fn).trace(*specs)
    nodes = [n for n in graph.nodes if n.kind is not Kind.SOURCE]
    space = region_space(nodes)
    return graph, make_region(name, space.kind, nodes, graph.users, graph.outputs), space


def layout(shape: tuple[int, ...], how: str, align: int = 16) -> ArrayLayout:
    """Element strides of an array of ``shape`` laid out ``how``: c, f (Fortran), step2 (every other
    element of a twice-as-long last axis), neg (reversed last axis), bcast0 (zero stride on axis 0)."""
    c = ArrayLayout.c_contiguous(shape).strides
    if how == "c":
        return ArrayLayout(c, True, align)
    if how == "f":
        strides, step = [], 1
        for d in shape:
            strides.append(step)
            step *= max(d, 1)
        return ArrayLayout(tuple(strides), len(shape) <= 1, align)
    if how == "step2":
        return ArrayLayout(tuple(2 * s for s in c), False, align)
    if how == "neg":
        return ArrayLayout(c[:-1] + (-c[-1],), False, align)
    if how == "bcast0":
        return ArrayLayout((0,) + c[1:], False, align)
    raise ValueError(how)


@dataclass
class Variant:
    """One kernel of a workload: dtype, input shapes, and per-input layouts (default C-contiguous)."""

    dtype: str
    shapes: tuple[tuple[int, ...], ...]
    layouts: tuple[str, ...] = ()
    align: int = 16

    def spec(self, fn: Callable, name: str) -> KernelSpec:
        specs = [fusec.ArraySpec(s, self.dtype) for s in self.shapes]
        graph, region, _ = single_region(fn, *specs, name=name)
        lay = {}
        for node, how in zip(graph.inputs, self.layouts or ("c",) * len(graph.inputs)):
            lay[node] = layout(node.shape, how, self.align)
        return generate(region, lay).spec


@dataclass
class Workload:
    fn: Callable
    variants: list[Variant] = field(default_factory=list)


BIG = 2**31 + 16  # more elements than int32 indexing allows (specs only: nothing is allocated)

WORKLOADS: dict[str, Workload] = {
    "sum_abs": Workload(sum_abs, [
        *(Variant(dt, ((1029, 917),)) for dt in ALL),
        Variant("float32", ((1029, 917),), align=4),
        Variant("float32", ((1029, 917),), ("step2",)),
        Variant("int8", ((BIG,),)),
    ]),
    "gelu": Workload(gelu, [
        *(Variant(dt, ((1029, 917),)) for dt in FLOATS),
        Variant("float32", ((1029, 917),), align=8),
        Variant("float32", ((1029, 917),), ("f",)),
        Variant("float16", ((1029, 917),), ("neg",)),
        Variant("float32", ((BIG,),)),
    ]),
    "softmax": Workload(softmax, [
        *(Variant(dt, ((1029, 64),)) for dt in FLOATS),
        *(Variant(dt, ((64, 4096),)) for dt in FLOATS),
        Variant("float32", ((64, 4096),), ("f",)),
        Variant("float32", ((8, 16, 64),), ("step2",)),
        # register-resident rows: every bucket edge, both tables, unaligned rows (scalar loads)
        *(Variant("float32", ((8, n),)) for n in (7, 32, 33, 63, 65, 128, 129, 256, 257, 512, 513, 1000,
                                                   1024, 1025, 2048, 2049, 8192, 8193, 16384, 16385)),
        *(Variant(dt, ((8, n),)) for dt in ("float16", "float64") for n in (7, 64, 1000, 8192, 8193)),
        Variant("float32", ((8, 8192),), align=4),
        Variant("float32", ((4, 5, 64),), ("neg",)),
    ]),
    "layernorm": Workload(layernorm_centered, [
        *(Variant(dt, ((64, 8192),)) for dt in FLOATS),
        *(Variant("float32", ((8, n),)) for n in (1000, 16384)),
        Variant("float32", ((1029, 917),), ("neg",)),
    ]),
    "router": Workload(router, [
        *(Variant(dt, ((4096, 64),)) for dt in FLOATS),
        Variant("float32", ((4096, 64),), ("step2",)),
        *(Variant("float32", ((4096, n),)) for n in (7, 63, 65, 1000)),
    ]),
    "row_min_argmin": Workload(row_min_argmin, [
        *(Variant(dt, ((1029, 917),)) for dt in ["bool", *INTS, *FLOATS]),
        Variant("float32", ((16, 32, 64),), ("f",)),
        *(Variant(dt, ((16, n),)) for dt in ("bool", "int8", "int16", "int64", "uint64") for n in (64, 128, 8192)),
    ]),
    "col_sum": Workload(col_sum, [
        *(Variant(dt, ((1029, 917),)) for dt in ALL),
        Variant("float32", ((917, 1029),), ("f",)),
        Variant("int32", ((BIG // 4, 4),)),
    ]),
    "col_any_all": Workload(col_any_all, [Variant("bool", ((1029, 917),)), Variant("float32", ((3, 5, 7),))]),
    "col_softmax": Workload(col_softmax, [*(Variant(dt, ((1029, 917),)) for dt in FLOATS)]),
    "col_max_argmax": Workload(col_max_argmax, [
        Variant("float32", ((1029, 917),)), Variant("int64", ((23, 5, 7),), ("step2",)),
    ]),
    "mean_var": Workload(mean_var, [
        *(Variant(dt, ((1029, 917),)) for dt in FLOATS + ["int32", "uint8"]),
        Variant("float32", ((1029, 917),), ("f",)),
    ]),
    "center_all": Workload(center_all, [Variant("float32", ((1029, 917),)), Variant("float64", ((23,),))]),
    "adam": Workload(adam_no_bias_correction, [
        *(Variant(dt, ((1 << 20,),) * 4) for dt in FLOATS),
        Variant("float32", ((1 << 20,),) * 4, ("c", "step2", "c", "neg")),
    ]),
    "bias_add": Workload(bias_add, [
        *(Variant(dt, ((1029, 917), (917,))) for dt in ["bool", "int8", "int32", "int64", "uint8", *FLOATS]),
        Variant("float32", ((1029, 917), (1029, 1))),
    ]),
    "transpose_add": Workload(transpose_add, [
        Variant("float32", ((917, 1029), (1029, 917))), Variant("int64", ((917, 1029), (1029, 917)), ("f", "c")),
    ]),
}


def workload_specs(name: str) -> list[KernelSpec]:
    w = WORKLOADS[name]
    return [v.spec(w.fn, f"{name}{i}") for i, v in enumerate(w.variants)]


# ---- every kernel compiles, without spills -----------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_kernels_compile_without_spills(workload: str, arch: str) -> None:
    specs = workload_specs(workload)
    result = nvrtc.compile_cubin(render_module(specs), arch)
    assert result.kernels is not None
    for spec in specs:
        res = result.kernel(spec.name)
        assert res.spills == 0, f"{spec.name} ({spec.schedule}) spills on {arch}: {res}"
        assert res.stack_frame == 0, f"{spec.name} ({spec.schedule}) uses a stack frame on {arch}: {res}"


def test_kernels_render_kernel_is_a_complete_source() -> None:
    spec = workload_specs("gelu")[0]
    source = render_kernel(spec)
    assert source.startswith("// fusec helper headers, sha256 ") and source.endswith(render_body(spec))
    assert '#include "fusec_device.cuh"' in source and "namespace fs {" not in source  # included, not pasted
    whole = inline_headers(source)  # one translation unit
    assert whole.startswith("// ---- fusec device helpers") and "namespace fs {" in whole
    assert whole.endswith(render_body(spec)) and "#include \"" not in whole
    assert render_kernel(spec) == source  # deterministic
    assert split_source(source) == (include_block(spec.headers), render_body(spec))


# ---- schedules and index math -------------------------------------------------------------------------------


def _spec(fn: Callable, *shapes: tuple[int, ...], dtype: str = "float32", layouts: tuple[str, ...] = (),
          align: int = 16) -> KernelSpec:
    return Variant(dtype, shapes, layouts, align).spec(fn, "k0")


def test_kernels_pointwise_contiguous_is_vectorized_when_aligned() -> None:
    spec = _spec(gelu, (1029, 917))
    assert (spec.kind, spec.schedule.variant, spec.vec, spec.contiguous) == ("pointwise", "vector", 4, True)
    assert [p.name for p in spec.scalar_params] == ["n"]
    assert spec.args == (np.int32(1029 * 917),) and type(spec.args[0]) is np.int32
    assert _spec(gelu, (1029, 917), dtype="float16").vec == 8
    assert _spec(gelu, (1029, 917), dtype="float64").vec == 2


def test_kernels_pointwise_misaligned_falls_back_to_scalar() -> None:
    spec = _spec(gelu, (1029, 917), align=4)
    assert (spec.schedule.variant, spec.vec) == ("contiguous", 1)


def test_kernels_pointwise_strided_collapses_what_it_can() -> None:
    spec = _spec(gelu, (4, 5, 6), layouts=("step2",))  # every element doubled: still one flat axis
    assert spec.schedule.variant == "strided" and len(spec.loop_axes) == 1
    spec = _spec(gelu, (4, 5, 6), layouts=("f",))
    assert spec.schedule.variant == "strided" and len(spec.loop_axes) == 3
    spec = _spec(bias_add, (4, 5, 6), (6,))  # the bias repeats along the first two axes: they merge
    assert (spec.schedule.variant, spec.vec) == ("inner_vector", 2) and len(spec.loop_axes) == 2
    assert spec.inner_broadcast == () and "fs::Vec<float, 2>" in render_body(spec)  # bias moves along the row
    spec = _spec(bias_add, (4, 5, 7), (7,))  # 7 wide: no vector divides it
    assert spec.schedule.variant == "strided" and len(spec.loop_axes) == 2
    assert len(spec.uniform_loads) == 0


def test_kernels_broadcast_scalar_is_loaded_once() -> None:
    spec = _spec(bias_add, (1029, 917), (1,))
    assert spec.schedule.variant == "vector" and [a.pointer for a in spec.uniform_loads] == ["in1"]


def test_kernels_int64_indexing_beyond_int32() -> None:
    assert _spec(gelu, (INT32_LIMIT - 1,)).index_ctype == "int"
    spec = _spec(gelu, (BIG,), dtype="int8")
    assert spec.index_ctype == "long long" and type(spec.args[0]) is np.int64
    # the extent fits, but the strided offsets do not
    spec = _spec(gelu, (2**30,), layouts=("step2",))
    assert spec.index_ctype == "long long"
    assert _spec(sum_abs, (BIG,), dtype="int8").index_ctype == "long long"


def test_kernels_rows_warp_or_block_per_row() -> None:
    """Rows that are not one contiguous axis, or too long for registers, re-read the row (rows strided in
    memory along a contiguous kept axis run as cols instead)."""
    assert _spec(softmax, (1029, 64), layouts=("step2",)).schedule.variant == "warp"
    assert str(_spec(softmax, (64, 4096), layouts=("f",)).schedule).startswith("cols:grid_barrier,tile=32")
    spec = _spec(softmax, (64, 4096), layouts=("step2",))  # the denominator takes the maximum's pass (online)
    assert (spec.kind, spec.schedule.variant, len(spec.phases)) == ("rows", "block", 1)
    assert [f.ctype for f in spec.phases[0].fields] == ["float", "fc::ExpSum<float>"]
    assert spec.launch.per_block == 1 and spec.launch.work == 64
    assert (spec.row_threads, spec.elems, spec.held) == (0, 0, ())
    assert _spec(softmax, (3, 16385)).schedule.variant == "block"
    assert _spec(softmax, (3, 8193), dtype="float64").schedule.variant == "block"
    assert _spec(softmax, (3, 64), layouts=("neg",)).schedule.variant == "warp"  # the row runs backwards


@pytest.mark.parametrize("n, itemsize, threads, elems", [
    (1000, 4, 32, 32), (2, 4, 1, 2), (3, 4, 1, 4), (7, 4, 1, 8), (16, 4, 2, 8), (17, 4, 8, 4), (32, 4, 8, 4),
    (33, 4, 4, 16), (64, 4, 4, 16), (65, 4, 16, 8), (3, 8, 1, 4), (9, 8, 2, 8),
    (8192, 4, 256, 32), (8193, 4, 512, 32), (16384, 4, 512, 32), (1025, 4, 256, 8), (64, 8, 8, 8),
    (8192, 8, 512, 16), (1024, 8, 256, 4), (64, 2, 4, 16), (64, 1, 4, 16),
])
def test_kernels_rows_held_in_registers(n: int, itemsize: int, threads: int, elems: int) -> None:
    dtype = {1: "int8", 2: "float16", 4: "float32", 8: "float64"}[itemsize]
    spec = _spec(row_min_argmin if itemsize == 1 else softmax, (5, n), dtype=dtype)
    assert (spec.row_threads, spec.elems) == (threads, elems)
    assert spec.schedule.variant == ("warp_regs" if threads <= 32 else "block_regs")
    assert [a.var for a in spec.held] == ["ld0"]
    vec = min(16 // itemsize, elems) if n % min(16 // itemsize, elems) == 0 else None
    if vec is not None:
        assert spec.vec == vec
    if threads <= 32:
        assert spec.launch.block == (256, 1) and spec.launch.per_block == 256 // threads
    else:
        assert spec.launch.block == (threads, 1) and spec.launch.per_block == 1
    assert spec.launch.work == 5


def test_kernels_rows_in_registers_vector_width_follows_alignment() -> None:
    assert _spec(softmax, (5, 64)).vec == 4
    assert _spec(softmax, (5, 66)).vec == 2  # rows start 8-byte aligned
    assert _spec(softmax, (5, 67)).vec == 1
    assert _spec(softmax, (5, 64), align=8).vec == 2
    assert _spec(softmax, (5, 64), dtype="float16").vec == 8
    assert _spec(softmax, (5, 7), dtype="float16").vec == 1
    spec = _spec(softmax, (4, 5, 64), layouts=("bcast0",))  # every row of a block of rows is the same
    assert spec.schedule.variant == "warp_regs" and spec.vec == 4


def test_kernels_rows_in_registers_can_be_turned_off_by_forcing_a_schedule() -> None:
    _, region, _ = single_region(softmax, fusec.ArraySpec((1029, 64), "float32"))
    assert generate(region).schedule.variant == "warp_regs"
    spec = generate(region, schedule="rows:warp").spec
    assert spec.schedule.variant == "warp" and not spec.held and "_r[" not in render_body(spec)
    _, region, _ = single_region(softmax, fusec.ArraySpec((64, 4096), "float32"))
    assert generate(region, schedule="rows:block").spec.schedule.variant == "block"


def test_kernels_rows_in_registers_bucket_shares_the_source() -> None:
    assert render_body(_spec(softmax, (5, 40))) == render_body(_spec(softmax, (7, 60)))
    assert render_body(_spec(softmax, (5, 60))) != render_body(_spec(softmax, (5, 68)))
    assert render_body(_spec(softmax, (5, 8196))) == render_body(_spec(softmax, (2, 16000)))
    body = render_body(_spec(softmax, (5, 8192)))
    assert "typedef float ld0_t;" in body and "ld0_t ld0_r[32];" in body
    assert "fs::Vec<float, 4>" in body and "8192" not in body


def test_kernels_full_rows_check_no_bounds() -> None:
    """A row of exactly threads x elements (the bucket's longest) gets a kernel without bound checks; one
    element less gets the checked kernel of the bucket, shared by every shorter length."""
    for fn, n in [(softmax, 64), (softmax, 8192), (router, 64), (softmax, 16384)]:
        full, short = _spec(fn, (5, n)), _spec(fn, (5, n - 1))
        assert full.full_rows and not short.full_rows, (fn.__name__, n)
        assert "nr)" in render_body(short) and "nr)" not in render_body(full)  # i < nr), i0 + 4 <= nr)
        assert render_body(short) == render_body(_spec(fn, (3, n // 2 + 1)))
    wide = _spec(softmax, (5, 64), dtype="float64")  # 8-byte buckets: 64 is 8 threads x 8 elements
    assert wide.full_rows and wide.row_threads * wide.elems == 64
    assert not _spec(softmax, (5, 64), layouts=("f",)).full_rows  # re-reading schedules keep their checks


def test_kernels_rows_phases_of_layernorm_and_router() -> None:
    spec = _spec(layernorm_centered, (64, 8192))
    assert len(spec.phases) == 2 and [len(p.fields) for p in spec.phases] == [1, 1]
    spec = _spec(router, (4096, 64))
    assert len(spec.phases) == 3
    # the max of the probabilities reads the argmax pair's value: one field, one update per element
    assert [f.ctype for f in spec.phases[2].fields] == ["fc::ArgPair<float, index_t>"]
    assert any(line.endswith("= (acc2.r0).value;") for line in spec.phases[2].finish)
    assert spec.phases[2].align == 4  # an int-indexed pair is two 4-byte words
    # the last phase reads exp(x - max) back from its register slot: the subtraction and the load that
    # only recomputing it needed are gone from the generated source
    assert not any("fc::sub" in line for line in spec.phases[2].body)
    assert [a.var for a in spec.phases[2].loads if not a.is_index] == []
    assert len(spec.row_stores) == 2 and not spec.epilogue_stores


def test_kernels_division_by_a_row_divisor_takes_the_hoisted_reciprocal_in_registers() -> None:
    """Rows in registers divide float32 by a per-row divisor with fc::div_invariant, in a loop written once that
    runs in two unrolled passes: the second, dividing as IEEE division does, only where the first cleared its
    flag; everything else divides as before."""
    router_spec = _spec(router, (4096, 64))
    last = router_spec.phases[2]
    assert any("fc::div_invariant(" in line and ", fast2, exact_pass)" in line for line in last.body)
    assert last.two_pass and not router_spec.phases[0].two_pass and not router_spec.epilogue_two_pass
    body = render_body(router_spec)
    assert "bool fast2 = true;" in body and "if (exact_pass == 0 || !fast2) {" in body
    assert "if (exact_pass == 1) acc2 = Acc2_identity();" in body
    assert body.count("fc::div_invariant(") == 1 and "fc::div(" not in body  # the loop is not written twice

    soft = _spec(softmax, (64, 8192))  # the division is in the epilogue: the outputs are written in two passes
    assert soft.schedule.variant == "block_regs" and soft.epilogue_two_pass
    assert any("fast_epilogue, exact_pass)" in line for line in soft.epilogue_body)
    assert "if (exact_pass == 0 || !fast_epilogue) {" in render_body(soft)
    norm = _spec(layernorm_centered, (64, 8192))
    assert any("fc::div_invariant(" in line for line in norm.epilogue_body)
    half = _spec(softmax, (64, 8192), dtype="float16")  # computed in float32 and rounded once, as div()
    assert any("fc::div_invariant(" in line for line in half.epilogue_body)

    for other in (_spec(softmax, (64, 100_000)),  # a re-reading schedule
                  _spec(softmax, (64, 8192), dtype="float64"),  # float64 divides as IEEE does
                  _spec(lambda x: x / (x + 1.0), (64, 64))):  # the divisor varies along the row
        assert "div_invariant" not in render_body(other) and "bool fast" not in render_body(other)
        assert not getattr(other.schedule, "fast_division", False)


def test_kernels_epilogue_of_short_rows_computes_only_in_row_elements() -> None:
    """A row shorter than its bucket (softmax over 100 elements in 16 x 8 slots) leaves held values past its
    end unset: the epilogue must not divide them, or fc::div_invariant meets garbage (or the zeros of an
    unread slot), clears its flag and every row is written a second time with IEEE division."""
    for fn, n in [(softmax, 100), (layernorm_centered, 1000), (softmax, 63)]:
        spec = _spec(fn, (5, n))
        assert not spec.full_rows and spec.epilogue_two_pass, (fn.__name__, n)
        epilogue = render_body(spec).split("// epilogue", 1)[1].splitlines()
        guarded = False
        for line in epilogue:
            if "for (int j = 0;" in line:
                guarded = False
            elif "if (i0 + j < nr) {" in line:
                guarded = True
            elif "div_invariant(" in line or "fc::div(" in line:
                assert guarded, (fn.__name__, n, line)


def test_kernels_max_shares_the_argmax_pair_only_of_the_same_operand() -> None:
    shared = _spec(row_min_argmin, (64, 100), dtype="float64")
    assert [f.ctype for f in shared.phases[0].fields] == ["fc::ArgPair<double, index_t>"]
    assert shared.phases[0].align == 8
    apart = _spec(lambda x: (x.max(axis=-1), (x * 2).argmax(axis=-1)), (64, 100))
    assert [f.ctype for f in apart.phases[0].fields] == ["float", "fc::ArgPair<float, index_t>"]
    sum_and_argmax = _spec(lambda x: (x.sum(axis=-1), x.argmax(axis=-1)), (64, 100))
    assert len(sum_and_argmax.phases[0].fields) == 2


def test_kernels_argmax_updates_by_what_the_partial_holds() -> None:
    full = _spec(row_min_argmin, (64, 64))  # a full-row kernel: every thread's first element exists
    assert full.full_rows
    body = render_body(full)
    assert "acc0.r0 = fc::make_arg_pair(" in body and "fc::argmin_next_held(acc0.r0" in body
    assert "fc::argmin_next(" not in body
    short = _spec(row_min_argmin, (64, 63))  # a lane may hold no element: its partial stays the identity
    assert "fc::argmin_next(acc0.r0" in render_body(short) and "_held" not in render_body(short)
    looped = _spec(row_min_argmin, (64, 100_000))  # re-reading loops: any partial
    assert "fc::argmin_next(acc0.r0" in render_body(looped)


def test_kernels_cols_and_reduce_all_schedules() -> None:
    spec = _spec(col_sum, (1029, 917))
    assert (spec.kind, spec.schedule.variant, spec.launch.block) == ("cols", "last_block", (32, 8))  # 29 tiles
    spec = _spec(sum_abs, (1029, 917))
    assert (spec.kind, spec.schedule.variant, spec.vec) == ("reduce-all", "last_block", 4)
    spec = _spec(mean_var, (1029, 917))  # the variance in one pass (Welford): one phase, last_block
    assert spec.schedule.one_pass and spec.schedule.variant == "last_block" and len(spec.phases) == 1
    graph, region, _ = single_region(mean_var, fusec.ArraySpec((1029, 917), "float32"), name="k0")
    two_pass = generate(region, schedule="reduce-all:grid_barrier,one_pass=0").spec
    assert two_pass.launch.cooperative and len(two_pass.phases) == 2
    assert _spec(center_all, (1029, 917)).schedule.variant == "grid_barrier"


def test_kernels_size_one_axes_are_dropped() -> None:
    spec = _spec(softmax, (1, 64))  # one row: a reduce-all
    assert spec.kind == "reduce-all"
    spec = _spec(softmax, (7, 1))  # rows of one element
    assert spec.kind == "rows" and spec.loop_axes == ()


def test_kernels_empty_regions_launch_nothing_except_reduce_all() -> None:
    assert _spec(gelu, (0, 5)).launch.grid(1000) == 0
    assert _spec(softmax, (0, 5)).launch.grid(1000) == 0
    assert _spec(row_sum, (5, 0)).launch.grid(1000) == 1  # empty rows: the identity is still written
    assert _spec(sum_abs, (0,)).launch.grid(1000) == 1
    assert _spec(mean_var, (0, 3)).launch.grid(1000) == 1


def test_kernels_grid_is_capped_by_capacity_only_where_persistent() -> None:
    spec = _spec(gelu, (1 << 24,))  # a block per 256 vectors, whatever the capacity
    assert not spec.launch.persistent
    assert spec.launch.grid(528) == spec.launch.grid(10**9) == -(-(1 << 22) // 256)
    assert _spec(gelu, (1 << 30,)).launch.grid(528) == MAX_GRID  # then grid-stride
    rows = _spec(softmax, (8192, 8192))
    assert rows.launch.grid(264) == 8192 and rows.launch.describe() == "grid 8192"
    spec = _spec(mean_var, (1 << 24,))  # reduce-all: every block adds a partial, so it stays resident
    assert spec.launch.persistent and spec.launch.grid(528) == 528
    assert spec.launch.describe() == f"grid min({spec.launch.blocks}, SMs x resident blocks)"
    assert spec.launch.workspace_bytes(528) >= 128 + 2 * 528 * 8
    _, region, _ = single_region(mean_var, fusec.ArraySpec((1000,), "float32"), name="k0")
    small = generate(region, schedule="reduce-all:grid_barrier,one_pass=0").spec  # the variance in two passes
    assert small.launch.grid(528) == 1 and small.launch.workspace_bytes(1) == 0  # one block: no workspace,
    assert render_body(small).count("if (gridDim.x > 1) {") == 2  # the kernel skips the partials, per phase
    cols = _spec(col_sum, (1024, 1 << 16))
    assert cols.launch.persistent and cols.launch.grid(100) == 100


def test_kernels_source_depends_on_signature_not_sizes() -> None:
    """Sizes are parameters: sizes that the heuristics give the same schedule share a source (the schedule
    itself follows sizes only in steps: row buckets, the cols tile up to 32 kept indices, tiling from 32)."""
    for fn, a, b in [(gelu, (1029, 917), (23,)), (softmax, (1029, 60), (3, 52)),
                     (softmax, (64, 4000), (3, 3000)), (softmax, (64, 20000), (3, 30000)),
                     (col_sum, (1029, 917), (2000, 40)), (col_sum, (1029, 5), (1500, 7)),
                     (mean_var, (1029, 917), (5, 7)), (transpose_add, (917, 1029), (33, 40)),
                     (transpose_add, (917, 5), (3, 7))]:
        shapes_a = (a,) if fn is not transpose_add else (a, a[::-1])
        shapes_b = (b,) if fn is not transpose_add else (b, b[::-1])
        assert render_body(_spec(fn, *shapes_a)) == render_body(_spec(fn, *shapes_b)), fn.__name__


def test_kernels_size_values_are_parameters() -> None:
    spec = _spec(mean_var, (1029, 917))
    params = {p.name: (p.ctype, v) for p, v in zip(spec.scalar_params, spec.args)}
    assert params["size0"] == ("double", np.float64(1029 * 917))
    assert "1029" not in render_body(spec) and "917" not in render_body(spec)


def test_kernels_kernel_name_says_what_it_fuses() -> None:
    assert _spec(softmax, (1029, 64)).name == "k0_rows_max_sub_exp_sum_div"
    assert re.fullmatch(r"k0_pointwise_\w+", _spec(gelu, (5,)).name)


def test_kernels_argmax_position_follows_the_operand_order() -> None:
    spec = _spec(col_max_argmax, (23, 5, 7), dtype="int64")
    assert spec.kind == "cols"
    update = "\n".join(spec.phases[0].update)
    assert "fc::argmax_next" in update and "ix0" in update


def test_kernels_transposed_input_reads_through_its_strides() -> None:
    spec = _spec(transpose_add, (917, 1029), (1029, 917))
    assert spec.schedule.variant == "tiled" and len(spec.loop_axes) == 2
    assert [a.coord for a in spec.tile_axes] == ["c1", "c0"] and len(spec.staged) == 1  # x.T staged across
    body = render_body(spec)
    assert "ld0_s0" in body and "ld0_s1" in body and f"tile_{spec.staged[0].var}[threadIdx.x][j]" in body
    narrow = _spec(transpose_add, (917, 5), (5, 917))  # 5 wide: not worth a tile
    assert narrow.schedule.variant == "strided" and not narrow.staged
