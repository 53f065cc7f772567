"""The records of play, shared by the scalar market (``arena.market``) and the dialogue
of batched play (``arena.dialogue``): a trade, one turn of a transcript (raw text, the
parsed message, violation and protocol error, trade, departure), and ``parse_message``,
which turns what an agent wrote into those parts without raising."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from arena.messages import BuyerMessage, SellerMessage
from arena.protocol import ProtocolError, render
from arena.rules import Violation


@dataclass(frozen=True)
class Trade:
    """One unit sold: to ``buyer``, of ``product``, at ``price``."""

    buyer: int
    product: int
    price: float
    turn: int  # 1-based turn on which it happened


@dataclass
class TurnRecord:
    """One turn of the transcript: raw text, the parsed message, and what went wrong."""

    turn: int
    seller_text: str
    seller_message: SellerMessage | None
    seller_violation: Violation
    seller_error: str = ""  # the protocol reason, or the rule that was broken
    buyer: int = -1  # who answered, -1 if nobody was asked
    buyer_text: str = ""
    buyer_message: BuyerMessage | None = None
    buyer_violation: Violation = Violation.OK
    buyer_error: str = ""
    trade: Trade | None = None
    buyer_left: bool = False
    # What each side was shown before it wrote (kept only when asked for: exports).
    seller_prompt: str = ""
    buyer_prompt: str = ""

    def to_dict(self) -> dict:
        """A JSON-ready dict: raw texts, parsed messages (None if unparsable), violations;
        the prompts too where they were kept."""
        out = {
            "turn": self.turn,
            "seller_text": self.seller_text,
            "seller_message": _message_dict(self.seller_message),
            "seller_violation": self.seller_violation.name.lower(),
            "seller_error": self.seller_error,
            "buyer": self.buyer,
            "buyer_text": self.buyer_text,
            "buyer_message": _message_dict(self.buyer_message),
            "buyer_violation": self.buyer_violation.name.lower(),
            "buyer_error": self.buyer_error,
            "trade": None if self.trade is None else dataclasses.asdict(self.trade),
            "buyer_left": self.buyer_left,
        }
        if self.seller_prompt or self.buyer_prompt:
            out["seller_prompt"] = self.seller_prompt
            out["buyer_prompt"] = self.buyer_prompt
        return out


def _message_dict(msg: SellerMessage | BuyerMessage | None) -> dict | None:
    if msg is None:
        return None
    out = dataclasses.asdict(msg)
    if isinstance(msg, BuyerMessage):
        out["decision"] = msg.decision.value
    return out


def parse_message(message: object, kind: type, parser) -> tuple[str, object | None, str]:
    """(raw text, parsed message or None, protocol error reason). Never raises."""
    if isinstance(message, kind):
        try:
            return render(message), message, ""
        except ProtocolError as err:  # e.g. an index or price too large to write
            return repr(message)[:200], None, err.reason
    if not isinstance(message, str):
        return repr(message)[:200], None, "not_text"
    try:
        return message, parser(message), ""
    except ProtocolError as err:
        return message, None, err.reason
