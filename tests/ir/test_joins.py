"""``np.arange``/``np.indices`` (the ``iota`` op), ``np.pad`` (``window`` views) and joins (``concatenate``,
``stack``, ``hstack``, ``vstack``, ``dstack``, ``column_stack``, ``append``) in fused functions (issue 17, items
2 and 3): the NumPy backend against NumPy itself (values bit for bit, dtypes, shapes), kernel counts (a join or a
pad is never a kernel of its own, an iota reads no memory), and errors. ``WORKLOADS`` is shared with
``tests/gpu/test_joins_gpu.py`` and the access checks of ``tests/schedule/test_join_accesses.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.support.errors import FusecError, FusecTypeError, FusecValueError, UnsupportedError
from tests.helpers import assert_matches_numpy, random_array, seed_of


def _rope(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    rot = np.concatenate([-x2, x1], axis=-1)
    return x * cos + rot * sin


def _rope_split(x, cos, sin):
    x1, x2 = np.split(x, 2, axis=-1)
    return x * cos + np.concatenate((-x2, x1), axis=-1) * sin


# name -> (function, shapes of its arguments); every one is a single kernel
WORKLOADS = {
    "arange_add": (lambda x: x + np.arange(x.shape[-1]).astype(x.dtype), [(6, 37)]),
    "arange_float_step": (lambda x: x * np.arange(0, 3.7, 0.1, dtype=np.float32).astype(x.dtype), [(5, 37)]),
    "arange_reversed": (lambda x: x - np.arange(40, 3, -1)[::-2].astype(x.dtype), [(3, 19)]),
    "arange_flat": (lambda x: x * 2 + np.arange(x.size, dtype=x.dtype), [(1030,)]),
    "iota_inner_broadcast": (lambda x, b: x + b + np.arange(x.shape[0])[:, None].astype(x.dtype), [(6, 64), (64,)]),
    "pad_rows_kept": (lambda x: np.pad(x, ((2, 1), (0, 0)), mode="edge").sum(axis=-1), [(7, 64)]),
    "concat_var": (lambda x, y: np.concatenate([x, y], axis=-1).var(axis=-1), [(6, 40), (6, 25)]),
    "onehot": (lambda t: t[:, None] == np.arange(9, dtype=t.dtype), [(33,)]),
    "iota_rows": (lambda x: (x * np.arange(x.shape[1]).astype(x.dtype)).sum(axis=1), [(7, 130)]),
    "iota_cols": (lambda x: (x * np.arange(x.shape[0])[:, None].astype(x.dtype)).max(axis=0), [(65, 9)]),
    "iota_all": (lambda x: (x + np.arange(x.size).reshape(x.shape).astype(x.dtype)).sum(), [(300,)]),
    "iota_one_pass": (lambda x: (x * 0 + np.arange(x.shape[1], dtype=np.float32).astype(x.dtype)).var(axis=1),
                      [(4, 50)]),
    "iota_transposed": (lambda x: x + np.indices(x.shape[::-1])[0].T.astype(x.dtype), [(6, 8)]),
    "indices_sparse": (lambda x: x * np.indices(x.shape, sparse=True)[1].astype(x.dtype), [(5, 7)]),
    "indices_dense": (lambda x: x + np.indices(x.shape).sum(axis=0).astype(x.dtype), [(5, 7)]),
    "pad_edge": (lambda x: np.pad(x, ((2, 1), (3, 0)), mode="edge") * 2, [(5, 7)]),
    "pad_reflect": (lambda x: np.pad(x * 2, ((1, 2), (3, 0)), mode="reflect") - 1, [(5, 7)]),
    "pad_wrap_sum": (lambda x: np.pad(x, ((0, 0), (2, 3)), mode="wrap").sum(axis=-1), [(6, 21)]),
    "pad_constant": (lambda x: np.pad(x + 1, 2, constant_values=((5, 6), (7, 8))), [(4, 5)]),
    "pad_reversed": (lambda x: np.pad(x[::-1, ::-2], ((1, 2), (3, 1)), mode="edge") + 1, [(5, 9)]),
    "pad_row_sum": (lambda x: np.pad(x, (0, 3), mode="edge").sum(axis=-1), [(6, 21)]),
    "concat_inputs": (lambda x, y: np.concatenate([x, y], axis=1), [(4, 3), (4, 5)]),
    "concat_axis0": (lambda x, y: np.concatenate([x, y, x]) - 1, [(4, 3), (2, 3)]),
    "concat_computed": (lambda x, y: np.concatenate([np.abs(x), y * 2, x[:, ::-1]], axis=-1) + 1, [(3, 4), (3, 2)]),
    "concat_none": (lambda x, y: np.concatenate([x, y], axis=None) * 3, [(6,), (4,)]),
    "concat_of_concat": (lambda x, y: np.concatenate([np.concatenate([x, y], 1), x], 1), [(3, 2), (3, 4)]),
    "slice_of_concat": (lambda x, y: np.concatenate([x, y], axis=1)[:, 1:-1:2], [(4, 5), (4, 6)]),
    "concat_row_sum": (lambda x, y: np.concatenate([x, y], axis=-1).sum(axis=-1), [(8, 30), (8, 17)]),
    "concat_col_sum": (lambda x, y: np.concatenate([x, y], axis=0).sum(axis=0), [(40, 6), (9, 6)]),
    "concat_all_max": (lambda x, y: np.concatenate([x, -y]).max(), [(33,), (20,)]),
    "stack": (lambda x, y: np.stack([x, y, x * y], axis=1), [(4, 3), (4, 3)]),
    "stack_last": (lambda x, y: np.stack((x, y), axis=-1).sum(axis=1), [(4, 3), (4, 3)]),
    "hstack": (lambda x, y: np.hstack([x, y]), [(3, 2), (3, 5)]),
    "vstack": (lambda x, y: np.vstack([x, y]), [(5,), (5,)]),
    "dstack": (lambda x, y: np.dstack([x, y]), [(3, 4), (3, 4)]),
    "column_stack": (lambda x, y: np.column_stack([x, y]), [(6,), (6, 2)]),
    "append": (lambda x, y: np.append(x, y[::-1]), [(6,), (4,)]),
    "append_axis": (lambda x, y: np.append(x, y, axis=0), [(2, 3), (1, 3)]),
    "rope": (_rope, [(2, 3, 4, 16), (3, 1, 16), (3, 1, 16)]),
    "rope_split": (_rope_split, [(2, 5, 16), (5, 16), (5, 16)]),
}


def _args(name: str, dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(seed_of("joins", name, dtype))
    _, shapes = WORKLOADS[name]
    if name == "onehot":
        return [rng.integers(-1, 11, shapes[0]).astype(dtype)]
    return [random_array(rng, s, dtype, special=False) for s in shapes]


def _check(fn, args, exact: bool = True) -> fusec.Fused:
    fused = fusec.fuse(fn)
    with np.errstate(all="ignore"):
        want = fn(*args)
        got = fused(*args)
    for g, w in zip(got if isinstance(want, tuple) else [got], want if isinstance(want, tuple) else [want]):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert_matches_numpy(g, w, exact=exact, rtol=2e-6 if not exact else 0, atol=0 if exact else 1e-5)
    return fused


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_join_workload_matches_numpy_in_one_kernel(name: str, dtype: str) -> None:
    fn, _ = WORKLOADS[name]
    args = _args(name, dtype)
    reduces = any(k in name for k in ("sum", "rows", "cols", "all", "one_pass", "dense", "kept", "var"))
    fused = _check(fn, args, exact=not (reduces and dtype != "int32"))
    assert len(fused.plan(*args).kernels) == 1


# --- arange ---------------------------------------------------------------------------------------------------
ARANGES = [
    (5,), (0,), (-3,), (2, 9), (9, 2), (9, 2, -2), (0, 1, 0.1), (0.5, 7.25, 0.75), (-1.0, 1.0, 1 / 3), (3, -4.5, -0.7),
    (np.float32(0), np.float32(1), np.float32(0.1)), (np.int8(3), 40), (1e8, 1e8 + 40), (0, 1, 1e-3),
]
DTYPES = [None, "float32", "float16", "float64", "int8", "int32", "uint8", "int64", "uint64"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("args", ARANGES, ids=repr)
def test_arange_matches_numpy_bit_for_bit(args: tuple, dtype: str | None) -> None:
    try:
        with np.errstate(all="ignore"):
            want = np.arange(*args, dtype=dtype)
    except (OverflowError, ValueError, TypeError) as exc:
        with pytest.raises((FusecError, type(exc))):
            fusec.fuse(lambda x: np.arange(*args, dtype=dtype))(np.zeros(1))
        return
    got = fusec.fuse(lambda x: np.arange(*args, dtype=dtype))(np.zeros(1))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    # inside a kernel: the same values through an elementwise op
    got2 = fusec.fuse(lambda x: x[:1] * 0 + np.arange(*args, dtype=dtype))(np.zeros(1, want.dtype))
    assert np.array_equal(got2, want, equal_nan=True)


def _plus_arange(start, stop, step, dtype):
    return lambda x: x + np.arange(start, stop, step, dtype=dtype)


def _indices(dims, dtype, sparse):
    return lambda x: np.indices(dims, dtype=dtype, sparse=sparse)


def test_arange_random_float_steps_bit_for_bit() -> None:
    rng = np.random.default_rng(seed_of("arange float steps"))
    for k in range(200):
        start, step = float(rng.uniform(-50, 50)), float(rng.uniform(-2, 2)) or 0.5
        stop = start + step * int(rng.integers(0, 400))
        dtype = ["float32", "float16", "float64", None][k % 4]
        want = np.arange(start, stop, step, dtype=dtype)
        got = fusec.fuse(_plus_arange(start, stop, step, dtype))(np.zeros((), want.dtype))
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (start, stop, step, dtype)


def test_arange_keywords_and_cupy_spelling() -> None:
    got = fusec.fuse(lambda x: x + np.arange(start=2, stop=11, step=3))(np.zeros(3, np.int64))
    assert np.array_equal(got, np.arange(2, 11, 3))


def test_arange_bound_from_a_runtime_scalar_is_static() -> None:
    f = fusec.fuse(lambda x, n: x[:n] + np.arange(n))
    x = np.ones(10)
    assert np.array_equal(f(x, 4), 1 + np.arange(4))
    assert np.array_equal(f(x, 7), 1 + np.arange(7))


def test_arange_errors() -> None:
    x = np.zeros(3)
    with pytest.raises(FusecTypeError, match="length 2"):
        fusec.fuse(lambda x: x[:1] + np.arange(3, dtype=bool))(x)
    with pytest.raises(FusecValueError, match="step is zero"):
        fusec.fuse(lambda x: x + np.arange(0, 3, 0))(x)
    with pytest.raises(FusecTypeError, match="traced array"):
        fusec.fuse(lambda x: np.arange(x.sum()))(x)
    with pytest.raises(FusecValueError, match="cannot compute length"):
        fusec.fuse(lambda x: x + np.arange(0, np.nan))(x)


def test_arange_reads_no_memory() -> None:
    f = fusec.fuse(lambda x: x + np.arange(1000, dtype=np.float32))
    (kernel,) = f.plan(fusec.ArraySpec((1000,), "float32")).kernels
    assert kernel.bytes_read == 4000 and kernel.bytes_written == 4000


def test_indices_match_numpy() -> None:
    for dims, dtype, sparse in [((3, 4), int, False), ((2, 3, 2), np.int32, False), ((5, 2), np.float32, True),
                                ((4,), np.int8, False)]:
        want = np.indices(dims, dtype=dtype, sparse=sparse)
        got = fusec.fuse(_indices(dims, dtype, sparse))(np.zeros(1))
        for g, w in zip(got if sparse else [got], want if sparse else [want]):
            assert g.dtype == w.dtype and np.array_equal(g, w)


# --- pad ------------------------------------------------------------------------------------------------------
PADS = [
    (1, {}), ((1, 2), {}), (((0, 1), (2, 0)), {}), (0, {}), (3, {"constant_values": 9}),
    (((1, 1), (1, 1)), {"constant_values": ((1, 2), (3, 4))}), ((2, 1), {"constant_values": (-7, 7)}),
    (1, {"mode": "edge"}), (((2, 3), (0, 4)), {"mode": "edge"}), ((5, 5), {"mode": "edge"}),
    (1, {"mode": "wrap"}), (((4, 0), (2, 5)), {"mode": "wrap"}), (((2, 3), (0, 4)), {"mode": "reflect"}),
    ((3, 1), {"mode": "symmetric"}), (((0, 4), (5, 2)), {"mode": "symmetric"}),
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8", "bool"])
@pytest.mark.parametrize("width, kw", PADS, ids=repr)
def test_pad_matches_numpy(width: object, kw: dict, dtype: str) -> None:
    x = random_array(np.random.default_rng(seed_of("pad", repr(width), repr(kw), dtype)), (4, 5), dtype)
    fn = lambda x: np.pad(x, width, **kw)  # noqa: E731
    fused = _check(fn, [x])
    assert len(fused.plan(x).kernels) <= 1
    _check(lambda x: np.pad(x[::-1, ::-1], width, **kw), [x])  # a view of an input, padded


def test_pad_constant_cast_and_empty() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    _check(lambda x: np.pad(x, 1, constant_values=2.7), [x])
    _check(lambda x: np.pad(x[:, :0], 1, constant_values=3), [x])
    with pytest.raises(FusecValueError, match="empty axis"):
        fusec.fuse(lambda x: np.pad(x[:, :0], 1, mode="edge"))(x)


def test_pad_unsupported_modes_say_so() -> None:
    x = np.zeros((3, 3))
    with pytest.raises(UnsupportedError, match="'linear_ramp' is not traced"):
        fusec.fuse(lambda x: np.pad(x, 1, mode="linear_ramp"))(x)
    with pytest.raises(UnsupportedError, match="wider than the axis"):
        fusec.fuse(lambda x: np.pad(x, 3, mode="reflect"))(x)
    with pytest.raises(UnsupportedError, match="reflect_type"):
        fusec.fuse(lambda x: np.pad(x, 1, mode="reflect", reflect_type="odd"))(x)
    with pytest.raises(FusecTypeError, match="integral"):
        fusec.fuse(lambda x: np.pad(x, 1.5))(x)


# --- joins ----------------------------------------------------------------------------------------------------
def test_concatenate_mixed_dtypes_promote_as_numpy() -> None:
    a, b = np.arange(4, dtype=np.int8), np.linspace(0, 1, 3, dtype=np.float16)
    c = np.arange(2, dtype=np.uint32)
    _check(lambda a, b, c: np.concatenate([a, b, c]), [a, b, c])
    _check(lambda a, b: np.concatenate([a, b], dtype=np.float32), [a, b])
    _check(lambda a, c: np.stack([a[:2], c]), [a, c])
    _check(lambda a: np.append(a, 5), [a])
    _check(lambda a: np.append(a.astype(np.float32), 2.5), [a])


def test_concatenate_many_operands_and_empty_parts() -> None:
    rng = np.random.default_rng(seed_of("many operands"))
    parts = [random_array(rng, (3, k), "float32") for k in (1, 0, 4, 2, 0, 7, 1, 3)]
    fused = _check(lambda *ps: np.concatenate(ps, axis=1) * 2, parts)
    assert len(fused.plan(*parts).kernels) == 1
    _check(lambda a, b: np.concatenate([a[:, :0], b[:, :0]], axis=1), parts[:2])
    _check(lambda a: np.concatenate([a]), parts[:1])


def test_join_then_reductions_and_views() -> None:
    rng = np.random.default_rng(seed_of("join views"))
    x, y = random_array(rng, (5, 6), "float32", special=False), random_array(rng, (5, 3), "float32", special=False)
    for fn in (lambda x, y: np.concatenate([x, y], 1).T[::-1] + 1,
               lambda x, y: np.concatenate([x, y], 1)[None, 1:4, :, None] * 2,
               lambda x, y: np.concatenate([x, y], 1).argmax(axis=1),
               lambda x, y: np.concatenate([x.sum(axis=1, keepdims=True), y], 1),
               lambda x, y: np.concatenate([np.exp(x), y], axis=-1)[..., 3:8]):
        _check(fn, [x, y], exact=False)


def test_join_errors_name_the_problem() -> None:
    x, y = np.zeros((2, 3)), np.zeros((3, 3))
    with pytest.raises(FusecValueError, match="along dimension 0"):
        fusec.fuse(lambda x, y: np.concatenate([x, y], axis=1))(x, y)
    with pytest.raises(FusecValueError, match="same number of dimensions"):
        fusec.fuse(lambda x, y: np.concatenate([x, y[0]]))(x, y)
    with pytest.raises(FusecValueError, match="zero-dimensional"):
        fusec.fuse(lambda x: np.concatenate([x.sum(), x.sum()]))(x)
    with pytest.raises(FusecValueError, match="same shape"):
        fusec.fuse(lambda x, y: np.stack([x, y]))(x, y)
    with pytest.raises(FusecTypeError, match="same_kind"):
        fusec.fuse(lambda x, y: np.concatenate([x, y], dtype=np.int32))(x, y)
    assert np.array_equal(fusec.fuse(lambda x: np.concatenate(x))(x), np.concatenate(x))  # x's rows, as NumPy


def test_join_traces_again_for_each_size() -> None:
    f = fusec.fuse(lambda x, y: np.concatenate([x, y]))
    for n, m in [(3, 4), (5, 2), (3, 4)]:
        x, y = np.arange(n, dtype=np.float32), np.ones(m, np.float32)
        assert np.array_equal(f(x, y), np.concatenate([x, y]))


def test_rope_is_one_kernel_with_no_copy() -> None:
    spec = [fusec.ArraySpec((4, 64, 8, 128), "float32"), fusec.ArraySpec((64, 1, 128), "float32"),
            fusec.ArraySpec((64, 1, 128), "float32")]
    for fn in (_rope, _rope_split):
        (kernel,) = fusec.fuse(fn).plan(*spec).kernels
        assert kernel.bytes_read == 4 * (4 * 64 * 8 * 128 + 2 * 64 * 128)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_join_graphs_round_trip_through_ir_text(name: str) -> None:
    from fusec.ir.printer import print_graph
    from fusec.ir.text import parse

    fn, _ = WORKLOADS[name]
    args = _args(name, "float16")
    fused = fusec.fuse(fn)
    for graph in (fused.trace(*args), fused.plan(*args).graph):
        text = print_graph(graph)
        assert parse(text) == graph and print_graph(parse(text)) == text


def test_iota_text_keeps_float_values_exact() -> None:
    from fusec.ir.printer import print_graph
    from fusec.ir.text import parse

    for dtype in ("float16", "float32", "float64"):
        graph = fusec.fuse(_plus_arange(0.1, 2.3, 0.7, dtype)).trace(np.zeros(4, dtype))
        assert parse(print_graph(graph)) == graph


def test_benchmark_rope_builder_matches_numpy_in_one_kernel() -> None:
    from benchmarks.idioms_joins import build_rope, rope_inputs

    x, cos, sin = rope_inputs((2, 16, 3, 128))
    want = build_rope(np)(x, cos, sin)
    fused = fusec.fuse(build_rope(np))
    assert np.array_equal(fused(x, cos, sin), want)
    assert len(fused.plan(x, cos, sin).kernels) == 1


def test_benchmark_torch_rope_matches_numpy() -> None:
    from benchmarks.idioms_joins import build_rope, rope_inputs, torch_rope

    torch = pytest.importorskip("torch")
    x, cos, sin = rope_inputs((2, 16, 3, 128))
    want = build_rope(np)(x, cos, sin)
    got = torch_rope(torch)(*(torch.from_numpy(a) for a in (x, cos, sin))).numpy()
    assert np.array_equal(got, want)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_join_plans_run_kernel_by_kernel(name: str, fusion: bool) -> None:
    """Each kernel of the plan (fused, and one op per kernel) sees only what it declares as inputs."""
    from fusec.runtime.plan import execute_numpy

    fn, _ = WORKLOADS[name]
    args = _args(name, "float32" if name != "onehot" else "int32")
    plan = fusec.fuse(fn, fusion=fusion).plan(*args)
    with np.errstate(all="ignore"):
        want = fn(*args)
        got = execute_numpy(plan, args)
    for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert_matches_numpy(g, w, rtol=2e-6, atol=1e-5)
