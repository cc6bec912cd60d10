"""Basic indexing on traced values (issue 17, item 1): integers (negative too), slices of any step, None,
Ellipsis, in any combination, on inputs and intermediates, through ``fusec.fuse`` on the NumPy backend against
NumPy itself; kernel counts (a view is index arithmetic inside its consumer, never a kernel of its own); errors.
``WORKLOADS`` is shared with ``tests/gpu/test_views_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.support.errors import FusecError, FusecIndexError, FusecTypeError, UnsupportedError
from tests.helpers import assert_matches_numpy, random_array, seed_of

KEYS = [
    0, -1, 4, -5, np.int64(2),
    slice(None, None, 2), slice(None, None, -1), slice(None, None, -2), slice(3, 1), slice(1, 3, -1),
    slice(-100, 100), slice(100, None), slice(None, -100, -1), slice(5, None, -3), slice(1, -1),
    (slice(None), 0), (Ellipsis, -1), (Ellipsis, slice(None, None, -3)), (1, 2, 3), (-1, -1, -1),
    (Ellipsis,), (), (None,), (None, Ellipsis, None), (slice(None, None, -2), None, 4),
    (None, slice(1, None), Ellipsis, None), (slice(None, None, 3), slice(None, None, -2), slice(1, -1)),
    (0, Ellipsis, 0), (slice(2, 3), slice(0, 0)), (Ellipsis, None, 2, slice(6, 0, -4)),
]


def _ids(key: object) -> str:
    return repr(key).replace(" ", "")


@pytest.mark.parametrize("key", KEYS, ids=_ids)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_index_of_input_matches_numpy(key: object, dtype: str) -> None:
    x = random_array(np.random.default_rng(seed_of("index", _ids(key), dtype)), (5, 6, 7), dtype)
    fused = fusec.fuse(lambda x: (x[key], -x[key]))
    got = fused(x)
    want = (x[key], -x[key])
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert_matches_numpy(g, w, exact=True)


INTERMEDIATES = {
    "affine": lambda x, y, key: (x * 2 + y)[key] - 1,
    "exp": lambda x, y, key: np.exp(x * 2 + y)[key],
    "keepdims_sum": lambda x, y, key: x.sum(axis=1, keepdims=True)[key],
    "transpose": lambda x, y, key: x.transpose(2, 0, 1)[key] * 3,
    "broadcast": lambda x, y, key: np.broadcast_to(y, (5, 6, 7))[key] + 0.5,
}


@pytest.mark.parametrize("key", KEYS, ids=_ids)
@pytest.mark.parametrize("name", sorted(INTERMEDIATES))
def test_index_of_intermediate_matches_numpy(name: str, key: object) -> None:
    rng = np.random.default_rng(seed_of("index of intermediate", name, _ids(key)))
    x, y = random_array(rng, (5, 6, 7), "float32"), random_array(rng, (6, 1), "float32")
    fn = INTERMEDIATES[name]
    fused = fusec.fuse(lambda x, y: fn(x, y, key))
    with np.errstate(all="ignore"):
        try:
            want = fn(x, y, key)
        except IndexError as exc:
            with pytest.raises(IndexError, match=str(exc).split(" is out")[0]):
                fused(x, y)
            return
        got = fused(x, y)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_matches_numpy(got, want, rtol=1e-6, atol=1e-6)
    assert len(fused.plan(x, y).kernels) <= 1


def _logsumexp(x):
    m = x.max(axis=1, keepdims=True)
    return m[:, 0] + np.log(np.exp(x - m).sum(axis=1))


WORKLOADS = {
    "logsumexp": _logsumexp,
    "first_k": lambda x: x[:, :5] * 2,
    "every_other_row": lambda x: x[::2] + 1,
    "last_column": lambda x: x[..., -1] * 3,
    "difference": lambda x: x[1:] - x[:-1],
    "reversed": lambda x: x[::-1, ::-3] - 0.5 * x[::-1, ::-3][:, ::-1],
    "sliced_row_sum": lambda x: x[:, 1::2].sum(axis=1),
    "sliced_column_max": lambda x: x[::-2, 3:].max(axis=0),
    "view_of_intermediate": lambda x: (x * x)[:-1:2, 1:] + x[1::2, :-1],
    "slice_of_reduction": lambda x: x.sum(axis=1)[::-2],
    "scalar_element": lambda x: x[0, 0] * x + x[-1, -1],
    "newaxis_outer": lambda x: x[:, None, 2] * x[None, 1:4, 0],
    "empty": lambda x: x[3:1] + 1,
    "transposed_slice": lambda x: x.T[1:, ::2] * 2,
}


@pytest.mark.parametrize("shape", [(9, 10), (1029, 17), (4, 8)], ids=str)
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_view_workload_matches_numpy_in_one_kernel(name: str, shape: tuple[int, int]) -> None:
    x = random_array(np.random.default_rng(seed_of("view workload", name, shape)), shape, "float32")
    fn = WORKLOADS[name]
    fused = fusec.fuse(fn)
    with np.errstate(all="ignore"):
        want = fn(x)
        got = fused(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_matches_numpy(got, want, rtol=1e-6, atol=1e-6)
    assert len(fused.plan(x).kernels) == 1


def test_view_difference_kernel_reads_input_through_slices() -> None:
    fused = fusec.fuse(lambda x: x[1:] - x[:-1])
    plan = fused.plan(fusec.ArraySpec((100, 8), "float32"))
    (kernel,) = plan.kernels
    assert [n.op for n in kernel.nodes] == ["slice", "slice", "sub"]
    assert [n.op for n in kernel.region.inputs] == ["input"]
    source = fused.cuda_source(fusec.ArraySpec((100, 8), "float32"))
    assert "in0 + ld0_o" in source and "in0 + ld1_o" in source


def test_view_of_intermediate_moves_to_the_input() -> None:
    """exp(x)[::2] computes the exponentials of the selected half only: the slice sinks to x."""
    fused = fusec.fuse(lambda x: np.exp(x)[::2])
    plan = fused.plan(fusec.ArraySpec((10, 4), "float32"))
    (kernel,) = plan.kernels
    assert [n.op for n in kernel.nodes] == ["slice", "exp"]
    assert kernel.nodes[0].operands[0].op == "input"


def test_view_new_size_reinfers_without_retracing() -> None:
    calls = []

    def f(x):
        calls.append(1)
        return x[1:] - x[:-1], x[::-2, -1]

    fused = fusec.fuse(f)
    for n in (5, 9, 2, 17, 1, 0):  # sizes 1 and 0 are signatures of their own (broadcast and empty)
        x = random_array(np.random.default_rng(seed_of("rebind", n)), (n, 3), "float32") if n else \
            np.zeros((0, 3), np.float32)
        got = fused(x)
        for g, w in zip(got, (x[1:] - x[:-1], x[::-2, -1])):
            assert g.shape == w.shape
            assert_matches_numpy(g, w, exact=True)
    assert len(calls) == 3


def test_view_integer_index_out_of_range_raises_index_error_with_the_line() -> None:
    fused = fusec.fuse(lambda x: x[:, 7] * 2)
    with pytest.raises(FusecIndexError, match="index 7 is out of bounds for axis 1 with size 7") as info:
        fused(np.ones((3, 7), np.float32))
    assert isinstance(info.value, IndexError)
    assert "test_views.py" in str(info.value)
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        fusec.fuse(lambda x: x[-4])(np.ones(3, np.float32))


def test_view_integer_index_out_of_range_after_a_new_size_raises_index_error() -> None:
    fused = fusec.fuse(lambda x: x[5] + 1)
    assert fused(np.arange(8, dtype=np.int32)) == 6
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 3"):
        fused(np.arange(3, dtype=np.int32))


@pytest.mark.parametrize("key, error, text", [
    ((0, 0, 0), FusecIndexError, "too many indices for array: array is 2-dimensional, but 3 were indexed"),
    ((Ellipsis, 0, Ellipsis), FusecIndexError, "an index can only have a single ellipsis"),
    (slice(None, None, 0), FusecError, "slice step cannot be zero"),
    (slice(1.5, None), FusecTypeError, "slice indices must be integers or None"),
    ([0, 5, 1], FusecIndexError, "index 5 is out of bounds for axis with size 3"),
    (True, UnsupportedError, "indexing with bool is not supported"),
    (1.0, UnsupportedError, "indexing with float is not supported"),
], ids=_ids)
def test_view_bad_index_is_a_fusec_error_naming_the_line(key: object, error: type, text: str) -> None:
    fused = fusec.fuse(lambda x: x[key])
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)")) as info:
        fused(np.ones((3, 4), np.float32))
    assert "test_views.py" in str(info.value)


def test_view_index_with_traced_array_is_a_gather() -> None:
    """Integer-array indexing traces to a gather (tests/gathers has the forms)."""
    fused = fusec.fuse(lambda x, i: x[i])
    x, i = np.arange(4, dtype=np.float32), np.array([3, -4], np.int64)
    assert fused(x, i).tolist() == [3.0, 0.0]
    assert [n.op for n in fused.trace(x, i).nodes if n.op != "input"] == ["gather"]


@pytest.mark.parametrize("key", [(), Ellipsis, None, (None, Ellipsis, None)], ids=_ids)
def test_view_of_0d_input_matches_numpy(key: object) -> None:
    x = np.array(2.5, np.float32)
    got = fusec.fuse(lambda x: x[key] * 2)(x)
    want = x[key] * 2
    assert np.shape(got) == np.shape(want)
    assert_matches_numpy(np.asarray(got), np.asarray(want), exact=True)


def test_view_text_round_trip_keeps_python_bounds_and_integer_indices() -> None:
    from fusec.ir.printer import print_graph
    from fusec.ir.text import parse

    fused = fusec.fuse(lambda x: x[None, ::-3, ..., 5] - x[-1, 1:][None, :3])
    graph = fused.trace(fusec.ArraySpec((9, 10), "float32"))
    text = print_graph(graph)
    assert "slice %x {start=[none, 5], step=[-3, 0], stop=[none, none]} : f32[3,1]" in text
    assert parse(text) == graph and print_graph(parse(text)) == text


@pytest.mark.parametrize("attrs, message", [
    ("start=[0], stop=[none], step=[1]", "start, stop and step for each of the 2 axes"),
    ("start=[9, 0], stop=[none, none], step=[0, 1]", "index 9 is out of bounds for axis 0 with size 4"),
    ("start=[1.5, 0], stop=[none, none], step=[1, 1]", "slice bounds must be integers or none"),
    ("start=[none, 0], stop=[none, none], step=[0, 1]", "an integer index \\(step 0\\) needs a start"),
])
def test_view_parse_rejects_bad_slice_attributes(attrs: str, message: str) -> None:
    from fusec.ir.text import parse
    from fusec.support.errors import ParseError

    text = f"func @f(%x: f32[4,5]) -> f32[1,5] {{\n  %0 = slice %x {{{attrs}}} : f32[1,5]\n  return %0\n}}\n"
    with pytest.raises(ParseError, match=message):
        parse(text)


def test_view_verify_checks_slice_shape() -> None:
    from fusec.ir.graph import Graph, make_node
    from fusec.ir.verify import verify

    x = make_node("input", (), {"name": "x", "index": 0}, dtype="f4", shape=(6,))
    s = make_node("slice", [x], {"start": [None], "stop": [None], "step": [-2]})
    assert s.shape == (3,)
    verify(Graph("g", (x,), (s,)))


def _swiglu(x):
    a, b = np.split(x, 2, axis=-1)
    return a / (1 + np.exp(-a)) * b


LAYOUT_FUNCTIONS = {
    "swapaxes": lambda x: np.swapaxes(x, 0, 2) * 2,
    "swapaxes_method": lambda x: x.swapaxes(1, -1) + 1,
    "moveaxis": lambda x: np.moveaxis(x, 0, -1) * 2,
    "moveaxis_lists": lambda x: np.moveaxis(x, [0, 1], [-1, 0]) * 2,
    "rollaxis": lambda x: np.rollaxis(x, 2, 0) * 2,
    "mT": lambda x: x.mT * 2,
    "flip": lambda x: np.flip(x, 1) - np.flip(x),
    "broadcast_arrays": lambda x: tuple(a * 1 for a in np.broadcast_arrays(x, x[:, :1, :1])),
    "array_split": lambda x: tuple(np.array_split(x, 4, axis=-1)),
    "split_indices": lambda x: tuple(p + 1 for p in np.split(x, [1, -2], axis=1)),
    "swiglu_split": lambda x: _swiglu(x.swapaxes(1, 2)),
    "reshape_size_one": lambda x: x[:, :1].reshape(4, 5, 1) * 2,
    "reshape_minus_one": lambda x: x[0:1].reshape(-1, 5) + 1,
    "ravel": lambda x: x[0, 0].ravel() * 2,
    "np_ravel": lambda x: np.ravel(x[0, :, 2:3]) * 2,
    "flatten": lambda x: x[0, :, :1].flatten() * 2,
    "np_reshape": lambda x: np.reshape(x[:, 2], (1, 4, 1, 5)) * 2,
}


@pytest.mark.parametrize("name", sorted(LAYOUT_FUNCTIONS))
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_layout_function_matches_numpy(name: str, dtype: str) -> None:
    x = random_array(np.random.default_rng(seed_of("layout function", name, dtype)), (4, 6, 5), dtype)
    fn = LAYOUT_FUNCTIONS[name]
    fused = fusec.fuse(fn)
    with np.errstate(all="ignore"):
        want, got = fn(x), fused(x)
    if not isinstance(want, tuple):
        want, got = (want,), (got,)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert_matches_numpy(g, w, rtol=1e-6, atol=1e-6)


def test_swiglu_with_split_is_one_kernel() -> None:
    plan = fusec.fuse(_swiglu).plan(fusec.ArraySpec((256, 1024), "float32"))
    assert len(plan.kernels) == 1
    assert [n.op for n in plan.kernels[0].nodes if n.op == "slice"] == ["slice", "slice"]


@pytest.mark.parametrize("fn, error, text", [
    (lambda x: x.reshape(-1, order="A"), UnsupportedError, "order='A'"),
    (lambda x: x.reshape(4, 30, order="K"), FusecError, "order must be one of"),
    (lambda x: x.reshape(7, -1), FusecError, "cannot reshape array of size 120"),
    (lambda x: x.reshape(-1, -1), FusecError, "can only specify one unknown dimension"),
    (lambda x: np.split(x, 4, axis=1), FusecError, "array split does not result in an equal division"),
    (lambda x: np.moveaxis(x, 0, 3), FusecError, "out of bounds"),
    (lambda x: x[0, 0].mT, FusecError, "matrix transpose with ndim < 2"),
    (lambda x: np.take(x, [[0, 1]] * 33, axis=1), UnsupportedError, "at most 64 integers"),
    (lambda x: x.view(np.int32), UnsupportedError, "not traced yet"),
], ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", ""))
def test_layout_function_errors_name_the_line(fn, error: type, text: str) -> None:
    with pytest.raises(error, match=text) as info:
        fusec.fuse(fn)(np.ones((4, 6, 5), np.float32))
    assert "test_views.py" in str(info.value)


def test_view_bytes_count_the_elements_a_slice_reads() -> None:
    spec = fusec.ArraySpec((1000, 64), "float32")
    plan = fusec.fuse(lambda x: x[:, :16] * 2).plan(spec)
    assert plan.kernels[0].bytes_read == 1000 * 16 * 4
    assert plan.bytes_moved_unfused == 2 * 1000 * 16 * 4
    overlapping = fusec.fuse(lambda x: x[1:] - x[:-1]).plan(spec)
    assert overlapping.kernels[0].bytes_read == 1000 * 64 * 4  # at most the array


def test_view_mean_of_slice_divides_by_the_slice_count() -> None:
    x = random_array(np.random.default_rng(seed_of("mean of slice")), (7, 9), "float32")
    fused = fusec.fuse(lambda x: (x[:, 1::2].mean(axis=1), x[::-3].var(axis=0), x[2:5, -1].std()))
    with np.errstate(all="ignore"):  # NaN and inf among the random values
        got, want = fused(x), (x[:, 1::2].mean(axis=1), x[::-3].var(axis=0), x[2:5, -1].std())
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert_matches_numpy(g, w, rtol=1e-6, atol=1e-6)


def test_split_retraces_for_a_new_size_and_matches_numpy() -> None:
    """Split points are resolved against the traced size, so a new size traces again (never reuses them)."""
    calls = []

    def halves(x):
        calls.append(1)
        a, b = np.split(x, 2, axis=-1)
        return a * b

    fused = fusec.fuse(halves)
    for n in (4, 6, 10):
        x = random_array(np.random.default_rng(seed_of("split sizes", n)), (3, n), "float32")
        with np.errstate(all="ignore"):
            assert_matches_numpy(fused(x), x[:, : n // 2] * x[:, n // 2:], exact=True)
    assert len(calls) == 3
