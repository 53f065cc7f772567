"""A seller for markets of one size: a plain MLP over ``agents.spaces``'s fixed-size
observation, scoring every action of ``SellerSpace`` (what a learner of the Gymnasium
environment trains, e.g. RLlib's PPO in ``examples/rllib_seller.py``).

``FixedMLP`` is the network (``layers.0``, ``layers.2``, ...: linear layers with an
activation between them, logits out); ``FixedSizeSeller`` plays it behind the batched
policy protocol: encode, score, mask the illegal actions, then the most likely action
(``greedy``) or a draw with the project's keyed noise, so that it is reproducible and
batch-invariant like every other policy. It plays markets of the ``buyers`` x
``products`` it was trained for; any other size is a clear error. It says so before play
too: ``FixedSizeSeller.market_problem`` is the optional classmethod by which a policy
class declares the markets it can play (``agents.rl.checkpoint.market_problem`` asks it,
and a tournament spec asks it for each of its configs), so a spec of other sizes is
refused up front rather than after a long run.

Its checkpoint is an ordinary one (``agents.rl.checkpoint``: safetensors + JSON, class
``FixedSizeSeller``), so ``arena eval --seller PATH`` and tournament specs play it.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from agents.base import AGENT, SellerAction, SellerPolicy
from agents.spaces import SELLER_OFFSETS, SellerMemory, SellerSpace
from arena.config import MarketConfig
from arena.noise import uniform
from arena.observation import SellerObs
from arena.words import plural

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}
_STREAM = 31  # keyed-noise stream of the action draw


@dataclass(frozen=True)
class FixedMLPConfig:
    inputs: int
    """Length of the observation vector (``SellerSpace.size``)."""
    outputs: int
    """Number of actions (``SellerSpace.num_actions``)."""
    hidden: tuple[int, ...] = (256, 256)
    """Widths of the hidden layers."""
    activation: str = "tanh"
    """tanh | relu, between the linear layers."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation: one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if self.inputs < 1 or self.outputs < 1 or any(h < 1 for h in self.hidden):
            raise ValueError("an MLP needs positive widths")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["hidden"] = list(self.hidden)
        return out


class FixedMLP(nn.Module):
    def __init__(self, cfg: FixedMLPConfig) -> None:
        super().__init__()
        self.cfg = cfg
        widths = [cfg.inputs, *cfg.hidden, cfg.outputs]
        layers: list[nn.Module] = []
        for k in range(len(widths) - 1):
            layers.append(nn.Linear(widths[k], widths[k + 1]))
            if k < len(widths) - 2:
                layers.append(ACTIVATIONS[cfg.activation]())
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class FixedSizeSeller(SellerPolicy):
    """A ``FixedMLP`` seller for markets of ``buyers`` x ``products`` (module docstring)."""

    kind = AGENT

    def __init__(
        self,
        net: FixedMLP | None = None,
        *,
        seed: int = 0,
        greedy: bool = True,
        buyers: int = 8,
        products: int = 4,
        offsets: tuple[float, ...] = SELLER_OFFSETS,
        hidden: tuple[int, ...] = (256, 256),
    ) -> None:
        self.space = SellerSpace(int(buyers), int(products), tuple(offsets))
        if net is None:  # fresh weights drawn from ``seed`` alone: one seed, one policy
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(seed))
                net = FixedMLP(FixedMLPConfig(self.space.size, self.space.num_actions, hidden))
        if (net.cfg.inputs, net.cfg.outputs) != (self.space.size, self.space.num_actions):
            raise ValueError(
                f"the network maps {net.cfg.inputs} inputs to {net.cfg.outputs} actions; "
                f"markets of {buyers} buyers and {products} products need "
                f"{self.space.size} and {self.space.num_actions}"
            )
        self.net = net
        self.seed = int(seed)
        self.greedy = greedy
        self._memory: SellerMemory | None = None

    def checkpoint_params(self) -> dict:
        """What a checkpoint stores besides the network (``agents.rl.checkpoint``)."""
        return {
            "buyers": self.space.buyers,
            "products": self.space.products,
            "offsets": list(self.space.offsets),
        }

    @classmethod
    def market_problem(cls, params: dict, config: MarketConfig) -> str | None:
        """Why a policy built with ``params`` (its constructor's keyword arguments, as
        ``from_checkpoint_params`` returns them or a registry entry holds them) cannot
        play the markets of ``config``, or None if it can. The network's input and output
        widths are those of one market size, so another size could only fail once played
        (``SellerSpace.check``); a policy class without this method plays any size."""
        defaults = inspect.signature(cls).parameters
        size = tuple(int(params.get(k, defaults[k].default)) for k in ("buyers", "products"))
        if (config.buyers, config.products) == size:
            return None
        return f"plays markets of {_size(*size)} only"

    @classmethod
    def from_checkpoint_params(cls, params: dict) -> dict:
        """Constructor arguments from a checkpoint's params, checked."""
        out = {}
        for name in ("buyers", "products"):
            x = params.get(name)
            if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                raise ValueError(f"{name} must be a positive integer, got {x!r}")
            out[name] = x
        offsets = params.get("offsets", list(SELLER_OFFSETS))
        if not isinstance(offsets, list) or not all(isinstance(v, int | float) for v in offsets):
            raise ValueError("offsets must be a list of numbers")
        out["offsets"] = tuple(float(v) for v in offsets)
        return out

    def reset(self, batch_size: int) -> None:
        self._memory = None

    def restart(self, rows: np.ndarray) -> None:
        if self._memory is not None:
            self._memory.restart(rows)

    def logits(self, obs: SellerObs) -> np.ndarray:
        """(B, actions) float64 scores, -inf where the mask forbids."""
        self._check_size(obs)
        b = obs.batch_size
        if self._memory is None or self._memory.caps.shape[0] != b:
            self._memory = self.space.memory(b)
        x = self.space.encode(obs, self._memory)
        p = next(self.net.parameters())
        with torch.inference_mode():
            z = self.net(torch.from_numpy(x).to(p.device, p.dtype)).double().cpu().numpy()
        mask = self.space.mask(obs).astype(bool)
        # An ended market has no legal action; its (ignored) message may be anything.
        mask |= ~mask.any(axis=1, keepdims=True)
        return np.where(mask, z, -np.inf)

    def _check_size(self, obs: SellerObs) -> None:
        """A market of another size is a ValueError that says which size fits and how to
        play one: ``arena eval`` and ``arena play`` build this policy before they know it
        is fixed-size, and their default market (8 buyers, 4 products) is rarely the size
        it was trained for, so the fix (``--market``) belongs in the message."""
        n, m = self.space.buyers, self.space.products
        if (obs.num_buyers, obs.num_products) == (n, m):
            return
        raise ValueError(
            f"FixedSizeSeller plays markets of {_size(n, m)} only; this market has "
            f"{_size(obs.num_buyers, obs.num_products)}: play it on a market of its size "
            f"(arena eval/play: --market FILE.toml whose [market] table sets buyers = {n} "
            f"and products = {m}, or SPEC.toml:NAME for such a [configs.NAME])"
        )

    def act(self, obs: SellerObs) -> SellerAction:
        z = self.logits(obs)
        if self.greedy:
            a = np.argmax(z, axis=1)
        else:
            p = np.exp(z - z.max(axis=1, keepdims=True))
            cdf = np.cumsum(p, axis=1)
            u = uniform(self.seed, obs.key, obs.turn, _STREAM) * cdf[:, -1]
            a = np.minimum((cdf < u[:, None]).sum(axis=1), z.shape[1] - 1)
            # Never an option of probability 0 (only reachable by rounding at u ~ 1).
            a = np.where(np.isfinite(z[np.arange(len(a)), a]), a, np.argmax(z, axis=1))
        return self.space.decode(obs, a)


def _size(buyers: int, products: int) -> str:
    return f"{plural(buyers, 'buyer')} and {plural(products, 'product')}"


__all__ = ["FixedMLP", "FixedMLPConfig", "FixedSizeSeller"]
