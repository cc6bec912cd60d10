"""fusec's kernel launcher in build-only mode: everything :class:`fusec.runtime.launch.KernelLauncher` does up to the
launch is its own (the recipe: plan, schedule, lowering, source, the NVRTC compile for sm_90 through the cubin
cache, the grid, the scalar arguments, the poisoned outputs, whatever the runtime checks before a launch), then
the kernel it launches is checked against the launch's arrays (:func:`tests.gpu_build.contracts.check_launch`) and
*run by the reference interpreter* over the region's declared inputs, as the kernel would run on the GPU, writing
its outputs in place. A kernel that does not generate or compile fails where it would fail on a GPU; the tests' own
assertions on the results hold.

The interpreter runs a gather as the kernel does (``fc::gather_index``): an index out of range reads 0 and
writes the gather's error code into the launcher's error word when the launch has one, so the runtime raises
fusec's ``IndexError`` afterwards as on a GPU; and it accumulates float16 sums and products in float32, as the
kernel does.

A library's kernel (a matmul's cuBLAS call) has nothing to compile: its call runs on the stand-in (``cupy.matmul``
accumulating float16 in float32, as cuBLAS does), its shapes and dtypes checked first, as on a GPU.

Not here: the dispatch fast path (:meth:`plan_runner` gives None, so every call takes the checked path;
pre-packed driver launches need a GPU) and autotuning's timings (the stand-in has no clock).
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any

import numpy as np

from fusec.codegen.cuda_ops import accumulator_dtype
from fusec.ir.graph import Node
from fusec.ir.interpret import evaluate_node
from fusec.ir.ops import Kind
from fusec.ir.region import Region
from fusec.runtime.launch import KernelLauncher, LaunchRecipe
from tests.gpu_build import contracts, record
from tests.gpu_build.standin import memory
from tests.gpu_build.standin.array import ndarray

SOURCES = ("const", "size", "iota")  # region inputs that are no kernel argument (computed in the kernel)


class BuildOnlyLauncher(KernelLauncher):
    """:class:`fusec.runtime.launch.KernelLauncher` whose launches the interpreter runs (see the module docstring)."""

    def recipe(self, region: Region, arrays: list[Any], out: Any = None, schedule: Any = None,
               autotune: bool = False) -> LaunchRecipe:
        built = super().recipe(region, arrays, out, schedule, autotune)
        record.kernel_built(built)
        built_for = contracts.argument_layouts(region, built.spec, arrays, out or {})
        return dataclasses.replace(built, function=InterpretedKernel(region, built, built_for))

    def library_kernel(self, region: Region, arrays: list[Any], schedule: Any = None) -> Any:
        call = super().library_kernel(region, arrays, schedule)
        record.library_built(call, region.kind)  # its contract (shapes and dtypes) is checked before each call
        return call

    def plan_runner(self, *args: Any, **kwargs: Any) -> None:
        return None  # the checked path, always: the fast path's pre-packed launches need a GPU


class InterpretedKernel:
    """A compiled kernel run by the interpreter: ``kernel(grid, block, args)`` takes the launch's arguments in
    parameter order, as the CUDA function (``compiled``, of the loaded cubin) would, checks the launch
    (:func:`tests.gpu_build.contracts.check_launch`) and runs the region. It holds its region weakly, as the
    launcher's recipes must not keep a dropped region alive; ``built_for`` are the layouts of the arrays it was
    generated for."""

    def __init__(self, region: Region, recipe: LaunchRecipe, built_for: tuple):
        self._region = weakref.ref(region)
        self.spec = recipe.spec
        self.schedule = recipe.schedule
        self.source = recipe.source
        self.compiled = recipe.function
        self.ptr = recipe.function.ptr
        self.built_for = built_for

    @property
    def region(self) -> Region:
        region = self._region()
        if region is None:
            raise RuntimeError(f"kernel {self.spec.name} launched after its region was dropped")
        return region

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0, stream: Any = None) -> None:
        region = self.region
        by_role: dict[str, list[Any]] = {"input": [], "output": [], "workspace": [], "scalar": []}
        for param, arg in zip(self.spec.params, args, strict=True):
            by_role[param.role].append(arg)
        contracts.check_launch(self, by_role["input"], by_role["output"])
        inputs = [n for n in region.inputs if n.op not in SOURCES]
        env: dict[Node, Any] = {}
        for node, a in zip(inputs, by_role["input"], strict=True):
            env[node] = _host(a, node, "input")
        errors = _error_word(self.spec, by_role["scalar"])
        _run(region, env, errors)
        for node, a in zip(self.spec.outputs, by_role["output"], strict=True):
            np.copyto(_host(a, node, "output"), env[node], casting="no")


def _host(a: Any, node: Node, role: str) -> np.ndarray:
    if not isinstance(a, ndarray):
        raise TypeError(f"an {role} argument of the kernel is a {type(a).__name__}, not a device array")
    if a.dtype != node.dtype or a.shape != node.shape:
        raise ValueError(f"an {role} argument is {a.dtype}{list(a.shape)}, the kernel's {node.dtype}{list(node.shape)}")
    return a.host


def _error_word(spec: Any, scalars: list[Any]) -> tuple[np.ndarray | None, dict[str, int]]:
    """The uint32 error word the launch's ``err`` scalar points at (None: a null pointer, unchecked indices) and
    each gather's code by the user's line it names."""
    names = [p.name for p in spec.params if p.role == "scalar"]
    if "err" not in names or not spec.error_sites:
        return None, {}
    ptr = int(scalars[names.index("err")])
    codes = {line: code for code, line in reversed(spec.error_sites)}
    if not ptr:
        return None, codes
    mem, offset = memory.at(ptr, 4)
    return mem.bytes[offset:offset + 4].view(np.uint32), codes


def _run(region: Region, env: dict[Node, Any], errors: tuple[np.ndarray | None, dict[str, int]]) -> None:
    """The region's nodes, in order, into ``env`` (which holds its array inputs); sources computed here."""
    with np.errstate(all="ignore"):
        for node in [n for n in region.inputs if n.op in SOURCES] + list(region.nodes):
            if node in env:
                continue
            args = [] if node.op == "size" else [env[o] for o in node.operands]
            value = np.asarray(_evaluate(node, args, errors))
            if value.dtype != node.dtype or value.shape != node.shape:
                raise AssertionError(f"interpreter produced {value.dtype}{value.shape} for {node!r}")
            env[node] = value


def _evaluate(node: Node, args: list[Any], errors: tuple[np.ndarray | None, dict[str, int]]) -> Any:
    """``node``'s value as the kernel computes it: the interpreter's, but for gathers (:func:`_gather`) and float16
    sums and products (and their scans), which the kernel accumulates in float32 and rounds once
    (``fusec.codegen.cuda_ops.accumulator_dtype``), where NumPy rounds every partial sum to float16."""
    if node.kind is Kind.GATHER:
        return _gather(node, args, errors)
    if node.op in ("sum", "prod", "cumsum", "cumprod") and node.dtype == np.float16:
        wide = np.asarray(args[0]).astype(accumulator_dtype(node.dtype))
        if node.kind is Kind.SCAN:
            return getattr(np, node.op)(wide, axis=node.attr("axis")).astype(node.dtype)
        return getattr(np, node.op)(wide, axis=tuple(node.attr("axes")), keepdims=bool(node.attr("keepdims"))
                                    ).astype(node.dtype)
    return evaluate_node(np, node, args)


def _gather(node: Node, args: list[Any], errors: tuple[np.ndarray | None, dict[str, int]]) -> np.ndarray:
    """A gather as the kernel computes it: where an index is out of range, 0 and the gather's error code."""
    x, indices = args[0], args[1:]
    extents = _gathered_extents(node, x)
    bad = np.zeros(node.shape, bool)
    safe = []
    for idx, extent in zip(indices, extents):
        idx = np.asarray(idx)
        out_of_range = (idx >= extent) if idx.dtype.kind == "u" else ((idx < -extent) | (idx >= extent))
        bad |= np.broadcast_to(out_of_range, node.shape) if out_of_range.ndim else out_of_range
        safe.append(np.where(out_of_range, idx.dtype.type(0), idx))
    value = evaluate_node(np, node, [x, *safe])
    if not bad.any():
        return value
    word, codes = errors
    if word is not None:
        word[0] = codes.get(node.loc or "a gather", next(iter(codes.values())))
    return np.where(bad, node.dtype.type(0), value)


def _gathered_extents(node: Node, x: np.ndarray) -> list[int]:
    """The extent each index of a gather counts in: its axis of ``x``, through the gather's window if any."""
    from fusec.ir.infer import gather_window

    window = gather_window(x.shape, dict(node.attrs))
    shape = x.shape if window is None else tuple(count for _, _, count in window)
    return [shape[a] for a in node.attr("axes")]
