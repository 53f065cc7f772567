"""RL policies: the torch networks of ``agents.rl.nets`` behind the batched policy protocol.

``RLSeller`` picks a (buyer, product) pair and a price level; ``RLBuyer`` picks reject,
accept or counter and, for a counter, a product and a bid level. Both:

* sample with the project's counter-based noise (``arena.noise``), keyed by (policy
  seed, market key, turn, ...), so they are reproducible and batch-invariant like every
  scripted policy and pass ``agents.conformance``; ``greedy=True`` (the default, used in
  evaluation and tournaments) takes the most likely option instead;
* never make an invalid move: only open pairs (active buyer, product in stock), prices
  and bids in whole cents inside the range;
* return, through ``decide``, everything a trainer needs (features, the choices, their
  log-probabilities and the value estimate) besides the action.

The seller learns on top of an expert: the scripted greedy matcher's per-pair estimates
(its expected margin, its price, its own choice) are features, and its price for the
chosen pair is one of the levels, so the network can play exactly the expert's move and
PPO learns where to depart from it (the warm start imitates it).

Seller prices. For pair (i, j) with signal s_ij, cost c_j and refusal cap u_ij (the
lowest price buyer i refused for j), the anchor is ``a_ij = min(s_ij, u_ij)`` and level
k offers ``max(a_ij + offsets[k] * w, c_j)`` in cents; the next level offers buyer i's
standing bid on j (rounded down to a cent, so it trades at once), allowed only when such
a bid exists at or above cost; the last ones offer the expert's price e_ij for the pair,
then ``max(e_ij + expert_offsets[k] * w, c_j)``; the last ones post a markup over cost,
``c_j (1 + markups[k])`` (what a posted-price seller asks: where the public signals are
too noisy to price on, a price from the cost is worth more). Offsets are fractions of the
range width w, so the levels mean the same on every price scale.

Seller signals. With ``signal_prior`` > 0 the seller reads the signals through
``agents.rl.features.calibrate_signals``: in a market whose signals spread wider than
tastes spread (``signal_prior``, a fraction of w), each product's signals shrink toward
their mean, and features, anchors and the expert's estimates all start from the shrunk
ones. Checkpoints record it (the shipped ``rl_seller``: 0.25).

Buyer bids. For product j with value v_j and cost c_j, bid level k bids
``c' + shares[k] * (a_j - c')`` with ``c' = clip(c_j, lo, a_j)`` and the anchor ``a_j = v_j``:
from the seller's cost up to its own value, never above it. With ``bid_to_offer`` the
anchor of the product on offer is ``min(v_j, p)``, the lesser of its value and the price
offered: the levels then ask for a share of the seller's margin back (``shares[k]`` of the
way from cost to the offer), whatever the buyer's own value.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from agents.base import AGENT, BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.rl.features import (
    BUYER_FEATURES,
    DISCLOSURE_FEATURES,
    BuyerMemory,
    SellerFeatures,
    SellerMemory,
    buyer_features,
    calibrate_signals,
    disclosure_features,
    seller_feature_counts,
    seller_features,
    shrink_factor,
)
from agents.rl.nets import BuyerNet, BuyerNetConfig, SellerNet, SellerNetConfig
from agents.scripted.matching import PlannedMatches
from agents.scripted.sellers import GreedyMatcher, _at_most
from arena.config import finite_float
from arena.noise import uniform
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs, SellerObs
from arena.prices import cents
from arena.words import shown

PRICE_OFFSETS: tuple[float, ...] = (
    -0.3,
    -0.22,
    -0.16,
    -0.12,
    -0.09,
    -0.06,
    -0.04,
    -0.02,
    0.0,
    0.03,
    0.07,
    0.12,
)
# Offsets around the expert's price (fractions of the range width); the first is the
# expert's price itself.
EXPERT_OFFSETS: tuple[float, ...] = (0.0, -0.04, -0.02, 0.02, 0.04)
# Markups over unit cost of the posted-price levels.
MARKUPS: tuple[float, ...] = (0.2, 0.35, 0.5, 0.7, 1.0)
BID_SHARES: tuple[float, ...] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# The highest markup a checkpoint may hold: a price of 101 times the cost is above the
# top of any range a market is played on, so higher ones would all play the same.
MAX_MARKUP = 100.0

# Streams of the keyed noise, one per choice.
_PAIR, _LEVEL, _DECISION, _PRODUCT, _BID, _DISCLOSE = 11, 12, 21, 22, 23, 24


def _pick(logits: torch.Tensor, u: np.ndarray | None) -> np.ndarray:
    """Row-wise choice: argmax when ``u`` is None, else the inverse-CDF draw at ``u`` (B,),
    computed in float64 numpy so that it is exact and batch-invariant."""
    z = logits.detach().double().cpu().numpy()
    if u is None:
        return np.argmax(z, axis=1)
    z = z - z.max(axis=1, keepdims=True)
    cdf = np.cumsum(np.exp(z), axis=1)
    k = (cdf < (u * cdf[:, -1])[:, None]).sum(axis=1)
    # Never land on an option of probability 0 (possible only through rounding at u ~ 1).
    last = z.shape[1] - 1 - np.argmax(np.isfinite(z[:, ::-1]), axis=1)
    return np.minimum(k, last)


def _t(a: np.ndarray, like: nn.Module) -> torch.Tensor:
    """A numpy array as a tensor on the network's device."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(next(like.parameters()).device)


def _logp(logits: torch.Tensor, index: np.ndarray | torch.Tensor) -> torch.Tensor:
    idx = torch.as_tensor(index, dtype=torch.long, device=logits.device)
    return torch.log_softmax(logits, dim=-1).gather(1, idx[:, None])[:, 0]


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Row entropies of categorical logits that may hold -inf (excluded options)."""
    logp = torch.log_softmax(logits, dim=-1)
    p = logp.exp()
    return -(p * torch.where(torch.isfinite(logp), logp, torch.zeros_like(logp))).sum(-1)


# ---------------------------------------------------------------------- seller
@dataclass(frozen=True, eq=False)
class SellerDecision:
    """One seller turn for B markets, with what a trainer needs to learn from it."""

    action: SellerAction
    features: SellerFeatures
    open: np.ndarray  # (B, N, M) bool
    pair: np.ndarray  # (B,) flat pair index i * M + j
    level: np.ndarray  # (B,)
    level_ok: np.ndarray  # (B, K) bool, the allowed levels of the chosen pair
    # What a trainer reads (None when decided with ``record=False``):
    logp: np.ndarray | None  # (B,) log-probability of the choice
    value: np.ndarray | None  # (B,)
    expert_pair: np.ndarray | None  # (B,) the pair the expert would pick (its level: price)
    choice: np.ndarray | None = None  # (B, N, M) bool, the pairs it chose among (None: open)


class RLSeller(SellerPolicy):
    """A seller driven by a ``SellerNet``; see the module docstring."""

    kind = AGENT

    def __init__(
        self,
        net: SellerNet | None = None,
        *,
        seed: int = 0,
        greedy: bool = True,
        offsets: tuple[float, ...] = PRICE_OFFSETS,
        expert_offsets: tuple[float, ...] = EXPERT_OFFSETS,
        markups: tuple[float, ...] = MARKUPS,
        hidden: int = 48,
        film: bool = False,
        pooled: bool = False,
        signal_prior: float = 0.0,
        prior_feature: bool = False,
        assignment: bool = False,
        within_plan: bool = False,
        plan_feature: bool = False,
        expert_pair: bool = False,
    ) -> None:
        if not signal_prior >= 0.0:
            raise ValueError("signal_prior must be >= 0 (0: the signals as they are)")
        if not isinstance(assignment, bool):
            raise ValueError(f"assignment must be true or false, got {assignment!r}")
        if not isinstance(within_plan, bool):
            raise ValueError(f"within_plan must be true or false, got {within_plan!r}")
        if not isinstance(expert_pair, bool):
            raise ValueError(f"expert_pair must be true or false, got {expert_pair!r}")
        self.signal_prior = float(signal_prior)
        """Prior spread of tastes behind ``calibrate_signals`` (0: none)."""
        self.assignment = assignment
        """The expert's pick is the pair a max-weight assignment of the open buyers to the
        units in stock offers (``agents.scripted.matching.PlannedMatches``), not the pair
        of the highest expected margin: in the expert's table that pair's expected margin
        is raised to the best one's, so that its features read as the expert's pick."""
        self.within_plan = within_plan
        """The pair is chosen among the pairs of the market's max-weight matching (the
        plan ``assignment`` picks from; among every open pair in a market with no matched
        pair), while the network still sees every open pair: it chooses whom to ask next
        and at what price, and the plan says which product."""
        self.expert_pair = expert_pair
        """The pair is always the expert's pick (with ``assignment``, the assignment
        matcher's pair) and the network sets only its price: a way to measure, in play,
        what a seller's pair choices earn apart from its prices. It overrides
        ``within_plan``."""
        self.offsets = tuple(float(x) for x in offsets)
        self.expert_offsets = tuple(float(x) for x in expert_offsets)
        self.markups = tuple(float(x) for x in markups)
        if any(not x > -1.0 for x in self.markups):
            raise ValueError("markups must be > -1 (a price above zero)")
        if not self.expert_offsets or self.expert_offsets[0] != 0.0:
            raise ValueError("expert_offsets must start with 0.0 (the expert's own price)")
        if net is None:
            features = seller_feature_counts(pooled, prior_feature, plan_feature)
            net = SellerNet(SellerNetConfig(features, self.levels, hidden, film))
        kinds = {seller_feature_counts(*k): k for k in itertools.product((False, True), repeat=3)}
        if net.cfg.levels != self.levels or net.cfg.features not in kinds:
            raise ValueError("the network's levels or features do not fit this policy")
        self.net = net
        self.pooled, self.prior_feature, self.plan_feature = kinds[net.cfg.features]
        """Whether it sees the pooled answers (``SellerFeatures.POOLED``), the shrink
        factor of its signals (``SellerFeatures.PRIOR``) and its planned matching
        (``SellerFeatures.PLAN``): the network's feature counts say so."""
        self.seed = int(seed)
        self.greedy = greedy
        self._mem: SellerMemory | None = None
        self._expert = GreedyMatcher()
        self._plan = PlannedMatches()
        self._table: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def levels(self) -> int:
        """Price levels: the anchor offsets, the standing bid, the expert's price and the
        expert offsets around it, then the markups over cost."""
        return len(self.offsets) + 1 + len(self.expert_offsets) + len(self.markups)

    def checkpoint_params(self) -> dict[str, list[float] | float]:
        """What a checkpoint stores besides the network (``agents.rl.checkpoint``)."""
        out: dict[str, list[float] | float] = {
            "offsets": list(self.offsets),
            "expert_offsets": list(self.expert_offsets),
            "markups": list(self.markups),
        }
        if self.signal_prior:  # newer than the first checkpoints' records
            out["signal_prior"] = self.signal_prior
        if self.assignment:  # likewise
            out["assignment"] = True
        for flag in ("within_plan", "expert_pair"):
            if getattr(self, flag):
                out[flag] = True
        return out

    @classmethod
    def from_checkpoint_params(cls, params: dict) -> dict[str, tuple[float, ...] | float]:
        """Constructor arguments from a checkpoint's params, checked: the offsets are
        fractions of the range width (within one width either way), a markup prices above
        zero and at most ``MAX_MARKUP`` times over cost, the prior is a finite number >= 0."""
        params = dict(params)
        prior = params.pop("signal_prior", 0.0)
        if isinstance(prior, bool) or not isinstance(prior, int | float):
            raise ValueError(f"signal_prior must be a number, got {prior!r}")
        if not (finite_float(prior) is not None and prior >= 0):
            raise ValueError(f"signal_prior must be a finite number >= 0, got {prior!r}")
        flags = {}
        for name in ("assignment", "within_plan", "expert_pair"):
            flags[name] = params.pop(name, False)
            if not isinstance(flags[name], bool):
                raise ValueError(f"{name} must be true or false, got {flags[name]!r}")
        for name in ("offsets", "expert_offsets"):
            _check_levels(params, name, -1.0, 1.0, "[-1, 1] (a fraction of the range width)")
        _check_levels(
            params, "markups", -1.0, MAX_MARKUP, f"(-1, {MAX_MARKUP:g}] (over cost)", open_low=True
        )
        out = {**_float_tuples(params), **({"signal_prior": float(prior)} if prior else {})}
        return {**out, **{k: True for k, on in flags.items() if on}}

    @property
    def expert_level(self) -> int:
        """The level that plays exactly the expert's price."""
        return len(self.offsets) + 1

    def reset(self, batch_size: int) -> None:
        self._mem = None
        self._expert.reset(batch_size)
        self._plan.reset()

    def restart(self, rows: np.ndarray) -> None:
        if self._mem is not None:
            self._mem.restart(rows)
        self._expert.restart(rows)
        self._plan.restart(rows)

    def act(self, obs: SellerObs) -> SellerAction:
        return self.decide(obs, record=False).action

    def decide(
        self, obs: SellerObs, sample: bool | None = None, record: bool = True
    ) -> SellerDecision:
        """The turn's decision; ``sample`` overrides ``greedy`` (trainers sample). Play
        passes ``record=False``: what only a trainer reads (``logp``, ``value``,
        ``expert_pair``) is then None and not computed."""
        factor = shrink_factor(obs, self.signal_prior) if self.prior_feature else None
        obs = calibrate_signals(obs, self.signal_prior, factor)
        b, n, m = obs.signals.shape
        if self._mem is None or self._mem.caps.shape != (b, n, m):
            self._mem = SellerMemory.empty(b, n, m)
        self._mem.update(obs)
        self._table = self._expert.pair_table(obs, threads=torch.get_num_threads())
        planned = None  # (B, N, M) the pairs of the kept matching, where it is read
        if self.assignment or self.within_plan or self.plan_feature:
            pick = self._plan.pairs(self._table[0], obs.stock)
            if self.assignment:
                self._table = _assigned_table(self._table, pick)
            if self.within_plan or self.plan_feature:
                planned = self._plan.matched()
        threads = torch.get_num_threads()
        x = seller_features(
            obs,
            self._mem,
            self._table,
            threads=threads,
            pooled=self.pooled,
            factor=factor,
            plan=planned if self.plan_feature else None,
        )
        open_ = obs.active[:, :, None] & (obs.stock > 0)[:, None, :]
        live = open_.any(axis=(1, 2))
        # Ended markets have no open pair; any pair will do for their ignored message.
        open_net = open_ | ~live[:, None, None]
        choice = None
        expert_pair = None  # (B,) the expert's pick, flat, where read
        if record or self.expert_pair:
            expert_pair = np.argmax(self._table[0].reshape(b, n * m), axis=1)  # -inf: closed
        if self.within_plan:
            choice = planned & open_
            choice |= open_net & ~choice.any(axis=(1, 2))[:, None, None]
        if self.expert_pair:  # that pair alone (ended markets: any, as above)
            pick = np.zeros((b, n * m), bool)
            pick[np.arange(b), expert_pair] = True
            choice = (pick.reshape(b, n, m) & open_) | ~live[:, None, None]
        sample = (not self.greedy) if sample is None else sample
        with torch.inference_mode():
            logits, h, value = self.net(
                *(_t(a, self.net) for a in x.arrays()), _t(open_net, self.net), value=record
            )
            if choice is not None:
                logits = _within(logits, _t(choice, self.net))
            pair = _pick(logits, self._u(obs, _PAIR) if sample else None)
            to, product = pair // m, pair % m
            level_ok = self._level_ok(obs, to, product)
            chosen = h[torch.arange(b), torch.from_numpy(pair).to(h.device)]
            plog = self.net.price_logits(chosen, _t(level_ok, self.net))
            level = _pick(plog, self._u(obs, _LEVEL) if sample else None)
            logp = (_logp(logits, pair) + _logp(plog, level)).cpu().numpy() if record else None
        price = self._price(obs, to, product, level)
        return SellerDecision(
            action=SellerAction(to=to, product=product, price=price),
            features=x,
            open=open_net,
            pair=pair,
            level=level,
            level_ok=level_ok,
            logp=logp,
            value=value.cpu().numpy() if record else None,
            expert_pair=expert_pair if record else None,
            choice=choice,
        )

    def _u(self, obs: SellerObs, stream: int) -> np.ndarray:
        return uniform(self.seed, obs.key, obs.turn, stream)

    def _bid(self, obs: SellerObs, to: np.ndarray, product: np.ndarray):
        ar = np.arange(obs.batch_size)
        on = obs.counter_product[ar, to] == product
        bid = np.where(on, obs.counter_price[ar, to], np.nan)
        return on & (bid >= obs.costs[ar, product]), bid

    def _level_ok(self, obs: SellerObs, to: np.ndarray, product: np.ndarray) -> np.ndarray:
        ok = np.ones((obs.batch_size, self.levels), bool)
        ok[:, len(self.offsets)] = self._bid(obs, to, product)[0]
        return ok

    def _price(self, obs, to, product, level) -> np.ndarray:
        ar = np.arange(obs.batch_size)
        lo, hi = obs.price_range
        s = obs.signals[ar, to, product]
        cap = self._mem.caps[ar, to, product]
        cost = obs.costs[ar, product]
        k = len(self.offsets)
        first_markup = self.expert_level + len(self.expert_offsets)
        n_markups = len(self.markups)
        offsets = np.asarray(self.offsets + (0.0,) + self.expert_offsets + (0.0,) * n_markups)
        base = np.where(level > k, self._table[1][ar, to, product], np.minimum(s, cap))
        p = np.maximum(base + offsets[level] * (hi - lo), cost)
        if n_markups:
            markup = np.asarray(self.markups)[np.clip(level - first_markup, 0, n_markups - 1)]
            p = np.where(level >= first_markup, cost * (1.0 + markup), p)
        # The expert's own price as it is (it may sit below cost, on a standing bid).
        p = np.where(level == self.expert_level, self._table[1][ar, to, product], p)
        p = cents(p, lo, hi)
        usable, bid = self._bid(obs, to, product)
        take = (level == k) & usable
        if take.any():
            p[take] = _at_most(bid[take], obs)
        return np.where(np.isfinite(p), p, lo)

    def evaluate(self, x, open_, pair, level, level_ok, choice=None) -> tuple[torch.Tensor, ...]:
        """Log-probabilities, entropies and values of stored decisions, with gradients;
        ``x`` the four feature tensors; ``choice`` the pairs chosen among (None: open)."""
        logits, h, value = self.net(*x, open_)
        if choice is not None:
            logits = _within(logits, choice)
        plog = self.net.price_logits(h[torch.arange(open_.shape[0]), pair], level_ok)
        logp = _logp(logits, pair) + _logp(plog, level)
        return logp, entropy(logits) + entropy(plog), value, logits, plog


# ---------------------------------------------------------------------- buyer
@dataclass(frozen=True, eq=False)
class BuyerDecision:
    action: BuyerAction
    features: np.ndarray  # (B, M, F) float32
    offered: np.ndarray  # (B, M) bool
    in_stock: np.ndarray  # (B, M) bool
    decision_ok: np.ndarray  # (B, 3) bool
    decision: np.ndarray  # (B,)
    product: np.ndarray  # (B,)
    level: np.ndarray  # (B,)
    logp: np.ndarray  # (B,)
    value: np.ndarray  # (B,)


class RLBuyer(BuyerPolicy):
    """A buyer driven by a ``BuyerNet``; see the module docstring. Agent kind."""

    kind = AGENT

    def __init__(
        self,
        net: BuyerNet | None = None,
        *,
        seed: int = 0,
        greedy: bool = True,
        shares: tuple[float, ...] = BID_SHARES,
        hidden: int = 48,
        disclosure: str = "never",
        disclosure_head: bool = False,
        bid_to_offer: bool = False,
    ) -> None:
        self.shares = tuple(float(x) for x in shares)
        self.bid_to_offer = bool(bid_to_offer)
        if net is None:
            feats = DISCLOSURE_FEATURES if disclosure_head or disclosure == "learned" else 0
            net = BuyerNet(BuyerNetConfig(BUYER_FEATURES, len(self.shares), hidden, feats))
        if net.cfg.levels != len(self.shares) or net.cfg.features != BUYER_FEATURES:
            raise ValueError("the network's levels or features do not fit this policy")
        if disclosure not in ("never", "learned"):
            raise ValueError(f"disclosure: never or learned, got {disclosure!r}")
        if disclosure == "learned" and not net.cfg.disclosure:
            raise ValueError("disclosure = learned needs a network with a disclosure head")
        self.net = net
        self.seed = int(seed)
        self.greedy = greedy
        self.disclosure = disclosure
        self.trace_disclosure: list | None = None  # a trainer's record of the choices
        self._mem: BuyerMemory | None = None

    def checkpoint_params(self) -> dict[str, list[float] | bool]:
        """What a checkpoint stores besides the network (``agents.rl.checkpoint``)."""
        out: dict[str, list[float] | bool] = {"shares": list(self.shares)}
        if self.bid_to_offer:  # newer than the first checkpoints' records
            out["bid_to_offer"] = True
        return out

    @classmethod
    def from_checkpoint_params(cls, params: dict) -> dict[str, tuple[float, ...] | bool]:
        """Constructor arguments from a checkpoint's params."""
        params = dict(params)
        to_offer = params.pop("bid_to_offer", False)
        if not isinstance(to_offer, bool):
            raise ValueError(f"bid_to_offer must be true or false, got {to_offer!r}")
        # A bid lies from the seller's cost (0) to the buyer's value or the offer (1).
        _check_levels(params, "shares", 0.0, 1.0, "[0, 1]", empty=False)
        return {**_float_tuples(params), "bid_to_offer": to_offer}

    def reset(self, batch_size: int) -> None:
        self._mem = None

    def restart(self, rows: np.ndarray) -> None:
        if self._mem is not None:
            self._mem.restart(rows)

    def act(self, obs: BuyerObs) -> BuyerAction:
        return self.decide(obs).action

    def decide(self, obs: BuyerObs, sample: bool | None = None) -> BuyerDecision:
        b, m = obs.values.shape
        shape = (b, obs.num_buyers, m)
        if self._mem is None or self._mem.low.shape != shape:
            self._mem = BuyerMemory.empty(*shape)
        x = buyer_features(obs, self._mem)
        self._mem.update(obs)
        offered = obs.offer_product[:, None] == np.arange(m)
        in_stock = obs.stock > 0
        stock_net = in_stock | ~in_stock.any(axis=1, keepdims=True)
        decision_ok = np.stack(
            [np.ones(b, bool), obs.offer_product >= 0, in_stock.any(axis=1)], axis=1
        )
        sample = (not self.greedy) if sample is None else sample
        with torch.inference_mode():
            dlog, plog, h, value = self.net(
                _t(x, self.net), _t(offered, self.net), _t(stock_net, self.net)
            )
            dlog = dlog.masked_fill(~_t(decision_ok, self.net), float("-inf"))
            decision = _pick(dlog, self._u(obs, _DECISION) if sample else None)
            product = _pick(plog, self._u(obs, _PRODUCT) if sample else None)
            blog = self.net.price_logits(h[np.arange(b), product])
            level = _pick(blog, self._u(obs, _BID) if sample else None)
            counter = decision == COUNTER
            logp = _logp(dlog, decision) + _t(counter, self.net) * (
                _logp(plog, product) + _logp(blog, level)
            )
        lo, hi = obs.price_range
        ar = np.arange(b)
        top = obs.values[ar, product]
        if self.bid_to_offer:
            on_offer = (product == obs.offer_product) & np.isfinite(obs.offer_price)
            top = np.where(on_offer, np.fmin(top, obs.offer_price), top)
        c = np.clip(obs.costs[ar, product], lo, top)
        bid = cents(c + np.asarray(self.shares)[level] * (top - c), lo, hi, down=True)
        action = BuyerAction(
            decision=np.where(decision_ok[ar, decision], decision, REJECT).astype(np.int64),
            product=np.where(counter, product, 0).astype(np.int64),
            price=np.where(counter, bid, lo),
        )
        return BuyerDecision(
            action,
            x,
            offered,
            stock_net,
            decision_ok,
            decision,
            product,
            level,
            logp.cpu().numpy(),
            value.cpu().numpy(),
        )

    def _u(self, obs: BuyerObs, stream: int) -> np.ndarray:
        return uniform(self.seed, obs.key, obs.turn, obs.buyer, stream)

    def disclose(self, is_agent: np.ndarray, key: np.ndarray, market=None) -> np.ndarray:
        """Never, or (``disclosure="learned"``) what the disclosure head says from each
        buyer's own values and the public market: logit > 0 in greedy mode, a keyed draw
        when sampling. With ``trace_disclosure`` set to a list, appends (features, choice,
        log-probability, value) for a trainer."""
        is_agent = np.asarray(is_agent, bool)
        if self.disclosure != "learned" or market is None:
            return np.zeros(is_agent.shape, bool)
        x = disclosure_features(market)
        with torch.inference_mode():
            logit, value = self.net.disclosure(_t(x, self.net))
            logit = logit.double().cpu().numpy()
        p = 1.0 / (1.0 + np.exp(-logit))
        n = is_agent.shape[1]
        if self.greedy:
            choice = logit > 0
        else:
            choice = uniform(self.seed, np.asarray(key)[:, None], np.arange(n), _DISCLOSE) < p
        if self.trace_disclosure is not None:
            logp = np.where(choice, -np.logaddexp(0, -logit), -np.logaddexp(0, logit))
            self.trace_disclosure.append((x, choice, logp, value.cpu().numpy()))
        return choice & is_agent

    def evaluate_disclosure(self, x: torch.Tensor, choice: torch.Tensor):
        """Log-probabilities, entropies and values of stored disclosure choices."""
        logit, value = self.net.disclosure(x)
        logp = -torch.nn.functional.softplus(torch.where(choice, -logit, logit))
        p = torch.sigmoid(logit)
        ent = torch.nn.functional.binary_cross_entropy_with_logits(logit, p, reduction="none")
        return logp, ent, value

    def evaluate(self, x, offered, in_stock, decision_ok, decision, product, level):
        """Log-probabilities, entropies and values of stored decisions, with gradients."""
        dlog, plog, h, value = self.net(x, offered, in_stock)
        dlog = dlog.masked_fill(~decision_ok, float("-inf"))
        blog = self.net.price_logits(h[torch.arange(x.shape[0]), product])
        counter = (decision == COUNTER).to(dlog.dtype)
        logp = _logp(dlog, decision) + counter * (_logp(plog, product) + _logp(blog, level))
        ent = entropy(dlog) + counter * (entropy(plog) + entropy(blog))
        return logp, ent, value


__all__ = ["RLSeller", "RLBuyer", "PRICE_OFFSETS", "BID_SHARES", "ACCEPT"]


def _within(logits: torch.Tensor, choice: torch.Tensor) -> torch.Tensor:
    """Pair logits (B, N*M) with the pairs outside ``choice`` (B, N, M) excluded."""
    return logits.masked_fill(~choice.reshape(logits.shape), float("-inf"))


def _assigned_table(table: tuple[np.ndarray, np.ndarray], pick: tuple[np.ndarray, np.ndarray]):
    """The expert's (values, prices) with each market's planned pick (buyer, product)
    raised to the best value (a hair above it, so that it alone is the best):
    ``RLSeller.assignment``."""
    value, price = table
    to, product = pick
    ar = np.arange(value.shape[0])
    top = value.reshape(value.shape[0], -1).max(axis=1)
    picked = value[ar, to, product]
    raise_ = np.isfinite(picked) & (picked < top)
    if raise_.any():
        value = value.copy()
        bump = top[raise_] + 1e-9 * np.maximum(np.abs(top[raise_]), 1.0)
        value[ar[raise_], to[raise_], product[raise_]] = bump
    return value, price


def _float_tuples(params: dict) -> dict[str, tuple[float, ...]]:
    return {k: tuple(float(x) for x in v) for k, v in params.items()}


def _check_levels(
    params: dict,
    name: str,
    low: float,
    high: float,
    interval: str,
    *,
    open_low: bool = False,
    empty: bool = True,
) -> None:
    """Checkpoint param ``name`` (when present): a list of finite numbers in [low, high]
    (``open_low``: above ``low``), non-empty unless ``empty``."""
    if name not in params:
        return
    value = params[name]
    if not isinstance(value, list | tuple) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in value
    ):
        raise ValueError(f"{name} must be a list of numbers, got {shown(value, 60)}")
    if not value and not empty:
        raise ValueError(f"{name} must not be empty")
    for x in value:
        if not (finite_float(x) is not None and (x > low if open_low else x >= low) and x <= high):
            raise ValueError(f"{name}: each must be in {interval}, got {shown(x, 60)}")
