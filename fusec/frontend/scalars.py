"""Runtime scalars: a Python or NumPy scalar argument traced as a value known only when the kernel runs.

While tracing, such an argument is a :class:`Scalar`: it carries the value of the call being traced (for
the rules that depend only on its *class*, see :func:`scalar_class`), the argument names it depends on, and
how to compute it again from a later call's arguments. Python arithmetic between scalars (``1 - b1 ** step``)
is replayed on the host at call time with Python's (or NumPy's) own semantics, so its result is exactly
what the eager function computes; only when a scalar meets a traced array does it become a graph input
(a 0-d ``input`` node after the array inputs, its value passed at launch). A Python ``int``/``float`` stays
weak (NEP 50: ``f32_array * lr`` stays float32), a NumPy scalar strong.

A use that needs the concrete value (``if step > 10``, ``range(n)``, ``axis=k``, ``x ** p``, ``int(s)``,
an attribute, printing) raises :class:`NeedsConcrete` naming the arguments involved; the caller traces again
with those arguments static (folded as constants, one trace per value).
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fusec.frontend.nodes import TracedArray
from fusec.ir import dtypes

INT_CLASSES = tuple(np.dtype(t) for t in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"))
_EXACT_INT = 2 ** 53  # Python ints beyond this convert to float differently from int64 (double rounding): static


class NeedsConcrete(Exception):  # noqa: N818 (a signal to the tracer's caller, not an error users see)
    """A runtime scalar was used where its value decides the trace: trace again with ``names`` static."""

    def __init__(self, names: frozenset[str], why: str):
        super().__init__(f"{why} needs the value of {', '.join(sorted(names))}")
        self.names = names
        self.why = why


def scalar_class(value: Any) -> tuple | None:
    """What the trace may depend on of a runtime scalar: its type, and for a Python int which integer
    dtypes it fits and its sign (NumPy's value-based rules: ``u8 + 300`` raises, ``u8 < 300`` is all True).
    None: the value cannot be a runtime scalar (a bool, a complex, an int beyond +-2**53)."""
    if isinstance(value, (bool, np.bool_)):
        return ("bool",)
    if isinstance(value, np.generic):
        if dtypes.kind(value.dtype) not in "iuf":
            return None
        return ("numpy", value.dtype.str)
    if isinstance(value, int):
        if abs(value) > _EXACT_INT:
            return None
        return ("int", tuple(dtypes.fits(value, dt) for dt in INT_CLASSES), value < 0)
    if isinstance(value, float):
        return ("float",)
    return None


def coarse_class(value: Any) -> tuple | None:
    """:func:`scalar_class` without what only value-based rules read (which integer dtypes a Python int fits, its
    sign): what a trace depends on when none of them read it (:func:`read_class`). A step counter crossing 127 or
    32767 then reuses its trace."""
    cls = scalar_class(value)
    return cls[:1] if cls is not None and cls[0] == "int" else cls


def is_runtime_candidate(value: Any) -> bool:
    """Whether an argument is made a runtime scalar unless static: a Python int or float or a NumPy
    integer or float scalar (not a bool), of a class :func:`scalar_class` accepts."""
    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(value, (int, float, np.integer, np.floating)) and scalar_class(value) is not None


def scalar_dtype(value: Any) -> np.dtype:
    """The dtype a runtime scalar's graph input has: bool, int64 or float64 for Python values (weak: they
    take the other operand's dtype through a cast), the scalar's own for a NumPy scalar."""
    if isinstance(value, (bool, np.bool_)):
        return dtypes.BOOL
    if isinstance(value, np.generic):
        return dtypes.as_dtype(value.dtype)
    return dtypes.as_dtype(np.int64 if isinstance(value, int) else np.float64)


class _Session(threading.local):
    """The trace in progress on this thread: where new graph inputs for scalars go."""

    def __init__(self) -> None:
        self.active = False
        self.first_index = 0
        self.scalars: list[Scalar] = []
        self.names: set[str] = set()  # input names taken
        self.make_input: Callable[[str, int, np.dtype], Any] | None = None
        self.class_read: set[str] = set()  # arguments whose class a value-based rule read (see read_class)


_session = _Session()


def begin(first_index: int, make_input: Callable[[str, int, np.dtype], Any], taken: set[str]) -> None:
    """Start collecting the scalar inputs of a trace; they take graph input indices from ``first_index``
    and names not in ``taken`` (the arguments' names)."""
    _session.active, _session.first_index, _session.scalars, _session.make_input = True, first_index, [], make_input
    _session.names = set(taken)
    _session.class_read = set()


def read_class(scalar: Scalar) -> None:
    """Note that a value-based rule read ``scalar``'s class (``u8_array + n`` checks that ``n`` fits uint8): the trace
    holds only for values of the same :func:`scalar_class` of the arguments it is computed from."""
    _session.class_read |= scalar.names


def classes_read() -> frozenset[str]:
    """The arguments whose class the trace in progress read (:func:`read_class`)."""
    return frozenset(_session.class_read)


def end() -> list[Scalar]:
    """Stop collecting; the scalars that became graph inputs, in index order."""
    scalars = _session.scalars
    _session.active, _session.scalars, _session.make_input = False, [], None
    return scalars


def _plain(value: Any) -> bool:
    return isinstance(value, (int, float, np.generic)) and not isinstance(value, complex)


class Scalar:
    """A Python or NumPy scalar whose value is known only at run time (see the module docstring)."""

    __slots__ = ("value", "names", "compute", "label", "node_", "cls", "direct")
    __array_priority__ = 500  # below a Tracer's: an array operand decides

    def __init__(self, value: Any, names: frozenset[str], compute: Callable[[Mapping[str, Any]], Any], label: str):
        self.value = value  # the value of the call being traced
        self.names = names  # the arguments it is computed from
        self.compute = compute  # its value from a call's arguments (by name)
        self.label = label
        self.node_: Any = None
        self.cls = scalar_class(value)
        self.direct = False  # an argument itself (its input is named after it), not computed from some

    @classmethod
    def argument(cls, name: str, value: Any) -> Scalar:
        scalar = cls(value, frozenset((name,)), operator.itemgetter(name), name)
        scalar.direct = True
        return scalar

    def node(self) -> Any:
        """The graph input that carries this scalar's value into the kernels (made on first use)."""
        if self.node_ is None:
            if self.cls is None or not _session.active:
                self.concrete("this value as a kernel parameter")
            index = _session.first_index + len(_session.scalars)
            label = getattr(self.label, "ident", self.label)  # a container's leaf: its identifier (values_0)
            label = label if label.isidentifier() else "s"
            if not self.direct or (label != self.label and label in _session.names):  # computed, or a leaf's taken
                label, k = f"{label}_1", 1
                while label in _session.names:
                    k += 1
                    label = f"{label.rsplit('_', 1)[0]}_{k}"
            _session.names.add(label)
            self.node_ = _session.make_input(label, index, scalar_dtype(self.value))
            _session.scalars.append(self)
        return self.node_

    def concrete(self, why: str) -> Any:
        raise NeedsConcrete(self.names, why)

    def __repr__(self) -> str:
        return f"Scalar({self.label}={self.value!r})"

    # -- arithmetic replayed on the host
    def _host(self, fn: Callable[..., Any], *operands: Any) -> Any:
        if not all(isinstance(o, Scalar) or _plain(o) for o in operands):
            return NotImplemented
        result = fn(*(o.value if isinstance(o, Scalar) else o for o in operands))
        if not _plain(result):
            return result
        names = frozenset().union(*(o.names for o in operands if isinstance(o, Scalar)))
        ops = tuple(operands)

        def compute(args: Mapping[str, Any]) -> Any:
            return fn(*(o.compute(args) if isinstance(o, Scalar) else o for o in ops))

        label = "_".join(o.label for o in operands if isinstance(o, Scalar))
        return Scalar(result, names, compute, label)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        for x in inputs:
            if isinstance(x, TracedArray):  # a traced array decides
                return x.__array_ufunc__(ufunc, method, *inputs, **kwargs)
        if method != "__call__" or kwargs or not all(isinstance(o, Scalar) or _plain(o) for o in inputs):
            return self.concrete(f"{getattr(ufunc, '__name__', ufunc)} of this value")
        return self._host(ufunc, *inputs)

    def __cupy_override_elementwise_kernel__(self, kernel: Any, *args: Any, **kwargs: Any) -> Any:
        for x in args:
            if isinstance(x, TracedArray):  # a traced array decides (its tracing of the kernel, as a ufunc)
                return x.__cupy_override_elementwise_kernel__(kernel, *args, **kwargs)
        return self.concrete(f"{getattr(kernel, '__name__', kernel)} of this value")

    # -- uses that need the value: the caller traces again with these arguments static
    def __bool__(self) -> bool:
        return self.concrete("Python control flow on this value")

    def __int__(self) -> int:
        return self.concrete("int()")

    def __float__(self) -> float:
        return self.concrete("float()")

    def __complex__(self) -> complex:
        return self.concrete("complex()")

    def __index__(self) -> int:
        return self.concrete("an index, size or axis")

    def __hash__(self) -> int:
        return self.concrete("hashing")

    def __str__(self) -> str:
        return self.concrete("str()")

    def __format__(self, spec: str) -> str:
        return self.concrete("formatting")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return self.concrete("converting it to an array")

    def __len__(self) -> int:
        return self.concrete("len()")

    def __iter__(self) -> Any:
        return self.concrete("iteration")

    def __getitem__(self, key: Any) -> Any:
        return self.concrete("indexing")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # protocol probes (__array_interface__, __dlpack__, ...): not an array
            raise AttributeError(name)
        return self.concrete(f"attribute .{name}")


def _binary(fn: Callable[[Any, Any], Any], reflected: bool = False) -> Callable[[Scalar, Any], Any]:
    if reflected:
        return lambda self, other: self._host(fn, other, self)
    return lambda self, other: self._host(fn, self, other)


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift"):
    _fn = getattr(operator, _name if _name not in ("and", "or") else f"{_name}_")
    setattr(Scalar, f"__{_name}__", _binary(_fn))
    setattr(Scalar, f"__r{_name}__", _binary(_fn, True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Scalar, f"__{_name}__", _binary(getattr(operator, _name)))
for _name, _fn in (("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs), ("invert", operator.invert),
                   ("floor", math.floor), ("ceil", math.ceil), ("trunc", math.trunc)):
    setattr(Scalar, f"__{_name}__", lambda self, _f=_fn: self._host(_f, self))
Scalar.__round__ = lambda self, ndigits=None: self._host(round, self) if ndigits is None else \
    self._host(round, self, ndigits)  # type: ignore[method-assign]
Scalar.__divmod__ = lambda self, other: (self // other, self % other)  # type: ignore[method-assign]
