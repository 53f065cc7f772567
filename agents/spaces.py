"""Fixed-size observations and discrete actions for markets of one size (N buyers, M
products): what the Gymnasium and PettingZoo adapters hand a learner, and what a policy
exported from such a learner (``agents.rl.fixed.FixedSizeSeller``) reads back.

The project's own policies read the variable-size arrays of ``arena.observation``; an
off-the-shelf learner wants one flat vector and one ``Discrete`` choice, with an
``action_mask`` of the legal choices (the convention of RLlib's and SB3-contrib's
masking examples and of PettingZoo's classic games). Both encodings here are plain
numpy functions of a batch of observations, so one environment or one policy encodes B
markets at once exactly as it encodes each alone.

Seller (``SellerSpace``)
========================

Action ``a`` in ``Discrete(N * M * K)``: pair ``p = a // K`` (buyer ``i = p // M``,
product ``j = p % M``) and price level ``k = a % K``, where ``K = len(offsets) + 1``.
With the range ``[lo, hi]``, width ``w = hi - lo``, buyer i's public signal ``s_ij`` and
the cost ``c_j``, level ``k < K - 1`` offers ``max(s_ij + offsets[k] * w, c_j)``; the
last level offers buyer i's standing bid on j (rounded down to a cent, so it trades at
once). Prices are whole cents inside the range.

``action_mask`` (int8): 1 for every level of an open pair (buyer i still active, product
j in stock); the bid level only where buyer i has a standing bid on j. An action outside
the mask is still played: an offer to a buyer who has bought or left, or of a product
out of stock, is the violation the market counts (the turn is wasted and the seller's
reward pays the penalty); the bid level without a bid offers at level ``offsets == 0``
(or the nearest). When the market has ended the mask is all zeros.

``observation`` (float32, every entry in [-1, 1]; prices as ``(p - lo) / w``, counts
as fractions), in this order:

==============  =====  ============================================================
block           size   entries
==============  =====  ============================================================
market          3      turns used / T; units in stock / units at the start;
                       active buyers / N
products        3 M    per product: cost; stock / initial stock; in stock (0/1)
buyers          10 N   per buyer: active; bought; left; valid messages received / T;
                       disclosed as an agent; its last answer one-hot (reject,
                       accept, counter, invalid; all 0 before any); holds a standing
                       bid
pairs           9 N M  per (buyer, product), row-major: signal; signal - cost;
                       open (0/1); refused before (0/1); the lowest price it refused
                       (0 if never); a standing bid on it (0/1) and its price; the
                       last offer to the buyer was this product (0/1) and its price
==============  =====  ============================================================

The refusals come from a small memory of the market so far (``SellerMemory``), the
only state an encoder keeps; everything else is in the observation. The memory takes in
the observations of the seller's turns only: a look at the market between a message and
its answer (the message counted, the answer not yet in) encodes from a copy.

Actions are checked before they are played (``check_action`` for one market,
``check_actions`` for a batch): integers (not bools) in the space's range, one per
market, or a TypeError / ValueError that names the space and what was given.

Buyer (``BuyerSpace``)
======================

Action in ``Discrete(2 + M * K)``: 0 reject, 1 accept, ``2 + j * K + k``: counter with a
binding bid on product j at share ``shares[k]`` of the way from the seller's cost to its
own value (``c' + shares[k] * (v_j - c')``, ``c' = clip(c_j, lo, v_j)``, a cent at or
below). ``action_mask``: reject always; accept when there is an offer; a counter on a
product in stock. Outside the mask: accept without an offer or a bid on a sold-out
product is the buyer violation the market counts (a reject).

``observation`` (float32 in [-1, 1]): 7 entries (an offer is on the table; its price;
valid messages received / T; turns used / T; the first price it was offered (0 if
none); its own kind is agent; it is disclosed), then 8 per product (value; cost;
value - cost; in stock; offered now; value - offered price; holds its bid on it; the
bid's price).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.base import BuyerAction, SellerAction
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs, LastDecision, SellerObs
from arena.prices import cents
from arena.words import shown

SELLER_OFFSETS: tuple[float, ...] = (-0.25, -0.15, -0.1, -0.06, -0.03, 0.0, 0.03, 0.07)
"""Price levels around a buyer's signal, as fractions of the range width."""
BUYER_SHARES: tuple[float, ...] = (0.0, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0)
"""Bid levels: shares of the way from the seller's cost to the buyer's own value."""

_MARKET, _PRODUCT, _BUYER, _PAIR = 3, 3, 10, 9
_BUYER_GLOBAL, _BUYER_PRODUCT = 7, 8
_INVALID = int(LastDecision.INVALID)


def _integer(dtype: np.dtype) -> bool:
    """An integer dtype whose every value int64 holds (``Discrete.contains``'s rule); a
    bool is not an integer here."""
    return dtype.kind in "iu" and np.can_cast(dtype, np.int64)


def _given(action: Any) -> str:
    """What was given as an action, in one line: an array by its dtype and shape."""
    if isinstance(action, np.ndarray) and action.ndim:
        return f"an array of dtype {action.dtype} and shape {action.shape}"
    return " ".join(shown(action, 60).split())


def _in_range(a: np.ndarray, n: int, what: str) -> np.ndarray:
    """Integer actions ``a`` as int64, each in [0, n), else a ValueError."""
    out = (a < 0) | (a >= n)
    if out.any():
        raise ValueError(f"{what}: actions must lie in [0, {n}), got {a[out][0]}")
    return a.astype(np.int64)


def check_actions(action: Any, n: int, batch: int, side: str) -> np.ndarray:
    """``batch`` markets' actions as int64 (batch,): an array (or sequence) of exactly
    that shape, of an integer dtype (not bool), every entry in [0, n). Anything else
    raises a TypeError (not integers) or a ValueError (shape, range) that names the
    action space and what was given."""
    what = f"{side} actions (Discrete({n}), one per market)"
    try:
        a = np.asarray(action)
    except (TypeError, ValueError):  # a ragged sequence
        a = np.asarray(None)
    if not _integer(a.dtype):
        raise TypeError(f"{what}: actions are integers, got {_given(action)}")
    if a.shape != (batch,):
        raise ValueError(f"{what}: expected shape ({batch},), got {_given(action)}")
    return _in_range(a, n, what)


def check_action(action: Any, n: int, side: str) -> np.ndarray:
    """One market's action as int64 (1,): what ``Discrete(n).contains`` accepts (a
    Python int, a numpy integer scalar or a 0-d integer array, in [0, n)), except a
    bool. Anything else raises a TypeError (not an integer) or a ValueError (not one
    value, outside the range) that names the action space and what was given."""
    what = f"{side} action space Discrete({n})"
    if isinstance(action, int) and not isinstance(action, bool):
        if not 0 <= action < n:  # a Python int of any size, before numpy converts it
            raise ValueError(f"{what}: actions must lie in [0, {n}), got {shown(action, 60)}")
        return np.array([action], np.int64)
    if not isinstance(action, np.generic | np.ndarray):
        raise TypeError(f"{what}: an action is an integer, got {_given(action)}")
    if action.shape != ():
        raise ValueError(f"{what}: an action is one integer, got {_given(action)}")
    if not _integer(action.dtype):
        raise TypeError(f"{what}: an action is an integer, got {_given(action)}")
    return _in_range(np.reshape(action, 1), n, what)


def _norm(price: np.ndarray, lo: float, w: float) -> np.ndarray:
    """Prices as fractions of the range, 0 where there is none (nan), clipped to [-1, 1]."""
    x = (np.asarray(price, float) - lo) / w
    return np.clip(np.where(np.isfinite(x), x, 0.0), -1.0, 1.0)


@dataclass
class SellerMemory:
    """The lowest price each buyer refused for each product (+inf: none), per batch row:
    what the seller's observation needs from earlier turns. Taking in the same
    observation twice changes nothing. Only observations of the seller's turns may be
    taken in: one between a message and its answer marks the message as answered, so
    its refusal would be missed (``copy`` serves a look at such a moment)."""

    caps: np.ndarray  # (B, N, M)
    seen: np.ndarray  # (B, N) answers already taken in

    @classmethod
    def empty(cls, b: int, n: int, m: int) -> SellerMemory:
        return cls(np.full((b, n, m), np.inf), np.zeros((b, n), np.int64))

    def restart(self, rows: np.ndarray) -> None:
        self.caps[rows] = np.inf
        self.seen[rows] = 0

    def copy(self) -> SellerMemory:
        """An independent copy: encoding from it leaves this memory as it is."""
        return SellerMemory(self.caps.copy(), self.seen.copy())

    def update(self, obs: SellerObs) -> None:
        new = obs.n_messages > self.seen
        self.seen = np.maximum(self.seen, obs.n_messages)
        ld = obs.last_decision
        refused = new & ((ld == REJECT) | (ld == COUNTER) | (ld == _INVALID))
        b, i = np.nonzero(refused & (obs.last_product >= 0))
        if b.size:
            j = obs.last_product[b, i]
            self.caps[b, i, j] = np.minimum(self.caps[b, i, j], obs.last_price[b, i])


@dataclass(frozen=True)
class SellerSpace:
    """The seller's encoding for markets of ``buyers`` x ``products`` (module docstring)."""

    buyers: int
    products: int
    offsets: tuple[float, ...] = SELLER_OFFSETS

    def __post_init__(self) -> None:
        if self.buyers < 1 or self.products < 1:
            raise ValueError("a market has at least one buyer and one product")
        object.__setattr__(self, "offsets", tuple(float(x) for x in self.offsets))
        if not self.offsets:
            raise ValueError("offsets: at least one price level")

    @property
    def levels(self) -> int:
        """K: the offsets and the standing-bid level."""
        return len(self.offsets) + 1

    @property
    def num_actions(self) -> int:
        return self.buyers * self.products * self.levels

    @property
    def size(self) -> int:
        """Length of the observation vector."""
        n, m = self.buyers, self.products
        return _MARKET + _PRODUCT * m + _BUYER * n + _PAIR * n * m

    def memory(self, batch_size: int) -> SellerMemory:
        return SellerMemory.empty(batch_size, self.buyers, self.products)

    def check(self, obs: SellerObs) -> None:
        if (obs.num_buyers, obs.num_products) != (self.buyers, self.products):
            raise ValueError(
                f"this encoding is for markets of {self.buyers} buyers and {self.products} "
                f"products; the market has {obs.num_buyers} and {obs.num_products}"
            )

    def _bid(self, obs: SellerObs) -> tuple[np.ndarray, np.ndarray]:
        """(B, N, M) whether buyer i holds a standing bid on j, and its price (nan: none)."""
        on = obs.counter_product[:, :, None] == np.arange(self.products)
        return on, np.where(on, obs.counter_price[:, :, None], np.nan)

    def mask(self, obs: SellerObs) -> np.ndarray:
        """(B, N * M * K) int8: the legal actions (module docstring)."""
        open_ = obs.active[:, :, None] & (obs.stock > 0)[:, None, :] & ~obs.done[:, None, None]
        on, _ = self._bid(obs)
        m = np.repeat(open_[..., None], self.levels, axis=3)
        m[..., -1] &= on
        return m.reshape(obs.batch_size, -1).astype(np.int8)

    def encode(self, obs: SellerObs, memory: SellerMemory) -> np.ndarray:
        """(B, size) float32, after taking the observation into ``memory``."""
        self.check(obs)
        memory.update(obs)
        b, n, m = obs.batch_size, self.buyers, self.products
        lo, hi = obs.price_range
        w = hi - lo
        t = float(obs.turns)
        inv = obs.inventory.astype(float)
        market = np.stack(
            [
                obs.turn / t,
                obs.stock.sum(axis=1) / inv.sum(axis=1),
                obs.active.sum(axis=1) / n,
            ],
            axis=1,
        )
        products = np.stack(
            [_norm(obs.costs, lo, w), obs.stock / inv, obs.stock > 0], axis=2
        ).reshape(b, -1)
        ld = obs.last_decision
        buyers = np.stack(
            [
                obs.active,
                obs.bought >= 0,
                obs.left,
                np.minimum(obs.n_messages / t, 1.0),
                obs.disclosed,
                ld == REJECT,
                ld == ACCEPT,
                ld == COUNTER,
                ld == _INVALID,
                obs.counter_product >= 0,
            ],
            axis=2,
        ).reshape(b, -1)
        on, bid = self._bid(obs)
        refused = np.isfinite(memory.caps)
        last = obs.last_product[:, :, None] == np.arange(m)
        costs = obs.costs[:, None, :]
        pairs = np.stack(
            [
                _norm(obs.signals, lo, w),
                np.clip((obs.signals - costs) / w, -1.0, 1.0),
                obs.active[:, :, None] & (obs.stock > 0)[:, None, :],
                refused,
                _norm(np.where(refused, memory.caps, np.nan), lo, w),
                on,
                _norm(bid, lo, w),
                last,
                _norm(np.where(last, obs.last_price[:, :, None], np.nan), lo, w),
            ],
            axis=3,
        ).reshape(b, -1)
        x = np.concatenate([market, products, buyers, pairs], axis=1)
        return np.clip(x, -1.0, 1.0).astype(np.float32)

    def decode(self, obs: SellerObs, action: np.ndarray) -> SellerAction:
        """The message of each market's action (B,) (module docstring); actions are
        checked first (``check_actions``)."""
        self.check(obs)
        a = check_actions(action, self.num_actions, obs.batch_size, "seller")
        k_all = self.levels
        pair, level = a // k_all, a % k_all
        to, product = pair // self.products, pair % self.products
        ar = np.arange(obs.batch_size)
        lo, hi = obs.price_range
        offsets = np.asarray(self.offsets)
        # The bid level without a bid plays the offset nearest 0.
        fallback = int(np.argmin(np.abs(offsets)))
        base = np.where(level < k_all - 1, level, fallback)
        s = obs.signals[ar, to, product]
        c = obs.costs[ar, product]
        price = cents(np.maximum(s + offsets[base] * (hi - lo), c), lo, hi)
        on = (obs.counter_product[ar, to] == product) & (level == k_all - 1)
        if on.any():
            bid = cents(obs.counter_price[ar, to], lo, hi, down=True)
            price = np.where(on, bid, price)
        return SellerAction(to=to, product=product, price=price)


@dataclass(frozen=True)
class BuyerSpace:
    """The buyer's encoding for markets of ``products`` products (module docstring)."""

    products: int
    shares: tuple[float, ...] = BUYER_SHARES

    def __post_init__(self) -> None:
        if self.products < 1:
            raise ValueError("a market has at least one product")
        shares = tuple(float(x) for x in self.shares)
        if not shares or any(not 0.0 <= x <= 1.0 for x in shares):
            raise ValueError("shares: at least one, each in [0, 1]")
        object.__setattr__(self, "shares", shares)

    @property
    def levels(self) -> int:
        """K: the bid levels."""
        return len(self.shares)

    @property
    def num_actions(self) -> int:
        return 2 + self.products * self.levels

    @property
    def size(self) -> int:
        return _BUYER_GLOBAL + _BUYER_PRODUCT * self.products

    def check(self, obs: BuyerObs) -> None:
        if obs.values.shape[1] != self.products:
            raise ValueError(
                f"this encoding is for markets of {self.products} products; "
                f"the market has {obs.values.shape[1]}"
            )

    def mask(self, obs: BuyerObs) -> np.ndarray:
        """(B, 2 + M * K) int8: the legal answers of the asked buyers."""
        b = obs.batch_size
        out = np.zeros((b, self.num_actions), np.int8)
        out[:, 0] = 1
        out[:, 1] = obs.needs_answer & (obs.offer_product >= 0)
        counter = (obs.stock > 0) & obs.needs_answer[:, None]
        out[:, 2:] = np.repeat(counter, self.levels, axis=1)
        return out

    def encode(self, obs: BuyerObs) -> np.ndarray:
        """(B, size) float32."""
        self.check(obs)
        b, m = obs.values.shape
        lo, hi = obs.price_range
        w = hi - lo
        t = float(obs.turns)
        has_offer = obs.offer_product >= 0
        head = np.stack(
            [
                has_offer,
                _norm(obs.offer_price, lo, w),
                np.minimum(obs.n_messages / t, 1.0),
                np.minimum(obs.turn / t, 1.0),
                _norm(obs.first_price, lo, w),
                obs.is_agent,
                obs.disclosed,
            ],
            axis=1,
        )
        offered = obs.offer_product[:, None] == np.arange(m)
        own = obs.counter_product[:, None] == np.arange(m)
        per = np.stack(
            [
                _norm(obs.values, lo, w),
                _norm(obs.costs, lo, w),
                np.clip((obs.values - obs.costs) / w, -1.0, 1.0),
                obs.stock > 0,
                offered,
                np.where(offered, np.clip((obs.values - obs.offer_price[:, None]) / w, -1, 1), 0),
                own,
                _norm(np.where(own, obs.counter_price[:, None], np.nan), lo, w),
            ],
            axis=2,
        ).reshape(b, -1)
        return np.clip(np.concatenate([head, per], axis=1), -1.0, 1.0).astype(np.float32)

    def decode(self, obs: BuyerObs, action: np.ndarray) -> BuyerAction:
        """The answer of each market's action (B,); actions are checked first
        (``check_actions``)."""
        self.check(obs)
        a = check_actions(action, self.num_actions, obs.batch_size, "buyer")
        counter = a >= 2
        c = np.maximum(a - 2, 0)
        product, level = c // self.levels, c % self.levels
        ar = np.arange(obs.batch_size)
        lo, hi = obs.price_range
        v = obs.values[ar, product]
        base = np.clip(obs.costs[ar, product], lo, v)
        bid = cents(base + np.asarray(self.shares)[level] * (v - base), lo, hi, down=True)
        decision = np.where(counter, COUNTER, np.where(a == 1, ACCEPT, REJECT)).astype(np.int64)
        return BuyerAction(
            decision=decision,
            product=np.where(counter, product, 0).astype(np.int64),
            price=np.where(counter, bid, lo),
        )


__all__ = [
    "BUYER_SHARES",
    "SELLER_OFFSETS",
    "BuyerSpace",
    "SellerMemory",
    "SellerSpace",
    "check_action",
    "check_actions",
]
