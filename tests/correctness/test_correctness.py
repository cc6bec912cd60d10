"""Every item of CORRECTNESS.md (``tests/correctness/cases.py``) through ``fusec.fuse`` against NumPy eager on the
same data: on the NumPy backend; and on the GPU (``pytest -m gpu``; skipped where CuPy sees no GPU) with CuPy
arguments, first with a launcher that poisons its outputs (an element a kernel never writes shows up), then twice
with a plain one (the second call takes the dispatch fast path), every kernel compiled up front in parallel
processes. Inputs must be unchanged, ``out=`` (also overlapping an input) as NumPy does it. And every kernel the
NumPy backend's calls plan compiled with NVRTC (no GPU needed).

Cases with more than 2**31 elements do not run here (their data would not fit a CI machine): their kernels
are planned from ArraySpecs, must use 64-bit indexing and must compile; on the GPU
``tests/gpu/test_correctness_gpu.py`` runs them against CuPy eager.
"""

from __future__ import annotations

import numpy as np
import pytest

from fusec.codegen.nvrtc import CompileError, compile_cubin
from fusec.codegen.render import render_kernel, render_module
from fusec.runtime import launch as runtime
from tests.backends import on_backends
from tests.correctness.cases import CASES, Case
from tests.correctness.check import kernel_specs, rng_of, run_case

SMALL = [c for c in CASES if not c.large]
LARGE = [c for c in CASES if c.large]
KERNELS_PER_MODULE = 40


@pytest.fixture(scope="module")
def gpu_launchers() -> tuple[runtime.KernelLauncher, runtime.KernelLauncher]:
    """A poisoning and a plain launcher, every case's kernels compiled up front (in parallel processes)."""
    import cupy

    arch = "sm_" + cupy.cuda.Device().compute_capability
    sources = []
    for case in SMALL:
        if case.raises is None:
            sources += [render_kernel(s) for s in kernel_specs(case.fn, case.make(cupy, rng_of(case)).args)]
    runtime.precompile(sources, arch)
    return runtime.KernelLauncher(poison=True), runtime.KernelLauncher()


@pytest.mark.parametrize("backend, case", on_backends(numpy=SMALL, cupy=SMALL, ids=lambda c: c.id))
def test_case_matches_numpy(backend, case: Case, request: pytest.FixtureRequest,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    if not backend.gpu:
        run_case(case, np, np.asarray)
        return
    poisoned, plain = request.getfixturevalue("gpu_launchers")
    monkeypatch.setattr(runtime, "_DEFAULT", poisoned)
    cupy = backend.xp
    run_case(case, cupy, cupy.asnumpy)
    monkeypatch.setattr(runtime, "_DEFAULT", plain)
    run_case(case, cupy, cupy.asnumpy, repeat=2)


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
