"""Analyses of a tournament's market rows: ratings, within-side leaderboards, surplus split,
disclosure effect. Data in, data out: tables and plots render the results elsewhere
(``tournaments.tables``, ``tournaments.plots``).

Every function takes a ``Records`` (``ResultStore.records()``) or a mapping of columns
as ``Records.from_columns`` reads them; rows may come in any order, since ``Records``
sorts them by (match id, market), so the same records and seed give the same results,
bit for bit.

Market instances depend only on (config, tournament seed, index), so the key
(config, market) names one instance, met by every pairing under every rule. The
disclosure effect pairs rows on that key; the ratings resample whole instances in
their bootstrap.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.stats import mean_ci_rows
from tournaments import ratings as rt
from tournaments.background import Background
from tournaments.effects import (
    EFFECT_METRICS,
    EffectRow,
    bootstrap_mean_ci,
    disclosure_effect,
    informative_effects,
)
from tournaments.records import Records

SPLIT_METRICS = (
    "profit",
    "buyer_surplus",
    "buyer_surplus_human",
    "buyer_surplus_agent",
    "efficiency",
    "capture",
    "deal_rate",
    "seller_violations",
    "buyer_violations",
)
"""Columns of :func:`surplus_split`, each as mean and 95% Student-t interval per market."""

SIDES = ("seller", "buyer")

SCORE_COLUMNS = ("profit", "buyer_surplus", "w_star")
"""The stored metrics of a market's rating score."""
COLUMNS = tuple(dict.fromkeys((*SCORE_COLUMNS, *SPLIT_METRICS, *EFFECT_METRICS)))
"""The stored metrics the analyses read (``ResultStore.records(COLUMNS)``)."""


@dataclass(frozen=True)
class RatingRow:
    """One player on the common seller-buyer scale."""

    player: str
    side: str
    elo: float
    """Online Elo averaged over shuffled orders."""
    bt: float
    """Bradley-Terry maximum likelihood."""
    lower: float
    """95% bootstrap interval of ``bt`` (market instances resampled)."""
    upper: float
    rank: int
    """1 + the number of players whose lower bound is above this one's upper bound."""
    games: int


@dataclass(frozen=True)
class SplitRow:
    """One pairing's mean outcome per market."""

    seller: str
    buyer: str
    disclosure: str
    config: str
    n: int
    """Markets played."""
    metrics: dict[str, tuple[float, float, float]]
    """Metric -> (mean, lower, upper): the mean per market, 95% Student-t interval over the
    markets where the metric is finite."""

    def mean(self, metric: str) -> float:
        return self.metrics[metric][0]


@dataclass(frozen=True)
class Analysis:
    """Every result of a run, as computed by :func:`analyze`."""

    sides: dict[str, rt.PairedLeaderboard]
    """:func:`side_leaderboards`, keyed by side."""
    split: tuple[SplitRow, ...]
    """:func:`surplus_split`."""
    effect: tuple[EffectRow, ...]
    """:func:`disclosure_effect` of each rule played beside hidden."""
    markets: int
    """Market rows analysed."""
    _ratings: tuple[RatingRow, ...] | _RatingsJob = field(repr=False, compare=False)
    study: Any = None
    """The disclosure study (``tournaments.disclosure.DisclosureStudy``) of a run that is
    one (configs that differ only in the agent share); None otherwise."""

    @property
    def ratings(self) -> tuple[RatingRow, ...]:
        """:func:`ratings_table`, best first. Elo may still be running in a second process
        when ``analyze`` returns; the first read waits for it, so a report can draw what
        needs no rating meanwhile."""
        if isinstance(self._ratings, _RatingsJob):
            object.__setattr__(self, "_ratings", tuple(self._ratings.rows()))
        return self._ratings  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# Surplus split
# ---------------------------------------------------------------------------


def surplus_split(records: Records, metrics: Sequence[str] = SPLIT_METRICS) -> list[SplitRow]:
    """One row per pairing (seller, buyer, disclosure, config), sorted by (config,
    disclosure, seller, buyer): ``n`` markets, and for each metric its mean per market with
    a 95% Student-t interval over the finite values."""
    rec = Records.from_columns(records)
    t = rec.matches
    # A match's rows are contiguous: each pairing is one slice.
    bounds = np.searchsorted(rec.match, np.arange(len(t) + 1))
    size = np.diff(bounds)
    played = np.flatnonzero(size)
    # (mean, lower, upper) per match and metric; the slices of one length form a matrix.
    ci = {name: np.full((len(t), 3), np.nan) for name in metrics}
    for n in np.unique(size[played]):
        same = played[size[played] == n]
        rows = bounds[same][:, None] + np.arange(n)
        for name in metrics:
            ci[name][same] = np.column_stack(mean_ci_rows(rec.metrics[name][rows]))
    cis = {name: [tuple(x) for x in v.tolist()] for name, v in ci.items()}
    order = sorted(
        played.tolist(), key=lambda m: (t.config[m], t.disclosure[m], t.seller[m], t.buyer[m])
    )
    return [
        SplitRow(
            seller=t.seller[m],
            buyer=t.buyer[m],
            disclosure=t.disclosure[m],
            config=t.config[m],
            n=int(size[m]),
            metrics={name: cis[name][m] for name in metrics},
        )
        for m in order
    ]


# ---------------------------------------------------------------------------
# Ratings
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scored:
    """Rows with a finite seller score: the score, and codes for players and instances."""

    rec: Records
    s: np.ndarray
    players: list[str]
    side: dict[str, str]
    seller: np.ndarray  # per row: the seller's code into players
    buyer: np.ndarray
    instance: np.ndarray  # per row: (config, market) numbered in sorted order
    config: np.ndarray  # per instance: its config's code, the bootstrap's stratum


def _scored(records: Records | _Scored) -> _Scored:
    if isinstance(records, _Scored):
        return records
    rec = Records.from_columns(records)
    s = np.asarray(rt.score(rec["profit"], rec["buyer_surplus"], rec["w_star"]), dtype=float)
    rec = rec.take(np.isfinite(s))
    s = s[np.isfinite(s)]
    t = rec.matches
    sellers, buyers = list(t.seller), list(t.buyer)
    played = set(rec.match.tolist())
    # One scale: names are prefixed by side only if a name is on both.
    if {sellers[m] for m in played} & {buyers[m] for m in played}:
        sellers = [f"seller:{x}" for x in sellers]
        buyers = [f"buyer:{x}" for x in buyers]
    side = {sellers[m]: "seller" for m in played} | {buyers[m]: "buyer" for m in played}
    players = sorted(side)
    index = {p: k for k, p in enumerate(players)}
    seller = np.array([index.get(x, -1) for x in sellers], np.int64)[rec.match]
    buyer = np.array([index.get(x, -1) for x in buyers], np.int64)[rec.match]
    _, config = t.codes("config")
    span = int(rec.market.max(initial=0)) + 1
    key = config[rec.match] * span + rec.market
    keys, instance = np.unique(key, return_inverse=True)
    return _Scored(rec, s, players, side, seller, buyer, instance.reshape(-1), keys // span)


def ratings_table(
    records: Records,
    reference: str | None = None,
    rounds: int = 200,
    seed: int = 0,
    *,
    shuffles: int = 100,
) -> list[RatingRow]:
    """Sellers and buyers on one rating scale, best first.

    Each market is a game between its seller and buyer entries, worth
    ``ratings.score(profit, buyer_surplus, w_star)`` to the seller and one minus that to the
    buyer (markets with a NaN score are left out): online Elo averaged over ``shuffles``
    seeded orders, and Bradley-Terry maximum likelihood with a 95% bootstrap interval over
    ``rounds`` resamples of market instances (config, index), so every game played on one
    instance stays together, drawn per config (each config's own number of instances from
    its own: the spec fixes the markets per config, and a round keeps that mix).
    ``reference`` (an entry name) is pinned at 1000 on both scales; without it the mean is.
    """
    return _RatingsJob(_scored(records), reference, rounds, seed, shuffles).rows()


# Games from which Elo runs in a second process while the other analyses run: below this,
# starting the process costs more than it saves.
BACKGROUND_ELO_GAMES = 100_000
# Seeded orders of the Elo column: Elo is secondary; Bradley-Terry carries the intervals.
ELO_SHUFFLES = 32


class _RatingsJob:
    """The ratings of :func:`ratings_table`, with Elo (the one sequential computation)
    started first, optionally in a second process, and collected by ``rows()``.

    ``elo``: False computes Elo here; True starts it in a second process; a ``Background``
    is a call started earlier (``report.start_elo``) returning (games, ratings), used when
    it saw the same games."""

    def __init__(
        self,
        sc: _Scored,
        reference: str | None,
        rounds: int,
        seed: int,
        shuffles: int,
        elo: bool | Background = False,
    ) -> None:
        self.sc, self.rounds, self.seed = sc, rounds, seed
        self.games = None
        if len(sc.s) == 0:
            return
        if reference is not None and reference not in sc.side:
            prefixed = [p for p in sc.side if p.split(":", 1)[-1] == reference]
            if len(prefixed) != 1:
                raise ValueError(f"reference {reference!r} is not an entry of these records")
            reference = prefixed[0]
        self.reference = reference
        self.games = rt.Games.from_codes(sc.players, sc.seller, sc.buyer, sc.s)
        self.options = {"shuffles": shuffles, "seed": seed, "reference": reference}
        if elo is True:
            elo = Background("tournaments.analysis:elo_of_games", self.games, **self.options)
        self.elo = elo

    def elo_ratings(self) -> dict[str, float]:
        if isinstance(self.elo, Background):
            games, ratings = self.elo.result()
            # A run still being written may have grown since the records were read.
            if games == len(self.sc.s) and set(ratings) == set(self.sc.players):
                return ratings
        return rt.elo_shuffled_games(self.games, **self.options)

    def rows(self) -> list[RatingRow]:
        if self.games is None:
            return []
        sc = self.sc
        groups = (sc.instance, int(sc.instance.max()) + 1)
        bt = rt.bootstrap_games(
            self.games,
            rounds=self.rounds,
            seed=self.seed,
            reference=self.reference,
            group=groups,
            strata=sc.config,
        )
        elo = self.elo_ratings()
        return [
            RatingRow(
                player=r.player,
                side=sc.side[r.player],
                elo=elo[r.player],
                bt=r.rating,
                lower=r.lower,
                upper=r.upper,
                rank=r.rank,
                games=r.games,
            )
            for r in bt
        ]


def elo_of_games(games: rt.Games, **options) -> tuple[int, dict[str, float]]:
    """(number of games, Elo ratings): what a background Elo call returns."""
    return len(games.s), rt.elo_shuffled_games(games, **options)


def elo_of_records(
    records: Records, reference: str | None, seed: int = 0, shuffles: int = ELO_SHUFFLES
) -> tuple[int, dict[str, float]]:
    """(number of games, Elo ratings) of records, as :func:`analyze` computes them: for a
    second process that reads the records itself (``report.start_elo``)."""
    sc = _scored(records)
    job = _RatingsJob(sc, reference, 0, seed, shuffles)
    return (len(sc.s), job.elo_ratings()) if job.games is not None else (0, {})


def side_leaderboards(
    records: Records,
    reference: str | None = None,
    rounds: int = 200,
    seed: int = 0,
) -> dict[str, rt.PairedLeaderboard]:
    """Within-side leaderboards from paired comparisons on identical markets.

    ``"seller"``: each seller's market score compared with the other sellers' on the same
    (buyer, disclosure, config, market) coordinates; ``"buyer"``: each buyer entry's score
    (one minus the seller's) on the same (seller, disclosure, config, market). See
    ``ratings.paired_leaderboard``. A side with fewer than two entries has no leaderboard.
    ``reference`` is pinned on the side it belongs to.
    """
    sc = _scored(records)
    rec, t = sc.rec, sc.rec.matches
    out: dict[str, rt.PairedLeaderboard] = {}
    for side, other, values in (("seller", "buyer", sc.s), ("buyer", "seller", 1.0 - sc.s)):
        players, code = t.codes(side)
        entry = code[rec.match]
        entries = {players[k] for k in np.flatnonzero(np.bincount(entry, minlength=len(players)))}
        if len(entries) < 2:
            continue
        # A market's coordinates but for the side's own entry: the opponent, the rule and
        # the instance. One instance meets every opponent under every rule: those
        # comparisons are correlated, so the bootstrap resamples instances, not coordinates,
        # each config's from its own (its stratum).
        opponent = t.codes(other)[1][rec.match]
        rule = t.codes("disclosure")[1][rec.match]
        coords = (opponent * (int(rule.max()) + 1) + rule) * (int(sc.instance.max()) + 1)
        out[side] = rt.paired_leaderboard(
            entry,
            coords + sc.instance,
            values,
            rounds=rounds,
            seed=seed,
            reference=reference if reference in entries else None,
            clusters=sc.instance,
            strata=sc.config[sc.instance],
            players=players,
        )
    return out


# ---------------------------------------------------------------------------
# All of it
# ---------------------------------------------------------------------------


def analyze(
    records: Records,
    reference: str | None = None,
    seed: int = 0,
    rating_rounds: int = 200,
    effect_rounds: int = 1000,
    *,
    background: bool | Background | None = None,
) -> Analysis:
    """Every analysis of the records with one seed. The disclosure effect is measured for
    each rule played beside ``hidden`` (mandatory, voluntary), each against hidden.

    ``background``: run Elo in a second process while the other analyses run (None: when
    there are at least ``BACKGROUND_ELO_GAMES`` games and two CPUs), or a call already
    started (``report.start_elo``). The results are the same either way."""
    rec = Records.from_columns(records)
    rules = {rec.matches.disclosure[m] for m in set(rec.match.tolist())}
    treatments = [t for t in ("mandatory", "voluntary") if t in rules and "hidden" in rules]
    scored = _scored(rec)
    if background is None:
        background = len(scored.s) >= BACKGROUND_ELO_GAMES and (os.cpu_count() or 1) >= 2
    ratings = _RatingsJob(scored, reference, rating_rounds, seed, ELO_SHUFFLES, background)
    sides = side_leaderboards(scored, reference=reference, rounds=rating_rounds, seed=seed)
    split = tuple(surplus_split(rec))
    effect = tuple(
        row
        for t in treatments
        for row in disclosure_effect(rec, rounds=effect_rounds, seed=seed, treatment=t)
    )
    return Analysis(sides=sides, split=split, effect=effect, markets=rec.rows, _ratings=ratings)


__all__ = [
    "COLUMNS",
    "EFFECT_METRICS",
    "SIDES",
    "SPLIT_METRICS",
    "Analysis",
    "EffectRow",
    "RatingRow",
    "SplitRow",
    "analyze",
    "bootstrap_mean_ci",
    "disclosure_effect",
    "informative_effects",
    "ratings_table",
    "side_leaderboards",
    "surplus_split",
]
