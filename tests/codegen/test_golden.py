"""The exact CUDA source of one kernel per kind, pinned in ``tests/codegen/golden/<kind>.cu``.

A change to the planner, a template or the op table's CUDA expressions shows up here as a diff of the
generated kernel (the kernel alone: the shared device-helper headers are not pinned). When the change is
intended, regenerate the files and review the diff in version control:

    FUSEC_UPDATE_GOLDEN=1 python -m pytest tests/codegen/test_golden.py

Without ``FUSEC_UPDATE_GOLDEN=1`` the test never writes a file.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from fusec.codegen.render import render_body
from tests.codegen.test_kernels import WORKLOADS, Variant

GOLDEN = Path(__file__).parent / "golden"

# name -> (workload, variant): a vectorized pointwise kernel, a warp-per-row kernel with three phases and
# an argmax (re-reading the row: every other element, so not held in registers), the same router held in
# registers (8 lanes per row), a block-per-row softmax held in registers, a column softmax, and a two-phase
# reduce-all with a grid barrier. The name starts with the kind.
CASES = {
    "pointwise": ("gelu", Variant("float32", ((1029, 917),))),
    "rows": ("router", Variant("float32", ((4096, 64),), ("step2",))),
    "rows_warp_regs": ("router", Variant("float32", ((4096, 64),))),
    "rows_block_regs": ("softmax", Variant("float32", ((64, 8192),))),
    "cols": ("col_softmax", Variant("float16", ((1029, 917),))),
    "reduce_all": ("mean_var", Variant("float32", ((1029, 917),))),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_golden_kernel_source_is_pinned(kind: str) -> None:
    workload, variant = CASES[kind]
    spec = variant.spec(WORKLOADS[workload].fn, "k0")
    assert kind.startswith(spec.kind.replace("-", "_"))
    source = render_body(spec)
    path = GOLDEN / f"{kind}.cu"
    if os.environ.get("FUSEC_UPDATE_GOLDEN") == "1":
        path.write_text(source)
    assert path.is_file(), f"{path} is missing: run with FUSEC_UPDATE_GOLDEN=1 to create it"
    expected = path.read_text()
    if source != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), source.splitlines(True),
                                            f"golden/{kind}.cu", "generated"))
        pytest.fail(f"the generated {kind} kernel differs from golden/{kind}.cu "
                    f"(regenerate with FUSEC_UPDATE_GOLDEN=1 if intended):\n{diff}")
