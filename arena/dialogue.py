"""The dialogue of batched play: every message as text, kept per market as it is played.

The batched engine acts on arrays; when asked (``BatchedMarket(..., dialogue=True)``) it
also keeps, per market row, the transcript of the turns played so far, in the scalar
market's own record type (``arena.transcript.TurnRecord``: raw text, parsed message,
violation and protocol error, trade, departure). Observations carry it, so each side
can render what it may see (``arena.text``), and a finished market's records are its
transcript: no market is replayed to get one.

Text comes from the agents that write it (``SellerAction.texts``). An agent that acts on
arrays (every scripted one) gets its message written for it: the four-part text of its
decision with a canned SAY line (``canned_seller_say`` / ``canned_buyer_say``), so a
language model on the other side still reads a sentence. The scalar reference writes
the very same messages for array actions (``agents.rollout``), so the two engines keep
identical transcripts (tested).

Off (the default) the engine pays one ``is None`` test per turn for all this.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arena.messages import BuyerMessage, Decision, Offer, SellerMessage
from arena.protocol import format_price, parse_buyer_message, parse_seller_message
from arena.rules import Violation
from arena.transcript import Trade, TurnRecord, parse_message

_DECISIONS = (Decision.REJECT, Decision.ACCEPT, Decision.COUNTER)


def canned_seller_say(offer: Offer | None) -> str:
    """The SAY line written for a seller that acts on arrays."""
    if offer is None:
        return "Is there anything you would like?"
    return f"I can let you have product {offer.product} for {format_price(offer.price)}."


def canned_buyer_say(decision: Decision, offer: Offer | None) -> str:
    """The SAY line written for a buyer that acts on arrays."""
    if decision is Decision.ACCEPT:
        return "Deal."
    if decision is Decision.REJECT:
        return "No, thank you."
    return f"I would pay {format_price(offer.price)} for product {offer.product}."


def _real(x) -> float:
    """A real number, or TypeError: ``float`` would take a numpy complex by dropping its
    imaginary part."""
    if isinstance(x, complex | np.complexfloating):
        raise TypeError(x)
    return float(x)


def _whole(x) -> int:
    """An exact integer, or ValueError (1.5, nan and 'x' are not buyer or product numbers)."""
    f = _real(x)
    if not f.is_integer():
        raise ValueError(x)
    return int(f)


def seller_message_of(to, product, price, malformed: bool = False) -> SellerMessage | str:
    """One row of an array action as a message (with its canned SAY line), or, for an
    action no message can express, a note that fails to parse (a malformed message)."""
    if malformed:
        return ""
    try:
        to, product = _whole(to), _whole(product)
        offer = None if product == -1 else Offer(product, _real(price))  # a talk turn: no price
        return SellerMessage(to=to, offer=offer, say=canned_seller_say(offer))
    except (TypeError, ValueError, OverflowError):
        return f"(no message form: to={to!r}, product={product!r}, price={price!r})"


def buyer_message_of(decision, product, price, malformed: bool = False) -> BuyerMessage | str:
    """One row of an array answer as a message (see ``seller_message_of``)."""
    if malformed:
        return ""
    try:
        code = _whole(decision)
        if not 0 <= code < len(_DECISIONS):
            raise ValueError(code)
        d = _DECISIONS[code]
        offer = Offer(_whole(product), _real(price)) if d is Decision.COUNTER else None
        return BuyerMessage(d, offer, say=canned_buyer_say(d, offer))
    except (TypeError, ValueError, OverflowError):
        return f"(no message form: decision={decision!r}, product={product!r}, price={price!r})"


class Dialogue:
    """Per market row, the ``TurnRecord`` of every turn played so far.

    ``prompts``: also keep, on each record, the text each side was shown before it wrote
    (``seller_prompt`` / ``buyer_prompt``, rendered by ``arena.text``), for prompt/completion
    exports. ``only``: a (B,) bool mask of the rows to record (a tournament keeps the
    transcripts of a few markets of a thousand); the others stay empty. Rows are lists
    owned by this object; ``take`` shares them (read-only views for a sub-batch of an
    observation).
    """

    def __init__(
        self, batch_size: int, prompts: bool = False, only: np.ndarray | None = None
    ) -> None:
        self.rows: list[list[TurnRecord]] = [[] for _ in range(batch_size)]
        self.prompts = prompts
        self.only = None if only is None else np.asarray(only, bool).copy()

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, b: int) -> list[TurnRecord]:
        return self.rows[b]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dialogue):
            return NotImplemented
        return self.rows == other.rows and self.prompts == other.prompts

    __hash__ = None  # mutable

    def take(self, rows: np.ndarray | slice) -> Dialogue:
        """The dialogue of the markets ``rows`` (indices, a bool mask or a slice), sharing
        records."""
        if isinstance(rows, slice):
            idx = np.arange(len(self.rows))[rows]
        else:
            idx = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows)
        out = Dialogue(0, self.prompts)
        out.rows = [self.rows[int(b)] for b in idx]
        out.only = None if self.only is None else self.only[idx]
        return out

    def restart(self, rows: np.ndarray) -> None:
        """Fresh, empty transcripts in ``rows`` (a (B,) bool mask)."""
        for b in np.flatnonzero(rows):
            self.rows[b] = []

    def records(self, b: int) -> list[dict]:
        """Market ``b``'s transcript as JSON-ready dicts (``TurnRecord.to_dict``)."""
        return [r.to_dict() for r in self.rows[b]]

    # ------------------------------------------------------------- recording
    def seller_turn(
        self,
        live: np.ndarray,
        turn: np.ndarray,
        to: np.ndarray,
        product: np.ndarray,
        price: np.ndarray,
        malformed: np.ndarray | None,
        code: np.ndarray,
        asked: np.ndarray,
        instant: np.ndarray,
        texts: Sequence[str | None] | None,
        prompts: Sequence[str] | None = None,
    ) -> None:
        """Record the seller messages of the live rows (called by the engine's ``offer``
        with the action as the agent gave it)."""
        to, product, price = np.asarray(to), np.asarray(product), np.asarray(price)
        malformed = np.zeros(len(live), bool) if malformed is None else np.asarray(malformed)
        for b in np.flatnonzero(live if self.only is None else live & self.only):
            if texts is not None and texts[b] is not None:
                text, msg, error = parse_message(texts[b], SellerMessage, parse_seller_message)
            else:
                message = seller_message_of(to[b], product[b], price[b], bool(malformed[b]))
                text, msg, error = parse_message(message, SellerMessage, parse_seller_message)
            v = Violation(int(code[b]))
            if v is not Violation.OK:
                error = error or v.name.lower()
            rec = TurnRecord(int(turn[b]), text, msg, v, error)
            if asked[b]:
                rec.buyer = int(to[b])
            if instant[b]:
                rec.trade = Trade(int(to[b]), int(product[b]), float(price[b]), int(turn[b]))
            if prompts is not None:
                rec.seller_prompt = prompts[b]
            self.rows[b].append(rec)

    def buyer_turn(
        self,
        ask: np.ndarray,
        decision: np.ndarray,
        product: np.ndarray,
        price: np.ndarray,
        malformed: np.ndarray | None,
        code: np.ndarray,
        trade: np.ndarray,
        offer: tuple[np.ndarray, np.ndarray],
        leave: np.ndarray | None,
        texts: Sequence[str | None] | None,
        prompts: Sequence[str] | None = None,
    ) -> None:
        """Record the answers of the rows that were asked (called by the engine's
        ``answer``); ``offer`` is the (product, price) each answer was about."""
        decision, product, price = np.asarray(decision), np.asarray(product), np.asarray(price)
        malformed = np.zeros(len(ask), bool) if malformed is None else np.asarray(malformed)
        for b in np.flatnonzero(ask if self.only is None else ask & self.only):
            rec = self.rows[b][-1]
            if texts is not None and texts[b] is not None:
                text, msg, error = parse_message(texts[b], BuyerMessage, parse_buyer_message)
            else:
                message = buyer_message_of(decision[b], product[b], price[b], bool(malformed[b]))
                text, msg, error = parse_message(message, BuyerMessage, parse_buyer_message)
            v = Violation(int(code[b]))
            if v is not Violation.OK:
                error = error or v.name.lower()
            rec.buyer_text, rec.buyer_message = text, msg
            rec.buyer_violation, rec.buyer_error = v, error
            if trade[b]:
                rec.trade = Trade(rec.buyer, int(offer[0][b]), float(offer[1][b]), rec.turn)
            if leave is not None and leave[b]:
                rec.buyer_left = True
            if prompts is not None:
                rec.buyer_prompt = prompts[b]
