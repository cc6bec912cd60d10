"""Tests written once for both of fusec's backends: NumPy (fusec's reference backend, on the CPU: runs everywhere)
and CuPy (fusec's kernels on a GPU: marked ``gpu``, so ``pytest -m gpu`` selects it, and it skips with the reason
where CuPy sees no GPU).

    @pytest.mark.parametrize("backend, dtype", on_backends(numpy=["float32", "float64"], cupy=["float32"]))
    def test_x_matches_numpy(backend, dtype):
        ...
        for got in backend.results(fusec.fuse(fn), *args):
            assert_matches_numpy(backend.to_host(got), want)

Each backend keeps its own list of cases (the GPU half adds layouts, the CPU half dtypes the GPU half leaves out),
so a test merged from a CPU test and its GPU twin runs each half's cases as before, and the case id starts with the
backend's name. On CuPy, :meth:`Backend.results` gives the result of every kernel run with its outputs poisoned
before the launch (an element a kernel never writes shows up) and then the public call's (the dispatch path).

:data:`FILES` names the test files outside ``tests/gpu/`` with a CuPy half: ``scripts/gpu_check.py`` runs each in
its own ``pytest -m gpu`` process, and build-only mode (:mod:`tests.gpu_build`) collects their CuPy halves with the
cases of ``tests/gpu/``. ``tests/test_gpu_build.py`` checks that every file using this module is listed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pytest

FILES = (
    "tests/correctness/test_correctness.py",
    "tests/fuzz/test_inplace_fuzz.py",
    "tests/ir/test_numpy_functions.py",
)


class Backend(str):
    """A backend by its name (``"numpy"`` or ``"cupy"``: the name is the case id), with what a test needs of it."""

    @property
    def gpu(self) -> bool:
        return self == "cupy"

    @property
    def xp(self) -> Any:
        """The array module: ``numpy``, or ``cupy`` (imported when a CuPy case runs, never at collection)."""
        if not self.gpu:
            return np
        import cupy

        return cupy

    def to_device(self, x: np.ndarray) -> Any:
        """``x`` as this backend's argument: itself on NumPy; on CuPy the same view (strides and offset) of a device
        copy of its whole buffer."""
        if not self.gpu:
            return x
        from tests.helpers import device_copy

        return device_copy(x)

    def to_host(self, a: Any) -> Any:
        """A result on the host: itself on NumPy; on CuPy ``cupy.asnumpy`` of it (of a tuple's items each)."""
        if not self.gpu:
            return a
        if isinstance(a, tuple):
            return tuple(self.to_host(x) for x in a)
        return self.xp.asnumpy(a)

    def results(self, fused: Any, *args: Any) -> list[Any]:
        """What ``fused(*args)`` gives, each way this backend runs it: on NumPy the call; on CuPy the plan's kernels
        launched with their outputs poisoned first, then the call (the dispatch path)."""
        if not self.gpu:
            return [fused(*args)]
        from fusec.runtime.launch import KernelLauncher, run_plan

        outputs = run_plan(fused.plan(*args), list(args), launcher=KernelLauncher(poison=True))
        return [outputs[0] if len(outputs) == 1 else tuple(outputs), fused(*args)]

    def poison_outputs(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """On CuPy: every fused call of the test launches through a launcher that poisons outputs first."""
        if self.gpu:
            import fusec.runtime.launch
            from fusec.runtime.launch import KernelLauncher

            monkeypatch.setattr(fusec.runtime.launch, "_DEFAULT", KernelLauncher(poison=True))


NUMPY = Backend("numpy")
CUPY = Backend("cupy")


def on_backends(numpy: Iterable[Any] = (), cupy: Iterable[Any] = (), ids: Callable[[Any], str] | None = None
                ) -> list[Any]:
    """pytest parameters ``(backend, *case)``: each of ``numpy``'s cases on NumPy, each of ``cupy``'s on CuPy, marked
    ``gpu`` (a case that is not a tuple is one value). ``ids(case)``, if given, names a case (after the backend's
    name); else pytest names it from its values."""
    from tests.helpers import GPU_ONLY

    def param(backend: Backend, case: Any, marks: Any = ()) -> Any:
        values = case if isinstance(case, tuple) else (case,)
        return pytest.param(backend, *values, marks=marks, id=f"{backend}-{ids(case)}" if ids else None)

    return [param(NUMPY, case) for case in numpy] + [param(CUPY, case, GPU_ONLY) for case in cupy]


def runs_on_both_backends(source: str) -> bool:
    """Whether a test module's source calls :func:`on_backends` (so it belongs in :data:`FILES`)."""
    calls = (node.func for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call))
    return any(getattr(f, "id", None) == "on_backends" or getattr(f, "attr", None) == "on_backends" for f in calls)
