"""Games as arrays, and the Bradley-Terry maximum-likelihood fit (one or many at once)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import expit

from tournaments.ratings.scale import ELO_SCALE, RatingScale

DEFAULT_L2 = 1e-6
"""Ridge weight on the mean negative log-likelihood of the Bradley-Terry fit."""

_NEWTON_MAX_ITER = 500
_NEWTON_TOL = 1e-15


@dataclass(frozen=True)
class Games:
    """Games as player codes: ``players[ia[g]]`` scored ``s[g]`` against ``players[ib[g]]``."""

    players: list[str]
    ia: np.ndarray
    ib: np.ndarray
    s: np.ndarray

    @classmethod
    def from_names(cls, a: Sequence[str], b: Sequence[str], scores: ArrayLike) -> Games:
        """Validated games from names (one scale for both sides) and scores in [0, 1]."""
        a_arr = np.asarray(a, dtype=str).reshape(-1)
        b_arr = np.asarray(b, dtype=str).reshape(-1)
        s = np.asarray(scores, dtype=float).reshape(-1)
        if not (len(a_arr) == len(b_arr) == len(s)):
            raise ValueError(
                "a, b and scores must have equal lengths "
                f"(got {len(a_arr)}, {len(b_arr)}, {len(s)})"
            )
        names, inv = np.unique(np.concatenate([a_arr, b_arr]), return_inverse=True)
        n = len(s)
        return cls.from_codes([str(x) for x in names], inv[:n], inv[n:], s)

    @classmethod
    def from_codes(
        cls, players: list[str], ia: ArrayLike, ib: ArrayLike, scores: ArrayLike
    ) -> Games:
        """Games from codes into ``players`` (sorted names, so results do not depend on
        how the caller numbered them)."""
        s = np.asarray(scores, dtype=float).reshape(-1)
        if not np.all(np.isfinite(s)) or np.any((s < 0) | (s > 1)):
            raise ValueError("scores must be finite and in [0, 1]")
        ia = np.asarray(ia, dtype=np.int64).reshape(-1)
        ib = np.asarray(ib, dtype=np.int64).reshape(-1)
        if np.any(ia == ib):
            bad = players[ia[np.argmax(ia == ib)]]
            raise ValueError(f"a game of a player against itself: {bad!r}")
        return cls(list(players), ia, ib, s)

    @property
    def n_players(self) -> int:
        return len(self.players)

    def games_per_player(self) -> np.ndarray:
        p = self.n_players
        return np.bincount(self.ia, minlength=p) + np.bincount(self.ib, minlength=p)

    def index_of(self, name: str | None) -> int | None:
        if name is None:
            return None
        try:
            return self.players.index(name)
        except ValueError:
            raise ValueError(f"reference {name!r} is not among the players") from None

    def pair_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """Games sorted by (pair, score): every sum below is independent of record order."""
        key = self.ia * self.n_players + self.ib
        order = np.lexsort((self.s, key))
        return key[order], self.s[order]


@dataclass(frozen=True)
class PairTable:
    """Games summed by ordered pair: pi beat pj w times out of n (w may be fractional).
    ``w`` and ``n`` may carry a leading axis of resamples (one fit each)."""

    pi: np.ndarray
    pj: np.ndarray
    w: np.ndarray
    n: np.ndarray


def aggregate(g: Games) -> PairTable:
    key, s = g.pair_keys()
    uniq, first = np.unique(key, return_index=True)
    if len(uniq) == 0:
        e = np.zeros(0, dtype=np.int64)
        return PairTable(e, e, np.zeros(0), np.zeros(0))
    w = np.add.reduceat(s, first)
    n = np.diff(np.append(first, len(key))).astype(float)
    return PairTable(uniq // g.n_players, uniq % g.n_players, w, n)


def labels(values: Iterable[Hashable] | np.ndarray, n: int, what: str) -> tuple[np.ndarray, int]:
    """Dense integer codes 0..G-1 for hashable labels, numbered in sorted label order (by
    ``repr`` when the labels do not compare), so the codes do not depend on record order.
    An integer array is numbered by value directly."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        if len(values) != n:
            raise ValueError(f"{what} must have one label per record (got {len(values)}, "
                             f"expected {n})")  # fmt: skip
        seen = _value_table(values)
        if seen is not None:  # a value's code: the number of distinct smaller values
            rank = np.cumsum(seen, dtype=np.int64) - 1
            return rank[values], int(rank[-1]) + 1
        uniq, codes = np.unique(values, return_inverse=True)
        return codes.astype(np.int64), len(uniq)
    first: dict[Hashable, int] = {}
    codes = np.fromiter((first.setdefault(v, len(first)) for v in values), dtype=np.int64)
    if len(codes) != n:
        raise ValueError(f"{what} must have one label per record (got {len(codes)}, expected {n})")
    found = list(first)
    try:
        order = sorted(range(len(found)), key=found.__getitem__)
    except TypeError:
        order = sorted(range(len(found)), key=lambda k: repr(found[k]))
    renumber = np.empty(len(found), dtype=np.int64)
    renumber[order] = np.arange(len(found))
    return renumber[codes], len(found)


def distinct_ints(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of an integer array (market indices, codes), without a sort where the
    values are small and non-negative."""
    seen = _value_table(values)
    return np.unique(values) if seen is None else np.flatnonzero(seen).astype(values.dtype)


def _value_table(values: np.ndarray) -> np.ndarray | None:
    """Which values occur, as a table indexed by value, for small non-negative integers
    (at most about eight times as many as there are values); None otherwise."""
    if len(values) == 0 or values.min() < 0 or values.max() >= 8 * len(values) + 65536:
        return None
    seen = np.zeros(int(values.max()) + 1, bool)
    seen[values] = True
    return seen


def fit_theta(t: PairTable, n_players: int, l2: float, x0: np.ndarray | None = None) -> np.ndarray:
    """Minimise the mean negative log-likelihood plus ``l2 * |theta|^2`` by damped Newton.

    With d = theta_i - theta_j and N the total number of games, one pair contributes::

        f_ij = [w * softplus(-d) + (n - w) * softplus(d)] / N
        df/dd = (n * sigmoid(d) - w) / N,   d2f/dd2 = n * sigmoid(d) * sigmoid(-d) / N

    (the first line is ``-(s log p + (1 - s) log(1 - p))`` summed over the pair's games,
    p = sigmoid(d)). The Hessian is a weighted graph Laplacian plus ``2 * l2 * I``, so the
    objective is strictly convex and the minimum unique. Newton with Armijo backtracking
    reaches machine precision in a handful of steps, each one small dense solve (players x
    players).

    ``t.w`` and ``t.n`` of shape (pairs,) give one fit, theta (players,); of shape (R, pairs)
    they give R independent fits at once, theta (R, players): the bootstrap refits every
    resample in one batch of small solves, each problem stepping and stopping exactly as it
    would alone. ``x0`` (players,) is the start of every fit. ``l2`` must be a positive
    number: without the ridge a player who wins or loses every game has no finite rating.
    """
    if isinstance(l2, bool) or not (
        isinstance(l2, int | float | np.floating | np.integer) and 0.0 < l2 < math.inf
    ):
        raise ValueError(f"l2 must be a positive finite number (got {l2!r})")
    single = np.ndim(t.w) == 1
    w_all = np.atleast_2d(np.asarray(t.w, float))
    n_all = np.atleast_2d(np.asarray(t.n, float))
    r, p = w_all.shape[0], n_players
    x = np.zeros((r, p)) if x0 is None else np.tile(np.asarray(x0, dtype=float), (r, 1))
    total = n_all.sum(axis=1, keepdims=True)
    empty = total[:, 0] == 0
    safe = np.where(total > 0, total, 1.0)
    w = w_all / safe
    lose = np.maximum(n_all - w_all, 0.0) / safe
    n = n_all / safe
    pi, pj = t.pi, t.pj
    # Incidence of pairs on players: d = x @ inc.T, and the Laplacian is inc.T diag(h) inc.
    inc = np.zeros((len(pi), p))
    inc[np.arange(len(pi)), pi] += 1.0
    inc[np.arange(len(pi)), pj] -= 1.0
    ridge = 2.0 * l2 * np.eye(p)

    def value(theta: np.ndarray, rows: np.ndarray) -> np.ndarray:
        d = theta[:, pi] - theta[:, pj]
        nll = np.sum(w[rows] * np.logaddexp(0.0, -d) + lose[rows] * np.logaddexp(0.0, d), axis=1)
        return nll + l2 * np.einsum("ij,ij->i", theta, theta)

    out = x.copy()
    live = np.flatnonzero(~empty)
    out[empty] = 0.0
    f = value(x[live], live)
    xl = x[live]
    for _ in range(_NEWTON_MAX_ITER):
        if len(live) == 0:
            break
        d = xl[:, pi] - xl[:, pj]
        sig = expit(d)
        gd = n[live] * sig - w[live]
        grad = gd @ inc + 2.0 * l2 * xl
        h = n[live] * sig * expit(-d)  # not sig * (1 - sig): that cancels for large |d|
        hess = np.einsum("rk,ki,kj->rij", h, inc, inc) + ridge
        step = np.linalg.solve(hess, -grad[:, :, None])[:, :, 0]
        decrement = -np.einsum("ij,ij->i", grad, step)  # predicted decrease x 2; >= 0
        done = decrement <= _NEWTON_TOL
        # Inside the quadratic region: one more full step reaches machine precision.
        out[live[done]] = xl[done] + step[done]
        go = ~done
        live, xl, f, step, decrement = live[go], xl[go], f[go], step[go], decrement[go]
        size = np.ones(len(live))
        searching = np.ones(len(live), bool)
        cand = xl.copy()
        f_new = f.copy()
        while searching.any():
            k = np.flatnonzero(searching)
            cand[k] = xl[k] + size[k, None] * step[k]
            f_new[k] = value(cand[k], live[k])
            ok = (f_new[k] <= f[k] - 1e-4 * size[k] * decrement[k]) | (size[k] < 1e-12)
            searching[k[ok]] = False
            size[k[~ok]] *= 0.5
        xl, f = cand, f_new
    out[live] = xl  # out of iterations: the last iterate
    return out[0] if single else out


def warn_if_disconnected(t: PairTable, players: list[str]) -> None:
    p = len(players)
    if p <= 1:
        return
    graph = coo_matrix((np.ones(len(t.pi)), (t.pi, t.pj)), shape=(p, p))
    count, found = connected_components(graph, directed=False)
    if count > 1:
        groups = [[players[i] for i in np.flatnonzero(found == c)] for c in range(count)]
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
    scale: RatingScale = ELO_SCALE,
    l2: float = DEFAULT_L2,
) -> dict[str, float]:
    """Bradley-Terry maximum-likelihood ratings with fractional outcomes.

    Model: ``p_ab = P(a beats b) = 1 / (1 + base ** ((R_b - R_a) / points))``. Each game
    contributes ``s log p_ab + (1 - s) log(1 - p_ab)`` to the log-likelihood, so a score of
    0.7 counts as 0.7 of a win and 0.3 of a loss. Games are first summed per ordered pair
    (total score w, count n), so the cost of the fit does not grow with the number of games.

    Fit: damped Newton on the convex mean negative log-likelihood plus ``l2 * |theta|^2`` in
    natural log-odds units (theta = R / scale.factor). The tiny ridge changes well-identified
    ratings by a negligible amount (of order ``l2`` over the Fisher information), fixes the
    otherwise free common shift, and keeps the fit finite when a player wins (or loses)
    every game: such a player ends a large but finite distance from the rest (thousands of
    points at the default ``l2``) instead of at infinity.

    Bipartite schedules (sellers only meet buyers) are fine: the scale is identified through
    shared opponents as long as the schedule graph is connected (a RuntimeWarning says when
    it is not). The result is pinned so that ``reference`` (or, without one, the mean
    rating) is exactly ``scale.initial``. It does not depend on the order of the records.
    """
    return fit_games(Games.from_names(a, b, scores), reference=reference, scale=scale, l2=l2)


def fit_games(
    g: Games,
    *,
    reference: str | None = None,
    scale: RatingScale = ELO_SCALE,
    l2: float = DEFAULT_L2,
) -> dict[str, float]:
    """:func:`bradley_terry` of games already coded."""
    if g.n_players == 0:
        return {}
    ref = g.index_of(reference)
    table = aggregate(g)
    warn_if_disconnected(table, g.players)
    theta = fit_theta(table, g.n_players, l2)
    ratings = scale.pin(theta * scale.factor, ref)
    return dict(zip(g.players, ratings.tolist(), strict=True))
