"""Containers of arrays as arguments (lists, tuples, named tuples, dicts, nested) and dicts as results, against
NumPy: one graph input per leaf, the container built again of traced values, its structure in the trace's key, its
numbers runtime scalars (static where they decide the trace), in-place updates of its arrays reaching the caller's."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import fusec
from tests.fake_cupy import fake_gpu, to_device
from tests.helpers import assert_matches_numpy, random_array, seed_of

Linear = collections.namedtuple("Linear", "w b")


def _data(shape, salt=0, dtype=np.float32):
    return random_array(np.random.default_rng(seed_of("pytrees", shape, salt)), shape, dtype, special=False)


def sgd(params, grads, hyper):
    """An optimizer step over a dict of parameters, in place, with its learning rate in a dict of numbers."""
    for name in params:
        params[name] -= hyper["lr"] * grads[name]
    return {"norm": sum(np.abs(p).sum() for p in params.values()), "count": len(params)}


def test_a_dict_optimizer_step_updates_the_callers_arrays_and_traces_once() -> None:
    f = fusec.fuse(sgd)
    params = {"w": _data((3, 4), 1), "b": _data((4,), 2)}
    grads = {"w": _data((3, 4), 3), "b": _data((4,), 4)}
    want_params = {k: v.copy() for k, v in params.items()}
    for lr in (0.1, 0.05, 0.025):
        got = f(params, grads, {"lr": lr})
        want = sgd(want_params, grads, {"lr": lr})
        assert set(got) == {"norm", "count"} and got["count"] == 2
        assert_matches_numpy(np.asarray(got["norm"]), np.asarray(want["norm"]))
        for k in params:
            assert_matches_numpy(params[k], want_params[k])
    assert f.cache_info().traces == 1  # the learning rate is a runtime scalar


def mlp(layers, x):
    for layer in layers:
        x = np.tanh(x @ layer.w.T + layer.b)
    return x


def test_nested_lists_of_named_tuples_and_a_new_structure_traces_again() -> None:
    f = fusec.fuse(mlp)
    x = _data((5, 4))
    two = [Linear(_data((6, 4), 1), _data((6,), 2)), Linear(_data((3, 6), 3), _data((3,), 4))]
    assert_matches_numpy(f(two, x), mlp(two, x))
    assert_matches_numpy(f(two, x), mlp(two, x))
    assert f.cache_info().traces == 1
    one = two[:1]
    assert_matches_numpy(f(one, x), mlp(one, x))  # another length: another trace
    assert f.cache_info().traces == 2
    graph = f.trace(two, x)
    assert [n.attr("name") for n in graph.inputs] == ["layers_0_0", "layers_0_1", "layers_1_0", "layers_1_1", "x"]


def test_dict_keys_are_part_of_the_signature() -> None:
    f = fusec.fuse(lambda d: d["a"] * 2 + d["b"])
    a, b = _data((4,), 1), _data((4,), 2)
    assert_matches_numpy(f({"a": a, "b": b}), a * 2 + b)
    assert_matches_numpy(f({"b": a, "a": b}), b * 2 + a)  # the same leaves in another order: traced again
    assert f.cache_info().traces == 2


def test_a_tuple_of_numbers_used_as_axes_becomes_static_and_one_used_as_values_stays_runtime() -> None:
    f = fusec.fuse(lambda x, axes, scale: x.sum(axis=axes) * scale[0] + scale[1])
    x = _data((2, 3, 4))
    for axes, scale in [((0, 2), (2.0, 1.0)), ((0, 2), (3.0, -1.0)), ((1,), (3.0, -1.0))]:
        assert_matches_numpy(f(x, axes, scale), x.sum(axis=axes) * scale[0] + scale[1])
    assert f.cache_info().traces == 3  # the first, then the axes static (one more trace per axes value)


def test_leaves_that_are_not_numbers_or_arrays_pass_through_and_an_empty_list_stays() -> None:
    def f(cfg, x):
        assert cfg["name"] == "gelu" and cfg["extra"] == [] and cfg["bias"] is None
        return x * cfg["gain"]

    x = _data((3,))
    assert_matches_numpy(fusec.fuse(f)({"name": "gelu", "extra": [], "bias": None, "gain": 2.0}, x), x * 2.0)


def test_a_dict_result_on_the_gpu_path_and_its_fast_path(monkeypatch) -> None:
    fn = lambda p, x: {"y": x @ p["w"] + p["b"], "s": (x * x).sum(axis=1), "none": None}  # noqa: E731
    w, b, x = _data((4, 3), 1), _data((3,), 2), _data((5, 4), 3)
    want = fn({"w": w, "b": b}, x)
    with fake_gpu(monkeypatch) as gpu:
        f = fusec.fuse(fn)
        p, dx = {"w": to_device(w), "b": to_device(b)}, to_device(x)
        results = [f(p, dx) for _ in range(3)]
    assert not gpu.mislaunched
    for got in results:
        assert list(got) == ["y", "s", "none"] and got["none"] is None
        for k in ("y", "s"):
            assert_matches_numpy(np.asarray(got[k].get() if hasattr(got[k], "get") else got[k]), want[k])


def test_a_set_argument_is_still_refused_with_its_name() -> None:
    with pytest.raises(fusec.FusecTypeError, match="argument 'x'"):
        fusec.fuse(lambda x: x)({1.0})


def test_a_dataclass_of_arrays_is_an_argument() -> None:
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Adam:
        m: np.ndarray
        v: np.ndarray
        beta: float = 0.9
        name: str = "adam"

    def step(state, g):
        assert state.name == "adam"
        return state.beta * state.m + (1 - state.beta) * g, state.v + g * g

    f = fusec.fuse(step)
    g = _data((6,), 5)
    for beta in (0.9, 0.8):
        state = Adam(_data((6,), 1), _data((6,), 2), beta)
        for got, want in zip(f(state, g), step(state, g)):
            assert_matches_numpy(got, want)
    assert f.cache_info().traces == 1  # beta: a runtime scalar


def test_a_dict_of_dask_arrays_runs_lazily_and_returns_a_dict_of_dask_arrays() -> None:
    da = pytest.importorskip("dask.array")
    fn = lambda p, g, lr: {k: p[k] - lr * g[k] for k in p}  # noqa: E731
    host = {"w": _data((64, 32), 1), "b": _data((32,), 2)}
    grads = {"w": _data((64, 32), 3), "b": _data((32,), 4)}
    lazy = {k: da.from_array(v, chunks=16) for k, v in host.items()}
    lazy_g = {k: da.from_array(v, chunks=16) for k, v in grads.items()}
    got = fusec.fuse(fn)(lazy, lazy_g, 0.5)
    assert set(got) == {"w", "b"} and all(isinstance(v, da.Array) for v in got.values())
    want = fn(host, grads, 0.5)
    for k in got:
        assert_matches_numpy(got[k].compute(), want[k])
