"""Scripted buyers.

Every buyer here answers a whole batch in one vectorized call and is batch-invariant:
row b's answer depends only on row b of the observation (and, for the noisy buyer, on
``arena.noise`` draws keyed by that row's market key, turn and buyer). None keeps state
between calls; what they condition on (the first price offered, how many messages
arrived, the standing bid, the turn) is in ``BuyerObs`` already.

Notation used in the docstrings, per answering buyer: ``[lo, hi]`` the price range and
``w = hi - lo`` its width; ``j`` the product offered at price ``p``; ``v = values[j]``;
``c = costs[j]``; ``k = n_messages`` (this message included, so ``k >= 1``); ``t = turn``
(this message included) out of ``T = turns``; ``P = patience`` (0: never leaves).
Shares and margins are fractions of ``w`` or of a surplus, never absolute amounts, so a
buyer means the same thing on any price scale.

Every answer is valid by construction: accept only when there is an offer; counter only
on an in-stock product, at a price inside ``[lo, hi]`` rounded down to whole cents
(a bid never rises above the amount the rule asked for by rounding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.base import AGENT, HUMAN, BuyerAction, BuyerPolicy, offered_value
from arena.noise import uniform
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs
from arena.prices import cents

# Keys of the noise streams a stochastic buyer draws from (the last key of
# ``arena.noise.uniform``), so that each decision has its own independent number.
_ACCEPT_STREAM, _COUNTER_STREAM, _BID_STREAM = 0, 1, 2


@dataclass
class Truthful(BuyerPolicy):
    """Accepts any offer it values at or above the price; never counters."""

    def act(self, obs: BuyerObs) -> BuyerAction:
        with np.errstate(invalid="ignore"):
            yes = offered_value(obs) >= obs.offer_price
        decision = np.where(yes, ACCEPT, REJECT)
        return BuyerAction(decision, np.zeros_like(decision), np.zeros(obs.batch_size))


@dataclass
class Threshold(BuyerPolicy):
    """Accepts iff there is an offer and ``v - p >= margin * w`` (a required surplus);
    otherwise rejects. Never counters.

    Default ``margin = 0.1``: it wants at least a tenth of the price range as surplus.
    """

    kind = HUMAN
    margin: float = 0.1

    def __post_init__(self) -> None:
        _check_share("margin", self.margin)

    def act(self, obs: BuyerObs) -> BuyerAction:
        lo, hi = obs.price_range
        need = self.margin * (hi - lo)
        with np.errstate(invalid="ignore"):
            # The tolerance keeps a surplus of exactly the margin (10.00 of 100 at 0.1)
            # on the accepting side despite binary floating point.
            yes = offered_value(obs) - obs.offer_price >= need - _tol(obs)
        return _answer(obs, yes, np.zeros(obs.batch_size, bool), _zeros(obs), _lo(obs))


@dataclass
class Haggler(BuyerPolicy):
    """A person who haggles: holds out for a share of the surplus at first, counters below
    the offer with a binding bid, and concedes linearly as messages accumulate.

    With ``u = v - lo`` (the most surplus product ``j`` can give, since no price is below
    ``lo``) and concession ``g = min(1, (k - 1) / rounds)``:

    * accept iff there is an offer and ``v - p >= hold * (1 - g) * u``: at the first
      message it wants a ``hold`` share of ``u``, and after ``rounds`` more messages any
      offer it values at or above the price;
    * otherwise counter with a bid that keeps a share ``shade - (shade - hold) * g`` of
      ``u``: ``bid = v - (shade - (shade - hold) * g) * u``, so the bid rises from
      ``v - shade * u`` toward ``v - hold * u`` as messages accumulate. The bid names the
      offered product, or on a talk turn (no offer) the in-stock product it values most.

    Because ``shade >= hold``, the bid never exceeds what it would accept at the next
    message, so a standing bid never makes it trade at a price it would refuse; and the
    bid always lies below the rejected offer.

    Against a posted-price seller its counters never trade (the price never comes down),
    but refusing thin-surplus deals at the first message leaves the scarce units to the
    buyers who value them most, so buyers as a group keep more surplus than ``Truthful``.

    Kind ``human``: this is the bargaining of a person, with no view of the turn budget.
    Defaults: ``hold = 0.25``, ``shade = 0.5``, ``rounds = 2``.
    """

    kind = HUMAN
    hold: float = 0.25
    shade: float = 0.5
    rounds: int = 2

    def __post_init__(self) -> None:
        _check_share("hold", self.hold)
        _check_share("shade", self.shade)
        if self.shade < self.hold:
            raise ValueError(f"shade must be >= hold, got shade={self.shade}, hold={self.hold}")
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"rounds must be an integer >= 1, got {self.rounds!r}")

    def concession(self, obs: BuyerObs) -> np.ndarray:
        """(B,) ``g = min(1, (k - 1) / rounds)``, 0 at the first message."""
        return np.clip((obs.n_messages - 1) / self.rounds, 0.0, 1.0)

    def act(self, obs: BuyerObs) -> BuyerAction:
        lo, _ = obs.price_range
        g = self.concession(obs)
        v = offered_value(obs)
        with np.errstate(invalid="ignore"):
            yes = v - obs.offer_price >= self.hold * (1.0 - g) * (v - lo) - _tol(obs)
        product, ok = _offered_or_best(obs, obs.values)
        vj = _take(obs.values, product)
        bid = vj - (self.shade - (self.shade - self.hold) * g) * (vj - lo)
        return _answer(obs, yes, ok, product, bid)


@dataclass
class NoisyHuman(BuyerPolicy):
    """A simulated person: logit acceptance with anchoring and impatience, and the odd
    counter.

    Reference price (anchoring on the first price it was ever offered, ``f``)::

        ref = (1 - anchor) * v + anchor * f

    so a high first price makes later prices look cheaper and a low one makes them look
    dear (on the first offer ``f = p`` and ``ref - p = (1 - anchor) * (v - p)``).
    Acceptance probability of an offer::

        P(accept) = sigmoid((ref - p) / (temperature * w)
                            + impatience * (k - 1)
                            + last_chance * [P > 0 and k >= P])

    Impatience raises the log-odds by ``impatience`` with each message, and by
    ``last_chance`` more on the message after which it would leave. It accepts iff
    ``uniform(seed, key, t, buyer, 0) < P(accept)``; without an offer it never accepts.
    Being noisy, it can take a deal above its value (surplus < 0) now and then.

    When it does not accept, it counters iff ``uniform(seed, key, t, buyer, 1) <
    counter_rate``, with a bid ``v - s * (v - lo)`` that keeps a share ``s = shade * (0.5 +
    uniform(seed, key, t, buyer, 2))`` of the most surplus the product can give (``shade``
    jittered by +-50%), on the offered product, or on a talk turn the in-stock product it
    values most; otherwise it rejects.

    Defaults: ``anchor = 0.3``, ``temperature = 0.05`` (5% of the range moves the
    log-odds by 1), ``impatience = 0.5``, ``last_chance = 1.0``, ``counter_rate = 0.2``,
    ``shade = 0.3``, ``seed = 0``.
    """

    kind = HUMAN
    anchor: float = 0.3
    temperature: float = 0.05
    impatience: float = 0.5
    last_chance: float = 1.0
    counter_rate: float = 0.2
    shade: float = 0.3
    seed: int = 0

    def __post_init__(self) -> None:
        _check_share("anchor", self.anchor)
        if not np.isfinite(self.temperature) or self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")
        for name in ("impatience", "last_chance"):
            x = getattr(self, name)
            if not np.isfinite(x) or x < 0:
                raise ValueError(f"{name} must be >= 0, got {x!r}")
        _check_share("counter_rate", self.counter_rate)
        _check_share("shade", self.shade)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")

    def reference_price(self, obs: BuyerObs) -> np.ndarray:
        """(B,) ``ref = (1 - anchor) * v + anchor * f`` (nan without an offer)."""
        p = obs.offer_price
        # The engine records the first price before asking, so f is known whenever there
        # is an offer; the fallback only keeps talk turns free of nan arithmetic surprises.
        f = np.where(np.isnan(obs.first_price), p, obs.first_price)
        return (1.0 - self.anchor) * offered_value(obs) + self.anchor * f

    def accept_probability(self, obs: BuyerObs) -> np.ndarray:
        """(B,) P(accept) by the formula in the class docstring; 0 without an offer."""
        lo, hi = obs.price_range
        k = obs.n_messages
        last = (obs.patience > 0) & (k >= obs.patience)
        logit = (
            (self.reference_price(obs) - obs.offer_price) / (self.temperature * (hi - lo))
            + self.impatience * (k - 1)
            + self.last_chance * last
        )
        prob = 0.5 * (1.0 + np.tanh(0.5 * logit))  # the sigmoid, without exp overflow
        return np.where(obs.offer_product >= 0, np.nan_to_num(prob), 0.0)

    def act(self, obs: BuyerObs) -> BuyerAction:
        lo, _ = obs.price_range
        keys = (self.seed, obs.key, obs.turn, obs.buyer)
        yes = uniform(*keys, _ACCEPT_STREAM) < self.accept_probability(obs)
        wants = uniform(*keys, _COUNTER_STREAM) < self.counter_rate
        product, ok = _offered_or_best(obs, obs.values)
        vj = _take(obs.values, product)
        share = self.shade * (0.5 + uniform(*keys, _BID_STREAM))
        # The jitter can push the share past 1; a bid below lo would be clipped up anyway.
        bid = vj - np.minimum(share, 1.0) * (vj - lo)
        return _answer(obs, yes, ok & wants, product, bid)


@dataclass
class StrategicAgent(BuyerPolicy):
    """An agent that reasons from the public catalog: it hopes to pay about cost, holds
    out early, bids low, and concedes as its time runs out.

    Per product ``j``, its hoped-for price is ``floor_j = clip(c_j + margin * w, lo,
    v_j)`` (the seller's cost plus a small margin, never above its value) and its
    hoped-for gain is ``gain_j = v_j - floor_j``. Its progress is the larger of the
    share of the turn budget used and, under patience, the share of its own messages
    used: ``pi = max(t / T, k / P if P > 0 else 0)``, clipped to ``[0, 1]``; ``pi = 1``
    exactly on the seller's last turn and on the message after which it would leave.

    * Reservation price ``r_j = v_j - target * (1 - pi) * gain_j``: early it requires a
      ``target`` share of the hoped-for gain as surplus; on its last chance it takes any
      offer it values at or above the price. It accepts iff there is an offer and
      ``p <= r_j``.
    * Otherwise it counters at ``bid_j = floor_j + pi * (r_j - floor_j)``: near cost at
      first, rising toward its reservation price. It bids on the in-stock product that
      would leave it the most surplus if the seller took the bid (``v_j - bid_j``; lowest
      index on ties), not necessarily the one offered.

    Since ``bid_j <= r_j`` and both rise with ``pi``, a standing bid never trades at a
    price it would refuse when asked.

    Kind ``agent``. Defaults: ``target = 0.5``, ``margin = 0.05`` (5% of the range).
    """

    kind = AGENT
    target: float = 0.5
    margin: float = 0.05

    def __post_init__(self) -> None:
        _check_share("target", self.target)
        _check_share("margin", self.margin)

    def progress(self, obs: BuyerObs) -> np.ndarray:
        """(B,) ``pi = max(t / T, k / P)`` clipped to ``[0, 1]`` (``k / P`` only when P > 0)."""
        pi = obs.turn / obs.turns
        if obs.patience > 0:
            pi = np.maximum(pi, obs.n_messages / obs.patience)
        return np.clip(pi, 0.0, 1.0)

    def reservation(self, obs: BuyerObs) -> tuple[np.ndarray, np.ndarray]:
        """(B, M) hoped-for prices ``floor_j`` and (B, M) reservation prices ``r_j``."""
        lo, hi = obs.price_range
        v = obs.values
        floor = np.clip(np.minimum(obs.costs + self.margin * (hi - lo), v), lo, None)
        pi = self.progress(obs)[:, None]
        return floor, v - self.target * (1.0 - pi) * (v - floor)

    def act(self, obs: BuyerObs) -> BuyerAction:
        floor, r = self.reservation(obs)
        pi = self.progress(obs)[:, None]
        with np.errstate(invalid="ignore"):
            yes = obs.offer_price <= _take(r, obs.offer_product) + _tol(obs)
        bids = floor + pi * (r - floor)
        in_stock = obs.stock > 0
        product = np.argmax(np.where(in_stock, obs.values - bids, -np.inf), axis=1)
        ok = in_stock.any(axis=1)
        return _answer(obs, yes, ok, product, _take(bids, product))


# ---------------------------------------------------------------------- helpers

# Relative tolerance (of the range width) on surplus comparisons, so that a surplus
# that equals the requirement in cents is not lost to floating-point error.
_TOL = 1e-9


def _tol(obs: BuyerObs) -> float:
    lo, hi = obs.price_range
    return _TOL * (hi - lo)


def _check_share(name: str, x: float) -> None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")


def _zeros(obs: BuyerObs) -> np.ndarray:
    return np.zeros(obs.batch_size, np.int64)


def _lo(obs: BuyerObs) -> np.ndarray:
    return np.full(obs.batch_size, float(obs.price_range[0]))


def _take(table: np.ndarray, product: np.ndarray) -> np.ndarray:
    """(B,) ``table[b, product[b]]``; rows with product -1 read column 0 (callers mask them)."""
    return np.take_along_axis(table, np.maximum(product, 0)[:, None], axis=1)[:, 0]


def _offered_or_best(obs: BuyerObs, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B,) the product to bid on and whether it is in stock: the offered product, or on a
    talk turn the in-stock product with the highest ``score`` (lowest index on ties)."""
    in_stock = obs.stock > 0
    best = np.argmax(np.where(in_stock, score, -np.inf), axis=1)
    product = np.where(obs.offer_product >= 0, obs.offer_product, best)
    return product, _take(in_stock, product)


def _answer(
    obs: BuyerObs,
    accept: np.ndarray,
    counter: np.ndarray,
    product: np.ndarray,
    bid: np.ndarray,
) -> BuyerAction:
    """Assemble a valid action: accept only with an offer; counter (where not accepting)
    only where the caller found an in-stock product; every entry finite."""
    lo, hi = obs.price_range
    has_offer = obs.offer_product >= 0
    accept = np.asarray(accept, bool) & has_offer
    counter = np.asarray(counter, bool) & ~accept
    decision = np.select([accept, counter], [ACCEPT, COUNTER], REJECT).astype(np.int64)
    product = np.where(counter, product, 0).astype(np.int64)
    price = np.where(counter, cents(bid, lo, hi, down=True), lo)
    return BuyerAction(decision, product, price)
