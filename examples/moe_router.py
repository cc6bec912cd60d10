"""Mixture-of-experts top-1 router: softmax over the experts of each token, then the top
probability (max) and the chosen expert (argmax).

A rows region with three reductions per row (max, sum, argmax) and two outputs of different dtypes
(float32 probabilities, int64 expert indices). Written with CuPy names.
"""

import numpy as np

try:
    import cupy as cp
except ImportError:  # no CuPy: NumPy has the same names, and fusec traces either
    import numpy as cp

import fusec


@fusec.fuse
def moe_router(logits):
    e = cp.exp(logits - logits.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    return probs.max(axis=-1), probs.argmax(axis=-1)


def reference(logits):
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    return probs.max(axis=-1), np.argmax(logits, axis=-1)


def example_inputs(rng, large=False):
    tokens, experts = (1 << 16, 64) if large else (512, 8)
    return (rng.standard_normal((tokens, experts), dtype=np.float32),)


if __name__ == "__main__":
    from _common import run_example

    run_example(moe_router, reference, example_inputs)
