"""``explain``: what fusec did with a function, as a report a person reads and a picture of the DAG.

:class:`Explanation` (what ``f.explain(...)`` returns) renders, in sections: the traced IR; the IR
after the passes, with each kernel's region marked; each kernel (name, kind, iteration space, nodes,
what it reads and writes, its launch shape, the siblings it merged: :mod:`fusec.inspect.siblings`); every
refusal to fuse with its reason; the intermediates
written to memory between kernels; the bytes moved fused against unfused; and, with ``run=True`` on a
GPU, each kernel's measured time and bandwidth.

``str(e)`` is plain text; ``e.render(color=True)`` adds ANSI colours for a terminal. ``e.to_dot()``
is the optimized DAG as Graphviz DOT text (each kernel a coloured cluster, intermediates that cross
kernels drawn with a bold double border; built in :mod:`fusec.inspect.dot`), and ``e.save("f.svg")``
draws it with Graphviz's ``dot``. The GPU measurements of ``run=True`` live in :mod:`fusec.inspect.timing`.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from fusec.inspect.dot import PALETTE, dot_text, type_text
from fusec.inspect.siblings import bytes_saved as sibling_bytes_saved
from fusec.inspect.siblings import sibling_lines
from fusec.inspect.timing import KernelTime, Timings, measure, to_device
from fusec.ir.graph import Node
from fusec.ir.printer import node_names
from fusec.kinds import check_forced, generate
from fusec.passes.manager import DEFAULT_PIPELINE
from fusec.runtime.autotune import enabled, lookup, tune_device
from fusec.runtime.gpu import require_gpu
from fusec.runtime.plan import Plan, format_bytes
from fusec.schedule import ScheduleError, layouts_of
from fusec.support.errors import FusecError, FusecValueError

RENDERED_SUFFIXES = (".svg", ".png", ".pdf")  # what ``save`` draws with Graphviz's ``dot``
DOT_SUFFIXES = (".dot", ".gv")  # what ``save`` writes as DOT text


# --- the report --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    """What fusec made of a function for given arguments: ``print()`` it, or draw it.

    - ``str(e)`` / ``print(e)``: the plain-text report; ``e.render(color=True)`` the same with ANSI
      colours (the CLI colours it on a terminal unless ``NO_COLOR`` is set).
    - ``e.to_dot()``: the optimized DAG as Graphviz DOT text; ``e.save(path)`` writes it (``.dot``) or
      draws it (``.svg``, ``.png``, ``.pdf``, with Graphviz's ``dot``).
    - ``e.plan``: the :class:`fusec.runtime.plan.Plan` (kernels, regions, bytes) the report describes;
      ``e.kernel_count``; ``e.timings``: what ``run=True`` measured, else None.

    Build one with ``f.explain(*args)`` on a ``@fusec.fuse`` function.
    """

    plan: Plan
    layouts: Mapping[Node, Any] = field(default_factory=dict, compare=False, repr=False)
    timings: Timings | None = field(default=None, compare=False)
    passes: tuple[str, ...] = DEFAULT_PIPELINE  # the pipeline that made ``plan`` (for the section title)
    schedules: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)  # forced, by kernel
    autotune: bool | None = field(default=None, compare=False)  # None: as $FUSEC_AUTOTUNE says

    @classmethod
    def of(cls, plan: Plan, values: Sequence[Any] = (), timings: Timings | None = None,
           passes: Sequence[str] = DEFAULT_PIPELINE, schedules: Mapping[str, Any] | None = None,
           autotune: bool | None = None) -> Explanation:
        """The explanation of ``plan`` (made by the pipeline ``passes``); ``values`` (one per graph input:
        arrays or :class:`fusec.ArraySpec`) give the input layouts the kernels are planned for, and
        ``schedules`` the schedules forced by kernel name. With ``autotune`` (None: ``$FUSEC_AUTOTUNE``),
        a kernel the tune cache holds a schedule for shows that one."""
        layouts = layouts_of(plan.graph.inputs, dict(zip(plan.graph.inputs, values)))
        explanation = cls(plan, layouts, timings, tuple(passes), dict(schedules or {}), autotune)
        check_forced(explanation.schedules, [k.name for k in plan.kernels])
        explanation.kernels  # noqa: B018 - a forced schedule that does not fit raises here, not in the report
        return explanation

    @property
    def kernel_count(self) -> int:
        """How many kernels the function runs as."""
        return len(self.plan.kernels)

    @cached_property
    def read_back(self) -> set[Node]:
        """The reshapes the plan takes between kernels (views of what a kernel wrote)."""
        return set(self.plan.read_back_views)

    @cached_property
    def materialized(self) -> dict[Node, tuple[int, tuple[int, ...]]]:
        """Intermediates written to memory by one kernel and read by another:
        ``{node: (index of the kernel writing it, indices of the kernels reading it)}``."""
        readers: dict[Node, list[int]] = {}
        for i, k in enumerate(self.plan.kernels):
            for n in k.inputs:
                while n in self.read_back:  # a reshape read back between kernels: a view of what one wrote
                    n = n.operands[0]
                readers.setdefault(n, []).append(i)
        out: dict[Node, tuple[int, tuple[int, ...]]] = {}
        for i, k in enumerate(self.plan.kernels):
            for n in k.outputs:
                if n in readers and n not in out:
                    out[n] = (i, tuple(readers[n]))
        return out

    @cached_property
    def kernels(self) -> tuple[Any, ...]:
        """Each kernel as the code generator makes it for these layouts
        (:class:`fusec.codegen.kernel.GeneratedKernel`: schedule, spec, source), or the exception it raised."""
        out = []
        device = tune_device() if enabled(self.autotune) else None
        for k in self.plan.kernels:
            layouts = {n: self.layouts[n] for n in k.inputs if n in self.layouts}
            try:
                if device is not None and k.name not in self.schedules:
                    tuned = lookup(k.region, layouts, device)
                    self.tuned[k.name] = tuned is not None
                    out.append(generate(k.region, layouts, tuned, device=device))
                    continue
                out.append(generate(k.region, layouts, self.schedules.get(k.name)))
            except ScheduleError:
                raise  # a forced schedule that does not fit: the caller's error
            except Exception as exc:  # codegen cannot plan this kernel: say so, and still explain the rest
                out.append(exc)
        return tuple(out)

    @cached_property
    def tuned(self) -> dict[str, bool]:
        """With autotuning on: by kernel name, whether its schedule came from the tune cache (filled by
        :attr:`kernels`)."""
        return {}

    @cached_property
    def launches(self) -> tuple[str, ...]:
        """Each kernel's launch shape as planned on the host (schedule, block, grid, index width); a
        persistent grid's cap (SMs x resident blocks) is only known on the GPU."""
        return tuple(_launch_text(k) for k in self.kernels)

    def __repr__(self) -> str:
        p = self.plan
        fused, unfused = format_bytes(self.bytes_moved, short=True), format_bytes(p.bytes_moved_unfused, short=True)
        return (f"<fusec.Explanation @{p.graph.name}: {len(p.kernels)} kernel(s), {fused} "
                f"moved (unfused {unfused}); print() it for the report>")

    def __str__(self) -> str:
        return self.render(color=False)

    def _repr_html_(self) -> str:
        """Jupyter's view: the fused DAG (with Graphviz), the plan as a table, the bytes, the whole report
        folded (:mod:`fusec.inspect.html`)."""
        from fusec.inspect.html import explanation_html

        return explanation_html(self)

    def render(self, color: bool = False) -> str:
        """The report as text; ``color=True`` adds ANSI colour codes (for a terminal)."""
        plan = self.plan
        c = _Colors(color)
        names = node_names(plan.graph)
        kname = {k.name: i for i, k in enumerate(plan.kernels)}
        out = [c.bold(f"== fusec explain: @{plan.graph.name} =="), "",
               c.head("-- traced IR --"), str(plan.traced).rstrip(), "",
               c.head(f"-- after passes ({', '.join(self.passes)}) --"),
               _color_regions(str(plan.graph).rstrip(), kname, c), "",
               c.head(f"-- kernels: {len(plan.kernels)} --")]
        for i, k in enumerate(plan.kernels):
            space = k.space
            reduced = f", reducing axes {list(space.reduced)}" if space.reduced else ""
            out.append(c.kernel(i, k.label))
            out.append(f"  kind:   {k.kind} over {list(space.shape)}{reduced}")
            out.append(f"  nodes:  {', '.join(names[n] + ' ' + n.op for n in k.nodes)}")
            out.append(self._reads_text(i, names))
            writes = ", ".join(names[n] + self._destination(n) for n in k.outputs)
            out.append(f"  writes: {format_bytes(k.bytes_written)} to {writes}" if writes else "  writes: nothing")
            out.append(f"  schedule: {self._schedule_text(i)}")
            out.append(f"  launch: {self.launches[i]}")
            out += sibling_lines(k, names)
        out += ["", c.head("-- not fused --")]
        out += [c.warn(f"  {r}") for r in plan.refusals] or ["  nothing was refused"]
        out += ["", c.head("-- intermediates in memory --")]
        if self.materialized:
            for n, (writer, readers) in self.materialized.items():
                by = ", ".join(plan.kernels[j].name for j in readers)
                out.append(c.warn(f"  {names[n]} ({n.op}, {type_text(n)}): "
                                  f"{format_bytes(n.nbytes)}, written by {plan.kernels[writer].name}, read by {by}"))
        else:
            out.append("  none: no kernel reads what another one wrote")
        fused, unfused = self.bytes_moved, plan.bytes_moved_unfused
        ratio = f"{unfused / fused:.2f}x less" if fused else "n/a"
        out += ["", c.head("-- bytes moved --"),
                f"  fused:   {len(plan.kernels)} kernel(s), {format_bytes(fused)}",
                f"  unfused: {plan.kernel_count_unfused} kernel(s), {format_bytes(unfused)}",
                "  fusion moves " + c.bold(ratio)]
        if saved := sibling_bytes_saved(plan.kernels):
            out.append(f"  of which merging siblings saves {format_bytes(saved)} (see each kernel's siblings)")
        if self.timings is not None:
            out += [""] + self._render_timings(c)
        return "\n".join(out) + "\n"

    @property
    def bytes_moved(self) -> int:
        """What the kernels really read and write: the plan's bytes, with each input counted once per pass
        its kernel makes over it (:meth:`input_passes`)."""
        total = 0
        for i, k in enumerate(self.plan.kernels):
            passes = self.input_passes(i)
            total += sum(k.read_bytes(n) * passes.get(n, 1) for n in k.inputs) + k.bytes_written
        return total

    def input_passes(self, i: int) -> dict[Node, int]:
        """How many times kernel ``i`` reads each of its input arrays (once each where it has no kernel)."""
        kernel = self.kernels[i]
        if isinstance(kernel, Exception):
            return {n: 1 for n in self.plan.kernels[i].inputs}
        return kernel.passes()

    def _reads_text(self, i: int, names: Mapping[Node, str]) -> str:
        """``reads: <bytes> from %a, %b`` with the passes over each array that the kernel reads more than once
        (the bytes count every pass: what the kernel really reads)."""
        passes = self.input_passes(i)
        inputs = self.plan.kernels[i].inputs
        if not inputs:
            return "  reads:  nothing"
        kernel = self.plan.kernels[i]
        total = sum(kernel.read_bytes(n) * passes.get(n, 1) for n in inputs)
        again = {1: "", 2: " (twice)"}
        listed = ", ".join(names[n] + again.get(passes.get(n, 1), f" ({passes.get(n, 1)} times)") for n in inputs)
        return f"  reads:  {format_bytes(total)} from {listed}"

    def _schedule_text(self, i: int) -> str:
        kernel = self.kernels[i]
        if isinstance(kernel, Exception):
            return "none"
        name = self.plan.kernels[i].name
        note = " (forced)" if name in self.schedules else ""
        if name in self.tuned:
            note = (" (autotuned: from the tune cache)" if self.tuned[name] else
                    " (heuristics; autotune is on and the tune cache has no entry yet: the first call on the GPU "
                    "times the candidates)")
        return f"{kernel.schedule.text()}{note}"

    def _destination(self, node: Node) -> str:
        where = []
        if node in self.materialized:
            where.append("read by " + ", ".join(self.plan.kernels[j].name for j in self.materialized[node][1]))
        if node in self.plan.graph.outputs:
            where.append("returned")
        return f" ({'; '.join(where)})" if where else ""

    def _render_timings(self, c: _Colors) -> list[str]:
        t = self.timings
        assert t is not None
        out = [c.head(f"-- measured on {t.device} (CUDA events, median of {t.reps} after warm-up) --")]
        width = max([len(k.name) for k in t.kernels] + [10])
        for i, k in enumerate(t.kernels):
            out.append(f"  {c.kernel(i, k.name.ljust(width))}  {k.ms:9.4f} ms  {k.gb_per_s:8.1f} GB/s  "
                       f"grid {k.grid} x {math.prod(k.block)} threads")
        total = sum(k.ms for k in t.kernels)
        out.append(f"  {'all kernels'.ljust(width)}  {total:9.4f} ms")
        gbps = (lambda nbytes, ms: f"{nbytes / ms / 1e6:8.1f} GB/s" if ms > 0 else "")
        out.append(f"  fused call:   {t.fused_ms:9.4f} ms  {gbps(t.fused_bytes, t.fused_ms)}")
        out.append(f"  unfused:      {t.unfused_ms:9.4f} ms  {gbps(t.unfused_bytes, t.unfused_ms)}  "
                   "(one CuPy call per op)")
        if t.fused_ms > 0:
            out.append("  fusion is " + c.bold(f"{t.unfused_ms / t.fused_ms:.2f}x faster"))
        return out

    # --- the picture ---------------------------------------------------------------------------------------

    def to_dot(self) -> str:
        """The optimized DAG as Graphviz DOT text.

        Each kernel is a ``subgraph cluster_<name>`` filled with its colour and labelled with its name,
        kind, iteration space and bytes; each node is labelled with its IR name, op and type. Inputs
        are grey, outputs are ``output i`` sinks, and an intermediate written to memory by one kernel
        and read by another has a bold double border, with a bold red edge into each reader.
        """
        return dot_text(self)

    def save(self, path: str | Path) -> Path:
        """Write the drawing to ``path`` and return the path written.

        ``.dot`` (or ``.gv``): the DOT text. ``.svg``, ``.png``, ``.pdf``: drawn with Graphviz's ``dot``
        when it is on ``PATH``; when it is not, the DOT text goes to ``path`` with the suffix ``.dot``
        instead, with a warning saying so (the returned path tells which was written).
        """
        written, note = self._save(path)
        if note:
            warnings.warn(note, RuntimeWarning, stacklevel=2)
        return written

    def _save(self, path: str | Path) -> tuple[Path, str | None]:
        """``save`` without the warning: (the path written, the note when Graphviz was missing)."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in RENDERED_SUFFIXES + DOT_SUFFIXES:
            raise FusecValueError(f"cannot save a drawing as '{path}': unknown suffix '{path.suffix}'",
                                  loc="", hint="use .svg, .png or .pdf (drawn with Graphviz), or .dot")
        text = self.to_dot()
        if suffix in DOT_SUFFIXES:
            path.write_text(text, encoding="utf-8")
            return path, None
        dot = shutil.which("dot")
        if dot is None:
            fallback = path.with_suffix(".dot")
            fallback.write_text(text, encoding="utf-8")
            return fallback, (f"Graphviz 'dot' was not found, so {path} was not drawn: wrote the DOT text to "
                              f"{fallback} instead (install Graphviz, then `dot -T{suffix[1:]} {fallback} -o {path}`)")
        try:
            proc = subprocess.run([dot, f"-T{suffix[1:]}", "-o", str(path)], input=text.encode(),
                                  capture_output=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise FusecError(f"Graphviz 'dot' failed to draw {path}: {exc}", loc="") from None
        if proc.returncode != 0:
            why = proc.stderr.decode(errors="replace").strip().splitlines()
            raise FusecError(f"Graphviz 'dot' failed to draw {path} (exit {proc.returncode})"
                             + (f": {why[0]}" if why else ""), loc="")
        return path, None


# --- text helpers --------------------------------------------------------------------------------------------


class _Colors:
    """ANSI escapes, or nothing when colour is off."""

    def __init__(self, on: bool):
        self.on = on

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def head(self, text: str) -> str:
        return self._wrap("1;36", text)

    def warn(self, text: str) -> str:
        return self._wrap("33", text)

    def kernel(self, index: int, text: str) -> str:
        return self._wrap("1;" + PALETTE[index % len(PALETTE)][0], text)


_KERNEL_LINE = re.compile(r"^  kernel @(\S+) ")


def _color_regions(ir: str, kernel_index: Mapping[str, int], c: _Colors) -> str:
    """The optimized IR with each ``kernel @k {`` line and its closing brace in that kernel's colour."""
    if not c.on:
        return ir
    lines, current = [], None
    for line in ir.splitlines():
        m = _KERNEL_LINE.match(line)
        if m and m.group(1) in kernel_index:
            current = kernel_index[m.group(1)]
            lines.append(c.kernel(current, line))
        elif current is not None and line == "  }":
            lines.append(c.kernel(current, line))
            current = None
        else:
            lines.append(line)
    return "\n".join(lines)


def _launch_text(kernel: Any) -> str:
    """``block_regs schedule, 256 threads per block, grid 8192`` and a second line of details (threads and
    elements per row, index width, vector width): the launch as the code generator plans it, without a
    GPU (``kernel``: a generated kernel, or the exception generating it raised)."""
    if isinstance(kernel, Exception):
        text = str(kernel)
        return f"not planned ({type(kernel).__name__}: {text.splitlines()[0] if text else ''})"
    if kernel.library is not None:  # no generated CUDA: a library's function (a GEMM)
        return (f"a library call: {kernel.library.summary}\n"
                "          fused into it: nothing (its operands' views only: the library reads their strides or "
                "copies them)\n"
                "          contract: the shapes and dtypes of its arrays (the library takes any strides)")
    spec = kernel.spec
    threads = spec.block[0] * spec.block[1]
    details = [f"{spec.row_threads} threads x {spec.elems} elements per row"] if spec.row_threads else []
    if spec.row_threads:
        details.append(_lengths_text(spec))
    details.append(("int32" if spec.index_ctype == "int" else "int64") + " indices")
    if spec.vec > 1:
        details.append(f"{spec.vec}-wide vector accesses")
    text = (f"{kernel.schedule.variant} schedule, {threads} threads per block, {spec.launch.describe()}\n"
            f"          {', '.join(details)}")
    if spec.contract is not None:  # what a launch needs of its arrays (checked before every launch)
        text += (f"\n          contract: {spec.contract.text()}; strides {spec.contract.strides_text()} "
                 f"(a launch that does not meet it runs the scalar variant)")
    return text


def _lengths_text(spec: Any) -> str:
    """How a register-row kernel takes its row length (the schedule's ``lengths``)."""
    capacity = spec.row_threads * spec.elems
    if spec.schedule.lengths == "bucket":
        return f"one kernel for every row length up to {capacity} (a parameter)"
    if spec.full_rows:
        return f"specialized to rows of exactly {capacity} elements (no bounds checks)"
    return "specialized to this row length's alignment"


__all__ = ["Explanation", "KernelTime", "Timings", "measure", "require_gpu", "to_device"]
