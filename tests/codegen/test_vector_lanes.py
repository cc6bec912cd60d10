"""Lanes of 16-byte vectors of 1-byte integers, as the kernels read them, give NumPy's values after NVRTC.

GPU fuzz graph 2775 (2026-12-07, H100): ``nanmin(y // 2)`` of an int8 array in a vectorized reduce-all gave 64
where NumPy gives -64. The kernel's source is right; NVRTC 13.5 miscompiles it: a thread's elements come from
one 16-byte vector, and where the kernel read lane j as ``v.v[j]``, NVVM widened the 8-bit arithmetic on the
first byte of each 16-bit half to 16 bits without sign-extending that byte (``add.s16 r, half, x`` and then
``min.s16``: the next byte became the high bits; -128 // 2 came out as 0x..c040, stored as 64). The kernels now
read 1-byte lanes through ``fs::lane`` (``templates/schedule.cuh``), whose ``bfe`` extends them first.

Each case here is the loop body a vectorized kernel runs (the template's lane read, the op table's CUDA
expression, the reduction's update), compiled by NVRTC to PTX and evaluated for one thread on the CPU
(``tests/codegen/ptx_eval.py``) against NumPy.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from fusec.codegen import cuda_ops, templates
from fusec.codegen.render import include_block
from fusec.codegen.spec import Access
from tests.codegen import ptx_eval

# (name, op, second operand or None): elementwise ops whose 8-bit arithmetic NVVM widened without the sign extension
OPS = [("sub1", "sub", 1), ("neg", "neg", None), ("abs", "abs", None), ("floordiv2", "floordiv", 2),
       ("floordiv4", "floordiv", 4), ("floordiv3", "floordiv", 3), ("mod8", "mod", 8), ("rshift1", "right_shift", 1),
       ("mul3", "mul", 3)]
# fc::fmin, fc::maximum, and a count of the lanes below a bound (a comparison, then an int64 sum): any 16-bit
# min, max or comparison after the op showed it
REDUCTIONS = ["nanmin", "max", "count_below"]
BOUND = -10
DTYPES = ["int8", "uint8"]
LANES = 16
FUZZ_2775 = [83, 3, 0, -1, 127, 126, -11, -127, 3, -17, 127, 19, -128, -128, -1, 1]  # its y, flattened


def _kernel(name: str, dtype: np.dtype, op: str, operand: int | None, reduction: str) -> str:
    """The loop a vectorized reduce-all runs over one 16-byte vector (templates' lane read, op table expression,
    reduction update), for one thread: ``out[0]`` gets the reduction of the 16 lanes."""
    ct = cuda_ops.ctype(dtype)
    lane = templates.environment().get_template("_kernel.cu.j2").module.lane(
        Access("ld0", "in0", ct, None, "i", dtype.itemsize), "ld0_v", "j")
    operands = ["ld0"] + ([cuda_ops.literal(operand, dtype)] if operand is not None else [])
    value = cuda_ops.expression(op, operands, [dtype] * len(operands), dtype)
    if reduction == "count_below":  # sum(v0 < BOUND) as int64 (unsigned: below 10)
        bound = cuda_ops.literal(BOUND if np.iinfo(dtype).min else -BOUND, dtype)
        red = cuda_ops.reduction("sum", np.dtype(np.int64))
        update = red.update("acc", f"fc::cast<long long>(fc::lt(v0, {bound}))")
    else:
        red = cuda_ops.reduction(reduction, dtype)
        update = red.update("acc", "v0")
    return f"""
extern "C" __global__ void {name}(const {ct}* __restrict__ in0, {red.acc_ctype}* __restrict__ out0) {{
  const fs::Vec<{ct}, {LANES}> ld0_v = reinterpret_cast<const fs::Vec<{ct}, {LANES}>*>(in0)[0];
  {red.acc_ctype} acc = {red.identity};
#pragma unroll
  for (int j = 0; j < {LANES}; ++j) {{
    const {ct} ld0 = {lane};
    const {ct} v0 = {value};
    {update}
  }}
  out0[0] = acc;
}}
"""


def _reference(x: np.ndarray, op: str, operand: int | None, reduction: str) -> int:
    ufunc = {"sub": np.subtract, "neg": np.negative, "abs": np.absolute, "floordiv": np.floor_divide,
             "mod": np.remainder, "right_shift": np.right_shift, "mul": np.multiply}[op]
    with np.errstate(all="ignore"):
        v = ufunc(x, x.dtype.type(operand)) if operand is not None else ufunc(x)
    if reduction == "count_below":
        return int((v < (BOUND if np.iinfo(x.dtype).min else -BOUND)).sum())
    return int(getattr(np, reduction)(v))


CASES = [(f"k_{dt}_{name}_{red}", np.dtype(dt), op, operand, red)
         for dt in DTYPES for name, op, operand in OPS for red in REDUCTIONS]


@pytest.fixture(scope="module")
def compiled() -> str:
    """Every case's kernel in one module, NVRTC's PTX of it."""
    return ptx_eval.ptx(include_block() + "".join(_kernel(*case) for case in CASES))


@pytest.mark.parametrize("case", CASES, ids=[c[0][2:] for c in CASES])
def test_vector_lanes_of_bytes_give_numpys_values_after_nvrtc(compiled: str, case: tuple) -> None:
    name, dtype, op, operand, reduction = case
    rng = np.random.default_rng(2775)
    info = np.iinfo(dtype)
    vectors = [np.array(FUZZ_2775, np.int8).astype(dtype)] + [
        rng.integers(info.min, info.max + 1, LANES).astype(dtype) for _ in range(12)]
    for k in range(LANES):  # each lane position holding the extremes, the others neutral for the reduction
        for extreme in (info.min, info.max, -1 if info.min else 1):
            x = np.full(LANES, 0, dtype)
            x[k] = extreme
            vectors.append(x)
    for x in vectors:
        memory = bytearray(64)
        memory[16:32] = x.tobytes()
        (address, size, value), = ptx_eval.run(compiled, name, [16, 48], memory)
        got = _signed(value, 8 * size) if info.min or reduction == "count_below" else value
        assert got == _reference(x, op, operand, reduction), f"lanes {x.tolist()}: got {got}"


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# fuzz graph 2775 (GPU run of 2026-12-07): nanmin(y // 2) of int8 in a vectorized reduce-all gave 64 for -64
FUZZ_2775_GRAPH = """func @fuzz2775_int_reduce(%x: bool[], %y: i8[1,4,4]) -> (i8[1], i8[1,4,4], bool[1]) {
  %0 = const 2 : i8[]
  %1 = floordiv %y, %0 : i8[1,4,4]
  %2 = nanmin %1 {axes=[1, 2], keepdims=false} : i8[1]
  %3 = nanmin %2 {axes=[], keepdims=false} : i8[1]
  %4 = cast %2 : bool[1]
  %5 = all %4 {axes=[], keepdims=false} : bool[1]
  return %3, %1, %5
}"""


def test_vector_lanes_of_bytes_read_through_fs_lane_in_the_fuzz_2775_kernel() -> None:
    """The reduce-all of fuzz graph 2775 reads its int8 vector's lanes through fs::lane; wider types keep
    ``v.v[j]`` (their sources, and so their compile-cache keys, are unchanged)."""
    from fusec.ir.text import parse
    from fusec.kinds import generate
    from fusec.runtime.plan import make_plan

    graph = parse(FUZZ_2775_GRAPH)
    (kernel,) = make_plan(graph).kernels
    generated = generate(kernel.region, {})
    assert generated.spec.vec == 16
    assert "const signed char ld0 = fs::lane(ld0_v, j);" in generated.source
    assert not re.search(r"= ld\d+_v\.v\[j\];", generated.source)
