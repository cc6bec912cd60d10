"""One Adam optimizer step: 4 inputs (param, grad, m, v) and 3 outputs (new param, m, v).

A pointwise region with several outputs: one kernel reads four arrays and writes three, where an
unfused step runs a dozen elementwise kernels. The hyperparameters and ``step`` are Python numbers:
left at their defaults they are compile-time constants of the kernel; passed in the call (a learning
rate schedule, the step count of a training loop) they are runtime scalars, so new values neither trace
nor compile again (docs/scalars.md). Written in place (``m *= beta1; m += ...``), the same
step updates param, m and v in their own buffers (docs/in-place.md).
"""

import numpy as np

import fusec


@fusec.fuse
def adam(param, grad, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=1):
    m = beta1 * m + (1.0 - beta1) * grad
    v = beta2 * v + (1.0 - beta2) * grad * grad
    m_hat = m / (1.0 - beta1**step)
    v_hat = v / (1.0 - beta2**step)
    return param - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def reference(param, grad, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=1):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * np.square(grad)
    update = (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + eps)
    return param - lr * update, m, v


def example_inputs(rng, large=False):
    n = 1 << 26 if large else 1 << 14
    param = rng.standard_normal(n, dtype=np.float32)
    grad = rng.standard_normal(n, dtype=np.float32) * 0.1
    m = rng.standard_normal(n, dtype=np.float32) * 0.01
    v = rng.uniform(0.0, 0.01, n).astype(np.float32)
    return param, grad, m, v


if __name__ == "__main__":
    from _common import run_example

    run_example(adam, reference, example_inputs)
