"""In-place updates of a call's array arguments (``x += v`` on an input inside a fused function, and assignments to
part of one, ``x[:, k] = v``: :func:`write_parts`).

The traced graph returns each updated input's new value after the function's results
(:class:`fusec.api.TracedFunction` ``.updates``). On the GPU the kernel that computes a new value writes it
straight into the argument's buffer when that is safe (:func:`hazard` says why not); otherwise, and on the
NumPy backend, the values are computed first and copied in after the last kernel, which is NumPy's result
whatever the kernels read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Any

from fusec.errors import FusecValueError
from fusec.ir.graph import Node
from fusec.ir.ops import Kind
from fusec.plan import Plan


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
    in place: an index out of range raises after the kernels, and the arguments must be as they were."""
    index = next((k for k, kernel in enumerate(plan.kernels) if value in kernel.outputs), None)
    if index is None:
        return "no kernel computes the new value"
    later = [k.name for k in plan.kernels[index + 1:] if any(_base(i) is target for i in k.region.inputs)]
    if later:
        return f"kernel {later[0]} reads the old value after {plan.kernels[index].name} computes the new one"
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


def check_updated(name: str, params: list[tuple[str, Any]], updates: tuple[int, ...], backend: str) -> None:
    """Before anything runs: each updated argument is writable and shares no memory with another argument."""
    from fusec.api import _backend

    arrays = [(n, v) for n, v in params if _backend(v) is not None]
    xp = _array_module(backend)
    for i in updates:
        arg, array = arrays[i]
        if backend == "numpy" and not array.flags.writeable:
            raise FusecValueError(f"argument '{arg}' of {name} is read-only, but {name} updates it in place",
                                  hint=f"pass a writable array (a copy: {arg}.copy())")
        for j, (other, value) in enumerate(arrays):
            if j != i and xp.may_share_memory(array, value):
                raise FusecValueError(f"arguments '{arg}' and '{other}' of {name} share memory, and {name} updates "
                                      f"'{arg}' in place", hint="pass separate arrays (a copy of one)")


def _array_module(backend: str) -> Any:
    if backend == "cupy":
        import cupy

        return cupy
    import numpy

    return numpy


def direct_updates(plan: Plan, updates: tuple[int, ...], arrays: list[Any], cupy: Any,
                   parts: int = 0) -> dict[Node, Any]:
    """The updated inputs' new values that their kernels may write straight into the arguments' buffers (the
    graph's outputs end with the updates' values, then ``parts`` values of assignments to part of one)."""
    n = len(plan.graph.outputs) - len(updates) - parts
    direct: dict[Node, Any] = {}
    for k, i in enumerate(updates):
        value, target = plan.graph.outputs[n + k], plan.graph.inputs[i]
        if value is not target and value not in direct and hazard(plan, value, target) is None:
            direct[value] = arrays[i]
    return direct


def write_back(plan: Plan, updates: tuple[int, ...], arrays: list[Any], results: list[Any], xp: Any) -> list[Any]:
    """Copy each updated input's new value into its argument (unless its kernel wrote it there), as if every
    result were computed before any argument changes; returns the results, where a result that is an updated
    input's new value is that argument itself (as NumPy returns ``x`` after ``x += 1``)."""
    n = len(results) - len(updates)
    outputs = plan.graph.outputs
    targets = [arrays[i] for i in updates]

    def written(j: int) -> bool:  # result j is a new value its kernel already wrote into its argument
        return any(outputs[j] is outputs[n + k] and results[j] is t for k, t in enumerate(targets))

    # a value that an update would overwrite before it is read or returned (an old value): copied first
    results = [r if written(j) or not any(xp.may_share_memory(r, t) for t in targets) else r.copy()
               for j, r in enumerate(results)]
    for k, target in enumerate(targets):
        if results[n + k] is not target:
            xp.copyto(target, results[n + k], casting="unsafe")
    for j in range(n):
        for k, target in enumerate(targets):
            if outputs[j] is outputs[n + k]:
                results[j] = target
    return results


def direct_parts(plan: Plan, parts: tuple[Any, ...], updates: tuple[int, ...], arrays: list[Any]) -> dict[Node, Any]:
    """The assignments to part of an argument whose kernel may write its values straight into the argument's
    selected elements (a view of the argument, as ``out=``): the argument's only change (no whole update, no
    other part), a value of exactly the selection's shape that a kernel computes and the function does not
    return, where no kernel reads the argument (so nothing reads an element after it changes)."""
    outputs = plan.graph.outputs
    first = len(outputs) - len(parts)  # the parts' values are the graph's last outputs
    returned = set(outputs[:first - len(updates)])
    changes = Counter([*updates, *(p.index for p in parts)])
    computed = {o for k in plan.kernels for o in k.outputs}
    direct: dict[Node, Any] = {}
    for part, value in zip(parts, outputs[first:]):
        target = plan.graph.inputs[part.index]
        if (changes[part.index] != 1 or value not in computed or value in returned or value in direct
                or any(_base(i) is target for k in plan.kernels for i in k.region.inputs)):
            continue
        view = arrays[part.index][part.key]
        if tuple(view.shape) == value.shape and view.dtype == value.dtype:
            direct[value] = view
    return direct


def write_parts(parts: tuple[Any, ...], arrays: list[Any], values: list[Any], xp: Any,
                written: Collection[int] = ()) -> None:
    """Write the assignments to part of an argument (:class:`fusec.ir.slice_assign.PartialUpdate`, one of
    ``values`` each) into the arguments' selected elements, in order, after every other update: NumPy's result,
    every value having been computed from the arguments before any of them changed. A value whose ``id`` is in
    ``written`` is the view its kernel wrote (:func:`direct_parts`)."""
    for part, value in zip(parts, values):
        if id(value) not in written:
            arrays[part.index][part.key] = value
