"""What a build-only session built: every kernel recipe (its source, kind and the test that built it), for the
summary the plugin prints at the end and for the check that a sample covered every kernel kind."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fusec.codegen.render import TEMPLATES

KINDS = tuple(TEMPLATES)  # the kernel kinds fusec generates: pointwise, reduce-all, rows, cols, scan


@dataclass
class Session:
    sources: set[str] = field(default_factory=set)
    kinds: Counter = field(default_factory=Counter)  # kind -> distinct sources
    recipes: int = 0
    tests_by_kind: dict[str, str] = field(default_factory=dict)  # kind -> the first test that built one
    current_test: str = ""


SESSION = Session()
_LOCK = threading.Lock()


def kernel_built(recipe: Any) -> None:
    """A launch recipe was built (its kernel generated and compiled)."""
    with _LOCK:
        SESSION.recipes += 1
        if recipe.source not in SESSION.sources:
            SESSION.sources.add(recipe.source)
            SESSION.kinds[recipe.spec.kind] += 1
            SESSION.tests_by_kind.setdefault(recipe.spec.kind, SESSION.current_test)


def missing_kinds() -> list[str]:
    """The kernel kinds no recipe of the session had."""
    return [k for k in KINDS if not SESSION.kinds[k]]


def summary() -> str:
    kinds = ", ".join(f"{k} {SESSION.kinds[k]}" for k in KINDS)
    return (f"{SESSION.recipes} launch recipes built, {len(SESSION.sources)} distinct kernel sources generated and "
            f"compiled for sm_90 (by kind: {kinds})")
