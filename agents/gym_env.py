"""Gymnasium environments of the market, on top of ``agents.env`` (its one game loop).

* ``SellerGymEnv`` (``"arena/Seller-v0"``): the learner is the seller of one market;
  the buyers are played inside by an opponent named like everywhere else (a registry
  name, a population such as ``noisy_human:0.5,strategic:0.5``, or a checkpoint path),
  or by several with weights (one drawn per market).
* ``SellerVectorEnv`` (``gymnasium.make_vec("arena/Seller-v0", num_envs=B)``): B
  markets on the batched engine (one ``SellerEnv`` of B rows, not B copies of the
  single environment), several opponents splitting the rows by weight.
* ``BuyerGymEnv`` (``"arena/Buyer-v0"``): the learner is one buyer (a seat) of each
  market; the seller is an opponent, the other buyers are played by ``others``.

Spaces (``agents.spaces`` documents every entry): a ``Dict`` of ``observation`` (a
float32 vector of fixed size for the config's N and M, entries in [-1, 1]) and
``action_mask`` (int8), and a ``Discrete`` action: the convention of RLlib's and
SB3-contrib's masking (``action_masks()`` is there too). A masked action is still played,
as the violation or refusal it is in the market. An action outside the space (what
``Discrete.contains`` accepts: a Python or numpy integer, or a 0-d integer array, in
range; but not a bool, which it counts as an int) is refused with a TypeError or
ValueError that names the space and what was given, before anything is played; the
vector environment takes integers of shape (B,) (``agents.spaces.check_actions``).

Episode metrics come in the ``info`` of the step that ends a market (``EPISODE_KEYS``,
``agents.env``); ``capture`` and ``efficiency`` are left out where the market's W* is
0 (they are not defined there), so no info holds NaN. The vector environment's infos
follow Gymnasium's convention: a (B,) array per metric with its mask under ``"_" + name``,
false in the rows that did not end or where the metric is not defined.

Rewards are ``arena.rewards``'s, paid turn by turn: the seller gets (profit gained) /
W*_T - penalty x violations; the buyer its own surplus gained over the range width.
Episodes end when the market ends (the buyer's also when its seat has bought or left);
nothing truncates them (a market lasts at most T turns).

Seeding: ``reset(seed=s)`` plays market 0 of root seed s (``arena.generator``: market k
of a root seed is the same instance wherever it is played); every later ``reset()``
plays the next index. Unseeded, the root seed is drawn from ``np_random``. The vector
environment plays markets 0..B-1 of its seed, then each restarted row the next unused
index, in row order, and resets a row on the step after its market ended (Gymnasium's
next-step autoreset, the mode RLlib expects).

Registration happens on import: ``import agents.gym_env`` then ``gymnasium.make(
"arena/Seller-v0", config=..., buyers=...)``, or in one string
``gymnasium.make("agents.gym_env:arena/Seller-v0", ...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from agents import registry
from agents.base import AGENT, BuyerPolicy, SellerPolicy
from agents.env import BuyerEnv, SellerEnv, check_kinds, split_rows
from agents.spaces import BUYER_SHARES, SELLER_OFFSETS, BuyerSpace, SellerSpace, check_action
from arena.config import MarketConfig, load_market_file
from arena.engine import BatchedMarket
from arena.generator import generate_batch, generate_keyed_batch
from arena.observation import BuyerObs
from arena.rewards import VIOLATION_PENALTY

SELLER_ID = "arena/Seller-v0"
BUYER_ID = "arena/Buyer-v0"
EPISODE_KEYS = (
    "profit",
    "buyer_surplus",
    "w_star",
    "capture",
    "efficiency",
    "trades",
    "turns_used",
    "seller_violations",
    "buyer_violations",
    "return",
)
_SEAT_TRIES = 1000  # markets a buyer environment may skip whose seller never asks its seat


# ---------------------------------------------------------------------- shared pieces
def market_config(config: MarketConfig | dict | str | None) -> MarketConfig:
    """A config given as a ``MarketConfig``, a ``[market]``-schema dict, or a TOML file."""
    if config is None:
        return MarketConfig()
    if isinstance(config, MarketConfig):
        return config
    if isinstance(config, dict):
        return MarketConfig.from_dict(config)
    return load_market_file(str(config))


def _names(opponents: str | Sequence[str]) -> list[str]:
    return [opponents] if isinstance(opponents, str) else list(opponents)


def _buyers(names: list[str], seed: int, config: MarketConfig) -> list[BuyerPolicy]:
    """The buyer opponents; one split by kind must meet both kinds in ``config``
    (``agents.env.check_kinds``)."""
    out = [registry.make_buyers(n, seed=seed) for n in names]
    for name, buyer in zip(names, out, strict=True):
        check_kinds(buyer, config, f"buyers {name!r}", "the config")
    return out


def _sellers(names: list[str], seed: int) -> list[SellerPolicy]:
    return [registry.make(n, "seller", seed=seed) for n in names]


def _weights(weights: Sequence[float] | None, k: int) -> np.ndarray:
    w = np.ones(k) if weights is None else np.asarray(weights, float)
    if w.shape != (k,) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"weights: one non-negative number per opponent ({k}), some positive")
    return w / w.sum()


def _draw(k: int, weights: np.ndarray, root: int, index: int, stream: int) -> int:
    """Which of k choices market ``index`` of ``root`` gets: a pure function of the three."""
    if k == 1:
        return 0
    u = np.random.default_rng([root, index, stream]).random()
    return int(min(np.searchsorted(np.cumsum(weights), u, side="right"), k - 1))


def seller_spaces(space: SellerSpace) -> tuple[spaces.Dict, spaces.Discrete]:
    """(observation space, action space) of one seller."""
    obs = spaces.Dict(
        {
            "observation": spaces.Box(-1.0, 1.0, (space.size,), np.float32),
            "action_mask": spaces.Box(0, 1, (space.num_actions,), np.int8),
        }
    )
    return obs, spaces.Discrete(space.num_actions)


def buyer_spaces(space: BuyerSpace) -> tuple[spaces.Dict, spaces.Discrete]:
    """(observation space, action space) of one buyer."""
    obs = spaces.Dict(
        {
            "observation": spaces.Box(-1.0, 1.0, (space.size,), np.float32),
            "action_mask": spaces.Box(0, 1, (space.num_actions,), np.int8),
        }
    )
    return obs, spaces.Discrete(space.num_actions)


def buyer_view(engine: BatchedMarket, buyer: int) -> BuyerObs:
    """Buyer ``buyer``'s view of every market when it is not being asked (no offer)."""
    b = engine.shape[0]
    ar = np.arange(b)
    i = np.full(b, int(buyer))
    return BuyerObs(
        turns=engine.turns,
        price_range=(engine.lo, engine.hi),
        patience=engine.patience,
        needs_answer=np.zeros(b, bool),
        buyer=i,
        values=engine.values[ar, i],
        costs=engine.costs,
        stock=engine.stock.copy(),
        offer_product=np.full(b, -1),
        offer_price=np.full(b, np.nan),
        n_messages=engine.n_messages[ar, i],
        first_price=engine.first_price[ar, i],
        counter_product=engine.counter_product[ar, i],
        counter_price=engine.counter_price[ar, i],
        is_agent=engine.is_agent[ar, i],
        disclosed=engine.disclosed[ar, i],
        turn=engine.turn.copy(),
        key=engine.batch.keys,
        num_buyers=engine.shape[1],
        dialogue=engine.dialogue,
    )


def _episode_info(episodes: dict[str, np.ndarray], row: int = 0) -> dict[str, float]:
    """Row ``row``'s episode metrics; one that is not defined (``capture`` and
    ``efficiency`` where W* is 0, NaN in ``agents.env``) is left out."""
    k = int(np.flatnonzero(episodes["rows"] == row)[0])
    out = {
        name: float(episodes[name][k])
        for name in EPISODE_KEYS
        if name in episodes and np.isfinite(episodes[name][k])
    }
    out["market"] = int(episodes["index"][k])
    return out


def _vector_info(episodes: dict[str, np.ndarray], num_envs: int) -> dict[str, np.ndarray]:
    """Episode metrics of the rows that ended, by Gymnasium's vector convention: each
    metric a (B,) array with its mask under ``"_" + name``. A row's metric that is not
    defined (NaN: ``capture`` and ``efficiency`` where W* is 0) is masked out (0 in the
    array); a metric no row defines is left out."""
    info: dict[str, np.ndarray] = {}
    for name in (*EPISODE_KEYS, "index"):
        if name not in episodes:
            continue
        values = np.asarray(episodes[name], float)
        ok = np.isfinite(values)
        if not ok.any():
            continue
        col, mask = np.zeros(num_envs), np.zeros(num_envs, bool)
        col[episodes["rows"][ok]] = values[ok]
        mask[episodes["rows"][ok]] = True
        info[name], info["_" + name] = col, mask
    return info


class MarketSeeds:
    """Root seed and next market index of a single-market environment: ``reset(seed=s)``
    plays market 0 of root s, each later ``reset()`` the next index; unseeded, the root
    is drawn from the environment's generator."""

    _root: int | None = None
    _next: int = 0

    def _next_market(self, seed: int | None, rng: np.random.Generator) -> tuple[int, int]:
        if seed is not None:
            self._root, self._next = int(seed), 0
        elif self._root is None:
            self._root, self._next = int(rng.integers(2**31 - 1)), 0
        index = self._next
        self._next += 1
        return self._root, index


# ---------------------------------------------------------------------- seller
class SellerGymEnv(MarketSeeds, gym.Env):
    """One market; the learner is its seller (module docstring).

    ``config``: a ``MarketConfig``, a ``[market]`` dict or a TOML file (its N and M fix
    the spaces). ``buyers``: an opponent (registry name, population, checkpoint path) or
    a list of them, one drawn per market by ``weights``; a population split by kind
    (``human=H,agent=A``) needs a config with buyers of both kinds (0 < agent_share x
    buyers, rounded, < buyers), else it is refused (``agents.env.check_kinds``).
    ``penalty``: the reward's cost per violation. ``offsets``: the price levels
    (``agents.spaces.SellerSpace``). ``opponent_seed``: the opponents' dice.
    ``render_mode="ansi"``: ``render()`` returns the seller's view of the market as text.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        config: MarketConfig | dict | str | None = None,
        buyers: str | Sequence[str] = "truthful",
        *,
        weights: Sequence[float] | None = None,
        penalty: float = VIOLATION_PENALTY,
        offsets: Sequence[float] = SELLER_OFFSETS,
        opponent_seed: int = 0,
        render_mode: str | None = None,
    ) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: None or 'ansi', got {render_mode!r}")
        self.config = market_config(config)
        self.space = SellerSpace(self.config.buyers, self.config.products, tuple(offsets))
        self.observation_space, self.action_space = seller_spaces(self.space)
        self.opponents = _buyers(_names(buyers), opponent_seed, self.config)
        self.weights = _weights(weights, len(self.opponents))
        self.penalty = penalty
        self.render_mode = render_mode
        self._env: SellerEnv | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        root, index = self._next_market(seed, self.np_random)
        opponent = self.opponents[_draw(len(self.opponents), self.weights, root, index, 0)]
        batch = generate_batch(self.config, root, [index])
        self._env = SellerEnv.from_batch(
            batch, opponent, penalty=self.penalty, dialogue=self.render_mode == "ansi"
        )
        self._obs = self._env.reset()
        self._memory = self.space.memory(1)
        return self._observe(), {"market": index, "seed": root}

    def _observe(self) -> dict[str, np.ndarray]:
        self._mask = self.space.mask(self._obs)[0]
        return {
            "observation": self.space.encode(self._obs, self._memory)[0],
            "action_mask": self._mask,
        }

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self._env is None:
            raise RuntimeError("call reset() before step()")
        action = check_action(action, self.space.num_actions, "seller")
        step = self._env.step(self.space.decode(self._obs, action))
        self._obs = step.obs
        info = _episode_info(step.info["episodes"]) if step.done[0] else {}
        terminated = bool(self._env.engine.done[0])
        return self._observe(), float(step.reward[0]), terminated, False, info

    def action_masks(self) -> np.ndarray:
        """The legal actions now, as booleans (SB3-contrib's ``MaskablePPO`` reads this)."""
        return self._mask.astype(bool)

    def render(self) -> str | None:
        if self.render_mode == "ansi" and self._env is not None:
            return self._obs.text(0)
        return None


class SellerVectorEnv(VectorEnv):
    """B markets on the batched engine; the learner is every market's seller. Arguments
    as ``SellerGymEnv``'s, with ``num_envs`` = B; several opponents split the rows by
    ``weights`` (contiguous blocks, ``agents.env.split_rows``; a positive weight that
    would get no row is an error). ``markets``: ``"keyed"`` (fast draws, for training:
    other instances than ``SellerGymEnv`` and evaluation draw for the same seed and
    index) or ``"exact"`` (the markets ``SellerGymEnv`` and evaluation meet)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        num_envs: int = 64,
        config: MarketConfig | dict | str | None = None,
        buyers: str | Sequence[str] = "truthful",
        *,
        weights: Sequence[float] | None = None,
        penalty: float = VIOLATION_PENALTY,
        offsets: Sequence[float] = SELLER_OFFSETS,
        opponent_seed: int = 0,
        markets: str = "keyed",
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if markets not in ("keyed", "exact"):
            raise ValueError(f"markets: 'keyed' or 'exact', got {markets!r}")
        self.num_envs = num_envs
        self.config = market_config(config)
        self.space = SellerSpace(self.config.buyers, self.config.products, tuple(offsets))
        self.single_observation_space, self.single_action_space = seller_spaces(self.space)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.opponents = _buyers(_names(buyers), opponent_seed, self.config)
        self.weights = None if weights is None else list(weights)
        names = _names(buyers)
        shares = self.weights or [1.0] * len(names)
        if len(shares) != len(names):
            raise ValueError(f"weights: one per opponent ({len(names)}), got {len(shares)}")
        split_rows(num_envs, shares, names)  # every weighted opponent gets rows: now, not later
        self.penalty = penalty
        self.markets = markets
        self._root: int | None = None
        self._next = 0
        self._env: SellerEnv | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is not None and not isinstance(seed, int | np.integer):
            raise ValueError(
                "SellerVectorEnv takes one root seed (market k is drawn from (config, seed, k))"
            )
        super().reset(seed=seed)
        if seed is not None:
            self._root, self._next = int(seed), 0
        elif self._root is None:
            self._root, self._next = int(self.np_random.integers(2**31 - 1)), 0
        b = self.num_envs
        draw = generate_keyed_batch if self.markets == "keyed" else generate_batch
        batch = draw(self.config, self._root, np.arange(self._next, self._next + b))
        self._next += b
        self._env = SellerEnv(
            self.config,
            self.opponents,
            b,
            seed=self._root,
            weights=self.weights,
            penalty=self.penalty,
            markets=self.markets,
            autoreset=False,
            batch=batch,
        )
        self._obs = self._env.reset()
        self._memory = self.space.memory(b)
        self._ended = np.zeros(b, bool)
        return self._observe(), {}

    def _observe(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.space.encode(self._obs, self._memory),
            "action_mask": self.space.mask(self._obs),
        }

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if self._env is None:
            raise RuntimeError("call reset() before step()")
        restart = self._ended
        step = self._env.step(self.space.decode(self._obs, actions))
        reward = step.reward.copy()
        terminated = step.done.copy()
        info: dict[str, Any] = {}
        if terminated.any():
            info = _vector_info(step.info["episodes"], self.num_envs)
        if restart.any():  # next-step autoreset: the rows that ended on the last step
            self._env.restart(restart)
            self._memory.restart(restart)
            self._next += int(restart.sum())
        self._ended = terminated
        self._obs = self._env.engine.seller_observation()
        return self._observe(), reward, terminated, np.zeros(self.num_envs, bool), info


# ---------------------------------------------------------------------- buyer
class _SeatEnv(BuyerEnv):
    """A ``BuyerEnv`` whose buyers other than ``seat`` are played by ``others`` (their own
    kinds and disclosure wishes); the seat plays as the learner's kind."""

    def __init__(self, *args: Any, seat: int, others: BuyerPolicy, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seat = seat
        self.others = others

    def _kinds(self, raw) -> tuple[np.ndarray, np.ndarray]:
        kinds, wish = super()._kinds(raw)
        theirs = np.asarray(self.others.kinds(raw.is_agent, raw.keys), bool)
        their_wish = np.asarray(self.others.disclose(theirs, raw.keys, raw), bool)
        rest = np.arange(kinds.shape[1]) != self.seat
        kinds[:, rest] = theirs[:, rest]
        wish[:, rest] = their_wish[:, rest]
        return kinds, wish


class BuyerGymEnv(MarketSeeds, gym.Env):
    """One market; the learner is one buyer of it, the seat (module docstring).

    ``sellers``: the seller opponent(s) (one drawn per market by ``weights``);
    ``others``: the buyer entry or population that plays the other buyers (one split by
    kind needs both kinds in the config, as ``SellerGymEnv``'s buyers); ``seat``: the
    learner's buyer index, or None to draw one per market; ``kind``: the learner's kind
    (``agent`` or ``human``); ``disclose``: whether it discloses under the voluntary rule.
    A market whose seller never asks the seat is skipped (at most 1,000 in a row).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        config: MarketConfig | dict | str | None = None,
        sellers: str | Sequence[str] = "greedy_matcher",
        *,
        others: str = "truthful",
        weights: Sequence[float] | None = None,
        seat: int | None = None,
        kind: str = AGENT,
        disclose: bool = False,
        shares: Sequence[float] = BUYER_SHARES,
        opponent_seed: int = 0,
        render_mode: str | None = None,
    ) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: None or 'ansi', got {render_mode!r}")
        self.config = market_config(config)
        if seat is not None and not 0 <= seat < self.config.buyers:
            raise ValueError(f"seat must be a buyer index in [0, {self.config.buyers})")
        self.space = BuyerSpace(self.config.products, tuple(shares))
        self.observation_space, self.action_space = buyer_spaces(self.space)
        self.opponents = _sellers(_names(sellers), opponent_seed)
        self.weights = _weights(weights, len(self.opponents))
        self.others = registry.make_buyers(others, seed=opponent_seed)
        check_kinds(self.others, self.config, f"others {others!r}", "the config")
        self.seat_choice = seat
        self.kind = kind
        self.disclose = disclose
        self.render_mode = render_mode
        self._env: _SeatEnv | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        for _ in range(_SEAT_TRIES):
            root, index = self._next_market(seed, self.np_random)
            seed = None  # a skipped market moves on to the next index of the same root
            n = self.config.buyers
            seat = self.seat_choice
            if seat is None:
                seat = _draw(n, np.full(n, 1.0 / n), root, index, 1)
            seller = self.opponents[_draw(len(self.opponents), self.weights, root, index, 0)]
            self._env = _SeatEnv(
                self.config,
                seller,
                1,
                seat=seat,
                others=self.others,
                kind=self.kind,
                disclose=self.disclose,
                seed=root,
                batch=generate_batch(self.config, root, [index]),
                autoreset=False,
                markets="exact",
                dialogue=self.render_mode == "ansi",
            )
            self.seat = seat
            self.others.reset(1)
            obs = self._env.reset()
            self._obs, _ = self._advance(obs)
            if not self._over():
                return self._observe(), {"market": index, "seed": root, "seat": seat}
        raise RuntimeError(
            f"the seller asked the seat in none of {_SEAT_TRIES} markets; choose another seat"
        )

    def _advance(self, obs: BuyerObs) -> tuple[BuyerObs, float]:
        """Let the other buyers answer until the seat is asked or the market ends; the
        seat's reward on the way."""
        reward = 0.0
        while obs.needs_answer[0] and obs.buyer[0] != self.seat:
            step = self._env.step(self.others.act(obs))
            reward += float(step.reward[0, self.seat])
            obs = step.obs
        return obs, reward

    def _over(self) -> bool:
        e = self._env.engine
        return bool(e.done[0] or not e.active[0, self.seat])

    def _observe(self) -> dict[str, np.ndarray]:
        obs = self._obs
        if not (obs.needs_answer[0] and obs.buyer[0] == self.seat):
            obs = buyer_view(self._env.engine, self.seat)
        self._shown = obs
        self._mask = self.space.mask(obs)[0]
        return {"observation": self.space.encode(obs)[0], "action_mask": self._mask}

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self._env is None:
            raise RuntimeError("call reset() before step()")
        answer = check_action(action, self.space.num_actions, "buyer")
        reward = 0.0
        if not self._over():
            step = self._env.step(self.space.decode(self._shown, answer))
            reward = float(step.reward[0, self.seat])
            self._obs, more = self._advance(step.obs)
            reward += more
        terminated = self._over()
        info = {}
        if terminated:
            e = self._env.engine
            info = {
                "bought": int(e.bought[0, self.seat]),
                "surplus": float(e.buyer_surplus()[0, self.seat]),
                "seat": self.seat,
            }
        return self._observe(), reward, terminated, False, info

    def action_masks(self) -> np.ndarray:
        return self._mask.astype(bool)

    def render(self) -> str | None:
        if self.render_mode == "ansi" and self._env is not None:
            return self._shown.text(0) if self._shown.dialogue is not None else None
        return None


gym.register(id=SELLER_ID, entry_point=SellerGymEnv, vector_entry_point=SellerVectorEnv)
gym.register(id=BUYER_ID, entry_point=BuyerGymEnv)

__all__ = [
    "BUYER_ID",
    "SELLER_ID",
    "BuyerGymEnv",
    "MarketSeeds",
    "SellerGymEnv",
    "SellerVectorEnv",
    "buyer_spaces",
    "buyer_view",
    "market_config",
    "seller_spaces",
]
