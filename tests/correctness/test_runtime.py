"""Robustness of the runtime, without a GPU: concurrent calls of one Fused, the on-disk cubin cache (a
truncated or corrupt entry is detected and rebuilt), compile errors that show the source and NVRTC's log
naming the user's function, and the unfused path (``fusion=False``, ``FUSEC_DISABLE_FUSION=1``).
The GPU side of each is in ``tests/gpu/test_correctness_gpu.py``."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.codegen.nvrtc import CompileError
from fusec.ir.ops import Kind
from fusec.runtime import cubin_cache
from fusec.runtime import launch as runtime
from tests.helpers import assert_matches_numpy, random_array

SMALL_SOURCE = r"""
extern "C" __global__ void twice(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def router(x, b):
    p = softmax(x + b)
    return p.max(axis=-1), p.argmax(axis=-1), (p * p).sum(axis=0)


# ---- concurrent calls ---------------------------------------------------------------------------------------


def test_concurrent_calls_of_one_fused_give_right_results_and_trace_once_per_signature() -> None:
    traces = []

    def counted(x, b):
        traces.append(threading.get_ident())
        return router(x, b)

    fused = fusec.fuse(counted)
    rng = np.random.default_rng(7)
    # 3 signatures (dtype, a size-1 dim) x 4 sizes each, every one called from several threads at once
    shapes = [(5, 7), (9, 33), (2, 129), (17, 3)]
    inputs = []
    for dtype in (np.float32, np.float64):
        for shape in shapes:
            inputs.append((random_array(rng, shape, dtype, special=False), random_array(rng, shape[-1:], dtype)))
    inputs.append((random_array(rng, (1, 8), np.float32), random_array(rng, (8,), np.float32)))
    jobs = inputs * 6
    barrier = threading.Barrier(8)

    def call(args):
        try:
            barrier.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        return fused(*args)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, jobs))
    for args, got in zip(jobs, results):
        with np.errstate(all="ignore"):
            want = router(*args)
        for g, w in zip(got, want):
            assert_matches_numpy(g, w)
    assert len(traces) == 3, f"traced {len(traces)} times for 3 signatures"


def test_concurrent_first_calls_of_many_fused_functions_do_not_leak_tracing_state() -> None:
    """Tracing patches CuPy's functions for its duration; concurrent traces of different functions must
    leave them as they were."""
    import cupy

    originals = {name: getattr(cupy, name) for name in ("expand_dims", "where", "squeeze")}
    functions = [fusec.fuse(lambda x, k=k: np.where(x > k, x, 0.0) + np.expand_dims(x.sum(axis=0), 0))
                 for k in range(16)]
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda f: f(x), functions))
    for k, got in enumerate(results):
        assert_matches_numpy(got, np.where(x > k, x, 0.0) + x.sum(axis=0)[None])
    for name, fn in originals.items():
        assert getattr(cupy, name) is fn, f"cupy.{name} left patched"


# ---- the cubin cache ------------------------------------------------------------------------------------------


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(tmp_path))
    return tmp_path


def test_cubin_cache_entry_carries_length_and_digest(cache_dir: Path) -> None:
    cubin, compiled = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    assert compiled == 1 and cubin[:4] == b"\x7fELF"
    path = cubin_cache.cubin_path(SMALL_SOURCE, "sm_90")
    assert path.parent == cache_dir
    data = path.read_bytes()
    assert data.startswith(cubin_cache.CUBIN_MAGIC) and data.endswith(cubin)
    assert cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90") == (cubin, 0)  # from the cache
    assert not list(cache_dir.glob("*.tmp")), "a temporary file was left behind"


@pytest.mark.parametrize("damage", ["truncated", "truncated_header", "empty", "flipped_byte", "appended",
                                    "bare_truncated_cubin", "garbage"])
def test_cubin_cache_corrupt_or_truncated_entry_is_detected_and_rebuilt(cache_dir: Path, damage: str) -> None:
    cubin, _ = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    path = cubin_cache.cubin_path(SMALL_SOURCE, "sm_90")
    data = path.read_bytes()
    header = len(data) - len(cubin)
    damaged = {
        "truncated": data[: header + len(cubin) // 2],
        "truncated_header": data[: header - 5],
        "empty": b"",
        "flipped_byte": data[: header + 100] + bytes([data[header + 100] ^ 0x40]) + data[header + 101:],
        "appended": data + b"\0" * 16,
        "bare_truncated_cubin": cubin[:-1],
        "garbage": b"not a cubin at all" * 10,
    }[damage]
    path.write_bytes(damaged)
    assert not cubin_cache.is_cached(SMALL_SOURCE, "sm_90")
    again, compiled = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    assert compiled == 1, "the damaged entry was used"
    assert again == cubin
    assert path.read_bytes() == data, "the entry was not rewritten"
    assert cubin_cache.is_cached(SMALL_SOURCE, "sm_90")


def _assert_recompiled_not_loaded(path: Path, cubin: bytes) -> None:
    """The entry at ``path`` is not loaded: the cache compiles the source again and overwrites the entry."""
    assert not cubin_cache.is_cached(SMALL_SOURCE, "sm_90")
    assert cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90") == (cubin, 1)
    assert cubin_cache.is_cached(SMALL_SOURCE, "sm_90") and path.read_bytes() != cubin


def test_cubin_cache_bare_elf_under_the_right_key_is_recompiled_not_loaded(cache_dir: Path) -> None:
    """A bare cubin (any ELF file anyone could write) was loaded when its tables were complete."""
    cubin, _ = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    path = cubin_cache.cubin_path(SMALL_SOURCE, "sm_90")
    from fusec.codegen.nvrtc import compile_cubin

    path.write_bytes(compile_cubin(SMALL_SOURCE.replace("2.0f", "7.0f"), "sm_90").cubin)  # sound, but not ours
    _assert_recompiled_not_loaded(path, cubin)


@pytest.mark.parametrize("forger", ["other_secret", "old_sha256_header", "entry_of_another_source"])
def test_cubin_cache_foreign_entry_under_the_right_key_is_recompiled_not_loaded(cache_dir: Path, forger: str) -> None:
    """An entry in the cache's format but not signed with this cache's secret (another user's fusec, the
    unkeyed SHA-256 header of before, a signed entry copied to another source's name) is compiled again."""
    cubin, _ = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    path = cubin_cache.cubin_path(SMALL_SOURCE, "sm_90")
    from fusec.codegen.nvrtc import compile_cubin

    other_source = SMALL_SOURCE.replace("2.0f", "7.0f")
    evil = compile_cubin(other_source, "sm_90").cubin  # valid GPU code, not what the key names
    if forger == "other_secret":
        data = cubin_cache.pack_cubin(evil, b"\x01" * cubin_cache.KEY_BYTES, path.name)
    elif forger == "old_sha256_header":
        data = b"fusec-cubin 1\n" + cubin_cache.CUBIN_HEADER.pack(len(evil), hashlib.sha256(evil).digest()) + evil
    else:
        cubin_cache.cached_cubin(other_source, "sm_90")
        data = cubin_cache.cubin_path(other_source, "sm_90").read_bytes()
    path.write_bytes(data)
    _assert_recompiled_not_loaded(path, cubin)


def test_cubin_cache_directory_is_0700_and_its_secret_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "new" / "cubins"
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(cache))
    cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    key = cache / cubin_cache.KEY_NAME
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == cubin_cache.KEY_BYTES
    assert stat.S_IMODE(cubin_cache.cubin_path(SMALL_SOURCE, "sm_90").stat().st_mode) == 0o600


def test_cubin_cache_existing_directory_keeps_its_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An existing directory of the user's was chmod-ed 0700 silently: a group-readable cache stopped being
    shared. Its mode stays; it is used, as no one else can write to it."""
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o2750)
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(cache))
    cubin, _ = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    assert stat.S_IMODE(cache.stat().st_mode) == 0o2750
    assert cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90") == (cubin, 0)  # from the cache


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o2770, 0o720], ids=oct)
def test_cubin_cache_directory_writable_by_others_is_refused_not_chmodded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, mode: int) -> None:
    """``FUSEC_CUBIN_CACHE=/tmp`` run as root chmod-ed /tmp 0700, locking every other user out. A directory
    others can write to is left as it is, not used (every kernel compiles), and named in a warning."""
    cache = tmp_path / "tmp"
    cache.mkdir()
    cache.chmod(mode)
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(cache))
    with caplog.at_level("WARNING", logger="fusec"):
        cubin, compiled = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
        assert compiled == 1 and cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90") == (cubin, 1)
    assert stat.S_IMODE(cache.stat().st_mode) == mode
    assert list(cache.iterdir()) == [], "fusec wrote into a directory others can write to"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings  # once per directory, not per kernel
    assert f"does not keep the cubin cache ($FUSEC_CUBIN_CACHE) in {cache}: other users can write to it " \
           f"(mode {mode:04o})" in warnings[0], warnings


def test_cubin_cache_secret_readable_by_others_disables_the_cache(cache_dir: Path) -> None:
    cubin, _ = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    (cache_dir / cubin_cache.KEY_NAME).chmod(0o644)  # anyone could have read it, and signed entries with it
    assert not cubin_cache.is_cached(SMALL_SOURCE, "sm_90")
    assert cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90") == (cubin, 1)


def test_cubin_cache_symlinked_directory_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(tmp_path / "link"))
    cubin, compiled = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    assert compiled == 1 and cubin[:4] == b"\x7fELF"
    assert list(real.iterdir()) == []  # nothing written through the link


def test_cubin_cache_planted_symlinks_are_not_followed(cache_dir: Path,
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    """A symbolic link planted at an entry's name is neither read through nor written through: the entry
    replaces the link, the file it pointed to is untouched."""
    cubin, _ = cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90")
    path = cubin_cache.cubin_path(SMALL_SOURCE, "sm_90")
    victim = tmp_path_factory.mktemp("elsewhere") / "victim"
    victim.write_bytes(path.read_bytes())  # even a sound entry, read through a link, is not used
    path.unlink()
    path.symlink_to(victim)
    assert not cubin_cache.is_cached(SMALL_SOURCE, "sm_90")
    assert cubin_cache.cached_cubin(SMALL_SOURCE, "sm_90") == (cubin, 1)
    assert not path.is_symlink() and victim.read_bytes() == path.read_bytes()
    victim.write_bytes(b"precious")
    path.unlink()
    path.symlink_to(victim)
    cubin_cache.compile_and_store(SMALL_SOURCE, "sm_90")
    assert victim.read_bytes() == b"precious" and not path.is_symlink()


def test_cubin_cache_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A write that fails (here the file size limit, as a full disk would) removes its temporary file."""
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from fusec.runtime.cubin_cache import owned_dir, write_private\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "d = owned_dir(Path(sys.argv[1]))\n"
        "try:\n"
        "    write_private(d, 'entry.cubin', b'x' * 100000)\n"
        "except OSError as exc:\n"
        "    print('failed', exc.errno)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "c")], capture_output=True, text=True,
                            env=env, timeout=60)
    assert result.stdout.startswith("failed"), result.stdout + result.stderr
    assert list((tmp_path / "c").iterdir()) == []


def test_compile_failure_source_dump_stays_inside_fusecs_directory(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """The dump's file name is built from the function's name: ``name="../x"`` wrote outside the folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    break_kernels(monkeypatch)
    fused = fusec.fuse(softmax, name="../../escaped")
    with pytest.raises(CompileError) as info:
        fused.ptxas(fusec.ArraySpec((64, 128), "float32"))
    saved = Path(re.search(r"its full source \(\d+ lines\) is in (\S+\.cu)", str(info.value)).group(1))
    folder = tmp_path / "cache" / "fusec" / "failed-kernels"
    assert saved.parent == folder and saved.read_text() == info.value.source
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(p.name for p in tmp_path.rglob("*.cu")) == [saved.name]


def test_compile_failure_source_dumps_of_a_long_named_function_do_not_overwrite_each_other(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dump names were cut at 80 characters, dropping the kernel's name, the source's digest and ``.cu``: every
    failed kernel of a function with a long name went to one file, each dump overwriting the one before."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    break_kernels(monkeypatch)
    name = "a_function_with_a_rather_long_and_descriptive_name_" * 3
    dumps = {}
    for fn in (softmax, lambda x: np.exp(x) * 2):
        with pytest.raises(CompileError) as info:
            fusec.fuse(fn, name=name).ptxas(fusec.ArraySpec((64, 128), "float32"))
        path = Path(re.search(r"its full source \(\d+ lines\) is in (\S+)", str(info.value)).group(1))
        assert path.name.endswith(f".{info.value.kernel}.{hashlib.sha256(info.value.source.encode()).hexdigest()[:12]}"
                                  ".cu"), path.name
        assert len(path.name) <= 120
        dumps[path] = info.value.source
    assert len(dumps) == 2, "the second dump overwrote the first"
    for path, source in dumps.items():
        assert path.read_text() == source


def test_precompile_skips_sound_entries_and_rebuilds_damaged_ones(cache_dir: Path) -> None:
    other = SMALL_SOURCE.replace("2.0f", "3.0f")
    assert runtime.precompile([SMALL_SOURCE, other], "sm_90", workers=1) == 2
    assert runtime.precompile([SMALL_SOURCE, other], "sm_90", workers=1) == 0
    path = cubin_cache.cubin_path(other, "sm_90")
    path.write_bytes(path.read_bytes()[:-10])
    assert runtime.precompile([SMALL_SOURCE, other], "sm_90", workers=1) == 1
    assert cubin_cache.is_cached(other, "sm_90")


def test_cubin_cache_concurrent_compiles_leave_one_sound_entry(cache_dir: Path) -> None:
    sources = [SMALL_SOURCE.replace("2.0f", f"{k}.0f") for k in range(3)]
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda s: cubin_cache.cached_cubin(s, "sm_90")[0], sources * 2))
    for source, cubin in zip(sources * 2, results):
        assert cubin_cache.read_cubin(cubin_cache.cubin_path(source, "sm_90")) == cubin
    assert not list(cache_dir.glob("*.tmp"))


# ---- compile errors -------------------------------------------------------------------------------------------


def break_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every generated kernel source fail to compile: a line that uses an undefined name."""
    from fusec.kinds import pipeline

    real = pipeline.render_kernel

    def broken(spec):
        return real(spec) + "__device__ float fusec_broken() { return deliberately_undefined; }\n"

    monkeypatch.setattr(pipeline, "render_kernel", broken)


def check_compile_error(err: BaseException, name: str) -> None:
    """The error names the function and where it is defined, the kernel, the NVRTC log, the numbered
    source line, and a file with the whole source."""
    assert isinstance(err, CompileError) and isinstance(err, fusec.FusecError)
    text = str(err)
    assert f"of @{name} (defined at {__file__}:" in text or f"of @{name} (defined at " in text, text
    assert re.search(r"kernel k0_\w+ of @", text), text
    assert 'identifier "deliberately_undefined" is undefined' in text  # NVRTC's log
    line = len(err.source.splitlines())
    assert re.search(rf"> {line} \| __device__ float fusec_broken\(\)", text), text  # numbered, marked
    saved = re.search(r"its full source \(\d+ lines\) is in (\S+\.cu)", text)
    assert saved and Path(saved.group(1)).read_text() == err.source
    assert err.function == name and err.kernel.startswith("k0_")
    assert "deliberately_undefined" in err.log and err.arch == "sm_90"
    assert err.hint


def test_compile_error_shows_the_source_and_nvrtc_log_naming_the_function(monkeypatch: pytest.MonkeyPatch) -> None:
    break_kernels(monkeypatch)
    fused = fusec.fuse(softmax)
    with pytest.raises(CompileError) as info:
        fused.ptxas(fusec.ArraySpec((64, 128), "float32"))
    check_compile_error(info.value, "softmax")
    assert info.value.loc and __file__ in info.value.loc  # the caller's line


# ---- the unfused path -------------------------------------------------------------------------------------------


WORKLOADS = {
    "softmax": (softmax, [(64, 33)]),
    "router": (router, [(16, 40), (40,)]),
    "layernorm": (lambda x: (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5),
                  [(8, 50)]),
    "views": (lambda x, y: (x.T + y).sum(axis=0) * 2 + np.expand_dims(y.max(axis=1), 0).sum(), [(5, 7), (7, 5)]),
    "sum_abs": (lambda x: np.abs(x).sum(), [(1000,)]),
}


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_fusion_false_runs_one_kernel_per_op_with_the_same_results(workload: str) -> None:
    fn, shapes = WORKLOADS[workload]
    rng = np.random.default_rng(3)
    args = [(rng.random(s) + 0.5).astype(np.float32) for s in shapes]  # positive: sums do not cancel
    fused, unfused = fusec.fuse(fn), fusec.fuse(fn, fusion=False)
    plan = unfused.plan(*args)
    ops = [n for n in plan.graph.nodes if n.kind in (Kind.ELEMENTWISE, Kind.REDUCTION)]
    assert len(plan.kernels) == len(ops) > len(fused.plan(*args).kernels)
    for kernel in plan.kernels:
        assert sum(n.kind is not Kind.LAYOUT for n in kernel.nodes) == 1, [n.op for n in kernel.nodes]
    want, got = fused(*args), unfused(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert_matches_numpy(g, w)
    # its kernels compile
    from fusec.codegen.nvrtc import compile_cubin

    compile_cubin(unfused.cuda_source(*args, full=True))


def test_fusec_disable_fusion_environment_variable_runs_the_unfused_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.linspace(-3, 3, 40, dtype=np.float32).reshape(4, 10)
    fused = fusec.fuse(softmax)
    assert len(fused.plan(x).kernels) == 1
    monkeypatch.setenv("FUSEC_DISABLE_FUSION", "1")
    assert len(fused.plan(x).kernels) == 5
    assert_matches_numpy(fused(x), softmax(x))
    monkeypatch.setenv("FUSEC_DISABLE_FUSION", "0")
    assert len(fused.plan(x).kernels) == 1
