"""The float arithmetic of fusec's scan kernels (``templates/scan_rows.cu.j2``, ``templates/scan.cuh``), emulated
in NumPy float32 operation for operation, so that the CPU tests can put what a schedule computes through the GPU
tests' checks. A sum scan combines with ``a + b`` from the identity -0.0 (``fusec.kinds.scan.scan_identity``); float16
values are lifted to float32 and every prefix is rounded once to the result's dtype afterwards.

    prefixes = scan_prefixes(values.astype(np.float32), ScanSchedule("rows", 32, 8))  # rows x n, float32
"""

from __future__ import annotations

import numpy as np

from fusec.kinds import ScanSchedule

WARP = 32


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.add(a, b, dtype=np.float32)


def _warp_inclusive(x: np.ndarray) -> np.ndarray:
    """fs_scan::warp_inclusive over the last axis (a multiple of 32 lanes): Hillis-Steele, x = y + x from the lane
    ``d`` below, d = 1, 2, 4, 8, 16, within each warp."""
    lanes = x.shape[-1]
    lane = np.arange(lanes) % WARP
    for d in (1, 2, 4, 8, 16):
        shifted = np.concatenate([np.zeros_like(x[..., :d]), x[..., :-d]], axis=-1)
        x = np.where(lane >= d, _add(shifted, x), x)
    assert lanes % WARP == 0
    return x


def _row_exclusive(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fs_scan::row_exclusive over the last axis (G threads): each thread's exclusive prefix, and the total."""
    g = x.shape[-1]
    identity = np.float32(-0.0)
    inclusive = _warp_inclusive(x)
    lane = np.arange(g) % WARP
    exclusive = np.concatenate([np.zeros_like(inclusive[..., :1]), inclusive[..., :-1]], axis=-1)
    exclusive = np.where(lane == 0, identity, exclusive)
    if g == WARP:
        return exclusive, inclusive[..., -1]
    warps = g // WARP
    totals = inclusive[..., WARP - 1::WARP]  # lane 31 of each warp
    padded = np.concatenate([totals, np.full(totals.shape[:-1] + (WARP - warps,), identity, np.float32)], axis=-1)
    scanned = _warp_inclusive(padded)[..., :warps]
    before = np.concatenate([np.full(totals.shape[:-1] + (1,), identity, np.float32), scanned[..., :-1]], axis=-1)
    return _add(np.repeat(before, WARP, axis=-1), exclusive), scanned[..., -1]


def _column_exclusive(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fs_scan::column_exclusive over the last axis (S threads along the row): before = t0 + t1 + ... in order."""
    s = x.shape[-1]
    identity = np.float32(-0.0)
    if s == 1:
        return np.full_like(x, identity), x[..., 0]
    before = [np.full_like(x[..., 0], identity), x[..., 0]]
    for y in range(1, s - 1):
        before.append(_add(before[-1], x[..., y]))
    total = x[..., 0]
    for y in range(1, s):
        total = _add(total, x[..., y])
    return np.stack(before[:s], axis=-1), total


def _chunks(v: np.ndarray, carry: np.ndarray, threads: int, elems: int, columns: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ``chunks`` macro over rows ``v`` (rows x length): the prefixes, and the carry after them."""
    rows, length = v.shape
    chunk = threads * elems
    out = np.empty_like(v)
    for lo in range(0, length, chunk):
        block = np.zeros((rows, chunk), np.float32)
        block[:, :min(chunk, length - lo)] = v[:, lo:lo + chunk]
        per_thread = block.reshape(rows, threads, elems)
        run = np.empty_like(per_thread)
        acc = np.full((rows, threads), np.float32(-0.0), np.float32)
        for j in range(elems):
            acc = _add(acc, per_thread[:, :, j])
            run[:, :, j] = acc
        exclusive, total = (_column_exclusive if columns else _row_exclusive)(run[:, :, -1])
        pre = _add(carry[:, None], exclusive)
        carry = _add(carry, total)
        prefixes = _add(pre[:, :, None], run).reshape(rows, chunk)
        out[:, lo:lo + chunk] = prefixes[:, :min(chunk, length - lo)]
    return out, carry


def scan_prefixes(values: np.ndarray, schedule: ScanSchedule, segments: int = 264) -> np.ndarray:
    """The float32 prefix sums that ``schedule`` computes of each row of ``values`` (rows x n, float32). ``split``
    cuts each row into ``segments`` segments at most (the grid's blocks per row: a whole number of chunks each)."""
    v = np.ascontiguousarray(values, dtype=np.float32)
    rows, n = v.shape
    identity = np.full(rows, np.float32(-0.0), np.float32)
    if schedule.mapping == "sequential":
        out = np.empty_like(v)
        carry = identity
        for i in range(n):
            carry = _add(carry, v[:, i])
            out[:, i] = carry
        return out
    threads, elems = schedule.row_threads, schedule.elems
    if schedule.mapping in ("rows", "columns"):
        return _chunks(v, identity, threads, elems, schedule.mapping == "columns")[0]
    assert schedule.mapping == "split", schedule
    chunk = threads * elems
    per_row = max(1, min(segments, -(-n // chunk)))
    length = -(-n // per_row)
    seg_len = -(-length // chunk) * chunk
    bounds = [(min(s * seg_len, n), min(s * seg_len + seg_len, n)) for s in range(per_row)]
    totals = [_chunks(v[:, lo:hi], identity, threads, elems, False)[1] for lo, hi in bounds]  # pass 1
    out = np.empty_like(v)
    for s, (lo, hi) in enumerate(bounds):  # pass 2: the totals of the segments before, in order
        carry = identity
        for t in range(s):
            carry = _add(carry, totals[t])
        if hi > lo:
            out[:, lo:hi] = _chunks(v[:, lo:hi], carry, threads, elems, False)[0]
    return out


__all__ = ["scan_prefixes"]
