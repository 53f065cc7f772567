"""Ratings from tournament records: per-market scores, Elo, Bradley-Terry, bootstrap intervals.

Data model
----------
Every rating function takes the same three columns, one entry per game::

    a[i], b[i]   player names (str); a[i] != b[i]
    scores[i]    the score of a[i] against b[i], a float in [0, 1]; b[i] scores 1 - scores[i]

Fractional scores are allowed and used as they are (0.7 means a took 70% of that game).
Sellers and buyers share one scale: pass seller entries as ``a``, buyer entries as ``b`` and
the seller's market score (see :func:`score`) as ``scores``. Names must be unique across the
two sides, so prefix them when a name could be both (``"seller:greedy"``, ``"buyer:greedy"``).

The batch methods (Bradley-Terry and its bootstrap, the paired leaderboard) do not depend on
the order of the records. Online Elo does; sort the records with :func:`canonical_order`
(by match id, then market index) first so that the result does not depend on the order in
which matches finished.

Rating scale
------------
For ratings R_a, R_b on the usual Elo scale (``base=10``, ``scale=400``)::

    P(a beats b) = E_ab = 1 / (1 + base ** ((R_b - R_a) / scale))

so 400 points of difference are odds of 10:1. Internally Bradley-Terry is fitted in natural
log-odds units theta = R * ln(base) / scale. A named ``reference`` is pinned at ``initial``
(or, without one, the mean rating is ``initial``); only differences are identified.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import expit

from arena.rewards import rating_score as score

__all__ = [
    "PairedComparison",
    "PairedLeaderboard",
    "RatedPlayer",
    "bootstrap_bt",
    "bradley_terry",
    "canonical_order",
    "elo",
    "elo_shuffled",
    "expected_score",
    "paired_leaderboard",
    "ranks_from_intervals",
    "score",
    "to_table",
]

DEFAULT_K = 4.0
"""Default Elo K (points per unit of score surprise); see :func:`elo` for the reasoning."""

DEFAULT_L2 = 1e-6
"""Ridge weight on the mean negative log-likelihood of the Bradley-Terry fit."""

_NEWTON_MAX_ITER = 500
_NEWTON_TOL = 1e-15


# ---------------------------------------------------------------------------
# Scores and results
# ---------------------------------------------------------------------------


def expected_score(
    r_a: ArrayLike, r_b: ArrayLike, *, base: float = 10.0, scale: float = 400.0
) -> float | np.ndarray:
    """Expected score of a against b: ``1 / (1 + base ** ((r_b - r_a) / scale))``."""
    out = 1.0 / (1.0 + np.power(base, (np.asarray(r_b, float) - np.asarray(r_a, float)) / scale))
    if np.ndim(out) == 0:
        return float(out)
    return out


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

    ratings: tuple[RatedPlayer, ...]
    """Within-side Bradley-Terry ratings, best first."""
    pairs: tuple[PairedComparison, ...]
    """Every pair of entries (a before b in name order) with at least one shared market."""

    def pair_rows(self) -> list[dict[str, Any]]:
        """The pairwise comparisons as rows for ``tabulate``."""
        return [asdict(p) for p in self.pairs]


def ranks_from_intervals(lower: ArrayLike, upper: ArrayLike) -> np.ndarray:
    """rank_i = 1 + #{j : lower_j > upper_i}: a player is only ranked below a player whose
    whole interval lies above its own, so overlapping intervals share a rank."""
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    return 1 + (lo[None, :] > hi[:, None]).sum(axis=1)


def to_table(
    ratings: Mapping[str, float] | Iterable[RatedPlayer] | PairedLeaderboard,
) -> list[dict[str, Any]]:
    """Rows (dicts) best first, ready for ``tabulate(rows, headers="keys")``.

    A mapping ``player -> rating`` (from :func:`elo` or :func:`bradley_terry`) gives columns
    rank, player, rating, with rank = 1 + the number of strictly higher ratings. Rows from
    :func:`bootstrap_bt` or a :class:`PairedLeaderboard` give rank, player, rating, lower,
    upper, games. Ties in rating are ordered by name.
    """
    if isinstance(ratings, PairedLeaderboard):
        ratings = ratings.ratings
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


def canonical_order(match_ids: ArrayLike, market_indices: ArrayLike) -> np.ndarray:
    """Indices that sort records by (match id, market index), stable for equal keys.

    Records arrive in whatever order the workers finished; online Elo applied in this order
    gives the same result for every schedule.
    """
    match = np.asarray(match_ids)
    index = np.asarray(market_indices)
    if match.shape != index.shape or match.ndim != 1:
        raise ValueError("match_ids and market_indices must be 1-D and of equal length")
    return np.lexsort((index, match))


# ---------------------------------------------------------------------------
# Input handling
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Games:
    players: list[str]
    ia: np.ndarray
    ib: np.ndarray
    s: np.ndarray

    @property
    def n_players(self) -> int:
        return len(self.players)

    def games_per_player(self) -> np.ndarray:
        p = self.n_players
        return np.bincount(self.ia, minlength=p) + np.bincount(self.ib, minlength=p)


def _encode(a: Sequence[str], b: Sequence[str], scores: ArrayLike) -> _Games:
    a_arr = np.asarray(a, dtype=str).reshape(-1)
    b_arr = np.asarray(b, dtype=str).reshape(-1)
    s = np.asarray(scores, dtype=float).reshape(-1)
    if not (len(a_arr) == len(b_arr) == len(s)):
        raise ValueError(
            f"a, b and scores must have equal lengths (got {len(a_arr)}, {len(b_arr)}, {len(s)})"
        )
    if not np.all(np.isfinite(s)) or np.any((s < 0) | (s > 1)):
        raise ValueError("scores must be finite and in [0, 1]")
    names, inv = np.unique(np.concatenate([a_arr, b_arr]), return_inverse=True)
    n = len(s)
    ia = inv[:n].astype(np.int64)
    ib = inv[n:].astype(np.int64)
    if np.any(ia == ib):
        bad = names[ia[np.argmax(ia == ib)]]
        raise ValueError(f"a game of a player against itself: {bad!r}")
    return _Games([str(x) for x in names], ia, ib, s)


def _labels(values: Iterable[Hashable], n: int, what: str) -> tuple[np.ndarray, int]:
    """Dense integer codes 0..G-1 for hashable labels, numbered in sorted label order (by
    ``repr`` when the labels do not compare), so the codes do not depend on record order."""
    first: dict[Hashable, int] = {}
    codes = np.fromiter((first.setdefault(v, len(first)) for v in values), dtype=np.int64)
    if len(codes) != n:
        raise ValueError(f"{what} must have one label per record (got {len(codes)}, expected {n})")
    labels = list(first)
    try:
        order = sorted(range(len(labels)), key=labels.__getitem__)
    except TypeError:
        order = sorted(range(len(labels)), key=lambda k: repr(labels[k]))
    renumber = np.empty(len(labels), dtype=np.int64)
    renumber[order] = np.arange(len(labels))
    return renumber[codes], len(labels)


def _index_of(players: list[str], name: str | None) -> int | None:
    if name is None:
        return None
    try:
        return players.index(name)
    except ValueError:
        raise ValueError(f"reference {name!r} is not among the players") from None


def _shift(ratings: np.ndarray, ref: int | None, initial: float) -> np.ndarray:
    """Shift so that the reference (or the mean, without one) is ``initial``."""
    if ref is None:
        return ratings + (initial - ratings.mean())
    out = ratings + (initial - ratings[ref])
    out[ref] = initial  # exact, whatever the rounding of the shift
    return out


# ---------------------------------------------------------------------------
# Elo
# ---------------------------------------------------------------------------


def elo(
    a: Sequence[str],
    b: Sequence[str],
    scores: ArrayLike,
    *,
    k: float = DEFAULT_K,
    base: float = 10.0,
    scale: float = 400.0,
    initial: float = 1000.0,
    reference: str | None = None,
    start: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Online Elo over the games in the given order.

    Every player starts at ``start.get(name, initial)``. For each game (a, b, s)::

        E_a  = 1 / (1 + base ** ((R_b - R_a) / scale))
        R_a += k * (s - E_a)
        R_b -= k * (s - E_a)

    Updates are zero-sum, so the mean rating stays at its start. Finally, if ``reference`` is
    given, all ratings are shifted so that it sits at ``initial``.

    Choice of K: Elo is stochastic gradient ascent on the Bradley-Terry log-likelihood with a
    step of K points. Near equal strength a game moves the expectation by about
    ``K * ln(base) / (4 * scale)`` per point of rating gap, so a rating forgets its past over
    roughly ``4 * scale / (K * ln(base))`` of its own games (about 170 for K=4, 22 for K=32)
    and keeps a stationary noise of about ``sqrt(K * scale / (2 ln(base)))`` points for
    win/loss outcomes (about 19 points for K=4, 53 for K=32; less for fractional scores).
    Tournaments play thousands of games per pair, so the small K=4 (as in FastChat) costs
    little in convergence and keeps the noise well below the gaps worth reporting. Chess's
    K=32 suits a few games per player, not this.

    Results depend on the order; see :func:`canonical_order` and :func:`elo_shuffled`.
    """
    g = _encode(a, b, scores)
    start = start or {}
    r = [float(start.get(p, initial)) for p in g.players]
    for i, j, x in zip(g.ia.tolist(), g.ib.tolist(), g.s.tolist(), strict=True):
        delta = k * (x - 1.0 / (1.0 + base ** ((r[j] - r[i]) / scale)))
        r[i] += delta
        r[j] -= delta
    out = np.asarray(r, dtype=float)
    ref = _index_of(g.players, reference)
    if ref is not None:
        out = _shift(out, ref, initial)
    return dict(zip(g.players, out.tolist(), strict=True))


def elo_shuffled(
    a: Sequence[str],
    b: Sequence[str],
    scores: ArrayLike,
    *,
    shuffles: int = 100,
    seed: int = 0,
    k: float = DEFAULT_K,
    base: float = 10.0,
    scale: float = 400.0,
    initial: float = 1000.0,
    reference: str | None = None,
    start: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Online Elo averaged over ``shuffles`` random orders of the games.

    The orders are ``rng.permutation(n_games)``, drawn one after another from
    ``rng = np.random.default_rng(seed)``; the same seed gives the same result. Each order
    runs the update of :func:`elo` from the same start; the final ratings are averaged over
    orders (so order effects average out) and then shifted so that ``reference``, if given,
    sits at ``initial``.

    All orders run side by side as arrays, so the cost is about one vectorised step per game
    (roughly 10 microseconds), almost independent of ``shuffles``.
    """
    if shuffles < 1:
        raise ValueError("shuffles must be at least 1")
    g = _encode(a, b, scores)
    p, n = g.n_players, len(g.s)
    start = start or {}
    r0 = np.array([float(start.get(name, initial)) for name in g.players])
    rng = np.random.default_rng(seed)
    total = np.zeros(p)
    # Orders run in blocks so that the (games x orders) index tables stay below ~2**24 cells.
    block = max(1, min(shuffles, (1 << 24) // max(n, 1)))
    done = 0
    while done < shuffles:
        width = min(block, shuffles - done)
        order = np.stack([rng.permutation(n) for _ in range(width)], axis=1)  # (n, width)
        offset = (np.arange(width) * p)[None, :]
        rows_a = g.ia[order] + offset
        rows_b = g.ib[order] + offset
        s = g.s[order]
        r = np.tile(r0, width)
        for t in range(n):
            ia, ib = rows_a[t], rows_b[t]
            ra, rb = r[ia], r[ib]
            delta = k * (s[t] - 1.0 / (1.0 + np.power(base, (rb - ra) / scale)))
            r[ia] = ra + delta
            r[ib] = rb - delta
        total += r.reshape(width, p).sum(axis=0)
        done += width
    out = total / shuffles
    ref = _index_of(g.players, reference)
    if ref is not None:
        out = _shift(out, ref, initial)
    return dict(zip(g.players, out.tolist(), strict=True))


# ---------------------------------------------------------------------------
# Bradley-Terry
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _PairTable:
    """Games aggregated by ordered pair: pi beat pj w times out of n (w may be fractional)."""

    pi: np.ndarray
    pj: np.ndarray
    w: np.ndarray
    n: np.ndarray


def _pair_keys(g: _Games) -> tuple[np.ndarray, np.ndarray]:
    """Games sorted by (pair, score) so that every sum below is independent of record order."""
    key = g.ia * g.n_players + g.ib
    order = np.lexsort((g.s, key))
    return key[order], g.s[order]


def _aggregate(g: _Games) -> _PairTable:
    key, s = _pair_keys(g)
    uniq, first = np.unique(key, return_index=True)
    if len(uniq) == 0:
        e = np.zeros(0, dtype=np.int64)
        return _PairTable(e, e, np.zeros(0), np.zeros(0))
    w = np.add.reduceat(s, first)
    n = np.diff(np.append(first, len(key))).astype(float)
    return _PairTable(uniq // g.n_players, uniq % g.n_players, w, n)


def _fit_theta(
    t: _PairTable, n_players: int, l2: float, x0: np.ndarray | None = None
) -> np.ndarray:
    """Minimise the mean negative log-likelihood plus ``l2 * |theta|^2`` by damped Newton.

    With d = theta_i - theta_j and N the total number of games, one pair contributes::

        f_ij = [w * softplus(-d) + (n - w) * softplus(d)] / N
        df/dd = (n * sigmoid(d) - w) / N,   d2f/dd2 = n * sigmoid(d) * sigmoid(-d) / N

    (the first line is ``-(s log p + (1 - s) log(1 - p))`` summed over the pair's games,
    p = sigmoid(d)). The Hessian is a weighted graph Laplacian plus ``2 * l2 * I``, so the
    objective is strictly convex and the minimum unique. Newton with Armijo backtracking
    reaches machine precision in a handful of steps, each one small dense solve (players x
    players), which keeps hundreds of bootstrap refits cheap; a refit starts from the fit on
    all the data.
    """
    total = float(t.n.sum())
    p = n_players
    x = np.zeros(p) if x0 is None else np.array(x0, dtype=float)
    if total == 0:
        return np.zeros(p)
    w = t.w / total
    lose = np.maximum(t.n - t.w, 0.0) / total
    n = t.n / total
    pi, pj = t.pi, t.pj
    diag_i, diag_j, off_ij, off_ji = pi * (p + 1), pj * (p + 1), pi * p + pj, pj * p + pi
    cells = np.concatenate([diag_i, diag_j, off_ij, off_ji])
    ridge = 2.0 * l2 * np.eye(p)

    def value(theta: np.ndarray) -> float:
        d = theta[pi] - theta[pj]
        nll = np.sum(w * np.logaddexp(0.0, -d) + lose * np.logaddexp(0.0, d))
        return float(nll + l2 * (theta @ theta))

    f = value(x)
    for _ in range(_NEWTON_MAX_ITER):
        d = x[pi] - x[pj]
        sig = expit(d)
        gd = n * sig - w
        grad = np.bincount(pi, gd, p) - np.bincount(pj, gd, p) + 2.0 * l2 * x
        h = n * sig * expit(-d)  # not sig * (1 - sig): that cancels for large |d|
        hess = np.bincount(cells, np.concatenate([h, h, -h, -h]), p * p).reshape(p, p) + ridge
        step = np.linalg.solve(hess, -grad)
        decrement = float(-(grad @ step))  # predicted decrease x 2; >= 0
        if decrement <= _NEWTON_TOL:
            # Inside the quadratic region: one more full step reaches machine precision.
            return x + step
        size = 1.0
        while True:
            candidate = x + size * step
            f_new = value(candidate)
            if f_new <= f - 1e-4 * size * decrement or size < 1e-12:
                break
            size *= 0.5
        x, f = candidate, f_new
    return x


def _warn_if_disconnected(t: _PairTable, players: list[str]) -> None:
    p = len(players)
    if p <= 1:
        return
    graph = coo_matrix((np.ones(len(t.pi)), (t.pi, t.pj)), shape=(p, p))
    count, labels = connected_components(graph, directed=False)
    if count > 1:
        groups = [[players[i] for i in np.flatnonzero(labels == c)] for c in range(count)]
        warnings.warn(
            f"the players fall into {count} groups that never meet; ratings are comparable only "
            f"within a group: {groups}",
            RuntimeWarning,
            stacklevel=3,
        )


def bradley_terry(
    a: Sequence[str],
    b: Sequence[str],
    scores: ArrayLike,
    *,
    reference: str | None = None,
    scale: float = 400.0,
    base: float = 10.0,
    initial: float = 1000.0,
    l2: float = DEFAULT_L2,
) -> dict[str, float]:
    """Bradley-Terry maximum-likelihood ratings with fractional outcomes.

    Model: ``p_ab = P(a beats b) = 1 / (1 + base ** ((R_b - R_a) / scale))``. Each game
    contributes ``s log p_ab + (1 - s) log(1 - p_ab)`` to the log-likelihood, so a score of 0.7
    counts as 0.7 of a win and 0.3 of a loss. Games are first summed per ordered pair
    (total score w, count n), so the cost of the fit does not grow with the number of games.

    Fit: damped Newton on the convex mean negative log-likelihood plus ``l2 * |theta|^2`` in natural
    log-odds units (theta = R ln(base) / scale). The tiny ridge changes well-identified
    ratings by a negligible amount (of order ``l2`` over the Fisher information), fixes the
    otherwise free common shift, and keeps the fit finite when a player wins (or loses)
    every game: such a player ends a large but finite distance from the rest (thousands of
    points at the default ``l2``) instead of at infinity.

    Bipartite schedules (sellers only meet buyers) are fine: the scale is identified through
    shared opponents as long as the schedule graph is connected (a RuntimeWarning says when it
    is not). The result is shifted so that ``reference`` (or, without one, the mean rating)
    is exactly ``initial``. It does not depend on the order of the records.
    """
    g = _encode(a, b, scores)
    if g.n_players == 0:
        return {}
    ref = _index_of(g.players, reference)
    table = _aggregate(g)
    _warn_if_disconnected(table, g.players)
    theta = _fit_theta(table, g.n_players, l2)
    ratings = _shift(theta * (scale / math.log(base)), ref, initial)
    return dict(zip(g.players, ratings.tolist(), strict=True))


@dataclass(frozen=True)
class _Cells:
    """Resampling units for a bootstrap.

    A round draws ``D = sum(unit_size)`` items (games or groups) uniformly with replacement,
    which gives every unit a multiplicity ``m ~ Multinomial(D, unit_size / D)``; cell c then
    adds ``m[unit[c]] * w[c]`` to the score and ``m[unit[c]] * n[c]`` to the count of pair
    ``pair[c]`` (and ``m[unit[c]] * extra[c]`` to any extra per-pair sum).
    """

    pair: np.ndarray
    unit: np.ndarray
    w: np.ndarray
    n: np.ndarray
    unit_size: np.ndarray


def _multiplicity_sampler(unit_size: np.ndarray) -> Callable[[np.random.Generator], np.ndarray]:
    draws = int(unit_size.sum())
    k = len(unit_size)
    if 8 * k <= draws:
        # Few distinct units (e.g. win, draw, loss per pair): one multinomial, O(k).
        probs = unit_size / draws
        return lambda rng: rng.multinomial(draws, probs)
    # Many units: draw the items and count them, O(D) and cheaper than k binomials.
    item_unit = np.repeat(np.arange(k), unit_size)
    return lambda rng: np.bincount(item_unit[rng.integers(draws, size=draws)], minlength=k)


def _cells_by_group(pair: np.ndarray, group: np.ndarray, s: np.ndarray, n_groups: int) -> _Cells:
    """One cell per (group, pair); every group is one unit of size 1."""
    order = np.lexsort((s, pair, group))
    key = group[order] * (int(pair.max(initial=0)) + 1) + pair[order]
    _, first = np.unique(key, return_index=True)
    return _Cells(
        pair=pair[order][first],
        unit=group[order][first],
        w=np.add.reduceat(s[order], first),
        n=np.diff(np.append(first, len(key))).astype(float),
        unit_size=np.ones(n_groups, dtype=np.int64),
    )


def _bootstrap_fits(
    cells: _Cells,
    table: _PairTable,
    n_players: int,
    rounds: int,
    rng: np.random.Generator,
    l2: float,
    x0: np.ndarray,
    extra: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per round: theta (rounds x players), per-pair counts and sums of ``extra``
    (rounds x pairs each)."""
    n_pairs = len(table.pi)
    draw = _multiplicity_sampler(cells.unit_size)
    thetas = np.empty((rounds, n_players))
    counts = np.empty((rounds, n_pairs))
    extra_sums = np.zeros((rounds, n_pairs))
    for r in range(rounds):
        mult = draw(rng)[cells.unit].astype(float)
        w = np.bincount(cells.pair, mult * cells.w, n_pairs)
        counts[r] = np.bincount(cells.pair, mult * cells.n, n_pairs)
        thetas[r] = _fit_theta(_PairTable(table.pi, table.pj, w, counts[r]), n_players, l2, x0)
        # A player with no game in this resample has a rating only from the ridge term: it
        # says nothing, so it is left out of that player's interval.
        games = np.bincount(table.pi, counts[r], n_players) + np.bincount(
            table.pj, counts[r], n_players
        )
        thetas[r][games == 0] = np.nan
        if extra is not None:
            extra_sums[r] = np.bincount(cells.pair, mult * extra, n_pairs)
    return thetas, counts, extra_sums


def _interval(samples: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = 50.0 * (1.0 - confidence)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns give NaN bounds
        lo, hi = np.nanpercentile(samples, [tail, 100.0 - tail], axis=0)
    return lo, hi


def _rated_rows(
    players: list[str],
    ratings: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    games: np.ndarray,
) -> list[RatedPlayer]:
    ranks = ranks_from_intervals(lower, upper)
    rows = [
        RatedPlayer(p, float(r), float(lo), float(hi), int(k), int(n))
        for p, r, lo, hi, k, n in zip(players, ratings, lower, upper, ranks, games, strict=True)
    ]
    return sorted(rows, key=lambda row: (-row.rating, row.player))


def _check_confidence(rounds: int, confidence: float) -> None:
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")


def bootstrap_bt(
    a: Sequence[str],
    b: Sequence[str],
    scores: ArrayLike,
    *,
    rounds: int = 200,
    seed: int = 0,
    reference: str | None = None,
    group: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
    scale: float = 400.0,
    base: float = 10.0,
    initial: float = 1000.0,
    l2: float = DEFAULT_L2,
) -> list[RatedPlayer]:
    """Bradley-Terry ratings with seeded bootstrap intervals, best first.

    ``rating`` is :func:`bradley_terry` on all the data. Each of ``rounds`` bootstrap rounds
    resamples with replacement and refits:

    - ``group=None``: the games themselves (as many draws as games);
    - ``group`` given (one hashable label per game, e.g. a market or match id): whole groups
      (as many draws as groups), so games that share a market stay together and their
      correlation widens the interval as it should.

    ``lower``/``upper`` are the ``(1 - confidence)/2`` and ``(1 + confidence)/2`` percentiles
    of the refitted ratings, each round pinned like the point estimate (``reference`` at
    ``initial``, or the mean at ``initial``; the reference's own interval is then a point,
    and the others are intervals relative to it). ``rank`` = 1 + the number of players whose
    lower bound is above this player's upper bound (FastChat's convention).

    Speed: games are aggregated first, into cells of equal (pair, score) or (group, pair).
    A round draws the cells' multiplicities (one ``Generator.multinomial`` when there are few
    cells, as with win/draw/loss scores; otherwise uniform integers counted by ``bincount``),
    sums them per pair with ``bincount`` and refits on the pair table; no Python loop over
    games. The generator is ``np.random.default_rng(seed)``: the same seed gives the same
    table, whatever the order of the records.
    """
    _check_confidence(rounds, confidence)
    g = _encode(a, b, scores)
    if g.n_players == 0:
        return []
    ref = _index_of(g.players, reference)
    table = _aggregate(g)
    _warn_if_disconnected(table, g.players)
    theta = _fit_theta(table, g.n_players, l2)
    factor = scale / math.log(base)

    p = g.n_players
    table_keys = table.pi * p + table.pj  # sorted and unique
    if group is None:
        key, s = _pair_keys(g)
        # A cell holds the games of one pair with one score value; they are interchangeable.
        change = np.flatnonzero((np.diff(key) != 0) | (np.diff(s) != 0)) + 1
        first = np.concatenate([[0], change])
        cells = _Cells(
            pair=np.searchsorted(table_keys, key[first]),
            unit=np.arange(len(first)),
            w=s[first],
            n=np.ones(len(first)),
            unit_size=np.diff(np.append(first, len(key))),
        )
    else:
        codes, n_groups = _labels(group, len(g.s), "group")
        pair = np.searchsorted(table_keys, g.ia * p + g.ib)
        cells = _cells_by_group(pair, codes, g.s, n_groups)

    rng = np.random.default_rng(seed)
    thetas, _, _ = _bootstrap_fits(cells, table, p, rounds, rng, l2, theta)
    samples = np.stack([_shift(row * factor, ref, initial) for row in thetas])
    lower, upper = _interval(samples, confidence)
    ratings = _shift(theta * factor, ref, initial)
    return _rated_rows(g.players, ratings, lower, upper, g.games_per_player())


# ---------------------------------------------------------------------------
# Within-side leaderboard from paired comparisons
# ---------------------------------------------------------------------------


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
    scale: float = 400.0,
    base: float = 10.0,
    initial: float = 1000.0,
    l2: float = DEFAULT_L2,
    clusters: Sequence[Hashable] | None = None,
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
    """
    _check_confidence(rounds, confidence)
    names = np.asarray(entries, dtype=str).reshape(-1)
    vals = np.asarray(values, dtype=float).reshape(-1)
    if len(names) != len(vals):
        raise ValueError(
            f"entries and values must have equal lengths (got {len(names)}, {len(vals)})"
        )
    market_code, n_markets = _labels(markets, len(names), "markets")
    players_arr, entry_code = np.unique(names, return_inverse=True)
    players = [str(x) for x in players_arr]
    e = len(players)
    if e == 0:
        return PairedLeaderboard((), ())
    flat = entry_code * n_markets + market_code
    if len(np.unique(flat)) != len(flat):
        dup = np.flatnonzero(np.bincount(flat) > 1)[0]
        raise ValueError(
            f"entry {players[dup // n_markets]!r} has more than one value for one market"
        )
    grid = np.full((e, n_markets), np.nan)
    grid[entry_code, market_code] = vals
    if clusters is None:
        cluster_of_market, n_units = np.arange(n_markets), n_markets
    else:
        cluster_code, n_units = _labels(clusters, len(names), "clusters")
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
        return PairedLeaderboard(tuple(_rated_rows(players, nan, nan, nan, played)), ())
    cp = np.concatenate(cell_pair).astype(np.int64)
    cm = np.concatenate(cell_market).astype(np.int64)
    cs = np.concatenate(cell_s)
    cd = np.concatenate(cell_d)

    n = np.bincount(cp, minlength=n_pairs).astype(float)
    w = np.bincount(cp, cs, n_pairs)
    table = _PairTable(pi, pj, w, n)
    _warn_if_disconnected(table, players)
    theta = _fit_theta(table, e, l2)
    factor = scale / math.log(base)
    ref = None if reference is None else _index_of(players, reference)

    # Each (pair, market) is its own cell: at most one comparison per pair and market; the
    # bootstrap draws whole clusters (markets when none are given).
    cells = _Cells(
        pair=cp, unit=cluster_of_market[cm], w=cs, n=np.ones(len(cp)),
        unit_size=np.ones(n_units, int),
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    thetas, counts, dsums = _bootstrap_fits(cells, table, e, rounds, rng, l2, theta, cd)
    samples = np.stack([_shift(row * factor, ref, initial) for row in thetas])
    lower, upper = _interval(samples, confidence)
    ratings = _shift(theta * factor, ref, initial)
    played = np.isfinite(grid).sum(axis=1)
    rated = _rated_rows(players, ratings, lower, upper, played)

    with np.errstate(invalid="ignore", divide="ignore"):
        d_lo, d_hi = _interval(dsums / counts, confidence)
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
