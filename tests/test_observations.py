"""What each side sees: the seller never sees private values, disclosure rules, buyer views,
and the scalar market and the batched engine build identical observations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.scripted.buyers import Truthful
from agents.scripted.sellers import PostedPrice
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate, instance_from_arrays, stack_instances
from arena.market import Market
from arena.messages import BuyerMessage, Decision, Offer, SellerMessage
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs, LastDecision, SellerObs

# ---------------------------------------------------------------- helpers

# One scripted turn: (to, product (-1: talk), price, answer); answer None means the rules
# ask nobody (invalid message or an instant trade on a standing bid).
R, A = ("reject",), ("accept",)
SCRIPT = [
    (0, 0, 70.0, R),  # plain reject
    (1, 1, 60.0, ("counter", 1, 40.0)),  # standing bid
    (1, 1, 45.0, R),  # above the bid: asked again
    (1, 1, 40.0, None),  # at the bid: trades at once
    (2, -1, 0.0, A),  # accept without an offer: a buyer violation
    (5, 0, 50.0, None),  # unknown buyer
    (1, 0, 50.0, None),  # buyer 1 has bought
    (0, 0, 55.0, A),  # trade
    (2, 0, 30.0, None),  # product 0 is sold out
    (2, 1, 150.0, None),  # price out of range
]
TURNS = len(SCRIPT)
CODES = {"reject": REJECT, "accept": ACCEPT, "counter": COUNTER}


def seller_message(to, product, price) -> SellerMessage:
    return SellerMessage(to=to, offer=None if product < 0 else Offer(product, price))


def buyer_message(answer) -> BuyerMessage:
    if answer[0] == "counter":
        return BuyerMessage(Decision.COUNTER, Offer(answer[1], answer[2]))
    return BuyerMessage(Decision(answer[0]))


def answer_arrays(answer, b):
    product, price = (answer[1], answer[2]) if answer[0] == "counter" else (0, 0.0)
    return np.full(b, CODES[answer[0]]), np.full(b, product), np.full(b, price)


def snap(obs) -> dict:
    """A copy of every field (engine observations may be views of live state)."""
    out = {}
    for f in dataclasses.fields(obs):
        if f.name == "dialogue":  # the reference always keeps one; tests/test_text_channel.py
            continue
        v = getattr(obs, f.name)
        out[f.name] = np.array(v, copy=True) if isinstance(v, np.ndarray) else v
    return out


def same(x, y) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        return bool(np.array_equal(x, y, equal_nan=x.dtype.kind == "f"))
    return x == y


def assert_same_obs(a: dict, b: dict, where="") -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert same(a[name], b[name]), f"{where}: field {name}: {a[name]!r} != {b[name]!r}"


def play_script_reference(inst, disclose=None):
    """Play SCRIPT on the reference market; returns seller and buyer observation snapshots."""
    market = Market(inst, disclose=disclose)
    sellers, buyers = [snap(market.seller_observation())], []
    for to, product, price, answer in SCRIPT:
        assert not market.done
        who = market.offer(seller_message(to, product, price))
        assert (who is None) == (answer is None), (to, product, price)
        if who is not None:
            assert who == to
            buyers.append(snap(market.buyer_observation()))
            market.answer(buyer_message(answer))
        sellers.append(snap(market.seller_observation()))
    return market, sellers, buyers


def play_script_engine(batch, disclose=None):
    """Play SCRIPT in every market of a batch; returns the snapshots."""
    engine = BatchedMarket(batch, disclose)
    b = batch.size
    sellers, buyers = [snap(engine.seller_observation())], []
    for to, product, price, answer in SCRIPT:
        assert not engine.done.any()
        prompt = engine.offer(np.full(b, to), np.full(b, product), np.full(b, price))
        assert (prompt is None) == (answer is None), (to, product, price)
        if prompt is not None:
            assert prompt.needs_answer.all() and (prompt.buyer == to).all()
            buyers.append(snap(prompt))
            engine.answer(*answer_arrays(answer, b))
        sellers.append(snap(engine.seller_observation()))
    return engine, sellers, buyers


def twin_instances(disclosure="hidden"):
    """Two markets that share every public input and differ in values and kinds."""
    cfg = MarketConfig(
        buyers=3,
        products=2,
        inventory=(1, 2),
        turns=TURNS,
        price_range=(0.0, 100.0),
        disclosure=disclosure,
    )
    costs = [20.0, 15.0]
    signals = [[60.0, 50.0], [40.0, 70.0], [55.0, 55.0]]
    a = instance_from_arrays(
        cfg,
        [[80.0, 10.0], [30.0, 90.0], [65.0, 5.0]],
        costs,
        signals=signals,
        is_agent=[True, False, False],
    )
    b = instance_from_arrays(
        cfg,
        [[12.0, 99.0], [77.0, 41.0], [3.0, 58.0]],
        costs,
        signals=signals,
        is_agent=[False, True, True],
    )
    return a, b


# ---------------------------------------------------------------- privacy


def test_seller_view_of_the_reference_market_ignores_private_values():
    a, b = twin_instances()
    ma, sellers_a, buyers_a = play_script_reference(a)
    mb, sellers_b, buyers_b = play_script_reference(b)
    assert len(sellers_a) == TURNS + 1 and len(buyers_a) == 5
    for t, (sa, sb) in enumerate(zip(sellers_a, sellers_b, strict=True)):
        assert_same_obs(sa, sb, f"turn {t}")
    # The markets did play differently for the people in them ...
    assert ma.buyer_surplus() != mb.buyer_surplus()
    # ... and each buyer saw its own values.
    for ba, bb in zip(buyers_a, buyers_b, strict=True):
        assert not np.array_equal(ba["values"], bb["values"])
        assert np.array_equal(ba["values"], a.values[ba["buyer"]])
        assert np.array_equal(bb["values"], b.values[bb["buyer"]])
    # The script really moved the state the seller sees.
    last = sellers_a[-1]
    assert last["done"].all() and last["turn"][0] == TURNS
    assert last["bought"][0].tolist() == [0, 1, -1]
    assert last["stock"][0].tolist() == [0, 1]
    assert last["last_decision"][0].tolist() == [
        LastDecision.ACCEPT,
        LastDecision.REJECT,
        LastDecision.INVALID,
    ]


def test_seller_view_of_the_engine_ignores_private_values():
    a, b = twin_instances()
    batch = stack_instances([a, b])
    engine, sellers, buyers = play_script_engine(batch)
    for t, s in enumerate(sellers):
        for name, v in s.items():
            if isinstance(v, np.ndarray):
                assert same(v[0], v[1]), f"turn {t}: field {name} differs between the twins"
    for p in buyers:
        assert not np.array_equal(p["values"][0], p["values"][1])
        assert p["values"].shape == (2, 2)
        for row, inst in enumerate((a, b)):
            assert np.array_equal(p["values"][row], inst.values[p["buyer"][row]])
            assert p["is_agent"][row] == inst.is_agent[p["buyer"][row]]
    assert not np.array_equal(engine.buyer_surplus()[0], engine.buyer_surplus()[1])
    # Run alone, each twin gives the same seller view as inside the pair.
    _, alone, _ = play_script_engine(stack_instances([b]))
    for s_pair, s_alone in zip(sellers, alone, strict=True):
        for name, v in s_pair.items():
            if isinstance(v, np.ndarray):
                assert same(v[1:], s_alone[name]), name


def _seller_arrays(obs: SellerObs):
    return [
        (f.name, getattr(obs, f.name))
        for f in dataclasses.fields(obs)
        if isinstance(getattr(obs, f.name), np.ndarray)
    ]


def _assert_no_values_in(obs: SellerObs, values: np.ndarray, lo: float, hi: float) -> None:
    """No seller array is, holds, or shares memory with the private values."""
    inner = values[(values > lo) & (values < hi)]  # clipped values could match a price
    assert inner.size > 0
    for name, arr in _seller_arrays(obs):
        assert not np.shares_memory(arr, values), name
        assert not (arr.shape == values.shape and np.array_equal(arr, values)), name
        if arr.dtype.kind == "f":
            assert not np.isin(inner, arr).any(), name


@pytest.mark.parametrize("disclosure", ["hidden", "mandatory"])
def test_no_seller_array_carries_values_when_signals_are_noisy(disclosure):
    cfg = MarketConfig(
        buyers=5,
        products=3,
        turns=12,
        signal_noise=0.3,
        agent_share=0.4,
        disclosure=disclosure,
        price_range=(10.0, 90.0),
    )
    lo, hi = cfg.price_range
    seller, buyer = PostedPrice(markup=0.8), Truthful()
    seller.reset(1)
    buyer.reset(1)
    insts = [generate(cfg, 4, i) for i in range(4)]
    # Reference market, turn by turn.
    for inst in insts:
        market = Market(inst)
        while not market.done:
            obs = market.seller_observation()
            _assert_no_values_in(obs, inst.values, lo, hi)
            a = seller.act(obs)
            msg = seller_message(int(a.to[0]), int(a.product[0]), float(a.price[0]))
            if market.offer(msg) is not None:
                d = buyer.act(market.buyer_observation())
                market.answer(BuyerMessage((Decision.REJECT, Decision.ACCEPT)[int(d.decision[0])]))
        _assert_no_values_in(market.seller_observation(), inst.values, lo, hi)
        assert market.trades  # the loop did trade, so prices are in the observation
    # Batched engine.
    batch = stack_instances(insts)
    engine = BatchedMarket(batch)
    while not engine.all_done:
        obs = engine.seller_observation()
        _assert_no_values_in(obs, batch.values, lo, hi)
        a = seller.act(obs)
        prompt = engine.offer(a.to, a.product, a.price)
        if prompt is not None:
            d = buyer.act(prompt)
            engine.answer(d.decision, d.product, d.price)
    _assert_no_values_in(engine.seller_observation(), batch.values, lo, hi)


# ---------------------------------------------------------------- disclosure


@pytest.mark.parametrize("rule", ["hidden", "mandatory", "voluntary"])
def test_disclosed_flag_follows_the_rule(rule):
    cfg = MarketConfig(buyers=6, products=2, turns=5, agent_share=0.5, disclosure=rule)
    insts = [generate(cfg, 3, i) for i in range(5)]
    batch = stack_instances(insts)
    wish = np.zeros((5, 6), bool)
    wish[:, ::2] = True  # every other buyer wishes to disclose, humans included
    expected = {
        "hidden": np.zeros((5, 6), bool),
        "mandatory": batch.is_agent,
        "voluntary": batch.is_agent & wish,
    }[rule]
    assert batch.is_agent.sum() == 5 * 3
    engine = BatchedMarket(batch, wish)
    assert np.array_equal(engine.seller_observation().disclosed, expected)
    for b, inst in enumerate(insts):
        market = Market(inst, disclose=wish[b])
        assert np.array_equal(market.seller_observation().disclosed[0], expected[b])
    if rule == "mandatory":
        assert np.array_equal(engine.seller_observation().disclosed, batch.is_agent)
    if rule == "voluntary":
        # No wishes: nobody discloses.
        assert not BatchedMarket(batch).seller_observation().disclosed.any()
        assert not (engine.seller_observation().disclosed & ~batch.is_agent).any()


def test_buyer_sees_its_own_kind_and_disclosure():
    a, _ = twin_instances("mandatory")
    market = Market(a)
    market.offer(seller_message(0, 0, 50.0))
    obs = market.buyer_observation()
    assert obs.is_agent.tolist() == [True] and obs.disclosed.tolist() == [True]
    market.answer(BuyerMessage(Decision.REJECT))
    market.offer(seller_message(1, 0, 50.0))
    obs = market.buyer_observation()
    assert obs.is_agent.tolist() == [False] and obs.disclosed.tolist() == [False]


# ---------------------------------------------------------------- buyer view


def test_buyer_view_holds_only_its_own_row():
    cfg = MarketConfig(buyers=5, products=3, turns=10, signal_noise=0.3)
    insts = [generate(cfg, 6, i) for i in range(3)]
    batch = stack_instances(insts)
    engine = BatchedMarket(batch)
    to = np.array([4, 0, 2])
    prompt = engine.offer(to, np.array([0, 1, 2]), np.array([40.0, 50.0, 60.0]))
    assert isinstance(prompt, BuyerObs)
    assert prompt.values.shape == (3, 3)
    assert prompt.buyer.tolist() == to.tolist()
    for b, inst in enumerate(insts):
        assert np.array_equal(prompt.values[b], inst.values[to[b]])
        others = np.delete(inst.values, to[b], axis=0)
        assert not np.isin(others, prompt.values).any()
    assert prompt.offer_product.tolist() == [0, 1, 2]
    assert prompt.offer_price.tolist() == [40.0, 50.0, 60.0]
    for b, inst in enumerate(insts):
        market = Market(inst)
        market.offer(seller_message(int(to[b]), b, 40.0))
        obs = market.buyer_observation()
        assert obs.values.shape == (1, 3)
        assert np.array_equal(obs.values[0], inst.values[to[b]])


def test_buyer_observation_only_while_an_answer_is_due():
    a, _ = twin_instances()
    market = Market(a)
    with pytest.raises(RuntimeError):
        market.buyer_observation()
    market.offer(seller_message(9, 0, 10.0))  # invalid: nobody is asked
    with pytest.raises(RuntimeError):
        market.buyer_observation()


# ---------------------------------------------------------------- scalar == batched


@pytest.mark.parametrize(
    "cfg",
    [
        MarketConfig(
            buyers=3,
            products=2,
            inventory=(1, 2),
            turns=TURNS,
            patience=0,
            agent_share=0.34,
            disclosure="mandatory",
            price_range=(0.0, 100.0),
        ),
        MarketConfig(
            buyers=4,
            products=2,
            inventory=1,
            turns=TURNS + 2,
            patience=2,
            agent_share=0.5,
            disclosure="voluntary",
            price_range=(5.0, 120.0),
            signal_noise=0.5,
        ),
    ],
)
def test_reference_and_engine_observations_agree_for_one_market(cfg):
    for index in range(3):
        inst = generate(cfg, 17, index)
        wish = np.ones(cfg.buyers, bool)
        _, ref_sellers, ref_buyers = play_script_reference(inst, disclose=wish)
        _, eng_sellers, eng_buyers = play_script_engine(stack_instances([inst]), wish[None])
        assert len(ref_sellers) == len(eng_sellers) == TURNS + 1
        assert len(ref_buyers) == len(eng_buyers) > 0
        for t, (r, e) in enumerate(zip(ref_sellers, eng_sellers, strict=True)):
            assert_same_obs(r, e, f"seller obs, market {index}, turn {t}")
            assert int(r["key"][0]) == inst.key
        for t, (r, e) in enumerate(zip(ref_buyers, eng_buyers, strict=True)):
            assert_same_obs(r, e, f"buyer obs, market {index}, prompt {t}")


def test_a_policy_cannot_write_into_the_market_through_its_observation():
    """The observations held the engine's own arrays: a seller that raised its stock in
    its view sold a product of one unit twice, with no violation counted."""
    from arena.generator import generate_batch

    engine = BatchedMarket(generate_batch(MarketConfig(buyers=3, products=2), 0, 4))
    obs = engine.seller_observation()
    for name, value in vars(obs).items():
        if isinstance(value, np.ndarray):
            with pytest.raises(ValueError, match="read-only"):
                value[...] = value  # any write at all
            assert not value.flags.writeable, name
    assert engine.stock.flags.writeable  # the market's own arrays stay its own
    engine.offer(np.zeros(4, int), np.zeros(4, int), np.full(4, 50.0))
    buyer = engine.buyer_observation()
    with pytest.raises(ValueError, match="read-only"):
        buyer.stock[...] = 99
    assert engine.stock.max() <= 2
    # The reference market (what `arena play` plays) shows the same read-only views.
    market = Market(generate(MarketConfig(buyers=3, products=2), 0, 0))
    for value in vars(market.seller_observation()).values():
        if isinstance(value, np.ndarray):
            assert not value.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        market.seller_observation().costs[...] = 0  # a view of the instance's costs
