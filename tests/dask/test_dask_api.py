"""``f(dask_array)``: lazy Dask arrays from the fused plan, on NumPy chunks (the reference interpreter),
compared with NumPy on fresh random data; split reductions within the reduction tolerance of
CORRECTNESS.md; argmax ties and NaNs as NumPy; mixed arguments; plan caching; pickling; explain; errors."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")

import dask.array as da  # noqa: E402

import fusec  # noqa: E402
from fusec.dask import dask_plan  # noqa: E402
from fusec.dask.blocks import BlockProgram  # noqa: E402
from tests.dask.chunkings import coarse_chunks  # noqa: E402
from tests.helpers import assert_matches_numpy, random_array  # noqa: E402
from tests.test_examples import NAMES, TOLERANCE, _as_tuple, load_example  # noqa: E402


def _reduction_close(got, want64, x, dtype):
    """CORRECTNESS.md: |got - want| <= c * eps(dtype) * log2(n) * sum|x| (want in float64)."""
    got = np.asarray(got, dtype=np.float64)
    n = max(x.size, 2)
    bound = 4 * np.finfo(dtype).eps * np.log2(n) * np.abs(x.astype(np.float64)).sum() + 1e-300
    assert np.all(np.abs(got - want64) <= bound), (np.abs(got - want64).max(), bound)


@pytest.mark.parametrize("name", NAMES)
def test_dask_every_example_matches_numpy(name, rng):
    module = load_example(name)
    args = module.example_inputs(rng)
    fused = getattr(module, name)
    dargs = [da.from_array(a, chunks=coarse_chunks(rng, a.shape)) if isinstance(a, np.ndarray) else a
             for a in args]
    lazy = _as_tuple(fused(*dargs))
    assert all(isinstance(r, da.Array) for r in lazy)
    got = dask.compute(*lazy, scheduler="threads")
    want = _as_tuple(module.reference(*args))
    rtol, atol = TOLERANCE.get(name, (1e-5, 1e-6))
    for g, w in zip(got, want):
        assert_matches_numpy(np.asarray(g), w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "mean", "var", "std", "any", "all"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_dask_split_reduction_matches_numpy(op, axis, rng):
    x = rng.standard_normal((29, 37)).astype(np.float32) + 0.5
    if op == "prod":
        x = (1 + 0.01 * x).astype(np.float32)
    if op in ("any", "all"):
        x = x > 2.3 if op == "any" else x > -2.3

    @fusec.fuse
    def f(a):
        return getattr(a, op)(axis=axis)

    dx = da.from_array(x, chunks=(7, 5))
    got = f(dx).compute()
    want = getattr(x, op)(axis=axis)
    assert got.shape == want.shape and got.dtype == want.dtype
    if op in ("max", "min", "any", "all"):
        np.testing.assert_array_equal(got, want)
    elif op == "std" or op == "var":
        np.testing.assert_allclose(got, getattr(x.astype(np.float64), op)(axis=axis), rtol=2e-6)
    else:
        _reduction_close(got, getattr(x.astype(np.float64), op)(axis=axis), x, np.float32)


def test_dask_reduction_over_axis_inside_one_chunk_is_one_stage(rng):
    x = rng.standard_normal((40, 30)).astype(np.float32)

    @fusec.fuse
    def softmax(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    dx = da.from_array(x, chunks=(8, 30))  # rows whole in each chunk: one fused program per chunk
    plan = dask_plan(*_graph_and_chunks(softmax, dx))
    assert len(plan.stages) == 1 and not plan.reductions
    e = np.exp(x - x.max(1, keepdims=True))
    assert_matches_numpy(softmax(dx).compute(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    split = da.from_array(x, chunks=(8, 7))  # rows split: (max, sum of exp) partials in one read, epilogue
    plan = dask_plan(*_graph_and_chunks(softmax, split))
    assert [len(s.partials_of) for s in plan.stages] == [1, 0] and len(plan.joint) == 1
    assert_matches_numpy(softmax(split).compute(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_dask_softmax_over_split_rows_one_pass_special_values(rng):
    softmax = load_example("softmax").softmax
    x = rng.standard_normal((12, 50)).astype(np.float32)
    x[1, :30] = -np.inf  # a chunk of -inf only: adds nothing
    x[2, :] = -np.inf  # a row of -inf only: NaN, as NumPy
    x[3, 17] = np.inf  # +inf: NaN where NumPy has it
    x[4, 40] = np.nan
    x[5] *= 80  # a large spread: the rescaling matters
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)
    for chunks in [(5, 9), (12, 1), (3, 25)]:
        got = softmax(da.from_array(x, chunks=chunks)).compute()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert_matches_numpy(got, want, rtol=1e-5, atol=1e-7)


def _graph_and_chunks(fused, *args):
    from fusec.dask import _chunks_of, _prepare

    _, graph, arrays, _ = _prepare(fused, fused._params(args, {}))
    return graph, _chunks_of(arrays)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_dask_argmax_ties_and_nans_resolve_as_numpy(op, rng):
    x = rng.integers(0, 3, size=(13, 17)).astype(np.float32)  # many ties, across chunks
    x[4, 9] = np.nan
    x[4, 2] = np.nan
    x[7, :] = 1.0

    @fusec.fuse
    def f(a):
        return getattr(a, op)(axis=1), getattr(a, op)(axis=0), getattr(a, op)()

    for chunks in [(1, 1), (5, 4), (13, 3), (2, 17)]:
        got = dask.compute(*f(da.from_array(x, chunks=chunks)))
        want = (getattr(x, op)(axis=1), getattr(x, op)(axis=0), getattr(x, op)())
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert g.dtype == w.dtype


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_dask_variance_over_split_axes_is_one_pass_chan_merge(offset, rng):
    x = (rng.standard_normal((24, 500)) + offset).astype(np.float32)  # offset: badly conditioned data

    @fusec.fuse
    def f(a):
        return a.var(axis=1), a.std(axis=1, ddof=1), a.var(), ((a - a.mean(axis=0, keepdims=True)) ** 2).mean(axis=0)

    dx = da.from_array(x, chunks=(5, 33))
    plan = dask_plan(*_graph_and_chunks(f, dx))
    assert [len(s.partials_of) for s in plan.stages if s.partials_of] == [3]  # every statistic in one read
    assert len(plan.joint) == 3
    x64 = x.astype(np.float64)
    want = (x64.var(axis=1), x64.std(axis=1, ddof=1), x64.var(), x64.var(axis=0))
    for g, w in zip(dask.compute(*f(dx)), want):
        np.testing.assert_allclose(g, w, rtol=3e-5 if offset else 2e-6)


def test_dask_layernorm_over_split_rows_matches_numpy(rng):
    x = (rng.standard_normal((16, 300)) * 3 + 1).astype(np.float32)
    layernorm = load_example("layernorm").layernorm
    got = layernorm(da.from_array(x, chunks=(4, 64))).compute()
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    assert_matches_numpy(got, want, rtol=1e-4, atol=1e-5)


def test_dask_special_values_and_chunks_of_one_element(rng):
    x = random_array(rng, (9, 6), np.float64)  # NaN, +-inf, -0.0 mixed in

    @fusec.fuse
    def f(a):
        return np.maximum(a, 0.5).sum(axis=0), np.abs(a).max(), np.where(np.isnan(a), -1.0, a * 2)

    got = dask.compute(*f(da.from_array(x, chunks=1)))
    want = (np.maximum(x, 0.5).sum(axis=0), np.abs(x).max(), np.where(np.isnan(x), -1.0, x * 2))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_dask_mixed_dask_numpy_and_scalar_arguments(rng):
    x = rng.standard_normal((20, 12)).astype(np.float32)
    bias = rng.standard_normal(12).astype(np.float32)
    scale = rng.standard_normal((20, 1)).astype(np.float32)

    @fusec.fuse
    def f(a, b, s, k):
        return (a + b) * s * k, (a * b).sum(axis=0)

    dx = da.from_array(x, chunks=(6, 5))
    got = dask.compute(*f(dx, bias, da.from_array(scale, chunks=(3, 1)), 2.5))
    want = ((x + bias) * scale * np.float32(2.5), (x * bias).sum(axis=0))
    assert_matches_numpy(got[0], want[0], rtol=1e-6, atol=1e-6)
    assert_matches_numpy(got[1], want[1], rtol=1e-5, atol=1e-5)
    assert got[0].dtype == np.float32


def test_dask_broadcast_operands_unify_chunks(rng):
    a = rng.standard_normal((10, 1, 8))
    b = rng.standard_normal((7, 8))

    @fusec.fuse
    def f(x, y):
        return x * y - y.mean(axis=0)

    got = f(da.from_array(a, chunks=(3, 1, 5)), da.from_array(b, chunks=(2, 3))).compute()
    np.testing.assert_allclose(got, a * b - b.mean(axis=0), rtol=1e-12, atol=1e-12)


def test_dask_transpose_and_zero_size_arrays(rng):
    @fusec.fuse
    def f(x, y):
        return x.T + y, (x.T * y).max(axis=1)

    a, b = rng.standard_normal((6, 9)), rng.standard_normal((9, 6))
    got = dask.compute(*f(da.from_array(a, chunks=(4, 2)), da.from_array(b, chunks=(5, 5))))
    np.testing.assert_array_equal(got[0], a.T + b)
    np.testing.assert_array_equal(got[1], (a.T * b).max(axis=1))
    empty = np.zeros((0, 4))
    g = fusec.fuse(lambda x: (x * 2).sum(axis=0))
    np.testing.assert_array_equal(g(da.from_array(empty, chunks=(1, 2))).compute(), np.zeros(4))


def test_dask_repeated_call_reuses_the_plan_and_task_names(rng):
    x = rng.standard_normal((30, 20)).astype(np.float32)
    f = fusec.fuse(lambda a: np.abs(a).sum(axis=1))
    dx = da.from_array(x, chunks=(10, 5))
    first, second = f(dx), f(dx)
    assert first.name == second.name  # the same graph: Dask computes it once when both are asked for
    plan = dask_plan(*_graph_and_chunks(f, dx))
    assert plan is dask_plan(*_graph_and_chunks(f, dx))
    programs = {id(p) for s in plan.stages for p in s.programs.values()}
    f(dx)
    assert programs == {id(p) for s in plan.stages for p in s.programs.values()}
    other = f(da.from_array(x, chunks=(10, 4)))  # a new chunking is a new plan
    assert other.name != first.name
    np.testing.assert_allclose(other.compute(), np.abs(x).sum(axis=1), rtol=1e-5)


def test_dask_unfused_function_runs_unfused_programs(rng, monkeypatch):
    x = rng.standard_normal((20, 30))
    body = lambda a: np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1)  # noqa: E731
    dx = da.from_array(x, chunks=(5, 30))
    kernels = {}
    for label, fused in (("fused", fusec.fuse(body)), ("unfused", fusec.fuse(body, fusion=False))):
        got = fused(dx).compute()
        np.testing.assert_allclose(got, body(x), rtol=1e-12)
        plan = dask_plan(*_graph_and_chunks(fused, dx), fused.fusion)
        kernels[label] = {len(p.plan.kernels) for s in plan.stages for p in s.programs.values()}
    assert kernels == {"fused": {1}, "unfused": {4}}, kernels
    monkeypatch.setenv("FUSEC_DISABLE_FUSION", "1")
    np.testing.assert_allclose(fusec.fuse(body)(dx).compute(), body(x), rtol=1e-12)


def test_dask_fused_pickles_without_compiled_state(rng):
    f = fusec.fuse(_double_sum)
    x = rng.standard_normal(50)
    f(x)
    assert len(f._traces) == 1
    g = pickle.loads(pickle.dumps(f))
    assert isinstance(g, fusec.Fused) and g.name == f.name and len(g._traces) == 0
    np.testing.assert_allclose(g(x), (2 * x).sum())
    assert pickle.loads(pickle.dumps(_decorated)) is _decorated  # a decorated module-level function: by reference
    forced = _decorated.with_schedules({"k0": "rows:warp"})  # a copy of one: by its function and options
    again = pickle.loads(pickle.dumps(forced))
    assert again is not forced and again.schedules == forced.schedules and again.fn is _decorated.fn
    program = BlockProgram("func @p(%x: f64[3]) -> f64[3] {\n  %0 = add %x, %x : f64[3]\n  return %0\n}")
    copy = pickle.loads(pickle.dumps(program))
    assert copy.text == program.text and copy.fusion and copy._compiled is None
    np.testing.assert_array_equal(copy("numpy", np.arange(3.0))[0], [0.0, 2.0, 4.0])


def _double_sum(x):
    return (2 * x).sum()


@fusec.fuse
def _decorated(x):
    return x / x.sum(axis=-1, keepdims=True)


def test_dask_explain_shows_stages_and_bytes(rng):
    x = da.zeros((64, 1000), chunks=(16, 250), dtype=np.float32)
    layernorm = load_example("layernorm").layernorm
    text = str(layernorm.explain(x))
    assert "2 stage(s)" in text and "partials of sum and its M2 (one pass" in text
    assert "stage 1: 16 block(s), 16 task(s): outputs float32[64, 1000]" in text
    report = layernorm.explain(x)
    assert report.stages[1].written == 64 * 1000 * 4
    assert report.stages[0].read == 64 * 1000 * 4  # mean and variance from one read of x
    assert report.bytes_moved == sum(s.read + s.written for s in report.stages)


def test_dask_errors_are_clear(rng):
    f = fusec.fuse(lambda a: a + 1)
    x = da.from_array(np.arange(10.0), chunks=3)
    with pytest.raises(fusec.FusecTypeError, match="out= is not supported"):
        f(x, out=np.empty(10))
    unknown = x[x > 3]
    with pytest.raises(fusec.FusecValueError, match="unknown chunk sizes"):
        f(unknown)
    g = fusec.fuse(lambda a, b: a + b)
    with pytest.raises(fusec.FusecTypeError, match="dtype <U1 is not supported"):
        g(x, da.from_array(np.array(["a"] * 10), chunks=3))


def test_dask_import_fusec_does_not_import_dask():
    code = "import sys, numpy as np, fusec; fusec.fuse(lambda x: x + 1)(np.ones(3)); print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dask_example_script_checks_itself():
    from tests.test_examples import EXAMPLES, ROOT, _env

    proc = subprocess.run([sys.executable, str(EXAMPLES / "dask_layernorm.py")], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 stage(s)" in proc.stdout and "result checked against NumPy: OK" in proc.stdout


def test_dask_refuses_ops_whose_chunking_it_does_not_know(monkeypatch):
    from fusec.dask import stages
    from fusec.ir.ops import Kind

    # as if transpose were a view the Dask path had no chunk rule for (a slice, a reshape, a gather)
    monkeypatch.setitem(stages._KNOWN, Kind.LAYOUT, {"expand_dims", "squeeze", "broadcast_to"})
    f = fusec.fuse(lambda a: a.T + 1)
    with pytest.raises(fusec.UnsupportedError, match="transpose is not supported on Dask arrays") as info:
        f(da.ones((4, 6), chunks=2))
    assert "test_dask_api.py" in str(info.value)


def test_dask_runtime_scalars_change_without_tracing_again(rng):
    """Python numbers are runtime scalars on Dask arrays too: each call's values reach every block, and a new
    value neither traces nor plans again."""

    def scaled_colsum(x, lr, step):
        return (x * lr / (1 - 0.9 ** step)).sum(axis=0)

    f = fusec.fuse(scaled_colsum)
    x = random_array(rng, (100, 30), np.float32)
    dx = da.from_array(x, chunks=(17, 11))
    for lr, step in [(0.5, 1), (0.25, 3), (1e-3, 7)]:
        got = f(dx, lr, step).compute()
        want = (x * np.float32(lr / (1 - 0.9 ** step))).sum(axis=0)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)
    assert f.cache_info().traces == 1


def test_dask_in_place_update_of_an_argument_is_refused(rng):
    def bump(x):
        x += 1
        return x.sum()

    dx = da.from_array(random_array(rng, (8, 6), np.float32), chunks=(4, 3))
    with pytest.raises(fusec.UnsupportedError, match="in place.*Dask"):
        fusec.fuse(bump)(dx)


VIEW_CASES = {
    "diff": lambda x: x[1:] - x[:-1],
    "logsumexp_m0": lambda x: np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1, keepdims=True)[:, 0],
    "reversed_step": lambda x: (x[::-2, 3:] * 2).sum(0),
    "last_and_first_column": lambda x: x[..., -1] + x[:, 0],
    "empty": lambda x: x[5:5] + 1,
    "view_of_intermediate": lambda x: np.exp(x)[::3, ::-1],
}


@pytest.mark.parametrize("name", sorted(VIEW_CASES))
def test_dask_views_of_arguments_are_dask_slices(name, rng):
    """Slices (moved down to the arguments by the passes) are taken as slices of the Dask arrays: results as
    NumPy's, on uneven chunks."""
    fn = VIEW_CASES[name]
    x = random_array(rng, (37, 29), np.float32)
    got = fusec.fuse(fn)(da.from_array(x, chunks=(10, 8))).compute()
    want = fn(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
