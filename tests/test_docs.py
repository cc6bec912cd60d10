"""The documentation stays true: the README's explain output is what the command prints, its ops and
dtypes list is the op table's, the examples' plans and bytes are what ``plan`` says, and every public
name has a docstring (``help(fusec.fuse)`` tells a user everything)."""

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
from fusec.frontend.ops_doc import ops_markdown, readme_block, update_readme
from fusec.inspect.explain import Explanation, KernelTime, Timings
from fusec.ir import dtypes
from fusec.ir.ops import OPS
from fusec.runtime.plan import format_bytes
from tests.test_examples import load_example

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EXAMPLES_README = ROOT / "examples" / "README.md"


# --- README: explain output, ops list, picture -----------------------------------------------------------


def _explain_block() -> tuple[str, str]:
    m = re.search(r"<!-- explain:begin -->\n```\n\$ (.*?)\n(.*?)```\n<!-- explain:end -->",
                  README.read_text(encoding="utf-8"), re.DOTALL)
    assert m, "README.md lacks the <!-- explain:begin --> ```$ COMMAND\\nOUTPUT``` <!-- explain:end --> block"
    return m.group(1), m.group(2)


def test_readme_explain_output_is_what_the_command_prints(capsys, monkeypatch):
    command, shown = _explain_block()
    argv = shlex.split(command)
    assert argv[0] == "fusec"
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(argv[1:]) == 0
    printed = capsys.readouterr().out
    assert shown.rstrip("\n") == printed.rstrip("\n"), (
        f"README.md's explain output is stale: run `{command}` and paste its output into the block")


def test_readme_ops_list_covers_every_op_and_dtype():
    block = readme_block(README.read_text(encoding="utf-8"))
    assert block == ops_markdown()
    for name in OPS:
        assert f"`{name}`" in block, name
    for short in dtypes.SHORT_NAMES.values():
        assert f"`{short}`" in block, short


def test_readme_ops_list_update_fixes_a_stale_list(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(README.read_text(encoding="utf-8").replace("`hypot`, ", ""), encoding="utf-8")
    assert readme_block(stale.read_text()) != ops_markdown()  # what the README test would catch
    assert update_readme(str(stale)) is True
    assert readme_block(stale.read_text()) == ops_markdown()
    assert update_readme(str(stale)) is False


def test_readme_picture_is_a_drawing_of_one_kernel():
    readme = README.read_text(encoding="utf-8")
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert pictures, "README.md shows no picture of the fused DAG"
    for picture in pictures:
        svg = (ROOT / picture).read_text(encoding="utf-8")
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


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not found")
def test_readme_picture_command_reproduces_the_picture(tmp_path, monkeypatch, capsys):
    readme = README.read_text(encoding="utf-8")
    m = re.search(r"`(fusec explain [^`]*--svg (\S+))` draws", readme)
    assert m, "README.md does not say which command drew its picture"
    monkeypatch.chdir(ROOT)
    argv = shlex.split(m.group(1))[1:]
    argv[argv.index("--svg") + 1] = str(tmp_path / "again.svg")
    assert main(argv) == 0
    assert (tmp_path / "again.svg").read_text().count('class="cluster"') == 1


# --- README: the demo's output, the logging example, the environment variables -------------------------


def _block(name: str) -> str:
    m = re.search(rf"<!-- {name}:begin -->\n(.*?)<!-- {name}:end -->", README.read_text(encoding="utf-8"), re.DOTALL)
    assert m, f"README.md lacks the <!-- {name}:begin --> ... <!-- {name}:end --> block"
    return m.group(1)


def test_readme_demo_output_is_what_the_command_prints(capsys, monkeypatch):
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


def test_readme_logging_example_prints_what_the_readme_shows(tmp_path):
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


def test_readme_environment_table_lists_every_variable_the_code_reads_and_no_other():
    table = _block("env")
    listed = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", "\n".join(
        line.split("|")[1] for line in table.splitlines() if line.startswith("| `"))))
    code = {p: p.read_text(encoding="utf-8", errors="replace") for p in _code_files()}
    read = set().union(*(environment_reads(text) for text in code.values()))
    fusec_read = {v for v in read if v.startswith("FUSEC_")}
    assert not fusec_read - listed, f"read by the code but not in README.md's environment table: {fusec_read - listed}"
    assert not listed - read, f"README.md's environment table lists what no code reads: {listed - read}"
    assert {"FUSEC_LOG", "FUSEC_COMPILER", "FUSEC_CUDA_INCLUDE", "FUSEC_TRACEBACK", "FUSEC_CUBIN_CACHE"} <= listed
    # a FUSEC_ variable the README names anywhere (outside the ops list) is one of the table's
    named = set(re.findall(r"\bFUSEC_[A-Z0-9_]+\b", README.read_text(encoding="utf-8")))
    assert named <= listed, f"README.md names variables its table lacks: {named - listed}"
