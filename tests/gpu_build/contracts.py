"""What build-only mode checks at every kernel launch, against the real arrays of the launch (their shapes,
strides and stand-in device pointers, which keep CuPy's offsets and alignments): :func:`check_launch`, called by
the kernel the runtime launches (:class:`tests.gpu_build.launcher.InterpretedKernel`, after everything the runtime
itself checks and decides before a launch) with its input and output arrays, runs each of :data:`CHECKS`; a check
raises ``AssertionError`` to fail the test.

- :func:`kernel_fits_its_arguments`: the kernel launched, and its scalar arguments, are exactly what fusec
  generates for these arrays' layouts (``fusec.schedule.layouts_of``: element strides, contiguity, pointer
  alignment). A kernel built for other layouts (a cache key that misses what the code generator read, say an
  output's alignment) would make vector accesses or use strides that do not fit the arrays: a misaligned or
  out-of-bounds access on a GPU.
- :func:`fusec_launch_contract`: the launch contract the kernel states (DESIGN.md, "Launch contracts":
  ``KernelSpec.contract``, once fusec's kernels carry one) holds for the arrays: the runtime checks it before a
  launch and runs another kernel where it fails, so a launch it rejects is a bug of the runtime's.

Another check is one more function in :data:`CHECKS`.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from fusec.codegen.spec import KernelSpec
from fusec.kinds import generate
from fusec.schedule import ArrayLayout, ScheduleError, layouts_of
from fusec.schedule.device import device_properties


def argument_layouts(region: Any, spec: Any, inputs: list[Any], outputs: Mapping[Any, Any]) -> tuple:
    """The layouts of a kernel's arguments (``fusec.schedule.layouts_of``): its inputs, then its outputs, those not
    in ``outputs`` fresh C-contiguous arrays (as the launcher allocates them)."""
    arguments = [n for n in region.inputs if n.op not in ("const", "size", "iota")]
    values = {**dict(zip(arguments, inputs)), **outputs}
    layouts = layouts_of(values, values)
    return tuple(layouts.get(n) or ArrayLayout.c_contiguous(n.shape) for n in (*arguments, *spec.outputs))


def kernel_fits_its_arguments(kernel: Any, inputs: list[Any], outputs: list[Any]) -> None:
    """The kernel's source and scalar arguments are what fusec generates for these arrays: at once where their
    layouts are those the kernel was built for (``kernel.built_for``), else by generating the kernel for them
    again (once per kernel and layouts)."""
    region, spec = kernel.region, kernel.spec
    layouts = argument_layouts(region, spec, inputs, dict(zip(spec.outputs, outputs)))
    if layouts == kernel.built_for:
        return
    key = (id(kernel), layouts)
    with _LOCK:
        seen = _FITTED.get(key)
        if seen is not None and seen() is kernel:
            return
    nodes = [n for n in region.inputs if n.op not in ("const", "size", "iota")] + list(spec.outputs)
    try:
        fresh = generate(region, dict(zip(nodes, layouts)), kernel.schedule, device=device_properties(0))
        differ = ("its source" if fresh.source != kernel.source else
                  "its scalar arguments" if _args(fresh.spec) != _args(spec) else None)
    except ScheduleError as exc:  # the kernel's schedule is not even possible for these arrays
        differ = f"its schedule does not fit them: {exc}"
    if differ is not None:
        shown = [f"{node.op} {node.dtype}{list(node.shape)}: {layout}" for node, layout in zip(nodes, layouts)]
        raise AssertionError(f"kernel {spec.name} was built for other layouts than its launch's arguments have "
                             f"({differ}); the arguments' layouts:\n  " + "\n  ".join(shown))
    with _LOCK:  # (weakly: an id names its object only while the object lives; nodes must die with their graph)
        _FITTED[key] = weakref.ref(kernel, lambda _, key=key: _FITTED.pop(key, None))


def fusec_launch_contract(kernel: Any, inputs: list[Any], outputs: list[Any]) -> None:
    """The kernel's own launch contract holds for the arrays it is launched on, where the kernel states one."""
    contract = getattr(kernel.spec, "contract", None)
    if contract is not None:
        why = contract.violation([*inputs, *outputs])
        if why is not None:
            raise AssertionError(f"kernel {kernel.spec.name} launched on arrays its launch contract rejects: {why}")


def stated_by_fusec() -> bool:
    """Whether fusec's kernels state a launch contract (checked by :func:`fusec_launch_contract`)."""
    return "contract" in {f.name for f in dataclasses.fields(KernelSpec)}


def _args(spec: Any) -> tuple:
    return tuple(repr(a) for a in spec.args)


Check = Callable[[Any, list[Any], list[Any]], None]  # (the launched kernel, its inputs, its outputs)
CHECKS: list[Check] = [kernel_fits_its_arguments, fusec_launch_contract]
_LOCK = threading.Lock()
_FITTED: dict[tuple, weakref.ref] = {}


def check_launch(kernel: Any, inputs: list[Any], outputs: list[Any]) -> None:
    """Every check of :data:`CHECKS` on one launch of ``kernel`` (a :class:`tests.gpu_build.launcher.InterpretedKernel`:
    its ``region``, ``spec``, ``schedule``, ``source`` and ``built_for``) on its ``inputs`` and ``outputs`` (stand-in
    device arrays, in parameter order)."""
    for check in CHECKS:
        check(kernel, inputs, outputs)
