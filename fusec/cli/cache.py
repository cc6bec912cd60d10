"""``fusec cache``: where the disk cache of compiled kernels is, how many entries and bytes it holds, and
``fusec cache clear`` to empty it.

The cache is :mod:`fusec.runtime.cubin_cache`'s (``$FUSEC_CUBIN_CACHE``, default ``~/.cache/fusec/cubin``) and its
trust rules hold here too: a directory that is a symbolic link, not a directory, another user's, or
writable by other users is reported and left alone; ``clear`` removes only the entries fusec names
(``<sha256>.cubin``) and its temporary files, each a regular file, never following a link; the cache's
secret (``cache.key``) stays.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusec.runtime.cubin_cache import KEY_NAME, cubin_dir, dir_problem

_ENTRY = re.compile(r"^[0-9a-f]{64}\.cubin$")
_TEMPORARY = re.compile(r"^\.[0-9a-f]{64}\.cubin\..+\.tmp$")


@dataclass(frozen=True)
class DiskCache:
    """What the cubin cache directory holds."""

    path: Path
    state: str  # "ok", "missing", or why fusec does not use it
    entries: int
    nbytes: int

    def __str__(self) -> str:
        lines = [f"cubin cache: {self.path}"]
        if self.state == "missing":
            lines.append("  not created yet (the first GPU compile creates it)")
        elif self.state != "ok":
            lines.append(f"  not used: {self.state}")
        else:
            lines.append(f"  {self.entries} compiled kernel(s), {_size(self.nbytes)}")
        lines.append("  (set FUSEC_CUBIN_CACHE to move it; `fusec cache clear` empties it)")
        return "\n".join(lines)


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit} ({nbytes} B)"
    return f"{nbytes} B"


def _state(path: Path) -> str:
    return dir_problem(path) or "ok"


def _files(path: Path, pattern: re.Pattern[str]) -> list[tuple[Path, int]]:
    """Regular files (not links) in ``path`` whose names match ``pattern``, with their sizes."""
    out = []
    with os.scandir(path) as it:
        for entry in it:
            if pattern.match(entry.name) and entry.is_file(follow_symlinks=False):
                out.append((Path(entry.path), entry.stat(follow_symlinks=False).st_size))
    return sorted(out)


def inspect_cache(path: Path | None = None) -> DiskCache:
    """The cubin cache at ``path`` (default: where fusec keeps it)."""
    path = cubin_dir() if path is None else path
    state = _state(path)
    if state != "ok":
        return DiskCache(path, state, 0, 0)
    found = _files(path, _ENTRY)
    return DiskCache(path, state, len(found), sum(size for _, size in found))


def clear_cache(path: Path | None = None) -> tuple[int, int]:
    """Remove the cache's entries and temporary files (see the module docstring); returns (entries removed,
    bytes freed). Raises OSError for a directory fusec does not use."""
    path = cubin_dir() if path is None else path
    state = _state(path)
    if state == "missing":
        return 0, 0
    if state != "ok":
        raise OSError(f"the cubin cache '{path}' is not fusec's to clear: {state}")
    removed = freed = 0
    for pattern in (_ENTRY, _TEMPORARY):
        for file, size in _files(path, pattern):
            try:
                file.unlink()
            except FileNotFoundError:
                continue
            removed += pattern is _ENTRY
            freed += size
    return removed, freed


def cmd_cache(args: argparse.Namespace) -> int:
    if args.action == "clear":
        before = inspect_cache()
        removed, freed = clear_cache()
        print(f"cleared {before.path}: {removed} compiled kernel(s), {_size(freed)} freed (its {KEY_NAME} kept)")
        return 0
    print(inspect_cache())
    return 0


def add_parser(sub: Any) -> None:
    """The ``cache`` subcommand, on the command line's subparsers ``sub``."""
    cache = sub.add_parser("cache", help="show the disk cache of compiled kernels, or clear it",
                           description="Show where fusec keeps compiled kernels (cubins) across processes "
                                       "($FUSEC_CUBIN_CACHE, default ~/.cache/fusec/cubin), how many and how many "
                                       "bytes; `fusec cache clear` removes them (the next call compiles again).")
    cache.add_argument("action", nargs="?", choices=("show", "clear"), default="show",
                       help="show (default) or clear")
    cache.set_defaults(run=cmd_cache)


__all__ = ["DiskCache", "clear_cache", "inspect_cache"]
