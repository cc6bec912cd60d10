"""Caches hold no node past the life of the graphs that use it.

Nodes are interned in ``fusec.ir.graph._INTERN``, a weak table: a node lives while something refers to it.
Building, tracing, planning, explaining and running ``fusec.fuse`` functions (CPU only: ArraySpec arguments
and NumPy arrays, which run the NumPy backend), then dropping every ``Fused`` object and plan, must leave no
node they created in the table: no module-level cache may keep one (the verifier remembers node signatures,
not nodes; canonicalize's operand order and fusion's bookkeeping live for one call).
"""

from __future__ import annotations

import gc

import numpy as np

import fusec
from benchmarks.compile_time import random_dag
from fusec.ir import graph as ir_graph
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.passes.manager import optimize_text
from tests.workloads import softmax


def _layernorm(x, w):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * w + x.sum(axis=0)


def _use_fusec() -> None:
    x = np.random.default_rng(0).random((16, 32), dtype=np.float32)
    w = np.ones(32, np.float32)
    spec, row = fusec.ArraySpec((16, 32), "float32"), fusec.ArraySpec((32,), "float32")
    for fn, specs, arrays in ((softmax, [spec], [x]), (_layernorm, [spec, row], [x, w])):
        f = fusec.fuse(fn)
        text = print_graph(f.trace(*specs))
        assert parse(text) is not None and optimize_text(text)
        assert f.plan(*specs).kernels
        assert "kernel" in str(f.explain(*specs))
        assert f(*arrays).shape == (16, 32)
        assert fusec.fuse(fn, fusion=False).plan(*specs).kernels  # the unfused pipeline too
    fn, specs = random_dag(300, seed=5)
    f = fusec.fuse(fn)
    assert f.plan(*specs).refusals
    assert str(f.explain(*specs))


def test_fused_functions_leave_no_nodes_alive_once_dropped():
    gc.collect()
    before = set(ir_graph._INTERN.values())
    _use_fusec()
    gc.collect()
    left = [n for n in ir_graph._INTERN.values() if n not in before]
    assert left == [], f"{len(left)} nodes kept alive, e.g. {left[:3]}"


def test_fused_functions_leave_no_nodes_alive_with_cuda_source():
    """The CUDA source (codegen, no GPU needed) keeps no node either."""
    gc.collect()
    before = set(ir_graph._INTERN.values())
    f = fusec.fuse(softmax)
    assert "__global__" in f.cuda_source(fusec.ArraySpec((16, 32), "float32"))
    del f
    gc.collect()
    assert [n for n in ir_graph._INTERN.values() if n not in before] == []
