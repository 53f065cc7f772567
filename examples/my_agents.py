"""The policies of the bring-your-own-agent guide (docs/bring_your_own_agent.md), from an
empty class to a seller that plays in a tournament.

    arena check examples/my_agents.py:EmptySeller     # does not conform: no act()
    arena check examples/my_agents.py:FirstTry        # does not conform: violations
    arena check examples/my_agents.py:SignalSeller    # conforms

``register_entries`` makes ``SignalSeller`` the entry ``signal_seller``; ``--agents``
registers it for a command:

    arena eval --agents examples/my_agents.py --seller signal_seller --buyers haggler
    arena tournament examples/byo.toml --out runs/byo   # the spec names my_agents.py
"""

from __future__ import annotations

import numpy as np

from agents.base import SellerAction, SellerPolicy
from arena.observation import SellerObs
from arena.prices import cents


class EmptySeller(SellerPolicy):
    """Step 1: a class with nothing in it."""


class FirstTry(SellerPolicy):
    """Step 2: every market, every turn: buyer 0, product 0, at the top of the range."""

    def act(self, obs: SellerObs) -> SellerAction:
        b = obs.batch_size
        return SellerAction(
            to=np.zeros(b, np.int64),
            product=np.zeros(b, np.int64),
            price=np.full(b, obs.price_range[1]),
        )


class SignalSeller(SellerPolicy):
    """Step 3: each turn, of the buyers asked least so far, the open (buyer, product) pair
    with the largest public signal minus cost, offered at the signal less ``discount`` of
    the price range (never below cost), in whole cents. Stateless and deterministic, so
    it decides a batch of markets as it decides each alone."""

    def __init__(self, seed: int = 0, discount: float = 0.05) -> None:
        self.seed = seed  # unused: the policy draws no noise
        self.discount = discount

    def act(self, obs: SellerObs) -> SellerAction:
        b, n, m = obs.signals.shape
        open_ = obs.active[:, :, None] & (obs.stock > 0)[:, None, :]
        margin = np.where(open_, obs.signals - obs.costs[:, None, :], -np.inf)
        asked = np.where(obs.active, obs.n_messages, np.iinfo(np.int64).max)
        fewest = asked.min(axis=1)[:, None, None]
        margin = np.where(asked[:, :, None] > fewest, -np.inf, margin)
        pair = np.argmax(margin.reshape(b, n * m), axis=1)  # an ended market: any pair
        to, product = pair // m, pair % m
        ar = np.arange(b)
        lo, hi = obs.price_range
        price = np.maximum(
            obs.signals[ar, to, product] - self.discount * (hi - lo), obs.costs[ar, product]
        )
        return SellerAction(to=to, product=product, price=cents(price, lo, hi))


def register_entries() -> None:
    """Make ``signal_seller`` a registry entry in this process, once: calling it again
    changes nothing. ``--agents examples/my_agents.py`` calls it in the command's process
    and, in a tournament on Ray, in each worker before it plays (as
    ``examples/byo_tournament.py`` has Ray do)."""
    from agents.registry import Entry, entries, register

    if "signal_seller" not in {e.name for e in entries()}:
        register(
            Entry(
                "signal_seller",
                "seller",
                "agent",
                SignalSeller,
                {"discount": 0.05},
                "Offers the open pair with the best signal margin, a little under the signal.",
            )
        )
