"""The CUDA side of the op table: every op has an entry, every dtype loop an expression, and the
device-helper header plus every expression compiles with NVRTC (no GPU needed).

The NVRTC sweep builds ONE kernel per input dtype that applies every elementwise op of every loop
with that input dtype, every cast from it, ``where``, every reduction's identity/lift/combine/result
and constants of its special values, and checks each expression's C++ type at compile time against
``ctype(out_dtype)``. 12 dtypes x 2 archs = 24 NVRTC compiles.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from fusec.codegen import cuda_ops, nvrtc, render, templates
from fusec.ir import dtypes
from fusec.ir.ops import OPS, Kind, elementwise_ops, reduction_identity, reduction_ops, ufunc_loops
from fusec.support.errors import FusecTypeError, FusecValueError

ir = dtypes.ir_dtype  # the dtype an IR short name ("f16", "i8" = int8) spells; cuda_ops takes np.dtype values

DTYPES = list(dtypes.SUPPORTED)
ARCHS = ["sm_90", "sm_80"]


# ---- the table is complete ---------------------------------------------------------------------------
def test_cuda_ops_every_elementwise_op_has_a_cuda_entry() -> None:
    names = {op.name for op in elementwise_ops()}
    missing = names - set(cuda_ops.ELEMENTWISE)
    assert not missing, f"elementwise ops without a CUDA entry in cuda_ops.ELEMENTWISE: {sorted(missing)}"
    stale = set(cuda_ops.ELEMENTWISE) - names
    assert not stale, f"CUDA entries for ops that are not elementwise ops of OPS: {sorted(stale)}"


def test_cuda_ops_every_reduction_has_a_cuda_entry() -> None:
    names = {op.name for op in reduction_ops()}
    assert set(cuda_ops.REDUCTIONS) == names
    for op in reduction_ops():
        assert (cuda_ops.REDUCTIONS[op.name].pair_helper is not None) == op.index_result, op.name
        assert (cuda_ops.REDUCTIONS[op.name].next_helper is not None) == op.index_result, op.name


def test_cuda_ops_every_helper_is_defined_in_the_header() -> None:
    header = templates.render(cuda_ops.DEVICE_HEADER)
    for c in cuda_ops.ELEMENTWISE.values():  # helpers of their own header are there, and not in the common one
        if c.header is not None:
            assert re.search(rf"\b{c.helper}\b\s*\(", templates.render(c.header)), c.helper
            assert not re.search(rf"\b{c.helper}\b\s*\(", header), c.helper
    helpers = {c.helper for c in cuda_ops.ELEMENTWISE.values() if c.header is None}
    helpers |= {c.pair_helper for c in cuda_ops.REDUCTIONS.values() if c.pair_helper}
    helpers |= {c.next_helper for c in cuda_ops.REDUCTIONS.values() if c.next_helper}
    helpers |= set(cuda_ops._FLOAT_REDUCE_HELPERS.values())
    for helper in helpers:
        assert re.search(rf"\b{helper}\b\s*\(", header) or re.search(rf"\({helper},", header), helper


@pytest.mark.parametrize("op", elementwise_ops(), ids=lambda op: op.name)
def test_cuda_ops_every_loop_has_an_expression(op) -> None:
    loops = ufunc_loops(op)
    if op.name == "cast":
        loops = [(a, b) for a in DTYPES for b in DTYPES]
    assert loops, op.name
    for loop in loops:
        names = [f"x{i}" for i in range(op.arity)]
        expr = cuda_ops.expression(op.name, names, loop[:-1], loop[-1])
        helper = cuda_ops.ELEMENTWISE[op.name].helper
        assert expr.startswith(f"fc::{helper}") and all(n in expr for n in names), expr


# ---- expressions, types and literals ------------------------------------------------------------------
def test_cuda_ops_expression_spells_helpers() -> None:
    f32, f16 = dtypes.FLOAT32, dtypes.FLOAT16
    assert cuda_ops.expression("add", ["a", "b"], [f32, f32], f32) == "fc::add(a, b)"
    assert cuda_ops.expression("maximum", ["a", "b"], [ir("f16"), ir("f16")], ir("f16")) == "fc::maximum(a, b)"
    i8 = ir("i8")
    assert cuda_ops.expression("where", ["c", "a", "b"], [ir("bool"), i8, i8], i8) == "fc::where(c, a, b)"
    assert cuda_ops.expression("cast", ["x"], [f16], ir("u64")) == "fc::cast<unsigned long long>(x)"
    assert cuda_ops.cast_expression("x", f32, f32) == "x"


def test_cuda_ops_expression_rejects_what_numpy_has_no_loop_for() -> None:
    with pytest.raises(FusecTypeError, match="not one of NumPy's loops"):
        cuda_ops.expression("div", ["a", "b"], [ir("i32"), ir("i32")], ir("i32"))  # NumPy: int / int -> float64
    with pytest.raises(FusecTypeError):
        cuda_ops.expression("add", ["a", "b"], [ir("f32"), ir("f64")], ir("f64"))  # operands are cast first
    with pytest.raises(FusecTypeError):
        cuda_ops.expression("bitwise_and", ["a", "b"], [ir("f32"), ir("f32")], ir("f32"))
    with pytest.raises(FusecValueError, match="takes 2 operands"):
        cuda_ops.expression("add", ["a"], [ir("f32")], ir("f32"))
    with pytest.raises(FusecValueError, match="not an elementwise op"):
        cuda_ops.expression("sum", ["a"], [ir("f32")], ir("f32"))


def test_cuda_ops_ctype_of_every_dtype() -> None:
    expected = {
        "bool": "bool", "i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
        "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned int", "u64": "unsigned long long",
        "f16": "__half", "f32": "float", "f64": "double", "bf16": "__nv_bfloat16",
    }
    assert {dtypes.short(dt): cuda_ops.ctype(dt) for dt in DTYPES} == expected
    assert cuda_ops.accumulator_ctype(ir("f16")) == "float"
    assert cuda_ops.accumulator_ctype(ir("f32")) == "float"
    assert cuda_ops.accumulator_ctype(ir("i8")) == "signed char"


def _parse_float_literal(text: str, dt: np.dtype) -> np.ndarray:
    """The bits a literal denotes, read the way the CUDA compiler reads it."""
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    if m := re.fullmatch(r"__ushort_as_half\(\(unsigned short\)(0x[0-9a-f]+)\)", text):
        return np.array(int(m.group(1), 16), dtype=uint)
    if m := re.fullmatch(r"__int_as_float\(\(int\)(0x[0-9a-f]+)U\)", text):
        return np.array(int(m.group(1), 16), dtype=uint)
    if m := re.fullmatch(r"__longlong_as_double\(\(long long\)(0x[0-9a-f]+)ULL\)", text):
        return np.array(int(m.group(1), 16), dtype=uint)
    m = re.fullmatch(r"\(?(-?0x[0-9a-f.]+p[-+]\d+)(f?)\)?", text)
    assert m, text
    assert (m.group(2) == "f") == (dt == dtypes.FLOAT32), text
    value = float.fromhex(m.group(1))
    return np.array(value, dtype=dt).view(uint)  # exact: the test below checks it round-trips


@pytest.mark.parametrize("dt", [dtypes.FLOAT16, dtypes.FLOAT32, dtypes.FLOAT64], ids=dtypes.short)
def test_cuda_ops_float_literals_are_bit_exact(dt: np.dtype, rng: np.random.Generator) -> None:
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    info = ml_dtypes.finfo(dt)
    values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.1, info.max, -info.max,
              info.tiny, info.smallest_subnormal, -info.smallest_subnormal, info.eps]
    values = np.concatenate([np.array(values, dtype=dt), (rng.standard_normal(200) * 1e3).astype(dt)])
    for v in values:
        text = cuda_ops.literal(v, dt)
        assert _parse_float_literal(text, dt) == np.array(v, dtype=dt).view(uint), (v, text)
    # a NaN payload survives
    payload = np.array(0x7FC00123, dtype=np.uint32).view(np.float32)[()]
    assert cuda_ops.literal(payload, ir("f32")) == "__int_as_float((int)0x7fc00123U)"


def test_cuda_ops_integer_literals_are_exact_and_typed() -> None:
    cases = {
        (True, "bool"): "true",
        (0, "bool"): "false",
        (-128, "i8"): "((signed char)-128)",
        (65535, "u16"): "((unsigned short)65535)",
        (-(2**31), "i32"): "(-2147483647 - 1)",
        (2**31 - 1, "i32"): "2147483647",
        (-5, "i32"): "(-5)",
        (-(2**63), "i64"): "(-9223372036854775807LL - 1LL)",
        (2**63 - 1, "i64"): "9223372036854775807LL",
        (-1, "i64"): "(-1LL)",
        (2**32 - 1, "u32"): "4294967295U",
        (2**64 - 1, "u64"): "18446744073709551615ULL",
        (np.uint64(2**64 - 1), "u64"): "18446744073709551615ULL",
        (3.0, "u8"): "((unsigned char)3)",
    }
    for (value, dt), text in cases.items():
        assert cuda_ops.literal(value, ir(dt)) == text
    with pytest.raises(FusecValueError):
        cuda_ops.literal(256, ir("u8"))
    with pytest.raises(FusecValueError):
        cuda_ops.literal(1.5, ir("i32"))


@pytest.mark.parametrize("op", reduction_ops(), ids=lambda op: op.name)
def test_cuda_ops_reduction_pieces(op) -> None:
    for dt in DTYPES:
        if op.accepts is not None and dt.kind not in op.accepts:
            with pytest.raises(FusecTypeError):
                cuda_ops.reduction(op.name, dt)
            continue
        r = cuda_ops.reduction(op.name, dt)
        acc = cuda_ops.accumulator_dtype(dt)
        value = cuda_ops.literal(reduction_identity(op.name, dt), acc)
        if op.index_result:
            assert r.acc_ctype == f"fc::ArgPair<{cuda_ops.ctype(acc)}, index_t>"
            assert r.identity == f"fc::make_arg_pair({value}, fc::largest_index<index_t>())"
            assert r.out_dtype == dtypes.INT64 and r.result("a") == "(long long)(a).index"
            assert r.combine("a", "b") == f"fc::{op.name}_combine(a, b)"
            assert r.update("a", "x", "i").startswith(f"fc::{op.name}_next(a, ")
            assert r.update("a", "x", "i").endswith(", (index_t)(i));")
            with pytest.raises(FusecValueError):
                r.update("a", "x")
        else:
            assert r.acc_ctype == cuda_ops.ctype(acc) and r.identity == value and r.out_dtype == dt
            if op.name in ("max", "min") and acc == np.float32:  # float16 and float32: one instruction
                assert r.combine("a", "b") == f"fc::reduce_{op.name}(a, b)"
            else:
                assert r.combine("a", "b") == f"fc::{cuda_ops.ELEMENTWISE[op.combine].helper}(a, b)"
            assert r.update("a", "x") == f"a = {r.combine('a', r.lift('x'))};"
    half_sum = cuda_ops.reduction("sum", ir("f16"))
    assert half_sum.acc_ctype == "float"
    assert half_sum.lift("x") == "fc::cast<float>(x)" and half_sum.result("a") == "fc::cast<__half>(a)"


def test_cuda_ops_reduction_identities_are_right() -> None:
    # max([-inf, -inf]) == -inf: the identity of max must not be finite (cupy#8180, #7424, #8876)
    assert cuda_ops.reduction("max", ir("f32")).identity == "__int_as_float((int)0xff800000U)"
    assert cuda_ops.reduction("min", ir("f64")).identity == "__longlong_as_double((long long)0x7ff0000000000000ULL)"
    assert cuda_ops.reduction("nanmax", ir("f16")).identity == "__int_as_float((int)0x7fc00000U)"  # fmax ignores it
    assert cuda_ops.reduction("max", ir("i8")).identity == "((signed char)-128)"
    assert cuda_ops.reduction("min", ir("u64")).identity == "18446744073709551615ULL"
    assert cuda_ops.reduction("prod", ir("f16")).identity == "0x1.0000000000000p+0f"
    assert cuda_ops.reduction("all", ir("bool")).identity == "true"


# ---- the header and every expression compile with NVRTC ----------------------------------------------
def _special_constants(dt: np.dtype) -> list[object]:
    if dt.kind == "b":
        return [False, True]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return [info.min, info.max, 0, 1] + ([-1] if dt.kind == "i" else [])
    info = ml_dtypes.finfo(dt)
    return [np.nan, np.inf, -np.inf, -0.0, 0.1, info.max, info.smallest_subnormal]


def sweep_source(dt: np.dtype) -> str:
    """One kernel reading two operands of ``dt`` (and a bool condition) that stores every elementwise op,
    cast, where and reduction piece with inputs of ``dt``, each checked to have the C++ type of its
    result dtype. Outputs go to one buffer per result dtype, at slot * n + i."""
    t = cuda_ops.ctype(dt)
    slots: dict[np.dtype, int] = {d: 0 for d in DTYPES}
    body: list[str] = []

    def store(expr: str, out: np.dtype, what: str) -> None:
        slot = slots[out]
        slots[out] += 1
        body.append(f"  out_{dtypes.short(out)}[{slot} * n + i] = typed<{cuda_ops.ctype(out)}>({expr});  // {what}")

    operands = ["a", "b", "c"]
    for op in elementwise_ops():
        if op.name == "cast":
            for to in DTYPES:
                store(cuda_ops.expression("cast", ["a"], [dt], to), to, f"cast to {to}")
            continue
        for loop in ufunc_loops(op):
            if op.name == "where":
                if loop[1] == dt:
                    store(cuda_ops.expression("where", ["cond", "a", "b"], loop[:-1], loop[-1]), dt, "where")
                continue
            if loop[0] != dt:
                continue
            store(cuda_ops.expression(op.name, operands[: op.arity], loop[:-1], loop[-1]), loop[-1], op.name)
            if op.arity == 2:  # a constant operand: the literal must have the operand's C++ type
                for k, value in enumerate(_special_constants(dt)):
                    const = cuda_ops.literal(value, dt)
                    store(cuda_ops.expression(op.name, ["a", const], loop[:-1], loop[-1]), loop[-1],
                          f"{op.name} with constant #{k}")
    reductions = []
    for op in reduction_ops():
        if op.accepts is not None and dtypes.kind(dt) not in op.accepts:
            continue
        r = cuda_ops.reduction(op.name, dt)
        acc = f"acc_{op.name}"
        reductions += [
            f"  {r.acc_ctype} {acc} = {r.identity};",
            f"  {r.update(acc, 'a', 'i')}",
            f"  {acc} = {r.combine(acc, r.lift('b', 'i + n'))};",
            f"  {acc} = {r.combine(acc, f'fc::shfl_xor({acc}, 1)')};",
            f"  {acc} = {r.combine(acc, f'fc::shfl_down({acc}, 2)')};",
        ]
        store(r.result(acc), r.out_dtype, op.name)
    outputs = "".join(f", {cuda_ops.ctype(d)}* __restrict__ out_{dtypes.short(d)}" for d in DTYPES)
    return (
        # every sweep stores casts to every dtype, bfloat16 too: its header
        render.include_block((cuda_ops.BF16_HEADER,) + cuda_ops.extra_headers(op.name for op in elementwise_ops()))
        + "\ntemplate <class Want, class Got> __device__ __forceinline__ Want typed(Got v) {\n"
        + '  static_assert(fc::same<Want, Got>::value, "expression has the wrong C++ type");\n'
        + "  return v;\n}\n\n"
        + f'extern "C" __global__ void sweep_{dtypes.short(dt)}(const {t}* __restrict__ in_a, '
        + f"const {t}* __restrict__ in_b, const {t}* __restrict__ in_c, const bool* __restrict__ in_cond"
        + f"{outputs}, long long n) {{\n"
        + "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        + "  if (i >= n) return;\n"
        + "  typedef int index_t;  // the kernel's index type, which argmax/argmin pairs hold\n"
        + f"  {t} a = in_a[i], b = in_b[i], c = in_c[i];\n  bool cond = in_cond[i];\n"
        + "\n".join(reductions + body)
        + "\n}\n"
    )


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt", DTYPES, ids=dtypes.short)
def test_cuda_ops_sweep_kernel_compiles_with_nvrtc(dt: np.dtype, arch: str) -> None:
    source = sweep_source(dt)
    result = nvrtc.compile_cubin(source, arch=arch)
    assert result.cubin[:4] == b"\x7fELF"
    kernel = result.kernel(f"sweep_{dtypes.short(dt)}")
    assert kernel.registers > 0


def test_cuda_ops_sweep_covers_every_loop() -> None:
    stored = 0
    for dt in DTYPES:
        stored += sweep_source(dt).count("= typed<")
    loops = sum(len(ufunc_loops(op)) for op in elementwise_ops())
    assert stored > loops + len(DTYPES) ** 2  # every loop, every cast, plus constants and reductions


@pytest.mark.parametrize("name", [cuda_ops.DEVICE_HEADER, cuda_ops.SPECIAL_HEADER])
def test_cuda_ops_header_renders_unchanged(name: str) -> None:
    """The headers have no Jinja syntax in them: rendering returns the file as written."""
    path = templates._CHECKOUT_TEMPLATES / name
    assert templates.render(name) == path.read_text()


def test_cuda_ops_extra_headers_only_for_ops_that_need_them() -> None:
    assert cuda_ops.extra_headers(["add", "exp", "where"]) == ()
    assert cuda_ops.extra_headers(["add", "erf", "erfc"]) == (cuda_ops.SPECIAL_HEADER,)
    common = [line for line in render.include_block().splitlines() if line.startswith("#include")]
    assert common == ['#include "fusec_device.cuh"', '#include "schedule.cuh"']
    assert render.include_block([cuda_ops.SPECIAL_HEADER]).splitlines()[-2] == '#include "fusec_special.cuh"'


def test_templates_render_is_strict() -> None:
    import jinja2

    env = templates.environment()
    assert env.undefined is jinja2.StrictUndefined and env.trim_blocks and env.lstrip_blocks
    assert env.keep_trailing_newline
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_cuda_ops_kinds_of_table_ops() -> None:
    """Ops of the other kinds need no CUDA expression (sources are parameters, layouts index math)."""
    for op in OPS.values():
        if op.kind in (Kind.SOURCE, Kind.LAYOUT):
            assert op.name not in cuda_ops.ELEMENTWISE


def test_cuda_ops_docstring_examples_hold() -> None:
    import doctest

    result = doctest.testmod(cuda_ops)
    assert result.attempted >= 8 and result.failed == 0


def test_uint64_with_int64_comparisons_are_loops_of_their_own() -> None:
    """NumPy 2 compares uint64 with int64 exactly through loops of the two dtypes (qQ->?, Qq->?): with ldexp's float
    with int loops, they are the only mixed loops of fusec's ops, and each prints a call of the mixed overloads in
    fusec_device.cuh."""
    u64, i64 = np.dtype(np.uint64), np.dtype(np.int64)
    mixed = sorted((op.name, loop) for op in elementwise_ops() if op.name not in ("cast", "where", "ldexp")
                   for loop in ufunc_loops(op) if len(set(loop[:-1])) > 1)
    assert [name for name, _ in mixed] == sorted(n for n in ("eq", "ne", "lt", "le", "gt", "ge") for _ in range(2))
    assert {loop for _, loop in mixed} == {(u64, i64, np.dtype(bool)), (i64, u64, np.dtype(bool))}
    assert cuda_ops.expression("gt", ["a", "b"], [u64, i64], np.dtype(bool)) == "fc::gt(a, b)"
    import fusec

    fused = fusec.fuse(lambda a, b: (a > b, b == a))
    source = fused.cuda_source(fusec.ArraySpec((100,), "uint64"), fusec.ArraySpec((100,), "int32"), full=True)
    assert "fc::gt(" in source and "fc::eq(" in source
    nvrtc.compile_cubin(source)  # the mixed overloads resolve (an ambiguous call does not compile)


def test_ldexp_loops_are_numpys_float_with_int_loops() -> None:
    """``numpy.ldexp.types`` of fusec's dtypes: float16/32/64 with int32 ('i') or int64 ('l'), the float out, and
    ml_dtypes' bfloat16 loops with the same exponents; each loop's call resolves to the helper's one overload
    (``fc::ldexp(float type, long long)``) and compiles."""
    import fusec

    want = [(np.dtype(t[0]), np.dtype(t[1]), np.dtype(t[-1])) for t in np.ldexp.types
            if t[0] in "efd" and t[1] in "il"]
    want += [(dtypes.BFLOAT16, np.dtype(n), dtypes.BFLOAT16) for n in ("int32", "int64")]
    assert sorted(ufunc_loops(OPS["ldexp"]), key=str) == sorted(want, key=str) and len(want) == 8
    for a, b, _ in want:
        source = fusec.fuse(lambda x, n: np.ldexp(x, n)).cuda_source(
            fusec.ArraySpec((100,), a), fusec.ArraySpec((100,), b), full=True)
        assert "fc::ldexp(" in source
        nvrtc.compile_cubin(source)


@pytest.mark.parametrize("dt", [dtypes.BFLOAT16, dtypes.FLOAT16, dtypes.UINT64], ids=dtypes.short)
def test_the_gpu_op_tests_hand_written_modules_compile(dt: np.dtype) -> None:
    """tests/gpu/test_cuda_ops_gpu.py launches modules it writes itself (every loop of every op, every cast, every
    reduction), which the build-only mode does not compile: here they are, for the dtypes whose helpers live in
    headers of their own (bfloat16) or take mixed loops (uint64). Its first GPU run failed 860 cases on a missing
    bfloat16 header that this catches."""
    from tests.gpu import test_cuda_ops_gpu as gpu_ops

    nvrtc.compile_cubin(gpu_ops.elementwise_source(dt))
    nvrtc.compile_cubin(gpu_ops.reduction_source(dt))
