"""What to write instead: the hints of the tracer's errors for functions, methods, attributes and
keyword arguments fusec does not take, and :func:`call_checked`, which turns a call's argument
mismatch into a :class:`~fusec.support.errors.FusecTypeError` (never Python's raw ``TypeError``).

The tables here are docs/limitations.md's "what does not trace, and what to write instead", in data
(``python -m fusec.frontend.ops_doc`` writes that list from :data:`FUNCTION_HINTS`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from fusec.support.errors import FusecError, FusecTypeError

_LATER_VIEWS = "not traced yet: do it on the argument before the call, or on the result"
_NOT_CONCRETE = "the value is not known until the kernel runs: return it and convert the result"

# function or method name -> what to write instead
FUNCTION_HINTS: dict[str, str] = {
    "view": _LATER_VIEWS,
    **dict.fromkeys(["sort", "argsort", "partition",
                     "median", "percentile", "quantile", "nanmedian", "unique", "nonzero", "argwhere"],
                    "this needs a sort or selection kernel, which fusec does not generate: call it "
                    "outside the fused function"),
    "vdot": "write np.dot(a.ravel(), b.ravel()) (real dtypes)",
    **dict.fromkeys(["item", "tolist", "tobytes", "numpy", "cpu", "get"], _NOT_CONCRETE),
    "unsqueeze": "use x[:, None] or np.expand_dims(x, axis) (NumPy spelling)",
    "permute": "use np.transpose(x, axes) or x.transpose(axes) (NumPy spelling)",
    "dim": "use x.ndim (NumPy spelling)",
    "numel": "use x.size (NumPy spelling)",
    "float": "use x.astype(np.float32) (NumPy spelling)",
    "half": "use x.astype(np.float16) (NumPy spelling)",
    "double": "use x.astype(np.float64) (NumPy spelling)",
    "long": "use x.astype(np.int64) (NumPy spelling)",
    "int": "use x.astype(np.int32) (NumPy spelling)",
    "detach": "traced arrays carry no gradient: use x itself",
    "contiguous": "traced arrays have no layout: use x itself",
    "sigmoid": "use scipy.special.expit(x) (or cupyx.scipy.special.expit)",
    "softmax": "use scipy.special.softmax(x, axis=...) (or cupyx.scipy.special.softmax)",
    "log_softmax": "use scipy.special.log_softmax(x, axis=...)",
    "logsumexp": "use scipy.special.logsumexp(x, axis=...)",
    "relu": "use np.maximum(x, 0)",
    "ptp": "use np.ptp(x, axis=...) (ndarray.ptp is gone in NumPy 2)",
    **dict.fromkeys(["real", "imag", "conj", "conjugate", "angle"], "complex dtypes are not supported; a real "
                    "array's real part is itself"),
    **dict.fromkeys(["strides", "flags", "data", "base", "ctypes", "flat", "itemset", "fill", "resize"],
                    "traced arrays have no memory while tracing: only their dtype, shape, ndim and size are known"),
}

# keyword arguments of other libraries -> NumPy's
KEYWORD_HINTS: dict[str, str] = {
    "dim": "NumPy spells it axis= (x.sum(axis=1)); dim= is PyTorch's",
    "keepdim": "NumPy spells it keepdims= ; keepdim= is PyTorch's",
    "input": "pass the array positionally (NumPy calls it a=)",
}


def unsupported_hint(name: str) -> str:
    """The hint for a function or method ``name`` fusec does not trace."""
    if name in FUNCTION_HINTS:
        return FUNCTION_HINTS[name]
    return "see the list of supported ops in fusec's docs/ops.md"


def attribute_hint(name: str) -> str:
    """The hint for an attribute ``name`` traced arrays do not have."""
    if name in FUNCTION_HINTS:
        return FUNCTION_HINTS[name]
    ufunc = getattr(np, name, None)
    if isinstance(ufunc, np.ufunc):
        return f"use np.{name}(x) (NumPy has no x.{name}() method)"
    if hasattr(np.ndarray, name):
        return ("ndarray." + name + " is not supported inside a fused function; traced arrays have these methods "
                "(sum, prod, max, min, mean, var, std, argmax, argmin, any, all, astype, clip, "
                "round, transpose, T, mT, squeeze, swapaxes, reshape, ravel, flatten, copy)")
    return f"NumPy arrays have no attribute '{name}'"


def keyword_hint(kwargs: dict[str, Any]) -> str | None:
    for key in kwargs:
        if key in KEYWORD_HINTS:
            return KEYWORD_HINTS[key]
    return None


@functools.lru_cache(maxsize=256)
def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def call_checked(what: str, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)``; when the arguments do not fit ``fn``'s signature, a FusecTypeError naming
    ``what`` (``numpy.sum``, ``x.sum``) and the argument, with a hint for other libraries' spellings."""
    try:
        return fn(*args, **kwargs)
    except FusecError:
        raise
    except TypeError as exc:
        sig = _signature(fn)
        if sig is None:
            raise
        try:
            sig.bind(*args, **kwargs)
        except TypeError as mismatch:
            message = str(mismatch).replace("got an unexpected keyword argument", "takes no keyword argument")
            raise FusecTypeError(f"{what}(): {message}", hint=keyword_hint(kwargs)) from None
        raise exc from None


def checked_method(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` of a traced array, with :func:`call_checked`'s errors (``x.sum(dim=1)``): a decorator."""
    what = f"x.{method.__name__}"

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call_checked(what, method, (self, *args), kwargs)

    return wrapper
