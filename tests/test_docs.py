"""The documentation stays true: the explain output of docs/explain.md is what the command prints, the ops and
dtypes list of docs/ops.md is the op table's (and the list of what does not trace in docs/limitations.md the
tracer's hints), the README's demo output and the logging example of docs/logs-and-caches.md are what they
print, the examples' plans and bytes are what ``plan`` says, and every public name has a docstring
(``help(fusec.fuse)`` tells a user everything). Each generated or checked block is found by its markers on
whichever page of README.md and docs/ holds it."""

from __future__ import annotations

import inspect
import os
import pydoc
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fusec
from fusec.__main__ import main
from fusec.frontend import hints
from fusec.frontend.ops_doc import not_traced_block, not_traced_markdown, ops_block, ops_markdown, update_page
from fusec.inspect.explain import Explanation, KernelTime, Timings
from fusec.ir import dtypes
from fusec.ir.ops import OPS
from fusec.runtime.plan import format_bytes
from tests.test_examples import load_example

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
EXAMPLES_README = ROOT / "examples" / "README.md"


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _marked_page(name: str) -> Path:
    """The one page of README.md and docs/ holding the ``<!-- NAME:begin -->`` ... ``<!-- NAME:end -->`` block."""
    holding = [p for p in _pages() if f"<!-- {name}:begin -->" in p.read_text(encoding="utf-8")]
    assert len(holding) == 1, f"{len(holding)} pages of README.md and docs/ hold <!-- {name}:begin -->: {holding}"
    return holding[0]


def _page_text(name: str) -> str:
    return _marked_page(name).read_text(encoding="utf-8")


# --- docs/explain.md, docs/ops.md, docs/limitations.md: explain output, ops list, picture ------------------


def _explain_block() -> tuple[str, str]:
    m = re.search(r"<!-- explain:begin -->\n```\n\$ (.*?)\n(.*?)```\n<!-- explain:end -->", _page_text("explain"),
                  re.DOTALL)
    assert m, "the <!-- explain:begin --> block is not ```$ COMMAND\\nOUTPUT``` <!-- explain:end -->"
    return m.group(1), m.group(2)


def test_explain_page_output_is_what_the_command_prints(capsys, monkeypatch):
    command, shown = _explain_block()
    argv = shlex.split(command)
    assert argv[0] == "fusec"
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(argv[1:]) == 0
    printed = capsys.readouterr().out
    assert shown.rstrip("\n") == printed.rstrip("\n"), (
        f"{_marked_page('explain').name}'s explain output is stale: run `{command}` and paste its output there")


def test_ops_list_covers_every_op_and_dtype():
    assert _marked_page("ops") == DOCS / "ops.md"  # where the README, ops_doc's default and its docstring say
    block = ops_block(_page_text("ops"))
    assert block == ops_markdown()
    for name in OPS:
        assert f"`{name}`" in block, name
    for short in dtypes.SHORT_NAMES.values():
        assert f"`{short}`" in block, short


def test_not_traced_list_is_every_hint_of_the_tracer():
    assert _marked_page("not-traced") == DOCS / "limitations.md"
    block = not_traced_block(_page_text("not-traced"))
    assert block == not_traced_markdown()
    for name, hint in hints.FUNCTION_HINTS.items():
        assert f"`{name}`" in block and hint in block, name


def test_ops_list_update_fixes_a_stale_list(tmp_path):
    stale = tmp_path / "ops.md"
    stale.write_text(_page_text("ops").replace("`hypot`, ", ""), encoding="utf-8")
    assert ops_block(stale.read_text()) != ops_markdown()  # what the ops list test would catch
    assert update_page(str(stale)) is True
    assert ops_block(stale.read_text()) == ops_markdown()
    assert update_page(str(stale)) is False
    stale = tmp_path / "limitations.md"
    stale.write_text(_page_text("not-traced").replace("  - `vdot`:", "  - `vdot`, `nothing`:"), encoding="utf-8")
    assert update_page(str(stale)) is True
    assert not_traced_block(stale.read_text()) == not_traced_markdown()


def _pictures() -> list[Path]:
    """Every picture of README.md and docs/, as the file it shows (relative to its page)."""
    return [(page.parent / picture).resolve() for page in _pages()
            for picture in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text(encoding="utf-8"))]


def test_explain_picture_is_a_drawing_of_one_kernel():
    pictures = _pictures()
    assert pictures, "README.md and docs/ show no picture of the fused DAG"
    for picture in pictures:
        svg = picture.read_text(encoding="utf-8")
        assert "<svg" in svg and svg.count('class="cluster"') == 1


def test_readme_cli_synopsis_names_every_explain_option():
    readme = README.read_text(encoding="utf-8")
    for option in ("--arg", "--svg", "--source", "--ptxas", "--run", "--color"):
        assert option in readme, option


# --- examples/README.md: plans and bytes at the benchmark sizes ------------------------------------------

_ROW = re.compile(r"^\| `(\w+)` \| (.*?) \| (\d+) kernels?: ([\w-]+)(?:, (\d+) outputs)? \| (.*?) \| "
                  r"(.*?) in (\d+) kernels \((\d+\.\d+)x\) \| (.*?) \|$", re.MULTILINE)


def _short(nbytes: int) -> str:
    return format_bytes(nbytes).split(" (")[0]


def _specs(cell: str) -> list[fusec.ArraySpec]:
    specs = []
    for text, times in re.findall(r"`([^`]+)`(?: x (\d+))?", cell):
        specs += [fusec.ArraySpec.parse(text)] * int(times or 1)
    return specs


def test_examples_readme_plans_match_the_planner():
    rows = _ROW.findall(EXAMPLES_README.read_text(encoding="utf-8"))
    names = [r[0] for r in rows]
    assert sorted(names) == sorted(p.stem for p in (ROOT / "examples").glob("*.py") if not p.stem.startswith("_"))
    for name, args, count, kind, outputs, fused, unfused, unfused_count, ratio, speed in rows:
        fn = getattr(load_example(name), name)
        plan = fn.plan(*_specs(args))
        where = f"examples/README.md, {name}"
        assert [k.kind for k in plan.kernels] == [kind] * int(count), where
        assert len(plan.graph.outputs) == int(outputs or 1), where
        assert fused == _short(plan.bytes_moved), where
        assert unfused == _short(plan.bytes_moved_unfused), where
        assert int(unfused_count) == plan.kernel_count_unfused, where
        assert ratio == f"{plan.bytes_moved_unfused / plan.bytes_moved:.2f}", where
        assert speed == "no benchmark" or re.fullmatch(r"\d+\.\d+ ms; .+", speed), where


def test_examples_readme_sizes_are_the_benchmark_sizes():
    pytest.importorskip("benchmarks.workloads")
    from benchmarks.workloads import BY_NAME

    for name, args, *_ in _ROW.findall(EXAMPLES_README.read_text(encoding="utf-8")):
        if name in BY_NAME:
            assert _specs(args)[0].shape == tuple(BY_NAME[name].shape), name


# --- docstrings ------------------------------------------------------------------------------------------


def _public_objects():
    objects = [getattr(fusec, name) for name in fusec.__all__] + [Explanation, KernelTime, Timings]
    for obj in objects:
        yield obj.__name__, obj
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__call__":
                    continue
                target = value.fget if isinstance(value, property) else getattr(value, "func", value)
                if callable(target):
                    yield f"{obj.__name__}.{attr}", target


@pytest.mark.parametrize("name, obj", list(_public_objects()), ids=lambda x: x if isinstance(x, str) else "")
def test_public_name_has_a_docstring(name, obj):
    assert (inspect.getdoc(obj) or "").strip(), f"{name} has no docstring"


def test_help_fuse_tells_everything():
    text = pydoc.render_doc(fusec.fuse, renderer=pydoc.plaintext)
    for needed in ("@fusec.fuse", "name=", "fusion", "out=", ".trace(", ".plan(", ".explain(", "run=True",
                   ".cuda_source(", ".ptxas(", "ArraySpec", "FUSEC_DISABLE_FUSION", "CuPy arrays",
                   "NumPy arrays", ".save(", "FusecError"):
        assert needed in text, needed


def _picture_command() -> re.Match:
    m = re.search(r"`(fusec explain [^`]*--svg (\S+))` draws", _page_text("explain"))
    assert m, "docs/explain.md does not say which command drew its picture"
    return m


def test_explain_picture_is_the_file_its_command_writes():
    # the command runs from the repository root; the page shows the file it wrote
    assert (ROOT / _picture_command().group(2)).resolve() in _pictures()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not found")
def test_explain_picture_command_reproduces_the_picture(tmp_path, monkeypatch, capsys):
    m = _picture_command()
    monkeypatch.chdir(ROOT)
    argv = shlex.split(m.group(1))[1:]
    argv[argv.index("--svg") + 1] = str(tmp_path / "again.svg")
    assert main(argv) == 0
    assert (tmp_path / "again.svg").read_text().count('class="cluster"') == 1


# --- README: the demo's output; docs/logs-and-caches.md: the logging example, the environment variables ---


def _block(name: str) -> str:
    m = re.search(rf"<!-- {name}:begin -->\n(.*?)<!-- {name}:end -->", _page_text(name), re.DOTALL)
    assert m, f"no page holds the <!-- {name}:begin --> ... <!-- {name}:end --> block"
    return m.group(1)


def test_readme_demo_output_is_what_the_command_prints(capsys, monkeypatch):
    assert _marked_page("demo") == README
    m = re.fullmatch(r"```\n\$ (.*?)\n(.*?)```\n", _block("demo"), re.DOTALL)
    assert m, "the demo block is ```$ COMMAND\\nOUTPUT```"
    argv = shlex.split(m.group(1))
    assert argv == ["fusec", "demo", "--no-gpu"]
    monkeypatch.chdir(ROOT)
    assert main(argv[1:]) == 0
    printed = capsys.readouterr().out
    assert m.group(2).rstrip("\n") == printed.rstrip("\n"), (
        "README.md's demo output is stale: run `fusec demo --no-gpu` and paste its output into the block")
    assert len(printed.splitlines()) <= 80


def _seconds_elided(text: str) -> str:
    return re.sub(r" in \d+\.\d+ s", " in N s", text)


def test_logging_example_prints_what_the_page_shows(tmp_path):
    m = re.fullmatch(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```\n", _block("logs"), re.DOTALL)
    assert m, "the logs block is a ```python``` program, 'prints', and its output"
    script = tmp_path / "logs_example.py"
    script.write_text(m.group(1))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FUSEC_LOG", None)
    done = subprocess.run([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert _seconds_elided(done.stdout).rstrip("\n") == _seconds_elided(m.group(2)).rstrip("\n")


SCANNED = ("fusec", "scripts", "benchmarks", "tests", ".ci")
_ENV_CALL = r"(?:environ\.get\(|environ\.setdefault\(|environ\[|getenv\(|setenv\(|delenv\()\s*"
_READ = re.compile(_ENV_CALL + r"""["']([A-Z][A-Z0-9_]*)["']|\$\{?(FUSEC_[A-Z0-9_]+)""")
_CONSTANT = re.compile(r"""^\s*(\w+)\s*(?::\s*[\w\[\], ]+)?=\s*["']([A-Z][A-Z0-9_]*)["']""", re.MULTILINE)
_LOOP = re.compile(r"""for (\w+) in \(([^)]*)\)[^\n]*?environ(?:\.get\(|\[)\1\b""")


def environment_reads(text: str) -> set[str]:
    """The environment variables ``text`` (Python or shell) reads: a name in an ``environ``/``getenv`` call
    or a shell ``$NAME``, a module constant holding the name (``ENV = "FUSEC_AUTOTUNE"`` then
    ``os.environ.get(ENV)``), and the names of a tuple a loop reads one by one."""
    read = {a or b for a, b in _READ.findall(text)}
    for constant, name in _CONSTANT.findall(text):
        if re.search(_ENV_CALL + re.escape(constant) + r"\b", text):
            read.add(name)
    for _, names in _LOOP.findall(text):
        read |= set(re.findall(r"""["']([A-Z][A-Z0-9_]*)["']""", names))
    return read


def test_environment_reads_finds_each_way_the_code_reads_a_variable():
    text = ('ENV = "FUSEC_A"\nx = os.environ.get(ENV, "")\ny = os.environ["FUSEC_B"]\n'
            'z = [os.environ[v] for v in ("CUDA_PATH", "CUDA_HOME") if os.environ.get(v)]\n'
            'echo "${FUSEC_C:-1}"\nUNUSED = "FUSEC_D"\nmonkeypatch.setenv("FUSEC_E", "1")\n')
    assert environment_reads(text) == {"FUSEC_A", "FUSEC_B", "CUDA_PATH", "CUDA_HOME", "FUSEC_C", "FUSEC_E"}


def _code_files() -> list[Path]:
    files = []
    for folder in SCANNED:
        base = ROOT / folder
        files += [p for p in base.rglob("*") if p.is_file() and (p.suffix in (".py", ".sh") or base.name == ".ci")
                  and p.name != "test_docs.py"]
    return files


def test_environment_table_lists_every_variable_the_code_reads_and_no_other():
    table = _block("env")
    listed = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", "\n".join(
        line.split("|")[1] for line in table.splitlines() if line.startswith("| `"))))
    code = {p: p.read_text(encoding="utf-8", errors="replace") for p in _code_files()}
    read = set().union(*(environment_reads(text) for text in code.values()))
    fusec_read = {v for v in read if v.startswith("FUSEC_")}
    assert not fusec_read - listed, f"read by the code but not in the environment table: {fusec_read - listed}"
    assert not listed - read, f"the environment table lists what no code reads: {listed - read}"
    assert {"FUSEC_LOG", "FUSEC_COMPILER", "FUSEC_CUDA_INCLUDE", "FUSEC_TRACEBACK", "FUSEC_CUBIN_CACHE"} <= listed
    # a FUSEC_ variable that README.md or a page of docs/ names anywhere is one of the table's
    for page in _pages():
        named = set(re.findall(r"\bFUSEC_[A-Z0-9_]+\b", page.read_text(encoding="utf-8")))
        assert named <= listed, f"{page.relative_to(ROOT)} names variables the table lacks: {named - listed}"
