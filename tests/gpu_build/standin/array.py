"""``cupy.ndarray`` of the host stand-in: a NumPy view (``host``) of a stand-in allocation (:mod:`.memory`).

What CuPy does, it does on the host: views are views of the same allocation (``a[1:].data.ptr`` is 4 bytes past
``a.data.ptr`` for float32), NumPy's ufuncs and functions work on it through ``__array_ufunc__`` and
``__array_function__`` (results that view an argument's bytes stay views of its allocation, others are fresh
allocations), and what CuPy refuses it refuses: an implicit conversion to NumPy (``numpy.asarray(a)``; use
``.get()`` or ``cupy.asnumpy``), and NumPy arrays mixed into its ufuncs. The class reports its module as ``cupy``,
as CuPy's does, so fusec takes it for a CuPy array.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from tests.gpu_build.standin.memory import Memory, MemoryPointer, owner_of


class ndarray(np.lib.mixins.NDArrayOperatorsMixin):  # noqa: N801 (CuPy's name)
    """A stand-in device array: ``host`` is the NumPy view of its bytes, ``memory`` the allocation."""

    __array_priority__ = 100.0

    def __init__(self, shape: Any, dtype: Any = float, memptr: MemoryPointer | None = None, strides: Any = None,
                 order: str = "C"):
        shape = (int(shape),) if isinstance(shape, numbers.Integral) else tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
        if memptr is None:
            memory = Memory(math.prod(shape) * dtype.itemsize)
            host = np.ndarray(shape, dtype, buffer=memory.bytes, order=order)
        else:  # a view at a pointer: NumPy refuses one that runs past the allocation's end
            memory = memptr.mem
            offset = memptr.ptr - memory.ptr
            if not math.prod(shape):  # an empty view may point anywhere (NumPy's empty arrays do), as in CuPy
                offset = min(max(offset, 0), memory.size)
            try:
                host = np.ndarray(shape, dtype, buffer=memory.bytes, offset=offset, strides=strides)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"a {dtype}{list(shape)} view at 0x{memptr.ptr:x} (strides {strides}) runs past "
                                 f"{memory!r}: {exc}") from None
        self._bind(host, memory)

    def _bind(self, host: np.ndarray, memory: Memory) -> None:
        self.host = host
        self.memory = memory

    @classmethod
    def view_of(cls, host: np.ndarray, memory: Memory) -> ndarray:
        """A stand-in array for ``host``, which views ``memory``'s bytes."""
        out = cls.__new__(cls)
        out._bind(host, memory)
        return out

    # ---- what CuPy arrays have ----------------------------------------------------------------------------
    shape = property(lambda self: self.host.shape)
    dtype = property(lambda self: self.host.dtype)
    strides = property(lambda self: self.host.strides)
    ndim = property(lambda self: self.host.ndim)
    size = property(lambda self: self.host.size)
    itemsize = property(lambda self: self.host.itemsize)
    nbytes = property(lambda self: self.host.nbytes)
    flags = property(lambda self: self.host.flags)
    T = property(lambda self: wrap(self.host.T))
    real = property(lambda self: wrap(self.host.real))
    imag = property(lambda self: wrap(self.host.imag))

    @property
    def data(self) -> MemoryPointer:
        return MemoryPointer(self.memory, self.host.__array_interface__["data"][0] - self.memory.ptr)

    @property
    def device(self) -> Any:
        from tests.gpu_build.standin.cuda import Device

        return Device(self.memory.device_id)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "descr": self.dtype.descr, "version": 3,
                "data": (self.data.ptr, False), "strides": None if self.flags.c_contiguous else self.strides}

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                        "NumPy array explicitly. (fusec's host stand-in for CuPy refuses it as CuPy does)")

    def get(self, stream: Any = None, order: str = "C", out: np.ndarray | None = None) -> np.ndarray:
        if out is not None:
            out[...] = self.host
            return out
        return np.array(self.host, order=order)

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        arr = np.asarray(arr)
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError(f"set: {arr.dtype}{arr.shape} into {self.dtype}{self.shape}")
        self.host[...] = arr

    def fill(self, value: Any) -> None:
        self.host.fill(value)

    def copy(self, order: str = "C") -> ndarray:
        return _fresh(np.array(self.host, order=order))

    def astype(self, dtype: Any, order: str = "K", casting: str | None = None, subok: Any = None,
               copy: bool = True) -> ndarray:
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return _fresh(self.host.astype(dtype, order=order, casting=casting or "unsafe"))

    def view(self, dtype: Any = None) -> ndarray:
        return wrap(self.host.view() if dtype is None else self.host.view(dtype))

    def reshape(self, *shape: Any, order: str = "C") -> ndarray:
        return wrap(self.host.reshape(*shape, order=order))

    def __getitem__(self, key: Any) -> Any:
        return wrap(self.host[unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self.host[unwrap(key)] = unwrap(value)

    def __len__(self) -> int:
        return len(self.host)

    def __iter__(self) -> Any:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self) -> bool:
        return bool(self.host)

    def __int__(self) -> int:
        return int(self.host)

    def __float__(self) -> float:
        return float(self.host)

    def __complex__(self) -> complex:
        return complex(self.host)

    def __index__(self) -> int:
        return self.host.__index__()

    def item(self) -> Any:
        return self.host.item()

    def tolist(self) -> Any:
        return self.host.tolist()

    def tobytes(self, order: str = "C") -> bytes:
        return self.host.tobytes(order)

    def __repr__(self) -> str:
        return repr(self.host)

    def __str__(self) -> str:
        return str(self.host)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, self.memory.device_id)  # kDLCUDA

    # ---- NumPy's protocols ----------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if not all(_operand(x) for x in inputs):
            return NotImplemented
        if any(isinstance(x, np.ndarray) and x.ndim for x in inputs):
            raise TypeError(f"Unsupported type {np.ndarray} (a NumPy array mixed into a CuPy ufunc, which CuPy "
                            "refuses)")
        out = kwargs.get("out")
        if out is not None:
            outs = out if isinstance(out, tuple) else (out,)
            if not all(isinstance(o, ndarray) for o in outs):
                raise TypeError("out= must be CuPy arrays")
            kwargs["out"] = tuple(o.host for o in outs)
        result = getattr(ufunc, method)(*unwrap(inputs), **kwargs)
        if out is not None:
            return out if isinstance(out, ndarray) or len(out) > 1 else out[0]
        return wrap(result)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if not all(issubclass(t, (ndarray, np.ndarray)) for t in types):
            return NotImplemented
        given = _arrays_in((args, kwargs))
        result = func(*unwrap(args), **unwrap(kwargs))
        return wrap(result, given)


# every method of CuPy's ndarray that NumPy's has too, run on the host (results wrapped)
_METHODS = ("all", "any", "argmax", "argmin", "argpartition", "argsort", "choose", "clip", "compress", "conj",
            "conjugate", "cumprod", "cumsum", "diagonal", "dot", "flatten", "max", "mean", "min", "nonzero",
            "partition", "prod", "ptp", "put", "ravel", "repeat", "round", "searchsorted", "sort", "squeeze", "std",
            "sum", "swapaxes", "take", "trace", "transpose", "var")


def _method(name: str) -> Any:
    def method(self: ndarray, *args: Any, **kwargs: Any) -> Any:
        given = _arrays_in((args, kwargs))
        given[id(self.host)] = self
        return wrap(getattr(self.host, name)(*unwrap(args), **unwrap(kwargs)), given)

    method.__name__ = name
    return method


for _name in _METHODS:
    if hasattr(np.ndarray, _name):
        setattr(ndarray, _name, _method(_name))
ndarray.__module__ = "cupy"  # as CuPy's own: fusec tells CuPy arrays by their class's module
ndarray.__qualname__ = ndarray.__name__ = "ndarray"


# ---- between the host and the stand-in ------------------------------------------------------------------------
def _operand(x: Any) -> bool:
    return isinstance(x, (ndarray, np.ndarray, np.generic, numbers.Number, bool))


def _fresh(host: np.ndarray) -> ndarray:
    """A new allocation holding ``host``'s values (C order unless ``host`` is Fortran-ordered)."""
    order = "F" if host.flags.f_contiguous and not host.flags.c_contiguous else "C"
    out = ndarray(host.shape, host.dtype, order=order)
    out.host[...] = host
    return out


def _arrays_in(value: Any) -> dict[int, ndarray]:
    """``{id(host): array}`` for the stand-in arrays in ``value`` (nested in lists, tuples and dicts)."""
    found: dict[int, ndarray] = {}

    def visit(v: Any) -> None:
        if isinstance(v, ndarray):
            found[id(v.host)] = v
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, Mapping):
            for x in v.values():
                visit(x)

    visit(value)
    return found


def unwrap(value: Any) -> Any:
    """``value`` with every stand-in array replaced by its host view (in lists, tuples, dicts and slices)."""
    if isinstance(value, ndarray):
        return value.host
    if isinstance(value, tuple):
        return tuple(unwrap(v) for v in value)
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    return value


def wrap(value: Any, given: Mapping[int, ndarray] | None = None) -> Any:
    """A host result as CuPy returns it: an argument returned itself (``out=``), a view of an allocation as a
    view of it, any other array or NumPy scalar as a fresh allocation (CuPy's reductions give 0-d arrays);
    tuples and lists element by element; anything else as it is."""
    if isinstance(value, np.ndarray):
        if given and id(value) in given:
            return given[id(value)]
        memory = owner_of(value)
        return ndarray.view_of(value, memory) if memory is not None else _fresh(value)
    if isinstance(value, np.generic):
        return _fresh(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(wrap(v, given) for v in value)
    if isinstance(value, list):
        return [wrap(v, given) for v in value]
    return value


def to_device(value: Any, dtype: Any = None, order: str = "K") -> ndarray:
    """``cupy.asarray``: a stand-in array as it is (or cast), anything else copied into a fresh allocation."""
    if isinstance(value, ndarray):
        return value if dtype is None or np.dtype(dtype) == value.dtype else value.astype(dtype)
    return _fresh(np.asarray(unwrap(value), dtype=dtype))  # (_fresh keeps a Fortran order, as order "K" does)


def to_host(value: Any, stream: Any = None, order: str = "C", out: np.ndarray | None = None) -> np.ndarray:
    """``cupy.asnumpy``."""
    if isinstance(value, ndarray):
        return value.get(order=order, out=out)
    host = np.asarray(value, order=order)
    if out is not None:
        out[...] = host
        return out
    return host
