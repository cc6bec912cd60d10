"""Launch contracts through the runtime, on the CPU's fake GPU (``tests/fake_cupy.py``: fusec's launcher, recipes,
dispatch runners and Dask path for real; kernels run by the interpreter; every launch's vector addresses checked
as the GPU would fault on them).

Every case of ``tests/contract_cases.py`` runs on arguments 0, 1, 2 and 3 elements past an aligned base (inputs,
``out=`` buffers, arguments updated in place, Dask chunks at odd offsets) with NumPy's results and no launch a GPU
would fault on. And a keying bug is simulated: a recipe or a runner built for aligned arrays, handed misaligned
ones, checks its contract, does not launch, and runs a kernel built for them instead.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.runtime import launch as runtime
from fusec.schedule.contract import ContractViolation
from tests.contract_cases import (
    CASE_NAMES,
    DASK_CASES,
    DTYPES,
    OFFSETS,
    Outcome,
    case,
    exercise,
    exercise_dask,
    offset_copy,
)
from tests.fake_cupy import fake_gpu, fresh
from tests.helpers import assert_reduction_matches_numpy, seed_of

# bfloat16: two ULP (2^-6), as float16's 2e-3 is two of its ULP
TOLERANCE = {"float16": (2e-3, 2e-3), "float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12),
             "bfloat16": (2.0**-6, 2.0**-6)}


def _device(a: np.ndarray, elements: int):
    import cupy  # the fake, inside fake_gpu

    return offset_copy(a, elements, cupy, fresh)


def _host(x):
    return np.array(x).view(np.ndarray) if isinstance(x, np.ndarray) else np.asarray(x)


def _compare(outcome, dtype):
    """A result against NumPy's (the fake GPU runs NumPy's interpreter: only summation order differs, on Dask)."""
    rtol, atol = TOLERANCE[dtype]
    try:
        assert_reduction_matches_numpy(_host(outcome.got), outcome.want, outcome.reference, rtol=rtol, atol=atol)
    except AssertionError as exc:
        raise AssertionError(f"{outcome.what}: {exc}") from None


@pytest.mark.parametrize("elements", OFFSETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_contracts_fake_gpu_offset_arguments_outputs_and_updates_match_numpy(monkeypatch, name, dtype, elements):
    """The GPU test's runs (:func:`tests.contract_cases.exercise`: checked path with poisoned outputs, ``out=``,
    in-place updates, fast path, a runner built for aligned arrays) on the fake GPU."""
    with fake_gpu(monkeypatch) as gpu:
        import cupy  # the fake

        for outcome in exercise(case(name), dtype, elements, cupy, seed_of("contracts gpu", name, dtype, elements)):
            _compare(outcome, dtype)
    assert gpu.launches
    assert not gpu.mislaunched, "\n".join(launch.problem for launch in gpu.mislaunched[:5])


@pytest.mark.parametrize("name", ["axpy", "scale_shift", "sum_abs", "softmax", "softmax_bucket", "sliced"])
def test_contracts_fake_gpu_runner_built_for_aligned_arrays_takes_the_checked_path_for_misaligned_ones(
        monkeypatch, name):
    """The dispatch fast path: a runner built for aligned arguments, called with arguments 1 element off (as a
    cache keyed wrongly would), tests their pointers against its kernels' contracts, launches nothing, and runs
    the checked path, whose kernels are built for them."""
    c = case(name)
    host = c.arguments(np.random.default_rng(seed_of("runner", name)), "float32")
    with np.errstate(all="ignore"):
        want = np.asarray(c.fn(*[a.copy() for a in host]))
    with fake_gpu(monkeypatch) as gpu:
        aligned = [_device(a, 0) for a in host]
        plan = fusec.fuse(c.fn).plan(*aligned)
        runner = runtime.default_launcher().plan_runner(plan, aligned, structure="single")
        assert runner is not None and any(step.masks and any(step.masks) for step in runner.steps)
        _compare(Outcome("aligned", runner.run(tuple(aligned)), want, want), "float32")
        fast = [launch for launch in gpu.launches if launch.path == "driver"]
        assert fast and not gpu.mislaunched
        shifted = [_device(a, 1) for a in host]
        before = len(gpu.launches)
        _compare(Outcome("misaligned", runner.run(tuple(shifted)), want, want), "float32")
        assert all(launch.path == "function" for launch in gpu.launches[before:])  # the checked path ran
    assert not gpu.mislaunched, "\n".join(launch.problem for launch in gpu.mislaunched[:5])


@pytest.mark.parametrize("name", ["axpy", "scale_shift", "softmax", "sum_abs"])
def test_contracts_fake_gpu_recipe_found_for_other_arrays_is_not_launched(monkeypatch, caplog, name):
    """The checked path: a launcher whose recipe cache hands back the recipe of aligned arrays for misaligned ones
    (a keying bug) raises no fault: the contract check refuses the launch, a recipe built for the arrays at hand
    runs, and the ``fusec.recompile`` log says so."""
    c = case(name)
    host = c.arguments(np.random.default_rng(seed_of("recipe", name)), "float32")
    with np.errstate(all="ignore"):
        want = np.asarray(c.fn(*[a.copy() for a in host]))
    with fake_gpu(monkeypatch) as gpu:
        launcher = runtime.default_launcher()
        aligned = [_device(a, 0) for a in host]
        plan = fusec.fuse(c.fn).plan(*aligned)
        runtime.run_plan(plan, aligned, launcher=launcher)
        region = plan.kernels[0].region
        wrong = launcher.recipes(region)[0]
        shifted = [_device(a, 1) for a in host]
        outs = [fresh(shape, dtype) for shape, dtype in wrong.outputs]
        if wrong.contract.aligned:
            with pytest.raises(ContractViolation, match="aligned, the kernel needs"):
                launcher._launch(wrong, shifted, outs)
        real = launcher.cached_recipe
        monkeypatch.setattr(launcher, "cached_recipe", lambda region, arrays, *a, **k: (
            wrong if region is wrong_region else real(region, arrays, *a, **k)))
        wrong_region = region
        fusec.set_logs("recompile")
        try:
            got = runtime.run_plan(plan, shifted, launcher=launcher)
        finally:
            fusec.set_logs("")
        _compare(Outcome("recipe of other arrays", got[0], want, want), "float32")
    assert not gpu.mislaunched, "\n".join(launch.problem for launch in gpu.mislaunched[:5])


@pytest.mark.parametrize("elements", (1, 3))
@pytest.mark.parametrize("name", DASK_CASES)
def test_contracts_fake_gpu_dask_chunks_at_odd_offsets_match_numpy(monkeypatch, name, elements):
    pytest.importorskip("dask")
    with fake_gpu(monkeypatch) as gpu:
        import cupy  # the fake

        for outcome in exercise_dask(case(name), "float32", elements, cupy, seed_of("contracts dask", name)):
            _compare(outcome, "float32")
    assert not gpu.mislaunched, "\n".join(launch.problem for launch in gpu.mislaunched[:5])


@pytest.mark.parametrize("elements", (0, 1))
def test_contracts_fake_gpu_poisoning_leaves_an_argument_updated_in_place_alone(monkeypatch, elements):
    """A launcher that poisons outputs (the GPU tests' and the fuzzers') must not poison an output that is an input
    too: ``a[...] -= 4`` and ``a *= b[::-1]`` update ``a`` element by element in place, reading each element they
    overwrite (poisoned first, they read the poison: what CI's build-only run of the in-place fuzzer found)."""

    def f(a, b):
        a[...] -= 4.0
        a *= b[::-1]
        return a

    rng = np.random.default_rng(seed_of("poison in place", elements))
    host = [rng.standard_normal(37).astype(np.float32) for _ in range(2)]
    want = f(*[a.copy() for a in host])
    with fake_gpu(monkeypatch) as gpu:
        monkeypatch.setattr(runtime, "_DEFAULT", runtime.KernelLauncher(poison=True))
        args = [_device(a, elements) for a in host]
        got = fusec.fuse(f)(*args)
        np.testing.assert_array_equal(_host(got), want)
        np.testing.assert_array_equal(_host(args[0]), want)
        np.testing.assert_array_equal(_host(args[1]), host[1])
    assert gpu.launches and not gpu.mislaunched
