"""Hand-scripted transcripts with exact payoffs, one rule at a time (arena/market.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import instance_from_arrays, stack_instances
from arena.market import Market, Violation
from arena.messages import BuyerMessage, Decision, Offer, SellerMessage
from arena.metrics import market_metrics
from arena.protocol import render

VALUES = [[80.0, 60.0], [50.0, 90.0]]
COSTS = [30.0, 20.0]


def make(turns=6, inventory=1, patience=0, disclosure="hidden", is_agent=None, values=VALUES):
    cfg = MarketConfig(
        buyers=len(values),
        products=2,
        inventory=inventory,
        turns=turns,
        price_range=(0.0, 100.0),
        patience=patience,
        disclosure=disclosure,
    )
    return Market(instance_from_arrays(cfg, values, COSTS, is_agent=is_agent))


def offer(to, product, price, say="") -> SellerMessage:
    return SellerMessage(to=to, offer=None if product is None else Offer(product, price), say=say)


ACCEPT = BuyerMessage(Decision.ACCEPT)
REJECT = BuyerMessage(Decision.REJECT)


def counter(product, price) -> BuyerMessage:
    return BuyerMessage(Decision.COUNTER, Offer(product, price))


def test_accept_trades_at_the_offer_price_with_exact_payoffs():
    m = make()
    assert m.offer(offer(0, 0, 70.0)) == 0
    m.answer(ACCEPT)
    assert [(t.buyer, t.product, t.price, t.turn) for t in m.trades] == [(0, 0, 70.0, 1)]
    assert m.profit == 40.0  # 70 - 30
    assert m.buyer_surplus() == [10.0, 0.0]  # 80 - 70
    assert m.stock == [0, 1]
    met = market_metrics(m)
    assert met["profit"] == 40.0 and met["buyer_surplus"] == 10.0 and met["welfare"] == 50.0
    # W*_T: buyer 0 -> product 0 (50) + buyer 1 -> product 1 (70) = 120
    assert met["w_star"] == 120.0
    assert met["efficiency"] == pytest.approx(50 / 120)
    assert met["capture"] == pytest.approx(40 / 120)
    # Buyer 0 alone: best is product 0 (80-30=50) vs product 1 (60-20=40): traded the best.
    assert met["match_quality"] == 1.0
    assert met["deal_rate"] == 0.5 and met["turns_used"] == 1.0


def test_match_quality_sees_a_worse_pairing():
    m = make()
    m.offer(offer(0, 1, 50.0))  # product 1 gives 40 of gains where product 0 gives 50
    m.answer(ACCEPT)
    assert market_metrics(m)["match_quality"] == pytest.approx(40 / 50)


def test_reject_uses_the_turn_and_changes_nothing_else():
    m = make()
    m.offer(offer(1, 1, 95.0))
    m.answer(REJECT)
    assert m.turn == 1 and m.trades == [] and m.stock == [1, 1]
    obs = m.seller_observation()
    assert obs.last_decision[0, 1] == 0 and obs.last_price[0, 1] == 95.0
    assert obs.n_messages[0].tolist() == [0, 1]


def test_standing_counter_makes_a_later_offer_trade_at_once_at_the_offer_price():
    m = make()
    m.offer(offer(1, 1, 95.0))
    m.answer(counter(1, 70.0))
    # Above the bid: the buyer is asked as usual.
    assert m.offer(offer(1, 1, 80.0)) == 1
    m.answer(REJECT)
    # Another product at a low price: the bid is on product 1 only.
    assert m.offer(offer(1, 0, 10.0)) == 1
    m.answer(REJECT)
    # At or below the bid: trade at once at the offer's price, nobody is asked.
    assert m.offer(offer(1, 1, 65.0)) is None
    assert m.awaiting_answer is None
    assert [(t.buyer, t.product, t.price, t.turn) for t in m.trades] == [(1, 1, 65.0, 4)]
    assert m.profit == 45.0 and m.buyer_surplus() == [0.0, 25.0]
    assert m.transcript[-1].buyer == -1 and m.transcript[-1].trade is not None


def test_a_new_counter_replaces_the_old_one():
    m = make()
    m.offer(offer(1, 1, 95.0))
    m.answer(counter(1, 70.0))
    m.offer(offer(1, 1, 95.0))
    m.answer(counter(0, 40.0))
    assert m.offer(offer(1, 1, 60.0)) == 1  # the bid on product 1 is gone
    m.answer(REJECT)
    assert m.offer(offer(1, 0, 40.0)) is None  # the bid on product 0 stands
    assert m.trades[-1].price == 40.0 and m.trades[-1].product == 0


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("hello, want to buy something?", Violation.MALFORMED),
        (offer(2, 0, 50.0), Violation.UNKNOWN_BUYER),
        (offer(0, 2, 50.0), Violation.UNKNOWN_PRODUCT),
        (offer(0, 0, 100.5), Violation.PRICE_OUT_OF_RANGE),
        # The first failing check wins: the unknown product before the price.
        (offer(0, 7, 500.0), Violation.UNKNOWN_PRODUCT),
        (offer(9, 7, 500.0), Violation.UNKNOWN_BUYER),
    ],
)
def test_invalid_seller_messages_waste_the_turn_and_count(message, code):
    m = make()
    assert m.offer(message) is None
    assert m.turn == 1 and m.trades == []
    assert m.seller_violations[code] == 1 and sum(m.seller_violations) == 1
    assert m.transcript[0].seller_violation is code
    assert m.seller_observation().n_messages.sum() == 0


def test_inactive_buyer_and_out_of_stock():
    m = make()
    m.offer(offer(0, 0, 70.0))
    m.answer(ACCEPT)
    assert m.offer(offer(0, 1, 50.0)) is None
    assert m.transcript[-1].seller_violation is Violation.INACTIVE_BUYER
    assert m.offer(offer(1, 0, 50.0)) is None  # product 0 sold out (inventory 1)
    assert m.transcript[-1].seller_violation is Violation.OUT_OF_STOCK
    assert m.seller_violations[Violation.INACTIVE_BUYER] == 1
    assert m.seller_violations[Violation.OUT_OF_STOCK] == 1
    assert m.turn == 3


def test_raw_text_goes_through_the_protocol_and_the_transcript_keeps_it():
    m = make()
    text = "THINK: buyer 1 loves product 1\nTO: buyer 1\nOFFER: product 1 at 85\nSAY: deal?"
    assert m.offer(text) == 1
    m.answer("THINK: fine\nDECISION: accept\nOFFER: none\nSAY: ok")
    rec = m.transcript[0]
    assert rec.seller_text == text and rec.seller_message == offer(1, 1, 85.0, "deal?").__class__(
        to=1, offer=Offer(1, 85.0), say="deal?", think="buyer 1 loves product 1"
    )
    assert rec.trade is not None and rec.trade.price == 85.0
    # Structured messages are kept as their four-part rendering.
    m.offer(offer(0, 0, 75.0))
    assert m.transcript[1].seller_text == render(offer(0, 0, 75.0))


def test_invalid_buyer_answers_count_and_act_as_reject():
    m = make()
    m.offer(offer(0, 0, 70.0))
    m.answer("I accept, sort of")
    assert m.trades == [] and m.buyer_violations[Violation.MALFORMED] == 1
    assert m.transcript[0].buyer_error  # the protocol reason is kept
    m.offer(offer(0, None, 0.0, say="how about a chat"))
    m.answer(ACCEPT)  # nothing to accept on a talk turn
    assert m.buyer_violations[Violation.ACCEPT_WITHOUT_OFFER] == 1 and m.trades == []
    m.offer(offer(0, 0, 70.0))
    m.answer(counter(0, 120.0))
    assert m.buyer_violations[Violation.PRICE_OUT_OF_RANGE] == 1
    m.offer(offer(0, 0, 70.0))
    m.answer(counter(5, 10.0))
    assert m.buyer_violations[Violation.UNKNOWN_PRODUCT] == 1
    assert m.seller_observation().counter_product[0, 0] == -1  # no bid was recorded
    assert m.seller_observation().last_decision[0, 0] == 3  # INVALID
    assert sum(m.seller_violations) == 0 and m.turn == 4


def test_a_talk_turn_is_valid_and_can_draw_a_counter():
    m = make()
    assert m.offer(offer(1, None, 0.0, say="what would you pay for product 1?")) == 1
    m.answer(counter(1, 72.0))
    assert m.offer(offer(1, 1, 72.0)) is None
    assert m.trades[0].price == 72.0 and sum(m.seller_violations) == 0


def test_patience_makes_a_buyer_leave_after_k_valid_messages():
    m = make(patience=2)
    m.offer(offer(0, 0, 99.0))
    m.answer(REJECT)
    m.offer(offer(0, 5, 99.0))  # invalid: does not count against patience
    m.offer(offer(0, 0, 98.0))
    m.answer(REJECT)
    assert m.left == [True, False] and m.transcript[-1].buyer_left
    m.offer(offer(0, 0, 10.0))
    assert m.transcript[-1].seller_violation is Violation.INACTIVE_BUYER
    # Buyer 1 leaves too: no active buyer, the market ends before T.
    m.offer(offer(1, 1, 99.0))
    m.answer(REJECT)
    m.offer(offer(1, 1, 99.0))
    m.answer(REJECT)
    assert m.done and m.turn == 6 - 0 and m.trades == []


def test_end_when_turns_are_used():
    m = make(turns=2)
    m.offer(offer(0, 0, 99.0))
    m.answer(REJECT)
    assert not m.done
    m.offer("garbage")
    assert m.done and m.turn == 2
    with pytest.raises(RuntimeError):
        m.offer(offer(1, 1, 50.0))


def test_end_when_every_buyer_bought():
    m = make(inventory=2)
    m.offer(offer(0, 0, 70.0))
    m.answer(ACCEPT)
    m.offer(offer(1, 0, 45.0))
    m.answer(ACCEPT)
    assert m.done and m.turn == 2 and m.stock == [0, 2]
    assert m.profit == (70 - 30) + (45 - 30)


def test_end_when_stock_is_gone():
    values = [[80.0, 60.0], [50.0, 90.0], [70.0, 70.0]]
    m = make(values=values)
    m.offer(offer(0, 0, 70.0))
    m.answer(ACCEPT)
    assert not m.done
    m.offer(offer(1, 1, 80.0))
    m.answer(ACCEPT)
    assert m.done and m.stock == [0, 0] and m.turn == 2


@pytest.mark.parametrize(
    ("rule", "choice", "expected"),
    [
        ("hidden", None, [False, False, False]),
        ("mandatory", None, [True, False, True]),
        ("voluntary", None, [False, False, False]),
        # Humans cannot disclose; agents disclose only when they choose to.
        ("voluntary", [True, True, False], [True, False, False]),
    ],
)
def test_disclosure_rules(rule, choice, expected):
    values = [[80.0, 60.0], [50.0, 90.0], [70.0, 70.0]]
    cfg = MarketConfig(buyers=3, products=2, inventory=1, turns=4, disclosure=rule)
    inst = instance_from_arrays(cfg, values, COSTS, is_agent=[True, False, True])
    m = Market(inst, disclose=None if choice is None else np.array(choice))
    assert m.seller_observation().disclosed[0].tolist() == expected
    eng = BatchedMarket(stack_instances([inst]), None if choice is None else np.array([choice]))
    assert eng.seller_observation().disclosed[0].tolist() == expected


def test_surplus_is_split_by_kind_and_by_disclosure():
    values = [[80.0, 60.0], [50.0, 90.0], [70.0, 70.0]]
    cfg = MarketConfig(buyers=3, products=2, inventory=2, turns=4, disclosure="mandatory")
    m = Market(instance_from_arrays(cfg, values, COSTS, is_agent=[True, False, False]))
    m.offer(offer(0, 0, 70.0))
    m.answer(ACCEPT)  # agent, surplus 10
    m.offer(offer(1, 1, 60.0))
    m.answer(ACCEPT)  # human, surplus 30
    met = market_metrics(m)
    assert met["buyer_surplus_agent"] == 10.0 and met["buyer_surplus_human"] == 30.0
    assert met["buyer_surplus_disclosed"] == 10.0 and met["buyer_surplus_undisclosed"] == 30.0
    assert met["mean_price"] == 65.0 and met["mean_price_norm"] == pytest.approx(0.65)


def test_no_trade_metrics_are_nan_not_zero_division():
    m = make(turns=1)
    m.offer(offer(0, 0, 99.0))
    m.answer(REJECT)
    met = market_metrics(m)
    assert met["profit"] == 0.0 and met["deal_rate"] == 0.0
    assert math.isnan(met["match_quality"]) and math.isnan(met["mean_price"])
    assert met["efficiency"] == 0.0


def test_wrong_message_types_are_violations_not_crashes():
    m = make()
    assert m.offer(None) is None  # type: ignore[arg-type]
    assert m.transcript[0].seller_error == "not_text"
    m.offer(offer(0, 0, 70.0))
    m.answer(offer(0, 0, 1.0))  # type: ignore[arg-type]  a seller message as an answer
    assert m.buyer_violations[Violation.MALFORMED] == 1 and m.trades == []
