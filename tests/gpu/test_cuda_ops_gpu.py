"""On a GPU: every elementwise op x dtype loop, every cast and every reduction combine of
``fusec.codegen.cuda_ops`` (with the helpers of ``templates/fusec_device.cuh``) against NumPy.

Each (op, loop) runs in its own tiny kernel ``out[i] = <expression>(x0[i], x1[i], ...)`` on fresh inputs:
the cross product of the dtype's special values (NaN of both signs, +-inf, +-0.0, subnormals, integer
boundaries, shift widths, ...) followed by random data. Values an op's ``sweep_mask`` marks undefined
in NumPy are replaced by 1 in all operands, and float-to-integer casts leave out NaN, inf and values
outside the target's range (undefined in NumPy and C). Outputs are poisoned (0xA5 bytes) before the
launch. Comparisons follow CORRECTNESS.md: integers, bools and comparisons exact (bools byte for byte);
float results of exactly rounded ops bit for bit (the sign of zero too, except for maximum/minimum/
fmax/fmin, whose zero sign NumPy itself does not fix); transcendental results within the elementwise
tolerances with a few ULP more; NaN positions and the sign of infinities always exact.

Reductions: per dtype, one kernel reduces each row serially in one thread and one reduces each row
with a warp (lane-strided partials, then a shuffle butterfly), both from the identity with the op's
lift/combine/result, on random rows and rows built to hit ties, NaNs and extremes.

Kernels are compiled by ``fusec.codegen.nvrtc.compile_cubin`` (NVRTC, -ftz=false as NumPy needs), one module
per dtype, and loaded with CuPy. CuPy's own ``RawModule(code=...)`` appends -ftz=true to every compile, which
flushes float32 subnormals; the last test here documents that.
"""

from __future__ import annotations

import functools
import itertools
import warnings

import ml_dtypes
import numpy as np
import pytest

from fusec.codegen import cuda_ops, nvrtc, render, templates
from fusec.ir import dtypes
from fusec.ir.ops import OPS, OpDef, elementwise_ops, reduction_ops, ufunc_loops
from tests.helpers import GPU_ONLY, TOLERANCES, random_array, seed_of

pytestmark = GPU_ONLY

DTYPES = list(dtypes.SUPPORTED)
N_RANDOM = 1029  # 1024 + 5
POISON = 0xA5
THREADS = 128

# float results NumPy rounds exactly once (or computes exactly): compared bit for bit
EXACT_FLOAT_OPS = frozenset({
    "add", "sub", "mul", "div", "floordiv", "mod", "neg", "pos", "abs", "sign", "square", "reciprocal",
    "sqrt", "floor", "ceil", "trunc", "rint", "copysign", "where", "cast",
    "ldexp", "nextafter", "frexp_mantissa",  # exact scalings and steps of the bits
})
# which zero NumPy returns for maximum(-0.0, 0.0) differs between its own loops: values exact, zero sign free
ZERO_SIGN_FREE_OPS = frozenset({"maximum", "minimum", "fmax", "fmin"})
# transcendental results: CUDA's libm is not glibc's; a few ULP more than the elementwise tolerance
# bfloat16: fusec and ml_dtypes both compute in float32 and round once to bfloat16, so the results differ by at most
# one bfloat16 rounding (the float32 results are within a few float32 ulps, 2^-16 of a bfloat16 ulp), and one
# bfloat16 ulp is at most eps (2^-7) times the value: TOLERANCES' rtol unscaled.
TRANSCENDENTAL_RTOL_FACTOR = {np.dtype(np.float16): 2.0, np.dtype(np.float32): 4.0, np.dtype(np.float64): 1.0,
                              dtypes.BFLOAT16: 1.0}


# ---- inputs ---------------------------------------------------------------------------------------------
def special_values(dt: np.dtype) -> np.ndarray:
    """Boundary values of ``dt`` whose cross product every binary op sees."""
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        bits = 8 * dt.itemsize
        values = [0, 1, 2, 3, 7, bits - 1, bits, bits + 1, info.max, info.max - 1]
        if dt.kind == "i":
            values += [-1, -2, -3, -7, -bits, info.min, info.min + 1]
        return np.array(sorted(set(values)), dtype=dt)
    info = ml_dtypes.finfo(dt)
    values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5,
              3.0, -7.0, 0.1, info.max, -info.max, info.tiny, -info.tiny, info.smallest_subnormal,
              -info.smallest_subnormal, info.eps]
    return np.array(values, dtype=dt)


def _cross(dt: np.dtype, arity: int) -> list[np.ndarray]:
    s = special_values(dt)
    columns = list(zip(*itertools.product(s, repeat=arity))) if arity > 1 else [s]
    return [np.array(c, dtype=dt) for c in columns]


def make_inputs(op: OpDef, in_dtypes: tuple[np.dtype, ...], seed: int) -> list[np.ndarray]:
    """Special cross product, then random data; ``op.sweep_mask`` positions set to 1 in every operand."""
    rng = np.random.default_rng(seed)
    if op.name == "where":
        dt = in_dtypes[1]
        a, b = _cross(dt, 2)
        cond = rng.random(a.size) < 0.5
        xs = [cond, a, b]
    else:  # a loop of two dtypes (uint64 with int64) takes the first's values in each (wrapped: 2**64-1 and -1)
        xs = [x.astype(dt) for x, dt in zip(_cross(in_dtypes[0], len(in_dtypes)), in_dtypes)]
    xs = [np.concatenate([x, random_array(rng, N_RANDOM, dt)]) for x, dt in zip(xs, in_dtypes)]
    if op.sweep_mask is not None:
        mask = np.asarray(op.sweep_mask(in_dtypes[-1], xs), dtype=bool)
        xs = [np.where(mask, x.dtype.type(1), x).astype(x.dtype) for x in xs]
    return xs


def cast_inputs(from_dt: np.dtype, to_dt: np.dtype, seed: int) -> np.ndarray:
    """Values of ``from_dt`` whose cast to ``to_dt`` NumPy defines (float->int: finite, in range)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([special_values(from_dt), random_array(rng, N_RANDOM, from_dt)])
    if dtypes.kind(from_dt) == "f" and to_dt.kind in "iu":
        info = np.iinfo(to_dt)
        with np.errstate(all="ignore"):
            t = np.trunc(x.astype(np.float64))
            ok = np.isfinite(t) & (t >= float(info.min)) & (t < float(info.max) + 1.0)
        x = np.where(ok, x, from_dt.type(0)).astype(from_dt)
    return x


# ---- kernels --------------------------------------------------------------------------------------------
def _kernel(name: str, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, expr_of) -> str:
    params = [f"const {cuda_ops.ctype(d)}* __restrict__ x{k}" for k, d in enumerate(in_dtypes)]
    params += [f"{cuda_ops.ctype(out_dtype)}* __restrict__ out", "long long n"]
    expr = expr_of([f"x{k}[i]" for k in range(len(in_dtypes))])
    return (
        f'extern "C" __global__ void {name}({", ".join(params)}) {{\n'
        f"  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        f"  if (i < n) out[i] = {expr};\n}}\n"
    )


def _ew_name(op_name: str, in_dtypes: tuple[np.dtype, ...]) -> str:
    """The kernel of one loop: ``ew_<op>``, with its input dtypes where they differ (uint64 with int64)."""
    if op_name != "where" and len(set(in_dtypes)) > 1:
        return f"ew_{op_name}_" + "_".join(dtypes.short(d) for d in in_dtypes)
    return f"ew_{op_name}"


def elementwise_source(dt: np.dtype) -> str:
    """One kernel per elementwise op whose loop has inputs of ``dt``, and one per cast from ``dt``."""
    ops = [op.name for op in elementwise_ops()]
    parts = [render.include_block((cuda_ops.BF16_HEADER, *cuda_ops.extra_headers(ops)))]  # every module casts to bf16
    for op in elementwise_ops():
        if op.name == "cast":
            for to in DTYPES:
                parts.append(_kernel(f"cast_to_{dtypes.short(to)}", (dt,), to,
                                     lambda e, to=to: cuda_ops.expression("cast", e, [dt], to)))
            continue
        for loop in ufunc_loops(op):
            if loop[-2] == dt:  # where: (bool, dt, dt) -> dt; uint64 with int64; the others: all inputs dt
                expr_of = lambda e, op=op, loop=loop: cuda_ops.expression(op.name, e, loop[:-1], loop[-1])
                parts.append(_kernel(_ew_name(op.name, loop[:-1]), loop[:-1], loop[-1], expr_of))
    return "\n".join(parts)


REDUCTION_KERNELS = r"""
extern "C" __global__ void serial_{op}(const {t}* __restrict__ x, {out}* __restrict__ out, long long rows,
                                       long long cols) {{
  typedef int index_t;  // argmax/argmin pairs hold the kernel's index type
  long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  {acc_t} acc = {identity};
  for (long long j = 0; j < cols; ++j) {update_elem}
  out[r] = {result};
}}

extern "C" __global__ void warp_{op}(const {t}* __restrict__ x, {out}* __restrict__ out, long long rows,
                                     long long cols) {{
  typedef long long index_t;
  long long r = blockIdx.x;
  int lane = threadIdx.x;  // blockDim.x == 32
  {acc_t} acc = {identity};
  for (long long j = lane; j < cols; j += 32) {update_elem}
  for (int m = 16; m > 0; m >>= 1) acc = {combine_shfl};
  if (lane == 0) out[r] = {result};
}}
"""


def reduction_ops_for(dt: np.dtype) -> list[OpDef]:
    return [op for op in reduction_ops() if op.accepts is None or dtypes.kind(dt) in op.accepts]


def reduction_source(dt: np.dtype) -> str:
    parts = [render.include_block((cuda_ops.BF16_HEADER,) if dt == dtypes.BFLOAT16 else ())]
    for op in reduction_ops_for(dt):
        r = cuda_ops.reduction(op.name, dt)
        parts.append(REDUCTION_KERNELS.format(
            op=op.name, t=cuda_ops.ctype(dt), out=cuda_ops.ctype(r.out_dtype), acc_t=r.acc_ctype,
            identity=r.identity, update_elem=r.update("acc", "x[r * cols + j]", "j"),
            combine_shfl=r.combine("acc", "fc::shfl_xor(acc, m)"), result=r.result("acc"),
        ))
    return "\n".join(parts)


@functools.cache
def _module(kind: str, dt: np.dtype):
    """fusec's own NVRTC cubin (not CuPy's RawModule(code=...), which forces -ftz=true and so flushes
    float32 subnormals to zero, see test_cupy_rawmodule_flushes_float32_subnormals)."""
    import cupy

    source = elementwise_source(dt) if kind == "elementwise" else reduction_source(dt)
    major, minor = cupy.cuda.Device().compute_capability
    cubin = nvrtc.compile_cubin(source, arch=f"sm_{major}{minor}").cubin
    module = cupy.cuda.function.Module()
    module.load(cubin)
    return module


def _launch(kernel_name: str, module_kind: str, module_dt: np.dtype, inputs: list[np.ndarray],
            out_dtype: np.dtype) -> np.ndarray:
    import cupy

    n = inputs[0].size
    kernel = _module(module_kind, module_dt).get_function(kernel_name)
    d_in = [cupy.asarray(x) for x in inputs]
    out = cupy.empty(n, dtype=out_dtype)
    out.view(cupy.uint8).fill(POISON)
    kernel(((n + THREADS - 1) // THREADS,), (THREADS,), (*d_in, out, np.int64(n)))
    cupy.cuda.runtime.deviceSynchronize()
    return out.get()


def _numpy(fn, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


# ---- comparisons ----------------------------------------------------------------------------------------
def assert_same(op_name: str, got: np.ndarray, expected: np.ndarray, inputs: list[np.ndarray]) -> None:
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)

    def where_first_bad(bad: np.ndarray) -> str:
        k = int(np.argmax(bad))
        args = ", ".join(repr(x[k]) for x in inputs)
        return f"{op_name}({args}): got {got[k]!r}, NumPy {expected[k]!r} ({int(bad.sum())} of {bad.size} differ)"

    if expected.dtype.kind == "b":  # byte for byte: a poisoned (unwritten) bool is not a bool
        bad = got.view(np.uint8) != expected.view(np.uint8)
        assert not bad.any(), where_first_bad(bad)
        return
    if expected.dtype.kind in "iu":
        bad = got != expected
        assert not bad.any(), where_first_bad(bad)
        return
    nan_g, nan_e = np.isnan(got), np.isnan(expected)
    bad = nan_g != nan_e
    assert not bad.any(), "NaN positions: " + where_first_bad(bad)
    inf_e = np.isinf(expected)
    bad = (np.isinf(got) != inf_e) | (inf_e & (np.signbit(got) != np.signbit(expected)))
    assert not bad.any(), "infinities: " + where_first_bad(bad)
    finite = ~(nan_e | inf_e)
    if op_name in EXACT_FLOAT_OPS or op_name in ZERO_SIGN_FREE_OPS:
        bad = finite & (got != expected)
        if op_name in EXACT_FLOAT_OPS:
            bad |= finite & (np.signbit(got) != np.signbit(expected))
        assert not bad.any(), "not bit-exact: " + where_first_bad(bad)
        return
    rtol, atol = TOLERANCES[expected.dtype]
    rtol *= TRANSCENDENTAL_RTOL_FACTOR[expected.dtype]
    g64, e64 = got.astype(np.float64), expected.astype(np.float64)
    with np.errstate(all="ignore"):
        bad = finite & ~(np.abs(g64 - e64) <= atol + rtol * np.abs(e64))
    assert not bad.any(), f"beyond rtol={rtol}, atol={atol}: " + where_first_bad(bad)
    zeros = finite & (g64 == 0) & (e64 == 0)
    bad = zeros & (np.signbit(got) != np.signbit(expected))
    assert not bad.any(), "sign of zero: " + where_first_bad(bad)


# ---- elementwise ----------------------------------------------------------------------------------------
LOOP_CASES = [(op, loop) for op in elementwise_ops() if op.name != "cast" for loop in ufunc_loops(op)]


def _loop_id(case) -> str:
    op, loop = case
    return f"{op.name}-" + "-".join(dtypes.short(d) for d in loop)


@pytest.mark.parametrize("case", LOOP_CASES, ids=_loop_id)
def test_cuda_ops_gpu_elementwise_matches_numpy(case) -> None:
    op, loop = case
    in_dtypes, out_dtype = loop[:-1], loop[-1]
    xs = make_inputs(op, in_dtypes, seed_of("cuda_ops_gpu", op.name, loop))
    reference = np.where if op.name == "where" else op.ufunc
    expected = np.asarray(_numpy(reference, *xs))
    assert expected.dtype == out_dtype
    got = _launch(_ew_name(op.name, in_dtypes), "elementwise", in_dtypes[-1], xs, out_dtype)
    assert_same(op.name, got, expected, xs)


@pytest.mark.parametrize("to_dt", DTYPES, ids=dtypes.short)
@pytest.mark.parametrize("from_dt", DTYPES, ids=dtypes.short)
def test_cuda_ops_gpu_cast_matches_numpy(from_dt: np.dtype, to_dt: np.dtype) -> None:
    x = cast_inputs(from_dt, to_dt, seed_of("cuda_ops_gpu cast", from_dt, to_dt))
    expected = _numpy(lambda v: v.astype(to_dt), x)
    got = _launch(f"cast_to_{dtypes.short(to_dt)}", "elementwise", from_dt, [x], to_dt)
    assert_same("cast", got, expected, [x])


# ---- reductions -----------------------------------------------------------------------------------------
REDUCTION_CASES = [(op, dt) for dt in DTYPES for op in reduction_ops_for(dt)]
COLS = [1, 7, 100, 1029]


def reduction_rows(op: OpDef, dt: np.dtype, cols: int, seed: int) -> np.ndarray:
    """Random rows (most without special values, so sums stay finite), rows with specials mixed in, then
    rows built to hit ties, NaNs, extremes and identities."""
    rng = np.random.default_rng(seed)
    plain, mixed = random_array(rng, (48, cols), dt, special=False), random_array(rng, (16, cols), dt)
    if op.name == "prod" and dtypes.kind(dt) == "f":  # magnitudes near 1 so products stay finite
        plain = (rng.uniform(0.5, 2.0, plain.shape) * rng.choice([-1.0, 1.0], plain.shape)).astype(dt)
    s = special_values(dt)
    designed = [np.full(cols, v, dtype=dt) for v in s]  # constant rows: all -inf, all NaN, all MIN, ...
    if cols >= 3:
        for lo, hi in [(s[0], s[-1]), (s[-1], s[0])]:
            row = np.full(cols, lo, dtype=dt)
            row[cols // 3] = hi
            row[2 * cols // 3] = hi  # the extreme twice: the first must win
            designed.append(row)
        if dtypes.kind(dt) == "f":
            row = rng.standard_normal(cols).astype(dt)
            row[[1, cols - 1]] = np.nan  # two NaNs
            designed.append(row)
            designed.append(np.where(np.arange(cols) % 2 == 0, dt.type(-0.0), dt.type(0.0)).astype(dt))
    x = np.concatenate([plain, mixed, np.stack(designed)]).astype(dt)
    if dtypes.kind(dt) == "f" and op.name in ("sum", "prod"):  # finite values in range: no overflow inside a row
        limit = {"sum": 100.0 if dt == np.float16 else np.inf, "prod": 2.0}[op.name]
        x64 = x.astype(np.float64)
        x = np.where(np.isfinite(x64) & (np.abs(x64) > limit), dt.type(1.5), x).astype(dt)
    return np.ascontiguousarray(x)


def reduction_reference(op: OpDef, x: np.ndarray) -> np.ndarray:
    dt = x.dtype
    if op.name in ("argmax", "argmin"):
        return getattr(np, op.name)(x, axis=1)
    if op.name in ("sum", "prod") and dtypes.kind(dt) == "f":
        ufunc = np.add if op.name == "sum" else np.multiply
        return ufunc.reduce(x.astype(np.float64), axis=1)  # compared with a tolerance below
    combine = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "nanmax": np.fmax,
               "nanmin": np.fmin, "any": np.logical_or, "all": np.logical_and}[op.name]
    return combine.reduce(x, axis=1, dtype=dt)  # integers wrap in dt; bool sum/prod are or/and


def _launch_reduction(kind: str, op: OpDef, x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    import cupy

    rows, cols = x.shape
    kernel = _module("reduction", x.dtype).get_function(f"{kind}_{op.name}")
    d_x = cupy.asarray(x)
    out = cupy.empty(rows, dtype=out_dtype)
    out.view(cupy.uint8).fill(POISON)
    if kind == "serial":
        grid, block = ((rows + 31) // 32,), (32,)
    else:
        grid, block = (rows,), (32,)
    kernel(grid, block, (d_x, out, np.int64(rows), np.int64(cols)))
    cupy.cuda.runtime.deviceSynchronize()
    return out.get()


@pytest.mark.parametrize("kind", ["serial", "warp"])
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("case", REDUCTION_CASES, ids=lambda c: f"{c[0].name}-{dtypes.short(c[1])}")
def test_cuda_ops_gpu_reduction_matches_numpy(case, cols: int, kind: str) -> None:
    op, dt = case
    x = reduction_rows(op, dt, cols, seed_of("cuda_ops_gpu reduction", op.name, dt, cols))
    r = cuda_ops.reduction(op.name, dt)
    got = _launch_reduction(kind, op, x, r.out_dtype)
    expected = np.asarray(_numpy(reduction_reference, op, x))
    if not (op.name in ("sum", "prod") and dtypes.kind(dt) == "f"):
        # max/min/nanmax/nanmin compare like their combine ops: exact values, zero sign free
        assert_same(op.combine, got, expected.astype(r.out_dtype), [x])
        return
    # float sum/prod: against float64, within the bound of a serial accumulation plus the final rounding
    expected_out = _numpy(expected.astype, dt)  # where the result overflows dt, NumPy's is inf too
    nan_e, inf_e = np.isnan(expected_out), np.isinf(expected_out)
    bad = np.isnan(got) != nan_e
    assert not bad.any(), f"{op.name}: NaN rows differ, first {int(np.argmax(bad))}"
    bad = (np.isinf(got) != inf_e) | (inf_e & (np.signbit(got) != np.signbit(expected_out)))
    assert not bad.any(), f"{op.name}: infinite rows differ, first {int(np.argmax(bad))}"
    reduce = np.add.reduce if op.name == "sum" else np.multiply.reduce
    magnitude = _numpy(reduce, np.abs(x.astype(np.float64)), 1)
    bound = (cols * ml_dtypes.finfo(r.acc_dtype).eps * magnitude + ml_dtypes.finfo(dt).eps * np.abs(expected)
             + ml_dtypes.finfo(dt).smallest_subnormal)
    finite = ~(nan_e | inf_e)
    err = _numpy(lambda: np.abs(got.astype(np.float64) - expected))
    bad = finite & ~(err <= bound)
    k = int(np.argmax(bad))
    assert not bad.any(), f"{op.name} row {k}: got {got[k]!r}, float64 {expected[k]!r}, bound {bound[k]:.3g}"


def test_cupy_rawmodule_flushes_float32_subnormals() -> None:
    """CuPy compiles every RawModule(code=...) with -ftz=true (cupy/cuda/compiler.py): float32 subnormals
    become 0, unlike NumPy. fusec's helpers compile there (with nvrtc.include_options()), but a runtime
    that wants NumPy's float32 subnormals must load fusec's own cubin. float64 is not affected."""
    import cupy

    source = templates.render(cuda_ops.DEVICE_HEADER) + (
        'extern "C" __global__ void k(const float* a, const float* b, float* out, const double* c, double* out64) {\n'
        f"  out[0] = {cuda_ops.expression('add', ['a[0]', 'b[0]'], [dtypes.FLOAT32] * 2, dtypes.FLOAT32)};\n"
        f"  out64[0] = {cuda_ops.expression('add', ['c[0]', 'c[0]'], [dtypes.FLOAT64] * 2, dtypes.FLOAT64)};\n}}\n"
    )
    kernel = cupy.RawModule(code=source, options=nvrtc.include_options()).get_function("k")
    tiny = np.float32(ml_dtypes.finfo(np.float32).smallest_subnormal)
    a, b = cupy.asarray([tiny]), cupy.asarray([np.float32(0)])
    c = cupy.asarray([ml_dtypes.finfo(np.float64).smallest_subnormal])
    out, out64 = cupy.full(1, 7, cupy.float32), cupy.full(1, 7, cupy.float64)
    kernel((1,), (1,), (a, b, out, c, out64))
    assert float(out[0]) == 0.0  # NumPy: tiny + 0 == tiny
    assert float(out64[0]) == 2 * ml_dtypes.finfo(np.float64).smallest_subnormal


def test_cuda_ops_gpu_every_op_is_swept() -> None:
    swept = {op.name for op, _ in LOOP_CASES} | {"cast"} | {op.name for op, _ in REDUCTION_CASES}
    assert swept == {op.name for op in OPS.values() if op.is_elementwise or op.is_reduction}
