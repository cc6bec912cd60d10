"""What a Python frame is calling right now: the name its current call instruction calls (:func:`called_name`).

While a function traces, fusec wraps NumPy's array creators (``np.empty``, ``np.arange``, ...) to return traced
arrays to the traced code. Compiled code (NumPy's own Cython, ``np.random.rand``'s) calls the same module attributes
but runs no Python frame of its own, so the innermost Python frame is still the user's: the name the user's call
instruction calls tells the two apart (``np.empty(3)`` calls ``empty``; ``np.random.rand(3)`` calls ``rand``, whose
compiled body then calls ``np.empty`` and must get a real array: a traced one crashed the interpreter).
"""

from __future__ import annotations

import dis
import types

# instructions that load the callable (or the last step of its dotted name) onto the stack
_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_CLOSURE",
                    "LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR", "LOAD_FAST_LOAD_FAST", "LOAD_FROM_DICT_OR_DEREF",
                    "LOAD_FROM_DICT_OR_GLOBALS"})
_cache: dict[tuple[types.CodeType, int], str | None] = {}


def called_name(frame: types.FrameType) -> str | None:
    """The name ``frame``'s current call instruction calls (``rand`` for ``np.random.rand(8)``, ``g`` for ``g(3)``),
    or None where it cannot tell (no call there, a callee that is no name such as ``fns[0](x)``, a Python without
    instruction positions)."""
    key = (frame.f_code, frame.f_lasti)
    if key not in _cache:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = _called_name(frame.f_code, frame.f_lasti)
    return _cache[key]


def _called_name(code: types.CodeType, offset: int) -> str | None:
    instructions = list(dis.get_instructions(code))
    at = next((k for k, ins in enumerate(instructions) if ins.offset == offset), None)
    if at is None or not instructions[at].opname.startswith("CALL"):
        return None
    call = getattr(instructions[at], "positions", None)
    if call is None or call.lineno is None or call.col_offset is None:
        return None
    start, end = (call.lineno, call.col_offset), (call.end_lineno, call.end_col_offset)
    callee, reach = None, None
    for ins in instructions[:at]:  # the callee: the load spanning the most of the call's text from its start
        pos = ins.positions
        if ins.opname not in _LOADS or pos is None or (pos.lineno, pos.col_offset) != start:
            continue
        ends = (pos.end_lineno, pos.end_col_offset)
        if ends < end and (reach is None or ends > reach):
            callee, reach = ins, ends
    if callee is None or not isinstance(callee.argval, str):
        return None
    return callee.argval
