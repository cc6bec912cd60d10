"""``ArraySpec``: an array described by shape and dtype alone, for planning without data or a GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.ir import dtypes


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
        shape = (int(self.shape),) if isinstance(self.shape, (int, np.integer)) else tuple(int(d) for d in self.shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"negative dimension in ArraySpec shape {shape}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtypes.as_dtype(self.dtype))
        if self.strides is not None:
            object.__setattr__(self, "strides", tuple(int(s) for s in self.strides))

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
