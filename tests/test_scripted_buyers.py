"""Scripted buyers: batch invariance, valid answers, hand-checked decisions on constructed
observations, and the behaviour each one documents (surplus, concession, logit acceptance,
impatience, anchoring)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.special import expit

from agents.base import AGENT, HUMAN, BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.conformance import check_buyer
from agents.rollout import play_batch, play_reference
from agents.scripted.buyers import Haggler, NoisyHuman, StrategicAgent, Threshold, Truthful
from agents.scripted.sellers import PostedPrice
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import MarketBatch, generate_batch
from arena.metrics import batch_metrics
from arena.noise import uniform
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs, SellerObs

NAN = float("nan")

DEFAULT = MarketConfig()
SCARCE = MarketConfig(patience=2, inventory=1, price_range=(100.0, 1100.0))
# Few buyers, many turns: long conversations, standing bids, patience running out.
LONG = MarketConfig(buyers=3, products=3, inventory=1, turns=30, patience=6)
CONFIGS = {"default": DEFAULT, "scarce": SCARCE, "long": LONG}

BUYERS = {
    "truthful": Truthful,
    "threshold": Threshold,
    "haggler": Haggler,
    "noisy": lambda: NoisyHuman(seed=3),
    "strategic": StrategicAgent,
}


@dataclass
class RandomOffers(SellerPolicy):
    """A test seller that wanders: random buyer (sometimes one who has left or bought, so
    some rows are padding), random in-stock product or a talk turn, random price in the
    range. Keyed noise, so it is batch-invariant itself."""

    seed: int = 0

    def act(self, obs: SellerObs) -> SellerAction:
        lo, hi = obs.price_range

        def u(stream: int) -> np.ndarray:
            return uniform(self.seed, obs.key, obs.turn, stream)

        to = np.minimum((u(0) * obs.num_buyers).astype(np.int64), obs.num_buyers - 1)
        in_stock = obs.stock > 0
        # The r-th in-stock product, r uniform over the in-stock count.
        rank = (u(1) * np.maximum(in_stock.sum(axis=1), 1)).astype(np.int64)
        product = np.argmax(np.cumsum(in_stock, axis=1) > rank[:, None], axis=1)
        product = np.where(u(2) < 0.15, -1, product)
        price = np.round(lo + u(3) * (hi - lo), 2)
        return SellerAction(to=to, product=product, price=np.clip(price, lo, hi))


# ---------------------------------------------------------------- helpers


def make_obs(
    values,
    price,
    product=0,
    *,
    costs=None,
    stock=None,
    n_messages=1,
    first_price=None,
    turn=1,
    turns=12,
    patience=0,
    price_range=(0.0, 100.0),
    key=0,
    buyer=0,
) -> BuyerObs:
    """A hand-made observation; per-market arguments broadcast to one batch size."""
    per_row = [price, product, n_messages, turn, key, buyer]
    if first_price is not None:
        per_row.append(first_price)
    b = max(np.size(x) for x in per_row)
    values = np.atleast_2d(np.asarray(values, float))
    m = values.shape[1]

    def rows(x, dtype):
        return np.broadcast_to(np.asarray(x, dtype), (b,)).copy()

    def table(x, dtype):
        return np.broadcast_to(np.asarray(x, dtype), (b, m)).copy()

    price = rows(price, float)
    product = rows(product, np.int64)
    price = np.where(product >= 0, price, np.nan)
    return BuyerObs(
        turns=turns,
        price_range=price_range,
        patience=patience,
        needs_answer=np.ones(b, bool),
        buyer=rows(buyer, np.int64),
        values=table(values, float),
        costs=table(np.zeros(m) if costs is None else costs, float),
        stock=table(np.ones(m) if stock is None else stock, np.int64),
        offer_product=product,
        offer_price=price,
        n_messages=rows(n_messages, np.int64),
        first_price=price.copy() if first_price is None else rows(first_price, float),
        counter_product=rows(-1, np.int64),
        counter_price=rows(NAN, float),
        is_agent=rows(False, bool),
        disclosed=rows(False, bool),
        turn=rows(turn, np.int64),
        key=rows(key, np.uint64),
        num_buyers=8,
    )


def row(obs: BuyerObs, k: int) -> BuyerObs:
    """Market k of a batch observation as a batch of one."""
    return dataclasses.replace(
        obs,
        **{
            f.name: getattr(obs, f.name)[k : k + 1]
            for f in dataclasses.fields(obs)
            if isinstance(getattr(obs, f.name), np.ndarray)
        },
    )


def frozen(obs: BuyerObs) -> BuyerObs:
    """A copy (engine observations may be views of state that later turns change)."""
    return dataclasses.replace(
        obs,
        **{
            f.name: np.array(getattr(obs, f.name), copy=True)
            for f in dataclasses.fields(obs)
            if isinstance(getattr(obs, f.name), np.ndarray)
        },
    )


def engine_observations(
    batch: MarketBatch, seller: SellerPolicy, buyer: BuyerPolicy
) -> list[BuyerObs]:
    """Every buyer observation of a played batch (``play_batch``'s loop, recording)."""
    engine = BatchedMarket(batch)
    seller.reset(batch.size)
    buyer.reset(batch.size)
    seen = []
    while not engine.all_done:
        a = seller.act(engine.seller_observation())
        obs = engine.offer(a.to, a.product, a.price, a.malformed)
        if obs is not None:
            seen.append(frozen(obs))
            d = buyer.act(obs)
            engine.answer(d.decision, d.product, d.price, d.malformed)
    return seen


def decide(policy: BuyerPolicy, obs: BuyerObs) -> BuyerAction:
    policy.reset(obs.batch_size)
    return policy.act(obs)


def assert_same_answers(x: BuyerAction, y: BuyerAction, ask: np.ndarray) -> None:
    np.testing.assert_array_equal(x.decision[ask], y.decision[ask])
    bid = ask & (x.decision == COUNTER)
    np.testing.assert_array_equal(x.product[bid], y.product[bid])
    np.testing.assert_array_equal(x.price[bid], y.price[bid])


def surplus_profit_deals(batch: MarketBatch, buyer: BuyerPolicy) -> dict[str, np.ndarray]:
    return batch_metrics(play_batch(batch, PostedPrice(), buyer))


# ---------------------------------------------------------------- conformance


@pytest.mark.parametrize("name", BUYERS)
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_answers_do_not_depend_on_the_batch(name, config):
    """Each market's answer is the same in a batch of 16 as alone, padding rows included
    (engine observations from a wandering seller: talk turns, standing bids, sold-out
    products, buyers asked after they left)."""
    batch = generate_batch(config, 11, 16)
    seen = engine_observations(batch, RandomOffers(seed=5), BUYERS[name]())
    assert len(seen) >= 5
    assert any(not obs.needs_answer.all() for obs in seen)  # padding rows were answered too
    for obs in seen:
        full = decide(BUYERS[name](), obs)
        assert full.decision.shape == full.product.shape == full.price.shape == (16,)
        assert np.isfinite(full.price).all()
        for k in range(obs.batch_size):
            one = decide(BUYERS[name](), row(obs, k))
            assert_same_answers(
                BuyerAction(
                    full.decision[k : k + 1], full.product[k : k + 1], full.price[k : k + 1]
                ),
                one,
                np.ones(1, bool),
            )


@pytest.mark.parametrize("name", BUYERS)
@pytest.mark.parametrize("seller", [PostedPrice, RandomOffers], ids=["posted", "random"])
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_whole_episodes_do_not_depend_on_the_batch(name, seller, config):
    together = play_batch(generate_batch(config, 2, 16), seller(), BUYERS[name]())
    for k in range(16):
        alone = play_batch(generate_batch(config, 2, [k]), seller(), BUYERS[name]())
        for field in ("bought", "left", "n_messages", "counter_product", "turn"):
            np.testing.assert_array_equal(getattr(alone, field)[0], getattr(together, field)[k])
        for field in ("paid", "counter_price", "profit"):
            np.testing.assert_array_equal(getattr(alone, field)[0], getattr(together, field)[k])
        np.testing.assert_array_equal(alone.buyer_violations[0], together.buyer_violations[k])


@pytest.mark.parametrize("name", BUYERS)
def test_the_scalar_reference_market_agrees(name):
    """Answers survive the text protocol: the reference market (which renders and checks
    every message) ends exactly where the engine does."""
    batch = generate_batch(LONG, 4, 8)
    engine = play_batch(batch, RandomOffers(seed=1), BUYERS[name]())
    for k in range(batch.size):
        market = play_reference(batch.instance(k), RandomOffers(seed=1), BUYERS[name]())
        assert market.bought == engine.bought[k].tolist()
        np.testing.assert_array_equal(market.paid, engine.paid[k])
        assert market.buyer_violations == engine.buyer_violations[k].tolist()


@pytest.mark.parametrize("name", BUYERS)
@pytest.mark.parametrize("seller", [PostedPrice, RandomOffers], ids=["posted", "random"])
@pytest.mark.parametrize("config", [DEFAULT, SCARCE], ids=["default", "scarce"])
def test_never_an_invalid_answer(name, seller, config):
    engine = play_batch(generate_batch(config, 0, 500), seller(), BUYERS[name]())
    assert engine.buyer_violations.sum() == 0
    if seller is RandomOffers:
        # The wandering seller does make buyers answer talk turns and sold-out bids.
        assert (engine.counter_product >= 0).any() or name in ("truthful", "threshold")


@pytest.mark.parametrize("name", BUYERS)
def test_passes_the_conformance_check(name):
    def build(seed: int) -> BuyerPolicy:
        return NoisyHuman(seed=seed) if name == "noisy" else BUYERS[name]()

    assert check_buyer(build) == []


def test_kinds():
    assert Threshold.kind == HUMAN and Haggler.kind == HUMAN and NoisyHuman.kind == HUMAN
    assert StrategicAgent.kind == AGENT


@pytest.mark.parametrize(
    "make",
    [
        lambda: Threshold(margin=-0.1),
        lambda: Threshold(margin=1.5),
        lambda: Haggler(hold=0.6, shade=0.5),
        lambda: Haggler(rounds=0),
        lambda: NoisyHuman(temperature=0.0),
        lambda: NoisyHuman(impatience=-1.0),
        lambda: NoisyHuman(counter_rate=2.0),
        lambda: NoisyHuman(seed=-1),
        lambda: StrategicAgent(target=1.5),
        lambda: StrategicAgent(margin=float("nan")),
    ],
)
def test_bad_parameters_are_rejected(make):
    with pytest.raises(ValueError):
        make()


# ---------------------------------------------------------------- Threshold


def test_threshold_needs_its_margin_of_surplus():
    obs = make_obs([50.0, 90.0], price=[41.0, 40.0, 40.0, 0.0], product=[0, 0, 1, -1])
    a = decide(Threshold(margin=0.1), obs)
    # surplus 9 < 10: reject; exactly 10: accept; 50: accept; a talk turn: nothing to accept.
    assert a.decision.tolist() == [REJECT, ACCEPT, ACCEPT, REJECT]
    assert decide(Threshold(margin=0.2), obs).decision.tolist() == [REJECT] * 2 + [ACCEPT, REJECT]


def test_threshold_margin_scales_with_the_range():
    obs = make_obs([600.0], price=[510.0, 500.0], price_range=(100.0, 1100.0))
    assert decide(Threshold(margin=0.1), obs).decision.tolist() == [REJECT, ACCEPT]


# ---------------------------------------------------------------- Haggler


def test_haggler_holds_out_then_concedes():
    h = Haggler()  # hold 0.25, shade 0.5, rounds 2
    k = [1, 1, 2, 2, 3, 3, 9]
    price = [60.0, 60.01, 70.0, 70.01, 80.0, 80.01, 80.01]
    a = decide(h, make_obs([80.0, 10.0], price=price, n_messages=k))
    # Accept up to v - 0.25 (1 - g) v with g = 0, 0.5, 1 at messages 1, 2, 3+.
    assert a.decision.tolist() == [ACCEPT, COUNTER, ACCEPT, COUNTER, ACCEPT, COUNTER, COUNTER]
    counter = a.decision == COUNTER
    # Bids keep 0.5, 0.375, 0.25 of the value as surplus, on the offered product.
    assert a.price[counter].tolist() == [40.0, 50.0, 60.0, 60.0]
    assert (a.product[counter] == 0).all()


def test_haggler_bids_on_its_favourite_in_stock_product_on_a_talk_turn():
    obs = make_obs([30.0, 80.0, 90.0], price=0.0, product=-1, stock=[1, 1, 0])
    a = decide(Haggler(), obs)
    assert a.decision.tolist() == [COUNTER]
    assert a.product.tolist() == [1] and a.price.tolist() == [40.0]


def test_haggler_shares_are_of_the_surplus_above_lo():
    obs = make_obs([900.0], price=[700.0, 700.01], price_range=(100.0, 1100.0))
    a = decide(Haggler(), obs)
    assert a.decision.tolist() == [ACCEPT, COUNTER]
    assert a.price[1] == 500.0  # 900 - 0.5 * (900 - 100)


def test_haggler_keeps_more_surplus_than_truthful_against_posted_prices():
    batch = generate_batch(DEFAULT, 0, 1000)
    truthful = surplus_profit_deals(batch, Truthful())
    haggler = surplus_profit_deals(batch, Haggler())
    gain = haggler["buyer_surplus"] - truthful["buyer_surplus"]
    # About +4.5 per market (paired standard error about 0.4).
    assert gain.mean() > 2.0
    assert gain.mean() > 4 * gain.std() / np.sqrt(gain.size)
    per_deal = haggler["buyer_surplus"].sum() / haggler["trades"].sum()
    assert per_deal > truthful["buyer_surplus"].sum() / truthful["trades"].sum() + 0.5


# ---------------------------------------------------------------- NoisyHuman


def noisy_rate(policy: NoisyHuman, n: int = 20_000, **kw) -> tuple[float, float]:
    """(empirical acceptance rate over n market keys, the formula's probability)."""
    keys = np.arange(n, dtype=np.uint64) * np.uint64(7919) + np.uint64(12345)
    obs = make_obs(kw.pop("values", [60.0]), key=keys, **kw)
    prob = policy.accept_probability(obs)
    assert np.ptp(prob) == 0  # same situation in every market
    return float((decide(policy, obs).decision == ACCEPT).mean()), float(prob[0])


def sampling_ok(rate: float, prob: float, n: int = 20_000) -> bool:
    return abs(rate - prob) < 4 * np.sqrt(prob * (1 - prob) / n) + 1e-12


def test_noisy_acceptance_follows_its_formula():
    h = NoisyHuman(seed=1)
    # v 60, p 50, first price 50, message 1: ref = 0.7 * 60 + 0.3 * 50 = 57, logit 7 / 5.
    rate, prob = noisy_rate(h, price=50.0)
    assert prob == pytest.approx(expit(1.4))
    assert sampling_ok(rate, prob)
    # Over a range of surpluses the empirical rates track the sigmoid.
    for price in (30.0, 55.0, 60.0, 70.0, 85.0):
        rate, prob = noisy_rate(h, price=price)
        assert prob == pytest.approx(expit(0.7 * (60.0 - price) / 5.0))
        assert sampling_ok(rate, prob)


def test_noisy_impatience_raises_acceptance():
    h = NoisyHuman(seed=2)
    rates = []
    for k in (1, 2, 3, 5):
        rate, prob = noisy_rate(h, price=65.0, first_price=65.0, n_messages=k)
        assert prob == pytest.approx(expit(0.7 * -5.0 / 5.0 + 0.5 * (k - 1)))
        assert sampling_ok(rate, prob)
        rates.append(rate)
    assert rates == sorted(rates) and rates[-1] > rates[0] + 0.3
    # The message after which it would leave adds last_chance to the log-odds.
    rate, prob = noisy_rate(h, price=65.0, first_price=65.0, n_messages=3, patience=3)
    assert prob == pytest.approx(expit(-0.7 + 1.0 + 1.0))
    assert sampling_ok(rate, prob) and rate > rates[2] + 0.1


def test_noisy_anchoring_on_a_high_first_price_raises_acceptance():
    h = NoisyHuman(seed=3)
    high, p_high = noisy_rate(h, values=[50.0], price=50.0, first_price=80.0, n_messages=2)
    low, p_low = noisy_rate(h, values=[50.0], price=50.0, first_price=20.0, n_messages=2)
    # ref = 50 +- 0.3 * 30 = 59 or 41; logit +-1.8, plus 0.5 of impatience.
    assert p_high == pytest.approx(expit(2.3)) and p_low == pytest.approx(expit(-1.3))
    assert sampling_ok(high, p_high) and sampling_ok(low, p_low)
    assert high > low + 0.5
    # Without anchoring the first price does not matter.
    flat = NoisyHuman(seed=3, anchor=0.0)
    assert noisy_rate(flat, price=50.0, first_price=80.0)[1] == pytest.approx(expit(2.0))
    assert noisy_rate(flat, price=50.0, first_price=20.0)[1] == pytest.approx(expit(2.0))


def test_noisy_counters_now_and_then_with_valid_bids_below_value():
    h = NoisyHuman(seed=4)
    n = 20_000
    keys = np.arange(n, dtype=np.uint64)
    obs = make_obs([60.0, 90.0], price=75.0, key=keys, stock=[1, 1])
    a = decide(h, obs)
    refused = a.decision != ACCEPT
    counter = a.decision == COUNTER
    share = counter.sum() / refused.sum()
    assert abs(share - 0.2) < 4 * np.sqrt(0.2 * 0.8 / refused.sum())
    assert (a.product[counter] == 0).all()
    # Bids keep 15% to 45% of v - lo as surplus: between 33 and 51.
    assert a.price[counter].min() >= 33.0 and a.price[counter].max() <= 51.0
    assert np.ptp(a.price[counter]) > 10.0
    # On a talk turn it never accepts and bids on the product it values most.
    talk = decide(h, make_obs([60.0, 90.0], price=0.0, product=-1, key=keys))
    assert (talk.decision != ACCEPT).all()
    assert (talk.product[talk.decision == COUNTER] == 1).all()
    assert 0.15 < (talk.decision == COUNTER).mean() < 0.25


def test_noisy_is_deterministic_and_its_seed_matters():
    obs = make_obs([60.0], price=60.0, key=np.arange(2000, dtype=np.uint64))
    a, b = decide(NoisyHuman(seed=7), obs), decide(NoisyHuman(seed=7), obs)
    np.testing.assert_array_equal(a.decision, b.decision)
    np.testing.assert_array_equal(a.price, b.price)
    c = decide(NoisyHuman(seed=8), obs)
    assert (a.decision != c.decision).mean() > 0.2
    # The same holds for whole episodes.
    batch = generate_batch(DEFAULT, 0, 200)
    e1, e2 = (play_batch(batch, PostedPrice(), NoisyHuman(seed=7)) for _ in range(2))
    np.testing.assert_array_equal(e1.bought, e2.bought)
    np.testing.assert_array_equal(e1.paid, e2.paid)
    e3 = play_batch(batch, PostedPrice(), NoisyHuman(seed=8))
    assert not np.array_equal(e1.bought, e3.bought)


def test_noisy_turn_and_buyer_draw_fresh_numbers():
    """The draw is keyed by turn and buyer too: the same market and offer at another turn
    or from another buyer is a new coin flip."""
    keys = np.zeros(4000, np.uint64)
    base = make_obs([60.0], price=60.0, key=keys, turn=np.arange(4000) % 12 + 1)
    by_turn = decide(NoisyHuman(), base).decision
    assert 0.3 < (by_turn == ACCEPT).mean() < 0.7
    other = make_obs([60.0], price=60.0, key=keys, buyer=np.arange(4000))
    assert 0.3 < (decide(NoisyHuman(), other).decision == ACCEPT).mean() < 0.7


# ---------------------------------------------------------------- StrategicAgent


def test_strategic_concedes_as_turns_run_out():
    turns = np.arange(1, 13)
    obs = make_obs([60.0], price=45.0, costs=[20.0], turn=turns, turns=12)
    a = decide(StrategicAgent(), obs)
    accepted = a.decision == ACCEPT
    # floor 25, gain 35: r = 60 - 0.5 (1 - t / 12) 35 passes 45 after t = 1.71.
    assert accepted.tolist() == [False] + [True] * 11
    # A dearer offer holds out longer: r >= 55 from t = 8.57 on.
    b = decide(StrategicAgent(), make_obs([60.0], price=55.0, costs=[20.0], turn=turns))
    assert (b.decision == ACCEPT).tolist() == [False] * 8 + [True] * 4
    # Never above its value, even on the last turn.
    c = decide(StrategicAgent(), make_obs([60.0], price=60.01, costs=[20.0], turn=12))
    assert c.decision.tolist() == [COUNTER]


def test_strategic_concedes_when_patience_runs_out():
    obs = make_obs([60.0], price=55.0, costs=[20.0], turn=2, n_messages=[1, 2, 3], patience=3)
    # pi = k / 3: r = 48.33, 54.17, 60.
    assert decide(StrategicAgent(), obs).decision.tolist() == [COUNTER, COUNTER, ACCEPT]


def test_strategic_bids_low_and_raises_its_bid():
    obs = make_obs([60.0], price=59.0, costs=[20.0], turn=[1, 6, 11])
    a = decide(StrategicAgent(), obs)
    assert (a.decision == COUNTER).all() and (a.product == 0).all()
    # bid = 25 + pi (r - 25), r = 60 - 17.5 (1 - pi).
    pi = np.array([1, 6, 11]) / 12
    want = 25 + pi * (60 - 17.5 * (1 - pi) - 25)
    np.testing.assert_allclose(a.price, np.floor(want * 100) / 100)
    assert a.price[0] < 27.0 and np.all(np.diff(a.price) > 0)


def test_strategic_bids_where_the_bid_leaves_it_the_most():
    # Product 1 is worth 90 at the same cost: a bid there leaves far more surplus.
    obs = make_obs([60.0, 90.0], price=[45.0, 45.0], costs=[20.0, 20.0], stock=[[1, 1], [1, 0]])
    a = decide(StrategicAgent(), obs)
    assert a.decision.tolist() == [COUNTER, COUNTER]
    assert a.product.tolist() == [1, 0]  # the second market has product 1 sold out
    assert a.price[1] == pytest.approx(26.58, abs=0.01)


# ---------------------------------------------------------------- summary


def test_surplus_split_against_posted_prices():
    """Sanity of the whole lineup on 1000 markets: every buyer trades most of the time,
    the choosy ones trade less than truthful, and the surplus stays positive."""
    batch = generate_batch(DEFAULT, 0, 1000)
    deal = {
        name: surplus_profit_deals(batch, make())["deal_rate"].mean()
        for name, make in BUYERS.items()
    }
    assert deal["threshold"] < deal["truthful"] - 0.05
    assert deal["haggler"] < deal["truthful"]
    assert deal["noisy"] > deal["truthful"]  # impatient and noisy: takes some bad deals too
    assert min(deal.values()) > 0.8
