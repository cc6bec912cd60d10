"""Softmax over each row: exp(x - max) / sum(exp(x - max)), max and sum over the last axis.

A rows region: two reductions over the row and an epilogue that broadcasts them back over it, in
one kernel that keeps the row on chip.
"""

import numpy as np

import fusec


@fusec.fuse
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def reference(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def example_inputs(rng, large=False):
    shape = (8192, 8192) if large else (256, 512)
    return (rng.standard_normal(shape, dtype=np.float32),)


if __name__ == "__main__":
    from _common import run_example

    run_example(softmax, reference, example_inputs)
