"""Running a correctness case (:mod:`tests.correctness.cases`) on one backend and checking it against NumPy.

    run_case(case, np, np.asarray)              # the NumPy backend
    run_case(case, cupy, cupy.asnumpy, repeat=2)  # the GPU: the second call takes the dispatch fast path

Checks: the result's structure (one array, a tuple or a list), then every output's dtype, shape and values
against NumPy eager on the same data (CORRECTNESS.md's tolerances; bool and integer results exact; NaN
positions and the sign of infinities exact), that ``out=`` arrays are returned and hold NumPy's values (and
the arrays they are views of), and that every input not overlapping an ``out=`` array is unchanged. A case
that raises must raise a :class:`fusec.FusecError` deriving from the class NumPy raises, with a message
matching ``case.match``.

:func:`kernel_specs` gives the kernel specs a case's call compiles, for the NVRTC compile tests.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import fusec
from fusec.codegen.spec import KernelSpec
from fusec.ir.dtypes import kind as dtype_kind
from fusec.kinds import generate
from fusec.schedule import layouts_of
from fusec.support.errors import FusecError
from tests.correctness.cases import Call, Case
from tests.helpers import TOLERANCES, assert_matches_numpy, seed_of


def rng_of(case: Case) -> np.random.Generator:
    return np.random.default_rng(seed_of("correctness", case.id))


def quietly(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args)`` with NumPy's floating-point warnings off (integer // 0 warns; it gives 0)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


def numpy_result(case: Case, call: Call) -> Any:
    """What NumPy computes for ``call`` (NumPy arrays): ``case.reference`` or ``case.fn`` run eagerly."""
    if case.reference is not None:
        return quietly(case.reference, call)
    return quietly(case.fn, *call.args)


def is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, np.generic)


def _outputs(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def compare(case: Case, actual: Any, expected: Any, to_host: Callable[[Any], np.ndarray],
            ref64: Any = None, what: str = "") -> None:
    """``actual`` (a fused call's result) against NumPy's ``expected``: structure, dtypes, shapes, values."""
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected), f"{what}result is a {type(actual).__name__}, NumPy's a " \
                                               f"{type(expected).__name__}"
        assert len(actual) == len(expected), f"{what}{len(actual)} outputs, NumPy has {len(expected)}"
    references = _outputs(ref64) if ref64 is not None else [None] * len(_outputs(expected))
    for i, (got, want, r64) in enumerate(zip(_outputs(actual), _outputs(expected), references)):
        if isinstance(got, np.generic):  # the NumPy backend's 0-d result: a NumPy scalar, as NumPy's
            assert not is_array(want), f"{what}output {i} is a NumPy scalar where NumPy gives an array"
        else:
            assert is_array(got), f"{what}output {i} is a {type(got).__name__}, not an array"
        host, want = to_host(got), np.asarray(want)
        try:
            _compare_one(case, host, want, r64)
        except AssertionError as exc:
            raise AssertionError(f"{what}output {i} ({case.id}): {exc}") from None


def _compare_one(case: Case, got: np.ndarray, want: np.ndarray, r64: Any) -> None:
    if case.tol == "exact" or dtype_kind(want.dtype) != "f":
        assert_matches_numpy(got, want, exact=True)
        return
    rtol, atol = TOLERANCES[want.dtype]
    if case.tol == "transcendental":
        assert_matches_numpy(got, want, rtol=4 * rtol, atol=atol)
        return
    if case.tol == "reduction":
        # Inductor's rule against a float64 reference: at most twice NumPy's own error, or within a few
        # eps of the accumulation dtype (float16 accumulates in float32)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
        r64 = np.asarray(r64, np.float64)
        err = np.abs(got.astype(np.float64) - r64)
        accumulator = np.float32 if want.dtype == np.float16 else want.dtype
        allowed = 2 * np.abs(want.astype(np.float64) - r64) + 32 * ml_dtypes.finfo(accumulator).eps * np.abs(r64) + atol
        bad = ~(err <= allowed)
        assert not bad.any(), f"{int(bad.sum())} elements beyond the reduction bound; got {got[bad][:4]}, " \
                              f"float64 reference {r64[bad][:4]}, NumPy {want[bad][:4]}"
        return
    assert_matches_numpy(got, want)


def _snapshot(call: Call, to_host: Callable[[Any], np.ndarray], xp: Any) -> list[tuple[int, Any, np.ndarray]]:
    """Copies of the array arguments that no ``out=`` array overlaps (those must stay unchanged)."""
    outs = [o for o in _outputs(call.out) if o is not None] if call.out is not None else []
    return [(i, a, to_host(a).copy()) for i, a in enumerate(call.args)
            if is_array(a) and not any(xp.may_share_memory(a, o) for o in outs)]


def run_case(case: Case, xp: Any, to_host: Callable[[Any], np.ndarray], repeat: int = 1,
             fused: fusec.Fused | None = None) -> None:
    """Run ``case`` with ``xp`` arrays through ``fusec.fuse`` (``repeat`` calls of one Fused, each on fresh
    arguments) and check it against NumPy (see the module docstring)."""
    fused = fused or fusec.fuse(case.fn)
    expected_call = case.make(np, rng_of(case))
    if case.raises is not None:
        if case.numpy_raises:
            with pytest.raises(case.raises):
                numpy_result(case, expected_call)
        call = case.make(xp, rng_of(case))
        snapshot = _snapshot(call, to_host, xp)
        outs_before = [to_host(o).copy() for o in _outputs(call.out)] if call.out is not None else []
        with pytest.raises(case.raises) as info:
            quietly(fused, *call.args, out=call.out)
        assert isinstance(info.value, FusecError), f"{type(info.value).__name__} is not a fusec error: {info.value}"
        if case.match is not None:
            assert re.search(case.match, str(info.value)), f"message {str(info.value)!r} does not match {case.match!r}"
        for _, a, before in snapshot:
            assert_matches_numpy(to_host(a), before, exact=True)
        for o, before in zip(_outputs(call.out) if call.out is not None else [], outs_before):
            assert_matches_numpy(to_host(o), before, exact=True)  # nothing written before the error
        return
    expected = numpy_result(case, expected_call)
    ref64 = case.ref64(*expected_call.args) if case.ref64 is not None else None
    for n in range(repeat):
        what = f"call {n + 1}: " if repeat > 1 else ""
        call = case.make(xp, rng_of(case))
        snapshot = _snapshot(call, to_host, xp)
        actual = quietly(fused, *call.args, out=call.out)
        compare(case, actual, expected, to_host, ref64, what)
        if call.out is not None:
            for got, given in zip(_outputs(actual), _outputs(call.out)):
                assert got is given, f"{what}the result is not the out= array given"
        for kept, want in zip(call.keep, expected_call.keep):
            assert_matches_numpy(to_host(kept), want, exact=True)
        for i, a, before in snapshot:
            try:
                assert_matches_numpy(to_host(a), before, exact=True)
            except AssertionError as exc:
                raise AssertionError(f"{what}input {i} was modified: {exc}") from None


def kernel_specs(fn: Callable[..., Any], args: tuple[Any, ...], prefix: str | None = None,
                 fusion: bool = True) -> list[KernelSpec]:
    """The kernel specs of ``fusec.fuse(fn, fusion=fusion)`` called with ``args`` (arrays or ArraySpecs), as
    the runtime plans them: inputs in their own layouts, intermediates fresh and C-contiguous. ``prefix``
    renames the kernels ``<prefix>_<region>`` so that several cases compile as one module."""
    plan = fusec.fuse(fn, fusion=fusion).plan(*args)
    values = dict(zip(plan.graph.inputs, [a for a in args if is_array(a)]))
    return [generate(k.region, layouts_of(k.inputs, values), name=None if prefix is None else f"{prefix}_{k.name}").spec
            for k in plan.kernels]
