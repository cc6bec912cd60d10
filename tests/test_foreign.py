"""Arrays of other libraries through DLPack (PyTorch tensors; here a stand-in library, ``fakelib``, whose
tensors hold a NumPy buffer and speak DLPack as a CPU torch tensor does): viewed without a copy, run on the
NumPy backend, results back in the library, in-place updates written into the tensor's memory. The real
PyTorch tests, CPU and CUDA, are in ``tests/gpu/test_torch_gpu.py``."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import fusec
from fusec.ir.dtypes import BFLOAT16
from fusec.support.errors import FusecTypeError
from tests.helpers import assert_matches_numpy, random_array
from tests.workloads import softmax


class FakeTensor:
    """A CPU tensor of another library: DLPack only (no ``__array__``, no ``shape`` NumPy would take)."""

    def __init__(self, array: np.ndarray, device_type: int = 1, refuse: str | None = None):
        self._array = array
        self._device_type = device_type
        self._refuse = refuse

    def __dlpack__(self, **kwargs):
        if self._refuse:
            raise RuntimeError(self._refuse)
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (self._device_type, 0)

    def numpy(self) -> np.ndarray:
        return self._array


FakeTensor.__module__ = "fakelib"


@pytest.fixture(autouse=True)
def fakelib(monkeypatch):
    module = types.ModuleType("fakelib")
    module.from_dlpack = lambda a: FakeTensor(np.from_dlpack(a))
    monkeypatch.setitem(sys.modules, "fakelib", module)
    return module


def test_foreign_cpu_tensor_in_tensor_out_matches_numpy():
    x = random_array(np.random.default_rng(1), (5, 7), np.float32, special=False)
    got = fusec.fuse(softmax)(FakeTensor(x))
    assert isinstance(got, FakeTensor)
    assert_matches_numpy(got.numpy(), softmax(x))


def test_foreign_inputs_are_viewed_not_copied_and_updates_write_through():
    def step(p, g, lr):
        p -= lr * g
        return p, p * 2

    rng = np.random.default_rng(2)
    p, g = random_array(rng, (9,), np.float32), random_array(rng, (9,), np.float32)
    want = p - np.float32(0.5) * g
    tensor = FakeTensor(p)
    updated, doubled = fusec.fuse(step)(tensor, FakeTensor(g), 0.5)
    assert updated is tensor  # the updated argument itself, as NumPy returns x after x -= ...
    assert_matches_numpy(p, want, exact=True)  # the tensor's own buffer changed
    assert isinstance(doubled, FakeTensor)
    assert_matches_numpy(doubled.numpy(), want * 2, exact=True)


def test_foreign_mixed_with_numpy_results_take_the_first_arrays_library():
    add = fusec.fuse(lambda a, b: a + b)
    rng = np.random.default_rng(3)
    a, b = random_array(rng, (4, 3), np.float32), random_array(rng, (3,), np.float32)
    first_foreign = add(FakeTensor(a), b)
    first_numpy = add(a, FakeTensor(b))
    assert isinstance(first_foreign, FakeTensor) and isinstance(first_numpy, np.ndarray)
    assert_matches_numpy(first_foreign.numpy(), a + b, exact=True)
    assert_matches_numpy(first_numpy, a + b, exact=True)


def test_foreign_keyword_arguments_out_and_tuple_results():
    def f(x, *, y):
        return x * y, (x - y).sum()

    rng = np.random.default_rng(4)
    x, y = random_array(rng, (6,), np.float64), random_array(rng, (6,), np.float64)
    prod, total = fusec.fuse(f)(FakeTensor(x), y=FakeTensor(y))
    assert_matches_numpy(prod.numpy(), x * y, exact=True)
    assert_matches_numpy(total.numpy(), np.asarray((x - y).sum()))
    dst = np.empty(6, np.float64)
    result = fusec.fuse(lambda a, b: a * b)(FakeTensor(x), FakeTensor(y), out=FakeTensor(dst))
    assert_matches_numpy(dst, x * y, exact=True)
    assert isinstance(result, FakeTensor) and np.shares_memory(result.numpy(), dst)


def test_foreign_trace_and_explain_take_tensors():
    x = FakeTensor(random_array(np.random.default_rng(5), (8, 16), np.float32))
    fused = fusec.fuse(softmax)
    assert "%x: f32[8,16]" in str(fused.trace(x))
    assert "1 kernel(s)" in str(fused.explain(x))


def test_foreign_export_refused_is_a_fusec_error_with_a_hint():
    x = FakeTensor(np.zeros(3, np.float32), refuse="Can't export tensors that require grad")
    with pytest.raises(FusecTypeError, match="DLPack") as info:
        fusec.fuse(softmax)(x)
    assert "detach" in info.value.hint


def test_foreign_unknown_device_is_a_fusec_error():
    x = FakeTensor(np.zeros(3, np.float32), device_type=7)
    with pytest.raises(FusecTypeError, match="device type 7"):
        fusec.fuse(softmax)(x)


class _FakeTorchTensor(FakeTensor):
    """A CPU tensor of a stand-in ``torch`` that has bfloat16 (its dtype a name) and ``view(dtype)``, as the real one
    does: the same memory reinterpreted."""

    def __init__(self, array: np.ndarray, dtype: str):
        super().__init__(array)
        self.dtype = dtype

    def view(self, dtype: str) -> _FakeTorchTensor:
        return _FakeTorchTensor(self._array.view(np.int16 if dtype == "int16" else BFLOAT16), dtype)

    def __dlpack__(self, **kwargs):
        if self.dtype == "bfloat16":  # as torch's: NumPy cannot import bfloat16 through DLPack
            raise BufferError("bfloat16 is not supported by NumPy's DLPack")
        return self._array.__dlpack__(**kwargs)


_FakeTorchTensor.__module__ = "torch"


@pytest.fixture()
def fake_torch(monkeypatch):
    module = types.ModuleType("torch")
    module.Tensor, module.bfloat16, module.int16 = _FakeTorchTensor, "bfloat16", "int16"
    module.from_dlpack = lambda a: _FakeTorchTensor(np.from_dlpack(a), "int16")
    monkeypatch.setitem(sys.modules, "torch", module)
    return module


def test_foreign_bfloat16_tensor_travels_as_its_bits_without_a_copy(fake_torch):
    rng = np.random.default_rng(7)
    x = random_array(rng, (5, 7), BFLOAT16)
    y = random_array(rng, (5, 7), BFLOAT16, special=False)

    def step(p, g):
        p -= 0.5 * g
        return p * 2, np.exp(g)

    tx, ty = _FakeTorchTensor(x.copy(), "bfloat16"), _FakeTorchTensor(y.copy(), "bfloat16")
    doubled, e = fusec.fuse(step)(tx, ty)
    host = x.copy()
    want_doubled, want_e = step(host, y)
    assert tx.numpy().dtype == BFLOAT16 and isinstance(doubled, _FakeTorchTensor)
    assert doubled.dtype == "bfloat16" and e.dtype == "bfloat16"  # bfloat16 tensors again, through int16 bits
    assert_matches_numpy(tx.numpy(), host, exact=True)  # the update wrote the tensor's own memory
    assert_matches_numpy(doubled.numpy(), want_doubled, exact=True)
    assert_matches_numpy(e.numpy(), want_e)


def test_foreign_tensors_inside_dicts_and_dataclasses_are_taken_and_results_come_back_as_tensors():
    import dataclasses

    @dataclasses.dataclass
    class State:
        m: object
        beta: float = 0.9

    rng = np.random.default_rng(8)
    m, g, w = (random_array(rng, (5,), np.float64) for _ in range(3))
    fn = lambda s, p: {"m": s.beta * s.m + p["g"], "w": p["w"] * 2}  # noqa: E731
    got = fusec.fuse(fn)(State(FakeTensor(m)), {"g": FakeTensor(g), "w": FakeTensor(w)})
    assert isinstance(got, dict) and all(isinstance(v, FakeTensor) for v in got.values())
    assert_matches_numpy(got["m"].numpy(), 0.9 * m + g, exact=True)
    assert_matches_numpy(got["w"].numpy(), w * 2, exact=True)
