"""Per-side environments over the batched engine: the one game loop of the project.

``SellerEnv`` hands a learner the seller's side of B markets of one config and plays
the buyers inside; ``BuyerEnv`` hands it the buyers' side and plays the seller inside.
``agents.rollout.play_batch`` (tournaments, evaluation), the trainers and the
Gymnasium/PettingZoo adapters all run on these two classes. The contract:

* ``reset(seed=None) -> obs``: B fresh markets (the seed, when given, replaces the
  environment's root seed).
* ``step(action) -> Step(obs, reward, done, info)``: the learner's action for every
  live market, the opponent's reply, the next observation.
* ``done[b]``: the market of row b ended during this step. With ``autoreset`` the row
  starts a fresh market at once and ``obs`` already shows the new market (same-step
  reset), so no row idles; a stateful learner calls its ``restart(done)``. Without,
  the row stays ended, its actions are ignored and its rewards are 0 until ``reset``.
  In a ``BuyerEnv``, a market that ends on the seller's message that asks another
  market restarts at the start of the next step (the engine restarts between turns, not
  while answers are pending); its row asks nothing meanwhile.
* ``SellerEnv.send(action)`` / ``finish(answer)``: the two halves of ``step`` (the seller's
  messages; the asked buyers' answers), for an adapter whose buyers answer from outside
  (the PettingZoo game); ``restart(rows)``: fresh markets in those rows now, for an
  adapter that resets a row on the step after it ended (Gymnasium's next-step autoreset).
* ``info["episodes"]`` (with rewards on): metrics of the markets that ended in this
  step: ``rows``, ``index`` (the market index), and per market ``profit``,
  ``buyer_surplus``, ``w_star``, ``capture``, ``efficiency``, ``trades``,
  ``turns_used``, ``seller_violations``, ``buyer_violations`` and ``return`` (the
  learner's rewards summed over the market: the seller's, or the sum over its buyers).
  ``capture`` and ``efficiency`` are NaN where W* is 0 (not defined there; the
  Gymnasium and PettingZoo adapters leave them out of their infos).
  ``BuyerEnv``'s first step also brings the markets that ended in ``reset``, on seller
  messages that asked nobody (their rows are not marked done: the learner never played
  them).

Rewards are ``arena.rewards``'s, paid turn by turn so that a market's rewards sum to
its episode reward: the seller gets ``(profit gained) / W*_T - penalty * violations``;
each buyer its own surplus gained, on the price-range scale, as a (B, N) array (buyers
are independent learners sharing one network; nothing is pooled).

Markets: market k of an environment is drawn from (config, seed, k). Row b starts with
market b; each restart takes the next unused index, rows in order, so a run is a pure
function of the seed and the actions. ``markets="keyed"`` (default) draws them with
``arena.generator.generate_keyed_batch`` (fast; for training), ``"exact"`` with
``generate_batch`` (the markets every tournament and evaluation meets).

Opponents: one policy, or several with ``weights``. Rows are split between them in
contiguous blocks (largest remainder), each row is played by one opponent for the
environment's lifetime, and each opponent decides only its rows, as a sub-batch (a
batch-invariant policy decides a sub-batch as it decides those rows of the whole), so
one batch mixes opponent types at the cost of one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.base import AGENT, HUMAN, BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.population import Population
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import MarketBatch, generate_batch, generate_keyed_batch, replace_rows
from arena.metrics import welfare_bounds
from arena.observation import BuyerObs, SellerObs, take_rows
from arena.rewards import VIOLATION_PENALTY, profit_scale
from arena.words import plural

MARKET_SOURCES = ("keyed", "exact")


@dataclass(frozen=True, eq=False)
class Step:
    """What ``step`` returns; ``reward`` is (B,) for the seller, (B, N) for the buyers."""

    obs: SellerObs | BuyerObs
    reward: np.ndarray | None
    done: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


def split_rows(
    batch_size: int, weights: Sequence[float], names: Sequence[str] | None = None
) -> list[np.ndarray]:
    """Row indices of each opponent: contiguous blocks in proportion to ``weights``
    (largest remainder, ties to the earlier opponent). A positive weight that would get
    no row is an error (that opponent would never be played); ``names`` name them in it."""
    w = np.asarray(weights, float)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(
            f"opponent weights must be non-negative with a positive sum, got {weights}"
        )
    raw = w / w.sum() * batch_size
    counts = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: batch_size - counts.sum()]] += 1
    for k in np.flatnonzero((w > 0) & (counts == 0)):
        who = names[k] if names is not None else f"opponent {k}"
        raise ValueError(
            f"{batch_size} rows leave {who} (weight {w[k]:g}) no rows: each opponent plays its "
            "share of the rows, so use more rows (markets, envs) or fewer opponents"
        )
    edges = np.concatenate([[0], np.cumsum(counts)])
    return [np.arange(edges[k], edges[k + 1]) for k in range(w.size)]


def check_kinds(
    buyer: BuyerPolicy,
    markets: MarketConfig | Sequence[MarketConfig],
    label: str,
    where: str,
    drawn: str = "the family can draw",
) -> None:
    """Refuse a population split by kind (``human=H,agent=A``) that would play one member
    only: its members play the buyers of the kinds each market draws (``agent_share``),
    so where no market has an agent buyer (or none a human one) it plays as the other
    member alone would, and says nothing. ``markets``: the config of a fixed market, or
    the markets a family can draw (those with the most agent and the most human buyers,
    ``agents.rl.config.ConfigFamily.kind_ends``), refused only if none of them has a
    buyer of that kind. ``label`` names the population in the message, ``where`` where
    agent_share is set, ``drawn`` which markets a list of configs stands for. A
    population by share, or one entry, always passes."""
    if not isinstance(buyer, Population) or buyer.shares is not None:
        return
    one = markets if isinstance(markets, MarketConfig) else None
    configs = [one] if one is not None else list(markets)
    if all(c.num_agents == 0 for c in configs):
        what = (
            f"no buyer of this market is an agent (agent_share = {one.agent_share:g} of "
            f"{plural(one.buyers, 'buyer')})"
            if one is not None
            else f"no market {drawn} has an agent buyer (agent_share at most "
            f"{max(c.agent_share for c in configs):g})"
        )
        raise ValueError(
            f"{label} splits buyers by kind, but {what}; set agent_share in {where}, or "
            "name one entry"
        )
    if all(c.num_agents == c.buyers for c in configs):
        what = (
            f"every buyer of this market is an agent (agent_share = {one.agent_share:g})"
            if one is not None
            else f"every buyer of every market {drawn} is an agent "
            f"(agent_share at least {min(c.agent_share for c in configs):g})"
        )
        raise ValueError(
            f"{label} splits buyers by kind, but {what}; lower agent_share in {where}, or "
            "name one entry"
        )


def merge_actions(batch_size: int, parts: list[tuple[np.ndarray, Any]], cls: type) -> Any:
    """One action for the whole batch from (rows, action of those rows) parts."""
    if len(parts) == 1 and parts[0][0].size == batch_size:
        return parts[0][1]
    names = [f.name for f in dataclasses.fields(cls) if f.name not in ("malformed", "texts")]
    out = {n: np.zeros(batch_size, _common_dtype([getattr(a, n) for _, a in parts])) for n in names}
    malformed = np.zeros(batch_size, bool)
    texts: list[str | None] | None = None  # None in rows whose policy wrote no text
    for rows, action in parts:
        for n in names:
            out[n][rows] = getattr(action, n)
        if action.malformed is not None:
            malformed[rows] = action.malformed
        if action.texts is not None:
            texts = texts if texts is not None else [None] * batch_size
            for r, t in zip(rows.tolist(), action.texts, strict=True):
                texts[r] = t
    return cls(**out, malformed=malformed if malformed.any() else None, texts=texts)


def _common_dtype(arrays: list) -> np.dtype:
    """The dtype that holds every part's entries: the first part's alone would cut the
    float prices of the others to a policy's whole-number ones (object where none does:
    the engine reads such an array entry by entry)."""
    try:
        return np.result_type(*(np.asarray(a) for a in arrays))
    except TypeError:
        return np.dtype(object)


class _MarketEnv:
    """What both sides share: markets, opponents, restarts, episode records."""

    def __init__(
        self,
        config: MarketConfig,
        opponents: Any,
        batch_size: int,
        *,
        seed: int = 0,
        autoreset: bool = True,
        markets: str = "keyed",
        weights: Sequence[float] | None = None,
        rewards: bool = True,
        batch: MarketBatch | None = None,
        dialogue: bool | np.ndarray | None = None,
        prompts: bool = False,
    ) -> None:
        if markets not in MARKET_SOURCES:
            raise ValueError(
                f"markets: expected one of {', '.join(MARKET_SOURCES)}, got {markets!r}"
            )
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.config = config
        self.opponents = list(opponents) if isinstance(opponents, list | tuple) else [opponents]
        if not self.opponents:
            raise ValueError(f"{type(self).__name__}: no opponent to play")
        for k, opp in enumerate(self.opponents):
            if isinstance(opp, self._wrong_side) or not callable(getattr(opp, "act", None)):
                raise TypeError(
                    f"{type(self).__name__} plays {self._opponent_side} policies inside; "
                    f"opponent {k} is {type(opp).__name__}"
                )
        if weights is None:
            weights = [1.0] * len(self.opponents)
        if len(weights) != len(self.opponents):
            raise ValueError("one weight per opponent")
        self.batch_size = batch_size
        self.seed = int(seed)
        self.autoreset = autoreset
        self.markets = markets
        self.rewards = rewards
        self.groups = split_rows(batch_size, weights)
        self._given = batch  # play this batch first (play_batch); later markets are drawn
        if dialogue is None:  # on when an opponent reads text; a text learner asks for it
            dialogue = any(getattr(o, "reads_text", False) for o in self.opponents)
        # A (B,) mask keeps the dialogue of those rows only (transcripts of a few markets).
        self.dialogue = dialogue if isinstance(dialogue, np.ndarray) else bool(dialogue)
        self.prompts = prompts
        self.engine: BatchedMarket | None = None

    # ------------------------------------------------------------- checks
    def _started(self, what: str) -> BatchedMarket:
        if self.engine is None:
            raise RuntimeError(f"{type(self).__name__}.{what}: call reset() first")
        return self.engine

    def _rows_mask(self, rows: Any) -> np.ndarray:
        """``rows`` as a (B,) bool mask; anything else is a clear error."""
        mask = np.asarray(rows)
        if mask.dtype != bool or mask.shape != (self.batch_size,):
            raise ValueError(
                f"rows: expected a bool mask of shape ({self.batch_size},), got "
                f"{mask.dtype} of shape {mask.shape}"
            )
        return mask

    @staticmethod
    def _check_action(action: Any, cls: type) -> None:
        if not isinstance(action, cls):
            raise TypeError(f"step: expected a {cls.__name__}, got {type(action).__name__}")

    # ------------------------------------------------------------- markets
    def _draw(self, indices: np.ndarray) -> MarketBatch:
        if self.markets == "keyed":
            return generate_keyed_batch(self.config, self.seed, indices)
        return generate_batch(self.config, self.seed, indices)

    def _with_kinds(self, raw: MarketBatch) -> tuple[MarketBatch, np.ndarray]:
        """The batch with each buyer's kind as the side that plays it decides, and the
        buyers' wishes to disclose (voluntary rule)."""
        kinds, wish = self._kinds(raw)
        kinds.flags.writeable = False
        return dataclasses.replace(raw, is_agent=kinds), wish

    def _start(self, raw: MarketBatch) -> None:
        self._raw = raw
        batch, wish = self._with_kinds(raw)
        self.engine = BatchedMarket(batch, wish, dialogue=self.dialogue, prompts=self.prompts)
        self._next_index = int(raw.indices.max()) + 1
        self._scale = None
        self._w_star = None
        if self.rewards:
            self._w_star = welfare_bounds(raw)
            self._scale = profit_scale(self._w_star, self.config.width)
        self._returns = np.zeros(self.batch_size)

    def _restart(self, rows: np.ndarray) -> None:
        """Fresh markets in ``rows`` (bool), the next unused indices in row order."""
        k = int(rows.sum())
        idx = np.arange(self._next_index, self._next_index + k)
        self._next_index += k
        new = self._draw(idx)
        self._raw = replace_rows(self._raw, rows, new)
        batch, wish = self._with_kinds(self._raw)
        self.engine.restart(rows, batch, wish)
        if self.rewards:
            w = welfare_bounds(new)
            self._w_star[rows] = w
            self._scale[rows] = profit_scale(w, self.config.width)
        self._returns[rows] = 0.0
        for opp, g in zip(self.opponents, self.groups, strict=True):
            sub = rows[g]
            if sub.any():
                opp.restart(sub)
                if getattr(opp, "sees_private", False):
                    opp.reveal(_sub_batch(self.engine.batch, g), sub)

    def _reset_opponents(self) -> None:
        for opp, g in zip(self.opponents, self.groups, strict=True):
            opp.reset(g.size)
            if getattr(opp, "sees_private", False):
                opp.reveal(_sub_batch(self.engine.batch, g))

    def _fresh(self, seed: int | None) -> None:
        if seed is not None and self._given is not None and int(seed) != self._given.seed:
            # The given batch is played first, whatever the seed: say so, not play it.
            raise ValueError(
                f"reset(seed={seed}): this environment plays the batch it was given first "
                f"(markets of seed {self._given.seed}); reset it without a seed"
            )
        if seed is not None:
            self.seed = int(seed)
        if self._given is not None:
            raw, self._given = self._given, None
            if raw.size != self.batch_size or raw.config != self.config:
                raise ValueError("the given batch must have batch_size markets of the config")
        else:
            raw = self._draw(np.arange(self.batch_size))
        self._start(raw)
        self._reset_opponents()

    def _episodes(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Metrics of the markets in ``rows`` (bool), which have just ended."""
        e = self.engine
        got = e.bought[rows] >= 0
        surplus = e.buyer_surplus()[rows].sum(axis=1)
        profit = e.profit[rows]
        out = {
            "rows": np.flatnonzero(rows),
            "index": self._raw.indices[rows].copy(),
            "profit": profit.copy(),
            "buyer_surplus": surplus,
            "trades": got.sum(axis=1).astype(float),
            "turns_used": e.turn[rows].astype(float),
            "seller_violations": e.seller_violations[rows].sum(axis=1).astype(float),
            "buyer_violations": e.buyer_violations[rows].sum(axis=1).astype(float),
            "return": self._returns[rows].copy(),
        }
        if self._w_star is not None:
            w = self._w_star[rows]
            ok = w > 0
            safe = np.where(ok, w, 1.0)
            out["w_star"] = w.copy()
            out["capture"] = np.where(ok, profit / safe, np.nan)
            out["efficiency"] = np.where(ok, (profit + surplus) / safe, np.nan)
        return out

    def _kinds(self, raw: MarketBatch) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


def _sub_batch(batch: MarketBatch, rows: np.ndarray) -> MarketBatch:
    if rows.size == batch.size:
        return batch
    return dataclasses.replace(
        batch,
        **{
            n: getattr(batch, n)[rows]
            for n in ("indices", "values", "costs", "inventory", "signals", "is_agent", "keys")
        },
    )


class SellerEnv(_MarketEnv):
    """The seller's side: the learner writes one message per market, the buyers answer.

    ``buyers``: a buyer policy or population, or a list of them (with ``weights``) that
    split the rows. ``penalty``: the reward's cost per seller violation.
    """

    _wrong_side, _opponent_side = SellerPolicy, "buyer"

    def __init__(
        self,
        config: MarketConfig,
        buyers: BuyerPolicy | Sequence[BuyerPolicy],
        batch_size: int = 1024,
        *,
        penalty: float = VIOLATION_PENALTY,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, buyers, batch_size, **kwargs)
        self.penalty = penalty

    @classmethod
    def from_batch(cls, batch: MarketBatch, buyer: BuyerPolicy, **kwargs: Any) -> SellerEnv:
        """An environment that plays exactly ``batch`` (no autoreset: its markets are the
        episode) at its first ``reset()``; a later ``reset`` draws the markets of indices 0
        to B - 1 of ``batch``'s config and seed, as any environment does."""
        kwargs.setdefault("autoreset", False)
        return cls(batch.config, buyer, batch.size, seed=batch.seed, batch=batch, **kwargs)

    def _kinds(self, raw: MarketBatch) -> tuple[np.ndarray, np.ndarray]:
        if len(self.opponents) == 1:
            buyer = self.opponents[0]
            kinds = np.asarray(buyer.kinds(raw.is_agent, raw.keys), bool)
            return kinds, buyer.disclose(kinds, raw.keys, raw)
        kinds = np.zeros(raw.is_agent.shape, bool)
        wish = np.zeros(raw.is_agent.shape, bool)
        for buyer, g in zip(self.opponents, self.groups, strict=True):
            kinds[g] = buyer.kinds(raw.is_agent[g], raw.keys[g])
            wish[g] = buyer.disclose(kinds[g], raw.keys[g], _sub_batch(raw, g))
        return kinds, wish

    @property
    def batch(self) -> MarketBatch:
        """The markets being played (buyer kinds as the buyers play them)."""
        return self.engine.batch

    def reset(self, seed: int | None = None) -> SellerObs:
        self._fresh(seed)
        return self.engine.seller_observation()

    def step(self, action: SellerAction) -> Step:
        self._check_action(action, SellerAction)
        prompt = self.send(action)
        answer = None
        if prompt is not None:
            if len(self.opponents) == 1:
                answer = self.opponents[0].act(prompt)
            else:
                parts = [
                    (g, o.act(take_rows(prompt, g)))
                    for o, g in zip(self.opponents, self.groups, strict=True)
                ]
                answer = merge_actions(self.batch_size, parts, BuyerAction)
        return self.finish(answer)

    def send(self, action: SellerAction) -> BuyerObs | None:
        """The first half of ``step``: the seller's messages. Returns the view of the buyers
        they ask (None: nobody is asked); ``finish`` takes their answers. ``step`` is
        ``send``, the opponents' answers, ``finish``; an adapter whose buyers answer from
        outside (the PettingZoo environment) calls the two halves itself."""
        e = self._started("send")
        self._check_action(action, SellerAction)
        if e.pending.any():
            raise RuntimeError(
                "SellerEnv.send: the buyers the last messages asked have not answered; "
                "call finish(answer) first"
            )
        self._live = ~e.done
        if self.rewards:
            self._profit0 = e.profit.copy()
            self._viol0 = e.seller_violations.sum(axis=1)
        return e.offer(action.to, action.product, action.price, action.malformed, action.texts)

    def finish(self, answer: BuyerAction | None) -> Step:
        """The second half of ``step``: the asked buyers' answers (None when ``send`` asked
        nobody), rewards, episode records and restarts."""
        e = self.engine
        if answer is not None:
            e.answer(answer.decision, answer.product, answer.price, answer.malformed, answer.texts)
        reward = None
        done = e.done & self._live
        info: dict[str, Any] = {}
        if self.rewards:
            gained = (e.profit - self._profit0) / self._scale
            reward = gained - self.penalty * (e.seller_violations.sum(axis=1) - self._viol0)
            self._returns += reward
            if done.any():
                info["episodes"] = self._episodes(done)
        if self.autoreset and done.any():
            self._restart(done)
        return Step(e.seller_observation(), reward, done, info)

    def restart(self, rows: np.ndarray) -> None:
        """Fresh markets in ``rows`` (a (B,) bool mask) now, the next unused indices in row
        order: the per-row reset of an environment without ``autoreset``, for an adapter
        that resets a row one step after its market ended (Gymnasium's next-step reset)."""
        self._started("restart")
        self._restart(self._rows_mask(rows))


class BuyerEnv(_MarketEnv):
    """The buyers' side: the seller (inside) writes to one buyer per market, the learner
    answers for that buyer. The learner plays every buyer of every market.

    ``sellers``: a seller policy, or a list of them (with ``weights``) that split the
    rows. ``kind``: the learner's kind (``agent`` by default); ``disclose``: whether its
    agents disclose under the voluntary rule (True, False, or a function of (is_agent,
    keys, market) giving a (B, N) mask, like ``BuyerPolicy.disclose``).

    Observations are ``BuyerObs`` of the buyer each market asks; rows with
    ``needs_answer`` False wait for no answer (their market ended, or the seller's
    message asked nothing) and their actions are ignored. Between two answers the seller
    may send messages that ask nothing (invalid ones, or offers that meet a standing bid
    and trade at once); ``step`` plays them, so every step asks at least one market,
    unless every market ended on such messages during the step (with autoreset, a seller
    that never asks): then the observation asks nobody.
    """

    _wrong_side, _opponent_side = BuyerPolicy, "seller"

    def __init__(
        self,
        config: MarketConfig,
        sellers: SellerPolicy | Sequence[SellerPolicy],
        batch_size: int = 1024,
        *,
        kind: str = AGENT,
        disclose: bool | Callable[[np.ndarray, np.ndarray, MarketBatch], np.ndarray] = False,
        **kwargs: Any,
    ) -> None:
        if kind not in (AGENT, HUMAN):
            raise ValueError(f"kind: expected {AGENT!r} or {HUMAN!r}, got {kind!r}")
        super().__init__(config, sellers, batch_size, **kwargs)
        self.kind = kind
        self.disclose = disclose

    def _kinds(self, raw: MarketBatch) -> tuple[np.ndarray, np.ndarray]:
        kinds = np.full(raw.is_agent.shape, self.kind == AGENT)
        if callable(self.disclose):
            wish = np.asarray(self.disclose(kinds, raw.keys, raw), bool)
        else:
            wish = np.full(kinds.shape, bool(self.disclose))
        return kinds, wish

    def reset(self, seed: int | None = None) -> BuyerObs:
        """B fresh markets, played until the seller's messages ask some buyer. Markets
        that end before that (messages that ask nobody) are recorded in the first
        ``step``'s ``info["episodes"]``; their rows are not marked done there (the learner
        never played them)."""
        self._fresh(seed)
        self._surplus = np.zeros(self.engine.values.shape[:2])
        self._reported = np.zeros(self.batch_size, bool)  # ended and recorded, not restarted
        self._records: list[dict[str, np.ndarray]] = []  # episodes for the next step's info
        self._begin_step()
        return self._seller_turns()

    def step(self, action: BuyerAction) -> Step:
        e = self._started("step")
        self._check_action(action, BuyerAction)
        self._begin_step()
        if e.pending.any():
            e.answer(action.decision, action.product, action.price, action.malformed, action.texts)
        obs = self._seller_turns()
        self._collect()
        info: dict[str, Any] = {}
        if self._records:
            parts, self._records = self._records, []
            info["episodes"] = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        return Step(obs, self._reward if self.rewards else None, self._ended, info)

    def _begin_step(self) -> None:
        self._reward = np.zeros_like(self._surplus)
        self._ended = np.zeros(self.batch_size, bool)

    def _collect(self) -> None:
        """Add the surplus gained since the last look to the step's (B, N) reward."""
        now = self.engine.buyer_surplus()
        if self.rewards:
            gained = (now - self._surplus) / self.config.width
            self._reward += gained
            self._returns += gained.sum(axis=1)
        self._surplus = now

    def _record(self) -> None:
        """Record the markets that have ended since the last look: their rewards, their
        episode records (kept for the step's ``info``) and ``done``."""
        ended = self.engine.done & ~self._reported
        if ended.any():
            self._collect()
            self._records.append(self._episodes(ended))
            self._ended |= ended
            self._reported |= ended

    def _seller_turns(self) -> BuyerObs:
        """Seller messages until some market waits for an answer. Markets that end on the
        way, on the message that asks another market too, are recorded at once. With
        autoreset they restart before the seller's next message: the engine restarts
        between turns, not while answers are pending, so a market that ended on the
        message asking another restarts at the start of the next step (its row asks
        nothing meanwhile). The observation asks nobody when every market has ended
        (without autoreset) or, with autoreset, when every market has ended on messages
        that asked nobody since the call began (a seller that never asks)."""
        e = self.engine
        self._record()  # markets the answers ended
        idle = np.zeros(self.batch_size, bool)  # ended on messages that asked nobody
        while True:
            if self.autoreset and e.done.any():
                rows = e.done.copy()  # all recorded
                self._restart(rows)
                self._surplus[rows] = 0.0
                self._reported[rows] = False
            if e.all_done or idle.all():
                return e.buyer_observation()  # asks nobody
            obs = self._offer()
            self._record()
            if obs is not None:
                return obs
            idle |= e.done

    def _offer(self) -> BuyerObs | None:
        e = self.engine
        obs = e.seller_observation()
        if len(self.opponents) == 1:
            a = self.opponents[0].act(obs)
        else:
            parts = [
                (g, o.act(take_rows(obs, g)))
                for o, g in zip(self.opponents, self.groups, strict=True)
            ]
            a = merge_actions(self.batch_size, parts, SellerAction)
        return e.offer(a.to, a.product, a.price, a.malformed, a.texts)
