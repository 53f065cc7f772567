"""The analyses' all-pairs-at-once statistics give the one-at-a-time numbers, bit for bit,
on many seeds (agents/stats.py, tournaments/effects.py, tournaments/ratings)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.stats import mean_ci, mean_ci_rows
from tournaments.effects import bootstrap_means, multiplicities
from tournaments.ratings.bradley_terry import distinct_ints, labels
from tournaments.ratings.scale import percentile_interval


def _ragged(rng: np.random.Generator) -> np.ndarray:
    """Rows with different numbers of finite entries (none, one, many), NaNs and infinities
    anywhere."""
    x = rng.normal(50.0, 30.0, size=(int(rng.integers(1, 40)), int(rng.integers(1, 60))))
    x[rng.random(x.shape) < rng.uniform(0.0, 0.6)] = np.nan
    x[rng.random(x.shape) < 0.02] = np.inf
    x[0] = np.nan  # a row with nothing
    return x


@pytest.mark.parametrize("seed", range(40))
def test_mean_ci_rows_is_mean_ci_of_every_row(seed):
    rng = np.random.default_rng(seed)
    x = _ragged(rng)
    level = [0.9, 0.95, 0.99][seed % 3]
    mean, lower, upper = mean_ci_rows(x, level)
    for r, row in enumerate(x):
        expected = mean_ci(row, level)
        got = (mean[r], lower[r], upper[r])
        for e, g in zip(expected, got, strict=True):
            assert (math.isnan(e) and math.isnan(g)) or e == g, (r, expected, got)


@pytest.mark.parametrize("seed", range(40))
def test_labels_and_distinct_ints_number_integers_as_a_sort_does(seed):
    rng = np.random.default_rng(seed)
    high = [10, 1000, 10**7][seed % 3]  # a table, and too sparse for one
    low = -5 if seed % 4 == 0 else 0  # negatives take the sort
    values = rng.integers(low, high, size=int(rng.integers(1, 3000)))
    uniq, inverse = np.unique(values, return_inverse=True)
    codes, n = labels(values, len(values), "values")
    assert n == len(uniq) and np.array_equal(codes, inverse)
    got = distinct_ints(values)
    assert np.array_equal(got, uniq) and got.dtype == values.dtype


@pytest.mark.parametrize("seed", range(20))
def test_bootstrap_means_are_the_resampled_means(seed):
    rng = np.random.default_rng(seed)
    units = int(rng.integers(2, 50))
    values = rng.normal(size=(units, int(rng.integers(1, 30))))
    values[rng.random(values.shape) < 0.3] = np.nan
    values[:, :2] = values[:, [0]]  # columns sharing a pattern of missing values
    mult = multiplicities(np.random.default_rng(seed + 100), units, 200)
    lo, hi = bootstrap_means(values, mult)
    ok = np.isfinite(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (mult @ np.where(ok, values, 0.0)) / (mult @ ok.astype(float))
    q_lo, q_hi = percentile_interval(means, 0.95)
    few = ok.sum(axis=0) < 2
    np.testing.assert_array_equal(np.where(few, np.nan, q_lo), lo)
    np.testing.assert_array_equal(np.where(few, np.nan, q_hi), hi)
