"""A kernel's body as ``cuda_source()`` and ``fusec explain --source`` show it: shorter, never different.

Two kinds of lines are folded, each into comment lines that say what they stand for, how many lines
they are, and that ``cuda_source(..., full=True)`` (``--full``) shows the exact source:

- the accumulator namespace a reduction kernel starts with (one struct per phase, its identity and its
  combine: ~11 lines a phase), summed up from the kernel's spec as one line per phase;
- a *twin*: a braced block (a loop, usually) that repeats an earlier shown block line for line except for
  at most :data:`TWIN_DIFFERENCES` lines, such as the rerun of a row's epilogue with IEEE division after
  ``fc::div_invariant`` declined. The note names the lines that differ.

The folding works on the rendered body of a kernel for display only: the compiled source (``full=True``)
is the renderer's text, untouched. Every note ends with ``(N lines folded; ...)``, and N is exact, so the
shown text plus the folded lines is the body (a test counts them).
"""

from __future__ import annotations

from dataclasses import dataclass

FULL_HINT = "full=True or --full shows them"
TWIN_MIN_LINES = 6  # a shorter block is left as it is: its note would save little
TWIN_DIFFERENCES = 1  # at most this many lines may differ between a block and its twin (more: the reader needs both)


def fold_accumulators(lines: list[str], spec) -> list[str]:
    """``lines`` with the namespace ``<kernel>_acc`` (the accumulator types of ``spec.phases``) folded into a
    note and one line per phase: its struct's fields with their identities, and its combine."""
    begin, end = f"namespace {spec.name}_acc {{", f"}}  // namespace {spec.name}_acc"
    phases = getattr(spec, "phases", ())
    if begin not in lines or end not in lines or not phases:
        return lines
    first = lines.index(begin)
    last = lines.index(end, first)
    summary = [f"// namespace {spec.name}_acc: each phase's accumulator, its identity and its combine "
               f"({last - first + 1} lines folded; {FULL_HINT})"]
    for ph in phases:
        fields = " ".join(f"{f.ctype} {f.name} = {f.identity};" for f in ph.fields)
        combine = "; ".join(f"a.{f.name} = {f.combine}" for f in ph.fields)
        summary.append(f"//   {ph.acc_type} {{ {fields} }}  combine: {combine}")
    return lines[:first] + summary + lines[last + 1:]


@dataclass(frozen=True)
class _Block:
    first: int  # index of its opening line (a ``#pragma unroll`` just before it included)
    last: int  # index of its closing line

    def __len__(self) -> int:
        return self.last - self.first + 1


def _blocks(lines: list[str]) -> list[_Block]:
    """Every braced block: a line ending with ``{`` through the line that closes it."""
    out: list[_Block] = []
    opened: list[int] = []
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        for ch in code:
            if ch == "{":
                opened.append(i)
            elif ch == "}" and opened:
                start = opened.pop()
                if lines[start].split("//", 1)[0].rstrip().endswith("{") and start < i:
                    if start > 0 and lines[start - 1].strip() == "#pragma unroll":
                        start -= 1
                    out.append(_Block(start, i))
    return sorted(out, key=lambda b: b.first)


def _differences(lines: list[str], a: _Block, b: _Block) -> list[int] | None:
    """The offsets at which blocks ``a`` and ``b`` differ (leading spaces aside), or None beyond the limit."""
    if len(a) != len(b):
        return None
    found = []
    for k in range(len(a)):
        if lines[a.first + k].strip() != lines[b.first + k].strip():
            found.append(k)
            if len(found) > TWIN_DIFFERENCES:
                return None
    return found


def fold_twins(lines: list[str]) -> list[str]:
    """``lines`` with each braced block that is a twin of an earlier shown block folded into one note."""
    blocks = [b for b in _blocks(lines) if len(b) >= TWIN_MIN_LINES]
    by_length: dict[int, list[_Block]] = {}
    folds: list[tuple[_Block, _Block, list[int]]] = []
    for block in blocks:
        if any(f.first <= block.first <= f.last for f, _, _ in folds):
            continue  # inside a block folded already
        for earlier in by_length.get(len(block), ()):
            if earlier.last < block.first and not any(f.first <= earlier.first <= f.last for f, _, _ in folds):
                diff = _differences(lines, earlier, block)
                if diff is not None:
                    folds.append((block, earlier, diff))
                    break
        by_length.setdefault(len(block), []).append(block)
    out: list[str] = []
    done = 0
    for block, twin, diff in folds:
        out += lines[done:block.first]
        # where the twin's first line is shown: each fold before it put 1 + len(its differences) lines for its own
        shown_at = twin.first - sum(len(f) - 1 - len(d) for f, _, d in folds if f.last < twin.first)
        indent = lines[block.first][:len(lines[block.first]) - len(lines[block.first].lstrip())]
        out.append(f"{indent}// the block that starts {len(out) - shown_at} lines above, again "
                   f"({len(block)} lines folded; {FULL_HINT}){', with' if diff else ''}")
        out += [f'{indent}//   "{lines[block.first + k].strip()}" in place of "{lines[twin.first + k].strip()}"'
                for k in diff]
        done = block.last + 1
    return out + lines[done:]


def shown_body(spec, body: str) -> str:
    """``body`` (the rendered kernel of ``spec``) as shown: accumulator types and twin blocks folded."""
    lines = body.splitlines()
    return "\n".join(fold_twins(fold_accumulators(lines, spec))) + "\n"


__all__ = ["FULL_HINT", "fold_accumulators", "fold_twins", "shown_body"]
