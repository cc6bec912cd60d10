"""Reads through windows (pads, joins) and iotas on the GPU path, checked without a GPU: for every kernel of
``tests/ir/test_joins.py``'s workloads, every access through a clamped index (``fusec.schedule.nest``: an offset,
linear strides and per axis ``clamp(first + step * c, lo, hi) * stride``) addresses, at every point of the region,
the element NumPy's padded or joined view holds there, for inputs laid out several ways; every iota access gives
the offset of NumPy's arange element there; and every such kernel compiles with NVRTC, in every kernel kind.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from fusec.ir import iota
from fusec.ir.graph import Graph
from fusec.ir.interpret import interpret
from fusec.kinds import analyze
from fusec.schedule import layouts_of
from tests.helpers import seed_of
from tests.ir.test_joins import WORKLOADS, _args


def _laid_out(x: np.ndarray, layout: str) -> np.ndarray:
    """``x``'s values in a buffer of their own: C order, transposed in memory, or every other element."""
    if layout == "transposed" and x.ndim >= 2:
        return np.ascontiguousarray(x.T).T
    if layout == "strided":
        buf = np.zeros(tuple(2 * d for d in x.shape), x.dtype)
        view = buf[tuple(slice(None, None, 2) for _ in x.shape)]
        view[...] = x
        return view
    return np.ascontiguousarray(x)


def _element(flat: np.ndarray, start: int, info, point: tuple[int, ...]) -> object:
    address = start + (info.offset or 0) + sum(c * v for c, v in zip(point, info.vector))
    address += sum(min(max(first + step * point[a], lo), hi) * stride
                   for a, first, step, lo, hi, stride in info.clamps)
    return flat[address]


def _check_accesses(fn, args: list[np.ndarray]) -> int:
    fused = fusec.fuse(fn)
    plan = fused.plan(*args)
    checked = 0
    for kernel in plan.kernels:
        region = kernel.region
        values = dict(zip(plan.graph.inputs, args))
        nest = analyze(region, layouts_of(region.inputs, values))
        for key, info in nest.accesses.items():
            if key[0] != "ld" or not (info.clamps or info.is_iota):
                continue
            array, view = key[1], key[3]
            readers = [m for m in region.nodes if array in m.operands and nest.view(m, array) == view
                       and (view is not None or m.op not in ("slice", "window"))]
            member = readers[0]
            if view is not None:  # the window (or slice) itself: its value at each point
                want = interpret(Graph("w", tuple(i for i in plan.graph.inputs if i is array), (member,)),
                                 [values[array]] if array.op == "input" else [])[0]
                amap = nest.space.maps[member]
            else:  # an iota read directly: its value broadcast along the reader's map of it
                want = iota.values(np, array.attr("count"), array.attr("start"), array.attr("next"), array.dtype)
                from fusec.ir.region import operand_map
                amap = operand_map(member, array, nest.space)
            if array.op == "iota":
                flat = iota.values(np, array.attr("count"), array.attr("start"), array.attr("next"), array.dtype)
                start = 0
            else:
                x = values[array]
                base = x
                while base.base is not None:
                    base = base.base
                flat = base.reshape(-1)
                start = (x.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // x.itemsize
            for c in itertools.product(*(range(d) for d in nest.shape)):
                element = tuple(c[a] if a is not None else 0 for a in amap)
                got = _element(flat, start, info, c)
                assert got == want[element] or (got != got and want[element] != want[element]), (member, c)
            checked += 1
    return checked


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_join_access_addresses_numpy_element(name: str, layout: str) -> None:
    fn, _ = WORKLOADS[name]
    args = [_laid_out(a, layout) for a in _args(name, "float32" if name != "onehot" else "int32")]
    checked = _check_accesses(fn, args)
    iota_or_window = name.startswith(("arange", "iota", "indices", "pad", "concat", "stack", "hstack", "vstack",
                                      "dstack", "column", "append", "rope", "slice_of", "onehot"))
    if name == "iota_all":  # reshape of a 1-d iota: read directly (no window, no slice)
        iota_or_window = True
    assert checked > 0 or not iota_or_window


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_join_kernel_compiles_with_nvrtc(name: str, dtype: str) -> None:
    fn, _ = WORKLOADS[name]
    rng = np.random.default_rng(seed_of("join compile", name, dtype))
    args = [_laid_out(a, ["contiguous", "transposed", "strided"][int(rng.integers(3))]) for a in _args(name, dtype)]
    fused = fusec.fuse(fn)
    source = fused.cuda_source(*args, full=True)
    result = nvrtc.compile_cubin(source, arch="sm_90")
    assert result.cubin[:4] == b"\x7fELF"
    assert len(fused.plan(*args).kernels) == 1


@pytest.mark.parametrize("schedule", ["rows:warp", "rows:block", "rows:block_regs", "cols:tiles", "cols:grid_barrier"])
def test_join_feeding_reductions_compiles_under_every_schedule(schedule: str) -> None:
    fn = (lambda x, y: np.concatenate([x, y], axis=-1).sum(axis=-1)) if schedule.startswith("rows") else (
        lambda x, y: np.concatenate([x, y], axis=0).sum(axis=0))
    shapes = [(64, 300), (64, 212)] if schedule.startswith("rows") else [(300, 64), (212, 64)]
    specs = [fusec.ArraySpec(s, "float32") for s in shapes]
    try:
        source = fusec.fuse(fn, schedules={"k0": schedule}).cuda_source(*specs, full=True)
    except fusec.ScheduleError as exc:  # rows held in registers need a contiguous row: a join's is clamped
        assert "regs" in schedule, exc
        return
    assert nvrtc.compile_cubin(source, arch="sm_90").cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("loop", ["strided", "inner_vector", "tiled"])
def test_iota_and_windows_compile_in_every_pointwise_loop(loop: str) -> None:
    def fn(x, b):  # an iota per row (broadcast along the rows) and an edge pad of the rows
        return np.pad(x, ((1, 1), (0, 0)), mode="edge")[2:] + b + np.arange(x.shape[0], dtype=np.float32)[:, None]

    specs = [fusec.ArraySpec((64, 128), "float32"), fusec.ArraySpec((128,), "float32")]
    if loop == "tiled":
        fn = lambda x, b: np.pad(x.T, ((0, 0), (1, 0)), mode="edge") + np.arange(65, dtype=np.float32)  # noqa: E731
        specs = [fusec.ArraySpec((64, 128), "float32"), fusec.ArraySpec((1,), "float32")]
    fused = fusec.fuse(fn, schedules={"k0": f"pointwise:{loop}"})
    source = fused.cuda_source(*specs, full=True)
    assert nvrtc.compile_cubin(source, arch="sm_90").cubin[:4] == b"\x7fELF"
    assert f"pointwise:{loop}" in source


def test_inner_vector_refuses_an_iota_or_a_clamp_along_the_innermost_axis() -> None:
    specs = [fusec.ArraySpec((64, 128), "float32")]
    for fn, why in ((lambda x: x + np.arange(128, dtype=np.float32), "index"),
                    (lambda x: np.pad(x, ((0, 0), (2, 2)), mode="edge") * 2, "clamped")):
        with pytest.raises(fusec.ScheduleError, match=why):
            fusec.fuse(fn, schedules={"k0": "pointwise:inner_vector"}).cuda_source(*specs)


def test_join_beyond_int32_uses_64_bit_indices() -> None:
    n = 2**30 + 3  # the join has 2**31 + 6 elements: int32 index math would overflow
    specs = [fusec.ArraySpec((n,), "float32"), fusec.ArraySpec((n + 3,), "float32")]
    fused = fusec.fuse(lambda x, y: np.concatenate([x, y]) + np.arange(2 * n + 3, dtype=np.float32))
    source = fused.cuda_source(*specs, full=True)
    assert "typedef long long index_t;" in source
    assert nvrtc.compile_cubin(source, arch="sm_90").cubin[:4] == b"\x7fELF"
    small = fusec.fuse(lambda x, y: np.concatenate([x, y])).cuda_source(
        fusec.ArraySpec((1000,), "float32"), fusec.ArraySpec((10,), "float32"))
    assert "typedef int index_t;" in small
