"""``fusec.runtime.launch.run_plan``'s bookkeeping on the CPU: the GPU path's order of argument views, reshapes read
back between kernels, kernel launches and returned views, with NumPy standing in for CuPy and each region run by
the reference interpreter (seeing only its declared inputs, as a kernel does). The kernels themselves are the GPU
tests' business (``tests/gpu``); this checks what happens around them on every machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fusec
import fusec.runtime.executable
import fusec.runtime.launch
from fusec.ir.interpret import run_nodes
from fusec.runtime.executable import Executable
from tests.helpers import assert_matches_numpy, random_array, seed_of


class InterpreterLauncher:
    """A launcher whose kernels are the interpreter over each region's declared inputs."""

    def __init__(self) -> None:
        self.launched: list[str] = []

    def run_region(self, region: Any, memory: dict, out: Any = None, schedule: Any = None,
                   autotune: Any = None) -> dict:
        self.launched.append(region.name)
        arrays = [n for n in region.inputs if n.op not in ("const", "size", "iota")]
        missing = [n for n in arrays if n not in memory]
        assert not missing, f"{region.name} launched before its inputs exist: {missing}"
        env = {n: memory[n] for n in arrays}
        sources = [n for n in region.inputs if n not in env]
        run_nodes(np, sources + list(region.nodes), env)
        return {n: np.array(env[n], order="C") for n in region.outputs}  # written fresh, as a kernel writes

    def recipes(self, region: Any) -> list:
        return []


FUNCTIONS = {
    "read_back_slice": lambda x: np.exp(x).reshape(-1)[::5] + 1,
    "read_back_two_groupings": lambda x: (x + 1).reshape(3, 8).sum(0)[:, None] * (x + 1).reshape(8, 3).sum(1)[:3],
    "read_back_argument": lambda x: x.reshape(4, 6) * 2,
    "read_back_then_returned": lambda x: np.cumsum(x * 2),
    "argument_split_view": lambda x: x.reshape(2, 3, 4).sum(-1),
    "returned_view": lambda x: np.exp(x).reshape(-1),
    "part_update": lambda x: _updated(x),
}


def _updated(x):
    y = x * 2
    y[1:, ::2] = -1
    return y.sum(axis=1)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_run_plan_orders_views_and_kernels_as_numpy_computes(name: str, layout: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fusec.runtime.launch, "cupy_module", lambda: np)
    fn = FUNCTIONS[name]
    rng = np.random.default_rng(seed_of("run_plan cpu", name, layout))
    x = random_array(rng, (6, 4), "float32") if layout == "contiguous" else random_array(rng, (4, 6), "float32").T
    plan = fusec.fuse(fn).plan(x)
    launcher = InterpreterLauncher()
    with np.errstate(all="ignore"):
        (got,) = fusec.runtime.launch.run_plan(plan, [x], launcher=launcher)
        want = fn(x)
    assert launcher.launched == [k.name for k in plan.kernels]
    assert_matches_numpy(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("fn", "shape"), [
    (lambda x: x.max(axis=1, initial=-1.0) * 2, (3, 0)),
    (lambda x: np.min(x, axis=0, keepdims=True, initial=7, where=x > 0), (0, 4)),
    (lambda x: x.min(initial=5.0) * 2, (0, 2)),
], ids=["max_axis", "min_where_keepdims", "min_all"])
def test_run_plan_max_min_with_initial_over_an_empty_axis_gives_initial(fn: Any, shape: tuple[int, ...],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The planned kernels of a max/min with ``initial=`` over an empty axis write the initial value (no
    reduction over the empty extent reaches a kernel)."""
    monkeypatch.setattr(fusec.runtime.launch, "cupy_module", lambda: np)
    x = np.zeros(shape, np.float32)
    plan = fusec.fuse(fn).plan(x)
    assert not any(n.op in ("max", "min") for k in plan.kernels for n in k.region.nodes)
    (got,) = fusec.runtime.launch.run_plan(plan, [x], launcher=InterpreterLauncher())
    assert_matches_numpy(got, fn(x), exact=True)


class WritingLauncher(InterpreterLauncher):
    """An :class:`InterpreterLauncher` that writes each output it is given an array for into that array, as a kernel
    writes an updated argument (or the view of an assigned part) straight into it on the GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[Any] = []

    def run_region(self, region: Any, memory: dict, out: Any = None, schedule: Any = None,
                   autotune: Any = None) -> dict:
        values = super().run_region(region, memory)
        for node, target in (out or {}).items():
            np.copyto(target, values[node])
            values[node] = target
            self.written.append(target)
        return values


def _swap(x, y):
    t = x.copy()
    x[...] = y
    y[...] = t
    return t


def _ring(s, new):
    prev = s[-1].copy()
    s[:-1] = s[1:]
    s[-1] = new
    return prev


IN_PLACE = {
    "copy_then_add": lambda x, y: (x.copy(), x.__iadd__(y))[0],
    "copy_then_part_from_a_kernel": lambda x, y: (x.copy(), x.__setitem__(slice(1, None), y[1:] * 2))[0],
    "view_times_one_then_part": lambda x, y: (x[0] * 1, x.__setitem__(0, -1))[0],
    "reversed_self_assignment": lambda x, y: (x.__setitem__(slice(None, None, -1), x), x)[1],
    "ring_buffer": lambda x, y: _ring(x[0], y[0, 0]),
    "swap": _swap,
    "add_and_return_it": lambda x, y: x.__iadd__(y * 2),
    "add_copy_then_part": lambda x, y: (x.__iadd__(y * 2), y := x.copy(), x.__setitem__(0, 5))[1],
    "whole_from_another_then_part": lambda x, y: (x.__setitem__(Ellipsis, y), x.__setitem__(slice(None, None, 2), 1),
                                                  y)[2],
}


def _executable(fn: Any, arrays: list[Any], launcher: Any) -> Executable:
    """``fusec.fuse(fn)``'s executable for ``arrays`` as :class:`fusec.Fused` makes it, on ``launcher``."""
    fused = fusec.fuse(fn)
    traced, plan, _ = fused._plan(fused._params(tuple(arrays), {}))
    return Executable(plan, structure=traced.structure, updates=traced.updates, parts=traced.parts, launcher=launcher)


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_executable_bookkeeping_keeps_values_read_before_the_writes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU path's bookkeeping (``Executable.__call__``: which kernels write into the arguments, ``run_plan``,
    the writes after it) with NumPy arrays for CuPy's and the interpreter for kernels that write where they are told:
    a value read before a write keeps what it read; the arguments end as NumPy leaves them."""
    launcher = WritingLauncher()
    monkeypatch.setattr(fusec.runtime.launch, "cupy_module", lambda: np)
    monkeypatch.setattr(fusec.runtime.executable, "cupy_module", lambda: np)
    fn = IN_PLACE[name]
    rng = np.random.default_rng(seed_of("run_gpu bookkeeping", name))
    x, y = random_array(rng, (4, 5), "float32", special=False), random_array(rng, (4, 5), "float32", special=False)
    mine, theirs = [x.copy(), y.copy()], [x.copy(), y.copy()]
    executable = _executable(fn, mine, launcher)
    assert executable.runner(mine) is None  # a call that writes into its arguments takes the checked path
    got = executable(mine)
    want = fn(*theirs)
    assert_matches_numpy(np.asarray(got), np.asarray(want), exact=True)
    for m, t in zip(mine, theirs):
        assert_matches_numpy(m, t, exact=True)
    if name == "add_and_return_it":  # the kernel wrote the new value straight into the argument, returned as it is
        assert launcher.written and launcher.written[0] is mine[0] and got is mine[0]


def test_executable_out_is_written_by_the_kernel_or_copied_into(monkeypatch: pytest.MonkeyPatch) -> None:
    """``out=`` on the GPU path (``Executable.__call__``, NumPy standing in for CuPy): an ``out`` of the result's dtype
    that shares no memory with an argument is written by the kernel itself; one over an argument, or of another
    dtype, receives a copy; the call returns the ``out`` arrays, packed as the function returns."""
    launcher = WritingLauncher()
    monkeypatch.setattr(fusec.runtime.launch, "cupy_module", lambda: np)
    monkeypatch.setattr(fusec.runtime.executable, "cupy_module", lambda: np)
    rng = np.random.default_rng(seed_of("executable out"))
    x, y = random_array(rng, (4, 5), "float32", special=False), random_array(rng, (4, 5), "float32", special=False)
    fn = lambda a, b: (a * b + 1, (a - b).sum(axis=1))  # noqa: E731
    want = fn(x, y)
    executable = _executable(fn, [x, y], launcher)
    fresh, wide = np.zeros((4, 5), np.float32), np.zeros(4, np.float64)
    got = executable([x, y], out=[fresh, wide])
    assert isinstance(got, tuple) and got[0] is fresh and got[1] is wide
    assert any(w is fresh for w in launcher.written) and not any(w is wide for w in launcher.written)
    assert_matches_numpy(fresh, want[0], exact=True)
    assert_matches_numpy(wide, want[1].astype(np.float64), exact=True)
    mine = [x.copy(), y.copy()]
    launcher.written.clear()
    got = executable(mine, out=[mine[0], np.zeros(4, np.float32)])  # out over an argument: computed aside, copied
    assert got[0] is mine[0] and not any(w is mine[0] for w in launcher.written)
    assert_matches_numpy(mine[0], want[0], exact=True)
    assert_matches_numpy(mine[1], y, exact=True)
