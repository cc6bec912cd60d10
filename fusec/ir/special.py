"""Ufuncs of ``scipy.special`` as the op table sees them, with SciPy optional.

SciPy's ``erf``/``erfc`` are NumPy ufuncs with two real loops, ``d->d`` and ``f->f``: float32 stays
float32 and everything else (bool, integers, float16) computes in float64, as NumPy's resolution of
those loops gives (``scipy.special.erf(np.float16(1)).dtype == float64``). :class:`SpecialUfunc` is the
part of NumPy's ufunc interface the op table, the tracer and the tests use (``__name__``, ``nin``,
``nout``, ``resolve_dtypes``, calling it), so an op of ``scipy.special`` is one table entry like a
NumPy ufunc. Called on arrays it is SciPy's own ufunc when SciPy is installed, else the C library's
``math.<name>`` per element in float64, rounded to the loop's dtype (SciPy's float32 loop also
computes in float64: the results agree bit for bit in float32). Called on an object that overrides
ufuncs (a fusec tracer), it dispatches to that object as a NumPy ufunc would.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from fusec.ir import dtypes

FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)


def scipy_float_dtype(dt: Any) -> np.dtype:
    """The dtype a ``scipy.special`` ufunc with loops ``d->d`` and ``f->f`` computes ``dt`` in: float32 for
    float32, float64 for bool, integers, float16, bfloat16, float64 and Python numbers. Complex is a TypeError."""
    if isinstance(dt, type) and not issubclass(dt, np.generic):
        if issubclass(dt, complex):
            raise TypeError("complex input: fusec's scipy.special ops take real dtypes")
        return FLOAT64
    dt = np.dtype(dt)
    if dtypes.kind(dt) not in "biuf":
        raise TypeError(f"no real loop for {dt}")
    return FLOAT32 if dt == FLOAT32 else FLOAT64


def _overrides_ufuncs(value: Any) -> bool:
    method = getattr(type(value), "__array_ufunc__", None)
    return method is not None and method is not np.ndarray.__array_ufunc__ and not isinstance(value, np.generic)


class SpecialUfunc:
    """``scipy.special.<name>`` (a unary ufunc with loops ``d->d`` and ``f->f``), usable without SciPy."""

    nin = 1
    nout = 1

    def __init__(self, name: str, scalar: Callable[[float], float]):
        self.__name__ = name
        self.module = "scipy.special"
        self._scalar = scalar

    def __repr__(self) -> str:
        return f"<fusec stand-in for ufunc {self.module}.{self.__name__}>"

    def resolve_dtypes(self, dtypes: tuple, *, signature: tuple | None = None, casting: Any = None,
                       reduction: bool = False) -> tuple[np.dtype, np.dtype]:
        """NumPy's ``ufunc.resolve_dtypes`` for the loops ``d->d`` and ``f->f`` (TypeError for no loop)."""
        if len(dtypes) != 2:
            raise TypeError(f"{self.__name__} takes 1 input and 1 output dtype")
        loop = scipy_float_dtype(dtypes[0])
        wanted = signature[1] if signature is not None and len(signature) > 1 else dtypes[1]
        if wanted is not None:
            wanted = np.dtype(wanted)
            if wanted not in (FLOAT32, FLOAT64):
                raise TypeError(f"{self.__name__} has no loop with output {wanted}")
            if loop == FLOAT64 and wanted == FLOAT32:  # the f->f loop: a float64 input casts down (same_kind)
                dt = dtypes[0]
                if isinstance(dt, np.dtype) and dt == FLOAT64:
                    raise TypeError(f"{self.__name__}: cannot cast float64 to float32 for the f->f loop")
            loop = wanted
        return loop, loop

    def scipy(self) -> Any | None:
        """SciPy's own ufunc, if SciPy is installed."""
        try:
            module = sys.modules.get("scipy.special") or importlib.import_module("scipy.special")
        except ImportError:
            return None
        return getattr(module, self.__name__, None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) != 1:
            raise TypeError(f"{self.__name__} takes 1 argument, got {len(args)}")
        (x,) = args
        if _overrides_ufuncs(x):
            return type(x).__array_ufunc__(x, self, "__call__", x, **kwargs)
        real = self.scipy()
        if real is not None:
            return real(x, **kwargs)
        x = np.asarray(x)
        loop, _ = self.resolve_dtypes((x.dtype, kwargs.get("dtype")))
        wide = np.asarray(x, dtype=FLOAT64)
        out = np.vectorize(self._scalar, otypes=[FLOAT64])(wide) if wide.size else wide.copy()
        return np.asarray(out, dtype=loop)[()] if out.ndim == 0 else out.astype(loop)


erf = SpecialUfunc("erf", math.erf)
erfc = SpecialUfunc("erfc", math.erfc)
