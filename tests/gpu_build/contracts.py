"""What build-only mode checks at every kernel launch, against the real arrays of the launch (their shapes,
strides and stand-in device pointers, which keep CuPy's offsets and alignments): :func:`check_launch`, called by
:class:`tests.gpu_build.launcher.BuildOnlyLauncher` with the launch recipe, its input arrays and its output
arrays, runs each of :data:`CHECKS`; a check raises ``AssertionError`` to fail the test.

- :func:`kernel_fits_its_arguments`: the kernel launched, and its scalar arguments, are exactly what fusec
  generates for these arrays' layouts (``fusec.schedule.layouts_of``: element strides, contiguity, pointer
  alignment). A recipe built for other layouts (a cache key that misses what the code generator read, say an
  output's alignment) would launch vector accesses or strides that do not fit the arrays: a misaligned or
  out-of-bounds access on a GPU.
- :func:`fusec_launch_contract`: the launch contract fusec's runtime states for the kernel (DESIGN.md, "Launch
  contracts"), once the runtime has one: ``recipe.contract.check(inputs, outputs)``. (Whatever the runtime
  itself checks before a launch, it checks here too: the build-only launcher runs all of
  ``KernelLauncher``'s code but the CUDA launch itself.) Another check is one more function in :data:`CHECKS`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from fusec.codegen.kernel import generate
from fusec.runtime import LaunchRecipe
from fusec.schedule import ScheduleError, layouts_of
from fusec.schedule.device import device_properties


def kernel_fits_its_arguments(recipe: LaunchRecipe, inputs: list[Any], outputs: list[Any]) -> None:
    """The recipe's kernel source and scalar arguments are what fusec generates for these arrays (checked once
    per recipe and argument layout)."""
    region = recipe.function.region
    arguments = [n for n in region.inputs if n.op not in ("const", "size", "iota")]
    values = {**dict(zip(arguments, inputs)), **dict(zip(recipe.spec.outputs, outputs))}
    layouts = layouts_of(values, values)
    key = (id(recipe), tuple(layouts.get(node) for node in values))
    with _LOCK:
        seen = _FITTED.get(key)
        if seen is not None and seen() is recipe:
            return
    try:
        fresh = generate(region, layouts, recipe.schedule, device=device_properties(0))
        differ = ("its source" if fresh.source != recipe.source else
                  "its scalar arguments" if _args(fresh.spec) != _args(recipe.spec) else None)
    except ScheduleError as exc:  # the kernel's schedule is not even possible for these arrays
        differ = f"its schedule does not fit them: {exc}"
    if differ is not None:
        shown = [f"{node.op} {node.dtype}{list(node.shape)}: {layout}" for node, layout in layouts.items()]
        raise AssertionError(f"kernel {recipe.spec.name} was built for other layouts than its launch's arguments "
                             f"have ({differ}); the arguments' layouts:\n  " + "\n  ".join(shown))
    with _LOCK:  # (weakly: an id names its object only while the object lives; nodes must die with their graph)
        _FITTED[key] = weakref.ref(recipe, lambda _, key=key: _FITTED.pop(key, None))


def fusec_launch_contract(recipe: LaunchRecipe, inputs: list[Any], outputs: list[Any]) -> None:
    """The runtime's own launch contract for the kernel, where the recipe carries one."""
    contract = getattr(recipe, "contract", None)
    if contract is not None:
        contract.check(inputs, outputs)


def _args(spec: Any) -> tuple:
    return tuple(repr(a) for a in spec.args)


Check = Callable[[LaunchRecipe, list[Any], list[Any]], None]
CHECKS: list[Check] = [kernel_fits_its_arguments, fusec_launch_contract]
_LOCK = threading.Lock()
_FITTED: dict[tuple, weakref.ref[LaunchRecipe]] = {}


def check_launch(recipe: LaunchRecipe, inputs: list[Any], outputs: list[Any]) -> None:
    """Every check of :data:`CHECKS` on one launch: ``recipe`` with its ``inputs`` and ``outputs`` (stand-in
    device arrays, in the kernel's parameter order)."""
    for check in CHECKS:
        check(recipe, inputs, outputs)
