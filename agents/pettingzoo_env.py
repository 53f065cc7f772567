"""The two-sided market as a PettingZoo AEC environment: the seller and every buyer are
agents, on top of ``agents.env.SellerEnv`` (its ``send`` / ``finish`` halves of a turn).

Rules
=====

==============  ==============================================================
agents          ``seller_0``, ``buyer_0`` ... ``buyer_{N-1}``
order           the seller speaks (one message, ``agents.spaces.SellerSpace``'s
                action); if the message asks buyer i, ``buyer_i`` answers next
                (``BuyerSpace``'s action); then the seller again. A message that
                asks nobody (invalid, or an offer that meets a standing bid and
                trades at once) hands the turn straight back to the seller.
observations    ``{"observation", "action_mask"}`` of fixed size for the config
                (``agents.spaces``); a buyer that is not being asked sees its own
                view with no offer on the table (its mask allows only reject).
rewards         after every step: the seller's ``(profit gained) / W*_T -
                penalty x violations``, each buyer its own surplus gained over the
                range width (``arena.rewards``); ``last()`` gives each agent the sum
                since it last acted.
termination     a buyer when it has bought or left; everyone when the market ends
                (T turns, every buyer served, or stock gone). Nothing truncates.
infos           the seller's, when the market ends: its metrics (``agents.env``);
                ``capture`` and ``efficiency`` are left out where W* is 0.
actions         what the agent's ``Discrete`` space contains (a bool is not an
                action); anything else is a TypeError or ValueError naming it.
kinds           each buyer's kind (human or agent) as the market draws it
                (``agent_share``); ``disclose=True`` makes agent buyers disclose under
                the voluntary rule.
seeding         ``reset(seed=s)`` plays market 0 of root seed s, each later
                ``reset()`` the next index (market k of a root seed is the same
                instance wherever it is played).
==============  ==============================================================

``env(...)`` wraps ``MarketAEC`` in PettingZoo's order-enforcing checks; ``raw_env`` is
the class itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from agents.base import BuyerPolicy
from agents.env import SellerEnv
from agents.gym_env import MarketSeeds, buyer_spaces, buyer_view, market_config, seller_spaces
from agents.spaces import BUYER_SHARES, SELLER_OFFSETS, BuyerSpace, SellerSpace, check_action
from arena.config import MarketConfig
from arena.generator import generate_batch
from arena.observation import BuyerObs
from arena.rewards import VIOLATION_PENALTY

SELLER = "seller_0"


class _Outside(BuyerPolicy):
    """The buyers' side when the buyers answer from outside: kinds as drawn, disclosure
    by ``wish``; it is never asked to act (``SellerEnv.send`` / ``finish``)."""

    def __init__(self, wish: bool) -> None:
        self.wish = wish

    def kinds(self, is_agent: np.ndarray, key: np.ndarray) -> np.ndarray:
        return np.asarray(is_agent, bool).copy()

    def disclose(self, is_agent: np.ndarray, key: np.ndarray, market=None) -> np.ndarray:
        return np.asarray(is_agent, bool) & self.wish

    def act(self, obs: BuyerObs):
        raise RuntimeError("buyers of the AEC environment answer through step()")


class MarketAEC(MarketSeeds, AECEnv):
    """One market, every side an agent (module docstring). ``config``: a ``MarketConfig``,
    a ``[market]`` dict or a TOML file; ``penalty``: the seller's cost per violation;
    ``offsets`` / ``shares``: the price and bid levels of ``agents.spaces``."""

    metadata = {"name": "arena_market_v0", "render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(
        self,
        config: MarketConfig | dict | str | None = None,
        *,
        penalty: float = VIOLATION_PENALTY,
        offsets: tuple[float, ...] = SELLER_OFFSETS,
        shares: tuple[float, ...] = BUYER_SHARES,
        disclose: bool = False,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: None or 'ansi', got {render_mode!r}")
        self.config = market_config(config)
        n = self.config.buyers
        self.seller_space = SellerSpace(n, self.config.products, tuple(offsets))
        self.buyer_space = BuyerSpace(self.config.products, tuple(shares))
        self.possible_agents = [SELLER] + [f"buyer_{i}" for i in range(n)]
        s_obs, s_act = seller_spaces(self.seller_space)
        b_obs, b_act = buyer_spaces(self.buyer_space)
        self.observation_spaces = {a: s_obs if a == SELLER else b_obs for a in self.possible_agents}
        self.action_spaces = {a: s_act if a == SELLER else b_act for a in self.possible_agents}
        self.penalty = penalty
        self.disclose = disclose
        self.render_mode = render_mode
        self._env: SellerEnv | None = None
        self._np_random: np.random.Generator | None = None

    # The same object every time (PettingZoo's checks seed the spaces through it).
    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None or self._np_random is None:
            self._np_random = np.random.default_rng(seed)
        root, index = self._next_market(seed, self._np_random)
        batch = generate_batch(self.config, root, [index])
        self._env = SellerEnv.from_batch(
            batch,
            _Outside(self.disclose),
            penalty=self.penalty,
            dialogue=self.render_mode == "ansi",
        )
        self._env.reset()
        self._memory = self.seller_space.memory(1)
        self._prompt: BuyerObs | None = None
        self._surplus = np.zeros(self.config.buyers)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.infos[SELLER] = {"market": index, "seed": root}
        self.agent_selection = SELLER
        self._skip_agent_selection = None

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """``agent``'s view now; a pure query (the seller's memory of refusals moves on
        in ``step`` only, so a look between a message and its answer changes nothing)."""
        e = self._env.engine
        if agent == SELLER:
            obs = e.seller_observation()
            return {
                "observation": self.seller_space.encode(obs, self._memory.copy())[0],
                "action_mask": self.seller_space.mask(obs)[0],
            }
        i = int(agent.rsplit("_", 1)[1])
        asked = self._prompt is not None and int(self._prompt.buyer[0]) == i
        view = self._prompt if asked else buyer_view(e, i)
        return {
            "observation": self.buyer_space.encode(view)[0],
            "action_mask": self.buyer_space.mask(view)[0],
        }

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        side, space = (
            ("seller", self.seller_space) if agent == SELLER else ("buyer", self.buyer_space)
        )
        action = check_action(action, space.num_actions, side)  # before anything changes
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        e = self._env.engine
        if agent == SELLER:
            obs = e.seller_observation()
            self.seller_space.encode(obs, self._memory)  # the memory sees every turn
            prompt = self._env.send(self.seller_space.decode(obs, action))
            if prompt is not None:
                self._prompt = prompt
                self.agent_selection = f"buyer_{int(prompt.buyer[0])}"
                return  # the seller's turn is paid when its buyer has answered
            step = self._env.finish(None)
        else:
            answer = self.buyer_space.decode(self._prompt, action)
            self._prompt = None
            step = self._env.finish(answer)
        self.agent_selection = SELLER
        self.rewards[SELLER] = float(step.reward[0])
        now = e.buyer_surplus()[0]
        gained = (now - self._surplus) / self.config.width
        self._surplus = now.copy()
        over = bool(e.done[0])
        for a in self.agents[1:]:
            i = int(a.rsplit("_", 1)[1])
            self.rewards[a] = float(gained[i])
            if over or not e.active[0, i]:
                self.terminations[a] = True
        if over:
            self.terminations[SELLER] = True
            self.infos[SELLER] = _episode_info(step.info["episodes"])
        self._accumulate_rewards()
        self._deads_step_first()

    def render(self) -> str | None:
        if self.render_mode == "ansi" and self._env is not None:
            return self._env.engine.seller_observation().text(0)
        return None

    def close(self) -> None:
        self._env = None


def _episode_info(episodes: dict[str, np.ndarray]) -> dict[str, float]:
    """The seller's info when the market ends: its metrics (``agents.env``), less one that
    is not defined (``capture`` and ``efficiency`` where W* is 0, NaN there)."""
    out = {k: float(v[0]) for k, v in episodes.items() if k != "rows"}
    return {k: v for k, v in out.items() if np.isfinite(v)}


raw_env = MarketAEC


def env(**kwargs: Any) -> AECEnv:
    """``MarketAEC(**kwargs)`` inside PettingZoo's usual checks (order enforcement, a
    clear error for an action outside the space)."""
    out = MarketAEC(**kwargs)
    out = wrappers.AssertOutOfBoundsWrapper(out)
    return wrappers.OrderEnforcingWrapper(out)


__all__ = ["MarketAEC", "SELLER", "env", "raw_env"]
