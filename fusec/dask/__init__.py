"""fusec on Dask arrays: ``f(dask_array, ...)`` returns lazy Dask arrays built from the fused plan.

Imported only when a Dask array reaches a :class:`fusec.Fused` (``import fusec`` never imports Dask). The
function is traced once on the arrays' shapes and dtypes, cut into stages (:mod:`fusec.dask.stages`) given
the chunks, and the stages become Dask tasks (:mod:`fusec.dask.graph`) whose per-block work is a fused
program (:mod:`fusec.dask.blocks`): NumPy chunks run the reference interpreter, CuPy chunks the GPU
kernels. fusec adds no scheduler: Dask's threaded scheduler, ``dask.distributed`` or ``dask-cuda`` run it.

Other array arguments (NumPy or CuPy arrays of the chunks' library) become one-chunk Dask arrays, chunked
like the Dask arrays they meet; Python numbers stay compile-time constants, as everywhere in fusec.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fusec.dask.views import inputs_through_views, picked
from fusec.frontend import arguments, lazy_arrays
from fusec.ir.arrayspec import ArraySpec
from fusec.support.errors import FusecTypeError, FusecValueError, UnsupportedError
from fusec.support.lru import LRU

if TYPE_CHECKING:
    from fusec.dask.stages import DaskPlan
    from fusec.frontend.api import Fused

_PLANS_KEPT = 64  # one per (graph, input chunks)
_PLANS: LRU[tuple, DaskPlan] = LRU(_PLANS_KEPT)
_PLANS_LOCK = threading.Lock()


def is_dask_array(value: Any) -> bool:
    """Whether ``value`` is a ``dask.array.Array`` (without importing Dask)."""
    return type(value).__module__.startswith("dask.array") and hasattr(value, "chunks") and hasattr(value, "dask")


def has_dask_arrays(values: Sequence[Any]) -> bool:
    return any(is_dask_array(v) for v in values)


def _library(meta: Any) -> str:
    return "cupy" if type(meta).__module__.startswith("cupy") else "numpy"


def _prepare(fused: Fused, params: list[tuple[str, Any]]) -> tuple[Any, Any, list[Any], str]:
    """(traced function, cleaned graph, the array arguments in input order, backend) for a call with Dask
    arrays."""
    import math

    libraries: dict[str, str] = {}
    specs: list[tuple[str, Any]] = []
    arrays: list[Any] = []
    for name, value in params:
        if is_dask_array(value):
            if any(math.isnan(d) for d in value.shape):  # unknown chunk sizes make the shape unknown
                raise FusecValueError(f"argument '{name}' of {fused.name} is a Dask array of unknown chunk sizes",
                                      hint=f"call {name}.compute_chunk_sizes() first")
            libraries.setdefault(_library(value._meta), name)
            specs.append((name, ArraySpec(tuple(value.shape), value.dtype)))
            arrays.append(value)
        elif arguments.backend_of(value) in ("numpy", "cupy"):
            libraries.setdefault(arguments.backend_of(value), name)
            specs.append((name, ArraySpec(tuple(value.shape), value.dtype)))
            arrays.append(value)
        else:
            specs.append((name, value))
    if len(libraries) > 1:
        (a, na), (b, nb) = sorted(libraries.items())[:2]
        raise FusecTypeError(f"{fused.name} got {a} data in argument '{na}' and {b} data in argument '{nb}'",
                             hint="give every array (and every Dask array's chunks) one library: "
                                  "x.map_blocks(cupy.asarray) moves Dask chunks to the GPU")
    traced, graph, scalars = fused.traced_for(specs)
    if traced.updates or traced.parts:
        raise UnsupportedError(f"{fused.name} updates arguments in place, which fusec does not do on Dask arrays",
                               hint="return the new values instead (Dask arrays are immutable)")
    backend = next(iter(libraries), "numpy")
    if scalars:  # runtime scalars: graph inputs after the arrays, 0-d arrays of the chunks' library
        if backend == "cupy":
            import cupy

            scalars = [cupy.asarray(s) for s in scalars]
        arrays = arrays + list(scalars)
    return traced, graph, arrays, backend


def dask_plan(graph: Any, chunks: tuple, fusion: bool = True) -> DaskPlan:
    """The stages of ``graph`` (as traced; the cleanup passes run here) for inputs chunked as ``chunks``
    (``None`` for an array that is not a Dask array), cached per (graph, chunks): a repeated call with the
    same chunking plans nothing, and builds its tasks from the cached plan (block programs included).
    ``fusion`` False: block programs run unfused (``fusec.fuse(fusion=False)``, ``FUSEC_DISABLE_FUSION=1``)."""
    from fusec.dask.stages import plan_stages
    from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline

    key = (graph, chunks, fusion)
    with _PLANS_LOCK:
        plan = _PLANS.get(key)
    if plan is None:
        plan = plan_stages(run_pipeline(graph, CLEANUP_PIPELINE), list(chunks), fusion)
        with _PLANS_LOCK:
            _PLANS.put(key, plan)
    return plan


def _chunks_of(arrays: Sequence[Any]) -> tuple:
    return tuple(tuple(tuple(c) for c in a.chunks) if is_dask_array(a) else None for a in arrays)


def _plan_and_inputs(fused: Fused, params: list[tuple[str, Any]]) -> tuple[Any, DaskPlan, list[Any], str]:
    traced, graph, arrays, backend = _prepare(fused, params)
    fusion = fused.fusion and not arguments.fusion_disabled()
    graph, picks = inputs_through_views(graph)
    arrays = picked(arrays, picks)
    return traced, dask_plan(graph, _chunks_of(arrays), fusion), arrays, backend


def run_graph(graph: Any, arrays: Sequence[Any], *, backend: str | None = None, name: str | None = None) -> list[Any]:
    """Lazy Dask arrays for the outputs of IR ``graph`` (a :class:`fusec.ir.graph.Graph`, as traced or parsed)
    on ``arrays`` (one per graph input: Dask arrays, or NumPy/CuPy arrays that become one-chunk Dask arrays).
    What ``f(dask_array)`` builds once it has traced ``f``."""
    if backend is None:
        metas = [a._meta if is_dask_array(a) else a for a in arrays]
        backend = _library(metas[0]) if metas else "numpy"
    graph, picks = inputs_through_views(graph)
    arrays = picked(arrays, picks)
    plan = dask_plan(graph, _chunks_of(arrays))
    return _build(plan, list(arrays), backend, name or graph.name)


def _build(plan: DaskPlan, arrays: list[Any], backend: str, name: str) -> list[Any]:
    import dask.array as da

    from fusec.dask.graph import build_arrays

    inputs = []
    for value, chunks in zip(arrays, plan.input_chunks):
        if not is_dask_array(value):
            value = da.from_array(value, chunks=chunks, asarray=False)
        elif tuple(tuple(c) for c in value.chunks) != chunks:
            value = value.rechunk(chunks)
        inputs.append(value)
    return build_arrays(plan, inputs, backend, f"fusec-{name}")


def call(fused: Fused, params: list[tuple[str, Any]], out: Any = None) -> Any:
    """``fused(*args)`` with Dask arrays among the arguments: lazy Dask arrays (packed as the function returns)."""
    if out is not None:
        raise FusecTypeError(f"{fused.name}: out= is not supported with Dask arrays",
                             hint="use the lazy results it returns (dask.array.store writes them anywhere)")
    traced, plan, arrays, backend = _plan_and_inputs(fused, params)
    return traced.pack(_build(plan, arrays, backend, fused.name))


def explain_stages(fused: Fused, params: list[tuple[str, Any]]) -> Any:
    """The stages ``fused`` runs as on these Dask arguments, with their tasks and bytes."""
    from fusec.dask.explain import DaskExplanation

    _, plan, _, backend = _plan_and_inputs(fused, params)
    return DaskExplanation(fused.name, plan, backend)


class _DaskArrays:
    """Dask arrays among a call's arguments: the frontend hands the call here (see ``fusec.frontend.lazy_arrays``)."""

    def takes(self, params: list[tuple[str, Any]]) -> bool:
        return any(type(v).__module__.startswith("dask.array") for _, v in params)

    def call(self, fused: Fused, params: list[tuple[str, Any]], out: Any) -> Any:
        return call(fused, params, out)

    def explain(self, fused: Fused, params: list[tuple[str, Any]]) -> Any:
        return explain_stages(fused, params)


lazy_arrays.register(_DaskArrays())

__all__ = ["call", "dask_plan", "explain_stages", "has_dask_arrays", "is_dask_array", "run_graph"]
