"""Bad agent output on the batched engine: counted, never raised, and the same as the
reference market counts it; wrong-length arrays are a caller bug caught before any change."""

from __future__ import annotations

import numpy as np
import pytest

from agents.base import BuyerAction, SellerAction
from agents.rollout import buyer_message, seller_message
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate, generate_batch
from arena.market import Market, Violation
from arena.rules import COUNTER

WEIRD_TO = [0, 1, -1, 2.5, np.nan, np.inf, 10**6, 10**7, 2**70, 1.0]
WEIRD_PRODUCT = [0, 1, -1, -2, 0.5, np.nan, 10**6, 3, 1.0]
WEIRD_PRICE = [50.0, 5.0, -5.0, np.nan, np.inf, 1e12, 1e13, 99.99]


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_unwritable_actions_are_malformed_in_both_engines_alike(seed):
    cfg = MarketConfig(buyers=3, products=2, inventory=1, turns=30, patience=0)
    rng = np.random.default_rng(seed)
    b = 24
    engine = BatchedMarket(generate_batch(cfg, seed + 1, b))
    markets = [Market(generate(cfg, seed + 1, k)) for k in range(b)]
    seen = np.zeros(len(Violation), np.int64)
    for _ in range(cfg.turns):
        to = np.array([WEIRD_TO[i] for i in rng.integers(len(WEIRD_TO), size=b)], dtype=object)
        product = np.array(
            [WEIRD_PRODUCT[i] for i in rng.integers(len(WEIRD_PRODUCT), size=b)], dtype=object
        )
        price = np.array([WEIRD_PRICE[i] for i in rng.integers(len(WEIRD_PRICE), size=b)])
        live = ~engine.done.copy()
        # Object arrays reach the engine as floats; huge ints become floats too.
        action = SellerAction(to.astype(float), product.astype(float), price)
        obs = engine.offer(action.to, action.product, action.price)
        asked = engine.pending.copy()
        for k, mk in enumerate(markets):
            if live[k]:
                who = mk.offer(seller_message(action, k))
                assert (who is not None) == asked[k]
        if obs is not None:
            d = BuyerAction(
                np.array([[0, 1, 2, 2, 2.5, np.nan, -1][i] for i in rng.integers(7, size=b)]),
                np.array([[0, 1, -1, 5, 0.5, np.nan][i] for i in rng.integers(6, size=b)]),
                np.array([[40.0, -1.0, np.nan, 1e13, 60.0][i] for i in rng.integers(5, size=b)]),
            )
            engine.answer(d.decision, d.product, d.price)
            for k, mk in enumerate(markets):
                if asked[k]:
                    mk.answer(buyer_message(d, k))
        for k, mk in enumerate(markets):
            np.testing.assert_array_equal(engine.seller_violations[k], mk.seller_violations)
            np.testing.assert_array_equal(engine.buyer_violations[k], mk.buyer_violations)
            np.testing.assert_array_equal(engine.bought[k], mk.bought)
        seen = engine.seller_violations.sum(0) + engine.buyer_violations.sum(0)
        if engine.all_done:
            break
    assert seen[Violation.MALFORMED] > 20 and engine.bought.max() >= 0


@pytest.mark.parametrize(
    ("bad", "rows"),
    [
        ({"to": np.array(["x", "y", "z"])}, [1, 1, 1]),
        ({"to": np.array([None, 1, 0], dtype=object)}, [1, 0, 0]),
        ({"price": np.array(["a", "b", "c"])}, [1, 1, 1]),
        ({"price": np.array(["a", "50", " 7.5 "])}, [1, 0, 0]),  # float() reads the others
        ({"price": np.array([None, 50.0, 50], dtype=object)}, [1, 0, 0]),
        ({"price": np.array([50.0, [1], "nan"], dtype=object)}, [0, 1, 1]),
        ({"price": np.array([1 + 2j, 3.0, 4.0])}, [1, 1, 1]),  # complex: no real price
        ({"product": np.array([2**64 - 1, 0, 0], dtype=np.uint64)}, [1, 0, 0]),
        # A talk turn states no price, so whatever stands in the price array is ignored.
        (
            {"product": np.array([-1, -1, 0]), "price": np.array([None, "x", 5], dtype=object)},
            [0, 0, 0],
        ),
    ],
)
def test_values_that_are_not_numbers_are_malformed_rows_not_exceptions(bad, rows):
    cfg = MarketConfig(buyers=3)
    engine = BatchedMarket(generate_batch(cfg, 0, 3))
    args = {
        "to": np.array([0, 1, 2]),
        "product": np.array([0, 0, 0]),
        "price": np.array([50.0, 50.0, 50.0]),
        **bad,
    }
    engine.offer(**args)
    assert engine.turn.tolist() == [1, 1, 1]
    assert engine.seller_violations[:, Violation.MALFORMED].tolist() == rows
    # Each row is judged alone, as the reference market judges it.
    action = SellerAction(args["to"], args["product"], args["price"])
    for k in range(3):
        market = Market(generate(cfg, 0, k))
        asked = market.offer(seller_message(action, k))
        assert market.seller_violations[Violation.MALFORMED] == rows[k]
        assert (asked is not None) == bool(engine.pending[k])


def test_a_bid_that_is_not_a_number_marks_its_own_answer_alone():
    cfg = MarketConfig(buyers=3)
    engine = BatchedMarket(generate_batch(cfg, 0, 3))
    markets = [Market(generate(cfg, 0, k)) for k in range(3)]
    offer = SellerAction(np.array([0, 1, 2]), np.zeros(3, int), np.full(3, 99.0))
    engine.offer(offer.to, offer.product, offer.price)
    # Counters with bids None, 40 and "40"; then the same rows' answers for the reference.
    answer = BuyerAction(
        np.full(3, COUNTER), np.zeros(3, int), np.array([None, 40.0, "40"], dtype=object)
    )
    engine.answer(answer.decision, answer.product, answer.price)
    assert engine.buyer_violations[:, Violation.MALFORMED].tolist() == [1, 0, 0]
    for k, market in enumerate(markets):
        market.offer(seller_message(offer, k))
        market.answer(buyer_message(answer, k))
        np.testing.assert_array_equal(engine.buyer_violations[k], market.buyer_violations)


def test_wrong_lengths_raise_before_anything_changes():
    engine = BatchedMarket(generate_batch(MarketConfig(buyers=3), 0, 3))
    with pytest.raises(ValueError, match=r"to: expected one entry per market, shape \(3,\)"):
        engine.offer(np.zeros((3, 1), int), np.zeros(3, int), np.full(3, 50.0))
    with pytest.raises(ValueError, match="price"):
        engine.offer(np.zeros(3, int), np.zeros(3, int), np.full(2, 50.0))
    assert engine.turn.tolist() == [0, 0, 0] and engine.seller_violations.sum() == 0
    engine.offer(np.array([0, 1, 2]), np.zeros(3, int), np.full(3, 99.0))
    pending = engine.pending.copy()
    with pytest.raises(ValueError, match="decision"):
        engine.answer(np.zeros(2, int), np.zeros(3, int), np.zeros(3))
    assert (engine.pending == pending).all() and engine.buyer_violations.sum() == 0
