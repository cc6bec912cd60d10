"""The schedule layer: schedules as values (text form, parsing, completion), the heuristics' choices, forced
schedules (checked against the region, giving NumPy's result and compiling), and how they reach ``explain``,
the CLI and the kernel cache key."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from fusec.codegen.render import render_body, render_module
from fusec.ir.ops import Kind
from fusec.ir.region import make_region, region_space
from fusec.kinds import (
    ColSchedule,
    PointwiseSchedule,
    ReduceAllSchedule,
    RowSchedule,
    analyze,
    choose,
    generate,
    parse_schedule,
    resolve,
)
from fusec.schedule import ArrayLayout, ScheduleError, layout_of, layouts_of
from tests.helpers import assert_matches_numpy, random_array
from tests.workloads import col_softmax, col_sum, gelu, softmax, sum_abs


def mean_var(x):
    m = x.mean()
    return m, ((x - m) ** 2).mean()


def transpose_affine(x):
    return x.T * 2 + 1


def outer(a, b):
    return a * b


def transpose_pair(x, y):
    return x.T * 2 + y.T


def col_mean_var(x):
    return x.mean(axis=0), x.var(axis=0)


def row_var_std(x):
    return x.var(axis=-1), x.std(axis=-1, ddof=1)


def channel_sum(x):
    return x.sum(axis=(0, 2, 3))


def row_sum_of_transposed(x):
    return x.T.sum(axis=1)


def region_of(fn, *specs):
    """``fn`` traced over ``specs`` as one region over all its non-source nodes."""
    graph = fusec.fuse(fn).trace(*specs)
    nodes = [n for n in graph.nodes if n.kind is not Kind.SOURCE]
    return graph, make_region("k0", region_space(nodes).kind, nodes, graph.users, graph.outputs)


F32 = "float32"
# one region of each kind, and two schedules of it that both run it: (function, shape, schedule A, schedule B)
TWO_SCHEDULES = {
    "pointwise": (gelu, (1029, 917), "pointwise:vector,vec=4", "pointwise:strided"),
    "reduce-all": (sum_abs, (1029, 917), "reduce-all:last_block", "reduce-all:grid_barrier,loop=strided,vec=1"),
    "rows": (softmax, (37, 1000), "rows:warp_regs", "rows:block"),
    "rows-regs": (softmax, (37, 1000), "rows:block_regs,threads=256,elems=4,hold=none,fast_division=0",
                  "rows:block_regs,threads=64,elems=16"),
    "pointwise-tiled": (transpose_affine, (70, 45), "pointwise:tiled", "pointwise:tiled,tile=16"),
    "cols": (col_softmax, (1029, 917), "cols:tiles", "cols:tiles,tile=16,split=16"),
    "cols-split": (col_softmax, (1029, 917), "cols:grid_barrier,blocks=3",
                   "cols:grid_barrier,tile=4,split=64,blocks=2"),
    "cols-last-block": (col_sum, (4099, 30), "cols:last_block,blocks=5", "cols:last_block,tile=1,split=256"),
    "rows-as-cols": (softmax, (37, 1000), "cols:grid_barrier,tile=1,split=256,blocks=4", "rows:block"),
    "one_pass": (col_mean_var, (1029, 917), "cols:grid_barrier,blocks=3,one_pass=1", "cols:grid_barrier,one_pass=0"),
    "one-pass-rows": (row_var_std, (37, 1000), "rows:block,one_pass=1", "rows:block_regs,threads=64,elems=16"),
}


# ---- schedules as values ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(TWO_SCHEDULES))
def test_schedule_text_parses_back_into_the_same_schedule(case: str) -> None:
    fn, shape, *forced = TWO_SCHEDULES[case]
    _, region = region_of(fn, fusec.ArraySpec(shape, F32))
    nest = analyze(region)
    for schedule in (choose(nest), *(resolve(nest, f) for f in forced)):
        assert resolve(nest, schedule.text()) == schedule
        assert resolve(nest, schedule) is schedule
        assert hash(schedule) == hash(resolve(nest, schedule.text()))


def test_schedule_heuristics_choose_per_kind() -> None:
    def chosen(fn, shape, dtype=F32, layouts=None):
        _, region = region_of(fn, fusec.ArraySpec(shape, dtype))
        return choose(analyze(region, layouts))

    assert chosen(gelu, (1029, 917)) == PointwiseSchedule("vector", 4)
    assert chosen(gelu, (1029, 917), "float64") == PointwiseSchedule("vector", 2)
    assert chosen(sum_abs, (1029, 917)) == ReduceAllSchedule("last_block", "vector", 4)
    # the variance in one pass (Welford): one phase, so the last block combines
    planned = fusec.fuse(mean_var).plan(fusec.ArraySpec((1029, 917), F32)).kernels[0].region
    assert choose(analyze(planned)) == ReduceAllSchedule("last_block", "vector", 4, one_pass=True)
    assert chosen(col_sum, (1029, 917)).one_pass is None  # no variance: the flag does not apply
    # two phases and an epilogue; the softmax denominator takes the pass of the maximum
    assert chosen(col_softmax, (1029, 917)) == ColSchedule("grid_barrier", 32, 8, one_pass=True)
    rows = chosen(softmax, (8192, 8192))
    assert (rows.mapping, rows.row_threads, rows.elems, rows.vec, rows.fast_division) == (
        "block_regs", 256, 32, 4, True)
    held = "+".join(map(str, rows.hold))
    assert rows.hold and rows.text() == (
        f"rows:block_regs,threads=256,elems=32,vec=4,hold={held},fast_division=1,lengths=exact")
    assert chosen(softmax, (64, 100)).mapping == "warp_regs"
    assert chosen(transpose_affine, (64, 33)) == PointwiseSchedule("tiled", 1, 64)  # read across, written along
    assert chosen(transpose_affine, (64, 8)) == PointwiseSchedule("strided", 1)  # too narrow to tile
    assert chosen(transpose_affine, (64, 64), "float64") == PointwiseSchedule("tiled", 1, 64)  # 33 KiB
    spec = fusec.ArraySpec((64, 64), "float64")
    assert choose(analyze(region_of(transpose_pair, spec, spec)[1])) == PointwiseSchedule("tiled", 1, 32)  # 2 x 33 KiB


def test_schedule_broadcast_rows_and_columns_get_vectors_along_the_inner_axis() -> None:
    def chosen(fn, *specs):
        _, region = region_of(fn, *specs)
        return choose(analyze(region))

    row, col = fusec.ArraySpec((1, 512), F32), fusec.ArraySpec((300, 1), F32)
    assert chosen(outer, col, row) == PointwiseSchedule("inner_vector", 4)
    assert chosen(outer, col, fusec.ArraySpec((1, 512), "float64")) == PointwiseSchedule("inner_vector", 2)
    assert chosen(outer, col, fusec.ArraySpec((1, 510), F32)) == PointwiseSchedule("inner_vector", 2)  # 510 = 2 x 255
    assert chosen(outer, col, fusec.ArraySpec((1, 511), F32)) == PointwiseSchedule("strided", 1)
    assert chosen(outer, fusec.ArraySpec((300, 512), F32), row) == PointwiseSchedule("inner_vector", 4)


def test_schedule_heuristics_follow_the_layout_for_outer_axes_and_few_long_rows() -> None:
    """cols: the warp walks whichever axis the arrays are contiguous along (the kept one, as wide as it is up
    to a warp; or the reduced one); few long rows and rows strided in memory run as cols, split across blocks."""
    def chosen(fn, shape, dtype=F32):
        _, region = region_of(fn, fusec.ArraySpec(shape, dtype))
        return choose(analyze(region))

    assert chosen(col_sum, (1 << 20, 8)) == ColSchedule("last_block", 8, 32)  # one tile: split across blocks
    assert chosen(col_sum, (1 << 20, 3)) == ColSchedule("last_block", 4, 64)
    assert chosen(col_sum, (4096, 4096)) == ColSchedule("grid_barrier", 32, 8)  # 128 tiles: no counter each
    assert chosen(col_sum, (8192, 8192)) == ColSchedule("tiles", 32, 32)  # 256 tiles of 1024 threads fill an H200
    assert chosen(col_sum, (40, 8192)) == ColSchedule("tiles", 32, 32)  # 40 rows: 32 threads per column
    assert chosen(col_sum, (64, 1 << 20)) == ColSchedule("tiles", 256, 1)  # a thread per column
    assert chosen(channel_sum, (8, 64, 14, 14)) == ColSchedule("grid_barrier", 1, 256)  # reduced axis fastest
    assert chosen(row_sum_of_transposed, (4096, 4096)) == ColSchedule("grid_barrier", 32, 8)  # rows strided
    # few long rows; the denominator takes the maximum's pass (online), so two passes over the row, not three
    assert chosen(softmax, (64, 100_000)) == ColSchedule("grid_barrier", 1, 256, one_pass=True)
    assert chosen(softmax, (1024, 100_000)) == RowSchedule("block", 256, one_pass=True)  # enough rows for every SM
    assert chosen(softmax, (64, 8192)).mapping == "block_regs"  # fits in registers


def test_cols_split_launch_fills_the_device_and_sizes_its_workspace() -> None:
    """The grid of a split cols launch is tiles x blocks per tile (what the kernel reads back from gridDim),
    as many blocks per tile as fill the resident capacity, within the reduced extent's worth and (grid
    barrier) the capacity itself; a launch that does not split takes no workspace."""
    def policy(fn, shape, forced=None):
        graph, region = region_of(fn, fusec.ArraySpec(shape, F32))
        return generate(region, schedule=forced).spec.launch

    tall = policy(col_sum, (1 << 20, 8))  # 1 tile of 8 columns; 2^20 rows / (32 threads x 16) = 2048 at most
    assert tall.blocks == 1 and tall.grid(264) == 264 and tall.grid(4000) == 2048
    assert tall.workspace_bytes(264) == 128 + 264 * 8 * 16
    short = policy(col_sum, (1000, 8))  # 1000 rows: one block folds them
    assert short.grid(1056) == 1 and short.workspace_bytes(1) == 0
    wide = policy(col_sum, (4096, 4096))  # 128 tiles of 32 under a grid barrier
    assert wide.cooperative and wide.grid(1056) == 128 * 8 and wide.grid(200) == 128 and wide.workspace_bytes(128) == 0
    fixed = policy(col_sum, (4096, 4096), "cols:grid_barrier,blocks=3")
    assert fixed.grid(1056) == 128 * 3 and fixed.grid(300) == 128 * 2  # at most the resident capacity
    assert "up to 3 blocks each, splitting the reduced extent (3 forced" in fixed.describe()
    assert policy(col_sum, (4096, 4096), "cols:tiles").grid(1056) == 128
    assert policy(col_sum, (8192, 8192)).grid(264) == 256  # 256 tiles fill the device: no split


def test_schedule_parse_fills_what_is_left_out_from_the_heuristics() -> None:
    _, region = region_of(softmax, fusec.ArraySpec((64, 8192), F32))
    nest = analyze(region)
    heuristic = choose(nest)
    forced = resolve(nest, "rows:block_regs,threads=512")
    assert (forced.row_threads, forced.elems, forced.vec, forced.hold, forced.fast_division) == (
        512, heuristic.elems, heuristic.vec, heuristic.hold, True)
    assert resolve(nest, "rows:warp") == RowSchedule("warp", 32, one_pass=True)  # a re-read row: one pass
    assert resolve(nest, "rows:warp,one_pass=0") == RowSchedule("warp", 32, one_pass=False)
    assert heuristic.one_pass is False  # held in registers: the second pass reads registers
    assert resolve(nest, "rows:block_regs,fast_division=0").fast_division is False


@pytest.mark.parametrize("text, message", [
    ("rows", "expected KIND:VARIANT"),
    ("tiles:cols", "expected KIND:VARIANT"),
    ("rows:bogus", "rows schedules are warp, block, warp_regs, block_regs, not 'bogus'"),
    ("rows:warp_regs,threads", "is not KEY=VALUE"),
    ("rows:warp_regs,tile=4", "is not KEY=VALUE with a rows key"),
    ("rows:warp_regs,threads=many", "threads='many' is not a valid value"),
    ("rows:warp_regs,fast_division=yes", "is not a valid value"),
])
def test_schedule_parse_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(text)


@pytest.mark.parametrize("fn, shape, layouts, forced, message", [
    (softmax, (64, 100), None, "pointwise:vector", "is for a pointwise kernel, but k0 is a rows kernel"),
    (softmax, (64, 100), ("f",), "rows:warp_regs", "only when it is one axis along which every array steps"),
    (softmax, (64, 100), None, "rows:warp_regs,threads=8,elems=4", "hold rows of at most 32, not 100"),
    (softmax, (64, 100), None, "rows:warp_regs,threads=64", "warp_regs takes 1, 2, 4, 8, 16 or 32 threads"),
    (softmax, (64, 100), None, "rows:warp_regs,elems=6,vec=4", "elems must be a positive multiple of vec"),
    (softmax, (64, 100), None, "rows:warp,vec=4", "belong to the register schedules"),
    (softmax, (64, 100), None, "rows:warp_regs,hold=0", "hold=0: v0 is not a value a phase computes"),
    (gelu, (1029, 917), ("f",), "pointwise:vector,vec=4", "a vector loop needs every array to step by one"),
    (gelu, (1029, 917), None, "pointwise:vector,vec=8", "moves 32 bytes of ld0 per step"),
    (gelu, (1029, 917), None, "pointwise:strided,vec=4", "vec=4 needs the vector loop"),
    (mean_var, (1029, 917), None, "reduce-all:last_block,one_pass=0", "use grid_barrier"),
    (col_sum, (1029, 917), None, "cols:tiles,one_pass=1", "softmax denominators in one pass, and this kernel has none"),
    (gelu, (1029, 917), None, "pointwise:vector,one_pass=1", "not KEY=VALUE with a pointwise key"),
    (gelu, (1029, 917), None, "pointwise:tiled", "an input contiguous along another axis than the outputs"),
    (gelu, (1029, 917), None, "pointwise:inner_vector,vec=4", "this loop is one flat index"),
    (transpose_affine, (64, 64), None, "pointwise:inner_vector,vec=4", "steps by 64 along the innermost axis"),
    (transpose_affine, (64, 64), None, "pointwise:tiled,vec=4", "one element at a time"),
    (transpose_affine, (64, 64), None, "pointwise:tiled,tile=48", "tile .the tile.s edge. is 8, 16, 32 or 64"),
    (gelu, (1029, 917), None, "pointwise:vector,tile=64", "tile belongs to the tiled loop"),
    (col_softmax, (1029, 917), None, "cols:tiles,tile=64,split=32", "2048 threads per block"),
    (col_softmax, (1029, 917), None, "cols:last_block", "use grid_barrier"),
    (col_sum, (1029, 4096), None, "cols:last_block", "at most 30 tiles; this kernel has 128"),
    (col_sum, (1029, 917), None, "cols:tiles,blocks=2", "blocks .per tile. belongs to the split variants"),
])
def test_schedule_that_does_not_fit_its_region_raises_with_the_reason(fn, shape, layouts, forced, message) -> None:
    graph, region = region_of(fn, fusec.ArraySpec(shape, F32))
    lay = {}
    if layouts:
        c = ArrayLayout.c_contiguous(shape).strides
        lay = {graph.inputs[0]: ArrayLayout(tuple(reversed(c)), False)}
    with pytest.raises(ScheduleError, match=message):
        generate(region, lay, forced)


# ---- forced schedules run and compile -------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(TWO_SCHEDULES))
def test_schedule_two_forced_schedules_give_numpy_results_and_compile(case: str, rng) -> None:
    """Two schedules forced on one region: different kernels, each compiles with NVRTC without spills, and the
    function run with each (the NumPy backend on the CPU; the GPU suite runs the kernels) gives NumPy's result."""
    fn, shape, first, second = TWO_SCHEDULES[case]
    spec = fusec.ArraySpec(shape, F32)
    x = random_array(rng, shape, F32, special=False)
    want = fn(x)
    specs = []
    for i, forced in enumerate((first, second)):
        fused = fusec.fuse(fn, schedules={"k0": forced})
        assert len(fused.plan(spec)) == 1
        got = fused(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert_matches_numpy(g, np.asarray(w))
        kernel = fused.explain(spec).kernels[0]
        assert kernel.schedule == resolve(analyze(fused.plan(spec).kernels[0].region), forced)
        specs.append(generate(fused.plan(spec).kernels[0].region, schedule=forced, name=f"s{i}").spec)
    assert specs[0].schedule != specs[1].schedule
    assert render_body(specs[0]).replace("s0_", "s1_") != render_body(specs[1])
    result = nvrtc.compile_cubin(render_module(specs), "sm_90")
    for s in specs:
        report = result.kernel(s.name)
        assert report.spills == 0, f"{s.name} ({s.schedule}) spills: {report}"


def test_schedule_forced_by_kernel_name_through_fuse_and_with_schedules() -> None:
    spec = fusec.ArraySpec((64, 1000), F32)
    base = fusec.fuse(softmax)
    forced = base.with_schedules({"k0": "rows:block"})
    assert base.schedules == {} and str(forced.schedules["k0"]) == "rows:block"
    assert "a block per row" in forced.cuda_source(spec) and "a block per row" not in base.cuda_source(spec)
    with pytest.raises(ScheduleError, match="no kernel k7 to schedule: the kernels are k0"):
        base.with_schedules({"k7": "rows:warp"}).cuda_source(spec)
    with pytest.raises(ScheduleError, match="rows schedules are"):
        fusec.fuse(softmax, schedules={"k0": "rows:nope"})
    with pytest.raises(fusec.FusecTypeError, match="schedules= takes a dict"):
        fusec.fuse(softmax, schedules=["rows:warp"])


def test_schedule_error_names_the_callers_line() -> None:
    with pytest.raises(ScheduleError) as info:
        fusec.fuse(softmax, schedules={"k0": "rows:warp_regs,threads=3"}).cuda_source(fusec.ArraySpec((4, 8), F32))
    assert info.value.loc is not None and info.value.loc.startswith(__file__)


def test_explain_prints_each_kernels_schedule() -> None:
    spec = fusec.ArraySpec((8192, 8192), F32)
    text = str(fusec.fuse(softmax).explain(spec))
    assert "  schedule: rows:block_regs,threads=256,elems=32,vec=4,hold=" in text
    assert "(forced)" not in text
    text = str(fusec.fuse(softmax, schedules={"k0": "rows:block"}).explain(spec))
    assert "  schedule: rows:block (forced)\n  launch: block schedule, 256 threads per block, grid 8192" in text


def test_cli_explain_forces_a_schedule(capsys) -> None:
    from fusec.__main__ import main

    assert main(["explain", "examples/softmax.py:softmax", "--arg", "f32[64,1000]", "--schedule", "k0=rows:warp",
                 "--source"]) == 0
    out = capsys.readouterr().out
    assert "schedule: rows:warp (forced)" in out and "a warp per row" in out
    assert main(["explain", "examples/softmax.py:softmax", "--arg", "f32[64,1000]", "--schedule",
                 "k0=rows:warp_regs,threads=7"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fusec: error: --schedule: schedule rows:warp_regs,threads=7") and err.count("\n") == 1


def test_schedule_decides_the_source_and_so_the_compile_cache_key() -> None:
    """Sources are the compile caches' keys (in memory and on disk); a schedule is a function of the region
    and layouts, and a different schedule gives a different source."""
    _, region = region_of(softmax, fusec.ArraySpec((64, 1000), F32))
    default = generate(region)
    assert default.source == generate(region, schedule=default.schedule).source
    assert default.source == generate(region, schedule=default.schedule.text()).source
    assert default.source != generate(region, schedule="rows:warp").source


# ---- layouts --------------------------------------------------------------------------------------------------


def test_layouts_of_arrays_and_specs() -> None:
    x = np.zeros((6, 8), np.float32)
    assert layout_of(x) == ArrayLayout((8, 1), True, layout_of(x).align)
    assert layout_of(x.T).strides == (1, 8) and not layout_of(x.T).contiguous
    assert layout_of(x[:, 1:]).align == 4  # one element past a 16-byte aligned start
    assert layout_of(fusec.ArraySpec((6, 8), F32)) is None  # fresh: C-contiguous, aligned
    assert layout_of(fusec.ArraySpec((6, 8), F32, strides=(1, 6))) == ArrayLayout((1, 6), False)
    assert layout_of(3.0) is None
    odd = np.lib.stride_tricks.as_strided(np.zeros(16, np.uint8).view(np.float32), (3,), (5,))
    with pytest.raises(fusec.FusecValueError, match="not multiples of the itemsize 4"):
        layout_of(odd)
    assert layouts_of(["a", "b", "c"], {"a": x.T, "b": fusec.ArraySpec((6, 8), F32)}) == {"a": layout_of(x.T)}
