"""What the RL policies see: numpy features, normalized so that one network fits every
market size and price scale.

Seller: features per (buyer, product) pair, per buyer, per product and per market
(``SellerFeatures``), including an expert's per-pair estimates (the greedy matcher's
expected margin and price, and which pair it would pick).
Prices enter as fractions of the range width ``w = hi - lo`` measured from ``lo`` (or
as differences of such fractions), counts as fractions of the turn budget T or of N,
so a market ten times wider or with twice the buyers looks alike. Private values never
enter: the seller sees signals, costs, stock, its own conversations and the disclosure
flag, and remembers (``SellerMemory``) what each buyer's answers said, so that it can
tell a haggler from a truthful buyer from the answers so far.

Buyer: one feature vector per product for the buyer being asked, ``(B, M,
BUYER_FEATURES)``, from its own values, the offer, its own standing bid and the
seller's offers to it so far (``BuyerMemory``).

Both memories are per batch row, cleared by ``reset`` and, for single rows, by
``restart`` (an environment's per-row reset).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from agents.rows import map_rows
from arena.observation import COUNTER, REJECT, BuyerObs, LastDecision, SellerObs, take_rows

_INVALID = int(LastDecision.INVALID)
_NONE = int(LastDecision.NONE)


@dataclass
class SellerMemory:
    """What the seller remembers of each market: refusals and how each buyer answers.

    ``caps`` (B, N, M): the lowest price buyer i refused for product j (+inf: none);
    ``answers``, ``refusals``, ``counters`` (B, N): answers of each kind;
    ``depth`` (B, N): the sum over refusals of (refused price - signal) / w, which tells
    a buyer who refuses offers below its signal (a haggler, an agent holding out) from
    one who refuses only overpriced ones.
    """

    caps: np.ndarray
    seen: np.ndarray
    answers: np.ndarray
    refusals: np.ndarray
    counters: np.ndarray
    depth: np.ndarray

    @classmethod
    def empty(cls, b: int, n: int, m: int) -> SellerMemory:
        z = np.zeros((b, n))
        return cls(
            np.full((b, n, m), np.inf), np.zeros((b, n), np.int64), z, z.copy(), z.copy(), z.copy()
        )

    def rows(self, rows: slice) -> SellerMemory:
        """Markets ``rows``, as views."""
        return SellerMemory(*(getattr(self, f.name)[rows] for f in dataclasses.fields(self)))

    def restart(self, rows: np.ndarray) -> None:
        self.caps[rows] = np.inf
        for a in (self.seen, self.answers, self.refusals, self.counters, self.depth):
            a[rows] = 0

    def update(self, obs: SellerObs) -> None:
        """Take in the answer now in the observation (at most one new one per market: the
        policy is asked before every message)."""
        new = obs.n_messages > self.seen
        self.seen = np.maximum(self.seen, obs.n_messages)
        ld = obs.last_decision
        answered = new & (ld != _NONE)
        refused = answered & ((ld == REJECT) | (ld == COUNTER) | (ld == _INVALID))
        self.answers += answered
        self.refusals += refused
        self.counters += answered & (ld == COUNTER)
        b, i = np.nonzero(refused & (obs.last_product >= 0))
        if b.size:
            j = obs.last_product[b, i]
            price = obs.last_price[b, i]
            self.caps[b, i, j] = np.minimum(self.caps[b, i, j], price)
            lo, hi = obs.price_range
            self.depth[b, i] += (price - obs.signals[b, i, j]) / (hi - lo)


@dataclass(frozen=True, eq=False)
class SellerFeatures:
    """The seller's features in four groups, so that nothing is copied N or M times:
    per pair (B, N, M, PAIR), per buyer (B, N, BUYER), per product (B, M, PRODUCT) and
    per market (B, MARKET), float32. The network embeds each group and adds them."""

    pair: np.ndarray
    buyer: np.ndarray
    product: np.ndarray
    market: np.ndarray

    PAIR = 16
    BUYER = 10
    PRODUCT = 3
    MARKET = 5
    POOLED = 4
    """Market features after the first ``MARKET``, for sellers built with ``pooled``: the
    answers of the market's buyers pooled (refusal, counter and refusal-depth rates over
    every answer so far, and the answers per buyer), so that the buyers' first answers
    tell the seller what the others it has not asked yet are likely to be."""

    PRIOR = 1
    """The last market feature, for sellers built with ``prior_feature``: the factor
    ``calibrate_signals`` shrinks the market's signals by (1: not shrunk), so that the
    network can tell a market whose signals are noisy from one whose signals are exact
    once both have been calibrated."""

    PLAN = 1
    """The last pair feature, for sellers built with ``plan_feature``: whether the pair is
    one of the market's planned matching (``agents.scripted.matching.PlannedMatches``),
    so that the network sees the whole plan, not only its pick."""

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.pair, self.buyer, self.product, self.market

    def rows(self, rows: slice) -> SellerFeatures:
        """Markets ``rows``, as views (writing to them writes to these features)."""
        return SellerFeatures(*(a[rows] for a in self.arrays()))


SELLER_FEATURES = (
    SellerFeatures.PAIR,
    SellerFeatures.BUYER,
    SellerFeatures.PRODUCT,
    SellerFeatures.MARKET,
)
SELLER_FEATURES_POOLED = SELLER_FEATURES[:3] + (SellerFeatures.MARKET + SellerFeatures.POOLED,)
"""``SELLER_FEATURES`` with the pooled answers (``seller_features(..., pooled=True)``)."""


def seller_feature_counts(
    pooled: bool = False, prior: bool = False, plan: bool = False
) -> tuple[int, ...]:
    """The feature counts of a seller that sees the pooled answers, the shrink factor
    and/or its plan (``SellerFeatures.POOLED``, ``SellerFeatures.PRIOR``,
    ``SellerFeatures.PLAN``)."""
    market = SellerFeatures.MARKET + SellerFeatures.POOLED * pooled + SellerFeatures.PRIOR * prior
    return (SellerFeatures.PAIR + SellerFeatures.PLAN * plan, *SELLER_FEATURES[1:3], market)


def calibrate_signals(obs: SellerObs, prior: float, factor: np.ndarray | None = None) -> SellerObs:
    """``obs`` with every signal replaced by an estimate of the buyer's value: each
    product's signals shrink toward their mean over the market's buyers by

        f = min(1, prior**2 / spread**2),  spread**2 = mean_ij (s_ij - mean_j)**2 / w**2

    the posterior mean of a value under a prior spread of tastes ``prior`` (a fraction
    of the range width w) when the signals spread by ``spread``: what spreads beyond
    ``prior`` is taken for noise (``arena.generator``: the signal spread is the taste
    spread plus the signal noise, in quadrature). Markets whose signals spread no more
    than ``prior`` keep them as they are; a market whose signals are mostly noise gets
    signals near each product's mean, and prices near what the product fetches on
    average. Signals are fixed for a market's life, and so is f. ``prior`` <= 0: no
    change. ``factor``: f as ``shrink_factor`` gives it, when the caller has it."""
    if prior <= 0:
        return obs
    f = (shrink_factor(obs, prior) if factor is None else factor)[:, None, None]
    if (f >= 1.0).all():
        return obs
    s = obs.signals
    mean = s.mean(axis=1, keepdims=True)  # (B, 1, M): each product over the buyers
    return dataclasses.replace(obs, signals=np.where(f < 1.0, mean + f * (s - mean), s))


def shrink_factor(obs: SellerObs, prior: float) -> np.ndarray:
    """(B,) the factor f ``calibrate_signals`` shrinks each market's signals by (1: left
    as they are; 1 everywhere when ``prior`` <= 0)."""
    if prior <= 0:
        return np.ones(obs.batch_size)
    lo, hi = obs.price_range
    dev = obs.signals - obs.signals.mean(axis=1, keepdims=True)
    spread2 = np.square(dev).mean(axis=(1, 2)) / (hi - lo) ** 2
    return np.minimum(prior**2 / np.maximum(spread2, 1e-300), 1.0)


def _stack(cols: list, out: np.ndarray | None = None) -> np.ndarray:
    """The columns (arrays of one shape) side by side on a new last axis, as float32:
    ``np.stack`` of the float32 columns, written in place without the temporaries (into
    ``out`` when given)."""
    if out is None:
        out = np.empty(np.shape(cols[0]) + (len(cols),), np.float32)
    for k, x in enumerate(cols):
        out[..., k] = x
    return out


ROWS_PER_THREAD = 16384
"""``seller_features`` gives each thread at least this many pairs (below it, starting a
thread costs more than it saves)."""


def seller_features(
    obs: SellerObs,
    mem: SellerMemory,
    expert: tuple[np.ndarray, np.ndarray],
    threads: int = 1,
    pooled: bool = False,
    factor: np.ndarray | None = None,
    plan: np.ndarray | None = None,
) -> SellerFeatures:
    """Every feature of every pair, buyer, product and market (all finite). ``expert``:
    an expert's (B, N, M) expected margins (-inf where not open) and prices. ``pooled``
    adds the ``SellerFeatures.POOLED`` market features after the others; ``factor`` (B,),
    the last one (``SellerFeatures.PRIOR``); ``plan`` (B, N, M) bool, the last pair
    feature (``SellerFeatures.PLAN``).

    ``threads`` > 1 shares the markets among up to that many threads (numpy lets go of
    the interpreter in its loops, so they run side by side): each market's features are
    computed from its own rows alone, so the numbers are the same however it is split."""
    b, n, m = obs.signals.shape
    out = SellerFeatures(
        *(
            np.empty(shape, np.float32)
            for shape in (
                (b, n, m, SellerFeatures.PAIR + SellerFeatures.PLAN * (plan is not None)),
                (b, n, SellerFeatures.BUYER),
                (b, m, SellerFeatures.PRODUCT),
                (
                    b,
                    SellerFeatures.MARKET
                    + SellerFeatures.POOLED * pooled
                    + SellerFeatures.PRIOR * (factor is not None),
                ),
            )
        )
    )
    if factor is not None:  # the last market feature (``SellerFeatures.PRIOR``)
        out.market[:, -1] = factor
    if plan is not None:  # the last pair feature (``SellerFeatures.PLAN``)
        out.pair[..., -1] = plan

    def part(rows: slice) -> None:
        table = (expert[0][rows], expert[1][rows])
        _seller_features(take_rows(obs, rows), mem.rows(rows), table, out.rows(rows))

    map_rows(part, b, threads, -(-ROWS_PER_THREAD // (n * m)))
    return out


def _seller_features(
    obs: SellerObs, mem: SellerMemory, expert: tuple[np.ndarray, np.ndarray], out: SellerFeatures
) -> None:
    b, n, m = obs.signals.shape
    lo, hi = obs.price_range
    w = hi - lo
    T = float(obs.turns)
    s = (obs.signals - lo) / w  # (B, N, M)
    c = ((obs.costs - lo) / w)[:, None, :]  # (B, 1, M)
    has_cap = np.isfinite(mem.caps)
    cap = np.where(has_cap, (mem.caps - lo) / w, s)
    anchor = np.minimum(s, cap)
    in_stock = (obs.stock > 0)[:, None, :]
    open_ = obs.active[:, :, None] & in_stock

    bid_here = (obs.counter_product[:, :, None] == np.arange(m)) & (
        obs.counter_product[:, :, None] >= 0
    )
    bid = np.where(np.isnan(obs.counter_price), 0.0, (obs.counter_price - lo) / w)[:, :, None]
    last_here = obs.last_product[:, :, None] == np.arange(m)
    last_price = np.where(np.isnan(obs.last_price), 0.0, (obs.last_price - lo) / w)[:, :, None]

    # Competition: how this pair ranks among the open pairs of its product and its buyer.
    margin = np.where(open_, s - c, -np.inf)
    rank_in_product = _rank(margin, axis=1) / max(n - 1, 1)
    rank_in_buyer = _rank(margin, axis=2) / max(m - 1, 1)
    best_other = _best_other(np.where(in_stock, s, -np.inf), axis=2)
    gap_other = np.where(np.isfinite(best_other), s - best_other, 0.0)
    e_value, e_price = expert
    e_open = np.isfinite(e_value)
    e_margin = np.where(e_open, e_value / w, 0.0)
    e_best = e_margin.max(axis=(1, 2), keepdims=True)
    _stack(
        [
            s,
            s - c,
            anchor - c,
            has_cap,
            np.where(has_cap, cap - s, 0.0),
            bid_here,
            np.where(bid_here, bid - c, 0.0),
            last_here,
            np.where(last_here, last_price - s, 0.0),
            np.where(open_, rank_in_product, 1.0),
            np.where(open_, rank_in_buyer, 1.0),
            gap_other,
            e_margin,
            np.where(e_open, (e_price - lo) / w - anchor, 0.0),
            e_open & (e_margin >= e_best),
            e_best - e_margin,
        ],
        out.pair,
    )

    ld = obs.last_decision
    answers = np.maximum(mem.answers, 1.0)
    if obs.patience > 0:
        patience_left = 1.0 - obs.n_messages / obs.patience
    else:
        patience_left = np.ones((b, n))
    _stack(
        [
            obs.n_messages / T,
            patience_left,
            ld == REJECT,
            ld == COUNTER,
            ld == _INVALID,
            obs.disclosed,
            obs.counter_product >= 0,
            mem.refusals / answers,
            mem.counters / answers,
            mem.depth / answers,
        ],
        out.buyer,
    )
    _stack([c[:, 0], obs.stock / np.maximum(obs.inventory, 1), obs.stock == 1], out.product)

    # How buyers answer is kept per buyer here: a market may mix kinds of buyers (humans
    # and agents), so answers pooled over the market are only an option (``pooled``).
    n_active = np.maximum(obs.active.sum(axis=1), 1)
    left = (obs.turns - obs.turn).astype(float)
    _stack(
        [
            left / T,
            np.minimum(left / n_active, 3.0) / 3.0,
            n_active / n,
            np.minimum(obs.stock.sum(axis=1) / n_active, 3.0) / 3.0,
            np.full(b, min(n / T, 4.0) / 4.0),
        ],
        out.market[:, : SellerFeatures.MARKET],
    )
    if out.market.shape[1] >= SellerFeatures.MARKET + SellerFeatures.POOLED:
        # Pooled over the market's buyers, human or agent alike: in a mixed market they
        # tell the mix, and each buyer's own answers stay among its buyer features.
        said = mem.answers.sum(axis=1)
        per = np.maximum(said, 1.0)
        _stack(
            [
                mem.refusals.sum(axis=1) / per,
                mem.counters.sum(axis=1) / per,
                mem.depth.sum(axis=1) / per,
                np.minimum(said / n, 3.0) / 3.0,
            ],
            out.market[:, SellerFeatures.MARKET : SellerFeatures.MARKET + SellerFeatures.POOLED],
        )


def _rank(x: np.ndarray, axis: int) -> np.ndarray:
    """0 for the largest entry along ``axis``, 1 for the next, ... (ties by position)."""
    order = np.argsort(-x, axis=axis, kind="stable")
    return np.argsort(order, axis=axis, kind="stable").astype(float)


def _best_other(x: np.ndarray, axis: int) -> np.ndarray:
    """For every entry, the largest of the *other* entries along ``axis`` (-inf if none)."""
    top2 = -np.sort(-x, axis=axis)
    first = np.take(top2, [0], axis=axis)
    second = np.take(top2, [1], axis=axis) if x.shape[axis] > 1 else np.full_like(first, -np.inf)
    return np.where(x >= first, second, first)


# ---------------------------------------------------------------------- buyer
@dataclass
class BuyerMemory:
    """What a buyer remembers of the seller's offers to it: per (market, buyer, product)
    the lowest and the last price offered (nan: never) and how many offers."""

    low: np.ndarray
    last: np.ndarray
    offers: np.ndarray

    @classmethod
    def empty(cls, b: int, n: int, m: int) -> BuyerMemory:
        return cls(np.full((b, n, m), np.nan), np.full((b, n, m), np.nan), np.zeros((b, n, m)))

    def restart(self, rows: np.ndarray) -> None:
        self.low[rows] = np.nan
        self.last[rows] = np.nan
        self.offers[rows] = 0

    def view(self, obs: BuyerObs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(B, M) low, last and count for the buyer each market asks, before this offer."""
        ar = np.arange(obs.batch_size)
        return self.low[ar, obs.buyer], self.last[ar, obs.buyer], self.offers[ar, obs.buyer]

    def update(self, obs: BuyerObs) -> None:
        """Take in the offer now being answered (rows that ask nobody change nothing)."""
        rows = np.flatnonzero(obs.needs_answer & (obs.offer_product >= 0))
        i, j = obs.buyer[rows], obs.offer_product[rows]
        p = obs.offer_price[rows]
        self.low[rows, i, j] = np.fmin(self.low[rows, i, j], p)
        self.last[rows, i, j] = p
        self.offers[rows, i, j] += 1


BUYER_FEATURES = 22


def buyer_features(obs: BuyerObs, mem: BuyerMemory) -> np.ndarray:
    """(B, M, BUYER_FEATURES) float32 features of each product for the buyer being asked
    (call before ``mem.update`` with the same observation)."""
    b, m = obs.values.shape
    lo, hi = obs.price_range
    w = hi - lo
    T = float(obs.turns)
    v = (obs.values - lo) / w
    c = (obs.costs - lo) / w
    offered = obs.offer_product[:, None] == np.arange(m)
    has_offer = (obs.offer_product >= 0)[:, None]
    p = np.where(np.isnan(obs.offer_price), 0.0, (obs.offer_price - lo) / w)[:, None]
    v_off = np.take_along_axis(v, np.maximum(obs.offer_product, 0)[:, None], axis=1)
    bid_here = obs.counter_product[:, None] == np.arange(m)
    bid = np.where(np.isnan(obs.counter_price), 0.0, (obs.counter_price - lo) / w)[:, None]
    low, last, count = mem.view(obs)
    seen = ~np.isnan(low)
    first = np.where(np.isnan(obs.first_price), 0.0, (obs.first_price - lo) / w)[:, None]
    in_stock = obs.stock > 0
    rank = _rank(np.where(in_stock, v - c, -np.inf), axis=1) / max(m - 1, 1)
    if obs.patience > 0:
        patience_left = 1.0 - obs.n_messages / obs.patience
    else:
        patience_left = np.ones(b)

    def full(x) -> np.ndarray:
        return np.broadcast_to(x, (b, m))

    cols = [
        v,
        c,
        v - c,
        in_stock,
        np.where(in_stock, rank, 1.0),
        offered,
        full(has_offer),
        full(np.where(has_offer, v_off - p, 0.0)),  # surplus at the offer
        np.where(has_offer, v - p, 0.0),  # this product's value over the offered price
        full(np.where(has_offer, p, 0.0)),
        bid_here,
        np.where(bid_here, v - bid, 0.0),
        seen,
        np.where(seen, (low - lo) / w - v, 0.0),
        np.where(seen, (last - lo) / w - v, 0.0),
        count / T,
        full(np.where(np.isnan(obs.first_price)[:, None], 0.0, v_off - first)),
        full((obs.n_messages / T)[:, None]),
        full((obs.turn / T)[:, None]),
        full(patience_left[:, None]),
        full(obs.disclosed[:, None]),
        full(np.minimum(obs.num_buyers / np.maximum(obs.stock.sum(axis=1), 1), 4.0)[:, None] / 4),
    ]
    return _stack(cols)


DISCLOSURE_FEATURES = 8


def disclosure_features(market) -> np.ndarray:
    """(B, N, DISCLOSURE_FEATURES) what each buyer knows before its market starts: its own
    values against the public catalog, and the market's size, budget and patience. Only
    buyer i's own row of the values enters buyer i's features."""
    cfg = market.config
    lo, w = cfg.lo, cfg.width
    v = (market.values - lo) / w  # (B, N, M)
    c = ((market.costs - lo) / w)[:, None, :]
    margin = v - c
    top2 = -np.sort(-margin, axis=2)
    second = top2[..., 1] if margin.shape[2] > 1 else np.zeros_like(top2[..., 0])
    b, n, _ = v.shape
    stock = market.inventory.sum(axis=1)[:, None] / n
    cols = [
        top2[..., 0],
        top2[..., 0] - second,
        v.max(axis=2),
        v.mean(axis=2),
        np.broadcast_to(c.mean(axis=2), (b, n)),
        np.broadcast_to(np.minimum(stock, 3.0) / 3.0, (b, n)),
        np.full((b, n), min(n / cfg.turns, 4.0) / 4.0),
        np.full((b, n), min(cfg.patience, cfg.turns) / cfg.turns),
    ]
    return _stack(cols)
