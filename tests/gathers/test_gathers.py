"""Gathers (issue 17, item 3) without a GPU: every traced form against NumPy on the NumPy backend (shapes,
negative indices and steps, empty and 0-d results, odd sizes), NumPy's IndexError for indices out of range,
the errors for what does not trace, the IR text round trip and verifier, the passes (interpreter results
unchanged, kernel counts), and an NVRTC compile of every kernel the workloads produce."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from fusec.ir.interpret import interpret
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.ir.verify import verify
from fusec.passes.manager import optimize_text
from fusec.support.errors import FusecError, FusecIndexError, FusecValueError, UnsupportedError, VerifyError
from tests.gathers.workloads import WORKLOADS
from tests.helpers import assert_matches_numpy, random_arguments, seed_of

DTYPES = ["float32", "float16", "int32"]
INDEX_DTYPES = ["int32", "int64"]


def _specs(args: tuple) -> list[fusec.ArraySpec]:
    return [fusec.ArraySpec(a.shape, a.dtype) for a in args]


# ---- workloads on the NumPy backend -----------------------------------------------------------------------


@pytest.mark.parametrize("it", INDEX_DTYPES + ["uint16"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gather_workload_matches_numpy(name: str, dtype: str, it: str) -> None:
    w = WORKLOADS[name]
    rng = np.random.default_rng(seed_of(name, dtype, it))
    args = w.make(rng, dtype, it)
    with np.errstate(all="ignore"):
        want = w.fn(*args)
        got = fusec.fuse(w.fn)(*args)
    assert_matches_numpy(got, want)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gather_workload_kernel_count(name: str) -> None:
    w = WORKLOADS[name]
    args = w.make(np.random.default_rng(0), "float32", "int64")
    assert len(fusec.fuse(w.fn).plan(*_specs(args)).kernels) == w.kernels


def test_gather_cross_entropy_is_one_row_kernel_then_the_mean() -> None:
    w = WORKLOADS["cross_entropy"]
    plan = fusec.fuse(w.fn).plan(fusec.ArraySpec((8192, 32768), "float32"), fusec.ArraySpec((8192,), "int64"))
    kinds = [k.region.kind for k in plan.kernels]
    assert kinds == ["rows", "reduce-all"]
    row = plan.kernels[0].region
    assert [n.op for n in row.nodes].count("gather") == 1
    assert {n.op for n in row.inputs} == {"input"}  # reads logits and targets, nothing another kernel wrote


# ---- indexing forms -----------------------------------------------------------------------------------------

I = np.array([[1, -2, 0]])  # noqa: E741  (2-d, negative)
J = np.array([4, -1, 2])
K = np.array(3)  # 0-d

KEYS = {
    "rows": lambda x, i, j, k: x[j],
    "cols": lambda x, i, j, k: x[:, j],
    "last": lambda x, i, j, k: x[..., j],
    "two_adjacent": lambda x, i, j, k: x[i, j],
    "two_apart": lambda x, i, j, k: x[i, :, j],
    "int_and_array": lambda x, i, j, k: x[1, :, j],
    "int_and_array_adjacent": lambda x, i, j, k: x[:, -1, j],
    "none_between": lambda x, i, j, k: x[i, None, j],
    "none_first": lambda x, i, j, k: x[None, j],
    "ellipsis_middle": lambda x, i, j, k: x[j, ..., j],
    "slice_then_array": lambda x, i, j, k: x[1:, ::-2][i],
    "reversed_arg": lambda x, i, j, k: x[::-1, j],
    "zero_d_index": lambda x, i, j, k: x[k],
    "zero_d_two": lambda x, i, j, k: x[k, k],
    "zero_d_all": lambda x, i, j, k: x[k, k, k],
    "three": lambda x, i, j, k: x[j, j, j],
    "transposed": lambda x, i, j, k: x.T[j],
    "computed_index": lambda x, i, j, k: x[(j + 5) % 4],
    "index_of_reduction": lambda x, i, j, k: x[:, :, 0][j, x.argmax(2)[j % 4, 0] % 6],
    "computed_array": lambda x, i, j, k: (x * 2 + 1)[:, j] - x[:, j],
    "list_one": lambda x, i, j, k: x[[2]],
    "list_progression": lambda x, i, j, k: x[:, [4, 2, 0]],
    "list_empty": lambda x, i, j, k: x[:, []],
    "take_flat": lambda x, i, j, k: np.take(x[0, 0], j),
    "take_scalar": lambda x, i, j, k: np.take(x, -1, axis=2),
    "take_nd": lambda x, i, j, k: x.take(i, axis=-1),
    "take_along": lambda x, i, j, k: np.take_along_axis(x, (np.abs(i) % 3)[:, :, None], axis=1),
    "take_along_none": lambda x, i, j, k: np.take_along_axis(x[0, 0], j, axis=None),
    "take_list": lambda x, i, j, k: np.take(x, [5, 2], axis=-1) + x.take([1], axis=0)[..., :2],
    "empty_index": lambda x, i, j, k: x[:, j[:0]],
    "empty_array": lambda x, i, j, k: x[:0, j],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key", sorted(KEYS))
def test_gather_indexing_matches_numpy(key: str, dtype: str) -> None:
    fn = KEYS[key]
    rng = np.random.default_rng(seed_of(key, dtype))
    x = (rng.standard_normal((5, 6, 7)) * 10).astype(dtype)
    for it in INDEX_DTYPES:
        args = (x, I.astype(it), J.astype(it), K.astype(it))
        want = fn(*args)
        got = fusec.fuse(fn)(*args)
        assert_matches_numpy(got, want, exact=True)


def test_gather_of_non_contiguous_arguments_matches_numpy() -> None:
    rng = np.random.default_rng(3)
    base = rng.standard_normal((12, 20)).astype(np.float32)
    x = base[::-2, 1::3]  # negative and positive steps, an offset
    idx = np.arange(-6, 6).reshape(3, 4)[:, ::-1]  # a non-contiguous index array
    fn = WORKLOADS["rows_of"].fn
    assert_matches_numpy(fusec.fuse(fn)(x, idx), fn(x, idx), exact=True)
    xt = base.T
    assert_matches_numpy(fusec.fuse(fn)(xt, idx), fn(xt, idx), exact=True)


def test_gather_a_new_size_reuses_the_trace() -> None:
    fused = fusec.fuse(WORKLOADS["cols_of"].fn)
    for n in (7, 11):
        x, i = np.arange(3.0 * n).reshape(3, n), np.arange(-n, n)
        assert_matches_numpy(fused(x, i), WORKLOADS["cols_of"].fn(x, i), exact=True)


# ---- bounds -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [5, -6, 2**31 - 1, -(2**31)])
def test_gather_index_out_of_range_is_numpys_index_error_at_the_line(bad: int) -> None:
    def f(x, i):
        return x[:, i] + 1

    x, i = np.zeros((3, 5), np.float32), np.array([0, bad, 1], np.int64)
    with pytest.raises(IndexError) as numpy_error:
        f(x, i)
    with pytest.raises(FusecIndexError) as info:
        fusec.fuse(f)(x, i)
    assert str(numpy_error.value) in str(info.value)  # "index 5 is out of bounds for axis 1 with size 5"
    assert info.value.loc is not None and info.value.loc.startswith(__file__)


def test_gather_unsigned_index_out_of_range_is_an_index_error() -> None:
    def f(x, i):
        return x[i]

    with pytest.raises(FusecIndexError, match="out of bounds for axis 0 with size 4"):
        fusec.fuse(f)(np.zeros(4), np.array([2**64 - 1], np.uint64))


def test_gather_empty_axis_with_indices_is_an_index_error() -> None:
    def f(x, i):
        return x[:, i]

    with pytest.raises(FusecIndexError):
        fusec.fuse(f)(np.zeros((2, 0)), np.array([0]))
    assert fusec.fuse(f)(np.zeros((2, 0)), np.zeros(0, np.int64)).shape == (2, 0)


SELECTING_VIEWS = {
    "sliced": lambda x, i: x[i][::2],
    "indexed": lambda x, i: x[i][0],
    "sliced_then_computed": lambda x, i: x[i][1:] * 2 + 1,
    "take_sliced": lambda x, i: np.take(x, i, axis=1)[:, ::-2],
    "kept_axis_and_index_sliced": lambda x, i: x[i, 1:][:1],
}


@pytest.mark.parametrize("name", sorted(SELECTING_VIEWS))
def test_gather_result_sliced_still_checks_every_index(name) -> None:
    """``x[i][::2]``, ``x[i][0]``: NumPy checks every index of ``i`` when it gathers, before the slice; fusec used
    to sink the slice into the index array and check only the indices it selected (values where NumPy raises)."""
    fn = SELECTING_VIEWS[name]
    x = np.random.default_rng(seed_of("selecting views", name)).standard_normal((4, 5)).astype(np.float32)
    bad = np.array([0, 100, 2, 100], np.int64)
    with pytest.raises(IndexError) as numpy_error:
        fn(x, bad)
    with pytest.raises(FusecIndexError) as info:
        fusec.fuse(fn)(x, bad)
    assert str(numpy_error.value) in str(info.value)
    good = np.array([3, 0, -1, 2], np.int64)
    assert_matches_numpy(fusec.fuse(fn)(x, good), fn(x, good), exact=True)


def _unread(x, i):
    x[i]  # noqa: B018 - gathered and dropped: NumPy still checks i
    return x * 2


def _unread_in_tuple(x, i):
    return (x[:, i], x * 2)[1]


def _unread_then_update(x, i):
    y = np.take(x, i[None], axis=1)  # noqa: F841 - never read
    x += 1
    return x


@pytest.mark.parametrize("fn", [_unread, _unread_in_tuple, _unread_then_update])
def test_gather_no_result_reads_still_checks_its_indices(fn) -> None:
    """A gather whose result nothing reads is dropped from the plan with its kernel; NumPy still raises for its
    indices, before the lines after it run (the argument updated after it is left as it was)."""
    x = np.random.default_rng(seed_of("unread gather", fn.__name__)).standard_normal((5, 5)).astype(np.float32)
    bad = np.array([0, 100, 2], np.int64)
    with pytest.raises(IndexError) as numpy_error:
        fn(x.copy(), bad)
    mine = x.copy()
    with pytest.raises(FusecIndexError) as info:
        fusec.fuse(fn)(mine, bad)
    assert str(numpy_error.value) in str(info.value)
    assert info.value.loc is not None and info.value.loc.startswith(__file__)
    np.testing.assert_array_equal(mine, x)
    good = np.array([4, -5, 1], np.int64)
    assert_matches_numpy(fusec.fuse(fn)(x.copy(), good), fn(x.copy(), good), exact=True)


def test_gather_no_result_reads_is_checked_against_each_calls_sizes() -> None:
    fused = fusec.fuse(_unread)
    fused(np.zeros(3, np.float32), np.array([2]))
    with pytest.raises(FusecIndexError, match="out of bounds for axis 0 with size 2"):
        fused(np.zeros(2, np.float32), np.array([2]))


def test_gather_sliced_along_the_arrays_kept_axis_still_sinks() -> None:
    """A view along the array's own axes selects no index: it still moves onto the array (one kernel)."""

    def f(x, i):
        return (x[i] * 2)[:, 1:4]

    plan = fusec.fuse(f).plan(fusec.ArraySpec((64, 32), "float32"), fusec.ArraySpec((16,), "int64"))
    assert len(plan.kernels) == 1


# ---- errors for what does not trace -----------------------------------------------------------------------


def test_gather_boolean_mask_is_refused_with_the_where_hint() -> None:
    def f(x):
        return x[x > 0]

    with pytest.raises(UnsupportedError, match="boolean mask") as info:
        fusec.fuse(f)(np.ones(3))
    assert "np.where(mask, x, 0)" in str(info.value) and info.value.loc.startswith(__file__)


_CAPTURED = np.zeros(2, np.int64)  # an array made outside the function and captured by it


@pytest.mark.parametrize("fn, error, text", [
    (lambda x, i: x[i.astype(np.float32)], FusecIndexError, "integer"),
    (lambda x, i: x[[0.5, 1]], UnsupportedError, "not a list of integers"),
    (lambda x, i: x[[0, 1, 1], i[:2]], FusecValueError, "broadcast"),
    (lambda x, i: x[[0, 9]], FusecIndexError, "out of bounds"),
    (lambda x, i: np.take_along_axis(x, i, axis=0), FusecValueError, "same number of dimensions"),
    (lambda x, i: np.take(x, i), UnsupportedError, "axis=None"),
    (lambda x, i: np.take(x, i, axis=0, mode="clip"), UnsupportedError, "mode="),
    (lambda x, i: x[i, i, i], FusecIndexError, "too many indices"),
    (lambda x, i: x[i, _CAPTURED], UnsupportedError, "captured"),
    (lambda x, i: x[i[:2], i], FusecValueError, "broadcast"),
])
def test_gather_errors_are_fusec_errors(fn, error, text) -> None:
    x, i = np.zeros((4, 5)), np.array([0, 1, 2])
    with pytest.raises(error, match=text):
        fusec.fuse(fn)(x, i)


def test_gather_index_update_stays_refused() -> None:
    def f(x, i):
        x[i] = 0

    with pytest.raises(FusecError, match="integer index array"):
        fusec.fuse(f)(np.zeros(4), np.array([1]))


def test_gather_result_is_a_copy_for_in_place_updates() -> None:
    def f(x, i):
        t = x[i]
        t += 1
        return t, x

    x, i = np.arange(6.0).reshape(3, 2), np.array([2, 0])
    got = fusec.fuse(f)(x.copy(), i)
    want = f(x.copy(), i)
    for g, w in zip(got, want):
        assert_matches_numpy(g, w, exact=True)


# ---- IR -----------------------------------------------------------------------------------------------------

GATHER_IR = """func @g(%x: f32[4,5,6], %i: i32[2,1,1], %j: u8[1,3,1]) -> f32[2,3,5] {
  %0 = gather %x, %i, %j {axes=[0, 2], dims=[2]} : f32[2,3,5]
  return %0
}"""


def test_gather_ir_text_round_trip_and_reference() -> None:
    g = parse(GATHER_IR)
    assert print_graph(g) == GATHER_IR
    verify(g)
    x = np.arange(120, dtype=np.float32).reshape(4, 5, 6)
    i, j = np.array([[[3]], [[-1]]], np.int32), np.array([[[0], [5], [2]]], np.uint8)
    (got,) = interpret(g, [x, i, j])
    want = x[i, np.arange(5)[None, None, :], j]
    assert_matches_numpy(got, want, exact=True)


def test_gather_window_round_trip_and_reference() -> None:
    text = """func @w(%x: f32[6,5], %i: i16[3,1]) -> f32[3,3] {
  %0 = gather %x, %i {axes=[0], dims=[1], start=[1, 4], step=[1, -2], stop=[none, none]} : f32[3,3]
  return %0
}"""
    g = parse(text)
    assert print_graph(g) == text
    x, i = np.arange(30, dtype=np.float32).reshape(6, 5), np.array([[0], [-1], [2]], np.int16)
    assert_matches_numpy(interpret(g, [x, i])[0], x[1:, 4::-2][i[:, 0]], exact=True)
    with pytest.raises(FusecIndexError, match="axis 0 with size 5"):  # indices count within the window
        interpret(g, [x, np.array([[5], [0], [0]], np.int16)])


@pytest.mark.parametrize("attrs, text", [
    ("{axes=[0, 0], dims=[2]}", "distinct"),
    ("{axes=[0, 2], dims=[3]}", "dims"),
    ("{axes=[0, 3], dims=[2]}", "distinct"),
    ("{axes=[0, 2], dims=[]}", "dims"),
    ("{axes=[0], dims=[2]}", "index operands"),
])
def test_gather_verifier_names_the_bad_attribute(attrs: str, text: str) -> None:
    with pytest.raises(FusecError, match=text):
        verify(parse(GATHER_IR.replace("{axes=[0, 2], dims=[2]}", attrs)))


def test_gather_verifier_refuses_float_indices() -> None:
    with pytest.raises((FusecError, VerifyError), match="integers"):
        verify(parse(GATHER_IR.replace("u8[1,3,1]", "f32[1,3,1]")))


def test_gather_passes_keep_the_interpreters_result() -> None:
    """Sinking through elementwise ops and transposes computes what the traced graph computes."""
    text = """func @g(%x: f32[6,5], %y: f32[5,6], %i: i64[3]) -> f32[3,5] {
  %0 = transpose %y {perm=[1, 0]} : f32[6,5]
  %1 = mul %x, %0 : f32[6,5]
  %2 = exp %1 : f32[6,5]
  %3 = gather %2, %i {axes=[0], dims=[]} : f32[3]
  %4 = expand_dims %3 {axes=[1]} : f32[3,1]
  %5 = const 2.0 : f32[]
  %6 = add %x, %5 : f32[6,5]
  %7 = expand_dims %i {axes=[1]} : i64[3,1]
  %8 = gather %6, %7 {axes=[0], dims=[1]} : f32[3,5]
  %9 = mul %8, %4 : f32[3,5]
  return %9
}"""
    before = parse(text.replace("%3 = gather %2, %i {axes=[0], dims=[]} : f32[3]",
                                "%3 = gather %2, %i, %i {axes=[0, 1], dims=[]} : f32[3]"))
    after = parse(optimize_text(print_graph(before), "canonicalize,fold,cse,dce,fuse"))
    assert "gather %x" in print_graph(after) and "gather %y" in print_graph(after)
    rng = np.random.default_rng(5)
    args = random_arguments(rng, before)
    args[2] = rng.integers(-5, 5, 3)
    assert_matches_numpy(interpret(after, args)[0], interpret(before, args)[0], exact=True)


# ---- CUDA sources -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gather_kernels_compile_for_sm90(name: str, dtype: str) -> None:
    w = WORKLOADS[name]
    args = w.make(np.random.default_rng(1), dtype, "int32" if dtype == "int32" else "int64")
    fused = fusec.fuse(w.fn)
    source = fused.cuda_source(*_specs(args), full=True)
    assert "fc::gather_index(" in source and "const unsigned long long err" in source
    result = nvrtc.compile_cubin(source, "sm_90")
    assert result.cubin[:4] == b"\x7fELF"
    assert result.kernels and all(k.spills == 0 for k in result.kernels.values())


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64"])
def test_gather_of_an_iota_computes_its_elements_and_compiles(dtype: str) -> None:
    """An iota has no memory: a gather of it (directly, or through a slice that becomes the gather's window) computes
    the iota's element at the gathered position (``fc::gather_compute``), with the same bounds check; it used to
    look up a pointer the iota does not have (KeyError)."""
    count = 2 if dtype == "bool" else 40

    def f(x, i):
        direct = np.arange(count, dtype=dtype)[i % count]
        windowed = np.arange(count, dtype=dtype)[::-3][i % -(-count // 3)]
        return x[i] + direct.astype(np.float32) - windowed.astype(np.float32)

    x = np.arange(40, dtype=np.float32)
    i = np.array([0, 3, -1, 7], np.int64)
    fused = fusec.fuse(f)
    assert_matches_numpy(fused(x, i), f(x, i), exact=True)
    source = fused.cuda_source(*_specs((x, i)), full=True)
    assert "fc::gather_compute<" in source and "fc::iota_" in source
    assert nvrtc.compile_cubin(source, "sm_90").cubin[:4] == b"\x7fELF"


def test_gather_kernel_source_checks_bounds_and_names_the_line() -> None:
    from fusec.kinds import generate

    w = WORKLOADS["rows_of"]
    args = w.make(np.random.default_rng(1), "float32", "int64")
    plan = fusec.fuse(w.fn).plan(*_specs(args))
    (kernel,) = plan.kernels
    generated = generate(kernel.region, {})
    assert generated.spec.error_sites and all("workloads.py" in loc for _, loc in generated.spec.error_sites)
    code = generated.spec.error_sites[0][0]
    assert f"{code}u)" in generated.source  # the code the launcher maps back to the line
    # the error word is a parameter, null until the launcher points it at its word
    names = [p.name for p in generated.spec.params if p.role == "scalar"]
    assert generated.spec.args[names.index("err")] == 0


# ---- the benchmark builders -----------------------------------------------------------------------------


def test_gather_benchmark_cross_entropy_builder() -> None:
    from benchmarks.idioms_gathers import (
        CROSS_ENTROPY_DRY_SHAPE,
        CROSS_ENTROPY_SHAPE,
        build_cross_entropy,
        cross_entropy_bytes,
        cross_entropy_inputs,
    )

    rng = np.random.default_rng(2)
    logits, targets = cross_entropy_inputs(lambda s: rng.standard_normal(s).astype(np.float32),
                                           CROSS_ENTROPY_DRY_SHAPE)
    assert targets.dtype == np.int64 and targets.min() >= 0 and targets.max() < CROSS_ENTROPY_DRY_SHAPE[1]
    fused = fusec.fuse(build_cross_entropy(np))
    want = (np.log(np.exp(logits.astype(np.float64)).sum(1)) - logits[np.arange(len(targets)), targets]).mean()
    assert abs(float(fused(logits, targets)) - want) <= 1e-5 * abs(want)
    plan = fused.plan(fusec.ArraySpec(CROSS_ENTROPY_SHAPE, "float32"),
                      fusec.ArraySpec(CROSS_ENTROPY_SHAPE[:1], "int64"))
    assert [k.region.kind for k in plan.kernels] == ["rows", "reduce-all"]
    assert cross_entropy_bytes(CROSS_ENTROPY_SHAPE) == 4 * 8192 * 32768 + 8 * 8192 + 4


def test_gather_in_place_update_leaves_the_argument_on_index_error() -> None:
    """A function that gathers never writes its updates in place (``fusec.runtime.write_backs.hazard``): an index out of
    range raises before any argument changes, on both backends."""
    from fusec.runtime.write_backs import hazard

    def step(p, g, i):
        p -= 0.5 * g[i]

    specs = (fusec.ArraySpec((4, 3), "float32"), fusec.ArraySpec((6, 3), "float32"), fusec.ArraySpec((4,), "int64"))
    plan = fusec.fuse(step).plan(*specs)
    assert "gathers" in hazard(plan, plan.graph.outputs[-1], plan.graph.inputs[0])
    p, g = np.ones((4, 3), np.float32), np.arange(18, dtype=np.float32).reshape(6, 3)
    fusec.fuse(step)(p, g, np.array([0, 1, 2, -1]))
    want = np.ones((4, 3), np.float32)
    step(want, g, np.array([0, 1, 2, -1]))
    assert_matches_numpy(p, want, exact=True)
    p = np.ones((4, 3), np.float32)
    with pytest.raises(IndexError):
        fusec.fuse(step)(p, g, np.array([0, 1, 2, 9]))
    assert (p == 1).all()


def test_gather_on_dask_arrays_is_refused_with_the_line() -> None:
    """A gather reads other chunks' elements: the Dask path refuses it rather than gather within a chunk."""
    da = pytest.importorskip("dask.array")

    def f(x, i):
        return x[i] * 2

    x, i = da.ones((8, 4), chunks=(4, 4)), da.from_array(np.array([7, 0]), chunks=2)
    with pytest.raises(UnsupportedError, match="gather is not supported on Dask arrays"):
        fusec.fuse(f)(x, i)


RESHAPED_GATHERS = {
    "of_a_reshaped_argument": lambda x, y, i: y.reshape(7, 6)[i] + x[i],
    "of_a_reshaped_computation": lambda x, y, i: (np.exp(y).reshape(7, 6) * 2)[i].sum(1) + x[i, 0],
}


@pytest.mark.parametrize("name", sorted(RESHAPED_GATHERS))
def test_gather_of_a_reshape_plans_and_compiles(name: str) -> None:
    """A gather reading a reshape: the reshapes pass rebuilt it as a one-operand op and crashed
    (``ValueError: too many values to unpack`` in ``_rebuild``); it now gathers over its operands' own shapes."""
    fn = RESHAPED_GATHERS[name]
    rng = np.random.default_rng(seed_of("gather of a reshape", name))
    x, y = rng.standard_normal((7, 6)).astype(np.float32), rng.standard_normal(42).astype(np.float32)
    i = np.array([0, 3, 6, -1])
    fused = fusec.fuse(fn)
    assert_matches_numpy(fused(x, y, i), fn(x, y, i), rtol=1e-5, atol=1e-5)
    nvrtc.compile_cubin(fused.cuda_source(x, y, i, full=True))
