"""The benchmark script without a GPU: ``benchmarks/run.py --dry-run`` runs every workload through
fusec's NumPy backend and checks it, and the pieces that need no device (bytes formulas, the
checks that make a row MISMATCH, the tables) behave."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmarks import run
from benchmarks import workloads as W


@pytest.fixture(scope="module")
def dry_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench")
    assert run.main(["--dry-run", "--out", str(out), "--no-chart", "--seed", "1"]) == 0
    report = run.LAST_REPORT
    assert report is not None
    return report


def test_dry_run_returns_0_and_checks_every_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(["--dry-run"]) == 0
    report = run.LAST_REPORT
    assert [w["name"] for w in report["workloads"]] == list(W.NAMES)
    for rec in report["workloads"]:
        fusec = rec["impls"][0]
        assert fusec["name"] == "fusec"
        assert fusec["status"] == "ok", (rec["name"], fusec.get("reason"))
        assert fusec["check"]["ok"] and fusec["out_check"] == "ok"
        assert fusec["kernels"] >= 1
        assert fusec["ms"]["median"] > 0
    out = capsys.readouterr().out
    assert "MISMATCH" not in out
    assert out.rstrip().splitlines()[-1].startswith("gelu_small")  # the summary table is printed last


def test_dry_run_writes_the_json(dry_report: dict) -> None:
    saved = json.loads(open(dry_report["json_path"]).read())
    assert saved["mode"] == "dry-run" and saved["settings"]["seed"] == 1
    assert {w["name"] for w in saved["workloads"]} == set(W.NAMES)
    naive = [i for w in saved["workloads"] for i in w["impls"] if i["name"] == "cupy naive"]
    assert len(naive) == len(W.NAMES) and all(i["status"] == "ok" for i in naive)
    for rec in saved["workloads"]:
        gpu_only = [i for i in rec["impls"] if i["name"] in ("cupy.fuse", "torch.compile", "cuda.compute")]
        assert all(i["status"] == "skipped" for i in gpu_only)


def test_only_peers_and_markdown(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--dry-run", "--only", "softmax,adam", "--peers", "none", "--markdown", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    assert [w["name"] for w in run.LAST_REPORT["workloads"]] == ["softmax", "adam"]
    assert all(len(w["impls"]) == 1 for w in run.LAST_REPORT["workloads"])
    out = capsys.readouterr().out
    assert "| workload | impl | median |" in out and "| softmax |" in out
    path = run.LAST_REPORT["json_path"]
    assert run.main(["--from-json", path, "--markdown"]) == 0
    assert "| adam |" in capsys.readouterr().out


def test_usage_errors() -> None:
    assert run.main(["--dry-run", "--only", "nope"]) == 2
    assert run.main(["--dry-run", "--peers", "nope"]) == 2
    with pytest.raises(SystemExit):
        run.main(["--reps", "0"])


@pytest.mark.parametrize("name, gb", [("sum_abs", 1.07), ("gelu", 2.15), ("softmax", 0.54), ("layernorm", 0.54),
                                      ("moe_router", 0.28), ("adam", 1.88)])
def test_bytes_match_perf_md(name: str, gb: float) -> None:
    """PERF.md's bytes column, and each input read once plus each output written once."""
    w = W.BY_NAME[name]
    assert round(w.bytes_of(w.shape) / 1e9, 2) == gb
    rng = np.random.default_rng(0)
    shape = w.dry_shape
    inputs = w.make_inputs(lambda s: rng.standard_normal(s, dtype=np.float32), shape)
    outputs = W.as_tuple(w.build(np)(*inputs))
    dtypes = run.expected_dtypes(w)
    counted = sum(a.nbytes for a in inputs) + sum(math.prod(np.shape(o)) * d.itemsize for o, d in zip(outputs, dtypes))
    assert w.bytes_of(shape) == counted


def _data(name: str, seed: int = 0) -> tuple[W.Workload, tuple, tuple]:
    w = W.BY_NAME[name]
    rng = np.random.default_rng(seed)
    inputs = w.make_inputs(lambda s: rng.standard_normal(s, dtype=np.float32), w.dry_shape)
    return w, inputs, run.reference(w, inputs, threads=2)


@pytest.mark.parametrize("name", W.NAMES)
def test_reference_matches_float32_numpy(name: str) -> None:
    """The chunked float64 reference agrees with the plain function on float32 inputs."""
    w, inputs, ref = _data(name)
    got = W.as_tuple(w.build(np)(*inputs))
    check = run.check_outputs(w, got, ref, inputs, np, run.expected_dtypes(w))
    assert check["ok"], check


def test_check_flags_wrong_results() -> None:
    w, inputs, ref = _data("gelu")
    good = w.build(np)(*inputs)
    assert run.check_outputs(w, good, ref, inputs, np)["ok"]
    bad = good.copy()
    bad[123] += 1e-3
    check = run.check_outputs(w, bad, ref, inputs, np)
    assert not check["ok"] and check["bad"] == 1 and check["max_abs"] == pytest.approx(1e-3, rel=1e-2)
    unwritten = good.copy()
    unwritten[-7:] = np.nan
    assert "NaN/inf" in run.describe_check(run.check_outputs(w, unwritten, ref, inputs, np))
    assert not run.check_outputs(w, good.astype(np.float64), ref, inputs, np, run.expected_dtypes(w))["ok"]
    assert not run.check_outputs(w, good[:-1], ref, inputs, np)["ok"]


def test_check_argmax_allows_ties_only() -> None:
    w, inputs, ref = _data("moe_router")
    probs, idx = w.build(np)(*inputs)
    assert run.check_outputs(w, (probs, idx), ref, inputs, np)["ok"]
    logits = inputs[0].copy()
    j = 63 if idx[5] != 63 else 0
    logits[5, j] = logits[5, idx[5]]  # an exact tie: either index is an argmax
    tied_probs, tied_idx = w.build(np)(logits)
    tied_ref = run.reference(w, (logits,), threads=1)
    other = tied_idx.copy()
    other[5] = j if tied_idx[5] != j else idx[5]
    check = run.check_outputs(w, (tied_probs, other), tied_ref, (logits,), np)
    assert check["ok"] and check["index_differs_1"] == 1, check
    wrong = idx.copy()
    wrong[9] = (idx[9] + 1) % 64
    assert not run.check_outputs(w, (probs, wrong), ref, inputs, np)["ok"]


def test_json_safe_and_slug() -> None:
    assert run.json_safe({"a": math.inf, "b": np.float32(1.5), "c": (np.int64(2), math.nan)}) == \
        {"a": "inf", "b": 1.5, "c": [2, "nan"]}
    assert run.slugify("NVIDIA H200") == "nvidia-h200"


def test_a_wrong_fusec_result_is_a_mismatch_and_the_run_goes_on(monkeypatch, tmp_path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import fusec

    real_fuse = fusec.fuse

    def broken_fuse(fn):
        fused = real_fuse(fn)

        class Wrong:
            def plan(self, *args):
                return fused.plan(*args)

            def __call__(self, *args, out=None):
                return fused(*args) + 1e-2 if fn.__name__ == "softmax" else fused(*args, out=out)

        return Wrong()

    monkeypatch.setattr(fusec, "fuse", broken_fuse)
    assert run.main(["--dry-run", "--only", "softmax,gelu", "--out", str(tmp_path), "--no-chart"]) == 1
    softmax, gelu = run.LAST_REPORT["workloads"]
    assert softmax["impls"][0]["status"] == "mismatch" and "ms" not in softmax["impls"][0]
    assert softmax["impls"][1]["status"] == "ok"  # the peers still ran
    assert gelu["impls"][0]["status"] == "ok"
    out = capsys.readouterr().out
    assert "fusec: MISMATCH against the NumPy reference: max abs 0.01" in out


def test_benchmarks_commit_can_come_from_the_environment(monkeypatch) -> None:
    """On the device machine the tree is a copy whose git metadata may be stale: the caller names it."""
    monkeypatch.setenv("FUSEC_GIT_COMMIT", "abc1234")
    assert run.git_commit() == "abc1234"
    monkeypatch.delenv("FUSEC_GIT_COMMIT")
    assert run.git_commit() != "abc1234"


def test_benchmarks_times_under_a_tenth_of_a_millisecond_keep_three_digits() -> None:
    assert run.fmt_ms(0.090208, False) == "0.0902 ms" and run.fmt_ms(0.1335, False) == "0.134 ms"
    assert run.fmt_ms(14.6e-3, True) == "14.6 us" and run.fmt_ms(None, False) == "-"


def test_sweep_dry_run_checks_every_case_and_summarizes_ratios(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """The layout sweep (benchmarks/sweep.py) through fusec's NumPy backend: every case traces, plans and
    matches the float64 reference, and the summary gives the geometric mean of the speed ratios."""
    from benchmarks.sweep import SWEEP

    assert len(SWEEP) >= 25
    argv = ["--suite", "sweep", "--dry-run", "--peers", "naive", "--reps", "1", "--no-chart", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    report = run.LAST_REPORT
    assert report["suite"] == "sweep" and report["json_path"].endswith("-sweep.json")
    assert [w["name"] for w in report["workloads"]] == [w.name for w in SWEEP]
    for rec in report["workloads"]:
        fusec = rec["impls"][0]
        assert fusec["status"] == "ok" and fusec["check"]["ok"], (rec["name"], fusec.get("reason"))
        assert rec["target_ratio"] == 0.9 and rec["speedup"] is not None
    out = capsys.readouterr().out
    assert f"fastest peer over {len(SWEEP)} cases: x" in out


def test_idioms_dry_run_checks_every_case_one_kernel_each(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """The idioms suite (benchmarks/idioms.py) through fusec's NumPy backend: every case traces into one kernel
    and matches the float64 reference; the in-place AdamW case runs every implementation on its own copy of the
    inputs (a shared copy would be stepped twice and miss the reference)."""
    from benchmarks.idioms import IDIOMS

    argv = ["--suite", "idioms", "--dry-run", "--peers", "naive", "--reps", "2", "--no-chart", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    report = run.LAST_REPORT
    assert report["suite"] == "idioms" and report["json_path"].endswith("-idioms.json")
    assert [w["name"] for w in report["workloads"]] == [w.name for w in IDIOMS]
    for rec in report["workloads"]:
        fusec, naive = rec["impls"]
        assert fusec["status"] == "ok" and fusec["check"]["ok"] and fusec["out_check"] == "ok", rec["name"]
        assert naive["status"] == "ok" and naive["check"]["ok"], (rec["name"], naive.get("reason"))
        assert fusec["kernels"] == rec["target_kernels"] == 1 and rec["target_met"] is None  # no ceiling here
    assert any(rec["mutates"] for rec in report["workloads"])
    assert report["fusec_cache_info"]["plans"] >= len(IDIOMS)  # the process's counters are in the report
    assert "not judged: no copy ceiling" in capsys.readouterr().out


def test_idioms_copy_target_needs_one_kernel_and_the_copy_share() -> None:
    rec = {"target_pct_copy": 90.9, "target_kernels": 1, "impls": [
        {"name": "fusec", "status": "ok", "ms": {"median": 1.0}, "pct_copy": 95.0, "kernels": 1}]}
    assert run.target_met(rec) is True
    rec["impls"][0]["kernels"] = 2
    assert run.target_met(rec) is False
    rec["impls"][0].update(kernels=1, pct_copy=80.0)
    assert run.target_met(rec) is False
    rec["workloads"] = None
    assert run.copy_target_summary({"workloads": [dict(rec, name="x")]}) == [
        "0 of 1 cases in at most 1 kernel at >= 90.9% of the copy ceiling; below: x (1 kernel(s), 80% of copy)"]


def test_shared_workloads_need_numpy_only() -> None:
    """``tests/workloads.py`` is imported by benchmarks run from the repository root on a GPU machine
    (``PYTHONPATH=.``): it imports NumPy and nothing else, so a benchmark never needs pytest or the test tools."""
    import ast
    from pathlib import Path

    source = (Path(__file__).resolve().parent / "workloads.py").read_text(encoding="utf-8")
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported == {"__future__", "numpy"}
