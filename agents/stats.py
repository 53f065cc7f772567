"""The mean of a per-market metric with its Student-t interval.

Used by evaluation (``arena eval``) and by the tournament analyses; kept apart from the
rollout code so that an analysis imports no policy or engine.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from scipy.special import stdtrit


def mean_ci(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lower, upper): Student-t interval over the finite entries (nan bounds with fewer
    than two, nan everything with none)."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (float("nan"),) * 3
    m = float(x.mean())
    if x.size == 1:  # one market says nothing about the spread
        return m, float("nan"), float("nan")
    half = float(stdtrit(x.size - 1, 0.5 + level / 2) * x.std(ddof=1) / np.sqrt(x.size))
    return m, m - half, m + half


def mean_ci_rows(x: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`mean_ci` of every row of a 2-D array, as three arrays (mean, lower, upper): the
    same numbers, bit for bit."""
    x = np.asarray(x, float)
    mean = np.full(len(x), np.nan)
    lower = np.full(len(x), np.nan)
    upper = np.full(len(x), np.nan)
    q = 0.5 + level / 2
    for rows, v in _finite_by_count(x):
        m = v.mean(axis=1)
        mean[rows] = m
        k = v.shape[1]
        if k > 1:  # one market says nothing about the spread
            half = stdtrit(k - 1, q) * v.std(axis=1, ddof=1) / np.sqrt(k)
            lower[rows] = m - half
            upper[rows] = m + half
    return mean, lower, upper


def _finite_by_count(x: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(rows, their finite entries) for the rows of ``x`` with k finite entries, each k >= 1:
    one contiguous (rows x k) matrix whose rows keep their entries' order, so that a
    reduction along its rows adds exactly as that of each row alone."""
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D (got shape {x.shape})")
    ok = np.isfinite(x)
    size = ok.sum(axis=1)
    for k in np.unique(size).tolist():
        if k == 0:
            continue
        rows = np.flatnonzero(size == k)
        v = x[rows]
        if k < x.shape[1]:
            v = v[ok[rows]].reshape(len(rows), k)
        yield rows, np.ascontiguousarray(v)
