"""The checks the GPU tests put fusec's results through (``tests.helpers.assert_function_matches_numpy``, with
``tests.reference``'s reference and bound) accept NumPy's own results for every workload and layout those tests
use (at their smallest shapes), so that a GPU failure is fusec's, never the check tripping over a workload (the
reference and magnitude evaluations run each function through ndarray subclasses: views, joins, rolls, gathers,
part updates)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gathers.test_gathers import KEYS as GATHER_KEYS
from tests.gathers.test_gathers import I, J, K
from tests.gathers.workloads import WORKLOADS as GATHERS
from tests.helpers import assert_function_matches_numpy, seed_of
from tests.ir.test_joins import WORKLOADS as JOINS
from tests.ir.test_joins import _args
from tests.ir.test_reshape import WORKLOADS as RESHAPES
from tests.ir.test_shift_functions import CASES as SHIFTS
from tests.ir.test_views import WORKLOADS as VIEWS
from tests.schedule.test_join_accesses import _laid_out
from tests.schedule.test_view_accesses import _layouts

DTYPES = ["float32", "float16", "int32"]
LAYOUTS = ["contiguous", "offset", "strided", "reversed", "transposed"]


def _accepts_numpy(fn, *args) -> None:
    with np.errstate(all="ignore"):
        want = fn(*args)
    assert_function_matches_numpy(want, fn, *args, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_checks_accept_numpy_on_view_reshape_and_shift_workloads(dtype: str) -> None:
    for layout in LAYOUTS:
        x = _layouts((9, 10), dtype)[layout]
        for fn in VIEWS.values():
            _accepts_numpy(fn, x)
        y = _layouts((130, 36), dtype)[layout]
        for fn in RESHAPES.values():
            _accepts_numpy(fn, y)
        z = _layouts((5, 7), dtype)[layout]
        for fn in SHIFTS.values():
            _accepts_numpy(fn, z)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_checks_accept_numpy_on_join_and_gather_workloads(dtype: str) -> None:
    for name, (fn, _) in JOINS.items():
        for layout in ["contiguous", "transposed", "strided"]:
            _accepts_numpy(fn, *[_laid_out(a, layout) for a in _args(name, dtype)])
    for name, w in GATHERS.items():
        _accepts_numpy(w.fn, *w.make(np.random.default_rng(seed_of(name, dtype, "int64", "contiguous")), dtype,
                                     "int64"))
    x = (np.random.default_rng(seed_of("keys", dtype)).standard_normal((5, 6, 7)) * 10).astype(dtype)
    for fn in GATHER_KEYS.values():
        _accepts_numpy(fn, x, I, J, K)
