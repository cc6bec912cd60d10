"""A small pattern language for local rewrites: rules are data, not nested ifs.

``P("mul", X, one)`` matches a ``mul`` node whose operands match ``X`` (anything, captured as
``x``) and ``one`` (a constant equal to 1). A rule pairs a pattern with a rewrite that receives
the captures and returns a replacement node, or ``None`` to decline (for conditions that are
easier to say in Python, such as "only for integer dtypes").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fusec.ir.graph import Node


@dataclass(frozen=True)
class P:
    """A pattern: ``op`` (None matches any op), operand sub-patterns, a capture name, a predicate."""

    op: str | None = None
    args: tuple[P, ...] | None = None
    name: str | None = None
    where: Callable[[Node], bool] | None = None

    def __init__(self, op: str | None = None, *args: P, name: str | None = None,
                 where: Callable[[Node], bool] | None = None):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "args", tuple(args) if args else None)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "where", where)

    def match(self, node: Node, captures: dict[str, Node]) -> bool:
        if self.op is not None and node.op != self.op:
            return False
        if self.where is not None and not self.where(node):
            return False
        if self.args is not None:
            if len(self.args) != len(node.operands):
                return False
            if not all(p.match(o, captures) for p, o in zip(self.args, node.operands)):
                return False
        if self.name is not None:
            if self.name in captures and captures[self.name] is not node:
                return False
            captures[self.name] = node
        return True


def var(name: str) -> P:
    """Any node, captured as ``name`` (a repeated name must be the same node)."""
    return P(name=name)


def const(value: Any, name: str | None = None) -> P:
    """A constant equal to ``value`` (``-0.0`` and ``0.0`` are told apart; NaN matches NaN)."""

    def same(node: Node) -> bool:
        v = node.attr("value")
        if isinstance(value, float) and isinstance(v, float):
            if math.isnan(value):
                return math.isnan(v)
            return v == value and math.copysign(1.0, v) == math.copysign(1.0, value)
        return v == value and not (isinstance(v, float) and math.copysign(1.0, v) < 0 and value == 0)

    return P("const", name=name, where=same)


@dataclass(frozen=True)
class Rule:
    """One local rewrite: when ``pattern`` matches, ``rewrite(node, **captures)`` may replace it."""

    name: str
    pattern: P
    rewrite: Callable[..., Node | None]

    def apply(self, node: Node) -> Node | None:
        captures: dict[str, Node] = {}
        if not self.pattern.match(node, captures):
            return None
        return self.rewrite(node, **captures)


class RuleSet:
    """Rules in their order, with the ones that can match a given op looked up once per op (a rule
    whose pattern names an op only ever matches that op)."""

    def __init__(self, rules: list[Rule]):
        self.rules = list(rules)
        self._by_op: dict[str, list[Rule]] = {}

    def for_op(self, op: str) -> list[Rule]:
        found = self._by_op.get(op)
        if found is None:
            found = self._by_op[op] = [r for r in self.rules if r.pattern.op in (None, op)]
        return found


def apply_rules(rules: list[Rule] | RuleSet, node: Node, limit: int = 32) -> Node:
    """Apply the first matching rule, repeatedly, until none matches (at most ``limit`` times)."""
    ruleset = rules if isinstance(rules, RuleSet) else RuleSet(rules)
    for _ in range(limit):
        for rule in ruleset.for_op(node.op):
            out = rule.apply(node)
            if out is not None and out is not node:
                node = out
                break
        else:
            return node
    return node
