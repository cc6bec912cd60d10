"""Reads through slices on the GPU path, checked without a GPU: each access of a kernel that reads an input
through a slice (``fusec.schedule.nest``: an offset and strides times the steps) must address, at every point
of the region, the element NumPy's view holds there, for inputs laid out any way (transposed, strided,
reversed, offset); and every such kernel compiles with NVRTC (``tests/gpu/test_views_gpu.py`` runs them).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from fusec.ir.interpret import interpret
from fusec.kinds import analyze
from fusec.schedule import layouts_of
from tests.helpers import seed_of
from tests.ir.test_views import WORKLOADS


def _layouts(shape: tuple[int, int], dtype: str) -> dict[str, np.ndarray]:
    """Values of ``shape`` laid out several ways: fresh, a view at an offset into a larger buffer, every other
    element of one, both axes reversed, and transposed (each with values of its own)."""
    rng = np.random.default_rng(seed_of("view layouts", shape, dtype))
    r, c = shape

    def buffer(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * 100).astype(dtype)

    layouts = {
        "contiguous": buffer(r, c),
        "offset": buffer(r + 3, c + 1)[3:, 1:],
        "strided": buffer(2 * r + 1, 2 * c + 2)[1::2, 2::2],
        "reversed": buffer(r, c + 2)[::-1, c + 1:1:-1],
        "transposed": buffer(c, r).T,
    }
    assert all(a.shape == shape for a in layouts.values())
    return layouts


def _check_accesses(fn, x: np.ndarray) -> int:
    """Every read through a slice of every kernel of ``fn(x)`` addresses NumPy's element; returns how many
    such accesses there were."""
    fused = fusec.fuse(fn)
    plan = fused.plan(x)
    base = x.base if x.base is not None else x
    while base.base is not None:
        base = base.base
    flat = base.reshape(-1)
    start = (x.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // x.itemsize
    checked = 0
    for kernel in plan.kernels:
        region = kernel.region
        values = dict(zip(plan.graph.inputs, [x]))
        nest = analyze(region, layouts_of(region.inputs, values))
        slices = [n for n in region.nodes if n.op == "slice"]
        for key, info in nest.accesses.items():
            if key[0] != "ld" or info.offset is None:
                continue
            array, view = key[1], key[3]
            assert array is plan.graph.inputs[0]
            member = next(s for s in slices if s.operands[0] is array and nest.view(s, array) == view)
            want = interpret_slice(member, x)
            s_map = nest.space.maps[member]
            for c in itertools.product(*(range(d) for d in nest.shape)):
                address = start + info.offset + sum(ci * v for ci, v in zip(c, info.vector))
                element = tuple(c[a] if a is not None else 0 for a in s_map)
                assert flat[address] == want[element], (member, c, address)
            checked += 1
    return checked


def interpret_slice(member, x: np.ndarray) -> np.ndarray:
    from fusec.ir.graph import Graph

    return interpret(Graph("s", (member.operands[0],), (member,)), [x])[0]


@pytest.mark.parametrize("layout", ["contiguous", "offset", "strided", "reversed", "transposed"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_view_access_addresses_numpy_element(name: str, layout: str) -> None:
    x = _layouts((9, 10), "float32")[layout]
    checked = _check_accesses(WORKLOADS[name], x)
    assert checked > 0 or name in ("empty", "slice_of_reduction", "logsumexp")


@pytest.mark.parametrize("layout, dtype", [("contiguous", "float32"), ("strided", "float32"), ("transposed", "float32"),
                                           ("strided", "float16"), ("contiguous", "int32")])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_view_kernel_compiles_with_nvrtc(name: str, layout: str, dtype: str) -> None:
    if dtype == "int32" and name == "logsumexp":
        pytest.skip("logsumexp computes in float")
    x = _layouts((1029, 33), dtype)[layout]
    fused = fusec.fuse(WORKLOADS[name])
    source = fused.cuda_source(x, full=True)
    result = nvrtc.compile_cubin(source, arch="sm_90")
    assert result.cubin[:4] == b"\x7fELF"
    kernels = fused.plan(x).kernels
    assert len(kernels) == 1
    if any(n.op == "slice" for n in kernels[0].nodes):
        assert "_o;" in source  # a view pointer: the array's plus an offset
