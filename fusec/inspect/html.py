"""An :class:`fusec.inspect.explain.Explanation` as HTML, for Jupyter (``Explanation._repr_html_``).

The page holds the fused DAG drawn by Graphviz as inline SVG (when ``dot`` is on ``PATH``; else one line
saying how to get the picture), the plan as a table (each kernel's kind and space, nodes, bytes read and
written, schedule), the bytes moved fused vs unfused, the refusals to fuse, and the whole text report
folded in a ``<details>`` element.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from typing import Any

from fusec.runtime.plan import format_bytes

_STYLE = ("<style>.fusec-explain table{border-collapse:collapse;font-size:90%}"
          ".fusec-explain td,.fusec-explain th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
          ".fusec-explain td.num{text-align:right}</style>")


def svg_of(dot_text: str, timeout: float = 60) -> str | None:
    """``dot_text`` drawn as SVG by Graphviz's ``dot``, or None when ``dot`` is missing or fails."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    try:
        proc = subprocess.run([dot, "-Tsvg"], input=dot_text.encode(), capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    text = proc.stdout.decode("utf-8", errors="replace")
    start = text.find("<svg")  # drop the XML prolog and doctype: the SVG element goes inline
    return text[start:] if start >= 0 else None


def plan_rows(e: Any) -> list[tuple[str, ...]]:
    """(kernel, kind over space, nodes, reads, writes, schedule) per kernel of the explanation ``e``."""
    rows = []
    for i, k in enumerate(e.plan.kernels):
        generated = e.kernels[i]
        name = generated.name if not isinstance(generated, Exception) else k.name
        passes = e.input_passes(i)
        reads = sum(n.nbytes * passes.get(n, 1) for n in k.inputs)
        shape = getattr(getattr(k.region, "space", None), "shape", None)
        over = f" over [{', '.join(map(str, shape))}]" if shape is not None else ""
        rows.append((name, f"{k.kind}{over}", str(len(k.region.nodes)),
                     format_bytes(reads, short=True), format_bytes(k.bytes_written, short=True), e._schedule_text(i)))
    return rows


def explanation_html(e: Any) -> str:
    """The HTML page of the explanation ``e`` (see the module docstring)."""
    plan = e.plan
    esc = html.escape
    parts = [_STYLE, '<div class="fusec-explain">',
             f"<h4>fusec explain: @{esc(plan.graph.name)}: {len(plan.kernels)} kernel(s)</h4>"]
    svg = svg_of(e.to_dot())
    if svg is not None:
        parts.append(f'<div class="fusec-dag">{svg}</div>')
    else:
        parts.append("<p><i>Install Graphviz (<code>dot</code> on PATH) to see the fused DAG here; "
                     "<code>.to_dot()</code> gives its DOT text.</i></p>")
    head = ("kernel", "kind", "nodes", "reads", "writes", "schedule")
    parts.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>")
    for row in plan_rows(e):
        cells = [f'<td class="num">{esc(c)}</td>' if j in (2, 3, 4) else f"<td><code>{esc(c)}</code></td>"
                 if j in (0, 5) else f"<td>{esc(c)}</td>" for j, c in enumerate(row)]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    fused, unfused = e.bytes_moved, plan.bytes_moved_unfused
    ratio = f"; fusion moves {unfused / fused:.2f}x less" if fused else ""
    parts.append(f"<p>bytes moved: fused {esc(format_bytes(fused, short=True))}, unfused "
                 f"{esc(format_bytes(unfused, short=True))}{ratio}</p>")
    parts.append(f"<details><summary>the whole report</summary><pre>{esc(e.render(color=False))}</pre></details>")
    parts.append("</div>")
    return "\n".join(parts)


__all__ = ["explanation_html", "plan_rows", "svg_of"]
