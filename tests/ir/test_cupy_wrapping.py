"""Tracing reaches CuPy's functions: every function fusec traces is wrapped in ``cupy`` while a trace runs.

CuPy's functions do not take fusec's Tracer (they type-check in Cython, or build CuPy arrays of their own:
``cupy.take_along_axis`` indexes with ``cupy.arange``), so the tracer wraps them. The wrapped set follows the
registry (``fusec.frontend.registry``): a function fusec learns to trace reaches CuPy users without a list to
update. A stand-in ``cupy`` module (no GPU here) whose functions refuse anything but their own arrays checks it.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import fusec
from fusec.frontend.registry import FUNCTIONS
from fusec.frontend.trace import created_functions, wrapped_functions


class _Ufunc:
    nin = 1

    def __call__(self, x):
        return np.exp(x)


def _refusing(name):
    def refuse(*args, **kwargs):
        if not all(isinstance(a, np.ndarray) for a in args):
            raise TypeError(f"stand-in cupy.{name}: unsupported type")
        return getattr(np, name)(*args, **kwargs)

    return refuse


@pytest.fixture
def fake_cupy(monkeypatch):
    module = types.ModuleType("cupy")
    for name in ("take_along_axis", "sum", "where", "transpose"):
        setattr(module, name, _refusing(name))
    module.exp = _Ufunc()
    monkeypatch.setitem(sys.modules, "cupy", module)
    return module


def test_cupy_wrapping_covers_every_traced_function():
    cupy_names = {name for module, name, _ in wrapped_functions() if module == "cupy"}
    created = {name for _, name, _ in created_functions()}  # np.arange, np.zeros...: wrapped as array creators
    assert cupy_names == {name for name in FUNCTIONS if "." not in name} - created
    assert {"take_along_axis", "take", "sum", "where"} <= cupy_names


def test_cupy_wrapping_traces_take_along_axis_and_restores_the_module(fake_cupy):
    cp = fake_cupy
    original = cp.take_along_axis

    def f(x, t):
        picked = cp.take_along_axis(x, t[:, None], axis=1)[:, 0]
        return cp.where(picked > 0, picked, 0.0) + cp.sum(x, axis=1)

    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    t = rng.integers(-9, 9, 6)
    got = fusec.fuse(f)(x, t)
    picked = np.take_along_axis(x, t[:, None], axis=1)[:, 0]
    np.testing.assert_array_equal(got, np.where(picked > 0, picked, np.float32(0)) + x.sum(axis=1))
    assert cp.take_along_axis is original and isinstance(cp.exp, _Ufunc)  # restored; the ufunc never wrapped


def test_cupy_wrapping_leaves_ufuncs_alone_while_tracing(fake_cupy):
    seen = []

    def f(x):
        seen.append(fake_cupy.exp)
        return x + 1

    fusec.fuse(f)(np.ones(3, np.float32))
    assert seen and all(isinstance(u, _Ufunc) for u in seen)
