"""Known miscompiles of the CUDA compilers fusec drives, and the check that keeps kernels away from them.

ptxas before CUDA 13.3 (inside NVRTC 12.x and 13.0-13.2, and in the driver's JIT of the same versions)
miscompiles 8- and 16-bit values, which live in 32-bit registers: it drops the sign extension after an int16
negation that overflows (``(-y).astype(uint64)`` of int16 ``-32768`` gives 32768, NumPy 2**64 - 32768), and up
to 13.0 it loses the clearing of the sign bit of the low float16 of a packed pair (``abs`` of a float16 cast
keeps the sign of every other element). bfloat16 values live in the same 16-bit halves of registers and are
handled by the same instructions (its abs and neg are the same bit operations on packed pairs), so they are
refused with float16's. Both were found by the GPU fuzzer on an H100 whose NVRTC was 13.0, and
checked by compiling the same PTX with the ptxas of CUDA 12.8, 12.9, 13.0, 13.1, 13.2 (wrong) and 13.3, 13.4,
13.5 (right) and reading the SASS (``tests/codegen/test_compiler_bugs.py`` says how to repeat it).

A kernel that holds no value of such a type compiles right with those versions too, so only kernels with an
8- or 16-bit integer or a float16 or bfloat16 value are refused there, with a clear error instead of a wrong result.
"""

from __future__ import annotations

from collections.abc import Iterable

from fusec.support.errors import FusecError

NARROW_VALUES_FIXED_IN = (13, 3)  # the first CUDA version whose ptxas compiles 8/16-bit values right
NARROW_DTYPES = frozenset({"int8", "uint8", "int16", "uint16", "float16", "bfloat16"})
FIX_HINT = ("use NVRTC 13.3 or later: pip install 'fusec[cuda13]' (the nvidia-cuda-nvrtc wheel, CUDA 13 driver); "
            "float32, float64 and 32/64-bit integer kernels are not affected")


class MiscompileError(FusecError):
    """The CUDA compiler in use is known to compile this kernel wrong."""


def narrow_dtypes(dtypes: Iterable[object]) -> set[str]:
    """The 8- and 16-bit integer, float16 and bfloat16 types among ``dtypes`` (NumPy dtypes or fusec DTypes, by
    name)."""
    return {str(d) for d in dtypes} & NARROW_DTYPES


def check_narrow_values(kernel: str, dtypes: Iterable[object], compiler: str, version: tuple[int, int]) -> None:
    """Raise :class:`MiscompileError` when ``compiler`` (a name for the message, e.g. ``"NVRTC"``) at ``version``
    (major, minor) would compile ``kernel``, which holds values of ``dtypes``, wrong."""
    if tuple(version) >= NARROW_VALUES_FIXED_IN:
        return
    narrow = narrow_dtypes(dtypes)
    if narrow:
        raise MiscompileError(
            f"kernel {kernel} holds {', '.join(sorted(narrow))} values, which {compiler} {version[0]}.{version[1]} "
            "compiles wrong (ptxas before CUDA 13.3 drops the sign extension of 8/16-bit results and the sign bit "
            "clearing of float16 and bfloat16 pairs): it is not run", hint=FIX_HINT)
