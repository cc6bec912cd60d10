"""The supported dtypes and ops list of the docs, rendered from :mod:`fusec.ir.dtypes` and the op
table (:mod:`fusec.ir.ops`), and the list of what does not trace (:mod:`fusec.frontend.hints`).

``docs/ops.md`` holds the output of :func:`ops_markdown` between ``<!-- ops:begin -->`` and
``<!-- ops:end -->``, ``docs/limitations.md`` that of :func:`not_traced_markdown` between
``<!-- not-traced:begin -->`` and ``<!-- not-traced:end -->``; tests check that both are current. After
adding an op or a hint, refresh them with::

    python -m fusec.frontend.ops_doc docs/ops.md docs/limitations.md
"""

from __future__ import annotations

import re
import sys

from fusec.frontend import (
    composite,
    contraction_functions,
    creation_functions,
    elementwise_functions,
    gather_trace,
    hints,
    join_functions,
    scan_functions,
    shift_functions,
    view_functions,
)
from fusec.ir import dtypes
from fusec.ir.ops import OPS, Kind

BEGIN = "<!-- ops:begin -->"
END = "<!-- ops:end -->"
NOT_TRACED_BEGIN = "<!-- not-traced:begin -->"
NOT_TRACED_END = "<!-- not-traced:end -->"
# the pages that hold the generated lists, relative to the repository root (the command's default)
PAGES = ("docs/ops.md", "docs/limitations.md")

_KIND_TEXT = {
    Kind.ELEMENTWISE: "elementwise",
    Kind.REDUCTION: "reductions",
    Kind.SCAN: "scans",
    Kind.LAYOUT: "layout",
    Kind.GATHER: "gathers",
    Kind.CONTRACTION: "contractions",
    Kind.SOURCE: "sources",
}
_KIND_NOTE = {
    Kind.ELEMENTWISE: "NumPy broadcasting; casts are explicit `cast` nodes",
    Kind.REDUCTION: "over `axes`, with `keepdims`; `mean`, `var` and `std` trace to these",
    Kind.SCAN: "inclusive prefixes along one `axis`; `nancumsum`, `nancumprod` and `x.cumsum()` trace to these",
    Kind.LAYOUT: "index remapping only, no data moved",
    Kind.GATHER: ("the array read at integer indices (negative ones wrap; out of range: `IndexError`); "
                  "`x[idx]`, `x[:, i, j]`, `take` and `take_along_axis` trace to it"),
    Kind.CONTRACTION: ("a GEMM computed by cuBLAS, a kernel of its own; `@`, `matmul`, `dot`, `inner`, `tensordot` "
                       "and two-operand `einsum`s trace to it where they run more than 16 loops per element of their "
                       "largest array (a product and a sum below that)"),
    Kind.SOURCE: "read no operand data",
}


def dtypes_markdown() -> str:
    """One Markdown list item naming every supported dtype, with its short name in IR text and ``--arg``."""
    names = [f"`{dt.name}` (`{short}`)" if dt.name != short else f"`{short}`"
             for dt, short in dtypes.SHORT_NAMES.items()]
    return f"- **dtypes** ({len(names)}; NumPy 2 promotion rules, NEP 50): " + ", ".join(names)


def composites_markdown() -> str:
    """One Markdown list item naming the functions traced into several ops (:mod:`fusec.frontend.composite`)."""
    documented = [*composite.DOCUMENTED.items(), *creation_functions.DOCUMENTED.items(),
                  *elementwise_functions.DOCUMENTED.items(), *contraction_functions.DOCUMENTED.items(),
                  *view_functions.DOCUMENTED.items(),
                  *gather_trace.DOCUMENTED.items(), *join_functions.DOCUMENTED.items(),
                  *scan_functions.DOCUMENTED.items(), *shift_functions.DOCUMENTED.items()]
    names = [f"`{module}.{name}`" for module, listed in documented for name in listed]
    return (f"- **functions traced into these ops** ({len(names)}; NumPy's or SciPy's steps, so they fuse like "
            "the ops; CuPy's and `cupyx.scipy.special`'s of the same names too): " + ", ".join(names))


def not_traced_markdown() -> str:
    """One Markdown list item with a sub-item per hint of :data:`fusec.frontend.hints.FUNCTION_HINTS`: what does
    not trace (functions, methods and attributes by name), and what to write instead."""
    by_hint: dict[str, list[str]] = {}
    for name, hint in hints.FUNCTION_HINTS.items():
        by_hint.setdefault(hint, []).append(name)
    lines = ["- **not traced, and what to write instead** (the hints of the tracer's errors):"]
    lines += [f"  - {', '.join(f'`{n}`' for n in names)}: {hint}" for hint, names in by_hint.items()]
    return "\n".join(lines)


def ops_markdown() -> str:
    """The dtypes item, then one Markdown list item per op kind naming each op of that kind (IR names,
    table order), then the functions traced into them. What does not trace is :func:`not_traced_markdown`."""
    lines = [dtypes_markdown()]
    for kind, title in _KIND_TEXT.items():
        names = [op.name for op in OPS.values() if op.kind is kind]
        lines.append(f"- **{title}** ({len(names)}; {_KIND_NOTE[kind]}): " + ", ".join(f"`{n}`" for n in names))
    lines.append(composites_markdown())
    return "\n".join(lines)


def _pattern(begin: str, end: str) -> re.Pattern[str]:
    return re.compile(re.escape(begin) + r"\n(.*?)\n?" + re.escape(end), re.DOTALL)


# each generated block: its markers, their pattern, and the function that renders it
_BLOCKS = ((BEGIN, END, _pattern(BEGIN, END), ops_markdown),
           (NOT_TRACED_BEGIN, NOT_TRACED_END, _pattern(NOT_TRACED_BEGIN, NOT_TRACED_END), not_traced_markdown))


def ops_block(text: str) -> str | None:
    """The text between the ops markers of a page, or None when the markers are missing."""
    m = _BLOCKS[0][2].search(text)
    return m.group(1) if m else None


def not_traced_block(text: str) -> str | None:
    """The text between the not-traced markers of a page, or None when the markers are missing."""
    m = _BLOCKS[1][2].search(text)
    return m.group(1) if m else None


def update_page(path: str) -> bool:
    """Rewrite the generated blocks (ops, not traced) the page at ``path`` holds; True if the file changed.
    A page holding neither is an error."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    new = text
    found = False
    for begin, end, pattern, render in _BLOCKS:
        if pattern.search(new) is None:
            continue
        found = True
        new = pattern.sub(lambda _, b=begin, e=end, r=render: f"{b}\n{r()}\n{e}", new, count=1)
    if not found:
        raise ValueError(f"{path} has no '{BEGIN}' ... '{END}' block, nor a '{NOT_TRACED_BEGIN}' ... "
                         f"'{NOT_TRACED_END}' one")
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    """``python -m fusec.frontend.ops_doc [PAGE ...]``: regenerate the lists in place; one-line errors."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fusec.frontend.ops_doc",
                                     description="Regenerate the dtypes and ops list between a page's "
                                                 f"'{BEGIN}' and '{END}' lines from the op table, and the list "
                                                 f"of what does not trace between '{NOT_TRACED_BEGIN}' and "
                                                 f"'{NOT_TRACED_END}' from the tracer's hints.")
    parser.add_argument("pages", nargs="*", default=list(PAGES), metavar="PAGE",
                        help=f"the files to update (default: {' '.join(PAGES)}, from the repository root)")
    status = 0
    for target in parser.parse_args(argv).pages:
        try:
            changed = update_page(target)
        except (OSError, ValueError) as exc:
            print(f"{parser.prog}: error: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"{target}: {'updated' if changed else 'already current'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
