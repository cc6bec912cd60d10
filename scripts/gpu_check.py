#!/usr/bin/env python
"""Check the GPU in one call: every GPU test, the fuzzer, the Dask GPU tests and the quick benchmarks.

Run from the repository root on a machine with an NVIDIA GPU (``scripts/gpu_check.sh`` wraps it: it installs
carried wheels first), with the logs going under ``--out`` (default ``$OUT``):

    python scripts/gpu_check.py --out /tmp/gpu-check            # everything, about 7 minutes on an H100
    python scripts/gpu_check.py --no-bench --files scan,joins   # only tests/gpu/test_{scan,joins}_gpu.py

Stages, with what each writes under ``--out``:

1. the fuzz corpus (``scripts/make_fuzz_corpus.py``, ``--fuzz-count`` graphs of every generator family, seed
   ``--fuzz-seed``, default the day's date so that each day draws new graphs) is built and its kernels compiled
   on the CPUs the suite leaves free, in the background while stage 2 runs;
2. the GPU suite: each file of ``tests/gpu/`` (the fuzzer's aside) and the other files with GPU tests (among them
   ``tests/backends.py``'s ``FILES``, whose tests run on both backends), in its own ``pytest -m gpu`` process,
   ``--jobs`` at a time (a CUDA error that poisons a process's context ends that file only), largest files first;
3. the fuzzer over the corpus (``tests/gpu/test_fuzz_gpu.py``; its report is ``fuzz_report.txt``);
4. ``benchmarks/run.py --quick`` and ``--suite sweep --quick`` (``bench/*.json``), alone on the GPU;
5. with ``--dask-bench``, ``benchmarks/dask_bench.py`` at its default size and with ``--cluster``;
6. with ``--gemm-bench``, the GEMM suite ``python -m benchmarks.gemm --quick`` (``bench/gemm.json``).

The last lines printed are the summary (also ``summary.txt``): each stage's time and outcome, every failed
test, the fuzzer's mismatches and the sweep's geometric mean. Every log is in ``logs.tar.gz``. Both are
rewritten after every stage, so a call cut short (the device's time limit) still brings back what ran; the logs
are kept outside ``--out`` until then (a device call brings back a few files, not one per test file).
``--budget`` (seconds, default 450) bounds the whole run: each stage's timeout is cut to what is left, and a
stage that no longer fits is skipped and says so. Exit status 0 only when no test failed, the fuzzer found no
mismatch and every stage ran to its end.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.backends import FILES as BOTH_BACKENDS  # noqa: E402

# the files outside tests/gpu with GPU tests: a few of their own, and those whose tests run on both backends
OTHER_GPU_FILES = ("tests/test_examples.py", "tests/test_cli.py", "tests/test_explain.py", *BOTH_BACKENDS)
FUZZ_TEST = "tests/gpu/test_fuzz_gpu.py"
_RESULT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
_FAILED_RE = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")


@dataclass
class FileResult:
    """One pytest process's outcome: its counts, its failed node ids (with pytest's one-line reason) and rc."""

    path: str
    rc: int
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc in (0, 5) and not self.failed and not self.timed_out  # 5: no test collected


def parse_pytest_log(path: str, text: str, rc: int, seconds: float, timed_out: bool = False) -> FileResult:
    """The counts of pytest's last summary line and its ``FAILED``/``ERROR`` lines (``-ra`` short summary)."""
    result = FileResult(path, rc, seconds, timed_out=timed_out)
    summary = [line for line in text.splitlines() if _RESULT_RE.search(line) and (" in " in line or "==" in line)]
    if summary:
        for count, word in _RESULT_RE.findall(summary[-1]):
            result.counts["errors" if word.startswith("error") else word] = int(count)
    for line in text.splitlines():
        m = _FAILED_RE.match(line.strip())
        if m:
            reason = (m.group(3) or "").strip()
            result.failed.append(f"{m.group(2)}" + (f" - {reason[:200]}" if reason else ""))
    if rc not in (0, 5) and not result.failed:
        tail = " | ".join(text.strip().splitlines()[-3:])[:300]
        result.failed.append(f"{path} (pytest exit {rc}{', timed out' if timed_out else ''}: {tail})")
    return result


def gpu_test_files(only: list[str] | None) -> list[str]:
    """The files with GPU tests, largest first (they take longest, so they start first)."""
    files = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests" / "gpu").glob("test_*.py"))]
    files = [f for f in files if f != FUZZ_TEST] + [f for f in OTHER_GPU_FILES if (ROOT / f).exists()]
    if only:
        files = [f for f in files if any(f"test_{name}" in f for name in only)]
    return sorted(files, key=lambda f: -(ROOT / f).stat().st_size)


def run_logged(cmd: list[str], log: Path, timeout: float, env: dict[str, str] | None = None) -> tuple[int, str, bool]:
    """Run ``cmd`` from the repository root into ``log``; (exit status, output, whether it timed out)."""
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                                env=env).returncode
            timed_out = False
        except subprocess.TimeoutExpired:
            rc, timed_out = 124, True
    return rc, log.read_text(errors="replace"), timed_out


def pytest_cmd(path: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra",
            *extra, path]


def run_suite(files: list[str], logs: Path, jobs: int, timeout: float) -> list[FileResult]:
    def one(path: str) -> FileResult:
        start = time.perf_counter()
        log = logs / (Path(path).stem + ".log")
        rc, text, timed_out = run_logged(pytest_cmd(path), log, timeout)
        result = parse_pytest_log(path, text, rc, time.perf_counter() - start, timed_out)
        print(f"  {path}: {describe_counts(result)} in {result.seconds:.0f} s", flush=True)
        return result

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, files))


def describe_counts(result: FileResult) -> str:
    parts = [f"{v} {k}" for k, v in result.counts.items()] or [f"exit {result.rc}"]
    return ", ".join(parts) + (" (timed out)" if result.timed_out else "")


def corpus_command(args: argparse.Namespace, workers: int, arch: str) -> list[str]:
    return [sys.executable, "scripts/make_fuzz_corpus.py", "--count", str(args.fuzz_count), "--seed",
            str(args.fuzz_seed), "--out", str(args.fuzz_dir / "corpus.fir"), "--cubins", str(args.fuzz_dir / "cubin"),
            "--arch", arch, "--workers", str(workers)]


def fuzz_summary(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("fuzz:")]
    return lines[-1] if lines else "no fuzz summary line (see logs/fuzz.log)"


def sweep_lines(text: str) -> list[str]:
    keep = ("geometric mean", "cases at >=", "bandwidth-bound cases")
    return [line.strip() for line in text.splitlines() if any(k in line for k in keep)]


def device_arch() -> tuple[str, str]:
    """(``sm_XY``, the GPU's name and driver as nvidia-smi gives them)."""
    try:
        import cupy

        arch = "sm_" + cupy.cuda.Device().compute_capability
    except Exception as exc:  # no GPU: nothing here can run
        raise SystemExit(f"gpu_check: CuPy sees no GPU ({type(exc).__name__}: {exc})") from exc
    smi = shutil.which("nvidia-smi")
    name = ""
    if smi:
        query = ["--query-gpu=name,driver_version,memory.total,memory.free", "--format=csv,noheader"]
        name = subprocess.run([smi, *query], capture_output=True, text=True).stdout.strip()
    try:
        from fusec.codegen.nvrtc import nvrtc_version

        name += f", NVRTC {'.'.join(map(str, nvrtc_version()))}"
    except Exception as exc:  # the runtime will say the same when it compiles
        name += f", no NVRTC ({type(exc).__name__})"
    return arch, name


def git_commit() -> str:
    given = os.environ.get("FUSEC_GIT_COMMIT")
    if given:
        return given
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


class Report:
    """The summary so far and the logs: written into ``out`` after every stage (``summary.txt``,
    ``logs.tar.gz``), so that what ran comes back even when the call is cut short; ``deadline`` bounds the run."""

    def __init__(self, out: Path, logs: Path, title: str, budget: float):
        self.out, self.logs, self.title = out, logs, title
        self.started = time.perf_counter()
        self.deadline = self.started + budget
        self.stages: list[str] = []
        self.extra: list[str] = []  # the sweep's summary lines
        self.failed_tests: list[str] = []

    def left(self) -> float:
        """Seconds of the budget left."""
        return self.deadline - time.perf_counter()

    def timeout(self, wanted: float, reserve: float = 10) -> float | None:
        """A stage's timeout: ``wanted``, cut to the budget left (less ``reserve`` for writing this report);
        None when less than half a minute would be left for it (the stage is skipped)."""
        t = min(wanted, self.left() - reserve)
        return t if t >= 30 else None

    def skipped(self, what: str) -> None:
        self.stage(f"{what}: skipped, {max(self.left(), 0):.0f} s of the budget left")

    def stage(self, line: str) -> None:
        self.stages.append(line)
        print(line, flush=True)
        self.write()

    def lines(self) -> list[str]:
        return [f"== gpu_check summary: {self.title}, {time.perf_counter() - self.started:.0f} s in all",
                *self.stages, *self.extra, f"failed tests: {len(self.failed_tests)}",
                *(f"  {t}" for t in self.failed_tests)]

    def write(self) -> None:
        (self.out / "summary.txt").write_text("\n".join(self.lines()) + "\n")
        with tarfile.open(self.out / "logs.tar.gz", "w:gz") as tar:
            tar.add(self.logs, arcname="logs")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/fusec-gpu-check")))
    p.add_argument("--jobs", type=int, default=8, help="pytest processes at a time (default 8)")
    p.add_argument("--files", help="comma-separated names: only tests/gpu/test_<name>*.py (and no fuzzer unless "
                                   "'fuzz' is named)")
    p.add_argument("--file-timeout", type=float, default=300, help="seconds for one test file (default 300)")
    p.add_argument("--fuzz-count", type=int, default=5000)
    p.add_argument("--fuzz-seed", type=int, default=int(datetime.date.today().strftime("%Y%m%d")))
    p.add_argument("--fuzz-dir", type=Path, default=ROOT / ".fuzz")
    p.add_argument("--fuzz-time", type=float, default=150, help="seconds the fuzzer may run (default 150)")
    p.add_argument("--no-fuzz", action="store_true")
    p.add_argument("--no-bench", action="store_true")
    p.add_argument("--dask-bench", action="store_true", help="also benchmarks/dask_bench.py, default and --cluster")
    p.add_argument("--gemm-bench", action="store_true", help="also the GEMM suite: python -m benchmarks.gemm --quick")
    p.add_argument("--budget", type=float, default=450, help="seconds the whole run may take (default 450)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="fusec-gpu-check-logs-"))
    arch, gpu = device_arch()
    commit = git_commit()
    report = Report(out, logs, f"{gpu or arch}, fusec {commit}", args.budget)
    only = args.files.split(",") if args.files else None
    fuzz = not args.no_fuzz and (only is None or "fuzz" in only)
    print(f"gpu_check: {gpu or arch} ({arch}), fusec {commit}, {os.cpu_count()} CPUs, out {out}, "
          f"budget {args.budget:.0f} s", flush=True)

    corpus = None
    if fuzz:
        args.fuzz_dir.mkdir(parents=True, exist_ok=True)
        workers = max(2, (os.cpu_count() or 2) - args.jobs)
        corpus_log = open(logs / "fuzz_corpus.log", "w")
        corpus_start = time.perf_counter()
        corpus = subprocess.Popen(corpus_command(args, workers, arch), cwd=ROOT, stdout=corpus_log,
                                  stderr=subprocess.STDOUT)
        print(f"fuzz corpus: {args.fuzz_count} graphs, seed {args.fuzz_seed}, {workers} workers (background)",
              flush=True)

    files = gpu_test_files([n for n in only if n != "fuzz"] if only else None)
    print(f"GPU suite: {len(files)} files, {args.jobs} at a time", flush=True)
    suite_start = time.perf_counter()
    results = run_suite(files, logs, args.jobs, report.timeout(args.file_timeout) or 30)
    totals: dict[str, int] = {}
    for r in results:
        for k, v in r.counts.items():
            totals[k] = totals.get(k, 0) + v
    report.failed_tests = [line for r in results for line in r.failed]
    report.stage(f"GPU suite: {len(files)} files in {time.perf_counter() - suite_start:.0f} s: "
                 + ", ".join(f"{v} {k}" for k, v in sorted(totals.items())))

    fuzz_ok = True
    if corpus is not None:
        fuzz_ok = run_fuzzer(args, corpus, corpus_log, corpus_start, logs, out, report)
    else:
        report.stage("fuzzer: not run")

    bench_ok = True
    if not args.no_bench:
        bench_dir = out / "bench"
        bench_dir.mkdir(exist_ok=True)
        env = {**os.environ, "FUSEC_GIT_COMMIT": commit}
        for name, extra in (("perf", []), ("sweep", ["--suite", "sweep"])):
            cmd = [sys.executable, "benchmarks/run.py", "--quick", "--no-chart", "--out", str(bench_dir), *extra]
            ok, text = run_stage(report, f"benchmarks/run.py --quick {' '.join(extra)}".rstrip(), cmd,
                                 logs / f"bench_{name}.log", 300, env)
            bench_ok &= ok
            if name == "sweep":
                report.extra = sweep_lines(text)
    if args.dask_bench:
        for name, extra in (("dask", []), ("dask_cluster", ["--cluster"])):
            cmd = [sys.executable, "benchmarks/dask_bench.py", "--reps", "3", "--json", str(out / f"{name}_bench.json"),
                   *extra]
            ok, _ = run_stage(report, f"benchmarks/dask_bench.py --reps 3 {' '.join(extra)}".rstrip(), cmd,
                              logs / f"{name}_bench.log", 420, None)
            bench_ok &= ok
    if args.gemm_bench:
        ok, text = run_stage(report, "benchmarks.gemm --quick", gemm_bench_command(out), logs / "gemm_bench.log",
                             420, {**os.environ, "FUSEC_GIT_COMMIT": commit, "PYTHONPATH": str(ROOT)})
        report.extra += gemm_lines(text)
        bench_ok &= ok

    report.write()
    shutil.rmtree(logs)  # in logs.tar.gz
    print("\n".join(report.lines()), flush=True)
    return 0 if not report.failed_tests and fuzz_ok and bench_ok and all(r.ok for r in results) else 1


def gemm_bench_command(out: Path) -> list[str]:
    """The GEMM suite's quick run (issue 32), its JSON under ``out/bench``."""
    (out / "bench").mkdir(parents=True, exist_ok=True)
    return [sys.executable, "-m", "benchmarks.gemm", "--quick", "--out", str(out / "bench" / "gemm.json")]


def gemm_lines(text: str) -> list[str]:
    """The GEMM suite's verdict line (cases timed, refused, within the bound, ahead of the fastest peer)."""
    return [line.strip() for line in text.splitlines() if line.startswith("fusec: ") and "cases timed" in line][-1:]


def run_stage(report: Report, what: str, cmd: list[str], log: Path, wanted: float,
              env: dict[str, str] | None) -> tuple[bool, str]:
    """Run one benchmark stage within the budget (skipped, with a line, when it no longer fits): whether it exited
    0, and its output ("" when skipped)."""
    timeout = report.timeout(wanted)
    if timeout is None:
        report.skipped(what)
        return False, ""
    start = time.perf_counter()
    rc, text, timed_out = run_logged(cmd, log, timeout, env)
    report.stage(f"{what}: exit {rc} in {time.perf_counter() - start:.0f} s" + (" (timed out)" if timed_out else ""))
    return rc == 0, text


def run_fuzzer(args: argparse.Namespace, corpus: subprocess.Popen, corpus_log: Any, corpus_start: float, logs: Path,
               out: Path, report: Report) -> bool:
    """Wait for the corpus, then run the fuzzer over it (as the budget allows); whether it found nothing."""
    wait = report.timeout(600, reserve=40)
    try:
        corpus_rc = corpus.wait(timeout=wait or 1)
    except subprocess.TimeoutExpired:
        corpus.kill()
        corpus_rc = corpus.wait()
    corpus_log.close()
    built = f"corpus built in {time.perf_counter() - corpus_start:.0f} s (exit {corpus_rc})"
    if corpus_rc != 0:
        tail = " | ".join((logs / "fuzz_corpus.log").read_text(errors="replace").strip().splitlines()[-3:])
        report.stage(f"fuzzer: {built}: {tail[:300]}")
        return False
    timeout = report.timeout(args.fuzz_time + 120)
    if timeout is None:
        report.skipped(f"fuzzer ({built})")
        return False
    env = {**os.environ, "FUSEC_FUZZ_CORPUS": str(args.fuzz_dir / "corpus.fir"),
           "FUSEC_FUZZ_CUBINS": str(args.fuzz_dir / "cubin"),
           "FUSEC_FUZZ_TIME_LIMIT": str(min(args.fuzz_time, max(timeout - 60, 10))),
           "FUSEC_FUZZ_REPORT": str(out / "fuzz_report.txt")}
    start = time.perf_counter()
    rc, text, timed_out = run_logged(pytest_cmd(FUZZ_TEST, "-s"), logs / "fuzz.log", timeout, env)
    report.stage(f"fuzzer: {built}; run in {time.perf_counter() - start:.0f} s: {fuzz_summary(text)}"
                 + (" (timed out)" if timed_out else ""))
    return rc == 0 and not timed_out


if __name__ == "__main__":
    sys.exit(main())
