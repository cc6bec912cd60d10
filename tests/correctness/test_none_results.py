"""A fused function returns what the function returns (issue 33), as NumPy and ``cupy.fuse`` do: None for a
function that returns None (its in-place updates still happen), None at the positions of a returned tuple's or
list's None entries, ``()`` / ``[]`` for an empty one; per trace (a static argument may make it None on some calls
only). A call that computes no array plans no kernel and launches none. ``out=`` takes one array per array result,
or mirrors the returned tuple with None at its None entries. On the NumPy backend and on the CPU's fake GPU
(``tests/fake_cupy.py``: fusec's launcher, checked path and dispatch fast path for real)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import fusec
from fusec.runtime.executable import Executable
from fusec.runtime.results import pack_results, pack_source
from tests.fake_cupy import fake_gpu, to_device


def _add_and_none(a, b):
    return a + b, None


def _list_with_nones(a, b):
    return [None, a * b, None, a - b]


def _update_and_return_none(x, v):
    x += v
    return None


def _update_without_return(x, v):
    x *= v


def _computes_nothing(x):
    y = x + 1  # noqa: F841 - nothing returned


def _empty_tuple(x):
    return ()


def _empty_list(x):
    return []


def _update_and_empty_tuple(x, v):
    x -= v
    return ()


def _only_nones(x):
    return None, [None][0]


@contextlib.contextmanager
def _backend(kind, monkeypatch):
    """(to_device, gpu): NumPy arrays as they are, or the fake GPU's device arrays (gpu records launches)."""
    if kind == "numpy":
        yield (lambda a: a.copy()), None
    else:
        with fake_gpu(monkeypatch) as gpu:
            yield to_device, gpu


def _host(value):
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return type(value)(_host(v) for v in value)
    return np.array(value).view(np.ndarray)


BACKENDS = ["numpy", "fake_gpu"]
A, B = np.arange(1.0, 7.0).reshape(2, 3), np.linspace(-1.0, 2.0, 6).reshape(2, 3)


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("fn, want", [
    (_add_and_none, (A + B, None)),
    (_list_with_nones, [None, A * B, None, A - B]),
    (_empty_tuple, ()),
    (_empty_list, []),
    (_only_nones, (None, None)),
    (_computes_nothing, None),
], ids=lambda v: getattr(v, "__name__", ""))
def test_none_results_are_returned_where_the_function_returns_them(monkeypatch, kind, fn, want):
    fused = fusec.fuse(fn)
    with _backend(kind, monkeypatch) as (device, gpu):
        args = [device(A), device(B)][:fn.__code__.co_argcount]
        for _ in range(3):  # the checked path, then the dispatch fast path
            got = _host(fused(*args))
            assert type(got) is type(want)
            if want is None:
                continue
            assert len(got) == len(want)
            for g, w in zip(got, want):
                if w is None:
                    assert g is None
                else:
                    np.testing.assert_allclose(g, w)
        if gpu is not None:
            assert not gpu.mislaunched
            n_arrays = 0 if want is None else sum(w is not None for w in want)
            assert bool(gpu.launches) == bool(n_arrays)  # nothing computed: no kernel launched
            assert fused._fast  # the dispatch fast path ran the later calls, packing as the checked path does


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("fn", [_update_and_return_none, _update_without_return, _update_and_empty_tuple])
def test_none_results_in_place_updates_still_happen(monkeypatch, kind, fn):
    want_x = A.copy()
    want = fn(want_x, 2.0)
    fused = fusec.fuse(fn)
    with _backend(kind, monkeypatch) as (device, gpu):
        x = device(A)
        assert _host(fused(x, 2.0)) == want
        np.testing.assert_allclose(_host(x), want_x)
        assert _host(fused(x, 2.0)) == want  # and again, on the updated array
        fn(want_x, 2.0)
        np.testing.assert_allclose(_host(x), want_x)
        if gpu is not None:
            assert not gpu.mislaunched


def test_none_results_per_trace_a_static_argument_or_dtype_decides():
    def maybe(x, flag):
        return (x * 2, None) if flag else None

    def by_dtype(x):
        return x + 1 if x.dtype == np.float64 else None

    fused = fusec.fuse(maybe, static_argnames="flag")
    a = np.arange(4.0)
    got = fused(a, True)
    np.testing.assert_array_equal(got[0], a * 2)
    assert got[1] is None
    assert fused(a, False) is None
    assert fused(a, True)[1] is None and len(fused(a, True)) == 2
    typed = fusec.fuse(by_dtype)
    np.testing.assert_array_equal(typed(a), a + 1)
    assert typed(a.astype(np.float32)) is None
    np.testing.assert_array_equal(typed(a), a + 1)


def test_none_results_plan_no_kernel_for_a_function_that_computes_no_array():
    x = np.arange(4.0)
    for fn in (_computes_nothing, _empty_tuple, _empty_list, _only_nones):
        plan = fusec.fuse(fn).plan(x)
        assert len(plan.kernels) == 0
    assert len(fusec.fuse(_add_and_none).plan(x, x).kernels) == 1


def test_none_results_explain_shows_no_kernels_and_the_array_results():
    x = np.arange(4.0)
    text = str(fusec.fuse(_computes_nothing).explain(x))
    assert "-- kernels: 0 --" in text and "no kernels" in text
    text = str(fusec.fuse(_add_and_none).explain(x, x))
    assert "-- kernels: 1 --" in text


@pytest.mark.parametrize("kind", BACKENDS)
def test_none_results_out_takes_one_array_per_array_result_or_mirrors_the_nones(monkeypatch, kind):
    fused = fusec.fuse(_list_with_nones)
    with _backend(kind, monkeypatch) as (device, gpu):
        a, b = device(A), device(B)
        for out in ([device(np.zeros_like(A)), device(np.zeros_like(A))],
                    (None, device(np.zeros_like(A)), None, device(np.zeros_like(A)))):
            got = fused(a, b, out=out)
            arrays = [o for o in out if o is not None]
            assert got[0] is None and got[2] is None
            assert got[1] is arrays[0] and got[3] is arrays[1]
            np.testing.assert_allclose(_host(arrays[0]), A * B)
            np.testing.assert_allclose(_host(arrays[1]), A - B)
        single = fusec.fuse(_add_and_none)
        o = device(np.zeros_like(A))
        got = single(a, b, out=o)
        assert got[0] is o and got[1] is None
        np.testing.assert_allclose(_host(o), A + B)
        with pytest.raises(fusec.FusecValueError, match=r"returns 2 array\(s\) but out= has 3"):
            fused(a, b, out=(None, o, o))  # a None where the function returns an array
        with pytest.raises(fusec.FusecValueError, match=r"returns 0 array\(s\) but out= has 1(.|\n)*leave out="):
            fusec.fuse(_computes_nothing)(a, out=o)
        assert fusec.fuse(_empty_tuple)(a, out=()) == ()


def test_none_results_packing_one_place_for_calls_and_the_fast_path():
    assert pack_results([1, 2], "tuple", (0, 3)) == (None, 1, 2, None)
    assert pack_results([], "list", (0,)) == [None]
    assert pack_results([], "tuple") == () and pack_results([], "none") is None
    assert pack_source(["v1", "v2"], "tuple", (1,)) == "(v1, None, v2,)"
    assert pack_source([], "tuple") == "()" and pack_source([], "list") == "[]"
    assert pack_source([], "none") == "None"
    with pytest.raises(ValueError):
        Executable(fusec.fuse(_empty_tuple).plan(A), structure="single", nones=(0,))


def test_none_results_dask_returns_lazy_arrays_and_nones():
    pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")
    import dask
    import dask.array as da

    x = da.from_array(np.arange(10.0), chunks=3)
    got = fusec.fuse(_list_with_nones)(x, x)
    assert got[0] is None and got[2] is None
    np.testing.assert_array_equal(dask.compute(got[1])[0], np.arange(10.0) ** 2)
    assert fusec.fuse(_computes_nothing)(x) is None
    assert fusec.fuse(_empty_tuple)(x) == ()
    assert "0 stage(s)" in str(fusec.fuse(_computes_nothing).explain(x))
