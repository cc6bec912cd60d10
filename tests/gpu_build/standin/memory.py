"""Device memory of the host stand-in for CuPy: each allocation is host bytes at a 256-byte aligned address, and
that address is the allocation's "device pointer" (``.data.ptr``), so views keep CuPy's offsets and alignments.

Every live allocation is registered twice: by the NumPy array that owns its bytes (so a NumPy result computed
from a stand-in array's bytes is recognised as a view of that allocation) and by address (so a raw pointer, as
``memsetAsync`` or a kernel's error word gets it, finds its allocation; a pointer into no allocation, or a range
past its end, is an error, as it would be a fault on a GPU).
"""

from __future__ import annotations

import bisect
import collections
import threading
import weakref

import numpy as np

ALIGNMENT = 256  # CuPy's pool hands out 512-byte aligned blocks; 256 is what kernels may rely on


class Memory:
    """One allocation: ``size`` bytes at address ``ptr`` (``bytes`` is the NumPy view of them)."""

    def __init__(self, size: int):
        self.size = int(size)
        raw = np.empty(self.size + ALIGNMENT, np.uint8)
        start = (-raw.ctypes.data) % ALIGNMENT
        self._raw = raw
        self.bytes = raw[start:start + self.size]
        self.ptr = raw.ctypes.data + start
        self.device_id = 0
        _register(self)

    def __repr__(self) -> str:
        return f"<stand-in device memory {self.size} B at 0x{self.ptr:x}>"


class MemoryPointer:
    """A pointer into an allocation, as ``cupy.cuda.MemoryPointer``: ``mem``, ``ptr``, and ``+ offset``."""

    __slots__ = ("mem", "ptr", "device_id", "__weakref__")

    def __init__(self, mem: Memory, offset: int):
        self.mem = mem
        self.ptr = mem.ptr + int(offset)
        self.device_id = mem.device_id

    def __add__(self, offset: int) -> MemoryPointer:
        return MemoryPointer(self.mem, self.ptr - self.mem.ptr + int(offset))

    def __sub__(self, offset: int) -> MemoryPointer:
        return self + (-int(offset))

    def __int__(self) -> int:
        return self.ptr

    def __repr__(self) -> str:
        return f"<stand-in MemoryPointer 0x{self.ptr:x} into {self.mem!r}>"


# ---- the registry --------------------------------------------------------------------------------------------
_LOCK = threading.Lock()
_BY_OWNER: dict[int, weakref.ref[Memory]] = {}  # id of the NumPy array owning the bytes -> allocation
_STARTS: list[int] = []  # sorted start addresses of live allocations
_BY_START: dict[int, weakref.ref[Memory]] = {}
_DEAD: collections.deque[tuple[int, int]] = collections.deque()  # (owner, start) of allocations gone since


def _purge() -> None:
    """Forget the allocations gone since the last call (under the lock). A dead allocation's weakref callback only
    queues it: the collector may run it anywhere, the lock's holder included."""
    while _DEAD:
        owner, start = _DEAD.popleft()
        if _BY_START.get(start) is not None and _BY_START[start]() is None:
            del _BY_START[start]
            del _STARTS[bisect.bisect_left(_STARTS, start)]
        if _BY_OWNER.get(owner) is not None and _BY_OWNER[owner]() is None:
            del _BY_OWNER[owner]


def _register(mem: Memory) -> None:
    key = (id(mem._raw), mem.ptr)
    ref = weakref.ref(mem, lambda _: _DEAD.append(key))
    with _LOCK:
        _purge()
        _BY_OWNER[id(mem._raw)] = ref
        if mem.ptr not in _BY_START:
            bisect.insort(_STARTS, mem.ptr)
        _BY_START[mem.ptr] = ref


def owner_of(host: np.ndarray) -> Memory | None:
    """The allocation whose bytes ``host`` views, or None when ``host`` is memory of its own."""
    base = host
    while isinstance(base.base, np.ndarray):
        base = base.base
    ref = _BY_OWNER.get(id(base))
    return ref() if ref is not None else None


def at(ptr: int, nbytes: int) -> tuple[Memory, int]:
    """The allocation holding the ``nbytes`` bytes at address ``ptr``, and ``ptr``'s offset into it; raises
    ``ValueError`` for an address in no allocation or a range past the end of its allocation."""
    with _LOCK:
        _purge()
        k = bisect.bisect_right(_STARTS, ptr) - 1
        mem = _BY_START[_STARTS[k]]() if k >= 0 else None
    if mem is None or not mem.ptr <= ptr <= mem.ptr + mem.size:
        raise ValueError(f"0x{ptr:x} points into no allocation of the stand-in device")
    offset = ptr - mem.ptr
    if nbytes < 0 or offset + nbytes > mem.size:
        raise ValueError(f"{nbytes} bytes at 0x{ptr:x} run past the end of {mem!r}")
    return mem, offset
