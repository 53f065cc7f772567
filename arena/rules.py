"""Rules that the scalar reference market and the batched engine share, defined once.

``arena.market`` states the rules in plain Python and ``arena.engine`` on arrays; both
import from here what must be the same value in both: the violation codes (stored,
counted and compared between the engines), the codes of a buyer's answer, and who the
seller is told is an agent.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

__all__ = ["ACCEPT", "COUNTER", "NUM_VIOLATIONS", "REJECT", "LastDecision", "Violation",
           "disclosed_flags"]  # fmt: skip


class Violation(IntEnum):
    """Why a message was invalid; the first failing check in this order wins."""

    OK = 0
    MALFORMED = 1  # the text did not parse (the protocol reason is kept in the transcript)
    UNKNOWN_BUYER = 2
    INACTIVE_BUYER = 3  # the buyer has already bought or left
    UNKNOWN_PRODUCT = 4
    OUT_OF_STOCK = 5
    PRICE_OUT_OF_RANGE = 6
    ACCEPT_WITHOUT_OFFER = 7  # buyers only


NUM_VIOLATIONS = len(Violation)


class LastDecision(IntEnum):
    """The last answer a buyer gave the seller, as the seller's observation records it."""

    NONE = -1  # never answered
    REJECT = 0
    ACCEPT = 1
    COUNTER = 2
    INVALID = 3  # a malformed or illegal answer (counted as a buyer violation and a reject)


# Integer codes for buyer decisions in batched actions; they match LastDecision.
REJECT, ACCEPT, COUNTER = 0, 1, 2


def disclosed_flags(rule: str, is_agent: np.ndarray, choice: np.ndarray | None) -> np.ndarray:
    """Which buyers the seller is told are agents, under a disclosure rule.

    ``choice`` holds each buyer's wish to disclose (used only under ``voluntary``;
    None means no agent discloses). Works on (N,) and (B, N) arrays alike.
    """
    is_agent = np.asarray(is_agent, dtype=bool)
    if rule == "hidden":
        return np.zeros_like(is_agent)
    if rule == "mandatory":
        return is_agent.copy()
    if rule == "voluntary":
        if choice is None:
            return np.zeros_like(is_agent)
        return is_agent & np.asarray(choice, dtype=bool)
    raise ValueError(f"unknown disclosure rule {rule!r}")
