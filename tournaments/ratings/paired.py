"""Within-side leaderboards from paired comparisons on identical markets."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

import tournaments.ratings.scale as rs
from tournaments.ratings.bootstrap import Cells, Fit, group_strata
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
    strata: Sequence[Hashable] | np.ndarray | None = None,
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
    ``strata[i]`` (optional; one value for all records of one unit) names the stratum of
    record i's unit, e.g. its config: a bootstrap round draws each stratum's own number of
    units from that stratum alone, as a design with a fixed number of markets per config
    has them. With one unit in every stratum no round can differ from the data: the
    intervals are NaN and every rank is 1.

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
        unit_code = market_code
    else:
        cluster_code, n_units = labels(clusters, len(entry_code), "clusters")
        cluster_of_market = np.zeros(n_markets, np.int64)
        cluster_of_market[market_code] = cluster_code
        if not np.array_equal(cluster_of_market[market_code], cluster_code):
            raise ValueError("all records of one market must name the same cluster")
        unit_code = cluster_code
    stratum = None
    if strata is not None:
        stratum_code, _ = labels(strata, len(entry_code), "strata")
        try:
            stratum = group_strata((unit_code, n_units), stratum_code)
        except ValueError:
            unit = "cluster" if clusters is not None else "market"
            raise ValueError(f"all records of one {unit} must name the same stratum") from None
    has = np.isfinite(grid)
    played = has.sum(axis=1)

    # The pairs (i < j, in that order) with a shared market: counts are exact in a product.
    shared = has.astype(float) @ has.T.astype(float)
    pi, pj = np.triu_indices(e, 1)
    keep = shared[pi, pj] > 0
    pi, pj = pi[keep].astype(np.int64), pj[keep].astype(np.int64)
    n_pairs = len(pi)
    if n_pairs == 0:  # no two entries share a market: nothing to compare
        nan = np.full(e, np.nan)
        return PairedLeaderboard(tuple(rs.rated_rows(players, nan, nan, nan, played)), ())
    sign = 1.0 if higher_is_better else -1.0
    # The bootstrap draws whole clusters (markets when none are given): the sufficient
    # statistics are the sums per (pair, cluster), whatever the number of markets in one.
    cells, wins, ties, dsum = _pair_sums(
        grid, has, pi, pj, cluster_of_market, n_units, sign, tie_tol
    )
    cells = replace(cells, stratum=stratum)
    n = np.bincount(cells.pair, cells.n, n_pairs)
    w = np.bincount(cells.pair, cells.w, n_pairs)
    table = PairTable(pi, pj, w, n)
    warn_if_disconnected(table, players)
    theta = fit_theta(table, e, l2)
    if reference is not None and reference not in players:
        raise ValueError(f"reference {reference!r} is not among the players")
    ref = None if reference is None else players.index(reference)

    fit = Fit(players, table, theta, ref, scale, l2)
    rated, counts, dsums = fit.rate(cells, rounds, seed, confidence, played)

    with np.errstate(invalid="ignore", divide="ignore"):
        d_lo, d_hi = rs.percentile_interval(dsums / counts, confidence)
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


_CHUNK_CELLS = 1 << 22  # (pair, market) cells handled at once: a few arrays of ~32 MB


def _pair_sums(
    grid: np.ndarray,
    has: np.ndarray,
    pi: np.ndarray,
    pj: np.ndarray,
    cluster_of_market: np.ndarray,
    n_units: int,
    sign: float,
    tie_tol: float,
) -> tuple[Cells, np.ndarray, np.ndarray, np.ndarray]:
    """The comparisons of pairs (pi[k], pj[k]) on their shared markets: the bootstrap cells
    (one per (cluster, pair) with a shared market, in that order; score and count, and the
    sum of value_a - value_b as ``extra``), and per pair the wins, the ties and the sum of
    value_a - value_b.

    Every sum of differences runs over the markets in their order, one at a time, from 0.0,
    as ``np.bincount`` adds. Scores are multiples of one half, so their sums are exact in any
    order; so are the counts."""
    n_pairs, n_markets = len(pi), grid.shape[1]
    cell_n = np.zeros((n_pairs, n_units), np.int64)
    cell_w = np.zeros((n_pairs, n_units))
    cell_d = np.zeros((n_pairs, n_units))
    wins = np.zeros(n_pairs, np.int64)
    ties = np.zeros(n_pairs, np.int64)
    dsum = np.zeros(n_pairs)
    per_cluster = np.bincount(cluster_of_market, minlength=n_units)
    step = max(1, _CHUNK_CELLS // max(n_markets, 1))
    for start in range(0, n_pairs, step):
        stop = min(n_pairs, start + step)
        rows = stop - start
        a, b = pi[start:stop], pj[start:stop]
        both = has[a] & has[b]
        d = grid[a] - grid[b]
        edge = d if sign > 0 else -d
        win = edge > tie_tol
        lose = (edge < -tie_tol) & ~win
        # The row (pair) and the (row, cluster) of each comparison; a market not shared goes
        # to one extra bin.
        row = np.repeat(np.arange(rows), n_markets)
        key = (np.arange(rows) * n_units)[:, None] + cluster_of_market
        dump = rows * n_units
        size = dump + 1
        if both.all():  # every market shared: a cluster's count is its number of markets
            cell_n[start:stop] = per_cluster
            key = key.reshape(-1)
        else:
            row[~both.reshape(-1)] = rows
            key[~both] = dump
            key = key.reshape(-1)
            cell_n[start:stop] = np.bincount(key, minlength=size)[:dump].reshape(rows, n_units)
        halves = win.view(np.uint8) + (~lose).view(np.uint8)  # 2 win, 1 tie, 0 loss
        cell_w[start:stop] = (0.5 * np.bincount(key, halves.reshape(-1), size)[:dump]).reshape(
            rows, n_units
        )
        d = d.reshape(-1)
        cell_d[start:stop] = np.bincount(key, d, size)[:dump].reshape(rows, n_units)
        dsum[start:stop] = np.bincount(row, d, rows + 1)[:rows]
        wins[start:stop] = np.count_nonzero(win & both, axis=1)
        ties[start:stop] = np.count_nonzero(~win & ~lose & both, axis=1)
    cell = np.flatnonzero(cell_n.T)  # (cluster, pair) order
    unit, pair = cell // n_pairs, cell % n_pairs
    cells = Cells(
        pair=pair,
        unit=unit,
        w=cell_w[pair, unit],
        n=cell_n[pair, unit].astype(float),
        unit_size=np.ones(n_units, dtype=np.int64),
        extra=cell_d[pair, unit],
    )
    return cells, wins, ties, dsum
