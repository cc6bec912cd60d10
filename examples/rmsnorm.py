"""RMS normalization over the last axis with a learned weight: x / sqrt(mean(x**2) + eps) * w.

A rows region: one reduction per row, then a pointwise epilogue that also reads the weight vector
``w`` (broadcast over the rows).
"""

import numpy as np

import fusec


@fusec.fuse
def rmsnorm(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def reference(x, w, eps=1e-6):
    rms = np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + eps)
    return x / rms * w


def example_inputs(rng, large=False):
    rows, cols = (8192, 4096) if large else (256, 512)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    return x, w


if __name__ == "__main__":
    from _common import run_example

    run_example(rmsnorm, reference, example_inputs, rtol=1e-4, atol=1e-5)
