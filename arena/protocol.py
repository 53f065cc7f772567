"""Text form of the four-part message protocol: ``render`` and strict ``parse``.

Grammar (one message; ``\\n``, ``\\r\\n`` and a lone ``\\r`` all end a line)::

    message  := blank* part(THINK) part(SECOND) part(OFFER) part(SAY)
    part(T)  := tag-line(T) body-line*
    tag-line := spaces* T ":" value-text        (T uppercase, exactly one of the tags)
    body-line:= any line that is not a tag line  (so THINK and SAY may span lines)
    SECOND   := TO (seller) | DECISION (buyer)

    TO       := "buyer" sp+ digits               (< 10**6)
    DECISION := "accept" | "reject" | "counter"
    OFFER    := "none" | "product" sp+ digits sp+ "at" sp+ price
    price    := [0-9]+ ("." [0-9]+)?             (at most 12 digits before the point)
    sp       := " " | "\\t"

A part's value is everything after its ``TAG:`` up to the next tag line, with
surrounding whitespace stripped. Keywords (``buyer``, ``none``, ``product``,
``at`` and the decisions) are case-insensitive; tags are not. A counter must
carry an offer; accept and reject must carry ``OFFER: none``. Indices are
0-based, as in :mod:`arena.messages`.

``render`` writes the canonical form: ``TAG: value`` per part (``TAG:`` when the
value is empty), lines joined by ``\\n``, no trailing newline, lowercase
keywords, and prices as the shortest plain decimal that reads back as the same
float, without exponent, trailing zeros or a trailing point (``41.5``, ``41``,
``0.00001``). ``parse_*(render(m)) == m`` for every message ``render`` accepts.

Reason codes of :class:`ProtocolError` (``REASONS``):

- ``not_text``: the input is not a ``str``.
- ``too_long``: more than ``MAX_MESSAGE_CHARS`` characters.
- ``bad_character``: a control character other than tab/newline/carriage
  return (NUL included), or a lone surrogate.
- ``empty``: the text is empty or whitespace only.
- ``stray_text``: non-blank text before the first tag line.
- ``missing_part``: a required part is absent (also: no tag at all).
- ``duplicate_part``: a part appears more than once.
- ``wrong_order``: all parts present once, but not in protocol order.
- ``wrong_part``: a part of the other side (DECISION from a seller, TO from a
  buyer, or both).
- ``bad_to``: the TO value is not ``buyer <index>``.
- ``bad_decision``: the DECISION value is not accept, reject or counter.
- ``bad_offer``: the OFFER value is neither ``none`` nor ``product <index> at <price>``.
- ``bad_price``: the price is not a plain non-negative decimal below 10**12.
- ``counter_without_offer``: DECISION counter with ``OFFER: none``.
- ``offer_not_allowed``: DECISION accept or reject with an offer.
- ``invalid_message``: the parts are well formed but the message classes
  reject them (e.g. a tag hidden behind a Unicode line separator).
- ``unrenderable``: ``render`` only; the message has no exact text form
  (surrounding whitespace, control characters, index or price out of range).
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable

from arena.messages import (
    ALL_TAGS,
    BUYER_TAGS,
    SELLER_TAGS,
    BuyerMessage,
    Decision,
    Offer,
    SellerMessage,
)

__all__ = [
    "MAX_INDEX",
    "MAX_MESSAGE_CHARS",
    "MAX_PRICE_DIGITS",
    "PRICE_LIMIT",
    "REASONS",
    "ProtocolError",
    "format_price",
    "parse",
    "parse_buyer_message",
    "parse_seller_message",
    "plain_decimal",
    "render",
]

MAX_MESSAGE_CHARS = 16_384
# Indices (buyers, products) must be below this; it also keeps int() away from
# Python's limit on converting very long digit strings.
MAX_INDEX = 10**6
MAX_PRICE_DIGITS = 12
PRICE_LIMIT = 10.0**MAX_PRICE_DIGITS  # no message states a price at or above this

REASONS = frozenset(
    {
        "not_text",
        "too_long",
        "bad_character",
        "empty",
        "stray_text",
        "missing_part",
        "duplicate_part",
        "wrong_order",
        "wrong_part",
        "bad_to",
        "bad_decision",
        "bad_offer",
        "bad_price",
        "counter_without_offer",
        "offer_not_allowed",
        "invalid_message",
        "unrenderable",
    }
)

# Surrogates are included because a lone one cannot be written to a UTF-8 transcript.
_BAD_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_TO = re.compile(r"buyer[ \t]+([0-9]+)", re.ASCII | re.IGNORECASE)
_OFFER = re.compile(r"product[ \t]+(\S+)[ \t]+at[ \t]+(\S+)", re.ASCII | re.IGNORECASE)
_INDEX = re.compile(r"[0-9]+", re.ASCII)
_PRICE = re.compile(r"([0-9]+)(?:\.[0-9]+)?", re.ASCII)
_DECISIONS = {d.value: d for d in Decision}


class ProtocolError(ValueError):
    """A message that does not follow the protocol; ``reason`` is one of ``REASONS``."""

    reason: str
    detail: str

    def __init__(self, reason: str, detail: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown ProtocolError reason {reason!r}")
        # Both go into args so the error survives pickling (e.g. across worker processes).
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


# --------------------------------------------------------------------------- render


def format_price(price: float) -> str:
    """Canonical price text: shortest plain decimal that reads back as ``price`` exactly."""
    price = float(price)
    if not math.isfinite(price) or price < 0 or price >= PRICE_LIMIT:
        raise ProtocolError(
            "unrenderable", f"price must be finite, >= 0 and < 10**{MAX_PRICE_DIGITS}: {price!r}"
        )
    return plain_decimal(price)


def plain_decimal(x: float) -> str:
    """The shortest decimal that reads back as the finite ``x`` exactly, without an
    exponent (``1e+20`` is ``100000000000000000000``); no bound, unlike a message's price."""
    # repr gives the shortest round-tripping digits; Decimal lays them out without an exponent.
    # Adding 0.0 turns -0.0 into 0.0, which the grammar can express.
    text = format(decimal.Decimal(repr(float(x) + 0.0)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _render_text(name: str, text: str) -> str:
    bad = _BAD_CHAR.search(text)
    if bad is not None:
        raise ProtocolError(
            "unrenderable", f"{name} contains the character U+{ord(bad.group()):04X}"
        )
    if "\r" in text:
        # The parser folds \r and \r\n into \n, so the text would not come back unchanged.
        raise ProtocolError("unrenderable", f"{name} contains a carriage return")
    if text != text.strip():
        raise ProtocolError("unrenderable", f"{name} has leading or trailing whitespace")
    return text


def _render_index(name: str, index: int) -> str:
    if index >= MAX_INDEX:
        raise ProtocolError("unrenderable", f"{name} must be < {MAX_INDEX}, got {index}")
    return str(index)


def _render_offer(offer: Offer | None, price: Callable[[float], str]) -> str:
    if offer is None:
        return "none"
    product = _render_index("product", offer.product)
    return f"product {product} at {price(offer.price)}"


def render(
    message: SellerMessage | BuyerMessage, price: Callable[[float], str] = format_price
) -> str:
    """The canonical four-part text of ``message``; ``price`` writes the offer's price
    (default: the shortest form that parses back to it; a caller may choose another form
    the parser reads as the same price, such as always two decimals).

    Raises ``ProtocolError`` (reason ``unrenderable``) when the message has no text
    form that parses back to it, and ``TypeError`` for anything that is not a message.
    """
    if isinstance(message, SellerMessage):
        second = ("TO", f"buyer {_render_index('to', message.to)}")
    elif isinstance(message, BuyerMessage):
        second = ("DECISION", message.decision.value)
    else:
        raise TypeError(f"render expects a SellerMessage or BuyerMessage, got {type(message)}")
    parts = [
        ("THINK", _render_text("think", message.think)),
        second,
        ("OFFER", _render_offer(message.offer, price)),
        ("SAY", _render_text("say", message.say)),
    ]
    text = "\n".join(f"{tag}: {value}" if value else f"{tag}:" for tag, value in parts)
    if len(text) > MAX_MESSAGE_CHARS:
        raise ProtocolError(
            "unrenderable", f"rendered text has {len(text)} characters > {MAX_MESSAGE_CHARS}"
        )
    return text


# --------------------------------------------------------------------------- parse


def _tag_of(line: str) -> str | None:
    # lstrip() matches the whitespace notion arena.messages uses to forbid tag lines in texts.
    head = line.lstrip()
    for tag in ALL_TAGS:
        if head.startswith(tag + ":"):
            return tag
    return None


def _split(text: object) -> list[tuple[str, str]]:
    """Check the raw text and cut it into (tag, stripped value) pairs, in order of appearance."""
    if not isinstance(text, str):
        raise ProtocolError("not_text", f"expected str, got {type(text).__name__}")
    # Length first, so huge inputs are turned away before any scan.
    if len(text) > MAX_MESSAGE_CHARS:
        raise ProtocolError("too_long", f"{len(text)} characters > {MAX_MESSAGE_CHARS}")
    bad = _BAD_CHAR.search(text)
    if bad is not None:
        raise ProtocolError(
            "bad_character", f"character U+{ord(bad.group()):04X} at offset {bad.start()}"
        )
    if not text.strip():
        raise ProtocolError("empty", "the message is empty")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    tags = [_tag_of(line) for line in lines]
    first = next((number for number, tag in enumerate(tags) if tag is not None), None)
    if first is None:
        raise ProtocolError("missing_part", "no tagged part found (expected THINK:, ...)")
    for number in range(first):
        if lines[number].strip():
            raise ProtocolError(
                "stray_text",
                f"line {number + 1} comes before the first tag: {lines[number].strip()[:60]!r}",
            )
    parts: list[tuple[str, list[str]]] = []
    for line, tag in zip(lines[first:], tags[first:], strict=True):
        if tag is not None:
            parts.append((tag, [line.lstrip()[len(tag) + 1 :]]))
        else:
            parts[-1][1].append(line)
    return [(tag, "\n".join(body).strip()) for tag, body in parts]


def _check_structure(parts: list[tuple[str, str]], expected: tuple[str, ...]) -> dict[str, str]:
    tags = [tag for tag, _ in parts]
    for tag in tags:
        if tag not in expected:
            raise ProtocolError(
                "wrong_part", f"{tag} does not belong here (expected {', '.join(expected)})"
            )
    for tag in expected:
        if tags.count(tag) > 1:
            raise ProtocolError("duplicate_part", f"{tag} appears {tags.count(tag)} times")
    for tag in expected:
        if tag not in tags:
            raise ProtocolError("missing_part", f"{tag} is missing")
    if tuple(tags) != expected:
        raise ProtocolError(
            "wrong_order", f"parts are {', '.join(tags)}; expected {', '.join(expected)}"
        )
    return dict(parts)


def _parse_index(digits: str) -> int | None:
    """The value of an ASCII digit string if it is < MAX_INDEX, else None."""
    if _INDEX.fullmatch(digits) is None:
        return None
    # Strip leading zeros before int() so a long string of zeros cannot hit int's digit limit.
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(MAX_INDEX - 1)):
        return None
    return int(significant)


def _parse_to(value: str) -> int:
    match = _TO.fullmatch(value)
    index = _parse_index(match.group(1)) if match else None
    if index is None:
        raise ProtocolError("bad_to", f"expected 'buyer <index < {MAX_INDEX}>', got {value[:60]!r}")
    return index


def _parse_price(token: str) -> float:
    match = _PRICE.fullmatch(token)
    if match is None:
        raise ProtocolError("bad_price", f"expected a plain decimal like 41.5, got {token[:60]!r}")
    if len(match.group(1)) > MAX_PRICE_DIGITS:
        raise ProtocolError("bad_price", f"more than {MAX_PRICE_DIGITS} digits before the point")
    price = float(token)
    # Twelve nines followed by enough fractional nines round up to 10**12.
    if price >= PRICE_LIMIT:
        raise ProtocolError(
            "bad_price", f"price {token[:60]!r} is not below 10**{MAX_PRICE_DIGITS}"
        )
    return price


def _parse_offer(value: str) -> Offer | None:
    if value.isascii() and value.lower() == "none":
        return None
    match = _OFFER.fullmatch(value)
    if match is None:
        raise ProtocolError(
            "bad_offer", f"expected 'none' or 'product <index> at <price>', got {value[:60]!r}"
        )
    product = _parse_index(match.group(1))
    if product is None:
        raise ProtocolError(
            "bad_offer", f"product must be an index < {MAX_INDEX}, got {match.group(1)[:60]!r}"
        )
    return Offer(product, _parse_price(match.group(2)))


def _parse_decision(value: str) -> Decision:
    decision = _DECISIONS.get(value.lower()) if value.isascii() else None
    if decision is None:
        raise ProtocolError(
            "bad_decision", f"expected accept, reject or counter, got {value[:60]!r}"
        )
    return decision


def _seller_from_parts(parts: list[tuple[str, str]]) -> SellerMessage:
    values = _check_structure(parts, SELLER_TAGS)
    to = _parse_to(values["TO"])
    offer = _parse_offer(values["OFFER"])
    try:
        return SellerMessage(to=to, offer=offer, say=values["SAY"], think=values["THINK"])
    except (ValueError, TypeError) as err:
        raise ProtocolError("invalid_message", str(err)) from err


def _buyer_from_parts(parts: list[tuple[str, str]]) -> BuyerMessage:
    values = _check_structure(parts, BUYER_TAGS)
    decision = _parse_decision(values["DECISION"])
    offer = _parse_offer(values["OFFER"])
    if decision is Decision.COUNTER and offer is None:
        raise ProtocolError("counter_without_offer", "a counter must name its bid in OFFER")
    if decision is not Decision.COUNTER and offer is not None:
        raise ProtocolError("offer_not_allowed", f"a {decision.value} must have 'OFFER: none'")
    try:
        return BuyerMessage(
            decision=decision, offer=offer, say=values["SAY"], think=values["THINK"]
        )
    except (ValueError, TypeError) as err:
        raise ProtocolError("invalid_message", str(err)) from err


def parse_seller_message(text: str) -> SellerMessage:
    """Parse a seller's THINK/TO/OFFER/SAY text; raises only ``ProtocolError``."""
    return _seller_from_parts(_split(text))


def parse_buyer_message(text: str) -> BuyerMessage:
    """Parse a buyer's THINK/DECISION/OFFER/SAY text; raises only ``ProtocolError``."""
    return _buyer_from_parts(_split(text))


def parse(text: str) -> SellerMessage | BuyerMessage:
    """Parse either side's message, told apart by a TO or a DECISION part."""
    parts = _split(text)
    tags = {tag for tag, _ in parts}
    if "TO" in tags and "DECISION" in tags:
        raise ProtocolError("wrong_part", "a message has either TO (seller) or DECISION (buyer)")
    if "TO" in tags:
        return _seller_from_parts(parts)
    if "DECISION" in tags:
        return _buyer_from_parts(parts)
    raise ProtocolError("missing_part", "neither TO (seller) nor DECISION (buyer) is present")
