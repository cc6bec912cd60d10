"""fusec: a graph-level kernel-fusion compiler for NumPy/CuPy-style functions on NVIDIA GPUs.

Public names: :func:`fuse`, :class:`Fused`, :class:`ArraySpec` and the errors.
"""

from fusec.api import Fused, fuse
from fusec.arrayspec import ArraySpec
from fusec.errors import (
    FusecAxisError,
    FusecError,
    FusecOverflowError,
    FusecTypeError,
    FusecValueError,
    ParseError,
    TraceError,
    UnsupportedError,
    VerifyError,
)

__version__ = "0.1.0"

__all__ = [
    "ArraySpec",
    "Fused",
    "FusecAxisError",
    "FusecError",
    "FusecOverflowError",
    "FusecTypeError",
    "FusecValueError",
    "ParseError",
    "TraceError",
    "UnsupportedError",
    "VerifyError",
    "fuse",
]
