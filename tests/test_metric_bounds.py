"""The bounds the rules put on a market's metrics (``arena.metrics.BOUNDS``) hold on
played markets, and an evaluation's interval is clipped to them: a t-interval of a rate
near 1 would pass 1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.evaluate import play_markets, summarize
from agents.registry import make, make_buyers
from arena.config import MarketConfig
from arena.metrics import BOUNDS

PAIRS = [
    ("greedy_matcher", "truthful"),
    ("posted_price", "haggler"),
    ("random_target", "noisy_human:0.5,strategic:0.5"),
    ("oracle", "threshold"),
    ("descending_offers", "strategic"),
]


@pytest.mark.parametrize(("seller", "buyers"), PAIRS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_played_markets_stay_within_the_bounds(seller, buyers, seed):
    cfg = MarketConfig(buyers=5, products=3, turns=7, signal_noise=0.2 * seed, agent_share=0.5)
    got = play_markets(
        cfg, seed, range(300), make(seller, "seller", seed), make_buyers(buyers, seed)
    )
    for name, (low, high) in BOUNDS.items():
        x = got[name][np.isfinite(got[name])]
        assert x.size and x.min() >= low - 1e-9 and x.max() <= high + 1e-9, name


def test_an_interval_is_clipped_to_what_its_metric_can_be():
    rate = np.array([1.0, 1.0, 1.0, 0.75])  # its t-interval passes 1
    profit = np.array([1.0, 1.0, 1.0, 0.75])  # unbounded: kept as it is
    out = summarize({"deal_rate": rate, "profit": profit})
    assert out["deal_rate_ci"][1] == 1.0 and out["profit_ci"][1] > 1.0
    assert out["deal_rate_ci"][0] == out["profit_ci"][0] < 1.0
    one = summarize({"deal_rate": np.array([1.0])})  # no interval: nan stays nan
    assert math.isnan(one["deal_rate_ci"][0]) and math.isnan(one["deal_rate_ci"][1])
