"""``fc::div_invariant`` on a GPU: float32 (and float16) division by a per-row divisor in rows held in registers.

The helper divides with a reciprocal hoisted per row and must give IEEE division's bits for every pair it
takes its fast path for; elsewhere the kernel runs the loop again with IEEE division. Checked here:

- the helper itself against ``__fdiv_rn`` over every b significand x 2^8 a significands
  (``scripts/check_invariant_division.py`` runs all 2^46 pairs);
- whole kernels, bit for bit against NumPy: the divisor is the row's largest magnitude (exact in any
  order of reduction), the quotient stored (the epilogue) or reduced (max/argmax in a phase), in rows
  built to leave the fast range both ways: dividends that are zero, -0.0, subnormal, below 2^-64, inf or
  NaN; divisors below 2^-32 or above 2^32, inf, NaN or zero; negative values; in every register row
  bucket (full and partial).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from tests.codegen.test_kernels import single_region
from tests.helpers import GPU_ONLY, assert_matches_numpy, seed_of

cupy = pytest.importorskip("cupy")

pytestmark = GPU_ONLY


def scale_by_max(x):
    return x / np.abs(x).max(axis=-1, keepdims=True)


def scaled_max_argmax(x):
    y = x / (np.abs(x).max(axis=-1, keepdims=True) * 3.0)
    return y.max(axis=-1), y.argmax(axis=-1)


@pytest.fixture(scope="module")
def launcher():
    from fusec.runtime.launch import KernelLauncher

    return KernelLauncher(poison=True, compiler="nvrtc")


def test_gpu_div_invariant_matches_ieee_division_on_significand_pairs() -> None:
    from scripts.check_invariant_division import check

    result = check(a_bits=8, log=lambda _: None)
    assert result["mismatches"] == 0, result
    assert result["not_fast"] == 0, result


def _designed_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    """Rows of ``n`` float32 values: plain ones (the fast path) and ones built to leave it."""
    f32 = np.float32

    def normal() -> np.ndarray:
        return rng.standard_normal(n).astype(f32)

    def with_values(*values: float) -> np.ndarray:
        row = normal()
        row[rng.choice(n, size=min(n, len(values)), replace=False)] = np.array(values[:n], dtype=f32)
        return row

    wide = (rng.choice([-1, 1], n) * np.exp2(rng.uniform(-90, 0, n)) * rng.uniform(1, 2, n)).astype(f32)
    rows = [
        normal(),
        -np.abs(normal()),
        (normal() * f32(2.0**-20)),  # divisor inside the range, small
        (normal() * f32(2.0**20)),
        with_values(0.0),  # a zero dividend: slow path (and -0.0 keeps its sign)
        with_values(-0.0),
        with_values(1e-40),  # subnormal
        with_values(2.0**-64, -(2.0**-64)),  # the range's edge (fast), with a divisor near 2^0
        with_values(2.0**-64 * 0.75),  # just below it
        with_values(2.0**-70, 3.0),
        with_values(np.inf),  # divisor inf
        with_values(-np.inf, 1.0),
        with_values(np.nan),  # divisor NaN
        np.zeros(n, f32),  # 0 / 0
        np.full(n, -0.0, f32),
        normal() * f32(2.0**-40),  # divisor below 2^-32
        normal() * f32(2.0**40),  # divisor above 2^32
        normal() * f32(2.0**100),
        np.full(n, np.finfo(f32).max, f32) * np.sign(normal()),
        wide,  # dividends over 90 binades: some below 2^-64
        np.ones(n, f32),
    ]
    return np.stack(rows).astype(f32)


@pytest.mark.parametrize("n", [64, 100, 1000, 1024, 4096, 8192])
@pytest.mark.parametrize("fn", [scale_by_max, scaled_max_argmax])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gpu_division_by_row_divisor_is_ieee_division(launcher, fn, n: int, dtype: str) -> None:
    with np.errstate(all="ignore"):
        x = _designed_rows(n, np.random.default_rng(seed_of("div_invariant", fn.__name__, n))).astype(dtype)
    graph, region, space = single_region(fn, fusec.ArraySpec(x.shape, x.dtype), name="k")
    out = launcher.run_region(region, {graph.inputs[0]: cupy.asarray(x)})
    recipe = launcher.recipes(region)[0]
    assert recipe.schedule.variant in ("warp_regs", "block_regs"), recipe.schedule
    assert "fc::div_invariant" in recipe.source
    with np.errstate(all="ignore"):
        ref = fn(x)
    refs = ref if isinstance(ref, tuple) else (ref,)
    got = [cupy.asnumpy(out[node]) for node in graph.outputs]
    if fn is scale_by_max:  # the quotients themselves: bit for bit, the sign of a zero included
        assert_matches_numpy(got[0], refs[0], exact=True)
    else:  # their max (the sign of a zero max is NumPy's reduction order, as in any max) and argmax
        assert_matches_numpy(got[0], refs[0], rtol=0.0, atol=0.0)
        assert_matches_numpy(got[1], refs[1])
