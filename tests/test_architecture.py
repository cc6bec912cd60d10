"""The architecture as the code shows it: folders are the layers, each layer imports only the ones below it, no
module sits outside a layer, and nothing edits text another stage rendered (no regular expression in code
generation or the runtime).

The import graph is read from the source (every ``import`` and ``from ... import``, at the top of a module or
inside a function, ``TYPE_CHECKING`` blocks included), so an import moved into a function to dodge a cycle still
counts."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fusec"

# The layers, bottom to top: a module may import its own layer and the ones below. The layer of a module is its
# folder; ``fusec/__init__.py`` and ``fusec/__main__.py`` are the package itself, above everything.
LAYERS = ["support", "ir", "passes", "schedule", "codegen", "kinds", "runtime", "inspect", "frontend", "dask", "cli",
          "fusec"]

# Import cycles that are still there, each as its sorted modules: none (issue 31 removed the last); a new cycle
# fails, and so would a listed one that is gone, so the list stays the truth.
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def layer_of(module: str) -> str:
    """The layer of ``fusec.<...>`` module ``module``: its folder."""
    parts = module.split(".")
    return "fusec" if len(parts) < 3 and parts[-1] in ("fusec", "__main__") else parts[1]


@cache
def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out[".".join(rel.parts).removesuffix(".__init__")] = path
    return out


def _resolve(name: str) -> str:
    """The module ``name`` names, or the module that holds it (``fusec.ir.graph.Node`` -> ``fusec.ir.graph``)."""
    while name not in modules() and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


@cache
def imports_of(module: str, runtime_only: bool = False) -> frozenset[tuple[str, str]]:
    """(module, name) for every ``fusec`` import of ``module``: ``name`` is the imported name ("" for a whole
    module: ``import fusec.x`` or ``from fusec import x``). ``runtime_only`` leaves out the imports under
    ``if TYPE_CHECKING:``, which never run (they count for the layers, not for cycles)."""
    tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            typing_only.update(id(n) for part in node.body for n in ast.walk(part))
    found = set()
    for node in ast.walk(tree):
        if runtime_only and id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update((_resolve(a.name), "") for a in node.names if a.name.startswith("fusec"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fusec"):
            for a in node.names:
                whole = f"{node.module}.{a.name}"
                found.add((whole, "") if whole in modules() else (_resolve(node.module), a.name))
    return frozenset((m, n) for m, n in found if m != module)


def imported_modules(module: str, runtime_only: bool = False) -> set[str]:
    found = {m for m, _ in imports_of(module, runtime_only)}
    return found - {"fusec"} if module != "fusec" else found


def test_architecture_every_module_is_in_a_layer() -> None:
    """No loose modules at the top: ``fusec/`` holds the layer folders, ``__init__`` and ``__main__``."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert not loose, f"modules outside the layer folders: {loose}"
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert folders == sorted(LAYERS[:-1]), f"layer folders {folders}, the layers {LAYERS[:-1]}"


@pytest.mark.parametrize("module", sorted(modules()))
def test_architecture_layers_import_only_layers_below(module: str) -> None:
    mine = LAYERS.index(layer_of(module))
    above = sorted(m for m in imported_modules(module) if LAYERS.index(layer_of(m)) > mine)
    assert not above, f"{module} ({layer_of(module)}) imports {above} from layers above it"


def test_architecture_every_package_is_in_the_wheel() -> None:
    """pyproject.toml lists the packages a wheel installs: every folder of ``fusec/`` with an ``__init__.py`` is one
    (a layer left out installs a fusec that cannot import itself; CI's packaging check caught ``fusec.kinds``)."""
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11+)
    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {"fusec"} | {f"fusec.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders <= listed, f"packages missing from pyproject.toml: {sorted(folders - listed)}"


def test_architecture_every_layer_is_used_as_designed() -> None:
    """ir -> passes -> schedule -> codegen -> kinds -> runtime -> frontend: each layer is there and imports the one
    below."""
    imports: dict[str, set[str]] = {}
    for module in modules():
        imports.setdefault(layer_of(module), set()).update(layer_of(m) for m in imported_modules(module))
    assert "support" in imports["ir"] and "ir" in imports["passes"] and "ir" in imports["schedule"]
    assert "schedule" in imports["codegen"] and "codegen" in imports["kinds"] and "kinds" in imports["runtime"]
    assert "runtime" in imports["frontend"]
    assert "frontend" in imports["dask"] and "inspect" in imports["cli"]


def import_cycles() -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module in the graph of the imports that run (Tarjan's
    algorithm)."""
    graph = {m: sorted(imported_modules(m, runtime_only=True) & modules().keys()) for m in modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(tuple(sorted(component)))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_architecture_no_new_import_cycle() -> None:
    cycles = import_cycles()
    new = cycles - KNOWN_CYCLES
    assert not new, "import cycles: " + "; ".join(" <-> ".join(c) for c in sorted(new))
    gone = KNOWN_CYCLES - cycles
    assert not gone, f"cycles listed in KNOWN_CYCLES that are gone (remove them): {sorted(gone)}"


def test_architecture_frontend_functions_register_in_one_place() -> None:
    """The frontend's function modules register their implementations with ``@implements`` where they define them,
    and ``fusec/frontend/trace.py`` imports every such module (so all are registered before anything traces);
    nothing else writes the registry's tables, and nothing assigns to ``Tracer`` outside its class body (its methods
    and operators are all there)."""
    tables = {"FUNCTIONS", "UFUNCS", "CREATORS"}
    registering, writes = set(), []
    for module in (m for m in modules() if m.startswith("fusec.frontend.") and m != "fusec.frontend.registry"):
        tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("implements", "implements_ufunc"):
                registering.add(module)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                base = t.value if isinstance(t, (ast.Attribute, ast.Subscript)) else t
                name = getattr(base, "id", getattr(base, "attr", ""))
                if name == "Tracer" or (name in tables and module != "fusec.frontend.registry"):
                    writes.append(f"{module}:{node.lineno}")
            if isinstance(node, ast.Call):
                owner = node.func.value if isinstance(node.func, ast.Attribute) else None
                if getattr(owner, "id", getattr(owner, "attr", "")) in tables and node.func.attr in (
                        "update", "setdefault", "append", "extend"):
                    writes.append(f"{module}:{node.lineno}")
                if getattr(node.func, "id", "") == "setattr" and getattr(node.args[0], "id", "") == "Tracer":
                    writes.append(f"{module}:{node.lineno}")
    assert {"fusec.frontend.composite", "fusec.frontend.tracer", "fusec.frontend.view_functions"} <= registering
    imported = imported_modules("fusec.frontend.trace", runtime_only=True)
    assert not registering - imported - {"fusec.frontend.tracer"}, "function modules trace.py does not import: " \
        f"{sorted(registering - imported)}"
    assert "fusec.frontend.tracer" in imported
    assert not writes, f"the registry's tables or Tracer's attributes written outside their place: {writes}"


def test_architecture_finds_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The checks themselves: a made-up package with a cycle and an upward import is caught."""
    fake = tmp_path / "fusec"
    for folder, text in (("ir", "import fusec.passes.a\n"), ("passes", "from fusec.ir.a import x\n")):
        (fake / folder).mkdir(parents=True)
        (fake / folder / "__init__.py").write_text("")
        (fake / folder / "a.py").write_text(text)
    (fake / "__init__.py").write_text("")
    globals()["PACKAGE"], saved = fake, PACKAGE
    for f in (modules, imports_of):
        f.cache_clear()
    try:
        assert import_cycles() == {("fusec.ir.a", "fusec.passes.a")}
        assert "fusec.passes.a" in imported_modules("fusec.ir.a")
        assert LAYERS.index(layer_of("fusec.passes.a")) > LAYERS.index(layer_of("fusec.ir.a"))
    finally:
        globals()["PACKAGE"] = saved
        for f in (modules, imports_of):
            f.cache_clear()


def private_imports() -> list[str]:
    """Private names (``_x``) a module imports from another: a helper another module needs is public."""
    return sorted(f"{module} imports {source}.{name}" for module in modules() for source, name in imports_of(module)
                  if name.startswith("_") and not name.startswith("__"))


def test_architecture_modules_import_only_public_names() -> None:
    found = private_imports()
    assert not found, "private names imported across modules:\n" + "\n".join(found)


@pytest.mark.parametrize("path", sorted([*(PACKAGE / "codegen").glob("*.py"), *(PACKAGE / "runtime").glob("*.py")]),
                         ids=lambda p: p.name)
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
