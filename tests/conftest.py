"""Shared pytest setup: a hypothesis profile that keeps the suite fast, a seeded ``rng``, GPU tests skipped without a
GPU, and the build-only mode of the GPU tests (``--gpu-build``: :mod:`tests.gpu_build`).

Nothing here imports ``tests.helpers`` (or CuPy) at import time: build-only mode puts its CuPy stand-in in place
in ``pytest_configure``, before anything imports CuPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ("tests.gpu_build.plugin",)

settings.register_profile("fusec", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fusec")


def pytest_report_header(config: pytest.Config) -> str:
    from tests.fuzz.seed import SEED

    return f"fuzz graphs: FUSEC_FUZZ_SEED={SEED} (tests/fuzz/seed.py: set it to draw the same graphs again)"


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A generator seeded from the test's id, so every test gets its own reproducible data."""
    from tests.helpers import seed_of

    return np.random.default_rng(seed_of(request.node.nodeid))


# --- `gpu` tests: skipped, with the reason, where CuPy sees no CUDA device ----------------------



def cuda_gpu_present() -> bool:
    """True when CuPy imports and sees at least one CUDA device; never raises (no CuPy, no driver,
    a driver too old for this CuPy all mean False)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.helpers import GPU_SKIP_REASON

    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and not cuda_gpu_present():
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=GPU_SKIP_REASON))
