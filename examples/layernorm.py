"""Layer normalization over the last axis, without the affine part: (x - mean) / sqrt(var + eps).

A rows region with two reductions per row (the mean, then the mean of squared deviations) and a
pointwise epilogue. ``eps`` is a Python float: fusec bakes it into the kernel as a constant.
"""

import numpy as np

import fusec


@fusec.fuse
def layernorm(x, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


def reference(x, eps=1e-5):
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps)


def example_inputs(rng, large=False):
    shape = (8192, 4096) if large else (256, 512)
    return (rng.standard_normal(shape, dtype=np.float32) * 3 + 1,)


if __name__ == "__main__":
    from _common import run_example

    run_example(layernorm, reference, example_inputs, rtol=1e-4, atol=1e-5)
