"""The disk cache of autotuning winners: a schedule per (device name, region, layouts), shared by processes.

``$FUSEC_TUNE_CACHE`` (default ``$XDG_CACHE_HOME/fusec/tune``, that is ``~/.cache/fusec/tune``) holds one
entry per tuned kernel, named by the SHA-256 of its key (:func:`tune_key`): the device's name, the CUDA
source of the region's kernel under the heuristics' schedule (which pins the region's ops, dtypes and
which accesses are contiguous, broadcast or aligned, and changes whenever fusec's code generation does),
and each input's shape, strides and alignment. The entry holds the winning schedule's text (which
:func:`fusec.kinds.parse_schedule` reads back into that very schedule) and the times measured.

The trust rules are the cubin cache's, with its code (:mod:`fusec.runtime.cubin_cache`): a directory of this user's
(created ``0700``) that is not a symbolic link and that no one else can write to (never ``chmod``-ed: one that
fails is named in a warning and not used), a per-directory secret ``cache.key`` (``0600``), every entry
HMAC-signed under it for its own name, files opened without following links and written atomically. An
entry that fails any check (tampered, foreign, truncated, another format) is ignored: the kernel is tuned
again and the entry overwritten. A directory that cannot be trusted is not used: every process tunes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusec.runtime.cubin_cache import pack_signed, read_private, trusted_dir, unpack_signed, write_private

TUNE_MAGIC = b"fusec-tune 1\n"
_MAX_ENTRY_BYTES = 1 << 20
_PURPOSE = "the tune cache ($FUSEC_TUNE_CACHE)"


def tune_dir() -> Path:
    """``$FUSEC_TUNE_CACHE``, else ``$XDG_CACHE_HOME/fusec/tune`` (default ``~/.cache/fusec/tune``)."""
    override = os.environ.get("FUSEC_TUNE_CACHE")
    if override:
        return Path(override)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusec" / "tune"


def tune_key(device_name: str, heuristic_source: str, layouts: Sequence[tuple[Any, ...]]) -> str:
    """The key of one kernel's tuning: SHA-256 over the device name, the kernel's source under the heuristics'
    schedule, and its inputs' (shape, strides, alignment)."""
    text = json.dumps([device_name, heuristic_source, [list(map(_plain, x)) for x in layouts]])
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def entry_name(key: str) -> str:
    return f"{key}.tune"


@dataclass(frozen=True)
class TuneEntry:
    """What the cache keeps for one kernel: the winner's schedule text, the device, and the candidates' times
    (schedule text -> milliseconds; None for a candidate refused: its results differed, or it failed)."""

    key: str
    schedule: str
    device: str
    times: Mapping[str, float | None]

    def payload(self) -> bytes:
        return json.dumps({"key": self.key, "schedule": self.schedule, "device": self.device,
                           "times": dict(self.times)}, sort_keys=True).encode()


def load(key: str) -> TuneEntry | None:
    """The entry of ``key``, or None when there is none, or it is not whole and signed by this cache, or the
    cache cannot be trusted."""
    trusted = trusted_dir(tune_dir(), _PURPOSE)
    if trusted is None:
        return None
    directory, secret = trusted
    name = entry_name(key)
    data = read_private(directory / name, _MAX_ENTRY_BYTES)
    payload = None if data is None else unpack_signed(TUNE_MAGIC, data, secret, name)
    if payload is None:
        return None
    try:
        fields = json.loads(payload)
        entry = TuneEntry(fields["key"], fields["schedule"], fields["device"], dict(fields["times"]))
    except (ValueError, KeyError, TypeError):
        return None
    return entry if entry.key == key and isinstance(entry.schedule, str) else None


def store(entry: TuneEntry) -> bool:
    """Write (or overwrite) ``entry``, signed, atomically; False when the cache cannot be trusted or the write
    fails (the winner then lives only in this process)."""
    trusted = trusted_dir(tune_dir(), _PURPOSE)
    if trusted is None:
        return False
    directory, secret = trusted
    name = entry_name(entry.key)
    try:
        write_private(directory, name, pack_signed(TUNE_MAGIC, entry.payload(), secret, name))
    except OSError:
        return False
    return True


__all__ = ["TUNE_MAGIC", "TuneEntry", "entry_name", "load", "store", "tune_dir", "tune_key"]
