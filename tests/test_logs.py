"""fusec's log records (``FUSEC_LOG``, :func:`fusec.set_logs`), the recompile reasons and limit, and the cache
counters (``f.cache_info()``, ``fusec.cache_info()``)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.frontend.recompile import REASONS, RecompileWarning, entry_reasons
from fusec.runtime import cubin_cache
from fusec.support import counters, logs

SMALL_SOURCE = r"""
extern "C" __global__ void thrice(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 3.0f * x[i];
}
"""
ROOT = Path(__file__).resolve().parent.parent


def scaled_sum(x, t):
    return np.exp(x * t).sum(axis=-1)


def rows_of(x):
    n = x.shape[0]  # a size read as a Python int: each new size traces again
    return x * n


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for topic in logs.TOPICS:
        caplog.set_level(logging.INFO, logger=f"fusec.{topic}")
    return caplog


def messages(caplog: pytest.LogCaptureFixture, topic: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == f"fusec.{topic}"]


def test_logs_trace_records_the_signature_and_each_retrace_reason(records: pytest.LogCaptureFixture) -> None:
    f = fusec.fuse(scaled_sum)
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    want = np.exp(x * 0.5).sum(axis=-1)
    np.testing.assert_allclose(f(x, 0.5), want, rtol=1e-6)
    f(x, 0.75)                       # a new value of a runtime scalar: no trace
    f(x.astype(np.float64), 0.75)    # a new dtype
    f(x[:, :1], 0.75)                # a new shape class (a size-1 dim)
    f(x, 2)                          # a Python int where a float was: a new scalar type
    f(np.ones((7, 9), np.float32), 0.5)  # a new size of a known signature: no trace
    trace = messages(records, "trace")
    assert len(trace) == 4, trace
    assert trace[0].startswith("traced scaled_sum(x: float32[n,n], t: runtime float) in ")
    assert trace[0].endswith("(first trace)")
    assert trace[1].endswith("(not reused: argument 'x': dtype float32 -> float64)")
    assert "argument 'x': shape class float32[n,n] -> float32[n,1]" in trace[2]
    assert trace[3].endswith("argument 't': scalar type runtime float -> runtime int)"), trace[3]
    recompile = messages(records, "recompile")
    assert recompile[0] == "scaled_sum traced again (trace 2): argument 'x': dtype float32 -> float64"
    assert len(recompile) == 3
    assert any("trace reused for new shapes [(7, 9)]" in m for m in messages(records, "cache"))


def test_logs_retrace_of_a_static_scalar_names_its_value(records: pytest.LogCaptureFixture) -> None:
    f = fusec.fuse(scaled_sum, static_argnames="t")
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    f(x, 0.5)
    f(x, 0.75)
    trace = messages(records, "trace")
    assert trace[0].startswith("traced scaled_sum(x: float32[n,n], t: scalar 0.5) in ")
    assert trace[1].endswith("(not reused: argument 't': scalar value 0.5 -> 0.75)")


def test_logs_retrace_of_a_function_that_reads_a_size_says_so(records: pytest.LogCaptureFixture) -> None:
    f = fusec.fuse(rows_of)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(f(x), x * 3)
    np.testing.assert_array_equal(f(np.ones((5, 2), np.float32)), np.full((5, 2), 5, np.float32))
    assert "size read" not in REASONS["scalar"][0]
    recompile = messages(records, "recompile")
    assert len(recompile) == 1 and "read an array's size as a Python int" in recompile[0]


def test_logs_schedule_records_each_kernel_schedule(records: pytest.LogCaptureFixture) -> None:
    f = fusec.fuse(scaled_sum)
    f.cuda_source(fusec.ArraySpec((64, 128), "float32"), 2.0)
    forced = f.with_schedules({"k0": "rows:warp"})
    forced.cuda_source(fusec.ArraySpec((64, 128), "float32"), 2.0)
    schedule = messages(records, "schedule")
    assert len(schedule) == 2
    assert schedule[0].startswith("k0_") and schedule[0].endswith("(heuristics)") and ": rows:" in schedule[0]
    assert schedule[1] == schedule[0].split(":")[0] + ": rows:warp (forced)"


def test_logs_compile_records_a_miss_with_its_time_then_a_disk_hit(
        records: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(tmp_path))
    mine = counters.Counters()
    before = fusec.cache_info()
    with counters.charging(mine):
        cubin, compiled = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90", "thrice")
        again, compiled_again = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90", "thrice")
    assert (compiled, compiled_again) == (1, 0) and again == cubin
    compile_log = messages(records, "compile")
    assert len(compile_log) == 2
    assert compile_log[0].startswith("thrice (sm_90): compiled with NVRTC in ")
    assert "disk cache miss" in compile_log[0]
    assert compile_log[1].startswith("thrice (sm_90): disk cache hit")
    assert (mine.info().kernels_compiled, mine.info().disk_hits) == (1, 1)
    after = fusec.cache_info()
    assert after.kernels_compiled - before.kernels_compiled == 1 and after.disk_hits - before.disk_hits == 1


def test_recompile_warning_fires_once_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEC_RECOMPILE_LIMIT", "3")
    f = fusec.fuse(scaled_sum, static_argnames="t")  # a static number: each value traces again
    x = np.ones((2, 3), np.float32)
    fired = []
    for i in range(8):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.testing.assert_allclose(f(x, float(i)), np.exp(x * i).sum(axis=-1), rtol=1e-6)
        fired += [(i, w) for w in caught if issubclass(w.category, RecompileWarning)]
    assert [i for i, _ in fired] == [3], "warned once, on the third trace after the first"
    text = str(fired[0][1].message)
    assert "scaled_sum has traced 4 times" in text and "recompile limit is 3" in text
    assert "argument 't': scalar value 2.0 -> 3.0" in text and "static_argnames" in text
    assert "FUSEC_RECOMPILE_LIMIT" in text
    assert fired[0][1].filename == __file__, "the warning points at the caller's line"


def test_recompile_limit_zero_never_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEC_RECOMPILE_LIMIT", "0")
    f = fusec.fuse(scaled_sum, static_argnames="t")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecompileWarning)
        for i in range(12):
            f(np.ones((2, 2), np.float32), float(i))
    assert f.cache_info().retraces == 11


def test_recompile_entry_reasons_name_each_kind() -> None:
    assert [r.kind for r in entry_reasons("x", ("array", "<f4", (-1,)), ("array", "<f8", (1,)))] == ["dtype", "shape"]
    assert [r.kind for r in entry_reasons("t", ("value", (float, 1.0, 1.0)), ("value", ("nan",)))] == ["scalar"]
    assert str(entry_reasons("t", ("value", (float, 1.0, 1.0)), ("value", ("nan",)))[0]) == \
        "argument 't': scalar value 1.0 -> nan"
    assert [r.kind for r in entry_reasons("t", ("value", ("int", 2)), ("array", "<f4", ()))] == ["kind"]
    assert [r.kind for r in entry_reasons("t", ("scalar", ("float",)), ("scalar", ("numpy", "<f4")))] == \
        ["scalar_class"]
    assert entry_reasons("x", ("array", "<f4", (-1,)), ("array", "<f4", (-1,))) == []


def test_cache_info_counts_a_scripted_sequence_of_calls() -> None:
    f = fusec.fuse(scaled_sum)
    rng = np.random.default_rng(2)
    before = fusec.cache_info()
    x = rng.standard_normal((5, 7)).astype(np.float32)
    f(x, 1.0)                     # trace 1, plan 1
    f(x, 1.0)                     # nothing new
    f(rng.standard_normal((9, 7)).astype(np.float32), 1.0)  # shapes re-inferred, plan 2
    f(x, 2.0)                     # a new value of a runtime scalar: nothing new
    f(x, 3)                       # a Python int where a float was: retrace, plan 3
    f.explain(fusec.ArraySpec((5, 7), "float32"), 4)  # the same signature and shapes: no new work
    info = f.cache_info()
    assert (info.traces, info.retraces, info.shape_reuses, info.plans) == (2, 1, 1, 3)
    assert (info.kernels_compiled, info.disk_hits, info.autotune_runs) == (0, 0, 0)
    after = fusec.cache_info()
    assert after.traces - before.traces == 2 and after.plans - before.plans == 3
    assert str(info).startswith("traces=2, retraces=1, shape_reuses=1, plans=3, kernels_compiled=0")


def test_cache_info_counts_ptxas_compiles_of_the_function() -> None:
    f = fusec.fuse(scaled_sum)
    f.ptxas(fusec.ArraySpec((16, 32), "float32"), 1.5)
    assert f.cache_info().kernels_compiled == len(f.plan(fusec.ArraySpec((16, 32), "float32"), 1.5).kernels) == 1


def test_set_logs_prints_chosen_topics_on_stderr_and_turns_them_off(capsys: pytest.CaptureFixture) -> None:
    assert fusec.set_logs("+all") == list(logs.TOPICS)
    try:
        assert fusec.set_logs("trace") == ["trace"]
        fusec.fuse(scaled_sum)(np.ones((2, 2), np.float32), 1.0)
    finally:
        fusec.set_logs("")
    err = capsys.readouterr().err
    assert err.startswith("[fusec.trace] traced scaled_sum(x: float32[n,n], t: runtime float) in ")
    assert "[fusec.cache]" not in err
    fusec.fuse(scaled_sum)(np.ones((2, 2), np.float32), 1.0)
    assert "[fusec" not in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown fusec log topic.*the topics are trace, recompile"):
        fusec.set_logs("trace,compiles")


def test_fusec_log_environment_variable_turns_topics_on_in_a_new_process() -> None:
    code = ("import numpy as np, fusec\n"
            "f = fusec.fuse(lambda x, t: x * t)\n"
            "f(np.ones(3, np.float32), 1.0); f(np.ones(3, np.float64), 2.0)\n")
    env = {**os.environ, "FUSEC_LOG": "recompile,bogus", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "[fusec.recompile] <lambda> traced again (trace 2): argument 'x': dtype float32 -> float64" in lines
    assert any("FUSEC_LOG: unknown topic(s) bogus ignored" in line for line in lines)
    assert not any(line.startswith("[fusec.trace]") for line in lines)
