"""canonicalize: local simplifications that are exact under IEEE 754 and NumPy's integer rules.

Each rule is one line of the table below. What is deliberately *not* here, because it would
change a result: ``x - x -> 0`` (NaN, inf), ``x * 0 -> 0`` (NaN, inf, -0.0), ``x + 0.0 -> x``
(``-0.0 + 0.0`` is ``+0.0``), ``pow(x, 0.5) -> sqrt(x)`` (``-0.0``, ``-inf``).
Also puts commutative operands in a canonical order (constants last), so that CSE sees
``a + b`` and ``b + a`` as one node, and writes reductions in keepdims form (``keepdims=false``
becomes ``keepdims=true`` followed by ``squeeze``), the form fusion works on; squeezes then move past
elementwise ops toward the outputs, and an op that broadcasts a squeezed value reads it unsqueezed, so
``x - x.mean(0)`` and ``x.sum(1) / (x * x).sum(1)`` fuse as their ``keepdims=True`` spellings do.
"""

from __future__ import annotations

import contextvars
import functools

import ml_dtypes
import numpy as np

from fusec.ir import dtypes
from fusec.ir.graph import Graph, Node, make_node
from fusec.ir.ops import Kind
from fusec.passes.gathers import sink_gather
from fusec.passes.kept_values import sunk_rewrite as _sunk_rewrite
from fusec.passes.patterns import P, Rule, RuleSet, apply_rules, const, var
from fusec.passes.registry import register
from fusec.passes.views import sink_slice
from fusec.passes.windows import sink_window

x, y, c = var("x"), var("y"), var("c")


def _is_int(node: Node) -> bool:
    return node.dtype.kind in "biu"


def _keep(node: Node, x: Node) -> Node | None:
    """Replace ``node`` by ``x`` when that is the same array (same dtype and shape)."""
    return x if (x.dtype, x.shape) == (node.dtype, node.shape) else None


def _keep_if_int(node: Node, x: Node) -> Node | None:
    return _keep(node, x) if _is_int(node) else None


@functools.lru_cache(maxsize=64)
def _dtype_name(dt: np.dtype) -> str:
    return str(dt)


class _OperandOrder:
    """The canonical order of a commutative op's operands, with memos that live for one canonicalize call.

    Operands are ordered by their *structural key* ``(constant expression, op, dtype, shape, attrs,
    keys of its operands)``, compared as Python compares such nested tuples: the first item says
    "constant expression" (a constant, or an op over constants only that fold will turn into one), so
    constants stay last after folding too. The keys are never built (they would nest a whole operand cone,
    and comparing two deep ones recurses as deep): :meth:`compare` walks both cones side by side with an
    explicit stack, remembering each pair of nodes it has compared."""

    def __init__(self) -> None:
        self.heads: dict[Node, tuple] = {}
        self.compared: dict[tuple[Node, Node], int] = {}

    def head(self, node: Node) -> tuple:
        """The structural key without the operands' keys (its "constant expression" flag needs them)."""
        heads = self.heads
        if node not in heads:
            stack = [(node, False)]
            while stack:
                n, ready = stack.pop()
                if n in heads:
                    continue
                if not ready:
                    stack.append((n, True))
                    stack.extend((o, False) for o in n.operands if o not in heads)
                    continue
                operand_heads = [heads[o] for o in n.operands]
                constant = n.op == "const" or (n.kind is not Kind.SOURCE and bool(operand_heads)
                                               and all(h[0] for h in operand_heads))
                heads[n] = (constant, n.op, _dtype_name(n.dtype), n.shape, repr(n.attrs))
        return heads[node]

    def compare(self, a: Node, b: Node) -> int:
        """-1, 0 or 1 as the structural key of ``a`` is smaller than, equal to or greater than ``b``'s."""
        compared = self.compared
        stack = [[a, b, 0, False]]  # (x, y, next operand to compare, entered)
        last = 0
        while stack:
            frame = stack[-1]
            x, y = frame[0], frame[1]
            if not frame[3]:
                frame[3] = True
                if x is y:
                    stack.pop()
                    last = 0
                    continue
                known = compared.get((x, y))
                if known is not None:
                    stack.pop()
                    last = known
                    continue
                hx, hy = self.head(x), self.head(y)
                if hx != hy:
                    last = compared[(x, y)] = -1 if hx < hy else 1
                    stack.pop()
                    continue
            elif last != 0:  # an operand pair differed: so do x and y
                compared[(x, y)] = last
                stack.pop()
                continue
            i = frame[2]
            if i < min(len(x.operands), len(y.operands)):
                frame[2] = i + 1
                stack.append([x.operands[i], y.operands[i], 0, False])
                continue
            last = compared[(x, y)] = (len(x.operands) > len(y.operands)) - (len(x.operands) < len(y.operands))
            stack.pop()
        return last


_ORDER: contextvars.ContextVar[_OperandOrder | None] = contextvars.ContextVar("fusec_operand_order", default=None)


# NumPy's float maximum/minimum/fmax/fmin pick an operand by position when both are zeros
# (np.maximum(-0.0, 0.0) and np.maximum(0.0, -0.0) differ), so swapping them is not exact.
_ORDER_SENSITIVE_FLOAT = frozenset({"maximum", "minimum", "fmax", "fmin"})


def _sorted_operands(node: Node) -> Node | None:
    if not node.opdef.commutative:
        return None
    if node.op in _ORDER_SENSITIVE_FLOAT and dtypes.kind(node.dtype) == "f":
        return None
    by_key = _ORDER.get() or _OperandOrder()
    ops = node.operands
    if all(by_key.compare(ops[i], ops[i + 1]) <= 0 for i in range(len(ops) - 1)):
        return None
    order = sorted(range(len(ops)), key=functools.cmp_to_key(lambda i, j: by_key.compare(ops[i], ops[j])))
    return make_node(node.op, [ops[i] for i in order], dict(node.attrs), loc=node.loc)


def keepdims_form(node: Node) -> Node | None:
    if node.kind is not Kind.REDUCTION or node.attr("keepdims"):
        return None
    axes = list(node.attr("axes"))
    kept = make_node(node.op, node.operands, {"axes": axes, "keepdims": True}, loc=node.loc)
    return make_node("squeeze", [kept], {"axes": axes}, loc=node.loc) if axes else kept


def reduce_over_nothing(node: Node, x: Node) -> Node | None:
    """A reduction over no axes (``axis=()``), or only over axes of extent 1 (in keepdims form), is its
    operand, cast to the result dtype: one value per position (``np.sum(x, axis=())`` is
    ``x.astype(sum's dtype) + 0``, the ``+ 0`` turning a float -0.0 into +0.0 as NumPy's sum from its
    identity does; NaN stays NaN for nanmax). ``argmax``/``argmin`` there are index 0 at every position."""
    if node.kind is not Kind.REDUCTION or x.shape != node.shape or any(x.shape[a] != 1 for a in node.attr("axes")):
        return None
    if node.opdef.index_result:
        zero = make_node("const", [], {"value": 0}, dtype=node.dtype, loc=node.loc)
        return zero if not node.shape else make_node("broadcast_to", [zero], {"shape": list(node.shape)},
                                                     loc=node.loc)
    x = x if x.dtype == node.dtype else make_node("cast", [x], {}, dtype=node.dtype, loc=node.loc)
    if node.op == "sum" and dtypes.kind(node.dtype) == "f":  # the sum starts at +0.0: -0.0 comes out +0.0
        zero = make_node("const", [], {"value": 0.0}, dtype=node.dtype, loc=node.loc)
        return make_node("add", [x, zero], {}, loc=node.loc)
    return x


def _padded(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """``shape`` as broadcasting sees it in ``ndim`` dimensions: size-1 axes prepended."""
    return (1,) * (ndim - len(shape)) + tuple(shape)


def _remake(node: Node, operands: list[Node]) -> Node:
    """Elementwise ``node`` over other operands (a cast keeps its dtype)."""
    return make_node(node.op, operands, dict(node.attrs), dtype=node.dtype if node.op == "cast" else None,
                     loc=node.loc)


def broadcast_unsqueezed(node: Node) -> Node | None:
    """An elementwise op of higher rank that broadcasts a ``squeeze(m)`` reads ``m`` itself when broadcasting
    lines both up alike (``x - squeeze(mean(x, 0, keepdims))`` is ``x - mean(x, 0, keepdims)``): the
    reduction's kept size-1 axis then tells fusion which region axis the value runs along."""
    if node.kind is not Kind.ELEMENTWISE:
        return None
    operands = [o.operands[0] if o.op == "squeeze" and o.operands[0].ndim <= node.ndim
                and _padded(o.operands[0].shape, node.ndim) == _padded(o.shape, node.ndim) else o
                for o in node.operands]
    return _remake(node, operands) if operands != list(node.operands) else None


def squeeze_after_elementwise(node: Node) -> Node | None:
    """An elementwise op whose operands are all squeezes of the same axes (or scalars) runs before the
    squeeze: ``squeeze(a) / squeeze(b)`` is ``squeeze(a / b)``. Squeezes move toward the outputs, so that
    the reductions' results meet in keepdims form, the form fusion works on."""
    if node.kind is not Kind.ELEMENTWISE or not any(o.op == "squeeze" for o in node.operands):
        return None
    axes = next(tuple(o.attr("axes")) for o in node.operands if o.op == "squeeze")
    operands = []
    for o in node.operands:
        if o.op == "squeeze" and tuple(o.attr("axes")) == axes and o.ndim == node.ndim:
            operands.append(o.operands[0])
        elif o.ndim == 0:
            operands.append(o)
        else:
            return None
    return make_node("squeeze", [_remake(node, operands)], {"axes": list(axes)}, loc=node.loc)


def _exact_widening(src: np.dtype, dst: np.dtype) -> bool:
    """Whether every value of ``src`` survives a cast to ``dst``. NumPy calls int64 -> float64
    "safe" although 2**53 + 1 does not survive it, so integer -> float also needs the mantissa."""
    if not np.can_cast(src, dst, "safe"):
        return False
    if src.kind in "iu" and dtypes.kind(dst) == "f":
        value_bits = 8 * src.itemsize - (1 if src.kind == "i" else 0)
        return ml_dtypes.finfo(dst).nmant + 1 >= value_bits
    return True


def _cast_round_trip(node: Node, x: Node, **_: Node) -> Node | None:
    wide = node.operands[0]
    if x.dtype == node.dtype and _exact_widening(x.dtype, wide.dtype) and x.shape == node.shape:
        return x
    return None


def _square(node: Node, x: Node, c: Node) -> Node | None:
    return make_node("square", [x], loc=node.loc) if x.dtype == node.dtype else None


def _add_of_neg(node: Node, x: Node, y: Node) -> Node | None:
    return make_node("add", [x, y], loc=node.loc)


def _same_axes(node: Node, x: Node) -> Node | None:
    inner = node.operands[0]
    return _keep(node, x) if inner.attr("axes") == node.attr("axes") else None


def _compose_transpose(node: Node, x: Node) -> Node | None:
    inner_perm, outer_perm = node.operands[0].attr("perm"), node.attr("perm")
    perm = [inner_perm[p] for p in outer_perm]
    if perm == sorted(perm):
        return x
    return make_node("transpose", [x], {"perm": perm}, loc=node.loc)


def _identity_layout(node: Node, x: Node) -> Node | None:
    if node.op == "transpose" and list(node.attr("perm")) != sorted(node.attr("perm")):
        return None
    if node.op in ("expand_dims", "squeeze") and node.attr("axes"):
        return None
    if node.op in ("slice", "window"):  # the same shape is not the same elements (x[::-1]): sink_slice knows
        return None
    return _keep(node, x)


def shape_source(x: Node, axes: tuple[int, ...]) -> Node | None:
    """A function input with the extents of ``x`` on ``axes`` (under every binding of the same
    signature), found through same-rank elementwise ops, broadcasts and reductions over other axes."""
    stack, seen = [x], set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "input":
            return n
        same_rank = [o for o in n.operands if o.ndim == x.ndim and all(o.shape[a] == x.shape[a] for a in axes)]
        if n.kind in (Kind.ELEMENTWISE, Kind.SCAN) or n.op == "broadcast_to":
            stack.extend(same_rank)
        elif n.kind is Kind.REDUCTION and n.attr("keepdims") and not set(n.attr("axes")) & set(axes):
            stack.extend(same_rank)
    return None


def size_of_input(node: Node, x: Node) -> Node | None:
    """``size`` reads only a shape: point it at an input (so it depends on no intermediate), or make
    it a constant when no input carries those extents."""
    if x.op == "input":
        return None
    axes = tuple(node.attr("axes"))
    src = shape_source(x, axes)
    if src is not None:
        return make_node("size", [src], dict(node.attrs), dtype=node.dtype, loc=node.loc)
    count = 1
    for a in axes:
        count *= x.shape[a]
    return make_node("const", (), {"value": count}, dtype=node.dtype, loc=node.loc)


RULES: list[Rule] = [
    Rule("size reads an input's shape", P("size", x), size_of_input),
    Rule("commutative operands in canonical order", P(where=lambda n: n.opdef.commutative),
         lambda node: _sorted_operands(node)),
    Rule("reduction over no axes or size-1 axes -> its operand (cast)",
         P(where=lambda n: n.kind is Kind.REDUCTION, name="_"),
         lambda node, _: reduce_over_nothing(node, node.operands[0])),
    Rule("scan along a size-1 axis -> its operand", P(where=lambda n: n.kind is Kind.SCAN, name="_"),
         lambda node, _: _keep(node, node.operands[0]) if node.shape[node.attr("axis")] == 1 else None),
    Rule("reduction in keepdims form", P(where=lambda n: n.kind is Kind.REDUCTION),
         lambda node: keepdims_form(node)),
    Rule("x - squeeze(m) -> x - m where broadcasting lines both up alike",
         P(where=lambda n: n.kind is Kind.ELEMENTWISE), lambda node: broadcast_unsqueezed(node)),
    Rule("f(squeeze(a), squeeze(b)) -> squeeze(f(a, b))", P(where=lambda n: n.kind is Kind.ELEMENTWISE),
         lambda node: squeeze_after_elementwise(node)),
    Rule("x * 1 -> x", P("mul", x, const(1)), _keep),
    Rule("x / 1 -> x", P("div", x, const(1)), _keep),
    Rule("x + (-0.0) -> x", P("add", x, const(-0.0)), lambda node, x: _keep(node, x) if not _is_int(node) else None),
    Rule("x - (+0.0) -> x", P("sub", x, const(0.0)), _keep),
    Rule("x + 0 -> x (integers)", P("add", x, const(0)), _keep_if_int),
    Rule("x - 0 -> x (integers)", P("sub", x, const(0)), _keep_if_int),
    Rule("x | 0, x ^ 0 -> x", P("bitwise_or", x, const(0)), _keep),
    Rule("x ^ 0 -> x", P("bitwise_xor", x, const(0)), _keep),
    Rule("--x -> x", P("neg", P("neg", x)), _keep),
    Rule("+x -> x", P("pos", x), _keep),
    Rule("x - (-y) -> x + y", P("sub", x, P("neg", y)), _add_of_neg),
    Rule("not not x -> x (bool)", P("logical_not", P("logical_not", x)),
         lambda node, x: _keep(node, x)),
    Rule("~~x -> x", P("invert", P("invert", x)), _keep),
    Rule("abs(abs(x)) -> abs(x)", P("abs", P("abs", x, name="inner")), lambda node, x, inner: inner),
    Rule("abs(-x) -> abs(x) (not unsigned: there abs is the identity and -x wraps)", P("abs", P("neg", x)),
         lambda node, x: make_node("abs", [x], loc=node.loc) if node.dtype.kind != "u" else None),
    Rule("pow(x, 2) -> square(x)", P("pow", x, const(2, name="c")), _square),
    Rule("where(c, x, x) -> x", P("where", c, x, x), lambda node, c, x: _keep(node, x)),
    Rule("cast to its own dtype -> x", P("cast", x), _keep),
    Rule("cast(cast(x, wider), dtype of x) -> x", P("cast", P("cast", x)), _cast_round_trip),
    Rule("squeeze(expand_dims(x, a), a) -> x", P("squeeze", P("expand_dims", x)), _same_axes),
    Rule("expand_dims(squeeze(x, a), a) -> x", P("expand_dims", P("squeeze", x)), _same_axes),
    Rule("transpose(transpose(x)) -> one transpose", P("transpose", P("transpose", x)), _compose_transpose),
    Rule("slice(window(x)) -> one window", P("slice", P("window", x)), lambda node, x: sink_window(node)),
    Rule("window(f(x)) -> f(window(x)): windows sink to the arrays they read", P("window", x),
         lambda node, x: sink_window(node)),
    Rule("slice(f(x)) -> f(slice(x)): views sink to the arrays they read", P("slice", x),
         lambda node, x: sink_slice(node)),
    Rule("gather(f(x), i) -> f(gather(x, i)): gathers sink to the arrays they read",
         P(where=lambda n: n.kind is Kind.GATHER, name="_"), lambda node, _: sink_gather(node)),
    Rule("identity layout op -> x", P(where=lambda n: n.kind is Kind.LAYOUT, name="_"),
         lambda node, _: _identity_layout(node, node.operands[0])),
]


_RULES = RuleSet(RULES)


def _simplify(node: Node) -> Node:
    return apply_rules(_RULES, node)


@register("canonicalize", "exact local simplifications, canonical operand order, reductions in keepdims form")
def canonicalize(graph: Graph) -> Graph:
    token = _ORDER.set(_OperandOrder())
    try:
        for _ in range(8):
            new = _sunk_rewrite(graph, _simplify)
            if new is graph:
                return graph
            graph = new
        return graph
    finally:
        _ORDER.reset(token)
