"""What kind of argument a value is, read by the frontend and the integrations above it (Dask)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fusec.ir.arrayspec import ArraySpec


def backend_of(value: Any) -> str | None:
    """``"numpy"``, ``"cupy"`` or ``"spec"`` (an :class:`ArraySpec`) for an array argument, else None (a scalar, a
    Dask or torch array: checked by type, without importing their libraries)."""
    if isinstance(value, np.ndarray):
        return "numpy"
    if isinstance(value, ArraySpec):
        return "spec"
    if type(value).__module__.startswith("cupy"):
        return "cupy"
    return None


def fusion_disabled() -> bool:
    """``FUSEC_DISABLE_FUSION`` is set (to anything but 0): every function runs one kernel per op."""
    return os.environ.get("FUSEC_DISABLE_FUSION", "") not in ("", "0")
