"""Arrays of other libraries (PyTorch tensors, and anything else that speaks DLPack) as fused functions'
arguments: zero-copy views in, results of the same library out.

An argument with ``__dlpack__`` and ``__dlpack_device__`` that is neither NumPy's nor CuPy's is viewed
without a copy: a CPU one as a NumPy array (the NumPy reference backend runs), a CUDA one as a CuPy array
(the fused kernels run). For a PyTorch CUDA tensor the kernels run on PyTorch's current stream of the
tensor's device, so they are ordered with the PyTorch work around the call. The results come back as the
first array argument's library makes them from DLPack (``torch.from_dlpack``): zero-copy again; an
updated argument returned by the function is that very tensor. In-place updates of an argument write
through the view into the tensor's memory.

A PyTorch bfloat16 tensor travels as its bits: NumPy's DLPack has no bfloat16, so the tensor is viewed as int16
(``Tensor.view(torch.int16)``, no copy), shared through DLPack, and that array viewed as ``ml_dtypes.bfloat16``
(no copy); a bfloat16 result goes back the same way (an int16 view shared, then ``.view(torch.bfloat16)``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from fusec.frontend import pytrees
from fusec.ir.dtypes import BFLOAT16
from fusec.support.errors import FusecTypeError

_CPU, _CUDA, _CUDA_HOST, _CUDA_MANAGED = 1, 2, 3, 13  # DLPack device types


def is_foreign(value: Any) -> bool:
    """Whether ``value`` is an array of another library that fusec takes through DLPack."""
    if isinstance(value, (np.ndarray, np.generic)):
        return False
    module = type(value).__module__
    if module.startswith(("cupy", "numpy", "fusec")):
        return False
    return hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__")


def any_foreign(args: tuple, kwargs: dict) -> bool:
    """Whether a foreign array is among the arguments, or inside a list, tuple, dict or dataclass among them."""
    return any(_holds_foreign(a) for a in args) or any(_holds_foreign(v) for v in kwargs.values())


def _holds_foreign(value: Any) -> bool:
    return any(is_foreign(leaf) for leaf in pytrees.leaves(value))


def library_of(value: Any) -> Any:
    """The module of ``value``'s library (``torch`` for a ``torch.Tensor``)."""
    return sys.modules.get(type(value).__module__.split(".")[0])


def _bfloat16_bits(value: Any) -> Any:
    """A PyTorch bfloat16 tensor's int16 alias (the same memory, the same strides), else None."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16:
        return value.view(torch.int16)
    return None


def as_native(value: Any, what: str = "an argument") -> Any:
    """``value`` viewed as a NumPy (CPU) or CuPy (CUDA) array, without a copy."""
    bits = _bfloat16_bits(value)
    if bits is not None:  # NumPy's DLPack has no bfloat16: its bits, viewed as ml_dtypes' bfloat16
        return as_native(bits, what).view(BFLOAT16)
    device_type, _ = value.__dlpack_device__()
    try:
        if device_type == _CPU:
            return np.from_dlpack(value)
        if device_type in (_CUDA, _CUDA_HOST, _CUDA_MANAGED):
            import cupy

            return cupy.from_dlpack(value)
    except (BufferError, TypeError, RuntimeError, ValueError) as exc:
        hint = "call .detach() first" if "grad" in str(exc) else \
            "pass a tensor of a dtype NumPy or ml_dtypes has (complex is not supported), or convert it"
        raise FusecTypeError(f"{what} ({_type_name(value)}) cannot be shared through DLPack: {exc}",
                             hint=hint) from None
    raise FusecTypeError(f"{what} ({_type_name(value)}) is on DLPack device type {device_type}, neither the CPU nor "
                         "a CUDA GPU", hint="move it to the CPU or a CUDA device first")


def _type_name(value: Any) -> str:
    cls = type(value)
    return f"{cls.__module__.split('.')[0]}.{cls.__name__}"


def _stream(value: Any) -> contextlib.AbstractContextManager:
    """For a CUDA tensor: its device, and PyTorch's current stream there (as CuPy's current stream)."""
    device_type, device_id = value.__dlpack_device__()
    if device_type not in (_CUDA, _CUDA_MANAGED):
        return contextlib.nullcontext()
    import cupy

    stack = contextlib.ExitStack()
    stack.enter_context(cupy.cuda.Device(device_id))
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        stack.enter_context(cupy.cuda.ExternalStream(torch.cuda.current_stream(device_id).cuda_stream))
    return stack


def call(fn: Callable[..., Any], args: tuple, kwargs: dict, out: Any) -> Any:
    """``fn(*args, out=out, **kwargs)`` with the foreign arrays among them viewed as NumPy/CuPy arrays, on the
    first CUDA tensor's device and stream; the results in the first array argument's library."""
    values = [*args, *kwargs.values(), *(out if isinstance(out, (tuple, list)) else [out])]
    first = next((v for v in pytrees.leaves(values)
                  if is_foreign(v) or (hasattr(v, "shape") and not isinstance(v, np.generic))), None)
    cuda = next((v for v in pytrees.leaves(values)
                 if is_foreign(v) and v.__dlpack_device__()[0] in (_CUDA, _CUDA_MANAGED)), None)
    with _stream(cuda) if cuda is not None else contextlib.nullcontext():
        originals: dict[int, Any] = {}

        def view(leaf: Any, what: str) -> Any:
            if not is_foreign(leaf):
                return leaf
            viewed = as_native(leaf, what)
            originals[id(viewed)] = leaf
            return viewed

        def native(value: Any, what: str) -> Any:  # a container's foreign leaves each viewed (others as they are)
            return pytrees.map_leaves(view, value, what) if _holds_foreign(value) else value

        n_args = [native(a, f"argument {i}") for i, a in enumerate(args)]
        n_kwargs = {k: native(v, f"argument '{k}'") for k, v in kwargs.items()}
        if isinstance(out, (tuple, list)):
            n_out = type(out)(native(o, f"out[{i}]") for i, o in enumerate(out))
        else:
            n_out = native(out, "out=") if out is not None else None
        result = fn(*n_args, out=n_out, **n_kwargs)
        if not is_foreign(first):
            return result
        library = library_of(first)

        def back(value: Any) -> Any:
            if value is None:
                return None
            original = originals.get(id(value))
            if original is not None:
                return original
            if isinstance(value, np.generic):  # a 0-d result (NumPy's scalar): a 0-d tensor, as the library gives
                value = np.asarray(value)
            if value.dtype == BFLOAT16 and hasattr(library, "bfloat16"):  # its bits through DLPack, as it came in
                return library.from_dlpack(value.view(np.int16)).view(library.bfloat16)
            return library.from_dlpack(value)

        if isinstance(result, dict):
            return {k: back(r) for k, r in result.items()}
        if isinstance(result, (tuple, list)):
            return type(result)(back(r) for r in result)
        return back(result)
