"""The supported dtypes and ops list of the README, rendered from :mod:`fusec.ir.dtypes` and the op
table (:mod:`fusec.ir.ops`).

``README.md`` holds the output of :func:`ops_markdown` between ``<!-- ops:begin -->`` and
``<!-- ops:end -->``; a test checks that it is current. After adding an op, refresh it with::

    python -m fusec.frontend.ops_doc README.md
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

_KIND_TEXT = {
    Kind.ELEMENTWISE: "elementwise",
    Kind.REDUCTION: "reductions",
    Kind.SCAN: "scans",
    Kind.LAYOUT: "layout",
    Kind.GATHER: "gathers",
    Kind.SOURCE: "sources",
}
_KIND_NOTE = {
    Kind.ELEMENTWISE: "NumPy broadcasting; casts are explicit `cast` nodes",
    Kind.REDUCTION: "over `axes`, with `keepdims`; `mean`, `var` and `std` trace to these",
    Kind.SCAN: "inclusive prefixes along one `axis`; `nancumsum`, `nancumprod` and `x.cumsum()` trace to these",
    Kind.LAYOUT: "index remapping only, no data moved",
    Kind.GATHER: ("the array read at integer indices (negative ones wrap; out of range: `IndexError`); "
                  "`x[idx]`, `x[:, i, j]`, `take` and `take_along_axis` trace to it"),
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
    table order), then the functions traced into them."""
    lines = [dtypes_markdown()]
    for kind, title in _KIND_TEXT.items():
        names = [op.name for op in OPS.values() if op.kind is kind]
        lines.append(f"- **{title}** ({len(names)}; {_KIND_NOTE[kind]}): " + ", ".join(f"`{n}`" for n in names))
    lines.append(composites_markdown())
    lines.append(not_traced_markdown())
    return "\n".join(lines)


_BLOCK = re.compile(re.escape(BEGIN) + r"\n(.*?)\n?" + re.escape(END), re.DOTALL)


def readme_block(text: str) -> str | None:
    """The text between the ops markers of a README, or None when the markers are missing."""
    m = _BLOCK.search(text)
    return m.group(1) if m else None


def update_readme(path: str) -> bool:
    """Rewrite the ops block of the README at ``path``; True if the file changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if readme_block(text) is None:
        raise ValueError(f"{path} has no '{BEGIN}' ... '{END}' block")
    new = _BLOCK.sub(lambda _: f"{BEGIN}\n{ops_markdown()}\n{END}", text, count=1)
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    """``python -m fusec.frontend.ops_doc [README.md]``: regenerate the ops list in place; one-line errors."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fusec.frontend.ops_doc",
                                     description="Regenerate the dtypes and ops list between the README's "
                                                 f"'{BEGIN}' and '{END}' lines from the op table.")
    parser.add_argument("readme", nargs="?", default="README.md", help="the file to update (default: README.md)")
    target = parser.parse_args(argv).readme
    try:
        changed = update_readme(target)
    except (OSError, ValueError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"{target}: {'updated' if changed else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
