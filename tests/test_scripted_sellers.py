"""Scripted sellers: batch invariance, determinism, validity, and each strategy's rule.

Batch invariance is checked two ways: turn by turn (the batch policy's message for each
live market equals that of a policy that only ever sees that market's row) and over
whole episodes (B markets at once equal each alone, on the engine and on the scalar
reference).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

import numpy as np
import pytest

from agents.base import BuyerAction, BuyerPolicy, SellerPolicy
from agents.conformance import check_seller
from agents.rollout import play_batch, play_reference
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import (
    DescendingOffers,
    DisclosureAware,
    GreedyMatcher,
    OracleSeller,
    PostedPrice,
    PricingBandit,
    RandomTarget,
)
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate_batch, instance_from_arrays, stack_instances
from arena.metrics import batch_metrics
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs, SellerObs

SELLERS = {
    "posted_price": lambda seed: PostedPrice(),
    "random_target": lambda seed: RandomTarget(seed=seed),
    "greedy": lambda seed: GreedyMatcher(),
    "descending": lambda seed: DescendingOffers(),
    "bandit": lambda seed: PricingBandit(seed=seed),
    "disclosure_aware": lambda seed: DisclosureAware(),
    "oracle": lambda seed: OracleSeller(),
}
SEEDED = ("random_target", "bandit")

MIXED = MarketConfig(agent_share=0.5, disclosure="mandatory", patience=3)
SCARCE = MarketConfig(patience=2, inventory=1)


@dataclass
class Haggler(BuyerPolicy):
    """Test opponent that exercises the standing-bid paths: takes an offer at or below
    70% of its value, otherwise counters on the offered product at 85% of its value
    (rounded down to a cent), and rejects talk turns."""

    def act(self, obs: BuyerObs) -> BuyerAction:
        lo, hi = obs.price_range
        has = obs.offer_product >= 0
        j = np.maximum(obs.offer_product, 0)
        v = np.take_along_axis(obs.values, j[:, None], axis=1)[:, 0]
        with np.errstate(invalid="ignore"):
            take = has & (obs.offer_price <= 0.7 * v)
        bid = np.clip(np.floor(0.85 * v * 100) / 100, lo, hi)
        decision = np.where(take, ACCEPT, np.where(has, COUNTER, REJECT))
        return BuyerAction(decision, j, bid)


BUYERS = {"truthful": Truthful, "haggler": Haggler}


def slice_obs(obs: SellerObs, k: int) -> SellerObs:
    """Row k of a seller observation as a batch of one."""
    rows = {
        f.name: np.array(getattr(obs, f.name)[k : k + 1])
        for f in fields(obs)
        if isinstance(getattr(obs, f.name), np.ndarray)
    }
    return replace(obs, **rows)


def start(policy: SellerPolicy, batch) -> None:
    policy.reset(batch.size)
    if policy.sees_private:
        policy.reveal(batch)


def outcome(engine: BatchedMarket) -> dict[str, np.ndarray]:
    return {
        "bought": engine.bought,
        "paid": engine.paid,
        "turn": engine.turn,
        "seller_violations": engine.seller_violations,
    }


def assert_same(a: dict, b: dict) -> None:
    for k in a:
        assert np.array_equal(a[k], b[k], equal_nan=True), k


# ---------------------------------------------------------------------------
# Conformance: every seller
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("buyer", list(BUYERS))
@pytest.mark.parametrize("name", list(SELLERS))
def test_each_turn_the_batch_decides_like_each_market_alone(name, buyer):
    batch = generate_batch(MIXED, 3, 16)
    big = SELLERS[name](7)
    alone = [SELLERS[name](7) for _ in range(batch.size)]
    start(big, batch)
    for k, policy in enumerate(alone):
        start(policy, stack_instances([batch.instance(k)]))
    answer = BUYERS[buyer]()
    engine = BatchedMarket(batch)
    compared = 0
    while not engine.all_done:
        obs = engine.seller_observation()
        rows = [slice_obs(obs, k) for k in range(batch.size)]
        live = ~obs.done.copy()
        a = big.act(obs)
        for k, policy in enumerate(alone):
            # Ended rows are asked too (the engine keeps calling for the whole batch).
            ak = policy.act(rows[k])
            if live[k]:
                assert (ak.to[0], ak.product[0]) == (a.to[k], a.product[k]), (k, obs.turn[k])
                assert ak.price[0] == a.price[k], (k, obs.turn[k])
                compared += 1
        prompt = engine.offer(a.to, a.product, a.price)
        if prompt is not None:
            d = answer.act(prompt)
            engine.answer(d.decision, d.product, d.price)
    assert compared > 2 * batch.size  # markets were compared well past their first turn
    assert engine.seller_violations.sum() == 0


@pytest.mark.parametrize("buyer", list(BUYERS))
@pytest.mark.parametrize("name", list(SELLERS))
def test_whole_episodes_batched_equal_one_at_a_time(name, buyer):
    batch = generate_batch(MIXED, 5, 16)
    together = outcome(play_batch(batch, SELLERS[name](3), BUYERS[buyer]()))
    assert (together["turn"] > 1).any()
    for k in range(batch.size):
        one = generate_batch(MIXED, 5, [k])
        alone = outcome(play_batch(one, SELLERS[name](3), BUYERS[buyer]()))
        assert_same({key: v[k : k + 1] for key, v in together.items()}, alone)
        if k < 4:
            market = play_reference(one.instance(0), SELLERS[name](3), BUYERS[buyer]())
            assert list(together["bought"][k]) == market.bought
            assert np.array_equal(together["paid"][k], market.paid, equal_nan=True)


@pytest.mark.parametrize("name", list(SELLERS))
def test_same_seed_same_play_and_a_seed_matters_where_there_is_one(name):
    batch = generate_batch(MarketConfig(), 11, 64)
    first = outcome(play_batch(batch, SELLERS[name](0), Truthful()))
    assert_same(first, outcome(play_batch(batch, SELLERS[name](0), Truthful())))
    # One policy object replayed: reset must clear everything the last episode left,
    # whether the next batch has another shape or the same one.
    policy = SELLERS[name](0)
    play_batch(generate_batch(SCARCE, 12, 8), policy, Truthful())
    assert_same(first, outcome(play_batch(batch, policy, Truthful())))
    assert_same(first, outcome(play_batch(batch, policy, Truthful())))
    if name in SEEDED:
        other = outcome(play_batch(batch, SELLERS[name](1), Truthful()))
        assert not np.array_equal(first["paid"], other["paid"], equal_nan=True)


@pytest.mark.parametrize("config", [MarketConfig(), SCARCE], ids=["default", "scarce"])
@pytest.mark.parametrize("name", list(SELLERS))
def test_no_seller_violations(name, config):
    batch = generate_batch(config, 21, 500)
    for buyer in (Truthful(), Haggler()):
        engine = play_batch(batch, SELLERS[name](0), buyer)
        assert engine.seller_violations.sum() == 0
        assert engine.turn.min() >= 1


@pytest.mark.parametrize("name", list(SELLERS))
def test_prices_stay_valid_and_above_cost_on_the_narrowest_range(name):
    # A range one unit wide leaves a hundred whole-cent prices; narrower ones are refused by
    # the config, since cent rounding would undo the sellers' cost floors.
    with pytest.raises(ValueError, match="hi - lo >= 1"):
        MarketConfig(price_range=(0.0, 0.5))
    cfg = MarketConfig(price_range=(2.0, 3.0))
    engine = play_batch(generate_batch(cfg, 22, 200), SELLERS[name](0), Truthful())
    assert engine.seller_violations.sum() == 0
    assert (engine.bought >= 0).any()
    got = engine.bought >= 0
    cost = np.take_along_axis(engine.costs, np.where(got, engine.bought, 0), axis=1)
    assert (engine.paid[got] >= cost[got] - 0.01).all()  # no sale more than a cent below cost


@pytest.mark.parametrize("name", list(SELLERS))
def test_the_shared_conformance_check_passes(name):
    assert check_seller(SELLERS[name], markets=6) == []


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="noise"):
        GreedyMatcher(noise=0.0)
    with pytest.raises(ValueError, match="patience"):
        GreedyMatcher(patience=-0.01)
    with pytest.raises(ValueError, match="spare"):
        GreedyMatcher(spare=-0.1)
    for grid in (1, 3.5):
        with pytest.raises(ValueError, match="grid"):
            GreedyMatcher(grid=grid)
    with pytest.raises(ValueError, match="step"):
        DescendingOffers(step=-0.1)
    with pytest.raises(ValueError, match="arms"):
        PricingBandit(arms=())
    with pytest.raises(ValueError, match="agent_markup"):
        DisclosureAware(agent_markup=-1.5)


# ---------------------------------------------------------------------------
# Strategy by strategy
# ---------------------------------------------------------------------------


def test_oracle_captures_the_turn_limited_bound_against_truthful_buyers():
    for config in (MarketConfig(), MarketConfig(turns=5), SCARCE):
        m = batch_metrics(play_batch(generate_batch(config, 31, 200), OracleSeller(), Truthful()))
        ok = np.isfinite(m["capture"])
        assert ok.sum() > 190
        np.testing.assert_allclose(m["capture"][ok], 1.0, rtol=0, atol=1e-9)
        assert m["seller_violations"].sum() == 0


def test_oracle_prices_at_exact_values_then_talks():
    cfg = MarketConfig(buyers=2, products=1, inventory=2, turns=4)
    inst = instance_from_arrays(cfg, [[80.123], [10.0]], [20.0])
    engine = play_batch(stack_instances([inst]), OracleSeller(), Truthful())
    assert engine.bought[0].tolist() == [0, -1]
    assert engine.paid[0, 0] == 80.123  # not rounded to cents
    assert engine.turn[0] == 4  # the leftover turns were spent, validly, on talk
    assert engine.seller_violations.sum() == 0
    assert engine.n_messages[0].tolist() == [1, 3]
    assert engine.last_product[0, 1] == -1


def test_greedy_matches_better_than_random_targeting():
    batch = generate_batch(MarketConfig(), 41, 1000)
    greedy = batch_metrics(play_batch(batch, GreedyMatcher(), Truthful()))
    random = batch_metrics(play_batch(batch, RandomTarget(seed=0), Truthful()))
    gap = np.nanmean(greedy["match_quality"]) - np.nanmean(random["match_quality"])
    assert gap > 0.1, gap  # about 0.18 on these markets
    assert np.nanmean(greedy["profit"]) > 2 * np.nanmean(random["profit"])


def test_random_target_spreads_its_choices_uniformly():
    batch = generate_batch(MarketConfig(), 42, 2000)
    a = RandomTarget(seed=0).act(BatchedMarket(batch).seller_observation())
    np.testing.assert_allclose(np.bincount(a.to, minlength=8) / batch.size, 1 / 8, atol=0.03)
    np.testing.assert_allclose(np.bincount(a.product, minlength=4) / batch.size, 1 / 4, atol=0.04)
    costs = batch.costs[np.arange(batch.size), a.product]
    np.testing.assert_allclose(a.price, np.round(costs * 1.5, 2))


def test_greedy_lowers_its_price_after_each_refusal():
    cfg = MarketConfig(buyers=1, products=1, inventory=1, turns=8)
    inst = instance_from_arrays(cfg, [[30.0]], [10.0], signals=[[60.0]])
    engine = BatchedMarket(stack_instances([inst]))
    policy, buyer = GreedyMatcher(), Truthful()
    policy.reset(1)
    prices = []
    while not engine.all_done:
        a = policy.act(engine.seller_observation())
        prices.append(float(a.price[0]))
        prompt = engine.offer(a.to, a.product, a.price)
        if prompt is not None:
            d = buyer.act(prompt)
            engine.answer(d.decision, d.product, d.price)
    assert engine.bought[0, 0] == 0
    assert all(b < a for a, b in zip(prices, prices[1:], strict=False)), prices
    assert prices[-1] <= 30.0 < prices[-2]


@pytest.mark.parametrize("spare", [0.0, 0.3])
def test_a_patient_greedy_asks_more_only_while_turns_are_to_spare(spare):
    cfg = MarketConfig(buyers=4, products=2, inventory=1, turns=8)
    batch = generate_batch(cfg, 3, range(64))
    engine, plain = BatchedMarket(batch), GreedyMatcher()
    patient = GreedyMatcher(patience=0.05, spare=spare)
    plain.reset(64)
    patient.reset(64)
    buyer, spared, tight, short = Truthful(), 0, 0, 0
    while not engine.all_done:
        obs = engine.seller_observation()
        a, b = plain.act(obs), patient.act(obs)
        assert np.array_equal(a.to, b.to) and np.array_equal(a.product, b.product)
        ar = np.arange(64)
        open_buyers = (obs.active & (obs.stock.sum(1, keepdims=True) > 0)).sum(1)
        to_spare = obs.turns_left - open_buyers
        ask = (to_spare > spare * open_buyers) & (obs.counter_product[ar, a.to] != a.product)
        lo, hi = obs.price_range
        want = np.clip(np.round((a.price + 0.05 * (hi - lo)) * 100) / 100, lo, hi)
        live = ~obs.done
        assert np.allclose(b.price[ask & live], want[ask & live], atol=0.011)
        assert np.array_equal(b.price[~ask & live], a.price[~ask & live])
        spared += int((ask & live).sum())
        tight += int((~ask & live).sum())
        # turns to spare, but too few for this ``spare``: patience held back
        short += int((live & (to_spare > 0) & (to_spare <= spare * open_buyers)).sum())
        prompt = engine.offer(a.to, a.product, a.price)
        if prompt is not None:
            d = buyer.act(prompt)
            engine.answer(d.decision, d.product, d.price)
    assert spared > 0 and tight > 0
    assert (short > 0) == (spare > 0)


def test_descending_offers_follow_the_schedule():
    cfg = MarketConfig(buyers=1, products=2, inventory=1, turns=10)
    # Product 0 has the larger signalled margin (40 > 30), so every offer is product 0.
    inst = instance_from_arrays(cfg, [[12.5, 90.0]], [10.0, 40.0], signals=[[50.0, 70.0]])
    engine = play_batch(stack_instances([inst]), DescendingOffers(), Truthful())
    # 0.9 s, 0.8 s, ... until the floor 10 * 1.2 = 12, where the buyer (value 12.5) buys.
    assert engine.bought[0, 0] == 0
    assert engine.paid[0, 0] == 12.0
    assert engine.turn[0] == 8  # 45, 40, 35, 30, 25, 20, 15 refused, then 12
    policy = DescendingOffers(start=1.0, step=0.25, floor_markup=0.0)
    engine = play_batch(stack_instances([inst]), policy, Truthful())
    assert engine.paid[0, 0] == 12.5  # 50, 37.5, 25 refused; 12.5 meets the value exactly
    assert engine.turn[0] == 4


def test_descending_offers_rotate_buyers():
    batch = generate_batch(MarketConfig(buyers=4, turns=8), 2, 1)
    engine = BatchedMarket(batch)
    policy = DescendingOffers(start=2.0)  # nobody buys at twice its signal
    targets = []
    for _ in range(6):
        a = policy.act(engine.seller_observation())
        targets.append(int(a.to[0]))
        prompt = engine.offer(a.to, a.product, a.price)
        d = Truthful().act(prompt)
        engine.answer(d.decision, d.product, d.price)
    assert targets == [0, 1, 2, 3, 0, 1]


def test_bandit_statistics_grow_within_an_episode_and_reset_between():
    batch = generate_batch(MarketConfig(), 51, 32)
    bandit = PricingBandit(seed=0)
    engine = BatchedMarket(batch)
    bandit.reset(batch.size)
    seen = []
    while not engine.all_done:
        a = bandit.act(engine.seller_observation())
        seen.append(bandit.counts.sum(axis=1).copy())
        prompt = engine.offer(a.to, a.product, a.price)
        if prompt is not None:
            d = Truthful().act(prompt)
            engine.answer(d.decision, d.product, d.price)
    assert (seen[0] == 0).all()
    assert (seen[1] == 1).all()  # the first offer of every market has been scored
    assert (np.diff(np.array(seen), axis=0) >= 0).all()
    assert (seen[-1] >= 5).all()
    assert (bandit.rewards > 0).any() and (bandit.rewards == 0).any()
    for size in (batch.size, 3):
        bandit.reset(size)
        assert bandit.counts.shape == (size, 4)
        assert not bandit.counts.any() and not bandit.rewards.any()


def test_bandit_prices_with_the_arm_its_statistics_favour():
    batch = generate_batch(MarketConfig(), 52, 1)
    obs = BatchedMarket(batch).seller_observation()
    bandit = PricingBandit(arms=(0.6, 0.7, 0.8, 0.9), seed=0, min_markup=0.0)
    chosen = []
    for best in range(4):
        bandit.reset(1)
        bandit.counts[:] = 200
        bandit.rewards[0, best] = 80.0  # mean 0.4 against 0 for the other arms
        a = bandit.act(obs)
        signal = batch.signals[0, a.to[0], a.product[0]]
        chosen.append((a.price[0], round(min(bandit.arms[best] * signal, 100.0), 2)))
    for price, expected in chosen:
        assert price == expected
    assert len({price for price, _ in chosen}) == 4


@pytest.mark.parametrize(
    "policy", [GreedyMatcher(), PricingBandit(), DisclosureAware()], ids=lambda p: type(p).__name__
)
def test_a_standing_bid_above_cost_is_taken_at_the_bid(policy):
    cfg = MarketConfig(buyers=2, products=1, inventory=2, turns=6)
    inst = instance_from_arrays(cfg, [[80.0], [30.0]], [20.0])
    engine = BatchedMarket(stack_instances([inst]))
    policy.reset(1)
    # A hand-played first turn: 95 to buyer 0, who counters at 75.
    engine.offer(np.array([0]), np.array([0]), np.array([95.0]))
    engine.answer(np.array([COUNTER]), np.array([0]), np.array([75.0]))
    a = policy.act(engine.seller_observation())
    assert (int(a.to[0]), int(a.product[0]), float(a.price[0])) == (0, 0, 75.0)
    engine.offer(a.to, a.product, a.price)
    assert engine.bought[0, 0] == 0 and engine.paid[0, 0] == 75.0  # traded on the bid


def _twin_market(rule: str):
    """Two buyers with identical signals and values; buyer 0 is an agent."""
    cfg = MarketConfig(buyers=2, products=1, inventory=2, turns=4, disclosure=rule)
    return instance_from_arrays(
        cfg, [[30.0], [30.0]], [10.0], signals=[[60.0], [60.0]], is_agent=[True, False]
    )


def _first_offers(instance) -> tuple[dict[int, float], list[int]]:
    engine = BatchedMarket(stack_instances([instance]))
    policy = DisclosureAware()
    policy.reset(1)
    offers: dict[int, float] = {}
    order = []
    while len(offers) < 2:
        a = policy.act(engine.seller_observation())
        offers.setdefault(int(a.to[0]), float(a.price[0]))
        order.append(int(a.to[0]))
        d = Truthful().act(engine.offer(a.to, a.product, a.price))
        engine.answer(d.decision, d.product, d.price)
    return offers, order


def test_disclosure_aware_prices_disclosed_agents_differently():
    offers, order = _first_offers(_twin_market("mandatory"))
    assert order[0] == 1  # the undisclosed buyer is reached first
    assert offers[1] == pytest.approx(60.0 * (1 - 0.05))  # human_markup
    assert offers[0] == pytest.approx(60.0 * (1 - 0.15))  # agent_markup
    # The same two buyers, nobody disclosed: identical buyers get identical prices.
    offers, order = _first_offers(_twin_market("hidden"))
    assert order[0] == 0
    assert offers[0] == offers[1] == pytest.approx(57.0)


def test_greedy_matcher_incremental_table_equals_a_full_recompute():
    """The per-turn cache of step-2 values must not change any decision."""

    class FullRecompute(GreedyMatcher):
        def act(self, obs):
            self._table = None  # forces the whole table every turn
            return super().act(obs)

    for cfg in (MarketConfig(), MarketConfig(buyers=6, products=3, patience=2, signal_noise=0.3)):
        batch = generate_batch(cfg, 11, 200)
        a = play_batch(batch, GreedyMatcher(), Haggler())
        b = play_batch(batch, FullRecompute(), Haggler())
        assert np.array_equal(a.paid, b.paid, equal_nan=True)
        assert np.array_equal(a.bought, b.bought) and np.array_equal(a.turn, b.turn)
        assert np.array_equal(a.last_price, b.last_price, equal_nan=True)


def test_greedy_matcher_table_is_the_same_however_its_rows_are_shared_among_threads(
    monkeypatch,
):
    """``pair_table(obs, threads=k)`` splits step 2 among k threads, on the first turn's
    whole table and on the rows later turns recompute; every turn's table is the same."""
    from agents import rows
    from agents.scripted import sellers

    monkeypatch.setattr(sellers, "_ROWS_PER_THREAD", 1)  # split even these small batches
    shadows = {k: GreedyMatcher() for k in (2, 3, 5)}
    turns = []

    class Checking(GreedyMatcher):
        def act(self, obs):
            value, price = self.pair_table(obs)
            for threads, other in shadows.items():
                v, p = other.pair_table(obs, threads=threads)
                np.testing.assert_array_equal(v, value)
                np.testing.assert_array_equal(p, price)
            turns.append(obs.turn.copy())
            return super().act(obs)  # a second call in one turn changes nothing

    cfg = MarketConfig(buyers=6, products=3, patience=2, signal_noise=0.3)
    batch = generate_batch(cfg, 11, 41)
    played = play_batch(batch, Checking(), Haggler())
    alone = play_batch(batch, GreedyMatcher(), Haggler())
    assert np.array_equal(played.paid, alone.paid, equal_nan=True)
    assert len(turns) == cfg.turns
    assert {(os.getpid(), k) for k in (2, 3, 5)} <= set(rows._POOLS)


def test_oracle_uses_leftover_turns_on_bids_and_concessions():
    """Against buyers that refuse an ask at their value, the reference still trades: it takes
    standing bids above cost and halves its ask; it never sells below cost."""
    from agents.scripted.buyers import StrategicAgent, Threshold

    batch = generate_batch(MarketConfig(), 5, 200)
    for buyer in (Haggler(), Threshold(), StrategicAgent()):
        engine = play_batch(batch, OracleSeller(), buyer)
        m = batch_metrics(engine)
        assert m["profit"].mean() > 20 and m["seller_violations"].sum() == 0
        got = engine.bought >= 0
        cost = np.take_along_axis(engine.costs, np.where(got, engine.bought, 0), axis=1)
        assert (engine.paid[got] >= cost[got]).all()
