"""The registry: the NumPy (CuPy, SciPy) functions fusec traces, by the name the user's call reaches them by.

A traced call finds its implementation here by name: ``np.cumsum(x)`` through ``Tracer.__array_function__``
(the function's name; ``linalg.norm`` for a NumPy submodule's, see :func:`name_of`), ``cupy.cumsum(x)`` and
``scipy.special.softmax(x)`` through the wrappers tracing puts in their modules
(:func:`fusec.frontend.trace.wrapped_functions`), a ufunc traced into several ops (``np.logaddexp``) by its
``__name__``. Each function module registers its implementations where it defines them::

    @implements("cumsum")
    def cumsum(a, axis=None, dtype=None, out=None, **kwargs): ...

and :mod:`fusec.frontend.trace` imports every function module once, so that all are registered before anything
is traced. A name is registered once (a second registration is an error).

Nothing calls an implementation by a name it spells: a function module imports the implementations it builds on
from the module that defines them, and a method of :class:`fusec.frontend.tracer.Tracer` that is a NumPy function
of the array (``x.ravel()``, ``x @ y``) names that NumPy function (:func:`implementation` of ``np.ravel``): the
tracer sits below the function modules, which build on it, so it reaches them only through this table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# name -> the function tracing a call of it: NumPy's names (``linalg.norm`` for a submodule's), which CuPy's
# functions share, and SciPy's special functions by their own (``logsumexp``)
FUNCTIONS: dict[str, Callable[..., Any]] = {}
# ufunc name -> the function tracing it into several IR ops (a ufunc that is one op is the op table's)
UFUNCS: dict[str, Callable[..., Any]] = {}
# the functions that make an array from numbers alone (``np.arange``, ``np.zeros``), in registration order: a call
# from the traced function's own code makes a traced array instead of a concrete one
# (fusec.frontend.trace.created_functions)
CREATORS: list[str] = []


def _register(table: dict[str, Callable[..., Any]], names: tuple[str, ...], fn: Callable[..., Any]) -> None:
    for name in names:
        if name in table:
            raise ValueError(f"{name} is registered twice: {table[name].__qualname__} and {fn.__qualname__}")
        table[name] = fn


def implements(*names: str, creates: bool = False) -> Callable[[F], F]:
    """Register the decorated function as the implementation of the functions called ``names``; ``creates``: they
    make an array from numbers alone (:data:`CREATORS`)."""
    def register(fn: F) -> F:
        _register(FUNCTIONS, names, fn)
        if creates:
            CREATORS.extend(names)
        return fn

    return register


def implements_ufunc(*names: str) -> Callable[[F], F]:
    """Register the decorated function as the tracing of the ufuncs called ``names`` (into several IR ops)."""
    def register(fn: F) -> F:
        _register(UFUNCS, names, fn)
        return fn

    return register


ORIGINAL = "_fusec_original"  # the attribute of tracing's wrapper of a library function that holds the function


def numpy_module(function: Any) -> str:
    """The module users call ``function`` from: ``numpy`` for NumPy's own (``numpy._core.fromnumeric`` too),
    ``numpy.linalg`` for ``np.linalg.norm``."""
    module = getattr(function, "__module__", None) or "numpy"
    return "numpy" if module.startswith("numpy._") else module


def name_of(function: Any) -> str:
    """The name ``function`` (a NumPy function) is registered under: its ``__name__``, after its submodule for a
    NumPy submodule's (``linalg.norm``); NumPy's own function for tracing's wrapper of it (:data:`ORIGINAL`)."""
    function = getattr(function, ORIGINAL, function)
    module = numpy_module(function)
    return function.__name__ if module == "numpy" else f"{module.removeprefix('numpy.')}.{function.__name__}"


def implementation(function: Callable[..., Any]) -> Callable[..., Any]:
    """The implementation of NumPy's ``function`` (``np.ravel``)."""
    return FUNCTIONS[name_of(function)]


__all__ = ["CREATORS", "FUNCTIONS", "UFUNCS", "implementation", "implements", "implements_ufunc", "name_of",
           "numpy_module"]
