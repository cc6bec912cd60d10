"""Reduced lengths without a compile each: rows held in registers share one kernel per length bucket.

A register-row schedule's ``lengths`` says how the row length enters the kernel: ``bucket`` (every length up
to ``threads x elems``, the length a parameter and each row's start checked for vectors when the kernel
runs) or ``exact`` (specialized: full rows without bounds checks, vectors only where known aligned). These
tests pin which lengths share a source, that the shared sources compile with NVRTC, that results do not
change on the NumPy backend, and how many compiles the runtime's NVRTC path makes over lengths 1..N.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from fusec.kinds import RowSchedule
from fusec.runtime import cubin_cache
from fusec.schedule import ScheduleError
from tests.helpers import assert_matches_numpy, random_array
from tests.workloads import layernorm, row_sum, softmax


def _kernel(fn, n, dtype="float32", rows=64, schedules=None):
    (kernel,) = fusec.fuse(fn, schedules=schedules)._kernels((fusec.ArraySpec((rows, n), dtype),), {})
    return kernel


def _source(fn, n, dtype="float32", rows=64):
    return _kernel(fn, n, dtype, rows).source


@pytest.mark.parametrize("fn", [softmax, layernorm, row_sum])
@pytest.mark.parametrize("dtype, lengths", [
    ("float32", (257, 258, 259, 300, 301, 383, 500, 510, 511)),  # 32 threads x 16: rows of 257..511
    ("float32", (1025, 1027, 1500, 2000, 2047)),  # a block of 256 x 8
    ("float64", (513, 555, 1000, 1023)),  # a block of 256 x 4 (8-byte values)
])
def test_row_buckets_lengths_in_one_bucket_share_one_source(fn, dtype, lengths) -> None:
    sources = {n: _source(fn, n, dtype) for n in lengths}
    assert len(set(sources.values())) == 1, {n: s.count("\n") for n, s in sources.items()}
    schedule = _kernel(fn, lengths[0], dtype).schedule
    assert isinstance(schedule, RowSchedule) and schedule.in_registers and schedule.lengths == "bucket"
    assert "lengths=bucket" in sources[lengths[0]] and "row_vec" in sources[lengths[0]]
    # a different number of rows is a parameter too
    assert _source(fn, lengths[0], dtype, rows=7) == sources[lengths[0]]


@pytest.mark.parametrize("fn", [softmax, layernorm])
def test_row_buckets_bucket_and_exact_sources_compile_with_nvrtc(fn) -> None:
    try:
        nvrtc.compile_cubin("extern \"C\" __global__ void k() {}", "sm_90")
    except Exception as exc:  # pragma: no cover - a machine without NVRTC
        pytest.skip(f"NVRTC unavailable: {exc}")
    for n in (301, 512, 2047, 100):  # bucket, exact (full rows), bucket (block), exact (sub-warp rows)
        kernel = _kernel(fn, n)
        result = nvrtc.compile_cubin(kernel.source, "sm_90")
        assert result.cubin.startswith(b"\x7fELF"), n
        report = (result.kernels or {}).get(kernel.name)
        assert report is None or report.spills == 0, (n, report)


def test_row_buckets_lengths_across_buckets_differ() -> None:
    assert _source(softmax, 300) != _source(softmax, 600)  # 257..511 vs 513..1023
    assert _source(softmax, 511) != _source(softmax, 512)  # the bucket's own length: full rows, exact
    assert _kernel(softmax, 512).schedule.lengths == "exact" and _kernel(softmax, 512).spec.full_rows
    assert not _kernel(softmax, 511).spec.full_rows
    # rows shorter than a warp stay exact: their vectors follow the rows' alignment, known when compiled
    assert _kernel(softmax, 100).schedule.lengths == "exact"
    assert _kernel(softmax, 100).schedule.vec == 4 and _kernel(softmax, 101).schedule.vec == 1


def test_row_buckets_explain_prints_the_lengths_policy() -> None:
    f = fusec.fuse(softmax)
    bucket = str(f.explain(fusec.ArraySpec((64, 300), "float32")))
    assert "lengths=bucket" in bucket and "one kernel for every row length up to 512 (a parameter)" in bucket
    exact = str(f.explain(fusec.ArraySpec((64, 512), "float32")))
    assert "lengths=exact" in exact and "specialized to rows of exactly 512 elements" in exact


def test_row_buckets_forced_lengths_round_trip_and_refusals() -> None:
    forced = _kernel(softmax, 302, schedules={"k0": "rows:warp_regs,lengths=exact"})
    assert forced.schedule.lengths == "exact" and forced.schedule.vec == 2  # rows of 302 start 8-byte aligned
    assert "row_vec" not in forced.source and forced.source != _source(softmax, 302)
    bucket = _kernel(softmax, 100, schedules={"k0": "rows:warp_regs,lengths=bucket"})
    assert bucket.schedule.lengths == "bucket" and bucket.schedule.vec == 4 and "row_vec" in bucket.source
    full = _kernel(softmax, 512, schedules={"k0": "rows:warp_regs,lengths=bucket"})
    assert not full.spec.full_rows and full.source != _source(softmax, 512)
    with pytest.raises(ScheduleError, match="lengths=exact belongs to the register schedules"):
        _kernel(softmax, 300, schedules={"k0": "rows:warp,lengths=exact"})
    with pytest.raises(ScheduleError, match="lengths is bucket"):
        _kernel(softmax, 300, schedules={"k0": "rows:warp_regs,lengths=some"})
    with pytest.raises(ScheduleError, match="not aligned for vectors of 4"):
        _kernel(softmax, 301, schedules={"k0": "rows:warp_regs,lengths=exact,vec=4"})


@pytest.mark.parametrize("fn", [softmax, layernorm, row_sum])
@pytest.mark.parametrize("n", [1, 3, 100, 257, 301, 512, 1025, 2047])
def test_row_buckets_numpy_backend_results_unchanged(fn, n) -> None:
    x = random_array(np.random.default_rng(n), (5, n), "float32", special=False)
    for schedule in (None, "rows:warp_regs,lengths=exact", "rows:warp_regs,lengths=bucket"):
        if schedule is not None and not 2 <= n <= 1024:
            continue
        f = fusec.fuse(fn, schedules=None if schedule is None else {"k0": schedule})
        assert_matches_numpy(f(x), fn(x))


def _compiles(fn, lengths, monkeypatch, tmp_path) -> int:
    """How many NVRTC compiles the runtime's path (the cubin cache, :func:`fusec.runtime.cubin_cache.cached_cubin`)
    makes to run ``fn`` over rows of each of ``lengths`` (NVRTC replaced by a counter)."""
    calls = []

    def compile_cubin(source, arch="sm_90", name_expressions=()):
        calls.append(source)
        return _FakeResult()

    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(tmp_path / f"cubin-{fn.__name__}"))
    monkeypatch.setattr(nvrtc, "compile_cubin", compile_cubin)
    compiled = 0
    for n in lengths:
        for kernel in fusec.fuse(fn)._kernels((fusec.ArraySpec((64, n), "float32"),), {}):
            compiled += cubin_cache.cached_cubin(kernel.source, "sm_90")[1]
    assert compiled == len(calls)
    return compiled


class _FakeResult:
    cubin = b"\x7fELF\x02\x01" + bytes(58)  # the smallest whole ELF64 file: no program or section tables
    kernels: dict = {}


def test_row_buckets_compiles_over_lengths_grow_with_log_n(monkeypatch, tmp_path) -> None:
    # rows a warp or more long (129..1024 float32 elements): 3 buckets, each one kernel for its lengths and
    # one for its own length (full rows); before buckets, each bucket compiled 4 (vectors of 4, 2, 1, full)
    assert _compiles(layernorm, range(129, 1025), monkeypatch, tmp_path) == 6
    # every length 1..1024: the short rows keep kernels per alignment, still a handful per power of two
    total = _compiles(row_sum, range(1, 1025), monkeypatch, tmp_path)
    assert total <= 3 * 10 + 2, total
    # a second pass over the same lengths compiles nothing: every source is in the disk cache
    assert _compiles(row_sum, range(1, 1025, 7), monkeypatch, tmp_path) == 0
