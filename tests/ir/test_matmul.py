"""The ``matmul`` op and the matmul kind on the CPU: the op (inference, text, the reference interpreter), the
frontend's mapping of ``@``, ``matmul``, ``dot``, ``inner``, ``tensordot`` and two-operand ``einsum``s beyond the
loop limit to it (against NumPy through the reference backend, floats within the float32-accumulation bound of the
float64 product), the plan (one matmul kernel, its epilogue one kernel reading the product once), ``explain`` and
``cuda_source``, and the TF32 switch. The GPU path on the CPU's fake CuPy is ``tests/correctness/
test_matmul_fake_gpu.py``; on a GPU, ``tests/gpu/test_matmul_gpu.py``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fusec
from fusec.ir.graph import Graph, make_node
from fusec.ir.interpret import interpret
from fusec.ir.ops import OPS, Kind
from fusec.ir.printer import print_graph
from fusec.ir.text import parse
from fusec.schedule import ScheduleError
from fusec.support.errors import FusecTypeError, FusecValueError
from tests.helpers import assert_gemm_matches, assert_matches_numpy, seed_of
from tests.workloads import gelu, layernorm, softmax


def _input(name, shape, dtype="float32"):
    return make_node("input", (), {"name": name}, dtype=dtype, shape=shape)


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed_of("matmul", seed, shape, dtype))
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)  # float16 products of these stay far from overflow


# -- the op -------------------------------------------------------------------------------------------------------
def test_matmul_op_is_a_contraction_in_the_table():
    op = OPS["matmul"]
    assert op.kind is Kind.CONTRACTION and op.arity == 2


@pytest.mark.parametrize("a, b, want", [
    ((5, 3), (3, 7), (5, 7)),
    ((2, 5, 3), (3, 7), (2, 5, 7)),
    ((4, 1, 5, 3), (6, 3, 7), (4, 6, 5, 7)),
    ((1, 5, 3), (6, 3, 7), (6, 5, 7)),
    ((0, 3), (3, 7), (0, 7)),
    ((5, 0), (0, 7), (5, 7)),
])
def test_matmul_infers_numpys_shape(a, b, want):
    node = make_node("matmul", [_input("a", a), _input("b", b)])
    assert node.shape == want == np.matmul(np.zeros(a), np.zeros(b)).shape
    assert node.dtype == np.float32


@pytest.mark.parametrize("a, b, dta, dtb, error, text", [
    ((5, 3), (4, 7), "float32", "float32", FusecValueError, "core dimension"),
    ((2, 5, 3), (3, 3, 7), "float32", "float32", FusecValueError, "broadcast"),
    ((3,), (3, 7), "float32", "float32", FusecValueError, "at least 2 dimensions"),
    ((5, 3), (3, 7), "float32", "float16", FusecTypeError, "one dtype"),
    ((5, 3), (3, 7), "bool", "bool", FusecTypeError, "integer or float"),
])
def test_matmul_inference_refuses_what_numpy_would(a, b, dta, dtb, error, text):
    with pytest.raises(error, match=text):
        make_node("matmul", [_input("a", a, dta), _input("b", b, dtb)])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32", "int64", "uint8"])
def test_matmul_interpreter_is_numpy_with_float16_accumulated_in_float32(dtype):
    a, b = _data((2, 17, 33), dtype, 0), _data((33, 9), dtype, 1)
    graph = Graph("f", (x := _input("a", a.shape, dtype), y := _input("b", b.shape, dtype)),
                  (make_node("matmul", [x, y]),))
    (got,) = interpret(graph, [a, b])
    if dtype == "float16":  # one rounding of the float32 accumulation, as cuBLAS's CUBLAS_COMPUTE_32F
        want = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    else:
        want = np.matmul(a, b)  # integers wrap (int8 here overflows), floats as NumPy
    assert_matches_numpy(got, want, exact=True)


def test_matmul_text_round_trips():
    text = ("func @f(%a: f32[2,5,3], %b: f32[3,7]) -> f32[2,5,7] {\n"
            "  %0 = matmul %a, %b : f32[2,5,7]\n"
            "  return %0\n"
            "}\n")
    graph = parse(text)
    assert print_graph(graph).rstrip() == text.rstrip()
    assert parse(print_graph(graph)).outputs == graph.outputs


# -- the frontend's mapping ----------------------------------------------------------------------------------------
CASES = {  # name: (function, operand shapes); each beyond the loop limit: a matmul
    "at": (lambda a, b: a @ b, [(67, 33), (33, 129)]),
    "np_matmul": (lambda a, b: np.matmul(a, b), [(3, 40, 24), (3, 24, 50)]),
    "dot": (lambda a, b: np.dot(a, b), [(67, 33), (33, 129)]),
    "dot_nd": (lambda a, b: np.dot(a, b), [(2, 40, 24), (3, 24, 50)]),
    "inner": (lambda a, b: np.inner(a, b), [(67, 33), (129, 33)]),
    "tensordot_1": (lambda a, b: np.tensordot(a, b, axes=1), [(4, 30, 24), (24, 50)]),
    "tensordot_2": (lambda a, b: np.tensordot(a, b), [(40, 6, 7), (6, 7, 50)]),
    "tensordot_lists": (lambda a, b: np.tensordot(a, b, axes=([0], [1])), [(33, 67), (129, 33)]),
    "einsum_bqd_bkd": (lambda q, k: np.einsum("bqd,bkd->bqk", q, k), [(3, 40, 24), (3, 50, 24)]),
    "einsum_ij_jk": (lambda a, b: np.einsum("ij,jk->ik", a, b), [(67, 33), (33, 129)]),
    "einsum_bij_bjk": (lambda a, b: np.einsum("bij,bjk->bik", a, b), [(3, 40, 24), (3, 24, 50)]),
    "einsum_transposed_out": (lambda a, b: np.einsum("ij,jk->ki", a, b), [(67, 33), (33, 129)]),
    "transposed_a": (lambda a, b: a.T @ b, [(33, 67), (33, 129)]),
    "transposed_b": (lambda q, k: q @ k.T, [(67, 33), (129, 33)]),
    "swapaxes_b": (lambda q, k: q @ np.swapaxes(k, -1, -2), [(3, 40, 24), (3, 50, 24)]),
    "batch_broadcast": (lambda a, b: a @ b, [(4, 1, 40, 24), (3, 24, 50)]),
    "stack_times_matrix": (lambda x, w: x @ w, [(2, 30, 40), (40, 50)]),
    "sliced_in_function": (lambda a, b: a[::2, 1:] @ b[1:, ::3], [(134, 34), (34, 387)]),
    "odd_sizes": (lambda a, b: a @ b, [(1, 129, 31), (31, 17)]),
}
DTYPES = ["float16", "float32", "float64", "int32", "int8"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_matmul_frontend_maps_contractions_to_one_matmul_kernel(name, dtype):
    fn, shapes = CASES[name]
    args = [_data(s, dtype, i) for i, s in enumerate(shapes)]
    f = fusec.fuse(fn)
    plan = f.plan(*args)
    assert [k.kind for k in plan.kernels].count("matmul") == 1
    got = f(*args)
    want = fn(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    _check_against(got, want, fn, args)


def _check_against(got, want, fn, args):
    """``got`` against ``fn`` of the arguments (NumPy's ``want``) as a GEMM: :func:`tests.helpers.gemm_bound`'s
    bound, with ``sum|a||b|`` as ``fn`` of the operands' magnitudes (``fn`` is one bilinear product, its result
    possibly transposed) and K at most the operands' largest last extent."""
    if want.dtype.kind in "iu":
        return assert_matches_numpy(got, want, exact=True)
    exact = fn(*[a.astype(np.float64) for a in args])
    magnitude = fn(*[np.abs(a.astype(np.float64)) for a in args])
    k = max(np.asarray(a).shape[-1] for a in args)  # an upper bound of K for the cases' layouts
    u_acc = 2.0 ** -53 if want.dtype == np.float64 else 2.0 ** -24
    bound = 1.01 * k * u_acc * magnitude + ml_dtypes.finfo(want.dtype).eps / 2 * (np.abs(exact) + k * u_acc * magnitude)
    err = np.abs(np.asarray(got, np.float64) - exact)
    assert (err <= bound).all(), f"max error {err.max()} over the bound (max {bound.max()})"


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "uint8"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "offset"])
def test_matmul_operands_of_any_layout_match_the_gemm_bound(dtype, layout):
    """Arguments that are views (transposed, stepped, at an offset into their buffer) through the reference backend."""
    base_a, base_b = _data((70, 90), dtype, 3), _data((90, 140), dtype, 4)
    views = {
        "contiguous": (base_a[:, :45], base_b[:45, :70]),
        "transposed": (np.ascontiguousarray(base_a.T).T[:, :45], np.ascontiguousarray(base_b.T).T[:45]),
        "strided": (base_a[::2, ::2], base_b[::2, ::2]),
        "offset": (base_a[3:, 5:50], base_b[7:52, 1:]),
    }
    a, b = views[layout]
    f = fusec.fuse(lambda a, b: a @ b)
    assert [k.kind for k in f.plan(a, b).kernels] == ["matmul"]
    assert_gemm_matches(f(a, b), a, b)


def test_matmul_mixed_dtypes_cast_first_as_numpy_promotes():
    a, b = _data((64, 48), "float16", 5), _data((48, 80), "float32", 6)
    f = fusec.fuse(lambda a, b: a @ b)
    assert [k.kind for k in f.plan(a, b).kernels] == ["pointwise", "matmul"]  # the cast, then the GEMM
    assert_gemm_matches(f(a, b), a.astype(np.float32), b)


@pytest.mark.parametrize("fn, shapes", [
    (lambda v, m: v @ m, [(33,), (5, 33, 48)]),  # a vector's product is a reduction at every size
    (lambda m, v: m @ v, [(5, 33, 48), (48,)]),
    (lambda a, b: a @ b, [(640, 1), (1, 480)]),  # K = 1: an outer product
    (lambda a, b: a @ b, [(0, 33), (33, 48)]),  # empty: nothing to loop over
    (lambda a, b: a @ b, [(64, 0), (0, 48)]),
], ids=["vector_left", "vector_right", "k1", "m0", "k0"])
def test_matmul_small_contractions_stay_a_product_and_a_sum(fn, shapes):
    args = [_data(s, "float32", i) for i, s in enumerate(shapes)]
    f = fusec.fuse(fn)
    assert "matmul" not in [k.kind for k in f.plan(*args).kernels]
    assert_matches_numpy(f(*args), fn(*args))


# -- the plan, explain, cuda_source ---------------------------------------------------------------------------------
EPILOGUES = {
    "gelu_bias": (lambda x, w, b: gelu(x @ w + b), [(64, 32), (32, 96), (96,)], "pointwise"),
    "attention_scores": (lambda q, k, m: softmax(q @ k.T * 0.125 + m), [(64, 32), (80, 32), (64, 80)], "rows"),
    "layernorm_residual": (lambda x, w, b, r: layernorm(x @ w + b + r), [(64, 32), (32, 96), (96,), (64, 96)],
                           "rows"),
    "router_argmax": (lambda x, w: np.argmax(softmax(x @ w), axis=-1), [(256, 64), (64, 64)], "rows"),
}


@pytest.mark.parametrize("name", list(EPILOGUES))
def test_matmul_epilogue_is_one_kernel_reading_the_product_once(name):
    fn, shapes, epilogue = EPILOGUES[name]
    args = [_data(s, "float32", i) for i, s in enumerate(shapes)]
    plan = fusec.fuse(fn).plan(*args)
    assert [k.kind for k in plan.kernels] == ["matmul", epilogue]
    gemm, after = plan.kernels
    (product,) = gemm.outputs
    assert product.op == "matmul" and product in after.inputs
    assert gemm.bytes_read == sum(a.nbytes for a in args[:2]) and gemm.bytes_written == product.nbytes
    others = sum(a.nbytes for a in args[2:])
    assert after.bytes_read == product.nbytes + others  # the product read once, with the epilogue's own inputs
    assert any("the matmul runs in cuBLAS; its epilogue is a kernel of its own that reads the product once" in r
               for r in plan.refusals)
    got = fusec.fuse(fn)(*args)
    assert_matches_numpy(got, fn(*args), **({} if got.dtype.kind == "i" else dict(rtol=1e-5, atol=1e-5)))


def test_matmul_explain_shows_the_call_what_went_into_it_and_why_the_epilogue_did_not():
    x, w, b = (fusec.ArraySpec(s, "float32") for s in [(8192, 4096), (4096, 11008), (11008,)])
    text = str(fusec.fuse(lambda x, w, b: gelu(x @ w + b)).explain(x, w, b))
    assert "kernel @k0 matmul {" in text
    assert ("launch: a library call: cuBLAS gemm (M=8192, N=11008, K=4096, batch=1, transa=N, transb=N, float32, "
            "float32 accumulation)") in text
    assert "fused into it: nothing" in text
    assert ("(add) and %0 (matmul) stay in separate kernels: the matmul runs in cuBLAS; its epilogue is a kernel of "
            "its own that reads the product once") in text
    assert "schedule: matmul:cublas,tf32=0" in text
    product = 8192 * 11008 * 4
    assert f"writes: {product / 2 ** 20:.3f} MiB ({product} B) to %0 (read by k1)" in text


def test_matmul_cuda_source_is_a_comment_naming_the_call():
    q, k = fusec.ArraySpec((2048, 128), "float16"), fusec.ArraySpec((2048, 128), "float16")
    f = fusec.fuse(lambda q, k: q @ k.T)
    source = f.cuda_source(q, k)
    assert source == ("// k0_matmul: cuBLAS gemm (M=2048, N=2048, K=128, batch=1, transa=N, transb=T, float16, "
                      "float32 accumulation)\n")
    assert f.cuda_source(q, k, full=True) == source
    assert list(f.ptxas(q, k)) == []  # nothing of fusec's to compile


def test_matmul_stack_of_transposed_operands_says_cupy_copies_them():
    q, k = fusec.ArraySpec((8, 2048, 128), "float32"), fusec.ArraySpec((8, 2048, 128), "float32")
    source = fusec.fuse(lambda q, k: np.einsum("bqd,bkd->bqk", q, k)).cuda_source(q, k)
    assert "cuBLAS gemm (strided batched) (M=2048, N=2048, K=128, batch=8, transa=N, transb=copy" in source


def test_matmul_stack_times_a_matrix_is_one_gemm_over_the_merged_rows():
    x, w = fusec.ArraySpec((4, 1024, 512), "float32"), fusec.ArraySpec((512, 256), "float32")
    source = fusec.fuse(lambda x, w: x @ w).cuda_source(x, w)
    assert "cuBLAS gemm (M=4096, N=256, K=512, batch=1, transa=N, transb=N" in source


# -- TF32 ----------------------------------------------------------------------------------------------------------
def test_matmul_tf32_is_off_unless_asked_for(monkeypatch):
    a, b = fusec.ArraySpec((512, 512), "float32"), fusec.ArraySpec((512, 512), "float32")
    fn = lambda a, b: a @ b  # noqa: E731
    monkeypatch.delenv("FUSEC_TF32", raising=False)
    monkeypatch.setenv("CUPY_TF32", "1")  # CuPy's own switch does not apply to fusec's GEMMs
    assert "tf32=0" in fusec.fuse(fn).cuda_source(a, b) + str(fusec.fuse(fn).explain(a, b))
    assert "TF32 allowed" in fusec.fuse(fn, tf32=True).cuda_source(a, b)
    assert "schedule: matmul:cublas,tf32=1" in str(fusec.fuse(fn, tf32=True).explain(a, b))
    monkeypatch.setenv("FUSEC_TF32", "1")
    assert "schedule: matmul:cublas,tf32=1" in str(fusec.fuse(fn).explain(a, b))
    assert "schedule: matmul:cublas,tf32=0" in str(fusec.fuse(fn, tf32=False).explain(a, b))
    h = fusec.ArraySpec((512, 512), "float16")  # float16 always accumulates in float32: tf32 leaves it alone
    assert "float16, float32 accumulation" in fusec.fuse(fn, tf32=True).cuda_source(h, h)
    with pytest.raises(ScheduleError, match="tf32=1 applies to float32 products"):
        fusec.fuse(fn, schedules={"k0": "matmul:cublas,tf32=1"}).cuda_source(h, h)


@pytest.mark.parametrize("name", ["matmul", "dot", "inner", "tensordot", "einsum"])
def test_small_float16_contractions_accumulate_in_float32_as_numpy(name: str) -> None:
    """Below the loop limit a contraction is a product and a sum: in float16 both run in float32 and round once, so
    matmul, dot, inner and tensordot give NumPy's float16 bits (its loops accumulate in float32); einsum too (NumPy's
    own einsum rounds as it goes, which is less exact: fusec's result is the float32-accumulated one). Rounding each
    product to float16 first was up to 7 times further from the float64 product."""
    rng = np.random.default_rng(20261207)
    a = rng.standard_normal((16, 64)).astype(np.float16)
    b = rng.standard_normal((64, 48)).astype(np.float16)
    fns = {"matmul": lambda a, b: a @ b, "dot": np.dot, "inner": lambda a, b: np.inner(a, b.T),
           "tensordot": lambda a, b: np.tensordot(a, b, 1), "einsum": lambda a, b: np.einsum("ij,jk->ik", a, b)}
    fused = fusec.fuse(fns[name])
    assert not any(k.kind == "matmul" for k in fused.plan(a, b).kernels)  # the product-and-sum path
    got = fused(a, b)
    expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16 and np.array_equal(got, expected)
    if name != "einsum":
        assert np.array_equal(got, fns[name](a, b))


def test_bfloat16_products_run_as_float32_gemms_rounded_once() -> None:
    """The cuBLAS-through-CuPy backend has no bfloat16 GEMM: the matmul kind's call widens the operands to float32
    exactly (their bits shifted), runs the float32 GEMM and rounds once to nearest even by the bits, which is float32
    accumulation as for float16 and what the reference backend computes. Checked here with NumPy as the array
    module: the call's bits against the reference's, and its rounding against ml_dtypes' cast on every kind of
    float32 (random bits, ties, overflow, subnormals, signed zeros, NaN)."""
    from fusec.kinds.matmul import cublas_matmul, round_to_bfloat16_bits, widen_bfloat16

    bf16 = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(seed_of("bf16 matmul"))
    a = rng.standard_normal((3, 96, 160)).astype(bf16)
    b = rng.standard_normal((160, 72)).astype(bf16)
    fused = fusec.fuse(lambda a, b: np.dot(a, b))  # NumPy's dot keeps bfloat16 (its ``@`` does not: the test below)
    assert [k.kind for k in fused.plan(a, b).kernels] == ["matmul"]
    want = fused(a, b)  # the reference backend: float32 accumulation, rounded once
    assert want.dtype == bf16 == np.dot(a, b).dtype
    rounded_once = (a.astype(np.float32) @ b.astype(np.float32)).astype(bf16)
    assert np.array_equal(want.view(np.uint16), rounded_once.view(np.uint16))
    out = np.empty(want.shape[1:], bf16)
    cublas_matmul(np, a[1], b, out)  # a matrix (a stack's merge takes CuPy's data.ptr)
    assert np.array_equal(out.view(np.uint16), want[1].view(np.uint16))

    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(bf16)
    wide = widen_bfloat16(np, every)
    finite = ~np.isnan(wide)
    assert np.array_equal(wide[finite], every.astype(np.float32)[finite])
    bits = np.concatenate([rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32),
                           np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x7F7F8000, 0x3F808000,
                                     0x3F818000, 0x00008000, 0x00018000, 0x0000FFFF, 0x7FC00000, 0xFFC00001,
                                     0x7F800001], np.uint32)])
    x = bits.view(np.float32)
    got = round_to_bfloat16_bits(np, x).view(bf16)
    nan = np.isnan(x)
    with np.errstate(invalid="ignore"):
        cast = x.astype(bf16)
    assert np.array_equal(got[~nan].view(np.uint16), cast[~nan].view(np.uint16))
    assert np.isnan(got[nan]).all() and np.array_equal(np.signbit(got[nan]), np.signbit(x[nan]))


@pytest.mark.parametrize("name", ["matmul", "at", "vecdot"])
def test_bfloat16_gufunc_products_take_numpys_float32_loop(name) -> None:
    """NumPy's matmul and vecdot gufuncs have no bfloat16 loop: they cast bfloat16 operands to float32 and return
    float32 (``dot`` and ``tensordot`` keep bfloat16); fusec gives the same dtype and, float32 products of exactly
    widened operands, the same values as NumPy's float32 loop up to its summation order."""
    bf16 = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(seed_of("bf16 gufunc products", name))
    a = rng.standard_normal((2, 37, 129)).astype(bf16)
    b = rng.standard_normal((129, 41) if name != "vecdot" else (37, 129)).astype(bf16)
    fn = {"matmul": lambda a, b: np.matmul(a, b), "at": lambda a, b: a @ b,
          "vecdot": lambda a, b: np.vecdot(a, b)}[name]
    expected = fn(a, b)
    got = fusec.fuse(fn)(a, b)
    assert got.dtype == expected.dtype == np.float32
    exact = fn(a.astype(np.float64), b.astype(np.float64))
    magnitude = fn(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert (np.abs(got - exact) <= 1.01 * 129 * 2.0**-24 * magnitude).all()  # float32 accumulation of exact products
