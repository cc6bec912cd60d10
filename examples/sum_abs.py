"""sum(|x|): a reduce-all region, the elementwise abs fused into the reduction's loads.

Unfused, CuPy reads x, writes |x|, and reads |x| again: 3 bytes moved per input byte; fused, one
kernel reads x once.
"""

import numpy as np

import fusec


@fusec.fuse
def sum_abs(x):
    return np.abs(x).sum()


def reference(x):
    return np.abs(x).sum()


def example_inputs(rng, large=False):
    n = 1 << 26 if large else 1 << 16
    return (rng.standard_normal(n, dtype=np.float32),)


if __name__ == "__main__":
    from _common import run_example

    run_example(sum_abs, reference, example_inputs, rtol=1e-4)
