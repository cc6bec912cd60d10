"""The examples: each one's fused function traces, and matches plain NumPy on small random data."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fusec
from tests.helpers import assert_matches_numpy

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
NAMES = ["sum_abs", "gelu", "softmax", "layernorm", "rmsnorm", "adam", "moe_router", "dask_layernorm"]
# what each example's traced graph must contain: the op that makes it what it is
KEY_OPS = {"sum_abs": {"abs", "sum"}, "gelu": {"tanh"}, "softmax": {"exp", "max", "sum"},
           "layernorm": {"sum", "sqrt"}, "rmsnorm": {"sqrt", "mul"}, "adam": {"sqrt"},
           "moe_router": {"exp", "max", "argmax"}, "dask_layernorm": {"sum", "sqrt"}}
# float tolerances of a whole example (rtol, atol): a chain of f32 ops, some with reductions
TOLERANCE = {"sum_abs": (1e-5, 1e-5), "layernorm": (1e-4, 1e-5), "rmsnorm": (1e-4, 1e-5),
             "dask_layernorm": (1e-4, 1e-5)}


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"fusec_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def test_examples_all_listed():
    files = {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_")}
    assert files == set(NAMES)
    readme = (EXAMPLES / "README.md").read_text()
    for name in NAMES:
        assert f"examples/{name}.py" in readme


@pytest.mark.parametrize("name", NAMES)
def test_example_function_is_fused_and_traces(name):
    module = load_example(name)
    fused = getattr(module, name)
    assert isinstance(fused, fusec.Fused)
    args = module.example_inputs(np.random.default_rng(0))
    graph = fused.trace(*[fusec.ArraySpec(a.shape, a.dtype) for a in args])
    ops = {node.op for node in graph.nodes}
    assert KEY_OPS[name] <= ops, f"{name}: {sorted(ops)}"
    assert len(graph.outputs) == len(_as_tuple(module.reference(*args)))


@pytest.mark.parametrize("name", NAMES)
def test_example_matches_numpy(name, rng):
    module = load_example(name)
    args = module.example_inputs(rng)
    before = [a.copy() for a in args]
    got, want = _as_tuple(getattr(module, name)(*args)), _as_tuple(module.reference(*args))
    assert len(got) == len(want)
    rtol, atol = TOLERANCE.get(name, (1e-5, 1e-6))
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray) == isinstance(w, np.ndarray), (type(g), type(w))  # 0-d: NumPy's scalar
        assert_matches_numpy(g, w, rtol=rtol, atol=atol)
    for a, b in zip(args, before):  # inputs are never modified
        np.testing.assert_array_equal(a, b)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.parametrize("name", ["softmax", "moe_router"])
def test_example_script_checks_itself(name):
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py")], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "result checked against NumPy: OK" in proc.stdout


@pytest.mark.parametrize("name", ["gelu", "moe_router"])
def test_cupy_style_example_works_without_cupy(name):
    code = ("import sys; sys.modules['cupy'] = None\n"
            "import importlib.util, numpy as np\n"
            f"spec = importlib.util.spec_from_file_location('ex', {str(EXAMPLES / (name + '.py'))!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "assert m.cp is np\n"
            "args = m.example_inputs(np.random.default_rng(0))\n"
            f"got = m.{name}(*args); want = m.reference(*args)\n"
            "got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))\n"
            "assert all(np.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want))\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_example_on_gpu_matches_numpy(name, rng):
    import cupy as cp

    module = load_example(name)
    args = module.example_inputs(rng)
    got = _as_tuple(getattr(module, name)(*[cp.asarray(a) for a in args]))
    want = _as_tuple(module.reference(*args))
    rtol, atol = TOLERANCE.get(name, (1e-5, 1e-6))
    for g, w in zip(got, want):
        assert isinstance(g, cp.ndarray)
        assert_matches_numpy(cp.asnumpy(g), w, rtol=rtol, atol=atol)
