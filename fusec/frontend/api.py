"""The public face: ``@fusec.fuse`` and the :class:`Fused` object it returns.

A Fused object traces its function once per *signature* (each argument's dtype, rank and which
dims are 0 or 1; a runtime scalar's class, a static one's value), keeps the traced graph, and re-infers
shapes for a new size of the same signature instead of tracing again (unless the function read a
concrete size). Python and NumPy scalar arguments are runtime scalars (kernel inputs, see
:mod:`fusec.frontend.scalars`) unless named static or used where their value decides the trace.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import sys
import threading
import time
import tokenize
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusec.frontend import arguments, foreign, lazy_arrays, pytrees
from fusec.frontend.aliases import check_unread
from fusec.frontend.indexing import unread_index_checks
from fusec.frontend.nodes import ShapeGuard
from fusec.frontend.recompile import RecompileTracker
from fusec.frontend.scalars import NeedsConcrete, Scalar, coarse_class, is_runtime_candidate, scalar_class
from fusec.frontend.trace import array_module, inline, output_node, return_site, trace_function, tracing
from fusec.frontend.tracer import Tracer
from fusec.frontend.update import check_updated
from fusec.inspect.explain import Explanation
from fusec.ir import dtypes
from fusec.ir.graph import Graph, rebind_nodes
from fusec.ir.region import MATMUL, contraction_of
from fusec.passes.manager import DEFAULT_PIPELINE, UNFUSED_PIPELINE
from fusec.runtime.executable import Executable, pack_results
from fusec.runtime.plan import Plan, make_plan
from fusec.runtime.results import DictStructure
from fusec.runtime.write_backs import PartialUpdate
from fusec.schedule import Schedule, ScheduleRequest
from fusec.support import counters, logs
from fusec.support.errors import FusecError, FusecTypeError, FusecValueError, TraceError, UnsupportedError
from fusec.support.lru import LRU

_SHAPES_KEPT = 64  # graphs kept per signature, one per distinct set of input shapes
_SIGNATURES_KEPT = 64  # traces kept per Fused, the least recently used dropped (a new static scalar is a new one)


@dataclass(eq=False)
class TracedFunction:
    """One signature's trace: the graph, how outputs are packed, and graphs re-inferred per shape. Compared (and
    hashed) as itself: :class:`Fused` keys its executables by it."""

    graph: Graph
    structure: str  # "single" | "tuple" | "list" | "none" (it returns None): fusec.runtime.results
    shape_specialized: bool
    scalars: tuple[Scalar, ...] = ()  # the runtime scalars that are graph inputs, after the arrays
    updates: tuple[int, ...] = ()  # array inputs updated in place: the graph's last outputs are their values
    runtime: frozenset[str] = frozenset()  # the arguments traced as runtime scalars
    by_shapes: dict[tuple, TracedFunction] = field(default_factory=dict)  # this trace for each set of shapes
    parts: tuple[PartialUpdate, ...] = ()  # assignments to part of an argument: the graph's very last outputs
    # (argument position, extent, axis, line) of each argument used as the indices of a gather no result reads:
    # checked before a call as NumPy checks them (fusec.frontend.indexing.unread_index_checks)
    index_checks: tuple[tuple[int, int, int, str | None], ...] = ()
    # fusec's decisions taken from this trace's sizes: reused for new sizes only where each still holds
    guards: tuple[ShapeGuard, ...] = ()
    nones: tuple[int, ...] = ()  # the positions of a returned tuple's or list's None entries
    # the runtime scalar arguments whose class (for an int: the dtypes it fits, its sign) a value-based rule read: the
    # trace holds for values of their class; for the others, for any value of their type (scalars.coarse_class)
    class_read: frozenset[str] = frozenset()
    # the backend ``cupy.get_array_module`` answered for while tracing ("numpy" or "cupy"), None if never asked: the
    # trace holds for that backend's calls only
    array_module: str | None = None

    @property
    def n_results(self) -> int:
        """How many of the graph's outputs the function returns (the in-place updates follow them): its array
        results, None entries not counted."""
        return len(self.graph.outputs) - len(self.updates) - len(self.parts)

    @property
    def updated(self) -> tuple[int, ...]:
        """The array arguments the function changes: wholly (``updates``) or in part (``parts``)."""
        return tuple(dict.fromkeys((*self.updates, *(p.index for p in self.parts))))

    def scalar_values(self, args: Mapping[str, Any]) -> list[np.ndarray] | None:
        """The runtime scalars' values for a call's arguments (by name), as 0-d arrays of their inputs'
        dtypes; None when one computed from the arguments (``step + 1``) left the class it was traced with."""
        values = []
        for s in self.scalars:
            value = s.compute(args)
            if self._changed(s, value):
                return None
            values.append(np.asarray(value, dtype=s.node_.dtype))
        return values

    def _changed(self, s: Scalar, value: Any) -> bool:
        """Whether runtime scalar ``s`` left the class the trace holds for with the new ``value``: its whole class
        where a rule read it, else its coarse class (an int stays an int within +-2**53)."""
        if s.names & self.class_read:
            return scalar_class(value) != s.cls
        return coarse_class(value) != coarse_class(s.value)

    def changed_class(self, args: Mapping[str, Any]) -> frozenset[str]:
        """The arguments of the runtime scalars whose class changed (see :meth:`scalar_values`)."""
        return frozenset().union(*(s.names for s in self.scalars if self._changed(s, s.compute(args))))

    def pack(self, values: list[Any]) -> Any:
        """The function's results (the first :attr:`n_results` of ``values``) as it returns them."""
        return pack_results(values[:self.n_results], self.structure, self.nones)


def _check_unread_indices(traced: TracedFunction, arrays: list[Any], backend: str) -> None:
    """NumPy's IndexError for an argument used as the indices of a gather that no result reads (the plan drops the
    gather, and its kernel's check with it), before anything runs, as NumPy raises at the gather; on the GPU
    unless ``FUSEC_CHECK_INDICES=0``."""
    from fusec.ir.gather_ref import check_bounds

    if backend == "cupy":
        from fusec.runtime.launch import check_indices

        if not check_indices():
            return
        import cupy as xp
    else:
        xp = np
    for position, extent, axis, loc in traced.index_checks:
        check_bounds(xp, arrays[position], extent, axis, loc)



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
    """A function compiled by fusec (what :func:`fusec.fuse` returns). Call it like the original;
    inspect it with ``trace``, ``plan``, ``explain``, ``cuda_source`` and ``ptxas``.

    - ``f(*arrays)`` with CuPy arrays runs the fused kernels on the GPU and returns CuPy arrays; with
      NumPy arrays it runs the NumPy reference backend and returns NumPy arrays (a 0-d result as a NumPy
      scalar, as NumPy gives it).
    - ``f(..., out=arrays)`` writes the results into the given arrays (same-kind casting) and
      returns them.
    - It returns what the function returns: None for ``return None`` (in-place updates still happen),
      None at the positions of a returned tuple's, list's or dict's None entries, ``()`` for ``return ()``.
    - Lists, tuples, dicts and dataclasses of arrays (and numbers) are arguments like arrays
      (:mod:`fusec.frontend.pytrees`).
    - PyTorch tensors (and other DLPack arrays) are taken without a copy: CUDA ones run the kernels on
      PyTorch's current stream, CPU ones the NumPy backend; results come back as tensors.
    - Python and NumPy scalar arguments are runtime scalars (kernel inputs) unless static; in-place
      updates of array arguments (``x += v``, ``x[mask] = v``) change the caller's arrays.
    - ``f.trace(*args)``, ``f.plan(*args)``, ``f.explain(*args)``, ``f.cuda_source(*args)`` and
      ``f.ptxas(*args)`` take arrays or :class:`fusec.ArraySpec` and need no GPU
      (``f.explain(..., run=True)`` does).
    - ``f.fn`` is the original function, ``f.name`` its name in the IR, ``f.fusion`` whether it fuses.

    ``FUSEC_DISABLE_FUSION=1`` makes every Fused run unfused (one kernel per op), for comparison.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, fusion: bool = True,
                 schedules: Mapping[str, Any] | None = None, static_argnames: Any = None,
                 static_argnums: Any = None, autotune: bool | None = None, tf32: bool | None = None):
        if not callable(fn):
            raise FusecTypeError(f"fusec.fuse needs a function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "fused")
        self.fusion = bool(fusion)  # False: one kernel per op (see fuse)
        self.schedules = _forced_schedules(schedules)  # kernel name -> forced schedule (see fuse)
        self.autotune = None if autotune is None else bool(autotune)  # None: $FUSEC_AUTOTUNE (see fuse)
        self.tf32 = None if tf32 is None else bool(tf32)  # float32 matmuls may use TF32; None: $FUSEC_TF32 (see fuse)
        self._signature = inspect.signature(fn)
        self.static_argnames = _static_names(self._signature, self.name, static_argnames, static_argnums)
        self._auto_static: frozenset[str] = frozenset()  # runtime scalars found to decide the trace
        self._class_read: frozenset[str] = frozenset()  # runtime scalars whose class a trace read: keyed by it
        self._traces: LRU[tuple, TracedFunction] = LRU(_SIGNATURES_KEPT)
        self._plans: dict[tuple[Graph, bool], Plan] = {}
        # each trace's (for one set of shapes) executable of its plan, with how the call returns and writes back
        self._executables: dict[TracedFunction, Executable] = {}
        self._fast: dict[tuple, Callable[[tuple], Any]] = {}  # exact GPU layouts -> runner
        self._lock = threading.RLock()
        self._counts = counters.Counters()  # what f.cache_info() reports
        self._recompiles = RecompileTracker(self.name, self._counts)

    def __repr__(self) -> str:
        return f"<fusec.Fused {self.name}>"

    def __reduce__(self) -> str | tuple:
        """Pickled without its compiled state (traces, plans, launchers, lock): the process that unpickles it
        traces and compiles again (kernels come from the disk cache). A module-level ``@fusec.fuse`` function
        pickles by reference, as functions do; any other by its function and options."""
        module = sys.modules.get(getattr(self.fn, "__module__", None) or "")
        qualname = getattr(self.fn, "__qualname__", "")
        base = getattr(module, qualname, None) if module is not None and "." not in qualname else None
        if base is self:
            return qualname
        # a copy of a decorated function (with_schedules): its function is reached through the decorated one
        fn = base if isinstance(base, Fused) and base.fn is self.fn else self.fn
        return (_unpickle_fused, (fn, self.name, self.fusion, self.schedules or None,
                                  tuple(sorted(self.static_argnames)) or None, self.autotune, self.tf32))

    def with_schedules(self, schedules: Mapping[str, Any]) -> Fused:
        """The same function with these kernels' schedules forced (kernel name -> a schedule or its text,
        such as ``{"k0": "rows:block_regs,threads=512"}``; fields left out are the heuristics' for that
        kernel), added to the ones already forced. ``explain`` prints each kernel's schedule."""
        return Fused(self.fn, name=self.name, fusion=self.fusion, schedules={**self.schedules, **schedules},
                     static_argnames=self.static_argnames, autotune=self.autotune, tf32=self.tf32)

    def _schedules(self, plan: Plan) -> dict[str, Any]:
        """The schedules forced on ``plan``'s kernels: the ones given, and with ``tf32`` given, each matmul's GEMM
        with TF32 allowed (float32 ones) or not (:mod:`fusec.kinds.matmul`; unset, ``$FUSEC_TF32`` decides)."""
        if self.tf32 is None:
            return self.schedules
        tf32 = {}
        for k in plan.kernels:
            c = contraction_of(k.region)
            if c is not None:
                tf32[k.name] = f"{MATMUL}:cublas,tf32={int(self.tf32 and c.dtype == np.float32)}"
        return {**tf32, **self.schedules}

    # -- arguments -----------------------------------------------------------------------------
    def _params(self, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            plain = self._signature.replace(
                parameters=[p.replace(annotation=p.empty) for p in self._signature.parameters.values()],
                return_annotation=inspect.Signature.empty)
            raise FusecTypeError(f"{self.name}(): {exc}", hint=f"call it as {self.name}{plain}") from None
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
        # a container of arrays: one parameter per leaf (fusec.frontend.pytrees), built again for the traced call
        params = [leaf for n, v in params for leaf in (pytrees.flatten(n, v) if pytrees.is_tree(v) else [(n, v)])]
        # a torch tensor (or another DLPack array) given to trace/plan/explain: its NumPy or CuPy view
        return [(n, foreign.as_native(v, f"argument '{n}'") if foreign.is_foreign(v) else v) for n, v in params]

    def _positional_count(self, params: list[tuple[str, Any]]) -> int:
        """How many of ``params`` (in :meth:`_params`' order) the function takes by position: its positional
        parameters and ``*args`` (named ``args0``, ``args1``, ...); keyword-only ones and ``**kwargs`` follow."""
        names = list(dict.fromkeys(getattr(name, "root", name) for name, _ in params))  # a container's leaves: one
        keyword_only = {p.name for p in self._signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
        i = 0
        for p in self._signature.parameters.values():
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                i += 1
            elif p.kind is inspect.Parameter.VAR_POSITIONAL:
                k = 0
                while i < len(names) and names[i] == f"{p.name}{k}" and names[i] not in keyword_only:
                    i, k = i + 1, k + 1
            else:
                break
        return i

    def _check_arguments(self, params: list[tuple[str, Any]]) -> str:
        """The backend of the array arguments ("numpy", "cupy" or "spec"); errors on a mix."""
        seen: dict[str, str] = {}
        for name, value in params:
            backend = arguments.backend_of(value)
            if backend is None:
                if isinstance(value, (set, bytes)) or (isinstance(value, str) and not isinstance(
                        name, pytrees.LeafName)) or (
                        hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, np.generic)):
                    raise FusecTypeError(
                        f"argument '{name}' of {self.name} is a {_type_name(value)}",
                        hint="pass arrays (NumPy or CuPy), NumPy scalars or Python numbers "
                             "(numpy.asarray or cupy.asarray convert)",
                    )
                continue
            if isinstance(value, np.ma.MaskedArray):
                raise FusecTypeError(f"argument '{name}' of {self.name} is a masked array: its mask would be lost",
                                     hint=f"pass a plain array, such as numpy.ma.filled({name}, 0)")
            if isinstance(value, np.matrix):
                raise FusecTypeError(f"argument '{name}' of {self.name} is a numpy.matrix, whose * is a matrix "
                                     "product (fusec's is elementwise)", hint=f"pass numpy.asarray({name})")
            try:
                dtypes.as_dtype(value.dtype)
            except FusecTypeError as exc:
                native = dtypes.kind(value.dtype) in "biuf" and value.dtype.byteorder not in "=|"
                raise FusecTypeError(
                    f"argument '{name}' of {self.name} has dtype {value.dtype}"
                    + (" (not in the machine's byte order)" if native else "") + ", which fusec does not support",
                    hint=f"convert it: {name}.astype({name}.dtype.newbyteorder('='))" if native else exc.hint,
                ) from None
            seen.setdefault(backend, name)
        if len(seen) > 1:
            first, second = sorted(seen.items())[:2]
            raise FusecTypeError(
                f"{self.name} got {first[0]} argument '{first[1]}' and {second[0]} argument '{second[1]}'",
                hint="pass all arrays from one library (convert with cupy.asarray or .get())",
            )
        if "cupy" in seen:
            for name, value in params:
                if arguments.backend_of(value) == "cupy":
                    _check_device(self.name, f"argument '{name}'", value)
        return next(iter(seen), "numpy")

    def _runtime(self, params: list[tuple[str, Any]]) -> frozenset[str]:
        """The scalar arguments traced as runtime scalars: Python and NumPy numbers passed in the call (a
        parameter left at its default is folded), not static."""
        static = self.static_argnames | self._auto_static
        defaults = self._signature.parameters
        return frozenset(name for name, value in params if name not in static and is_runtime_candidate(value)
                         and (name not in defaults or value is not defaults[name].default))

    def _key(self, params: list[tuple[str, Any]], runtime: frozenset[str]) -> tuple:
        key = []
        for name, value in params:
            if arguments.backend_of(value) is not None or (isinstance(value, np.ndarray)):
                entry: tuple = ("array", np.dtype(value.dtype).str, _dim_pattern(tuple(value.shape)))
            elif name in runtime:  # an int's whole class only where a trace read it (TracedFunction.class_read)
                entry = ("scalar", scalar_class(value) if name in self._class_read else coarse_class(value))
            elif isinstance(value, (list, tuple, dict)):  # a container of no array: by value
                entry = ("value", pytrees.static_key(value))
            else:
                entry = ("value", _scalar_key(value))
            if isinstance(name, pytrees.LeafName):  # where in its container: another structure traces again
                entry = (*entry, ("leaf", tuple((kind.__name__, k) for kind, k in name.path)))
            key.append(entry)
        return tuple(key)

    # -- tracing -------------------------------------------------------------------------------
    def trace(self, *args: Any, **kwargs: Any) -> Graph:
        """The traced IR graph for these arguments (arrays or :class:`fusec.ArraySpec`), before any
        pass; ``print()`` shows its text form. No GPU needed."""
        params = self._params(args, kwargs)
        self._check_arguments(params)
        return self._graph(params)

    def _graph(self, params: list[tuple[str, Any]]) -> Graph:
        return self._traced(params)[1]

    def traced_for(self, params: list[tuple[str, Any]]) -> tuple[TracedFunction, Graph, list[np.ndarray]]:
        """For named arguments ``params`` (arrays, :class:`fusec.ArraySpec` values and scalars, in signature order),
        checked as a call checks them: the trace (from the trace cache, or traced now), its graph for their shapes
        and the runtime scalars' values. What callers outside the call path (the Dask path) build on."""
        self._check_arguments(params)
        return self._traced(params)

    def _traced(self, params: list[tuple[str, Any]]) -> tuple[TracedFunction, Graph, list[np.ndarray]]:
        """The trace for these arguments, its graph for their shapes, and the runtime scalars' values
        (0-d NumPy arrays, the graph's inputs after the arrays). A runtime scalar that turns out to decide
        the trace (used as an axis, in an ``if``, ...) becomes static for good, and the function is traced
        again."""
        named = dict(params)
        shapes = tuple(tuple(v.shape) for _, v in params if arguments.backend_of(v) is not None)
        while True:
            runtime = self._runtime(params)
            key = self._key(params, runtime)
            with self._lock:
                traced = self._traces.get(key)
                if traced is not None and traced.array_module not in (None, array_module(params)):
                    # traced for the other backend, whose module a query answered: this backend's own trace
                    key = (*key, ("array_module", array_module(params)))
                    traced = self._traces.get(key)
                if traced is None:
                    earlier = self._traces.keys()
                    failed = False
                    try:
                        traced = self._timed_trace(params, runtime, key, earlier)
                    except NeedsConcrete as signal:
                        if signal.names <= self._auto_static:  # cannot happen: static arguments are no Scalars
                            raise TraceError(f"{signal} while tracing {self.name}, though static") from None
                        self._auto_static |= signal.names
                        continue
                    except FusecError:
                        if not runtime:
                            raise
                        failed = True
                    if failed:  # a check of fusec's that wants a plain number: as before runtime scalars, or its error
                        key = self._key(params, frozenset())
                        traced = self._timed_trace(params, frozenset(), key, earlier)
                        self._auto_static |= runtime
                    traced.by_shapes[shapes] = traced
                    if traced.class_read - self._class_read:  # keyed by those arguments' whole class from now on
                        self._class_read |= traced.class_read
                        key = self._key(params, traced.runtime)
                    self._traces.put(key, traced)
                entry = traced.by_shapes.get(shapes)
                if entry is None:
                    # a new size of a known signature: re-infer shapes, unless the function read a size (then
                    # its runtime scalars may hold sizes too: ``lr / x.shape[0]``)
                    # re-inferred, unless a decision fusec took from the old sizes does not hold for these
                    graph, broken = None, None
                    if not traced.shape_specialized:
                        graph, mapping = rebind_nodes(traced.graph, [tuple(s) for s in shapes]
                                                      + [()] * len(traced.scalars))
                        broken = next((g for g in traced.guards if not g.holds_after(mapping)), None)
                        if broken is not None and logs.on("cache"):
                            logs.emit("cache", "%s: traced again for shapes %s: %s", self.name, list(shapes),
                                      broken.why)
                    if graph is None or broken is not None:
                        entry = self._timed_trace(params, traced.runtime, key, [key], size_read=True)
                    else:
                        entry = dataclasses.replace(traced, graph=graph, by_shapes={})
                        self._count("shape_reuses")
                        if logs.on("cache"):
                            logs.emit("cache", "%s: trace reused for new shapes %s (shapes re-inferred)", self.name,
                                      list(shapes))
                    if len(traced.by_shapes) >= _SHAPES_KEPT:
                        traced.by_shapes.pop(next(iter(traced.by_shapes)))
                    traced.by_shapes[shapes] = entry
                values = entry.scalar_values(named)
                if values is None:  # ``step - 5`` changed sign, say: trace those arguments by value
                    self._auto_static |= entry.changed_class(named)
                    continue
            return entry, entry.graph, values

    def _timed_trace(self, params: list[tuple[str, Any]], runtime: frozenset[str], key: tuple,
                     earlier: list[tuple], size_read: bool = False) -> TracedFunction:
        """:meth:`_trace_new`, timed, logged and counted, with why no earlier trace served
        (:class:`fusec.frontend.recompile.RecompileTracker`)."""
        start = time.perf_counter()
        traced = self._trace_new(params, runtime)
        self._recompiles.traced([n for n, _ in params], key, earlier, time.perf_counter() - start, size_read)
        return traced

    def _count(self, name: str) -> None:
        with counters.charging(self._counts):
            counters.count(name)

    def cache_info(self) -> counters.CacheInfo:
        """What this function's caches did so far (:class:`fusec.support.counters.CacheInfo`): traces and retraces,
        trace reuses for new shapes, plans, kernels compiled, compiled kernels read from the disk cache."""
        return self._counts.info()

    def _trace_new(self, params: list[tuple[str, Any]], runtime: frozenset[str]) -> TracedFunction:
        traced = trace_function(self.fn, params, self._positional_count(params), runtime)
        inputs, result, specialized, scalars, updates, parts = traced[:6]
        nones: tuple[int, ...] = ()
        if isinstance(result, dict):  # a dict of arrays (and None), keyed by strings or ints: returned as one
            if not all(type(k) in (str, int) for k in result):
                raise UnsupportedError(f"{self.name} returned a dict with keys other than strings and ints",
                                       loc=return_site(self.fn, returning_dict=True),
                                       hint="key the returned dict by strings")
            structure: str = DictStructure(list(result))
            nones = tuple(i for i, v in enumerate(result.values()) if v is None)
            values = [v for v in result.values() if v is not None]
        elif result is None:  # returns None, as the function does (its in-place updates still run)
            structure, values = "none", []
        elif isinstance(result, (tuple, list)):  # None entries are returned as None where they are
            structure = "tuple" if isinstance(result, tuple) else "list"
            nones = tuple(i for i, v in enumerate(result) if v is None)
            values = [v for v in result if v is not None]
        else:
            structure, values = "single", [result]
        loc = None if all(isinstance(v, Tracer) for v in values) else return_site(self.fn)
        outputs = tuple(output_node(v, i, loc) for i, v in enumerate(values))
        graph = Graph(self.name, tuple(inputs), outputs + tuple(node for _, node in updates)
                      + tuple(p.value for p in parts))
        check_unread(graph, return_site(self.fn))  # a view that may be a copy, read after a write to its array
        index_checks = unread_index_checks(set(graph.nodes), traced.gathers, graph.inputs)
        # the checks' extents are this trace's sizes: a new size traces again
        return TracedFunction(graph, structure, specialized or bool(index_checks), tuple(scalars),
                              tuple(i for i, _ in updates), runtime, parts=tuple(parts), index_checks=index_checks,
                              guards=traced.guards, nones=nones, array_module=traced.array_module,
                              class_read=traced.class_read)

    def plan(self, *args: Any, **kwargs: Any) -> Plan:
        """The kernels these arguments (arrays or :class:`fusec.ArraySpec`) run as, with bytes moved."""
        params = self._params(args, kwargs)
        self._check_arguments(params)
        return self._plan(params)[1]

    def _plan(self, params: list[tuple[str, Any]]) -> tuple[TracedFunction, Plan, list[np.ndarray]]:
        """The trace, its plan for these arguments' shapes, and the runtime scalars' values (0-d arrays)."""
        traced, graph, scalars = self._traced(params)
        key = (graph, self.fusion and not arguments.fusion_disabled())
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = make_plan(graph, DEFAULT_PIPELINE if key[1] else UNFUSED_PIPELINE)
                self._count("plans")
                if logs.on("cache"):
                    logs.emit("cache", "%s: planned %d kernel(s) for %s", self.name, len(plan.kernels),
                              [n.shape for n in graph.inputs])
                if len(self._plans) >= _SHAPES_KEPT:
                    self._plans.pop(next(iter(self._plans)))
                self._plans[key] = plan
        return traced, plan, scalars

    def _executable(self, params: list[tuple[str, Any]]) -> tuple[TracedFunction, Executable, list[np.ndarray]]:
        """The trace, the executable of its plan for these arguments' shapes (how a call returns its results and
        writes into its arguments included), and the runtime scalars' values (0-d arrays)."""
        traced, plan, scalars = self._plan(params)
        with self._lock:
            executable = self._executables.get(traced)
            if executable is None or executable.plan is not plan:  # new, or the plan of another fusion setting
                if traced not in self._executables and len(self._executables) >= _SHAPES_KEPT:
                    self._executables.pop(next(iter(self._executables)))
                executable = Executable(plan, structure=traced.structure, nones=traced.nones, updates=traced.updates,
                                        parts=traced.parts, schedules=self._schedules(plan), autotune=self.autotune)
                self._executables[traced] = executable
        return traced, executable, scalars

    def explain(self, *args: Any, run: bool = False, **kwargs: Any) -> Explanation:
        """What fusec makes of this function for these arguments, as an :class:`fusec.inspect.explain.Explanation`.

        ``print(f.explain(*args))`` shows the traced IR, the IR after the passes with each kernel's
        region marked, each kernel (kind, nodes, what it reads and writes, bytes, launch shape), every
        refusal to fuse with its reason, the intermediates written between kernels, and the bytes
        moved fused vs unfused. Arguments may be arrays or :class:`fusec.ArraySpec`; no GPU needed.
        ``.to_dot()`` / ``.save("f.svg")`` draw the fused DAG (kernels as coloured clusters).

        ``run=True`` also runs it on the GPU and reports each kernel's time and GB/s, the whole fused
        call and the unfused one-CuPy-call-per-op time (CUDA events, medians). ArraySpec arguments get
        random data, NumPy arrays are copied to the GPU. Without a CUDA GPU it raises
        :class:`fusec.FusecError`.
        """
        from fusec.inspect.explain import measure, require_gpu, to_device

        params = self._params(args, kwargs)
        lazy = lazy_arrays.handler_for(params)
        if lazy is not None and not run:  # Dask: the stages it runs, with their tasks and bytes
            return lazy.explain(self, params)
        self._check_arguments(params)
        cupy = require_gpu() if run else None
        if cupy is not None:
            params = [(name, to_device(value, cupy, seed=i)) for i, (name, value) in enumerate(params)]
        _, plan, scalars = self._plan(params)
        values = [v for _, v in params if arguments.backend_of(v) is not None] + _on_device(scalars, cupy)
        passes = DEFAULT_PIPELINE if self.fusion and not arguments.fusion_disabled() else UNFUSED_PIPELINE
        timings = measure(plan, values, schedules=self._schedules(plan)) if cupy is not None else None
        return Explanation.of(plan, values, timings, passes, self._schedules(plan), autotune=self.autotune)

    # -- running -------------------------------------------------------------------------------
    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        """Run the function: fused kernels on the GPU for CuPy arrays, the NumPy reference backend for
        NumPy arrays; ``out=`` (an array, or a tuple for several results) receives the results. Called while another
        fused function traces, it is inlined into that trace: one plan, fused across the call."""
        if out is None and not kwargs:  # the fast path first: traced values never make a key it holds
            key = _fast_key(args)
            fast = self._fast.get(key)
            if fast is not None and (args or not tracing()):  # no arguments: the same empty key either way
                return fast(args)
        if tracing():
            return self._inline(args, kwargs, out)
        if foreign.any_foreign(args, kwargs) or foreign.any_foreign(tuple(out) if isinstance(out, (tuple, list))
                                                                    else (out,), {}):
            return foreign.call(self, args, kwargs, out)  # torch tensors: as NumPy/CuPy views, results back
        params = self._params(args, kwargs)
        lazy = lazy_arrays.handler_for(params)
        if lazy is not None:  # Dask arrays: lazy results (fusec/dask; Dask imported only then)
            return lazy.call(self, params, out)
        backend = self._check_arguments(params)
        if backend == "spec":
            raise FusecTypeError(
                f"{self.name} was called with an ArraySpec, which describes an array but holds no data",
                hint="call it with arrays; use .explain/.trace with ArraySpec arguments",
            )
        traced, executable, scalars = self._executable(params)
        arrays = [v for _, v in params if arguments.backend_of(v) is not None]
        if traced.index_checks:
            _check_unread_indices(traced, arrays, backend)
        n = traced.n_results
        outs = None if out is None else _check_out(self.name, _array_outs(out, traced.nones, n),
                                                   executable.plan.graph.outputs[:n], backend)
        if traced.updated:
            check_updated(self.name, params, traced.updated, backend)
        if backend == "cupy":
            import cupy

            with counters.charging(self._counts):  # kernels compiled or read from disk count as this function's
                results = self._run_gpu(executable, arrays + _on_device(scalars, cupy), outs)
                if (out is None and not kwargs and len(arrays) == len(args) and not arguments.fusion_disabled()
                        and not traced.index_checks):
                    self._remember_fast_path(args, executable, arrays)
            return results
        return executable.reference(arrays + scalars, outs)

    def _inline(self, args: tuple, kwargs: dict, out: Any) -> Any:
        """This function called from a function being traced: its Python function run on the caller's traced values
        (its ops join the caller's trace; its errors name its own lines). Static arguments need nothing: Python
        passes them as they are."""
        if out is not None:
            raise UnsupportedError(f"out= of {self.name} called inside another fused function is not supported",
                                   hint=f"assign its results instead (y[...] = {self.name}(...))")
        return inline(self.fn, args, kwargs)

    def _run_gpu(self, executable: Executable, arrays: list[Any], outs: list[Any] | None) -> Any:
        """A call of ``executable`` on CuPy ``arrays`` (with ``out=`` and write-backs: :class:`Executable`); a
        generated kernel that does not compile raises fusec's error naming this function (:func:`_compile_failure`)."""
        try:
            return executable(arrays, outs)
        except Exception as exc:
            if type(exc).__name__ not in ("CompileError", "CompileException"):
                raise
            raise _compile_failure(self, exc) from None

    def _remember_fast_path(self, args: tuple, executable: Executable, arrays: list[Any]) -> None:
        """After a checked call, cache a runner for this exact argument layout: the next call with
        arrays of the same shapes, strides, dtypes and alignment only allocates and launches (none for a call
        that must take the checked path each time: :meth:`Executable.runner`)."""
        fast = executable.runner(arrays)  # returns the results packed as the function returns them
        if fast is None:
            return
        with self._lock:
            if len(self._fast) >= _SHAPES_KEPT:
                self._fast.pop(next(iter(self._fast)))
            self._fast[_fast_key(args)] = fast

    def cuda_source(self, *args: Any, full: bool = False, **kwargs: Any) -> str:
        """The CUDA C source of every kernel for these arguments (arrays, whose layouts matter, or
        :class:`fusec.ArraySpec`, taken as C-contiguous). No GPU needed. Each kernel's source starts with the
        ``#include`` lines of the device-helper headers it needs (plain files in ``templates/``, ~700 lines that
        NVRTC reads); its accumulator types are folded to a note and a line per reduction phase
        (:mod:`fusec.inspect.kernel_report`). ``full=True`` gives each kernel's exact translation
        unit, headers inlined: one file that compiles as it is."""
        from fusec.codegen.render import inline_headers
        from fusec.inspect.kernel_report import folded_source

        kernels = self._kernels(args, kwargs)
        return "\n".join(inline_headers(k.source) for k in kernels) if full else folded_source(kernels)

    def ptxas(self, *args: Any, arch: str = "sm_90", **kwargs: Any) -> Any:
        """The compiler's resource report of each kernel, compiled with NVRTC for ``arch`` (no GPU needed):
        a :class:`fusec.inspect.kernel_report.PtxasReport`, a list of rows (kernel, registers, spills, stack, shared
        memory,
        threads, blocks and occupancy per SM) that prints as a table. A library's call (a matmul's GEMM) has no row:
        there is nothing of fusec's to compile."""
        from fusec.codegen.nvrtc import compile_cubin
        from fusec.inspect.kernel_report import ptxas_rows
        from fusec.support.progress import progress

        kernels, reports = [], []
        for kernel in progress(self._kernels(args, kwargs), f"ptxas {self.name}", unit="kernel"):
            if kernel.library is not None:  # a library's call (a GEMM): nothing of fusec's to compile
                continue
            start = time.perf_counter()
            try:
                with counters.charging(self._counts):
                    result = compile_cubin(kernel.source, arch)
            except FusecError as exc:
                exc.kernel = kernel.name
                raise _compile_failure(self, exc) from None
            if logs.on("compile"):
                logs.emit("compile", "%s (%s): compiled with NVRTC for ptxas in %.3f s (not cached)", kernel.name,
                          arch, time.perf_counter() - start)
            for report in (result.kernels or {}).values():
                kernels.append(kernel)
                reports.append(report)
        return ptxas_rows(kernels, reports, arch)

    def _kernels(self, args: tuple, kwargs: dict) -> list[Any]:
        """Every kernel these arguments run as (:class:`fusec.codegen.kernel.GeneratedKernel`: schedule, spec,
        source), laid out as the arguments are (an ArraySpec is C-contiguous unless it gives strides)."""
        from fusec.kinds import generate_plan
        from fusec.runtime.autotune import cached_schedules, enabled, tune_device

        params = self._params(args, kwargs)
        self._check_arguments(params)
        _, plan, scalars = self._plan(params)
        values = dict(zip(plan.graph.inputs, [v for _, v in params if arguments.backend_of(v) is not None] + scalars))
        forced = self._schedules(plan)
        if enabled(self.autotune):  # what runs: the tune cache's schedules where it has them
            device = tune_device()
            forced = {**cached_schedules(plan, values, device), **forced}
            return generate_plan(plan, values, forced, device=device)
        return generate_plan(plan, values, forced)


def _on_device(scalars: list[np.ndarray], cupy: Any) -> list[Any]:
    """The runtime scalars' 0-d arrays on the GPU (with CuPy: one copy for all, in 16-byte slots, each as aligned
    as a fresh array to the schedules) or as they are."""
    if cupy is None or not scalars:
        return scalars
    slot = 16
    packed = np.zeros(slot * len(scalars), np.uint8)
    for i, s in enumerate(scalars):
        packed[slot * i:slot * i + s.itemsize] = np.ascontiguousarray(s).reshape(1).view(np.uint8)
    device = cupy.asarray(packed)
    return [device[slot * i:slot * i + s.itemsize].view(s.dtype).reshape(()) for i, s in enumerate(scalars)]


def _static_names(signature: inspect.Signature, name: str, names: Any, nums: Any) -> frozenset[str]:
    """``static_argnames`` and ``static_argnums`` of :func:`fuse` as one set of parameter names, checked."""
    as_list = (lambda v: [] if v is None else [v] if isinstance(v, (str, int)) else list(v))
    params = list(signature.parameters.values())
    positional = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                       inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    out = set()
    for n in as_list(names):
        if not isinstance(n, str) or (n not in signature.parameters and not any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params)):
            raise FusecValueError(f"static_argnames: {n!r} is not a parameter of {name}{signature}",
                                  hint=f"name parameters of {name}: {', '.join(signature.parameters)}")
        out.add(n)
    for i in as_list(nums):
        if not isinstance(i, int) or isinstance(i, bool) or not -len(positional) <= i < len(positional):
            raise FusecValueError(f"static_argnums: {i!r} is not the position of a parameter of {name}{signature}",
                                  hint=f"{name} has {len(positional)} positional parameters")
        out.add(positional[i])
    return frozenset(out)


def _unpickle_fused(fn: Callable[..., Any], name: str, fusion: bool, schedules: Mapping[str, Any] | None,
                    static_argnames: tuple[str, ...] | None = None, autotune: bool | None = None,
                    tf32: bool | None = None) -> Fused:
    return Fused(fn.fn if isinstance(fn, Fused) else fn, name=name, fusion=fusion, schedules=schedules,
                 static_argnames=static_argnames, autotune=autotune, tf32=tf32)




def _fast_key(args: tuple) -> tuple:
    """What a cached runner depends on: each array's dtype, shape, strides, alignment and device, flat,
    then the current device. Only array arguments qualify (a scalar argument makes the key miss,
    taking the full path). Every call computes it, so plain ``cupy.ndarray`` arguments take a lean
    loop; anything else (NumPy arrays, subclasses, scalars) takes :func:`_any_fast_key`."""
    key: list = []
    for a in args:
        if type(a) is not _cupy_ndarray:
            return _any_fast_key(args)
        data = a.data
        key += (a.dtype, a.shape, a.strides, data.ptr & 15, data.device_id)
    if key:  # runners launch on the device they were built on: the current one
        key.append(_current_device())
    return tuple(key)


def _any_fast_key(args: tuple) -> tuple:
    """:func:`_fast_key` for arguments of any type: the same key for CuPy arrays (and subclasses), no
    key for anything else. The first CuPy array it sees enables the lean loop."""
    global _cupy_ndarray
    key: list = []
    for a in args:
        if isinstance(a, np.ndarray):  # (a datetime array's .data raises)
            return _NO_KEY
        data = getattr(a, "data", None)
        ptr = getattr(data, "ptr", None)
        if ptr is None:
            return _NO_KEY
        if _cupy_ndarray is None and arguments.backend_of(a) == "cupy":
            _cupy_ndarray = _cupy_ndarray_type()
        key += (a.dtype, a.shape, a.strides, ptr & 15, data.device_id)
    if key:
        key.append(_current_device())
    return tuple(key)


def _cupy_ndarray_type() -> type:
    import cupy

    return cupy.ndarray


_cupy_ndarray: type | None = None  # cupy.ndarray once a CuPy argument was seen (fusec imports without CuPy)
_NO_KEY = (None,)  # the key of arguments the fast path does not take: never stored


def _forced_schedules(schedules: Mapping[str, Any] | None) -> dict[str, Schedule | ScheduleRequest]:
    """``fuse(schedules=...)`` checked now: kernel names to schedules, text parsed (a bad one raises
    :class:`fusec.ScheduleError` here, where the function is decorated)."""
    from fusec.kinds import as_forced

    if schedules is None:
        return {}
    if not isinstance(schedules, Mapping):
        raise FusecTypeError(f"schedules= takes a dict of kernel name -> schedule, not {type(schedules).__name__}",
                             hint='such as schedules={"k0": "rows:warp"}')
    return {str(k): as_forced(v) for k, v in schedules.items()}


def _type_name(value: Any) -> str:
    cls = type(value)
    return f"{cls.__module__.split('.')[0]}.{cls.__name__}" if cls.__module__ != "builtins" else cls.__name__


def _array_outs(out: Any, nones: tuple[int, ...], n: int) -> Any:
    """``out=`` for the ``n`` array results alone: a tuple (or list) that mirrors what the function returns, None
    at each of its None entries (``out=(o, None)`` for ``return a + b, None``), loses those Nones; any other ``out=``
    (one array per array result: ``out=o`` or ``out=(o,)`` there) is taken as it is."""
    if (nones and isinstance(out, (tuple, list)) and len(out) == n + len(nones)
            and all(out[i] is None for i in nones)):
        return type(out)(o for i, o in enumerate(out) if i not in nones)
    return out


def _check_out(name: str, out: Any, nodes: tuple[Any, ...], backend: str) -> list[Any]:
    """The ``out=`` arrays as a list, checked before anything runs, as NumPy checks them: one per result,
    of the arguments' library (and device), of the result's shape, writable, and of a dtype the result
    casts to under the same-kind rule."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(nodes):
        raise FusecValueError(f"{name} returns {len(nodes)} array(s) but out= has {len(outs)}",
                              hint=f"pass out= a tuple of {len(nodes)} arrays (one per array result; None "
                                   "entries of the result take none)" if len(nodes) > 1 else
                              "pass out= one array" if nodes else "it returns no arrays: leave out= out")
    library = "cupy" if backend == "cupy" else "numpy"
    for i, (node, dst) in enumerate(zip(nodes, outs)):
        where = f"out[{i}] of {name}" if len(outs) > 1 or isinstance(out, (tuple, list)) else f"out= of {name}"
        if arguments.backend_of(dst) != library:
            raise FusecTypeError(
                f"{where} must be a {library}.ndarray like the arguments, got {_type_name(dst)}",
                hint="allocate it with cupy.empty(...) for CuPy arguments, numpy.empty(...) for NumPy ones")
        if tuple(dst.shape) != node.shape:
            raise FusecValueError(f"{where} has shape {tuple(dst.shape)}, the result has shape {node.shape}",
                                  hint="allocate it with the result's shape (see .trace(...) for it)")
        if not np.can_cast(node.dtype, dst.dtype, "same_kind"):
            raise FusecTypeError(
                f"{where}: cannot write the {node.dtype} result into an array of dtype {dst.dtype} with casting "
                f"rule 'same_kind'", hint=f"allocate it as {node.dtype} (or another {node.dtype.kind!r}-kind dtype)")
        if library == "numpy" and not dst.flags.writeable:
            raise FusecValueError(f"{where} is read-only", hint="pass a writable array (a copy)")
        if library == "cupy":
            _check_device(name, where, dst)
    return outs


def _check_device(name: str, what: str, array: Any) -> None:
    """A CuPy array must be on the current device (as CuPy requires), else a clear error."""
    current = _current_device()
    if array.device.id != current:
        raise FusecValueError(
            f"{what} is on GPU {array.device.id} but the current device is GPU {current}",
            hint=f"call {name} inside `with cupy.cuda.Device({array.device.id}):`, or copy the array to GPU "
                 f"{current} with cupy.asarray under that device")


def _current_device() -> int:
    global _get_device
    if _get_device is None:
        import cupy

        _get_device = cupy.cuda.runtime.getDevice
    return _get_device()


_get_device: Callable[[], int] | None = None


def _compile_failure(fused: Fused, exc: Exception) -> FusecError:
    """The error for a generated kernel of ``fused`` that did not compile: it names the function (``@name``,
    where it is defined) and the kernel, and carries NVRTC's log with the numbered source around each error
    line; the whole source is written to a file that the message names."""
    import hashlib
    import re

    from fusec.codegen import templates
    from fusec.codegen.nvrtc import CompileError, numbered_source
    from fusec.codegen.render import included_headers
    from fusec.runtime.cubin_cache import failed_sources_dir, write_private

    source = getattr(exc, "source", "") or ""
    log = getattr(exc, "log", None) or str(exc)
    kernel = getattr(exc, "kernel", None) or "?"  # the runtime (or ptxas) names the kernel it compiled
    try:
        where = f" (defined at {inspect.getsourcefile(fused.fn)}:{inspect.getsourcelines(fused.fn)[1]})"
    except (OSError, TypeError, SyntaxError, tokenize.TokenError):  # no source, or another file under its name
        where = ""
    if isinstance(exc, FusecError):
        detail = exc.message
    else:  # CuPy's CompileException: its log, and the lines it names
        lines = sorted({int(n) for n in re.findall(r"\((\d+)\): (?:catastrophic )?error", log)})[:3]
        detail = "\n\n".join([log.strip()] + [f"source around line {n}:\n{numbered_source(source, n)}"
                                               for n in lines])
    saved = ""
    directory = failed_sources_dir() if source else None
    if directory is not None:  # a directory of this user's, the name sanitized ("../x" stays inside it)
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        try:
            path = write_private(directory, f"{fused.name}.{kernel}.{digest}.cu", source.encode())
            saved = f"; its full source ({len(source.splitlines())} lines) is in {path}"
            if included_headers(source):  # the line numbers above are this file's
                saved += f" (it includes fusec's helper headers from {templates.header_dir()})"
        except OSError:
            pass
    hint = getattr(exc, "hint", None) or ("a generated kernel that does not compile is a fusec bug: please "
                                          "report it with the source file above")
    error = CompileError(f"kernel {kernel} of @{fused.name}{where} did not compile{saved}\n\n{detail}",
                         log=log, source=source, arch=getattr(exc, "arch", ""), hint=hint)
    error.function, error.kernel = fused.name, kernel
    return error


def fuse(fn: Callable[..., Any] | None = None, *, name: str | None = None, fusion: bool = True,
         schedules: Mapping[str, Any] | None = None, static_argnames: Any = None, static_argnums: Any = None,
         autotune: bool | None = None, tf32: bool | None = None) -> Any:
    """Compile a NumPy/CuPy-style function into fused GPU kernels; returns a :class:`fusec.Fused`.

    Use it as a decorator, bare or with options, or call it on a function::

        @fusec.fuse
        def softmax(x):
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

        @fusec.fuse(name="softmax_rows")           # a name for the IR, the kernels and errors
        def softmax2(x): ...

        gelu = fusec.fuse(my_gelu, fusion=False)   # an existing function, unfused
        wide = fusec.fuse(softmax, schedules={"k0": "rows:block"})  # a fused one: the same function, more options

    Arguments:

    - ``fn``: the function. It may use NumPy or CuPy ufuncs and operators, reductions with
      ``axis``/``keepdims`` (``sum``, ``max``, ``argmax``, ``mean``, ``var``, ...), ``where``,
      ``astype``, broadcasting with ``None``/``...``/``expand_dims``/``broadcast_to``, transposes,
      and may return one array or a tuple/list of arrays; matrix products (``@``, ``matmul``, ``einsum``, ...)
      large enough for a GEMM run with cuBLAS. Anything else (indexing with
      arrays, Python control flow on array values, arrays captured from outside) raises a
      :class:`fusec.FusecError` naming your file and line.
    - ``name``: the function's name in the IR, kernel names and messages (default ``fn.__name__``).
    - ``fusion``: ``False`` runs the unfused plan instead, for comparison: the same passes except
      ``fuse``, then one kernel per elementwise op and reduction (layout views join a kernel), every
      intermediate written to memory.
    - ``schedules``: force how kernels run on the GPU, by kernel name (``k0``, ``k1``, ... as ``explain``
      names them): ``{"k0": "rows:block_regs,threads=512"}``. A schedule is its kind and variant, then
      any fields (``explain`` prints each kernel's whole schedule in this form); fields left out are the
      heuristics' for that kernel. A schedule that does not fit its kernel raises
      :class:`fusec.ScheduleError` saying why. ``f.with_schedules({...})`` forces more on a copy.
    - ``static_argnames`` / ``static_argnums``: scalar parameters (by name / position) folded into the
      trace as constants, one trace per value, instead of passed at run time. Scalars used where their
      value decides the trace (an axis, an ``if``, an exponent, ``range(n)``) become static by themselves.
    - ``autotune``: on the GPU, time a few candidate schedules of each kernel not forced on its first
      call and run the fastest whose results agree with the heuristics' (:mod:`fusec.runtime.autotune`); the
      winner is kept on disk per (device, kernel, layouts), so later processes time nothing. ``None``
      (the default) follows ``FUSEC_AUTOTUNE=1``; off unless set (timing costs seconds on a first call).
    - ``tf32``: float32 matrix products (``@``, ``matmul``, ``einsum``... large enough to be a GEMM) may use TF32
      tensor cores (10-bit mantissas: faster, less exact). ``None`` (the default) follows ``FUSEC_TF32=1``; off
      unless set, as NumPy users expect (CuPy's own ``CUPY_TF32`` does not apply to fusec's GEMMs).

    The returned :class:`fusec.Fused` object ``f``:

    - ``f(*args)``: with CuPy arrays, runs the fused kernels on the GPU and returns CuPy arrays; with
      NumPy arrays, runs the NumPy reference backend on the CPU and returns NumPy arrays (a full
      reduction gives a 0-d array). Don't mix the two. Python and NumPy scalar arguments are runtime
      scalars: new values neither trace nor compile again (docs/scalars.md).
    - ``f(*args, out=arrays)``: writes the results into ``out`` (one array, or a tuple for several
      results; same-kind casting, as NumPy's ``out=``) and returns them. A result's None entries take no
      ``out=`` array: pass one per array result, or None at their positions (``out=(o, None)``).
    - A function may return None, or None entries in a tuple or list: the call returns them as they
      are (``return ()`` gives ``()``), and its in-place updates still happen.
    - ``f.trace(*args)``: the traced IR :class:`Graph` (prints as IR text).
    - ``f.plan(*args)``: the kernels it runs as, with the bytes each moves.
    - ``f.explain(*args, run=False)``: the report (traced IR, IR after the passes with each kernel's
      region, kernels with kind/nodes/bytes/launch, refusals to fuse with reasons, bytes fused vs
      unfused); ``print()`` it, ``.to_dot()``/``.save("f.svg")`` draw the fused DAG; ``run=True``
      also times each kernel on the GPU.
    - ``f.cuda_source(*args, full=False)``: the generated CUDA C of each kernel, its helper headers folded to
      a one-line note (``full=True``: exactly as compiled).
    - ``f.ptxas(*args, arch="sm_90")``: NVRTC's register/spill/shared-memory report per kernel, with the
      blocks and occupancy per SM (a list of rows that prints as a table).
    - ``f.cache_info()``: traces, retraces, plans, kernels compiled, disk cache hits so far.

    Everything but calling with CuPy arrays (and ``explain(run=True)``) works without a GPU, and
    accepts :class:`fusec.ArraySpec` (shape and dtype, no data) in place of arrays:
    ``print(softmax.explain(fusec.ArraySpec((8192, 8192), "float32")))``.

    Tracing happens on the first call with each new signature (dtypes, ranks, which dims are 0 or
    1, scalars' types, static scalars by value); a new size of a known signature re-infers shapes without tracing,
    and compiled kernels are cached in memory and on disk.

    Environment: ``FUSEC_DISABLE_FUSION=1`` runs every fused function unfused, as ``fusion=False``
    (read when a call plans; set it before the first call).
    """
    options = dict(name=name, fusion=fusion, schedules=schedules, autotune=autotune, static_argnames=static_argnames,
                   static_argnums=static_argnums, tf32=tf32)
    if fn is None:
        return lambda f: fuse(f, **options)
    if isinstance(fn, Fused):
        return Fused(fn.fn, **_options_over(fn, options))
    return Fused(fn, **options)


def _options_over(fused: Fused, options: dict[str, Any]) -> dict[str, Any]:
    """``fuse(fused, **options)``: the same Python function with the options given, the others ``fused``'s
    (schedules added to the ones it forces, as ``with_schedules`` does)."""
    given_static = options["static_argnames"] is not None or options["static_argnums"] is not None
    return dict(name=options["name"] or fused.name, fusion=fused.fusion and options["fusion"],
                schedules={**fused.schedules, **_forced_schedules(options["schedules"])},
                autotune=fused.autotune if options["autotune"] is None else options["autotune"],
                tf32=fused.tf32 if options["tf32"] is None else options["tf32"],
                static_argnames=options["static_argnames"] if given_static else fused.static_argnames,
                static_argnums=options["static_argnums"] if given_static else None)


__all__ = ["Fused", "fuse", "FusecError"]
