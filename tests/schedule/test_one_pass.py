"""Which reductions one pass can compute (fusec/schedule/one_pass.py): variances as NumPy code writes them and
softmax denominators, never a reduction that only looks like one (another array's mean, other axes, another
power, a shifted sum), and what the one-pass loop nest reads."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.kinds import analyze

F32 = "float32"


def _sources(fn, shape=(300, 40), dtype=F32, n_inputs=1):
    plan = fusec.fuse(fn).plan(*[fusec.ArraySpec(shape, dtype)] * n_inputs)
    assert len(plan.kernels) == 1
    nest = analyze(plan.kernels[0].region)
    return nest, {r: s.kind for r, s in nest.one_pass_candidates.items()}


@pytest.mark.parametrize("fn, dtype", [
    (lambda x: x.var(axis=0), F32),
    (lambda x: x.std(axis=-1, ddof=1), F32),
    (lambda x: x.var(), "float64"),
    (lambda x: x.var(axis=0), "float16"),
    (lambda x: x.var(axis=0), "int32"),  # computed in float64
    (lambda x: ((x - x.mean(axis=0, keepdims=True)) ** 2).mean(axis=0), F32),
    (lambda x: ((x - x.mean(axis=0)) ** 2).sum(axis=0), F32),  # keepdims=False
    (lambda x: ((x.mean(axis=1, keepdims=True) - x) * (x.mean(axis=1, keepdims=True) - x)).sum(axis=1), F32),
    (lambda x: np.square(x - x.sum(axis=0) / x.shape[0]).sum(axis=0), F32),  # a constant count
], ids=["var0", "std_rows", "var_all", "var_f16", "var_i32", "written_out", "no_keepdims", "mean_minus_x",
        "sum_over_n"])
def test_one_pass_finds_variances_as_numpy_code_writes_them(fn, dtype) -> None:
    _, kinds = _sources(fn, dtype=dtype)
    assert list(kinds.values()) == ["moments"]


@pytest.mark.parametrize("fn", [
    lambda x: np.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1),
    lambda x: np.log(np.exp(x - x.max(axis=0, keepdims=True)).sum(axis=0)),
    lambda x: np.exp(x - x.max()).sum(),
], ids=["rows", "logsumexp_cols", "all"])
def test_one_pass_finds_softmax_denominators(fn) -> None:
    _, kinds = _sources(fn)
    assert list(kinds.values()) == ["exp_sum"]


@pytest.mark.parametrize("fn, n_inputs", [
    (lambda x: ((x - 1.0) ** 2).sum(axis=0), 1),  # not the mean
    (lambda x: ((x - x.mean(axis=0, keepdims=True)) ** 3).sum(axis=0), 1),  # not a square
    (lambda x: ((x - x.sum(axis=0, keepdims=True) / 7) ** 2).sum(axis=0), 1),  # not the count
    (lambda x: ((x - x.max(axis=0, keepdims=True)) ** 2).sum(axis=0), 1),  # not a mean
    (lambda x, y: ((x - y.mean(axis=0, keepdims=True)) ** 2).sum(axis=0), 2),  # another array's mean
    (lambda x: np.exp(x.max(axis=0, keepdims=True) - x).sum(axis=0), 1),  # exp(max - x)
    (lambda x: np.exp(x - x.min(axis=0, keepdims=True)).sum(axis=0), 1),  # the minimum
    (lambda x: np.exp(x - x.mean(axis=0, keepdims=True)).sum(axis=0), 1),  # a mean
    (lambda x, y: np.exp(x - y.max(axis=0, keepdims=True)).sum(axis=0), 2),  # another array's maximum
], ids=["shift", "cube", "wrong_count", "max_dev", "other_mean", "exp_max_minus_x", "exp_min", "exp_mean",
        "other_max"])
def test_one_pass_refuses_what_only_looks_like_a_statistic(fn, n_inputs) -> None:
    _, kinds = _sources(fn, n_inputs=n_inputs)
    assert kinds == {}


def test_one_pass_nest_reads_the_data_in_the_first_reductions_phase() -> None:
    nest, _ = _sources(lambda x: (x.mean(axis=0), x.var(axis=0)), shape=(5000, 8))
    assert nest.n_phases == 2 and not nest.one_pass_sources
    one = nest.with_one_pass()
    assert one.n_phases == 1 and one.with_one_pass() is one
    (r, source), = one.one_pass_sources.items()
    assert one.reduced_value(r) == (source.x, source.reader) and source.x.op == "input"
    # the loop computes neither the deviation nor its square for the variance: it reads x
    assert {n.op for n in one.phases[0].needed} <= {"cast"}
