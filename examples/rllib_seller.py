"""Train a seller with RLlib's PPO on the Gymnasium environment, then export it as a
checkpoint the arena plays.

    python examples/rllib_seller.py --iterations 50 --out runs/rllib_seller
    python examples/rllib_seller.py --address HOST:PORT --env-runners 4 ...   # a cluster
    arena eval --seller runs/rllib_seller --buyers truthful

RLlib's new API stack: ``PPOConfig`` with an ``RLModule`` of our own (``MaskedMLP``: two
plain MLPs, one for the policy's logits, one for the value, the logits of illegal
actions masked with the environment's ``action_mask``). Each EnvRunner steps one
``agents.gym_env.SellerVectorEnv`` of ``--envs`` markets on the batched engine (RLlib's
``VECTOR_ENTRY_POINT`` mode: the environment is already vectorized).

The export reads the policy's weights from the live trainer in this process
(``learner_group.get_weights()``) and copies them into ``agents.rl.fixed.FixedSizeSeller``
(the same MLP, ``FixedMLP``), written as safetensors + JSON like every checkpoint of the
project (``agents.rl.checkpoint``). RLlib's own checkpoints (pickles) are never read.
The exported seller plays markets of the size it was trained on.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.core.rl_module.torch import TorchRLModule

from agents.gym_env import SellerVectorEnv, market_config
from agents.rl import checkpoint
from agents.rl.fixed import FixedMLP, FixedMLPConfig, FixedSizeSeller
from agents.spaces import SELLER_OFFSETS, SellerSpace
from arena.config import MarketConfig
from arena.rewards import VIOLATION_PENALTY

_MASKED = -1e9  # logit of an illegal action (finite: an ended market masks every action)


class MaskedMLP(TorchRLModule, ValueFunctionAPI):
    """Policy and value MLPs over ``observation``; illegal actions masked out.
    ``model_config``: ``hidden`` (widths) and ``activation`` (tanh | relu)."""

    def setup(self) -> None:
        inputs = self.observation_space["observation"].shape[0]
        hidden = tuple(self.model_config.get("hidden", (256, 256)))
        activation = self.model_config.get("activation", "tanh")
        self.pi = FixedMLP(FixedMLPConfig(inputs, self.action_space.n, hidden, activation))
        self.vf = FixedMLP(FixedMLPConfig(inputs, 1, hidden, activation))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        logits = self.pi(obs["observation"])
        masked = torch.where(obs["action_mask"] > 0, logits, torch.full_like(logits, _MASKED))
        return {Columns.ACTION_DIST_INPUTS: masked}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        return self.vf(batch[Columns.OBS]["observation"]).squeeze(-1)


@dataclass
class Settings:
    """What a run depends on (with the seed, it fixes the markets and the opponents)."""

    config: dict = field(default_factory=lambda: MarketConfig().to_dict())
    """The market config (``[market]`` schema); its N and M fix the spaces."""
    buyers: list[str] = field(default_factory=lambda: ["truthful"])
    """Opponents (registry names, populations, checkpoint paths)."""
    weights: list[float] | None = None
    """Share of each env runner's markets each opponent plays."""
    envs: int = 64
    """Markets per env runner (one vector environment)."""
    env_runners: int = 0
    """Remote EnvRunner actors (0: sample in this process)."""
    batch: int = 4096
    """Environment steps per training iteration (train_batch_size_per_learner)."""
    minibatch: int = 512
    epochs: int = 4
    lr: float = 3e-4
    gamma: float = 1.0
    lambda_: float = 0.95
    entropy: float = 0.01
    clip: float = 0.2
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    activation: str = "tanh"
    penalty: float = VIOLATION_PENALTY
    offsets: list[float] = field(default_factory=lambda: list(SELLER_OFFSETS))
    seed: int = 0

    @property
    def market(self) -> MarketConfig:
        return MarketConfig.from_dict(self.config)


class RLlibSellerEnv(SellerVectorEnv):
    """``SellerVectorEnv`` as RLlib builds it: from the env config (a dict, with
    ``num_envs`` added by the env runner)."""

    def __init__(self, ctx: dict) -> None:
        args = dict(ctx)
        super().__init__(num_envs=args.pop("num_envs", 1), **args)


def ppo_config(s: Settings) -> PPOConfig:
    env_config = {
        "config": s.config,
        "buyers": list(s.buyers),
        "weights": s.weights,
        "penalty": s.penalty,
        "offsets": list(s.offsets),
    }
    return (
        PPOConfig()
        .environment(env=RLlibSellerEnv, env_config=env_config)
        .env_runners(
            num_env_runners=s.env_runners,
            num_envs_per_env_runner=s.envs,
            gym_env_vectorize_mode=gym.VectorizeMode.VECTOR_ENTRY_POINT,
        )
        .learners(num_learners=0)
        .training(
            lr=s.lr,
            gamma=s.gamma,
            lambda_=s.lambda_,
            entropy_coeff=s.entropy,
            clip_param=s.clip,
            train_batch_size_per_learner=s.batch,
            minibatch_size=s.minibatch,
            num_epochs=s.epochs,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=MaskedMLP,
                model_config={"hidden": list(s.hidden), "activation": s.activation},
            )
        )
        .debugging(seed=s.seed)
    )


def policy_of(algo: Any, s: Settings) -> FixedSizeSeller:
    """The trained policy as an arena seller, from the live trainer's weights."""
    weights = algo.learner_group.get_weights()
    (state,) = weights.values()  # one module: the seller
    market = s.market
    space = SellerSpace(market.buyers, market.products, tuple(s.offsets))
    net = FixedMLP(FixedMLPConfig(space.size, space.num_actions, tuple(s.hidden), s.activation))
    pi = {k[len("pi.") :]: torch.as_tensor(v) for k, v in state.items() if k.startswith("pi.")}
    net.load_state_dict(pi, strict=True)
    seller = FixedSizeSeller(
        net, buyers=market.buyers, products=market.products, offsets=tuple(s.offsets)
    )
    seller.net.eval()
    return seller


def export(algo: Any, s: Settings, out: str | Path, name: str = "rllib_seller") -> Path:
    """Write the trained policy as a checkpoint directory (safetensors + JSON)."""
    training = {"trainer": "rllib-ppo", **asdict(s)}
    return checkpoint.save(out, policy_of(algo, s), name=name, training=training)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--market", metavar="FILE.toml", help="a [market] table (default config)")
    ap.add_argument("--buyers", action="append", help="opponent (repeat for several)")
    ap.add_argument("--weights", type=float, nargs="+", help="one weight per --buyers")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--envs", type=int, default=64, help="markets per env runner")
    ap.add_argument("--env-runners", type=int, default=0, help="remote env runners")
    ap.add_argument("--batch", type=int, default=4096, help="env steps per iteration")
    ap.add_argument("--minibatch", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--hidden", default="256,256", help="hidden widths, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--address", help="a Ray cluster to join (else RAY_ADDRESS, else local)")
    ap.add_argument("--out", metavar="DIR", help="export the trained seller here")
    ap.add_argument("--name", default="rllib_seller", help="the exported entry's name")
    args = ap.parse_args(argv)

    import ray

    s = Settings(
        config=market_config(args.market).to_dict(),
        buyers=args.buyers or ["truthful"],
        weights=args.weights,
        envs=args.envs,
        env_runners=args.env_runners,
        batch=args.batch,
        minibatch=args.minibatch,
        epochs=args.epochs,
        lr=args.lr,
        hidden=[int(h) for h in args.hidden.split(",")],
        seed=args.seed,
    )
    where = {"address": args.address} if args.address else {"address": "local", "num_cpus": 2}
    ray.init(**where, include_dashboard=False, log_to_driver=False)
    algo = ppo_config(s).build_algo()
    t0 = time.perf_counter()
    for i in range(args.iterations):
        result = algo.train()
        runners = result.get("env_runners", {})
        print(
            f"iteration {i + 1}: {time.perf_counter() - t0:7.1f} s, "
            f"env steps {runners.get('num_env_steps_sampled_lifetime', 0):,.0f}, "
            f"episode return {runners.get('episode_return_mean', float('nan')):.3f}"
        )
    if args.out:
        path = export(algo, s, args.out, args.name)
        print(f"exported: {path} (arena eval --seller {path})")
    algo.stop()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
