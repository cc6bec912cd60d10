"""Random chunkings for the Dask tests: one chunk, chunks of one element, even splits with an uneven last
chunk, and arbitrary uneven splits, drawn per axis."""

from __future__ import annotations

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
    it has no chunk rule for) are refused with an error naming the op (README, "Beyond one GPU")."""
    from fusec.ir.ops import Kind

    return not any(n.kind in (Kind.SCAN, Kind.GATHER) or n.op == "reshape" for n in graph.nodes)
