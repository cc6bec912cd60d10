"""Every item of CORRECTNESS.md (``tests/correctness/cases.py``) on the CPU: through ``fusec.fuse`` on the
NumPy backend against NumPy eager, and every kernel those calls plan compiled with NVRTC (no GPU needed).
The same cases run on the GPU in ``tests/gpu/test_correctness_gpu.py``.

Cases with more than 2**31 elements do not run here (their data would not fit a CI machine): their kernels
are planned from ArraySpecs, must use 64-bit indexing and must compile.
"""

from __future__ import annotations

import numpy as np
import pytest

from fusec.codegen.nvrtc import CompileError, compile_cubin
from fusec.codegen.render import render_kernel, render_module
from tests.correctness.cases import CASES, Case
from tests.correctness.check import kernel_specs, rng_of, run_case

SMALL = [c for c in CASES if not c.large]
LARGE = [c for c in CASES if c.large]
KERNELS_PER_MODULE = 40


@pytest.mark.parametrize("case", SMALL, ids=[c.id for c in SMALL])
def test_numpy_backend_matches_numpy(case: Case) -> None:
    run_case(case, np, np.asarray)


@pytest.mark.parametrize("case", LARGE, ids=[c.id for c in LARGE])
def test_large_case_plans_64_bit_indexing(case: Case) -> None:
    specs = kernel_specs(case.fn, case.specs)
    assert specs, "no kernel planned"
    for spec in specs:
        assert spec.index_ctype == "long long", f"{spec.name} indexes with {spec.index_ctype}"
        assert spec.launch.grid(132 * 16) > 0


def test_every_case_kernel_compiles_with_nvrtc() -> None:
    """The kernels of every case (the calls the NumPy backend test makes, and the large cases' specs),
    renamed per case and compiled 40 to a module for sm_90; a failing module is compiled kernel by kernel
    to name the cases."""
    specs = []
    for index, case in enumerate(CASES):
        if case.raises is not None:
            continue
        args = case.specs if case.large else case.make(np, rng_of(case)).args
        specs += [(case, spec) for spec in kernel_specs(case.fn, args, prefix=f"c{index}")]
    assert len(specs) > len(CASES)
    failures = []
    for k in range(0, len(specs), KERNELS_PER_MODULE):
        chunk = specs[k:k + KERNELS_PER_MODULE]
        try:
            compile_cubin(render_module([spec for _, spec in chunk]), "sm_90")
        except CompileError:
            for case, spec in chunk:
                try:
                    compile_cubin(render_kernel(spec), "sm_90")
                except CompileError as exc:
                    first = next((ln for ln in str(exc).splitlines() if "error" in ln), str(exc)[:200])
                    failures.append(f"{case.id}: kernel {spec.name}: {first.strip()}")
    assert not failures, "\n".join(failures)
