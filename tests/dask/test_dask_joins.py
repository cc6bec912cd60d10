"""Iotas, pads and joins on Dask arrays: a window of an argument is taken as Dask's indexing of it (an integer
array per clamped axis), an iota as a one-chunk array of its values, and the fused stages see whole inputs;
``tests/ir/test_joins.py``'s workloads on uneven chunkings agree with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="Dask is not installed (pip install 'fusec[dask]')")

import dask.array as da  # noqa: E402

import fusec  # noqa: E402
from tests.helpers import assert_matches_numpy, seed_of  # noqa: E402
from tests.ir.test_joins import WORKLOADS, _args  # noqa: E402


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_join_workload_on_dask_matches_numpy(name: str) -> None:
    fn, _ = WORKLOADS[name]
    args = _args(name, "float32" if name != "onehot" else "int32")
    rng = np.random.default_rng(seed_of("dask joins", name))
    chunked = [da.from_array(a, chunks=tuple(max(1, int(rng.integers(1, d + 1))) if d else 1 for d in a.shape))
               for a in args]
    with np.errstate(all="ignore"):
        want = fn(*args)
    got = fusec.fuse(fn)(*chunked)
    got = got.compute() if hasattr(got, "compute") else got
    assert got.shape == want.shape and got.dtype == want.dtype
    reduces = any(k in name for k in ("sum", "rows", "cols", "all", "one_pass", "dense", "kept", "var", "max"))
    # split reductions add chunk partials in another order than NumPy's pairwise sum
    assert_matches_numpy(got, want, rtol=1e-5 if reduces else 2e-6, atol=1e-3 if reduces else 1e-5)
