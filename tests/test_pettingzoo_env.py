"""The market as a PettingZoo AEC game: PettingZoo's own API and seed tests, a
hand-scripted market with exact payoffs, observe() as a pure query, the seller's info
where W* is 0."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, seed_test

from agents.pettingzoo_env import SELLER, MarketAEC, env
from arena.config import MarketConfig
from arena.generator import generate
from arena.oracle import welfare_bound

REFUSALS = MarketConfig(buyers=3, products=2, inventory=1, turns=8)
ZERO_WELFARE = MarketConfig(buyers=1, products=1, turns=1, cost_level=0.95)  # W* = 0 in some
VOLUNTARY = MarketConfig(
    buyers=3,
    products=2,
    turns=9,
    patience=2,
    price_range=(100.0, 600.0),
    agent_share=0.6,
    disclosure="voluntary",
)


@pytest.mark.parametrize(
    "kwargs", [{}, {"config": VOLUNTARY, "disclose": True}], ids=["default", "voluntary"]
)
def test_passes_pettingzoos_api_and_seed_tests(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its advice on Dict spaces and agent naming
        api_test(env(**kwargs), num_cycles=300)
        seed_test(lambda: env(**kwargs), num_cycles=300)


def test_a_scripted_market_pays_every_side_exactly():
    cfg = MarketConfig(buyers=2, products=1, inventory=1, turns=3, price_range=(0.0, 100.0))
    game = MarketAEC(cfg)
    game.reset(seed=4)
    inst = generate(cfg, 4, 0)
    w_star = welfare_bound(inst.values, inst.costs, inst.inventory, cfg.turns)
    k = game.seller_space.levels
    # Turn 1: the seller offers buyer 0 product 0 at the lowest level; buyer 0 rejects.
    assert game.agent_selection == SELLER
    game.step(0 * k + 0)
    assert game.agent_selection == "buyer_0"
    obs = game.observe("buyer_0")
    assert obs["action_mask"][1] == 1  # an offer is on the table: accept is legal
    game.step(0)  # reject
    assert game.agent_selection == SELLER and game.rewards == dict.fromkeys(game.agents, 0.0)
    # Turn 2: the same offer to buyer 1, who accepts. The lowest level is buyer 1's signal
    # 38.94 - 0.25 x the width 100 = 13.94, below the cost 18.4516: the cost, to the cent.
    assert (inst.signals[1, 0], inst.costs[0]) == pytest.approx((38.9424, 18.4516), abs=1e-4)
    price = 18.45
    game.step(1 * k + 0)
    assert game.agent_selection == "buyer_1"
    game.step(1)  # accept
    assert game.rewards[SELLER] == pytest.approx((price - inst.costs[0]) / w_star)
    assert game.rewards["buyer_1"] == pytest.approx((inst.values[1, 0] - price) / 100.0)
    assert game.rewards["buyer_0"] == 0.0
    # The stock is gone: the market is over and every agent steps out.
    assert all(game.terminations.values())
    order = []
    while game.agents:
        order.append(game.agent_selection)
        game.step(None)
    assert sorted(order) == sorted(game.possible_agents)


def test_reset_with_a_seed_replays_and_reset_without_moves_on():
    game = MarketAEC()
    game.reset(seed=7)
    a = game.observe(SELLER)["observation"].copy()
    game.reset()
    assert game.infos[SELLER]["market"] == 1
    b = game.observe(SELLER)["observation"]
    game.reset(seed=7)
    np.testing.assert_array_equal(game.observe(SELLER)["observation"], a)
    assert not np.array_equal(a, b)


def _seller_views(seed: int, peek: bool) -> list[np.ndarray]:
    """The seller's observation at each of its turns in market 0 of ``seed``, every agent
    playing a legal action drawn from a generator of ``seed``; with ``peek``, every agent
    is also observed after every step (between the seller's message and its answer
    too)."""
    game = MarketAEC(REFUSALS)
    game.reset(seed=seed)
    rng = np.random.default_rng(seed)
    views = []
    for agent in game.agent_iter():
        obs, _, terminated, truncated, _ = game.last()
        if agent == SELLER:
            views.append(obs["observation"].copy())
        legal = np.flatnonzero(obs["action_mask"])
        done = terminated or truncated or legal.size == 0
        game.step(None if done else int(rng.choice(legal)))
        if peek:
            for other in game.agents:
                game.observe(other)
    return views


@pytest.mark.parametrize("seed", range(5))
def test_observe_is_a_pure_query(seed):
    """Looking at the seller between its message and the buyer's answer changes none of
    its later observations (its memory of refusals moves on in step only)."""
    plain, peeked = _seller_views(seed, peek=False), _seller_views(seed, peek=True)
    assert len(plain) == len(peeked) > 2
    for a, b in zip(plain, peeked, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_sellers_info_holds_no_nan_where_welfare_is_zero():
    """capture and efficiency are not defined where W* is 0: left out, not NaN."""
    game = MarketAEC(ZERO_WELFARE)
    zero = []
    for seed in range(12):
        game.reset(seed=seed)
        while not game.terminations[SELLER]:
            game.step(0)  # the one offer; the buyer rejects
        info = game.infos[SELLER]
        assert all(np.isfinite(v) for v in info.values()), info
        zero.append(info["w_star"] == 0)
        assert ("capture" in info) == ("efficiency" in info) == (info["w_star"] > 0)
    assert any(zero) and not all(zero)
