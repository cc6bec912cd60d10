"""Random numbers with explicit keys (``fusec.random``): the same bits in a fused function, on the GPU and on the NumPy
backend, and outside one, in NumPy.

``fusec.random.uniform(key, shape)`` is Philox-4x32-10 (Salmon et al., SC 2011: a counter-based generator, the one
cuRAND and JAX use) of each element's flat index under ``key``, written with NumPy's integer operations only: traced,
they are ops of the IR like any other (an ``iota`` for the indices, the key a runtime scalar), so a fused function
draws its numbers in the kernel that uses them (a dropout mask never touches memory), and called outside a fused
function the same code runs on NumPy arrays and gives the same bits. There is no hidden state: the same key gives the
same numbers, so a training loop passes a new key each step (``key=(seed, step)``); ``np.random`` inside a fused
function is refused for that reason (its numbers would be drawn once, while tracing).

- ``uniform`` (float32: 24 random bits, float64: 53), ``bernoulli`` (``uniform < p``) and ``integers`` are exact: the
  same bits everywhere. ``normal`` (Box-Muller: a logarithm, a square root and a cosine) is within a few ulps of its
  NumPy-backend value on the GPU, whose transcendental functions are not glibc's.
- ``key``: an int or a pair of ints (each in [0, 2**32): the two 32-bit words of the Philox key), Python ints (runtime
  scalars in a fused function: a new key does not trace again) or traced 0-d integer arrays.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from fusec.ir import dtypes
from fusec.support.errors import FusecTypeError, FusecValueError

_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # Philox-4x32's multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # its Weyl sequence (the key schedule)
ROUNDS = 10
_LOW = 0xFFFFFFFF


def philox4x32(counter: tuple[Any, Any, Any, Any], key: tuple[Any, Any], rounds: int = ROUNDS) -> tuple[Any, ...]:
    """Philox-4x32-``rounds`` of four uint32 counter words under two uint32 key words (arrays, broadcast): the four
    uint32 output words. NumPy operations only (uint64 products for the 32x32-bit multiplies), so it traces."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    with np.errstate(over="ignore"):
        for _ in range(rounds):
            p0 = c0.astype(np.uint64) * np.uint64(_M0)
            p1 = c2.astype(np.uint64) * np.uint64(_M1)
            hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), p0.astype(np.uint32)
            hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), p1.astype(np.uint32)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
            k0, k1 = k0 + np.uint32(_W0), k1 + np.uint32(_W1)
    return c0, c1, c2, c3


def _numpy(name: str) -> Any:
    """NumPy's creator ``name`` (``arange``, ``asarray``), or while a function traces fusec's (a traced iota, the key's
    runtime scalar as a traced value): tracing hands fusec's own code NumPy's functions as they are."""
    from fusec.frontend import registry
    from fusec.frontend.trace import tracing

    return registry.FUNCTIONS[name] if tracing() else getattr(np, name)


def _key_words(key: Any) -> tuple[Any, Any]:
    """The two uint32 key words of ``key`` (an int, a pair, or traced 0-d integers), as 0-d uint32 arrays."""
    pair = tuple(key) if isinstance(key, (tuple, list)) else (key, 0)
    if len(pair) != 2:
        raise FusecValueError(f"a fusec.random key is an int or a pair of ints, not {len(pair)} of them")
    words = []
    for k in pair:
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool) and not 0 <= int(k) <= _LOW:
            raise FusecValueError(f"a fusec.random key word must be in [0, 2**32), not {int(k)}",
                                  hint="fold a larger seed first: (seed & 0xFFFFFFFF, seed >> 32)")
        word = _numpy("asarray")(k)
        if dtypes.kind(word.dtype) not in "iub" or word.ndim:
            raise FusecTypeError(f"a fusec.random key word is an int, not {type(k).__name__} {word.dtype}"
                                 f"{list(word.shape) if word.ndim else ''}")
        words.append(word.astype(np.uint64).astype(np.uint32))  # (a traced int64 wraps modulo 2**32 as NumPy's)
    return words[0], words[1]


def _shape(shape: Any) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return tuple(operator.index(d) for d in shape)


def bits(key: Any, shape: Any, words: int = 1) -> tuple[Any, ...]:
    """``words`` (1 to 4) arrays of ``shape`` of random uint32: Philox-4x32-10 of each element's flat index (counter
    words: its low and high 32 bits, 0, 0) under ``key``."""
    shape = _shape(shape)
    index = _numpy("arange")(math.prod(shape), dtype=np.int64).reshape(shape)
    low = (index & _LOW).astype(np.uint32)
    high = (index >> 32).astype(np.uint32)
    zero = np.uint32(0)
    return tuple(w if w.shape == shape else np.broadcast_to(w, shape)
                 for w in philox4x32((low, high, zero, zero), _key_words(key))[:words])


def uniform(key: Any, shape: Any = (), dtype: Any = np.float32, low: float = 0.0, high: float = 1.0) -> Any:
    """Uniform floats in ``[low, high)``: ``low + (high - low) * u`` with ``u`` in [0, 1) of 24 random bits (float32)
    or 53 (float64), exact: the same bits wherever it runs."""
    dt = np.dtype(dtype)
    if dt == np.float32:
        (w,) = bits(key, shape)
        u = (w >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
    elif dt == np.float64:
        w0, w1 = bits(key, shape, 2)
        u = ((w0 >> np.uint32(5)).astype(np.float64) * 67108864.0 + (w1 >> np.uint32(6)).astype(np.float64)) \
            * 2.0**-53
    else:
        raise FusecTypeError(f"fusec.random.uniform makes float32 or float64, not {dt}")
    if low == 0.0 and high == 1.0:
        return u
    return (u * (high - low) + low).astype(dt)


def normal(key: Any, shape: Any = (), dtype: Any = np.float32, loc: float = 0.0, scale: float = 1.0) -> Any:
    """Normal floats (Box-Muller of two uniforms: ``sqrt(-2 log(1 - u1)) cos(2 pi u2)``), ``loc + scale * z``."""
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise FusecTypeError(f"fusec.random.normal makes float32 or float64, not {dt}")
    w0, w1 = bits(key, shape, 2)
    u1 = (w0 >> np.uint32(8)).astype(dt) * dt.type(2.0**-24)  # [0, 1): 1 - u1 in (0, 1], whose log is finite
    u2 = (w1 >> np.uint32(8)).astype(dt) * dt.type(2.0**-24)
    z = np.sqrt(dt.type(-2.0) * np.log(dt.type(1.0) - u1)) * np.cos(dt.type(2.0 * math.pi) * u2)
    if loc == 0.0 and scale == 1.0:
        return z
    return (z * scale + loc).astype(dt)


def bernoulli(key: Any, p: Any, shape: Any = ()) -> Any:
    """Booleans, each true with probability ``p`` (``uniform(key, shape) < p``, float32: ``p`` in steps of 2**-24):
    ``x * bernoulli(key, 1 - rate, x.shape) / (1 - rate)`` is dropout."""
    return uniform(key, shape) < p


def integers(key: Any, low: int, high: int, shape: Any = ()) -> Any:
    """int64 in ``[low, high)``: ``low + (w * (high - low) >> 32)`` of one random uint32 word ``w`` (Lemire's
    multiply-shift; its bias is at most ``(high - low) / 2**32``), for ranges of at most 2**32."""
    span = operator.index(high) - operator.index(low)
    if not 0 < span <= 2**32:
        raise FusecValueError(f"fusec.random.integers needs 0 < high - low <= 2**32, not {span}")
    (w,) = bits(key, shape)
    return ((w.astype(np.uint64) * np.uint64(span)) >> np.uint64(32)).astype(np.int64) + low


__all__ = ["ROUNDS", "bernoulli", "bits", "integers", "normal", "philox4x32", "uniform"]
