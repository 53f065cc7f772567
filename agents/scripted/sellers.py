"""Scripted sellers.

Every seller here decides one message per market for a whole batch in one vectorized
call, and is batch-invariant: row b's message depends only on row b of the observation,
on what the policy remembers about row b (arrays indexed by batch row, cleared in
``reset``), and on ``arena.noise`` draws keyed by (policy seed, market key, turn, ...).
Deciding B markets at once therefore equals deciding each alone, in any order.

Notation used in the docstrings, per market: ``[lo, hi]`` the price range and
``w = hi - lo`` its width; ``s_ij`` buyer i's public signal of its value for product j;
``c_j`` the unit cost; ``k_i`` the valid messages buyer i has received so far
(``n_messages``); ``u_ij`` the lowest price buyer i has *refused* for product j (a
reject, a counter or an invalid answer to an offer of j at that price), +inf if none.
A "standing bid" is a buyer's last counter (j', b'): offering j' at a price <= b'
trades at once at the offer's price.

Validity: on a live market every seller here targets an active buyer, offers an
in-stock product (or, for the oracle's leftover turns, no product) and a price inside
``[lo, hi]``, in whole cents wherever the range holds one (the oracle prices at exact
values instead). Rows of markets that have ended get a finite, ignored message and
never change the state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr, ndtri

from agents.base import SellerAction, SellerPolicy
from agents.rows import map_rows
from agents.scripted.matching import PlannedMatches
from arena.generator import MarketBatch
from arena.noise import uniform
from arena.observation import COUNTER, REJECT, LastDecision, SellerObs
from arena.oracle import optimal_assignment
from arena.prices import cents

_ROWS_PER_THREAD = 65536
"""``GreedyMatcher.pair_table`` gives each thread at least this many (pair, grid price)
options."""

__all__ = [
    "AssignmentMatcher",
    "DescendingOffers",
    "DisclosureAware",
    "GreedyMatcher",
    "OracleSeller",
    "PostedPrice",
    "PricingBandit",
    "RandomTarget",
    "next_buyer",
]

_INVALID = int(LastDecision.INVALID)
_CENT = 0.01


def next_buyer(obs: SellerObs) -> np.ndarray:
    """(B,) the active buyer contacted least so far (lowest index on ties): round robin."""
    n = obs.num_buyers
    load = np.where(obs.active, obs.n_messages * n + np.arange(n), np.iinfo(np.int64).max)
    return np.argmin(load, axis=1)


# ---------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------


def _price(price: np.ndarray, obs: SellerObs) -> np.ndarray:
    """Whole cents inside [lo, hi], finite on every row (nan, from rows of ended markets,
    becomes ``lo``)."""
    lo, hi = obs.price_range
    return cents(price, lo, hi)


def _at_most(bid: np.ndarray, obs: SellerObs) -> np.ndarray:
    """The price in whole cents closest to ``bid`` from below, so that offering it meets a
    standing bid (rounding to the nearest cent could land a cent above and miss it)."""
    p = _price(bid, obs)
    p = np.where(p > bid, _price(bid - 0.5 * _CENT, obs), p)
    return np.where(p > bid, bid, p)


def _open_pairs(obs: SellerObs) -> np.ndarray:
    """(B, N, M) pairs a valid offer can name: an active buyer and an in-stock product."""
    return obs.active[:, :, None] & (obs.stock > 0)[:, None, :]


def _argmax_pair(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(buyer, product) of the highest score per market (first in row-major order on ties)."""
    b, n, m = score.shape
    flat = np.argmax(score.reshape(b, n * m), axis=1)
    return flat // m, flat % m


def _least_contacted(obs: SellerObs) -> np.ndarray:
    """(B, N) the active buyers that have received the fewest messages."""
    load = np.where(obs.active, obs.n_messages, np.iinfo(np.int64).max)
    return obs.active & (load == load.min(axis=1, keepdims=True))


def _note_refusals(caps: np.ndarray, obs: SellerObs) -> None:
    """Lower ``caps[b, i, j]`` (the u_ij of the module docstring) to the price of buyer i's
    last answered offer when that answer was not an accept.

    Each answer stays in the observation until the next message to that buyer, and the
    policy is asked before that message, so seeing only the last answer misses nothing;
    taking the minimum makes the update idempotent, so ended rows can repeat it freely.
    """
    ld = obs.last_decision
    refused = ((ld == REJECT) | (ld == COUNTER) | (ld == _INVALID)) & (obs.last_product >= 0)
    b, i = np.nonzero(refused)
    j = obs.last_product[b, i]
    caps[b, i, j] = np.minimum(caps[b, i, j], obs.last_price[b, i])


def _standing_bids(
    obs: SellerObs, min_markup: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per buyer (B, N): the bid's product, the offer that meets it (the bid rounded down to
    a cent), its margin, and whether the bid is usable: the buyer is active, the product
    in stock and the offer at least ``c_j (1 + min_markup)``."""
    lo, _ = obs.price_range
    has = obs.active & (obs.counter_product >= 0)
    j = np.maximum(obs.counter_product, 0)
    cost = np.take_along_axis(obs.costs, j, axis=1)
    in_stock = np.take_along_axis(obs.stock, j, axis=1) > 0
    price = _at_most(np.where(has, obs.counter_price, lo), obs)
    usable = has & in_stock & (price >= cost * (1.0 + min_markup))
    return j, price, price - cost, usable


def _best_signal_product(obs: SellerObs, to: np.ndarray) -> np.ndarray:
    """(B,) the in-stock product with the largest signalled margin s_ij - c_j for buyer ``to``."""
    s = obs.signals[np.arange(obs.batch_size), to]
    return np.argmax(np.where(obs.stock > 0, s - obs.costs, -np.inf), axis=1)


def _fresh_caps(obs: SellerObs) -> np.ndarray:
    return np.full((obs.batch_size, obs.num_buyers, obs.num_products), np.inf)


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


# ---------------------------------------------------------------------------
# Stateless sellers
# ---------------------------------------------------------------------------


@dataclass
class PostedPrice(SellerPolicy):
    """Posts price = cost * (1 + markup) (clipped to the range) for every product, and offers
    each buyer in turn the in-stock product with the largest signalled surplus at that price."""

    markup: float = 0.5

    def act(self, obs: SellerObs) -> SellerAction:
        price = _price(obs.costs * (1.0 + self.markup), obs)  # (B, M)
        to = next_buyer(obs)
        ar = np.arange(obs.batch_size)
        signal = obs.signals[ar, to]  # (B, M)
        score = np.where(obs.stock > 0, signal - price, -np.inf)
        product = np.argmax(score, axis=1)
        return SellerAction(to=to, product=product, price=price[ar, product])


@dataclass
class RandomTarget(SellerPolicy):
    """The matching baseline: ignores the signals.

    Rule: each turn, offer a uniformly random active buyer a uniformly random in-stock
    product at the posted price ``c_j (1 + markup)`` (in range, whole cents). The draws
    are ``uniform(seed, key, turn, 0)`` for the buyer and ``(..., 1)`` for the product.
    """

    seed: int = 0
    markup: float = 0.5
    """Posted markup over unit cost."""

    def act(self, obs: SellerObs) -> SellerAction:
        ar = np.arange(obs.batch_size)
        to = _kth_true(obs.active, uniform(self.seed, obs.key, obs.turn, 0))
        product = _kth_true(obs.stock > 0, uniform(self.seed, obs.key, obs.turn, 1))
        price = _price(obs.costs[ar, product] * (1.0 + self.markup), obs)
        return SellerAction(to=to, product=product, price=price)


def _kth_true(mask: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(B,) the index of a uniformly chosen True entry of each row (0 for an all-False row)."""
    count = mask.sum(axis=1)
    k = np.minimum(np.floor(u * count).astype(np.int64), np.maximum(count - 1, 0))
    rank = np.cumsum(mask, axis=1) - 1
    return np.argmax(mask & (rank == k[:, None]), axis=1)


# ---------------------------------------------------------------------------
# Sellers that remember refusals
# ---------------------------------------------------------------------------


@dataclass
class GreedyMatcher(SellerPolicy):
    """Spends each turn on the buyer-product pair with the highest expected margin.

    Rule, each turn, per market:

    1. Belief: v_ij ~ Normal(s_ij, (noise * w)^2) conditioned on v_ij < u_ij, so the chance
       that buyer i takes j at price p is ``A_ij(p) = P(v_ij >= p | v_ij < u_ij)`` (0 for
       ``p >= u_ij``: a refused price is never asked again, nor any higher one).
    2. Price of each open pair (active i, in-stock j): the p maximizing the expected margin
       ``(p - c_j) A_ij(p)`` over ``p = min(s_ij, u_ij) + noise * w * z`` for z on
       ``np.linspace(-3, 1.5, grid)``, each p raised to ``c_j (1 + markup)``, then put in
       range and in whole cents (the margin is evaluated at the rounded price).
    3. A usable standing bid (j', b') of buyer i, one with b' >= c_j' (1 + markup), is a sure
       sale: pair (i, j') is worth ``b' - c_j'`` at price b' (rounded down to a cent) when
       that beats its step-2 value.
    4. Offer the open pair with the highest value at its price (ties: lowest buyer index,
       then lowest product index).
    5. Patience (0 by default): while the turns left exceed the buyers still open by more
       than ``spare`` times their number, ask ``patience * w`` above that price, unless
       the buyer stands on a bid for that product (a refusal costs a turn that can be
       spared).

    Choosing the product by expected margin puts each buyer on the product its signal
    says it values most over cost, so trades go to good matches; the refusal bound makes a
    buyer who said no fall down the ranking instead of being asked the same again.
    """

    markup: float = 0.1
    """Floor on every price, as a markup over unit cost."""
    noise: float = 0.1
    """Assumed std of the signal noise, as a fraction of the range width (must be > 0)."""
    grid: int = 19
    """Number of candidate prices per pair."""
    patience: float = 0.0
    """Step 5: extra asked while turns are to spare, as a fraction of the range width."""
    spare: float = 0.0
    """Step 5: the turns to spare (turns left minus open buyers) needed for patience, as a
    fraction of the open buyers (0: any spare turn). With 0.3, a market of 16 buyers and
    20 turns has too few to spare for patience, and retail's 8 and 12 has enough."""

    _caps: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _table: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check(self.markup > -1.0, f"markup must be > -1, got {self.markup}")
        _check(self.noise > 0.0, f"noise must be > 0, got {self.noise}")
        _check(
            isinstance(self.grid, int | np.integer) and self.grid >= 2,
            f"grid must be a whole number >= 2, got {self.grid}",
        )
        _check(self.patience >= 0.0, f"patience must be >= 0, got {self.patience}")
        _check(self.spare >= 0.0, f"spare must be >= 0, got {self.spare}")

    def reset(self, batch_size: int) -> None:
        self._caps = None
        self._table = None

    def restart(self, rows: np.ndarray) -> None:
        if self._caps is not None:
            self._caps[rows] = np.inf
        if self._table is not None:
            self._table[2][rows] = np.nan  # never equal to a cap: the rows are recomputed

    def _best(self, s, caps, cost, sigma: float, obs: SellerObs):
        """Step 2 for pairs laid out as arrays (..., M): the best grid price and its value."""
        z = np.linspace(-3.0, 1.5, self.grid)
        centre = np.minimum(s, caps)[..., None]
        cost = cost[..., None]
        p = _price(np.maximum(centre + sigma * z, cost * (1.0 + self.markup)), obs)
        # Clamped z-scores keep the conditional probability a ratio of positive numbers
        # even when a signal sits far above a refused price.
        zu = np.clip((caps - s) / sigma, -30.0, 30.0)[..., None]
        zp = np.clip((p - s[..., None]) / sigma, -40.0, zu)
        accept = np.where(p < caps[..., None], (ndtr(zu) - ndtr(zp)) / ndtr(zu), 0.0)
        em = (p - cost) * accept  # (..., M, G)
        g = np.argmax(em, axis=-1)[..., None]
        return np.take_along_axis(em, g, axis=-1)[..., 0], np.take_along_axis(p, g, axis=-1)[..., 0]

    def _best_rows(self, s, caps, cost, sigma: float, obs: SellerObs, threads: int):
        """``_best`` on rows of the arrays side by side (``threads`` > 1)."""
        pairs = int(np.prod(s.shape[1:]))
        parts = map_rows(
            lambda r: self._best(s[r], caps[r], cost[r], sigma, obs),
            s.shape[0],
            threads,
            -(-_ROWS_PER_THREAD // (pairs * self.grid)),
        )
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(x) for x in zip(*parts, strict=True))

    def pair_table(self, obs: SellerObs, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Steps 1-3 for every pair, after taking in the observation's answer: (B, N, M)
        expected margins (-inf where the pair is not open) and the prices that get them.
        Call once per turn (it updates the refusal bounds). ``threads`` > 1 shares step 2
        among threads (``agents.rows``: the same numbers)."""
        if self._caps is None or self._caps.shape != obs.signals.shape:
            self._caps = _fresh_caps(obs)
            self._table = None
        caps = self._caps
        _note_refusals(caps, obs)
        lo, hi = obs.price_range
        sigma = self.noise * (hi - lo)
        s = obs.signals
        cost = np.broadcast_to(obs.costs[:, None, :], s.shape)
        # Signals and costs are fixed within an episode, so a pair's step-2 value changes only
        # when its refusal cap does: after the first turn, recompute just the buyers whose
        # caps moved (one per market per turn) instead of every pair.
        if self._table is None:
            value, price = self._best_rows(s, caps, cost, sigma, obs, threads)
            self._table = (value, price, caps.copy())
        else:
            value, price, seen = self._table
            b, i = np.nonzero((caps != seen).any(axis=2))
            if b.size:
                value[b, i], price[b, i] = self._best_rows(
                    s[b, i], caps[b, i], cost[b, i], sigma, obs, threads
                )
                seen[b, i] = caps[b, i]

        bid_j, bid_price, bid_margin, usable = _standing_bids(obs, self.markup)
        on_bid = usable[..., None] & (np.arange(obs.num_products) == bid_j[..., None])
        take_bid = on_bid & (bid_margin[..., None] >= value)
        value = np.where(take_bid, bid_margin[..., None], value)
        price = np.where(take_bid, bid_price[..., None], price)
        return np.where(_open_pairs(obs), value, -np.inf), price

    def act(self, obs: SellerObs) -> SellerAction:
        value, price = self.pair_table(obs)
        to, product = _argmax_pair(value)
        ar = np.arange(obs.batch_size)
        p = price[ar, to, product]
        if self.patience > 0:
            lo, hi = obs.price_range
            open_buyers = (obs.active & (obs.stock.sum(1, keepdims=True) > 0)).sum(1)
            to_spare = obs.turns_left - open_buyers > self.spare * open_buyers
            patient = to_spare & (obs.counter_product[ar, to] != product)
            p = np.where(patient, p + self.patience * (hi - lo), p)
        return SellerAction(to=to, product=product, price=_price(p, obs))


@dataclass
class AssignmentMatcher(GreedyMatcher):
    """The greedy matcher with its matches planned.

    Rule: steps 1-3 of ``GreedyMatcher`` give every open pair's expected margin and
    price; then, per market, a max-weight matching of the open buyers to the units in
    stock on those margins (``agents.scripted.matching.PlannedMatches``, kept from turn to
    turn while it stays optimal), and the offer is its most valuable pair at the greedy
    matcher's price for it (markets with no matched pair: the greedy pair). A buyer whose
    best product another buyer needs more is offered its second best instead of taking
    the unit first. No patience step (``patience`` must be 0).
    """

    _plan: PlannedMatches = field(
        default_factory=PlannedMatches, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.patience == 0.0, f"patience must be 0 (no patience step), got {self.patience}")

    def reset(self, batch_size: int) -> None:
        super().reset(batch_size)
        self._plan.reset()

    def restart(self, rows: np.ndarray) -> None:
        super().restart(rows)
        self._plan.restart(rows)

    def act(self, obs: SellerObs) -> SellerAction:
        value, price = self.pair_table(obs)
        to, product = self._plan.pairs(value, obs.stock)
        p = price[np.arange(obs.batch_size), to, product]
        return SellerAction(to=to, product=product, price=_price(p, obs))


@dataclass
class DescendingOffers(SellerPolicy):
    """A per-contact concession schedule.

    Rule, each turn, per market: the target is the active buyer contacted least so far
    (lowest index on ties: round robin); the product is its in-stock product with the
    largest signalled margin s_ij - c_j; the price of its k-th offer (k = k_i = 0, 1, ...)
    is ``max(c_j (1 + floor_markup), (start - k * step) * s_ij)``, then put in range and in
    whole cents (the range wins over the floor when the floor lies above hi).
    """

    start: float = 0.9
    """Multiple of the signalled value asked in the first offer to a buyer."""
    step: float = 0.1
    """Concession per further offer to the same buyer, as a multiple of the signal."""
    floor_markup: float = 0.2
    """The price never goes below cost * (1 + floor_markup)."""

    def __post_init__(self) -> None:
        _check(self.start > 0.0, f"start must be > 0, got {self.start}")
        _check(self.step >= 0.0, f"step must be >= 0, got {self.step}")
        _check(self.floor_markup > -1.0, f"floor_markup must be > -1, got {self.floor_markup}")

    def act(self, obs: SellerObs) -> SellerAction:
        ar = np.arange(obs.batch_size)
        to = next_buyer(obs)
        product = _best_signal_product(obs, to)
        signal = obs.signals[ar, to, product]
        k = obs.n_messages[ar, to]
        floor = obs.costs[ar, product] * (1.0 + self.floor_markup)
        price = np.maximum(floor, (self.start - k * self.step) * signal)
        return SellerAction(to=to, product=product, price=_price(price, obs))


@dataclass
class PricingBandit(SellerPolicy):
    """Learns, within each market, which price level sells best (Gaussian Thompson sampling).

    Arms are price levels as multiples of the signal. Per market it keeps, for each arm a,
    the offers made ``n_a`` and the total reward ``S_a``, where an offer's reward is its
    margin over the range width, ``(p - c_j) / w``, if the buyer accepted and 0 otherwise.

    Rule, each turn, per market:

    1. Score the previous arm offer (from the answer now in the observation).
    2. If an active buyer holds a usable standing bid (b' >= c_j' (1 + min_markup), j' in
       stock), offer j' at the bid (rounded down to a cent) to the buyer whose bid has the
       largest margin: a counter is information, a sure sale at the buyer's own price. Not
       an arm pull.
    3. Otherwise the target is, among the least-contacted active buyers, the one with the
       largest signalled margin ``max_j s_ij - c_j`` over in-stock j, offered that j.
    4. Arm: ``argmax_a  m_a + prior_sd / sqrt(1 + n_a) * Phi^-1(U_a)`` with
       ``m_a = (prior_mean + S_a) / (1 + n_a)`` and ``U_a = uniform(seed, key, turn, a)``.
    5. Price: ``arms[a] * s_ij``, lowered to a cent below u_ij if it would repeat a
       refused price, raised to ``c_j (1 + min_markup)``, put in range and in whole cents.

    ``counts`` (B, K) and ``rewards`` (B, K) hold the arm statistics; ``reset`` clears them.
    """

    arms: tuple[float, ...] = (0.7, 0.8, 0.9, 1.0)
    """Price levels, as multiples of the buyer's signal for the offered product."""
    seed: int = 0
    min_markup: float = 0.1
    """Floor on every price, as a markup over unit cost."""
    prior_mean: float = 0.3
    """Prior mean reward of an arm (a margin as a fraction of the range width); optimistic,
    so that every arm gets tried early."""
    prior_sd: float = 0.15
    """Spread of the sampled arm value around its mean before any offer."""

    counts: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    rewards: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _caps: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    # The arm offer awaiting its answer, per market: arm (-1: none), buyer, margin / w.
    _pend_arm: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _pend_to: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _pend_gain: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.arms = tuple(float(a) for a in self.arms)
        _check(len(self.arms) > 0, "arms must name at least one price level")
        _check(all(a > 0.0 for a in self.arms), f"arms must be > 0, got {self.arms}")
        _check(self.min_markup > -1.0, f"min_markup must be > -1, got {self.min_markup}")
        _check(self.prior_sd >= 0.0, f"prior_sd must be >= 0, got {self.prior_sd}")

    def reset(self, batch_size: int) -> None:
        k = len(self.arms)
        self.counts = np.zeros((batch_size, k), np.int64)
        self.rewards = np.zeros((batch_size, k))
        self._caps = None
        self._pend_arm = np.full(batch_size, -1, np.int64)
        self._pend_to = np.zeros(batch_size, np.int64)
        self._pend_gain = np.zeros(batch_size)

    def restart(self, rows: np.ndarray) -> None:
        if self.counts is None:
            return
        self.counts[rows] = 0
        self.rewards[rows] = 0.0
        self._pend_arm[rows] = -1
        if self._caps is not None:
            self._caps[rows] = np.inf

    def act(self, obs: SellerObs) -> SellerAction:
        b = obs.batch_size
        if self.counts is None or self.counts.shape[0] != b:
            self.reset(b)
        if self._caps is None or self._caps.shape != obs.signals.shape:
            self._caps = _fresh_caps(obs)
        _note_refusals(self._caps, obs)
        ar = np.arange(b)
        lo, hi = obs.price_range

        # 1. The previous arm offer: a buyer who was active when offered and has bought
        # since took it (nothing else can sell to it in between).
        rows = np.flatnonzero(self._pend_arm >= 0)
        took = obs.bought[rows, self._pend_to[rows]] >= 0
        self.counts[rows, self._pend_arm[rows]] += 1
        self.rewards[rows, self._pend_arm[rows]] += np.where(took, self._pend_gain[rows], 0.0)
        self._pend_arm[rows] = -1

        # 2. Standing bids.
        bid_j, bid_price, bid_margin, usable = _standing_bids(obs, self.min_markup)
        bidder = np.argmax(np.where(usable, bid_margin, -np.inf), axis=1)
        use_bid = usable.any(axis=1)

        # 3. Target and product.
        best = np.where(obs.stock[:, None, :] > 0, obs.signals - obs.costs[:, None, :], -np.inf)
        best = best.max(axis=2)
        to = np.argmax(np.where(_least_contacted(obs), best, -np.inf), axis=1)
        product = _best_signal_product(obs, to)

        # 4. Thompson draw per arm, from keyed uniforms kept off 0 and 1.
        k = len(self.arms)
        u = uniform(self.seed, obs.key[:, None], obs.turn[:, None], np.arange(k)[None, :])
        u = np.clip(u, 1e-12, 1.0 - 1e-12)
        n = self.counts
        mean = (self.prior_mean + self.rewards) / (1.0 + n)
        arm = np.argmax(mean + self.prior_sd / np.sqrt(1.0 + n) * ndtri(u), axis=1)

        # 5. Price.
        cost = obs.costs[ar, product]
        price = np.asarray(self.arms)[arm] * obs.signals[ar, to, product]
        price = np.minimum(price, self._caps[ar, to, product] - _CENT)
        price = _price(np.maximum(price, cost * (1.0 + self.min_markup)), obs)

        to = np.where(use_bid, bidder, to)
        product = np.where(use_bid, bid_j[ar, bidder], product)
        price = np.where(use_bid, bid_price[ar, bidder], price)

        live_arm = ~obs.done & ~use_bid
        self._pend_arm = np.where(live_arm, arm, -1)
        self._pend_to = to.copy()
        self._pend_gain = (price - obs.costs[ar, product]) / (hi - lo)
        return SellerAction(to=to, product=product, price=price)


@dataclass
class DisclosureAware(SellerPolicy):
    """Prices buyers it has been told are agents differently from the others.

    Premise: a simulated person anchors on a high first price and may take it, so a high
    opening pays; an agent buyer computes and holds out, so a high opening only spends a
    turn (and its patience) -- open near the signal-based estimate of its value instead,
    and reach the people first while the stock lasts.

    Rule, each turn, per market:

    1. If an active buyer holds a usable standing bid (b' >= c_j' (1 + floor_markup), j' in
       stock), offer j' at the bid (rounded down to a cent) to the one whose bid has the
       largest margin.
    2. Otherwise the target is, among the least-contacted active buyers, an undisclosed one
       if any, and among those the one with the largest signalled margin ``max_j s_ij - c_j``
       over in-stock j; the product is that j.
    3. Price of the k-th offer (k = k_i) to buyer i:
       ``s_ij (1 + markup_i - k * step)`` with ``markup_i = agent_markup`` if buyer i is
       disclosed as an agent and ``human_markup`` otherwise; lowered to a cent below u_ij
       if it would repeat a refused price; raised to ``c_j (1 + floor_markup)``; put in
       range and in whole cents.

    Under the ``hidden`` rule nobody is disclosed and it prices everyone as a person.
    """

    human_markup: float = -0.05
    """Opening price for undisclosed buyers, as a markup over the signal."""
    agent_markup: float = -0.15
    """Opening price for disclosed agents, as a markup over the signal (negative: below)."""
    step: float = 0.1
    """Concession per further offer to the same buyer, as a fraction of the signal."""
    floor_markup: float = 0.2
    """The price never goes below cost * (1 + floor_markup)."""

    _caps: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("human_markup", "agent_markup", "floor_markup"):
            _check(getattr(self, name) > -1.0, f"{name} must be > -1, got {getattr(self, name)}")
        _check(self.step >= 0.0, f"step must be >= 0, got {self.step}")

    def reset(self, batch_size: int) -> None:
        self._caps = None

    def restart(self, rows: np.ndarray) -> None:
        if self._caps is not None:
            self._caps[rows] = np.inf

    def act(self, obs: SellerObs) -> SellerAction:
        if self._caps is None or self._caps.shape != obs.signals.shape:
            self._caps = _fresh_caps(obs)
        _note_refusals(self._caps, obs)
        ar = np.arange(obs.batch_size)

        bid_j, bid_price, bid_margin, usable = _standing_bids(obs, self.floor_markup)
        bidder = np.argmax(np.where(usable, bid_margin, -np.inf), axis=1)
        use_bid = usable.any(axis=1)

        first = _least_contacted(obs)
        people = first & ~obs.disclosed
        first = np.where(people.any(axis=1, keepdims=True), people, first)
        best = np.where(obs.stock[:, None, :] > 0, obs.signals - obs.costs[:, None, :], -np.inf)
        to = np.argmax(np.where(first, best.max(axis=2), -np.inf), axis=1)
        product = _best_signal_product(obs, to)

        markup = np.where(obs.disclosed[ar, to], self.agent_markup, self.human_markup)
        k = obs.n_messages[ar, to]
        price = obs.signals[ar, to, product] * (1.0 + markup - k * self.step)
        price = np.minimum(price, self._caps[ar, to, product] - _CENT)
        floor = obs.costs[ar, product] * (1.0 + self.floor_markup)
        price = _price(np.maximum(price, floor), obs)

        to = np.where(use_bid, bidder, to)
        product = np.where(use_bid, bid_j[ar, bidder], product)
        price = np.where(use_bid, bid_price[ar, bidder], price)
        return SellerAction(to=to, product=product, price=price)


# ---------------------------------------------------------------------------
# The full-information reference
# ---------------------------------------------------------------------------


@dataclass
class OracleSeller(SellerPolicy):
    """The labelled full-information reference (reads private values; not a competitor).

    Rule: at ``reveal``, per market, take one optimal assignment of buyers to units with
    at most T trades (``arena.oracle.optimal_assignment(..., max_trades=turns)``; positive
    surplus pairs only) and order it by surplus v_ij - c_j, largest first (buyer index on
    ties). Each turn, offer the next planned pair whose buyer is still active and whose
    product is in stock, at exactly the buyer's value ``v_ij`` (clipped to the range, not
    rounded), even where the buyer holds a standing bid. Each planned pair is offered once.
    With the plan used up, the turns left go, in this order of preference, to:

    1. the best standing bid above cost (offered at the bid, so it trades at once);
    2. a concession to the active buyer and in-stock product with the largest v_ij - c_j
       above zero, at ``c_j + (v_ij - c_j) / 2**(k + 1)`` for a buyer that has had k
       messages (it knows values, not strategies, so it halves its ask each time);
    3. a talk turn (no offer) to the lowest-index active buyer.

    A truthful buyer (accepts iff v >= p) takes every planned offer, so the seller's profit
    is the turn-limited bound W*_T: capture 1 (no pair with v > c is left for step 2).
    """

    sees_private = True

    _plan_to: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _plan_product: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _plan_price: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _next: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _gain: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def reset(self, batch_size: int) -> None:
        self._gain = None
        self._plan_to = np.full((batch_size, 1), -1, np.int64)
        self._plan_product = np.full((batch_size, 1), -1, np.int64)
        self._plan_price = np.zeros((batch_size, 1))
        self._next = np.zeros(batch_size, np.int64)

    def restart(self, rows: np.ndarray) -> None:
        if self._next is not None:
            self._next[rows] = 0
            self._plan_to[rows] = -1

    def reveal(self, batch: MarketBatch, rows: np.ndarray | None = None) -> None:
        lo, hi = batch.config.price_range
        todo = np.arange(batch.size) if rows is None else np.flatnonzero(rows)
        if rows is None or self._next is None or self._next.shape[0] != batch.size:
            self.reset(batch.size)
        plans = {}
        for b in todo:
            v, c = batch.values[b], batch.costs[b]
            pairs = optimal_assignment(v, c, batch.inventory[b], max_trades=batch.config.turns)
            pairs.sort(key=lambda ij, v=v, c=c: (-(v[ij] - c[ij[1]]), ij[0]))
            plans[b] = pairs
        width = max([1, self._plan_to.shape[1], *(len(p) for p in plans.values())])
        if width > self._plan_to.shape[1]:
            pad = ((0, 0), (0, width - self._plan_to.shape[1]))
            self._plan_to = np.pad(self._plan_to, pad, constant_values=-1)
            self._plan_product = np.pad(self._plan_product, pad, constant_values=-1)
            self._plan_price = np.pad(self._plan_price, pad)
        for b, pairs in plans.items():
            self._plan_to[b] = -1
            self._plan_product[b] = -1
            self._plan_price[b] = 0.0
            for t, (i, j) in enumerate(pairs):
                self._plan_to[b, t] = i
                self._plan_product[b, t] = j
                self._plan_price[b, t] = np.clip(batch.values[b, i, j], lo, hi)
            self._next[b] = 0
        self._gain = batch.values - batch.costs[:, None, :]  # (B, N, M) v - c

    def act(self, obs: SellerObs) -> SellerAction:
        b = obs.batch_size
        if self._next is None or self._next.shape[0] != b:
            self.reset(b)
        lo, _ = obs.price_range
        ar = np.arange(b)
        to, product = self._plan_to, self._plan_product
        row = ar[:, None]
        ready = (
            (np.arange(to.shape[1]) >= self._next[:, None])
            & (to >= 0)
            & obs.active[row, np.maximum(to, 0)]
            & (obs.stock[row, np.maximum(product, 0)] > 0)
        )
        has = ready.any(axis=1)
        t = np.argmax(ready, axis=1)
        self._next = np.where(has & ~obs.done, t + 1, self._next)
        out_to = np.where(has, to[ar, t], np.argmax(obs.active, axis=1))
        out_product = np.where(has, product[ar, t], -1)
        out_price = np.where(has, self._plan_price[ar, t], lo)
        if self._gain is None:
            return SellerAction(out_to, out_product, out_price)

        # 1. The best standing bid above cost.
        bid_j, bid_price, bid_margin, usable = _standing_bids(obs, 0.0)
        usable &= bid_margin > 0
        bidder = np.argmax(np.where(usable, bid_margin, -np.inf), axis=1)
        take_bid = ~has & usable.any(axis=1)
        # 2. A halving concession on the best remaining pair.
        gain = np.where(_open_pairs(obs), self._gain, -np.inf)
        cand_to, cand_product = _argmax_pair(gain)
        cand_gain = gain[ar, cand_to, cand_product]
        concede = ~has & ~take_bid & (cand_gain > 0)
        k = obs.n_messages[ar, cand_to]
        cost = obs.costs[ar, cand_product]
        ask = np.clip(cost + np.maximum(cand_gain, 0.0) / 2.0 ** (k + 1), *obs.price_range)
        return SellerAction(
            to=np.select([take_bid, concede], [bidder, cand_to], out_to),
            product=np.select([take_bid, concede], [bid_j[ar, bidder], cand_product], out_product),
            price=np.select([take_bid, concede], [bid_price[ar, bidder], ask], out_price),
        )
