"""Launch contracts on the GPU: every kernel kind (``tests/contract_cases.py``: vector loops, inner vectors,
register rows of exact and bucketed lengths, reduce-all, columns, scans, slices, joins, gathers, an in-place
update) on CuPy arrays 0, 1, 2 and 3 elements past a 256-byte aligned base, in float32, float16, float64 and bfloat16:
inputs, ``out=`` buffers and updated arguments at those offsets, outputs poisoned on the checked path, repeat calls
on the dispatch fast path, a runner built for aligned arrays handed misaligned ones, and Dask arrays whose chunks
start at odd offsets; every result against NumPy. Then the H100 run's Dask failure (fuzz graph 95, a vector store
of an output that does not move along the vector axis) on CuPy chunks. A misaligned launch would end the process's
CUDA context (``CUDA_ERROR_MISALIGNED_ADDRESS``): each test synchronizes so the failure is its own.

    pytest -m gpu tests/gpu/test_contracts_gpu.py -q

``tests/codegen/test_contract_kernels_compile.py`` renders and compiles with NVRTC, on the CPU, every kernel these
tests build (the same runs on the fake GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.contract_cases import CASE_NAMES, DASK_CASES, DTYPES, OFFSETS, Outcome, case, exercise, exercise_dask
from tests.helpers import GPU_ONLY, assert_matches_numpy, assert_reduction_matches_numpy, seed_of

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY

TOLERANCE = {"float16": (2e-3, 1e-3), "float32": (4e-6, 1e-5), "float64": (1e-12, 1e-12), "bfloat16": (2.0**-6, 1e-3)}
# sums of many 16-bit values: a few ULP of the largest result (4 ULP: float16's 2^-10, bfloat16's 2^-7)
SUM_ULPS = {"float16": 4e-3, "bfloat16": 4 * 2.0**-7}


def check(outcome: Outcome, dtype: str) -> None:
    got = cupy.asnumpy(outcome.got) if isinstance(outcome.got, cupy.ndarray) else np.asarray(outcome.got)
    want = outcome.want
    assert got.shape == want.shape and got.dtype == want.dtype, (outcome.what, got.shape, got.dtype)
    rtol, atol = TOLERANCE[dtype]
    if dtype in SUM_ULPS:
        atol = max(atol, SUM_ULPS[dtype] * float(np.abs(want.astype(np.float32)).max(initial=0)))
    try:
        assert_reduction_matches_numpy(got, want, outcome.reference, rtol=rtol, atol=atol)
    except AssertionError as exc:
        raise AssertionError(f"{outcome.what}: {exc}") from None


@pytest.mark.parametrize("elements", OFFSETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_contracts_gpu_offset_arrays_match_numpy(name, dtype, elements):
    for outcome in exercise(case(name), dtype, elements, cupy, seed_of("contracts gpu", name, dtype, elements)):
        check(outcome, dtype)
    cupy.cuda.Device().synchronize()  # a fault surfaces here, in this test


@pytest.mark.parametrize("elements", (1, 2, 3))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", DASK_CASES)
def test_contracts_gpu_dask_chunks_at_odd_offsets_match_numpy(name, dtype, elements):
    pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")
    for outcome in exercise_dask(case(name), dtype, elements, cupy, seed_of("contracts dask gpu", name, dtype)):
        check(outcome, dtype)
    cupy.cuda.Device().synchronize()


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_contracts_gpu_dask_output_broadcast_along_the_vector_axis(scheduler):
    """The H100 run's failing Dask graph (``tests/dask/test_dask_fake_gpu.py``) on CuPy chunks of one element: no
    misaligned store, the interpreter's results bit for bit."""
    dask = pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")
    import dask.array as da

    from fusec.dask import run_graph
    from fusec.ir.interpret import interpret
    from fusec.ir.text import parse
    from tests.dask.test_dask_fake_gpu import BROADCAST_OUTPUT

    graph = parse(BROADCAST_OUTPUT)
    inputs = [np.array(-9223372036854775807), np.array(0), np.array([[-3, 2071444159]], np.int32)]
    chunked = [da.from_array(cupy.asarray(a), chunks=c, asarray=False)
               for a, c in zip(inputs, [(), (), ((1,), (1, 1))])]
    got = dask.compute(*run_graph(graph, chunked), scheduler=scheduler)
    cupy.cuda.Device().synchronize()
    for g, w in zip(got, interpret(graph, inputs)):
        assert_matches_numpy(cupy.asnumpy(g) if isinstance(g, cupy.ndarray) else np.asarray(g), w, exact=True)


@pytest.mark.parametrize("elements", (1, 2, 3))
@pytest.mark.parametrize("name", ["axpy", "scale_shift", "softmax", "sum_abs"])
def test_contracts_gpu_torch_tensors_at_odd_offsets_match_numpy(name, elements):
    """Torch tensors (taken as CuPy views through DLPack, ``fusec/frontend/foreign.py``) starting 1, 2, 3 elements
    past an
    aligned address: the same contracts, checked on the same paths."""
    torch = pytest.importorskip("torch")
    import fusec

    c = case(name)
    host = c.arguments(np.random.default_rng(seed_of("contracts torch", name, elements)), "float32")
    tensors = []
    for a in host:
        flat = torch.empty(a.size + 128, dtype=torch.float32, device="cuda")
        start = (-flat.data_ptr() % 256) // 4 + elements
        tensor = flat[start:start + a.size].view(a.shape)
        tensor.copy_(torch.from_numpy(a))
        tensors.append(tensor)
    with np.errstate(all="ignore"):
        want = np.asarray(c.fn(*[a.copy() for a in host]))
        reference = np.asarray(c.fn(*[a.astype(np.float64) for a in host]))
    fused = fusec.fuse(c.fn)
    for call in range(3):  # the checked path, then the fast path
        got = fused(*tensors)
        torch.cuda.synchronize()
        check(Outcome(f"torch call {call}", cupy.asarray(got), want, reference), "float32")
