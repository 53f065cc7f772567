"""Bradley-Terry ratings with seeded bootstrap intervals.

A bootstrap round resamples units (games, or groups of games such as every game played on
one market instance) with replacement and refits. Units may lie in strata (a tournament's
configs, each with a fixed number of markets): a round then draws each stratum's own number
of units from that stratum alone, so the mix of strata is the design's in every round and
adds no variance the design does not have. Nothing here loops over games: the games
are first summed into cells, one per (unit, pair), which are the sufficient statistics of
the fit; a round only draws each unit's multiplicity and sums cells per pair, and every
round's fit is solved in one batch (``fit_theta`` with a leading resample axis).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from tournaments.ratings.bradley_terry import (
    DEFAULT_L2,
    Games,
    PairTable,
    aggregate,
    fit_theta,
    labels,
    warn_if_disconnected,
)
from tournaments.ratings.scale import (
    ELO_SCALE,
    RatedPlayer,
    RatingScale,
    check_confidence,
    percentile_interval,
    rated_rows,
)


@dataclass(frozen=True)
class Cells:
    """Resampling units for a bootstrap, summed per (unit, pair).

    A round draws ``D = sum(unit_size)`` items (games or groups) uniformly with replacement,
    which gives every unit a multiplicity ``m ~ Multinomial(D, unit_size / D)``; cell c then
    adds ``m[unit[c]] * w[c]`` to the score and ``m[unit[c]] * n[c]`` to the count of pair
    ``pair[c]`` (and ``m[unit[c]] * extra[c]`` to any extra per-pair sum). With ``stratum``
    (one integer code per unit) the draws are made per stratum: its own D from its own units.
    """

    pair: np.ndarray
    unit: np.ndarray
    w: np.ndarray
    n: np.ndarray
    unit_size: np.ndarray
    extra: np.ndarray | None = None
    stratum: np.ndarray | None = None

    def can_vary(self) -> bool:
        """Whether a resample can differ from the data: some stratum draws at least two
        items. With one unit in every stratum each round is the data itself, and an
        interval from such rounds would be a point that claims a precision nobody measured."""
        if self.stratum is None:
            return int(self.unit_size.sum()) >= 2
        return bool((np.bincount(self.stratum, self.unit_size) >= 2).any())

    @classmethod
    def by_unit(
        cls,
        pair: np.ndarray,
        unit: np.ndarray,
        s: np.ndarray,
        n_units: int,
        extra: np.ndarray | None = None,
        stratum: np.ndarray | None = None,
    ) -> Cells:
        """One cell per (unit, pair) holding the sums of its games; every unit has size 1
        (one draw of a round is one whole unit). Sums run in the order given. ``stratum``:
        one code per unit, or None."""
        n_pairs = int(pair.max(initial=-1)) + 1
        size = n_units * n_pairs
        key = unit * n_pairs + pair
        n = np.bincount(key, minlength=size)
        cell = np.flatnonzero(n)
        return cls(
            pair=cell % max(n_pairs, 1),
            unit=cell // max(n_pairs, 1),
            w=np.bincount(key, s, size)[cell],
            n=n[cell].astype(float),
            unit_size=np.ones(n_units, dtype=np.int64),
            extra=None if extra is None else np.bincount(key, extra, size)[cell],
            stratum=stratum,
        )


def multiplicity_sampler(
    unit_size: np.ndarray, stratum: np.ndarray | None = None
) -> Callable[[np.random.Generator], np.ndarray]:
    """Draws one round's multiplicity per unit: ``sum(unit_size)`` draws over all units, or,
    with ``stratum`` (one code per unit) of more than one value, each stratum's own number
    of draws over its own units, the strata drawn in the order of their codes. (One stratum
    draws exactly as no strata do.)"""
    codes = None if stratum is None else np.unique(stratum)
    if codes is None or len(codes) < 2:
        return _sampler(unit_size)
    parts = [np.flatnonzero(stratum == c) for c in codes]
    samplers = [(idx, _sampler(unit_size[idx])) for idx in parts]

    def draw(rng: np.random.Generator) -> np.ndarray:
        m = np.zeros(len(unit_size), np.int64)
        for idx, sample in samplers:
            m[idx] = sample(rng)
        return m

    return draw


def _sampler(unit_size: np.ndarray) -> Callable[[np.random.Generator], np.ndarray]:
    draws = int(unit_size.sum())
    k = len(unit_size)
    if 8 * k <= draws:
        # Few distinct units (e.g. win, draw, loss per pair): one multinomial, O(k).
        probs = unit_size / draws
        return lambda rng: rng.multinomial(draws, probs)
    # Many units: draw the items and count them, O(D) and cheaper than k binomials.
    item_unit = np.repeat(np.arange(k), unit_size)
    return lambda rng: np.bincount(item_unit[rng.integers(draws, size=draws)], minlength=k)


def resample_fits(
    cells: Cells,
    table: PairTable,
    n_players: int,
    rounds: int,
    rng: np.random.Generator,
    l2: float,
    x0: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per round: theta (rounds x players; NaN for a player with no game in the round), and
    per-pair counts and sums of ``cells.extra`` (rounds x pairs each)."""
    n_pairs = len(table.pi)
    draw = multiplicity_sampler(cells.unit_size, cells.stratum)
    mult = np.stack([draw(rng) for _ in range(rounds)]).astype(float)  # rounds x units
    # Cells per round summed per pair: a (units x pairs) matrix product when dense enough.
    w = _per_pair(mult, cells, cells.w, n_pairs)
    counts = _per_pair(mult, cells, cells.n, n_pairs)
    extra = (
        np.zeros((rounds, n_pairs))
        if cells.extra is None
        else _per_pair(mult, cells, cells.extra, n_pairs)
    )
    thetas = fit_theta(PairTable(table.pi, table.pj, w, counts), n_players, l2, x0)
    # A player with no game in this resample has a rating only from the ridge term: it
    # says nothing, so it is left out of that player's interval.
    games = np.zeros((rounds, n_players))
    np.add.at(games.T, table.pi, counts.T)
    np.add.at(games.T, table.pj, counts.T)
    thetas[games == 0] = np.nan
    return thetas, counts, extra


def _per_pair(mult: np.ndarray, cells: Cells, values: np.ndarray, n_pairs: int) -> np.ndarray:
    units = mult.shape[1]
    if units * n_pairs <= 4 * len(cells.pair) + 1_000_000:
        dense = np.zeros((units, n_pairs))
        np.add.at(dense, (cells.unit, cells.pair), values)
        return mult @ dense
    return np.stack(
        [np.bincount(cells.pair, m[cells.unit] * values, n_pairs) for m in mult]
    )  # many sparse units (games resampled one by one): one pass per round


def bootstrap_bt(
    a: Sequence[str],
    b: Sequence[str],
    scores: ArrayLike,
    *,
    group: Sequence[Hashable] | np.ndarray | None = None,
    strata: Sequence[Hashable] | np.ndarray | None = None,
    **options: Any,
) -> list[RatedPlayer]:
    """Bradley-Terry ratings with seeded bootstrap intervals, best first, of the games named
    by (a, b, scores).

    ``group=None`` resamples the games themselves (as many draws as games); ``group`` (one
    hashable label per game, e.g. a market or match id, or integer codes) resamples whole
    groups (as many draws as groups), so games that share a market stay together and their
    correlation widens the interval as it should. ``strata`` (one hashable label per game,
    e.g. the config; every game of a group in one stratum) resamples within each stratum,
    as many draws there as it has groups (games without ``group``): the design's fixed
    number of markets per config stays fixed. Every other option is that of
    :func:`bootstrap_games`.
    """
    g = Games.from_names(a, b, scores)
    n = len(g.s)
    if strata is not None and group is None:
        group = np.arange(n)
    codes = None if group is None else labels(group, n, "group")
    stratum = None
    if strata is not None:
        stratum = group_strata(codes, labels(strata, n, "strata")[0])
    return bootstrap_games(g, group=codes, strata=stratum, **options)


def group_strata(group: tuple[np.ndarray, int], strata: np.ndarray) -> np.ndarray:
    """The stratum code of each group, from one group code and one stratum code per item;
    a group whose items lie in two strata is an error."""
    codes, n_groups = group
    of_group = np.full(n_groups, -1, np.int64)
    of_group[codes] = strata
    if not np.array_equal(of_group[codes], strata):
        raise ValueError("all items of one group must lie in one stratum")
    return of_group


def bootstrap_games(
    g: Games,
    *,
    rounds: int = 200,
    seed: int = 0,
    reference: str | None = None,
    group: tuple[np.ndarray, int] | None = None,
    strata: np.ndarray | None = None,
    confidence: float = 0.95,
    scale: RatingScale = ELO_SCALE,
    l2: float = DEFAULT_L2,
) -> list[RatedPlayer]:
    """Bradley-Terry ratings with seeded bootstrap intervals, best first.

    ``rating`` is ``bradley_terry`` on all the data. Each of ``rounds`` bootstrap rounds
    resamples with replacement and refits: the games themselves (``group=None``), or whole
    groups (``group`` = (codes, number of groups), codes numbered in the groups' sorted
    order). ``strata`` (with ``group``: one integer code per group) draws each stratum's
    groups from that stratum alone. With one group in every stratum (one market, say) a
    round can only repeat the data: the bounds are NaN and every rank is 1.

    ``lower``/``upper`` are the ``(1 - confidence)/2`` and ``(1 + confidence)/2`` percentiles
    of the refitted ratings, each round pinned like the point estimate (``reference`` at
    ``scale.initial``, or the mean there; the reference's own interval is then a point, and
    the others are intervals relative to it). ``rank`` = 1 + the number of players whose
    lower bound is above this player's upper bound (FastChat's convention).

    The generator is ``np.random.default_rng(seed)``: the same seed gives the same table,
    whatever the order of the records.
    """
    check_confidence(rounds, confidence)
    if strata is not None and group is None:
        raise ValueError("strata need groups: one stratum code per group")
    if g.n_players == 0:
        return []
    ref = g.index_of(reference)
    table = aggregate(g)
    warn_if_disconnected(table, g.players)
    theta = fit_theta(table, g.n_players, l2)

    p = g.n_players
    table_keys = table.pi * p + table.pj  # sorted and unique
    if group is None:
        key, s = g.pair_keys()
        # A cell holds the games of one pair with one score value; they are interchangeable.
        change = np.flatnonzero((np.diff(key) != 0) | (np.diff(s) != 0)) + 1
        first = np.concatenate([[0], change])
        cells = Cells(
            pair=np.searchsorted(table_keys, key[first]),
            unit=np.arange(len(first)),
            w=s[first],
            n=np.ones(len(first)),
            unit_size=np.diff(np.append(first, len(key))),
        )
    else:
        codes, n_groups = group
        pair = np.searchsorted(table_keys, g.ia * p + g.ib)
        # Summed in (group, pair, score) order: the sums do not depend on record order.
        order = np.lexsort((g.s, pair, codes))
        stratum = None if strata is None else np.asarray(strata, np.int64)
        if stratum is not None and stratum.shape != (n_groups,):
            raise ValueError(f"strata must hold one code per group ({n_groups})")
        cells = Cells.by_unit(pair[order], codes[order], g.s[order], n_groups, stratum=stratum)

    fit = Fit(g.players, table, theta, ref, scale, l2)
    rows, _, _ = fit.rate(cells, rounds, seed, confidence, g.games_per_player())
    return rows


@dataclass(frozen=True)
class Fit:
    """A Bradley-Terry fit on all the data, ready to be bootstrapped."""

    players: list[str]
    table: PairTable
    theta: np.ndarray
    ref: int | None
    scale: RatingScale
    l2: float

    def rate(
        self, cells: Cells, rounds: int, seed: int, confidence: float, games: np.ndarray
    ) -> tuple[list[RatedPlayer], np.ndarray, np.ndarray]:
        """Leaderboard rows with bootstrap intervals from ``rounds`` resamples of ``cells``
        (generator ``default_rng(seed)``), and each round's per-pair counts and extra sums.
        Cells that cannot vary (one unit in every stratum) give NaN bounds and NaN extra
        sums, and every row rank 1."""
        rng = np.random.default_rng(seed)
        p = len(self.players)
        thetas, counts, extra = resample_fits(
            cells, self.table, p, rounds, rng, self.l2, self.theta
        )
        if not cells.can_vary():  # every round is the data: no interval, every rank 1
            thetas = np.full_like(thetas, np.nan)
            extra = np.full_like(extra, np.nan)
        factor = self.scale.factor
        lower, upper = percentile_interval(self.scale.pin(thetas * factor, self.ref), confidence)
        ratings = self.scale.pin(self.theta * factor, self.ref)
        return rated_rows(self.players, ratings, lower, upper, games), counts, extra
