"""The Dask path's CuPy side on the CPU (``tests/fake_cupy.py``: fusec's launcher, dispatch fast path and block
programs for real, kernels run by the interpreter, every launch's vector addresses checked as a GPU would fault on
them), and the H100 run's ``CUDA_ERROR_MISALIGNED_ADDRESS`` (shared/gpu-runs/2026-12-07-h100) reproduced.

That run's Dask fuzz graph 95 (``corpus.generate(200, seed=20)`` under Hypothesis 6.155) returns
``expand_dims(z)`` beside a value over one more axis, and the passes put both in one pointwise kernel whose space
is the larger: ``out0`` (``i32[1,2,1,1]``) does not move along the kernel's innermost axis (2 elements). The
``inner_vector`` schedule wrote every store as a vector, ``out0``'s too: thread 1 stored 8 bytes at ``out0 + 4``
(compute-sanitizer: ``k0_pointwise_sub_cast``, thread (1,0,0), an 8-byte write 4 bytes into a 512-byte
allocation), and the lanes were not the output's elements. The schedule now refuses vectors for a store that does
not step by one element along their axis (:func:`fusec.kinds.pointwise.inner_vector_misfit`, and in general
:func:`fusec.schedule.contract.offset_problem`).
"""

from __future__ import annotations

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")

import dask.array as da  # noqa: E402

from fusec.ir.interpret import interpret  # noqa: E402
from fusec.ir.text import parse  # noqa: E402
from tests.fake_cupy import fake_gpu, to_device  # noqa: E402

# the failing graph of the H100 run, as the fuzz corpus drew it
BROADCAST_OUTPUT = """
func @fuzz95_updates(%x: i64[], %y: i64[], %z: i32[1,2]) -> (i64[1,1,1,2,1,2], i32[1,2,1,1], i64[]) {
  %0 = cast %y : bool[]
  %1 = where %0, %z, %z : i32[1,2]
  %2 = sub %1, %1 : i32[1,2]
  %3 = cast %2 : i64[1,2]
  %4 = expand_dims %1 {axes=[2, 3]} : i32[1,2,1,1]
  %5 = cast %4 : i64[1,2,1,1]
  %6 = sub %3, %5 : i64[1,2,1,2]
  %7 = expand_dims %6 {axes=[1, 2]} : i64[1,1,1,2,1,2]
  return %7, %4, %x
}
"""


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_dask_fake_gpu_output_broadcast_along_the_vector_axis_is_stored_without_vectors(monkeypatch, scheduler):
    from fusec.dask import run_graph

    graph = parse(BROADCAST_OUTPUT)
    inputs = [np.array(-9223372036854775807), np.array(0), np.array([[-3, 2071444159]], np.int32)]
    want = interpret(graph, inputs)
    with fake_gpu(monkeypatch) as gpu:
        chunked = [da.from_array(to_device(a), chunks=c, asarray=False)
                   for a, c in zip(inputs, [(), (), ((1,), (1, 1))])]
        got = dask.compute(*run_graph(graph, chunked), scheduler=scheduler)
    assert any(launch.kernel.startswith("k0_pointwise_sub_cast") for launch in gpu.launches)
    assert not gpu.mislaunched, "\n".join(launch.problem for launch in gpu.mislaunched)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.ndarray), w)


def test_dask_fake_gpu_broadcast_output_kernel_refuses_inner_vector_with_the_reason():
    from fusec.kinds import analyze, choose, resolve
    from fusec.runtime.plan import make_plan
    from fusec.schedule import ScheduleError

    plan = make_plan(parse(BROADCAST_OUTPUT))
    region = plan.kernels[0].region
    nest = analyze(region, {})
    assert getattr(choose(nest), "vec", 1) == 1
    with pytest.raises(ScheduleError, match="out0 steps by 0 along the innermost axis"):
        resolve(nest, "pointwise:inner_vector,vec=2")


def test_dask_fake_gpu_fuzz_graphs_launch_every_kernel_as_built(monkeypatch):
    """A slice of the Dask fuzz corpus through the CuPy path on the fake GPU: results bit for bit the
    interpreter's, and no launch on arrays its kernel's vector accesses are not aligned for."""
    from tests.dask.chunkings import fuzz_run
    from tests.fuzz import corpus

    graphs = corpus.generate(60, seed=20)
    with fake_gpu(monkeypatch) as gpu:
        def chunk(a, chunks):
            return da.from_array(to_device(a), chunks=chunks, asarray=False)

        failures, ran = fuzz_run(graphs, chunk, lambda i, lazy: dask.compute(*lazy, scheduler="threads"),
                                 host=lambda x: np.asarray(x).view(np.ndarray))
    assert not failures, "\n\n".join(failures[:3])
    assert len(ran) >= 40 and gpu.launches
    assert not gpu.mislaunched, "\n".join(launch.problem for launch in gpu.mislaunched[:5])
