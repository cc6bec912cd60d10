"""Reshapes of arguments as kernels read them: each view's layout, derived from the argument's
(:func:`fusec.schedule.layout.view_layout`, what ``explain`` and ``cuda_source`` plan with), is the layout NumPy gives
the view; every load through one addresses NumPy's element of the view, for arguments laid out several ways; and
every kernel of ``tests/ir/test_reshape.py``'s workloads compiles with NVRTC for sm_90 (no GPU needed).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from fusec.ir.interpret import run_nodes
from fusec.ir.reshape_math import argument_views
from fusec.kinds import analyze
from fusec.schedule import layout_of, layouts_of
from tests.ir.test_reshape import WORKLOADS
from tests.schedule.test_view_accesses import _layouts

LAYOUTS = ["contiguous", "offset", "strided", "reversed", "transposed"]


def _base_of(x: np.ndarray) -> np.ndarray:
    base = x
    while base.base is not None:
        base = base.base
    return base


def _address(a: np.ndarray, base: np.ndarray) -> int:
    return (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // a.itemsize


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_reshape_view_layout_is_numpys_and_loads_address_its_elements(name: str, layout: str) -> None:
    x = _layouts((6, 24), "float32")[layout]
    plan = fusec.fuse(WORKLOADS[name]).plan(x)
    views = dict(zip(plan.graph.inputs, [x]))
    run_nodes(np, argument_views(plan.graph), views)  # what the runtime takes before the kernels
    base = _base_of(x)
    flat = base.reshape(-1)
    checked = 0
    for kernel in plan.kernels:
        region = kernel.region
        derived = layouts_of(region.inputs, {plan.graph.inputs[0]: x})
        for node in region.inputs:
            if node.op in ("reshape", "slice"):
                want = layout_of(views[node])
                assert derived[node].strides == want.strides, (node, derived[node], want)
                assert derived[node].align <= want.align
        nest = analyze(region, derived)
        for key, info in nest.accesses.items():
            if key[0] != "ld" or key[1].op != "reshape":
                continue
            node, amap, view = key[1], key[2], key[3]
            value = views[node]
            start = _address(value, base) + (info.offset or 0)
            for c in itertools.product(*(range(d) for d in nest.shape)):
                index = tuple(c[a] if a is not None else 0 for a in amap)
                if view is not None:
                    index = tuple(first + step * i for (first, step), i in zip(view, index))
                address = start + sum(ci * v for ci, v in zip(c, info.vector))
                assert flat[address] == value[index], (node, c)
            checked += 1
    reads_views = any(n.op == "reshape" for k in plan.kernels for n in k.region.inputs)
    assert (checked > 0) == reads_views


@pytest.mark.parametrize("layout, dtype", [("contiguous", "float32"), ("strided", "float32"), ("transposed", "float32"),
                                           ("reversed", "float16"), ("contiguous", "int32")])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_reshape_kernel_compiles_with_nvrtc(name: str, layout: str, dtype: str) -> None:
    x = _layouts((130, 36), dtype)[layout]
    fused = fusec.fuse(WORKLOADS[name])
    source = fused.cuda_source(x, full=True)
    result = nvrtc.compile_cubin(source, arch="sm_90")
    assert result.cubin[:4] == b"\x7fELF"
    assert len(fused.plan(x).kernels) == 1


def test_reshape_groupnorm_kernel_compiles_with_nvrtc() -> None:
    from benchmarks.idioms_reshape import build_groupnorm

    fused = fusec.fuse(build_groupnorm(np))
    specs = [fusec.ArraySpec((32, 256, 64, 64), "float32"), fusec.ArraySpec((256,), "float32"),
             fusec.ArraySpec((256,), "float32")]
    source = fused.cuda_source(*specs, full=True)
    result = nvrtc.compile_cubin(source, arch="sm_90")
    (kernel,) = fused.plan(*specs).kernels
    assert f" {kernel.label}(" in source
    assert result.kernel(kernel.label).spills == 0
