"""Progress bars: drawn by tqdm on a terminal once work takes a while, never on a pipe or a file."""

from __future__ import annotations

import io

import pytest

from fusec.support import progress as progress_module
from fusec.support.progress import enabled, progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_pipe_returns_the_items_themselves() -> None:
    items = [3, 1, 2]
    assert progress(items, "work", stream=io.StringIO()) is items
    assert not enabled(io.StringIO())


def test_progress_turned_off_or_not_wanted_returns_the_items(monkeypatch: pytest.MonkeyPatch) -> None:
    items = (1, 2)
    assert progress(items, "work", stream=Terminal(), when=False) is items
    monkeypatch.setenv("FUSEC_PROGRESS", "0")
    assert progress(items, "work", stream=Terminal()) is items


def test_progress_on_a_terminal_draws_a_bar_once_work_takes_long_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")
    monkeypatch.delenv("FUSEC_PROGRESS", raising=False)
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    screen = Terminal()
    seen = list(progress(range(5), "compile softmax", unit="kernel", stream=screen))
    assert seen == [0, 1, 2, 3, 4]
    drawn = screen.getvalue()
    assert "compile softmax" in drawn and "/5 [" in drawn and "kernel" in drawn
    assert drawn.endswith("\r") and drawn.rstrip("\r").endswith(" "), "the bar is cleared when the work ends"


def test_progress_quick_work_on_a_terminal_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")
    monkeypatch.delenv("FUSEC_PROGRESS", raising=False)
    screen = Terminal()
    assert list(progress([1, 2, 3], "quick", stream=screen)) == [1, 2, 3]
    assert screen.getvalue() == ""
