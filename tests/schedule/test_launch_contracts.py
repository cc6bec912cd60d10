"""Launch contracts (:mod:`fusec.schedule.contract`) against fake pointers, for every kernel kind.

Each case of ``tests/contract_cases.py`` is planned for aligned arrays; every kernel that reads or writes with
vectors states which pointers must be aligned and how far. Base addresses 1, 2 and 3 elements past a 256-byte
boundary must fail the contract wherever they are short of a vector's bytes (the launch would fault), and the
kernel generated for such a layout (the scalar variant the runtime then runs) must meet them; odd strides likewise
give kernels whose vectors, if any, stay aligned. The contract's vector accesses must be the source's: each
aligned pointer is read or written through ``fs::Vec`` in the rendered kernel, and no other.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.kinds import analyze, generate, resolve
from fusec.schedule import ArrayLayout, ScheduleError
from fusec.schedule.contract import ContractViolation, LaunchContract, PointerNeed, layout_problem, offset_problem
from fusec.schedule.layout import alignment
from tests.contract_cases import BASE_ALIGN, CASE_NAMES, DTYPES, case

MISALIGNED = (1, 2, 3)


def _kernels(name: str, dtype: str, layouts_of_args=None):
    """(plan, kernels) of case ``name`` in ``dtype``, its arguments laid out as ``layouts_of_args`` (per argument,
    an ArrayLayout or None for a fresh aligned array)."""
    c = case(name)
    specs = [fusec.ArraySpec(s, "int64" if k in c.index else dtype) for k, s in enumerate(c.shapes)]
    fused = fusec.fuse(c.fn)
    plan = fused.plan(*specs)
    values = dict(zip(plan.graph.inputs, layouts_of_args or [None] * len(specs)))
    out = []
    for kernel in plan.kernels:
        layouts = {n: values[n] for n in kernel.inputs if values.get(n) is not None}
        out.append((kernel, generate(kernel.region, layouts)))
    return plan, out


def _pointers(contract: LaunchContract, elements: int) -> list[int]:
    """One fake base address per array parameter: a 256-byte boundary plus ``elements`` elements."""
    return [BASE_ALIGN * (17 + k) + elements * p.itemsize for k, p in enumerate(contract.pointers)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_launch_contract_holds_for_aligned_pointers_and_fails_where_vectors_would_fault(name, dtype):
    _, kernels = _kernels(name, dtype)
    for _, generated in kernels:
        contract = generated.contract
        assert contract.holds(_pointers(contract, 0))
        for elements in MISALIGNED:
            pointers = _pointers(contract, elements)
            faults = any(p & need.mask for p, need in zip(pointers, contract.pointers))
            assert contract.holds(pointers) is not faults
            if faults:  # only a vector access of more bytes than the offset's alignment faults
                need = next(n for p, n in zip(pointers, contract.pointers) if p & n.mask)
                assert need.align > alignment(elements * need.itemsize)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_launch_contract_kernel_for_misaligned_arguments_is_the_scalar_variant_where_vectors_would_fault(name, dtype):
    """The kernel generated for arguments 1, 2, 3 elements past aligned bases (what the runtime builds, or falls
    back to, for them) meets its contract on such pointers; where the aligned kernel's contract fails there, the
    new kernel moves fewer bytes per access of those pointers."""
    c = case(name)
    plan, aligned = _kernels(name, dtype)
    for elements in MISALIGNED:
        layouts = []
        for k, shape in enumerate(c.shapes):
            itemsize = 8 if k in c.index else np.dtype(dtype).itemsize
            layouts.append(ArrayLayout(ArrayLayout.c_contiguous(shape).strides, True, alignment(elements * itemsize)))
        _, shifted = _kernels(name, dtype, layouts)
        for (kernel, before), (_, after) in zip(aligned, shifted):
            params = {n: f"in{k}" for k, n in enumerate(kernel.region.inputs) if n.op not in ("const", "size", "iota")}
            pointers = [BASE_ALIGN * 40 + (elements * p.itemsize if p.param in [
                params[n] for n in kernel.inputs if n in plan.graph.inputs] else 0) for p in after.contract.pointers]
            assert after.contract.holds(pointers), (after.schedule, after.contract, pointers)
            for b, a, ptr in zip(before.contract.pointers, after.contract.pointers, pointers):
                if ptr & b.mask:
                    assert a.align <= alignment(ptr), (before.schedule, after.schedule, b, a)


@pytest.mark.parametrize("name", ["axpy", "scale_shift", "softmax", "softmax_bucket", "sum_abs", "sliced"])
def test_launch_contract_odd_strides_give_kernels_whose_vectors_stay_aligned(name):
    """Arguments whose rows start at odd element offsets (a row stride one more than the row), or whose elements
    are every other one: every vector access of the kernel generated for them is aligned given aligned bases,
    and the kernel meets its own contract on aligned pointers."""
    c = case(name)
    for step in ("row_plus_one", "every_other"):
        layouts = []
        for k, shape in enumerate(c.shapes):
            fresh = ArrayLayout.c_contiguous(shape).strides
            if k in c.index or not shape:
                layouts.append(None)
            elif step == "row_plus_one" and len(shape) == 2:
                layouts.append(ArrayLayout((shape[1] + 1, 1), False, 16))
            else:
                layouts.append(ArrayLayout(tuple(2 * s for s in fresh), False, 16))
        _, kernels = _kernels(name, "float32", layouts)
        for kernel, generated in kernels:
            nest = analyze(kernel.region, {n: lay for n, lay in zip(kernel.inputs, layouts) if lay is not None})
            assert offset_problem(nest, generated.schedule) is None
            assert generated.contract.holds(_pointers(generated.contract, 0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_launch_contract_names_exactly_the_pointers_the_source_moves_in_vectors(name, dtype):
    """The contract's aligned pointers are the ones the rendered kernel casts to ``fs::Vec`` (the flat loops and
    register rows index the array parameter, a slice its own view pointer ``in0_ld3``); scans, which check each
    row's address when they run, state none."""
    _, kernels = _kernels(name, dtype)
    for _, generated in kernels:
        body = generated.source[generated.source.index("extern \"C\" __global__"):]
        vec_lines = [line for line in body.splitlines() if "fs::Vec<" in line and "reinterpret_cast" in line]
        moved = {p.param for p in generated.contract.pointers if any(f"({p.param}" in line or f"{p.param} +" in line
                                                                    or f"({p.param}_" in line for line in vec_lines)}
        if generated.schedule.kind == "scan":
            assert not generated.contract.aligned
            continue
        assert {p.param for p in generated.contract.aligned} == moved, (generated.schedule, vec_lines)


def test_launch_contract_violation_names_alignment_shape_and_strides():
    need = PointerNeed("in0", 16, (4, 8), (8, 1), 4)

    class Fake:
        def __init__(self, ptr, shape=(4, 8), strides=(32, 4)):
            self.data = type("P", (), {"ptr": ptr})()
            self.shape, self.strides = shape, strides

    assert need.violation(Fake(4096)) is None
    assert "4-byte aligned, the kernel needs 16" in need.violation(Fake(4100))
    assert "shape (4, 9)" in need.violation(Fake(4096, (4, 9)))
    assert "strides (9, 1)" in need.violation(Fake(4096, strides=(36, 4)))
    contract = LaunchContract((need, PointerNeed("out0", 1, (4, 8), (8, 1), 4)))
    assert contract.masks == (15, 0) and contract.aligned == (need,)
    assert contract.text() == "in0 16-byte aligned; others any; int32 indices"
    assert str(ContractViolation("k0", "pointwise:vector,vec=4", "why")) == "k0 (pointwise:vector,vec=4): why"


def test_launch_contract_a_forced_vector_schedule_on_a_misaligned_layout_is_refused_with_the_reason():
    plan, _ = _kernels("axpy", "float32")
    region = plan.kernels[0].region
    x = plan.kernels[0].inputs[0]
    nest = analyze(region, {x: ArrayLayout((1,), True, 4)})
    with pytest.raises(ScheduleError, match="4-byte aligned"):
        resolve(nest, "pointwise:vector,vec=4")
    chosen = resolve(nest, None)
    assert layout_problem(nest, chosen) is None and chosen.text() == "pointwise:contiguous,vec=1"
    assert resolve(analyze(region, {}), "pointwise:vector,vec=4").scalar().text() == chosen.text()


@pytest.mark.parametrize("name, vector, scalar", [
    ("axpy", "pointwise:vector,vec=4", "pointwise:contiguous,vec=1"),
    ("scale_shift", "pointwise:inner_vector,vec=4", "pointwise:strided,vec=1"),
    ("sum_abs", "reduce-all:last_block,loop=vector,vec=4", "reduce-all:last_block,loop=contiguous,vec=1"),
])
def test_launch_contract_float32_one_element_off_takes_the_scalar_variant(name, vector, scalar):
    c = case(name)
    _, aligned = _kernels(name, "float32")
    layouts = [ArrayLayout(ArrayLayout.c_contiguous(s).strides, True, 4) for s in c.shapes]
    _, shifted = _kernels(name, "float32", layouts)
    assert aligned[0][1].schedule.text() == vector
    assert not aligned[0][1].contract.holds(_pointers(aligned[0][1].contract, 1))
    assert shifted[0][1].schedule.text() == scalar and not shifted[0][1].contract.aligned
