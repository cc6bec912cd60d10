"""GELU, tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))).

A pointwise region: every op reads and writes one element, so the whole expression becomes one
kernel that reads x once and writes y once. Written with CuPy names (``cp.tanh``); fusec traces
them the same way as NumPy's.
"""

import math

import numpy as np

try:
    import cupy as cp
except ImportError:  # no CuPy: NumPy has the same names, and fusec traces either
    import numpy as cp

import fusec

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@fusec.fuse
def gelu(x):
    return 0.5 * x * (1.0 + cp.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def reference(x):
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def example_inputs(rng, large=False):
    shape = (8192, 8192) if large else (256, 512)
    return (rng.standard_normal(shape, dtype=np.float32),)


if __name__ == "__main__":
    from _common import run_example

    run_example(gelu, reference, example_inputs)
