"""Max-weight matchings of open buyers to units in stock, for sellers that plan their pick.

A seller's pair table gives, per market, a value for each (buyer, product) pair (-inf
where the pair is not open). A matching sends each buyer at most once and product j at
most ``stock[j]`` times, on open pairs worth more than 0; a max-weight one has the
largest sum of values. Its most valuable pair is the *planned pick*: the pair to offer
now so that the other buyers can still be served well.

* ``max_weight_matching``: one market, through the oracle's solver (the reference).
* ``assigned_pairs``: the planned pick of every market of a batch, solved afresh.
* ``PlannedMatches``: the same for a batch played turn by turn, solving again only the
  markets whose kept matching may no longer be optimal.

How ``PlannedMatches`` knows: the matching problem is a linear program with an integral
optimum, and a matching is optimal exactly when there are product prices p_j >= 0 with

- every matched buyer on a pair of the largest surplus w_ij - p_j among its pairs, and
  that surplus >= 0;
- every unmatched buyer with no pair of positive surplus;
- p_j > 0 only for products whose units are all matched

(complementary slackness, with buyer i's dual the largest of 0 and its surpluses). After
each solve it computes the lowest such prices (a longest-path fixed point over the
products, as Walrasian prices of the assignment game), keeps them, and on the next turns
checks the three conditions on the new values and stock. A sale of a matched pair, a
matched pair worth more, an unmatched one worth less, or a matched pair worth less by
less than its buyer's margin over its next best all pass; markets that fail are solved
again (``scipy.optimize.linear_sum_assignment``, one small problem each). Each market's
matching depends only on its own history, so a batch equals its markets played alone.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from arena.oracle import optimal_assignment

__all__ = ["PlannedMatches", "assigned_pairs", "max_weight_matching"]

_TOL = 1e-9
"""Relative tolerance of the certificate's comparisons (in units of a market's largest
value): it absorbs the rounding of the prices' sums and differences."""


def _worth(value: np.ndarray) -> np.ndarray:
    """Values clipped at 0, and so 0 where a pair is not open (-inf)."""
    return np.maximum(value, 0.0)


def _max_over(a: np.ndarray, axis: int) -> np.ndarray:
    """``a.max(axis)`` for a short axis (buyers or products), one slice at a time: numpy
    reduces a short axis of small arrays several times slower."""
    a = np.moveaxis(a, axis, 0)
    out = a[0].copy()
    for x in a[1:]:
        np.maximum(out, x, out=out)
    return out


def _counts(match: np.ndarray, m: int) -> np.ndarray:
    """(R, M) the buyers matched to each product, from ``match`` (R, N)."""
    r = match.shape[0]
    at = (np.arange(r)[:, None] * m + match)[match >= 0]
    return np.bincount(at, minlength=r * m).reshape(r, m)


def max_weight_matching(value: np.ndarray, stock: np.ndarray) -> list[tuple[int, int]]:
    """(buyer, product) pairs of a max-weight matching of one market: ``value`` (N, M),
    ``stock`` (M,); only pairs worth more than 0 (``arena.oracle.optimal_assignment``,
    the oracle's solver)."""
    return optimal_assignment(_worth(value), np.zeros(value.shape[1]), np.maximum(stock, 0))


class PlannedMatches:
    """Per-market max-weight matchings of a batch, kept across turns while their prices
    certify them (module docstring).

    ``pairs(value, stock)`` once per turn gives the planned pick of every market;
    ``restart(rows)`` forgets rows whose market was replaced by a fresh one; a new batch
    shape starts afresh. ``solved`` counts the market-turns solved so far (the others
    kept their matching)."""

    def __init__(self) -> None:
        self._match: np.ndarray | None = None  # (B, N) matched product, -1: none
        self._prices: np.ndarray | None = None  # (B, M) the prices that certify it
        self._stale: np.ndarray | None = None  # (B,) solve again regardless
        self.solved = 0

    def reset(self, batch_size: int | None = None) -> None:
        self._match = None

    def restart(self, rows: np.ndarray) -> None:
        if self._match is not None:
            self._stale[rows] = True

    def matched(self) -> np.ndarray:
        """(B, N, M) bool: the pairs of each market's matching as the last ``pairs`` left
        it (a RuntimeError before the first call)."""
        if self._match is None:
            raise RuntimeError("PlannedMatches.matched: no matching yet (call pairs first)")
        b, n = self._match.shape
        out = np.zeros((b, n, self._prices.shape[1]), bool)
        rows, buyers = np.nonzero(self._match >= 0)
        out[rows, buyers, self._match[rows, buyers]] = True
        return out

    def pairs(self, value: np.ndarray, stock: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(B,) buyer and product per market: of its max-weight matching, the pair worth
        the most (ties: lowest buyer); markets with no matched pair get the highest-value
        pair, as the greedy matcher offers."""
        worth = _worth(value)
        stock = np.maximum(np.asarray(stock), 0)
        b, n, m = value.shape
        if self._match is None or self._match.shape != (b, n) or self._prices.shape != (b, m):
            self._match = np.full((b, n), -1, np.int64)
            self._prices = np.zeros((b, m))
            solve = np.ones(b, bool)
        else:
            # Pairs that closed (sold, or their buyer left) leave the kept matching.
            self._match = np.where(_took(worth, self._match) > 0.0, self._match, -1)
            solve = self._stale | ~_certified(worth, self._match, stock, self._prices)
        rows = np.flatnonzero(solve)
        if rows.size:
            self._match[rows] = _solve(worth[rows], stock[rows])
            self._prices[rows] = _lowest_prices(worth[rows], self._match[rows], stock[rows])
            self.solved += rows.size
        self._stale = np.zeros(b, bool)

        match = self._match
        took = np.where(match >= 0, _took(value, match), -np.inf)  # (B, N)
        flat = np.argmax(value.reshape(b, n * m), axis=1)  # the greedy pair
        planned = np.isfinite(took.max(axis=1))
        best = np.argmax(took, axis=1)
        to = np.where(planned, best, flat // m)
        product = np.where(planned, match[np.arange(b), best], flat % m)
        return to, product


def _took(table: np.ndarray, match: np.ndarray) -> np.ndarray:
    """(..., N) each buyer's entry of ``table`` (..., N, M) at its matched product (the
    first product's where it has none)."""
    return np.take_along_axis(table, np.maximum(match, 0)[..., None], -1)[..., 0]


def _lowest_prices(worth: np.ndarray, match: np.ndarray, stock: np.ndarray) -> np.ndarray:
    """(R, M) the lowest prices that certify optimal matchings ``match`` (R, N).

    A full product's price is at least every unmatched buyer's worth of it, and at least
    what keeps each buyer matched to another product j from preferring it
    (p_k >= w_ik - w_ij + p_j); a product with units to spare has price 0. With no cycle
    of positive gain (the matching is optimal) M rounds reach the fixed point."""
    m = worth.shape[-1]
    full = _counts(match, m) >= stock
    base = _max_over(np.where(match[..., None] < 0, worth, 0.0), -2)  # (R, M)
    gain = worth - np.where(match >= 0, _took(worth, match), 0.0)[..., None]
    # step[r, j, k]: the most a buyer matched to j gains by moving to k.
    step = np.full((*full.shape, m), -np.inf)
    rows = np.arange(match.shape[0])
    for i in range(match.shape[1]):
        r, j = rows[match[:, i] >= 0], match[match[:, i] >= 0, i]
        step[r, j] = np.maximum(step[r, j], gain[r, i])
    prices = np.where(full, base, 0.0)
    for _ in range(m):
        reach = _max_over(step + prices[..., :, None], -2)
        prices = np.where(full, np.maximum(base, reach), 0.0)
    return prices


def _certified(
    worth: np.ndarray, match: np.ndarray, stock: np.ndarray, prices: np.ndarray
) -> np.ndarray:
    """(B,) whether ``prices`` prove ``match`` a max-weight matching (module docstring)."""
    m = worth.shape[-1]
    tol = _TOL * np.maximum(worth.max(axis=(-2, -1)), 1.0)
    count = _counts(match, m)
    surplus = worth - prices[..., None, :]
    best = np.maximum(_max_over(surplus, -1), 0.0)  # (B, N)
    own = np.where(match >= 0, _took(surplus, match), 0.0)
    return (
        (count <= stock).all(axis=-1)
        & ((prices <= tol[:, None]) | (count == stock)).all(axis=-1)
        & (own >= best - tol[:, None]).all(axis=-1)
    )


def _solve(worth: np.ndarray, stock: np.ndarray) -> np.ndarray:
    """(R, N) a max-weight matching's product per buyer (-1: none) of R markets: each is
    one assignment problem of the buyers to copies of the products' units (a copy past
    the stock, or one of the columns that give every buyer a column, is worth 0, so taking
    it is taking nothing)."""
    r, n, m = worth.shape
    copies = int(min(stock.max(initial=0), n))
    if copies == 0:
        return np.full((r, n), -1, np.int64)
    units = worth[..., None] * (np.arange(copies) < stock[:, None, :, None])
    units = units.reshape(r, n, m * copies)
    if m * copies < n:
        units = np.concatenate([units, np.zeros((r, n, n - m * copies))], axis=-1)
    # With at least as many columns as buyers, every buyer gets one: the columns alone.
    cols = np.array([linear_sum_assignment(u, maximize=True)[1] for u in units])
    took = np.take_along_axis(units, cols[..., None], -1)[..., 0]
    return np.where((cols < m * copies) & (took > 0.0), cols // copies, -1)


def assigned_pairs(value: np.ndarray, stock: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B,) the planned pick of each market, solved afresh (``PlannedMatches.pairs``)."""
    return PlannedMatches().pairs(value, stock)
