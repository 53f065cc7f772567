"""Scripted buyers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.base import BuyerAction, BuyerPolicy, offered_value
from arena.observation import ACCEPT, REJECT, BuyerObs


@dataclass
class Truthful(BuyerPolicy):
    """Accepts any offer it values at or above the price; never counters."""

    def act(self, obs: BuyerObs) -> BuyerAction:
        with np.errstate(invalid="ignore"):
            yes = offered_value(obs) >= obs.offer_price
        decision = np.where(yes, ACCEPT, REJECT)
        return BuyerAction(decision, np.zeros_like(decision), np.zeros(obs.batch_size))
