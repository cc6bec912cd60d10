"""The benchmark script without a GPU: ``benchmarks/run.py --dry-run`` runs every workload through
fusec's NumPy backend and checks it, and the pieces that need no device (bytes formulas, the
checks that make a row MISMATCH, the tables) behave."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmarks import gemm, run
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


# --- the GEMM suite (benchmarks/gemm.py) -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gemm_cpu_report() -> dict:
    rc = gemm.main(["--cpu-check", "--seed", "1", "--dtypes", "fp16,fp32"])
    report = gemm.LAST_REPORT
    assert report is not None and report["mode"] == "cpu-check"
    mismatched = any(r["impls"][0]["status"] == "mismatch" for r in report["cases"])
    assert rc == (1 if mismatched else 0)  # a mismatch is reported in the exit status, never hidden
    return report


def test_gemm_cpu_check_covers_every_workload_and_numpy_meets_every_bound(gemm_cpu_report: dict) -> None:
    """Every workload at its tiny shapes runs; NumPy itself (the naive peer) is within the float64 bound everywhere."""
    assert {r["workload"] for r in gemm_cpu_report["cases"]} == set(gemm.WORKLOADS)
    for rec in gemm_cpu_report["cases"]:
        numpy = next(i for i in rec["impls"] if i["name"] == "numpy")
        assert numpy["status"] == "ok", (rec["case"], rec["dtype"], numpy.get("reason"))


def _fusec_statuses(report: dict, dtype: str) -> dict[str, dict]:
    recs = [r for r in report["cases"] if r["dtype"] == dtype]
    assert recs and all(r["impls"][0]["name"] == "fusec" for r in recs)
    return {r["case"]: r["impls"][0] for r in recs}


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_gemm_cpu_check_fusec_never_fails_and_refusals_say_why(gemm_cpu_report: dict, dtype: str) -> None:
    """fusec's NumPy backend on every case: a result (checked), or refused with fusec's message (the matrix products
    it does not take yet, as the sizes grow); never an exception of another kind."""
    fusec = _fusec_statuses(gemm_cpu_report, dtype)
    for case, impl in fusec.items():
        assert impl["status"] in ("ok", "refused", "mismatch"), (case, impl.get("reason"))
        if impl["status"] == "refused":
            assert "matrix product" in impl["reason"], (case, impl["reason"])
    assert sum(i["status"] != "refused" for i in fusec.values()) >= 5  # small products trace today


def test_gemm_cpu_check_fusec_float32_within_the_bound(gemm_cpu_report: dict) -> None:
    fusec = _fusec_statuses(gemm_cpu_report, "fp32")
    assert all(i["status"] in ("ok", "refused") for i in fusec.values()), {
        c: i.get("reason") for c, i in fusec.items() if i["status"] not in ("ok", "refused")}


def test_gemm_cpu_check_fusec_float16_within_the_float32_accumulation_bound(gemm_cpu_report: dict) -> None:
    fusec = _fusec_statuses(gemm_cpu_report, "fp16")
    assert all(i["status"] in ("ok", "refused") for i in fusec.values()), {
        c: i.get("reason") for c, i in fusec.items() if i["status"] not in ("ok", "refused")}


def test_gemm_cpu_check_exit_status_and_json(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gemm.json"
    assert gemm.main(["--cpu-check", "--seed", "2", "--dtypes", "fp32", "--cases", "router_top1,attention_scores",
                      "--out", str(out)]) == 0  # exit 1 only on a mismatch or a failure of fusec
    saved = json.loads(out.read_text())
    assert {r["workload"] for r in saved["cases"]} == {"router_top1", "attention_scores"}
    assert all(r["impls"][0]["status"] == "ok" for r in saved["cases"])
    assert "fusec: " in capsys.readouterr().out


def test_gemm_check_flags_a_wrong_epilogue() -> None:
    """The bound is tight enough to catch an epilogue that drops the bias, and loose enough for float32 rounding."""
    rng = np.random.default_rng(0)
    d = gemm.DTYPES["fp16"]
    x, w1, b1 = rng.standard_normal((8, 64)), rng.standard_normal((64, 32)) / 8, rng.standard_normal(32) * 0.1
    args16 = [a.astype(np.float16).astype(np.float64) for a in (x, w1, b1)]
    ref, bounds = gemm.ref_mlp_gelu(dict(zip(("x", "w1", "b1"), args16)), d)
    good = (args16[0].astype(np.float32) @ args16[1].astype(np.float32) + args16[2].astype(np.float32))
    good = gemm.TW.gelu(good).astype(np.float16).astype(np.float64)
    assert gemm.check((good,), ref, bounds)["ok"]
    no_bias = gemm.TW.gelu(args16[0] @ args16[1]).astype(np.float16).astype(np.float64)
    c = gemm.check((no_bias,), ref, bounds)
    assert not c["ok"] and "beyond the bound" in gemm.describe(c)
    assert not gemm.check((good,), ref, bounds, finite=False)["ok"]


def test_gemm_check_top1_accepts_near_ties_only() -> None:
    rng = np.random.default_rng(1)
    d = gemm.DTYPES["fp32"]
    x, w = rng.standard_normal((6, 16)), rng.standard_normal((16, 8)) / 4
    w[:, 3] = w[:, 5]  # experts 3 and 5 tie on every token
    ref, bounds = gemm.ref_router_top1({"x": x, "w_r": w}, d)
    pmax, top = ref
    other = top.copy()
    tied = top == 3
    other[tied] = 5
    assert gemm.check((pmax, other), ref, bounds)["ok"]
    wrong = (top + 1) % 8
    wrong[top == 4] = 6  # never a tie partner
    c = gemm.check((pmax, wrong), ref, bounds)
    assert not c["ok"] and "top-1" in gemm.describe(c)


def test_gemm_quick_covers_every_workload_at_an_llm_shape() -> None:
    quick = gemm.select_cases(None, quick=True)
    assert {c.workload for c in quick} == set(gemm.WORKLOADS)
    assert any(c.name.startswith("decode_") and c.dims[0] <= 16 for c in quick)
    for c in quick:
        assert c.dims[1] >= 2048 or c.workload == "attention_scores"
    assert len(gemm.select_cases(None, quick=False)) == len(gemm.CASES)
    assert [c.name for c in gemm.select_cases("router_top1", quick=False)] == [
        c.name for c in gemm.CASES if c.workload == "router_top1"]
    with pytest.raises(ValueError):
        gemm.select_cases("nope", quick=False)
    assert [d.key for d in gemm.select_dtypes("bfloat16,fp16")] == ["bf16", "fp16"]
    assert gemm.main(["--cpu-check", "--dtypes", "fp8"]) == 2


def test_gemm_bound_is_the_gemm_plus_the_extra_bytes_at_copy_speed() -> None:
    """mlp_gelu reads only the bias besides the GEMM; layernorm_residual the bias and the residual; the router writes
    less than the GEMM alone (no extra output bytes); attention reads the mask once."""
    case = gemm.CASES_BY_NAME["mlp_gelu_8192x4096x11008"]
    t = gemm.traffic(case, gemm.DTYPES["bf16"])
    assert t["extra"] == 11008 * 2 and t["flops"] == 2 * 8192 * 4096 * 11008
    ln = gemm.traffic(gemm.CASES_BY_NAME["layernorm_residual_8192x4096x4096"], gemm.DTYPES["fp32"])
    assert ln["extra_inputs"] == 4 * (4096 + 8192 * 4096) and ln["extra_outputs"] == 0
    router = gemm.traffic(gemm.CASES_BY_NAME["router_top1_16384x4096x64"], gemm.DTYPES["fp16"])
    assert router["outputs"] == 16384 * (2 + 8) and router["extra"] == 0
    att = gemm.traffic(gemm.CASES_BY_NAME["attention_scores_32x2048x128"], gemm.DTYPES["bf16"])
    assert att["extra"] == 2048 * 2048 * 2 and att["gemm_write"] == 32 * 2048 * 2048 * 2
    sw = gemm.traffic(gemm.CASES_BY_NAME["swiglu_4096x4096x11008"], gemm.DTYPES["bf16"])
    assert sw["flops"] == 2 * 2 * 4096 * 4096 * 11008 and sw["extra"] == 0
    assert gemm.bound_ms(1.0, 3_000_000_000, 3000.0) == pytest.approx(1.05 + 1.0)
    assert gemm.bound_ms(None, 0, 3000.0) is None and gemm.bound_ms(1.0, 0, None) is None


def _timed(name: str, ms: float | None, status: str = "ok", **extra) -> dict:
    impl = {"name": name, "status": status, **extra}
    if ms is not None:
        impl["ms"] = {"median": ms, "min": ms, "max": ms, "runs": [ms]}
    return impl


def test_gemm_summary_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The verdicts from made-up times: within the bound and faster than every peer that passed its check (a
    mismatched peer does not count), and the table's columns."""
    case = gemm.CASES_BY_NAME["mlp_gelu_8192x4096x11008"]
    rec = {"case": case.name, "workload": "mlp_gelu", "dtype": "bf16", "shape": list(case.dims), "dims": "TxHxI",
           "traffic": gemm.traffic(case, gemm.DTYPES["bf16"]), "impls": [
               _timed("GEMM alone (torch.matmul)", 1.00, gemm_alone=True),
               _timed("GEMM alone (cupy.matmul)", 0.98, gemm_alone=True),
               _timed("fusec", 1.02), _timed("torch eager", 1.36), _timed("torch.compile", 1.19),
               _timed("torch.compile max-autotune", None, "skipped", reason="--quick"),
               _timed("cupy naive", 0.5, "mismatch", reason="wrong")]}
    gemm.summarize(rec, copy_gbps=3000.0)
    assert rec["gemm_ms"] == 0.98 and rec["gemm_impl"] == "GEMM alone (cupy.matmul)"
    assert rec["bound_ms"] == pytest.approx(1.05 * 0.98 + 11008 * 2 / 3e12 * 1e3)
    assert rec["best_peer"] == "torch.compile" and rec["meets_bound"] and rec["beats_peers"] and rec["met"]
    refused = {**rec, "case": "swiglu_4096x4096x11008", "impls": [
        *rec["impls"][:2], {"name": "fusec", "status": "refused", "reason": "einsum runs too many loops"},
        *rec["impls"][3:]]}
    gemm.summarize(refused, copy_gbps=3000.0)
    assert refused["fusec_ms"] is None and refused["met"] is None
    report = {"cases": [rec, refused], "gpu": {"name": "NVIDIA H100 80GB HBM3"}, "date": "2026-12-08",
              "settings": {"reps": 5, "tf32": False}, "copy": {"gbps": 3000.0}}
    gemm.print_tables(report)
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out and "copy ceiling 3000 GB/s" in out and "TF32 off" in out
    head = next(line for line in out.splitlines() if line.startswith("case"))
    for col in ("fusec ms", "GEMM ms", "bound ms", "eager", "compile", "max-autotune", "cupy naive", "fusec/bound",
                "vs fastest peer", "met"):
        assert col in head
    assert "x1.17 (torch.compile)" in out and "MISMATCH" in out
    assert "swiglu_4096x4096x11008 bf16: fusec refused: einsum runs too many loops" in out
    assert "1 of 2 cases timed, 1 refused" in out
