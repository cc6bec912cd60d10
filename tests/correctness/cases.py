"""Every item of ``../shared/CORRECTNESS.md`` as a case: one table that the CPU tests (NumPy backend, NVRTC
compile of the generated kernels) and the GPU tests (CuPy arrays) share.

A case is a function written with NumPy names, a ``make(xp, rng)`` that builds its arguments with ``xp``
(``numpy`` or ``cupy``; the data always comes from the NumPy generator, so both backends see the same
values, and the views such as ``x.T``, ``x[::-1]`` or ``broadcast_to`` are taken with ``xp``, so layouts
carry over), and what must happen: NumPy's eager result (values, dtype, shape, within CORRECTNESS.md's
tolerances) or the error class NumPy raises (a fusec error deriving from it, with a message matching
``match``). Case ids read like the item: ``arithmetic/integer_floor_division_by_zero_gives_zero_int8``.

``run`` (see :mod:`tests.correctness.check`) also checks that inputs are unchanged unless they are
``out=`` targets. Items that exist as broader suites elsewhere: the promotion tables in
``tests/ir/test_promotion.py``, trace-time errors in ``tests/ir/test_trace_errors.py``, shapes and
``out=`` in ``tests/ir/test_reductions_shapes.py``, every kernel kind x dtype x layout on the GPU in
``tests/gpu/test_kernels_gpu.py``; here each item is named once and runs on every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fusec
from fusec.support.errors import TraceError
from tests.helpers import random_array

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
SIGNED = ("int8", "int16", "int32", "int64")
FLOATS = ("float16", "float32", "float64")
BIG = 2**31 + 1  # more elements than int32 indexing reaches


@dataclass(frozen=True)
class Call:
    """The arguments of one call, its ``out=`` (or None), and arrays whose whole contents are compared
    afterwards (the base array of an ``out=`` view)."""

    args: tuple[Any, ...]
    out: Any = None
    keep: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Case:
    id: str
    fn: Callable[..., Any]
    make: Callable[[Any, np.random.Generator], Call]
    raises: type[BaseException] | None = None  # the class NumPy raises (the fusec error derives from it)
    match: str | None = None  # a regex the fusec error message must match
    numpy_raises: bool = True  # False: NumPy computes it, fusec refuses it (complex) or traces it (control flow)
    reference: Callable[[Call], Any] | None = None  # NumPy's result; default fn(*args), or out= as NumPy does it
    tol: str = "float"  # "float": CORRECTNESS.md's elementwise tolerances; "transcendental": a few ULP more;
    #                      "reduction": against ref64 (see check.py); bool and integer results are always exact
    ref64: Callable[..., Any] | None = None  # "reduction": the result computed in float64 from the NumPy args
    large: bool = False  # more than 2**31 elements: run on the GPU only (with CuPy eager as the reference)
    specs: tuple[fusec.ArraySpec, ...] = field(default=())  # a large case's argument specs, for the CPU compile


def _data(values: Any, dtype: Any) -> np.ndarray:
    return np.array(values, dtype=dtype)


def arrays(*data: Callable[[np.random.Generator], np.ndarray]) -> Callable[[Any, np.random.Generator], Call]:
    """``make`` for plain arguments: each from a NumPy generator, moved to ``xp``."""
    return lambda xp, rng: Call(tuple(xp.asarray(d(rng)) for d in data))


def values(v: Any, dtype: Any) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: _data(v, dtype)


def rand(shape: tuple[int, ...], dtype: Any, special: bool = True) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: random_array(rng, shape, dtype, special=special)


def positive(shape: tuple[int, ...], dtype: Any) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: (rng.random(shape) + 0.5).astype(dtype)


def filled(shape: tuple[int, ...], value: Any, dtype: Any) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: np.full(shape, value, dtype)


def _with_nans(shape: tuple[int, ...], dtype: Any, rows_with_nan: int) -> Callable[[np.random.Generator], np.ndarray]:
    """Random floats without specials, then NaN in the first ``rows_with_nan`` rows (two per row, the
    first of them not at column 0) and in the first column's middle: so some rows, columns and the whole
    array hold NaN and others do not."""

    def make(rng: np.random.Generator) -> np.ndarray:
        x = random_array(rng, shape, dtype, special=False)
        for r in range(rows_with_nan):
            x[r, 1 + r % (shape[1] - 1)] = np.nan
            x[r, -1] = np.nan
        x[shape[0] // 2, 0] = np.nan
        return x

    return make


def _size_one_axes(rng: np.random.Generator) -> np.ndarray:
    """(6, 1, 1) float32 with -0.0, NaN and infinities among random values."""
    return np.array([-0.0, 0.0, np.nan, 1.5, -np.inf, -2.0], np.float32).reshape(6, 1, 1) * (1 + rng.random((6, 1, 1)))


def _as_if_copied(fn: Callable[..., Any]) -> Callable[[Call], Any]:
    """NumPy's ``out=`` semantics for a whole function: every result computed from copies of the
    inputs, then written into ``out`` (same-kind casting)."""

    def reference(call: Call) -> Any:
        results = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in call.args])
        outs = call.out if isinstance(call.out, tuple) else (call.out,)
        for dst, res in zip(outs, results if isinstance(results, tuple) else (results,)):
            np.copyto(dst, res, casting="same_kind")
        return call.out

    return reference


def at(axis: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(axis, *arrays)`` as a function of the arrays alone (a default argument would be traced as one)."""
    return lambda *arrays: fn(axis, *arrays)


CASES: list[Case] = []


def case(id: str, fn: Callable[..., Any], make: Callable[[Any, np.random.Generator], Call], **kw: Any) -> None:
    CASES.append(Case(id, fn, make, **kw))


# ---- Promotion (NEP 50) --------------------------------------------------------------------------------------
case("promotion/uint8_plus_python_int_stays_uint8", lambda x: x + 1, arrays(values([0, 1, 254, 255], "uint8")))
case("promotion/uint8_plus_out_of_range_python_int_raises_overflow_error", lambda x: x + 300,
     arrays(values([0, 1, 255], "uint8")), raises=OverflowError, match=r"300")
case("promotion/int8_plus_python_float_is_float64", lambda x: x + 1.0, arrays(rand((9,), "int8")))
case("promotion/float16_plus_python_float_stays_float16", lambda x: x + 1.0, arrays(rand((9,), "float16")))
case("promotion/float32_plus_python_complex_is_unsupported_type_error", lambda x: x + 1j,
     arrays(rand((4,), "float32")), raises=TypeError, match=r"complex", numpy_raises=False)
case("promotion/bool_plus_python_int_is_int64", lambda x: x + 1, arrays(rand((9,), "bool")))
case("promotion/uint8_plus_numpy_int64_scalar_is_int64", lambda x: x + np.int64(1), arrays(rand((9,), "uint8")))
case("promotion/float32_plus_numpy_float64_scalar_is_float64", lambda x: x + np.float64(1),
     arrays(rand((9,), "float32")))
case("promotion/int32_plus_uint32_arrays_is_int64", lambda x, y: x + y,
     arrays(rand((9,), "int32"), rand((9,), "uint32")))
case("promotion/int64_plus_uint64_arrays_is_float64", lambda x, y: x + y,
     arrays(rand((9,), "int64"), rand((9,), "uint64")))
case("promotion/float16_plus_int16_arrays_is_float32", lambda x, y: x + y,
     arrays(rand((9,), "float16"), rand((9,), "int16")))
case("promotion/out_of_int_dtype_for_a_float_result_raises_type_error", lambda x: x + 1.5,
     lambda xp, rng: Call((xp.asarray(rand((5,), "int32")(rng)),), out=xp.zeros(5, np.int32)),
     raises=TypeError, match=r"same_kind", reference=lambda c: np.add(c.args[0], 1.5, out=c.out))
case("promotion/out_same_kind_downcast_float64_into_float16_matches_numpy", lambda x: x * 3,
     lambda xp, rng: Call((xp.asarray(rand((7,), "float64", special=False)(rng)),), out=xp.zeros(7, np.float16)),
     reference=lambda c: np.multiply(c.args[0], 3, out=c.out))

# ---- Arithmetic ----------------------------------------------------------------------------------------------
for _dt in ("int8", "int32", "int64", "uint8", "uint64"):
    _num = [7, -7, 0, 5, 100, -100, 1, -1] if _dt[0] == "i" else [7, 250, 0, 5, 100, 1, 2, 3]
    _den = [0, 0, 0, 2, 0, 3, -1 if _dt[0] == "i" else 1, 0]
    case(f"arithmetic/integer_floor_division_by_zero_gives_zero_{_dt}", lambda x, y: x // y,
         arrays(values(_num, _dt), values(_den, _dt)))
    case(f"arithmetic/integer_modulo_by_zero_gives_zero_{_dt}", lambda x, y: x % y,
         arrays(values(_num, _dt), values(_den, _dt)))
for _dt in SIGNED:
    _info = np.iinfo(_dt)
    case(f"arithmetic/integer_min_floor_divided_by_minus_one_wraps_{_dt}", lambda x, y: (x // y, x % y),
         arrays(values([_info.min, _info.min, _info.max, -1], _dt), values([-1, 1, -1, -1], _dt)))
for _dt in ("int8", "int32", "int64"):
    case(f"arithmetic/integer_floor_division_and_modulo_round_toward_minus_infinity_{_dt}",
         lambda x, y: (x // y, x % y),
         arrays(values([-7, 7, -7, 7, -8, 0, -1], _dt), values([2, -2, -2, 2, 2, -3, 3], _dt)))
for _dt in FLOATS:
    case(f"arithmetic/float_floor_division_and_modulo_follow_the_divisor_sign_{_dt}", lambda x, y: (x // y, x % y),
         arrays(values([-7.0, 7.0, -7.0, 7.0, -0.0, 0.0, 5.5, -5.5, 1e4], _dt),
                values([2.0, -2.0, -2.0, 2.0, 2.0, -2.0, 0.5, 1.5, 3.0], _dt)))
case("arithmetic/integer_overflow_wraps_int32_max_plus_one", lambda x: x + 1,
     arrays(values([2**31 - 1, 0, -(2**31)], "int32")))
case("arithmetic/integer_overflow_wraps_uint8_zero_minus_one", lambda x: x - 1, arrays(values([0, 1, 255], "uint8")))
case("arithmetic/integer_overflow_wraps_in_multiplication", lambda x, y: (x * y, x * x),
     arrays(values([100, -128, 127, 64], "int8"), values([3, -1, 127, 2], "int8")))
case("arithmetic/integer_overflow_wraps_int64_negation_and_abs", lambda x: (-x, np.abs(x)),
     arrays(values([-(2**63), 2**63 - 1, -1, 0], "int64")))
for _dt in FLOATS:
    case(f"arithmetic/float_division_by_zero_gives_signed_inf_and_nan_{_dt}", lambda x, y: x / y,
         arrays(values([1.0, -1.0, 0.0, -0.0, np.inf, np.nan], _dt), values([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], _dt)))
    case(f"arithmetic/float_modulo_by_zero_gives_nan_{_dt}", lambda x, y: x % y,
         arrays(values([1.0, -1.0, 0.0, 3.5], _dt), values([0.0, -0.0, 0.0, 0.0], _dt)))
case("arithmetic/integer_to_negative_integer_power_raises_value_error", lambda x: x ** -1,
     arrays(values([1, 2, 3], "int32")), raises=ValueError, match=r"negative")
case("arithmetic/float_to_int_cast_truncates_in_range_values",
     lambda x, h: (x.astype(np.int32), x.astype(np.int8), np.abs(x).astype(np.uint8), h.astype(np.int16),
                   x.astype(np.int64)),
     arrays(values([-2.9, -0.5, -0.0, 0.5, 2.9, 100.7, -128.0, 127.9, -99.99], "float32"),
            values([-2.9, 0.5, 1000.5, -32768.0, 2.0, 3.0, 4.0, 5.0, 6.0], "float16")))

# ---- NaN and ties --------------------------------------------------------------------------------------------
_AXES = {"reduce_all": None, "over_rows": 1, "over_columns": 0}
for _kind, _axis in _AXES.items():
    case(f"nan_and_ties/max_and_min_propagate_nan_{_kind}", at(_axis, lambda a, x: (x.max(axis=a), np.min(x, axis=a))),
         arrays(_with_nans((6, 37), "float32", 3)), tol="exact")
    case(f"nan_and_ties/argmax_and_argmin_give_the_first_nan_{_kind}",
         at(_axis, lambda a, x: (x.argmax(axis=a), np.argmin(x, axis=a))), arrays(_with_nans((6, 37), "float64", 3)))
    case(f"nan_and_ties/argmax_and_argmin_give_the_first_of_ties_{_kind}",
         at(_axis, lambda a, x, y: (x.argmax(axis=a), x.argmin(axis=a), y.argmax(axis=a), y.argmin(axis=a))),
         lambda xp, rng: Call((xp.asarray(rng.integers(-2, 3, (5, 40)).astype(np.int16)),
                               xp.asarray(rng.integers(-1, 2, (5, 40)).astype(np.float32)))))
    case(f"nan_and_ties/reduction_identities_keep_infinities_and_integer_extremes_{_kind}",
         at(_axis, lambda a, f, i, u: (f.max(axis=a), (-f).min(axis=a), f.argmax(axis=a), i.max(axis=a),
                                       (~i).min(axis=a), u.max(axis=a), i.argmax(axis=a))),
         arrays(filled((3, 33), -np.inf, "float32"), filled((3, 33), np.iinfo(np.int64).min, "int64"),
                filled((3, 33), 0, "uint8")))
case("nan_and_ties/max_of_minus_infinities_is_minus_infinity", lambda x: (x.max(), np.min(-x)),
     arrays(values([-np.inf, -np.inf], "float64")))
case("nan_and_ties/maximum_and_minimum_propagate_nan", lambda x, y: (np.maximum(x, y), np.minimum(x, y)),
     arrays(values([np.nan, 1.0, np.nan, -np.inf, 2.0, 0.5], "float32"),
            values([1.0, np.nan, np.nan, -1.0, np.inf, -0.5], "float32")), tol="exact")
case("nan_and_ties/fmax_and_fmin_ignore_nan", lambda x, y: (np.fmax(x, y), np.fmin(x, y)),
     arrays(values([np.nan, 1.0, np.nan, -np.inf, 2.0, 0.5], "float64"),
            values([1.0, np.nan, np.nan, -1.0, np.inf, -0.5], "float64")), tol="exact")

# ---- Empty and odd shapes ------------------------------------------------------------------------------------
for _kind, (_shape, _axis) in {"reduce_all": ((0,), None), "over_rows": ((3, 0), 1),
                               "over_columns": ((0, 3), 0)}.items():
    case(f"empty/sum_prod_any_all_mean_of_empty_give_their_identities_{_kind}",
         at(_axis, lambda a, x: (x.sum(axis=a), x.prod(axis=a), x.any(axis=a), x.all(axis=a), x.mean(axis=a),
                                 (x > 0).sum(axis=a))),
         arrays(filled(_shape, 0, "float32")))
case("empty/max_of_empty_raises_value_error", lambda x: x.max(), arrays(filled((0,), 0, "float32")),
     raises=ValueError, match=r"empty|identity")
case("empty/argmax_of_empty_raises_value_error", lambda x: x.argmax(), arrays(filled((0,), 0, "int32")),
     raises=ValueError, match=r"empty|identity")
case("empty/max_over_a_nonempty_axis_of_an_empty_array_is_empty", lambda x: (x.max(axis=1), x.argmin(axis=1)),
     arrays(filled((0, 3), 0, "float32")))
case("empty/max_over_an_empty_axis_raises_value_error", lambda x: x.max(axis=1), arrays(filled((3, 0), 0, "float32")),
     raises=ValueError, match=r"empty|identity")
case("empty/pointwise_on_empty_arrays_gives_empty_arrays", lambda x, y: (x * 2 + 1, x + y),
     arrays(filled((0, 5), 1, "float32"), filled((5,), 1, "float32")))
for _dt, _kind in (("bool", "int64"), ("int8", "int64"), ("int16", "int64"), ("int32", "int64"),
                   ("uint8", "uint64"), ("uint16", "uint64"), ("uint32", "uint64")):
    case(f"empty/sum_of_{_dt}_accumulates_in_{_kind}", lambda x: (x.sum(), x.sum(axis=1), x.sum(axis=0)),
         arrays(filled((40, 300), True if _dt == "bool" else np.iinfo(_dt).max, _dt)))
case("empty/float16_sum_accumulates_in_float32", lambda x: (x.sum(), x.sum(axis=1), x.sum(axis=0)),
     arrays(filled((4100, 3), 1.0, "float16")), tol="reduction",
     ref64=lambda x: (x.astype(np.float64).sum(), x.astype(np.float64).sum(axis=1), x.astype(np.float64).sum(axis=0)))
for _name, _axis in {"none": None, "negative": -1, "tuple": (0, 2), "empty_tuple": (), "all_three": (0, 1, 2)}.items():
    case(f"empty/reduction_axis_{_name}_with_and_without_keepdims",
         at(_axis, lambda a, x: (x.sum(axis=a), x.max(axis=a, keepdims=True), np.any(x > 0, axis=a, keepdims=True))),
         arrays(positive((3, 4, 5), "float64")))
case("empty/reduction_over_no_axes_is_elementwise_and_sum_starts_from_plus_zero",
     lambda x: (x.sum(axis=()), np.nansum(x, axis=()), x.prod(axis=()), x.max(axis=()), np.nanmax(x, axis=())),
     arrays(values([-0.0, 0.0, np.nan, 1.5, -np.inf, -2.0], "float32")), tol="exact")
case("empty/reduction_over_size_one_axes_is_elementwise",
     lambda x: (x.sum(axis=1), x.prod(axis=(1, 2), keepdims=True), x.max(axis=2), x.argmax(axis=1), x.argmin(axis=2),
                x.mean(axis=1), x.var(axis=2), np.nanmax(x, axis=1)),
     arrays(_size_one_axes), tol="exact")
case("empty/out_of_range_axis_raises_axis_error", lambda x: x.sum(axis=3), arrays(rand((3, 4, 5), "float32")),
     raises=np.exceptions.AxisError, match=r"axis 3")
case("empty/duplicate_axis_raises_value_error", lambda x: x.sum(axis=(1, -2)), arrays(rand((3, 4, 5), "float32")),
     raises=ValueError, match=r"duplicate|repeated")
case("empty/broadcast_mismatch_raises_value_error_naming_both_shapes", lambda x, y: x + y,
     arrays(rand((3, 4), "float32"), rand((5,), "float32")), raises=ValueError, match=r"\(3, 4\).*\(5,\)")
case("empty/zero_d_inputs_and_outputs", lambda x, y: (x + y, x.sum(), np.maximum(x, 0.5), x * 2 > y),
     arrays(values(1.5, "float32"), values(-2.0, "float32")))
case("empty/size_one_dims_broadcast_and_reduce", lambda x, y: (x + y, (x * y).sum(axis=1), y.max(axis=(0, 2))),
     arrays(positive((1, 5, 1), "float32"), positive((3, 1, 4), "float32")))
for _n in (23, 512 + 7):
    case(f"empty/odd_size_{_n}_hits_vector_tails", lambda x, y: (x * y + 1, np.abs(x).max(), x.argmax()),
         arrays(rand((_n,), "float32"), rand((_n,), "float32")))
case("empty/odd_size_1029x917_pointwise_rows_and_columns",
     lambda x: (np.tanh(x) * 0.5, x - x.max(axis=1, keepdims=True), np.abs(x).sum(axis=0), x.argmin(axis=1)),
     arrays(rand((1029, 917), "float32", special=False)), tol="reduction",
     ref64=lambda x: (np.tanh(x.astype(np.float64)) * 0.5, x - x.max(axis=1, keepdims=True),
                      np.abs(x.astype(np.float64)).sum(axis=0), x.argmin(axis=1)))


# ---- Layouts and sizes ---------------------------------------------------------------------------------------
def _layout_fn(x: Any) -> tuple[Any, ...]:
    return x * 2 + 1, x.sum(axis=-1), x.max(axis=0), np.exp(x - x.max(axis=-1, keepdims=True))


_LAYOUTS: dict[str, Callable[[Any, np.ndarray], Any]] = {
    "transposed": lambda xp, a: xp.asarray(a).T,
    "sliced_with_a_step": lambda xp, a: xp.asarray(a)[:, ::2],
    "negative_strides": lambda xp, a: xp.asarray(a)[::-1, ::-1],
    "zero_strides_from_broadcast_to": lambda xp, a: xp.broadcast_to(xp.asarray(a[0]), a.shape),
    "storage_offset_misaligned": lambda xp, a: xp.asarray(a.reshape(-1))[1:1 + 37 * 20].reshape(37, 20),
    "fortran_order": lambda xp, a: xp.asfortranarray(xp.asarray(a)),
}
for _name, _view in _LAYOUTS.items():  # positive data: the sums do not cancel (their tolerance is relative)
    case(f"layouts/{_name}_input", _layout_fn,
         lambda xp, rng, v=_view: Call((v(xp, positive((37, 41), np.float32)(rng)),)),
         tol="reduction", ref64=lambda x: _layout_fn(x.astype(np.float64)))
case("layouts/two_inputs_of_different_layouts", lambda x, y: (x + y, (x * y).sum(axis=1)),
     lambda xp, rng: Call((xp.asarray(positive((20, 30), "float32")(rng)).T[::-1],
                           xp.asfortranarray(xp.asarray(positive((30, 20), "float32")(rng))))),
     tol="reduction", ref64=lambda x, y: (x + y, (x.astype(np.float64) * y).sum(axis=1)))


def _large_pointwise(x: Any) -> Any:
    return x * 3 + 1


def _large_broadcast_sum(x: Any, y: Any) -> Any:
    return (x[:, None] + y[None, :]).sum()


def _large_strided_max(x: Any) -> Any:
    return x + 1, x.max()


def _big_int8(xp: Any, rng: np.random.Generator, n: int = BIG) -> Any:
    x = xp.zeros(n, np.int8)
    x[::7] = 5
    x[-1] = 3
    return x


case("layouts/more_than_2_31_elements_pointwise_uses_64_bit_indexing", _large_pointwise,
     lambda xp, rng: Call((_big_int8(xp, rng),)), large=True, specs=(fusec.ArraySpec((BIG,), "int8"),))
case("layouts/broadcast_reduction_over_more_than_2_31_intermediate_elements", _large_broadcast_sum,
     lambda xp, rng: Call((xp.arange(2**16, dtype=np.int32) % 7, xp.arange(2**15 + 1, dtype=np.int32) % 5)),
     large=True, specs=(fusec.ArraySpec((2**16,), "int32"), fusec.ArraySpec((2**15 + 1,), "int32")))
case("layouts/strided_offsets_past_2_31_use_64_bit_indexing", _large_strided_max,
     lambda xp, rng: Call((_big_int8(xp, rng, 2**31 + 6)[::2],)), large=True,
     specs=(fusec.ArraySpec((2**30 + 3,), "int8", strides=(2,)),))


# ---- Aliasing and inputs -------------------------------------------------------------------------------------
def _shifted_add(xp: Any, rng: np.random.Generator) -> Call:
    a = xp.arange(5)
    return Call((a[:-1], a[1:]), out=a[1:], keep=(a,))


case("aliasing/out_overlapping_an_input_gives_results_as_if_inputs_were_copied", lambda x, y: x + y, _shifted_add,
     reference=lambda c: np.add(c.args[0], c.args[1], out=c.out))


def _reversed_out(xp: Any, rng: np.random.Generator) -> Call:
    a = xp.asarray(random_array(rng, (33,), np.float32, special=False))
    return Call((a,), out=a[::-1], keep=(a,))


case("aliasing/out_reversing_its_own_input", lambda x: x * 2 - 1, _reversed_out,
     reference=lambda c: np.subtract(c.args[0] * 2, 1, out=c.out))


def _in_place(xp: Any, rng: np.random.Generator) -> Call:
    a = xp.asarray(random_array(rng, (8, 9), np.float32, special=False))
    return Call((a,), out=a, keep=(a,))


case("aliasing/out_is_the_input_itself", lambda x: x - x.max(axis=1, keepdims=True), _in_place,
     reference=_as_if_copied(lambda x: x - x.max(axis=1, keepdims=True)))


def _returned_input_out(xp: Any, rng: np.random.Generator) -> Call:
    a = xp.asarray(random_array(rng, (6,), np.int32))
    b = xp.asarray(random_array(rng, (6,), np.int32))
    return Call((a, b), out=(a, xp.zeros(6, np.int32)), keep=(a,))


case("aliasing/out_over_an_input_that_is_also_returned_keeps_the_input_value", lambda x, y: (x + y, x),
     _returned_input_out, reference=_as_if_copied(lambda x, y: (x + y, x)))
case("aliasing/inputs_are_never_modified", lambda x, y: (x, x.T, -x, (x * y).max(axis=0), np.abs(y)),
     arrays(rand((7, 5), "float32"), rand((7, 5), "float32")))


def _if_positive(x: Any) -> Any:
    if x.sum() > 0:
        return x
    return -x


def _bool_of(x: Any) -> Any:
    return x * bool(x.max())


def _float_of(x: Any) -> Any:
    return x * float(x.sum())


for _fn in (_if_positive, _bool_of, _float_of):
    case(f"aliasing/python_control_flow_on_traced_values_raises_at_trace_time{_fn.__name__}", _fn,
         arrays(rand((4,), "float32", special=False)), raises=TraceError, numpy_raises=False,
         match=r"cases\.py:\d+")

CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "case ids repeat"
