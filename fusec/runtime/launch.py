"""The GPU side: compile generated kernels, size their launches, allocate outputs, launch.

``KernelLauncher.run_region(region, graph_values)`` runs one fused region on the current CuPy device and
stream and returns its outputs. The first call with a new *layout key* (each input array's shape, strides
and pointer alignment, the device, a forced schedule) builds a launch recipe: generate the kernel
(:func:`fusec.kinds.generate`: schedule, lowering, source), compile it (cached in-process by
source text, and across processes on disk), size the grid from the device's SM count and the kernel's
occupancy, and freeze the scalar arguments as NumPy scalars of the exact C++ parameter types. A repeat
call looks the recipe up, allocates the outputs and launches: no planning, no rendering. Arguments are
passed by each parameter's declared role (input, output, workspace, scalar), whatever the kernel's kind.
Recipes live as long as their region: they are dropped when the region (its plan) is.
:func:`run_plan` runs every kernel of a plan this way (the checked path); :meth:`KernelLauncher.plan_runner` goes
one step further for repeat calls: every kernel of a plan resolved and its launch pre-packed
(:mod:`fusec.runtime.dispatch`). A call of a function, with ``out=`` and its writes into its arguments, is
:class:`fusec.runtime.executable.Executable`'s, which uses both.

Every launch checks the kernel's launch contract first (:mod:`fusec.schedule.contract`: the alignment its vector
accesses need of each pointer, the shapes and strides it was built for): arrays that do not meet it launch nothing,
and a kernel built for them runs instead (the forced schedule if it fits them, else its scalar variant, else the
heuristics'). Recipes are keyed by their arrays' layouts, pointer alignment included, so this never happens
unless a key is wrong; the check makes sure a wrong key can never make a misaligned launch.

Nothing here knows about ops or kernel kinds: the kernel spec carries everything op-specific. A region whose kernel
is a library's call (a matmul's GEMM: :meth:`fusec.kinds.kind.KernelKind.library`) runs that call instead of a
launch (:meth:`KernelLauncher.library_kernel`, cached by its arrays' layouts as recipes are), its shapes and dtypes
checked first, its outputs poisoned as kernels' are; a dispatch runner calls it in line (:meth:`_library_step`).

Compilers: ``"nvrtc"`` (default) compiles with :func:`fusec.codegen.nvrtc.compile_cubin` (no ``-ftz``, so
float32 subnormals behave as in NumPy), loads the cubin with CuPy, and caches cubins on disk
(:mod:`fusec.runtime.cubin_cache`: ``$FUSEC_CUBIN_CACHE``, keyed by arch and source), so a new process (or another
machine given the directory) compiles nothing; a cubin that fails to load is compiled again. ``"cupy"``
compiles with ``cupy.RawModule`` and its disk cache, but CuPy always adds ``-ftz=true``, so float32
subnormals flush to zero there. ``FUSEC_COMPILER`` picks the default.

Occupancy: ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` through CuPy's driver bindings; where that is
unavailable, an estimate from the kernel's registers and shared memory with the limits of sm_80/sm_90
(65536 registers, 2048 threads, 32 blocks per SM, registers allocated per warp in units of 256).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.codegen import templates
from fusec.codegen.compiler_bugs import check_narrow_values
from fusec.codegen.kernel import GeneratedKernel, LibraryCall
from fusec.codegen.lower import ERROR_PARAM
from fusec.codegen.spec import KernelSpec
from fusec.ir.graph import Node
from fusec.ir.interpret import run_nodes
from fusec.ir.region import Region
from fusec.kinds import ForcedSchedules, check_forced, generate, is_library
from fusec.runtime.autotune import TUNE_REPS, Tuned, enabled, tuned_schedule
from fusec.runtime.cubin_cache import cached_cubin, compile_and_store, compiled_with_cupy, precompile
from fusec.runtime.dispatch import OutputRecycler, PackedLaunch, PlanRunner, PlanStep, recycler_for
from fusec.runtime.gpu import cupy_module
from fusec.runtime.plan import Plan, take_read_backs
from fusec.runtime.results import pack_results
from fusec.schedule import ArrayLayout, DeviceProperties, ForcedSchedule, Schedule, ScheduleError, layouts_of
from fusec.schedule.contract import ContractViolation, LaunchContract
from fusec.schedule.device import device_properties
from fusec.support import logs
from fusec.support.lru import LRU
from fusec.support.progress import progress

POISON_BYTE = 0xAB  # what poisoned outputs are filled with, byte by byte
MODULES_KEPT = 1024  # compiled modules a launcher keeps loaded, the least recently used dropped
NULL_POINTER = np.uint64(0)  # the workspace argument of a one-block reduce-all, which uses none


@dataclass
class LaunchRecipe:
    """Everything a repeat launch needs: the compiled function, the grid, the frozen scalar arguments."""

    spec: KernelSpec
    schedule: Schedule
    source: str
    function: Any  # cupy.cuda.function.Function (bound to one device)
    grid: int
    block: tuple[int, int, int]
    scalars: tuple[Any, ...]
    outputs: tuple[tuple[tuple[int, ...], np.dtype], ...]
    workspace_bytes: int
    tuned: str = ""  # autotuned: "timed" (the candidates were timed now) or "tune cache"; "" otherwise

    @property
    def contract(self) -> LaunchContract:
        """What the kernel needs of the arrays it is launched on (checked before every launch)."""
        assert self.spec.contract is not None
        return self.spec.contract

    def arguments(self, inputs: list[Any], outputs: list[Any], workspace: Any) -> list[Any]:
        """The launch's arguments in parameter order, each taken by its parameter's role."""
        sources = {"input": iter(inputs), "output": iter(outputs), "scalar": iter(self.scalars)}
        return [workspace if p.role == "workspace" else next(sources[p.role]) for p in self.spec.params]


class _RegionEntry:
    """What a launcher keeps for one region: its array inputs and its recipes by layout key."""

    __slots__ = ("inputs", "recipes", "library", "calls")

    def __init__(self, region: Region):
        self.inputs = tuple(n for n in region.inputs if n.op not in ("const", "size", "iota"))
        self.recipes: dict[tuple, LaunchRecipe] = {}
        self.library = is_library(region)  # a library's call (a GEMM), not a compiled kernel
        self.calls: dict[tuple, GeneratedKernel] = {}  # its calls by layout key


class KernelLauncher:
    """Compiles, caches and launches fused kernels on the current CuPy device and stream.

    ``poison``: fill every output with :data:`POISON_BYTE` (or the given byte) before the launch, so a
    test sees any element the kernel failed to write. ``compiler``: ``"cupy"`` or ``"nvrtc"`` (see the
    module docstring). ``options``: extra NVRTC options. ``autotune``: time candidate schedules on a kernel's
    first launch (:mod:`fusec.runtime.autotune`; None: as ``$FUSEC_AUTOTUNE`` says, off by default), unless a call
    says otherwise.
    """

    def __init__(self, *, poison: bool | int = False, compiler: str | None = None, options: tuple[str, ...] = (),
                 autotune: bool | None = None):
        self.poison = POISON_BYTE if poison is True else (int(poison) if poison is not False else None)
        self.compiler = compiler or os.environ.get("FUSEC_COMPILER", "nvrtc")
        if self.compiler not in ("cupy", "nvrtc"):
            raise ValueError(f"compiler must be 'cupy' or 'nvrtc', not {self.compiler!r}")
        self.options = tuple(options)
        self.autotune = autotune
        # (source, device) -> module-ish, and (source, name, device) -> function: bounded (a kernel in use stays
        # loaded: its function holds its module)
        self._modules: LRU[tuple[str, int], Any] = LRU(MODULES_KEPT)
        self._functions: LRU[tuple[str, str, int], Any] = LRU(MODULES_KEPT)
        self._capacity: dict[tuple[int, int, int], int] = {}
        self._regions: dict[int, _RegionEntry] = {}  # id(region) -> entry, dropped with the region
        self._workspaces: dict[tuple[int, int], Any] = {}
        self._error_words: dict[int, Any] = {}  # device -> the word gathers flag an index out of range in
        self._lock = threading.RLock()  # one compile per source, whichever thread asks first
        self.compiles = 0  # how many sources this launcher compiled (or found in CuPy's disk cache)
        self._compiler_version: tuple[str, tuple[int, int]] | None = None

    # -- compiling ---------------------------------------------------------------------------------
    def _compile_options(self) -> tuple[str, ...]:
        try:
            from fusec.codegen.nvrtc import include_options

            includes = include_options()
        except Exception:  # no cuda-bindings: CuPy finds CUDA's headers itself, fusec's are in templates/
            includes = (f"-I{templates.header_dir()}",)
        return ("-std=c++17", *includes, *self.options)

    def compiler_version(self) -> tuple[str, tuple[int, int]]:
        """The compiler this launcher compiles with, named for a message, and its (major, minor) version."""
        if self._compiler_version is None:
            if self.compiler == "cupy":
                self._compiler_version = ("CuPy's NVRTC", tuple(cupy_module().cuda.nvrtc.getVersion())[:2])
            else:
                from fusec.codegen.nvrtc import nvrtc_version

                self._compiler_version = ("NVRTC", nvrtc_version())
        return self._compiler_version

    def function(self, source: str, name: str) -> Any:
        """The kernel ``name`` of ``source``, compiled for the current device (cached)."""
        cp = cupy_module()
        device = cp.cuda.runtime.getDevice()
        key = (source, name, device)
        fn = self._functions.get(key)
        if fn is not None:
            return fn
        with self._lock:
            fn = self._functions.get(key)
            if fn is None:
                fn = self._compile_function(source, name, device)
                self._functions.put(key, fn)
        return fn

    def _compile_function(self, source: str, name: str, device: int) -> Any:
        try:
            return self._load_function(source, name, device)
        except Exception as exc:
            if type(exc).__name__ in ("CompileError", "CompileException"):
                exc.kernel = name  # which kernel failed, for the error the user sees
            raise

    def _load_function(self, source: str, name: str, device: int) -> Any:
        cp = cupy_module()
        if self.compiler == "cupy":
            module = self._modules.get((source, device))
            if module is None:
                start = time.perf_counter()
                module = cp.RawModule(code=source, options=self._compile_options())
                self._modules.put((source, device), module)
                self.compiles += 1
                compiled_with_cupy(name, time.perf_counter() - start)
            return module.get_function(name).kernel
        return self._nvrtc_function(source, name, device)

    def _nvrtc_function(self, source: str, name: str, device: int) -> Any:
        cp = cupy_module()
        module = self._modules.get((source, device))
        if module is None:
            arch = "sm_" + cp.cuda.Device(device).compute_capability
            cubin, compiled = cached_cubin(source, arch, name)
            module = cp.cuda.function.Module()
            try:
                module.load(cubin)
            except Exception:
                if compiled:
                    raise
                # a stale or corrupt cache entry (another toolkit, a truncated file): compile it again
                cubin, compiled = compile_and_store(source, arch), 1
                module = cp.cuda.function.Module()
                module.load(cubin)
            self.compiles += compiled
            self._modules.put((source, device), module)
        return module.get_function(name)

    def capacity(self, function: Any, threads: int) -> int:
        """How many blocks of ``threads`` threads of ``function`` the device keeps resident at once."""
        cp = cupy_module()
        device = cp.cuda.runtime.getDevice()
        key = (device, function.ptr, threads)
        cap = self._capacity.get(key)
        if cap is None:
            sms = cp.cuda.Device(device).attributes["MultiProcessorCount"]
            cap = sms * max(1, _blocks_per_sm(function, threads))
            self._capacity[key] = cap
        return cap

    # -- recipes -----------------------------------------------------------------------------------
    def _entry(self, region: Region) -> _RegionEntry:
        entry = self._regions.get(id(region))
        if entry is None:
            with self._lock:
                entry = self._regions.get(id(region))
                if entry is None:
                    entry = self._regions[id(region)] = _RegionEntry(region)
                    weakref.finalize(region, self._regions.pop, id(region), None)
        return entry

    def recipe(self, region: Region, arrays: list[Any], out: Mapping[Node, Any] | None = None,
               schedule: ForcedSchedule | None = None, autotune: bool = False) -> LaunchRecipe:
        """Generate, compile and size the launch of ``region`` over these input arrays (``schedule``: a
        forced one, else the heuristics', or with ``autotune`` the tuned one), every time:
        :meth:`cached_recipe` is the cached way."""
        inputs = self._entry(region).inputs
        for node, a in zip(inputs, arrays):
            if a.dtype != node.dtype or tuple(a.shape) != node.shape:
                raise ValueError(f"region {region.name} expects {node.dtype}{list(node.shape)} for an input, "
                                 f"got {a.dtype}{list(a.shape)}")
        values = {**dict(zip(inputs, arrays)), **(out or {})}
        layouts = layouts_of(values, values)
        device = cupy_module().cuda.runtime.getDevice()
        tuned = ""
        if autotune and schedule is None and not out and all(a.size for a in arrays) and math.prod(region.space.shape):
            outcome = self._tune(region, arrays, layouts, device_properties(device))
            schedule, tuned = outcome.schedule, ("tune cache" if outcome.from_cache else "timed")
        kernel = generate(region, layouts, schedule, device=device_properties(device))
        spec = kernel.spec
        check_narrow_values(spec.name, {n.dtype for n in (*region.inputs, *region.nodes)}, *self.compiler_version())
        fn = self.function(kernel.source, spec.name)
        threads = spec.block[0] * spec.block[1]
        grid = spec.launch.grid(self.capacity(fn, threads))
        scalars = tuple(spec.args)
        if spec.error_sites and check_indices():  # gathers: the kernel's error word is this launcher's on this device
            names = [p.name for p in spec.params if p.role == "scalar"]
            word = np.uint64(self._error_word(device).data.ptr)
            scalars = tuple(word if name == ERROR_PARAM else v for name, v in zip(names, scalars))
        return LaunchRecipe(
            spec=spec, schedule=kernel.schedule, source=kernel.source, function=fn, grid=grid,
            block=(spec.block[0], spec.block[1], 1), scalars=scalars,
            outputs=tuple((n.shape, n.dtype) for n in spec.outputs),
            workspace_bytes=spec.launch.workspace_bytes(grid) if grid else 0, tuned=tuned,
        )

    def _tune(self, region: Region, arrays: list[Any], layouts: Mapping[Node, ArrayLayout],
              props: DeviceProperties) -> Tuned:
        """The autotuned schedule of ``region`` over ``arrays`` (:func:`fusec.runtime.autotune.tuned_schedule`): each
        candidate built, run on the arrays into fresh outputs and timed (median of CUDA-event times)."""
        from fusec.runtime.gpu import time_ms

        cp = cupy_module()
        recipes: dict[Schedule, LaunchRecipe] = {}

        def recipe_of(schedule: Schedule) -> LaunchRecipe:
            if schedule not in recipes:
                recipes[schedule] = self.recipe(region, arrays, None, schedule)
            return recipes[schedule]

        def fresh(recipe: LaunchRecipe) -> list[Any]:
            return [cp.empty(shape, dtype) for shape, dtype in recipe.outputs]

        def run(schedule: Schedule) -> list[Any]:
            recipe = recipe_of(schedule)
            outs = fresh(recipe)
            self._launch(recipe, arrays, outs)
            return outs

        def timer(schedule: Schedule) -> float:
            recipe = recipe_of(schedule)
            outs = fresh(recipe)
            return time_ms(lambda: self._launch(recipe, arrays, outs), cp, TUNE_REPS, warmup=3)

        return tuned_schedule(region, layouts, props, run, timer)

    def cached_recipe(self, region: Region, arrays: list[Any], device: int,
                       out: Mapping[Node, Any] | None = None, schedule: ForcedSchedule | None = None,
                       autotune: bool | None = None) -> LaunchRecipe:
        """:meth:`recipe`, cached by the region, the forced schedule (or autotuning: ``autotune``, None for the
        launcher's setting) and the layout of its inputs (and ``out`` arrays) on ``device``: each array's
        shape, strides, dtype and pointer alignment."""
        entry = self._entry(region)
        tune = schedule is None and not out and enabled(self.autotune if autotune is None else autotune)
        key: tuple = (device, None if schedule is None else str(schedule), tune,
                      *[(a.shape, a.strides, a.dtype.char, a.data.ptr & 15) for a in arrays])
        if out:
            key += tuple((id(n), a.shape, a.strides, a.data.ptr & 15) for n, a in out.items())
        recipe = entry.recipes.get(key)
        if recipe is None:
            if entry.recipes and logs.on("recompile"):  # the same kernel again, for arrays laid out anew
                logs.emit("recompile", "%s: a new kernel for a new layout: %s", region.name,
                          logs.layout_change(next(reversed(entry.recipes)), key))
            recipe = entry.recipes[key] = self.recipe(region, arrays, out, schedule, tune)
        return recipe

    def recipes(self, region: Region | None = None) -> list[LaunchRecipe]:
        """The launch recipes built so far, for ``region`` or for every live region (for inspection)."""
        entries = [self._regions.get(id(region))] if region is not None else list(self._regions.values())
        return [r for e in entries if e is not None for r in e.recipes.values()]

    def clear(self) -> None:
        """Forget every recipe and occupancy figure (compiled modules stay): the next launch of each region
        plans and sizes its grid again."""
        with self._lock:
            self._regions.clear()
            self._capacity.clear()

    def _error_word(self, device: int) -> Any:
        """The zeroed 32-bit word of ``device`` that kernels with gathers write an error code into."""
        word = self._error_words.get(device)
        if word is None:
            word = self._error_words[device] = cupy_module().zeros(1, dtype=np.uint32)
        return word

    def check_errors(self, sites: Mapping[int, str]) -> None:
        """After kernels with gathers (``sites``: error code -> the user's line): wait for them, and raise
        fusec's IndexError (NumPy's error) when one met an index out of range; the word is zeroed again.
        This read synchronizes the stream: ``FUSEC_CHECK_INDICES=0`` skips it."""
        cp = cupy_module()
        word = self._error_word(cp.cuda.runtime.getDevice())
        code = int(word.get()[0])
        if code:
            word.fill(0)
            from fusec.support.errors import FusecIndexError

            loc = sites.get(code)
            raise FusecIndexError("an index is out of bounds for the axis it gathers from (a kernel met it: the "
                                  "result is not returned)", loc=loc or None,
                                  hint="indices must lie in [-n, n) for an axis of n elements; the NumPy backend "
                                       "names the index and the axis")

    def _workspace(self, nbytes: int) -> Any:
        """A zeroed scratch buffer for the current device and stream (kernels leave it zeroed)."""
        cp = cupy_module()
        key = (cp.cuda.runtime.getDevice(), cp.cuda.get_current_stream().ptr)
        ws = self._workspaces.get(key)
        if ws is None or ws.nbytes < nbytes:
            ws = cp.zeros(max(nbytes, 4096), dtype=cp.uint8)
            self._workspaces[key] = ws
        return ws

    # -- running -----------------------------------------------------------------------------------
    def run_region(self, region: Region, graph_values: Mapping[Node, Any], out: Mapping[Node, Any] | None = None,
                   schedule: ForcedSchedule | None = None, autotune: bool | None = None) -> dict[Node, Any]:
        """Launch ``region`` on its inputs (read from ``graph_values``); returns ``{output node: array}``.

        ``out`` may give arrays (any layout, not overlapping the inputs) to write some outputs into;
        the others are fresh C-contiguous arrays on the current device. ``schedule`` forces one;
        ``autotune`` (None: the launcher's setting) tunes it on the first launch.
        """
        cp = cupy_module()
        entry = self._entry(region)
        arrays = [graph_values[n] for n in entry.inputs]
        if entry.library:
            return self._run_library(cp, region, entry, arrays, out, schedule)
        recipe = self.cached_recipe(region, arrays, cp.cuda.runtime.getDevice(), out, schedule, autotune)
        outs = []
        for node, (shape, dtype) in zip(recipe.spec.outputs, recipe.outputs):
            given = out.get(node) if out else None
            outs.append(given if given is not None else cp.empty(shape, dtype))
        if self.poison is not None:
            self._poison(cp, outs, arrays)
        try:
            self._launch(recipe, arrays, outs)
        except ContractViolation as exc:
            self._launch(self._fitting_recipe(region, arrays, outs, recipe, schedule, exc), arrays, outs)
        return dict(zip(recipe.spec.outputs, outs))

    def library_kernel(self, region: Region, arrays: list[Any], schedule: ForcedSchedule | None = None
                       ) -> LibraryCall:
        """The library call (:class:`fusec.codegen.kernel.LibraryCall`) computing ``region`` (a library kind's) over
        these input arrays, cached by their layouts and the forced schedule, as recipes are."""
        entry = self._entry(region)
        device = cupy_module().cuda.runtime.getDevice()
        key = (device, None if schedule is None else str(schedule),
               *[(a.shape, a.strides, a.dtype.char) for a in arrays])
        kernel = entry.calls.get(key)
        if kernel is None:
            values = dict(zip(entry.inputs, arrays))
            kernel = entry.calls[key] = generate(region, layouts_of(values, values), schedule,
                                                 device=device_properties(device))
        assert kernel.library is not None
        return kernel.library

    def _run_library(self, cp: Any, region: Region, entry: _RegionEntry, arrays: list[Any],
                     out: Mapping[Node, Any] | None, schedule: ForcedSchedule | None) -> dict[Node, Any]:
        """Run a region whose kernel is a library's call (a GEMM): its outputs allocated (or the ``out`` arrays), the
        call's shapes and dtypes checked (its contract: the library takes any strides), poisoned like kernels'."""
        call = self.library_kernel(region, arrays, schedule)
        outs = []
        for node in call.outputs:
            given = out.get(node) if out else None
            outs.append(given if given is not None else cp.empty(node.shape, node.dtype))
        call.check(arrays, outs)
        if self.poison is not None:
            self._poison(cp, outs, arrays)
        call.run(cp, arrays, outs)
        return dict(zip(call.outputs, outs))

    def _poison(self, cp: Any, outs: list[Any], arrays: list[Any]) -> None:
        """Fill the contiguous outputs with the poison byte, but for those sharing memory with an input: an
        element-wise update of an argument in place (``x[...] -= 1``) reads what it overwrites."""
        stream = cp.cuda.get_current_stream().ptr
        inputs = [a for a in arrays if isinstance(a, cp.ndarray)]
        for a in outs:
            if not a.nbytes or not (a.flags.c_contiguous or a.flags.f_contiguous):
                continue
            if any(cp.may_share_memory(a, b) for b in inputs):
                continue
            cp.cuda.runtime.memsetAsync(a.data.ptr, self.poison, a.nbytes, stream)

    def _launch(self, recipe: LaunchRecipe, arrays: list[Any], outs: list[Any]) -> None:
        """Launch ``recipe``'s kernel on ``arrays`` into ``outs``: its launch contract checked first, the last
        thing before the launch (:class:`ContractViolation` instead of a launch on arrays it does not fit)."""
        problem = recipe.contract.violation([*arrays, *outs])
        if problem is not None:
            raise ContractViolation(recipe.spec.name, str(recipe.schedule), problem)
        if recipe.grid:
            workspace = self._workspace(recipe.workspace_bytes) if recipe.workspace_bytes else NULL_POINTER
            recipe.function((recipe.grid, 1, 1), recipe.block, tuple(recipe.arguments(arrays, outs, workspace)))

    def _fitting_recipe(self, region: Region, arrays: list[Any], outs: list[Any], recipe: LaunchRecipe,
                        schedule: ForcedSchedule | None, exc: ContractViolation) -> LaunchRecipe:
        """A recipe built for exactly these arrays (inputs and outputs), for a launch whose cached recipe's contract
        they do not meet: the forced schedule if it fits them, else its scalar variant, else the heuristics'.
        Not cached (a recipe found for arrays it does not fit is a keying bug: logged on ``fusec.recompile``)."""
        if logs.on("recompile"):
            logs.emit("recompile", "%s: launch contract not met (%s): a kernel for these arrays runs instead",
                      region.name, exc.why)
        out = dict(zip(recipe.spec.outputs, outs))
        for choice in ([schedule, recipe.schedule.scalar()] if schedule is not None else []) + [None]:
            try:
                return self.recipe(region, arrays, out, choice)
            except ScheduleError:
                continue
        raise AssertionError("unreachable: the heuristics' schedule fits any layout")

    def plan_runner(self, plan: Plan, arrays: list[Any], structure: str = "list",
                    schedules: ForcedSchedules | None = None, autotune: bool | None = None,
                    nones: tuple[int, ...] = ()) -> PlanRunner | None:
        """A runner for ``plan`` over arrays laid out exactly as ``arrays`` (shapes, strides, dtypes,
        alignment, device): every kernel's recipe resolved and its launch packed now, so a call only
        finds its outputs and launches (:mod:`fusec.runtime.dispatch`); it packs its results as ``structure``
        and ``nones`` say (:mod:`fusec.runtime.results`). ``schedules`` forces kernels' schedules by name.
        A library's call (a GEMM) is a step that calls it on the runner's arrays. None when the plan has outputs
        that no kernel writes (inputs or constants returned), reads views of its arguments or reshapes between its
        kernels (taken on each call), or when the launcher poisons outputs (tests take the checked path)."""
        if self.poison is not None or plan.views_on_each_call:
            return None
        cp = cupy_module()
        device = cp.cuda.runtime.getDevice()
        check_forced(schedules, [k.name for k in plan.kernels])
        slot = {node: i for i, node in enumerate(plan.graph.inputs)}
        steps = []
        values: dict[Node, Any] = dict(zip(plan.graph.inputs, arrays))
        recipes = []
        for kernel in plan.kernels:
            inputs = self._entry(kernel.region).inputs
            if self._entry(kernel.region).library:
                steps.append(self._library_step(cp, kernel.region, inputs, values, slot, (schedules or {}).get(
                    kernel.name)))
                continue
            recipe = self.cached_recipe(kernel.region, [values[n] for n in inputs], device,
                                         schedule=(schedules or {}).get(kernel.name), autotune=autotune)
            recipes.append(recipe)
            outputs = []
            for node, (shape, dtype) in zip(recipe.spec.outputs, recipe.outputs):
                slot[node] = len(slot)
                values[node] = cp.empty(shape, dtype)  # a stand-in with the layout the kernel writes
                outputs.append((slot[node], shape, dtype, recycler_for(shape, dtype)))
            steps.append(_plan_step(self, recipe, tuple(slot[n] for n in inputs), tuple(outputs)))
        if any(o not in slot or o in plan.graph.inputs for o in plan.graph.outputs):
            return None
        if check_indices() and any(step_recipe.spec.error_sites for step_recipe in recipes):
            return None  # gathers' indices are checked after every call: the checked path

        def checked_path(given: Sequence[Any]) -> Any:  # arrays a kernel's contract does not take: run_plan's way
            if logs.on("recompile"):
                logs.emit("recompile", "%s: the fast path's launch contracts not met: the checked path runs",
                          plan.graph.name)
            results = run_plan(plan, list(given), launcher=self, schedules=schedules, autotune=autotune)
            return pack_results(results, structure, nones)

        return PlanRunner(tuple(steps), len(plan.graph.inputs), tuple(slot[o] for o in plan.graph.outputs), device,
                          structure, checked_path, nones)

    def _library_step(self, cp: Any, region: Region, inputs: tuple[Node, ...], values: dict[Node, Any],
                      slot: dict[Node, int], schedule: ForcedSchedule | None) -> PlanStep:
        """A runner's step calling the library call of ``region`` (a GEMM) on the arrays of its input slots, into
        fresh C-contiguous outputs (stand-ins of which go into ``values``, their slots into ``slot``), as
        :meth:`_run_library` does; its contract (shapes and dtypes) holds by the runner's key."""
        arrays = [values[n] for n in inputs]
        call = self.library_kernel(region, arrays, schedule)
        outputs = []
        for node in call.outputs:
            slot[node] = len(slot)
            values[node] = cp.empty(node.shape, node.dtype)
            outputs.append((slot[node], node.shape, node.dtype, recycler_for(node.shape, node.dtype)))
        call.check(arrays, [values[n] for n in call.outputs])
        run = call.run
        return PlanStep(None, tuple(slot[n] for n in inputs), tuple(outputs), None,
                        call=lambda ins, outs: run(cp, ins, outs))

    def source(self, region: Region, graph_values: Mapping[Node, Any], schedule: ForcedSchedule | None = None) -> str:
        """The CUDA source ``run_region`` compiles for these inputs (no launch)."""
        layouts = layouts_of(self._entry(region).inputs, graph_values)
        device = device_properties(cupy_module().cuda.runtime.getDevice())
        return generate(region, layouts, schedule, device=device).source


def _plan_step(launcher: KernelLauncher, recipe: LaunchRecipe, in_slots: tuple[int, ...],
               outputs: tuple[tuple[int, tuple[int, ...], np.dtype, OutputRecycler | None], ...]) -> PlanStep:
    """One kernel of a runner, its launch packed by parameter role: the arrays' pointers (written on each
    call) lead, then the workspace's (when the launch needs one; a kernel of one block gets a null
    pointer, written once with the scalars), then the scalars; with its launch contract's alignment masks,
    which the runner tests each call's pointers against before the launch."""
    roles = [p.role for p in recipe.spec.params]
    expected = sorted(roles, key=("input", "output", "workspace", "scalar").index)
    if roles != expected:
        raise ValueError(f"kernel {recipe.spec.name}: parameters must come as inputs, outputs, workspace, scalars")
    workspace, scalars = None, recipe.scalars
    if "workspace" in roles:
        if recipe.workspace_bytes:
            workspace = functools.partial(launcher._workspace, recipe.workspace_bytes)
        else:
            scalars = (NULL_POINTER, *scalars)
    launch = None
    if recipe.grid:
        n_pointers = roles.count("input") + roles.count("output") + (workspace is not None)
        launch = PackedLaunch(recipe.function, (recipe.grid, 1, 1), recipe.block, n_pointers, scalars)
    return PlanStep(launch, in_slots, outputs, workspace, recipe.contract.masks)


def _blocks_per_sm(function: Any, threads: int) -> int:
    try:
        from cupy_backends.cuda.api import driver

        return int(driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, threads, 0))
    except Exception:
        return _estimate_blocks_per_sm(function, threads)


def _estimate_blocks_per_sm(function: Any, threads: int) -> int:
    """Resident blocks per SM from the kernel's registers and shared memory (sm_80/sm_90 limits)."""
    from cupy_backends.cuda.api import driver

    regs = driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_NUM_REGS, function.ptr)
    smem = driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function.ptr)
    warps = -(-threads // 32)
    regs_per_warp = -(-max(regs, 1) * 32 // 256) * 256
    by_regs = 65536 // (regs_per_warp * warps)
    by_threads = 2048 // threads
    by_smem = (228 * 1024) // (smem + 1024) if smem else 32
    return max(1, min(32, by_regs, by_threads, by_smem))


def check_indices() -> bool:
    """Whether calls check gathers' indices after their kernels (a synchronizing read of one word): on unless
    ``FUSEC_CHECK_INDICES=0``, where an index out of range gives 0 for its element and no error (read when a
    kernel's launch is prepared: its error word is then a null pointer, which the kernel never writes)."""
    return os.environ.get("FUSEC_CHECK_INDICES", "1") != "0"


_DEFAULT: KernelLauncher | None = None
_DEFAULT_LOCK = threading.Lock()


def default_launcher() -> KernelLauncher:
    """The process-wide launcher that :func:`run_region` uses."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = KernelLauncher()
    return _DEFAULT


def run_plan(plan: Plan, arrays: list[Any], out: Mapping[Node, Any] | None = None,
             launcher: KernelLauncher | None = None, schedules: ForcedSchedules | None = None,
             autotune: bool | None = None) -> list[Any]:
    """Run every kernel of ``plan`` (a :class:`fusec.runtime.plan.Plan`) on CuPy ``arrays`` (one per graph
    input); returns one array per graph output. ``out`` maps output nodes to arrays to write into
    (of the node's dtype and shape, not overlapping any input); ``schedules`` forces kernels' schedules
    by kernel name; ``autotune`` (None: the launcher's setting) tunes the others on their first launch."""
    launcher = launcher or default_launcher()
    check_forced(schedules, [k.name for k in plan.kernels])
    memory: dict[Node, Any] = dict(zip(plan.graph.inputs, arrays))
    sites: dict[int, str] = {}
    run_nodes(cupy_module(), plan.argument_views, memory)  # views of the arguments (no copies)
    pending = list(plan.read_back_views)
    # a bar only where several kernels take over a second (a first call compiling them), on a terminal
    for kernel in progress(plan.kernels, f"compile {plan.graph.name}", unit="kernel", when=len(plan.kernels) > 1):
        pending = take_read_backs(cupy_module(), pending, memory)  # reshapes of what earlier kernels wrote
        targets = {n: out[n] for n in kernel.outputs if n in out} if out else None
        memory.update(launcher.run_region(kernel.region, memory, out=targets,
                                          schedule=(schedules or {}).get(kernel.name), autotune=autotune))
        for recipe in launcher.recipes(kernel.region):
            sites.update(recipe.spec.error_sites)
    if sites and check_indices():
        launcher.check_errors(sites)
    missing = [o for o in plan.graph.outputs if o not in memory]
    if missing:  # constants, sizes and views of results returned as they are: no kernel computes them
        run_nodes(cupy_module(), missing, memory)
    return [memory[o] for o in plan.graph.outputs]


def run_region(region: Region, graph_values: Mapping[Node, Any]) -> dict[Node, Any]:
    """Run ``region`` with the default launcher (see :meth:`KernelLauncher.run_region`)."""
    return default_launcher().run_region(region, graph_values)


__all__ = ["KernelLauncher", "LaunchRecipe", "PlanRunner", "POISON_BYTE", "default_launcher", "precompile", "run_plan",
           "run_region"]
