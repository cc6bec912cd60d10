"""Random chunkings for the Dask tests: one chunk, chunks of one element, even splits with an uneven last
chunk, and arbitrary uneven splits, drawn per axis."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def random_chunks(rng: np.random.Generator, shape: tuple[int, ...], whole: float = 0.25) -> tuple[tuple[int, ...], ...]:
    """A chunking of ``shape``, each axis drawn independently (one chunk with probability ``whole``)."""
    out = []
    for extent in shape:
        kind = 0 if rng.random() < whole else int(rng.integers(1, 4))
        if extent <= 1 or kind == 0:
            out.append((extent,))
        elif kind == 1:
            out.append((1,) * extent)
        elif kind == 2:
            size = int(rng.integers(1, extent + 1))
            out.append((size,) * (extent // size) + ((extent % size,) if extent % size else ()))
        else:
            cuts = sorted(set(rng.integers(1, extent, size=int(rng.integers(1, min(extent, 4) + 1))).tolist()))
            bounds = [0, *cuts, extent]
            out.append(tuple(b - a for a, b in zip(bounds, bounds[1:])))
    return tuple(out)


def coarse_chunks(rng: np.random.Generator, shape: tuple[int, ...], most: int = 6) -> tuple[tuple[int, ...], ...]:
    """A chunking of at most ``most`` chunks per axis: whole, or even chunks with an uneven last one."""
    out = []
    for extent in shape:
        if extent <= 1 or rng.random() < 0.3:
            out.append((extent,))
            continue
        size = int(rng.integers(-(-extent // most), extent + 1))
        out.append((size,) * (extent // size) + ((extent % size,) if extent % size else ()))
    return tuple(out)


def dask_runs(graph) -> bool:
    """Whether the Dask path takes ``graph``: scans, gathers and reshapes (elements moving between chunks in ways
    it has no chunk rule for) are refused with an error naming the op (docs/dask.md, "Beyond one GPU")."""
    from fusec.ir.ops import Kind

    return not any(n.kind in (Kind.SCAN, Kind.GATHER) or n.op == "reshape" for n in graph.nodes)


def fuzz_run(graphs: Sequence[Any], chunk: Callable[[np.ndarray, tuple], Any],
             compute: Callable[[int, list[Any]], Sequence[Any]],
             host: Callable[[Any], Any] = np.asarray) -> tuple[list[str], list[tuple[Any, list[Any]]]]:
    """Each graph the Dask path takes (:func:`dask_runs`), on the corpus's inputs for it, chunked at random
    (``chunk(array, chunks)`` makes the Dask array) and computed by ``compute(index, lazy results)``, against the
    reference interpreter bit for bit (``host`` brings a result to NumPy): the failures, each with its graph and
    chunks, and the (graph, chunked inputs) pairs that ran."""
    from fusec.dask import run_graph
    from fusec.ir.interpret import interpret
    from tests.fuzz import corpus

    failures: list[str] = []
    ran: list[tuple[Any, list[Any]]] = []
    for i, graph in enumerate(graphs):
        if not dask_runs(graph):
            continue  # scans, gathers and reshapes are refused on Dask arrays (docs/dask.md, docs/limitations.md)
        seed = corpus.graph_seed(graph)
        inputs = corpus.make_inputs(graph, seed)
        want = interpret(graph, inputs)
        rng = np.random.default_rng(seed)
        chunked = [chunk(a, random_chunks(rng, a.shape, whole=0.1)) for a in inputs]
        try:
            got = compute(i, run_graph(graph, chunked))
        except Exception as exc:  # reported with the graph
            failures.append(f"graph {i}: {type(exc).__name__}: {exc}\n{graph}")
            continue
        ran.append((graph, chunked))
        free = corpus.zero_sign_free(graph)
        for k, (g, w) in enumerate(zip(got, want)):
            diff = corpus.differences(host(g), w, graph.outputs[k] in free)
            if diff:
                failures.append(f"graph {i} output {k} (chunks {[a.chunks for a in chunked]}): {diff}\n{graph}")
    return failures, ran
