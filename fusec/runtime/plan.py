"""The plan: the kernels a graph becomes, in launch order, with the bytes each one moves.

``make_plan(graph)`` runs the pass pipeline and turns each region into a :class:`Kernel`. Bytes
count what must cross device memory: each array a kernel reads (graph inputs and intermediates
written by earlier kernels) once, and each array it writes once. ``bytes_moved_unfused`` is the
same count for the naive execution where every op is its own kernel (layout ops are views, so
they move nothing) and every intermediate is written and read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from fusec.ir.graph import Graph, Node
from fusec.ir.interpret import run_nodes
from fusec.ir.ops import Kind
from fusec.ir.region import Region, RegionSpace
from fusec.ir.reshape_math import argument_views, read_back_views
from fusec.passes.manager import DEFAULT_PIPELINE, run_pipeline


def _is_array(node: Node) -> bool:
    return node.op not in ("const", "size", "iota")


def _base(node: Node) -> Node:
    """The array a layout view reads (views move no bytes of their own; a slice reads its own elements)."""
    while node.kind is Kind.LAYOUT and node.op not in ("slice", "window"):
        node = node.operands[0]
    return node


@dataclass(frozen=True)
class Kernel:
    """One kernel of the plan: a region, its iteration space, what it reads and writes."""

    name: str
    kind: str
    region: Region

    @property
    def space(self) -> RegionSpace:
        return self.region.space

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.region.nodes

    @property
    def inputs(self) -> tuple[Node, ...]:
        """Arrays read from memory (constants and sizes are not arrays)."""
        return tuple(n for n in self.region.inputs if _is_array(n))

    @property
    def outputs(self) -> tuple[Node, ...]:
        return self.region.outputs

    def read_bytes(self, node: Node) -> int:
        """The bytes of input array ``node`` the kernel reads: all of it, or where every member reading it is a
        slice or gathers from it, the elements of those slices and gathers (at most the array's)."""
        readers = {n for n in self.region.nodes if node in n.operands}
        if readers and all(n.op in ("slice", "window") or (n.kind is Kind.GATHER and node not in n.operands[1:])
                           for n in readers):
            return min(node.nbytes, sum(n.nbytes for n in readers))
        return node.nbytes

    @property
    def bytes_read(self) -> int:
        return sum(self.read_bytes(n) for n in self.inputs)

    @property
    def bytes_written(self) -> int:
        return sum(n.nbytes for n in self.outputs)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def label(self) -> str:
        """A readable name saying what the kernel fuses (``k0_rows_max_sub_exp_sum_div``)."""
        ops = [n.op for n in self.nodes if n.kind is not Kind.LAYOUT]
        ops = list(dict.fromkeys(ops))[:6]
        return "_".join([self.name, self.kind.replace("-", "")] + ops)


@dataclass(frozen=True)
class Plan:
    """The kernels of a function for given argument shapes, in launch order."""

    traced: Graph
    graph: Graph  # after the passes, with regions
    kernels: tuple[Kernel, ...]

    @property
    def refusals(self) -> tuple[str, ...]:
        return self.graph.refusals

    @cached_property
    def argument_views(self) -> list[Node]:
        """The views of arguments kernels read as arrays of their own, taken before the kernels on each call
        (:func:`fusec.ir.reshape_math.argument_views`), found once per plan."""
        return argument_views(self.graph)

    @cached_property
    def read_back_views(self) -> list[Node]:
        """The reshapes of computed values taken between kernels (:func:`fusec.ir.reshape_math.read_back_views`),
        found once per plan."""
        return read_back_views(self.graph)

    @property
    def views_on_each_call(self) -> bool:
        """Whether a call takes views of its arguments or between its kernels (the checked path on the GPU)."""
        return bool(self.argument_views or self.read_back_views)

    @property
    def bytes_moved(self) -> int:
        return sum(k.bytes_moved for k in self.kernels)

    @property
    def bytes_moved_unfused(self) -> int:
        return unfused_bytes(self.traced)

    @property
    def kernel_count_unfused(self) -> int:
        computing = (Kind.ELEMENTWISE, Kind.REDUCTION, Kind.GATHER, Kind.SCAN, Kind.CONTRACTION)
        return sum(1 for n in self.traced.nodes if n.kind in computing)

    def __len__(self) -> int:
        return len(self.kernels)

    def __str__(self) -> str:
        lines = [f"plan for @{self.graph.name}: {len(self.kernels)} kernel(s), "
                 f"{format_bytes(self.bytes_moved)} moved (unfused: {self.kernel_count_unfused} kernel(s), "
                 f"{format_bytes(self.bytes_moved_unfused)})"]
        for k in self.kernels:
            lines.append(f"  {k.label}: {k.kind} over {list(k.space.shape)}, {len(k.nodes)} nodes, "
                         f"reads {format_bytes(k.bytes_read)}, writes {format_bytes(k.bytes_written)}")
        return "\n".join(lines)


def format_bytes(n: int, *, short: bool = False) -> str:
    """``0.500 GiB (536870912 B)``: three decimals and the exact count; ``short``: ``512 MiB``, three
    significant digits (drawings, one-line summaries)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}" if short else f"{n / size:.3f} {unit} ({n} B)"
    return f"{n} B"


def unfused_bytes(graph: Graph) -> int:
    """Bytes moved when every elementwise op, reduction and gather is its own kernel (views are free; a gather
    reads at most as many elements of its array as it gathers)."""
    total = 0
    for n in graph.nodes:
        if n.kind not in (Kind.ELEMENTWISE, Kind.REDUCTION, Kind.GATHER, Kind.SCAN, Kind.CONTRACTION):
            continue
        total += n.nbytes
        for k, o in enumerate(dict.fromkeys(n.operands)):
            base = _base(o)
            if _is_array(base):
                gathered = n.kind is Kind.GATHER and k == 0 and o not in n.operands[1:]
                total += min(base.nbytes, n.nbytes) if gathered else base.nbytes
    return total


def make_plan(traced: Graph, passes: tuple[str, ...] = DEFAULT_PIPELINE) -> Plan:
    """Run the passes on a traced graph and list its kernels in launch order."""
    graph = run_pipeline(traced, passes)
    kernels = []
    for region in graph.regions or ():
        kernels.append(Kernel(region.name, region.kind, region))
    return Plan(traced, graph, tuple(kernels))


def execute_numpy(plan: Plan, args: list[np.ndarray], xp: Any = np) -> list[Any]:
    """Run the plan kernel by kernel with the reference interpreter.

    Each kernel sees only what it declares as inputs (plus constants and sizes), so a plan whose
    regions read something they do not list fails here, on any machine.
    """
    graph = plan.graph
    memory: dict[Node, Any] = {node: xp.asarray(a) for node, a in zip(graph.inputs, args)}
    run_nodes(xp, plan.argument_views, memory)  # views of the arguments that kernels read (no copies)
    pending = list(plan.read_back_views)
    for kernel in plan.kernels:
        pending = take_read_backs(xp, pending, memory)
        env = {n: memory[n] for n in kernel.region.inputs if _is_array(n)}
        sources = [n for n in kernel.region.inputs if not _is_array(n)]
        run_nodes(xp, sources + list(kernel.nodes), env)
        for out in kernel.outputs:
            memory[out] = env[out]
    # an output that is a constant or a size (after folding, say) is in no kernel: make it here
    run_nodes(xp, [o for o in graph.outputs if o not in memory], memory)
    return [_fresh(memory[o]) for o in graph.outputs]


def take_read_backs(xp: Any, pending: list[Node], memory: dict[Node, Any]) -> list[Node]:
    """Take each of ``pending`` (reshapes read back between kernels, in graph order) whose operand is in ``memory``
    now, into ``memory`` (views of what the kernels wrote); returns the ones still waiting."""
    waiting = []
    for n in pending:
        if n.operands[0] in memory:
            run_nodes(xp, [n], memory)
        else:
            waiting.append(n)
    return waiting


def _fresh(value: Any) -> Any:
    """An output as a kernel writes it: a read-only broadcast view (a constant spread over a shape, such as
    ``x == 2**63`` of an int64 ``x``) becomes an array of its own, as NumPy returns."""
    if isinstance(value, np.ndarray) and not value.flags.writeable and value.base is not None:
        return np.array(value)
    return value
