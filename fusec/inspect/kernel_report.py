"""Readable inspections: ``cuda_source`` as shown, and ``ptxas`` as structured rows.

:func:`folded_source` shows each kernel's source: the lines that include its helper headers (plain files in
``templates/``, read by NVRTC), then its body with the accumulator namespace a reduction kernel starts with
(one struct per phase, its identity and its combine: ~11 lines a phase) folded into a note and one line per
phase, which says how many lines it stands for and that ``full=True`` (``--full``) shows them; ``full=True``
callers get the exact translation unit instead, headers inlined (:func:`fusec.codegen.render.inline_headers`).
The folding is for display only: the compiled source is the renderer's text, untouched.

:class:`PtxasReport` is what ``Fused.ptxas`` returns: one :class:`PtxasRow` per kernel (registers, spills,
stack, shared memory, threads per block and the blocks and occupancy per SM these allow), printed as a table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fusec.codegen.render import split_source
from fusec.schedule.device import H200, DeviceProperties

FULL_HINT = "full=True or --full shows them"


def fold_accumulators(lines: list[str], spec) -> list[str]:
    """``lines`` with the namespace ``<kernel>_acc`` (the accumulator types of ``spec.phases``) folded into a
    note and one line per phase: its struct's fields with their identities, and its combine."""
    begin, end = f"namespace {spec.name}_acc {{", f"}}  // namespace {spec.name}_acc"
    phases = getattr(spec, "phases", ())
    if begin not in lines or end not in lines or not phases:
        return lines
    first = lines.index(begin)
    last = lines.index(end, first)
    summary = [f"// namespace {spec.name}_acc: each phase's accumulator, its identity and its combine "
               f"({last - first + 1} lines folded; {FULL_HINT})"]
    for ph in phases:
        fields = " ".join(f"{f.ctype} {f.name} = {f.identity};" for f in ph.fields)
        combine = "; ".join(f"a.{f.name} = {f.combine}" for f in ph.fields)
        summary.append(f"//   {ph.acc_type} {{ {fields} }}  combine: {combine}")
    return lines[:first] + summary + lines[last + 1:]


def shown_source(kernel: Any) -> str:
    """``kernel``'s source (a :class:`fusec.codegen.kernel.GeneratedKernel`) as ``cuda_source`` shows it: its
    include lines as they are, its body with the accumulator types folded into a note; a library's call as its
    comment line."""
    if kernel.library is not None:
        return kernel.source
    block, body = split_source(kernel.source)
    return block + shown_body(kernel.spec, body)


def shown_body(spec: Any, body: str) -> str:
    """``body`` (the rendered kernel of ``spec``, its include lines aside) as shown: the accumulators folded."""
    return "\n".join(fold_accumulators(body.splitlines(), spec)) + "\n"


def folded_source(kernels: Iterable[Any]) -> str:
    """Each generated kernel (:class:`fusec.codegen.kernel.GeneratedKernel`) as :func:`shown_source` shows it."""
    return "\n".join(shown_source(k) for k in kernels)


@dataclass(frozen=True)
class PtxasRow:
    """ptxas's report of one kernel, with the residency it allows on ``device``."""

    kernel: str
    arch: str
    registers: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    shared_memory: int  # static __shared__ bytes per block
    threads: int  # per block
    blocks_per_sm: int
    occupancy: float  # resident warps / the SM's maximum, 0..1

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


def blocks_per_sm(registers: int, shared_memory: int, threads: int, device: DeviceProperties = H200) -> int:
    """Blocks of ``threads`` threads resident per SM, limited by registers (allocated per warp in units of
    256), shared memory (1 KiB reserved per block), threads and 32 blocks."""
    warps = -(-threads // device.warp_size)
    regs_per_warp = -(-max(registers, 1) * device.warp_size // 256) * 256
    by_regs = device.registers_per_sm // (regs_per_warp * warps)
    by_threads = device.max_threads_per_sm // threads
    by_smem = device.shared_memory_per_sm // (shared_memory + 1024) if shared_memory else 32
    return max(0, min(32, by_regs, by_threads, by_smem))


class PtxasReport(list):
    """The rows of ``Fused.ptxas`` (a list of :class:`PtxasRow`); ``str()`` is a table, ``row("k0")`` finds one."""

    COLUMNS = ("kernel", "arch", "registers", "spills (st/ld B)", "stack B", "smem B", "threads", "blocks/SM",
               "occupancy")

    def row(self, name: str) -> PtxasRow:
        for r in self:
            if r.kernel == name or r.kernel.split("_")[0] == name:
                return r
        raise KeyError(f"no kernel {name!r}: the kernels are {', '.join(r.kernel for r in self)}")

    def table(self) -> str:
        cells = [self.COLUMNS] + [(r.kernel, r.arch, str(r.registers), f"{r.spill_stores}/{r.spill_loads}",
                                   str(r.stack_frame), str(r.shared_memory), str(r.threads), str(r.blocks_per_sm),
                                   f"{r.occupancy:.0%}") for r in self]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.COLUMNS))]
        lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                 for row in cells]
        return "\n".join(line.rstrip() for line in lines)

    def __str__(self) -> str:
        return self.table() + "\n(blocks/SM and occupancy: registers, shared memory and threads on an H200)"

    __repr__ = list.__repr__


def ptxas_rows(kernels: Sequence[Any], reports: Sequence[Any], arch: str,
               device: DeviceProperties = H200) -> PtxasReport:
    """A :class:`PtxasReport` from generated kernels and their :class:`fusec.codegen.nvrtc.KernelResources`."""
    out = PtxasReport()
    for kernel, res in zip(kernels, reports):
        threads = kernel.spec.block[0] * kernel.spec.block[1]
        blocks = blocks_per_sm(res.registers, res.shared_memory, threads, device)
        warps, most = blocks * -(-threads // device.warp_size), device.max_threads_per_sm // device.warp_size
        out.append(PtxasRow(res.name, arch, res.registers, res.spill_stores, res.spill_loads, res.stack_frame,
                            res.shared_memory, threads, blocks, warps / most))
    return out


__all__ = ["FULL_HINT", "PtxasReport", "PtxasRow", "blocks_per_sm", "fold_accumulators", "folded_source", "ptxas_rows",
           "shown_body", "shown_source"]
