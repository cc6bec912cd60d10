"""What a call writes into its arguments: the in-place updates of a function's array arguments (``x += v`` on an
argument inside a fused function) and its assignments to part of one (``x[:, k] = v``), after or during its kernels.

The traced graph returns each updated input's new value after the function's results, then the values of the
assignments to part of one (:class:`PartialUpdate`; the frontend traces them, :mod:`fusec.frontend.slice_assign`).
On the GPU the kernel that computes a new value writes it straight into the argument's buffer when that is safe
(:func:`hazard` says why not; :func:`direct_writes`); otherwise, and on the NumPy backend, the values are computed
first and written after the last kernel (:func:`commit`), which is NumPy's result whatever the kernels read: every
value is what the function read at its point in the program, never an alias of an argument the call writes
afterwards. :class:`fusec.runtime.executable.Executable` runs a call with them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.runtime.plan import Plan


@dataclass(frozen=True)
class PartialUpdate:
    """``arguments[index][key] = value``: ``key`` is the basic index as written (integers, slices, None, ...),
    ``value`` the assigned value cast to the argument's dtype, in any shape that broadcasts to ``x[key]``'s."""

    index: int
    key: tuple[Any, ...]
    value: Node


def _base(node: Node) -> Node:
    while node.kind is Kind.LAYOUT:
        node = node.operands[0]
    return node


def hazard(plan: Plan, value: Node, target: Node) -> str | None:
    """Why the kernel computing ``value`` cannot write it over input ``target``'s buffer, or None when it can:
    it must be the last kernel to read ``target``, and inside it every value computed from ``target`` must be
    elementwise over ``target``'s shape (each element read only by the thread that writes it: no reduction,
    broadcast or transpose of ``target`` in the same kernel), and where the kernel reads ``target`` the new
    value must depend on it (so each element's store follows its load). A function with a gather never writes
    in place: an index out of range raises after the kernels, and the arguments must be as they were. No output may
    be ``target``'s old value read through a view that no kernel copies (``old = x.copy(); x += 1; return old``
    returns the argument's own buffer: the new value written into it would show through)."""
    index = next((k for k, kernel in enumerate(plan.kernels) if value in kernel.outputs), None)
    if index is None:
        return "no kernel computes the new value"
    later = [k.name for k in plan.kernels[index + 1:] if any(_base(i) is target for i in k.region.inputs)]
    if later:
        return f"kernel {later[0]} reads the old value after {plan.kernels[index].name} computes the new one"
    viewed = _views_of_old_value(plan, target)
    if viewed:
        return f"output {viewed[0]} is the old value (a view of the argument, no kernel's copy)"
    kernel = plan.kernels[index]
    if any(n.kind is Kind.GATHER for k in plan.kernels for n in k.nodes):
        return "the function gathers: its indices are checked after its kernels, before any argument changes"
    tainted = {target}
    for node in kernel.nodes:
        if any(o in tainted for o in node.operands):
            if node.kind is not Kind.ELEMENTWISE or node.shape != target.shape:
                return f"{kernel.name} reads it through {node.op} (other elements than the one it writes)"
            tainted.add(node)
    for node in kernel.region.inputs:
        if node is not target and _base(node) is target:
            return f"{kernel.name} reads it through a view ({node.op})"
    if target in kernel.region.inputs and value not in tainted:
        # the store does not wait for the load of the same element: the compiler may order it first
        return f"{kernel.name} reads it but its new value does not depend on it"
    return None


def _views_of_old_value(plan: Plan, target: Node) -> list[int]:
    """The graph outputs that are input ``target`` itself or a view of it that no kernel computes: the runtime
    hands them out as views of the argument's buffer (each a copy of the folded ``x.copy()``, say)."""
    computed = {o for k in plan.kernels for o in k.outputs}
    return [j for j, o in enumerate(plan.graph.outputs) if o not in computed and _base(o) is target]


def direct_updates(plan: Plan, updates: tuple[int, ...], arrays: list[Any], parts: int = 0) -> dict[Node, Any]:
    """The updated inputs' new values that their kernels may write straight into the arguments' buffers (the
    graph's outputs end with the updates' values, then ``parts`` values of assignments to part of one)."""
    n = len(plan.graph.outputs) - len(updates) - parts
    direct: dict[Node, Any] = {}
    for k, i in enumerate(updates):
        value, target = plan.graph.outputs[n + k], plan.graph.inputs[i]
        if value is not target and value not in direct and hazard(plan, value, target) is None:
            direct[value] = arrays[i]
    return direct


def direct_parts(plan: Plan, parts: tuple[PartialUpdate, ...], updates: tuple[int, ...],
                 arrays: list[Any]) -> dict[Node, Any]:
    """The assignments to part of an argument whose kernel may write its values straight into the argument's
    selected elements (a view of the argument, as ``out=``): the argument's only change (no whole update, no
    other part), a value of exactly the selection's shape that a kernel computes and the function does not
    return, where no kernel reads the argument and no output is a view of its old value (so nothing reads an
    element after it changes)."""
    outputs = plan.graph.outputs
    first = len(outputs) - len(parts)  # the parts' values are the graph's last outputs
    returned = set(outputs[:first - len(updates)])
    changes = Counter([*updates, *(p.index for p in parts)])
    computed = {o for k in plan.kernels for o in k.outputs}
    direct: dict[Node, Any] = {}
    for part, value in zip(parts, outputs[first:]):
        target = plan.graph.inputs[part.index]
        if (changes[part.index] != 1 or value not in computed or value in returned or value in direct
                or any(_base(i) is target for k in plan.kernels for i in k.region.inputs)
                or _views_of_old_value(plan, target)):
            continue
        view = arrays[part.index][part.key]
        if tuple(view.shape) == value.shape and view.dtype == value.dtype:
            direct[value] = view
    return direct


def direct_writes(plan: Plan, updates: tuple[int, ...], parts: tuple[PartialUpdate, ...],
                  arrays: list[Any]) -> tuple[dict[Node, Any], frozenset[int]]:
    """What the GPU's kernels write straight into the arguments: each new value (:func:`direct_updates`) or
    assigned part (:func:`direct_parts`) node with the array or view it is written into, and the ``id`` of each
    view of a part (for :func:`commit`)."""
    direct = direct_updates(plan, updates, arrays, len(parts))
    views = {n: view for n, view in direct_parts(plan, parts, updates, arrays).items() if n not in direct}
    direct.update(views)
    return direct, frozenset(id(v) for v in views.values())


def commit(plan: Plan, updates: tuple[int, ...], parts: tuple[PartialUpdate, ...], arrays: list[Any],
           results: list[Any], xp: Any, written: Collection[int] = ()) -> list[Any]:
    """Make a call's changes to its arguments after its kernels, and return the function's results.

    ``results`` holds one value per graph output: the function's results, then the whole-array updates' new
    values (``updates``: argument indices), then the assigned parts' values (``parts``:
    :class:`PartialUpdate`). Each was computed from the arguments as the call found them,
    but a value may *be* an argument's buffer or a view of it (``x.copy()``, ``x * 1`` or ``x[0]`` folded to the
    argument, the NumPy backend's views, the part ``p`` of ``p[::-1] = p``): such a value, where it shares memory
    with an argument the call writes, is copied first, so every value keeps what the function read, whatever the
    writes that follow. Then the new values are copied into their arguments and the parts written into theirs,
    in order (NumPy's result). A result that is an updated argument's final value is that argument itself (as NumPy
    returns ``x`` after ``x += 1``). Kernels may have written some values already: a new value that is its
    argument's own array (:func:`direct_updates`), a part whose ``id`` is in ``written`` (:func:`direct_parts`).
    """
    n = len(results) - len(updates) - len(parts)
    outputs = plan.graph.outputs
    targets = [arrays[i] for i in dict.fromkeys((*updates, *(p.index for p in parts)))]
    in_parts = {p.index for p in parts}
    final = {outputs[n + k]: arrays[i] for k, i in enumerate(updates)  # what the argument holds when the call returns
             if i not in in_parts and outputs[n + k].op != "input"}

    def kept(j: int, r: Any) -> bool:  # already what it must be (written by its kernel), or sharing nothing
        if id(r) in written or (n <= j < n + len(updates) and r is arrays[updates[j - n]]):
            return True
        return (j < n and final.get(outputs[j]) is r) or not any(xp.may_share_memory(r, t) for t in targets)

    results = [r if kept(j, r) else r.copy() for j, r in enumerate(results)]
    for k, i in enumerate(updates):
        if results[n + k] is not arrays[i]:
            xp.copyto(arrays[i], results[n + k], casting="unsafe")
    for part, value in zip(parts, results[n + len(updates):]):
        if id(value) not in written:
            arrays[part.index][part.key] = value
    return [final.get(outputs[j], results[j]) for j in range(n)]


__all__ = ["PartialUpdate", "commit", "direct_parts", "direct_updates", "direct_writes", "hazard"]
