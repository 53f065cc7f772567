"""Orderings that economics predicts, through the public registry names."""

from __future__ import annotations

import numpy as np
import pytest

from agents import registry
from agents.evaluate import play_markets
from arena.config import MarketConfig

CONFIG = MarketConfig()
MARKETS = 600


def run(seller: str, buyers: str, config: MarketConfig = CONFIG) -> dict[str, np.ndarray]:
    return play_markets(
        config,
        7,
        range(MARKETS),
        registry.make(seller, "seller", seed=1),
        registry.make_buyers(buyers, seed=1),
    )


def test_the_oracle_seller_captures_everything_from_truthful_buyers():
    m = run("oracle", "truthful")
    np.testing.assert_allclose(m["capture"], 1.0, atol=1e-9)
    np.testing.assert_allclose(m["buyer_surplus"], 0.0, atol=1e-9)


def test_a_haggler_keeps_more_than_a_truthful_buyer_against_a_posted_price():
    assert run("posted_price", "haggler")["buyer_surplus"].mean() > (
        run("posted_price", "truthful")["buyer_surplus"].mean() + 1.0
    )


def test_the_greedy_matcher_matches_better_than_random_targeting():
    greedy = np.nanmean(run("greedy_matcher", "truthful")["match_quality"])
    random = np.nanmean(run("random_target", "truthful")["match_quality"])
    assert greedy > random + 0.1


@pytest.mark.parametrize("seller", ["greedy_matcher", "pricing_bandit"])
def test_holding_out_pays_against_a_discriminating_seller(seller):
    # A seller that prices near each buyer's signalled value leaves a truthful buyer little;
    # a strategic buyer that holds out and bids low keeps more.
    assert run(seller, "strategic")["buyer_surplus"].mean() > (
        run(seller, "truthful")["buyer_surplus"].mean()
    )


def test_learning_sellers_beat_a_posted_price_against_truthful_buyers():
    posted = run("posted_price", "truthful")["profit"].mean()
    for seller in ("greedy_matcher", "descending_offers", "pricing_bandit"):
        assert run(seller, "truthful")["profit"].mean() > 2 * posted, seller


def test_welfare_never_exceeds_the_full_information_bound():
    for seller in ("greedy_matcher", "pricing_bandit", "random_target"):
        m = run(seller, "noisy_human")
        assert (m["welfare"] <= m["w_star"] + 1e-9).all(), seller
        assert (m["efficiency"][np.isfinite(m["efficiency"])] <= 1 + 1e-12).all(), seller


def test_a_more_informative_signal_raises_a_signal_pricing_sellers_capture():
    sharp = run("greedy_matcher", "truthful", MarketConfig(signal_noise=0.0))
    blurry = run("greedy_matcher", "truthful", MarketConfig(signal_noise=0.4))
    assert sharp["capture"].mean() > blurry["capture"].mean() + 0.05
