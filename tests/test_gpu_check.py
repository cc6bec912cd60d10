"""``scripts/gpu_check.py`` (the one-call GPU check) on the CPU: it reads pytest's output right, finds every file
with GPU tests, and refuses to run without a GPU instead of reporting a green check."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends import runs_on_both_backends

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


gpu_check = _module()

LOG = """\
....F..s
=================================== FAILURES ===================================
________________ test_scan_forced[float16-scan:sequential] _____________________
E   AssertionError: beyond 42 roundings
=========================== short test summary info ============================
SKIPPED [1] tests/gpu/test_scan_gpu.py:10: dask-cuda is not installed
FAILED tests/gpu/test_scan_gpu.py::test_scan_forced[float16-scan:sequential] - AssertionError: beyond 42 roundings
ERROR tests/gpu/test_scan_gpu.py::test_setup_fails
1 failed, 6 passed, 1 skipped, 1 error in 12.34s
"""


def test_gpu_check_reads_counts_and_failed_node_ids() -> None:
    result = gpu_check.parse_pytest_log("tests/gpu/test_scan_gpu.py", LOG, 1, 12.3)
    assert result.counts == {"failed": 1, "passed": 6, "skipped": 1, "errors": 1}
    assert result.failed == [
        "tests/gpu/test_scan_gpu.py::test_scan_forced[float16-scan:sequential] - AssertionError: beyond 42 roundings",
        "tests/gpu/test_scan_gpu.py::test_setup_fails",
    ]
    assert not result.ok


def test_gpu_check_counts_a_crashed_process_as_a_failure() -> None:
    """A process killed by a sticky CUDA error or a timeout prints no FAILED line: the file itself is reported."""
    result = gpu_check.parse_pytest_log("tests/gpu/test_dask_gpu.py", "....\nFatal Python error: Aborted\n", 134, 5)
    assert result.failed and result.failed[0].startswith("tests/gpu/test_dask_gpu.py (pytest exit 134")
    assert not result.ok
    timed_out = gpu_check.parse_pytest_log("tests/gpu/test_x.py", "....", 124, 300, timed_out=True)
    assert "timed out" in timed_out.failed[0] and not timed_out.ok


def test_gpu_check_passes_a_clean_file() -> None:
    result = gpu_check.parse_pytest_log("tests/gpu/test_x.py", "....\n4 passed in 1.00s\n", 0, 1)
    assert result.ok and result.counts == {"passed": 4}


def test_gpu_check_runs_every_file_with_gpu_tests() -> None:
    files = gpu_check.gpu_test_files(None)
    # a file with GPU tests: its module or a test is marked gpu, or its tests run on both backends
    marked = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
              if p != Path(__file__).resolve() and ("GPU_ONLY" in p.read_text() or "mark.gpu" in p.read_text()
                                                     or runs_on_both_backends(p.read_text()))}
    assert marked - {gpu_check.FUZZ_TEST} == set(files)
    assert gpu_check.FUZZ_TEST not in files
    assert gpu_check.gpu_test_files(["scan"]) == ["tests/gpu/test_scan_gpu.py"]


def test_gpu_check_reads_the_sweep_summary() -> None:
    text = ("x\ngeometric mean of fusec's speed ratio to the fastest peer over 33 cases: x1.06\n"
            "30 of 33 cases at >= x0.9\n")
    assert gpu_check.sweep_lines(text) == [
        "geometric mean of fusec's speed ratio to the fastest peer over 33 cases: x1.06", "30 of 33 cases at >= x0.9"]
    assert gpu_check.fuzz_summary("a\nfuzz: 5000 graphs, 6000 kernels, 0 mismatches\n") == (
        "fuzz: 5000 graphs, 6000 kernels, 0 mismatches")


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import cupy; assert cupy.cuda.runtime.getDeviceCount()"],
                                   capture_output=True).returncode == 0, reason="a GPU is present")
def test_gpu_check_refuses_to_run_without_a_gpu(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "gpu_check: CuPy sees no GPU" in done.stderr


def test_gpu_check_report_is_written_after_every_stage(tmp_path) -> None:
    """A call cut short (the device's time limit) still brings back the summary and the logs of what ran: both are
    rewritten after each stage, the logs kept outside the output folder until then."""
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    logs.mkdir()
    (logs / "test_x.log").write_text("4 passed in 1.00s\n")
    report = gpu_check.Report(out, logs, "a GPU, fusec abc", budget=100)
    report.failed_tests = ["tests/gpu/test_y.py::test_z - AssertionError"]
    report.stage("GPU suite: 2 files in 5 s: 1 failed, 4 passed")
    summary = (out / "summary.txt").read_text()
    assert "GPU suite: 2 files" in summary and "failed tests: 1" in summary and "test_y.py::test_z" in summary
    import tarfile

    with tarfile.open(out / "logs.tar.gz") as tar:
        assert "logs/test_x.log" in tar.getnames()
    report.stage("fuzzer: 5000 graphs, 0 mismatches")
    assert "fuzzer: 5000 graphs" in (out / "summary.txt").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["logs.tar.gz", "summary.txt"]


def test_gpu_check_budget_cuts_and_skips_stages(tmp_path) -> None:
    report = gpu_check.Report(tmp_path, tmp_path, "a GPU", budget=100)
    assert 80 <= report.timeout(300) <= 90  # cut to what is left, less the reserve for the report
    assert report.timeout(50) == 50
    report.deadline = report.started + 20  # 20 s left: nothing fits
    assert report.timeout(300) is None
    report.skipped("benchmarks/dask_bench.py --reps 3")
    assert "benchmarks/dask_bench.py --reps 3: skipped" in (tmp_path / "summary.txt").read_text()


def test_gpu_check_gemm_bench_is_off_by_default_and_runs_the_quick_suite(tmp_path) -> None:
    assert not gpu_check.parse_args([]).gemm_bench and gpu_check.parse_args(["--gemm-bench"]).gemm_bench
    cmd = gpu_check.gemm_bench_command(tmp_path)
    assert cmd[1:] == ["-m", "benchmarks.gemm", "--quick", "--out", str(tmp_path / "bench" / "gemm.json")]
    assert (tmp_path / "bench").is_dir()
    text = ("x\nfusec: 3 of 18 cases timed, 15 refused, 0 mismatched or failed; within the bound (...): 2 of 3; "
            "at least as fast as the fastest peer: 3 of 3\n")
    assert gpu_check.gemm_lines(text) == [text.splitlines()[1]]
    assert gpu_check.gemm_lines("fusec: 1 kernel(s) planned\n") == []
