"""The empirical payoff matrix of a seller-buyer pool and the meta-strategies that pick
a learner's opponents from it.

The game is zero-sum on the rating score: a market is worth ``s`` to its seller and
``1 - s`` to its buyer (``arena.rewards.rating_score``). ``payoff_matrix`` averages ``s``
over every stored market of each (seller, buyer) pairing: ``A[i, j]`` is what seller i
expects against buyer j, across the run's configs and rules.

Meta-strategies (``opponent_weights``), each a distribution over the other side's pool:

``uniform``
    Every pool member alike.
``nash``
    The other side's half of a Nash equilibrium of the matrix game ``A`` (PSRO): the
    opponent mixture that holds the learner's side to the game's value. A best response
    to it is what lowers the pool's exploitability; its support is usually small.
``prioritized``
    Toward the opponents the learner (its side's latest snapshot) does worst against:
    weight ``(1 - p) ** power`` where ``p`` is the learner's mean score against the
    opponent (prioritized fictitious self-play's "hard" weighting).

Every meta-strategy is mixed with ``uniform_mix`` of the uniform one, so that no pool
member drops out of training entirely (a learner that never meets an opponent can
forget how to play it, which is exactly what exploitability then finds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from arena.rewards import rating_score
from tournaments.records import Records

META_STRATEGIES = ("uniform", "nash", "prioritized")


@dataclass(frozen=True)
class PayoffMatrix:
    """Mean seller score of every (seller, buyer) pairing played; NaN where unplayed."""

    sellers: tuple[str, ...]
    buyers: tuple[str, ...]
    score: np.ndarray
    """(sellers, buyers) mean rating score of the seller."""
    markets: np.ndarray
    """(sellers, buyers) markets with a finite score behind each mean."""

    def value(self, seller: str, buyer: str) -> float:
        return float(self.score[self.sellers.index(seller), self.buyers.index(buyer)])

    def sub(self, sellers: Sequence[str], buyers: Sequence[str]) -> PayoffMatrix:
        """The matrix of these entries only (in this order)."""
        i = [self.sellers.index(s) for s in sellers]
        j = [self.buyers.index(b) for b in buyers]
        return PayoffMatrix(
            tuple(sellers), tuple(buyers), self.score[np.ix_(i, j)], self.markets[np.ix_(i, j)]
        )


def payoff_matrix(records: Records) -> PayoffMatrix:
    """Mean seller score per (seller, buyer) over every market of ``records`` (all configs
    and rules) where the score is finite."""
    rec = Records.from_columns(records)
    t = rec.matches
    sellers, s_code = t.codes("seller")
    buyers, b_code = t.codes("buyer")
    s = np.asarray(rating_score(rec["profit"], rec["buyer_surplus"], rec["w_star"]), float)
    ok = np.isfinite(s)
    cell = (s_code[rec.match] * len(buyers) + b_code[rec.match])[ok]
    size = len(sellers) * len(buyers)
    total = np.bincount(cell, weights=s[ok], minlength=size)
    count = np.bincount(cell, minlength=size).astype(float)
    with np.errstate(invalid="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    shape = (len(sellers), len(buyers))
    return PayoffMatrix(tuple(sellers), tuple(buyers), mean.reshape(shape), count.reshape(shape))


def solve_zero_sum(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A Nash equilibrium of the zero-sum game where the row player gets ``a[i, j]`` and
    the column player ``-a[i, j]``: (row mixture, column mixture, value), by linear
    programming. NaN entries (unplayed pairings) are not allowed."""
    a = np.asarray(a, float)
    if a.ndim != 2 or a.size == 0 or not np.isfinite(a).all():
        raise ValueError("the payoff matrix must be non-empty and finite")
    rows, cols = a.shape
    # Row player: max v s.t. a^T x >= v, sum x = 1, x >= 0  (variables x, v; minimise -v).
    res = linprog(
        c=np.r_[np.zeros(rows), -1.0],
        A_ub=np.c_[-a.T, np.ones(cols)],
        b_ub=np.zeros(cols),
        A_eq=np.r_[np.ones(rows), 0.0][None],
        b_eq=[1.0],
        bounds=[(0, None)] * rows + [(None, None)],
        method="highs",
    )
    # Column player: min w s.t. a y <= w, sum y = 1, y >= 0.
    res_c = linprog(
        c=np.r_[np.zeros(cols), 1.0],
        A_ub=np.c_[a, -np.ones(rows)],
        b_ub=np.zeros(rows),
        A_eq=np.r_[np.ones(cols), 0.0][None],
        b_eq=[1.0],
        bounds=[(0, None)] * cols + [(None, None)],
        method="highs",
    )
    if not (res.success and res_c.success):  # pragma: no cover - a finite game always has one
        raise ValueError("no equilibrium found")
    x = np.clip(res.x[:rows], 0.0, None)
    y = np.clip(res_c.x[:cols], 0.0, None)
    return x / x.sum(), y / y.sum(), float(-res.fun)


def opponent_weights(
    matrix: PayoffMatrix,
    side: str,
    strategy: str,
    *,
    learner: str | None = None,
    uniform_mix: float = 0.0,
    power: float = 2.0,
) -> dict[str, float]:
    """The distribution over the other side's pool that a ``side`` learner trains against.

    ``matrix`` holds the pools (sellers x buyers, every pairing played). ``learner``: the
    side's latest snapshot, an entry of the matrix, for ``prioritized`` (without it, or
    when it is not in the matrix, the side's mean score against each opponent is used).
    The result sums to 1, mixed with ``uniform_mix`` of the uniform distribution."""
    if strategy not in META_STRATEGIES:
        raise ValueError(f"unknown meta-strategy {strategy!r}; known: {', '.join(META_STRATEGIES)}")
    if side not in ("seller", "buyer"):
        raise ValueError(f"side must be seller or buyer, got {side!r}")
    if not 0.0 <= uniform_mix <= 1.0:
        raise ValueError(f"uniform_mix must be in [0, 1], got {uniform_mix}")
    # The learner's payoff, rows = its side, columns = opponents.
    own = matrix.score if side == "seller" else 1.0 - matrix.score.T
    names = matrix.buyers if side == "seller" else matrix.sellers
    mine = matrix.sellers if side == "seller" else matrix.buyers
    n = len(names)
    uniform = np.full(n, 1.0 / n)
    if strategy == "uniform":
        w = uniform
    elif strategy == "nash":
        _, w, _ = solve_zero_sum(own)
    else:
        p = own[mine.index(learner)] if learner in mine else np.nanmean(own, axis=0)
        w = np.clip(1.0 - np.nan_to_num(p, nan=0.5), 0.0, 1.0) ** power
        w = w / w.sum() if w.sum() > 0 else uniform
    w = (1.0 - uniform_mix) * w + uniform_mix * uniform
    w = w / w.sum()
    return {name: float(x) for name, x in zip(names, w, strict=True)}


__all__ = [
    "META_STRATEGIES",
    "PayoffMatrix",
    "opponent_weights",
    "payoff_matrix",
    "solve_zero_sum",
]
