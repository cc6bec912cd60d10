"""In-place updates: augmented assignment and ``x[mask] = v`` / ``x[...] = v`` on intermediates and inputs,
against NumPy running the same function on copies (results, dtypes, and how the arguments change)."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.runtime.write_backs import hazard
from fusec.support.errors import FusecOverflowError, FusecTypeError, FusecValueError, UnsupportedError
from tests.helpers import assert_matches_numpy, random_array


def _check(fn, *args, exact=True):
    """Run ``fn`` fused and plain on copies of ``args``; results and every argument afterwards match."""
    mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with np.errstate(all="ignore"):
        got = fusec.fuse(fn)(*mine)
        want = fn(*theirs)
    got_list = list(got) if isinstance(got, (tuple, list)) else [got]
    want_list = list(want) if isinstance(want, (tuple, list)) else [want]
    assert len(got_list) == len(want_list)
    for g, w in zip(got_list, want_list):
        if w is None:
            assert g is None
        else:
            assert_matches_numpy(g, np.asarray(w), exact=exact)
    for m, t in zip(mine, theirs):
        if isinstance(t, np.ndarray):
            assert_matches_numpy(m, t, exact=exact)
    return got, mine


def _adamw(p, g, m, v, lr, step, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    p *= 1 - lr * wd
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    m_hat = m / (1 - b1 ** step)
    v_hat = v / (1 - b2 ** step)
    p -= lr * m_hat / (np.sqrt(v_hat) + eps)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_inplace_adamw_updates_arguments_as_numpy_in_one_kernel(dtype):
    rng = np.random.default_rng(1)
    p, g, m = (random_array(rng, (37, 5), dtype, special=False) for _ in range(3))
    v = np.abs(random_array(rng, (37, 5), dtype, special=False))
    fused = fusec.fuse(_adamw)
    want = [p.copy(), g, m.copy(), v.copy()]
    for step in range(1, 6):
        with np.errstate(all="ignore"):
            assert fused(p, g, m, v, 1e-3 * step, step) is None
            _adamw(*want, 1e-3 * step, step)
        for got, ref in zip((p, m, v), (want[0], want[2], want[3])):
            assert_matches_numpy(got, ref, exact=True)
    plan = fused.plan(p, g, m, v, 1e-3, 1)
    (kernel,) = plan.kernels
    assert kernel.kind == "pointwise" and len(kernel.outputs) == 3
    traced, plan, _ = fused._plan(fused._params((p, g, m, v, 1e-3, 1), {}))
    assert traced.updates == (0, 2, 3)
    assert [hazard(plan, plan.graph.outputs[k], plan.graph.inputs[i]) for k, i in enumerate(traced.updates)] == \
        [None, None, None]  # each written straight into its argument on the GPU


def test_inplace_aliasing_names_see_the_update():
    def f(x):
        a = x
        a += 1
        y = x * 2
        y *= 3
        z = y
        z -= 1
        return x, y

    _check(f, random_array(np.random.default_rng(2), (4, 3), np.float32))


def test_inplace_copy_is_not_updated():
    def f(x):
        y = x.copy()
        x += 1
        return y, x

    (y, x_out), (x,) = _check(f, random_array(np.random.default_rng(3), (6,), np.float32))
    assert x_out is x  # NumPy returns the updated argument itself


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int64, np.float16])
@pytest.mark.parametrize("op", ["+=", "-=", "*=", "//=", "%=", "&=", "|=", "^=", "<<=", ">>=", "**=", "/="])
def test_inplace_augmented_ops_match_numpy(dtype, op):
    rng = np.random.default_rng(4)
    x = random_array(rng, (3, 5), dtype)
    y = random_array(rng, (5,), dtype)
    if op in ("<<=", ">>=", "**="):
        y = np.abs(y) % 5 if dtype != np.float16 else y
    source = f"def f(x, y):\n    x {op} y\n    t = x * 1\n    t {op} y\n    return t\n"
    namespace = {"np": np}
    exec(source, namespace)
    f = namespace["f"]
    try:
        with np.errstate(all="ignore"):
            f(x.copy(), y)
    except TypeError:  # no loop, or the result does not cast back (float into int): fusec says so too
        with pytest.raises(FusecTypeError):
            fusec.fuse(f)(x.copy(), y)
        return
    _check(f, x, y)


def test_inplace_same_kind_casting_is_enforced():
    def f(x):
        x += 1.5

    with pytest.raises(TypeError):
        f(np.zeros(3, np.int32))
    with pytest.raises(FusecTypeError, match="same_kind"):
        fusec.fuse(f)(np.zeros(3, np.int32))


def test_inplace_float32_array_plus_float64_array_casts_back():
    def f(x, y):
        x += y
        return x

    rng = np.random.default_rng(5)
    got, (x, _) = _check(f, random_array(rng, (7,), np.float32), random_array(rng, (7,), np.float64))
    assert got.dtype == np.float32 and got is x


def test_inplace_broadcast_to_a_larger_shape_is_an_error():
    def f(x, y):
        x += y

    with pytest.raises(FusecValueError, match="non-broadcastable"):
        fusec.fuse(f)(np.zeros(3, np.float32), np.zeros((2, 3), np.float32))


def test_inplace_python_int_out_of_range_raises():
    def f(x):
        x += 300

    with pytest.raises(FusecOverflowError):
        fusec.fuse(f)(np.zeros(3, np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.bool_])
def test_inplace_mask_assignment_matches_numpy(dtype):
    def f(x, y):
        x[x > 0] = 0
        t = y + 1
        t[t < 2] = 7
        return t

    rng = np.random.default_rng(6)
    _check(f, random_array(rng, (4, 5), dtype if dtype != np.bool_ else np.int8), random_array(rng, (4, 5), np.float32))


def test_inplace_whole_assignment_forms_match_numpy():
    def f(x, y, z):
        x[...] = y
        y[:] = 2.5
        z[()] = x.sum()
        w = x * 0
        w[:, :] = np.float32(3)
        return w

    rng = np.random.default_rng(7)
    _check(f, random_array(rng, (3, 4), np.float32), random_array(rng, (4,), np.float64),
           random_array(rng, (), np.float32))


def test_inplace_setitem_casts_like_numpy():
    def f(x, y):
        x[...] = 1.7  # truncated into int32
        y[...] = np.int64(300)  # wraps into uint8 (an array value casts unsafely)

    _check(f, np.zeros(3, np.int32), np.zeros(3, np.uint8))
    with pytest.raises(FusecOverflowError):
        fusec.fuse(lambda x: x.__setitem__(Ellipsis, 300))(np.zeros(3, np.uint8))
    with pytest.raises(FusecValueError):
        fusec.fuse(lambda x: x.__setitem__(Ellipsis, np.nan))(np.zeros(3, np.int32))


def test_inplace_swap_through_copies_reads_old_values():
    def f(a, b):
        t = a.copy()
        a[...] = b
        b[...] = t

    rng = np.random.default_rng(8)
    _check(f, random_array(rng, (5,), np.float32), random_array(rng, (5,), np.float32))


def test_inplace_reduction_before_update_reads_old_values():
    def f(x):
        s = x.sum(axis=1, keepdims=True)
        x -= x.max(axis=1, keepdims=True)
        x /= s
        return s

    x = random_array(np.random.default_rng(9), (6, 33), np.float32, special=False)
    _check(f, x, exact=False)
    fused = fusec.fuse(f)
    traced, plan, _ = fused._plan(fused._params((x,), {}))
    reasons = [hazard(plan, plan.graph.outputs[traced.n_results + k], plan.graph.inputs[i])
               for k, i in enumerate(traced.updates)]
    assert reasons[0] is not None and "reads it through" in reasons[0]  # a row kernel reduces x: copied after


def test_inplace_runtime_scalar_update_traces_once():
    calls = []

    def f(x, lr):
        calls.append(1)
        x -= lr * x

    fused = fusec.fuse(f)
    x = random_array(np.random.default_rng(10), (8,), np.float32, special=False)
    want = x.copy()
    for lr in (0.1, 0.2, 0.3):
        fused(x, lr)
        want -= lr * want
        assert_matches_numpy(x, want, exact=True)
    assert len(calls) == 1


def test_inplace_update_through_a_transpose_writes_the_array():
    def through_view(x):
        t = x.T
        t += 1
        t[0] *= 2
        return t

    _check(through_view, random_array(np.random.default_rng(9), (2, 3), np.float32))


def test_inplace_update_through_a_view_or_copy_is_refused():
    def through_ravel(x):
        t = x.ravel()  # a view of a C-contiguous x, a copy of a transposed one: not known while tracing
        t += 1

    with pytest.raises(UnsupportedError, match="view made by ravel"):
        fusec.fuse(through_ravel)(np.zeros((2, 3), np.float32))


def test_inplace_view_alive_during_an_update_sees_it():
    def view_alive(x):
        t = x[None]
        x += 1
        return t

    def function_view_alive(x):
        t = np.expand_dims(x, 0)
        x *= 2
        return t

    for fn in (view_alive, function_view_alive):
        _check(fn, random_array(np.random.default_rng(10), (2, 3), np.float32))


def test_inplace_dead_view_does_not_block():
    def f(x):
        y = x + x[None]
        x += 1
        return y

    _check(f, random_array(np.random.default_rng(11), (2, 3), np.float32))


def test_inplace_read_only_and_overlapping_arguments_are_errors():
    def f(x, y):
        x += y

    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(FusecValueError, match="read-only"):
        fusec.fuse(f)(ro, np.ones(3, np.float32))
    a = np.zeros(3, np.float32)
    with pytest.raises(FusecValueError, match="share memory"):
        fusec.fuse(f)(a, a)


def test_inplace_unsupported_index_assignment_says_what_to_write():
    def g(x, i):
        x[i] = 1

    with pytest.raises(UnsupportedError, match="np.where"):
        fusec.fuse(g)(np.zeros((2, 3), np.float32), np.zeros(2, np.int64))


def test_inplace_mask_assignment_of_an_array_is_refused():
    def f(x, y):
        x[x > 0] = y

    with pytest.raises(UnsupportedError, match="np.where"):
        fusec.fuse(f)(np.zeros(3, np.float32), np.ones(3, np.float32))


def test_inplace_explain_and_cuda_source_work_for_updates():
    spec = fusec.ArraySpec((1 << 16,), "float32")
    fused = fusec.fuse(_adamw)
    text = str(fused.explain(spec, spec, spec, spec, 1e-3, 2))
    assert "1 kernel(s)" in text
    assert "__global__" in fused.cuda_source(spec, spec, spec, spec, 1e-3, 2)


def test_inplace_adamw_kernel_compiles_with_nvrtc():
    pytest.importorskip("cuda.bindings")
    from fusec.codegen.nvrtc import compile_cubin

    for dtype in ("float32", "float16"):
        spec = fusec.ArraySpec((1000, 37), dtype)
        source = fusec.fuse(_adamw).cuda_source(spec, spec, spec, spec, 1e-3, 2, full=True)
        assert compile_cubin(source, "sm_90").cubin


def test_inplace_traced_graph_round_trips_through_ir_text():
    from fusec.ir.printer import print_graph
    from fusec.ir.text import parse

    x = np.zeros((4, 5), np.float32)
    fused = fusec.fuse(_adamw)
    graph = fused.trace(x, x, x, x, 1e-3, 3)
    text = print_graph(graph)
    assert print_graph(parse(text)) == text
    assert len(graph.outputs) == 3  # p, m, v: the updated arguments


def test_inplace_ufunc_out_argument_matches_numpy():
    def f(m, g, v, b1):
        np.multiply(m, b1, out=m)
        np.add(m, (1 - b1) * g, out=m)
        w = v * 1
        np.square(g, out=w)  # an intermediate as out=
        np.add(g, 1, out=v, casting="unsafe")
        u = g * 0
        np.add(g.sum(axis=0), 1, out=u)  # broadcast into out's shape
        return w, u

    rng = np.random.default_rng(12)
    _check(f, random_array(rng, (4, 6), np.float32), random_array(rng, (4, 6), np.float32),
           np.zeros((4, 6), np.float16), 0.9)


_OUTSIDE = np.zeros(3)  # an array made outside the function: out= it is refused


def test_inplace_ufunc_out_computes_in_the_inputs_loop_then_casts():
    def f(a, o):
        np.add(a, a, out=o)  # int8 100 + 100 wraps to -56, then float32

    _check(f, np.array([100, -3], np.int8), np.zeros(2, np.float32))
    with pytest.raises(FusecTypeError, match="same_kind"):
        fusec.fuse(lambda x: np.add(x, 1.5, out=x))(np.zeros(3, np.int32))
    with pytest.raises(UnsupportedError, match="out="):
        fusec.fuse(lambda x: np.add(x, 1, out=_OUTSIDE))(np.zeros(3))
