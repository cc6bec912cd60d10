"""A seeded sample of the GPU tests' cases for build-only runs that must fit CI's time.

Per test function (all its parametrized cases): first a cover, drawn in a seeded random order, of every token of
the cases' ids (``softmax-float16-offset`` gives ``softmax``, ``float16`` and ``offset``: every workload, dtype,
layout and schedule a function is parametrized over appears in some case); then more cases, drawn the same way,
up to ``fraction`` of the function's cases; at least one case of every function. A seed gives one sample on any
machine (the order of the collected items does not matter), so a failure is reproduced by its seed.
"""

from __future__ import annotations

import math
import random
import zlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any


def function_of(nodeid: str) -> str:
    """``tests/gpu/test_x.py::test_y`` for every case ``tests/gpu/test_x.py::test_y[...]``."""
    return nodeid.split("[", 1)[0]


def tokens(item: Any) -> set[str]:
    callspec = getattr(item, "callspec", None)
    return set(callspec.id.split("-")) if callspec is not None else set()


def choose(items: Sequence[Any], fraction: float, seed: int) -> list[Any]:
    """The sampled items, in their collected order."""
    if fraction >= 1:
        return list(items)
    groups: dict[str, list[Any]] = defaultdict(list)
    for item in items:
        groups[function_of(item.nodeid)].append(item)
    keep: set[str] = set()
    for name, group in groups.items():
        order = sorted(group, key=lambda item: item.nodeid)
        random.Random(seed ^ zlib.crc32(name.encode())).shuffle(order)
        wanted = max(1, math.ceil(fraction * len(order)))
        chosen: set[str] = set()
        covered: set[str] = set()
        for item in order:  # the cover
            if tokens(item) - covered:
                chosen.add(item.nodeid)
                covered |= tokens(item)
        for item in order:  # then up to the fraction
            if len(chosen) >= wanted:
                break
            chosen.add(item.nodeid)
        keep |= chosen
    return [item for item in items if item.nodeid in keep]
