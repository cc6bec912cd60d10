"""Gathers sink to the arrays they read: ``gather(f(a, b), i)`` becomes ``f(gather(a, i), gather(b, i))``.

A ``gather`` reads its array from memory at positions computed per element, so the array cannot be a value the
same kernel computes (its elements come from other threads; :func:`fusec.ir.region.region_space` refuses that).
Like slices (:mod:`fusec.passes.views`), a gather therefore moves down to the arrays:

- through elementwise ops: each operand is gathered along the gathered axes where it has the full extent; along
  an axis where it is broadcast (extent 1, or missing) its index operand is dropped and the axis stays a
  broadcast one. The gather moves only where every gathered axis keeps at least one index operand, so every
  index is still checked against its axis (NumPy's ``IndexError``); 0-d operands stay as they are. Only the
  gathered elements are computed: ``np.exp(x)[idx]`` computes ``len(idx)`` rows of exponentials, once per
  index (a repeated index computes its row again, which is cheaper than writing ``exp(x)`` to memory);
- into ``transpose`` and ``expand_dims`` of the array (their axes renumbered into ``axes``/``dims``);
- into a ``slice`` of the array, which becomes the gather's window (``start``/``stop``/``step``: the kernel reads
  the array through it, indices count within it), so ``x[1:][idx]`` copies nothing.

It does **not** move through reductions (nor ``squeeze``, ``broadcast_to`` or another gather, nor further
once it has a window):
``gather(x.sum(1), i)`` would redo a whole row's reduction per gathered element, and per repeat of an index,
and turn a pointwise kernel into a reduction over gathered rows. The reduction's kernel writes its result and
the gather's kernel reads it there: one reduced value per row in memory, which is what the reduction writes
anyway.
"""

from __future__ import annotations

from collections.abc import Callable

from fusec.ir.graph import Node, make_node
from fusec.ir.ops import Kind

Builder = Callable[[list[Node]], Node]


def _gather(x: Node, axes: list[int], indices: list[Node], dims: list[int], loc: str | None) -> Node:
    return make_node("gather", [x, *indices], {"axes": axes, "dims": dims}, loc=loc)


def _placed(o: Node, out_axes: list[int], rank: int, loc: str | None) -> Node:
    """``o`` (no gathered axes) with its axis t running along result axis ``out_axes[t]`` of a ``rank``-d
    result: a transpose into that order, then size-1 axes elsewhere."""
    order = sorted(range(o.ndim), key=lambda t: out_axes[t])
    if order != list(range(o.ndim)):
        o = make_node("transpose", [o], {"perm": order}, loc=loc)
    new = [k for k in range(rank) if k not in out_axes]
    return make_node("expand_dims", [o], {"axes": new}, loc=loc) if new else o


def _operand_gather(g: Node, y: Node, o: Node) -> tuple[Node | None, list[Node]]:
    """What ``g`` (a gather of the elementwise ``y``) reads of ``y``'s operand ``o``: (None, [gather]) for a
    gather still to sink, or (node, []) for a finished one (a 0-d operand, or one without gathered axes)."""
    if o.ndim == 0:
        return o, []
    axes, dims = list(g.attr("axes")), list(g.attr("dims"))
    indices = list(g.operands[1:])
    off = y.ndim - o.ndim
    kept_y = [j for j in range(y.ndim) if j not in axes]
    dim_of = dict(zip(kept_y, dims))
    o_axes, o_indices, o_dims, squeezed = [], [], [], []
    for jo in range(o.ndim):
        j = jo + off
        if j in axes:
            if o.shape[jo] == y.shape[j]:
                o_axes.append(jo)
                o_indices.append(indices[axes.index(j)])
            else:
                squeezed.append(jo)  # broadcast along a gathered axis: the index is not needed here
        else:
            o_dims.append(dim_of[j])
    if squeezed:
        o = make_node("squeeze", [o], {"axes": squeezed}, loc=g.loc)
        o_axes = [jo - sum(1 for s in squeezed if s < jo) for jo in o_axes]
    if not o_axes:
        return _placed(o, o_dims, g.ndim, g.loc), []
    return None, [_gather(o, o_axes, o_indices, o_dims, g.loc)]


def _plan(g: Node) -> tuple[list[Node], Builder] | None:
    """The gathers ``g`` becomes one level down and how to rebuild it from them once they are sunk, or None
    when ``g`` stays where it is."""
    y = g.operands[0]
    axes, dims = list(g.attr("axes")), list(g.attr("dims"))
    indices = list(g.operands[1:])
    if g.attr("start") is not None:  # a window reads an array in memory already
        return None
    if y.op == "slice":  # the slice becomes the gather's window: the array is read through it, no copy
        attrs = {"axes": axes, "dims": dims, **{k: list(y.attr(k)) for k in ("start", "stop", "step")}}
        node = make_node("gather", [y.operands[0], *indices], attrs, loc=g.loc)
        return [node], lambda done: done[0]
    if y.kind is Kind.ELEMENTWISE:
        for a in axes:  # every gathered axis keeps an index operand (its bounds check) in some operand
            if not any(o.ndim and o.ndim - y.ndim + a >= 0 and o.shape[o.ndim - y.ndim + a] == y.shape[a]
                       for o in y.operands):
                return None
        parts = [_operand_gather(g, y, o) for o in y.operands]
        children = [c for _, cs in parts for c in cs]

        def build(done: list[Node]) -> Node:
            it = iter(done)
            operands = [node if node is not None else next(it) for node, _ in parts]
            attrs = dict(y.attrs)
            node = make_node(y.op, operands, attrs, dtype=y.dtype if y.op == "cast" else None, loc=y.loc)
            if node.shape != g.shape:
                node = make_node("broadcast_to", [node], {"shape": list(g.shape)}, loc=g.loc)
            return node

        return children, build
    if y.op == "transpose":
        (x,) = y.operands
        perm = list(y.attr("perm"))
        kept_y = [k for k in range(y.ndim) if k not in axes]
        dim_of = {perm[k]: d for k, d in zip(kept_y, dims)}
        x_axes = [perm[a] for a in axes]
        x_dims = [dim_of[j] for j in range(x.ndim) if j not in x_axes]
        return [_gather(x, x_axes, indices, x_dims, g.loc)], lambda done: done[0]
    if y.op == "expand_dims":
        (x,) = y.operands
        new = set(y.attr("axes"))
        if new & set(axes):
            return None
        old = [k for k in range(y.ndim) if k not in new]  # x axis t is y axis old[t]
        kept_y = [k for k in range(y.ndim) if k not in axes]
        dim_of = dict(zip(kept_y, dims))
        x_axes = [old.index(a) for a in axes]
        x_dims = [dim_of[old[t]] for t in range(x.ndim) if t not in x_axes]
        return [_gather(x, x_axes, indices, x_dims, g.loc)], lambda done: done[0]
    return None


def sink_gather(node: Node) -> Node | None:
    """``node`` (a ``gather``) moved down as far as it goes (see the module docstring); None when it stays.
    Iterative: no recursion proportional to the graph."""
    if node.kind is not Kind.GATHER or _plan(node) is None:
        return None
    done: dict[Node, Node] = {}
    plans: dict[Node, tuple[list[Node], Builder] | None] = {}
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        g, expanded = stack.pop()
        if g in done:
            continue
        if g not in plans:
            plans[g] = _plan(g)
        plan = plans[g]
        if plan is None:
            done[g] = g
        elif not expanded:
            stack.append((g, True))
            stack.extend((c, False) for c in plan[0] if c not in done)
        else:
            done[g] = plan[1]([done[c] for c in plan[0]])
    return done[node]
