"""Runtime scalars: Python and NumPy scalar arguments are kernel inputs, so new values neither trace nor
compile again; NEP 50 promotion and NumPy's value-based rules hold exactly; scalars used where their value
decides the trace (axes, control flow, exponents) become static by themselves; ``static_argnames`` /
``static_argnums`` fold chosen ones."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import fusec
from fusec.support.errors import FusecOverflowError, FusecValueError
from tests.helpers import assert_matches_numpy, random_array


def _counted(fn):
    """``fn`` fused, with a list that grows by one each time it is traced."""
    calls: list[int] = []

    @functools.wraps(fn)  # the signature of fn
    def traced(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return fusec.fuse(traced), calls


def _adam(p, g, m, v, lr, step, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** step)
    v_hat = v / (1 - b2 ** step)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def test_runtime_scalars_training_loop_of_100_steps_traces_once_and_matches_numpy():
    fused, calls = _counted(_adam)
    rng = np.random.default_rng(1)
    p, m, v = rng.standard_normal((3, 64, 33)).astype(np.float32)
    v = np.abs(v)
    want_p, want_m, want_v = p.copy(), m.copy(), v.copy()
    for step in range(1, 101):
        g = rng.standard_normal((64, 33)).astype(np.float32)
        lr = 1e-3 * math.cos(step / 100)  # a schedule: a new Python float every step
        p, m, v = fused(p, g, m, v, lr, step)
        want_p, want_m, want_v = _adam(want_p, g, want_m, want_v, lr, step)
        for got, want in ((p, want_p), (m, want_m), (v, want_v)):
            assert_matches_numpy(got, want, exact=True)
    assert len(calls) == 1
    assert len(fused._plans) == 1


def test_runtime_scalars_70000_steps_of_an_int_counter_trace_once():
    """A step counter crossing 127, 255, 32767 and 65535 (the int dtypes a Python int fits) and a changing float
    trace once: no rule reads an int's class beside float arrays (NumPy 2's weak scalars make the value irrelevant
    to the types)."""
    fused, calls = _counted(lambda x, step, lr: x * (lr / (1 - 0.9 ** step)) + step)
    x = np.random.default_rng(3).standard_normal(5).astype(np.float32)
    for step in range(1, 70_001):
        got = fused(x, step, 1e-3 * (1 + step % 7))
    want = x * (1e-3 * (1 + 70_000 % 7) / (1 - 0.9 ** 70_000)) + 70_000
    assert_matches_numpy(got, want, exact=True)
    assert len(calls) == 1 and fused.cache_info().traces == 1


def test_runtime_scalars_an_int_beside_an_int_array_retraces_per_class_and_says_which():
    """Beside a uint8 array an int's value decides (u8 + 300 raises, u8 < 300 is all True): the trace holds for
    the ints of one class, and the retrace reason names the narrowest dtype each fits."""
    fused, calls = _counted(lambda x, n: (x + n, x < n))
    x = np.arange(250, 256, dtype=np.uint8)
    for n in (1, 100, 3, 200, 7):
        for got, want in zip(fused(x, n), (x + n, x < n)):
            assert_matches_numpy(got, want, exact=True)
    assert len(calls) == 2  # 1, 100, 3 and 7 fit int8; 200 fits uint8, not int8
    with pytest.raises(FusecOverflowError, match="300"):
        fused(x, 300)
    reasons = [str(r) for r in fused._recompiles.reasons]
    assert any("runtime int >= 0 fitting int8 -> runtime int >= 0 fitting uint8" in r for r in reasons), reasons


def test_runtime_scalars_training_loop_compiles_once_on_the_nvrtc_path(tmp_path, monkeypatch):
    pytest.importorskip("cuda.bindings")
    from fusec.runtime import cubin_cache

    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(tmp_path))
    fused, calls = _counted(_adam)
    rng = np.random.default_rng(2)
    p, g, m, v = rng.standard_normal((4, 256, 100)).astype(np.float32)
    compiles = 0
    sources = set()
    for step in range(1, 101):
        source = fused.cuda_source(p, g, m, np.abs(v), 1e-3 / step, step, full=True)
        sources.add(source)
        compiles += cubin_cache.cached_cubin(source, "sm_90")[1]
    assert len(calls) == 1
    assert len(sources) == 1 and compiles == 1


def test_runtime_scalars_python_float_is_weak_numpy_scalar_is_strong():
    fused = fusec.fuse(lambda x, s: x * s)
    rng = np.random.default_rng(3)
    for dt in (np.float16, np.float32, np.int8, np.uint16, np.int32):
        x = random_array(rng, (5, 7), dt)
        for s in (0.1, 1e10, -3, 7, np.float64(0.3), np.float32(2.5), np.int8(-2), np.uint8(200), np.float16(1.5)):
            with np.errstate(all="ignore"):
                try:
                    want = x * s
                except OverflowError:  # u16 * -3: NumPy's error, raised by fusec too
                    with pytest.raises(OverflowError):
                        fused(x, s)
                    continue
                assert_matches_numpy(fused(x, s), want, exact=True)


def test_runtime_scalars_special_values_pass_at_run_time():
    fused, calls = _counted(lambda x, s: np.maximum(x, s) + s)
    x = random_array(np.random.default_rng(4), (9,), np.float32)
    for s in (0.5, np.nan, np.inf, -np.inf, -0.0, 1e300):
        with np.errstate(all="ignore"):
            assert_matches_numpy(fused(x, s), np.maximum(x, s) + s, exact=True)
    assert len(calls) == 1


def test_runtime_scalars_python_int_out_of_range_raises_as_numpy():
    fused = fusec.fuse(lambda x, s: x + s)
    x = np.arange(6, dtype=np.uint8)
    assert_matches_numpy(fused(x, 200), x + 200, exact=True)
    assert_matches_numpy(fused(x, 255), x + 255, exact=True)
    with pytest.raises(OverflowError):
        x + 300
    with pytest.raises(FusecOverflowError):
        fused(x, 300)
    with pytest.raises(FusecOverflowError):
        fused(x, -1)
    assert_matches_numpy(fused(x, 7), x + 7, exact=True)


@pytest.mark.parametrize("op", ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"])
def test_runtime_scalars_comparison_beyond_the_dtype_range_matches_numpy(op):
    ufunc = getattr(np, op)
    fused, calls = _counted(lambda x, s: ufunc(x, s))
    x = random_array(np.random.default_rng(5), (11,), np.int8)
    for s in (3, 100, 300, -129, -1000, 127, 2**40, -(2**40), 0):
        assert_matches_numpy(fused(x, s), ufunc(x, s), exact=True)
    assert len(calls) <= 5  # one per class of value (fits int8, int16, int64; sign), not per value


def test_runtime_scalars_host_arithmetic_is_pythons():
    def f(x, b, k):
        return x * (1 - b ** k) + (k // 3) * 0.5 + abs(-b) + np.sqrt(b)

    fused, calls = _counted(f)
    x = random_array(np.random.default_rng(6), (4, 5), np.float32)
    for b, k in ((0.9, 1), (0.999, 7), (0.5, 100), (0.25, 33)):
        want = f(x, b, k)
        got = fused(x, b, k)
        assert_matches_numpy(got, want, exact=True)
    assert len(calls) == 1


def test_runtime_scalars_derived_value_changing_class_retraces_with_the_argument_static():
    def f(x, k):
        return x * 2 ** (k - 3)  # an int for k >= 3, a float below

    fused, calls = _counted(f)
    x = random_array(np.random.default_rng(7), (6,), np.float32)
    for k in (5, 9, 1, 2, 8):
        assert_matches_numpy(fused(x, k), f(x, k), exact=True)
    assert "k" in fused._auto_static


def test_runtime_scalars_axis_and_control_flow_become_static():
    def f(x, axis, n, p):
        if n > 2:
            x = x * n
        return np.sum(x, axis=axis) ** p

    fused, calls = _counted(f)
    x = random_array(np.random.default_rng(8), (3, 4), np.float32)
    for axis, n, p in ((0, 1, 2), (1, 3, 2), (1, 5, 2), (0, 1, 3)):
        with np.errstate(all="ignore"):
            assert_matches_numpy(fused(x, axis, n, p), f(x, axis, n, p), exact=True)
    assert fused._auto_static == {"axis", "n", "p"}
    assert "square" in str(fused.trace(x, 0, 1, 2))  # x ** 2 as NumPy's ndarray.__pow__ computes it


def test_runtime_scalars_range_and_shape_arguments_become_static():
    def f(x, n):
        total = x
        for _ in range(n):
            total = total + x
        return total

    fused, calls = _counted(f)
    x = random_array(np.random.default_rng(9), (5,), np.float32)
    for n in (1, 2, 3, 2):
        assert_matches_numpy(fused(x, n), f(x, n), exact=True)
    assert len(calls) == 1 + 3  # the first trace found n decides it; then one per value


def test_runtime_scalars_static_argnames_and_argnums_fold_constants():
    f = lambda x, a, b: x * a + b  # noqa: E731
    by_name = fusec.fuse(f, static_argnames="a")
    by_num = fusec.fuse(f, static_argnums=(1, 2))
    x = random_array(np.random.default_rng(10), (8,), np.float32)
    assert_matches_numpy(by_name(x, 0.5, 0.25), f(x, 0.5, 0.25), exact=True)
    assert_matches_numpy(by_num(x, 0.5, 0.25), f(x, 0.5, 0.25), exact=True)
    text = str(by_name.trace(x, 0.5, 0.25))
    assert "const 0.5" in text and "%b: f64[]" in text
    assert "%a" not in text and "%b" not in str(by_num.trace(x, 0.5, 0.25))
    by_name(x, 1.5, 0.25)
    assert len(by_name._traces) == 2


def test_runtime_scalars_bad_static_names_are_errors():
    with pytest.raises(FusecValueError, match="not a parameter"):
        fusec.fuse(lambda x, s: x * s, static_argnames="t")
    with pytest.raises(FusecValueError, match="position"):
        fusec.fuse(lambda x, s: x * s, static_argnums=2)


def test_runtime_scalars_bool_arguments_stay_static():
    fused, calls = _counted(lambda x, flag: np.where(flag, x, -x))
    x = random_array(np.random.default_rng(11), (4,), np.float32)
    assert_matches_numpy(fused(x, True), x, exact=True)
    assert_matches_numpy(fused(x, False), -x, exact=True)
    assert len(calls) == 2


def test_runtime_scalars_returned_scalar_is_an_output():
    fused = fusec.fuse(lambda x, s: (x * s, s, s * 2))
    x = random_array(np.random.default_rng(12), (3,), np.float32)
    for s in (1.5, -2.0):
        got = fused(x, s)
        assert_matches_numpy(got[0], x * s, exact=True)
        assert got[1].dtype == np.float64 and got[1] == s and got[2] == s * 2


def test_runtime_scalars_explain_and_arrayspec_keep_working():
    fused = fusec.fuse(_adam)
    spec = fusec.ArraySpec((1024,), "float32")
    text = str(fused.explain(spec, spec, spec, spec, 1e-3, 3))
    assert "%lr: f64[]" in text and "%step:" not in text  # step is used only on the host, in b1 ** step
    source = fused.cuda_source(spec, spec, spec, spec, 1e-3, 3)
    assert source == fused.cuda_source(spec, spec, spec, spec, 2e-3, 4)
    assert len(fused.plan(spec, spec, spec, spec, 1e-3, 3).kernels) == 1


def test_runtime_scalars_keyword_and_default_arguments():
    def f(x, *, scale=2.0, shift=0):
        return x * scale + shift

    fused, calls = _counted(f)
    x = random_array(np.random.default_rng(13), (2, 3), np.float32)
    assert_matches_numpy(fused(x), f(x), exact=True)
    assert_matches_numpy(fused(x, scale=0.5, shift=3), f(x, scale=0.5, shift=3), exact=True)
    assert_matches_numpy(fused(x, scale=-1.5, shift=4), f(x, scale=-1.5, shift=4), exact=True)
    assert len(calls) == 2  # the defaults folded, then scale and shift passed: runtime
    assert "const 2" in str(fused.trace(x)) and "%scale: f64[]" in str(fused.trace(x, scale=3.0))


def test_runtime_scalars_with_a_shape_read_stay_runtime_for_a_new_size():
    def f(x, lr, step):
        n = x.shape[0]  # a size read: each new size traces again
        return x * (lr / n) + 0.5 ** step

    fused, calls = _counted(f)
    rng = np.random.default_rng(14)
    for size, lr, step in ((4, 0.1, 1), (5, 0.2, 2), (4, 0.3, 3), (5, 0.4, 4)):
        x = random_array(rng, (size,), np.float32)
        assert_matches_numpy(fused(x, lr, step), f(x, lr, step), exact=True)


def test_runtime_scalars_go_to_the_device_in_one_copy_of_aligned_slots():
    from fusec.frontend import api

    copies = []

    class FakeCupy:  # records each host-to-device copy; NumPy arrays stand in for device ones
        @staticmethod
        def asarray(a):
            copies.append(a.nbytes)
            return np.array(a)

    values = [np.asarray(0.1), np.asarray(np.int8(-3)), np.asarray(np.float16(1.5)), np.asarray(True),
              np.asarray(-7, np.int64), np.asarray(np.float32(np.nan))]
    got = api._on_device(values, FakeCupy)
    assert copies == [16 * len(values)]
    for g, v in zip(got, values):
        assert g.dtype == v.dtype and g.shape == () and g.ctypes.data % 16 == 0
        np.testing.assert_array_equal(g, v)
