"""The everyday NumPy functions traced by ``fusec/frontend/creation_functions.py``, ``elementwise_functions.py``,
``contraction_functions.py``, the views of ``view_functions.py`` (``flipud``, ``rot90``, ``diagonal``, ...) and
the ``where=``/``initial=`` arguments of reductions, through ``fusec.fuse`` against NumPy on fresh random data
(NaN, infinities and extremes mixed in), in several dtypes: bit for bit where NumPy's steps are reproduced, within
the reduction tolerance where a float sum's order differs; kernel counts; NumPy's errors; the refusal of matrix
products. On the NumPy backend and on the GPU (``pytest -m gpu``: CuPy arguments, ``y`` transposed in memory, each
kernel's outputs poisoned before its launch, then the public call; skipped where CuPy sees no GPU).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import fusec
from fusec.support.errors import FusecError, UnsupportedError
from tests.backends import on_backends
from tests.helpers import assert_matches_numpy, random_array, seed_of


def _filled(e, v):
    e[...] = v
    return e


# name -> (function of (x, y, w): x and y of SHAPE, w of SHAPE[-1:], whether the values may differ within the
# reduction tolerance: a float sum's order, or the sign of a zero that maximum and minimum leave free)
CASES = {
    # arrays made in the function
    "array_constant": (lambda x, y, w: x * np.array([0.299, 0.587, 0.114, -1.0, 2.5]), False),
    "array_constant_2d": (lambda x, y, w: x + np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]).sum(0), False),
    "array_membership": (lambda x, y, w: (x[:, :1] == np.array([1, 3])).any(-1), False),
    "asarray_traced": (lambda x, y, w: np.asarray(x) + np.array(y, dtype=np.float64), False),
    "array_stacked": (lambda x, y, w: np.array([x[:, 0], y[:, 1] * 2]), False),
    "list_index": (lambda x, y, w: x[[0, 2, 1]] * 2, False),
    "list_columns": (lambda x, y, w: x[:, [4, 0, 3]] + y[:, :3], False),
    "nested_list_index": (lambda x, y, w: x[[[0], [3]], [1, 2]], False),
    "take_list": (lambda x, y, w: np.take(x, [3, -1], axis=1), False),
    "zeros": (lambda x, y, w: x + np.zeros(x.shape[-1], x.dtype), False),
    "ones_float64": (lambda x, y, w: x * np.ones(x.shape), False),
    "full": (lambda x, y, w: x - np.full((1, x.shape[1]), 3, dtype=x.dtype), False),
    "full_int_fill": (lambda x, y, w: np.full(x.shape, 7) + x, False),
    "empty_like_filled": (lambda x, y, w: _filled(np.empty_like(x), y) + x, False),
    "eye": (lambda x, y, w: x[:5, :5] + np.eye(5, dtype=x.dtype), False),
    "eye_rect_offset": (lambda x, y, w: x * np.eye(x.shape[0], x.shape[1], k=1, dtype=x.dtype), False),
    "identity": (lambda x, y, w: x[:4, :4] * np.identity(4, dtype=x.dtype), False),
    "tri": (lambda x, y, w: x * np.tri(*x.shape, k=-1, dtype=x.dtype), False),
    "tril": (lambda x, y, w: np.tril(x), False),
    "triu_k": (lambda x, y, w: np.triu(x, k=2) - 1, False),
    "linspace": (lambda x, y, w: x + np.linspace(-1, 3, x.shape[1]).astype(x.dtype), False),
    "linspace_no_endpoint_f32": (lambda x, y, w: x * np.linspace(np.float32(0.1), np.float32(7), x.shape[1],
                                                                endpoint=False), False),
    "meshgrid": (lambda x, y, w: sum(np.meshgrid(np.arange(x.shape[1]), np.arange(x.shape[0]))) + x, False),
    "meshgrid_ij": (lambda x, y, w: np.meshgrid(np.arange(x.shape[0]), w, indexing="ij")[1] * x, False),
    # elementwise
    "deg2rad": (lambda x, y, w: np.deg2rad(x), False),
    "radians": (lambda x, y, w: np.radians(x) + 1, False),
    "rad2deg": (lambda x, y, w: np.rad2deg(x), False),
    "heaviside": (lambda x, y, w: np.heaviside(x, y), False),
    "heaviside_half": (lambda x, y, w: np.heaviside(x, 0.5), False),
    "nan_to_num": (lambda x, y, w: np.nan_to_num(x), False),
    "nan_to_num_values": (lambda x, y, w: np.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0), False),
    "select": (lambda x, y, w: np.select([x < -1, x > 1], [x * 2, y], default=0), False),
    "divmod": (lambda x, y, w: np.divmod(x, 3)[0] + np.divmod(x, 3)[1], False),
    "modf": (lambda x, y, w: np.modf(x)[0] * 2 + np.modf(x)[1], False),
    "float_power": (lambda x, y, w: np.float_power(np.abs(x), 1.5), True),  # NumPy's pow loops differ by 1 ulp
    "xlogy": (lambda x, y, w: sp.xlogy(np.abs(x), np.abs(y)), True),  # a log: SciPy and NumPy round it apart
    "polyval": (lambda x, y, w: np.polyval([1.0, -2.0, 3.0], x), False),
    "unravel_index": (lambda x, y, w: np.unravel_index(np.argmax(x, axis=1), (2, 3))[1] + x.shape[0], False),
    # views
    "flipud": (lambda x, y, w: np.flipud(x) * y, False),
    "fliplr": (lambda x, y, w: np.fliplr(x) + 1, False),
    "rot90": (lambda x, y, w: np.rot90(x) * 2, False),
    "rot90_k3": (lambda x, y, w: np.rot90(x, 3).sum(axis=0), True),
    "atleast_3d": (lambda x, y, w: np.atleast_3d(x) - 1, False),
    "diagonal": (lambda x, y, w: np.diagonal(x) * 2, False),
    "diagonal_offset": (lambda x, y, w: x.diagonal(-1)[:4] + x.diagonal(1), False),
    "trace": (lambda x, y, w: np.trace(x) * np.ones(1, x.dtype), True),
    "diag_vector": (lambda x, y, w: np.diag(w, 1) + 1, False),
    # contractions
    "outer": (lambda x, y, w: np.outer(w, x[0]), False),
    "inner_vectors": (lambda x, y, w: np.inner(x[0], y[0]), True),
    "inner_rows": (lambda x, y, w: np.inner(x, w), True),
    "vecdot": (lambda x, y, w: np.vecdot(x, y), True),
    "dot_matvec": (lambda x, y, w: np.dot(x, w), True),
    "matmul_vec": (lambda x, y, w: x @ w, True),
    "vec_matmul": (lambda x, y, w: x[:, 0] @ y, True),
    "einsum_rows": (lambda x, y, w: np.einsum("ij,ij->i", x, y), True),
    "einsum_columns": (lambda x, y, w: np.einsum("ij->j", x), True),
    "einsum_implicit_transpose": (lambda x, y, w: np.einsum("ji", x) + 1, False),
    "einsum_ellipsis": (lambda x, y, w: np.einsum("...j,j->...", x, w), True),
    "einsum_diagonal": (lambda x, y, w: np.einsum("ii->i", x[:4, :4]), False),
    "einsum_trace": (lambda x, y, w: np.einsum("ii", x[:4, :4]), True),
    "tensordot_small": (lambda x, y, w: np.tensordot(x, y, axes=([1], [1]))[:, :2], True),
    "average": (lambda x, y, w: np.average(x, axis=0), True),
    "average_weights": (lambda x, y, w: np.average(x, axis=1, weights=w), True),
    "average_returned": (lambda x, y, w: np.average(x, axis=0, weights=y, returned=True)[1], True),
    # reductions with where= and initial=
    "sum_where": (lambda x, y, w: np.sum(x, axis=1, where=x > 0), True),
    "max_initial": (lambda x, y, w: np.max(x, axis=1, initial=0), True),  # which zero a tie gives is free
    "min_where_initial": (lambda x, y, w: np.min(x, axis=0, where=y > 0, initial=5), True),
    "mean_where": (lambda x, y, w: np.mean(x, axis=1, where=y < 1), True),
    "any_where": (lambda x, y, w: np.any(x > 1, axis=0, where=y > 0), False),
    "prod_initial": (lambda x, y, w: np.prod(np.abs(x) < 1, axis=1, initial=3), False),
    "add_accumulate": (lambda x, y, w: np.add.accumulate(x, axis=1), True),
    "multiply_accumulate": (lambda x, y, w: np.multiply.accumulate(x[:, :3], axis=1), True),
    "maximum_accumulate": (lambda x, y, w: np.maximum.accumulate(x, axis=1) - y, True),  # ties: either zero
    "minimum_accumulate": (lambda x, y, w: np.minimum.accumulate(x), True),
    "running_max_bool": (lambda x, y, w: np.maximum.accumulate(x > y, axis=1), False),
}
SHAPE = (6, 5)
FLOAT_ONLY = {"nan_to_num", "nan_to_num_values", "linspace_no_endpoint_f32"}


def _inputs(name: str, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed_of("numpy functions", name, dtype))
    return (random_array(rng, SHAPE, dtype), random_array(rng, SHAPE, dtype),
            np.abs(random_array(rng, SHAPE[-1:], dtype, special=False)) + 1)


# per backend: (dtype, y's layout in memory: "c" as made, "t" the same values transposed); float16 sums in another
# order on the GPU (in float32 there): a looser float16 tolerance
@pytest.mark.parametrize("backend, dtype, y_layout", on_backends(
    numpy=[(dtype, "c") for dtype in ["float32", "float64", "float16", "int32"]],
    cupy=[(dtype, "t") for dtype in ["float32", "float16", "int32"]]))
@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_function_matches_numpy(name: str, backend, dtype: str, y_layout: str) -> None:
    fn, reordered = CASES[name]
    if name in FLOAT_ONLY and dtype == "int32":
        pytest.skip("a float function")
    x, y, w = _inputs(name, dtype)
    if y_layout == "t":
        y = np.ascontiguousarray(y.T).T
    args = [backend.to_device(a) for a in (x, y, w)]
    with np.errstate(all="ignore"):
        want = fn(x, y, w)
        results = backend.results(fusec.fuse(fn), *args)
    for got in results:
        check_result(backend.to_host(got), want, reordered, dtype, float16_rtol=4e-3 if backend.gpu else 2e-3)


def check_result(got, want, reordered: bool, dtype: str, float16_rtol: float = 2e-3) -> None:
    """``got`` is NumPy's ``want``: bit for bit, or within the reduction tolerance where ``reordered``."""
    if reordered and np.asarray(want).dtype.kind == "f":
        assert_matches_numpy(got, want, rtol=float16_rtol if dtype == "float16" else 1e-5, atol=1e-5)
    else:
        assert_matches_numpy(got, want, exact=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_function_is_one_kernel(name: str) -> None:
    spec = fusec.ArraySpec(SHAPE, "float32")
    plan = fusec.fuse(CASES[name][0]).plan(spec, spec, fusec.ArraySpec(SHAPE[-1:], "float32"))
    # two constant index arrays along different axes share their (CSE-merged) iota comparisons: two kernels
    assert len(plan.kernels) <= {"trace": 2, "average_returned": 2, "array_constant_2d": 2,
                                 "nested_list_index": 2}.get(name, 1)


def test_linspace_is_numpys_bit_for_bit() -> None:
    for start, stop, num, endpoint in [(0, 1, 7, True), (-3.3, 1e5, 1000, False), (1e-300, 2e-300, 9, True),
                                       (5, 5, 4, True), (0, 1, 1, True), (2, -7, 0, True), (0, 10, 11, True)]:
        fn = lambda x, a=start, b=stop, n=num, e=endpoint: x + np.linspace(a, b, n, endpoint=e)  # noqa: E731
        x = np.zeros(num)
        assert_matches_numpy(fusec.fuse(fn)(x), fn(x), exact=True)
    fn = lambda x: x + np.linspace(0, 100, 7, dtype=np.int32)  # noqa: E731
    x = np.zeros(7, np.int32)
    assert_matches_numpy(fusec.fuse(fn)(x), fn(x), exact=True)


def test_matrix_products_that_map_to_no_gemm_are_refused_with_the_blas_hint() -> None:
    """Contractions beyond the loop limit that are no batched matrix product of two operands (three operands, a letter
    summed in one operand only, bool) keep the refusal and its hint; two-operand ones are matmuls."""
    x = np.ones((64, 64), np.float32)
    for fn in (lambda a: np.einsum("ij,jk,kl->il", a, a, a), lambda a: np.einsum("ij,jk->k", a, a),
               lambda a: (a > 0) @ (a > 0)):
        with pytest.raises(UnsupportedError, match="matrix product") as info:
            fusec.fuse(fn)(x)
        assert "outside the fused function" in str(info.value.hint)
        assert __file__ in str(info.value)
    for fn in (lambda a: a @ a, lambda a: np.einsum("ij,jk->ik", a, a), lambda a: np.dot(a, a.T),
               lambda a: np.tensordot(a, a, axes=1)):
        f = fusec.fuse(fn)
        assert [k.kind for k in f.plan(x).kernels] == ["matmul"]
        assert_matches_numpy(f(x), fn(x))


def test_matrix_product_kind_is_decided_per_call_not_by_the_first_call() -> None:
    """A contraction small enough to trace as a product and a sum at its first sizes is a matmul kernel at sizes where
    it is a matrix product, though the trace is otherwise reused for new sizes (issue 32's call-history bug: ``a @ b``
    of 4 x 4 matrices, then 8192 x 8192 ones planned as one rows kernel of 2^39 loops), and a product and a sum again
    at small sizes after a large first call; einsum likewise. A matrix-vector product traces at every size and keeps
    reusing its trace."""
    cases = [(lambda a, b: a @ b, (4, 4), (8192, 8192)),
             (lambda a, b: np.einsum("bqd,bkd->bqk", a, b), (2, 4, 4), (8, 2048, 128))]
    for fn, first, shape in cases:
        f = fusec.fuse(fn)
        small = [np.ones(first, np.float32)] * 2
        assert_matches_numpy(f(*small), fn(*small))
        assert "matmul" not in [k.kind for k in f.plan(*small).kernels]
        big = [fusec.ArraySpec(shape, small[0].dtype)] * 2
        assert [k.kind for k in f.plan(*big).kernels] == ["matmul"]
        again = [np.full_like(a, 2) for a in small]
        assert_matches_numpy(f(*again), fn(*again))
        g = fusec.fuse(fn)  # the other way round: a large first trace, then small sizes
        assert [k.kind for k in g.plan(*big).kernels] == ["matmul"]
        assert "matmul" not in [k.kind for k in g.plan(*small).kernels]
        assert_matches_numpy(g(*again), fn(*again))
    matvec = fusec.fuse(lambda a, v: a @ v)
    for n in (4, 64, 1000):
        a, v = np.ones((n, 64), np.float32), np.ones(64, np.float32)
        assert_matches_numpy(matvec(a, v), a @ v)
    assert matvec.cache_info().traces == 1 and matvec.cache_info().shape_reuses == 2


@pytest.mark.parametrize("fn, error, text", [
    (lambda x: np.einsum("ij,j->i", x), ValueError, "fewer operands"),
    (lambda x: np.einsum("ijk->i", x), ValueError, "too many subscripts"),
    (lambda x: np.max(x, where=x > 0), ValueError, "does not have an identity"),
    (lambda x: np.fliplr(x[0]), ValueError, "Input must be >= 2-d"),
    (lambda x: np.diagonal(x, 0, 1, 1), ValueError, "axis1 and axis2 cannot be the same"),
    (lambda x: np.var(x, where=x > 0), UnsupportedError, "where= argument of var"),
    (lambda x: np.linspace(x[0, 0], 1, 5), UnsupportedError, "array bounds"),
    (lambda x: x @ 2.0, ValueError, "does not have enough dimensions"),
    (lambda x: x + np.array(list(range(65)))[:3], UnsupportedError, "constant array of 65 elements"),
], ids=["einsum_operands", "einsum_subscripts", "max_where", "fliplr_1d", "diagonal_axes", "var_where",
        "linspace_traced", "matmul_scalar", "large_constant"])
def test_numpy_function_errors(fn, error: type, text: str) -> None:
    x = random_array(np.random.default_rng(seed_of("numpy function errors")), (4, 3), "float32")
    with pytest.raises(error, match=text) as info:
        fusec.fuse(fn)(x)
    assert isinstance(info.value, FusecError)
    assert __file__ in str(info.value)
