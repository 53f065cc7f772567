"""Per-market metrics, for one reference market and for a batch.

Definitions (one market; W*_T = ``oracle.welfare_bound(values, costs, inventory, T)``,
the full-information, turn-limited bound, named ``w_star`` wherever it is a value; W*,
the same without the turn limit, is ``w_star_unlimited``)::

    profit                 sum over trades of (price - cost)
    revenue                sum over trades of price
    buyer_surplus          sum over trades of (value - price)
    buyer_surplus_human    ... over human buyers only (``_agent`` likewise)
    buyer_surplus_disclosed   ... over buyers the seller was told are agents
    buyer_surplus_undisclosed ... over all others; each pair sums to buyer_surplus
    welfare                profit + buyer_surplus
    w_star                 W*_T
    efficiency             welfare / W*_T          (nan when W*_T == 0)
    capture                profit / W*_T           (nan when W*_T == 0)
    match_quality          (sum of value - cost over the pairs traded) divided by the
                           best assignment of the same buyers to the catalog
                           (nan without trades or when that best is 0)
    deal_rate              trades / N
    trades, turns_used     counts
    seller_violations, buyer_violations   invalid messages of each side
    mean_price             mean price paid (nan without trades)
    mean_price_norm        mean of (price - lo) / (hi - lo), comparable across price ranges

The scalar version is plain Python over the reference market's trade list; the
batched version is numpy over the engine's arrays. Tests hold them equal (to the
rounding of sums taken in a different order).
"""

from __future__ import annotations

import math

import numpy as np

from arena.engine import BatchedMarket
from arena.generator import MarketBatch, MarketInstance
from arena.market import Market
from arena.oracle import (
    optimal_assignment,
    optimal_welfare,
    optimal_welfare_batch,
    vcg_payments,
    walrasian_prices,
    welfare_bound,
)

METRICS: tuple[str, ...] = (
    "profit",
    "revenue",
    "buyer_surplus",
    "buyer_surplus_human",
    "buyer_surplus_agent",
    "buyer_surplus_disclosed",
    "buyer_surplus_undisclosed",
    "welfare",
    "w_star",
    "efficiency",
    "capture",
    "match_quality",
    "deal_rate",
    "trades",
    "turns_used",
    "seller_violations",
    "buyer_violations",
    "mean_price",
    "mean_price_norm",
)


BOUNDS: dict[str, tuple[float, float]] = {
    "efficiency": (-math.inf, 1.0),  # no welfare above W*_T
    "match_quality": (-math.inf, 1.0),  # the pairs traded are one assignment of those buyers
    "deal_rate": (0.0, 1.0),
    "trades": (0.0, math.inf),
    "turns_used": (0.0, math.inf),
    "seller_violations": (0.0, math.inf),
    "buyer_violations": (0.0, math.inf),
    "mean_price_norm": (0.0, 1.0),  # prices lie in the range
}
"""What a market's metric can be, where the rules bound it: a confidence interval of its
mean is clipped to these (a t-interval near a bound would pass it)."""


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def market_metrics(market: Market, w_star: float | None = None) -> dict[str, float]:
    """Every metric of one reference market (``w_star`` is computed when not given)."""
    inst = market.instance
    lo, hi = inst.config.price_range
    if w_star is None:
        w_star = welfare_bound(inst.values, inst.costs, inst.inventory, inst.config.turns)
    out = {name: 0.0 for name in METRICS}
    gains = 0.0
    for t in market.trades:
        value = float(inst.values[t.buyer, t.product])
        cost = float(inst.costs[t.product])
        surplus = value - t.price
        out["profit"] += t.price - cost
        out["revenue"] += t.price
        out["buyer_surplus"] += surplus
        out["buyer_surplus_agent" if inst.is_agent[t.buyer] else "buyer_surplus_human"] += surplus
        key = "disclosed" if market.disclosed[t.buyer] else "undisclosed"
        out["buyer_surplus_" + key] += surplus
        out["mean_price"] += t.price
        out["mean_price_norm"] += (t.price - lo) / (hi - lo)
        gains += value - cost
    k = len(market.trades)
    out["trades"] = float(k)
    out["mean_price"] = out["mean_price"] / k if k else math.nan
    out["mean_price_norm"] = out["mean_price_norm"] / k if k else math.nan
    out["welfare"] = out["profit"] + out["buyer_surplus"]
    out["w_star"] = float(w_star)
    out["efficiency"] = _ratio(out["welfare"], w_star)
    out["capture"] = _ratio(out["profit"], w_star)
    if k:
        buyers = sorted(t.buyer for t in market.trades)
        best = optimal_welfare(inst.values[buyers], inst.costs, inst.inventory)
        out["match_quality"] = _ratio(gains, best)
    else:
        out["match_quality"] = math.nan
    out["deal_rate"] = k / inst.num_buyers
    out["turns_used"] = float(market.turn)
    out["seller_violations"] = float(sum(market.seller_violations))
    out["buyer_violations"] = float(sum(market.buyer_violations))
    return out


def welfare_bounds(batch: MarketBatch) -> np.ndarray:
    """W*_T (``w_star``) of every market of a batch: ``oracle.welfare_bound`` batched."""
    return optimal_welfare_batch(batch.values, batch.costs, batch.inventory, batch.config.turns)


def batch_metrics(engine: BatchedMarket, w_star: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every metric for each market of a batch, as (B,) arrays.

    ``w_star`` (B,) may be passed in when the caller caches the oracle (tournaments
    meet the same markets many times).
    """
    b = engine.batch
    lo, hi = engine.lo, engine.hi
    w_star = welfare_bounds(engine.batch) if w_star is None else np.asarray(w_star, float)
    got = engine.bought >= 0
    j = np.where(got, engine.bought, 0)
    value = np.take_along_axis(b.values, j[..., None], axis=2)[..., 0]
    cost = np.take_along_axis(b.costs, j, axis=1)
    price = np.where(got, engine.paid, 0.0)
    surplus = np.where(got, value - price, 0.0)
    gains = np.where(got, value - cost, 0.0).sum(axis=1)
    trades = got.sum(axis=1)
    agent = b.is_agent
    disclosed = engine.disclosed

    out: dict[str, np.ndarray] = {}
    out["profit"] = np.where(got, price - cost, 0.0).sum(axis=1)
    out["revenue"] = price.sum(axis=1)
    out["buyer_surplus"] = surplus.sum(axis=1)
    out["buyer_surplus_human"] = np.where(agent, 0.0, surplus).sum(axis=1)
    out["buyer_surplus_agent"] = np.where(agent, surplus, 0.0).sum(axis=1)
    out["buyer_surplus_disclosed"] = np.where(disclosed, surplus, 0.0).sum(axis=1)
    out["buyer_surplus_undisclosed"] = np.where(disclosed, 0.0, surplus).sum(axis=1)
    out["welfare"] = out["profit"] + out["buyer_surplus"]
    out["w_star"] = w_star
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = w_star > 0
        out["efficiency"] = np.where(ok, out["welfare"] / np.where(ok, w_star, 1.0), np.nan)
        out["capture"] = np.where(ok, out["profit"] / np.where(ok, w_star, 1.0), np.nan)
        # The best assignment of the buyers who bought: the others' surplus set to 0 (a
        # value capped at cost), which leaves the optimum of the rest as it is.
        mq = np.full(b.size, np.nan)
        rows = np.flatnonzero(trades)
        if rows.size:
            c = b.costs[rows][:, None, :]
            v = np.where(got[rows][..., None], b.values[rows], np.minimum(b.values[rows], c))
            best = optimal_welfare_batch(v, b.costs[rows], b.inventory[rows])
            mq[rows] = np.where(best > 0, gains[rows] / np.where(best > 0, best, 1.0), np.nan)
        out["match_quality"] = mq
        out["deal_rate"] = trades / engine.shape[1]
        out["trades"] = trades.astype(float)
        out["turns_used"] = engine.turn.astype(float)
        out["seller_violations"] = engine.seller_violations.sum(axis=1).astype(float)
        out["buyer_violations"] = engine.buyer_violations.sum(axis=1).astype(float)
        out["mean_price"] = np.where(trades > 0, out["revenue"] / np.maximum(trades, 1), np.nan)
        norm = np.where(got, (price - lo) / (hi - lo), 0.0).sum(axis=1)
        out["mean_price_norm"] = np.where(trades > 0, norm / np.maximum(trades, 1), np.nan)
    return {name: out[name] for name in METRICS}


def seller_benchmarks(instance: MarketInstance) -> dict[str, float]:
    """Profit a seller would make under the classic mechanisms, for one instance:

    ``w_star`` (W*_T: perfect price discrimination within T deals, the ``w_star`` metric),
    ``w_star_unlimited`` (W*: the same without the turn limit), ``walrasian_high`` and
    ``walrasian_low`` (profit at the highest / lowest competitive prices on the optimal
    assignment) and ``vcg`` (VCG payments minus the cost of the units served; equal to
    ``walrasian_low`` by theory), and the revenues behind the last three (``*_revenue``:
    payments before costs).
    """
    v, c, inv = instance.values, instance.costs, instance.inventory
    pairs = optimal_assignment(v, c, inv)
    low, high = walrasian_prices(v, c, inv)
    pay = vcg_payments(v, c, inv)
    served_cost = sum(float(c[j]) for _, j in pairs)
    high_revenue = sum(float(high[j]) for _, j in pairs)
    low_revenue = sum(float(low[j]) for _, j in pairs)
    return {
        "w_star": welfare_bound(v, c, inv, instance.config.turns),
        "w_star_unlimited": optimal_welfare(v, c, inv),
        "walrasian_high": high_revenue - served_cost,
        "walrasian_low": low_revenue - served_cost,
        "vcg": float(pay.sum()) - served_cost,
        "walrasian_high_revenue": high_revenue,
        "walrasian_low_revenue": low_revenue,
        "vcg_revenue": float(pay.sum()),
    }
