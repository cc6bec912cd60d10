"""A region's kernel as :func:`fusec.kinds.generate` makes it: its schedule, its spec and its CUDA source
(:class:`GeneratedKernel`), with what the spec says about the memory it reads; or, for a kind whose kernel is a
library's (a GEMM), the call that computes it (:class:`LibraryCall`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fusec.codegen.spec import KernelSpec
from fusec.ir.graph import Node
from fusec.schedule.base import Schedule
from fusec.schedule.contract import LaunchContract
from fusec.support.errors import FusecValueError


@dataclass(frozen=True)
class LibraryCall:
    """A kernel that is a library's function, not generated CUDA (:meth:`fusec.kinds.kind.KernelKind.library`):
    ``run(xp, inputs, outputs)`` computes the region from its input arrays (one per ``inputs`` node, in the
    namespace ``xp``: CuPy on the GPU) into ``outputs`` (one array per ``outputs`` node, preallocated, any layout);
    ``summary`` says what it calls, for ``explain`` and ``cuda_source``. Its launch contract is the shapes and dtypes
    of its arrays (:meth:`violation`): the library takes any strides."""

    name: str
    summary: str
    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    run: Callable[[Any, list[Any], list[Any]], None] = field(compare=False, repr=False)

    @property
    def source(self) -> str:
        """What ``cuda_source`` shows for it: a comment line naming the call (there is no CUDA to compile)."""
        return f"// {self.name}: {self.summary}\n"

    def violation(self, arrays: Sequence[Any], outs: Sequence[Any]) -> str | None:
        """Why ``arrays`` (inputs) and ``outs`` do not fit the call's shapes and dtypes, or None."""
        for what, nodes, values in (("input", self.inputs, arrays), ("output", self.outputs, outs)):
            if len(nodes) != len(values):
                return f"{len(values)} {what} arrays for {len(nodes)}"
            for node, a in zip(nodes, values):
                if tuple(a.shape) != node.shape or a.dtype != node.dtype:
                    return f"an {what} is {a.dtype}{list(a.shape)}, the call takes {node.dtype}{list(node.shape)}"
        return None

    def check(self, arrays: Sequence[Any], outs: Sequence[Any]) -> None:
        """A FusecValueError (fusec's own bug) where :meth:`violation` finds one."""
        problem = self.violation(arrays, outs)
        if problem is not None:
            raise FusecValueError(f"{self.name}: {problem}", hint="this is a bug in fusec: please report it")


@dataclass(frozen=True)
class GeneratedKernel:
    """A region's kernel: the schedule it runs with, its spec, and its complete CUDA source; for a library's kernel
    (``library``), no spec, and the source is the comment naming the call."""

    schedule: Schedule
    spec: KernelSpec | None
    source: str
    library: LibraryCall | None = None

    @property
    def name(self) -> str:
        if self.library is not None:
            return self.library.name
        assert self.spec is not None
        return self.spec.name

    @property
    def contract(self) -> LaunchContract:
        """What the kernel needs of the arrays it is launched on (:mod:`fusec.schedule.contract`)."""
        assert self.spec is not None and self.spec.contract is not None
        return self.spec.contract

    def passes(self) -> dict[Node, int]:
        """How many times the kernel reads each input array from memory: once per loop that loads it (each
        phase of a reduction that re-reads its rows, then the epilogue), once in all where the rows sit in
        registers (read into them once), and once for what it reads per row, once per kernel, or at gathered
        positions."""
        if self.library is not None:  # a library reads each input once, as far as fusec can tell
            return dict.fromkeys(self.library.inputs, 1)
        spec = self.spec
        assert spec is not None
        count = {f"in{k}": 0 for k in range(len(spec.inputs))}
        if spec.held:
            loops: list[tuple] = [spec.held]
        else:
            loops = [ph.loads for ph in spec.phases] + [spec.epilogue_loads]
        for loads in loops:
            for pointer in {_array(a.pointer) for a in loads if _array(a.pointer) in count}:
                count[pointer] += 1
        for a in (*spec.uniform_loads, *spec.row_loads):
            if _array(a.pointer) in count and count[_array(a.pointer)] == 0:
                count[_array(a.pointer)] = 1
        for pointer in spec.gathered:  # a gather reads its elements once
            count[pointer] = max(count[pointer], 1)
        return {node: count[f"in{k}"] for k, node in enumerate(spec.inputs)}

    def bytes_read(self) -> int:
        """The bytes the kernel reads from memory: each input's size times its :meth:`passes`."""
        return sum(node.nbytes * n for node, n in self.passes().items())


def _array(pointer: str | None) -> str | None:
    """The array parameter an access reads: ``in0`` for ``in0`` and for a view of it, ``in0_ld3``."""
    return pointer.partition("_")[0] if pointer is not None else None


__all__ = ["GeneratedKernel", "LibraryCall"]
