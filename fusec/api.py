"""The public face: ``@fusec.fuse`` and the :class:`Fused` object it returns.

A Fused object traces its function once per *signature* (each argument's dtype, rank and which
dims are 0 or 1; Python scalars by value), keeps the traced graph, and re-infers shapes for a new
size of the same signature instead of tracing again (unless the function read a concrete size).
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusec.arrayspec import ArraySpec
from fusec.errors import FusecError, FusecTypeError, FusecValueError, TraceError
from fusec.explain import Explanation
from fusec.ir import dtypes
from fusec.ir.graph import Graph, rebind
from fusec.ir.interpret import interpret
from fusec.ir.trace import output_node, trace_function
from fusec.plan import Plan, execute_numpy, make_plan

_SHAPES_KEPT = 64  # graphs kept per signature, one per distinct set of input shapes


@dataclass
class TracedFunction:
    """One signature's trace: the graph, how outputs are packed, and graphs re-inferred per shape."""

    graph: Graph
    structure: str  # "single" | "tuple" | "list"
    shape_specialized: bool
    by_shapes: dict[tuple, Graph] = field(default_factory=dict)

    def pack(self, values: list[Any]) -> Any:
        if self.structure == "single":
            return values[0]
        return tuple(values) if self.structure == "tuple" else list(values)


def _backend(value: Any) -> str | None:
    if isinstance(value, np.ndarray):
        return "numpy"
    if isinstance(value, ArraySpec):
        return "spec"
    module = type(value).__module__
    if module.startswith("cupy"):
        return "cupy"
    return None


def _dim_pattern(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d if d in (0, 1) else -1 for d in shape)


def _scalar_key(value: Any) -> Any:
    if isinstance(value, np.generic):  # before float: np.float64 subclasses float but is strong
        return (value.dtype.str, value.tobytes())
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, float):
        return (float, value, math.copysign(1.0, value))
    return (type(value).__name__, value)


class Fused:
    """A function compiled by fusec. Call it like the original; inspect it with ``trace``/``explain``.

    - ``f(*arrays)`` with NumPy arrays runs the NumPy reference backend and returns NumPy arrays;
      with CuPy arrays it runs on the GPU and returns CuPy arrays (results of full reductions are
      0-d arrays).
    - ``f(..., out=arrays)`` writes the results into the given arrays (same-kind casting) and
      returns them.
    - ``f.trace(*args)`` returns the traced IR graph; arguments may be :class:`fusec.ArraySpec`.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None):
        if not callable(fn):
            raise FusecTypeError(f"fusec.fuse needs a function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "fused")
        self._signature = inspect.signature(fn)
        self._traces: dict[tuple, TracedFunction] = {}
        self._plans: dict[Graph, Plan] = {}
        self._fast: dict[tuple, Callable[[tuple], Any]] = {}  # exact GPU layouts -> runner
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"<fusec.Fused {self.name}>"

    # -- arguments -----------------------------------------------------------------------------
    def _params(self, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise FusecTypeError(f"{self.name}(): {exc}") from None
        bound.apply_defaults()
        params: list[tuple[str, Any]] = []
        for name, value in bound.arguments.items():
            kind = self._signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                params.extend((f"{name}{i}", v) for i, v in enumerate(value))
            elif kind is inspect.Parameter.VAR_KEYWORD:
                params.extend(value.items())
            else:
                params.append((name, value))
        return params

    def _check_arguments(self, params: list[tuple[str, Any]]) -> str:
        """The backend of the array arguments ("numpy", "cupy" or "spec"); errors on a mix."""
        seen: dict[str, str] = {}
        for name, value in params:
            backend = _backend(value)
            if backend is None:
                if isinstance(value, (list, tuple, dict, set, str, bytes)):
                    raise FusecTypeError(
                        f"argument '{name}' of {self.name} is a {type(value).__name__}",
                        hint="pass arrays (NumPy or CuPy), NumPy scalars or Python numbers",
                    )
                continue
            dtypes.as_dtype(value.dtype)
            seen.setdefault(backend, name)
        if len(seen) > 1:
            first, second = sorted(seen.items())[:2]
            raise FusecTypeError(
                f"{self.name} got {first[0]} argument '{first[1]}' and {second[0]} argument '{second[1]}'",
                hint="pass all arrays from one library (convert with cupy.asarray or .get())",
            )
        return next(iter(seen), "numpy")

    def _key(self, params: list[tuple[str, Any]]) -> tuple:
        key = []
        for _, value in params:
            if _backend(value) is not None or (isinstance(value, np.ndarray)):
                key.append(("array", np.dtype(value.dtype).str, _dim_pattern(tuple(value.shape))))
            else:
                key.append(("value", _scalar_key(value)))
        return tuple(key)

    # -- tracing -------------------------------------------------------------------------------
    def trace(self, *args: Any, **kwargs: Any) -> Graph:
        """The traced IR graph for these arguments (arrays or :class:`fusec.ArraySpec`)."""
        params = self._params(args, kwargs)
        self._check_arguments(params)
        return self._graph(params)

    def _graph(self, params: list[tuple[str, Any]]) -> Graph:
        return self._traced(params)[1]

    def _traced(self, params: list[tuple[str, Any]]) -> tuple[TracedFunction, Graph]:
        key = self._key(params)
        shapes = tuple(tuple(v.shape) for _, v in params if _backend(v) is not None)
        with self._lock:
            traced = self._traces.get(key)
            if traced is None:
                traced = self._trace_new(params)
                traced.by_shapes[shapes] = traced.graph
                self._traces[key] = traced
            graph = traced.by_shapes.get(shapes)
            if graph is None:
                # a new size of a known signature: re-infer shapes, unless the function read a size
                if traced.shape_specialized:
                    graph = self._trace_new(params).graph
                else:
                    graph = rebind(traced.graph, [tuple(s) for s in shapes])
                if len(traced.by_shapes) >= _SHAPES_KEPT:
                    traced.by_shapes.pop(next(iter(traced.by_shapes)))
                traced.by_shapes[shapes] = graph
        return traced, graph

    def _trace_new(self, params: list[tuple[str, Any]]) -> TracedFunction:
        inputs, result, specialized = trace_function(self.fn, params)
        if isinstance(result, (tuple, list)):
            structure = "tuple" if isinstance(result, tuple) else "list"
            values = list(result)
            if not values:
                raise TraceError(f"{self.name} returned an empty {structure}",
                                 hint="return the arrays it computes")
        else:
            structure, values = "single", [result]
        outputs = tuple(output_node(v, i) for i, v in enumerate(values))
        graph = Graph(self.name, tuple(inputs), outputs)
        return TracedFunction(graph, structure, specialized)

    def plan(self, *args: Any, **kwargs: Any) -> Plan:
        """The kernels these arguments (arrays or :class:`fusec.ArraySpec`) run as, with bytes moved."""
        params = self._params(args, kwargs)
        self._check_arguments(params)
        return self._plan(params)[1]

    def _plan(self, params: list[tuple[str, Any]]) -> tuple[TracedFunction, Plan]:
        traced, graph = self._traced(params)
        with self._lock:
            plan = self._plans.get(graph)
            if plan is None:
                plan = make_plan(graph)
                if len(self._plans) >= _SHAPES_KEPT:
                    self._plans.pop(next(iter(self._plans)))
                self._plans[graph] = plan
        return traced, plan

    def explain(self, *args: Any, **kwargs: Any) -> Explanation:
        """A report of the traced IR, the optimized IR with kernels marked, each kernel's bytes and the
        reason for every refusal to fuse. Works with :class:`fusec.ArraySpec` and without a GPU."""
        return Explanation(self.plan(*args, **kwargs))

    # -- running -------------------------------------------------------------------------------
    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None and not kwargs:
            key = _fast_key(args)
            fast = self._fast.get(key)
            if fast is not None:
                return fast(args)
        params = self._params(args, kwargs)
        backend = self._check_arguments(params)
        if backend == "spec":
            raise FusecTypeError(
                f"{self.name} was called with an ArraySpec, which describes an array but holds no data",
                hint="call it with arrays; use .explain/.trace with ArraySpec arguments",
            )
        traced, plan = self._plan(params)
        arrays = [v for _, v in params if _backend(v) is not None]
        if backend == "cupy":
            results = self._run_gpu(plan, arrays, out)
            if out is None and not kwargs and len(arrays) == len(args) and not _fusion_disabled():
                self._remember_fast_path(args, traced, plan, arrays)
            return traced.pack(results)
        results = execute_numpy(plan, arrays, xp=np)
        if out is not None:
            results = _write_out(self.name, results, out, np)
        return traced.pack(results)

    def _run_gpu(self, plan: Plan, arrays: list[Any], out: Any) -> list[Any]:
        import cupy

        from fusec.runtime import run_plan

        if _fusion_disabled():  # FUSEC_DISABLE_FUSION=1: one CuPy call per op, for comparison
            results = interpret(plan.traced, arrays, xp=cupy)
            return results if out is None else _write_out(self.name, results, out, cupy)
        if out is None:
            return run_plan(plan, arrays)
        outs = _out_list(self.name, out, len(plan.graph.outputs))
        direct = {}
        for node, dst in zip(plan.graph.outputs, outs):
            if (isinstance(dst, cupy.ndarray) and dst.dtype == node.dtype and tuple(dst.shape) == node.shape
                    and node not in direct and not any(cupy.may_share_memory(dst, a) for a in arrays)):
                direct[node] = dst
        results = run_plan(plan, arrays, out=direct)
        pending = [r for r, dst in zip(results, outs) if r is not dst]
        if pending:
            _write_out(self.name, results, outs, cupy)
        return outs

    def _remember_fast_path(self, args: tuple, traced: TracedFunction, plan: Plan, arrays: list[Any]) -> None:
        """After a checked call, cache a runner for this exact argument layout: the next call with
        arrays of the same shapes, strides, dtypes and alignment only allocates and launches."""
        from fusec.runtime import default_launcher

        runner = default_launcher().plan_runner(plan, arrays)
        if runner is None:
            return
        pack = traced.pack
        with self._lock:
            if len(self._fast) >= _SHAPES_KEPT:
                self._fast.pop(next(iter(self._fast)))
            self._fast[_fast_key(args)] = lambda a: pack(runner(a))

    def cuda_source(self, *args: Any, **kwargs: Any) -> str:
        """The CUDA C source of every kernel, exactly as compiled for these arguments (arrays, whose
        layouts matter, or :class:`fusec.ArraySpec`, taken as C-contiguous). No GPU needed."""
        return "\n".join(self._kernel_sources(args, kwargs))

    def ptxas(self, *args: Any, arch: str = "sm_90", **kwargs: Any) -> str:
        """The compiler's resource report of each kernel (registers, spills, stack, shared memory),
        compiled with NVRTC for ``arch``. No GPU needed."""
        from fusec.codegen.nvrtc import compile_cubin

        lines = []
        for source in self._kernel_sources(args, kwargs):
            result = compile_cubin(source, arch)
            for name, report in (result.kernels or {}).items():
                lines.append(f"{name} ({arch}): {report}")
        return "\n".join(lines)

    def _kernel_sources(self, args: tuple, kwargs: dict) -> list[str]:
        from fusec.codegen.cuda import render_kernel
        from fusec.codegen.plan import ArrayLayout, kernel_spec

        params = self._params(args, kwargs)
        self._check_arguments(params)
        _, plan = self._plan(params)
        values = dict(zip(plan.graph.inputs, [v for _, v in params if _backend(v) is not None]))
        sources = []
        for kernel in plan.kernels:
            layouts = {}
            for node in kernel.inputs:
                value = values.get(node)
                if isinstance(value, ArraySpec):
                    if value.strides is not None:
                        layouts[node] = ArrayLayout(tuple(value.strides), contiguous=False)
                elif value is not None:
                    layouts[node] = ArrayLayout.of(value)
            sources.append(render_kernel(kernel_spec(kernel.region, kernel.space, layouts)))
        return sources


def _fast_key(args: tuple) -> tuple:
    """What a cached runner depends on: each array's type, dtype, shape, strides, alignment and device.
    Only array arguments qualify (a scalar argument makes the key miss, taking the full path)."""
    key = []
    for a in args:
        data = getattr(a, "data", None)
        ptr = getattr(data, "ptr", None)
        if ptr is None:
            return (None,)
        key.append((a.dtype, a.shape, a.strides, ptr & 15, data.device_id))
    return tuple(key)


def _fusion_disabled() -> bool:
    return os.environ.get("FUSEC_DISABLE_FUSION", "") not in ("", "0")


def _out_list(name: str, out: Any, count: int) -> list[Any]:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != count:
        raise FusecValueError(f"{name} returns {count} arrays but out= has {len(outs)}")
    return outs


def _write_out(name: str, results: list[Any], out: Any, xp: Any) -> list[Any]:
    """Copy results into the caller's ``out`` arrays with same-kind casting, as NumPy's ``out=``."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(results):
        raise FusecValueError(f"{name} returns {len(results)} arrays but out= has {len(outs)}")
    for i, (res, dst) in enumerate(zip(results, outs)):
        if not isinstance(dst, xp.ndarray):
            raise FusecTypeError(f"out[{i}] of {name} must be a {xp.__name__} array, got {type(dst).__name__}")
        if tuple(dst.shape) != tuple(res.shape):
            raise FusecValueError(f"out[{i}] of {name} has shape {tuple(dst.shape)}, the result has "
                                  f"{tuple(res.shape)}")
        if not np.can_cast(res.dtype, dst.dtype, "same_kind"):
            raise FusecTypeError(f"cannot write the {res.dtype} result {i} of {name} into out[{i}] of dtype "
                                 f"{dst.dtype} with casting rule 'same_kind'")
        xp.copyto(dst, res, casting="same_kind")
    return outs


def fuse(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Compile a NumPy/CuPy-style function into fused kernels.

    Use as ``@fusec.fuse`` or ``@fusec.fuse(name="softmax")``. The function is traced on its first
    call with each new signature (dtypes, ranks, which dims are 0 or 1; Python scalar arguments by
    value, so pass values that change every call as 0-d arrays). It may use NumPy or CuPy ufuncs,
    operators, reductions with ``axis``/``keepdims``, ``where``, ``astype``, broadcasting with
    ``None``/``...``/``expand_dims``/``broadcast_to`` and transposes, and may return one array or a
    tuple. Anything else raises a :class:`fusec.FusecError` naming your file and line.
    """
    if fn is None:
        return lambda f: Fused(f, name=name)
    return Fused(fn, name=name)


__all__ = ["Fused", "fuse", "FusecError"]
