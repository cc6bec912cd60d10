"""The check that keeps kernels away from known compiler miscompiles (``fusec.codegen.compiler_bugs``).

How the affected versions were found (repeat it when a new CUDA comes out): render the kernels of
``tests/gpu/test_regressions_gpu.py::NARROW_VALUE_CASES`` (``fused.cuda_source(..., full=True)``), get their PTX from
NVRTC (``nvrtcGetPTX``, ``.version`` lowered to what the older ptxas reads), assemble it with the ptxas of each
``nvidia-cuda-nvcc`` wheel (``ptxas -arch=sm_90``) and count in ``cuobjdump -sass`` (the ``nvidia-cuda-cuobjdump``
wheel) the sign extensions after the int16 negation (``PRMT ... 0x9910``: 10 where wrong, 25 where right) and the
float16 sign clearings (``LOP3 ... 0x7fff``: 3 where wrong, 5 where right). 12.8, 12.9 and 13.0 get both wrong,
13.1 and 13.2 the negation, 13.3, 13.4 and 13.5 neither. The GPU tests of those cases check the results.
"""

from __future__ import annotations

import numpy as np
import pytest

from fusec.codegen.compiler_bugs import MiscompileError, check_narrow_values


@pytest.mark.parametrize("version", [(12, 8), (12, 9), (13, 0), (13, 2)])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "float16", "bfloat16"])
def test_compiler_bugs_refuse_narrow_values_before_13_3(dtype: str, version: tuple[int, int]) -> None:
    with pytest.raises(MiscompileError, match=rf"holds {dtype} values.*NVRTC {version[0]}\.{version[1]}") as info:
        check_narrow_values("k0_pointwise_neg_cast", {np.dtype(dtype), np.dtype("float32")}, "NVRTC", version)
    assert "fusec[cuda13]" in str(info.value)


@pytest.mark.parametrize("version", [(12, 8), (13, 0), (13, 3), (13, 5), (14, 0)])
def test_compiler_bugs_leave_wide_values_alone(version: tuple[int, int]) -> None:
    wide = {np.dtype(d) for d in ("bool", "int32", "uint32", "int64", "uint64", "float32", "float64")}
    check_narrow_values("k0", wide, "NVRTC", version)


@pytest.mark.parametrize("version", [(13, 3), (13, 5), (14, 1)])
def test_compiler_bugs_accept_narrow_values_from_13_3(version: tuple[int, int]) -> None:
    check_narrow_values("k0", {np.dtype("int16"), np.dtype("float16")}, "NVRTC", version)


def test_compiler_bugs_are_checked_before_a_launcher_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher asks before it compiles: a float16 kernel on NVRTC 13.0 raises, and nothing is compiled."""
    import fusec
    import fusec.runtime.launch
    from fusec.runtime.launch import KernelLauncher

    class Device:
        compute_capability = "90"
        attributes = {"MultiProcessorCount": 132}

        def __init__(self, *args):
            pass

    class Runtime:
        @staticmethod
        def getDevice() -> int:
            return 0

    class FakeCupy:  # what recipe() asks of CuPy before it compiles
        cuda = type("cuda", (), {"runtime": Runtime, "Device": Device})

    monkeypatch.setattr(fusec.runtime.launch, "cupy_module", lambda: FakeCupy)
    from fusec.schedule.device import H200

    monkeypatch.setattr(fusec.runtime.launch, "device_properties", lambda device: H200)
    launcher = KernelLauncher(compiler="nvrtc")
    launcher._compiler_version = ("NVRTC", (13, 0))
    compiled = []
    monkeypatch.setattr(launcher, "function", lambda source, name: compiled.append(name))
    x = np.ones(1024, np.float16)
    plan = fusec.fuse(lambda x: np.abs(x) + 1).plan(x)
    region = plan.kernels[0].region
    with pytest.raises(MiscompileError, match="float16"):
        launcher.recipe(region, [x])
    assert compiled == []
