"""The IR's text form: :func:`fusec.ir.printer.print_graph` prints a graph canonically, :func:`parse` reads it back.

``parse(print_graph(g)) == g`` (the very node objects: nodes are interned) and, for canonical text,
``print_graph(parse(t)) == t``::

    func @softmax(%x: f32[8192,8192]) -> f32[8192,8192] {
      %0 = max %x {axes=[1], keepdims=true} : f32[8192,1]
      %1 = sub %x, %0 : f32[8192,8192]
      ...
      return %4
    }

Inputs are named by their ``name`` attribute, every other node ``%0, %1, ...`` in printed order
(:func:`fusec.ir.printer.node_names`). After fusion the nodes of each region sit in a block
``kernel @k1 pointwise recomputes %0 { ... }``; a node in several regions is printed in the first and
named in the header of the others; ``no kernels`` marks a partitioned graph with no regions
(``regions == ()``). Comments (``# ...``, and ``// ...`` so that ``fusec opt`` reads the pass cases
with their directive lines) and blank lines are ignored. The parser builds every node through
``make_node`` and checks each ``: type`` annotation against the inferred one; an error's location is
``FILE:LINE`` and its message does not repeat the line.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from fusec.ir import dtypes
from fusec.ir.graph import Graph, Node, make_node
from fusec.ir.infer import Shape
from fusec.ir.ops import OPS
from fusec.ir.printer import global_name, type_text
from fusec.ir.region import REGION_KINDS, kind_problem, make_regions
from fusec.support.errors import FusecError, ParseError

_TOKEN = re.compile(r"""
    (?P<ws>\s+) | (?P<comment>(?:\#|//).*)
  | (?P<name>%[A-Za-z0-9_.]+)
  | (?P<global>@(?:"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]+))
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<num>[-+](?:inf|nan)\b|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*)
  | (?P<punct>->|[()\[\]{},:=])
""", re.VERBOSE)
MAX_NESTING = 16  # lists inside lists in an attribute value (fusec's own attributes nest one deep)
_WORDS = {"true": True, "false": False, "none": None, "inf": float("inf"), "nan": float("nan")}

# --- parsing -----------------------------------------------------------------------------------


class _Line:
    """The tokens of one line and a cursor over them."""

    def __init__(self, text: str, lineno: int, loc: str):
        self.lineno, self.loc, self.toks, self.i, pos = lineno, loc, [], 0, 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error(f"unexpected character {text[pos]!r}")
            if m.lastgroup not in ("ws", "comment"):
                self.toks.append((m.lastgroup, m.group()))
            pos = m.end()
        self.toks.append(("end", ""))

    def error(self, message: str, hint: str | None = None) -> ParseError:
        return ParseError(message, loc=self.loc, hint=hint)  # loc is FILE:LINE: the message repeats no line

    def peek(self, kind: bool = False) -> str:
        return self.toks[self.i][0 if kind else 1]

    def take(self, kind: str | None = None, text: str | None = None) -> str:
        tok_kind, tok = self.toks[self.i]
        if (kind and tok_kind != kind) or (text and tok != text):
            expected = repr(text) if text else f"a {kind}"
            raise self.error(f"expected {expected}, found {repr(tok) if tok else 'end of line'}")
        self.i += 1
        return tok

    def accept(self, text: str) -> bool:
        if self.peek() != text:
            return False
        self.i += 1
        return True

    def end(self) -> None:
        if self.peek(kind=True) != "end":
            raise self.error(f"unexpected {self.peek()!r}")

    def seq(self, close: str, item: Callable[[], Any]) -> list[Any]:
        """``item, item, ...`` up to the token ``close`` (the opening one already taken)."""
        out: list[Any] = []
        while not self.accept(close):
            if out:
                self.take(text=",")
            out.append(item())
        return out

    def global_name(self) -> str:
        tok = self.take("global")[1:]
        return json.loads(tok) if tok.startswith('"') else tok

    def integer(self, tok: str) -> int:
        """The integer ``tok`` (digits, maybe signed); an error naming this line when Python will not convert
        it (more than ``sys.get_int_max_str_digits()`` digits, 4300 by default)."""
        try:
            return int(tok)
        except ValueError:
            digits = len(tok.lstrip("+-"))
            raise self.error(f"an integer of {digits} digits ({tok[:12]}...) is longer than Python converts "
                             f"({sys.get_int_max_str_digits()} digits)") from None

    def dim(self) -> int:
        tok = self.take("num")
        if not tok.isdigit():
            raise self.error(f"bad dimension {tok!r}")
        return self.integer(tok)

    def type(self) -> tuple[np.dtype, Shape]:
        name = self.take("ident")
        if name not in dtypes.FROM_SHORT:
            raise self.error(f"unknown dtype {name!r}", hint="dtypes: " + ", ".join(dtypes.FROM_SHORT))
        self.take(text="[")
        return dtypes.FROM_SHORT[name], tuple(self.seq("]", self.dim))

    def value(self, depth: int = 0) -> Any:
        kind, tok = self.toks[self.i]
        self.i += 1
        if tok == "[":
            if depth >= MAX_NESTING:
                raise self.error(f"a value nested more than {MAX_NESTING} lists deep")
            return tuple(self.seq("]", lambda: self.value(depth + 1)))
        if kind == "num":
            return float(tok) if any(c in tok for c in ".eEin") else self.integer(tok)
        if kind == "str":
            return json.loads(tok)
        if kind == "ident" and tok in _WORDS:
            return _WORDS[tok]
        raise self.error(f"expected a value, found {repr(tok) if tok else 'end of line'}")

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}

        def item() -> None:
            key = self.take("ident")
            if key in out:
                raise self.error(f"attribute {key!r} given twice")
            self.take(text="=")
            out[key] = self.value()

        if self.accept("{"):
            self.seq("}", item)
        return out

    def names(self, env: dict[str, Node]) -> list[Node]:
        """``%a, %b, ...`` (possibly none), each defined in ``env``."""
        out: list[Node] = []
        while self.peek(kind=True) == "name":
            name = self.take("name")
            if name not in env:
                raise self.error(f"{name} is not defined")
            out.append(env[name])
            if not self.accept(","):
                break
            if self.peek(kind=True) != "name":
                self.take("name")  # a trailing comma: report what came instead
        return out


def parse(text: str, filename: str | None = None) -> Graph:
    """The graph that ``text`` (one ``func``) describes; :class:`ParseError` naming the line if bad."""
    src = filename or "<fir>"
    lines = [(i, t) for i, t in enumerate(text.splitlines(), 1) if t.split("#", 1)[0].split("//", 1)[0].strip()]
    if not lines:
        raise ParseError("expected 'func @name(...) -> ... {'", loc=f"{src}:1")
    toks = [_Line(t, i, f"{src}:{i}") for i, t in lines]
    head = toks[0]
    head.take(text="func")
    name = head.global_name()
    head.take(text="(")
    env: dict[str, Node] = {}
    inputs: list[Node] = []

    def param() -> None:
        arg = head.take("name")
        head.take(text=":")
        dt, shape = head.type()
        if arg in env:
            raise head.error(f"{arg} is already defined")
        attrs = {**head.attrs(), "name": arg[1:], "index": len(inputs)}
        try:
            env[arg] = make_node("input", (), attrs, dtype=dt, shape=shape, loc=head.loc)
        except FusecError as exc:
            raise head.error(f"{arg}: {exc.message}", hint=exc.hint) from exc
        inputs.append(env[arg])

    head.seq(")", param)
    head.take(text="->")
    out_types = head.seq(")", head.type) if head.accept("(") else [head.type()]
    head.take(text="{")
    head.end()

    defined_at: dict[str, int] = {}
    kernels: list[tuple[str, str, list[Node]]] | None = []  # None after 'no kernels'
    kernel: list[Node] | None = None
    kernel_lines: list[_Line] = []
    outputs: list[Node] | None = None
    closed = None
    for ln in toks[1:]:
        if closed is not None:
            raise ln.error("text after the end of the function")
        first = ln.peek()
        if outputs is not None and first != "}":
            raise ln.error("statement after return")
        if first == "}":
            ln.take()
            ln.end()
            if kernel is not None:
                kernel = None
            else:
                closed = ln
        elif first == "kernel":
            ln.take()
            if kernels is None:
                raise ln.error("kernel after 'no kernels'")
            if kernel is not None:
                raise ln.error("kernel blocks do not nest")
            kname = ln.global_name()
            if any(k[0] == kname for k in kernels):
                raise ln.error(f"kernel @{kname} is already defined")
            kind = ln.take("ident")
            if kind not in REGION_KINDS:
                raise ln.error(f"unknown region kind {kind!r}", hint="kinds: " + ", ".join(REGION_KINDS))
            kernel = ln.names(env) if ln.accept("recomputes") else []
            ln.take(text="{")
            ln.end()
            kernels.append((kname, kind, kernel))
            kernel_lines.append(ln)
        elif first == "no":
            ln.take()
            ln.take(text="kernels")
            ln.end()
            if kernel is not None or kernels:
                raise ln.error("'no kernels' after a kernel block")
            kernels = None
        elif first == "return":
            ln.take()
            if kernel is not None:
                raise ln.error("return inside a kernel block")
            outputs = ln.names(env)
            ln.end()
            got = [(n.dtype, n.shape) for n in outputs]
            if got != out_types:
                raise ln.error(f"returns ({', '.join(type_text(*t) for t in got)}) but the signature says "
                               f"({', '.join(type_text(*t) for t in out_types)})")
        elif ln.toks and ln.toks[0][0] == "name":
            node = _parse_node(ln, env, defined_at)
            if kernel is not None:
                kernel.append(node)
        else:
            raise ln.error(f"unexpected {first!r}")
    if closed is None:
        raise toks[-1].error("missing '}' at the end of the function")
    if outputs is None:
        raise closed.error("missing return")
    graph = Graph(name, tuple(inputs), tuple(outputs))
    if kernels is None:
        return Graph(name, graph.inputs, graph.outputs, ())
    if not kernels:
        return graph
    index = {n: i for i, n in enumerate(graph.nodes)}
    specs = [(k, kind, sorted((n for n in set(ns) if n in index), key=index.__getitem__))
             for k, kind, ns in kernels]
    regions = make_regions(specs, graph.users, graph.outputs)
    for region, ln in zip(regions, kernel_lines):
        if region.kind in REGION_KINDS and (problem := kind_problem(region)):
            raise ln.error(f"kernel {global_name(region.name)} {problem}")
    return Graph(name, graph.inputs, graph.outputs, regions)


def _parse_node(ln: _Line, env: dict[str, Node], defined_at: dict[str, int]) -> Node:
    name = ln.take("name")
    if name in env:
        where = f" (line {defined_at[name]})" if name in defined_at else " (an input)"
        raise ln.error(f"{name} is already defined{where}")
    ln.take(text="=")
    op = ln.take("ident")
    if op not in OPS:
        raise ln.error(f"unknown op {op!r}")
    if op == "input":
        raise ln.error("inputs are declared in the signature, not as nodes")
    value = ln.value() if op == "const" else None
    operands = ln.names(env)
    attrs = ln.attrs()
    if op == "const":
        attrs["value"] = value
    ln.take(text=":")
    dt, shape = ln.type()
    ln.end()
    try:
        node = make_node(op, operands, attrs, dtype=dt if op in ("const", "size", "cast", "iota") else None,
                         loc=ln.loc)
    except FusecError as exc:
        raise ln.error(exc.message, hint=exc.hint) from exc
    except (KeyError, TypeError) as exc:
        raise ln.error(f"{op}: missing or bad attribute {exc}") from exc
    if (node.dtype, node.shape) != (dt, shape):
        raise ln.error(f"type {type_text(dt, shape)} does not match the inferred {type_text(node.dtype, node.shape)}")
    env[name] = node
    defined_at[name] = ln.lineno
    return node
