"""What each side sees, with a leading batch axis B (B = 1 for one market).

The seller sees public information only: the catalog, the price range, the
turn budget, each buyer's public profile (``signals``), what happened in its own
conversations, and, where the disclosure rule says so, which buyers are agents.
It never sees ``values`` or an undisclosed ``is_agent``. A buyer sees its own
values, the offer in front of it and its own history with the seller.

Both the scalar reference market and the batched engine build these same
types, so one policy drives either.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

import numpy as np

from arena.rules import ACCEPT, COUNTER, REJECT, LastDecision

if TYPE_CHECKING:
    from arena.dialogue import Dialogue


# The codes of a buyer's answer are the rules' (arena.rules), named here too: what an
# observation records and what a batched action says.
__all__ = ["ACCEPT", "COUNTER", "REJECT", "BuyerObs", "LastDecision", "SellerObs", "as_batch",
           "read_only", "take_rows"]  # fmt: skip


@dataclass(frozen=True, eq=False)
class SellerObs:
    """The seller's view of B markets. Arrays may be views of engine state: do not write."""

    turns: int  # T, the total message budget
    price_range: tuple[float, float]
    patience: int  # 0: buyers never leave
    turn: np.ndarray  # (B,) messages already sent
    done: np.ndarray  # (B,) the market has ended
    costs: np.ndarray  # (B, M)
    inventory: np.ndarray  # (B, M) units at the start
    stock: np.ndarray  # (B, M) units left
    signals: np.ndarray  # (B, N, M) public noisy profile of each buyer's values
    active: np.ndarray  # (B, N) has neither bought nor left
    bought: np.ndarray  # (B, N) product bought, -1 if none
    left: np.ndarray  # (B, N) left after running out of patience
    n_messages: np.ndarray  # (B, N) valid seller messages received so far
    last_product: np.ndarray  # (B, N) product of the last valid message, -1: none/no offer
    last_price: np.ndarray  # (B, N) price of the last valid offer, nan if none
    last_decision: np.ndarray  # (B, N) LastDecision code
    counter_product: np.ndarray  # (B, N) standing binding bid, -1 if none
    counter_price: np.ndarray  # (B, N) nan if none
    disclosed: np.ndarray  # (B, N) the seller is told this buyer is an agent
    key: np.ndarray  # (B,) uint64 market key, for the policy's counter-based noise
    dialogue: Dialogue | None = None  # the messages so far, where the market keeps them

    def text(self, b: int) -> str:
        """Market ``b`` as the seller may see it, as text (``arena.text.seller_view``)."""
        from arena.text import seller_view

        return seller_view(self, b)

    @property
    def batch_size(self) -> int:
        return self.turn.shape[0]

    @property
    def num_buyers(self) -> int:
        return self.signals.shape[1]

    @property
    def num_products(self) -> int:
        return self.signals.shape[2]

    @property
    def turns_left(self) -> np.ndarray:
        return self.turns - self.turn


@dataclass(frozen=True, eq=False)
class BuyerObs:
    """The answering buyer's view, one buyer per market; rows with ``needs_answer`` False
    are padding (their answers are ignored)."""

    turns: int
    price_range: tuple[float, float]
    patience: int
    needs_answer: np.ndarray  # (B,)
    buyer: np.ndarray  # (B,) index of the answering buyer (any valid index in padding rows)
    values: np.ndarray  # (B, M) its own private values
    costs: np.ndarray  # (B, M) public catalog
    stock: np.ndarray  # (B, M)
    offer_product: np.ndarray  # (B,) product offered, -1: a talk turn without an offer
    offer_price: np.ndarray  # (B,) nan without an offer
    n_messages: np.ndarray  # (B,) valid seller messages received, this one included
    first_price: np.ndarray  # (B,) the first price this buyer was ever offered (anchoring)
    counter_product: np.ndarray  # (B,) its own standing bid, -1 if none
    counter_price: np.ndarray  # (B,)
    is_agent: np.ndarray  # (B,) its own kind
    disclosed: np.ndarray  # (B,) whether the seller has been told it is an agent
    turn: np.ndarray  # (B,) messages the seller has sent, this one included
    key: np.ndarray  # (B,) uint64 market key
    num_buyers: int  # N, the number of buyers in each market
    dialogue: Dialogue | None = None  # the messages so far, where the market keeps them

    def text(self, b: int) -> str:
        """Market ``b`` as its answering buyer may see it (``arena.text.buyer_view``)."""
        from arena.text import buyer_view

        return buyer_view(self, b)

    @property
    def batch_size(self) -> int:
        return self.needs_answer.shape[0]


def as_batch(x: np.ndarray | float | int, dtype: type | None = None) -> np.ndarray:
    """A scalar or per-market value as a length-1 batch (used by the scalar market)."""
    return np.asarray([x], dtype=dtype)


def read_only(obs: SellerObs | BuyerObs) -> SellerObs | BuyerObs:
    """``obs`` with every array a read-only view (the same object if all are): what a
    policy is shown may be the market's own state, so a write raises in the policy."""
    changes = {}
    for f in fields(obs):
        x = getattr(obs, f.name)
        if isinstance(x, np.ndarray) and x.flags.writeable:
            view = x.view()
            view.flags.writeable = False
            changes[f.name] = view
    return replace(obs, **changes) if changes else obs


def take_rows(obs: SellerObs | BuyerObs, rows: np.ndarray | slice) -> SellerObs | BuyerObs:
    """The observation of the markets ``rows`` (indices, or a slice: then the arrays are
    views) only: every per-market array sliced along the batch axis, the config-wide fields
    kept. A batch-invariant policy decides a sub-batch exactly as it decides those rows of
    the whole."""
    b = obs.batch_size
    out = {}
    for f in fields(obs):
        x = getattr(obs, f.name)
        if f.name == "dialogue" and x is not None:
            out[f.name] = x.take(rows)
        else:
            out[f.name] = x[rows] if isinstance(x, np.ndarray) and x.ndim and x.shape[0] == b else x
    return type(obs)(**out)
