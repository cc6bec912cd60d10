"""Memory stays bounded however many calls a program makes: a Fused keeps at most ``_SIGNATURES_KEPT`` traces
(least recently used dropped), and nothing module-level keeps nodes (``tests/test_node_lifetime.py``).

20,000 calls ``f(x, float(i))`` with a new Python float each, when Python numbers were compile-time constants
(each one a new signature, traced and planned again), kept 20,000 traces and grew RSS from 49 to 201 MB. Now
the float is a runtime scalar (one trace); as a static argument it is the old case, bounded by the LRU."""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

import fusec
from fusec.frontend import api
from fusec.ir import graph as ir_graph
from fusec.support.lru import LRU

CALLS = 20_000
RSS_GROWTH_LIMIT_MB = 20


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line in /proc/self/status")


def _scaled(x, s):
    return x * s


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the RSS from /proc/self/status")
@pytest.mark.filterwarnings("ignore::fusec.RecompileWarning")  # static: a new float each call is the point here
@pytest.mark.parametrize("static", [False, True], ids=["runtime", "static"])
def test_memory_new_python_float_each_call_keeps_rss_growth_under_20_mb(static):
    gc.collect()
    nodes_before = set(ir_graph._INTERN.values())
    f = fusec.fuse(_scaled, static_argnames="s" if static else None)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    for i in range(300):  # warm up: allocator pools, caches of a bounded size filled
        f(x, i + 0.25)
    gc.collect()
    before = _rss_mb()
    for i in range(CALLS):
        result = f(x, float(i))
    gc.collect()
    growth = _rss_mb() - before
    np.testing.assert_array_equal(result, _scaled(x, float(CALLS - 1)))
    assert len(f._traces) == (api._SIGNATURES_KEPT if static else 1)
    assert growth < RSS_GROWTH_LIMIT_MB, f"RSS grew {growth:.1f} MB over {CALLS} calls"
    del f
    gc.collect()
    assert [n for n in ir_graph._INTERN.values() if n not in nodes_before] == []  # the Fused's nodes went with it


def test_lru_drops_the_least_recently_used():
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recent
    lru.put("c", 3)
    assert "b" not in lru and lru.get("a") == 1 and lru.get("c") == 3 and len(lru) == 2
    assert lru.get("b", -1) == -1
    with pytest.raises(ValueError):
        LRU(0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the RSS from /proc/self/status")
def test_memory_new_shape_each_call_keeps_rss_growth_under_20_mb():
    """20,000 calls, each with an array of a shape not seen before (one signature: shapes are re-inferred,
    not traced again): the graphs and plans kept per shape are bounded too."""
    gc.collect()
    nodes_before = set(ir_graph._INTERN.values())
    f = fusec.fuse(_scaled)
    data = np.linspace(-1, 1, 3 * (CALLS + 402), dtype=np.float32)
    for i in range(300):  # warm up with shapes of their own
        f(data[: 3 * (CALLS + i + 2)].reshape(-1, 3), 0.5)
    gc.collect()
    before = _rss_mb()
    for i in range(CALLS):
        x = data[: 3 * (i + 2)].reshape(i + 2, 3)  # 2 rows and more: a dim of 1 is a signature of its own
        result = f(x, 0.5)
    gc.collect()
    growth = _rss_mb() - before
    np.testing.assert_array_equal(result, _scaled(x, 0.5))
    assert len(f._traces) == 1
    assert growth < RSS_GROWTH_LIMIT_MB, f"RSS grew {growth:.1f} MB over {CALLS} calls"
    del f
    gc.collect()
    assert [n for n in ir_graph._INTERN.values() if n not in nodes_before] == []
