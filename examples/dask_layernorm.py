"""Layernorm over rows on Dask arrays: the same ``@fusec.fuse`` function, given a Dask array, returns a
lazy Dask array whose per-chunk work is fused.

The rows here are split across chunks (each row spans 4 column chunks), so the mean and the variance are
reductions over chunked rows: fusec turns them into per-chunk partials (sum, M2, count) read in one pass,
Dask's tree combine (Chan's merge), and one fused epilogue per chunk (``explain`` prints the stages and the
bytes each moves). Runs on a laptop CPU
(NumPy chunks: the reference backend, Dask's threaded scheduler) and unchanged on GPUs: with CuPy and a
GPU the chunks are CuPy arrays and each task runs fused CUDA kernels, on a ``dask_cuda.LocalCUDACluster``
(one worker per GPU) when ``dask-cuda`` is installed. Needs ``pip install 'fusec[dask]'``.
"""

import sys

import numpy as np

import fusec


@fusec.fuse
def dask_layernorm(x, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


def reference(x, eps=1e-5):
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps)


def example_inputs(rng, large=False):
    shape = (1 << 16, 4096) if large else (2048, 1024)
    return (rng.standard_normal(shape, dtype=np.float32) * 3 + 1,)


def main() -> int:
    try:
        import dask
        import dask.array as da
    except ImportError:
        print("Dask is not installed: pip install 'fusec[dask]'")
        return 0
    from _common import gpu_available, matches

    gpu = gpu_available()
    (x,) = example_inputs(np.random.default_rng(0), large=gpu)
    rows, cols = x.shape
    dx = da.from_array(x, chunks=(rows // 8, cols // 4))  # 8 x 4 chunks: every row spans 4 chunks
    cluster = None
    if gpu:
        import cupy

        dx = dx.map_blocks(cupy.asarray)
        try:
            from dask_cuda import LocalCUDACluster
            from distributed import Client

            cluster = LocalCUDACluster()
            client = Client(cluster)
            print(f"dask-cuda: {len(client.scheduler_info()['workers'])} worker(s), one per GPU")
        except ImportError:
            print("dask-cuda is not installed: Dask's threaded scheduler on the current GPU")
    y = dask_layernorm(dx)
    print(dask_layernorm.explain(dx))
    with dask.config.set(scheduler="threads") if cluster is None else _nothing():
        got = y.compute()
    if gpu:
        got = cupy.asnumpy(got)
    ok = matches(got, reference(x), rtol=1e-4, atol=1e-5)
    print(f"dask_layernorm(float32{list(x.shape)}) on Dask, {'CuPy' if gpu else 'NumPy'} chunks: "
          f"{'matches NumPy' if ok else 'DIFFERS from NumPy'}")
    print(f"result checked against NumPy: {'OK' if ok else 'FAILED'}")
    if cluster is not None:
        cluster.close()
    return 0 if ok else 1


def _nothing():
    import contextlib

    return contextlib.nullcontext()


if __name__ == "__main__":
    sys.exit(main())
