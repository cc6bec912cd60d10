"""Why a fused function traced again, and the recompile limit.

A :class:`fusec.Fused` traces once per signature (:meth:`fusec.Fused._key`: per argument its kind, dtype and
shape class, or a Python number's value). When a call's signature is new and the function has traced before,
:meth:`RecompileTracker.traced` compares it with the nearest earlier signature and names each argument that
changed and how (:data:`REASONS`), logs it (``FUSEC_LOG=trace`` / ``recompile``), counts it, and once the
function has traced again ``limit`` times (:func:`recompile_limit`: ``FUSEC_RECOMPILE_LIMIT``, default 8 as
torch.compile's ``recompile_limit``) warns once with :class:`RecompileWarning`, the reasons and the way out.

Reasons are data: a new reason kind is one line of :data:`REASONS` (and, for a new kind of signature entry,
one line of :data:`_ENTRY_KIND`).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.frontend.scalars import INT_CLASSES
from fusec.support import counters, logs
from fusec.support.errors import library_file

DEFAULT_LIMIT = 8

# reason kind -> (what changed, the way out shown when the limit is reached)
REASONS: dict[str, tuple[str, str]] = {
    "shape": ("shape class", "a dimension of size 0 or 1 broadcasts, so it is part of the signature: keep such "
                             "sizes out of the dimensions that vary"),
    "dtype": ("dtype", "cast the arguments to one dtype before the call"),
    "scalar": ("scalar value", "this number is static (named in static_argnames/static_argnums, or its value "
                               "decides the trace: an axis, a shape, an exponent, control flow, int()/float()): "
                               "keep such uses out of numbers that change from call to call"),
    "scalar_class": ("scalar type", "a runtime number's type changed (int or float, NumPy dtype, or for a Python int "
                                    "the dtypes it fits and its sign): pass the same kind of number on every call"),
    "layout": ("layout", "pass arrays of one layout (numpy.ascontiguousarray / cupy.ascontiguousarray)"),
    "kind": ("argument kind", "pass each argument as the same kind (array or number) on every call"),
    "arity": ("number of arguments", "call the function with the same number of arguments"),
    "evicted": ("signature evicted", "fewer distinct signatures: a function keeps its latest 64 traces"),
    "size": ("size read", "the function reads an array's size as a Python int (x.shape[0], len(x)), so each "
                          "size traces again: compute with the array instead"),
}
# the tag of a signature entry (its first item) -> the reason kind of a change in it; arrays are compared
# field by field (dtype, shape class, anything further is layout)
_ENTRY_KIND = {"value": "scalar", "scalar": "scalar_class"}


class RecompileWarning(UserWarning):
    """A fused function traced again more often than the recompile limit (``FUSEC_RECOMPILE_LIMIT``)."""


@dataclass(frozen=True)
class Reason:
    kind: str  # a key of REASONS
    text: str

    def __str__(self) -> str:
        return self.text


def recompile_limit() -> int:
    """``FUSEC_RECOMPILE_LIMIT`` (a non-negative integer; 0 turns the warning off), default 8."""
    text = os.environ.get("FUSEC_RECOMPILE_LIMIT", "")
    try:
        return max(0, int(text)) if text else DEFAULT_LIMIT
    except ValueError:
        return DEFAULT_LIMIT


def show_entry(entry: tuple) -> str:
    """One signature entry as a user reads it: ``f32[n,1]``, ``scalar 0.5``."""
    if entry[0] == "array":
        dims = ",".join("n" if d == -1 else str(d) for d in entry[2])
        return f"{np.dtype(entry[1]).name}[{dims}]"
    if entry[0] == "value":
        return f"scalar {_show_scalar(entry[1])}"
    if entry[0] == "scalar":  # a runtime scalar: its class, (kind, ...) of fusec.frontend.scalars.scalar_class
        cls = entry[1]
        if cls and cls[0] == "numpy":
            return f"runtime {np.dtype(cls[1]).name}"
        if cls and cls[0] == "int":
            if len(cls) < 3:  # the coarse class: any int (no value-based rule read it)
                return "runtime int"
            fitting = [dt.name for dt, fits in zip(INT_CLASSES, cls[1]) if fits]
            return "runtime int" + (" < 0" if cls[2] else " >= 0") + (f" fitting {fitting[0]}" if fitting else "")
        return f"runtime {cls[0] if cls else 'number'}"
    return " ".join(str(x) for x in entry)


def _show_scalar(key: Any) -> str:
    if key == ("nan",):
        return "nan"
    if len(key) == 3 and key[0] is float:
        return repr(key[1])
    if len(key) == 2 and isinstance(key[1], bytes):
        return f"{np.dtype(key[0]).name}({np.frombuffer(key[1], dtype=key[0])[0]!r})"
    return repr(key[-1])


def entry_reasons(name: str, old: tuple, new: tuple) -> list[Reason]:
    """How argument ``name``'s signature entry changed from ``old`` to ``new`` (empty if it did not)."""
    if old == new:
        return []
    where = f"argument '{name}'"
    if old[0] != new[0]:
        return [Reason("kind", f"{where}: {show_entry(old)} -> {show_entry(new)}")]
    if old[0] == "array":
        out = []
        if old[1] != new[1]:
            out.append(Reason("dtype", f"{where}: dtype {np.dtype(old[1]).name} -> {np.dtype(new[1]).name}"))
        if old[2] != new[2]:
            out.append(Reason("shape", f"{where}: shape class {show_entry(old)} -> {show_entry(new)} "
                                       "(sizes 0 and 1 are their own class, n is any other)"))
        if old[3:] != new[3:]:
            out.append(Reason("layout", f"{where}: layout {old[3:]} -> {new[3:]}"))
        return out
    kind = _ENTRY_KIND.get(old[0], "kind")
    return [Reason(kind, f"{where}: {REASONS[kind][0]} {show_entry(old).removeprefix('scalar ')} -> "
                         f"{show_entry(new).removeprefix('scalar ')}")]


def key_reasons(names: Sequence[str], old: tuple, new: tuple) -> list[Reason]:
    """Why signature ``new`` (one entry per argument, named ``names``) is not ``old``."""
    if len(old) != len(new):
        return [Reason("arity", f"{len(old)} argument(s) -> {len(new)}")]
    return [r for name, a, b in zip(names, old, new) for r in entry_reasons(name, a, b)]


def nearest(names: Sequence[str], earlier: Sequence[tuple], new: tuple) -> tuple | None:
    """The earlier signature most like ``new`` (the fewest reasons apart; the latest of equals), or None."""
    best, fewest = None, None
    for key in earlier:
        apart = len(key_reasons(names, key, new))
        if fewest is None or apart <= fewest:
            best, fewest = key, apart
    return best


def signature_text(fn_name: str, names: Sequence[str], key: tuple) -> str:
    return f"{fn_name}(" + ", ".join(f"{n}: {show_entry(e)}" for n, e in zip(names, key)) + ")"


class RecompileTracker:
    """One fused function's traces: logs each, counts it, and warns once past the recompile limit."""

    def __init__(self, fn_name: str, counts: counters.Counters):
        self.fn_name = fn_name
        self.counts = counts
        self.traces = 0
        self.reasons: list[Reason] = []  # every retrace's, in order
        self.warned = False
        self._lock = threading.Lock()

    def traced(self, names: Sequence[str], key: tuple, earlier: Sequence[tuple], seconds: float,
               size_read: bool = False) -> list[Reason]:
        """Record a trace of signature ``key`` (``earlier``: the signatures already traced; ``size_read``:
        the same signature traced again because the function read a size). Returns why it was not reused."""
        with self._lock:
            self.traces += 1
            first = self.traces == 1
        with counters.charging(self.counts):
            counters.count("traces")
            if not first:
                counters.count("retraces")
        if size_read:
            why = [Reason("size", "the function read an array's size as a Python int and the shapes changed")]
        else:
            old = nearest(names, earlier, key)
            why = key_reasons(names, old, key) if old is not None else []
        if first:
            why = []
        elif not why:
            why = [Reason("evicted", "the same signature was traced before and dropped from the cache")]
        signature = signature_text(self.fn_name, names, key)
        if logs.on("trace"):
            because = "first trace" if first else "not reused: " + "; ".join(map(str, why))
            logs.emit("trace", "traced %s in %.3f s (%s)", signature, seconds, because)
        if first:
            return why
        if logs.on("recompile"):
            logs.emit("recompile", "%s traced again (trace %d): %s", self.fn_name, self.traces,
                      "; ".join(map(str, why)) or "new signature")
        with self._lock:
            self.reasons.extend(why)
            limit = recompile_limit()
            fire = limit > 0 and not self.warned and self.traces - 1 >= limit
            if fire:
                self.warned = True
        if fire:
            self._warn(limit)
        return why

    def _warn(self, limit: int) -> None:
        recent = self.reasons[-3:]
        kinds = list(dict.fromkeys(r.kind for r in self.reasons))
        ways = "; ".join(REASONS[k][1] for k in kinds)
        message = (f"fusec: {self.fn_name} has traced {self.traces} times, {self.traces - 1} after its first "
                   f"(the recompile limit is {limit}); each new signature traces, plans and compiles again. "
                   f"Latest reasons: {'; '.join(map(str, recent))}. Way out: {ways}. FUSEC_LOG=recompile logs "
                   "every retrace; FUSEC_RECOMPILE_LIMIT=N changes the limit (0: no warning).")
        warnings.warn(message, RecompileWarning, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """The ``stacklevel`` for :func:`warnings.warn` called from the caller of this function that points at
    the user's innermost frame (not fusec's, NumPy's or Python's)."""
    frame = sys._getframe(2)
    level = 2
    while frame is not None and library_file(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return level if frame is not None else 2



__all__ = ["DEFAULT_LIMIT", "REASONS", "Reason", "RecompileTracker", "RecompileWarning", "entry_reasons",
           "key_reasons", "recompile_limit"]
