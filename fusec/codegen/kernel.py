"""A region's kernel as :func:`fusec.kinds.generate` makes it: its schedule, its spec and its CUDA source
(:class:`GeneratedKernel`), with what the spec says about the memory it reads."""

from __future__ import annotations

from dataclasses import dataclass

from fusec.codegen.spec import KernelSpec
from fusec.ir.graph import Node
from fusec.schedule.base import Schedule
from fusec.schedule.contract import LaunchContract


@dataclass(frozen=True)
class GeneratedKernel:
    """A region's kernel: the schedule it runs with, its spec, and its complete CUDA source."""

    schedule: Schedule
    spec: KernelSpec
    source: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def contract(self) -> LaunchContract:
        """What the kernel needs of the arrays it is launched on (:mod:`fusec.schedule.contract`)."""
        assert self.spec.contract is not None
        return self.spec.contract

    def passes(self) -> dict[Node, int]:
        """How many times the kernel reads each input array from memory: once per loop that loads it (each
        phase of a reduction that re-reads its rows, then the epilogue), once in all where the rows sit in
        registers (read into them once), and once for what it reads per row, once per kernel, or at gathered
        positions."""
        spec = self.spec
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


__all__ = ["GeneratedKernel"]
