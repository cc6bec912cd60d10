"""Compile CUDA source to a cubin with NVRTC, without a GPU, and read ptxas's resource report.

``compile_cubin`` drives NVRTC through ``cuda.core`` (``Program(src, "c++", ProgramOptions(...))``), which
needs only the ``cuda-core``, ``cuda-bindings`` and ``nvidia-cuda-nvrtc`` wheels: no driver, no device.
Nothing is cached here; the runtime (CuPy) keeps its own cache.

How NVRTC finds ``cuda_fp16.h`` (the only header generated kernels include): NVRTC has no default search
path, so :func:`cuda_include_dirs` returns the first of

1. ``$FUSEC_CUDA_INCLUDE``;
2. the headers bundled inside NVRTC itself (NVRTC >= 13.3), extracted once with
   ``nvrtcInstallBundledHeaders`` into ``$XDG_CACHE_HOME/fusec/nvrtc-headers-<major>.<minor>``
   (default ``~/.cache/...``): they always match the NVRTC that compiles;
3. the CUDA toolkit headers that ``cuda.pathfinder`` locates (the ``nvidia/cu13/include`` wheel, conda,
   ``CUDA_PATH``/``CUDA_HOME``, ``/usr/local/cuda``);

that holds ``cuda_fp16.h``. :func:`include_options` gives the same as ``-I`` options for CuPy's
``RawModule(options=...)``.

How the ptxas report is obtained: ptxas runs inside NVRTC; ``ProgramOptions(ptxas_options=["-v"])``
makes it print, per entry function, the registers, the stack frame, the spill stores and loads, the
static shared memory and the barriers into the NVRTC program log, which :func:`parse_ptxas_report`
reads. (NVRTC 12 and 13 always print it with ``-v``; ``CompileResult.kernels`` is ``None`` only if a
future NVRTC stops doing so.)
"""

from __future__ import annotations

import functools
import io
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fusec.codegen import templates
from fusec.support import counters
from fusec.support.errors import FusecError

PROGRAM_NAME = "fusec_kernel.cu"
INSTALL_HINT = ("install a GPU extra: pip install 'fusec[cuda13]' (CUDA 13 driver) or 'fusec[cuda12]' (CUDA 12 "
                "driver); from a checkout, pip install -e '.[cuda13]'")
_ARCH_RE = re.compile(r"^sm_\d+[af]?$")
_CONTEXT_LINES = 3
_MAX_ERRORS_SHOWN = 3


class CompileError(FusecError):
    """NVRTC rejected a generated kernel. ``log`` is NVRTC's log, ``source`` the source that failed."""

    def __init__(self, message: str, *, log: str = "", source: str = "", arch: str = "", hint: str | None = None):
        self.log = log
        self.source = source
        self.arch = arch
        super().__init__(message, hint=hint)


@dataclass(frozen=True)
class KernelResources:
    """ptxas's report for one entry function (bytes unless said otherwise)."""

    name: str
    registers: int
    stack_frame: int
    spill_stores: int
    spill_loads: int
    shared_memory: int  # static __shared__ memory
    barriers: int

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


@dataclass(frozen=True)
class CompileResult:
    """A cubin, NVRTC's log, and the ptxas report of each kernel (by lowered name)."""

    cubin: bytes
    arch: str
    log: str
    kernels: dict[str, KernelResources] | None  # None: the log carried no ptxas report
    lowered_names: dict[str, str] = field(default_factory=dict)  # name expression -> mangled name

    def kernel(self, name: str) -> KernelResources:
        """The report of kernel ``name``: an ``extern "C"`` name, a name expression or a mangled name."""
        if self.kernels is None:
            raise KeyError(f"no ptxas report in the NVRTC log for {self.arch}")
        return self.kernels[self.lowered_names.get(name, name)]


_INIT_LOCK = threading.RLock()  # the first use of NVRTC: imports and finding the headers, once per process
_CUDA_CORE: tuple[Any, Any] | None = None


# ---- finding cuda_fp16.h -----------------------------------------------------------------------------


def nvrtc_version() -> tuple[int, int]:
    """The (major, minor) version of the NVRTC that :func:`compile_cubin` uses."""
    _cuda_core()  # a clear error when the packages are missing
    return _nvrtc_version()


def _nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    if int(err) != 0:
        raise CompileError(f"nvrtcVersion failed: {err}")
    return major, minor


def _bundled_headers_dir() -> str | None:
    """NVRTC's bundled CUDA headers, extracted to a per-user cache directory (NVRTC >= 13.3), or None."""
    from cuda.bindings import nvrtc

    if not hasattr(nvrtc, "nvrtcInstallBundledHeaders") or _nvrtc_version() < (13, 3):
        return None
    major, minor = _nvrtc_version()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = cache / "fusec" / f"nvrtc-headers-{major}.{minor}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        result = nvrtc.nvrtcInstallBundledHeaders(str(target).encode(), 0)  # 0: skip if already installed
    except (OSError, RuntimeError):
        return None
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0 or not (target / "cuda_fp16.h").is_file():
        return None
    return str(target)


def _toolkit_headers_dir() -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        find_nvidia_header_directory = None
    candidates = []
    if find_nvidia_header_directory is not None:
        try:
            candidates.append(find_nvidia_header_directory("cudart"))
        except Exception:  # pathfinder raises its own errors when nothing is found
            pass
    candidates += [os.path.join(os.environ[v], "include") for v in ("CUDA_PATH", "CUDA_HOME") if os.environ.get(v)]
    candidates.append("/usr/local/cuda/include")
    for d in candidates:
        if d and os.path.isfile(os.path.join(d, "cuda_fp16.h")):
            return d
    return None


def cuda_include_dirs() -> tuple[str, ...]:
    """The include directory that gives NVRTC ``cuda_fp16.h`` (see the module docstring), or ``()``; found once
    per process (under a lock: NVRTC's bundled headers are extracted by one thread)."""
    with _INIT_LOCK:
        return _find_include_dirs()


@functools.lru_cache(maxsize=1)
def _find_include_dirs() -> tuple[str, ...]:
    override = os.environ.get("FUSEC_CUDA_INCLUDE")
    if override:
        return (override,)
    found = _bundled_headers_dir() or _toolkit_headers_dir()
    return (found,) if found else ()


def include_dirs() -> tuple[str, ...]:
    """The include path fusec compiles with: its helper headers (``templates/``, the ``#include`` lines every
    generated source starts with), then the directory that gives ``cuda_fp16.h``."""
    return (templates.header_dir(), *cuda_include_dirs())


def include_options() -> tuple[str, ...]:
    """``-I`` options for CuPy's ``RawModule(options=...)`` so that it finds the same headers."""
    return tuple(f"-I{d}" for d in include_dirs())


# ---- the ptxas report ------------------------------------------------------------------------------------

_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")


def parse_ptxas_report(log: str) -> dict[str, KernelResources] | None:
    """Entry function name -> resources, from ptxas ``-v`` lines in an NVRTC log; None if there are none.

    The lines for one kernel read (NVRTC 13)::

        ptxas info    : Compiling entry function 'k' for 'sm_90'
        ptxas info    : Function properties for k
        ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0]

    Non-inlined device functions get "Function properties" lines too; they are not kernels.
    """
    entries: list[str] = []
    frames: dict[str, tuple[int, int, int]] = {}
    used: dict[str, tuple[int, int, int]] = {}
    current = None  # the function the last "Function properties" line named
    entry = None  # the entry function being compiled
    for line in log.splitlines():
        if m := _ENTRY_RE.search(line):
            entry = m.group(1)
            entries.append(entry)
        elif m := _PROPERTIES_RE.search(line):
            current = m.group(1)
        elif (m := _FRAME_RE.search(line)) and current is not None:
            frames[current] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED_RE.search(line)) and entry is not None:
            smem = int(s.group(1)) if (s := _SMEM_RE.search(line)) else 0
            barriers = int(b.group(1)) if (b := _BARRIERS_RE.search(line)) else 0
            used[entry] = (int(m.group(1)), smem, barriers)
    if not used:
        return None
    report = {}
    for name in entries:
        registers, smem, barriers = used.get(name, (0, 0, 0))
        stack, stores, loads = frames.get(name, (0, 0, 0))
        report[name] = KernelResources(name, registers, stack, stores, loads, smem, barriers)
    return report


# ---- errors -------------------------------------------------------------------------------------------------


def numbered_source(source: str, line: int, context: int = _CONTEXT_LINES) -> str:
    """Lines ``line - context .. line + context`` of ``source``, numbered, with ``>`` at ``line``."""
    lines = source.splitlines()
    lo, hi = max(1, line - context), min(len(lines), line + context)
    width = len(str(hi))
    return "\n".join(f"{'>' if n == line else ' '} {n:>{width}} | {lines[n - 1]}" for n in range(lo, hi + 1))


def _error_lines(log: str) -> list[int]:
    """Source lines of the errors in an NVRTC log, each followed by the template instantiation points
    ("detected during instantiation of ... at line N") that led to it."""
    error = re.compile(rf"^{re.escape(PROGRAM_NAME)}\((\d+)\): (?:catastrophic )?error")
    instantiated = re.compile(r"detected during.* at line (\d+)")
    seen: list[int] = []
    in_error = False
    for line in log.splitlines():
        if m := error.match(line):
            in_error = True
        elif line.startswith(PROGRAM_NAME):
            in_error = False  # a warning or remark
            continue
        elif not (in_error and (m := instantiated.search(line))):
            continue
        n = int(m.group(1))
        if n not in seen:
            seen.append(n)
    return seen


def _compile_error(log: str, source: str, arch: str) -> CompileError:
    log = log.replace("\x00", "").strip()
    parts = [f"NVRTC could not compile the generated kernel for {arch}:", log]
    lines = _error_lines(log)
    for n in lines[:_MAX_ERRORS_SHOWN]:
        parts.append(f"source around line {n}:\n{numbered_source(source, n)}")
    hint = None
    if "cuda_fp16.h" in log and "could not open source file" in log:
        hint = ("NVRTC found no cuda_fp16.h: set FUSEC_CUDA_INCLUDE to a CUDA include directory, or install "
                "NVRTC >= 13.3 (bundled headers) or the CUDA toolkit")
    return CompileError("\n\n".join(parts), log=log, source=source, arch=arch, hint=hint)


# ---- compiling -------------------------------------------------------------------------------------------------


def _cuda_core() -> tuple[Any, Any]:
    """``cuda.core``'s (Program, ProgramOptions), imported once, and the include directories found once, under a
    lock: threads making their first compile at the same time saw a half-imported ``cuda.core`` (an ImportError,
    reported as missing packages) and raced to extract NVRTC's headers."""
    global _CUDA_CORE
    if _CUDA_CORE is not None:
        return _CUDA_CORE
    with _INIT_LOCK:
        if _CUDA_CORE is None:
            try:
                from cuda.core import Program, ProgramOptions
            except ImportError:
                try:
                    from cuda.core.experimental import Program, ProgramOptions
                except ImportError as exc:
                    raise CompileError(
                        "compiling CUDA needs the cuda-core, cuda-bindings and NVRTC packages, which a CPU-only "
                        "install of fusec leaves out",
                        hint=INSTALL_HINT,
                    ) from exc
            cuda_include_dirs()
            _CUDA_CORE = (Program, ProgramOptions)
    return _CUDA_CORE


def compile_cubin(source: str, arch: str = "sm_90", name_expressions: Sequence[str] = ()) -> CompileResult:
    """Compile ``source`` (CUDA C++17) to a cubin for ``arch`` ("sm_90", "sm_80", ...) with NVRTC; no GPU used.

    Returns the cubin, NVRTC's log and the ptxas report per kernel. ``name_expressions`` (e.g.
    ``"reduce<float>"``) are instantiated and their mangled names returned in ``lowered_names``.
    Raises :class:`CompileError` with the log and the numbered source lines around each error.
    """
    if not _ARCH_RE.match(arch):
        raise CompileError(f"{arch!r} is not a GPU architecture", arch=arch, hint="use e.g. 'sm_90' or 'sm_80'")
    Program, ProgramOptions = _cuda_core()
    options = ProgramOptions(
        name=PROGRAM_NAME,
        arch=arch,
        std="c++17",
        ptxas_options=["-v"],
        include_path=list(include_dirs()),
    )
    log = io.StringIO()
    failure = None
    program = Program(source, "c++", options)
    try:
        obj = program.compile("cubin", name_expressions=tuple(name_expressions), logs=log)
    except Exception as exc:  # cuda.core raises NVRTCError with the log in its message
        failure = str(exc)
    finally:
        # close and drop it now: a Program that a CompileError's traceback keeps alive in this frame is
        # later freed by the cycle collector, where cuda.core's __dealloc__ fails (cuda-core 1.2.2)
        program.close()
        del program
    if failure is not None:
        nvrtc_log = failure.split("compilation log:", 1)[1] if "compilation log:" in failure else failure
        raise _compile_error(nvrtc_log, source, arch)
    counters.count("kernels_compiled")
    text = log.getvalue().replace("\x00", "")
    lowered = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in (obj.symbol_mapping or {}).items()}
    return CompileResult(bytes(obj.code), arch, text, parse_ptxas_report(text), lowered)
