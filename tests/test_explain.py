"""``explain``: the sectioned report (plain and coloured), the DOT drawing of the fused DAG, ``save``
with and without Graphviz, and ``run=True`` (measured on a GPU; a clear error without one)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec import ArraySpec
from fusec.codegen.render import render_body
from fusec.inspect.explain import Explanation, KernelTime, Timings
from fusec.runtime.plan import format_bytes
from tests.conftest import cuda_gpu_present
from tests.workloads import softmax

F32 = "float32"
NO_DOT = "Graphviz 'dot' not found: install graphviz to test the drawing"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def row_then_column(x):
    """A row reduction feeding a column reduction: two kernels, the centred rows written between them."""
    r = x - x.max(axis=1, keepdims=True)
    return r.sum(axis=0)


def adam_like(p, g, m):
    m = 0.9 * m + 0.1 * g
    return p - 0.01 * m, m


def softmax_explanation(shape=(8192, 8192)) -> Explanation:
    return fusec.fuse(softmax).explain(ArraySpec(shape, F32))


def row_col_explanation() -> Explanation:
    return fusec.fuse(row_then_column).explain(ArraySpec((1024, 512), F32))


def clusters_in_dot(text: str) -> list[str]:
    return re.findall(r"subgraph (cluster_\w+) \{", text)


# --- the report ----------------------------------------------------------------------------------------------


def test_explain_report_has_every_section_in_order():
    text = str(softmax_explanation())
    heads = [line for line in text.splitlines() if line.startswith(("==", "--"))]
    assert heads == ["== fusec explain: @softmax ==", "-- traced IR --",
                     "-- after passes (canonicalize, fold, cse, dce, fuse) --", "-- kernels: 1 --",
                     "-- not fused --", "-- intermediates in memory --", "-- bytes moved --"]


def test_explain_softmax_kernel_lines():
    text = str(softmax_explanation())
    assert "k0_rows_max_sub_exp_sum_div\n  kind:   rows over [8192, 8192], reducing axes [1]\n" in text
    assert "  nodes:  %0 max, %1 sub, %2 exp, %3 sum, %4 div\n" in text
    assert "  reads:  256.000 MiB (268435456 B) from %x\n" in text
    assert "  writes: 256.000 MiB (268435456 B) to %4 (returned)\n" in text
    assert "  none: no kernel reads what another one wrote" in text
    assert "  fused:   1 kernel(s), 512.000 MiB (536870912 B)\n" in text
    assert "  unfused: 5 kernel(s), 2.000 GiB (2147614720 B)\n" in text
    assert "  fusion moves 4.00x less\n" in text


def test_explain_launch_shape_per_kernel():
    e = row_col_explanation()
    assert len(e.launches) == e.kernel_count == 2
    text = str(e)
    assert text.count("  launch: ") == 2
    assert re.search(r"launch: warp_regs schedule, 256 threads per block, grid 128\n", text)
    assert re.search(r"launch: last_block schedule, 256 threads per block, grid 16 tile\(s\) x up to 8 blocks each, "
                     r"splitting the reduced extent \(as many as fill the device; none when the tiles fill it\)", text)
    assert "int32 indices" in text


def test_explain_launch_shape_follows_the_input_layout():
    f = fusec.fuse(lambda x: np.exp(x) + 1)
    contiguous = f.explain(ArraySpec((64, 64), F32)).launches[0]
    transposed_spec = f.explain(ArraySpec((64, 64), F32, strides=(1, 64))).launches[0]
    transposed_array = f.explain(np.ones((64, 64), np.float32).T).launches[0]
    assert not contiguous.startswith("strided")
    assert transposed_spec.startswith("tiled schedule, 256 threads per block")  # read across, written along
    assert transposed_array.startswith("tiled schedule")
    assert f.explain(ArraySpec((64, 64), F32, strides=(128, 2))).launches[0].startswith("strided schedule")


def test_explain_row_then_column_names_the_materialized_intermediate():
    e = row_col_explanation()
    text = str(e)
    assert "different iteration space" in text
    assert "  writes: 2.000 MiB (2097152 B) to %1 (read by k1)\n" in text
    assert "  %1 (sub, f32[1024,512]): 2.000 MiB (2097152 B), written by k0, read by k1" in text
    ((node, (writer, readers)),) = e.materialized.items()
    assert (node.op, writer, readers) == ("sub", 0, (1,))


def test_explain_unfused_says_which_passes_ran(monkeypatch):
    unfused = fusec.fuse(softmax, fusion=False).explain(ArraySpec((64, 64), F32))
    assert "-- after passes (canonicalize, fold, cse, dce, unfuse) --" in str(unfused)
    assert unfused.kernel_count == 5
    monkeypatch.setenv("FUSEC_DISABLE_FUSION", "1")
    assert "dce, unfuse) --" in str(fusec.fuse(softmax).explain(ArraySpec((64, 64), F32)))


def test_explain_str_is_plain_and_render_color_adds_ansi_only():
    e = row_col_explanation()
    plain, colored = str(e), e.render(color=True)
    assert "\x1b[" not in plain
    assert e.render(color=False) == plain
    assert "\x1b[" in colored
    assert ANSI.sub("", colored) == plain
    # kernel k1 has the same colour in the IR and in the kernel list (blue: 34)
    assert "\x1b[1;34m  kernel @k1 cols {\x1b[0m" in colored
    assert "\x1b[1;34mk1_cols_sum\x1b[0m" in colored


def test_explain_repr_is_one_line_summary():
    text = repr(softmax_explanation())
    assert "\n" not in text
    assert text.startswith("<fusec.Explanation @softmax: 1 kernel(s), 512 MiB moved")


def test_explain_of_function_with_no_kernels():
    e = fusec.fuse(lambda x: x, name="identity").explain(ArraySpec((4,), F32))
    text = str(e)
    assert e.kernel_count == 0
    assert "-- kernels: 0 --" in text and "fusion moves n/a" in text
    assert clusters_in_dot(e.to_dot()) == []
    assert "in0 -> out0;" in e.to_dot()


def test_explain_with_numpy_arrays_matches_specs():
    f = fusec.fuse(softmax)
    x = np.zeros((64, 128), np.float32)
    assert str(f.explain(x)) == str(f.explain(ArraySpec((64, 128), F32)))


def test_explain_renders_measured_timings():
    e = row_col_explanation()
    timings = Timings(device="Test GPU", reps=20,
                      kernels=(KernelTime("k0_rows_max_sub", 0.004, 4 * 2**20, 128, (256, 1, 1)),
                               KernelTime("k1_cols_sum", 0.002, 2**21 + 2048, 16, (32, 8, 1))),
                      fused_ms=0.008, fused_bytes=e.plan.bytes_moved, unfused_ms=0.024,
                      unfused_bytes=e.plan.bytes_moved_unfused)
    text = str(Explanation(e.plan, timings=timings))
    assert "-- measured on Test GPU (CUDA events, median of 20 after warm-up) --" in text
    assert re.search(r"k0_rows_max_sub +0\.0040 ms +1048\.6 GB/s +grid 128 x 256 threads", text)
    assert re.search(r"all kernels +0\.0060 ms", text)
    assert "fusion is 3.00x faster" in text
    assert timings.kernels[0].gb_per_s == pytest.approx(4 * 2**20 / 4e-6 / 1e9)


# --- DOT -----------------------------------------------------------------------------------------------------


def test_to_dot_softmax_is_one_cluster_with_every_node():
    dot = softmax_explanation().to_dot()
    assert dot.startswith('digraph "softmax" {') and dot.rstrip().endswith("}")
    assert clusters_in_dot(dot) == ["cluster_k0"]
    assert 'label="k0_rows_max_sub_exp_sum_div\\nrows over [8192, 8192], reducing [1]\\nreads 256 MiB, ' \
           'writes 256 MiB"' in dot
    for label in ("%0 = max axes=[1]", "%1 = sub", "%2 = exp", "%3 = sum axes=[1]", "%4 = div",
                  "%x: input 0\\nf32[8192,8192]", "output 0\\nf32[8192,8192]"):
        assert f'"{label}' in dot, label
    assert "peripheries=2" not in dot  # nothing materialized


def test_to_dot_row_then_column_has_two_clusters_and_marks_the_intermediate():
    dot = row_col_explanation().to_dot()
    assert clusters_in_dot(dot) == ["cluster_k0", "cluster_k1"]
    marked = [line for line in dot.splitlines() if "peripheries=2" in line]
    assert len(marked) == 1 and '"%1 = sub\\nf32[1024,512]\\nin memory: 2 MiB"' in marked[0]
    assert marked[0].strip().startswith("k0_")  # drawn inside the kernel that writes it
    crossing = [line for line in dot.splitlines() if "->" in line and "penwidth=2.5" in line]
    assert len(crossing) == 1 and re.match(r"\s*k0_n\d+ -> k1_n\d+ ", crossing[0])


def test_to_dot_recomputed_node_is_drawn_in_each_kernel():
    def rows_and_cols(x):
        y = np.exp(x)
        return y.sum(axis=1), y.sum(axis=0)

    e = fusec.fuse(rows_and_cols).explain(ArraySpec((1024, 512), F32))
    dot = e.to_dot()
    assert clusters_in_dot(dot) == ["cluster_k0", "cluster_k1"]
    exps = [line.strip() for line in dot.splitlines() if '"%0 = exp' in line]
    assert len(exps) == 2
    assert exps[0].startswith("k0_") and "recomputed" not in exps[0]
    assert exps[1].startswith("k1_") and "recomputed here" in exps[1] and "dashed" in exps[1]
    assert e.materialized == {}  # recomputed, not written to memory


def test_to_dot_kernels_get_distinct_colours():
    dot = row_col_explanation().to_dot()
    fills = re.findall(r'subgraph cluster_\w+ \{\n    label=".*?"; style="filled,rounded"; fillcolor="(#\w+)"', dot)
    assert len(fills) == 2 and fills[0] != fills[1]


def test_to_dot_multi_output_and_constants():
    spec = ArraySpec((1024,), F32)
    dot = fusec.fuse(adam_like).explain(spec, spec, spec).to_dot()
    assert clusters_in_dot(dot) == ["cluster_k0"]
    assert "out0" in dot and "out1" in dot
    assert re.search(r'"%\d+ = 0\.9\\nf32\[\]", shape=plaintext', dot)  # constants print as their dtype does
    assert dot.count("shape=invhouse") == 3


def test_to_dot_escapes_the_function_name():
    dot = fusec.fuse(softmax, name='say "hi"\\').explain(ArraySpec((4, 4), F32)).to_dot()
    assert dot.startswith('digraph "say \\"hi\\"\\\\" {')


@pytest.mark.skipif(shutil.which("dot") is None, reason=NO_DOT)
def test_to_dot_is_accepted_by_graphviz():
    for e in (softmax_explanation(), row_col_explanation(),
              fusec.fuse(softmax, name='odd "name"').explain(ArraySpec((4, 4), F32))):
        proc = subprocess.run(["dot", "-Tsvg"], input=e.to_dot(), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count('class="cluster"') == e.kernel_count


# --- save ----------------------------------------------------------------------------------------------------


def test_save_dot_writes_the_dot_text(tmp_path):
    e = row_col_explanation()
    written = e.save(tmp_path / "f.dot")
    assert written == tmp_path / "f.dot"
    assert written.read_text() == e.to_dot()


@pytest.mark.skipif(shutil.which("dot") is None, reason=NO_DOT)
@pytest.mark.parametrize("suffix, magic", [(".svg", b"<svg"), (".png", b"\x89PNG"), (".pdf", b"%PDF")])
def test_save_draws_with_graphviz(tmp_path, suffix, magic):
    path = tmp_path / f"softmax{suffix}"
    assert softmax_explanation().save(str(path)) == path
    assert magic in path.read_bytes()[:400]


@pytest.mark.skipif(shutil.which("dot") is None, reason=NO_DOT)
def test_save_svg_shows_one_cluster_per_kernel(tmp_path):
    svg = softmax_explanation().save(tmp_path / "s.svg").read_text()
    assert svg.count('class="cluster"') == 1
    svg = row_col_explanation().save(tmp_path / "rc.svg").read_text()
    assert svg.count('class="cluster"') == 2


def test_save_without_graphviz_writes_dot_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no `dot` on PATH
    e = softmax_explanation()
    with pytest.warns(RuntimeWarning, match=r"Graphviz 'dot' was not found, so .*s\.svg was not drawn: "
                                            r"wrote the DOT text to .*s\.dot instead"):
        written = e.save(tmp_path / "s.svg")
    assert written == tmp_path / "s.dot"
    assert written.read_text() == e.to_dot()
    assert not (tmp_path / "s.svg").exists()


def test_save_unknown_suffix_is_an_error(tmp_path):
    with pytest.raises(fusec.FusecValueError, match=r"unknown suffix '\.txt'"):
        softmax_explanation().save(tmp_path / "s.txt")


# --- run=True ------------------------------------------------------------------------------------------------


@pytest.mark.skipif(cuda_gpu_present(), reason="a CUDA GPU is present: run=True works here")
def test_explain_run_without_gpu_is_a_clear_error():
    with pytest.raises(fusec.FusecError, match=r"explain\(\.\.\., run=True\) needs a CUDA GPU") as info:
        fusec.fuse(softmax).explain(ArraySpec((64, 64), F32), run=True)
    assert "run=False" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("fn, shape, kernels", [(softmax, (1024, 1024), 1), (row_then_column, (1024, 512), 2)])
def test_explain_run_measures_each_kernel_on_the_gpu(fn, shape, kernels):
    e = fusec.fuse(fn).explain(ArraySpec(shape, F32), run=True)
    t = e.timings
    assert t is not None and t.reps > 0 and t.device
    assert [k.name for k in t.kernels] == [k.label for k in e.plan.kernels] and len(t.kernels) == kernels
    for k, kernel in zip(t.kernels, e.plan.kernels):
        assert k.ms > 0 and k.grid >= 1 and k.bytes_moved == kernel.bytes_moved
    assert t.fused_ms > 0 and t.unfused_ms > 0
    text = str(e)
    assert "-- measured on " in text and "GB/s" in text and "fusion is " in text


@pytest.mark.gpu
def test_explain_run_with_cupy_arrays_leaves_them_alone():
    import cupy as cp

    x = cp.random.standard_normal((256, 512), dtype=cp.float32)
    before = x.copy()
    e = fusec.fuse(softmax).explain(x, run=True)
    assert e.timings is not None and len(e.timings.kernels) == 1
    assert bool((x == before).all())


def test_explain_modules_import_no_gpu_library():
    """The report modules import no GPU library at import time (explain works on any machine)."""
    code = ("import sys, fusec.inspect.explain, fusec.inspect.dot, fusec.inspect.timing\n"
            "print('cupy' in sys.modules)")
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


# ---- the bytes explain reports are the bytes the kernel reads ------------------------------------------------


def _clip_by_norm(x):
    n = np.sqrt((x * x).sum())
    return x * np.minimum(1.0, 1.0 / (n + 1e-6))


@pytest.mark.parametrize("fn, shape, schedule, passes", [
    (_clip_by_norm, (1 << 20,), "reduce-all:grid_barrier,loop=strided", 2),  # the norm, then the scaling
    (softmax, (64, 5000), "rows:block", 2),  # max with the online sum of exp, then the outputs
    (softmax, (64, 5000), "rows:block,one_pass=0", 3),  # max, sum of exp, outputs
    (lambda x: x.sum(axis=0), (5000, 64), "cols:tiles", 1),
], ids=["reduce_all_epilogue", "rows_one_pass", "rows_two_pass", "cols"])
def test_explain_bytes_read_count_every_pass_the_kernel_makes(fn, shape, schedule, passes) -> None:
    """The loads in the generated code (one scalar load of the input per loop under these schedules) are what
    explain counts: its ``reads`` line and its bytes moved count the input once per pass."""
    spec = fusec.ArraySpec(shape, "float32")
    e = fusec.fuse(fn, schedules={"k0": schedule}).explain(spec)
    (x,) = e.plan.kernels[0].inputs
    body = render_body(e.kernels[0].spec)
    assert sum("= in0[" in line for line in body.splitlines()) == passes
    assert e.input_passes(0) == {x: passes}
    reads = next(line for line in str(e).splitlines() if line.startswith("  reads:"))
    assert format_bytes(passes * x.nbytes) in reads
    assert e.bytes_moved == passes * x.nbytes + e.plan.kernels[0].bytes_written


def test_explain_rows_held_in_registers_read_once() -> None:
    e = fusec.fuse(softmax).explain(fusec.ArraySpec((64, 4096), "float32"))
    assert e.kernels[0].schedule.in_registers and list(e.input_passes(0).values()) == [1]
    assert e.bytes_moved == e.plan.bytes_moved
