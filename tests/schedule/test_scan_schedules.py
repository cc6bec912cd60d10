"""Scan kernels without a GPU: kernel counts and kinds of the scan workloads, the heuristics' schedules, forced
schedules (text round trips, refusals with the reason), what the generated source reads and writes, and an
NVRTC compile (sm_90) of every scan kernel shape: dtypes, mappings, several warps per row, several scans, views,
64-bit indices, without spills."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fusec
from fusec import ArraySpec
from fusec.codegen import nvrtc
from fusec.codegen.kernel import GeneratedKernel
from fusec.codegen.render import render_module
from fusec.kinds import ScanNest, ScanSchedule, analyze, generate, generate_plan, parse_schedule, resolve
from fusec.schedule import H200, ScheduleError, layouts_of


def exp_cumsum_div(x, t):
    return np.exp(x).cumsum(-1) / t


def masked_cumsum(x, m):
    return np.cumsum(x * m, axis=1) - x


def column_cumprod(x):
    return np.nancumprod(x, axis=0)


def two_scans(x):
    return np.cumsum(np.cumsum(x, axis=1), axis=1), np.cumprod(x, axis=1)


def scan_over_total(x):
    return x.cumsum(1) / x.sum(1, keepdims=True)


def both_axes(x):
    return np.cumsum(x, axis=0) + np.cumsum(x, axis=1)


def scan_then_later_slice(x):
    return np.cumsum(x, axis=1)[:, 5:] * 2  # the slice reads what other threads scanned: a kernel of its own


def scan_then_prefix_slice(x):
    return np.cumsum(x, axis=1)[::2, :7] * 2  # the scan of the slice: one kernel


F32 = "float32"


def _plan(fn: Callable[..., Any], *specs: Any) -> Any:
    return fusec.fuse(fn).plan(*specs)


@pytest.mark.parametrize("fn, specs, kinds", [
    (exp_cumsum_div, (ArraySpec((512, 1000), F32), np.float32(2)), ["scan"]),
    (masked_cumsum, (ArraySpec((512, 1000), F32), ArraySpec((512, 1000), "bool")), ["scan"]),
    (column_cumprod, (ArraySpec((4096, 64), F32),), ["scan"]),
    (two_scans, (ArraySpec((64, 300), "int32"),), ["scan"]),
    (scan_over_total, (ArraySpec((64, 300), F32),), ["rows", "scan"]),
    (both_axes, (ArraySpec((64, 300), F32),), ["scan", "scan"]),
    (scan_then_later_slice, (ArraySpec((64, 300), F32),), ["scan", "pointwise"]),
    (scan_then_prefix_slice, (ArraySpec((64, 300), F32),), ["scan"]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_scan_workloads_kernel_counts(fn: Callable[..., Any], specs: tuple, kinds: list[str]) -> None:
    plan = _plan(fn, *specs)
    assert sorted(k.kind for k in plan.kernels) == sorted(kinds)


def test_scan_kernel_reads_and_writes_each_array_once() -> None:
    plan = _plan(masked_cumsum, ArraySpec((512, 1000), F32), ArraySpec((512, 1000), "bool"))
    (kernel,) = plan.kernels
    assert kernel.bytes_moved == 512 * 1000 * (4 + 1 + 4)
    (generated,) = generate_plan(plan, {})
    assert sorted(generated.passes().values()) == [1, 1]
    assert plan.kernel_count_unfused == 4  # the cast of the mask, mul, cumsum, sub: one kernel each


def _arrays(plan: Any, values: Any) -> dict:
    return {n: v for n, v in zip(plan.graph.inputs, values) if isinstance(v, (ArraySpec, np.ndarray))}


def _nest(fn: Callable[..., Any], *specs: Any) -> ScanNest:
    plan = _plan(fn, *specs)
    (kernel,) = [k for k in plan.kernels if k.kind == "scan"]
    nest = analyze(kernel.region, layouts_of(plan.graph.inputs, _arrays(plan, specs)))
    assert isinstance(nest, ScanNest)
    return nest


@pytest.mark.parametrize("shape, dtype, expected", [
    ((4096, 5), F32, "scan:sequential"),
    ((4096, 100), F32, "scan:rows,threads=32,elems=4"),
    ((4096, 1000), F32, "scan:rows,threads=32,elems=8"),
    ((4096, 1000), "int64", "scan:rows,threads=32,elems=4"),
    ((4096, 100_000), F32, "scan:rows,threads=256,elems=8"),
    ((4, 1 << 20), F32, "scan:split,threads=256,elems=8"),
    ((1 << 20,), "float16", "scan:split,threads=256,elems=8"),
    ((4, 20_000), F32, "scan:rows,threads=1024,elems=8"),
], ids=str)
def test_scan_heuristic_schedules(shape: tuple[int, ...], dtype: str, expected: str) -> None:
    nest = _nest(lambda x: np.cumsum(x, axis=-1), ArraySpec(shape, dtype))
    assert resolve(nest, None, H200).text() == expected


def test_scan_few_long_rows_split_unless_a_scan_reads_a_scan() -> None:
    nest = _nest(two_scans, ArraySpec((4, 1 << 20), F32))
    assert nest.chained()
    assert resolve(nest).text() == "scan:rows,threads=1024,elems=8"
    with pytest.raises(ScheduleError, match="reads another scan's result"):
        resolve(nest, "scan:split")
    single = _nest(lambda x: (np.cumsum(x, axis=1), np.cumprod(x, axis=1) * x), ArraySpec((4, 1 << 20), F32))
    assert not single.chained() and resolve(single).mapping == "split"
    (k,) = generate_plan(_plan(lambda x: np.cumsum(x, axis=1), ArraySpec((4, 1 << 20), F32)), {})
    launch = k.spec.launch
    assert launch.cooperative and launch.split_limit == (1 << 20) // 2048
    assert launch.grid(264) == 4 * 66 and launch.workspace_bytes(264) == 128 + 4 * 264 + 96
    assert launch.grid(6) == 4 and launch.workspace_bytes(4) == 0  # no room to split: a block per row
    assert [p.role for p in k.spec.params].count("workspace") == 1


def test_scan_along_outer_axis_takes_32_rows_per_block() -> None:
    nest = _nest(column_cumprod, ArraySpec((4096, 64), F32))
    assert not nest.along_rows()
    assert resolve(nest).text() == "scan:columns,threads=8,elems=8"
    transposed = _nest(lambda x: np.cumsum(x.T, axis=1), ArraySpec((4096, 64), F32))
    assert resolve(transposed).mapping == "columns"
    many = _nest(column_cumprod, ArraySpec((64, 1 << 18), F32))  # rows enough to fill the device one thread each
    assert resolve(many).text() == "scan:columns,threads=1,elems=8"
    (k,) = generate_plan(_plan(column_cumprod, ArraySpec((4096, 64), "float64")), {})
    assert k.spec.block == (32, 8) and k.spec.launch.per_block == 32 and k.schedule.elems == 4


@pytest.mark.parametrize("text", ["scan:rows,threads=64,elems=2", "scan:rows,threads=1024,elems=16",
                                  "scan:sequential", "scan:rows,threads=32,elems=1", "scan:split,threads=128,elems=4",
                                  "scan:columns,threads=4,elems=2", "scan:columns,threads=1,elems=16"])
def test_scan_forced_schedules_round_trip(text: str) -> None:
    nest = _nest(exp_cumsum_div, ArraySpec((64, 1000), F32), np.float32(2))
    schedule = resolve(nest, text)
    assert isinstance(schedule, ScanSchedule) and schedule.text() == text
    assert resolve(nest, schedule.text()) == schedule
    assert str(parse_schedule(text)) == text


def test_scan_partial_schedule_takes_the_heuristics_fields() -> None:
    nest = _nest(exp_cumsum_div, ArraySpec((64, 1000), F32), np.float32(2))
    assert resolve(nest, "scan:rows,threads=128").text() == "scan:rows,threads=128,elems=8"


@pytest.mark.parametrize("text, why", [
    ("scan:rows,threads=48,elems=4", "whole warps"),
    ("scan:rows,threads=16,elems=4", "whole warps"),
    ("scan:rows,threads=2048,elems=4", "whole warps"),
    ("scan:rows,threads=32,elems=0", "elems"),
    ("scan:rows,threads=32,elems=17", "elems"),
    ("scan:sequential,threads=32", "belong to the rows mapping"),
    ("scan:columns,threads=64,elems=4", "1, 2, 4, 8, 16 or 32 threads"),
    ("scan:columns,threads=3,elems=4", "1, 2, 4, 8, 16 or 32 threads"),
    ("rows:warp", "is for a rows kernel"),
    ("scan:cols", "scan schedules are rows, sequential, split, columns"),
])
def test_scan_forced_schedule_refusals_say_why(text: str, why: str) -> None:
    nest = _nest(exp_cumsum_div, ArraySpec((64, 1000), F32), np.float32(2))
    with pytest.raises(ScheduleError, match=why):
        resolve(nest, text)


def test_scan_schedule_refused_by_other_kinds() -> None:
    plan = _plan(lambda x: np.exp(x), ArraySpec((64, 100), F32))
    with pytest.raises(ScheduleError, match="pointwise"):
        generate(plan.kernels[0].region, schedule="scan:sequential")


def test_scan_empty_space_launches_nothing() -> None:
    for shape in [(0, 100), (100, 0)]:
        (k,) = generate_plan(_plan(lambda x: np.cumsum(x, axis=1), ArraySpec(shape, F32)), {})
        assert k.spec.launch.grid(1000) == 0


def test_scan_source_computes_in_member_order() -> None:
    (k,) = generate_plan(_plan(exp_cumsum_div, ArraySpec((64, 1000), F32), np.float32(2)), {})
    src = k.spec
    assert [s.scan for s in src.scan_steps] == [False, True, False]
    body = k.source[k.source.index("// schedule: scan"):]
    assert body.index("fc::exp(") < body.index("fs_scan::row_exclusive<32>") < body.index("fc::div(")
    assert "carry0 = op0(carry0, total0);" in body
    assert "0x80000000U" in body  # a float sum starts from -0.0


# ---- every scan kernel shape compiles (sm_90), without spills ------------------------------------------------

def _kernels(fn: Callable[..., Any], values: list[Any], schedules: list[str | None], tag: str) -> list[GeneratedKernel]:
    plan = _plan(fn, *values)
    bound = _arrays(plan, values)
    out = []
    for i, schedule in enumerate(schedules):
        for kernel in plan.kernels:
            if kernel.kind != "scan":
                continue
            layouts = layouts_of(kernel.inputs, bound)
            out.append(generate(kernel.region, layouts, schedule, name=f"{tag}{i}_{kernel.name}"))
    return out


SCHEDULES = [None, "scan:sequential", "scan:rows,threads=32,elems=8", "scan:rows,threads=128,elems=4",
             "scan:rows,threads=1024,elems=4", "scan:columns,threads=8,elems=4", "scan:columns,threads=1,elems=8",
             "scan:split,threads=256,elems=8", "scan:split,threads=32,elems=4"]
_X = np.zeros((40, 300), np.float32)
COMPILE_CASES: dict[str, tuple[Callable[..., Any], list[Any]]] = {
    "f32": (exp_cumsum_div, [ArraySpec((512, 1000), F32), np.float32(2)]),
    "f16": (exp_cumsum_div, [ArraySpec((512, 1000), "float16"), np.float32(2)]),
    "f64_cumprod": (column_cumprod, [ArraySpec((64, 1000), "float64")]),
    "i32_mask": (masked_cumsum, [ArraySpec((64, 1000), "int32"), ArraySpec((64, 1000), "bool")]),
    "u8_two_scans": (two_scans, [ArraySpec((64, 1000), "uint8")]),
    "i64_bool": (lambda b: np.cumsum(b, axis=-1), [ArraySpec((8, 3, 100), "bool")]),
    "views": (lambda x: np.cumsum(x[::-1, ::2], axis=1) * x[::-1, ::2], [_X]),
    "transposed": (lambda x: np.cumsum(x.T, axis=1), [_X]),
    "flat": (lambda x: np.cumprod(x), [ArraySpec((100_000,), F32)]),
    "i64_few_long_rows": (two_scans, [ArraySpec((4, 1 << 20), "int64")]),
    "f32_split": (lambda x: (np.cumsum(x, axis=1), np.cumprod(x, axis=1) * x), [ArraySpec((4, 1 << 20), F32)]),
    "int64_index": (lambda x: np.cumsum(x, axis=0), [ArraySpec((1 << 16, 1 << 16), "float16")]),
}


CHAINED = {"u8_two_scans", "i64_few_long_rows"}  # a scan of a scan: no split schedule


@pytest.mark.parametrize("case", sorted(COMPILE_CASES))
def test_scan_kernels_compile_without_spills(case: str) -> None:
    fn, values = COMPILE_CASES[case]
    kernels = _kernels(fn, values, SCHEDULES if case not in CHAINED else SCHEDULES[:-2], case)
    assert kernels
    result = nvrtc.compile_cubin(render_module([k.spec for k in kernels]), "sm_90")
    for k in kernels:
        res = result.kernel(k.name)
        assert res.spills == 0 and res.stack_frame == 0, f"{k.name} ({k.schedule}): {res}"
    if case == "int64_index":
        assert all(k.spec.index_ctype == "long long" for k in kernels)


# ---- scans reading index-generated values (iotas, windows of iotas), under every schedule -------------------

def _half(n: int) -> int:
    return n // 2


# Scans whose prologue or epilogue reads values computed from indices: an iota's element is an expression of its
# access's offset, which the rows, columns and split mappings hold per element (``<access>_a[j]``) and a read
# through a window (pads, joins, rolls) clamps. Shared with tests/gpu/test_scan_gpu.py (rows of 3 or more).
INDEX_VALUE_CASES: dict[str, Callable[[Any], Any]] = {
    "arange_epilogue": lambda x: np.cumsum(x, axis=-1) / np.arange(1, x.shape[-1] + 1),
    "arange_prologue": lambda x: np.cumsum(x * np.arange(x.shape[-1], dtype=x.dtype), axis=-1),
    "pad": lambda x: np.cumsum(x, axis=-1) - np.pad(np.arange(x.shape[-1] - 2, dtype=x.dtype), 1),
    "pad_edge": lambda x: np.cumsum(x * np.pad(np.arange(x.shape[-1] - 2, dtype=x.dtype), 1, mode="edge"), axis=-1),
    "roll": lambda x: np.cumsum(x + np.roll(np.arange(x.shape[-1], dtype=x.dtype), 3), axis=-1),
    "concatenate": lambda x: np.cumsum(x, axis=-1) - np.concatenate(
        [np.arange(_half(x.shape[-1])), np.arange(x.shape[-1] - _half(x.shape[-1]))]),
    "tril": lambda x: np.cumsum(x * np.tril(np.ones(x.shape[-2:], x.dtype)), axis=-1),
    "eye": lambda x: np.cumsum(x + np.eye(*x.shape[-2:], dtype=x.dtype), axis=-1) * np.eye(*x.shape[-2:], k=1),
    "linspace": lambda x: np.cumsum(x, axis=-1) / np.linspace(1, 2, x.shape[-1]),
    "linspace_cummax": lambda x: np.maximum.accumulate(x * np.linspace(-1, 1, x.shape[-1]), axis=-1),
    "window_cummin_cummax": lambda x: np.maximum.accumulate(np.minimum.accumulate(
        x - np.pad(np.arange(2, 4, dtype=x.dtype), (x.shape[-1] - 2, 0), mode="edge"), axis=-1), axis=-1),
}
CHAINED_INDEX_CASES = {"window_cummin_cummax"}  # a scan of a scan: no split schedule


@pytest.mark.parametrize("case", sorted(INDEX_VALUE_CASES))
@pytest.mark.parametrize("values", [[ArraySpec((1000,), F32)], [ArraySpec((40, 300), "int32")]], ids=["f32", "i32_2d"])
def test_scan_reading_index_values_compiles_under_every_schedule(case: str, values: list[Any]) -> None:
    """Every scan schedule of a scan reading an iota (directly or through a window) renders and compiles: the rows
    mappings used to name the iota's access variable (``ld0``) without taking it from ``ld0_a[j]``, and every
    mapping declared a pointer plus offset for an iota read through a window (``ld0_o``), which has neither."""
    fn = INDEX_VALUE_CASES[case]
    if len(values[0].shape) == 1 and case in ("tril", "eye"):
        values = [ArraySpec((1, 1000), F32)]
    chained = case in CHAINED_INDEX_CASES
    kernels = _kernels(fn, values, SCHEDULES[:-2] if chained else SCHEDULES, case)
    assert len(kernels) == len(SCHEDULES) - 2 * chained  # one scan kernel, every schedule
    assert all("fc::iota_" in k.source for k in kernels)
    result = nvrtc.compile_cubin(render_module([k.spec for k in kernels]), "sm_90")
    assert all(result.kernel(k.name).spills == 0 for k in kernels)


FUZZ_SCANS_OF_IOTAS = {  # GPU fuzz runs of 2026-12-07 (fuzz-report.txt, fuzz-report-seed11.txt): NVRTC rejected these
    "1755": """func @fuzz1755_int(%x: u16[2,2], %y: i8[]) -> bool[1,2,1,2] {
  %0 = cummax %x {axis=1} : u16[2,2]
  %1 = cast %0 : i32[2,2]
  %2 = logical_or %1, %1 : bool[2,2]
  %3 = expand_dims %2 {axes=[0, 2]} : bool[1,2,1,2]
  %4 = cast %3 : u32[1,2,1,2]
  %5 = iota {count=2, next=1, start=0} : u8[2]
  %6 = cast %5 : u32[2]
  %7 = eq %4, %6 : bool[1,2,1,2]
  return %7
}""",
    "4165": """func @fuzz4165_int(%x: i32[]) -> u8[4,1,1] {
  %0 = const 91 : u8[]
  %1 = iota {count=2, next=3, start=2} : i16[2]
  %2 = window %1 {count=[4], hi=[1], lo=[1], start=[-3], step=[2]} : i16[4]
  %3 = cummin %2 {axis=0} : i16[4]
  %4 = cummax %3 {axis=0} : i16[4]
  %5 = expand_dims %4 {axes=[1, 2]} : i16[4,1,1]
  %6 = cast %5 : u8[4,1,1]
  %7 = bitwise_xor %0, %6 : u8[4,1,1]
  return %7
}""",
    "4166": """func @fuzz4166_int(%x: i32[]) -> i16[4,1,1] {
  %0 = iota {count=2, next=3, start=2} : i16[2]
  %1 = window %0 {count=[4], hi=[1], lo=[1], start=[-3], step=[2]} : i16[4]
  %2 = cummin %1 {axis=0} : i16[4]
  %3 = cummax %2 {axis=0} : i16[4]
  %4 = expand_dims %3 {axes=[1, 2]} : i16[4,1,1]
  %5 = min %4 {axes=[], keepdims=false} : i16[4,1,1]
  return %5
}""",
}


@pytest.mark.parametrize("graph", sorted(FUZZ_SCANS_OF_IOTAS))
def test_scan_fuzz_graphs_reading_iotas_compile_under_every_schedule(graph: str) -> None:
    from fusec.ir.text import parse
    from fusec.runtime.plan import make_plan

    plan = make_plan(parse(FUZZ_SCANS_OF_IOTAS[graph]))
    (kernel,) = [k for k in plan.kernels if k.kind == "scan"]
    nest = analyze(kernel.region, {})
    assert isinstance(nest, ScanNest)
    schedules = SCHEDULES[:-2] if nest.chained() else SCHEDULES
    kernels = [generate(kernel.region, {}, s, name=f"g{graph}_{i}") for i, s in enumerate(schedules)]
    result = nvrtc.compile_cubin(render_module([k.spec for k in kernels]), "sm_90")
    assert set(result.kernels or ()) == {k.name for k in kernels}
