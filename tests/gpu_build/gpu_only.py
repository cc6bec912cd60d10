"""The GPU tests that build-only mode does not run to the end, each with its reason (the plugin skips them with it).

``NEEDS_GPU``: skipped before they start: what they check is what only a GPU does (timings, the driver-level fast
path, worker processes that import the real CuPy, more host memory than a CI machine has).

``RAW_LAUNCHES``: run up to their first launch of a hand-written kernel (``cupy.RawModule``, ``Module.load``) and
skipped there: their modules are compiled for sm_90 by then, which is what build-only mode checks of them; the
stand-in runs only fusec's own kernels. Anywhere else a raw launch fails the test.

A key is a test file, or a file and a test function (every parametrized case of it).
"""

from __future__ import annotations

NEEDS_GPU = {
    "tests/gpu/test_dispatch_gpu.py": "the dispatch fast path (pre-packed driver launches, recycled outputs, "
                                      "streams) needs a GPU; build-only mode takes the checked path",
    "tests/gpu/test_autotune_gpu.py::test_gpu_autotune_times_candidates_then_reuses_the_winner":
        "autotuning times its candidates with CUDA events",
    "tests/gpu/test_autotune_gpu.py::test_gpu_autotune_second_process_times_nothing":
        "autotuning times its candidates, and the second process imports the real CuPy",
    "tests/gpu/test_autotune_gpu.py::test_gpu_autotune_explain_shows_the_winner_after_a_call":
        "autotuning times its candidates with CUDA events",
    "tests/gpu/test_dask_gpu.py::test_dask_gpu_two_worker_processes_on_one_gpu":
        "Dask's worker processes import the real CuPy",
    "tests/gpu/test_dask_gpu.py::test_dask_gpu_local_cuda_cluster": "dask-cuda's cluster needs GPUs",
    "tests/gpu/test_correctness_gpu.py::test_gpu_large_case_matches_cupy":
        "more than 2**31 elements, compared with CuPy eager: GiBs of host memory and no CuPy to compare with",
    "tests/gpu/test_kernels_gpu.py::test_gpu_pointwise_beyond_int32": "2**31 elements: GiBs of host memory",
    "tests/gpu/test_kernels_gpu.py::test_gpu_reduction_beyond_int32": "2**31 elements: GiBs of host memory",
}

_HAND_WRITTEN = "launches hand-written kernels (compiled for sm_90 before this point), which only a GPU runs"
RAW_LAUNCHES = {
    "tests/gpu/test_cuda_ops_gpu.py": _HAND_WRITTEN,
    "tests/gpu/test_division_gpu.py::test_gpu_div_invariant_matches_ieee_division_on_significand_pairs": _HAND_WRITTEN,
}


def reason(table: dict[str, str], nodeid: str) -> str | None:
    """The reason ``table`` gives for the test ``nodeid``, if any key covers it."""
    path, _, rest = nodeid.partition("::")
    function = rest.split("[", 1)[0]
    return table.get(f"{path}::{function}") or table.get(path)
