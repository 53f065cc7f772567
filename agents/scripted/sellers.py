"""Scripted sellers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.base import SellerAction, SellerPolicy
from arena.observation import SellerObs


def cents(price: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Prices rounded to cents, kept inside [lo, hi] (readable transcripts, same economics)."""
    return np.clip(np.round(price, 2), np.ceil(lo * 100) / 100, np.floor(hi * 100) / 100)


def next_buyer(obs: SellerObs) -> np.ndarray:
    """(B,) the active buyer contacted least so far (lowest index on ties): round robin."""
    n = obs.num_buyers
    load = np.where(obs.active, obs.n_messages * n + np.arange(n), np.iinfo(np.int64).max)
    return np.argmin(load, axis=1)


@dataclass
class PostedPrice(SellerPolicy):
    """Posts price = cost * (1 + markup) (clipped to the range) for every product, and offers
    each buyer in turn the in-stock product with the largest signalled surplus at that price."""

    markup: float = 0.5

    def act(self, obs: SellerObs) -> SellerAction:
        lo, hi = obs.price_range
        price = cents(np.clip(obs.costs * (1.0 + self.markup), lo, hi), lo, hi)  # (B, M)
        to = next_buyer(obs)
        ar = np.arange(obs.batch_size)
        signal = obs.signals[ar, to]  # (B, M)
        score = np.where(obs.stock > 0, signal - price, -np.inf)
        product = np.argmax(score, axis=1)
        return SellerAction(to=to, product=product, price=price[ar, product])
