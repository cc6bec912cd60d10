"""``fusec cache`` and ``fusec cache clear`` on a temporary cubin cache, and the trust rules they keep."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fusec.__main__ import main
from fusec.cli.cache import clear_cache, inspect_cache
from fusec.runtime import cubin_cache

SOURCES = [rf"""
extern "C" __global__ void k{i}(float* y, int n) {{
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) y[j] = {i}.0f * y[j];
}}
""" for i in range(2)]


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cubins"
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(path))
    return path


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cache_shows_a_missing_cache_without_creating_it(cache_dir: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli(capsys, "cache")
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [f"cubin cache: {cache_dir}", "  not created yet (the first GPU compile creates it)"]
    assert not cache_dir.exists()


def test_cache_counts_entries_and_bytes_then_clear_empties_it(cache_dir: Path, capsys: pytest.CaptureFixture) -> None:
    for source in SOURCES:
        cubin_cache.cached_cubin(source, "sm_90")
    entries = sorted(cache_dir.glob("*.cubin"))
    nbytes = sum(p.stat().st_size for p in entries)
    assert len(entries) == 2
    code, out, _ = run_cli(capsys, "cache")
    assert code == 0 and f"  2 compiled kernel(s), {nbytes / 1024:.1f} KiB ({nbytes} B)" in out.splitlines()
    stray = cache_dir / ("." + entries[0].name + ".123-456-abcd.tmp")  # a write that was interrupted
    stray.write_bytes(b"partial")
    mine = cache_dir / "notes.txt"  # not fusec's: left alone
    mine.write_text("keep")
    code, out, _ = run_cli(capsys, "cache", "clear")
    assert code == 0
    freed = nbytes + len(b"partial")
    assert out.strip() == (f"cleared {cache_dir}: 2 compiled kernel(s), {freed / 1024:.1f} KiB ({freed} B) freed "
                           f"(its {cubin_cache.KEY_NAME} kept)")
    assert sorted(p.name for p in cache_dir.iterdir()) == [cubin_cache.KEY_NAME, "notes.txt"]
    assert inspect_cache().entries == 0
    assert cubin_cache.cached_cubin(SOURCES[0], "sm_90")[1] == 1, "compiled again after clear"


def test_cache_clear_follows_no_link_and_refuses_a_linked_directory(
        tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    cubin_cache.cached_cubin(SOURCES[0], "sm_90")
    outside = tmp_path / "outside.cubin"
    outside.write_bytes(b"not the cache's")
    link = cache_dir / ("0" * 64 + ".cubin")
    os.symlink(outside, link)
    removed, _ = clear_cache()
    assert removed == 1
    assert outside.read_bytes() == b"not the cache's" and link.is_symlink()
    linked = tmp_path / "linked"
    os.symlink(cache_dir, linked)
    assert "not used: it is a symbolic link" in str(inspect_cache(linked))
    with pytest.raises(OSError, match="not fusec's to clear: it is a symbolic link"):
        clear_cache(linked)
    monkeypatch.setenv("FUSEC_CUBIN_CACHE", str(linked))
    code, _, err = run_cli(capsys, "cache", "clear")
    assert code == 1 and err.startswith("fusec: error: the cubin cache") and "symbolic link" in err


def test_cache_reports_a_directory_writable_by_others_and_leaves_it_alone(
        cache_dir: Path, capsys: pytest.CaptureFixture) -> None:
    cache_dir.mkdir()
    cache_dir.chmod(0o1777)
    code, out, _ = run_cli(capsys, "cache")
    assert code == 0 and "not used: other users can write to it (mode 1777)" in out
    with pytest.raises(OSError, match="not fusec's to clear: other users can write to it"):
        clear_cache()
    assert (cache_dir.stat().st_mode & 0o7777) == 0o1777
