"""The op table: the one place an op is defined.

Each :class:`OpDef` gives an op's IR text name, its kind, its arity, the NumPy ufunc (or callable)
that is both its reference semantics and its dtype rule, its relative cost, and for reductions the
identity and the elementwise op that combines partial results. Fusion speaks of kinds, never of op
names; the interpreter, the tracer and the op-sweep tests read this table, so adding an op is one
entry here (plus its CUDA expression, in ``fusec/codegen/cuda_ops.py``).

Kinds:
- ``source``: no data operands read (``input``, ``const``, ``size``, ``iota``: ``numpy.arange``'s values, index
  arithmetic in the kernel that reads them);
- ``elementwise``: NumPy broadcasting of same-dtype operands (casts are explicit ``cast`` nodes);
- ``reduction``: over ``axes``, with ``keepdims``;
- ``scan``: an inclusive prefix along one ``axis`` (``cumsum``, ``cumprod``): the result has the operand's shape
  and dtype (the tracer casts first, as NumPy's accumulate loop does), element ``i`` combining elements ``0..i``;
- ``layout``: index remapping only (``expand_dims``, ``squeeze``, ``transpose``, ``broadcast_to``, ``slice``,
  ``reshape``, ``window``: per axis a strided index clamped into the operand, which is how pads and joins
  read);
- ``gather``: reads its first operand (an array) at positions its other operands (integer index arrays)
  give: ``take_along_axis``, ``take`` and integer-array indexing trace to it. Its arity is variadic
  (:data:`VARIADIC`: the array and one index operand per gathered axis);
- ``contraction``: ``matmul``, NumPy's matrix product of ``a (..., M, K)`` and ``b (..., K, N)`` (batch axes
  broadcast, both operands of the result's dtype): a kernel of its own, computed by a GEMM library
  (:mod:`fusec.kinds.matmul`); float16 accumulates in float32 and rounds once, integers wrap as NumPy's do.
"""

from __future__ import annotations

import enum
import importlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusec.ir import dtypes, special
from fusec.ir.ufunc_output import UfuncOutput


class Kind(enum.Enum):
    SOURCE = "source"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    SCAN = "scan"
    LAYOUT = "layout"
    GATHER = "gather"
    CONTRACTION = "contraction"


VARIADIC = -1  # the arity of an op taking any number (at least two) of operands: gather


@dataclass(frozen=True)
class OpDef:
    """One op. ``ufunc`` is NumPy's ufunc for elementwise ops: reference and dtype rule at once (or, for
    ``module`` ``scipy.special``, a :class:`fusec.ir.special.SpecialUfunc` with the same interface)."""

    name: str
    kind: Kind
    arity: int
    ufunc: np.ufunc | special.SpecialUfunc | UfuncOutput | None = None
    cost: int = 1
    commutative: bool = False
    doc: str = ""
    # reductions: the elementwise op that combines two partials, and whether the result is an index
    combine: str | None = None
    index_result: bool = False
    # dtype kinds ("b", "i", "u", "f") the op accepts; None means whatever the ufunc has loops for
    accepts: str | None = None
    # values the op-sweep tests keep out of the inputs because NumPy's own result is undefined
    # (float-to-int casts of inf, integer reciprocal of 0, ...): a predicate on (dtype, values)
    sweep_mask: Callable[..., Any] | None = field(default=None, repr=False)
    numpy_names: tuple[str, ...] = ()
    module: str = "numpy"  # where users find the ufunc: numpy, or scipy.special (cupyx.scipy.special on CuPy)

    @property
    def is_elementwise(self) -> bool:
        return self.kind is Kind.ELEMENTWISE

    @property
    def is_reduction(self) -> bool:
        return self.kind is Kind.REDUCTION

    @property
    def is_scan(self) -> bool:
        return self.kind is Kind.SCAN


OPS: dict[str, OpDef] = {}


def _define(op: OpDef) -> None:
    assert op.name not in OPS, op.name
    OPS[op.name] = op


def _ew(name: str, ufunc: np.ufunc | special.SpecialUfunc, *, cost: int = 1, commutative: bool = False,
        doc: str = "", sweep_mask: Callable[..., Any] | None = None) -> None:
    module = getattr(ufunc, "module", "numpy")
    _define(OpDef(name, Kind.ELEMENTWISE, ufunc.nin, ufunc=ufunc, cost=cost, commutative=commutative,
                  doc=doc or f"{module}.{ufunc.__name__}", sweep_mask=sweep_mask,
                  numpy_names=(ufunc.__name__,), module=module))


def _int_reciprocal_mask(dt: np.dtype, values: list[np.ndarray]) -> np.ndarray | bool:
    # NumPy's integer reciprocal of 0 is a float-to-int cast of inf: undefined.
    return (values[0] == 0) if dt.kind in "iu" else False


def _int_negative_power_mask(dt: np.dtype, values: list[np.ndarray]) -> np.ndarray | bool:
    # NumPy raises ValueError for an integer to a negative integer power.
    return (values[1] < 0) if dt.kind == "i" else False


# --- sources -----------------------------------------------------------------------------------
_define(OpDef("input", Kind.SOURCE, 0, doc="a function argument"))
_define(OpDef("const", Kind.SOURCE, 0, doc="a scalar constant of the node's dtype"))
_define(OpDef("size", Kind.SOURCE, 1, doc="the number of elements of the operand over `axes`"))
_define(OpDef("iota", Kind.SOURCE, 0, cost=0,
              doc="numpy.arange's `count` values: element i is `start` (i = 0), `next` (i = 1), else start + i * "
                  "(next - start) in the dtype's arithmetic (float16: in float32), as NumPy's fill computes them"))

# --- elementwise: arithmetic -------------------------------------------------------------------
_ew("add", np.add, commutative=True)
_ew("sub", np.subtract)
_ew("mul", np.multiply, commutative=True)
_ew("div", np.true_divide, cost=2)
_ew("floordiv", np.floor_divide, cost=3)
_ew("mod", np.remainder, cost=3)
_ew("fmod", np.fmod, cost=3)
_ew("pow", np.power, cost=8, sweep_mask=_int_negative_power_mask)
_ew("neg", np.negative)
_ew("pos", np.positive)
_ew("abs", np.absolute)
_ew("sign", np.sign)
_ew("square", np.square)
_ew("reciprocal", np.reciprocal, cost=2, sweep_mask=_int_reciprocal_mask)
_ew("sqrt", np.sqrt, cost=2)
_ew("cbrt", np.cbrt, cost=4)
_ew("exp", np.exp, cost=4)
_ew("exp2", np.exp2, cost=4)
_ew("expm1", np.expm1, cost=6)
_ew("log", np.log, cost=4)
_ew("log2", np.log2, cost=4)
_ew("log10", np.log10, cost=4)
_ew("log1p", np.log1p, cost=6)
_ew("sin", np.sin, cost=6)
_ew("cos", np.cos, cost=6)
_ew("tan", np.tan, cost=8)
_ew("arcsin", np.arcsin, cost=8)
_ew("arccos", np.arccos, cost=8)
_ew("arctan", np.arctan, cost=8)
_ew("arctan2", np.arctan2, cost=10)
_ew("sinh", np.sinh, cost=8)
_ew("cosh", np.cosh, cost=8)
_ew("tanh", np.tanh, cost=6)
_ew("arcsinh", np.arcsinh, cost=8)
_ew("arccosh", np.arccosh, cost=8)
_ew("arctanh", np.arctanh, cost=8)
# scipy.special (float32 stays float32, everything else computes in float64)
_ew("erf", special.erf, cost=6)
_ew("erfc", special.erfc, cost=6)
_ew("floor", np.floor)
_ew("ceil", np.ceil)
_ew("trunc", np.trunc)
_ew("rint", np.rint)
_ew("hypot", np.hypot, cost=4, commutative=True)
_ew("copysign", np.copysign)
_ew("maximum", np.maximum, commutative=True)
_ew("minimum", np.minimum, commutative=True)
_ew("fmax", np.fmax, commutative=True)
_ew("fmin", np.fmin, commutative=True)
# float with int (loops efe of NumPy: float16/32/64 with int32 or int64): x * 2**n rounded once
_ew("ldexp", np.ldexp, cost=2)
_ew("nextafter", np.nextafter, cost=2)
# numpy.frexp's two outputs, one op each (numpy.frexp traces to both)
_define(OpDef("frexp_mantissa", Kind.ELEMENTWISE, 1, ufunc=UfuncOutput(np.frexp, 0, "frexp_mantissa"), cost=2,
              doc="numpy.frexp(x)[0]: the mantissa m, 0.5 <= |m| < 1, of x's sign (x itself for 0, inf and NaN)"))
_define(OpDef("frexp_exponent", Kind.ELEMENTWISE, 1, ufunc=UfuncOutput(np.frexp, 1, "frexp_exponent"), cost=2,
              doc="numpy.frexp(x)[1]: the int32 exponent e, x == m * 2**e (0 for 0, inf and NaN)"))
# --- elementwise: predicates and comparisons ---------------------------------------------------
_ew("isnan", np.isnan)
_ew("isinf", np.isinf)
_ew("isfinite", np.isfinite)
_ew("signbit", np.signbit)
_ew("eq", np.equal, commutative=True)
_ew("ne", np.not_equal, commutative=True)
_ew("lt", np.less)
_ew("le", np.less_equal)
_ew("gt", np.greater)
_ew("ge", np.greater_equal)
_ew("logical_and", np.logical_and, commutative=True)
_ew("logical_or", np.logical_or, commutative=True)
_ew("logical_xor", np.logical_xor, commutative=True)
_ew("logical_not", np.logical_not)
# --- elementwise: bits -------------------------------------------------------------------------
_ew("bitwise_and", np.bitwise_and, commutative=True)
_ew("bitwise_or", np.bitwise_or, commutative=True)
_ew("bitwise_xor", np.bitwise_xor, commutative=True)
_ew("invert", np.invert)
_ew("left_shift", np.left_shift)
_ew("right_shift", np.right_shift)
# --- elementwise without a ufunc ---------------------------------------------------------------
_define(OpDef("where", Kind.ELEMENTWISE, 3, doc="numpy.where(cond, a, b); cond is bool, a and b one dtype",
              numpy_names=("where",)))
_define(OpDef("cast", Kind.ELEMENTWISE, 1, doc="x.astype(dtype) with NumPy's unsafe casting",
              numpy_names=("astype",)))

# --- reductions --------------------------------------------------------------------------------
_define(OpDef("sum", Kind.REDUCTION, 1, combine="add", numpy_names=("sum",)))
_define(OpDef("prod", Kind.REDUCTION, 1, combine="mul", numpy_names=("prod",)))
_define(OpDef("max", Kind.REDUCTION, 1, combine="maximum", numpy_names=("max", "amax")))
_define(OpDef("min", Kind.REDUCTION, 1, combine="minimum", numpy_names=("min", "amin")))
_define(OpDef("nanmax", Kind.REDUCTION, 1, combine="fmax", numpy_names=("nanmax",)))
_define(OpDef("nanmin", Kind.REDUCTION, 1, combine="fmin", numpy_names=("nanmin",)))
_define(OpDef("argmax", Kind.REDUCTION, 1, combine="maximum", index_result=True, numpy_names=("argmax",)))
_define(OpDef("argmin", Kind.REDUCTION, 1, combine="minimum", index_result=True, numpy_names=("argmin",)))
_define(OpDef("any", Kind.REDUCTION, 1, combine="logical_or", accepts="b", numpy_names=("any",)))
_define(OpDef("all", Kind.REDUCTION, 1, combine="logical_and", accepts="b", numpy_names=("all",)))

# --- scans: inclusive prefixes along ``axis`` (``combine`` folds element i into the prefix of 0..i-1) ------
_define(OpDef("cumsum", Kind.SCAN, 1, cost=2, combine="add", accepts="iuf", numpy_names=("cumsum",),
              doc="numpy.cumsum along `axis` (NumPy adds in order; a GPU kernel adds in a tree: CORRECTNESS.md's "
                  "reduction tolerance)"))
_define(OpDef("cumprod", Kind.SCAN, 1, cost=2, combine="mul", accepts="iuf", numpy_names=("cumprod",),
              doc="numpy.cumprod along `axis`"))
_define(OpDef("cummax", Kind.SCAN, 1, cost=2, combine="maximum", accepts="iuf",
              doc="numpy.maximum.accumulate along `axis` (NaN propagates, as in NumPy)"))
_define(OpDef("cummin", Kind.SCAN, 1, cost=2, combine="minimum", accepts="iuf",
              doc="numpy.minimum.accumulate along `axis`"))

# --- layout ------------------------------------------------------------------------------------
_define(OpDef("expand_dims", Kind.LAYOUT, 1, cost=0, doc="insert size-1 axes at `axes` of the result"))
_define(OpDef("squeeze", Kind.LAYOUT, 1, cost=0, doc="remove the size-1 axes `axes`"))
_define(OpDef("transpose", Kind.LAYOUT, 1, cost=0, doc="permute axes: result axis i is operand axis perm[i]"))
_define(OpDef("broadcast_to", Kind.LAYOUT, 1, cost=0, doc="broadcast to the node's shape"))
_define(OpDef("slice", Kind.LAYOUT, 1, cost=0,
              doc="basic indexing: per axis `start`/`stop`/`step` as Python slices resolve them (none: the end); "
                  "step 0 is the integer index `start` (kept as a size-1 axis, out of range: IndexError)"))

# --- gathers -----------------------------------------------------------------------------------
_define(OpDef("gather", Kind.GATHER, VARIADIC, cost=1,
              doc="out[p] = x[q]: `axes` are the axes of x read at the index operands' values (one integer operand "
                  "per axis, all of the result's rank, broadcast to it; negative values wrap, out of range: "
                  "IndexError), `dims` the result axis each other axis of x runs along; optional `start`/`stop`/`step` "
                  "(as a slice's) read x through that window first"))
_define(OpDef("reshape", Kind.LAYOUT, 1, cost=0,
              doc="the operand's elements in C order laid out in `shape` (same size); kernels see it as index "
                  "arithmetic only (fusec/passes/reshapes.py), or with `between_kernels` (the reason) as a view of "
                  "its operand that an earlier kernel wrote"))
_define(OpDef("window", Kind.LAYOUT, 1, cost=0,
              doc="per axis, element i is the operand's element clamp(start + step * i, lo, hi) (`count` of them): "
                  "np.pad's edge mode and the parts of a join; a slice is a window whose clamp never binds"))

# --- contractions -------------------------------------------------------------------------------
_define(OpDef("matmul", Kind.CONTRACTION, 2, cost=16, accepts="iuf",
              doc="numpy.matmul(a, b) of a (..., M, K) and b (..., K, N), batch axes broadcast, both of the result's "
                  "dtype: a GEMM (float16 accumulates in float32 and rounds once; integers wrap)"))

# reductions without an identity raise on an empty reduced extent, as NumPy does
NO_IDENTITY = frozenset({"max", "min", "nanmax", "nanmin", "argmax", "argmin"})


def reduction_identity(op: str, dt: np.dtype) -> Any:
    """The value a reduction starts from (for ``argmax``/``argmin``: the value part)."""
    if op == "sum":
        return dt.type(0)
    if op == "prod":
        return dt.type(1)
    if op == "any":
        return False
    if op == "all":
        return True
    lowest = op in ("max", "nanmax", "argmax")
    if dtypes.kind(dt) == "f":
        if op in ("nanmax", "nanmin"):
            return dt.type(np.nan)
        return dt.type(-np.inf if lowest else np.inf)
    if dt.kind == "b":
        return not lowest
    info = np.iinfo(dt)
    return dt.type(info.min if lowest else info.max)


def arity_ok(op: OpDef, n: int) -> bool:
    """Whether ``op`` takes ``n`` operands (a variadic op: at least two)."""
    return n >= 2 if op.arity == VARIADIC else n == op.arity


def scan_identity(op: str, dt: np.dtype) -> Any:
    """The value a scan's prefix starts from (before the first element)."""
    return reduction_identity("sum" if OPS[op].combine == "add" else "prod", dt)


def by_numpy_name() -> dict[str, OpDef]:
    """NumPy ufunc/function name -> op, for the tracer."""
    table: dict[str, OpDef] = {}
    for op in OPS.values():
        for n in op.numpy_names:
            table.setdefault(n, op)
    return table


def reference(op: OpDef, xp: Any) -> Callable[..., Any]:
    """The callable computing elementwise ``op`` (a ufunc) in namespace ``xp``: NumPy's ufunc (or SciPy's,
    through :class:`~fusec.ir.special.SpecialUfunc`), or CuPy's of the same name (``cupyx.scipy.special``
    for the ``scipy.special`` ones)."""
    assert op.ufunc is not None, op.name
    if xp is np:
        return op.ufunc
    if isinstance(op.ufunc, UfuncOutput):  # one output of CuPy's ufunc of the name (cupy.frexp)
        return op.ufunc.on(xp)
    if op.module == "scipy.special":
        xp = importlib.import_module("cupyx.scipy.special")
    return getattr(xp, op.ufunc.__name__)


def elementwise_ops() -> list[OpDef]:
    return [op for op in OPS.values() if op.kind is Kind.ELEMENTWISE]


def reduction_ops() -> list[OpDef]:
    return [op for op in OPS.values() if op.kind is Kind.REDUCTION]


def scan_ops() -> list[OpDef]:
    return [op for op in OPS.values() if op.kind is Kind.SCAN]


def ufunc_loops(op: OpDef) -> list[tuple[np.dtype, ...]]:
    """The (inputs..., output) dtype loops of an elementwise op over fusec's supported dtypes.

    Read from NumPy: for each supported dtype, all inputs of that dtype, what NumPy resolves to; and for a binary
    op, each pair of distinct dtypes NumPy has a loop of its own for (its comparisons of uint64 with int64, which
    NumPy 2 makes exact). Only loops whose inputs stay their dtypes (no implicit cast) are listed.
    """
    loops = []
    for dt in dtypes.SUPPORTED:
        if op.name == "where":
            loops.append((dtypes.BOOL, dt, dt, dt))
            continue
        if op.name == "cast":
            continue
        assert op.ufunc is not None
        try:
            resolved = op.ufunc.resolve_dtypes((dt,) * op.ufunc.nin + (None,) * op.ufunc.nout)
        except TypeError:
            continue
        ins, out = resolved[: op.ufunc.nin], resolved[op.ufunc.nin]
        if all(i == dt for i in ins) and out in dtypes.SHORT_NAMES:
            loops.append((*ins, out))
    if op.ufunc is not None and op.ufunc.nin == 2 and op.name != "where":
        for pair in itertools.permutations(dtypes.SUPPORTED, 2):
            try:
                resolved = op.ufunc.resolve_dtypes((*pair, None))
            except TypeError:
                continue
            if resolved[:2] == pair and resolved[2] in dtypes.SHORT_NAMES:
                loops.append((*pair, resolved[2]))
    return loops
