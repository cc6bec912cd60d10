"""The disk cache of compiled kernels: cubins keyed by GPU architecture and source, shared by processes.

``cached_cubin(source, arch)`` returns the cubin of a kernel source for ``arch`` (``"sm_90"``): read from
``$FUSEC_CUBIN_CACHE`` (default ``$XDG_CACHE_HOME/fusec/cubin``, that is ``~/.cache/fusec/cubin``), or
compiled with NVRTC (:func:`fusec.codegen.nvrtc.compile_cubin`, no GPU needed) and stored. Each entry
carries its length and SHA-256, so a truncated or corrupt file is compiled again and overwritten; writes go
to a temporary file renamed over the entry. :func:`precompile` fills the cache for many sources in parallel
processes (the fuzzer's corpus, warm-ups). The runtime (:mod:`fusec.runtime`) loads the cubins.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path


def cubin_dir() -> Path:
    """``$FUSEC_CUBIN_CACHE``, else ``$XDG_CACHE_HOME/fusec/cubin`` (default ``~/.cache/fusec/cubin``)."""
    override = os.environ.get("FUSEC_CUBIN_CACHE")
    if override:
        return Path(override)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusec" / "cubin"


def cubin_path(source: str, arch: str) -> Path:
    # keyed by arch and source only (not by this machine's include dirs), so a cache filled on one
    # machine (say a CPU-only one, with :func:`precompile`) serves another
    digest = hashlib.sha256(f"{arch}\0{source}".encode()).hexdigest()
    return cubin_dir() / f"{digest}.cubin"


# A cache entry is a header, then the cubin: the magic line, the cubin's length (8 bytes, little-endian)
# and its SHA-256, so that a truncated or corrupt file is caught before the driver sees it.
CUBIN_MAGIC = b"fusec-cubin 1\n"
CUBIN_HEADER = struct.Struct("<Q32s")


def pack_cubin(cubin: bytes) -> bytes:
    return CUBIN_MAGIC + CUBIN_HEADER.pack(len(cubin), hashlib.sha256(cubin).digest()) + cubin


def unpack_cubin(data: bytes) -> bytes | None:
    """The cubin of a cache entry, or None when the entry is truncated or corrupt. A bare cubin (written
    before entries had a header) is accepted when its ELF tables end inside the file."""
    if data.startswith(CUBIN_MAGIC):
        start = len(CUBIN_MAGIC) + CUBIN_HEADER.size
        if len(data) < start:
            return None
        length, digest = CUBIN_HEADER.unpack_from(data, len(CUBIN_MAGIC))
        cubin = data[start:]
        return cubin if len(cubin) == length and hashlib.sha256(cubin).digest() == digest else None
    return data if elf_complete(data) else None


def elf_complete(data: bytes) -> bool:
    """Whether ``data`` is a 64-bit little-endian ELF file whose header, program and section tables and
    sections all lie inside it (a truncated file fails: a cubin's tables end at its last byte)."""
    if len(data) < 64 or data[:6] != b"\x7fELF\x02\x01":
        return False
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    end = max(64, phoff + phnum * phentsize, shoff + shnum * shentsize)
    if end > len(data) or (shnum and shentsize < 64):  # 64: the size of an ELF64 section header
        return False
    for i in range(shnum):
        kind, _, _, offset, size = struct.unpack_from("<4xIQQQQ", data, shoff + i * shentsize)
        if kind != 8 and offset + size > len(data):  # 8: SHT_NOBITS, no bytes in the file
            return False
    return True


def read_cubin(path: Path) -> bytes | None:
    """The cubin stored at ``path``, or None when there is none or it is truncated or corrupt."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return unpack_cubin(data)


def is_cached(source: str, arch: str) -> bool:
    """Whether the cache holds a sound cubin of ``source`` for ``arch``."""
    return read_cubin(cubin_path(source, arch)) is not None


def compile_and_store(source: str, arch: str) -> bytes:
    """Compile ``source`` with NVRTC and write (or overwrite) its cache entry, atomically (a temporary file
    per process and thread, renamed over the entry)."""
    from fusec.codegen.nvrtc import compile_cubin

    path = cubin_path(source, arch)
    cubin = compile_cubin(source, arch).cubin
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
        tmp.write_bytes(pack_cubin(cubin))
        tmp.replace(path)
    except OSError:
        pass
    return cubin


def cached_cubin(source: str, arch: str) -> tuple[bytes, int]:
    """The cubin of ``source`` for ``arch`` from the disk cache, or compiled (with NVRTC) and cached;
    and 1 when it was compiled, else 0. A truncated or corrupt entry is compiled again and overwritten."""
    cubin = read_cubin(cubin_path(source, arch))
    if cubin is not None:
        return cubin, 0
    return compile_and_store(source, arch), 1


def _compile_one(job: tuple[str, str]) -> int:
    return cached_cubin(*job)[1]


def precompile(sources: Iterable[str], arch: str, workers: int | None = None) -> int:
    """Compile ``sources`` for ``arch`` (``"sm_90"``) into the cubin cache of the ``"nvrtc"`` compiler, in
    parallel processes (NVRTC only: no GPU is touched); returns how many were compiled (not cached).

    A launcher with ``compiler="nvrtc"`` then loads them without compiling (tests and warm-ups)."""
    import concurrent.futures
    import multiprocessing

    jobs = [(s, arch) for s in dict.fromkeys(sources) if not is_cached(s, arch)]
    if not jobs:
        return 0
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if workers == 1:
        return sum(_compile_one(j) for j in jobs)
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        return sum(pool.map(_compile_one, jobs, chunksize=1))
