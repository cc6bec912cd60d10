"""Passes and the pipeline that runs them.

A pass is a pure function ``Graph -> Graph`` with a name and a one-line summary; it returns the
very same Graph object when it changes nothing. The pipeline runs passes in order, verifies the
graph after each one, and can hand each intermediate graph to a ``dump`` callback (``fusec opt
--dump``; ``explain`` uses it to show the IR before and after).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fusec.ir.graph import Graph
from fusec.ir.verify import verify
from fusec.passes import canonicalize, cse, dce, fold, fuse  # noqa: F401  (importing them registers their passes)
from fusec.passes.registry import PASSES, Pass, register  # noqa: F401  (the names tests and passes import)
from fusec.support.errors import FusecValueError

# The default pipeline: cleanup first, then fusion.
DEFAULT_PIPELINE = ("canonicalize", "fold", "cse", "dce", "fuse")
CLEANUP_PIPELINE = ("canonicalize", "fold", "cse", "dce")
# fusion turned off (``fusec.fuse(f, fusion=False)``, ``FUSEC_DISABLE_FUSION=1``): one kernel per op
UNFUSED_PIPELINE = (*CLEANUP_PIPELINE, "unfuse")


def get_pass(name: str) -> Pass:
    try:
        return PASSES[name]
    except KeyError:
        known = ", ".join(sorted(PASSES))
        raise FusecValueError(f"unknown pass '{name}'", hint=f"passes: {known}") from None


def run_pipeline(graph: Graph, names: Iterable[str] = DEFAULT_PIPELINE, *, check: bool = True,
                 dump: Callable[[str, Graph], None] | None = None) -> Graph:
    """Run the named passes in order, verifying after each (``check``), calling ``dump(name, g)``."""
    passes = [get_pass(n) for n in names]
    if check:
        verify(graph)
    for p in passes:
        before, graph = graph, p(graph)
        if check and graph is not before:  # a pass that changed nothing returns its input, verified already
            verify(graph)
        if dump is not None:
            dump(p.name, graph)
    return graph


def optimize_text(text: str, passes: Iterable[str] | str = DEFAULT_PIPELINE, filename: str | None = None, *,
                  check: bool = True, dump: Callable[[str, Graph], None] | None = None) -> str:
    """Parse IR ``text`` (one ``func``), run ``passes`` (names, or ``"a,b,c"``), print the result.

    The one code path of ``fusec opt`` and of the ``tests/passes/cases/*.fir`` driver: ``parse``
    (a :class:`ParseError` naming ``filename`` and the line for bad text), :func:`run_pipeline`
    (verifying before and after each pass unless ``check`` is false; ``dump`` as there), then
    ``print_graph``. Unknown pass names fail before the text is parsed.
    """
    from fusec.ir.printer import print_graph
    from fusec.ir.text import parse

    names = [n.strip() for n in passes.split(",") if n.strip()] if isinstance(passes, str) else list(passes)
    for name in names:
        get_pass(name)
    graph = parse(text, filename=filename)
    return print_graph(run_pipeline(graph, names, check=check, dump=dump))
