"""The scalar reference market: one market, plain Python, the executable spec.

Rules
=====

=====================  ==========================================================
Players                one seller; N buyers, each with private values for M
                       substitutable products; each buys at most one unit.
Turn                   the seller sends one message to one buyer (TO, OFFER, SAY);
                       that buyer answers (DECISION, OFFER, SAY). Every seller
                       message costs one of the T turns, valid or not.
Seller offer           binding: OFFER product j at p. ``OFFER: none`` is a valid
                       talk turn with nothing to accept.
Accept                 trade one unit of j at p (the offer was checked in stock).
Counter                a binding bid (j', p'); it replaces the buyer's previous
                       bid. A later valid seller offer of j' at a price <= p'
                       trades at once at the *offer's* price, without an answer.
Reject                 nothing happens.
Invalid seller msg     unparsable, unknown buyer, buyer already bought or left,
                       unknown product, product out of stock, price outside
                       [lo, hi]: the turn is wasted, the buyer is not asked, and
                       one seller violation is counted (first failing check).
Invalid buyer answer   unparsable, accept without an offer, counter naming an
                       unknown or sold-out product or a price outside [lo, hi]:
                       one buyer violation, treated as a reject.
Patience               with patience k > 0, a buyer that has received k valid
                       messages without buying leaves after answering the k-th.
End                    T turns used, every buyer has bought or left, or all
                       stock is gone.
Payoffs                seller profit: sum of (price - cost); buyer surplus:
                       value - price for a buyer that bought, 0 otherwise.
=====================  ==========================================================

Violation codes and disclosure flags are defined in ``arena.rules``, shared with the
batched engine. Disclosure: under ``hidden`` the seller is told nothing about kinds; under
``mandatory`` it is told which buyers are agents; under ``voluntary`` each agent
buyer chooses (``disclose``) before the market starts. Humans never disclose.

Nothing raises out of ``offer`` or ``answer`` for bad agent output: it is data,
counted in the violations and kept in the transcript.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from arena.dialogue import Dialogue
from arena.generator import MarketInstance
from arena.messages import BuyerMessage, Decision, SellerMessage
from arena.observation import BuyerObs, LastDecision, SellerObs, as_batch, read_only
from arena.protocol import parse_buyer_message, parse_seller_message
from arena.rules import NUM_VIOLATIONS, Violation, disclosed_flags
from arena.transcript import Trade, TurnRecord, parse_message


@dataclass
class Market:
    """One market in play. Call ``offer`` with the seller's message; if it returns a
    buyer index, call ``answer`` with that buyer's reply; repeat until ``done``."""

    instance: MarketInstance
    disclose: np.ndarray | None = None  # voluntary-disclosure wishes, (N,) bool
    transcript: list[TurnRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        inst = self.instance
        cfg = inst.config
        n, m = inst.num_buyers, inst.num_products
        self.lo, self.hi = cfg.price_range
        self.turns = cfg.turns
        self.patience = cfg.patience
        self.disclosed = disclosed_flags(cfg.disclosure, inst.is_agent, self.disclose)
        self.turn = 0
        self.stock = [int(k) for k in inst.inventory]
        self.bought = [-1] * n
        self.paid = [math.nan] * n
        self.left = [False] * n
        self.n_messages = [0] * n
        self.first_price = [math.nan] * n
        self.last_product = [-1] * n
        self.last_price = [math.nan] * n
        self.last_decision = [int(LastDecision.NONE)] * n
        self.counter: list[tuple[int, float] | None] = [None] * n
        self.trades: list[Trade] = []
        self.seller_violations = [0] * NUM_VIOLATIONS
        self.buyer_violations = [0] * NUM_VIOLATIONS
        self._pending: tuple[int, SellerMessage] | None = None
        self._m = m

    # ------------------------------------------------------------------ state
    def active(self, i: int) -> bool:
        return self.bought[i] < 0 and not self.left[i]

    @property
    def done(self) -> bool:
        return (
            self.turn >= self.turns
            or not any(self.active(i) for i in range(len(self.bought)))
            or sum(self.stock) == 0
        )

    @property
    def awaiting_answer(self) -> int | None:
        """The buyer whose answer the market waits for, if any."""
        return None if self._pending is None else self._pending[0]

    # ------------------------------------------------------------------ seller
    def offer(self, message: SellerMessage | str) -> int | None:
        """Apply one seller message. Returns the buyer who must answer, or None when the
        turn is over already (invalid message, or an instant trade on a standing bid)."""
        if self._pending is not None:
            raise RuntimeError("the market is waiting for a buyer's answer")
        if self.done:
            raise RuntimeError("the market has ended")
        self.turn += 1
        text, msg, error = parse_message(message, SellerMessage, parse_seller_message)
        record = TurnRecord(self.turn, text, msg, Violation.OK, error)
        self.transcript.append(record)
        code = Violation.MALFORMED if msg is None else self._check_seller(msg)
        if code is not Violation.OK:
            record.seller_violation = code
            record.seller_error = record.seller_error or code.name.lower()
            self.seller_violations[code] += 1
            return None

        i = msg.to
        self.n_messages[i] += 1
        self.last_product[i] = -1 if msg.offer is None else msg.offer.product
        self.last_price[i] = math.nan if msg.offer is None else msg.offer.price
        if msg.offer is not None and math.isnan(self.first_price[i]):
            self.first_price[i] = msg.offer.price
        bid = self.counter[i]
        if msg.offer is not None and bid is not None:
            j, bid_price = bid
            if msg.offer.product == j and msg.offer.price <= bid_price:
                record.trade = self._trade(i, msg.offer.product, msg.offer.price)
                return None
        record.buyer = i
        self._pending = (i, msg)
        return i

    def _check_seller(self, msg: SellerMessage) -> Violation:
        if not 0 <= msg.to < len(self.bought):
            return Violation.UNKNOWN_BUYER
        if not self.active(msg.to):
            return Violation.INACTIVE_BUYER
        if msg.offer is None:
            return Violation.OK
        return self._check_offer(msg.offer.product, msg.offer.price)

    def _check_offer(self, product: int, price: float) -> Violation:
        if not 0 <= product < self._m:
            return Violation.UNKNOWN_PRODUCT
        if self.stock[product] <= 0:
            return Violation.OUT_OF_STOCK
        if not self.lo <= price <= self.hi:
            return Violation.PRICE_OUT_OF_RANGE
        return Violation.OK

    # ------------------------------------------------------------------ buyer
    def answer(self, message: BuyerMessage | str) -> None:
        """Apply the pending buyer's answer."""
        if self._pending is None:
            raise RuntimeError("no buyer answer is expected now")
        i, offer_msg = self._pending
        self._pending = None
        record = self.transcript[-1]
        text, msg, error = parse_message(message, BuyerMessage, parse_buyer_message)
        record.buyer_text, record.buyer_message, record.buyer_error = text, msg, error
        code = Violation.MALFORMED if msg is None else self._check_buyer(msg, offer_msg)
        if code is not Violation.OK:
            record.buyer_violation = code
            record.buyer_error = record.buyer_error or code.name.lower()
            self.buyer_violations[code] += 1
            self.last_decision[i] = int(LastDecision.INVALID)
        elif msg.decision is Decision.ACCEPT:
            self.last_decision[i] = int(LastDecision.ACCEPT)
            record.trade = self._trade(i, offer_msg.offer.product, offer_msg.offer.price)
            return
        elif msg.decision is Decision.COUNTER:
            self.last_decision[i] = int(LastDecision.COUNTER)
            self.counter[i] = (msg.offer.product, msg.offer.price)
        else:
            self.last_decision[i] = int(LastDecision.REJECT)
        if self.patience > 0 and self.n_messages[i] >= self.patience:
            self.left[i] = True
            record.buyer_left = True

    def _check_buyer(self, msg: BuyerMessage, offer_msg: SellerMessage) -> Violation:
        if msg.decision is Decision.ACCEPT and offer_msg.offer is None:
            return Violation.ACCEPT_WITHOUT_OFFER
        if msg.decision is Decision.COUNTER:
            return self._check_offer(msg.offer.product, msg.offer.price)
        return Violation.OK

    def _trade(self, i: int, j: int, price: float) -> Trade:
        trade = Trade(i, j, price, self.turn)
        self.trades.append(trade)
        self.stock[j] -= 1
        self.bought[i] = j
        self.paid[i] = price
        self.counter[i] = None
        return trade

    # ------------------------------------------------------------------ views
    def seller_observation(self) -> SellerObs:
        """The seller's view as a batch of one market (read-only, as the engine's: some
        arrays are views of the instance)."""
        inst = self.instance
        counter = self.counter
        return read_only(
            SellerObs(
                turns=self.turns,
                price_range=(self.lo, self.hi),
                patience=self.patience,
                turn=as_batch(self.turn, np.int64),
                done=as_batch(self.done, bool),
                costs=inst.costs[None],
                inventory=inst.inventory[None],
                stock=np.array([self.stock], dtype=np.int64),
                signals=inst.signals[None],
                active=np.array([[self.active(i) for i in range(len(self.bought))]]),
                bought=np.array([self.bought], dtype=np.int64),
                left=np.array([self.left], dtype=bool),
                n_messages=np.array([self.n_messages], dtype=np.int64),
                last_product=np.array([self.last_product], dtype=np.int64),
                last_price=np.array([self.last_price], dtype=float),
                last_decision=np.array([self.last_decision], dtype=np.int64),
                counter_product=np.array([[-1 if c is None else c[0] for c in counter]], np.int64),
                counter_price=np.array([[math.nan if c is None else c[1] for c in counter]]),
                disclosed=self.disclosed[None],
                key=as_batch(inst.key, np.uint64),
                dialogue=self._dialogue(),
            )
        )

    def buyer_observation(self) -> BuyerObs:
        """The pending buyer's view as a batch of one market (read-only)."""
        if self._pending is None:
            raise RuntimeError("no buyer answer is expected now")
        i, msg = self._pending
        inst = self.instance
        bid = self.counter[i]
        return read_only(
            BuyerObs(
                turns=self.turns,
                price_range=(self.lo, self.hi),
                patience=self.patience,
                needs_answer=as_batch(True, bool),
                buyer=as_batch(i, np.int64),
                values=inst.values[i][None],
                costs=inst.costs[None],
                stock=np.array([self.stock], dtype=np.int64),
                offer_product=as_batch(-1 if msg.offer is None else msg.offer.product, np.int64),
                offer_price=as_batch(math.nan if msg.offer is None else msg.offer.price, float),
                n_messages=as_batch(self.n_messages[i], np.int64),
                first_price=as_batch(self.first_price[i], float),
                counter_product=as_batch(-1 if bid is None else bid[0], np.int64),
                counter_price=as_batch(math.nan if bid is None else bid[1], float),
                is_agent=as_batch(bool(inst.is_agent[i]), bool),
                disclosed=as_batch(bool(self.disclosed[i]), bool),
                turn=as_batch(self.turn, np.int64),
                key=as_batch(inst.key, np.uint64),
                num_buyers=inst.num_buyers,
                dialogue=self._dialogue(),
            )
        )

    def _dialogue(self):
        """The transcript as a one-market dialogue, so text agents read it as they do in
        batched play."""
        d = Dialogue(0)
        d.rows = [self.transcript]
        return d

    @property
    def profit(self) -> float:
        return sum(t.price - float(self.instance.costs[t.product]) for t in self.trades)

    def buyer_surplus(self) -> list[float]:
        """Per buyer: value - price if it bought, else 0."""
        out = [0.0] * len(self.bought)
        for t in self.trades:
            out[t.buyer] = float(self.instance.values[t.buyer, t.product]) - t.price
        return out
