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
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fusec.arrayspec import ArraySpec
from fusec.errors import FusecTypeError, FusecValueError
from fusec.lru import LRU

if TYPE_CHECKING:
    from fusec.api import Fused
    from fusec.dask.stages import DaskPlan

_PLANS_KEPT = 32  # per Fused: one per (traced graph, input chunks)
_PLANS: weakref.WeakKeyDictionary[Any, LRU[tuple, DaskPlan]] = weakref.WeakKeyDictionary()
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

    from fusec.api import _backend
    from fusec.passes.manager import CLEANUP_PIPELINE, run_pipeline

    libraries: dict[str, str] = {}
    specs: list[tuple[str, Any]] = []
    arrays: list[Any] = []
    for name, value in params:
        if is_dask_array(value):
            if any(math.isnan(c) for chunks in value.chunks for c in chunks):
                raise FusecValueError(f"argument '{name}' of {fused.name} is a Dask array of unknown chunk sizes",
                                      hint=f"call {name}.compute_chunk_sizes() first")
            libraries.setdefault(_library(value._meta), name)
            specs.append((name, ArraySpec(tuple(value.shape), value.dtype)))
            arrays.append(value)
        elif _backend(value) in ("numpy", "cupy"):
            libraries.setdefault(_backend(value), name)
            specs.append((name, ArraySpec(tuple(value.shape), value.dtype)))
            arrays.append(value)
        else:
            specs.append((name, value))
    if len(libraries) > 1:
        (a, na), (b, nb) = sorted(libraries.items())[:2]
        raise FusecTypeError(f"{fused.name} got {a} data in argument '{na}' and {b} data in argument '{nb}'",
                             hint="give every array (and every Dask array's chunks) one library: "
                                  "x.map_blocks(cupy.asarray) moves Dask chunks to the GPU")
    fused._check_arguments(specs)
    traced, graph = fused._traced(specs)
    return traced, run_pipeline(graph, CLEANUP_PIPELINE), arrays, next(iter(libraries), "numpy")


def dask_plan(fused: Fused, graph: Any, chunks: tuple) -> DaskPlan:
    """The stages of ``graph`` for inputs chunked as ``chunks`` (``None`` for a non-Dask array), cached per
    (Fused, graph, chunks): a repeated call with the same chunking builds no plan."""
    from fusec.dask.stages import plan_stages

    key = (graph, chunks)
    with _PLANS_LOCK:
        cache = _PLANS.get(fused)
        if cache is None:
            cache = _PLANS[fused] = LRU(_PLANS_KEPT)
        plan = cache.get(key)
    if plan is None:
        plan = plan_stages(graph, list(chunks))
        with _PLANS_LOCK:
            cache.put(key, plan)
    return plan


def _plan_and_inputs(fused: Fused, params: list[tuple[str, Any]]) -> tuple[Any, DaskPlan, list[Any], str]:
    traced, graph, arrays, backend = _prepare(fused, params)
    chunks = tuple(tuple(tuple(c) for c in a.chunks) if is_dask_array(a) else None for a in arrays)
    plan = dask_plan(fused, graph, chunks)
    return traced, plan, arrays, backend


def call(fused: Fused, params: list[tuple[str, Any]], out: Any = None) -> Any:
    """``fused(*args)`` with Dask arrays among the arguments: lazy Dask arrays (packed as the function returns)."""
    import dask.array as da

    from fusec.dask.graph import build_arrays

    if out is not None:
        raise FusecTypeError(f"{fused.name}: out= is not supported with Dask arrays",
                             hint="use the lazy results it returns (dask.array.store writes them anywhere)")
    traced, plan, arrays, backend = _plan_and_inputs(fused, params)
    inputs = []
    for value, chunks in zip(arrays, plan.input_chunks):
        if not is_dask_array(value):
            value = da.from_array(value, chunks=chunks, asarray=False)
        elif tuple(tuple(c) for c in value.chunks) != chunks:
            value = value.rechunk(chunks)
        inputs.append(value)
    results = build_arrays(plan, inputs, backend, f"fusec-{fused.name}")
    return traced.pack(results)


def explain(fused: Fused, params: list[tuple[str, Any]]) -> Any:
    """The stages ``fused`` runs as on these Dask arguments, with their tasks and bytes."""
    from fusec.dask.explain import DaskExplanation

    _, plan, _, backend = _plan_and_inputs(fused, params)
    return DaskExplanation(fused.name, plan, backend)


__all__ = ["call", "dask_plan", "explain", "has_dask_arrays", "is_dask_array"]
