"""KernelSpec -> CUDA source, through the kernel kind's Jinja template.

``render_kernel(spec)`` gives the complete source one module compiles: the op helpers
(``templates/fusec_device.cuh.j2``), the schedule helpers (``templates/schedule.cuh.j2``), then the
kernel (``templates/<kind>.cu.j2`` with the macros of ``templates/_kernel.cu.j2``). The text is a pure
function of the spec's signature (never of its ``args``), so equal signatures give equal sources and
the compile caches hit.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from fusec.codegen import cuda_ops, templates
from fusec.codegen.spec import KernelSpec

TEMPLATES = {
    "pointwise": "pointwise.cu.j2",
    "reduce-all": "reduce_all.cu.j2",
    "rows": "reduce_rows.cu.j2",
    "cols": "reduce_cols.cu.j2",
    "scan": "scan_rows.cu.j2",
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


@functools.lru_cache(maxsize=1)
def headers() -> str:
    """The device helpers every kernel source starts with (op helpers, schedule helpers)."""
    return templates.render(cuda_ops.DEVICE_HEADER) + "\n" + templates.render(SCHEDULE_HEADER)


def render_body(spec: KernelSpec) -> str:
    """The kernel alone: its accumulator types and its ``extern "C" __global__`` function."""
    return _tidy(templates.render(TEMPLATES[spec.kind], spec=spec))


def extra_headers(names: Iterable[str]) -> str:
    """The helper headers beyond the common ones (``KernelSpec.headers``), each once, in order; empty when
    there are none, so kernels without them keep their source."""
    return "".join(templates.render(name) + "\n" for name in dict.fromkeys(names))


def render_kernel(spec: KernelSpec) -> str:
    """The complete CUDA source of ``spec``: headers, then the kernel ``spec.name``."""
    return headers() + "\n" + extra_headers(spec.headers) + render_body(spec)


def render_module(specs: Iterable[KernelSpec]) -> str:
    """One source holding several kernels (their names must differ), for compiling them together."""
    specs = list(specs)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"kernel names repeat in one module: {names}")
    return headers() + "\n" + extra_headers(h for s in specs for h in s.headers) + "\n".join(
        render_body(s) for s in specs)
