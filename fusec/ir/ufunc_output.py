"""One output of a NumPy ufunc with several, as a one-output ufunc the op table can hold.

``numpy.frexp`` has two outputs (the mantissa, of the input's float dtype, and the int32 exponent); the op table's
ops have one, so each output is an op of its own, whose ``ufunc`` is a :class:`UfuncOutput`: the part of NumPy's
ufunc interface the op table, the tracer and the tests use (``__name__``, ``nin``, ``nout``, ``resolve_dtypes``,
calling it), answering for output ``index`` of the whole ufunc's loop. Called on arrays (or on a fusec tracer, which
traces ``numpy.frexp`` into both ops) it is ``ufunc(*args)[index]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class UfuncOutput:
    """Output ``index`` of NumPy's ufunc ``ufunc`` (``numpy.frexp(x)[1]``: ``UfuncOutput(np.frexp, 1, "...")``)."""

    nout = 1

    def __init__(self, ufunc: np.ufunc, index: int, name: str):
        self.ufunc = ufunc
        self.index = index
        self.nin = ufunc.nin
        self.__name__ = name
        self.module = "numpy"

    def __repr__(self) -> str:
        return f"<output {self.index} of ufunc numpy.{self.ufunc.__name__}>"

    def resolve_dtypes(self, dtypes: tuple, *, signature: tuple | None = None, casting: Any = None,
                       reduction: bool = False) -> tuple[np.dtype, ...]:
        """The whole ufunc's loop for these inputs (``dtypes``: the inputs, then this output's dtype or None), as
        (inputs..., this output); TypeError where NumPy has no loop."""
        if len(dtypes) != self.nin + 1:
            raise TypeError(f"{self.__name__} takes {self.nin} input and 1 output dtype")
        outs: list[Any] = [None] * self.ufunc.nout
        outs[self.index] = dtypes[self.nin]
        full_signature = None
        if signature is not None:
            sig_outs: list[Any] = [None] * self.ufunc.nout
            sig_outs[self.index] = signature[self.nin] if len(signature) > self.nin else None
            full_signature = (*signature[: self.nin], *sig_outs)
        kwargs: dict[str, Any] = {} if casting is None else {"casting": casting}
        if full_signature is not None:
            kwargs["signature"] = full_signature
        resolved = self.ufunc.resolve_dtypes((*dtypes[: self.nin], *outs), **kwargs)
        return (*resolved[: self.nin], resolved[self.nin + self.index])

    def __call__(self, *args: Any) -> Any:
        return self.ufunc(*args)[self.index]

    def on(self, xp: Any) -> Callable[..., Any]:
        """The same output of the namespace ``xp``'s ufunc of this name (CuPy's ``cupy.frexp``)."""
        ufunc = getattr(xp, self.ufunc.__name__)
        return lambda *args: ufunc(*args)[self.index]
