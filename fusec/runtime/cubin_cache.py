"""The disk cache of compiled kernels: cubins keyed by GPU architecture and source, shared by processes.

``cached_cubin(source, arch)`` returns the cubin of a kernel source for ``arch`` (``"sm_90"``): read from
``$FUSEC_CUBIN_CACHE`` (default ``$XDG_CACHE_HOME/fusec/cubin``, that is ``~/.cache/fusec/cubin``), or
compiled with NVRTC (:func:`fusec.codegen.nvrtc.compile_cubin`, no GPU needed) and stored. :func:`precompile`
fills the cache for many sources in parallel processes (the fuzzer's corpus, warm-ups). The runtime
(:mod:`fusec.runtime.launch`) loads the cubins.

What is trusted: only entries this user's fusec wrote. The cache directory is created ``0700`` and used only
when it is a real directory (not a symbolic link) owned by the current user and writable by no one else; the
mode of an existing directory is never changed (``FUSEC_CUBIN_CACHE=/tmp`` must not lock others out of
``/tmp``), one that fails these checks is named in a warning on the ``fusec`` logger. It holds a per-user secret,
``cache.key`` (32 random bytes, created ``0600``, used only when owned by the user and readable by no one
else). Each entry is a header (magic line, the cubin's length, HMAC-SHA256 under that secret of the entry's
name and the cubin) and the cubin: an entry written by anyone without the secret (a foreign cubin under the
right name, a bare ELF file, an entry of an older format), truncated or corrupt, is compiled again and
overwritten, never loaded. Files are opened without following symbolic links; writes go to a temporary file
(``O_EXCL``, a name of fusec's own making) renamed over the entry, and the temporary file is removed when a
write fails (a full disk). A directory that fails these checks is not used at all: kernels are compiled
each time. Copying the whole directory (with its ``cache.key``) to another machine keeps it valid there.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import string
import struct
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from fusec.support import counters, logs


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
# and the HMAC-SHA256 (under the cache's secret) of the entry's file name and the cubin.
CUBIN_MAGIC = b"fusec-cubin 2\n"
CUBIN_HEADER = struct.Struct("<Q32s")
KEY_NAME = "cache.key"
KEY_BYTES = 32
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def dir_problem(path: Path) -> str | None:
    """Why fusec keeps no files in the directory ``path`` as it is now, or None when it may: ``"missing"``, or
    it is a symbolic link, not a directory, another user's, or writable by other users (group or world: they
    could replace or remove what fusec keeps there). fusec never changes the mode of an existing directory, so
    the user decides who shares it."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if not hasattr(os, "getuid"):  # Windows: no POSIX owner or mode bits to read (ACLs decide)
        return None
    if info.st_uid != os.getuid():
        return "another user owns it"
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        return (f"other users can write to it (mode {mode:04o}); fusec does not change an existing directory's "
                f"mode: remove their write permission (chmod go-w) or choose a directory of your own")
    return None


_REPORTED: set[tuple[str, str]] = set()


def owned_dir(path: Path, purpose: str = "fusec's files") -> Path | None:
    """``path`` as a directory fusec may keep files in: created ``0700`` if missing (its missing parents with
    the default mode); an existing one is used as it is, never ``chmod``-ed, when :func:`dir_problem` finds
    nothing wrong with it. None when it cannot be used (a symbolic link, a file, another user's, writable by
    others, no permission): then a warning on the ``fusec`` logger, once per directory and reason, says why
    ``purpose`` (``"the cubin cache"``) is not kept there."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        problem = dir_problem(path)
    except OSError as exc:
        problem = f"cannot create it ({exc.strerror})"
    if problem is None:
        return path
    if (str(path), problem) not in _REPORTED:
        _REPORTED.add((str(path), problem))
        logs.warn("fusec does not keep %s in %s: %s", purpose, path, problem)
    return None


def failed_sources_dir() -> Path | None:
    """Where the source of a kernel that did not compile is written for the user to read: ``failed-kernels``
    beside the cache directory's default place (``~/.cache/fusec/failed-kernels``), a directory of
    :func:`owned_dir`; None when there is none to use."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusec"
    return owned_dir(base / "failed-kernels", "the sources of kernels that did not compile")


def read_private(path: Path, limit: int) -> bytes | None:
    """The bytes of the regular file ``path`` (at most ``limit``), opened without following a symbolic link;
    None when it is missing, a link, not a regular file, or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _BINARY)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


_NAME_LIMIT = 120  # characters of an entry's name: with a temporary file's suffix, well under 255 bytes
_NAME_TAIL = 48  # characters kept from the end of a long name: a dump's kernel, digest and ``.cu``


_NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_.-")


def _safe_name(name: str) -> str:
    """``name`` as one file name of fusec's own: letters, digits, ``_``, ``-`` and ``.`` only, no leading dot,
    at most 120 characters (``../x`` becomes ``_.._x``). A longer name keeps its start and its last 48
    characters (the extension, and a dump's kernel name and digest) around the SHA-256 of the whole name, so
    two long names that differ anywhere stay two files."""
    cleaned = "".join(c if c in _NAME_CHARACTERS else "_" for c in name)
    if not cleaned or cleaned.startswith("."):
        cleaned = "_" + cleaned
    if len(cleaned) > _NAME_LIMIT:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        head = _NAME_LIMIT - _NAME_TAIL - len(digest) - 2
        cleaned = f"{cleaned[:head]}-{digest}-{cleaned[-_NAME_TAIL:]}"
    return cleaned


def write_private(directory: Path, name: str, data: bytes, *, replace: bool = True) -> Path:
    """Write ``data`` to ``directory / name`` (``name`` sanitized, ``directory`` one of :func:`owned_dir`)
    atomically: a new temporary file (``O_EXCL``, never following a link, ``0600``) renamed over the target;
    the temporary file is removed if anything fails. ``replace=False`` leaves an existing target as it is.
    Raises OSError."""
    target = directory / _safe_name(name)
    tmp = directory / f".{target.name}.{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if replace:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)  # fails if the target exists: never overwrites
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if not replace:
        os.unlink(tmp)
    return target


def cache_key(directory: Path) -> bytes | None:
    """The secret of the cache in ``directory`` (a directory of :func:`owned_dir`), created if missing; None when
    it cannot be trusted (not a regular file of this user readable by no one else, or of the wrong size)."""
    path = directory / KEY_NAME
    for _ in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _BINARY)
        except FileNotFoundError:
            try:
                write_private(directory, KEY_NAME, secrets.token_bytes(KEY_BYTES), replace=False)
            except FileExistsError:
                pass  # another process made it first: read theirs
            except OSError:
                return None
            continue
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if (not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) & 0o077
                    or (hasattr(os, "getuid") and info.st_uid != os.getuid())):
                return None
            key = os.read(fd, KEY_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        return key if len(key) == KEY_BYTES else None
    return None


def trusted_dir(path: Path, purpose: str = "fusec's cache") -> tuple[Path, bytes] | None:
    """``path`` as a fusec cache directory (:func:`owned_dir`, which warns when it refuses it) and its secret
    (:func:`cache_key`), or None when it cannot be trusted (then nothing is cached there)."""
    directory = owned_dir(path, purpose)
    if directory is None:
        return None
    key = cache_key(directory)
    return (directory, key) if key is not None else None


def _mac(key: bytes, name: str, cubin: bytes) -> bytes:
    return hmac.new(key, name.encode() + b"\0" + cubin, hashlib.sha256).digest()


def pack_signed(magic: bytes, payload: bytes, key: bytes, name: str) -> bytes:
    """A signed entry of a fusec cache (cubins here, :mod:`fusec.runtime.tune_cache`'s schedules): ``magic`` (the
    format's line), the payload's length, the HMAC-SHA256 under the cache's ``key`` of the entry's file
    ``name`` and the payload, then the payload."""
    return magic + CUBIN_HEADER.pack(len(payload), _mac(key, name, payload)) + payload


def unpack_signed(magic: bytes, data: bytes, key: bytes, name: str) -> bytes | None:
    """The payload of the signed entry ``name`` (see :func:`pack_signed`), or None unless it is whole, of the
    format ``magic`` and signed with ``key`` for that name."""
    start = len(magic) + CUBIN_HEADER.size
    if not data.startswith(magic) or len(data) < start:
        return None
    length, mac = CUBIN_HEADER.unpack_from(data, len(magic))
    payload = data[start:]
    if len(payload) != length or not hmac.compare_digest(mac, _mac(key, name, payload)):
        return None
    return payload


def pack_cubin(cubin: bytes, key: bytes, name: str) -> bytes:
    """The cache entry ``name`` (its file name) holding ``cubin``, signed with the cache's ``key``."""
    return pack_signed(CUBIN_MAGIC, cubin, key, name)


def unpack_cubin(data: bytes, key: bytes, name: str) -> bytes | None:
    """The cubin of the cache entry ``name``, or None unless it is whole and signed with ``key`` for that name
    (a bare ELF file, an older format, a foreign or corrupt entry)."""
    cubin = unpack_signed(CUBIN_MAGIC, data, key, name)
    return cubin if cubin is not None and elf_complete(cubin) else None


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


_MAX_ENTRY_BYTES = 1 << 30


def _trusted_cache() -> tuple[Path, bytes] | None:
    """The cubin cache's directory and its secret, or None when it cannot be trusted."""
    return trusted_dir(cubin_dir(), "the cubin cache ($FUSEC_CUBIN_CACHE)")


def read_cubin(path: Path) -> bytes | None:
    """The cubin stored at ``path`` (an entry of the cache directory), or None when there is none, or it is not
    whole and signed by this cache (see the module docstring), or the cache cannot be trusted."""
    trusted = _trusted_cache()
    if trusted is None or path.parent != trusted[0]:
        return None
    data = read_private(path, _MAX_ENTRY_BYTES)
    return None if data is None else unpack_cubin(data, trusted[1], path.name)


def is_cached(source: str, arch: str) -> bool:
    """Whether the cache holds a sound cubin of ``source`` for ``arch``."""
    return read_cubin(cubin_path(source, arch)) is not None


def compile_and_store(source: str, arch: str) -> bytes:
    """Compile ``source`` with NVRTC and write (or overwrite) its cache entry, atomically (a temporary file
    of its own, renamed over the entry; removed if the write fails). Nothing is stored where the cache cannot
    be trusted."""
    from fusec.codegen.nvrtc import compile_cubin

    path = cubin_path(source, arch)
    cubin = compile_cubin(source, arch).cubin
    trusted = _trusted_cache()
    if trusted is not None:
        try:
            write_private(trusted[0], path.name, pack_cubin(cubin, trusted[1], path.name))
        except OSError:
            pass
    return cubin


def cached_cubin(source: str, arch: str, name: str | None = None) -> tuple[bytes, int]:
    """The cubin of ``source`` for ``arch`` from the disk cache, or compiled (with NVRTC) and cached;
    and 1 when it was compiled, else 0. An entry not whole and signed by this cache is compiled again and
    overwritten. ``name`` (the kernel's) is for the ``fusec.compile`` log; a hit counts as a disk hit
    (:mod:`fusec.support.counters`)."""
    start = time.perf_counter()
    path = cubin_path(source, arch)
    cubin = read_cubin(path)
    if cubin is not None:
        counters.count("disk_hits")
        if logs.on("compile"):
            logs.emit("compile", "%s (%s): disk cache hit, %s (%.3f s)", name or "kernel", arch, path.name[:16],
                      time.perf_counter() - start)
        return cubin, 0
    cubin = compile_and_store(source, arch)
    if logs.on("compile"):
        logs.emit("compile", "%s (%s): compiled with NVRTC in %.3f s (disk cache miss, stored as %s)",
                  name or "kernel", arch, time.perf_counter() - start, path.name[:16])
    return cubin, 1


def compiled_with_cupy(name: str, seconds: float) -> None:
    """Count and log a kernel compiled by CuPy's compiler (``FUSEC_COMPILER=cupy``; CuPy's own disk cache)."""
    counters.count("kernels_compiled")
    if logs.on("compile"):
        logs.emit("compile", "%s: compiled with CuPy in %.3f s (CuPy's own cache)", name, seconds)


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
