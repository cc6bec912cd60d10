"""Progress bars for work that takes a while (compiling a plan's kernels on a first call, ``explain
--ptxas``/``--run`` over many kernels, the demo's runs, benchmarks), drawn by ``tqdm`` on a terminal only.

:func:`progress` wraps an iterable. The bar goes to stderr, and only when stderr is a terminal, ``tqdm`` is
installed and ``FUSEC_PROGRESS`` is not ``0``; it appears only once the work has taken ``DELAY`` seconds, so
quick work (a cached call) never draws one. On a pipe, in a file or in CI nothing is printed at all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
DELAY = 1.0  # seconds of work before a bar appears


def enabled(stream: Any = None) -> bool:
    """Whether a bar would be drawn on ``stream`` (default stderr): a terminal, tqdm there, not turned off."""
    if os.environ.get("FUSEC_PROGRESS", "") == "0":
        return False
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        if not (isatty and isatty()):
            return False
    except ValueError:  # a closed stream
        return False
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def progress(items: Iterable[T], desc: str, *, unit: str = "item", total: int | None = None,
             when: bool = True, stream: Any = None) -> Iterator[T] | Iterable[T]:
    """``items``, with a ``tqdm`` bar labelled ``desc`` on a terminal once the loop has run :data:`DELAY`
    seconds; ``items`` itself when ``when`` is false or no bar can be drawn (see :func:`enabled`)."""
    if not when or not enabled(stream):
        return items
    from tqdm import tqdm

    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    return tqdm(items, desc=desc, unit=unit, total=total, delay=DELAY, leave=False,
                file=sys.stderr if stream is None else stream, dynamic_ncols=True)


__all__ = ["DELAY", "enabled", "progress"]
