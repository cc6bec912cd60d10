"""pytest's side of build-only mode (see :mod:`tests.gpu_build`): the options, switching the mode on before any
test module imports CuPy, the header and summary lines, what it collects (``tests/gpu/`` and the files of
:data:`tests.backends.FILES`, of which only the cases marked ``gpu`` run), the skips and the sample.

    pytest --gpu-build                          # every GPU case
    pytest --gpu-build --gpu-build-sample 0.2   # a seeded sample (seed printed; --gpu-build-seed N)

``FUSEC_GPU_BUILD=1``, ``FUSEC_GPU_BUILD_SAMPLE`` and ``FUSEC_GPU_BUILD_SEED`` do the same as the options.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests import backends
from tests.gpu_build import gpu_only

ROOT = Path(__file__).resolve().parents[2]
GPU_TESTS = ROOT / "tests" / "gpu"
# the test files with GPU cases: every file of tests/gpu, and the files whose tests run on both backends
BOTH_BACKENDS = frozenset(ROOT / path for path in backends.FILES)
_STATE: dict[str, Any] = {}  # enabled, seed, fraction, cache, sampled, collected, started


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fusec", "fusec's GPU tests without a GPU")
    group.addoption("--gpu-build", action="store_true", default=os.environ.get("FUSEC_GPU_BUILD") == "1",
                    help="build-only mode of tests/gpu on a machine without a GPU: every case planned, its kernels "
                         "generated and compiled with NVRTC for sm_90, launches checked and run by the reference "
                         "interpreter (env FUSEC_GPU_BUILD=1)")
    group.addoption("--gpu-build-sample", type=float, default=float(os.environ.get("FUSEC_GPU_BUILD_SAMPLE", "1")),
                    metavar="FRACTION", help="run a seeded sample of about FRACTION of each test function's cases "
                                             "(env FUSEC_GPU_BUILD_SAMPLE; default 1: all)")
    group.addoption("--gpu-build-seed", type=int, default=None, metavar="N",
                    help="the sample's seed (env FUSEC_GPU_BUILD_SEED; default: a random one, printed)")


def _gpu_present() -> tuple[bool, str]:
    """Whether the real CuPy sees a GPU, and if not why, asked in a child process (this one must not import the
    real CuPy); a probe that cannot tell is a usage error (the mode must never run where a GPU might be)."""
    probe = "from fusec.runtime.gpu import gpu_status; ok, why = gpu_status(); print(int(ok)); print(why)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    lines = done.stdout.splitlines()
    if done.returncode or not lines or lines[0] not in ("0", "1"):
        raise pytest.UsageError(f"--gpu-build: could not tell whether a GPU is here: {done.stderr.strip()[-500:]}")
    return lines[0] == "1", " ".join(lines[1:])


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("gpu_build"):
        return
    present, why = _gpu_present()
    if present:
        raise pytest.UsageError("--gpu-build (FUSEC_GPU_BUILD=1) is for machines without a GPU, and CuPy sees one "
                                "here: run the GPU tests for real with `pytest -m gpu tests/gpu`")
    from tests.gpu_build.mode import switch_on

    seed = config.getoption("gpu_build_seed")
    if seed is None:
        seed = int(os.environ.get("FUSEC_GPU_BUILD_SEED") or random.SystemRandom().randrange(1, 10**6))
    cache, own = os.environ.get("FUSEC_CUBIN_CACHE"), False
    if not cache:  # a fresh cache, removed at the end: every kernel this run launches is compiled in it
        cache, own = tempfile.mkdtemp(prefix="fusec-gpu-build-cubin-"), True
        os.environ["FUSEC_CUBIN_CACHE"] = cache
    switch_on()
    _STATE.update(enabled=True, seed=seed, fraction=config.getoption("gpu_build_sample"), cache=cache,
                  own_cache=own, why=why, started=time.perf_counter())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _STATE.get("own_cache"):
        shutil.rmtree(_STATE["cache"], ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not _STATE.get("enabled"):
        return []
    fraction = _STATE["fraction"]
    sample = "every case" if fraction >= 1 else (f"a sample of about {fraction:.0%} of each test function's cases "
                                                 f"(FUSEC_GPU_BUILD_SEED={_STATE['seed']})")
    from tests.gpu_build import contracts

    checks = ", ".join(check.__name__ for check in contracts.CHECKS)
    stated = "stated by fusec's recipes" if contracts.stated_by_fusec() else "none stated by fusec's recipes yet"
    return [f"fusec GPU BUILD-ONLY MODE (no GPU here: {_STATE['why'] or 'none found'}): CuPy is a host stand-in; "
            "kernels are generated and compiled with NVRTC for sm_90, each launch is checked against its arrays' "
            "layouts and run by the reference interpreter. NOT a GPU run.",
            f"build-only: the GPU cases only (tests/gpu and the CuPy halves of tests/backends.py's FILES), {sample}; "
            f"cubin cache {_STATE['cache']}; launch checks: {checks} "
            f"(launch contracts: {stated})"]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In build-only mode only the files with GPU cases are collected (the other tests use the real CuPy)."""
    if not _STATE.get("enabled") or collection_path.is_dir():
        return None
    path = collection_path.resolve()
    return GPU_TESTS not in path.parents and path not in BOTH_BACKENDS


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _STATE.get("enabled"):
        return
    from tests.gpu_build.sample import choose

    # of a file whose tests run on both backends, the CuPy half only (tests/gpu's files run whole, as before)
    cpu = {id(item) for item in items
           if item.get_closest_marker("gpu") is None and item.path.resolve() in BOTH_BACKENDS}
    if cpu:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in cpu])
        items[:] = [item for item in items if id(item) not in cpu]
    _STATE["collected"] = len(items)
    kept = choose(items, _STATE["fraction"], _STATE["seed"])
    if len(kept) < len(items):
        chosen = {id(item) for item in kept}
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
        items[:] = kept
    _STATE["sampled"] = len(items)
    files = {item.nodeid.split("::", 1)[0] for item in items}
    _STATE["whole"] = files >= {str(p.relative_to(ROOT)) for p in GPU_TESTS.glob("test_*.py")} | set(backends.FILES)
    for item in items:
        why = gpu_only.reason(gpu_only.NEEDS_GPU, item.nodeid)
        if why:
            item.add_marker(pytest.mark.skip(reason=f"build-only mode: {why}"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    if not _STATE.get("enabled"):
        yield
        return
    from tests.gpu_build.standin.cuda import RawLaunch

    outcome = yield
    why = gpu_only.reason(gpu_only.RAW_LAUNCHES, item.nodeid)
    excinfo = outcome.excinfo
    if why and excinfo is not None and issubclass(excinfo[0], RawLaunch):
        outcome.force_exception(pytest.skip.Exception(f"build-only mode: {why}", _use_item_location=True))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A sample of the whole of tests/gpu must have built kernels of every kind (else it fails, naming them)."""
    if not _STATE.get("enabled") or not _STATE.get("whole") or _STATE["fraction"] >= 1:
        return
    from tests.gpu_build import record

    _STATE["missing"] = record.missing_kinds()
    if _STATE["missing"] and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _STATE.get("enabled"):
        return
    from tests.gpu_build import record

    seconds = time.perf_counter() - _STATE["started"]
    reporter = terminalreporter
    reporter.section("fusec GPU build-only mode")
    reporter.line(f"{_STATE.get('sampled', 0)} of {_STATE.get('collected', 0)} GPU test cases run "
                  f"({'all' if _STATE['fraction'] >= 1 else 'seed ' + str(_STATE['seed'])}) in {seconds:.0f} s; "
                  + record.summary())
    if _STATE["fraction"] < 1:
        reporter.line(f"rerun this sample: FUSEC_GPU_BUILD_SEED={_STATE['seed']} pytest --gpu-build "
                      f"--gpu-build-sample {_STATE['fraction']}")
    if _STATE.get("missing"):
        reporter.line(f"FAILED: the sample built no kernel of kind {', '.join(_STATE['missing'])}", red=True)
