"""The in-place program fuzzer on the GPU: ``tests/fuzz/inplace_programs.py``'s random programs (copies, views,
assignments and augmented assignments to parts of arguments, intermediates and views) through ``fusec.fuse`` with
CuPy arguments, against NumPy on the same inputs: the results and what each argument holds afterwards, with
every kernel's outputs poisoned before its launch: ``pytest -m gpu -s tests/gpu/test_inplace_fuzz_gpu.py``
(skipped where CuPy sees no GPU). ``FUSEC_INPLACE_FUZZ_COUNT`` programs (default 300) of seed
``FUSEC_INPLACE_FUZZ_SEED`` (default 0); a failure reproduces on the CPU first with ``python -m
tests.fuzz.inplace_programs --seed S --show I``.
"""

from __future__ import annotations

import os

import pytest

import fusec.runtime.launch
from fusec.runtime.launch import KernelLauncher
from tests.fuzz import inplace_programs
from tests.helpers import GPU_ONLY

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

COUNT = int(os.environ.get("FUSEC_INPLACE_FUZZ_COUNT", "300"))
SEED = int(os.environ.get("FUSEC_INPLACE_FUZZ_SEED", "0"))


@pytest.fixture(autouse=True)
def _poisoned_outputs(monkeypatch):
    monkeypatch.setattr(fusec.runtime.launch, "_DEFAULT", KernelLauncher(poison=True))


def test_inplace_programs_match_numpy_on_the_gpu() -> None:
    summary = inplace_programs.run_programs(COUNT, SEED, xp=cupy)
    print(f"\n{summary.line()} on the GPU (FUSEC_INPLACE_FUZZ_COUNT, FUSEC_INPLACE_FUZZ_SEED)")
    assert not summary.failures, summary.report(limit=10)
