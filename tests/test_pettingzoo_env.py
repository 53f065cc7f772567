"""The market as a PettingZoo AEC game: PettingZoo's own API and seed tests, and a
hand-scripted market with exact payoffs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, seed_test

from agents.pettingzoo_env import SELLER, MarketAEC, env
from arena.config import MarketConfig
from arena.generator import generate
from arena.oracle import welfare_bound

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
