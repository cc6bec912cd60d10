"""Checks of a call's arguments that the function updates in place (``x += v`` on an argument inside a fused
function, and assignments to part of one, ``x[:, k] = v``), before anything runs. What the call then writes into
them, during or after its kernels, is the runtime's (:mod:`fusec.runtime.write_backs`).
"""

from __future__ import annotations

from typing import Any

from fusec.frontend import arguments
from fusec.support.errors import FusecValueError


def check_updated(name: str, params: list[tuple[str, Any]], updates: tuple[int, ...], backend: str) -> None:
    """Before anything runs: each updated argument is writable and shares no memory with another argument."""
    arrays = [(n, v) for n, v in params if arguments.backend_of(v) is not None]
    xp = _array_module(backend)
    for i in updates:
        arg, array = arrays[i]
        if backend == "numpy" and not array.flags.writeable:
            raise FusecValueError(f"argument '{arg}' of {name} is read-only, but {name} updates it in place",
                                  hint=f"pass a writable array (a copy: {arg}.copy())")
        for j, (other, value) in enumerate(arrays):
            if j != i and xp.may_share_memory(array, value):
                raise FusecValueError(f"arguments '{arg}' and '{other}' of {name} share memory, and {name} updates "
                                      f"'{arg}' in place", hint="pass separate arrays (a copy of one)")


def _array_module(backend: str) -> Any:
    if backend == "cupy":
        import cupy

        return cupy
    import numpy

    return numpy
