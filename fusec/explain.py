"""``explain``: what fusec did with a function, as a report a person reads.

Sections: the traced IR; the IR after the passes, with each kernel's region marked; each kernel
(kind, iteration space, nodes, what it reads and writes, bytes); every refusal to fuse with its
reason; and the bytes moved fused against unfused.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusec.ir.text import node_names
from fusec.plan import Plan, _fmt_bytes


@dataclass(frozen=True)
class Explanation:
    """The report; ``str()`` renders it."""

    plan: Plan

    @property
    def kernel_count(self) -> int:
        return len(self.plan.kernels)

    def __str__(self) -> str:
        plan = self.plan
        names = node_names(plan.graph)
        out = [f"== fusec explain: @{plan.graph.name} ==", "", "-- traced IR --", str(plan.traced).rstrip(), "",
               "-- after passes (canonicalize, fold, cse, dce, fuse) --", str(plan.graph).rstrip(), "",
               f"-- kernels: {len(plan.kernels)} --"]
        for k in plan.kernels:
            space = k.space
            reduced = f", reducing axes {list(space.reduced)}" if space.reduced else ""
            out.append(f"{k.label}")
            out.append(f"  kind: {k.kind} over {list(space.shape)}{reduced}")
            out.append(f"  nodes: {', '.join(names[n] + ' ' + n.op for n in k.nodes)}")
            out.append(f"  reads: {', '.join(names[n] for n in k.inputs) or 'nothing'} "
                       f"({_fmt_bytes(k.bytes_read)})")
            out.append(f"  writes: {', '.join(names[n] for n in k.outputs) or 'nothing'} "
                       f"({_fmt_bytes(k.bytes_written)})")
        out += ["", "-- not fused --"]
        out += [f"  {r}" for r in plan.refusals] or ["  nothing was refused"]
        fused, unfused = plan.bytes_moved, plan.bytes_moved_unfused
        ratio = f"{unfused / fused:.2f}x less" if fused else "n/a"
        out += ["", "-- bytes moved --",
                f"  fused:   {len(plan.kernels)} kernel(s), {_fmt_bytes(fused)}",
                f"  unfused: {plan.kernel_count_unfused} kernel(s), {_fmt_bytes(unfused)}",
                f"  fusion moves {ratio}"]
        return "\n".join(out) + "\n"
