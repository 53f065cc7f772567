"""Rewards and the per-market rating score: plain functions of a market's outcome.

Trainers, evaluation and ratings share these definitions, so what a learner is paid
for is exactly what a tournament scores. Every function is verifiable from the market
alone (its trades, its violations and the oracle's W*_T) and broadcasts over batches.

::

    seller_reward  = profit / scale - penalty * seller_violations
                     scale = W*_T where W*_T > 0, else the price-range width
    buyer_reward   = buyer i's own surplus / (hi - lo)           one number per buyer
    rating_score   = clip(0.5 + (profit - buyer_surplus) / (2 W*_T), 0, 1)
                     (0.5 where W*_T <= 0: no surplus to split is a draw)

The seller's reward is the oracle-normalized profit (``capture``) so that markets of
every size and price scale weigh alike; the fallback scale keeps it finite on the
rare market where no trade can create surplus (W*_T = 0), where any profit is a
buyer's mistake. Buyers are paid their own surplus only, never a pooled one, so
buyers that share a network remain independent learners and cannot learn to collude
(the trainer's ``team_return``, a study option no shipped buyer uses, pools it on
purpose, to measure what coordination would be worth).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

VIOLATION_PENALTY = 0.05
"""Default seller penalty per violation, in units of W*_T: a wasted turn costs about
what a twentieth of the market's surplus is worth, more than the typical gain of one
extra turn, so a policy never profits from an invalid message."""


def profit_scale(w_star: ArrayLike, width: ArrayLike) -> np.ndarray:
    """The normalizer of seller rewards: W*_T where positive, else the range width."""
    w = np.asarray(w_star, dtype=float)
    return np.where(w > 0, w, np.asarray(width, dtype=float))


def seller_reward(
    profit: ArrayLike,
    seller_violations: ArrayLike,
    w_star: ArrayLike,
    width: ArrayLike,
    penalty: float = VIOLATION_PENALTY,
) -> np.ndarray:
    """profit / scale - penalty * violations (see the module docstring); (B,) in, (B,) out.

    Linear in profit and violations, so the reward of an episode is the sum of the
    rewards of its turns (what an environment hands out step by step)."""
    p = np.asarray(profit, dtype=float)
    v = np.asarray(seller_violations, dtype=float)
    return p / profit_scale(w_star, width) - penalty * v


def buyer_reward(surplus: ArrayLike, width: ArrayLike) -> np.ndarray:
    """Each buyer's own surplus on the price-range scale: (B, N) surplus, (B,) or scalar
    width."""
    s = np.asarray(surplus, dtype=float)
    w = np.asarray(width, dtype=float)
    if w.ndim == 1 and s.ndim == 2:
        w = w[:, None]
    return s / w


def rating_score(
    profit: ArrayLike, buyer_surplus: ArrayLike, w_star: ArrayLike
) -> float | np.ndarray:
    """The seller's score for one market, in [0, 1]; the buyer side scores ``1 - score``.

    ::

        s = clip(0.5 + (profit - buyer_surplus) / (2 * W*_T), 0, 1)

    Taking all of W*_T as profit gives 1, leaving all of it to the buyers gives 0, an
    equal split gives 0.5. A market with ``W*_T <= 0`` has no surplus to split and counts
    as a draw (0.5). NaN in any input gives NaN.

    Arguments broadcast against each other; scalars in give a float out.
    """
    p = np.asarray(profit, dtype=float)
    u = np.asarray(buyer_surplus, dtype=float)
    w = np.asarray(w_star, dtype=float)
    positive = w > 0
    with np.errstate(invalid="ignore", over="ignore"):  # a tiny W*_T saturates the clip
        raw = np.clip(0.5 + (p - u) / (2.0 * np.where(positive, w, 1.0)), 0.0, 1.0)
    out = np.where(positive, raw, 0.5)
    out = np.where(np.isnan(w), np.nan, out)
    if out.ndim == 0:
        return float(out)
    return out
