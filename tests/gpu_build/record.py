"""What a build-only session built: every kernel recipe (its source and kind), for the summary the plugin prints at
the end and for the check that a sample covered every kernel kind."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fusec.kinds import KINDS as KERNEL_KINDS

KINDS = tuple(KERNEL_KINDS)  # fusec's kernel kinds: pointwise, reduce-all, rows, cols, scan (a test may add its own)


@dataclass
class Session:
    sources: set[bytes] = field(default_factory=set)  # digests of the distinct kernel sources
    kinds: Counter = field(default_factory=Counter)  # kind -> distinct sources
    recipes: int = 0


SESSION = Session()
_LOCK = threading.Lock()


def kernel_built(recipe: Any) -> None:
    """A launch recipe was built (its kernel generated and compiled)."""
    with _LOCK:
        SESSION.recipes += 1
        digest = hashlib.sha256(recipe.source.encode()).digest()
        if digest not in SESSION.sources:
            SESSION.sources.add(digest)
            SESSION.kinds[recipe.spec.kind] += 1


def library_built(call: Any, kind: str) -> None:
    """A library's call was prepared for a region of ``kind`` (a matmul's GEMM: nothing compiled)."""
    with _LOCK:
        SESSION.recipes += 1
        digest = hashlib.sha256(call.source.encode()).digest()
        if digest not in SESSION.sources:
            SESSION.sources.add(digest)
            SESSION.kinds[kind] += 1


def missing_kinds() -> list[str]:
    """The kernel kinds no recipe of the session had."""
    return [k for k in KINDS if not SESSION.kinds[k]]


def summary() -> str:
    kinds = ", ".join(f"{k} {SESSION.kinds[k]}" for k in dict.fromkeys([*KINDS, *SESSION.kinds]))
    return (f"{SESSION.recipes} launch recipes built, {len(SESSION.sources)} distinct kernel sources generated and "
            f"compiled for sm_90 (by kind: {kinds})")
