"""``fusec.runtime.run_plan``'s bookkeeping on the CPU: the GPU path's order of argument views, reshapes read
back between kernels, kernel launches and returned views, with NumPy standing in for CuPy and each region run by
the reference interpreter (seeing only its declared inputs, as a kernel does). The kernels themselves are the GPU
tests' business (``tests/gpu``); this checks what happens around them on every machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fusec
import fusec.runtime
from fusec.ir.interpret import run_nodes
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
        return {n: np.ascontiguousarray(env[n]) for n in region.outputs}  # written fresh, as a kernel writes

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
    monkeypatch.setattr(fusec.runtime, "cupy_module", lambda: np)
    fn = FUNCTIONS[name]
    rng = np.random.default_rng(seed_of("run_plan cpu", name, layout))
    x = random_array(rng, (6, 4), "float32") if layout == "contiguous" else random_array(rng, (4, 6), "float32").T
    plan = fusec.fuse(fn).plan(x)
    launcher = InterpreterLauncher()
    with np.errstate(all="ignore"):
        (got,) = fusec.runtime.run_plan(plan, [x], launcher=launcher)
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
    monkeypatch.setattr(fusec.runtime, "cupy_module", lambda: np)
    x = np.zeros(shape, np.float32)
    plan = fusec.fuse(fn).plan(x)
    assert not any(n.op in ("max", "min") for k in plan.kernels for n in k.region.nodes)
    (got,) = fusec.runtime.run_plan(plan, [x], launcher=InterpreterLauncher())
    assert_matches_numpy(got, fn(x), exact=True)
