"""Within-side leaderboards from paired comparisons on identical markets."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

import tournaments.ratings.scale as rs
from tournaments.ratings.bootstrap import Cells, Fit
from tournaments.ratings.bradley_terry import (
    DEFAULT_L2,
    PairTable,
    fit_theta,
    labels,
    warn_if_disconnected,
)


@dataclass(frozen=True)
class PairedComparison:
    """Entry ``a`` against entry ``b`` on the markets both played."""

    a: str
    b: str
    markets: int
    """Markets where both entries have a value."""
    wins: int
    """Markets where a did better than b (by more than the tie tolerance)."""
    ties: int
    losses: int
    win_rate: float
    """(wins + ties / 2) / markets."""
    mean_diff: float
    """Mean of value_a - value_b over the shared markets (raw metric units)."""
    diff_lower: float
    """Bootstrap interval of ``mean_diff``, markets resampled."""
    diff_upper: float


@dataclass(frozen=True)
class PairedLeaderboard:
    """Result of :func:`paired_leaderboard`."""

    ratings: tuple[rs.RatedPlayer, ...]
    """Within-side Bradley-Terry ratings, best first."""
    pairs: tuple[PairedComparison, ...]
    """Every pair of entries (a before b in name order) with at least one shared market."""

    def pair_rows(self) -> list[dict[str, Any]]:
        """The pairwise comparisons as rows for ``tabulate``."""
        return [asdict(p) for p in self.pairs]


def paired_leaderboard(
    entries: Sequence[str],
    markets: Sequence[Hashable],
    values: ArrayLike,
    *,
    higher_is_better: bool = True,
    tie_tol: float = 0.0,
    rounds: int = 200,
    seed: int = 0,
    reference: str | None = None,
    confidence: float = 0.95,
    scale: rs.RatingScale = rs.ELO_SCALE,
    l2: float = DEFAULT_L2,
    clusters: Sequence[Hashable] | np.ndarray | None = None,
    players: Sequence[str] | None = None,
) -> PairedLeaderboard:
    """Rank the entries of one side by paired comparisons on identical markets.

    Input, long format with one record per (entry, market)::

        entries[i]  the entry's name
        markets[i]  a hashable market id (e.g. (config, rule, opponent, index)); records with
                    equal ids are the same market instance, played by different entries
        values[i]   the entry's metric on that market (e.g. seller profit); NaN = missing

    A repeated (entry, market) is an error. For each pair of entries only the markets where
    both have a finite value count. On such a market, with d = value_a - value_b (negated
    when ``higher_is_better`` is False), a wins if d > tie_tol, loses if d < -tie_tol, and
    otherwise it is a tie worth half. Per pair: win_rate = (wins + ties/2) / markets and the
    mean paired difference (raw units) with a bootstrap interval.

    The ratings are a Bradley-Terry fit (as :func:`bradley_terry`) on those pairwise results,
    every shared market being one game between the two entries; the intervals and ranks come
    from ``rounds`` bootstrap rounds that resample markets (ids) with replacement, so all the
    comparisons made on one market stay together. Because the market's own difficulty cancels
    in each comparison, a small consistent edge is detected even when market-to-market
    variation dwarfs it.

    ``clusters[i]`` (optional) names the resampling unit of record i, shared by all records of
    one market id: when several market ids are the same instance met under different
    conditions (other opponents, other rules), they are correlated, and resampling whole
    instances keeps the intervals honest. Without it each market id is its own unit.

    Callers that hold codes pass ``players`` (sorted names) and ``entries`` as integer codes
    into it, and integer arrays as ``markets`` and ``clusters``: nothing is encoded again.
    """
    rs.check_confidence(rounds, confidence)
    vals = np.asarray(values, dtype=float).reshape(-1)
    if players is None:
        names = np.asarray(entries, dtype=str).reshape(-1)
        players_arr, entry_code = np.unique(names, return_inverse=True)
        players = [str(x) for x in players_arr]
    else:
        codes = np.asarray(entries, np.int64).reshape(-1)
        used = np.flatnonzero(np.bincount(codes, minlength=len(players)))
        remap = np.zeros(len(players), np.int64)
        remap[used] = np.arange(len(used))
        entry_code = remap[codes]
        players = [players[k] for k in used]
    entry_code = entry_code.reshape(-1)
    if len(entry_code) != len(vals):
        raise ValueError(
            f"entries and values must have equal lengths (got {len(entry_code)}, {len(vals)})"
        )
    market_code, n_markets = labels(markets, len(entry_code), "markets")
    e = len(players)
    if e == 0:
        return PairedLeaderboard((), ())
    flat = entry_code * n_markets + market_code
    repeats = np.bincount(flat, minlength=e * n_markets) > 1
    if repeats.any():
        dup = np.flatnonzero(repeats)[0]
        raise ValueError(
            f"entry {players[dup // n_markets]!r} has more than one value for one market"
        )
    grid = np.full((e, n_markets), np.nan)
    grid[entry_code, market_code] = vals
    if clusters is None:
        cluster_of_market, n_units = np.arange(n_markets), n_markets
    else:
        cluster_code, n_units = labels(clusters, len(entry_code), "clusters")
        cluster_of_market = np.zeros(n_markets, np.int64)
        cluster_of_market[market_code] = cluster_code
        if not np.array_equal(cluster_of_market[market_code], cluster_code):
            raise ValueError("all records of one market must name the same cluster")
    sign = 1.0 if higher_is_better else -1.0

    pair_i: list[int] = []
    pair_j: list[int] = []
    empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0)
    cell_pair, cell_market, cell_s, cell_d = [empty_i], [empty_i], [empty_f], [empty_f]
    for i in range(e):
        for j in range(i + 1, e):
            shared = np.flatnonzero(np.isfinite(grid[i]) & np.isfinite(grid[j]))
            if len(shared) == 0:
                continue
            d = grid[i, shared] - grid[j, shared]
            edge = sign * d
            s = np.where(edge > tie_tol, 1.0, np.where(edge < -tie_tol, 0.0, 0.5))
            cell_pair.append(np.full(len(shared), len(pair_i)))
            pair_i.append(i)
            pair_j.append(j)
            cell_market.append(shared)
            cell_s.append(s)
            cell_d.append(d)

    pi = np.asarray(pair_i, dtype=np.int64)
    pj = np.asarray(pair_j, dtype=np.int64)
    n_pairs = len(pi)
    if n_pairs == 0:  # no two entries share a market: nothing to compare
        played = np.isfinite(grid).sum(axis=1)
        nan = np.full(e, np.nan)
        return PairedLeaderboard(tuple(rs.rated_rows(players, nan, nan, nan, played)), ())
    cp = np.concatenate(cell_pair).astype(np.int64)
    cm = np.concatenate(cell_market).astype(np.int64)
    cs = np.concatenate(cell_s)
    cd = np.concatenate(cell_d)

    n = np.bincount(cp, minlength=n_pairs).astype(float)
    w = np.bincount(cp, cs, n_pairs)
    table = PairTable(pi, pj, w, n)
    warn_if_disconnected(table, players)
    theta = fit_theta(table, e, l2)
    if reference is not None and reference not in players:
        raise ValueError(f"reference {reference!r} is not among the players")
    ref = None if reference is None else players.index(reference)

    # The bootstrap draws whole clusters (markets when none are given): the sufficient
    # statistics are the sums per (pair, cluster), whatever the number of markets in one.
    cells = Cells.by_unit(cp, cluster_of_market[cm], cs, n_units, extra=cd)
    fit = Fit(players, table, theta, ref, scale, l2)
    rated, counts, dsums = fit.rate(cells, rounds, seed, confidence, np.isfinite(grid).sum(1))

    with np.errstate(invalid="ignore", divide="ignore"):
        d_lo, d_hi = rs.percentile_interval(dsums / counts, confidence)
    dsum = np.bincount(cp, cd, n_pairs)
    wins = np.bincount(cp, cs == 1.0, n_pairs)
    ties = np.bincount(cp, cs == 0.5, n_pairs)
    pairs = tuple(
        PairedComparison(
            a=players[pi[k]],
            b=players[pj[k]],
            markets=int(n[k]),
            wins=int(wins[k]),
            ties=int(ties[k]),
            losses=int(n[k] - wins[k] - ties[k]),
            win_rate=float(w[k] / n[k]),
            mean_diff=float(dsum[k] / n[k]),
            diff_lower=float(d_lo[k]),
            diff_upper=float(d_hi[k]),
        )
        for k in range(n_pairs)
    )
    return PairedLeaderboard(tuple(rated), pairs)
