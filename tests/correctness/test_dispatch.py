"""The dispatch fast path's parts, without a GPU (:mod:`fusec.runtime.dispatch`): a packed launch lays out every
parameter where the driver reads it and writes the array pointers of each call; a recycler hands an
output out again only once nothing but itself refers to the array, its memory pointer or its memory,
and only on the stream it was last used on. The GPU side is in ``tests/gpu/test_dispatch_gpu.py``."""

from __future__ import annotations

import ctypes
import gc
from types import SimpleNamespace

import numpy as np
import pytest

from fusec.runtime import dispatch


class _Function:
    ptr = 0x1234


def _read(address: int, dtype: np.dtype) -> np.generic:
    size = np.dtype(dtype).itemsize
    return np.frombuffer(ctypes.string_at(address, size), dtype)[0]


def test_packed_launch_lays_out_pointers_then_scalars_and_writes_each_calls_pointers(monkeypatch):
    scalars = (np.int32(-7), np.int64(1 << 40), np.float64(0.5), np.uint64(0), np.float32(3.25), np.bool_(True))
    launch = dispatch.PackedLaunch(_Function(), (5, 1, 1), (256, 1, 1), 3, scalars)
    calls = []
    monkeypatch.setattr(launch, "driver", lambda *args: calls.append(args))

    launch.launch(0xBEEF, [0x7F00_0000_1000, 0x7F00_0000_2000, 0x10])
    (args,) = calls
    function, gx, gy, gz, bx, by, bz, shared, stream, params, extra = args
    assert (function, gx, gy, gz, bx, by, bz, shared, stream, extra) == (0x1234, 5, 1, 1, 256, 1, 1, 0, 0xBEEF, 0)
    addresses = [_read(params + 8 * i, np.uint64) for i in range(3 + len(scalars))]
    assert [_read(int(a), np.uint64) for a in addresses[:3]] == [0x7F00_0000_1000, 0x7F00_0000_2000, 0x10]
    for address, s in zip(addresses[3:], scalars):
        assert _read(int(address), s.dtype) == s

    launch.launch(0, [1, 2, 3])  # the next call's pointers replace the last ones; the scalars stay
    assert [_read(int(a), np.uint64) for a in addresses[:3]] == [1, 2, 3]
    assert _read(int(addresses[3]), np.int32) == -7


def test_packed_launch_gives_a_16_byte_scalar_two_slots():
    launch = dispatch.PackedLaunch(_Function(), (1, 1, 1), (32, 1, 1), 1, (np.complex128(1 + 2j), np.int32(9)))
    addresses = [_read(int(launch.addresses.ctypes.data) + 8 * i, np.uint64) for i in range(3)]
    assert [int(a) - int(addresses[0]) for a in addresses] == [0, 8, 24]
    assert _read(int(addresses[1]), np.complex128) == 1 + 2j
    assert _read(int(addresses[2]), np.int32) == 9


class _Memory:
    pass


class _Pointer:
    def __init__(self):
        self.mem = _Memory()


class _Array:
    """Stands in for cupy.ndarray: an array owns a memory pointer, which owns the memory."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.data = shape, dtype, _Pointer()


@pytest.fixture
def recycler(monkeypatch):
    monkeypatch.setattr(dispatch, "cupy_module", lambda: SimpleNamespace(ndarray=_Array))
    return dispatch.OutputRecycler((4,), np.dtype(np.float32))


def test_a_dropped_result_is_handed_out_again(recycler):
    first = recycler.take(stream=1)
    first_id = id(first)
    del first
    again = recycler.take(stream=1)
    assert id(again) == first_id


@pytest.mark.parametrize("hold", ["array", "view", "pointer", "memory"])
def test_a_result_still_referred_to_is_not_handed_out(recycler, hold):
    first = recycler.take(stream=1)
    kept = {"array": first, "view": SimpleNamespace(base=first), "pointer": first.data,
            "memory": first.data.mem}[hold]
    del first
    gc.collect()
    second = recycler.take(stream=1)
    assert second is not getattr(kept, "base", kept)
    assert second.data is not getattr(kept, "data", None) and second.data.mem is not kept


def test_a_loop_holding_the_previous_result_alternates_two_arrays(recycler):
    seen = []
    out = None
    for _ in range(6):
        out = recycler.take(stream=1)  # the previous `out` is alive while take runs
        seen.append(id(out))
    assert len(set(seen)) == dispatch.RECYCLE_KEPT
    assert seen[0::2] == [seen[0]] * 3 and seen[1::2] == [seen[1]] * 3


def test_results_are_not_reused_on_another_stream(recycler, monkeypatch):
    made = []

    def new(*args):
        made.append(1)
        return _Array(*args)

    monkeypatch.setattr(dispatch, "cupy_module", lambda: SimpleNamespace(ndarray=new))
    recycler.take(stream=1)
    recycler.take(stream=1)  # the first one was dropped: reused
    assert len(made) == 1
    other = recycler.take(stream=2)
    assert len(made) == 2
    assert recycler.stream == 2 and recycler.spares == [other]


def test_at_most_recycle_kept_arrays_are_kept(recycler):
    held = [recycler.take(stream=1) for _ in range(5)]
    assert len({id(a) for a in held}) == 5
    assert recycler.spares == held[-dispatch.RECYCLE_KEPT:]


def test_only_small_outputs_are_recycled():
    limit = dispatch.RECYCLE_MAX_BYTES
    assert dispatch.recycler_for((limit // 4,), np.dtype(np.float32)) is not None
    assert dispatch.recycler_for((limit // 4 + 1,), np.dtype(np.float32)) is None
    assert dispatch.recycler_for((), np.dtype(np.float64)) is not None
    assert dispatch.recycler_for((0, 7), np.dtype(np.float64)) is not None


def test_the_free_reference_counts_were_measured_on_this_interpreter():
    # an array in a recycler's list, seen through the loop variable of take: the same shape of code
    spares = [_Array((1,), np.float32)]
    for a in spares:
        assert dispatch._references(a) == dispatch._FREE
    extra = spares[0]
    for a in spares:
        assert dispatch._references(a) != dispatch._FREE
    del extra


class _Stream:
    ptr = 0x5EED


def _fake_cupy(made: list | None = None, devices: list | None = None) -> SimpleNamespace:
    def new(shape, dtype):
        a = _Array(shape, dtype)
        a.data.ptr = 0x1000 * (len(made) + 1) if made is not None else 0x1000
        if made is not None:
            made.append(a)
        return a

    runtime = SimpleNamespace(setDevice=lambda d: devices.append(d) if devices is not None else None)
    return SimpleNamespace(ndarray=new, cuda=SimpleNamespace(get_current_stream=lambda: _Stream, runtime=runtime))


def _input(ptr: int) -> _Array:
    a = _Array((8,), np.float32)
    a.data.ptr = ptr
    return a


def _pointers_written(launch: dispatch.PackedLaunch) -> list[int]:
    return [int(v) for v in launch.block_bytes[:launch.n_pointers]]


def test_a_runner_launches_each_kernel_with_its_inputs_outputs_and_workspace(monkeypatch):
    """Two kernels: the first writes a small (recycled) and a large output, the second reads the first's
    large output and the second input, uses a workspace, and writes the result; an empty third kernel
    only allocates. The generated runner passes each kernel the right pointers, in order."""
    made: list = []
    monkeypatch.setattr(dispatch, "cupy_module", lambda: _fake_cupy(made))
    calls = []
    launches = [dispatch.PackedLaunch(_Function(), (g, 1, 1), (128, 1, 1), n, (np.int32(g),))
                for g, n in ((3, 3), (7, 4))]
    for launch in launches:
        launch.driver = lambda *args, _l=launch: calls.append((args, _pointers_written(_l)))
    workspace = _input(0xAAAA)
    big = (dispatch.RECYCLE_MAX_BYTES,)
    steps = (
        dispatch.PlanStep(launches[0], (0,), ((2, (3,), np.dtype(np.float32), dispatch.recycler_for((3,), np.float32)),
                                               (3, big, np.dtype(np.float32), None)), None),
        dispatch.PlanStep(launches[1], (3, 1), ((4, (), np.dtype(np.float32), dispatch.recycler_for((), np.float32)),),
                          lambda: workspace),
        dispatch.PlanStep(None, (), ((5, (0,), np.dtype(np.float32), None),), None),
    )
    runner = dispatch.PlanRunner(steps, 2, (4, 2, 5), device=0)
    assert "def run(arrays, retry=True):" in runner.source and runner.source.count("launch") == 2

    x, y = _input(0x100), _input(0x200)
    result = runner((x, y))
    small, large, second, empty = made
    assert result == [second, small, empty]
    (args0, written0), (args1, written1) = calls
    assert args0[:9] == (0x1234, 3, 1, 1, 128, 1, 1, 0, _Stream.ptr) and args0[10] == 0
    assert args0[9] == launches[0].parameters
    assert written0 == [0x100, small.data.ptr, large.data.ptr]
    assert args1[1] == 7 and written1 == [large.data.ptr, 0x200, second.data.ptr, 0xAAAA]

    del result, small, second  # dropped by the caller: the next call reuses the small outputs
    made.clear()
    calls.clear()
    runner((x, y))
    assert len(made) == 2  # only the large output and the empty one are new
    assert calls[1][1][0] == made[0].data.ptr


def test_a_thread_without_a_cuda_context_makes_the_device_current_and_runs_again(monkeypatch):
    devices: list = []
    monkeypatch.setattr(dispatch, "cupy_module", lambda: _fake_cupy(devices=devices))
    launch = dispatch.PackedLaunch(_Function(), (1, 1, 1), (32, 1, 1), 2, ())
    tries = []

    def driver(*args):
        tries.append(args)
        if len(tries) == 1:
            raise RuntimeError("CUDA_ERROR_INVALID_CONTEXT: invalid device context")

    launch.driver = driver
    runner = dispatch.PlanRunner((dispatch.PlanStep(launch, (0,), ((1, (2,), np.dtype(np.float32), None),), None),),
                                 1, (1,), device=3)
    runner((_input(0x10),))
    assert devices == [3] and len(tries) == 2

    launch.driver = lambda *args: (_ for _ in ()).throw(RuntimeError("CUDA_ERROR_LAUNCH_FAILED"))
    runner = dispatch.PlanRunner((dispatch.PlanStep(launch, (0,), ((1, (2,), np.dtype(np.float32), None),), None),),
                                 1, (1,), device=3)
    with pytest.raises(RuntimeError, match="LAUNCH_FAILED"):
        runner((_input(0x10),))
    assert devices == [3]


@pytest.mark.parametrize("structure", ["single", "tuple", "list"])
def test_a_runner_packs_its_results_as_the_function_returns_them(monkeypatch, structure):
    monkeypatch.setattr(dispatch, "cupy_module", lambda: _fake_cupy([]))
    launch = dispatch.PackedLaunch(_Function(), (1, 1, 1), (32, 1, 1), 3, ())
    launch.driver = lambda *args: None
    outputs = tuple((slot, (2,), np.dtype(np.float32), None) for slot in (1, 2))
    runner = dispatch.PlanRunner((dispatch.PlanStep(launch, (0,), outputs, None),), 1, (2, 1), 0, structure)
    result = runner.run((_input(0x10),))
    assert runner.run.runner is runner
    if structure == "single":
        assert isinstance(result, _Array) and result.data.ptr == 0x2000  # the first result: slot 2
    else:
        assert type(result) is {"tuple": tuple, "list": list}[structure]
        assert [r.data.ptr for r in result] == [0x2000, 0x1000]
