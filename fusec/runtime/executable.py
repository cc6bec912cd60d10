"""One executable seam: a plan made runnable, what :class:`fusec.Fused` holds per trace and shapes and what a Dask
block task calls.

An :class:`Executable` is a :class:`fusec.runtime.plan.Plan` with everything a call of it needs: its kernels, each
compiled and sized by the launcher (:mod:`fusec.runtime.launch`: one launch recipe per kernel and argument layout,
each with its launch contract, kept by the launcher for as long as the plan's regions live), how the call's results
are packed (``structure`` and ``nones``: :mod:`fusec.runtime.results`), what the call writes into its arguments (the
function's in-place updates, wholly or in part: :mod:`fusec.runtime.write_backs`), and the forced schedules and
autotuning it runs with.

- ``executable(arrays, out=...)`` runs a call on CuPy arrays (the checked path, :func:`fusec.runtime.launch.run_plan`):
  ``out=`` arrays receive the results (kernels write straight into those of the result's dtype that share no memory
  with an argument; the others get a same-kind copy), and the arguments the function updates are written, by their
  kernels where that is safe, else after the last kernel;
- ``executable.reference(arrays, out=...)``: the same call on NumPy arrays, run by the reference backend;
- ``executable.runner(arrays)``: the dispatch fast path for arrays laid out exactly as these
  (:mod:`fusec.runtime.dispatch`): a function of the arrays giving the call's results, or None where the call
  needs the checked path (write-backs, views taken on each call, checked gathers, a poisoning launcher).

Arguments, checks of them (shapes and dtypes of ``out=``, writability) and the caches of signatures are the frontend's;
the Executable takes arrays, one per graph input, in the graph's order (arrays, then runtime scalars as 0-d arrays).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fusec.kinds import ForcedSchedules
from fusec.runtime.gpu import cupy_module
from fusec.runtime.launch import KernelLauncher, default_launcher, run_plan
from fusec.runtime.plan import Plan, execute_numpy
from fusec.runtime.results import STRUCTURES, check_structure, pack_results
from fusec.runtime.write_backs import PartialUpdate, commit, direct_writes


class Executable:
    """``plan`` made runnable (see the module docstring). ``structure``: how a call returns the function's results
    (``"single"``, ``"tuple"``, ``"list"``, or ``"none"`` for a function that returns None); ``nones``: the positions
    of a returned tuple's or list's None entries (:mod:`fusec.runtime.results`);
    ``updates``: the array arguments the function updates wholly (their new values are the graph's outputs after
    the results); ``parts``: its assignments to part of an argument (their values are the graph's last outputs);
    ``schedules``: kernels' forced schedules by name; ``autotune``: None for the launcher's setting; ``launcher``:
    None for the process's default launcher (looked up on each call)."""

    __slots__ = ("plan", "structure", "nones", "updates", "parts", "schedules", "autotune", "launcher",
                 "writes_arguments")

    def __init__(self, plan: Plan, *, structure: str = "list", nones: tuple[int, ...] = (),
                 updates: tuple[int, ...] = (), parts: tuple[PartialUpdate, ...] = (),
                 schedules: ForcedSchedules | None = None, autotune: bool | None = None,
                 launcher: KernelLauncher | None = None):
        check_structure(structure, nones)
        self.plan = plan
        self.structure = structure
        self.nones = tuple(nones)
        self.updates = tuple(updates)
        self.parts = tuple(parts)
        self.schedules = schedules
        self.autotune = autotune
        self.launcher = launcher
        self.writes_arguments = bool(self.updates or self.parts)

    def __repr__(self) -> str:
        return f"<fusec Executable @{self.plan.graph.name}: {len(self.plan.kernels)} kernel(s)>"

    @property
    def n_results(self) -> int:
        """How many of the graph's outputs the function returns (the values written into arguments follow them):
        its array results, None entries not counted; 0 for a function that returns None."""
        return len(self.plan.graph.outputs) - len(self.updates) - len(self.parts)

    def __call__(self, arrays: list[Any], out: list[Any] | None = None) -> Any:
        """Run a call on CuPy ``arrays`` (one per graph input); returns the results packed as ``structure`` says.
        ``out``: one array per array result (checked by the caller: shape, a dtype the result casts to same-kind, the
        arguments' device) to write the results into; they are returned. The arguments the function updates are
        changed in place."""
        xp = cupy_module()
        plan = self.plan
        if self.writes_arguments:  # kernels that write updated inputs (or the assigned parts of them) themselves
            direct, parts_written = direct_writes(plan, self.updates, self.parts, arrays)
        else:
            direct, parts_written = {}, frozenset()
        for node, dst in zip(plan.graph.outputs, out or ()):
            if (dst.dtype == node.dtype and node not in direct
                    and not any(xp.may_share_memory(dst, a) for a in arrays)):
                direct[node] = dst
        results = run_plan(plan, arrays, out=direct or None, launcher=self.launcher, schedules=self.schedules,
                           autotune=self.autotune)
        if self.writes_arguments:
            results = commit(plan, self.updates, self.parts, arrays, results, xp, parts_written)
        if out is not None:
            if any(r is not dst for r, dst in zip(results, out)):
                write_out(results, out, xp)
            results = out
        return pack_results(results[:self.n_results], self.structure, self.nones)

    def reference(self, arrays: list[Any], out: list[Any] | None = None) -> Any:
        """The call on NumPy ``arrays`` (one per graph input), run by the reference backend
        (:func:`fusec.runtime.plan.execute_numpy`), with the same ``out=`` and write-backs as :meth:`__call__`."""
        results = execute_numpy(self.plan, arrays, xp=np)
        if self.writes_arguments:
            results = commit(self.plan, self.updates, self.parts, arrays, results, np)
        if out is not None:
            results = write_out(results[:self.n_results], out, np)
        else:  # a 0-d result is a NumPy scalar, as NumPy's reductions, ufuncs and scalar indexing (x[i, j]) give it;
            # a returned argument stays itself. (NumPy's rarer 0-d views, x.reshape(()), are arrays there: the IR
            # does not tell them from x[i, j])
            returned = self.plan.graph.outputs[:self.n_results]
            results = [r[()] if r.ndim == 0 and node.op != "input" else r for r, node in zip(results, returned)]
        return pack_results(results[:self.n_results], self.structure, self.nones)

    def runner(self, arrays: list[Any]) -> Callable[[Sequence[Any]], Any] | None:
        """The dispatch fast path for CuPy arrays laid out exactly as ``arrays`` (shapes, strides, dtypes, pointer
        alignment, the current device): a function of such arrays (a tuple or list, one per graph input) that
        gives the call's results packed as ``structure`` says, taking the checked path by itself for arrays whose
        alignment a kernel's launch contract does not take. None where a call must take the checked path every
        time (:meth:`fusec.runtime.launch.KernelLauncher.plan_runner` says when; and a call that writes into its
        arguments)."""
        if self.writes_arguments:
            return None
        runner = (self.launcher or default_launcher()).plan_runner(
            self.plan, arrays, structure=self.structure, nones=self.nones, schedules=self.schedules,
            autotune=self.autotune)
        return None if runner is None else runner.run



def write_out(results: list[Any], outs: list[Any], xp: Any) -> list[Any]:
    """Copy results into the caller's (checked) ``out`` arrays with same-kind casting, as NumPy's ``out=``:
    as if every result were computed before any is written, even where an ``out`` overlaps an input."""
    results = [res if res is dst or not any(xp.may_share_memory(res, d) for d in outs[:i + 1]) else res.copy()
               for i, (res, dst) in enumerate(zip(results, outs))]
    for res, dst in zip(results, outs):
        if res is not dst:
            xp.copyto(dst, res, casting="same_kind")
    return outs


__all__ = ["Executable", "STRUCTURES", "pack_results", "write_out"]
