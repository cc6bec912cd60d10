"""The workloads that tests and benchmarks share, each written once: plain NumPy functions that ``fusec.fuse``
traces (and that NumPy runs as their own reference).

Where two definitions of "the same" workload differ in what they compute or in how they are written (an axis, an
``eps`` as an argument or a constant, ``(x - m) ** 2`` or a named ``centered * centered``, bias correction), fusec
may trace a different graph, so they are separate functions here, named for the difference; a test imports the
one it was written against. The function's name is also what fusec prints (``@softmax``) and what some tests' ids
are made of, so the names below are the ones the tests used.

Left in their files, on purpose: module-level ``@fusec.fuse`` functions that Dask's workers unpickle by reference
(``tests/dask/test_dask_distributed.py``, ``benchmarks/dask_bench.py``), functions whose definition site a test
checks (``tests/correctness/test_runtime.py``'s ``softmax``: a compile error names the file that defines it), the
examples (``examples/*.py`` stand alone), and variants a single file uses.

This module imports NumPy only (no pytest, no fusec), so the benchmarks run from the repository root
(``PYTHONPATH=.``) import it too without depending on the test tools.
"""

from __future__ import annotations

import numpy as np

# ---- pointwise -------------------------------------------------------------------------------------------------


def gelu(x):
    """GELU, tanh form, with sqrt(2/pi) written out and x cubed by multiplies."""
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def bias_add(x, b):
    return x + b


def adam(param, grad, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=1):
    """One Adam step as ``examples/adam.py`` writes it: hyperparameters as arguments, bias-corrected moments."""
    m = beta1 * m + (1.0 - beta1) * grad
    v = beta2 * v + (1.0 - beta2) * grad * grad
    m_hat = m / (1.0 - beta1**step)
    v_hat = v / (1.0 - beta2**step)
    return param - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def adam_no_bias_correction(p, g, m, v):
    """An Adam-like step with its constants written in and no bias correction: four inputs, three outputs."""
    m2 = 0.9 * m + 0.1 * g
    v2 = 0.999 * v + 0.001 * (g * g)
    p2 = p - 0.001 * m2 / (np.sqrt(v2) + 1e-8)
    return p2, m2, v2


# ---- reduce-all ------------------------------------------------------------------------------------------------


def sum_abs(x):
    return np.abs(x).sum()


def mean_var(x):
    return x.mean(), x.var()


def center_all(x):
    """reduce-all with an output over every element: x - mean(x)."""
    return x - x.mean()


# ---- rows: reductions along the last axis ------------------------------------------------------------------------


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, eps=1e-5):
    """Layer normalization without the affine part, as ``examples/layernorm.py`` writes it (``eps`` an argument,
    deviations squared with ``** 2``)."""
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


def layernorm_centered(x):
    """Layer normalization with the centered value named and squared by a multiply, ``eps`` a constant."""
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(var + 1e-5)


def rmsnorm(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def router(x):
    """A mixture-of-experts router's softmax, then each row's top probability and its expert."""
    p = softmax(x)
    return p.max(axis=-1), p.argmax(axis=-1)


def row_sum(x):
    return x.sum(axis=-1)


def row_min_argmin(x):
    return x.min(axis=-1), x.argmin(axis=-1)


# ---- cols: reductions along the first axis -----------------------------------------------------------------------


def col_sum(x):
    return x.sum(axis=0)


def col_softmax(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def col_max_argmax(x):
    return x.max(axis=0), x.argmax(axis=0)


# ---- matrix products with epilogues (benchmarks/gemm.py, issue 32) ----------------------------------------------


def silu(x):
    """SiLU (swish): x * sigmoid(x), written as x / (1 + exp(-x))."""
    return x / (1.0 + np.exp(-x))


def mlp_gelu(x, w1, b1):
    """The MLP up-projection: ``gelu(x @ w1 + b1)`` (tanh GELU)."""
    return gelu(x @ w1 + b1)


def swiglu(x, wg, wu):
    """The SwiGLU gate of LLaMA-style MLPs: ``silu(x @ wg) * (x @ wu)``."""
    return silu(x @ wg) * (x @ wu)


def attention_scores(q, k, mask):
    """Attention probabilities of one batch of heads: ``softmax(q @ k.T * s + mask)`` with ``k.T`` the last two axes
    swapped, ``s = 1/sqrt(head dim)`` (a Python float, so the dtype stays the operands') and ``mask`` an additive
    (causal) mask broadcast over the heads."""
    return softmax(q @ np.swapaxes(k, -1, -2) * float(q.shape[-1]) ** -0.5 + mask)


def layernorm_residual(x, w, b, residual):
    """A projection, its bias and the residual, normalized: ``layernorm(x @ w + b + residual)`` (no affine)."""
    return layernorm(x @ w + b + residual)


def router_top1(x, w_r):
    """A mixture-of-experts router from the hidden states: ``softmax(x @ w_r)``, each token's top-1 probability and
    its expert (``router`` on the logits)."""
    return router(x @ w_r)
