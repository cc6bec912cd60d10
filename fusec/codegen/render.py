"""KernelSpec -> CUDA source, through the kernel kind's Jinja template.

``render_kernel(spec)`` gives the source one module compiles: ``#include`` lines for the helper headers it
needs (the op helpers ``templates/fusec_device.cuh``, the schedule helpers ``templates/schedule.cuh``, and any
of the kind's or ops' own), then the kernel (its kind's template, ``templates/<template>.cu.j2``, with the macros of
``templates/_kernel.cu.j2``). The headers are plain files that NVRTC reads from ``templates/`` (its include
path, :func:`fusec.codegen.templates.header_dir`); the first line names the SHA-256 of the included headers'
text, so a source, and every cache keyed by it, changes when a header does. :func:`inline_headers` gives the
self-contained translation unit (``cuda_source(..., full=True)``, the dumps of kernels that fail to compile).
The text is a pure function of the spec's signature (never of its ``args``), so equal signatures give equal
sources and the compile caches hit.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence

from fusec.codegen import cuda_ops, templates
from fusec.codegen.spec import KernelSpec

SCHEDULE_HEADER = "schedule.cuh"


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


COMMON_HEADERS = (cuda_ops.DEVICE_HEADER, SCHEDULE_HEADER)  # every kernel includes these, first
INCLUDE_NOTE = "// fusec helper headers, sha256 "  # the first line of a source: the digest of what it includes
_INCLUDE = '#include "'


@functools.lru_cache(maxsize=64)
def header_text(name: str) -> str:
    """The text of helper header ``templates/<name>`` (plain CUDA: no template markup)."""
    return templates.source(name)


@functools.lru_cache(maxsize=256)
def _include_block(names: tuple[str, ...]) -> str:
    digest = hashlib.sha256("\0".join(f"{n}\0{header_text(n)}" for n in names).encode()).hexdigest()[:16]
    lines = [f"{INCLUDE_NOTE}{digest} (cuda_source(..., full=True) inlines them)"]
    return "\n".join([*lines, *(f'{_INCLUDE}{n}"' for n in names)]) + "\n\n"


def include_block(extra: Iterable[str] = ()) -> str:
    """The lines a source starts with: the digest note, then ``#include`` of the common headers and of ``extra``
    (each once, in order), then a blank line."""
    return _include_block(tuple(dict.fromkeys((*COMMON_HEADERS, *extra))))


def included_headers(source: str) -> tuple[str, ...]:
    """The helper headers ``source`` (a :func:`render_kernel` or :func:`render_module` text) includes."""
    names = []
    for line in source.splitlines()[1:]:
        if not line.startswith(_INCLUDE):
            break
        names.append(line[len(_INCLUDE):-1])
    return tuple(names)


def split_source(source: str) -> tuple[str, str]:
    """``source`` as (its include block, the kernel's own lines after it); ("", source) for a source that does not
    start with fusec's include block."""
    if not source.startswith(INCLUDE_NOTE):
        return "", source
    lines = len(included_headers(source)) + 2  # the note, the includes, the blank line
    body = source.split("\n", lines)[-1]
    return source[: len(source) - len(body)], body


def inline_headers(source: str) -> str:
    """``source`` as one self-contained translation unit: its ``#include`` lines replaced by the headers' text.
    A source that does not start with fusec's include block is returned as it is."""
    block, body = split_source(source)
    return "".join(header_text(n) + "\n" for n in included_headers(block)) + body if block else source


def render_body(spec: KernelSpec) -> str:
    """The kernel alone: its accumulator types and its ``extern "C" __global__`` function."""
    return _tidy(templates.render(spec.template, spec=spec))


def render_kernel(spec: KernelSpec) -> str:
    """The CUDA source of ``spec``: its include block, then the kernel ``spec.name``."""
    return include_block(spec.headers) + render_body(spec)


def render_module(specs: Sequence[KernelSpec] | Iterable[KernelSpec]) -> str:
    """One source holding several kernels (their names must differ), for compiling them together."""
    specs = list(specs)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"kernel names repeat in one module: {names}")
    return include_block(h for s in specs for h in s.headers) + "\n".join(render_body(s) for s in specs)
