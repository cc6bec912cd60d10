"""The table of passes: each pass module registers its passes here with :func:`register`; ``passes/manager.py``
imports the modules (so registers them all) and runs pipelines of them by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fusec.ir.graph import Graph


@dataclass(frozen=True)
class Pass:
    name: str
    summary: str
    run: Callable[[Graph], Graph]

    def __call__(self, graph: Graph) -> Graph:
        return self.run(graph)


PASSES: dict[str, Pass] = {}


def register(name: str, summary: str) -> Callable[[Callable[[Graph], Graph]], Callable[[Graph], Graph]]:
    """Decorator: make ``fn`` the pass called ``name``."""

    def wrap(fn: Callable[[Graph], Graph]) -> Callable[[Graph], Graph]:
        PASSES[name] = Pass(name, summary, fn)
        return fn

    return wrap
