"""Counter-based noise: keyed, batch-invariant, broadcasting and roughly uniform / normal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from arena import noise
from arena.noise import hash64, normal, uniform

U64 = st.integers(min_value=0, max_value=2**64 - 1)
I63 = st.integers(min_value=0, max_value=2**63 - 1)


def test_uniform_is_deterministic_in_its_keys():
    a = uniform(7, 123456789, 3, 2)
    b = uniform(7, 123456789, 3, 2)
    assert a == b
    assert a.dtype == np.float64 and a.shape == ()
    assert uniform(7, 123456789, 3, 2) != uniform(7, 123456789, 3, 3)


def test_uniform_lies_in_the_unit_interval():
    u = uniform(1, np.arange(200_000, dtype=np.uint64))
    assert u.min() >= 0.0 and u.max() < 1.0
    assert u.min() < 1e-4 and u.max() > 1 - 1e-4


def test_uniform_never_reaches_one_even_for_an_all_ones_hash(monkeypatch):
    # The largest 53-bit mantissa maps strictly below 1, and the smallest to 0.
    monkeypatch.setattr(noise, "hash64", lambda *keys: np.full(3, 2**64 - 1, np.uint64))
    np.testing.assert_array_equal(uniform(1, np.arange(3)), [(2**53 - 1) / 2**53] * 3)
    assert uniform(1, np.arange(3)).max() < 1.0
    monkeypatch.setattr(noise, "hash64", lambda *keys: np.full(3, 2**11 - 1, np.uint64))
    np.testing.assert_array_equal(uniform(1, np.arange(3)), [0.0] * 3)


def test_uniform_broadcasts_like_scalar_calls():
    keys = np.array([0, 1, 5, 2**40, 2**63 - 1], dtype=np.int64)
    out = uniform(42, keys, 3)
    assert out.shape == keys.shape
    for k, u in zip(keys, out, strict=True):
        assert u == uniform(42, int(k), 3)
    grid = uniform(9, np.arange(4)[:, None], np.arange(3)[None, :])
    assert grid.shape == (4, 3)
    for i in range(4):
        for j in range(3):
            assert grid[i, j] == uniform(9, i, j)


def test_batch_invariance():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**63, size=1000, dtype=np.int64)
    turns = rng.integers(0, 50, size=1000)
    together = uniform(3, keys, turns, 7)
    alone = np.array([uniform(3, int(k), int(t), 7) for k, t in zip(keys, turns, strict=True)])
    assert together.tobytes() == alone.tobytes()
    # A sub-batch, in another order, gives the same numbers.
    order = rng.permutation(1000)[:100]
    assert np.array_equal(uniform(3, keys[order], turns[order], 7), together[order])
    n_together = normal(3, keys, turns)
    n_alone = np.array([normal(3, int(k), int(t)) for k, t in zip(keys, turns, strict=True)])
    assert n_together.tobytes() == n_alone.tobytes()


@given(
    keys=st.lists(I63, min_size=1, max_size=5),
    pos=st.integers(0, 4),
    delta=st.integers(0, 2**63 - 2),
)
@settings(max_examples=200, deadline=None)
def test_changing_any_one_key_changes_the_output(keys, pos, delta):
    pos %= len(keys)
    other = list(keys)
    other[pos] = (keys[pos] + delta + 1) % 2**63
    assert other != keys
    assert uniform(*keys) != uniform(*other)
    assert hash64(*keys) != hash64(*other)


@pytest.mark.parametrize("pos", range(4))
def test_changing_one_key_by_one_changes_the_output(pos):
    base = [11, 2**62 + 5, 17, 3]
    ref = uniform(*base)
    for step in (1, 2, 2**32, 2**62):
        other = list(base)
        other[pos] += step
        assert uniform(*other) != ref


def test_key_order_and_arity_matter():
    assert uniform(1, 2) != uniform(2, 1)
    assert uniform(1, 2) != uniform(1, 2, 0)
    assert uniform(5) != uniform(5, 0)


def test_rough_uniformity():
    u = uniform(2024, np.arange(100_000, dtype=np.uint64), 1)
    assert abs(u.mean() - 0.5) < 0.005
    assert abs(u.var() - 1 / 12) < 0.002
    counts, _ = np.histogram(u, bins=20, range=(0.0, 1.0))
    assert stats.chisquare(counts).pvalue > 1e-4


def test_rough_uniformity_along_another_key():
    # Sequential values of a later key (e.g. turns) are as uniform as sequential seeds.
    u = uniform(np.arange(100_000, dtype=np.int64) * 0 + 77, 12345, np.arange(100_000))
    counts, _ = np.histogram(u, bins=20, range=(0.0, 1.0))
    assert stats.chisquare(counts).pvalue > 1e-4
    # Neighbouring keys are not correlated.
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.02


def test_normal_has_unit_moments():
    z = normal(5, np.arange(100_000, dtype=np.uint64))
    assert z.dtype == np.float64 and np.isfinite(z).all()
    assert abs(z.mean()) < 0.02
    assert abs(z.std() - 1.0) < 0.02
    assert abs(stats.skew(z)) < 0.05
    assert abs(stats.kurtosis(z)) < 0.1
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert normal(5, 3) == normal(5, 3)
    assert normal(5, 3) != normal(5, 4)


@given(value=I63, seed=I63)
@settings(max_examples=100, deadline=None)
def test_uint64_and_int64_keys_with_the_same_value_agree(value, seed):
    as_u = uniform(seed, np.array([value], dtype=np.uint64))
    as_i = uniform(seed, np.array([value], dtype=np.int64))
    as_py = uniform(seed, value)
    assert as_u[0] == as_i[0] == as_py
    assert np.uint64(hash64(np.uint64(value))) == np.uint64(hash64(np.int64(value)))


@given(value=U64)
@settings(max_examples=50, deadline=None)
def test_full_64_bit_keys_work(value):
    # Market keys use all 64 bits; the Python int and the uint64 array agree.
    assert uniform(1, value) == uniform(1, np.array([value], np.uint64))[0]
    assert 0.0 <= uniform(1, value) < 1.0


def test_scalar_overflow_does_not_warn():
    with np.errstate(all="raise"):
        uniform(2**64 - 1, 2**64 - 1, 2**63 - 1)
        normal(2**64 - 1, 1)
