"""The architecture as the code shows it: the layers import only the ones below them, and nothing edits text
another stage rendered (no regular expression in code generation or the runtime)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fusec"

# bottom to top; a module may import its own layer and the ones below
LAYERS = ["base", "ir", "passes", "schedule", "codegen", "runtime", "front"]


def layer_of(module: str) -> str:
    """The layer of ``fusec.<...>`` module ``module``."""
    parts = module.split(".")
    if parts[:2] in (["fusec", "errors"], ["fusec", "lru"], ["fusec", "logs"], ["fusec", "counters"],
                     ["fusec", "progress"]):
        return "base"
    if parts[:2] == ["fusec", "arrayspec"]:
        return "ir"  # an argument described by shape and dtype: plain data over the IR's dtypes
    if len(parts) > 1 and parts[1] in ("ir", "passes", "schedule", "codegen"):
        return parts[1]
    if parts[:2] == ["fusec", "plan"]:
        return "passes"  # the pass pipeline's result: the kernels of a graph
    if parts[:2] in (["fusec", "runtime"], ["fusec", "dispatch"], ["fusec", "gpu"], ["fusec", "cubin_cache"],
                     ["fusec", "autotune"], ["fusec", "tune_cache"]):
        return "runtime"
    return "front"  # api, explain, the command line, the package itself


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        out.append((name.removesuffix(".__init__"), path))
    return out


def fusec_imports(path: Path, module: str) -> set[str]:
    """Every ``fusec`` module ``path`` imports, at the top or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("fusec"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fusec"):
            if node.module != "fusec" or not all((PACKAGE / f"{a.name}.py").is_file() for a in node.names):
                found.add(node.module)  # `from fusec import logs` imports fusec.logs alone (the package's own code)
            found.update(f"{node.module}.{a.name}" for a in node.names
                         if (PACKAGE.parent / node.module.replace(".", "/") / f"{a.name}.py").is_file())
    return found


@pytest.mark.parametrize("module, path", modules(), ids=[m for m, _ in modules()])
def test_architecture_layers_import_only_layers_below(module: str, path: Path) -> None:
    mine = LAYERS.index(layer_of(module))
    above = sorted(m for m in fusec_imports(path, module) if LAYERS.index(layer_of(m)) > mine)
    assert not above, f"{module} ({layer_of(module)}) imports {above} from layers above it"


def test_architecture_every_layer_is_used_as_designed() -> None:
    """ir -> passes -> schedule -> codegen -> runtime: each layer is there and imports the one below."""
    imports: dict[str, set[str]] = {}
    for module, path in modules():
        imports.setdefault(layer_of(module), set()).update(layer_of(m) for m in fusec_imports(path, module))
    assert "ir" in imports["passes"] and "ir" in imports["schedule"]
    assert "schedule" in imports["codegen"] and "codegen" in imports["runtime"]


@pytest.mark.parametrize("path", sorted([*(PACKAGE / "codegen").glob("*.py"), *PACKAGE.glob("runtime*.py"),
                                         PACKAGE / "dispatch.py"]), ids=lambda p: p.name)
def test_architecture_no_regular_expression_touches_generated_code(path: Path) -> None:
    """Lowering decides on structured data before anything is rendered, so code generation and the runtime
    use no regular expressions. The one exception reads the compiler's own log, never generated code:
    ``codegen/nvrtc.py`` parses NVRTC's ptxas report and error lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    uses_re = any(isinstance(n, ast.Import) and any(a.name == "re" for a in n.names) for n in ast.walk(tree)) or any(
        isinstance(n, ast.ImportFrom) and n.module == "re" for n in ast.walk(tree))
    if path.name == "nvrtc.py":
        text = path.read_text(encoding="utf-8")
        assert "source" not in {a.arg for n in ast.walk(tree) if isinstance(n, ast.Call)
                                and getattr(n.func, "attr", "") in ("sub", "search", "match", "findall")
                                for a in n.keywords}
        assert "re.sub(" not in text  # nothing rewritten, only the log read
        return
    assert not uses_re, f"{path.name} imports re"
