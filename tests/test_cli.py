"""The ``fusec`` command line: every error is one line ``fusec: error: ...`` and a non-zero exit;
``opt`` round-trips IR text, ``explain`` traces a function from a file, ``demo`` checks itself."""

from __future__ import annotations

import ctypes.util
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import fusec
from fusec.__main__ import gpu_available, main, traffic, use_color
from fusec.codegen import render
from fusec.frontend.ops_doc import ops_block, ops_markdown
from tests.conftest import cuda_gpu_present

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = str(ROOT / "examples" / "softmax.py")

SMALL_FIR = """\
func @f(%x: f32[4,8], %y: f32[8]) -> (f32[4], f32[4,8]) {
  %0 = abs %x : f32[4,8]
  %1 = sum %0 {axes=[1], keepdims=false} : f32[4]
  %2 = add %x, %y : f32[4,8]
  return %1, %2
}"""


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code != 0
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fusec: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], err


@pytest.fixture
def fir(tmp_path: Path) -> Path:
    path = tmp_path / "small.fir"
    path.write_text(SMALL_FIR + "\n")
    return path


# --- opt ---------------------------------------------------------------------------------------


def test_opt_round_trips_canonical_text(capsys, fir):
    code, out, err = run_cli(capsys, "opt", str(fir))
    assert (code, err) == (0, "")
    assert out == SMALL_FIR + "\n"


def test_opt_reads_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(SMALL_FIR))
    code, out, _ = run_cli(capsys, "opt", "-")
    assert code == 0
    assert out == SMALL_FIR + "\n"


def test_opt_dump_prints_ir_after_each_pass(capsys, fir):
    code, out, err = run_cli(capsys, "opt", str(fir), "-p", "cse,dce", "--dump")
    assert (code, err) == (0, "")
    headers = [line for line in out.splitlines() if line.startswith("# after")]
    assert headers == ["# after cse", "# after dce"]
    assert out.count("func @f(") == 2


def test_opt_runs_passes_and_prints_a_graph_that_parses(capsys, fir):
    from fusec.ir.text import parse

    code, out, _ = run_cli(capsys, "opt", str(fir), "-p", "canonicalize,fold,cse,dce")
    assert code == 0
    assert parse(out).name == "f"


SOFTMAX_FIR = """\
func @softmax(%x: f32[64,64]) -> f32[64,64] {
  %0 = max %x {axes=[1], keepdims=true} : f32[64,1]
  %1 = sub %x, %0 : f32[64,64]
  %2 = exp %1 : f32[64,64]
  %3 = sum %2 {axes=[1], keepdims=true} : f32[64,1]
  %4 = div %2, %3 : f32[64,64]
  return %4
}"""


def test_opt_fuse_prints_regions_that_round_trip(capsys, tmp_path):
    src = tmp_path / "softmax.fir"
    src.write_text(SOFTMAX_FIR)
    code, fused_text, err = run_cli(capsys, "opt", str(src), "-p", "canonicalize,fold,cse,dce,fuse")
    assert (code, err) == (0, "")
    assert "  kernel @" in fused_text and " rows {" in fused_text
    again = tmp_path / "fused.fir"
    again.write_text(fused_text)
    code, out, _ = run_cli(capsys, "opt", str(again))
    assert code == 0
    assert out == fused_text


def test_opt_not_utf8_is_one_line_error(capsys, tmp_path):
    bad = tmp_path / "binary.fir"
    bad.write_bytes(b"\xff\xfe\x00")
    code, _, err = run_cli(capsys, "opt", str(bad))
    assert_one_line_error(code, err, "not UTF-8")


def test_opt_no_verify_still_prints(capsys, fir):
    code, out, _ = run_cli(capsys, "opt", str(fir), "--no-verify")
    assert code == 0
    assert out == SMALL_FIR + "\n"


def test_opt_missing_file_is_one_line_error(capsys, tmp_path):
    code, _, err = run_cli(capsys, "opt", str(tmp_path / "nope.fir"))
    assert_one_line_error(code, err, "nope.fir", "No such file")


def test_opt_directory_is_one_line_error(capsys, tmp_path):
    code, _, err = run_cli(capsys, "opt", str(tmp_path))
    assert_one_line_error(code, err, "directory")


def test_opt_parse_error_names_file_and_line(capsys, tmp_path):
    bad = tmp_path / "bad.fir"
    bad.write_text(SMALL_FIR.replace("abs %x", "frobnicate %x"))
    code, _, err = run_cli(capsys, "opt", str(bad))
    assert_one_line_error(code, err, f"{bad}:2", "frobnicate")
    assert err == f"fusec: error: {bad}:2: unknown op 'frobnicate'\n"  # the line named once, not ":2: line 2:"


@pytest.mark.parametrize("text, line", [("", 1), ("# only a comment\n", 1), ("func @f(%x: f32[4]) -> f32[4] {\n", 1),
                                        (SMALL_FIR.replace("%y: f32[8]", "%y: f32[8"), 1),
                                        (SMALL_FIR.replace("return %1, %2", "return %9"), 5)])
def test_opt_parse_errors_name_their_line_once(capsys, tmp_path, text, line):
    bad = tmp_path / "bad.fir"
    bad.write_text(text)
    code, _, err = run_cli(capsys, "opt", str(bad))
    assert_one_line_error(code, err, f"{bad}:{line}: ")
    assert not re.search(r"\bline \d", err), err


def test_opt_reads_double_slash_comments_as_pass_cases_write_them(capsys, tmp_path):
    case = tmp_path / "case.fir"
    case.write_text("// a case, as tests/passes/cases writes one\n// RUN: dce\n" + SMALL_FIR + "\n// CHECK: ...\n")
    code, out, err = run_cli(capsys, "opt", str(case), "-p", "dce")
    assert (code, err, out) == (0, "", SMALL_FIR + "\n")


def test_opt_type_mismatch_is_one_line_error(capsys, tmp_path):
    bad = tmp_path / "bad.fir"
    bad.write_text(SMALL_FIR.replace("keepdims=false} : f32[4]", "keepdims=false} : f32[5]"))
    code, _, err = run_cli(capsys, "opt", str(bad))
    assert_one_line_error(code, err, "f32[5]")


def test_opt_verifier_error_names_file_and_node(capsys, tmp_path):
    bad = tmp_path / "unfused.fir"
    bad.write_text("func @f(%x: f32[4]) -> f32[4] {\n  kernel @k0 pointwise {\n    %0 = abs %x : f32[4]\n  }\n"
                   "  %1 = neg %0 : f32[4]\n  return %1\n}\n")
    code, out, err = run_cli(capsys, "opt", str(bad))
    assert_one_line_error(code, err, f"{bad}: func @f: 1 problem in the IR", f"%1 (neg, at {bad}:5): is in no region")
    assert out == ""


FULL_PIPELINE = "canonicalize,fold,cse,dce,fuse"


@pytest.mark.parametrize("name, text, fragments", [
    ("squeeze_negative_axis",  # was IndexError/KeyError in fuse: the squeeze's axes were never normalized
     "func @f(%x: f32[4,1]) -> f32[4] {\n  %0 = sum %x {axes=[1], keepdims=true} : f32[4,1]\n"
     "  %1 = squeeze %0 {axes=[-1]} : f32[4]\n  return %1\n}\n",
     (":3: ", "squeeze axes must be sorted and non-negative")),
    ("nested_attributes",  # was RecursionError in the parser
     "func @f(%x: f32[4]) -> f32[4] {\n  %0 = neg %x {foo=" + "[" * 5000 + "1" + "]" * 5000 + "} : f32[4]\n"
     "  return %0\n}\n", (":2: ", "nested more than 16 lists deep")),
    ("dimension_2_63",  # was OverflowError under a reduction
     "func @f(%x: f32[9223372036854775808]) -> f32[] {\n  %0 = sum %x {axes=[0], keepdims=false} : f32[]\n"
     "  return %0\n}\n", (":1: ", "too big")),
    ("int_const_nan",  # was a bare ValueError without a line
     "func @f(%x: i32[4]) -> i32[4] {\n  %0 = const nan : i32[]\n  %1 = add %x, %0 : i32[4]\n  return %1\n}\n",
     (":2: ", "nan is not a value of int32")),
    ("const_none",  # was accepted as NaN
     "func @f(%x: f32[4]) -> f32[4] {\n  %0 = const none : f32[]\n  %1 = add %x, %0 : f32[4]\n  return %1\n}\n",
     (":2: ", "a constant is a number or a bool, not None")),
    ("pointwise_kernel_holding_a_sum",  # was accepted (and re-partitioned as rows)
     "func @f(%x: f32[4,8]) -> f32[4,1] {\n  kernel @k0 pointwise {\n"
     "    %0 = sum %x {axes=[1], keepdims=true} : f32[4,1]\n  }\n  return %0\n}\n",
     (":2: ", "kernel @k0 is a pointwise kernel but its nodes make a rows one")),
    ("rank_33",
     "func @f(%x: f32[" + ",".join(["1"] * 33) + "]) -> f32[" + ",".join(["1"] * 33) + "] {\n  return %x\n}\n",
     (":1: ", "33 dimensions: fusec supports at most 32")),
])
def test_opt_bad_ir_is_one_line_error_with_its_line(capsys, tmp_path, name, text, fragments):
    bad = tmp_path / f"{name}.fir"
    bad.write_text(text)
    code, out, err = run_cli(capsys, "opt", str(bad), "-p", FULL_PIPELINE)
    assert_one_line_error(code, err, *fragments)
    assert "internal error" not in err and "bin/fusec" not in err and out == ""


def test_opt_error_location_never_names_the_console_script(fir):
    """Through the installed ``fusec`` script: an error fusec raises without a location of its own (an
    unknown pass) names no location, rather than the console script that called ``main`` (bin/fusec:8)."""
    script = shutil.which("fusec")
    if script is None:
        pytest.skip("the fusec console script is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([script, "opt", str(fir), "-p", "frobnicate"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode != 0
    assert result.stderr.startswith("fusec: error: unknown pass 'frobnicate'"), result.stderr
    assert script not in result.stderr and "bin/fusec" not in result.stderr


def test_opt_unknown_pass_is_one_line_error(capsys, fir):
    code, out, err = run_cli(capsys, "opt", str(fir), "-p", "cse,frobnicate")
    assert_one_line_error(code, err, "unknown pass 'frobnicate'")
    assert out == ""


# --- explain -----------------------------------------------------------------------------------


def test_explain_example_prints_ir(capsys):
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[8192,8192]")
    assert (code, err) == (0, "")
    assert "exp" in out
    assert "f32[8192,8192]" in out


def test_explain_wraps_a_plain_function_and_imports_its_neighbours(capsys, tmp_path):
    (tmp_path / "helper_for_fusec_cli.py").write_text("SCALE = 2.0\n")
    (tmp_path / "plain.py").write_text(
        "import numpy as np\nfrom helper_for_fusec_cli import SCALE\n\n"
        "def scaled_tanh(x, y):\n    return np.tanh(x) * SCALE + y\n")
    path_before = list(sys.path)
    code, out, err = run_cli(capsys, "explain", f"{tmp_path / 'plain.py'}:scaled_tanh",
                             "--arg", "f64[16,4]", "--arg", "f64[4]")
    assert (code, err) == (0, "")
    assert "tanh" in out and "f64[16,4]" in out
    assert sys.path == path_before


@pytest.mark.parametrize("target, fragments", [
    ("examples/softmax.py", ["expected FILE.py:FUNC"]),
    (":softmax", ["expected FILE.py:FUNC"]),
    ("examples/softmax.py:", ["expected FILE.py:FUNC"]),
    ("examples/does_not_exist.py:f", ["no such file", "does_not_exist.py"]),
    ("README.md:f", ["expected a Python file"]),
    ("examples/softmax.py:nope", ["has no function 'nope'", "softmax"]),
    ("examples/softmax.py:np", ["is a module, not a function"]),
])
def test_explain_bad_target_is_one_line_error(capsys, monkeypatch, target, fragments):
    monkeypatch.chdir(ROOT)
    code, _, err = run_cli(capsys, "explain", target, "--arg", "f32[4,4]")
    assert_one_line_error(code, err, *fragments)


@pytest.mark.parametrize("spec", ["f33[4]", "f32[4x4]", "f32", "c64[3]", "[4]", "f32[-1]"])
def test_explain_bad_arg_spec_is_one_line_error(capsys, spec):
    code, _, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", spec)
    assert_one_line_error(code, err, f"bad --arg '{spec}'")


def test_explain_missing_arg_is_one_line_error(capsys):
    code, _, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax")
    assert_one_line_error(code, err, "missing a required argument: 'x'")


def test_explain_untraceable_function_names_its_line(capsys, tmp_path):
    src = tmp_path / "branchy.py"
    src.write_text("def f(x):\n    if x.sum() > 0:\n        return x\n    return -x\n")
    code, _, err = run_cli(capsys, "explain", f"{src}:f", "--arg", "f32[3]")
    assert_one_line_error(code, err, f"{src}:2", "np.where")


def test_explain_syntax_error_is_one_line_error(capsys, tmp_path):
    src = tmp_path / "broken.py"
    src.write_text("def f(x:\n")
    code, _, err = run_cli(capsys, "explain", f"{src}:f", "--arg", "f32[3]")
    assert_one_line_error(code, err, "syntax error", "broken.py:1")


def test_explain_module_that_raises_on_import_is_one_line_error(capsys, tmp_path):
    src = tmp_path / "raising.py"
    src.write_text("raise RuntimeError('no config file')\n")
    code, _, err = run_cli(capsys, "explain", f"{src}:f", "--arg", "f32[3]")
    assert_one_line_error(code, err, "importing", "RuntimeError: no config file")


def test_explain_module_that_calls_sys_exit_is_an_error_not_a_silent_success(capsys, tmp_path):
    src = tmp_path / "exits.py"
    src.write_text("import sys\n\ndef f(x):\n    return x + 1\n\nsys.exit(0)\n")
    code, _, err = run_cli(capsys, "explain", f"{src}:f", "--arg", "f32[3]")
    assert_one_line_error(code, err, "called sys.exit(0) at its top level")


def test_explain_source_prints_the_cuda_kernel(capsys):
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]", "--source")
    assert (code, err) == (0, "")
    assert "-- kernels: 1 --" in out
    assert 'extern "C" __global__' in out and "k0_rows_max_sub_exp_sum_div" in out


def _nvrtc_importable() -> bool:
    try:
        import cuda.core  # noqa: F401
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _nvrtc_importable(), reason="cuda-core (NVRTC) is not installed: pip install -e '.[test]'")
def test_explain_ptxas_reports_registers(capsys):
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]", "--ptxas")
    assert (code, err) == (0, "")
    table = out[out.index("kernel  "):].splitlines()
    assert table[0].split() == ["kernel", "arch", "registers", "spills", "(st/ld", "B)", "stack", "B", "smem", "B",
                                "threads", "blocks/SM", "occupancy"]
    row = table[1].split()
    assert row[:2] == ["k0_rows_max_sub_exp_sum_div", "sm_90"] and 8 <= int(row[2]) <= 255
    assert row[3] == "0/0" and row[6] == "256" and 1 <= int(row[7]) <= 8 and row[8].endswith("%")


@pytest.mark.skipif(not _nvrtc_importable(), reason="cuda-core (NVRTC) is not installed: pip install -e '.[test]'")
def test_ptxas_returns_rows_with_occupancy_from_the_report() -> None:
    from fusec.inspect.kernel_report import PtxasRow, blocks_per_sm

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from softmax import softmax
    finally:
        sys.path.remove(str(ROOT / "examples"))
    report = softmax.ptxas(fusec.ArraySpec((64, 64), "float32"))
    assert len(report) == 1 and isinstance(report[0], PtxasRow)
    row = report.row("k0")
    assert row.kernel == "k0_rows_max_sub_exp_sum_div" and row.arch == "sm_90" and row.spills == 0
    assert row.blocks_per_sm == blocks_per_sm(row.registers, row.shared_memory, row.threads)
    assert row.occupancy == row.blocks_per_sm * row.threads / 2048
    assert str(report).splitlines()[1].startswith("k0_rows_max_sub_exp_sum_div  sm_90")


@pytest.mark.parametrize("registers, smem, threads, blocks", [
    (32, 0, 256, 8),        # threads: 2048 / 256
    (64, 0, 256, 4),        # registers: 65536 / (64 * 256)
    (255, 0, 128, 2),       # 255 registers round to 256 per thread: 65536 / (256 * 128)
    (16, 48 * 1024, 128, 4),  # shared memory: 228 KiB / 49 KiB
    (16, 0, 32, 32),        # at most 32 blocks
])
def test_blocks_per_sm_takes_the_tightest_limit(registers, smem, threads, blocks) -> None:
    from fusec.inspect.kernel_report import blocks_per_sm

    assert blocks_per_sm(registers, smem, threads) == blocks


def test_explain_source_includes_the_helper_headers_and_full_inlines_them(capsys) -> None:
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[8192,8192]", "--source")
    assert (code, err) == (0, "")
    source = out[out.index("// fusec helper headers"):]
    assert len(source.splitlines()) < 150 and source.count('extern "C" __global__') == 1
    assert '#include "fusec_device.cuh"' in source and '#include "schedule.cuh"' in source
    folded = sum(int(n) for n in re.findall(r"\((\d+) lines folded", source))
    notes = [line for line in source.splitlines() if "lines folded" in line or line.lstrip().startswith("//   ")]
    code, full_out, _ = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[8192,8192]", "--full")
    report = out[:out.index("// fusec helper headers")]
    full = full_out[len(report):]
    assert full_out.startswith(report) and "#include \"fusec_device.cuh\"" not in full and len(full.splitlines()) > 600
    headers = sum(len(render.header_text(line.split('"')[1]).splitlines()) + 1 for line in source.splitlines()
                  if line.startswith("#include"))  # each header's lines, then a blank line
    include_block = 1 + sum(line.startswith("#include") for line in source.splitlines()) + 1  # note, includes, blank
    assert len(full.splitlines()) == len(source.splitlines()) - len(notes) + folded - include_block + headers, (
        "the notes stand for exactly those lines, the include lines for the headers' text")
    assert full.rstrip().endswith(source.rstrip().splitlines()[-1])


def test_cuda_source_full_is_exactly_what_compiles_and_folded_ends_with_each_body() -> None:
    from fusec.kinds import generate_plan

    f = fusec.fuse(lambda x, y: ((x - y.mean(axis=0)) ** 2).sum(axis=0) + np.exp(x).max(), name="two")
    specs = (fusec.ArraySpec((33, 17), "float32"), fusec.ArraySpec((33, 17), "float32"))
    kernels = generate_plan(f.plan(*specs), dict(zip(f.plan(*specs).graph.inputs, specs)))
    assert f.cuda_source(*specs, full=True) == "\n".join(render.inline_headers(k.source) for k in kernels)
    folded = f.cuda_source(*specs)
    assert folded.count("// fusec helper headers") == len(kernels) >= 2
    for k in kernels:
        assert k.source.splitlines()[-1] in folded.splitlines()
        assert folded.count(k.source.splitlines()[0]) >= 1  # each kernel's include block, as compiled


def test_explain_scalar_sets_a_python_number_parameter(capsys, tmp_path) -> None:
    src = tmp_path / "temp.py"
    src.write_text("import numpy as np\n\ndef softmax_t(temperature, x, *, bias=0):\n"
                   "    z = x / temperature + bias\n    return np.exp(z - z.max(axis=-1, keepdims=True))\n")
    code, out, err = run_cli(capsys, "explain", f"{src}:softmax_t", "--scalar", "temperature=0.5", "--arg",
                             "f32[4,8]", "--scalar", "bias=2", "--color", "never")
    assert (code, err) == (0, "")
    traced = out.split("-- traced IR --")[1].split("--")[0]
    assert "%temperature: f64[]" in traced and "%bias: i64[]" in traced  # runtime scalars: inputs of the kernel
    code, _, err = run_cli(capsys, "explain", f"{src}:softmax_t", "--arg", "f32[4,8]", "--scalar", "tau=1")
    assert_one_line_error(code, err, "--scalar tau: softmax_t has no parameter 'tau'", "temperature, x, bias")
    code, _, err = run_cli(capsys, "explain", f"{src}:softmax_t", "--arg", "f32[4,8]", "--scalar", "temperature=hot")
    assert_one_line_error(code, err, "bad --scalar 'temperature=hot'", "not a number")


@pytest.mark.parametrize("text, value", [("t=0.5", 0.5), ("t=3", 3), ("t=0x10", 16), ("t=True", True),
                                         ("t=-inf", float("-inf")), ("t=1e-3", 1e-3)])
def test_parse_scalars_reads_python_numbers(text, value) -> None:
    from fusec.__main__ import parse_scalars

    got = parse_scalars([text])["t"]
    assert got == value and type(got) is type(value)
    assert np.isnan(parse_scalars(["t=nan"])["t"])


def test_opt_help_lists_every_registered_pass(capsys) -> None:
    from fusec.passes.manager import PASSES

    code, out, _ = run_cli(capsys, "opt", "--help")
    assert code == 0
    for name, p in PASSES.items():
        assert f"  {name}" in out and p.summary in out
    assert "fusec.fuse runs canonicalize,fold,cse,dce,fuse." in out


CONSOLE_SCRIPT = """#!/usr/bin/env python
# a copy of what pip writes for the fusec console script
import re
import sys
from fusec.__main__ import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def test_cli_errors_never_name_the_console_script(tmp_path) -> None:
    script = tmp_path / "bin" / "fusec"
    script.parent.mkdir()
    script.write_text(CONSOLE_SCRIPT)
    user = tmp_path / "user.py"
    user.write_text("import numpy as np\n\ndef f(x):\n    if x.sum() > 0:\n        return x\n    return x @ x\n\n"
                    "def g(x, t):\n    return x * t\n")
    bad_ir = tmp_path / "bad.fir"
    bad_ir.write_text("func @f(%x: f32[4]) -> f32[4] {\n  %0 = abs %y : f32[4]\n  return %0\n}\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cases = [(["explain", f"{user}:f", "--arg", "f32[4]"], f"{user}:4"),
             (["explain", f"{user}:g", "--arg", "f32[4]"], None),
             (["explain", f"{user}:g", "--arg", "f32[4"], None),
             (["opt", str(bad_ir)], f"{bad_ir}:2"),
             (["opt", str(bad_ir), "-p", "bogus"], None),
             (["cache", "bogus"], None)]
    for argv, where in cases:
        proc = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, env=env,
                              timeout=120)
        assert proc.returncode != 0 and proc.stderr.startswith("fusec: error: "), (argv, proc.stderr)
        assert str(script) not in proc.stderr and "bin/fusec" not in proc.stderr, (argv, proc.stderr)
        if where:
            assert proc.stderr.startswith(f"fusec: error: {where}: "), (argv, proc.stderr)


def test_explain_prints_plain_text_when_piped(capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, out, _ = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]")
    assert code == 0 and "\x1b[" not in out  # capsys is not a terminal


def test_explain_color_always_and_never(capsys):
    code, colored, _ = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]", "--color", "always")
    assert code == 0 and "\x1b[1;36m-- kernels: 1 --\x1b[0m" in colored
    code, plain, _ = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]", "--color=never")
    assert code == 0 and "\x1b[" not in plain
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == plain


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("choice, no_color, expected", [
    ("auto", None, True), ("auto", "1", False), ("auto", "", True), ("always", "1", True), ("never", None, False),
])
def test_use_color_follows_terminal_and_no_color(monkeypatch, choice, no_color, expected):
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    assert use_color(choice, _Terminal()) is expected
    assert use_color(choice, io.StringIO()) is (choice == "always")


# the acceptance test: one kernel cluster for softmax
@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not found: install graphviz to draw SVG")
def test_explain_svg_of_softmax_shows_one_kernel_cluster(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out_svg = tmp_path / "s.svg"
    code, out, err = run_cli(capsys, "explain", "examples/softmax.py:softmax", "--arg", "f32[8192,8192]",
                             "--svg", str(out_svg))
    assert (code, err) == (0, "")
    assert out.rstrip().endswith(f"wrote {out_svg}")
    svg = out_svg.read_text()
    assert svg.lstrip().startswith(("<?xml", "<!DOCTYPE", "<svg")) and "</svg>" in svg
    assert svg.count('class="cluster"') == 1
    assert "k0_rows_max_sub_exp_sum_div" in svg


def test_explain_svg_dot_suffix_writes_dot_text(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # needs no Graphviz
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]",
                             "--svg", str(tmp_path / "s.dot"))
    assert (code, err) == (0, "")
    text = (tmp_path / "s.dot").read_text()
    assert text.startswith('digraph "softmax" {') and text.count("subgraph cluster_") == 1


def test_explain_svg_without_graphviz_is_one_line_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no `dot` on PATH
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]",
                             "--svg", str(tmp_path / "s.svg"))
    assert_one_line_error(code, err, "Graphviz 'dot' was not found", "s.svg was not drawn",
                          f"wrote the DOT text to {tmp_path / 's.dot'}")
    assert "-- kernels: 1 --" in out  # the report still printed
    assert (tmp_path / "s.dot").read_text().startswith('digraph "softmax"')
    assert not (tmp_path / "s.svg").exists()


@pytest.mark.parametrize("name, fragment", [("s.txt", "use .svg"), ("no/such/dir/s.svg", "no such directory")])
def test_explain_svg_bad_path_is_one_line_error(capsys, tmp_path, name, fragment):
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]",
                             "--svg", str(tmp_path / name))
    assert_one_line_error(code, err, "--svg", fragment)
    assert out == ""  # checked before any work


@pytest.mark.skipif(cuda_gpu_present(), reason="a CUDA GPU is present: --run works here")
def test_explain_run_without_gpu_is_one_line_error(capsys):
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[64,64]", "--run")
    assert_one_line_error(code, err, "fusec explain --run needs a CUDA GPU", "drop --run")
    assert out == ""


@pytest.mark.gpu
def test_explain_run_on_gpu_prints_times(capsys):
    code, out, err = run_cli(capsys, "explain", f"{SOFTMAX}:softmax", "--arg", "f32[1024,1024]", "--run")
    assert (code, err) == (0, "")
    assert "-- measured on " in out and "GB/s" in out and "fusion is " in out


def test_explain_unsupported_call_is_one_line_error(capsys, tmp_path):
    src = tmp_path / "sort.py"
    src.write_text("import numpy as np\n\n\ndef f(x):\n    return np.sort(x)\n")
    code, _, err = run_cli(capsys, "explain", f"{src}:f", "--arg", "f32[4,4]")
    assert_one_line_error(code, err, f"{src}:5", "numpy.sort is not supported")


def test_explain_function_that_raises_names_its_line(capsys, tmp_path):
    src = tmp_path / "raises.py"
    src.write_text("def f(x):\n    raise KeyError('boom')\n")
    code, _, err = run_cli(capsys, "explain", f"{src}:f", "--arg", "f32[3]")
    assert_one_line_error(code, err, f"{src}:2", "f raised KeyError while fusec traced it", "boom")
    assert "internal error" not in err


# --- demo, help, usage ---------------------------------------------------------------------------


def test_demo_without_gpu_checks_against_numpy(capsys):
    code, out, err = run_cli(capsys, "demo", "--no-gpu")
    assert (code, err) == (0, "")
    assert "no CUDA GPU found: running the NumPy reference backend on small inputs" in out
    assert "exp" in out and "abs" in out
    assert re.search(r"\b3\.00+ GiB", out) and re.search(r"\b1\.00+ GiB", out)  # sum_abs, unfused vs fused
    assert "plan for @sum_abs: 1 kernel(s)" in out and "plan for @softmax: 1 kernel(s)" in out
    assert 'extern "C"' not in out and "--verbose adds the CUDA source" in out
    assert len(out.splitlines()) <= 80
    assert out.rstrip().endswith("result checked against NumPy: OK")


class _CudaRuntimeError(RuntimeError):
    """What CuPy raises when the CUDA runtime fails (``status`` is the cudaError_t)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


def _cupy_with_driver(monkeypatch, driver_version: int) -> None:
    """CuPy (CUDA 13.2 runtime) on a machine whose driver is ``driver_version`` (0: none installed): the runtime
    says "insufficient" in both cases, as a real one does."""
    def device_count() -> int:
        raise _CudaRuntimeError(35, "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA "
                                    "runtime version")

    runtime = SimpleNamespace(getDeviceCount=device_count, driverGetVersion=lambda: driver_version,
                              runtimeGetVersion=lambda: 13020)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(runtime=runtime)))


def test_demo_without_nvidia_driver_says_no_driver_not_insufficient_version(capsys, monkeypatch):
    """With no NVIDIA driver the demo said "CUDA driver version is insufficient" (the CUDA runtime's words)."""
    _cupy_with_driver(monkeypatch, 0)
    code, out, err = run_cli(capsys, "demo", "--size", "2^10")
    assert (code, err) == (0, "")
    line = next(line for line in out.splitlines() if line.startswith("no CUDA GPU found"))
    assert "no NVIDIA GPU driver found" in line and "`fusec demo --no-gpu`" in line, line
    assert "insufficient" not in out
    assert out.rstrip().endswith("result checked against NumPy: OK")


def test_demo_with_a_driver_too_old_for_cupy_names_both_versions(capsys, monkeypatch):
    _cupy_with_driver(monkeypatch, 12040)
    code, out, _ = run_cli(capsys, "demo", "--size", "2^10")
    assert code == 0
    assert "the NVIDIA driver supports CUDA 12.4, older than this CuPy's CUDA 13.2" in out
    assert "fusec[cuda12]" in out and "`fusec demo --no-gpu`" in out


@pytest.mark.skipif(cuda_gpu_present() or ctypes.util.find_library("cuda") is not None,
                    reason="an NVIDIA driver is installed here")
def test_demo_on_this_machine_without_nvidia_driver_says_so(capsys):
    code, out, _ = run_cli(capsys, "demo", "--size", "2^10")
    assert code == 0 and "no NVIDIA GPU driver found" in out and "insufficient" not in out


def test_demo_verbose_adds_each_kernels_folded_source(capsys):
    code, out, err = run_cli(capsys, "demo", "--no-gpu", "--verbose")
    assert (code, err) == (0, "")
    assert out.count('extern "C" __global__') == 2 and out.count("// fusec helper headers") == 2
    assert out.rstrip().endswith("result checked against NumPy: OK")


def test_demo_size_is_used(capsys):
    code, out, _ = run_cli(capsys, "demo", "--no-gpu", "--size", "2^10")
    assert code == 0
    assert "sum_abs f32[1024]" in out
    assert "x = f32[1024] ==" in out and "func @sum_abs(%x: f32[1024])" in out  # shown as run


@pytest.mark.parametrize("size", ["0", "-5", "lots", "2^x", "2^62", "2^400000", "9" * 5000, str(2**61)])
def test_demo_bad_size_is_one_line_error(capsys, size):
    code, _, err = run_cli(capsys, "demo", f"--size={size}")
    assert code == 2
    assert_one_line_error(code, err, "--size")
    assert len(err) < 300


def test_demo_size_too_big_for_memory_is_a_clear_error_not_internal_error(capsys):
    """``fusec demo --no-gpu --size 99999999999999`` printed the plans, then ended in "internal error:
    MemoryError"; the size is checked against the memory there is before anything runs."""
    code, out, err = run_cli(capsys, "demo", "--no-gpu", "--size", "99999999999999")
    assert_one_line_error(code, err, "--size 99999999999999 needs about 745058.1 GiB to run",
                          "of memory available on this machine: choose a --size of at most")
    assert "internal error" not in err and out == ""


@pytest.mark.skipif(sys.platform != "linux", reason="an address-space limit (RLIMIT_AS) as Linux applies it")
def test_demo_out_of_memory_while_running_is_a_clear_error_not_internal_error():
    """Where the memory check cannot foresee the limit (here an address-space limit of 1.5 GiB, for a run of
    2^28 elements: 1 GiB each for the input and a temporary), running out is still a one-line error, not
    "internal error: MemoryError"."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # no per-core thread stacks within the limit
    proc = subprocess.run([sys.executable, "-m", "fusec", "demo", "--no-gpu", "--size", "2^28"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300, preexec_fn=limit)
    assert proc.returncode == 1, proc.stderr
    assert_one_line_error(proc.returncode, proc.stderr, "choose a")  # (on a machine of less than 2 GiB, the check's)
    assert "ran out of memory (MemoryError): choose a smaller --size" in proc.stderr or "needs about" in proc.stderr


@pytest.mark.gpu
def test_demo_on_gpu_checks_against_numpy(capsys):
    code, out, err = run_cli(capsys, "demo", "--size", "2^20")
    assert (code, err) == (0, "")
    assert "speedup" in out and len(out.splitlines()) <= 80  # one screen on a GPU too
    assert out.rstrip().endswith("result checked against NumPy: OK")


def test_traffic_of_sum_abs_is_three_to_one():
    fused = fusec.fuse(lambda x: abs(x).sum(), name="sum_abs")
    kernels, unfused, minimum = traffic(fused.trace(fusec.ArraySpec((1 << 28,), "float32")))
    assert kernels == 2
    assert unfused == 3 * 2**30 + 4
    assert minimum == 2**30 + 4


def test_gpu_available_never_raises():
    usable, why = gpu_available()
    assert isinstance(usable, bool)
    assert usable or why


@pytest.mark.parametrize("argv", [["--help"], ["opt", "--help"], ["explain", "--help"], ["demo", "--help"],
                                  ["cache", "--help"]])
def test_help_exits_zero(capsys, argv):
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    assert out.startswith("usage: fusec")


@pytest.mark.parametrize("argv, fragment", [
    ([], "required: COMMAND"),
    (["frobnicate"], "invalid choice"),
    (["opt"], "FILE.fir"),
    (["opt", "x.fir", "--bogus"], "unrecognized arguments"),
])
def test_usage_error_is_one_line(capsys, argv, fragment):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert_one_line_error(code, err, fragment)


def test_python_m_fusec_help():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "fusec", "--help"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for command in ("opt", "explain", "demo", "cache"):
        assert command in proc.stdout


# --- README, docs/ops.md ---------------------------------------------------------------------------


def test_docs_ops_block_is_generated_from_the_op_table():
    block = ops_block((ROOT / "docs" / "ops.md").read_text(encoding="utf-8"))
    assert block is not None, "docs/ops.md lacks the <!-- ops:begin --> ... <!-- ops:end --> block"
    assert block == ops_markdown(), ("docs/ops.md's ops list is stale: run "
                                     "`python -m fusec.frontend.ops_doc docs/ops.md docs/limitations.md`")


def test_readme_quick_start_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ('pip install -e ".[test]"', "pytest", "fusec demo", "pytest -m gpu"):
        assert command in readme
