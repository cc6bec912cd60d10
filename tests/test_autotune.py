"""Autotuning without a GPU: candidate schedules per kind, the winner's choice with an injected runner and
timer, the tune cache's round trip, its reuse by a second process (nothing timed), the refusal of entries it
did not sign, and what ``explain`` prints. ``tests/gpu/test_autotune_gpu.py`` runs it on a GPU."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc
from fusec.kinds import MAX_CANDIDATES, analyze, candidates, check, choose
from fusec.runtime import autotune, tune_cache
from fusec.runtime.cubin_cache import pack_signed
from fusec.schedule import H200, ArrayLayout
from tests.workloads import col_sum, gelu, softmax

ROOT = Path(__file__).resolve().parents[1]


def transpose_add(x, y):
    return x.T * 2 + y


def mean_var0(x):
    return x.mean(axis=0), x.var(axis=0)


def sum_squares(x):
    return (x * x).sum()


REGIONS = {  # name -> (function, argument shapes)
    "rows_regs": (softmax, [(64, 300)]),
    "rows_block_regs": (softmax, [(8192, 8192)]),
    "rows_reread": (softmax, [(64, 40000)]),
    "cols_split": (col_sum, [(1 << 20, 8)]),
    "cols_one_pass": (mean_var0, [(1 << 19, 512)]),
    "pointwise_tiled": (transpose_add, [(4096, 1024), (1024, 4096)]),
    "pointwise_vector": (gelu, [(1000, 1000)]),
    "reduce_all": (sum_squares, [(1000, 1000)]),
}


def region_of(name: str):
    fn, shapes = REGIONS[name]
    plan = fusec.fuse(fn).plan(*[fusec.ArraySpec(s, "float32") for s in shapes])
    assert len(plan.kernels) == 1
    return plan.kernels[0].region


@pytest.fixture
def tune_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "tune"
    monkeypatch.setenv("FUSEC_TUNE_CACHE", str(path))
    monkeypatch.delenv("FUSEC_AUTOTUNE", raising=False)
    autotune.reset_counters()
    return path


# ---- candidates ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REGIONS))
def test_autotune_candidates_start_with_the_heuristics_and_all_fit(name) -> None:
    nest = analyze(region_of(name))
    found = candidates(nest)
    assert found[0] == choose(nest)
    assert len(set(found)) == len(found) and 2 <= len(found) <= MAX_CANDIDATES, [str(c) for c in found]
    for schedule in found:
        check(nest.with_one_pass() if getattr(schedule, "one_pass", None) else nest, schedule)
        assert schedule.kind in (nest.kind, "cols")


def test_autotune_candidates_vary_what_the_heuristics_guess() -> None:
    def texts(name):
        return [c for c in candidates(analyze(region_of(name)))]

    rows = texts("rows_regs")
    assert {c.row_threads for c in rows if c.in_registers} >= {16, 32, 64}  # threads per row, same capacity
    assert {c.capacity for c in rows if c.in_registers} == {512}
    assert {"warp", "block"} <= {c.mapping for c in rows}
    assert all(c.elems <= 32 for c in texts("rows_block_regs") if c.in_registers)  # never a spilling row
    cols = texts("cols_split")
    assert {(c.tile, c.split) for c in cols} >= {(8, 32), (8, 64), (8, 16)} and {c.finish for c in cols} >= {
        "last_block", "tiles"}
    assert {c.one_pass for c in texts("cols_one_pass")} == {True, False}
    assert {c.tile for c in texts("pointwise_tiled")} == {16, 32, 64}
    assert {(c.loop, c.vec) for c in texts("pointwise_vector")} == {("vector", 4), ("vector", 2), ("contiguous", 1)}
    assert {c.finish for c in texts("reduce_all")} == {"last_block", "grid_barrier"}


def test_autotune_candidates_compile_with_nvrtc() -> None:
    from fusec.kinds import generate

    try:
        nvrtc.compile_cubin('extern "C" __global__ void k() {}', "sm_90")
    except Exception as exc:  # pragma: no cover - a machine without NVRTC
        pytest.skip(f"NVRTC unavailable: {exc}")
    region = region_of("rows_regs")
    for schedule in candidates(analyze(region)):
        kernel = generate(region, {}, schedule)
        assert nvrtc.compile_cubin(kernel.source, "sm_90").cubin.startswith(b"\x7fELF"), schedule


# ---- choosing the winner ---------------------------------------------------------------------------------


def test_autotune_pick_takes_the_fastest_whose_results_agree() -> None:
    schedules = candidates(analyze(region_of("rows_regs")))
    a, b, c, d = schedules[:4]
    good = [np.array([1.0, 2.0, np.nan], np.float32)]
    outputs = {a: good, b: good, c: [np.array([1.0, 2.5, np.nan], np.float32)]}  # c: wrong

    def run(s):
        if s == d:
            raise RuntimeError("does not launch")
        return outputs.get(s, good)

    times = {a: 1.0, b: 0.7, c: 0.1, d: 0.05}
    winner, trials = autotune.pick(schedules[:4], run, times.__getitem__)
    assert winner == b  # c is faster but wrong, d fails
    why = {t.schedule: t.why for t in trials}
    assert "differ" in why[c] and "failed (RuntimeError: does not launch)" == why[d] and why[b] == ""
    # a tie goes to the heuristics' schedule
    assert autotune.pick(schedules[:2], lambda s: good, lambda s: 1.0)[0] == a


def test_autotune_results_agree_within_reduction_tolerance_only() -> None:
    x = np.array([1.0, -2.0, np.nan, np.inf, 1e3], np.float32)
    agree = autotune.results_agree
    assert agree([x], [x.copy()])
    assert agree([x + np.float32(1e-3)], [x])  # another summation order: 1e-6 of the largest magnitude
    assert not agree([x + np.float32(1.0)], [x])
    moved_nan = x.copy()
    moved_nan[[0, 2]] = moved_nan[[2, 0]]
    assert not agree([moved_nan], [x])
    assert not agree([np.array([1, 2], np.int64)], [np.array([1, 3], np.int64)])
    assert not agree([x.astype(np.float64)], [x]) and not agree([x[:2]], [x])


# ---- the tune cache ------------------------------------------------------------------------------------


def _favour(schedule):
    """A timer under which ``schedule`` is the fastest candidate (the others 1 ms)."""
    return lambda s: 0.25 if s == schedule else 1.0


def _no_timing(schedule):
    raise AssertionError(f"timed {schedule}: the tune cache should have answered")


def _same_outputs(schedule):
    return [np.zeros(3, np.float32)]


def test_autotune_winner_round_trips_through_the_tune_cache(tune_dir) -> None:
    region = region_of("rows_regs")
    nest = analyze(region)
    pick = candidates(nest)[2]
    first = autotune.tuned_schedule(region, {}, H200, _same_outputs, _favour(pick))
    assert first.schedule == pick and not first.from_cache and len(first.trials) == len(candidates(nest))
    assert autotune.counters() == {"runs": 1, "cache_hits": 0, "candidates_timed": len(first.trials)}
    again = autotune.tuned_schedule(region, {}, H200, _same_outputs, _no_timing)
    assert again.schedule == pick and again.from_cache
    assert autotune.counters()["cache_hits"] == 1 and autotune.counters()["runs"] == 1
    # the entry: the schedule's text (which parses back into it), the device, every candidate's time
    entry = tune_cache.load(first.key)
    assert entry.schedule == pick.text() and entry.device == H200.name
    assert entry.times[pick.text()] == 0.25 and len(entry.times) == len(first.trials)
    # another layout or device is another key
    strided = {region.inputs[0]: ArrayLayout((600, 1), contiguous=False)}
    assert autotune.kernel_key(region, strided, H200) != first.key
    other = type(H200)("NVIDIA H100 80GB HBM3", sm_count=132)
    assert autotune.kernel_key(region, {}, other) != first.key
    assert stat.S_IMODE(os.lstat(tune_dir).st_mode) == 0o700


def test_autotune_second_process_reuses_the_winner_without_timing(tune_dir) -> None:
    region = region_of("cols_split")
    pick = candidates(analyze(region))[1]
    autotune.tuned_schedule(region, {}, H200, _same_outputs, _favour(pick))
    script = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
import fusec
from fusec.runtime import autotune
from fusec.schedule import H200
from tests.test_autotune import region_of, _no_timing, _same_outputs
tuned = autotune.tuned_schedule(region_of("cols_split"), {{}}, H200, _same_outputs, _no_timing)
print(json.dumps({{"schedule": tuned.schedule.text(), "from_cache": tuned.from_cache, **autotune.counters()}}))
"""
    env = {**os.environ, "FUSEC_TUNE_CACHE": str(tune_dir)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"schedule": pick.text(), "from_cache": True, "runs": 0, "cache_hits": 1, "candidates_timed": 0}


def _tuned_entry(tune_dir):
    region = region_of("rows_regs")
    pick = candidates(analyze(region))[1]
    tuned = autotune.tuned_schedule(region, {}, H200, _same_outputs, _favour(pick))
    return region, pick, tune_dir / tune_cache.entry_name(tuned.key)


def _retimed(region) -> bool:
    """Whether tuning ``region`` again times its candidates (the entry was refused)."""
    runs = autotune.counters()["runs"]
    autotune.tuned_schedule(region, {}, H200, _same_outputs, lambda s: 1.0)
    return autotune.counters()["runs"] == runs + 1


def test_autotune_refuses_a_tampered_entry_and_tunes_again(tune_dir) -> None:
    region, pick, path = _tuned_entry(tune_dir)
    data = bytearray(path.read_bytes())
    data[data.index(b"threads=") + len("threads=")] ^= 0x01  # another schedule, same length
    path.write_bytes(bytes(data))
    assert tune_cache.load(path.stem) is None
    assert _retimed(region)
    assert tune_cache.load(path.stem).schedule == candidates(analyze(region))[0].text()  # rewritten, signed
    assert not _retimed(region)


def test_autotune_refuses_entries_it_did_not_sign(tune_dir) -> None:
    region, pick, path = _tuned_entry(tune_dir)
    payload = json.dumps({"key": path.stem, "schedule": pick.text(), "device": H200.name, "times": {}}).encode()
    path.write_bytes(payload)  # unsigned
    assert _retimed(region)
    # signed with another secret
    path.write_bytes(pack_signed(tune_cache.TUNE_MAGIC, payload, b"k" * 32, path.name))
    assert _retimed(region)
    # a whole entry of another kernel copied under this name
    other = region_of("reduce_all")
    other_key = autotune.tuned_schedule(other, {}, H200, _same_outputs, lambda s: 1.0).key
    path.write_bytes((tune_dir / tune_cache.entry_name(other_key)).read_bytes())
    assert _retimed(region)


def test_tune_cache_directory_writable_by_others_is_refused_not_chmodded(tune_dir, caplog) -> None:
    """The tune cache chmod-ed an existing directory 0700 too. One others can write to is left as it is and
    not used: every process tunes; a warning names it."""
    tune_dir.mkdir()
    tune_dir.chmod(0o777)
    region = region_of("rows_regs")
    pick = candidates(analyze(region))[1]
    with caplog.at_level("WARNING", logger="fusec"):
        first = autotune.tuned_schedule(region, {}, H200, _same_outputs, _favour(pick))
        assert not first.from_cache and _retimed(region)
    assert stat.S_IMODE(os.lstat(tune_dir).st_mode) == 0o777 and list(tune_dir.iterdir()) == []
    assert any(f"does not keep the tune cache ($FUSEC_TUNE_CACHE) in {tune_dir}: other users can write" in
               r.getMessage() for r in caplog.records), caplog.text


def test_autotune_cache_follows_no_symbolic_links(tune_dir, tmp_path, monkeypatch) -> None:
    region, pick, path = _tuned_entry(tune_dir)
    elsewhere = tmp_path / "elsewhere.tune"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    assert tune_cache.load(path.stem) is None and _retimed(region)
    # a cache directory that is a symbolic link is not used at all: nothing is stored, every process tunes
    linked = tmp_path / "linked"
    linked.symlink_to(tune_dir, target_is_directory=True)
    monkeypatch.setenv("FUSEC_TUNE_CACHE", str(linked))
    assert not tune_cache.store(tune_cache.TuneEntry("0" * 64, pick.text(), H200.name, {}))
    assert tune_cache.load("0" * 64) is None and _retimed(region) and _retimed(region)


# ---- switches and explain --------------------------------------------------------------------------------


def test_autotune_is_off_unless_asked(monkeypatch) -> None:
    monkeypatch.delenv("FUSEC_AUTOTUNE", raising=False)
    assert not autotune.enabled() and autotune.enabled(True)
    monkeypatch.setenv("FUSEC_AUTOTUNE", "1")
    assert autotune.enabled() and not autotune.enabled(False)
    assert fusec.fuse(softmax).autotune is None and fusec.fuse(softmax, autotune=True).autotune is True
    assert fusec.fuse(softmax, autotune=False).with_schedules({}).autotune is False


def test_autotune_explain_prints_the_schedule_from_the_tune_cache(tune_dir) -> None:
    spec = fusec.ArraySpec((64, 300), "float32")
    region = region_of("rows_regs")
    pick = candidates(analyze(region))[1]
    heuristic = candidates(analyze(region))[0]
    before = str(fusec.fuse(softmax, autotune=True).explain(spec))
    assert f"schedule: {heuristic.text()} (heuristics; autotune is on and the tune cache has no entry yet" in before
    autotune.tuned_schedule(region, {}, H200, _same_outputs, _favour(pick))
    after = str(fusec.fuse(softmax, autotune=True).explain(spec))
    assert f"schedule: {pick.text()} (autotuned: from the tune cache)" in after
    assert f"schedule: {heuristic.text()}\n" in str(fusec.fuse(softmax).explain(spec))  # autotune off
    # cuda_source shows what runs: the cached schedule's kernel, the same as forcing its text
    tuned_source = fusec.fuse(softmax, autotune=True).cuda_source(spec)
    assert f"// schedule: {pick.text()}" in tuned_source
    assert tuned_source == fusec.fuse(softmax).with_schedules({"k0": pick.text()}).cuda_source(spec)
    assert f"// schedule: {heuristic.text()}" in fusec.fuse(softmax).cuda_source(spec)
    assert autotune.counters()["runs"] == 1  # explain never tunes
