"""The reference interpreter: execute a Graph with exactly NumPy's semantics, one array call per op.

bfloat16 (``ml_dtypes``) elementwise ops are ml_dtypes' loops, which compute in float32 and round once, as the
kernels do. Its sums, products and their scans are not: ml_dtypes' add and multiply reduce in bfloat16, rounding
at every step (a sum of 100000 ones is 256), so the interpreter accumulates them in float32 and rounds the
result once, as the kernels do and as NumPy does float16's (CORRECTNESS.md).

Written against an array namespace ``xp`` (``numpy`` or ``cupy``): with NumPy it is the oracle
every test compares against; with CuPy it is the unfused baseline (one kernel per op) that the
benchmarks and ``explain`` compare fused kernels with.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from fusec.ir import dtypes, gather_ref, iota, windows
from fusec.ir.graph import Graph, Node
from fusec.ir.infer import slice_bounds
from fusec.ir.ops import Kind, reference


def to_xp(xp: Any, host: np.ndarray) -> Any:
    """A C-contiguous ``xp`` copy of the NumPy array ``host``, bit for bit. ``cupy.asarray`` of a 0-d
    array goes through ``fill``, which writes +0.0 for -0.0; ``set`` copies the bytes instead."""
    host = np.array(host, order="C")
    if xp is np or not hasattr(xp, "empty"):
        return host
    out = xp.empty(host.shape, host.dtype)
    out.set(host)
    return out


def evaluate_node(xp: Any, node: Node, args: list[Any]) -> Any:
    """The value of ``node`` given its operands' values, as NumPy computes it (dtype exact)."""
    op = node.opdef
    if node.op == "const":
        return to_xp(xp, np.asarray(node.attr("value"), dtype=node.dtype))
    if node.op == "iota":
        return iota.values(xp, node.attr("count"), node.attr("start"), node.attr("next"), node.dtype)
    if node.op == "size":
        (x,) = node.operands
        count = math.prod(x.shape[a] for a in node.attr("axes"))
        return xp.asarray(count, dtype=node.dtype)
    if op.kind is Kind.ELEMENTWISE:
        if node.op == "cast":
            return xp.asarray(args[0]).astype(node.dtype)
        if node.op == "where":
            return xp.where(*args)
        return reference(op, xp)(*args)
    if op.kind is Kind.REDUCTION:
        (x,) = args
        axes = tuple(node.attr("axes"))
        keepdims = bool(node.attr("keepdims"))
        if node.op in ("argmax", "argmin"):  # the C-order flat index over the reduced axes
            fn = getattr(xp, node.op)
            if len(axes) == 1 and x.ndim > 1:
                return fn(x, axis=axes[0], keepdims=keepdims)
            if len(axes) == x.ndim:
                flat = fn(x.reshape(-1) if x.ndim else x)
                return xp.asarray(flat).reshape(node.shape)
            kept = [a for a in range(x.ndim) if a not in axes]
            moved = xp.transpose(x, kept + list(axes))
            merged = moved.reshape(tuple(x.shape[a] for a in kept) + (-1,))
            return xp.asarray(fn(merged, axis=-1)).reshape(node.shape)
        if node.op in ("nanmax", "nanmin"):
            ufunc = xp.fmax if node.op == "nanmax" else xp.fmin
            return ufunc.reduce(x, axis=axes, keepdims=keepdims) if x.ndim else x.copy()
        fn = getattr(xp, node.op)
        if node.op in ("sum", "prod") and node.dtype == dtypes.BFLOAT16:  # float32, rounded once (below)
            return fn(x.astype(dtypes.FLOAT32), axis=axes, keepdims=keepdims).astype(node.dtype)
        if node.op in ("sum", "prod"):  # accumulate in the node's dtype (np.sum(int8) would give int64)
            return fn(x, axis=axes, keepdims=keepdims, dtype=node.dtype)
        return fn(x, axis=axes, keepdims=keepdims)
    if op.kind is Kind.GATHER:
        return gather_ref.gather(xp, node, args[0], args[1:])
    if op.kind is Kind.CONTRACTION:
        return matmul(xp, args[0], args[1])
    if op.kind is Kind.SCAN:  # accumulate in the node's dtype, in NumPy's order
        (x,) = args
        if node.op in ("cummax", "cummin"):
            return getattr(xp, op.combine).accumulate(x, axis=node.attr("axis"), dtype=node.dtype)
        if node.dtype == dtypes.BFLOAT16:  # the running value in float32, each prefix rounded once (below)
            return getattr(xp, node.op)(x.astype(dtypes.FLOAT32), axis=node.attr("axis")).astype(node.dtype)
        return getattr(xp, node.op)(x, axis=node.attr("axis"), dtype=node.dtype)
    (x,) = args
    if node.op == "expand_dims":
        return xp.expand_dims(x, tuple(node.attr("axes"))) if node.attr("axes") else x
    if node.op == "squeeze":
        return xp.squeeze(x, tuple(node.attr("axes"))) if node.attr("axes") else x
    if node.op == "transpose":
        return xp.transpose(x, tuple(node.attr("perm")))
    if node.op == "slice":
        return x[tuple(slice(first, first + step * count if first + step * count >= 0 else None, step)
                       if count else slice(0, 0) for first, step, count in slice_bounds(x.shape, dict(node.attrs)))]
    if node.op == "reshape":
        return xp.reshape(x, tuple(node.attr("shape")))
    if node.op == "window":
        return windows.evaluate(x, windows.axes_of(dict(node.attrs)), xp)
    if node.op == "broadcast_to":
        return xp.broadcast_to(x, tuple(node.attr("shape")))
    raise AssertionError(f"no reference for {node.op}")


def matmul(xp: Any, a: Any, b: Any) -> Any:
    """``matmul`` of ``a`` and ``b`` (one dtype) as fusec's GEMMs compute it: float32 and float64 as NumPy's
    (``xp.matmul``), float16 and bfloat16 accumulated in float32 and rounded once, integers wrapping as NumPy's
    loops do."""
    if dtypes.is_narrow_float(a.dtype):
        return xp.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return xp.matmul(a, b)


def run_nodes(xp: Any, nodes: Iterable[Node], env: dict[Node, Any],
              on_value: Callable[[Node, Any], None] | None = None) -> dict[Node, Any]:
    """Evaluate ``nodes`` (in order) into ``env``, which already holds the values they read."""
    ctx = np.errstate(all="ignore") if xp is np else contextlib.nullcontext()
    with ctx:
        for node in nodes:
            if node in env:
                continue
            args = [] if node.op == "size" else [env[o] for o in node.operands]  # size reads shapes only
            value = xp.asarray(evaluate_node(xp, node, args))
            if value.dtype != node.dtype or tuple(value.shape) != node.shape:
                raise AssertionError(
                    f"interpreter produced {value.dtype}{value.shape} for {node!r}")
            env[node] = value
            if on_value is not None:
                on_value(node, value)
    return env


def interpret(graph: Graph, args: list[Any] | Mapping[Node, Any], xp: Any = np) -> list[Any]:
    """Run ``graph`` on ``args`` (one array per input, in order); returns one array per output."""
    env: dict[Node, Any] = dict(args) if isinstance(args, Mapping) else {}
    if not isinstance(args, Mapping):
        if len(args) != len(graph.inputs):
            raise ValueError(f"{graph.name} takes {len(graph.inputs)} inputs, got {len(args)}")
        for node, value in zip(graph.inputs, args):
            env[node] = xp.asarray(value)
    run_nodes(xp, graph.nodes, env)
    return [env[o] for o in graph.outputs]
