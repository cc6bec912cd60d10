"""fusec.random: Philox-4x32-10 with explicit keys, traced into the kernels that use its numbers, bit for bit the
same on the NumPy backend (and the GPU: integer operations and exact conversions only, but for ``normal``'s
transcendentals) as called outside a fused function."""

from __future__ import annotations

import numpy as np
import pytest

import fusec
from fusec.frontend.random_numbers import philox4x32
from tests.fake_cupy import fake_gpu, to_device

# Random123's known-answer vectors for Philox-4x32-10 (kat_vectors): counter, key, output
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter, key, want", KAT)
def test_philox_matches_the_known_answers(counter, key, want) -> None:
    words = philox4x32(tuple(np.asarray(c, np.uint32) for c in counter), tuple(np.asarray(k, np.uint32) for k in key))
    assert tuple(int(w) for w in words) == want


DRAWS = {
    "uniform32": lambda k, shape: fusec.random.uniform(k, shape),
    "uniform64": lambda k, shape: fusec.random.uniform(k, shape, np.float64, -2.0, 3.0),
    "normal32": lambda k, shape: fusec.random.normal(k, shape),
    "normal64": lambda k, shape: fusec.random.normal(k, shape, np.float64, 1.0, 0.5),
    "bernoulli": lambda k, shape: fusec.random.bernoulli(k, 0.3, shape),
    "integers": lambda k, shape: fusec.random.integers(k, -5, 7, shape),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_fused_draws_are_the_bits_drawn_outside_and_a_new_key_traces_nothing(name) -> None:
    draw = DRAWS[name]
    f = fusec.fuse(lambda x, key: draw(key, x.shape))
    x = np.zeros((37, 29), np.float32)
    seen = []
    for key in [(1, 0), (1, 1), (2, 0), (1, 0)]:
        got = f(x, key)
        want = draw(key, x.shape)
        assert got.dtype == want.dtype and got.shape == (37, 29)
        assert np.array_equal(got, want)
        seen.append(got)
    assert f.cache_info().traces == 1
    assert np.array_equal(seen[0], seen[3]) and not np.array_equal(seen[0], seen[1])


def test_the_numbers_have_their_distributions() -> None:
    n = 1 << 16
    u = fusec.random.uniform(5, n)
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 5 * (1 / 12 / n) ** 0.5
    z = fusec.random.normal(5, n, np.float64)
    assert abs(z.mean()) < 5 / n**0.5 and abs(z.var() - 1.0) < 5 * (2 / n) ** 0.5
    b = fusec.random.bernoulli(5, 0.3, n)
    assert abs(b.mean() - 0.3) < 5 * (0.21 / n) ** 0.5
    i = fusec.random.integers(5, -5, 7, n)
    assert set(np.unique(i)) == set(range(-5, 7))
    assert np.corrcoef(u[:-1], u[1:])[0, 1] < 5 / n**0.5  # neighbours uncorrelated


def dropout(x, key, rate):
    keep = fusec.random.bernoulli(key, 1 - rate, x.shape)
    return np.where(keep, x / (1 - rate), 0)


def test_dropout_is_one_kernel_and_runs_on_the_gpu_path(monkeypatch) -> None:
    x = np.random.default_rng(3).standard_normal((64, 33)).astype(np.float32)
    f = fusec.fuse(dropout)
    assert [k.kind for k in f.plan(x, (9, 0), 0.25).kernels] == ["pointwise"]  # the mask never touches memory
    with fake_gpu(monkeypatch) as gpu:
        results = [fusec.fuse(dropout)(to_device(x), (9, step), 0.25) for step in range(2)]
    assert not gpu.mislaunched
    for step, got in enumerate(results):
        host = got.get() if hasattr(got, "get") else np.asarray(got)
        assert np.array_equal(host, dropout(x, (9, step), 0.25))


@pytest.mark.parametrize("key, match", [((1, 2, 3), "pair"), (-1, r"\[0, 2\*\*32\)"), (2**32, r"\[0, 2\*\*32\)"),
                                        (1.5, "int")])
def test_bad_keys_are_errors(key, match) -> None:
    with pytest.raises(fusec.FusecError, match=match):
        fusec.random.uniform(key, 3)
