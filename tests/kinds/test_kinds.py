"""Kernel kinds as plug-ins: the registry, the protocol, and a kind added from one file outside fusec.

Every region kind has its kernel kind; every kind's schedule class carries the kind's name and its variants; every
template a kind names exists. ``tests/kinds/naive_kind.py`` (with ``naive.cu.j2`` beside it) is a whole new kind:
registered for a block, it is parsed, completed, checked, lowered, rendered and compiled like fusec's own, through
the same drivers, and it is gone after the block.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.codegen import nvrtc, templates
from fusec.ir.region import REGION_KINDS
from fusec.kinds import KINDS, KernelKind, candidates, generate, kind_of, parse_schedule, registered, resolve
from fusec.kinds.select import analyze
from fusec.schedule.base import ScheduleError
from tests.codegen.test_kernels import single_region
from tests.kinds.naive_kind import KIND as NAIVE
from tests.kinds.naive_kind import NaiveSchedule

EXAMPLES = ["pointwise:vector,vec=4", "reduce-all:last_block,loop=vector,vec=4", "rows:warp",
            "rows:block_regs,threads=256,elems=32,vec=4,hold=3+5,fast_division=1,lengths=bucket",
            "cols:grid_barrier,tile=32,split=8,blocks=0,one_pass=0", "scan:rows,threads=256,elems=8", "scan:sequential"]


def affine(x, w):
    return x * w + 1.0


def row_sum(x):
    return x.sum(axis=-1)


def test_kinds_every_region_kind_has_its_kind_and_each_kind_is_whole() -> None:
    assert set(REGION_KINDS) <= set(KINDS)
    for name, kind in KINDS.items():
        assert kind.name == name == kind.schedule_type.kind
        assert kind.runs and kind.runs[0] == name, f"{name} runs its own region kind first"
        assert kind.schedule_type.variant_field in {f for f in kind.schedule_type.__dataclass_fields__}
        if kind.generated:  # a library's kind (matmul) has no template: its kernel is a call
            assert Path(templates.header_dir(), kind.template).is_file(), kind.template
        else:
            assert type(kind).library is not KernelKind.library, f"{name} is not generated and gives no call"


@pytest.mark.parametrize("text", EXAMPLES)
def test_kinds_schedule_text_parses_to_its_kind(text: str) -> None:
    request = parse_schedule(text)
    assert kind_of(request).name == text.partition(":")[0]
    assert str(request).partition(",")[0] == text.partition(",")[0]


def test_kinds_a_new_kind_in_one_file_runs_through_the_drivers() -> None:
    x, w = fusec.ArraySpec((37, 129), np.float32), fusec.ArraySpec((129,), np.float32)
    _, region, _ = single_region(affine, x, w)
    with pytest.raises(ScheduleError, match="KIND one of pointwise, reduce-all, rows, cols, scan, matmul"):
        parse_schedule("naive:strided")
    with registered(NAIVE):
        assert "naive" in KINDS
        nest = analyze(region)
        schedule = resolve(nest, "naive:strided")
        assert schedule == NaiveSchedule() and schedule.text() == "naive:strided"
        assert candidates(nest)[0].kind == "pointwise", "the heuristics do not choose a kind that no kind prefers"
        kernel = generate(region, None, "naive:strided")
        assert kernel.schedule == NaiveSchedule()
        assert kernel.spec.kind == "naive" and kernel.spec.template.endswith("naive.cu.j2")
        assert "// k0_pointwise_mul_add: naive, int indices" in kernel.source  # (named by the region kind)
        assert "contract: any alignment (no vector accesses)" in kernel.source
        result = nvrtc.compile_cubin(kernel.source, "sm_90")
        assert result.cubin and result.kernel(kernel.name).spills == 0
        _, rows_region, _ = single_region(row_sum, fusec.ArraySpec((8, 64), np.float32))
        with pytest.raises(ScheduleError, match="is for a naive kernel, but k0 is a rows kernel"):
            resolve(analyze(rows_region), "naive:strided")
        with pytest.raises(ValueError, match="already registered"), registered(NAIVE):
            pass
    assert "naive" not in KINDS
    with pytest.raises(ScheduleError):
        parse_schedule("naive:strided")
