"""The dispatch fast path: a repeat call with an argument layout seen before goes straight to the driver.

After a checked call, :class:`fusec.Fused` asks its :class:`fusec.runtime.executable.Executable`, which asks the
launcher, for a :class:`PlanRunner` for the exact layout of its arguments (shapes, strides, dtypes, alignment,
device). The runner holds every kernel of the plan resolved for that layout, so a repeat call only finds its
outputs and launches. Two things keep that under a few microseconds:

- **Pre-packed launches** (:class:`PackedLaunch`). A kernel's parameters are laid out once, each in a
  slot of its own (the array pointers first, then the frozen scalars, written when the runner is
  built), beside the array of slot addresses that ``cuLaunchKernel`` takes. A call writes the arrays'
  device pointers into their slots with one ``struct.pack_into`` and calls the driver through CuPy's
  binding of ``cuLaunchKernel``, skipping CuPy's per-call packing of each argument.
- **Library calls in line** (:attr:`PlanStep.call`). A GEMM's step calls its library function (CuPy's cuBLAS)
  directly on the runner's arrays: the checked path around it cost about 0.1 ms per call on the CPU (fake
  device arrays) and more on a GPU's host, which a small GEMM (a decode step's) does not hide.
- **Recycled small outputs** (:class:`OutputRecycler`). Allocating a ``cupy.ndarray`` costs 1.4-3 us
  on the H200's host, a third of a small call. A runner keeps the last two arrays it returned for each
  small output or intermediate (at most :data:`RECYCLE_MAX_BYTES` each, so at most 2 MiB per output of
  a layout) and hands one out again once nothing but the runner
  refers to it, nor to its memory: no view, no ``.data`` pointer, no DLPack capsule or
  ``__cuda_array_interface__`` consumer keeps a reference. That is exactly when CuPy's memory pool
  would have taken the memory back, so a recycled array is one the caller could not see any more.
  It is reused only on the stream its last kernel ran on, so stream order protects any work still
  queued on it, as CuPy's pool does.

Every launch of a runner is guarded by its kernel's launch contract (:mod:`fusec.schedule.contract`): before
the first launch that reads a caller's array, its pointer is tested against the alignment the kernel's vector
accesses need (``p & mask``, one test per mask over the OR of the pointers: tens of nanoseconds). Arrays that do
not meet it (a cache keyed wrongly would hand them over) launch nothing: the call takes the checked path
(``run_plan``), whose kernels are built for them. The runner's own arrays (outputs, intermediates) come fresh
from CuPy's pool, 512-byte aligned, and shapes and strides are fixed by the runner's key.

A runner serializes its own calls with a lock (its parameter block is shared), and is bound to the
device it was built on (the key of :class:`fusec.Fused`'s cache includes the current device).
"""

from __future__ import annotations

import struct
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.runtime.gpu import cupy_module
from fusec.runtime.results import pack_source

RECYCLE_MAX_BYTES = 1 << 20  # outputs up to this size are recycled; larger ones are not dispatch-bound
RECYCLE_KEPT = 2  # arrays kept per output: a loop `y = f(x)` holds the previous result during a call


class PackedLaunch:
    """One kernel's launch with its parameter block packed once: ``launch(stream, pointers)``.

    ``pointers`` are the device addresses of the kernel's leading pointer parameters (its arrays, then
    its workspace), in order; ``scalars`` (NumPy scalars of the exact C++ types) follow them and are
    written now."""

    def __init__(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                 n_pointers: int, scalars: tuple[Any, ...]):
        self.function = function  # kept alive: it owns the module the kernel lives in
        self.n_pointers = n_pointers
        sizes = [8] * n_pointers + [np.asarray(s).dtype.itemsize for s in scalars]
        offsets, end = [], 0
        for size in sizes:
            offsets.append(end)
            end += -(-size // 8) * 8  # each slot 8-byte aligned, as the driver reads any parameter
        self.block_bytes = np.zeros(max(end, 8) // 8, np.uint64)  # the parameters' values
        raw = self.block_bytes.view(np.uint8)
        for offset, s in zip(offsets[n_pointers:], scalars):
            data = np.asarray(s).tobytes()
            raw[offset:offset + len(data)] = np.frombuffer(data, np.uint8)
        base = self.block_bytes.ctypes.data
        self.addresses = np.array([base + o for o in offsets] or [0], np.uint64)  # the void** the driver takes
        self.write = struct.Struct(f"<{n_pointers}Q").pack_into  # write(block_bytes, 0, *pointers)
        from cupy_backends.cuda.api import driver

        self.driver = driver.launchKernel  # CuPy's binding of cuLaunchKernel
        self.constants = (int(function.ptr), *map(int, grid), *map(int, block), 0)  # ..., dynamic shared memory
        self.parameters = int(self.addresses.ctypes.data)

    def launch(self, stream: int, pointers: list[int]) -> None:
        self.write(self.block_bytes, 0, *pointers)
        self.driver(*self.constants, stream, self.parameters, 0)


class OutputRecycler:
    """The arrays one small output of a runner last returned, to hand out again once free (see the
    module docstring)."""

    __slots__ = ("shape", "dtype", "spares", "stream")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape = shape
        self.dtype = dtype
        self.spares: list[Any] = []
        self.stream: int | None = None

    def take(self, stream: int) -> Any:
        """A C-contiguous array of the output's shape and dtype that nothing outside refers to."""
        spares = self.spares
        if stream == self.stream:
            for a in spares:
                if _references(a) == _FREE:
                    return a
        else:  # arrays last written on another stream: not safe to reuse on this one
            spares.clear()
            self.stream = stream
        a = cupy_module().ndarray(self.shape, self.dtype)
        if len(spares) >= RECYCLE_KEPT:
            del spares[0]
        spares.append(a)
        return a


def _references(a: Any) -> tuple[int, int, int]:
    """How many references there are to an array, its memory pointer and the memory it points into."""
    data = a.data
    return sys.getrefcount(a), sys.getrefcount(data), sys.getrefcount(data.mem)


class _Stub:
    __slots__ = ("data", "mem")


def _free_references() -> tuple[int, int, int]:
    """What :func:`_references` gives for an array that only a recycler's list holds, measured on
    stand-ins in the same code shape as :meth:`OutputRecycler.take` (so the count of the
    interpreter's own temporary references, which differs between Python versions, cancels out)."""
    array, pointer = _Stub(), _Stub()
    pointer.mem = object()
    array.data = pointer
    spares = [array]
    del array, pointer
    for a in spares:
        return _references(a)
    raise AssertionError("unreachable")


_FREE = _free_references()


@dataclass(frozen=True)
class PlanStep:
    """One kernel of a :class:`PlanRunner`: where its array arguments are, and what it allocates."""

    launch: PackedLaunch | None  # None: an empty grid, nothing to launch
    in_slots: tuple[int, ...]  # value slots of its array inputs
    outputs: tuple[tuple[int, tuple[int, ...], np.dtype, OutputRecycler | None], ...]  # slot, shape, dtype
    workspace: Callable[[], Any] | None  # None, or a callable giving the zeroed scratch buffer of the current stream
    # its launch contract's alignment masks, one per array (inputs, then outputs): a pointer p fits when
    # p & mask == 0 (0: any address; fusec.schedule.contract.LaunchContract.masks)
    masks: tuple[int, ...] = ()
    # a library's call (a GEMM: fusec.codegen.kernel.LibraryCall) instead of a launch: call(inputs, outputs) with
    # the arrays of in_slots and of the outputs; it takes any strides, and the runner's key fixes shapes and dtypes
    call: Callable[[list[Any], list[Any]], None] | None = None


class PlanRunner:
    """Every kernel of a plan, resolved for one exact input layout: ``runner.run(arrays)`` gives the
    outputs, packed as ``structure`` and ``nones`` say (:func:`fusec.runtime.results.pack_results`): ``"list"`` (the
    default), ``"tuple"``, ``"single"`` (the first output alone) or ``"none"`` (None).

    ``run`` is a straight-line Python function generated for the plan (``runner.source`` shows it):
    value ``v<i>`` is the i-th input, then each kernel's outputs in order; per kernel it takes or
    allocates the outputs, writes the pointers into the packed parameter block and calls the driver
    with the grid, block and parameter addresses written in as constants. (A generic loop over the
    steps cost 1.5 us more per call than this on the H200's host.) :class:`fusec.Fused` calls ``run``
    itself, so a repeat call goes through two Python frames: its own ``__call__`` and ``run``."""

    def __init__(self, steps: tuple[PlanStep, ...], n_inputs: int, out_slots: tuple[int, ...], device: int,
                 structure: str = "list", checked_path: Callable[[Sequence[Any]], Any] | None = None,
                 nones: tuple[int, ...] = ()):
        self.steps = steps
        self.out_slots = out_slots
        self.device = device
        self.source, names = _runner_source(steps, n_inputs, out_slots, structure, nones)
        cp = cupy_module()
        names.update(lock=threading.Lock(), current_stream=cp.cuda.get_current_stream, new=cp.ndarray,
                     after_failure=self._after_failure, misfit=_MISFIT, Misfit=ContractMisfit,
                     checked_path=checked_path or self._no_checked_path)
        exec(compile(self.source, "<fusec dispatch>", "exec"), names)
        self.run = names["run"]
        self.run.runner = self  # (for inspection: Fused keeps only the function)

    def __call__(self, arrays: list[Any] | tuple[Any, ...]) -> Any:
        return self.run(arrays)

    @staticmethod
    def _no_checked_path(arrays: Any) -> Any:
        raise ContractMisfit("a kernel's launch contract does not take these arrays, and the runner has no checked "
                             "path to run instead")

    def _after_failure(self, exc: BaseException) -> None:
        """A failed run raises again, except in a thread that has not touched CUDA yet: it has no current
        context, so make the device's current (as CuPy's runtime calls do) and let ``run`` try once more
        (nothing was launched)."""
        if "CUDA_ERROR_INVALID_CONTEXT" not in str(exc):
            raise exc
        cupy_module().cuda.runtime.setDevice(self.device)


def _runner_source(steps: tuple[PlanStep, ...], n_inputs: int, out_slots: tuple[int, ...],
                   structure: str, nones: tuple[int, ...] = ()) -> tuple[str, dict[str, Any]]:
    """The source of a runner's ``run(arrays)`` and the names it refers to."""
    names: dict[str, Any] = {}
    body = []
    if n_inputs:
        body.append(f"{', '.join(f'v{i}' for i in range(n_inputs))}{',' if n_inputs == 1 else ''} = arrays")
    body += ["stream = current_stream().ptr", "with lock:"]
    fetched: set[int] = set()  # slots whose pointer p<slot> is taken already
    # slots a contract test checked already: arrays do not move during a call, and only the caller's are tested (what
    # the runner allocates itself, its outputs and intermediates, comes fresh from CuPy's pool: 512-byte aligned)
    tested: set[int] = set()
    for k, step in enumerate(steps):
        for slot, shape, dtype, recycler in step.outputs:
            if recycler is not None:
                names[f"take{slot}"] = recycler.take
                body.append(f"    v{slot} = take{slot}(stream)")
            else:
                names[f"shape{slot}"], names[f"dtype{slot}"] = shape, dtype
                body.append(f"    v{slot} = new(shape{slot}, dtype{slot})")
        if step.call is not None:
            names[f"call{k}"] = step.call
            ins, outs = ", ".join(f"v{i}" for i in step.in_slots), ", ".join(f"v{slot}" for slot, *_ in step.outputs)
            body.append(f"    call{k}([{ins}], [{outs}])")
            continue
        launch = step.launch
        if launch is None:
            continue
        slots = [*step.in_slots, *(slot for slot, *_ in step.outputs)]
        for slot in slots:
            if slot not in fetched:
                fetched.add(slot)
                body.append(f"    p{slot} = v{slot}.data.ptr")
        by_mask: dict[int, list[str]] = {}  # the caller's pointers each mask tests, each once per call
        for slot, mask in zip(slots, step.masks):
            if mask and slot < n_inputs and slot not in tested:
                tested.add(slot)
                by_mask.setdefault(mask, []).append(f"p{slot}")
        if by_mask:  # the launch contract, before the launch: a misaligned argument takes the checked path
            tests = [f"({' | '.join(ps)}) & {mask}" if len(ps) > 1 else f"{ps[0]} & {mask}"
                     for mask, ps in by_mask.items()]
            body.append(f"    if {' or '.join(tests)}:")
            body.append("        raise misfit")
        pointers = [f"p{slot}" for slot in slots]
        if step.workspace is not None:
            names[f"workspace{k}"] = step.workspace
            pointers.append(f"workspace{k}().data.ptr")
        names[f"write{k}"], names[f"block{k}"], names[f"launch{k}"] = launch.write, launch.block_bytes, launch.driver
        body.append(f"    write{k}(block{k}, 0, {', '.join(pointers)})")
        function, gx, gy, gz, bx, by, bz, shared = launch.constants
        body.append(f"    launch{k}({function}, {gx}, {gy}, {gz}, {bx}, {by}, {bz}, {shared}, stream, "
                    f"{launch.parameters}, 0)")
    if body[-1] == "with lock:":  # no kernel: a function that returns nothing it computes
        body.append("    pass")
    body.append("return " + pack_source([f"v{i}" for i in out_slots], structure, nones))
    lines = ["def run(arrays, retry=True):", "    try:", *("        " + line for line in body),
             "    except Misfit:", "        return checked_path(arrays)",
             "    except Exception as exc:", "        if not retry:", "            raise",
             "        after_failure(exc)", "        return run(arrays, False)"]
    return "\n".join(lines) + "\n", names


class ContractMisfit(Exception):
    """A runner's arrays do not meet a kernel's launch contract (its alignment): raised inside ``run`` before
    that launch, caught there, and the call takes the checked path instead."""


_MISFIT = ContractMisfit("a pointer is not aligned as its kernel's vector accesses need")


def recycler_for(shape: tuple[int, ...], dtype: np.dtype) -> OutputRecycler | None:
    """A recycler for an output of this shape and dtype, or None when it is too large to be worth it."""
    size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return OutputRecycler(shape, np.dtype(dtype)) if size <= RECYCLE_MAX_BYTES else None


__all__ = ["ContractMisfit", "OutputRecycler", "PackedLaunch", "PlanRunner", "PlanStep", "RECYCLE_KEPT",
           "RECYCLE_MAX_BYTES", "recycler_for"]
