"""Switching build-only mode on, in this process: the host stand-in becomes ``cupy`` (and ``cupyx``,
``cupy_backends``), and :class:`tests.gpu_build.launcher.BuildOnlyLauncher` becomes the launcher that
``fusec.runtime.launch`` makes and that ``from fusec.runtime.launch import KernelLauncher`` gives (the tests construct
their
own); and the stand-in's and the launcher's files count as library files in fusec's error locations, as CuPy's
do. Must run before anything imports CuPy; there is no switching it off."""

from __future__ import annotations

from pathlib import Path

import fusec.runtime.launch
import fusec.support.errors
from tests.gpu_build.launcher import BuildOnlyLauncher
from tests.gpu_build.standin.modules import install


def switch_on() -> None:
    install()
    fusec.runtime.launch.KernelLauncher = BuildOnlyLauncher  # type: ignore[misc]
    # the stand-in and the launcher are library code, as CuPy's files are: fusec's errors name the user's line
    # that led to them (its stack walk skips library files), never theirs
    fusec.support.errors._SKIP_DIRS += (str(Path(__file__).resolve().parent),)
    fusec.support.errors._library_file.cache_clear()
