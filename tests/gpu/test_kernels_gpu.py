"""Generated kernels on a GPU, against NumPy: ``pytest -m gpu tests/gpu`` (skipped where CuPy sees no GPU).

Every case traces a workload, makes ONE region of all its non-source nodes, runs it with
``KernelLauncher(poison=True)`` (outputs filled with 0xAB bytes before the launch, so an element the
kernel never writes shows up) and compares with the NumPy reference interpreter on the same inputs:

- kinds x dtypes (bool, int8, int32, int64, uint8, float16, float32, float64, bfloat16) on C-contiguous inputs at
  every size (0, 1, 23, 1029x917, 2**24 elements);
- kinds x layouts (transposed, every other element, negative strides, zero strides from
  ``broadcast_to``, an offset view whose pointer is not 16-byte aligned, Fortran order) for float32 and
  int32 at two sizes;
- fresh random data per case, with NaN, +-inf, -0.0 (or integer extremes) at a few positions;
- every case launches twice: the second launch (through the cached recipe, reusing the workspace) must
  give the same bits;
- integer, bool and max/argmax results exact; elementwise floats within CORRECTNESS.md's tolerances
  (a few ULP more for transcendentals); float reductions within ``c * eps * log2(n) * sum|x|``;
- one pointwise op over 2**31 + 1 int8 elements, one over a strided view whose offsets pass 2**31, and
  one reduction (sum, max, argmax) over more than 2**31 elements: int64 indexing.

Every kernel source of the module is compiled first, in parallel processes
(:func:`fusec.runtime.launch.precompile`), so the suite takes a couple of minutes on an H200.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

import fusec
from fusec.ir import dtypes as fdt
from fusec.ir.interpret import interpret
from fusec.support.errors import FusecError
from tests.codegen.test_kernels import single_region
from tests.helpers import GPU_ONLY, assert_matches_numpy, seed_of, special_values
from tests.workloads import (
    adam_no_bias_correction,
    bias_add,
    center_all,
    col_max_argmax,
    col_softmax,
    col_sum,
    gelu,
    layernorm_centered,
    mean_var,
    router,
    row_min_argmin,
    row_sum,
    softmax,
    sum_abs,
)

cupy = pytest.importorskip("cupy")


pytestmark = GPU_ONLY

DTYPES = ["bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64", "bfloat16"]
LAYOUTS = ["t", "step", "neg", "bcast", "offset", "f"]


# ---- workloads (the shared ones are tests/workloads.py's) --------------------------------------------------


def affine(x):
    return x * 3 + 1


def invert(x):
    return ~x


def total(x):
    return x.sum()


def max_argmax(x):
    return x.max(), x.argmax()


def row_max_argmax(x):
    return x.max(axis=-1), x.argmax(axis=-1)


@dataclass(frozen=True)
class Check:
    """How a workload's results are compared: ``exact`` (ints, bools, max/argmax: exact values, zero sign
    ignored), ``elementwise`` (CORRECTNESS.md's tolerances times ``ulps``), ``reduction`` (each output
    within ``4 * eps * log2(n + 2) * scale`` of NumPy's, ``scale`` from the float64 inputs)."""

    how: str
    ulps: float = 1.0
    scale: Callable[..., list] | None = None  # float64 inputs, reduced axes -> one scale per output
    out_atol: float = 0.0  # reductions: absolute slack in units of the output dtype's eps


def _sum_abs_scale(xs, axes):
    return [np.abs(xs[0]).sum(axis=axes)]


def _unit_scale(xs, axes):
    return [1.0, 1.0, 1.0]


def _mean_var_scale(xs, axes):
    x = xs[0]
    return [np.abs(x).mean(), (x * x).mean() if x.size else 0.0]


def _center_scale(xs, axes):
    return [np.abs(xs[0]).mean() if xs[0].size else 0.0]


EXACT = Check("exact")
WORKLOADS: dict[str, tuple[Callable, str, Check]] = {
    # name: (function, kind, check)
    "gelu": (gelu, "pointwise", Check("elementwise", ulps=4)),
    "affine": (affine, "pointwise", EXACT),
    "invert": (invert, "pointwise", EXACT),
    "bias_add": (bias_add, "pointwise", Check("elementwise")),
    "adam": (adam_no_bias_correction, "pointwise", Check("elementwise", ulps=4)),
    "sum_abs": (sum_abs, "reduce-all", Check("reduction", scale=_sum_abs_scale)),
    "total": (total, "reduce-all", EXACT),
    "max_argmax": (max_argmax, "reduce-all", EXACT),
    "mean_var": (mean_var, "reduce-all", Check("reduction", scale=_mean_var_scale)),
    "center_all": (center_all, "reduce-all", Check("reduction", scale=_center_scale)),
    "softmax": (softmax, "rows", Check("reduction", scale=_unit_scale)),
    "layernorm": (layernorm_centered, "rows", Check("reduction", scale=lambda xs, axes: [2.0], out_atol=8)),
    "router": (router, "rows", Check("router")),
    "row_sum": (row_sum, "rows", EXACT),
    "row_max_argmax": (row_max_argmax, "rows", EXACT),
    "col_sum": (col_sum, "cols", Check("reduction", scale=_sum_abs_scale)),
    "col_softmax": (col_softmax, "cols", Check("reduction", scale=_unit_scale)),
    "col_max_argmax": (col_max_argmax, "cols", EXACT),
}

# sizes: 0, 1, 23, 1029 x 917, 2**24 elements
SIZES = {
    "pointwise": [(0,), (1,), (23,), (1029, 917), (1 << 24,)],
    "reduce-all": [(0,), (1,), (23,), (1029, 917), (1 << 24,)],
    "rows": [(0, 64), (1, 1), (23, 23), (1029, 917), (4096, 4096)],
    "cols": [(0, 64), (1, 1), (23, 23), (1029, 917), (4096, 4096)],
}


def _workloads_for(kind: str, dtype: str) -> list[str]:
    floating = fdt.kind(np.dtype(dtype)) == "f"
    if kind == "pointwise":
        return ["gelu"] if floating else (["invert"] if dtype == "bool" else ["affine"])
    if kind == "reduce-all":
        return (["sum_abs"] if floating else ["total"]) + ["max_argmax"]
    if kind == "rows":
        return (["softmax"] if floating else ["row_sum"]) + ["row_max_argmax"]
    return (["col_softmax", "col_sum"] if floating else ["col_sum"]) + ["col_max_argmax"]


@dataclass(frozen=True)
class Case:
    workload: str
    dtype: str
    layout: str  # c | t | step | neg | bcast | offset | f
    shapes: tuple[tuple[int, ...], ...]

    def __str__(self) -> str:
        dims = "-".join("x".join(map(str, s)) or "0d" for s in self.shapes)
        return f"{self.workload}-{self.dtype}-{self.layout}-{dims}"


def _extra_shapes(workload: str, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    if workload == "bias_add":
        return (shape, shape[-1:])
    if workload == "adam":
        return (shape,) * 4
    return (shape,)


def _empty_max(workload: str, shape: tuple[int, ...]) -> bool:
    """NumPy raises for max/argmax over an empty extent; those cases are not run."""
    if "max" not in workload and workload not in ("softmax", "router", "col_softmax"):
        return False
    if workload.startswith("row") or workload in ("softmax", "router"):
        return shape[-1] == 0
    if workload.startswith("col"):
        return shape[0] == 0
    return math.prod(shape) == 0


def _cases() -> list[Case]:
    cases: list[Case] = []
    for kind, sizes in SIZES.items():
        for dtype in DTYPES:  # every dtype, C-contiguous, every size
            for w in _workloads_for(kind, dtype):
                for shape in sizes:
                    if not _empty_max(w, shape):
                        cases.append(Case(w, dtype, "c", _extra_shapes(w, shape)))
        for layout in LAYOUTS:  # every layout, float32 and int32, two sizes
            for dtype in ["float32", "int32"]:
                for w in _workloads_for(kind, dtype):
                    for shape in [(23, 23), (1029, 917)] if kind in ("rows", "cols") else [(23,), (1029, 917)]:
                        cases.append(Case(w, dtype, layout, _extra_shapes(w, shape)))
    for dtype in ["float16", "float32", "float64", "bfloat16"]:
        cases += [Case("layernorm", dtype, "c", ((1029, 917),)), Case("layernorm", dtype, "c", ((64, 8192),)),
                  Case("mean_var", dtype, "c", ((1029, 917),)), Case("adam", dtype, "c", ((1029 * 917,),) * 4),
                  Case("bias_add", dtype, "c", ((1029, 917), (917,)))]
    cases += [Case("mean_var", "float32", layout, ((1 << 24,),)) for layout in ("c", "offset")]
    cases += [Case("mean_var", dt, "c", ((1029, 917),)) for dt in ("int32", "uint8")]
    cases += [Case("center_all", "float32", "c", ((1029, 917),)), Case("center_all", "float64", "t", ((23, 5),))]
    cases += [Case("router", dt, "c", ((1 << 14, 64),)) for dt in ("float32", "float64")]
    cases += [Case("bias_add", dt, "c", ((1029, 917), (917,))) for dt in ("bool", "int8", "int64", "uint8")]
    cases += _row_regs_cases()
    cases += [Case("adam", "float32", layout, ((1029, 917),) * 4) for layout in ("t", "step", "offset")]
    cases += [Case("row_sum", "float64", "c", ((5, 0),)), Case("col_sum", "int64", "c", ((0, 5),))]
    return list(dict.fromkeys(cases))


# Register-resident rows (warp_regs / block_regs, see ROW_REGS_TABLE in fusec/kinds/rows.py): row lengths
# at and around the bucket edges, few rows for long rows; rows of one element and re-reading layouts beside.
# Every bucket's longest row is exactly threads x elements: that kernel checks no bounds (full_rows).
ROW_LENGTHS = (1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 63, 64, 65, 128, 129, 256, 512, 1000, 1024, 1025, 2048, 4096,
               8192, 8193, 16384, 16385)


def _row_regs_cases() -> list[Case]:
    cases: list[Case] = []
    for n in ROW_LENGTHS:
        rows = 37 if n > 1024 else 1029  # 1029: not a multiple of the rows per block
        for w in ("softmax", "row_max_argmax"):
            cases.append(Case(w, "float32", "c", ((rows, n),)))
        cases.append(Case("row_sum", "int32", "c", ((rows, n),)))
    for n in (7, 63, 64, 65, 1000):
        cases.append(Case("router", "float32", "c", ((1 << 12, n),)))
    for n in (1000, 8192, 8193):
        cases.append(Case("layernorm", "float32", "c", ((37, n),)))
    for dt in ("float16", "float64", "bfloat16"):
        for n in (1, 3, 7, 8, 16, 32, 64, 65, 128, 256, 512, 1000, 1024, 2048, 4096, 8192, 8193):
            cases.append(Case("softmax", dt, "c", ((37, n),)))
        cases.append(Case("router", dt, "c", ((1 << 12, 64),)))
    cases += [Case("row_max_argmax", dt, "c", ((1029, 64),)) for dt in ("int8", "int64", "uint8", "bool")]
    for layout in ("offset", "bcast", "neg", "step", "t"):  # unaligned (scalar loads), broadcast rows, re-read
        cases += [Case("softmax", "float32", layout, ((1029, n),)) for n in (64, 1000)]
    return cases


CASES = _cases()


# ---- inputs -----------------------------------------------------------------------------------------------


def _data(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, special: bool = True) -> np.ndarray:
    """Random values (floats ~ N(0, 1); ints mostly small, some over the full range), with the dtype's
    special values (NaN, +-inf, -0.0, 0 / min, max, 0, +-1) at a few random positions."""
    dt = np.dtype(dtype)
    n = math.prod(shape)
    if dt.kind == "b":
        flat = rng.random(n) < 0.5
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        small = rng.integers(max(info.min, -20), min(info.max, 20), size=n, endpoint=True)
        wide = rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
        flat = np.where(rng.random(n) < 0.9, small, wide).astype(dt)
    else:
        flat = rng.standard_normal(n).astype(dt)
    flat = np.asarray(flat, dtype=dt)
    if special and n >= 2:
        specials = special_values(dt)
        k = min(len(specials), n // 2)
        flat[rng.choice(n, size=k, replace=False)] = rng.choice(specials, size=k)
    return flat.reshape(shape)


def _view(xp, data, layout: str):
    """``data`` (a NumPy array) on ``xp``, laid out as ``layout`` with the same values."""
    shape = data.shape
    if layout == "c" or data.ndim == 0:
        return xp.asarray(data)
    if layout == "t":
        return xp.asarray(np.ascontiguousarray(data.T)).T
    if layout == "step":
        base = xp.zeros(shape[:-1] + (2 * shape[-1],), dtype=data.dtype)
        base[..., ::2] = xp.asarray(data)
        return base[..., ::2]
    if layout == "neg":
        flipped = np.ascontiguousarray(data[::-1, ...])
        return xp.asarray(flipped)[::-1, ...]
    if layout == "bcast":
        return xp.broadcast_to(xp.asarray(np.ascontiguousarray(data[:1])), shape)
    if layout == "offset":
        flat = xp.zeros(data.size + 1, dtype=data.dtype)
        flat[1:] = xp.asarray(data.reshape(-1))
        return flat[1:].reshape(shape)
    if layout == "f":
        return xp.asfortranarray(xp.asarray(data))
    raise ValueError(layout)


def _inputs(case: Case, rng: np.random.Generator | None, xp=None):
    """(NumPy inputs, CuPy inputs) of ``case``; the layout applies to the first input (all of adam's).
    Without ``rng``, zeros of the same layouts (for planning only). Float reduce-all cases over more
    than 23 elements get no special values (one NaN would make the whole result NaN)."""
    xp = cupy if xp is None else xp
    kind, check = WORKLOADS[case.workload][1:]
    special = not (kind == "reduce-all" and check.how == "reduction" and math.prod(case.shapes[0]) > 23)
    np_in, cp_in = [], []
    for k, shape in enumerate(case.shapes):
        layout = case.layout if (k == 0 or case.workload == "adam") else "c"
        if rng is None:
            data = np.zeros(shape, dtype=case.dtype)
        else:
            data = _data(rng, shape, case.dtype, special)
        dev = _view(xp, data, layout)
        cp_in.append(dev)
        np_in.append(np.array(dev.get() if hasattr(dev, "get") else dev) if layout == "bcast" else data)
    return np_in, cp_in


def _region(case: Case, np_inputs):
    fn = WORKLOADS[case.workload][0]
    return single_region(fn, *[fusec.ArraySpec(a.shape, a.dtype) for a in np_inputs], name="k")


@pytest.fixture(scope="module")
def launcher():
    """A poisoning launcher whose kernels are all compiled up front, in parallel."""
    from fusec.runtime.launch import KernelLauncher, precompile

    launcher = KernelLauncher(poison=True, compiler="nvrtc")
    arch = "sm_" + cupy.cuda.Device().compute_capability
    sources = []
    for case in CASES:
        np_in, cp_in = _inputs(case, None)
        graph, region, space = _region(case, np_in)
        sources.append(launcher.source(region, dict(zip(graph.inputs, cp_in))))
    precompile(sources, arch)
    return launcher


# ---- comparisons ----------------------------------------------------------------------------------------


def _reduced_count(case: Case) -> int:
    kind = WORKLOADS[case.workload][1]
    shape = case.shapes[0]
    if kind == "pointwise":
        return 1
    if kind == "reduce-all":
        return math.prod(shape)
    return shape[-1] if kind == "rows" else shape[0]


def _reduced_axes(case: Case):
    kind = WORKLOADS[case.workload][1]
    ndim = len(case.shapes[0])
    return {"reduce-all": None, "rows": ndim - 1, "cols": 0}.get(kind)


def _check(case: Case, got: list[np.ndarray], ref: list[np.ndarray], np_in: list[np.ndarray]) -> None:
    check = WORKLOADS[case.workload][2]
    if check.how == "router":
        # bfloat16: the probabilities as the NumPy backend computes them (ml_dtypes' own sum rounds at every step),
        # and two bfloat16 ULP: the GPU's expf against the host's moves a rounded probability by one, and the
        # element the GPU picked may be one below the host's maximum
        bf16 = np_in[0].dtype == fdt.BFLOAT16
        rel = 2.0**-6 if bf16 else 1e-5
        with np.errstate(all="ignore"):
            p_ref = fusec.fuse(softmax)(np_in[0]) if bf16 else softmax(np_in[0])
        assert_matches_numpy(got[0], ref[0], rtol=rel, atol=1e-6)
        assert got[1].dtype == ref[1].dtype and got[1].shape == ref[1].shape
        chosen = np.take_along_axis(p_ref, got[1][:, None], axis=-1)[:, 0]
        assert np.all((chosen >= ref[0] * (1 - rel)) | np.isnan(ref[0])), "argmax is not a maximum"
        return
    ref64 = _float64_reference(case, np_in) if check.how == "reduction" else None
    for k, (g, r) in enumerate(zip(got, ref)):
        if check.how == "exact" or r.dtype.kind in "biu":
            if fdt.kind(r.dtype) == "f":
                assert_matches_numpy(g, r, rtol=0.0, atol=0.0)  # exact values, either zero sign
            else:
                assert_matches_numpy(g, r)
        elif check.how == "elementwise":
            rtol = {np.float16: 1e-3, np.float32: 1.3e-6, np.float64: 1e-7, fdt.BFLOAT16.type: 2.0**-7}[
                r.dtype.type] * check.ulps  # bfloat16: one ULP, as float16's 1e-3 (tests/helpers.py)
            atol = {np.float16: 1e-5, np.float32: 1e-5, np.float64: 1e-7, fdt.BFLOAT16.type: 1e-5}[
                r.dtype.type] * check.ulps
            assert_matches_numpy(g, r, rtol=rtol, atol=atol)
        else:
            n = _reduced_count(case)
            eps_out = float(ml_dtypes.finfo(r.dtype).eps)
            eps_acc = float(ml_dtypes.finfo(fdt.compute_dtype(r.dtype)).eps)  # float16, bfloat16: float32
            in_dtype = np_in[0].dtype
            if in_dtype.kind in "biu":
                eps_acc = float(ml_dtypes.finfo(np.float64).eps)
            growth = 4 * math.log2(n + 2)
            with np.errstate(all="ignore"):
                x64 = [np.where(np.isfinite(a), a, 0).astype(np.float64) if fdt.kind(a.dtype) == "f"
                       else a.astype(np.float64) for a in np_in]
                scale = np.asarray(check.scale(x64, _reduced_axes(case))[k], dtype=np.float64)
                if scale.ndim and r.ndim and scale.ndim < r.ndim:
                    scale = np.expand_dims(scale, _reduced_axes(case))
            tiny = float(ml_dtypes.finfo(r.dtype).smallest_subnormal)
            atol = growth * eps_acc * np.broadcast_to(scale, r.shape) + check.out_atol * eps_out + 4 * tiny
            _assert_close(g, r, rtol=4 * eps_out + growth * eps_acc, atol=atol, ref64=ref64[k])


def _float64_reference(case: Case, np_in: list[np.ndarray]) -> list[np.ndarray]:
    """The workload computed in float64 from the same inputs (for float inputs; else NumPy's result)."""
    if fdt.kind(np_in[0].dtype) != "f":
        with np.errstate(all="ignore"):
            graph, _, _ = _region(case, np_in)
            return [np.asarray(r) for r in interpret(graph, np_in)]
    x64 = [a.astype(np.float64) for a in np_in]
    graph, _, _ = _region(case, x64)
    with np.errstate(all="ignore"):
        return [np.asarray(r) for r in interpret(graph, x64)]


def _assert_close(got: np.ndarray, ref: np.ndarray, rtol: float, atol, ref64: np.ndarray | None = None) -> None:
    """NaN and inf positions as NumPy's ``ref``; finite values within ``atol + rtol * |ref|`` of ``ref``, or
    (with ``ref64``, a float64 computation) of ``ref64``, or at most twice NumPy's own error against it."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    nan_g, nan_r = np.isnan(got), np.isnan(ref)
    assert np.array_equal(nan_g, nan_r), f"NaN positions differ: {int((nan_g != nan_r).sum())} elements"
    inf_r = np.isinf(ref)
    assert np.array_equal(np.isinf(got), inf_r) and np.array_equal(np.signbit(got[inf_r]), np.signbit(ref[inf_r]))
    finite = ~(nan_r | inf_r)
    with np.errstate(all="ignore"):
        truth = ref.astype(np.float64) if ref64 is None else np.asarray(ref64, dtype=np.float64)
        err = np.abs(got.astype(np.float64) - truth)
        bound = np.asarray(atol, dtype=np.float64) + rtol * np.abs(truth)
        if ref64 is not None:
            bound = np.maximum(bound, 2 * np.abs(ref.astype(np.float64) - truth))
    bad = finite & ~(err <= bound)
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0]) if bad.ndim else ()
        pytest.fail(f"{int(bad.sum())} of {bad.size} elements off; first at {i}: got {got[i]!r}, "
                    f"expected {ref[i]!r}, bound {np.broadcast_to(bound, bad.shape)[i]:.3g}")


# ---- the tests -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gpu_kernel_matches_numpy(case: Case, launcher) -> None:
    rng = np.random.default_rng(seed_of(str(case)))
    np_in, cp_in = _inputs(case, rng)
    before = [a.copy() for a in cp_in]
    graph, region, space = _region(case, np_in)
    values = dict(zip(graph.inputs, cp_in))
    first = launcher.run_region(region, values)
    got = [cupy.asnumpy(first[n]) for n in graph.outputs]
    with np.errstate(all="ignore"):
        ref = [np.asarray(r) for r in interpret(graph, np_in)]
    _check(case, got, ref, np_in)
    # run to run: the cached recipe, the same bits (reductions are deterministic)
    second = launcher.run_region(region, values)
    for n in graph.outputs:
        a, b = first[n], second[n]
        assert a is not b
        assert bool(cupy.array_equal(a.view(np.uint8) if a.ndim else a.reshape(1).view(np.uint8),
                                     b.view(np.uint8) if b.ndim else b.reshape(1).view(np.uint8))), \
            "two launches gave different bits"
    for a, b in zip(cp_in, before):  # inputs are never written
        if a.dtype == fdt.BFLOAT16:  # the same kernel on the same data: the same bits
            a, b = a.view(cupy.uint16), b.view(cupy.uint16)
        assert bool(cupy.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def _designed_rows(n: int, dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Rows that decide argmax/argmin by their tie and NaN rules, at every thread's share of the row: all
    equal; all the lowest / highest value (the identity's own value); the extreme twice (first, last,
    and across thread boundaries); one NaN, two NaNs, a NaN first and last; zeros of both signs; random."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        lo, hi = dt.type(-np.inf), dt.type(np.inf)
    else:
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    rows = [np.full(n, dt.type(3)), np.full(n, lo), np.full(n, hi)]
    for a, b in [(0, n - 1), (1, n - 1), (n // 2, n // 2 + 1), (3, 17), (15, 16), (n - 2, n - 1)]:
        for extreme, fill in [(hi, lo), (lo, hi), (dt.type(5), dt.type(1)), (dt.type(1), dt.type(5))]:
            row = np.full(n, fill)
            row[[a % n, b % n]] = extreme
            rows.append(row)
    if dt.kind == "f":
        for positions in ([0], [n - 1], [n // 3], [1, n - 1], [0, n - 1], [16, 4]):
            row = rng.standard_normal(n).astype(dt)
            row[[p % n for p in positions]] = np.nan
            rows.append(row)
        rows.append(np.where(np.arange(n) % 2 == 0, dt.type(-0.0), dt.type(0.0)).astype(dt))
    rows += list(_data(rng, (8, n), dtype))
    return np.stack(rows).astype(dt)


@pytest.mark.parametrize("n", [1, 7, 63, 64, 65, 1024, 4096, 100_000])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "uint8"])
def test_gpu_row_argmax_and_argmin_designed_rows(launcher, dtype: str, n: int) -> None:
    """max/argmax and min/argmin of rows built to hit the tie and NaN rules, in every row schedule: rows
    in registers (full and partial buckets: the first element assigned, the rest compared), re-read
    rows, and the max read off the argmax pair. Exact, as NumPy (the sign of a zero extreme aside)."""
    x = _designed_rows(n, dtype, np.random.default_rng(seed_of("designed rows", dtype, n)))
    for fn in (row_max_argmax, row_min_argmin):
        graph, region, space = single_region(fn, fusec.ArraySpec(x.shape, x.dtype), name="k")
        out = launcher.run_region(region, {graph.inputs[0]: cupy.asarray(x)})
        got = [cupy.asnumpy(out[node]) for node in graph.outputs]
        with np.errstate(all="ignore"):
            ref = [np.asarray(r) for r in interpret(graph, [x])]
        assert np.array_equal(got[1], ref[1]), (fn.__name__, np.flatnonzero(got[1] != ref[1])[:5])
        if ref[0].dtype.kind == "f":
            assert_matches_numpy(got[0], ref[0], rtol=0.0, atol=0.0)
        else:
            assert_matches_numpy(got[0], ref[0])


def test_gpu_new_size_of_a_signature_reuses_the_kernel(launcher) -> None:
    rng = np.random.default_rng(1)
    for shape in [(300, 999), (301, 1001)]:  # the 1024-element bucket, scalar loads: as 1029 x 917
        x = _data(rng, shape, "float32")
        graph, region, space = single_region(softmax, fusec.ArraySpec(shape, "float32"), name="k")
        before = launcher.compiles
        out = launcher.run_region(region, {graph.inputs[0]: cupy.asarray(x)})
        assert launcher.compiles == before  # precompiled, then the same source for the new size
        with np.errstate(all="ignore"):
            ref = interpret(graph, [x])[0]
        _assert_close(cupy.asnumpy(out[graph.outputs[0]]), ref, rtol=1e-5, atol=1e-6)


def test_gpu_cupy_rawmodule_compiler() -> None:
    """The default compiler (cupy.RawModule, CuPy's disk cache) runs the same kernels."""
    from fusec.runtime.launch import KernelLauncher

    launcher = KernelLauncher(poison=True, compiler="cupy")
    rng = np.random.default_rng(2)
    for fn, shape in [(gelu, (1029, 917)), (softmax, (1029, 917)), (mean_var, (1029, 917)), (col_sum, (23, 23))]:
        x = _data(rng, shape, "float32")
        graph, region, space = single_region(fn, fusec.ArraySpec(shape, "float32"))
        outs = launcher.run_region(region, {graph.inputs[0]: cupy.asarray(x)})
        with np.errstate(all="ignore"):
            refs = interpret(graph, [x])
        for node, ref in zip(graph.outputs, refs):
            _assert_close(cupy.asnumpy(outs[node]), np.asarray(ref), rtol=1e-4, atol=1e-4)


def _large(launcher, fn, x):
    graph, region, space = single_region(fn, fusec.ArraySpec(x.shape, x.dtype))
    outs = launcher.run_region(region, {graph.inputs[0]: x})
    recipe = launcher.recipes(region)[0]
    assert recipe.spec.index_ctype == "long long"
    return [outs[n] for n in graph.outputs]


def test_gpu_pointwise_beyond_int32(launcher) -> None:
    n = 2**31 + 1
    x = cupy.random.randint(-128, 128, size=n, dtype=cupy.int8)
    (y,) = _large(launcher, affine, x)
    assert y.dtype == cupy.int8 and y.shape == (n,)
    assert bool((y == x * 3 + 1).all())
    del x, y
    base = cupy.random.randint(-128, 128, size=2**31 + 8, dtype=cupy.int8)
    view = base[::2]  # 2**30 + 4 elements, offsets up to 2**31 + 6
    (y,) = _large(launcher, affine, view)
    assert bool((y == view * 3 + 1).all())


def test_gpu_reduction_beyond_int32(launcher) -> None:
    n = 2**31 + 2**20
    x = cupy.random.randint(-128, 127, size=n, dtype=cupy.int8)  # at most 126
    x[n - 3] = 127

    def stats(x):
        return x.astype(np.int64).sum(), x.max(), x.argmax()

    total, top, where = _large(launcher, stats, x)
    assert int(total) == int(cupy.sum(x, dtype=cupy.int64))
    assert int(top) == 127 and int(where) == n - 3


def test_gpu_cases_cover_every_kind_dtype_and_layout() -> None:
    kinds = {(WORKLOADS[c.workload][1], c.dtype) for c in CASES}
    assert {(k, d) for k in SIZES for d in DTYPES} <= kinds
    assert {(WORKLOADS[c.workload][1], c.layout) for c in CASES} >= {(k, lay) for k in SIZES for lay in LAYOUTS}


def test_gpu_cases_cover_every_rows_schedule() -> None:
    """The rows cases plan into every rows schedule: held in registers by sub-warps, warps and blocks, with
    vector and scalar loads, and re-read by warps and blocks. Blocks of a bucketed length (``lengths=bucket``)
    take vectors by the pointer's alignment and check each row's start when they run, so their scalar loads
    are the runtime path of a vector kernel, not a kernel of their own."""
    from fusec.kinds import generate
    from fusec.schedule import ArrayLayout

    seen, lengths = set(), set()
    for case in CASES:
        if WORKLOADS[case.workload][1] != "rows":
            continue
        np_in, dev = _inputs(case, None, xp=np)
        graph, region, space = _region(case, np_in)
        if space.kind != "rows":
            continue
        spec = generate(region, {n: ArrayLayout.of(a) for n, a in zip(graph.inputs, dev)}).spec
        seen.add((spec.schedule.variant, spec.row_threads, spec.vec > 1))
        lengths.add((spec.schedule.variant, getattr(spec.schedule, "lengths", None)))
    assert {("warp", 0, False), ("block", 0, False)} <= seen, seen
    assert {("block_regs", "bucket"), ("block_regs", "exact"), ("warp_regs", "bucket")} <= lengths, lengths
    assert {("warp_regs", 1, True), ("warp_regs", 1, False), ("warp_regs", 2, True),
            ("warp_regs", 8, True), ("warp_regs", 8, False), ("warp_regs", 16, True), ("warp_regs", 16, False),
            ("warp_regs", 32, True), ("warp_regs", 32, False), ("block_regs", 256, True),
            ("block_regs", 512, True)} <= seen, seen


def test_gpu_errors_are_fusec_errors() -> None:
    with pytest.raises(FusecError):
        single_region(max_argmax, fusec.ArraySpec((0,), "float32"))
