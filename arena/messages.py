"""Parsed messages of the four-part protocol.

These are the structured decisions the market acts on. Text goes through
``arena.protocol`` (``render`` / ``parse_*``); structured agents may build these
objects directly, and the market treats both the same way.

Indices are 0-based everywhere: ``TO: buyer 0`` is the first buyer and
``product 0`` the first product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

# The four tags, in the order they must appear. The second tag is TO for a seller
# and DECISION for a buyer.
SELLER_TAGS = ("THINK", "TO", "OFFER", "SAY")
BUYER_TAGS = ("THINK", "DECISION", "OFFER", "SAY")
ALL_TAGS = ("THINK", "TO", "DECISION", "OFFER", "SAY")


class Decision(StrEnum):
    """A buyer's answer to a seller message."""

    REJECT = "reject"
    ACCEPT = "accept"
    COUNTER = "counter"


def _clean_text(name: str, text: str) -> str:
    """Validate free text and strip its outer whitespace (the protocol trims it too)."""
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a str, got {type(text).__name__}")
    if "\x00" in text:
        raise ValueError(f"{name} must not contain NUL bytes")
    for line in text.splitlines():
        head = line.lstrip()
        for tag in ALL_TAGS:
            if head.startswith(tag + ":"):
                raise ValueError(f"{name} must not contain a line starting with the tag {tag}:")
    return text.strip()


@dataclass(frozen=True, slots=True)
class Offer:
    """A binding offer (seller) or bid (buyer): one unit of ``product`` at ``price``."""

    product: int
    price: float

    def __post_init__(self) -> None:
        if not isinstance(self.product, int) or isinstance(self.product, bool) or self.product < 0:
            raise ValueError(f"Offer.product must be an int >= 0, got {self.product!r}")
        price = float(self.price)
        if not math.isfinite(price) or price < 0:
            raise ValueError(f"Offer.price must be finite and >= 0, got {self.price!r}")
        object.__setattr__(self, "price", price)


@dataclass(frozen=True, slots=True)
class SellerMessage:
    """TO buyer ``to``, OFFER ``offer`` (None: a talk turn with no offer), SAY ``say``."""

    to: int
    offer: Offer | None
    say: str = ""
    think: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.to, int) or isinstance(self.to, bool) or self.to < 0:
            raise ValueError(f"SellerMessage.to must be an int >= 0, got {self.to!r}")
        if self.offer is not None and not isinstance(self.offer, Offer):
            raise ValueError("SellerMessage.offer must be an Offer or None")
        object.__setattr__(self, "say", _clean_text("SellerMessage.say", self.say))
        object.__setattr__(self, "think", _clean_text("SellerMessage.think", self.think))


@dataclass(frozen=True, slots=True)
class BuyerMessage:
    """DECISION ``decision``; a counter carries ``offer`` (its binding bid), others carry None."""

    decision: Decision
    offer: Offer | None = None
    say: str = ""
    think: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "decision", Decision(self.decision))
        if self.decision is Decision.COUNTER:
            if not isinstance(self.offer, Offer):
                raise ValueError("a counter must carry an Offer (its binding bid)")
        elif self.offer is not None:
            raise ValueError(f"a {self.decision.value} must carry no offer")
        object.__setattr__(self, "say", _clean_text("BuyerMessage.say", self.say))
        object.__setattr__(self, "think", _clean_text("BuyerMessage.think", self.think))
