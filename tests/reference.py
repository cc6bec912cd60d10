"""What fusec's float results are checked against: NumPy's semantics without NumPy's accumulation order, and how far
an accumulation in another order may move each result (``shared/CORRECTNESS.md``, Tolerances).

fusec folds sums, products and scans in an order of its own and accumulates float16 in float32. NumPy folds in
its own order, and its float16 results depend on it: along a contiguous axis it sums pairwise in float32, along a
strided axis and in every scan (``np.cumsum``) it rounds the running value to float16 at each step. The same
float16 values laid out transposed in memory sum to -inf in NumPy where the contiguous copy sums to 4.37e4 (the
running float16 value overflows on the way); ``np.cumsum`` of 5000 halves of 0.25 stops at 512 (the spacing of
float16 there is 0.5). NumPy at face value is one of those accidents; fusec cannot be both (a view is index
arithmetic in its kernels, one kernel for every layout), and CORRECTNESS.md picks the float32 accumulator.

- :func:`expect` runs ``fn`` on copies of its arguments: by NumPy; by NumPy with every float sum and
  product reduction and scan (``add``/``multiply`` ``.reduce``/``.accumulate``: ``sum``, ``mean``, ``prod``,
  ``cumsum``, ``nancumsum``, ``cumprod``...) accumulated in float64 (long double for float64 results) and rounded
  once to NumPy's dtype for it, every other step exactly as NumPy does it (its float16 roundings and overflows
  included): the *reference*, which fusec computes up to the order of its accumulations, NaN and infinities
  exactly (a float16 sum overflows where its exact value does); the same with the accumulations left unrounded
  (where a result is near the overflow threshold); on float64 arguments (Inductor's reference for NumPy's own
  error); and on magnitudes, which bound that order's error (:meth:`Result.bound`).

    e = expect(lambda x: (x * np.arange(130).astype(x.dtype)).sum(axis=1), x)
    e.outputs[0].numpy, e.outputs[0].reference, e.outputs[0].bound()
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from fusec.ir.dtypes import kind as dtype_kind

# Higham & Mary's probabilistic rounding error analysis (SIAM J. Sci. Comput. 41(5), 2019, Thm 3.1): when the
# rounding errors of a sum's additions are independent, of mean zero and at most u each (round to nearest on random
# data), |computed - exact| <= lambda * sqrt(n) * u * sum|x_i| (to first order) whatever the order of the n - 1
# additions, except with probability at most 2 n**2 exp(-lambda**2 (1 - u)**2 / 2) (their per-term statement,
# summed over the terms). lambda = 11: 1e-14 per output for a row of 2**20 terms, 1e-19 for 4099 terms.
LAMBDA = 11.0
# unit roundoff of the accumulator fusec folds each result dtype in (float16 in float32)
_ACCUMULATOR_UNIT = {np.dtype(np.float16): 2.0**-24, np.dtype(np.float32): 2.0**-24, np.dtype(np.float64): 2.0**-53}


def unit_roundoff(dtype: Any) -> float:
    """Half the spacing of ``dtype``'s floats at 1: float16 2**-11, float32 2**-24, float64 2**-53."""
    return float(ml_dtypes.finfo(dtype).eps) / 2


def accumulation_error(terms: int, unit: float, depth: int | None = None) -> float:
    """The relative error bound (times the sum of the magnitudes folded) of an accumulation of ``terms`` values with
    unit roundoff ``unit``: gamma_d = d u / (1 - d u) with d the additions on the longest path (``depth`` where the
    kernel's schedule tells it, else ``terms - 1``, which holds for any order; Higham, *Accuracy and Stability of
    Numerical Algorithms*, (4.4) and its products' counterpart (3.4)), and never more than the probabilistic
    lambda sqrt(terms) u of :data:`LAMBDA` (any order: a path has fewer than ``terms`` additions)."""
    d = max(terms - 1, 0) if depth is None else depth
    gamma = d * unit / (1 - d * unit) if d * unit < 1 else math.inf
    return min(gamma, LAMBDA * math.sqrt(max(terms, 1)) * unit)


class Unbounded(Exception):
    """``fn`` takes a step the magnitude evaluation has no bound for (a comparison, a transcendental function, a
    division by a computed value): no error bound for its results."""


@dataclass
class _State:
    perturb: bool = False  # magnitudes: every accumulation's result doubled (which results depend on one)
    unrounded: bool = False  # the reference with accumulations kept in float64 (where a float16 one overflows)
    terms: int = 1  # the most values any accumulation folds
    unit: float = 0.0  # the largest unit roundoff of an accumulator fusec uses for them
    folds: int = 0  # accumulations (a chain of them adds their errors)
    steps: int = 0  # float results rounded after the first accumulation: elementwise steps, later accumulations
    step_unit: float = 0.0  # the largest unit roundoff of those roundings


_STATE = _State()


def _plain(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    return x.view(np.ndarray) if isinstance(x, np.ndarray) else x


def _wrap(x: Any, cls: type) -> Any:
    if isinstance(x, (list, tuple)):
        return type(x)(_wrap(v, cls) for v in x)
    return x.view(cls) if type(x) is np.ndarray else x


def _folded(ufunc_method: str, operand: np.ndarray, result: Any, kwargs: dict[str, Any]) -> int:
    """How many values each result of a reduce or accumulate folds."""
    if ufunc_method == "accumulate":
        axis = kwargs.get("axis", 0)
        return int(operand.shape[axis]) if operand.ndim else 1
    return int(operand.size // max(1, np.size(result)))


def _call(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict[str, Any]) -> Any:
    if "out" in kwargs:
        kwargs = dict(kwargs, out=tuple(_plain(o) for o in kwargs["out"]))
    return getattr(ufunc, method)(*(_plain(i) for i in inputs), **kwargs)


def _finish(result: Any, kwargs: dict[str, Any], cls: type, value: Any = None) -> Any:
    """``value`` (when given) written where NumPy wrote ``result``: into ``out=``, else as NumPy's result."""
    if value is not None:
        outs = kwargs.get("out")
        if outs and outs[0] is not None:
            np.copyto(_plain(outs[0]), value, casting="unsafe")
            return outs[0]
        result = value
    if isinstance(result, np.generic):  # a 0-d result stays traced: later steps on it are seen too
        result = np.asarray(result)
    outs = kwargs.get("out")
    return kwargs["out"][0] if outs and outs[0] is not None else _wrap(result, cls)


class _Reference(np.ndarray):
    """NumPy, except float sums and products accumulate in float64 and round once to NumPy's result dtype."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        result = _call(ufunc, method, inputs, kwargs)
        if isinstance(result, tuple):  # divmod, modf, frexp: elementwise, as NumPy
            return _wrap(result, _Reference) if "out" not in kwargs else kwargs["out"]
        dtype = np.asarray(result).dtype
        if ufunc in (np.add, np.multiply) and method in ("reduce", "accumulate") and dtype_kind(dtype) == "f":
            operand = np.asarray(_plain(inputs[0]))
            wide = np.longdouble if dtype == np.float64 else np.float64
            exact_kwargs = {k: v for k, v in kwargs.items() if k != "out"} | {"dtype": wide}
            with np.errstate(all="ignore"):
                value = np.asarray(getattr(ufunc, method)(operand, **exact_kwargs))
                value = value.astype(np.float64) if _STATE.unrounded else value.astype(dtype)
            _STATE.terms = max(_STATE.terms, _folded(method, operand, value, kwargs))
            _STATE.unit = max(_STATE.unit, _ACCUMULATOR_UNIT[dtype])
            _STATE.folds += 1
            if _STATE.folds > 1:  # it folds an earlier accumulation's rounded result (or runs beside it)
                _STATE.steps += 1
                _STATE.step_unit = max(_STATE.step_unit, unit_roundoff(dtype))
            return _finish(result, kwargs, _Reference, value)
        if method == "__call__" and _STATE.folds and dtype_kind(dtype) == "f":
            _STATE.steps += 1
            _STATE.step_unit = max(_STATE.step_unit, unit_roundoff(dtype))
        return _finish(result, kwargs, _Reference)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _wrap(func._implementation(*args, **kwargs), _Reference)


# Magnitudes: each value replaced by a bound of |value|, for the steps whose error a magnitude bounds: sums and
# differences add magnitudes, products multiply them, negation and abs keep them, max and min take the larger,
# division by a value not computed from the arguments divides by its magnitude.
_MAGNITUDE_CALLS = {
    np.add: np.add, np.subtract: np.add, np.multiply: np.multiply, np.negative: np.positive,
    np.positive: np.positive, np.absolute: np.positive, np.maximum: np.maximum, np.minimum: np.maximum,
    np.fmax: np.maximum, np.fmin: np.maximum,
}
_MAGNITUDE_FOLDS = {np.add: np.add, np.multiply: np.multiply, np.maximum: np.maximum, np.minimum: np.maximum,
                    np.fmax: np.maximum, np.fmin: np.maximum}
_PREDICATES = (np.isnan, np.isinf, np.isfinite)  # the same on |x| as on x (of the arguments)


def _magnitude_of(x: Any) -> Any:
    """A constant's magnitude: |x| (a traced value already is one)."""
    if isinstance(x, _Magnitude):
        return x.view(np.ndarray)
    return np.abs(np.asarray(x, dtype=np.float64) if dtype_kind(np.asarray(x).dtype) in "biuf" else x)


class _Magnitude(np.ndarray):
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
        if method == "__call__" and ufunc in _PREDICATES:
            return _call(ufunc, method, inputs, kwargs)
        if method == "__call__" and ufunc in (np.true_divide, np.divide) and not isinstance(inputs[1], _Magnitude):
            result = _call(np.divide, method, (_magnitude_of(inputs[0]), _magnitude_of(inputs[1])), kwargs)
            return _finish(result, kwargs, _Magnitude)
        if method == "__call__" and ufunc in _MAGNITUDE_CALLS:
            result = _call(_MAGNITUDE_CALLS[ufunc], method, tuple(_magnitude_of(i) for i in inputs), kwargs)
            return _finish(result, kwargs, _Magnitude)
        if method in ("reduce", "accumulate") and ufunc in _MAGNITUDE_FOLDS:
            fold = _MAGNITUDE_FOLDS[ufunc]
            result = _call(fold, method, (_magnitude_of(inputs[0]),) + inputs[1:], kwargs)
            if _STATE.perturb and fold is not np.maximum:
                value = np.asarray(_plain(result)) * 2.0
                return _finish(result, kwargs, _Magnitude, value)
            return _finish(result, kwargs, _Magnitude)
        raise Unbounded(f"{ufunc.__name__}.{method}")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _wrap(func._implementation(*args, **kwargs), _Magnitude)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:  # magnitudes stay float64 (no overflow)
        if dtype_kind(np.dtype(dtype)) not in "iuf":
            raise Unbounded(f"astype({np.dtype(dtype)})")
        return np.asarray(self, dtype=np.float64).copy().view(_Magnitude)


def _outputs(result: Any) -> list[np.ndarray]:
    if result is None:
        return []
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    return [np.asarray(_plain(np.asarray(r) if isinstance(r, np.generic) else r)) for r in items]


@dataclass
class Result:
    """One float result (or argument after the call): NumPy's value, the reference, and what bounds the distance
    of a result accumulated in another order from the reference."""

    numpy: np.ndarray
    reference: np.ndarray
    unrounded: np.ndarray  # the reference with its accumulations not rounded (the steps after them in float64)
    float64: np.ndarray | None  # ``fn`` of the arguments in float64 (Inductor's reference for NumPy's own error)
    magnitude: np.ndarray | None  # a bound of |every value on its path|, None where no bound applies
    dependent: np.ndarray | None  # where it depends on an accumulation (elsewhere fusec rounds as NumPy does)
    terms: int
    unit: float
    folds: int
    steps: int
    step_unit: float

    def bound(self, depth: int | None = None) -> np.ndarray | None:
        """How far a result that accumulates in another order may be from :attr:`reference`: the accumulation's
        error (:func:`accumulation_error` of its terms for each accumulation in the function, as though chained, or
        of ``depth`` additions on its longest path) times the magnitudes it folds; plus the accumulation's own
        rounding to the result's dtype (two roundings of the result, fusec's and the reference's, each at most a
        unit roundoff of it); plus two roundings of a value no larger than the magnitude for each float step after
        the first accumulation (fusec and the reference round those steps' slightly different operands). Zero
        where the result depends on no accumulation (fusec rounds there as NumPy does); None where the magnitudes
        do not bound the steps."""
        if self.magnitude is None or self.dependent is None or dtype_kind(self.reference.dtype) != "f":
            return None
        out_unit = unit_roundoff(self.reference.dtype)
        folds = 1 if depth is not None else max(1, self.folds)
        per_magnitude = (folds * accumulation_error(self.terms, self.unit, depth)
                         + 2 * self.steps * max(out_unit, self.step_unit))
        with np.errstate(all="ignore"):
            result = np.abs(self.reference.astype(np.float64))
            bound = per_magnitude * self.magnitude + 2 * out_unit * np.where(np.isfinite(result), result, 0.0)
            return np.where(self.dependent, bound, 0.0)


@dataclass
class Expectation:
    outputs: list[Result]
    arguments: list[Result]  # the arguments after the call (those it writes to)


def _copy(a: Any) -> Any:
    """A copy of array ``a`` in the same layout: the same view (offset, strides) of a copy of its base buffer, so
    that NumPy folds it in the same order and writes through it land in the copy as they would in ``a``."""
    if not isinstance(a, np.ndarray):
        return a
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    if base.base is not None or not base.flags.c_contiguous:
        return np.array(a, copy=True)
    buffer = base.copy()
    offset = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return np.ndarray(a.shape, a.dtype, buffer=buffer, offset=offset, strides=a.strides)


def _copies(args: tuple) -> list[Any]:
    return [_copy(a) for a in args]


def _run(fn: Callable[..., Any], args: list[Any]) -> tuple[list[np.ndarray], list[Any]]:
    with np.errstate(all="ignore"):
        result = fn(*args)
    return _outputs(result), [np.asarray(_plain(a)) if isinstance(a, np.ndarray) else a for a in args]


def expect(fn: Callable[..., Any], *args: Any) -> Expectation:
    """``fn(*args)`` by NumPy, its reference and magnitudes (module docstring), each on fresh copies of ``args``
    (views stay views of a copy of their base, so that writes through them land as NumPy's do)."""
    global _STATE
    numpy_out, numpy_args = _run(fn, _copies(args))
    _STATE = _State()
    reference_out, reference_args = _run(fn, [a.view(_Reference) if isinstance(a, np.ndarray) else a
                                                for a in _copies(args)])
    counts = (_STATE.terms, _STATE.unit, _STATE.folds, _STATE.steps, _STATE.step_unit)
    _STATE = _State(unrounded=True)
    unrounded_out, unrounded_args = _run(fn, [a.view(_Reference) if isinstance(a, np.ndarray) else a
                                              for a in _copies(args)])
    _STATE = _State()
    try:
        wide_out, wide_args = _run(fn, [a.astype(np.float64) if isinstance(a, np.ndarray) and dtype_kind(a.dtype) == "f"
                                        else a for a in _copies(args)])
    except Exception:  # a function that needs its arguments' own dtypes
        wide_out, wide_args = [None] * len(numpy_out), [None] * len(args)

    def magnitudes(perturb: bool) -> tuple[list[np.ndarray], list[Any]]:
        global _STATE
        _STATE = _State(perturb=perturb)
        traced = [np.abs(np.asarray(a, dtype=np.float64)).view(_Magnitude)
                  if isinstance(a, np.ndarray) and dtype_kind(a.dtype) == "f" else a for a in _copies(args)]
        return _run(fn, traced)

    try:
        (m_out, m_args), (p_out, p_args) = magnitudes(False), magnitudes(True)
    except Unbounded:
        m_out = p_out = [None] * len(numpy_out)
        m_args = p_args = [None] * len(args)
    finally:
        _STATE = _State()

    def results(numpys: list, references: list, unroundeds: list, wides: list, ms: list, ps: list) -> list[Result]:
        out = []
        for n_, r_, w_, f_, m_, p_ in zip(numpys, references, unroundeds, wides, ms, ps):
            n_, r_ = np.asarray(n_), np.asarray(r_)
            f_ = np.asarray(f_).astype(np.float64) if f_ is not None and np.shape(f_) == n_.shape else None
            w_ = np.asarray(w_).astype(np.float64) if dtype_kind(np.asarray(w_).dtype) == "f" else r_
            magnitude = dependent = None
            if m_ is not None and p_ is not None and np.shape(m_) == n_.shape:
                magnitude = np.asarray(m_, dtype=np.float64)
                with np.errstate(invalid="ignore"):
                    dependent = ~(np.asarray(p_, dtype=np.float64) == magnitude) & ~np.isnan(magnitude)
            out.append(Result(n_, r_, w_, f_, magnitude, dependent, *counts))
        return out

    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    return Expectation(
        results(numpy_out, reference_out, unrounded_out, wide_out, m_out, p_out),
        results(*([row[i] for i in arrays]
                  for row in (numpy_args, reference_args, unrounded_args, wide_args, m_args, p_args))))


__all__ = ["LAMBDA", "Expectation", "Result", "Unbounded", "accumulation_error", "expect", "unit_roundoff"]
