"""Observations as text: what each side may see of one market, for language-model agents.

``seller_view(obs, b)`` and ``buyer_view(obs, b)`` (also ``obs.text(b)``) render market
``b`` of a batched observation. What a side sees follows ``arena.observation`` and one
rule for the dialogue (``arena.dialogue``, kept by the engine when asked):

* its own messages in full, THINK included, as written (a malformed one too, with the
  violation it was counted as);
* of the other side, the decisions, offers and SAY lines, and never the THINK;
* a buyer sees only its own conversation: the seller's messages that reached it (an
  invalid message reaches nobody) and its own answers.

Seller view (one line per product and buyer, then the conversation)::

    You are the seller. Turn 3 of 12 (10 left). Prices from 0 to 100.
    product 0: cost 30.1, 2 of 2 in stock
    buyer 0: active; signals 61.2 55.3 70.1 48.2
    buyer 1: bought product 2
    buyer 3: active, an agent (disclosed); signals ...; standing bid: product 1 at 40
    Conversation:
    [turn 1] you:
    THINK: ...
    TO: buyer 3
    OFFER: product 2 at 62
    SAY: ...
    [turn 1] buyer 3: DECISION: counter; OFFER: product 1 at 40; SAY: Too much.

Numbers are written as prices are (``plain_decimal``) after rounding: prices, costs and
bids to cents, signals and values to one decimal (they are noisy estimates anyway).
Without a dialogue the conversation is left out. Everything is a pure function of row
``b``, so a batch renders each market as it renders alone.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from arena.messages import BuyerMessage, Offer, SellerMessage
from arena.protocol import plain_decimal
from arena.rules import LastDecision, Violation
from arena.transcript import TurnRecord

if TYPE_CHECKING:  # the observations call these views (SellerObs.text, BuyerObs.text)
    from arena.observation import BuyerObs, SellerObs

__all__ = ["buyer_view", "seller_view", "num"]


def num(x: float, digits: int = 2) -> str:
    """A number as the views write it: rounded, then the shortest plain decimal. No bound:
    a signal may lie past the largest price a message can state."""
    x = round(float(x), digits)
    if not math.isfinite(x):
        return "none"
    return plain_decimal(x)


def _offer(offer: Offer | None) -> str:
    return "none" if offer is None else f"product {offer.product} at {num(offer.price)}"


def _other_seller(msg: SellerMessage | None) -> str:
    """A seller message as the buyer sees it: the offer and the SAY, no THINK."""
    if msg is None:
        return "(unreadable message)"
    return f"OFFER: {_offer(msg.offer)}; SAY: {msg.say}"


def _other_buyer(rec: TurnRecord) -> str:
    """A buyer answer as the seller sees it: decision, bid and SAY, no THINK."""
    msg: BuyerMessage | None = rec.buyer_message
    if msg is None:
        return f"(unreadable answer, counted as a reject: {rec.buyer_error})"
    out = f"DECISION: {msg.decision.value}; OFFER: {_offer(msg.offer)}; SAY: {msg.say}"
    if rec.buyer_violation is not Violation.OK:
        out += f" (invalid: {rec.buyer_error}; counted as a reject)"
    return out


def _own(text: str, violation: Violation, error: str, cost: str) -> str:
    out = text if text.strip() else "(empty message)"
    if violation is not Violation.OK:
        out += f"\n(invalid: {error}; {cost})"
    return out


def _answered(rec: TurnRecord) -> bool:
    """Whether the buyer asked in ``rec`` has answered: a turn's record exists while its
    buyer is still being asked; an empty answer is recorded as a violation."""
    answered = bool(rec.buyer_text) or rec.buyer_message is not None
    return answered or rec.buyer_violation is not Violation.OK


def _outcome(rec: TurnRecord, buyer: int | None = None) -> list[str]:
    lines = []
    if rec.trade is not None:
        t = rec.trade
        who = "you" if buyer is not None else f"buyer {t.buyer}"
        lines.append(f"[turn {rec.turn}] trade: {who} bought product {t.product} at {num(t.price)}")
    if rec.buyer_left:
        who = "you" if buyer is not None else f"buyer {rec.buyer}"
        lines.append(f"[turn {rec.turn}] {who} left")
    return lines


def seller_view(obs: SellerObs, b: int) -> str:
    """Market ``b`` as the seller may see it (see the module docstring)."""
    lo, hi = obs.price_range
    turn = int(obs.turn[b])
    if turn >= obs.turns:
        when = f"The market is over: all {obs.turns} turns are played."
    elif obs.done[b]:  # the stock is gone, or every buyer has bought or left
        when = f"The market is over after {turn} of {obs.turns} turns: no sale is left to make."
    else:
        when = f"Turn {turn + 1} of {obs.turns} ({obs.turns - turn} left)."
    lines = [
        f"You are the seller. {when} "
        f"Prices from {num(lo)} to {num(hi)}."
        + (f" A buyer leaves after {obs.patience} offers without a deal." if obs.patience else "")
    ]
    for j in range(obs.num_products):
        lines.append(
            f"product {j}: cost {num(obs.costs[b, j])}, "
            f"{int(obs.stock[b, j])} of {int(obs.inventory[b, j])} in stock"
        )
    for i in range(obs.num_buyers):
        agent = ", an agent (disclosed)" if obs.disclosed[b, i] else ""
        if obs.bought[b, i] >= 0:
            lines.append(f"buyer {i}: bought product {int(obs.bought[b, i])}{agent}")
            continue
        if obs.left[b, i]:
            lines.append(f"buyer {i}: left{agent}")
            continue
        signals = " ".join(num(s, 1) for s in obs.signals[b, i])
        line = f"buyer {i}: active{agent}; signals {signals}"
        if obs.counter_product[b, i] >= 0:
            bid = f"product {int(obs.counter_product[b, i])} at {num(obs.counter_price[b, i])}"
            line += f"; standing bid: {bid}"
        if obs.last_decision[b, i] != LastDecision.NONE and obs.last_product[b, i] >= 0:
            decision = LastDecision(int(obs.last_decision[b, i])).name.lower()
            line += (
                f"; last offer product {int(obs.last_product[b, i])} at "
                f"{num(obs.last_price[b, i])}: {decision}"
            )
        lines.append(line)
    if obs.dialogue is not None:
        lines.append("Conversation:" if obs.dialogue[b] else "Conversation: none yet")
        for rec in obs.dialogue[b]:
            lines.append(f"[turn {rec.turn}] you:")
            lines.append(
                _own(rec.seller_text, rec.seller_violation, rec.seller_error, "the turn was wasted")
            )
            if rec.buyer >= 0 and _answered(rec):
                lines.append(f"[turn {rec.turn}] buyer {rec.buyer}: {_other_buyer(rec)}")
            lines += _outcome(rec)
    return "\n".join(lines)


def _reached(rec: TurnRecord, i: int) -> bool:
    """Whether the seller's message of ``rec`` reached buyer ``i``."""
    msg = rec.seller_message
    return rec.seller_violation is Violation.OK and msg is not None and msg.to == i


def buyer_view(obs: BuyerObs, b: int) -> str:
    """Market ``b`` as the buyer it asks may see it (see the module docstring)."""
    lo, hi = obs.price_range
    i = int(obs.buyer[b])
    kind = "an agent" if obs.is_agent[b] else "a person"
    told = " The seller has been told you are an agent." if obs.disclosed[b] else ""
    lines = [
        f"You are buyer {i} of {obs.num_buyers}, {kind}.{told} Seller turn {int(obs.turn[b])} "
        f"of {obs.turns}. Prices from {num(lo)} to {num(hi)}. You buy at most one unit."
        + (f" You leave after {obs.patience} offers without a deal." if obs.patience else "")
    ]
    m = obs.values.shape[1]
    for j in range(m):
        lines.append(
            f"product {j}: your value {num(obs.values[b, j], 1)}, cost {num(obs.costs[b, j])}, "
            f"{int(obs.stock[b, j])} in stock"
        )
    if obs.counter_product[b] >= 0:
        lines.append(
            f"your standing bid: product {int(obs.counter_product[b])} at "
            f"{num(obs.counter_price[b])}"
        )
    if obs.dialogue is not None:
        lines.append("Conversation with the seller:")
        for rec in obs.dialogue[b]:
            if not _reached(rec, i):
                continue
            lines.append(f"[turn {rec.turn}] seller: {_other_seller(rec.seller_message)}")
            if rec.buyer == i and _answered(rec):
                lines.append(f"[turn {rec.turn}] you:")
                reject = "counted as a reject"
                lines.append(_own(rec.buyer_text, rec.buyer_violation, rec.buyer_error, reject))
            lines += _outcome(rec, buyer=i)
    else:
        offer = (
            "none"
            if obs.offer_product[b] < 0
            else f"product {int(obs.offer_product[b])} at {num(obs.offer_price[b])}"
        )
        lines.append(f"The seller offers: {offer}")
    return "\n".join(lines)
