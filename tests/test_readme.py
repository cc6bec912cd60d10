"""Every command and every printed output of README.md and of the pages of docs/ is exercised: each fenced block
is claimed by a test here (or in test_docs.py, for the demo, logging and explain outputs), which runs the command
or the Python snippet and compares what it prints, allowing only for numbers that vary (times); a new block
without a test fails :func:`test_every_readme_block_is_exercised_by_a_test`. The paths and commands the prose
names exist, every relative link leads to a file (and a heading) that exists, and the README stays short."""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.__main__ import build_parser, main
from fusec.passes.manager import DEFAULT_PIPELINE
from tests import backends
from tests.conftest import cuda_gpu_present
from tests.test_examples import load_example

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250  # issue 31: the README is a front door; the rest is in docs/


def pages() -> list[Path]:
    """README.md, then every page of docs/: what the tests below keep true."""
    return [README, *sorted(DOCS.glob("*.md"))]


def page_text(name: str) -> str:
    """The text of a page, ``name`` relative to the repository root (``docs/cli.md``)."""
    return (ROOT / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Block:
    page: Path  # the file that holds it
    line: int  # of the opening fence
    info: str  # the fence's language: bash, python, or "" for printed output
    text: str  # dedented, without the fences

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    out, lines = [], page.read_text(encoding="utf-8").splitlines()
    start = info = None
    for i, line in enumerate(lines, 1):
        if line.strip().startswith("```"):
            if start is None:
                start, info = i, line.strip()[3:]
            else:
                out.append(Block(page, start, info, textwrap.dedent("\n".join(lines[start:i - 1])) + "\n"))
                start = None
    assert start is None, f"{page.relative_to(ROOT)} has an unclosed code fence"
    return out


def blocks() -> list[Block]:
    return [b for page in pages() for b in page_blocks(page)]


def block(needle: str, after: int = 0) -> Block:
    """The one block of README.md and docs/ holding ``needle``; ``after=1``: the block after it on its page (the
    output a snippet prints)."""
    all_blocks = blocks()
    found = [i for i, b in enumerate(all_blocks) if needle in b.text]
    assert len(found) == 1, f"README.md and docs/: {len(found)} blocks hold {needle!r}"
    found_block, chosen = all_blocks[found[0]], all_blocks[found[0] + after]
    assert chosen.page == found_block.page, f"no block follows {needle!r} on {found_block.page.relative_to(ROOT)}"
    return chosen


LOGS_TEST = "tests/test_docs.py::test_logging_example_prints_what_the_page_shows"
# the block each test covers: (needle, blocks after it) -> the test
CLAIMS = {
    ('pip install -e ".[test]"    #', 0): "test_quick_start_commands_are_what_ci_runs_and_demo_runs_here",
    ("print(softmax.trace(", 0): "test_quick_start_snippet_prints_the_ir_shown",
    ("print(softmax.trace(", 1): "test_quick_start_snippet_prints_the_ir_shown",
    ("fusec demo [--size N]", 0): "test_cli_synopsis_is_every_option_of_every_command",
    ("$ fusec demo --no-gpu", 0): "tests/test_docs.py::test_readme_demo_output_is_what_the_command_prints",
    ('fusec.set_logs("trace,recompile")', 0): LOGS_TEST,
    ('fusec.set_logs("trace,recompile")', 1): LOGS_TEST,
    ("$ fusec explain examples/softmax.py:softmax", 0):
        "tests/test_docs.py::test_explain_page_output_is_what_the_command_prints",
    ("e = softmax.explain(fusec.ArraySpec", 0): "test_explain_from_python_block_runs_as_its_comments_say",
    ('schedules={"k0": "rows:block_regs,threads=512"}', 0): "test_schedules_block_forces_the_schedule",
    ("--schedule k0=rows:block --source", 0): "test_schedule_command_forces_the_schedule_and_prints_the_source",
    ("Python function --trace--> Graph", 0): "test_how_it_works_diagram_names_the_pipeline",
    ("func @softmax(%x: f32[64,64])", 0): "test_opt_output_block_is_what_fusec_opt_prints",
    ("import dask.array as da", 0): "test_dask_block_runs_lazily_and_computes_softmax",
    ("def adam(p, g, m, v, lr, step", 0): "test_runtime_scalars_block_traces_once",
    ("def adamw(p, g, m, v, lr, step", 0): "test_adamw_block_is_one_kernel_updating_its_arguments",
    ("pytest -m gpu           #", 0): "test_tests_block_commands",
    ('@register("mypass"', 0): "test_extending_with_a_pass_block_registers_a_pass",
    ("keep = fusec.random.bernoulli(key", 0): "test_random_block_is_one_kernel_with_new_numbers_each_step",
}
# blocks no test runs, each with the reason (a test fails when one of these is gone, so the list stays current)
NOT_RUN = {
    "from dask_cuda import LocalCUDACluster": "needs dask_cuda, GPUs and zarr files; tests/gpu/test_dask_gpu.py runs "
                                              "fused functions on a LocalCUDACluster",
    "time(stage) ~ max(": "a cost model, not a command: benchmarks/dask_bench.py measures its terms",
}


def test_every_readme_block_is_exercised_by_a_test():
    claimed = {}
    for (needle, after), test in CLAIMS.items():
        b = block(needle, after)
        claimed[b.where] = test
        path, _, name = test.rpartition("::")
        module = sys.modules[__name__] if not path else __import__(path[:-3].replace("/", "."), fromlist=["_"])
        assert callable(getattr(module, name or test, None)), f"{test} does not exist"
    for needle in NOT_RUN:
        claimed[block(needle).where] = "not run"
    unclaimed = [f"{b.where}: {b.text.splitlines()[0]}" for b in blocks() if b.where not in claimed]
    assert not unclaimed, f"README.md and docs/ blocks no test exercises (add one to CLAIMS): {unclaimed}"


def _run_main(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --- quick start -------------------------------------------------------------------------------------------


def _commands(b: Block) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in b.text.splitlines() if line.split("#", 1)[0].strip()]


def test_quick_start_commands_are_what_ci_runs_and_demo_runs_here(capsys, monkeypatch):
    commands = _commands(block('pip install -e ".[test]"    #'))
    assert commands == ['pip install -e ".[test]"', "pytest", "fusec demo"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r'^pip install [^\n]*-e "\.\[test\]"', ci, re.MULTILINE)
    assert re.search(r"^timeout [^\n]* pytest ", ci, re.MULTILINE)
    assert re.search(r"^if fusec demo --no-gpu ", ci, re.MULTILINE)  # the README: "`fusec demo` as `--no-gpu`"
    if cuda_gpu_present():
        pytest.skip("with a GPU, fusec demo times 2^28-element runs: the GPU tests run it")
    monkeypatch.chdir(ROOT)
    code, out, err = _run_main(capsys, shlex.split(commands[2])[1:])
    assert (code, err) == (0, "")
    assert len(out.splitlines()) <= 80, "the README: 'in one screen'"
    assert "== sum_abs: abs(x).sum()" in out and "== softmax:" in out and "no CUDA GPU found" in out
    assert out.rstrip().endswith("result checked against NumPy: OK")
    # the README's demo block is the --no-gpu run: without a GPU, `fusec demo` differs in the reason only
    monkeypatch.chdir(ROOT)
    _, no_gpu, _ = _run_main(capsys, ["demo", "--no-gpu"])
    differ = [(a, b) for a, b in zip(out.splitlines(), no_gpu.splitlines()) if a != b]
    assert len(out.splitlines()) == len(no_gpu.splitlines()) and len(differ) == 1
    assert differ[0][1].endswith("(--no-gpu given)") and differ[0][0].startswith("no CUDA GPU found: ")


def _exec_printing(snippet: Block, namespace: dict) -> str:
    """Run a page's Python block, its lines numbered as on the page (so tracebacks, and fusec's source lookups,
    read the page's own lines), and return what it printed."""
    out = io.StringIO()
    code = compile("\n" * snippet.line + snippet.text, str(snippet.page), "exec")
    with contextlib.redirect_stdout(out):
        exec(code, namespace)  # noqa: S102 - the page's own snippet
    return out.getvalue()


def test_quick_start_snippet_prints_the_ir_shown():
    snippet, shown = block("print(softmax.trace("), block("print(softmax.trace(", 1)
    assert snippet.info == "python" and shown.info == ""
    namespace: dict = {}
    printed = _exec_printing(snippet, namespace)
    assert printed == shown.text
    x = namespace["x"]
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(namespace["y"], e / e.sum(axis=-1, keepdims=True), rtol=2e-6)
    assert isinstance(namespace["y"], np.ndarray)  # "NumPy in: the reference backend, NumPy out"


# --- the command line --------------------------------------------------------------------------------------


def _subparsers() -> dict:
    parser = build_parser()
    (action,) = [a for a in parser._actions if a.dest == "command"]
    return action.choices


def test_cli_synopsis_is_every_option_of_every_command():
    synopsis = block("fusec demo [--size N]")
    commands = _subparsers()
    seen = set()
    for line in _commands(synopsis):
        words = line.split()
        assert words[0] == "fusec", line
        name = words[1]
        seen.add(name)
        sub = commands[name]
        options = {s for a in sub._actions for s in a.option_strings if s.startswith("--")} - {"--help"}
        shown = set(re.findall(r"--[a-z][a-z-]*", line))
        for short in re.findall(r"(?<![\w-])-([a-z])\b", line):
            assert f"-{short}" in sub._option_string_actions, (name, short)
        # every long option the command takes is in its line, and the line shows no other; -p's long form is --passes
        assert shown == options - {"--passes"}, (name, shown ^ options)
        for choice in re.findall(r"\[(\w+(?:\|\w+)*)\]$", line):
            positional = [a for a in sub._actions if not a.option_strings and a.choices]
            assert positional and set(choice.split("|")) <= set(positional[0].choices), (name, choice)
    assert seen == set(commands), f"the synopsis lacks {set(commands) - seen}"


def test_python_m_fusec_is_the_same_command():
    assert "(`python -m fusec ...` is the same; every command has `--help`.)" in README.read_text(encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "fusec", "opt", "--help"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: fusec opt")


# --- what explain shows ------------------------------------------------------------------------------------


def _statements(code: str) -> list[str]:
    """The snippet's statements, each with its comment line (for the ones whose comment says what it needs)."""
    lines = code.splitlines()
    return [("\n".join(lines[s.lineno - 1:s.end_lineno])) for s in ast.parse(code).body]


def test_explain_from_python_block_runs_as_its_comments_say(tmp_path, monkeypatch, capsys):
    snippet = block("e = softmax.explain(fusec.ArraySpec")
    softmax = load_example("softmax").softmax
    x = np.random.default_rng(1).standard_normal((256, 512), dtype=np.float32)
    namespace = {"fusec": fusec, "softmax": softmax, "np": np, "x": x}
    monkeypatch.chdir(tmp_path)
    readme_report = block("$ fusec explain examples/softmax.py:softmax").text.split("\n", 1)[1]
    for statement in _statements(snippet.text):
        code, _, comment = statement.partition("  #")
        if "on a GPU" in comment and not cuda_gpu_present():
            with pytest.raises(fusec.FusecError, match="GPU"):
                exec(code, namespace)  # noqa: S102 - "run=True needs a CUDA GPU; without one it raises FusecError"
            continue
        if "ptxas" in code:
            pytest.importorskip("cuda.core", reason="cuda-core (NVRTC) is not installed: pip install -e '.[test]'")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # save() without Graphviz warns that it wrote the DOT text
            value = eval(code, namespace) if not code.lstrip().startswith(("report =", "e =", "spec =")) else exec(
                code, namespace)  # noqa: S307
        printed = capsys.readouterr().out
        if code.startswith("print(e)"):
            assert printed.rstrip("\n") == readme_report.rstrip("\n"), "print(e) is the report above"
        elif code.startswith("e.to_dot()"):
            assert value.startswith("digraph") and "cluster" in value
        elif code.startswith("e.save("):
            assert (tmp_path / "softmax.svg").is_file() or (tmp_path / "softmax.dot").is_file()
        elif code.strip() == "e":
            html = value._repr_html_()
            assert "<table" in html and "k0_rows_max_sub_exp_sum_div" in html
        elif code.startswith("print(softmax.cuda_source(spec))"):
            assert printed.startswith("// fusec helper headers") and '#include "fusec_device.cuh"' in printed
            assert "lines folded" in printed
        elif "full=True" in code:
            assert "lines folded" not in value and value.count('extern "C" __global__') == 1
            assert "#include \"" not in value  # one translation unit, headers inlined
        elif code.startswith("print(report)"):
            assert printed.splitlines()[0].split()[:3] == ["kernel", "arch", "registers"]
        elif "report.row(" in code:
            assert isinstance(value, int) and value > 0


def test_schedules_block_forces_the_schedule():
    snippet = block('schedules={"k0": "rows:block_regs,threads=512"}')
    softmax = load_example("softmax").softmax
    namespace = {"fusec": fusec, "softmax": softmax}
    exec(snippet.text, namespace)  # noqa: S102
    spec = fusec.ArraySpec((8192, 8192), "float32")
    line = next(x for x in str(namespace["f"].explain(spec)).splitlines() if x.startswith("  schedule: "))
    assert line.startswith("  schedule: rows:block_regs,threads=512,") and line.endswith(" (forced)")
    again = softmax.with_schedules({"k0": "rows:block_regs,threads=512"}).explain(spec)  # "or softmax.with_schedules"
    assert line in str(again).splitlines()


def test_schedule_command_forces_the_schedule_and_prints_the_source(capsys, monkeypatch):
    (command,) = _commands(block("--schedule k0=rows:block --source"))
    monkeypatch.chdir(ROOT)
    code, out, err = _run_main(capsys, shlex.split(command)[1:])
    assert (code, err) == (0, "")
    assert "  schedule: rows:block (forced)" in out and "// schedule: rows:block\n" in out
    assert out.count('extern "C" __global__') == 1


# --- how it works ------------------------------------------------------------------------------------------


def test_how_it_works_diagram_names_the_pipeline():
    diagram = block("Python function --trace--> Graph").text
    assert f"passes: {', '.join(DEFAULT_PIPELINE)} -->" in diagram


def test_opt_output_block_is_what_fusec_opt_prints(tmp_path, capsys):
    shown = block("func @softmax(%x: f32[64,64])")
    m = re.search(r"\(from `(fusec opt softmax\.fir -p\s+[a-z,]+)`\):", shown.page.read_text(encoding="utf-8"))
    assert m, f"{shown.page.relative_to(ROOT)} does not say which command printed the fused IR"
    argv = shlex.split(m[1].replace("\n", " "))
    softmax = load_example("softmax").softmax
    (tmp_path / "softmax.fir").write_text(str(softmax.trace(fusec.ArraySpec((64, 64), "float32"))))
    argv[2] = str(tmp_path / "softmax.fir")
    code, out, err = _run_main(capsys, argv[1:])
    assert (code, err) == (0, "")
    assert out == shown.text


# --- Dask, scalars, in-place updates -----------------------------------------------------------------------


def test_dask_block_runs_lazily_and_computes_softmax(capsys):
    da = pytest.importorskip("dask.array", reason="Dask is not installed: pip install -e '.[dask]'")
    snippet = block("import dask.array as da")
    softmax = load_example("softmax").softmax
    host_array = np.random.default_rng(2).standard_normal((2048, 2048), dtype=np.float32)
    namespace = {"softmax": softmax, "host_array": host_array}
    printed = _exec_printing(snippet, namespace)
    assert isinstance(namespace["y"], da.Array)  # "a lazy Dask array"
    assert "stage 0" in printed and "bytes moved" in printed  # "the stages, the tasks of each and the bytes"
    e = np.exp(host_array - host_array.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(namespace["y"].compute(), e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-8)


def _adam_arrays(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(1000).astype(np.float32) for name in ("p", "g", "m")} | {
        "v": np.abs(rng.standard_normal(1000)).astype(np.float32)}


def test_runtime_scalars_block_traces_once():
    snippet = block("def adam(p, g, m, v, lr, step")
    namespace = {"fusec": fusec, "np": np, "schedule": lambda step: 1e-3 * 0.99 ** step, **_adam_arrays(3)}
    plain = {"np": np, "schedule": namespace["schedule"], **_adam_arrays(3)}
    exec(snippet.text, namespace)  # noqa: S102
    exec(snippet.text.replace("@fusec.fuse\n", ""), plain)  # noqa: S102 - the same steps, plain NumPy
    info = namespace["adam"].cache_info()
    assert (info.traces, info.retraces) == (1, 0), "the README: 'traced and compiled once'"
    for name in ("p", "m", "v"):
        np.testing.assert_allclose(namespace[name], plain[name], rtol=1e-5, atol=1e-7)


def test_random_block_is_one_kernel_with_new_numbers_each_step():
    snippet = block("keep = fusec.random.bernoulli(key")
    x = np.random.default_rng(2).standard_normal((32, 40)).astype(np.float32)
    namespace = {"x": x, "seed": 5, "range": lambda n: range(3)}  # three of its steps
    exec(snippet.text, namespace)  # noqa: S102
    dropout = namespace["dropout"]
    assert dropout.cache_info().traces == 1 and len(dropout.plan(x, (5, 0), 0.1).kernels) == 1
    masks = [dropout(x, (5, step), 0.1) != 0 for step in range(3)]
    assert not np.array_equal(masks[0], masks[1]) and abs(masks[0].mean() - 0.9) < 0.05
    assert np.array_equal(namespace["y"], dropout.fn(x, (5, 2), 0.1))  # the last step's, as NumPy computes it


def test_adamw_block_is_one_kernel_updating_its_arguments():
    snippet = block("def adamw(p, g, m, v, lr, step")
    namespace = {"fusec": fusec, "np": np}
    plain = {"np": np}
    exec(snippet.text, namespace)  # noqa: S102
    exec(snippet.text.replace("@fusec.fuse\n", ""), plain)  # noqa: S102
    spec = fusec.ArraySpec((1000,), "float32")
    assert namespace["adamw"].plan(spec, spec, spec, spec, 1e-3, 2).kernels.__len__() == 1
    fused_args, plain_args = _adam_arrays(4), _adam_arrays(4)
    assert namespace["adamw"](*fused_args.values(), 1e-3, 2) is None
    plain["adamw"](*plain_args.values(), 1e-3, 2)
    for name in ("p", "m", "v"):  # "change the caller's array"
        np.testing.assert_allclose(fused_args[name], plain_args[name], rtol=1e-6, atol=1e-7)
        assert not np.array_equal(fused_args[name], _adam_arrays(4)[name])


# --- tests, extending ----------------------------------------------------------------------------------------


def test_tests_block_commands():
    commands = _commands(block("pytest -m gpu           #"))
    assert commands == ["pytest", "pytest -m gpu", "pytest --gpu-build",
                        "bash scripts/gpu_check.sh --out /tmp/gpu-check"]
    assert (ROOT / "scripts" / "gpu_check.sh").is_file()  # its own behaviour: tests/test_gpu_check.py
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"gpu: needs an NVIDIA GPU' in pyproject and 'testpaths = ["tests"]' in pyproject
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p",
                           "no:cacheprovider", "tests/test_cli.py"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    selected = [line for line in done.stdout.splitlines() if "::" in line]
    assert selected and all("gpu" in line for line in selected)  # the GPU tests of test_cli.py, only those
    # the build-only mode's command, collecting (tests/test_gpu_build.py runs the mode); a GPU makes it refuse
    done = subprocess.run([sys.executable, "-m", *shlex.split(commands[2]), "--collect-only", "-q", "-p",
                           "no:cacheprovider"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    if cuda_gpu_present():
        assert done.returncode != 0 and "is for machines without a GPU" in done.stderr
        return
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(collected) > 5000 and {line.split("::")[0] for line in collected} >= set(backends.FILES)
    # tests/gpu, and of the files whose tests run on both backends the CuPy halves only
    assert all(line.startswith("tests/gpu/") or (line.split("::")[0] in backends.FILES
                                                 and "cupy" in line.partition("[")[2].rstrip("]").split("-"))
               for line in collected)
    assert "fusec GPU build-only mode" in done.stdout


def test_extending_with_a_pass_block_registers_a_pass(tmp_path):
    snippet = block('@register("mypass"')
    script = tmp_path / "mypass.py"
    script.write_text(snippet.text + textwrap.dedent('''
        import sys
        from fusec.__main__ import main
        from fusec.ir.text import parse
        g = parse("func @f(%x: f32[4]) -> f32[4] {\\n  %0 = exp %x : f32[4]\\n  return %0\\n}")
        assert mypass(g) is g  # "rewrite returns the same Graph when nothing changed"
        sys.exit(main(sys.argv[1:]))
    '''))
    (tmp_path / "case.fir").write_text("// RUN: mypass\nfunc @f(%x: f32[4]) -> f32[4] {\n  return %x\n}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    help_text = subprocess.run([sys.executable, str(script), "opt", "--help"], capture_output=True, text=True,
                               env=env, timeout=120)
    assert help_text.returncode == 0 and re.search(r"^\s+mypass\s+what it does, in one line$", help_text.stdout,
                                                   re.MULTILINE), help_text.stdout
    # "Try it by hand with `fusec opt case.fir -p mypass --dump`"
    done = subprocess.run([sys.executable, str(script), "opt", str(tmp_path / "case.fir"), "-p", "mypass", "--dump"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "# after mypass\nfunc @f(%x: f32[4]) -> f32[4] {\n  return %x\n}\n"


def test_every_pass_case_runs_through_fusec_opt(capsys):
    """The README: 'The pass tests are `.fir` files run through the same machinery': each case file, as it is,
    through `fusec opt FILE -p PASSES` prints its CHECK lines (or fails with its CHECK-ERROR)."""
    from tests.passes.test_cases import CASE_FILES, load_case

    for path in CASE_FILES:
        case = load_case(path)
        code, out, err = _run_main(capsys, ["opt", str(path), "-p", case.passes])
        if case.error is None:
            assert (code, err) == (0, ""), path.name
            assert out == case.expected + "\n", path.name
        else:
            assert code != 0 and case.error.split(".fir:", 1)[-1] in err, (path.name, err)


# --- the prose ------------------------------------------------------------------------------------------------


def test_paths_the_readme_and_docs_name_exist():
    """Paths in code spans are the repository root's (the commands run there), in every page."""
    paths = set()
    for page in pages():
        text = page.read_text(encoding="utf-8")
        paths |= set(re.findall(r"`((?:\.ci|fusec|tests|templates|scripts|benchmarks|examples|docs)/[\w./-]*)`", text))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists() and not (ROOT / p.split(" ")[0]).exists())
    assert not missing, f"README.md or docs/ name paths that do not exist: {missing}"


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower case, punctuation other than ``-`` and
    ``_`` dropped, each space a ``-``."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = re.sub(r"[*_]{1,2}([^*_]+)[*_]{1,2}", r"\1", text)  # emphasis
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _outside_code(text: str) -> str:
    """``text`` with its fenced blocks blanked (their lines kept, empty) and each code span a placeholder."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else line)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "code", "\n".join(lines))


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings, GitHub's way (a repeated slug gets ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out = set()
    lines = page.read_text(encoding="utf-8").splitlines()
    fenced = False
    for line in lines:
        if line.strip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6} (.+?)\s*#*$", line)
        if m:
            slug = github_slug(m.group(1))
            out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return out


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_github_slug_and_links_are_read_as_github_does(tmp_path):
    assert github_slug("What `explain` shows") == "what-explain-shows"
    assert github_slug("NVRTC 13.3 or later for 8- and 16-bit values") == "nvrtc-133-or-later-for-8--and-16-bit-values"
    assert github_slug("Beyond one GPU: Dask arrays") == "beyond-one-gpu-dask-arrays"
    page = tmp_path / "page.md"
    page.write_text("# A b\n\n```python\n# not a heading\n```\n\n## A b\n\n[x](#a-b-1) `[y](nowhere.md)`\n")
    assert anchors(page) == {"a-b", "a-b-1"}
    assert _LINK.findall(_outside_code(page.read_text())) == ["#a-b-1"]


LINKED_PAGES = ("examples/README.md", "benchmarks/README.md", "BENCHMARKS.md")  # beside README.md and docs/


def test_every_relative_link_leads_to_a_file_and_heading_that_exist():
    checked, broken = 0, []
    for page in [*pages(), *(ROOT / name for name in LINKED_PAGES)]:
        for target in _LINK.findall(_outside_code(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            checked += 1
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not file.exists():
                broken.append(f"{where}: no {path}")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{where}: {file.relative_to(ROOT)} has no heading #{anchor}")
    assert checked > 40
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_readme_is_a_front_door():
    """Issue 31: under 250 lines, the rest in docs/, and every page of docs/ linked from the README."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < README_MAX_LINES, f"README.md has {len(text.splitlines())} lines"
    linked = {(README.parent / p.partition("#")[0]).resolve() for p in _LINK.findall(_outside_code(text))}
    unlinked = [p.name for p in pages()[1:] if p.resolve() not in linked]
    assert not unlinked, f"README.md's Read more lacks {unlinked}"


OPS_DOC_COMMAND = "python -m fusec.frontend.ops_doc docs/ops.md docs/limitations.md"


def test_ops_doc_command_regenerates_the_list_in_place(tmp_path):
    for name in ("docs/ops.md", "docs/limitations.md", "docs/extending.md"):
        assert f"`{OPS_DOC_COMMAND}`" in page_text(name), name
    (tmp_path / "docs").mkdir()
    for name in ("ops.md", "limitations.md"):
        shutil.copy(DOCS / name, tmp_path / "docs" / name)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in (shlex.split(OPS_DOC_COMMAND), shlex.split(OPS_DOC_COMMAND)[:3]):  # the pages named; the default
        done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "docs/ops.md: already current\ndocs/limitations.md: already current\n"
    for name in ("ops.md", "limitations.md"):
        assert (tmp_path / "docs" / name).read_text(encoding="utf-8") == (DOCS / name).read_text(encoding="utf-8")


def test_replay_sources_script_has_the_commands_the_readme_names():
    assert "`python scripts/replay_sources.py record/compare`" in page_text("docs/extending.md")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "scripts/replay_sources.py", "--help"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and "{record,compare}" in done.stdout


def test_ops_doc_command_has_help_and_one_line_errors(tmp_path, capsys):
    from fusec.frontend.ops_doc import main as ops_doc

    with pytest.raises(SystemExit) as done:
        ops_doc(["--help"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("usage: python -m fusec.frontend.ops_doc")
    assert ops_doc([str(tmp_path / "missing.md")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m fusec.frontend.ops_doc: error: ") and len(err.splitlines()) == 1
    (tmp_path / "plain.md").write_text("# no ops block\n")
    assert ops_doc([str(tmp_path / "plain.md")]) == 1 and "has no '<!-- ops:begin -->'" in capsys.readouterr().err
