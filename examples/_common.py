"""Shared by the examples' ``__main__`` blocks: run a fused function on NumPy (and CuPy) data and
check it against a plain NumPy reference. Not part of fusec."""

from __future__ import annotations

import sys

import numpy as np


def gpu_available() -> bool:
    """True when CuPy imports and sees a CUDA device; never raises."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _as_tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def matches(got, want, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """Each output has the reference's shape and dtype and is within tolerance (exact for integers)."""
    got, want = _as_tuple(got), _as_tuple(want)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return False
        if w.dtype.kind in "biu":
            if not np.array_equal(g, w):
                return False
        elif not np.allclose(g, w, rtol=rtol, atol=atol):
            return False
    return True


def describe(args) -> str:
    return ", ".join(f"{np.asarray(a).dtype}{list(np.shape(a))}" for a in args)


def run_example(fused, reference, example_inputs, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Run ``fused`` on NumPy inputs, and on CuPy inputs when a GPU is there; compare with
    ``reference`` (plain NumPy); print the check and exit 1 on a mismatch."""
    rng = np.random.default_rng(0)
    ok = True
    args = example_inputs(rng)
    good = matches(fused(*args), reference(*args), rtol, atol)
    print(f"{fused.name}({describe(args)}) on NumPy: {'matches NumPy' if good else 'DIFFERS from NumPy'}")
    ok &= good
    if gpu_available():
        import cupy as cp

        args = example_inputs(rng, large=True)
        got = fused(*[cp.asarray(a) for a in args])
        good = matches([cp.asnumpy(g) for g in _as_tuple(got)], reference(*args), rtol, atol)
        print(f"{fused.name}({describe(args)}) on CuPy: {'matches NumPy' if good else 'DIFFERS from NumPy'}")
        ok &= good
    else:
        print("no CUDA GPU found: ran the NumPy reference backend only")
    print(f"result checked against NumPy: {'OK' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)
