"""The batched engine equals the scalar reference, trade by trade and metric by metric.

Random configs, random scripted actions that include every kind of invalid
message, and both the structured and the text path into the reference market.
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate, generate_batch
from arena.market import NUM_VIOLATIONS, Market
from arena.messages import BuyerMessage, Decision, Offer, SellerMessage
from arena.metrics import METRICS, batch_metrics, market_metrics
from arena.protocol import render

GARBAGE = ["", "OFFER: product 1 at 10", "buy now!!", "THINK: x\nTO: buyer 0\nOFFER: nan\nSAY: "]


def random_config(rng: np.random.Generator) -> MarketConfig:
    m = int(rng.integers(1, 5))
    lo = float(rng.choice([0.0, 5.0, 100.0]))
    inventory = (
        int(rng.integers(1, 3))
        if rng.random() < 0.5
        else tuple(int(k) for k in rng.integers(1, 3, size=m))
    )
    return MarketConfig(
        buyers=int(rng.integers(1, 7)),
        products=m,
        inventory=inventory,
        turns=int(rng.integers(1, 16)),
        price_range=(lo, lo + float(rng.choice([1.0, 50.0, 1000.0]))),
        value_correlation=float(rng.random()),
        signal_noise=float(rng.random()),
        patience=int(rng.choice([0, 0, 1, 2, 3])),
        agent_share=float(rng.random()),
        disclosure=str(rng.choice(["hidden", "mandatory", "voluntary"])),
        cost_level=float(rng.random() * 0.9),
    )


def random_seller_actions(rng, cfg: MarketConfig, b: int, obs):
    n, m = cfg.buyers, cfg.products
    lo, hi = cfg.price_range
    to = rng.integers(0, n + 2, size=b)  # n and n+1 are unknown buyers
    product = rng.integers(-1, m + 1, size=b)  # -1: talk turn; m: unknown product
    price = np.maximum(rng.uniform(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo), size=b), 0.0)
    # Round prices sometimes so that exact ties with standing bids happen.
    price = np.where(rng.random(b) < 0.3, np.round(price), price)
    # Sometimes go back to a buyer with a standing bid, near its price, to reach the
    # instant-trade rule (at, above and below the bid).
    bidders = obs.counter_product >= 0
    back = bidders.any(axis=1) & (rng.random(b) < 0.5)
    pick = np.argmax(bidders * rng.random(bidders.shape), axis=1)
    bid_product = obs.counter_product[np.arange(b), pick]
    bid_price = obs.counter_price[np.arange(b), pick]
    near = bid_price * rng.choice([0.9, 1.0, 1.1], size=b)
    to = np.where(back, pick, to)
    product = np.where(back, bid_product, product)
    price = np.where(back, np.nan_to_num(near), price)
    malformed = rng.random(b) < 0.05
    return to, product, price, malformed


def random_buyer_actions(rng, cfg: MarketConfig, b: int, offer_price: np.ndarray):
    m = cfg.products
    lo, hi = cfg.price_range
    decision = rng.choice([0, 1, 2, 7], p=[0.35, 0.3, 0.3, 0.05], size=b)  # 7: not a decision
    product = rng.integers(0, m + 1, size=b)
    price = np.maximum(rng.uniform(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo), size=b), 0.0)
    # Bids close to the offer make instant trades on later offers likely.
    near = np.where(np.isnan(offer_price), price, offer_price * rng.uniform(0.8, 1.0, size=b))
    price = np.where(rng.random(b) < 0.5, near, price)
    price = np.where(rng.random(b) < 0.3, np.round(price), price)
    malformed = rng.random(b) < 0.05
    return decision, product, price, malformed


def seller_input(rng, to, product, price, malformed):
    """The same action as the reference market takes it: a message or its text."""
    if malformed:
        return str(rng.choice(GARBAGE))
    msg = SellerMessage(
        to=int(to), offer=None if product < 0 else Offer(int(product), float(price))
    )
    return render(msg) if rng.random() < 0.5 else msg


def buyer_input(rng, decision, product, price, malformed):
    if malformed or decision not in (0, 1, 2):
        return str(rng.choice(GARBAGE))
    d = [Decision.REJECT, Decision.ACCEPT, Decision.COUNTER][decision]
    msg = BuyerMessage(d, Offer(int(product), float(price)) if d is Decision.COUNTER else None)
    return render(msg) if rng.random() < 0.5 else msg


def run_both(seed: int, b: int = 4):
    rng = np.random.default_rng(seed)
    cfg = random_config(rng)
    batch = generate_batch(cfg, seed, range(b))
    disclose = rng.random((b, cfg.buyers)) < 0.5
    engine = BatchedMarket(batch, disclose)
    markets = [Market(generate(cfg, seed, k), disclose=disclose[k]) for k in range(b)]
    text_rng = np.random.default_rng(seed + 10_000)

    for _ in range(cfg.turns + 1):
        s_act = random_seller_actions(rng, cfg, b, engine.seller_observation())
        b_act_seed = int(rng.integers(2**32))
        live = ~engine.done.copy()
        obs = engine.offer(*s_act)
        asked = engine.pending.copy()
        for k, market in enumerate(markets):
            assert market.done == (not live[k])
            if not live[k]:
                continue
            who = market.offer(seller_input(text_rng, *(a[k] for a in s_act)))
            assert (who is not None) == asked[k]
            if who is not None:
                assert obs.buyer[k] == who
        if obs is not None:
            b_act = random_buyer_actions(np.random.default_rng(b_act_seed), cfg, b, obs.offer_price)
            engine.answer(*b_act)
            for k, market in enumerate(markets):
                if asked[k]:
                    market.answer(buyer_input(text_rng, *(a[k] for a in b_act)))
        compare_state(engine, markets)
    assert engine.all_done and all(mk.done for mk in markets)
    return engine, markets


def compare_state(engine: BatchedMarket, markets: list[Market]) -> None:
    for k, mk in enumerate(markets):
        ref = mk.seller_observation()
        got = engine.seller_observation()
        for name in (
            "turn",
            "done",
            "stock",
            "active",
            "bought",
            "left",
            "n_messages",
            "last_product",
            "last_price",
            "last_decision",
            "counter_product",
            "counter_price",
            "disclosed",
        ):
            np.testing.assert_array_equal(
                getattr(got, name)[k], getattr(ref, name)[0], err_msg=name
            )
        np.testing.assert_array_equal(engine.paid[k], np.array(mk.paid), err_msg="paid")
        np.testing.assert_array_equal(engine.seller_violations[k], mk.seller_violations)
        np.testing.assert_array_equal(engine.buyer_violations[k], mk.buyer_violations)
        assert engine.profit[k] == pytest.approx(mk.profit, abs=1e-9)


@pytest.mark.parametrize("chunk", range(10))
def test_engine_equals_reference_on_random_play(chunk):
    trades = instant = violations = 0
    for seed in range(chunk * 25, chunk * 25 + 25):  # 250 seeds x 4 markets
        engine, markets = run_both(seed)
        got = batch_metrics(engine)
        for k, mk in enumerate(markets):
            ref = market_metrics(mk)
            for name in METRICS:
                np.testing.assert_allclose(
                    got[name][k],
                    ref[name],
                    rtol=1e-12,
                    atol=1e-9,
                    err_msg=f"seed {seed} market {k} metric {name}",
                )
            trades += len(mk.trades)
            instant += sum(r.trade is not None and r.buyer < 0 for r in mk.transcript)
            violations += sum(mk.seller_violations) + sum(mk.buyer_violations)
    # The random play must reach every rule, or the equality proves little.
    assert trades > 20 and instant > 2 and violations > 50


def test_random_play_reaches_every_violation_code():
    seen_s = np.zeros(NUM_VIOLATIONS, np.int64)
    seen_b = np.zeros(NUM_VIOLATIONS, np.int64)
    left = 0
    for seed in range(60):
        engine, markets = run_both(seed)
        seen_s += engine.seller_violations.sum(axis=0)
        seen_b += engine.buyer_violations.sum(axis=0)
        left += int(engine.left.sum())
    assert (seen_s[1:7] > 0).all(), seen_s  # every seller code
    assert (seen_b[[1, 4, 5, 6, 7]] > 0).all(), seen_b  # every buyer code
    assert left > 0


def test_done_markets_ignore_actions():
    cfg = MarketConfig(buyers=2, products=1, inventory=1, turns=1)
    engine = BatchedMarket(generate_batch(cfg, 0, 2))
    engine.offer([5, 5], [0, 0], [1.0, 1.0])  # both invalid; T=1 ends both
    assert engine.all_done
    before = engine.seller_violations.copy()
    assert engine.offer([0, 0], [0, 0], [50.0, 50.0]) is None
    np.testing.assert_array_equal(engine.seller_violations, before)
    assert engine.turn.tolist() == [1, 1]
