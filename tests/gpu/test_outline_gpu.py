"""Outlined element bodies (``outline=1``) on a GPU: the kernel that calls its body as one ``__noinline__``
function gives the same bits as the inline kernel, on fresh random data with NaN, +-inf, -0.0 and huge values
(sin and cos take their slow range reduction above 105615), for every pointwise loop that takes it and on
lengths with a scalar tail. ``tests/codegen/test_outline.py`` checks the heuristics and the source on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from tests.codegen.test_outline import arith_chain, heavy_mix, trig_chain
from tests.helpers import GPU_ONLY, assert_matches_numpy, random_array, seed_of

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


def _with_huge(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """``x`` with some elements far out (|x| up to 1e30, where sinf's slow path runs)."""
    x = x.copy()
    pick = rng.random(x.shape) < 0.05
    x[pick] = (rng.standard_normal(int(pick.sum())) * 10.0 ** rng.integers(3, 30, int(pick.sum()))).astype(x.dtype)
    return x


def _both(fn, args, loop: str):
    outs = []
    for outline in (0, 1):
        fused = fusec.fuse(fn, schedules={"k0": f"pointwise:{loop},outline={outline}"})
        assert f"outline={outline}" in str(fused.explain(*args)) or not outline
        outs.append(fused(*args))
    return outs


@pytest.mark.parametrize("n", [1 << 20, (1 << 20) + 3, 999])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("loop", ["vector", "contiguous"])
def test_gpu_outlined_trig_chain_gives_the_inline_bits(n, dtype, loop) -> None:
    rng = np.random.default_rng(seed_of("outline-trig", n, dtype, loop))
    x = _with_huge(rng, random_array(rng, n, dtype))
    inline, outlined = _both(trig_chain(24), (cupy.asarray(x),), loop)
    assert_matches_numpy(cupy.asnumpy(outlined), cupy.asnumpy(inline), exact=True)
    with np.errstate(invalid="ignore"):  # sin(inf) is NaN
        want = trig_chain(24)(x)
    assert_matches_numpy(cupy.asnumpy(outlined), want)


def test_gpu_outlined_strided_view_gives_the_inline_bits() -> None:
    rng = np.random.default_rng(seed_of("outline-strided"))
    base = _with_huge(rng, random_array(rng, (256, 2048), "float32"))
    view = cupy.asarray(base)[:, ::2]
    inline, outlined = _both(trig_chain(16), (view,), "strided")
    assert_matches_numpy(cupy.asnumpy(outlined), cupy.asnumpy(inline), exact=True)


@pytest.mark.parametrize("loop", ["vector", "contiguous", "strided"])
def test_gpu_outlined_body_with_gather_positions_scalar_and_three_outputs_gives_the_inline_bits(loop) -> None:
    rng = np.random.default_rng(seed_of("outline-mix", loop))
    n = (1 << 18) + 1
    x = _with_huge(rng, random_array(rng, n, "float32"))
    w = random_array(rng, 64, "float32")
    idx = rng.integers(0, 64, n)
    s = np.float32(0.75)
    args = (cupy.asarray(x), cupy.asarray(w), cupy.asarray(idx), s)
    inline, outlined = _both(heavy_mix, args, loop)
    for a, b in zip(inline, outlined):
        assert_matches_numpy(cupy.asnumpy(b), cupy.asnumpy(a), exact=True)


def test_gpu_outline_forced_on_plain_arithmetic_gives_the_inline_bits() -> None:
    rng = np.random.default_rng(seed_of("outline-arith"))
    x = random_array(rng, (1 << 20) + 5, "float32")
    inline, outlined = _both(arith_chain(50), (cupy.asarray(x),), "vector")
    assert_matches_numpy(cupy.asnumpy(outlined), cupy.asnumpy(inline), exact=True)
