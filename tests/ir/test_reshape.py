"""Reshapes that merge or split axes (issue 17, item 1): ``reshape``/``ravel``/``flatten`` in C and F order, ``-1``
inference, on arguments and on computed values, through ``fusec.fuse`` on the NumPy backend against NumPy itself;
kernel counts (a reshape is index arithmetic, never a kernel: group norm is one kernel); the IR text of the op;
errors. ``WORKLOADS`` is shared with ``tests/schedule/test_reshape_accesses.py`` and
``tests/gpu/test_reshape_gpu.py``; each takes ``x`` of shape (A, B) with A even and B a multiple of 12.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from benchmarks.idioms_reshape import build_groupnorm, groupnorm_inputs
from fusec.ir.graph import Graph, make_node
from fusec.ir.printer import print_graph
from fusec.ir.reshape_math import common_refinement, sub_extents, view_strides
from fusec.ir.text import parse
from fusec.ir.verify import verify
from fusec.support.errors import FusecError, FusecValueError, UnsupportedError
from tests.helpers import assert_matches_numpy, random_array, seed_of


def _group_center(x):
    a, b = x.shape
    xr = x.reshape(a, 3, -1)
    return (xr - xr.mean(-1, keepdims=True)).reshape(a, b)


def _group_scale(x):
    """Group statistics, the result back in the original shape, times a per-column vector (the broadcast
    spreads over an axis the reshape merges)."""
    a, b = x.shape
    xr = x.reshape(a, 3, -1)
    y = (xr - xr.max(-1, keepdims=True)).reshape(a, b)
    return y * x[0] + x[:, :1]


def _group_index(x):
    """An integer index of a size-1 axis that stands for the reshape's sub-axes (a reduction's keepdims axis)."""
    xr = x.reshape(x.shape[0], 3, -1)
    return xr - xr.sum(-1, keepdims=True)[:, :, 0][..., None] + xr[:, 1:2, :1]


def _heads_roundtrip(x):
    a, b = x.shape
    h = x.reshape(a, 3, -1).transpose(1, 0, 2) * 2
    return h.transpose(1, 0, 2).reshape(a, b) - x


WORKLOADS = {
    "ravel_sum": lambda x: x.reshape(-1).sum(),
    "ravel_exp": lambda x: np.abs(x).ravel() + 1,
    "flatten_max": lambda x: (x * 2).flatten().max(),
    "split_last": lambda x: x.reshape(x.shape[0], -1, 4) * 3,
    "split_first": lambda x: x.reshape(2, -1, x.shape[1]).sum(axis=0),
    "merge_pairs": lambda x: x.reshape(x.shape[0] // 2, -1).max(axis=1),
    "merge_argmax": lambda x: x.reshape(x.shape[0] // 2, -1).argmax(axis=1),
    "merge_argmin": lambda x: x.reshape(-1, 6).argmin(axis=0),
    "group_center": _group_center,
    "group_scale": _group_scale,
    "group_index": _group_index,
    "heads": lambda x: x.reshape(x.shape[0], 3, -1).transpose(1, 0, 2) - 1,
    "heads_roundtrip": _heads_roundtrip,
    "order_f": lambda x: x.reshape(2, -1, order="F") + 1,
    "ravel_f": lambda x: np.ravel(x, order="F") * 2,
    "slice_then_merge": lambda x: x[:, ::2].reshape(-1) + x[:, 1::2].reshape(-1),
    "slice_of_split": lambda x: x.reshape(x.shape[0], -1, 4)[:, ::-2, 1:] * 3,
    "split_of_slice": lambda x: x[1:, ::-1].reshape(x.shape[0] - 1, 3, -1).sum(axis=2),
    "np_reshape": lambda x: np.reshape(x + 1, (-1, 6)) * np.reshape(x, (-1, 6))[:, ::-1],
}
SHAPES = [(2, 12), (6, 24), (130, 36)]
# workloads whose kernel count is not 1: a returned view of the argument needs no kernel
KERNELS = {}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_reshape_workload_matches_numpy_in_one_kernel(name: str, dtype: str, shape: tuple[int, int]) -> None:
    x = random_array(np.random.default_rng(seed_of("reshape workload", name, dtype, shape)), shape, dtype)
    fn = WORKLOADS[name]
    fused = fusec.fuse(fn)
    with np.errstate(all="ignore"):
        want = fn(x)
        got = fused(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_matches_numpy(got, want, rtol=2e-3 if dtype == "float16" else 1e-6, atol=1e-5)
    assert len(fused.plan(x).kernels) == KERNELS.get(name, 1)


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_reshape_of_non_contiguous_argument_matches_numpy(name: str, layout: str) -> None:
    rng = np.random.default_rng(seed_of("reshape layout", name, layout))
    base = random_array(rng, (24, 12), "float32")
    x = {"transposed": base.T, "strided": random_array(rng, (12, 48), "float32")[:, ::2],
         "reversed": base[::-1, ::-1][:12]}[layout]
    fn = WORKLOADS[name]
    fused = fusec.fuse(fn)
    with np.errstate(all="ignore"):
        assert_matches_numpy(fused(x), fn(x), rtol=1e-6, atol=1e-5)
        before = x.copy()
        fused(x)
    assert np.array_equal(x, before, equal_nan=True)  # arguments are never written


def test_reshape_groupnorm_is_one_kernel_and_matches_numpy() -> None:
    x, gamma, beta = groupnorm_inputs(np, (2, 64, 5, 7))
    fused = fusec.fuse(build_groupnorm(np))
    want = build_groupnorm(np)(x.astype(np.float64), gamma, beta)
    got = fused(x, gamma, beta)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    spec = [fusec.ArraySpec((32, 256, 64, 64), "float32"), fusec.ArraySpec((256,), "float32"),
            fusec.ArraySpec((256,), "float32")]
    (kernel,) = fused.plan(*spec).kernels
    assert kernel.kind == "rows"
    assert list(kernel.space.shape) == [32, 32, 8, 64, 64] and list(kernel.space.reduced) == [2, 3, 4]
    # it reads x and the two vectors, and writes the result: nothing else crosses memory
    assert kernel.bytes_written == 32 * 256 * 64 * 64 * 4


def test_reshape_head_split_reads_the_argument_through_a_split_view() -> None:
    fused = fusec.fuse(lambda q: q.reshape(8, 128, 12, 64).transpose(0, 2, 1, 3) * 0.125)
    (kernel,) = fused.plan(fusec.ArraySpec((8, 128, 768), "float16")).kernels
    assert kernel.kind == "pointwise"
    # the kernel reads a view of the argument, which the runtime takes (no copy, no kernel of its own)
    (view,) = kernel.inputs
    assert view.op == "reshape" and view.operands[0].op == "input" and view.shape == (8, 128, 12, 64)
    assert not any(n.op == "reshape" for n in kernel.nodes)


def test_reshape_of_computed_value_is_no_kernel_of_its_own() -> None:
    """A merged, returned result is the kernel's output viewed in the returned shape."""
    fused = fusec.fuse(lambda x: np.exp(x).reshape(-1))
    plan = fused.plan(fusec.ArraySpec((30, 7), "float32"))
    (kernel,) = plan.kernels
    assert [n.op for n in kernel.nodes] == ["exp"]
    (out,) = plan.graph.outputs
    assert out.op == "reshape" and out.operands[0] is kernel.outputs[0]


def test_reshape_returned_argument_view_is_numpy_view_semantics() -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    fused = fusec.fuse(lambda x: x.reshape(2, 12))
    assert len(fused.plan(x).kernels) == 0
    got = fused(x)
    assert np.array_equal(got, x.reshape(2, 12))


@pytest.mark.parametrize("shape, target", [((0, 5), (5, 0)), ((0, 5), (-1,)), ((1, 1), ()), ((4, 1, 6), (2, 12)),
                                           ((3, 4), (12, 1)), ((7,), (7, 1, 1))], ids=str)
def test_reshape_empty_zero_d_and_unit_axes_match_numpy(shape, target) -> None:
    x = random_array(np.random.default_rng(seed_of("reshape odd", shape, target)), shape, "float32")
    fn = lambda x: (x * 2).reshape(target) + 1  # noqa: E731
    got = fusec.fuse(fn)(x)
    want = fn(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_matches_numpy(got, want)


def test_reshape_new_shape_retraces_and_matches_numpy() -> None:
    fused = fusec.fuse(lambda x: x.reshape(x.shape[0], 2, -1).sum(axis=-1))
    for shape in [(3, 8), (5, 12), (1, 2)]:
        x = random_array(np.random.default_rng(seed_of("reshape sizes", shape)), shape, "float32")
        assert_matches_numpy(fused(x), x.reshape(shape[0], 2, -1).sum(axis=-1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn, error, text", [
    (lambda x: x.reshape(3, 8, order="A"), UnsupportedError, "order='A'"),
    (lambda x: x.reshape(6, 4, order="K"), FusecValueError, "order must be one of"),
    (lambda x: x.reshape(-1, -1), FusecValueError, "only specify one unknown dimension"),
    (lambda x: x.reshape(5, -1), FusecValueError, "cannot reshape array of size 24"),
    (lambda x: x.reshape(25), FusecValueError, "cannot reshape array of size 24"),
], ids=["order_a", "order_k", "two_unknown", "bad_size", "bad_total"])
def test_reshape_errors_name_the_line(fn, error: type, text: str) -> None:
    x = np.zeros((6, 4), np.float32)
    with pytest.raises(error, match=text) as info:
        fusec.fuse(fn)(x)
    assert isinstance(info.value, FusecError)
    assert __file__ in str(info.value)


# reshapes no kernel can read as index arithmetic: read back between kernels (the operand written, then viewed)
READ_BACK = {
    "no_refinement": (lambda x: (x + 1).reshape(4, 6) * 2, "has no common refinement"),
    "argument_no_refinement": (lambda x: x.reshape(4, 6) * 2, "has no common refinement"),
    "slice_of_merge": (lambda x: np.exp(x).reshape(-1)[::5], "a slice selects part of an axis"),
    "argument_slice_of_merge": (lambda x: x.reshape(-1)[1:7] + 1, "a slice selects part of an axis"),
    "cuts_do_not_nest": (lambda x: np.exp(x).reshape(2, 12) + np.exp(x).reshape(12, 2).T.reshape(2, 12),
                         "would be cut at"),
    "cumsum_of_merge": (lambda x: np.cumsum((x * 2).reshape(-1)), "cumsum along an axis of 24 elements"),
    "pad_of_merge": (lambda x: np.pad(np.sin(x).reshape(-1), 2), "a pad or join reads part of an axis"),
    "two_groupings": (lambda x: (x + 1).reshape(3, 8).sum(0)[:, None] * (x + 1).reshape(8, 3).sum(1)[:3].sum(),
                      "would be cut at"),
    "chain_of_two": (lambda x: np.tanh(x).reshape(4, 6).reshape(3, 8)[:, ::3] - x.reshape(3, 8)[:, :3],
                     "a slice selects part"),
}


@pytest.mark.parametrize("name", sorted(READ_BACK))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_reshape_read_back_between_kernels_matches_numpy_and_says_why(name: str, layout: str) -> None:
    fn, why = READ_BACK[name]
    rng = np.random.default_rng(seed_of("reshape read back", name, layout))
    x = random_array(rng, (6, 4), "float32") if layout == "contiguous" else random_array(rng, (4, 6), "float32").T
    fused = fusec.fuse(fn)
    assert_matches_numpy(fused(x), fn(x), rtol=1e-6, atol=1e-6)
    entries = [r for r in fused.plan(x).refusals if "no kernel can read it as index arithmetic" in r]
    assert entries and any(why in r for r in entries), fused.plan(x).refusals


def test_reshape_read_back_is_a_kernel_boundary_with_the_value_written_once() -> None:
    """The value a read-back reshape views is written by the kernel computing it and read by a later kernel,
    never recomputed in the reader (it would read its own output)."""
    fused = fusec.fuse(lambda x: np.tanh(x).reshape(-1)[::5] + np.tanh(x).sum())
    x = random_array(np.random.default_rng(seed_of("read back boundary")), (6, 4), "float32")
    plan = fused.plan(x)
    (view,) = plan.read_back_views
    writers = [k for k in plan.kernels if view.operands[0] in k.outputs]
    readers = [k for k in plan.kernels if view in k.inputs]
    assert len(writers) == 1 and readers
    assert all(plan.kernels.index(writers[0]) < plan.kernels.index(r) for r in readers)
    assert not any(view.operands[0] in r.nodes for r in readers)
    assert_matches_numpy(fused(x), np.tanh(x).reshape(-1)[::5] + np.tanh(x).sum(), rtol=1e-6, atol=1e-5)


def test_reshape_text_round_trip() -> None:
    text = """func @f(%x: f32[4,6]) -> f32[24] {
  %0 = reshape %x {shape=[2, 2, 6]} : f32[2,2,6]
  %1 = exp %0 : f32[2,2,6]
  %2 = reshape %1 {shape=[24]} : f32[24]
  return %2
}"""
    graph = parse(text)
    assert print_graph(graph) == text
    assert parse(print_graph(graph)).outputs == graph.outputs


def test_reshape_verify_and_infer_check_the_size() -> None:
    x = make_node("input", (), {"name": "x", "index": 0}, dtype="float32", shape=(4, 6))
    with pytest.raises(FusecValueError, match="cannot reshape an array of shape"):
        make_node("reshape", [x], {"shape": [5, 5]})
    verify(Graph("f", (x,), (make_node("reshape", [x], {"shape": [3, 8]}),)))


@pytest.mark.parametrize("a, b, want", [
    ((2, 256, 64, 64), (2, 32, 8 * 64 * 64), (2, 32, 8, 64, 64)), ((2, 3), (3, 2), None), ((4, 6), (24,), (4, 6)),
    ((1, 6), (6, 1), (6,)), ((0, 3), (3, 0), (0,)), ((2, 3, 4), (6, 4), (2, 3, 4)), ((4, 6), (6, 4), None),
], ids=str)
def test_reshape_common_refinement(a, b, want) -> None:
    assert common_refinement(a, b) == want


def test_reshape_sub_extents_and_view_strides_follow_numpy() -> None:
    assert sub_extents(12, {4}) == (3, 4) and sub_extents(12, {2, 6}) == (2, 3, 2) and sub_extents(5, ()) == (5,)
    rng = np.random.default_rng(seed_of("view strides"))
    base = rng.standard_normal((8, 12, 6)).astype(np.float32)
    for view in [base, base[::2], base[:, ::-3], base.transpose(2, 0, 1), base[1:, 2:, ::2]]:
        for target in [(-1,), (2, -1), (view.shape[0], -1), (*view.shape[:-1], 1, view.shape[-1]), (4, -1, 1)]:
            try:
                want = view.reshape(target)
            except ValueError:
                continue
            strides = view_strides(view.shape, [s // 4 for s in view.strides], want.shape)
            if strides is None:  # NumPy copies exactly where no strides describe the reshape
                assert not np.shares_memory(want, view), (view.strides, target)
            else:
                assert np.shares_memory(want, view), (view.strides, target)
                assert all(d == 1 or s * 4 == ws for s, ws, d in zip(strides, want.strides, want.shape))


def test_reshape_of_a_value_that_gathers_a_computed_value_matches_numpy() -> None:
    """A reshape refined over a graph where a gather reads a computed value (a part update with a step reads its
    value through one) is rebuilt over the gather's own operands (an internal error before)."""
    def f(a):
        b = a * 1
        b[::2, :1] -= b[-1, 1]
        return b + b.reshape(-1).max(keepdims=True)

    x = random_array(np.random.default_rng(seed_of("reshape of a gather")), (3, 4), "float32")
    assert_matches_numpy(fusec.fuse(f)(x), f(x), exact=True)
