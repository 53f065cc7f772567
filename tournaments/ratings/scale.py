"""The rating scale, leaderboard rows and the percentile interval every bootstrap uses."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class RatingScale:
    """How log-odds map to rating points: ``P(a beats b) = 1 / (1 + base ** ((R_b - R_a) /
    points))``, with the reference (or the mean, without one) at ``initial``. The usual Elo
    scale: 400 points of difference are odds of 10:1."""

    points: float = 400.0
    """Rating points per factor ``base`` in the odds."""
    base: float = 10.0
    """The odds ratio that ``points`` of difference stand for."""
    initial: float = 1000.0
    """Where the reference player (or the mean rating) sits; every Elo player starts here."""

    def __post_init__(self) -> None:
        if not (self.points > 0 and self.base > 1 and math.isfinite(self.initial)):
            raise ValueError(f"a rating scale needs points > 0, base > 1, finite initial: {self}")

    @property
    def factor(self) -> float:
        """Rating points per natural log-odds unit (theta = R / factor)."""
        return self.points / math.log(self.base)

    def expected(self, r_a: ArrayLike, r_b: ArrayLike) -> float | np.ndarray:
        """Expected score of a against b: ``1 / (1 + base ** ((r_b - r_a) / points))``."""
        diff = (np.asarray(r_b, float) - np.asarray(r_a, float)) / self.points
        out = 1.0 / (1.0 + np.power(self.base, diff))
        return float(out) if np.ndim(out) == 0 else out

    def pin(self, ratings: np.ndarray, ref: int | None) -> np.ndarray:
        """Shift ratings (last axis: players) so that player ``ref`` (or, without one, the
        mean) sits at ``initial``; the reference is set exactly, whatever the rounding."""
        ratings = np.asarray(ratings, dtype=float)
        if ref is None:
            return ratings + (self.initial - ratings.mean(axis=-1, keepdims=True))
        out = ratings + (self.initial - ratings[..., ref : ref + 1])
        out[..., ref] = self.initial
        return out


ELO_SCALE = RatingScale()


def expected_score(
    r_a: ArrayLike, r_b: ArrayLike, *, scale: RatingScale = ELO_SCALE
) -> float | np.ndarray:
    """Expected score of a against b on ``scale`` (see :meth:`RatingScale.expected`)."""
    return scale.expected(r_a, r_b)


def percentile_interval(
    samples: ArrayLike, confidence: float = 0.95, axis: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles of ``samples``
    along ``axis``, NaN samples left out (an all-NaN column gives NaN bounds)."""
    tail = 50.0 * (1.0 - confidence)
    samples = np.asarray(samples, float)
    if not np.isnan(samples).any():  # the same numbers, several times faster
        lo, hi = np.percentile(samples, [tail, 100.0 - tail], axis=axis)
        return lo, hi
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(samples, [tail, 100.0 - tail], axis=axis)
    return lo, hi


def check_confidence(rounds: int, confidence: float) -> None:
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")


@dataclass(frozen=True)
class RatedPlayer:
    """One row of a leaderboard."""

    player: str
    rating: float
    """Point estimate (fit on all the data)."""
    lower: float
    """Lower end of the bootstrap interval (2.5th percentile for 95%)."""
    upper: float
    """Upper end of the bootstrap interval (97.5th percentile for 95%)."""
    rank: int
    """1 + the number of players whose lower bound is above this player's upper bound."""
    games: int
    """Games played (for a paired leaderboard: markets with a value)."""


def ranks_from_intervals(lower: ArrayLike, upper: ArrayLike) -> np.ndarray:
    """rank_i = 1 + #{j : lower_j > upper_i}: a player is only ranked below a player whose
    whole interval lies above its own, so overlapping intervals share a rank."""
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    return 1 + (lo[None, :] > hi[:, None]).sum(axis=1)


def rated_rows(
    players: list[str],
    ratings: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    games: np.ndarray,
) -> list[RatedPlayer]:
    """Leaderboard rows, best first (ties by name), ranked from the intervals."""
    ranks = ranks_from_intervals(lower, upper)
    rows = [
        RatedPlayer(p, float(r), float(lo), float(hi), int(k), int(n))
        for p, r, lo, hi, k, n in zip(players, ratings, lower, upper, ranks, games, strict=True)
    ]
    return sorted(rows, key=lambda row: (-row.rating, row.player))


def to_table(ratings: Mapping[str, float] | Iterable[RatedPlayer] | Any) -> list[dict[str, Any]]:
    """Rows (dicts) best first, ready for ``tabulate(rows, headers="keys")``.

    A mapping ``player -> rating`` (from ``elo`` or ``bradley_terry``) gives columns rank,
    player, rating, with rank = 1 + the number of strictly higher ratings. Rows from
    ``bootstrap_bt`` or a ``PairedLeaderboard`` give rank, player, rating, lower, upper,
    games. Ties in rating are ordered by name.
    """
    ratings = getattr(ratings, "ratings", ratings)  # a PairedLeaderboard
    if isinstance(ratings, Mapping):
        values = sorted(ratings.values(), reverse=True)
        items = sorted(ratings.items(), key=lambda kv: (-kv[1], kv[0]))
        return [
            {"rank": 1 + sum(v > r for v in values), "player": p, "rating": r} for p, r in items
        ]
    rows = sorted(ratings, key=lambda r: (-r.rating, r.player))
    return [
        {
            "rank": r.rank,
            "player": r.player,
            "rating": r.rating,
            "lower": r.lower,
            "upper": r.upper,
            "games": r.games,
        }
        for r in rows
    ]
