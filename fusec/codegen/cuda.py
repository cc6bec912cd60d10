"""KernelSpec -> CUDA source, through the kernel kind's Jinja template.

``render_kernel(spec)`` gives the complete source one ``cupy.RawModule`` compiles: the op helpers
(``templates/fusec_device.cuh.j2``), the schedule helpers (``templates/schedule.cuh.j2``), then the
kernel (``templates/<kind>.cu.j2`` with the macros of ``templates/_kernel.cu.j2``). The text is a pure
function of the spec's signature (never of its ``args``), so equal signatures give equal sources and
CuPy's caches hit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fusec.codegen import cuda_ops, templates
from fusec.codegen.plan import KernelSpec

TEMPLATES = {
    "pointwise": "pointwise.cu.j2",
    "reduce-all": "reduce_all.cu.j2",
    "rows": "reduce_rows.cu.j2",
    "cols": "reduce_cols.cu.j2",
}
SCHEDULE_HEADER = "schedule.cuh.j2"


def _tidy(text: str) -> str:
    """Trailing spaces removed, runs of blank lines cut to one, no blank line after ``{``."""
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1] or out[-1].endswith("{")):
            continue
        if out and not out[-1] and line.lstrip().startswith("}"):
            out.pop()
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


def headers() -> str:
    """The device helpers every kernel source starts with (op helpers, schedule helpers)."""
    return templates.render(cuda_ops.DEVICE_HEADER) + "\n" + templates.render(SCHEDULE_HEADER)


def render_body(spec: KernelSpec) -> str:
    """The kernel alone: its accumulator types and its ``extern "C" __global__`` function."""
    text = templates.render(TEMPLATES[spec.kind], spec=spec)
    return _tidy(text)


def render_kernel(spec: KernelSpec) -> str:
    """The complete CUDA source of ``spec``: headers, then the kernel ``spec.name``."""
    return headers() + "\n" + render_body(spec)


def render_module(specs: Iterable[KernelSpec]) -> str:
    """One source holding several kernels (their names must differ), for compiling them together."""
    bodies = [render_body(s) for s in specs]
    names = [re.search(r"__global__ void __launch_bounds__\([\d, ]+\) (\w+)\(", b).group(1) for b in bodies]
    if len(set(names)) != len(names):
        raise ValueError(f"kernel names repeat in one module: {names}")
    return headers() + "\n" + "\n".join(bodies)
