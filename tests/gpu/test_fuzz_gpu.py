"""The differential GPU fuzzer: thousands of random graphs (``tests/fuzz/corpus.py``) planned, run on the GPU
by ``fusec.runtime.launch.run_plan`` and compared exactly with the NumPy reference interpreter.

    python scripts/make_fuzz_corpus.py --count 5000 --out .fuzz/corpus.fir --cubins .fuzz/cubin   # on a CPU
    FUSEC_FUZZ_CORPUS=.fuzz/corpus.fir FUSEC_FUZZ_CUBINS=.fuzz/cubin pytest -m gpu -s tests/gpu/test_fuzz_gpu.py

Kernels come precompiled: ``FUSEC_FUZZ_CUBINS`` (a directory, or a ``.tar.xz``/``.tar.gz`` of one) becomes
``FUSEC_CUBIN_CACHE``, the NVRTC launcher's disk cache; without it, ``FUSEC_CUBIN_CACHE`` is used as it is,
and a ``$FUSEC_CUBIN_CACHE.tar.xz`` next to it is unpacked into it first. Kernels that NVRTC rejected
while precompiling (``failed.txt`` in the cache) are reported as compile failures without compiling again.
Without a corpus file, ``FUSEC_FUZZ_EXAMPLES`` graphs (default 200, seed ``FUSEC_FUZZ_SEED``, default a fresh one
per session: ``tests/fuzz/seed.py``) are generated on the spot and their kernels compiled here.

Each graph: fresh random inputs with special values (seed: crc32 of the graph's text, printed with every
failure), the NumPy interpreter as reference, ``run_plan`` with ``KernelLauncher(poison=True,
compiler="nvrtc")`` on CuPy copies (outputs filled with 0xAB bytes first, so an unwritten element shows);
every 5th graph again on non-contiguous views (transposed, every other element, reversed), and every 5th
(offset 2) with other schedules forced (``corpus.schedule_variants``: split cols, rows as cols, tiled,
inner vectors). Results must
match exactly: dtype, shape, bools byte for byte, integers, floats bit for bit with NaN matching NaN (a NaN's
sign and payload are free) and, only for outputs that carry a maximum/minimum-type result, 0.0 matching
-0.0 (which zero NumPy's maximum returns differs between its own loops). Every input buffer must be
unchanged. All failures are collected and printed at the end (grouped by cause; wrong values in full with
the graph, its plan, the seed and the first differing elements), then the line
``fuzz: N graphs, M kernels, K mismatches``; ``FUSEC_FUZZ_REPORT`` (default ``$OUT/fuzz_report.txt`` when
``OUT`` is set) gets the full report.

``FUSEC_FUZZ_LIMIT``: run only the first N graphs. ``FUSEC_FUZZ_TIME_LIMIT`` (seconds, default 70; 0: none):
start no graph after that, so that a wrapper's timeout never cuts the report off.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from tests.fuzz import corpus
from tests.fuzz.seed import SEED
from tests.helpers import GPU_ONLY

pytestmark = GPU_ONLY

ROOT = Path(__file__).resolve().parents[2]


def _cubin_dir(monkeypatch: pytest.MonkeyPatch) -> Path | None:
    """Point ``FUSEC_CUBIN_CACHE`` at the precompiled cubins (unpacking an archive); None when there are none."""
    given = os.environ.get("FUSEC_FUZZ_CUBINS")
    cache = os.environ.get("FUSEC_CUBIN_CACHE")
    path = Path(given) if given else (Path(cache) if cache else None)
    if path is None:
        return None
    if not path.is_absolute():
        path = ROOT / path
    archive = path if path.suffix in (".xz", ".gz") else None
    if archive is None:  # a packed cache next to the directory: unpacked into it (even when the directory
        # exists: other GPU tests may have created it with their own kernels first)
        archive = next((a for a in (path.with_name(path.name + ".tar.xz"), path.with_name(path.name + ".tar.gz"))
                        if a.is_file()), None)
    if archive is not None:
        target = Path(tempfile.mkdtemp(prefix="fusec-cubin-")) if path == archive else path
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            try:
                tar.extractall(target, filter="data")
            except TypeError:  # Python without extraction filters (< 3.10.12 / 3.11.4)
                tar.extractall(target)
        path = target
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(path))
    return path


def _known_failed(cubins: Path | None) -> dict[str, str]:
    failed: dict[str, str] = {}
    listing = cubins / "failed.txt" if cubins else None
    if listing and listing.is_file():
        for line in listing.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) >= 3:
                failed[parts[0]] = parts[2]
    return failed


def test_fuzz_corpus_matches_numpy_on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import cupy

    from fusec.runtime.cubin_cache import cubin_path as _cubin_path
    from fusec.runtime.launch import KernelLauncher, run_plan

    start = time.perf_counter()
    cubins = _cubin_dir(monkeypatch)
    path = Path(os.environ.get("FUSEC_FUZZ_CORPUS", ".fuzz/corpus.fir"))
    path = path if path.is_absolute() else ROOT / path
    if path.is_file():
        graphs = corpus.load(path)
        origin = f"corpus {path}"
    else:
        count, seed = int(os.environ.get("FUSEC_FUZZ_EXAMPLES", "200")), SEED
        graphs = corpus.generate(count, seed)
        origin = f"{count} graphs generated here (seed {seed}; no corpus at {path})"
    limit = int(os.environ.get("FUSEC_FUZZ_LIMIT", "0"))
    if limit:
        graphs = graphs[:limit]
    time_limit = float(os.environ.get("FUSEC_FUZZ_TIME_LIMIT", "70"))
    arch = "sm_" + cupy.cuda.Device().compute_capability
    known_failed = _known_failed(cubins)
    print(f"\nfuzzing {len(graphs)} graphs from {origin}; cubins {cubins or 'not precompiled'} "
          f"({len(known_failed)} known NVRTC failures); {arch}; loaded in {time.perf_counter() - start:.1f} s",
          flush=True)

    launcher = KernelLauncher(poison=True, compiler="nvrtc")
    result = corpus.run_corpus(
        graphs, cupy, lambda plan, arrays, schedules: run_plan(plan, arrays, launcher=launcher, schedules=schedules),
        to_host=lambda a: cupy.asnumpy(a) if isinstance(a, cupy.ndarray) else np.asarray(a),
        synchronize=cupy.cuda.runtime.deviceSynchronize,
        compiles=lambda: launcher.compiles,
        known_failed=known_failed, digest=lambda source: _cubin_path(source, arch).stem,
        time_limit=time_limit or None,
        on_failure=lambda f: print(f"  FAIL graph {f.index} ({f.kind}): {f.message.splitlines()[0][:160]}",
                                   flush=True) if f.kind != "compile" else None,
        progress=lambda line: print(line, flush=True),
    )
    report = result.report()
    summary = result.summary()
    target = os.environ.get("FUSEC_FUZZ_REPORT") or (
        str(Path(os.environ["OUT"]) / "fuzz_report.txt") if os.environ.get("OUT") else None)
    if target:
        try:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).write_text(report + "\n" + summary + "\n")
        except OSError as exc:
            print(f"could not write the report to {target}: {exc}")
            target = None
    if report:
        print(report if len(report) < 60_000 else report[:60_000] + f"\n... (cut; full report in {target})")
    print(summary, flush=True)
    if result.failures:
        pytest.fail(summary, pytrace=False)
