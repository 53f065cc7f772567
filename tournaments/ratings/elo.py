"""Online Elo, in one order of the games or averaged over seeded shuffles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from tournaments.ratings.bradley_terry import Games
from tournaments.ratings.scale import ELO_SCALE, RatingScale

DEFAULT_K = 4.0
"""Default Elo K (points per unit of score surprise); see :func:`elo` for the reasoning."""


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


def elo(
    a: Sequence[str],
    b: Sequence[str],
    scores: ArrayLike,
    *,
    k: float = DEFAULT_K,
    scale: RatingScale = ELO_SCALE,
    reference: str | None = None,
    start: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Online Elo over the games in the given order.

    Every player starts at ``start.get(name, scale.initial)``. For each game (a, b, s)::

        E_a  = 1 / (1 + base ** ((R_b - R_a) / points))
        R_a += k * (s - E_a)
        R_b -= k * (s - E_a)

    Updates are zero-sum, so the mean rating stays at its start. Finally, if ``reference``
    is given, all ratings are shifted so that it sits at ``scale.initial``.

    Choice of K: Elo is stochastic gradient ascent on the Bradley-Terry log-likelihood with a
    step of K points. Near equal strength a game moves the expectation by about
    ``K * ln(base) / (4 * points)`` per point of rating gap, so a rating forgets its past
    over roughly ``4 * points / (K * ln(base))`` of its own games (about 170 for K=4, 22 for
    K=32) and keeps a stationary noise of about ``sqrt(K * points / (2 ln(base)))`` points
    for win/loss outcomes (about 19 points for K=4, 53 for K=32; less for fractional
    scores). Tournaments play thousands of games per pair, so the small K=4 (as in FastChat)
    costs little in convergence and keeps the noise well below the gaps worth reporting.
    Chess's K=32 suits a few games per player, not this.

    Results depend on the order; see :func:`canonical_order` and :func:`elo_shuffled`.
    """
    g = Games.from_names(a, b, scores)
    start = start or {}
    base, points = scale.base, scale.points
    r = [float(start.get(p, scale.initial)) for p in g.players]
    for i, j, x in zip(g.ia.tolist(), g.ib.tolist(), g.s.tolist(), strict=True):
        delta = k * (x - 1.0 / (1.0 + base ** ((r[j] - r[i]) / points)))
        r[i] += delta
        r[j] -= delta
    out = np.asarray(r, dtype=float)
    ref = g.index_of(reference)
    if ref is not None:
        out = scale.pin(out, ref)
    return dict(zip(g.players, out.tolist(), strict=True))


def elo_shuffled(a: Sequence[str], b: Sequence[str], scores: ArrayLike, **options: Any):
    """Online Elo averaged over random orders of the games named by (a, b, scores); the
    options are those of :func:`elo_shuffled_games`."""
    return elo_shuffled_games(Games.from_names(a, b, scores), **options)


def elo_shuffled_games(
    g: Games,
    *,
    shuffles: int = 100,
    seed: int = 0,
    k: float = DEFAULT_K,
    scale: RatingScale = ELO_SCALE,
    reference: str | None = None,
    start: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Online Elo averaged over ``shuffles`` random orders of the games.

    The orders are ``rng.permutation(n_games)``, drawn one after another from
    ``rng = np.random.default_rng(seed)``; the same seed gives the same result. Each order
    runs the update of :func:`elo` from the same start; the final ratings are averaged over
    orders (so order effects average out) and then shifted so that ``reference``, if given,
    sits at ``scale.initial``.

    All orders run side by side as arrays, so the cost is about one vectorised step per game
    (a few microseconds), almost independent of ``shuffles``. The updates of one order are
    sequential by definition (each reads the ratings the previous games left), so the
    number of steps cannot shrink much below the number of games: with a handful of
    players, a run of games on distinct players is two or three games long on average.
    """
    if shuffles < 1:
        raise ValueError("shuffles must be at least 1")
    p, n = g.n_players, len(g.s)
    start = start or {}
    base, points = scale.base, scale.points
    r0 = np.array([float(start.get(name, scale.initial)) for name in g.players])
    rng = np.random.default_rng(seed)
    total = np.zeros(p)
    # The per-step index tables stay in the platform's index type: numpy converts any other
    # on every fancy index, which costs more than half again per step.
    ia, ib = g.ia.astype(np.intp), g.ib.astype(np.intp)
    # Orders run in blocks so that the (games x orders) index tables stay below ~2**24 cells.
    block = max(1, min(shuffles, (1 << 24) // max(n, 1)))
    done = 0
    while done < shuffles:
        width = min(block, shuffles - done)
        # The orders themselves are only gathered through once: 32 bits halve their memory.
        order = np.empty((n, width), np.int32 if n < 2**31 else np.int64)
        for col in range(width):
            order[:, col] = rng.permutation(n)
        offset = (np.arange(width, dtype=np.intp) * p)[None, :]
        rows_a = ia[order] + offset
        rows_b = ib[order] + offset
        s = g.s[order]
        del order
        r = np.tile(r0, width)
        for t in range(n):
            i, j = rows_a[t], rows_b[t]
            ra, rb = r[i], r[j]
            delta = k * (s[t] - 1.0 / (1.0 + np.power(base, (rb - ra) / points)))
            r[i] = ra + delta
            r[j] = rb - delta
        total += r.reshape(width, p).sum(axis=0)
        done += width
    out = total / shuffles
    ref = g.index_of(reference)
    if ref is not None:
        out = scale.pin(out, ref)
    return dict(zip(g.players, out.tolist(), strict=True))
