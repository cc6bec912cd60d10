"""``ArraySpec``: an array described by shape and dtype alone, for planning without data or a GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.ir import dtypes
from fusec.support.errors import FusecTypeError, FusecValueError


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of an argument: ``fusec.ArraySpec((8192, 8192), "float32")``.

    Pass it wherever an array goes (``f.explain(spec)``, ``f.plan(spec)``, ``f.cuda_source(spec)``)
    to see the plan and the generated source without allocating anything. ``strides`` (in
    elements, optional) describes a non-contiguous layout such as a transpose.
    """

    shape: tuple[int, ...]
    dtype: Any = "float32"
    strides: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        shape = _integers(self.shape, "shape", "dimension")
        if any(d < 0 for d in shape):
            raise FusecValueError(f"ArraySpec shape {shape} has a negative dimension",
                                  hint="dimensions are integers >= 0")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtypes.as_dtype(self.dtype))
        if self.strides is not None:
            strides = _integers(self.strides, "strides", "stride")
            if len(strides) != len(shape):
                raise FusecValueError(f"ArraySpec strides {strides} give {len(strides)} stride(s) for the "
                                      f"{len(shape)} dimension(s) of shape {shape}")
            object.__setattr__(self, "strides", strides)

    @property
    def ndim(self) -> int:
        """The number of dimensions, as ``ndarray.ndim``."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements, as ``ndarray.size``."""
        return int(np.prod(self.shape, dtype=np.int64))

    @classmethod
    def parse(cls, text: str) -> ArraySpec:
        """``f32[8192,8192]`` or ``i64[]`` -> ArraySpec."""
        text = text.strip()
        if not text.endswith("]") or "[" not in text:
            raise ValueError(f"expected DTYPE[DIMS] such as f32[8192,8192], got {text!r}")
        name, dims = text[:-1].split("[", 1)
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
        return cls(shape, dtypes.ir_dtype(name))

    def __str__(self) -> str:
        return f"{dtypes.short(self.dtype)}[{','.join(map(str, self.shape))}]"


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _integers(values: Any, field: str, item: str) -> tuple[int, ...]:
    """``values`` (one integer or a sequence of them: Python's or NumPy's, never a bool, a float or a string) as
    a tuple of ints; a :class:`FusecTypeError` naming the caller's line for anything else (``4.5`` was cut to 4,
    ``"4"`` and ``True`` were taken as 4 and 1)."""
    if _is_integer(values):
        return (int(values),)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise FusecTypeError(f"ArraySpec {field} must be an integer or a sequence of integers, got "
                             f"{_described(values)}")
    values = tuple(values)
    for i, value in enumerate(values):
        if not _is_integer(value):
            shown = "(" + ", ".join(_shown(v) for v in values) + ("," if len(values) == 1 else "") + ")"
            bound = " >= 0" if item == "dimension" else ""
            raise FusecTypeError(f"ArraySpec {field} {shown}: {item} {i} is {_described(value)}, not an integer",
                                 hint=f"{item}s are Python or NumPy integers{bound}")
    return tuple(int(v) for v in values)


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, (str, bytes)) else str(value)


def _described(value: Any) -> str:
    """``float 4.5``, ``str '4'``, ``numpy.bool True``."""
    kind = type(value)
    name = f"numpy.{kind.__name__}" if kind.__module__.startswith("numpy") else kind.__name__
    return f"{name} {_shown(value)}"
