"""The matmul kind: a region that is one ``matmul`` (and the views of its operands), computed by a GEMM library.

Its kernel is no generated CUDA but a library call (:meth:`fusec.kinds.kind.KernelKind.library`): cuBLAS through
CuPy (``cupy.matmul`` into the preallocated output, :func:`cublas_matmul`). What CuPy 14 does with it, read in
``cupy/_core/_routines_linalg.pyx``:

- a product of two matrices goes to ``cublasGemmEx``; an operand that is a transposed view of a C-contiguous
  matrix (F-contiguous) is passed as a transpose, not copied; any other strided operand is copied first;
- stacks of matrices go to ``cublasGemmStridedBatchedEx`` (``cublasGemmBatchedEx`` or ``sgemmBatched`` where a
  batch axis is broadcast) on C-contiguous operands, copying those that are not. A stack whose right operand has
  no batch of its own (``x @ w`` of a 3-d ``x``) is one GEMM here: ``x``'s rows are merged into M where its
  strides allow (a view), so the weights are read once;
- float16 accumulates in float32 (``CUBLAS_COMPUTE_32F``) under CuPy's default compute type, in both paths;
- float32 is full float32 (``CUBLAS_COMPUTE_32F``, the handle's default math mode) unless ``CUPY_TF32=1`` or
  ``set_compute_type`` asks CuPy for TF32 on two-dimensional products (its batched path never uses TF32). fusec
  sets CuPy's compute type for the call's dtype itself and puts it back after: float32 products use TF32 only with
  ``tf32=1`` in the schedule (``fusec.fuse(fn, tf32=True)`` or ``FUSEC_TF32=1``), whatever ``CUPY_TF32`` says;
  float16 always accumulates in float32;
- integers run CuPy's own GEMM kernel, which wraps as NumPy does (int8 through ``cublasGemmEx`` with int32
  accumulation, wrapped once at the end: the same value modulo 256).

The schedule (:class:`MatmulSchedule`, ``matmul:cublas,tf32=0``) names the backend, so another one (cuBLASLt with
its fused epilogues through nvmath-python, a generated GEMM) is a new variant here. There is nothing to autotune.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fusec.codegen.kernel import LibraryCall
from fusec.ir.dtypes import BFLOAT16
from fusec.ir.graph import Node
from fusec.ir.interpret import run_nodes
from fusec.ir.region import MATMUL, Region, contraction_of
from fusec.ir.reshape_math import view_strides
from fusec.kinds.kind import KernelKind, Refuse
from fusec.schedule.base import Schedule, ScheduleError
from fusec.schedule.device import DeviceProperties
from fusec.schedule.layout import ArrayLayout

TF32_ENV = "FUSEC_TF32"  # 1: float32 matmuls may use TF32 tensor cores (default off, as NumPy users expect)


def tf32_default() -> bool:
    """Whether float32 matmuls may use TF32 by default: ``FUSEC_TF32=1`` in the environment."""
    return os.environ.get(TF32_ENV, "0") not in ("", "0")


@dataclass(frozen=True)
class MatmulSchedule(Schedule):
    """A matmul region's GEMM: ``backend`` (``cublas``: cuBLAS through CuPy) and ``tf32`` (float32 products may
    use TF32 tensor cores; off unless asked for)."""

    kind: ClassVar[str] = MATMUL
    variant_field: ClassVar[str] = "backend"
    variants: ClassVar[tuple[str, ...]] = ("cublas",)
    keys: ClassVar[dict[str, str]] = {"tf32": "tf32"}
    backend: str = "cublas"
    tf32: bool = False


@dataclass(frozen=True)
class MatmulNest:
    """What the matmul kind knows of its region: the contraction, the region's array inputs and their layouts."""

    region: Region
    layouts: Mapping[Node, ArrayLayout]
    kind: ClassVar[str] = MATMUL
    one_pass_candidates: ClassVar[tuple] = ()

    @property
    def contraction(self) -> Node:
        c = contraction_of(self.region)
        assert c is not None, self.region.name
        return c

    def operand_strides(self, k: int) -> tuple[int, ...] | None:
        """The element strides operand ``k`` of the contraction has, taken through its views from the array it
        views (None where a reshape of it is no view: CuPy copies it)."""
        chain = []
        node = self.contraction.operands[k]
        inside = set(self.region.nodes)
        while node in inside:
            chain.append(node)
            node = node.operands[0]
        layout = self.layouts.get(node) or ArrayLayout.c_contiguous(node.shape)
        strides: tuple[int, ...] | None = tuple(layout.strides)
        for v in reversed(chain):
            strides = _view_strides(v, strides)
            if strides is None:
                return None
        return strides


def _view_strides(v: Node, s: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides of layout view ``v`` of an array of strides ``s`` (None: not a view)."""
    x = v.operands[0]
    if v.op == "transpose":
        return tuple(s[p] for p in v.attr("perm"))
    if v.op == "expand_dims":
        it = iter(s)
        return tuple(0 if i in v.attr("axes") else next(it) for i in range(v.ndim))
    if v.op == "squeeze":
        return tuple(st for i, st in enumerate(s) if i not in v.attr("axes"))
    if v.op == "broadcast_to":
        off = v.ndim - x.ndim
        return tuple(0 if i < off or x.shape[i - off] != v.shape[i] else s[i - off] for i in range(v.ndim))
    if v.op == "slice":
        steps = [step if step else 1 for step in v.attr("step") or [1] * x.ndim]
        return tuple(st * step for st, step in zip(s, steps))
    if v.op == "reshape":
        return view_strides(x.shape, s, v.shape)
    return None


def _transposed(shape: tuple[int, ...], strides: tuple[int, ...] | None, batched: bool) -> str:
    """How CuPy hands an operand of ``shape`` and ``strides`` (its last two axes the matrix) to cuBLAS: ``N``
    (C-contiguous), ``T`` (a transposed layout, F-contiguous: two-dimensional products only) or ``copy`` (CuPy copies
    it to C order first)."""
    if strides is None:
        return "copy"
    if _contiguous(shape, strides):
        return "N"
    if not batched and _contiguous(shape[-2:][::-1], strides[-2:][::-1]):
        return "T"
    return "copy"


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether ``strides`` (in elements) lay ``shape`` out in C order (size-1 axes have any stride)."""
    step = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != step:
            return False
        step *= d
    return True


class MatmulKind(KernelKind):
    name = MATMUL
    schedule_type = MatmulSchedule
    template = ""  # no template: a library call (:meth:`library`)
    runs = (MATMUL,)
    generated = False

    def nest(self, region: Region, layouts: Mapping[Node, ArrayLayout]) -> Any:
        return MatmulNest(region, dict(layouts))

    def defaults(self, nest: Any, device: DeviceProperties, variant: str | None) -> Schedule:
        return MatmulSchedule(variant or "cublas", tf32_default())

    def check(self, nest: Any, schedule: Schedule, device: DeviceProperties, refuse: Refuse) -> None:
        assert isinstance(schedule, MatmulSchedule)
        if schedule.tf32 and nest.contraction.dtype != np.float32:
            refuse(f"tf32=1 applies to float32 products, and this one is {nest.contraction.dtype}")

    def lower(self, nest: Any, schedule: Any, name: str | None = None) -> Any:
        raise ScheduleError(f"kernel {nest.region.name} is a library call (cuBLAS), not generated CUDA")

    def library(self, nest: Any, schedule: Any, name: str | None = None) -> LibraryCall:
        """The cuBLAS call computing ``nest``'s region (its operand views taken first, as views where CuPy can)."""
        region, c = nest.region, nest.contraction
        a, b = c.operands
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        batch_shape = c.shape[:-2]
        b_batched = any(d != 1 for d in b.shape[:-2])
        one_gemm = not b_batched and (not batch_shape or _mergeable(a.shape, nest.operand_strides(0)))
        rows = m * math.prod(batch_shape) if one_gemm else m
        batched = not one_gemm and bool(batch_shape)
        trans = []
        for i, o in enumerate((a, b)):
            shape, strides = o.shape, nest.operand_strides(i)
            if one_gemm and strides is not None:  # the matrix the GEMM reads: rows merged, batch axes of 1 gone
                shape, strides = ((math.prod(shape[:-1]), shape[-1]), strides[-2:]) if i == 0 else \
                    (shape[-2:], strides[-2:])
            trans.append(_transposed(tuple(shape), strides, batched))
        accumulate = ("as float32 widenings, float32 accumulation, rounded once" if c.dtype == BFLOAT16 else
                      "float32 accumulation" if c.dtype in (np.float16, np.float32) and not schedule.tf32 else
                      "TF32 allowed" if schedule.tf32 else "wrapping integer accumulation" if c.dtype.kind in "iu"
                      else "float64 accumulation")
        label = f"{name or region.name}_matmul"
        summary = (f"cuBLAS gemm{' (strided batched)' if batched else ''} (M={rows}, N={n}, K={k}, "
                   f"batch={math.prod(batch_shape) if batched else 1}, transa={trans[0]}, transb={trans[1]}, "
                   f"{c.dtype}, {accumulate})")
        views = [v for v in region.nodes if v is not c]
        inputs = tuple(n for n in region.inputs if n.op not in ("const", "size", "iota"))
        tf32 = bool(schedule.tf32)

        def run(xp: Any, arrays: list[Any], outs: list[Any]) -> None:
            env = dict(zip(inputs, arrays))
            run_nodes(xp, views, env)
            cublas_matmul(xp, env[a], env[b], outs[0], tf32)

        return LibraryCall(label, summary, inputs, (c,), run)


def _mergeable(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> bool:
    """Whether the leading axes of an operand of ``shape`` and ``strides`` merge into its rows as a view (then a
    stack of products with one right operand is one GEMM)."""
    if strides is None:
        return False
    dims = [(d, s) for d, s in zip(shape[:-1], strides[:-1]) if d != 1]
    return all(s_outer == s_inner * d_inner for (_, s_outer), (d_inner, s_inner) in zip(dims, dims[1:]))


def cublas_matmul(xp: Any, a: Any, b: Any, out: Any, tf32: bool = False) -> None:
    """``out[...] = a @ b`` (operands of one dtype, ``out`` of the result's shape and dtype) through CuPy's cuBLAS
    (see the module docstring): a stack whose right operand has no batch of its own runs as one GEMM over ``a``'s
    merged rows where that is a view; float16 accumulates in float32; float32 uses TF32 only with ``tf32``; bfloat16
    is the float32 GEMM of its exact widenings, rounded once (float32 accumulation, as the reference backend)."""
    if out.size == 0:
        return
    if a.shape[-1] == 0:
        out.fill(0)
        return
    if out.dtype == BFLOAT16:  # no bfloat16 GEMM here: the float32 GEMM of the exact widenings, rounded once
        wide = xp.empty(out.shape, np.float32)
        cublas_matmul(xp, widen_bfloat16(xp, a), widen_bfloat16(xp, b), wide, tf32)
        out.view(np.uint16)[...] = round_to_bfloat16_bits(xp, wide)
        return
    if a.ndim > 2 and all(d == 1 for d in b.shape[:-2]) and out.flags.c_contiguous:
        rows = _merged(a)
        if rows is not None:
            a, b, out = rows, b.reshape(b.shape[-2:]), out.reshape(-1, out.shape[-1])
    with compute_type(xp, out.dtype, tf32):
        xp.matmul(a, b, out=out)


def widen_bfloat16(xp: Any, a: Any) -> Any:
    """A bfloat16 array as float32, exactly: its bits shifted into float32's high half (integer ops only, which
    every CuPy has)."""
    return (xp.ascontiguousarray(a).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_to_bfloat16_bits(xp: Any, x: Any) -> Any:
    """The bits of float32 ``x`` rounded to bfloat16, to nearest even (overflow to inf; NaN stays a quiet NaN of its
    sign), as ``uint16``: what ``__float2bfloat16_rn`` and ml_dtypes' cast give."""
    bits = xp.ascontiguousarray(x).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (bits >> 16) | np.uint32(0x0040)
    return xp.where(nan, quiet, rounded).astype(np.uint16)


def _merged(a: Any) -> Any:
    """``a`` (..., M, K) as (rows, K) without a copy, or None."""
    if not _mergeable(tuple(a.shape), tuple(s // a.itemsize for s in a.strides)):
        return None
    view = a.reshape(-1, a.shape[-1])
    return view if view.data.ptr == a.data.ptr else None


_NO_LINALG_CORE: set[str] = set()  # namespaces without one: a failed import searches the path again on every call


def _linalg_core(namespace: str) -> Any:
    """CuPy's linalg core module of the array namespace ``namespace``, or None (NumPy, the test stand-ins)."""
    name = f"{namespace}._core._routines_linalg"
    module = sys.modules.get(name)
    if module is not None or namespace in _NO_LINALG_CORE:
        return module
    try:
        return importlib.import_module(name)
    except ImportError:
        _NO_LINALG_CORE.add(namespace)
        return None


@contextlib.contextmanager
def compute_type(xp: Any, dtype: np.dtype, tf32: bool) -> Iterator[None]:
    """CuPy's compute type for ``dtype`` set for the block: float32 accumulation for float16 and float32 (TF32 for
    float32 with ``tf32``), whatever ``CUPY_TF32`` or an earlier ``set_compute_type`` chose; restored after. A
    namespace without CuPy's linalg core (NumPy, the test stand-ins) runs as it is."""
    if dtype not in (np.float16, np.float32):
        yield
        return
    linalg = _linalg_core(xp.__name__)
    if linalg is None:
        yield
        return
    wanted = getattr(linalg, "COMPUTE_TYPE_TF32", 7) if tf32 else getattr(linalg, "COMPUTE_TYPE_DEFAULT", 1)
    before = linalg.get_compute_type(dtype)
    linalg.set_compute_type(dtype, wanted)
    try:
        yield
    finally:
        linalg.set_compute_type(dtype, before)


KIND = MatmulKind()

__all__ = ["KIND", "TF32_ENV", "MatmulKind", "MatmulNest", "MatmulSchedule", "compute_type", "cublas_matmul",
           "round_to_bfloat16_bits", "tf32_default", "widen_bfloat16"]
