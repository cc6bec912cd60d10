"""fusec's errors.

Every error fusec raises is a :class:`FusecError`. Where NumPy itself would raise (a broadcast
mismatch, a bad axis, ``uint8 + 300``), the fusec error also derives from NumPy's class, so
``except ValueError:`` keeps working. Messages name the user's file and line when one is known,
say what went wrong, and say what to do instead.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., Any])
_FUSEC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # fusec/, above support/


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(os.path.abspath(spec.origin))


_SKIP_DIRS = tuple(
    d for d in (_FUSEC_DIR, os.path.dirname(os.path.abspath(np.__file__)), _package_dir("cupy"), _package_dir("cupyx"),
                _package_dir("scipy")) if d
)
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))  # functools, contextlib, ...: never the user's


def _skipped(filename: str) -> bool:
    if filename.startswith(("<frozen", "<__array_function__")):
        return True
    path = os.path.abspath(filename)
    return path.startswith(_SKIP_DIRS) or (path.startswith(_STDLIB_DIR + os.sep) and "-packages" not in path)


@functools.lru_cache(maxsize=4096)
def _library_file(filename: str, cwd: str) -> bool:
    """:func:`_skipped`, remembered per file name and working directory (a relative name depends on it): the
    tracer asks for every node it records."""
    return _skipped(filename)


def library_file(filename: str) -> bool:
    """Whether ``filename`` is fusec's, NumPy's, CuPy's, SciPy's or Python's own (never the user's)."""
    return _library_file(filename, os.getcwd())


_ENTRY_POINTS: set[types.CodeType] = set()  # fusec's own entry points (the command line's main)


def entry_point(fn: F) -> F:
    """Mark ``fn`` as an entry point of fusec: :func:`user_location` looks no further out than its frame (the
    console script that calls the command line's ``main`` is not the user's code)."""
    _ENTRY_POINTS.add(fn.__code__)  # type: ignore[attr-defined]
    return fn


def user_location() -> str | None:
    """The ``file:line`` of the innermost stack frame that is the user's (not fusec, NumPy, CuPy, nor
    Python's own library), looking no further out than an :func:`entry_point`."""
    cwd = os.getcwd()
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code in _ENTRY_POINTS:
            return None
        filename = frame.f_code.co_filename
        if not _library_file(filename, cwd) and not _generated_by_fusec(frame):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _generated_by_fusec(frame: types.FrameType) -> bool:
    """Whether ``frame`` runs code that one of fusec's modules generated with ``exec`` (a dataclass's
    ``__init__``, whose file is ``<string>``, like code the user runs with ``python -c``): its globals are that
    fusec module's."""
    name = frame.f_globals.get("__name__") or ""
    return frame.f_code.co_filename.startswith("<") and (name == "fusec" or name.startswith("fusec."))


class FusecError(Exception):
    """Base of every fusec error: a message, the user's ``file:line`` and a hint."""

    def __init__(self, message: str, *, loc: str | None = None, hint: str | None = None):
        if loc is None:
            loc = user_location()
        self.message = message
        self.loc = loc
        self.hint = hint
        text = f"{loc}: {message}" if loc else message
        if hint:
            text += f"\n  hint: {hint}"
        self._text = text
        Exception.__init__(self, text)

    def __str__(self) -> str:
        return self._text


class TraceError(FusecError):
    """A construct that cannot be traced (Python control flow on a traced value, ...)."""


class UnsupportedError(TraceError):
    """A function, method, argument or indexing form fusec does not support."""


class FusecAttributeError(UnsupportedError, AttributeError):
    """An attribute traced arrays do not have (``x.swapaxes``); an AttributeError, so ``hasattr`` works."""


class FusecTypeError(FusecError, TypeError):
    """A dtype with no matching loop, an unsupported dtype, a bad argument type."""


class FusecValueError(FusecError, ValueError):
    """A broadcast mismatch, an empty reduction without identity, a duplicate axis."""


class FusecAxisError(FusecError, np.exceptions.AxisError):
    """An axis out of range, as NumPy's ``AxisError``."""


class FusecIndexError(FusecError, IndexError):
    """An integer index out of range for its axis, as NumPy's ``IndexError``."""


class FusecOverflowError(FusecError, OverflowError):
    """A Python integer that does not fit the dtype it combines with (``uint8 + 300``)."""


class ParseError(FusecError, ValueError):
    """IR text that does not parse; the message names the line."""


class VerifyError(FusecError):
    """An IR graph that breaks a structural, shape or dtype rule."""
