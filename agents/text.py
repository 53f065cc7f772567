"""Text to actions: the one place where agents' message texts become decisions.

A language-model agent (local or served) writes one four-part message per market;
``seller_action(texts)`` / ``buyer_action(texts)`` parse them with ``arena.protocol``'s
strict parsers and return the action arrays plus the ``malformed`` mask. Nothing is ever
guessed: a text that does not parse is malformed (a counted violation that wastes the
turn, or a buyer violation counted as a reject), whatever numbers it contains. The texts
ride along in the action (``texts``), so the engine's dialogue keeps them as written.

Rows where no answer is wanted (ended markets, buyers not asked) may hold any text; the
engine ignores them. ``errors`` gives each row's protocol reason ("" when it parsed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.base import BuyerAction, SellerAction
from arena.messages import Decision
from arena.protocol import ProtocolError, parse_buyer_message, parse_seller_message

_CODES = {Decision.REJECT: 0, Decision.ACCEPT: 1, Decision.COUNTER: 2}


def seller_action(texts: Sequence[str]) -> tuple[SellerAction, list[str]]:
    """(the action of B seller texts, each row's protocol error or "")."""
    b = len(texts)
    to = np.zeros(b, np.int64)
    product = np.full(b, -1, np.int64)
    price = np.zeros(b)
    malformed = np.zeros(b, bool)
    errors = [""] * b
    for k, text in enumerate(texts):
        try:
            msg = parse_seller_message(text)
        except ProtocolError as err:
            malformed[k], errors[k] = True, err.reason
            continue
        to[k] = msg.to
        if msg.offer is not None:
            product[k], price[k] = msg.offer.product, msg.offer.price
    action = SellerAction(to, product, price, malformed=malformed, texts=list(texts))
    return action, errors


def buyer_action(texts: Sequence[str]) -> tuple[BuyerAction, list[str]]:
    """(the action of B buyer texts, each row's protocol error or "")."""
    b = len(texts)
    decision = np.zeros(b, np.int64)
    product = np.zeros(b, np.int64)
    price = np.zeros(b)
    malformed = np.zeros(b, bool)
    errors = [""] * b
    for k, text in enumerate(texts):
        try:
            msg = parse_buyer_message(text)
        except ProtocolError as err:
            malformed[k], errors[k] = True, err.reason
            continue
        decision[k] = _CODES[msg.decision]
        if msg.offer is not None:
            product[k], price[k] = msg.offer.product, msg.offer.price
    action = BuyerAction(decision, product, price, malformed=malformed, texts=list(texts))
    return action, errors
