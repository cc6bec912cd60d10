"""The CUDA side of the op table: C++ types, exact literals, and one C++ expression per op.

Every elementwise op of :data:`fusec.ir.ops.OPS` has an entry in :data:`ELEMENTWISE` naming its device
helper in ``templates/fusec_device.cuh`` (namespace ``fc``), and every reduction an entry in
:data:`REDUCTIONS`; ``tests/codegen/test_cuda_ops.py`` fails when an op lacks one. The helpers are C++
overloads, so one name serves every dtype: the expression for ``add`` is ``fc::add(a, b)`` whatever the
operands are. Operands must already have their C++ types (loaded values, or :func:`literal` constants).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.ir import dtypes
from fusec.ir.ops import OPS, Kind, reduction_identity, ufunc_loops
from fusec.support.errors import FusecTypeError, FusecValueError

DEVICE_HEADER = "fusec_device.cuh"  # templates/ name of the helper header every kernel starts with
ONE_PASS_HEADER = "one_pass.cuh"  # one-pass statistics' helpers, only in the sources of kernels using them
SPECIAL_HEADER = "fusec_special.cuh"  # helpers only the kernels that call them include (scipy.special ops)
BF16_HEADER = "fusec_bf16.cuh"  # __nv_bfloat16 (cuda_bf16.h) and its helpers, only in kernels holding a bfloat16
INDEX_HEADER = "index_views.cuh"  # iota values and clamped indices, only in kernels reading iotas or windows
UPDATE_STATES = ("any", "first", "held")  # what a thread's partial holds when an element is folded in
ACC_FIELD_BOUND = 16  # bytes an accumulator takes at most (argmax pairs: value + long long; Welford: its own)
PAIR_INDEX_CTYPE = "index_t"  # argmax/argmin partials' index: the kernel's own index type (int or long long)
# max/min with a float32 accumulator: one-instruction NaN-propagating helpers (values as maximum/minimum,
# up to which NaN payload and which zero of a tie come out; see the header)
_FLOAT_REDUCE_HELPERS = {"max": "reduce_max", "min": "reduce_min"}

_CTYPES: dict[str, str] = {
    "bool": "bool",
    "i8": "signed char",
    "i16": "short",
    "i32": "int",
    "i64": "long long",
    "u8": "unsigned char",
    "u16": "unsigned short",
    "u32": "unsigned int",
    "u64": "unsigned long long",
    "f16": "__half",
    "f32": "float",
    "f64": "double",
    "bf16": "__nv_bfloat16",  # cuda_bf16.h, through BF16_HEADER
}


@dataclass(frozen=True)
class CudaOp:
    """How an elementwise op is written in CUDA: ``fc::<helper>(operands)``."""

    helper: str  # a device function in templates/fusec_device.cuh (or ``header``), namespace fc
    out_type_arg: bool = False  # called as fc::<helper><out ctype>(...) (cast)
    header: str | None = None  # templates/ header defining the helper, when not the one every kernel has


def _same(*names: str) -> dict[str, CudaOp]:
    return {n: CudaOp(n) for n in names}


# op name -> its device helper. The helpers carry the NumPy rules (see the header's comments).
ELEMENTWISE: dict[str, CudaOp] = {
    **_same("add", "sub", "mul", "div", "floordiv", "mod", "pow", "neg", "pos", "abs", "sign", "square"),
    **_same("reciprocal", "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p"),
    **_same("sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh"),
    **_same("arcsinh", "arccosh", "arctanh", "floor", "ceil", "trunc", "rint", "hypot", "copysign"),
    **_same("maximum", "minimum", "fmax", "fmin"),
    **_same("ldexp", "nextafter", "frexp_mantissa", "frexp_exponent"),
    **_same("isnan", "isinf", "isfinite", "signbit", "eq", "ne", "lt", "le", "gt", "ge"),
    **_same("logical_and", "logical_or", "logical_xor", "logical_not"),
    **_same("bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"),
    "erf": CudaOp("erf", header=SPECIAL_HEADER),
    "erfc": CudaOp("erfc", header=SPECIAL_HEADER),
    "fmod": CudaOp("np_fmod"),
    "where": CudaOp("where"),
    "cast": CudaOp("cast", out_type_arg=True),
}


def extra_headers(op_names: Iterable[str]) -> tuple[str, ...]:
    """The headers beyond the common ones that kernels computing ``op_names`` include, in a fixed order:
    ops whose helpers only some kernels need keep them out of every other kernel's source."""
    needed = {ELEMENTWISE[n].header for n in op_names if n in ELEMENTWISE}
    return tuple(h for h in (SPECIAL_HEADER,) if h in needed)


def value_headers(nodes: Iterable[Any]) -> tuple[str, ...]:
    """The headers the value types of ``nodes`` (IR nodes: a kernel's members) and of their operands need beyond
    the common ones: :data:`BF16_HEADER` where one is bfloat16, so no other kernel includes ``cuda_bf16.h``.
    It comes before every other extra header."""
    for n in nodes:
        if n.dtype == dtypes.BFLOAT16 or any(o.dtype == dtypes.BFLOAT16 for o in n.operands):
            return (BF16_HEADER,)
    return ()


def iota_expression(index: str, start: Any, nxt: Any, dtype: np.dtype) -> str:
    """The C++ value of an iota (``numpy.arange``: :mod:`fusec.ir.iota`) of ``dtype`` at the element offset
    ``index`` (an expression), with NumPy's fill arithmetic.

    >>> iota_expression("ld0", 0.0, 0.1, dtypes.FLOAT32)
    'fc::iota_float((long long)(ld0), 0x0.0p+0f, 0x1.99999a0000000p-4f, 0x1.99999a0000000p-4f)'
    """
    from fusec.ir import iota

    dt = dtype
    i = f"(long long)({index})"
    if dtypes.kind(dt) == "f":
        delta = iota.delta(start, nxt, dt)
        kind = {"f16": "half", "bf16": "bfloat", "f32": "float", "f64": "double"}[dtypes.short(dt)]
        delta_text = literal(delta, dtypes.compute_dtype(dt))
        return f"fc::iota_{kind}({i}, {literal(start, dt)}, {literal(nxt, dt)}, {delta_text})"
    if dt.kind in "iu":
        delta = iota.delta(start, nxt, dt)
        return f"fc::iota_int<{ctype(dt)}>({i}, {int(start) % 2**64}ULL, {delta % 2**64}ULL)"
    return f"fc::iota_bool({i}, {literal(start, dt)}, {literal(nxt, dt)})"


def is_float_cube(node: Any) -> bool:
    """Whether ``node`` is a float ``x ** 3`` with a constant exponent, computed as ``x * x * x``
    (``fc::cube``): within 2 ULP of ``pow`` (CORRECTNESS.md's elementwise tolerance) with the same
    NaN, inf, -0.0 and overflow behaviour, and about 20x cheaper than ``powf`` (gelu is
    compute-bound with it)."""
    if node.op != "pow" or dtypes.kind(node.dtype) != "f":
        return False
    exponent = node.operands[1]
    return exponent.op == "const" and float(exponent.attr("value")) == 3.0


@dataclass(frozen=True)
class CudaCombine:
    """How a reduction combines two partials: the op table's elementwise ``combine`` on the accumulator
    type, or (argmax/argmin) ``fc::<pair_helper>`` on (value, index) pairs, with ``fc::<next_helper>``
    folding in one element of larger index than any in the partial (a thread's loop order)."""

    pair_helper: str | None = None
    next_helper: str | None = None


REDUCTIONS: dict[str, CudaCombine] = {
    "sum": CudaCombine(),
    "prod": CudaCombine(),
    "max": CudaCombine(),
    "min": CudaCombine(),
    "nanmax": CudaCombine(),
    "nanmin": CudaCombine(),
    "any": CudaCombine(),
    "all": CudaCombine(),
    "argmax": CudaCombine("argmax_combine", "argmax_next"),
    "argmin": CudaCombine("argmin_combine", "argmin_next"),
}


# ---- types and literals ------------------------------------------------------------------------------------


def ctype(dtype: np.dtype) -> str:
    """The C++ storage type of a dtype: ``bool``, ``signed char``, ..., ``__half``, ``float``, ``double``."""
    return _CTYPES[dtypes.short(dtype)]


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype reductions (and float16/bfloat16 math) accumulate in: float32 for those two, else the dtype."""
    return dtypes.compute_dtype(dtype)


def accumulator_ctype(dtype: np.dtype) -> str:
    """``float`` for float16 and bfloat16, else :func:`ctype`."""
    return ctype(accumulator_dtype(dtype))


def _float_literal(value: np.floating) -> str:
    dt = value.dtype
    if dt == dtypes.FLOAT16:
        return f"__ushort_as_half((unsigned short){int(value.view(np.uint16)):#06x})"
    if dt == dtypes.BFLOAT16:
        return f"__ushort_as_bfloat16((unsigned short){int(value.view(np.uint16)):#06x})"
    if dt == dtypes.FLOAT32:
        bits = int(value.view(np.uint32))
        special = f"__int_as_float((int){bits:#010x}U)"
        suffix = "f"
    else:
        bits = int(value.view(np.uint64))
        special = f"__longlong_as_double((long long){bits:#018x}ULL)"
        suffix = ""
    if not np.isfinite(value) or (value == 0 and np.signbit(value)):
        return special  # NaN (with its payload), +-inf and -0.0, bit-exact
    text = float(value).hex() + suffix  # hex floats are exact: float32 values are doubles too
    return f"({text})" if text.startswith("-") else text


def _int_literal(value: int, dt: np.dtype) -> str:
    kind = dtypes.short(dt)
    if kind == "i64":
        # -2**63 has no literal: 9223372036854775808LL does not fit
        text = "(-9223372036854775807LL - 1LL)" if value == -(2**63) else f"{value}LL"
    elif kind == "i32":
        text = "(-2147483647 - 1)" if value == -(2**31) else f"{value}"
    elif kind == "u64":
        text = f"{value}ULL"
    elif kind == "u32":
        text = f"{value}U"
    else:
        return f"(({ctype(dt)}){value})"  # int8/16, uint8/16: no literal suffix exists
    return f"({text})" if text.startswith("-") else text


def literal(value: Any, dtype: np.dtype) -> str:
    """An exact C++ constant of ``dtype``: hex floats, bit casts for NaN/inf/-0.0, typed integers.

    >>> literal(0.1, dtypes.FLOAT32)
    '0x1.99999a0000000p-4f'
    >>> literal(float("-inf"), dtypes.FLOAT64)
    '__longlong_as_double((long long)0xfff0000000000000ULL)'
    >>> i32, u64, i8 = (np.dtype(t) for t in ("int32", "uint64", "int8"))
    >>> literal(-2**31, i32), literal(2**64 - 1, u64), literal(-3, i8)
    ('(-2147483647 - 1)', '18446744073709551615ULL', '((signed char)-3)')
    """
    dt = dtype
    if dtypes.is_bool(dt):
        return "true" if bool(value) else "false"
    if dtypes.is_float(dt):
        if isinstance(value, np.generic) and value.dtype == dt:
            return _float_literal(value)
        return _float_literal(np.asarray(value, dtype=dt)[()])
    # integers: the exact value must fit (NumPy 2 raises OverflowError for uint8(300) as well)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or not float(value).is_integer():
            raise FusecValueError(f"{value!r} is not an integer constant of {dt}")
        value = int(value)
    number = int(value)
    if not dtypes.fits(number, dt):
        raise FusecValueError(f"{number} does not fit {dt}")
    return _int_literal(number, dt)


# ---- elementwise expressions -------------------------------------------------------------------------------


@functools.cache
def _loops(op_name: str) -> frozenset[tuple[np.dtype, ...]]:
    return frozenset(ufunc_loops(OPS[op_name]))


def _check_loop(op_name: str, operand_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype) -> None:
    if op_name == "cast":
        return  # every (from, to) pair of supported dtypes
    if (*operand_dtypes, out_dtype) not in _loops(op_name):
        sig = ", ".join(dtypes.short(d) for d in operand_dtypes)
        raise FusecTypeError(f"{op_name}({sig}) -> {dtypes.short(out_dtype)} is not one of NumPy's loops",
                             hint="cast the operands to one dtype first (the tracer inserts cast nodes)")


def expression(op_name: str, operand_exprs: Sequence[str], operand_dtypes: Sequence[np.dtype],
               out_dtype: np.dtype) -> str:
    """The C++ expression computing elementwise op ``op_name`` on ``operand_exprs``.

    >>> f16, f32, f64 = dtypes.FLOAT16, dtypes.FLOAT32, dtypes.FLOAT64
    >>> expression("add", ["a", "b"], [f32, f32], f32)
    'fc::add(a, b)'
    >>> expression("cast", ["x"], [f64], f16)
    'fc::cast<__half>(x)'

    Raises FusecTypeError for an operand/result dtype combination that is not one of NumPy's loops.
    """
    op = OPS.get(op_name)
    if op is None or op.kind is not Kind.ELEMENTWISE:
        raise FusecValueError(f"{op_name!r} is not an elementwise op")
    cuda = ELEMENTWISE.get(op_name)
    if cuda is None:
        raise FusecValueError(f"elementwise op {op_name!r} has no CUDA entry in fusec/codegen/cuda_ops.py")
    if len(operand_exprs) != op.arity or len(operand_dtypes) != op.arity:
        raise FusecValueError(f"{op_name} takes {op.arity} operands, got {len(operand_exprs)}")
    in_dts = tuple(operand_dtypes)
    out_dt = out_dtype
    _check_loop(op_name, in_dts, out_dt)
    template_arg = f"<{ctype(out_dt)}>" if cuda.out_type_arg else ""
    return f"fc::{cuda.helper}{template_arg}({', '.join(operand_exprs)})"


def cast_expression(expr: str, from_dtype: np.dtype, to_dtype: np.dtype) -> str:
    """``expr`` converted from ``from_dtype`` to ``to_dtype`` (``expr`` itself when they are equal)."""
    if from_dtype == to_dtype:
        return expr
    return expression("cast", [expr], [from_dtype], to_dtype)


# ---- reductions -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaReduction:
    """The CUDA pieces of one reduction over elements of ``dtype``.

    A kernel declares ``<acc_ctype> acc = <identity>;``, folds each element in with ``update(acc, x, i)``
    (elements of one thread in increasing index order), merges partials (threads, warps, blocks) with
    ``combine`` in any tree shape, and stores ``result(acc)`` as ``out_dtype``. Argmax/argmin pairs hold
    the index as the kernel's ``index_t``, which every kernel (and its accumulator namespace) declares.
    """

    op: str
    dtype: np.dtype  # the elements' dtype
    acc_dtype: np.dtype  # the value part of the accumulator (float32 for float16)
    out_dtype: np.dtype  # what the kernel stores: dtype, or int64 for argmax/argmin
    acc_ctype: str  # the accumulator's C++ type (fc::ArgPair<float, index_t> for argmax of float16)
    identity: str  # an exact C++ constant of acc_ctype
    pair_helper: str | None
    next_helper: str | None
    acc_bound: int = ACC_FIELD_BOUND

    def lift(self, value: str, index: str = "") -> str:
        """An element (of ``dtype``) as an accumulator; ``index`` (its flat position) for argmax/argmin."""
        v = cast_expression(value, self.dtype, self.acc_dtype)
        if self.pair_helper is not None:
            if not index:
                raise FusecValueError(f"{self.op} needs the element's index")
            return f"fc::make_arg_pair({v}, ({PAIR_INDEX_CTYPE})({index}))"
        return v

    def update(self, acc: str, value: str, index: str = "", state: str = "any") -> str:
        """The statement folding one element (of ``dtype``, at flat position ``index`` for argmax/argmin)
        into ``acc``, which holds only elements of smaller index: the kernels' loops visit each thread's
        elements in increasing index order. ``state`` says what ``acc`` holds: ``any`` (maybe still the
        identity), ``first`` (the identity: this is the thread's first element) or ``held`` (at least one
        element). Argmax/argmin use it to drop the identity's tie rule; the others combine as always."""
        if state not in UPDATE_STATES:
            raise FusecValueError(f"update state {state!r} is not one of {UPDATE_STATES}")
        if self.next_helper is None:
            return f"{acc} = {self.combine(acc, self.lift(value, index))};"
        if not index:
            raise FusecValueError(f"{self.op} needs the element's index")
        if state == "first":  # combine(identity, x) == x for every x, NaN and the lowest value included
            return f"{acc} = {self.lift(value, index)};"
        v = cast_expression(value, self.dtype, self.acc_dtype)
        helper = self.next_helper + ("_held" if state == "held" else "")
        return f"fc::{helper}({acc}, {v}, ({PAIR_INDEX_CTYPE})({index}));"

    def pair_gives(self, op_name: str) -> bool:
        """Whether this argmax/argmin pair's value is ``op_name``'s result over the same elements (max for
        argmax, min for argmin). The pair's value is the first NaN if any, else the first occurrence of
        the extreme: the value ``op_name`` gives, up to the sign of a zero extreme (which CORRECTNESS.md
        leaves free, as NumPy's own reduction order does)."""
        return (self.op, op_name) in (("argmax", "max"), ("argmin", "min"))

    def pair_value(self, acc: str) -> str:
        """The value of argmax/argmin pair ``acc``, as ``dtype`` (see :meth:`pair_gives`)."""
        return cast_expression(f"({acc}).value", self.acc_dtype, self.dtype)

    def combine(self, acc: str, value: str) -> str:
        """Two accumulators combined (associative and commutative up to float rounding)."""
        if self.pair_helper is not None:
            return f"fc::{self.pair_helper}({acc}, {value})"
        if self.op in _FLOAT_REDUCE_HELPERS and self.acc_dtype == np.float32:
            return f"fc::{_FLOAT_REDUCE_HELPERS[self.op]}({acc}, {value})"
        combine_op = OPS[self.op].combine
        assert combine_op is not None
        return expression(combine_op, [acc, value], [self.acc_dtype, self.acc_dtype], self.acc_dtype)

    def result(self, acc: str) -> str:
        """The accumulator as the stored value: the index (widened to int64) for argmax/argmin, else rounded
        to ``dtype``."""
        if self.pair_helper is not None:
            return f"(long long)({acc}).index"
        return cast_expression(acc, self.acc_dtype, self.out_dtype)


def reduction(op_name: str, dtype: np.dtype) -> CudaReduction:
    """The CUDA pieces (accumulator type, identity, lift, combine, result) of reduction ``op_name``.

    ``dtype`` is the dtype of the elements reduced (the tracer has already cast small integers to the
    int64/uint64 accumulators NumPy uses for sum/prod).
    """
    op = OPS.get(op_name)
    if op is None or op.kind is not Kind.REDUCTION:
        raise FusecValueError(f"{op_name!r} is not a reduction")
    cuda = REDUCTIONS.get(op_name)
    if cuda is None:
        raise FusecValueError(f"reduction {op_name!r} has no CUDA entry in fusec/codegen/cuda_ops.py")
    dt = dtype
    if op.accepts is not None and dtypes.kind(dt) not in op.accepts:
        raise FusecTypeError(f"{op_name} reduces {op.accepts!r}-kind dtypes, not {dt}")
    acc_dt = accumulator_dtype(dt)
    identity = literal(reduction_identity(op_name, dt), acc_dt)
    if cuda.pair_helper is not None:
        acc_ctype = f"fc::ArgPair<{ctype(acc_dt)}, {PAIR_INDEX_CTYPE}>"
        identity = f"fc::make_arg_pair({identity}, fc::largest_index<{PAIR_INDEX_CTYPE}>())"
        out_dt = dtypes.INT64
    else:
        acc_ctype = ctype(acc_dt)
        out_dt = dt
    return CudaReduction(op_name, dt, acc_dt, out_dt, acc_ctype, identity, cuda.pair_helper, cuda.next_helper)


@dataclass(frozen=True)
class CudaMoments:
    """The CUDA pieces of a one-pass variance (:mod:`fusec.schedule.one_pass`): Welford's (count, shift, mean,
    M2) partial ``fc::Moments<T>`` folds elements of ``dtype`` in (``fc::moments_next``), partials combine by
    Chan's formula (``fc::moments_combine``), and the stored value is M2 as ``out_dtype``. ``T`` is the
    accumulator dtype of the result: float for float16 and float32, double for float64. The same interface
    as :class:`CudaReduction`, which lowering reads."""

    dtype: np.dtype  # the elements' dtype
    acc_dtype: np.dtype
    out_dtype: np.dtype
    op: str = "m2"
    pair_helper: None = None
    next_helper: str = "moments_next"
    acc_bound: int = 32  # four doubles at most

    @property
    def acc_ctype(self) -> str:
        return f"fc::Moments<{ctype(self.acc_dtype)}>"

    @property
    def identity(self) -> str:
        return f"fc::moments_identity<{ctype(self.acc_dtype)}>()"

    def update(self, acc: str, value: str, index: str = "", state: str = "any") -> str:
        """The statement folding one element into ``acc`` (``first``: ``acc`` is the identity)."""
        if state not in UPDATE_STATES:
            raise FusecValueError(f"update state {state!r} is not one of {UPDATE_STATES}")
        v = cast_expression(value, self.dtype, self.acc_dtype)
        if state == "first":
            return f"{acc} = fc::moments_of({v});"
        return f"fc::moments_next({acc}, {v});"

    def combine(self, acc: str, value: str) -> str:
        return f"fc::moments_combine({acc}, {value})"

    def result(self, acc: str) -> str:
        """M2, the sum of squared deviations from the mean, rounded to ``out_dtype``."""
        return cast_expression(f"({acc}).m2", self.acc_dtype, self.out_dtype)


@dataclass(frozen=True)
class CudaExpSum(CudaMoments):
    """The CUDA pieces of a one-pass softmax denominator: the (running max, sum of exp(x - max)) pair
    ``fc::ExpSum<T>``, folded (``fc::exp_sum_next``) and combined (``fc::exp_sum_combine``) online; the
    stored value is the sum (NaN where every element was -inf, as the two-pass form gives)."""

    op: str = "exp_sum"
    next_helper: str = "exp_sum_next"
    acc_bound: int = 16  # two doubles at most

    @property
    def acc_ctype(self) -> str:
        return f"fc::ExpSum<{ctype(self.acc_dtype)}>"

    @property
    def identity(self) -> str:
        return f"fc::exp_sum_identity<{ctype(self.acc_dtype)}>()"

    def update(self, acc: str, value: str, index: str = "", state: str = "any") -> str:
        if state not in UPDATE_STATES:
            raise FusecValueError(f"update state {state!r} is not one of {UPDATE_STATES}")
        v = cast_expression(value, self.dtype, self.acc_dtype)
        if state == "first":
            return f"{acc} = fc::exp_sum_of({v});"
        return f"fc::exp_sum_next({acc}, {v});"

    def combine(self, acc: str, value: str) -> str:
        return f"fc::exp_sum_combine({acc}, {value})"

    def result(self, acc: str) -> str:
        return cast_expression(f"fc::exp_sum_value({acc})", self.acc_dtype, self.out_dtype)


def one_pass(kind: str, dtype: np.dtype, out_dtype: np.dtype) -> CudaMoments:
    """The CUDA pieces of a one-pass statistic (``moments``: a variance's M2; ``exp_sum``: a softmax
    denominator) over elements of ``dtype`` stored as ``out_dtype`` (both floats); the accumulator is the
    result's accumulator dtype, or the elements' when wider."""
    dt, out = dtype, out_dtype
    if dtypes.kind(dt) != "f" or dtypes.kind(out) != "f":
        raise FusecTypeError(f"a one-pass statistic reduces floats, not {dt} into {out}")
    acc = accumulator_dtype(out)
    if dt.itemsize > acc.itemsize:
        acc = dt
    classes = {"moments": CudaMoments, "exp_sum": CudaExpSum}
    if kind not in classes:
        raise FusecValueError(f"no one-pass statistic {kind!r}")
    return classes[kind](dt, acc, out)
