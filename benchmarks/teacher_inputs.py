"""How far a stage-2 teacher's answers on the learner's features are from its own play.

    python benchmarks/teacher_inputs.py [--config agents/rl/configs/seller.toml]
                                        [--markets 32] [--seed 99] [--markdown]

Stage 2 of the shipped seller (``train.teachers``) pulls the learner toward a specialist
per base config, asking the specialist about the learner's features
(``agents.rl.ppo.reference_logp``). Those features carry the learner's own options: its
signal prior (shrunk signals) and its assignment's pick; a specialist trained without them
would see other features on the same market. On markets the learner plays (its opponents,
each base config of its family), this compares, state by state, the specialist's pair
distribution on its own features with the one it gives on the learner's: the KL divergence
(own || asked) and how often both pick the same most likely pair.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.command import nonneg_int, pos_int  # noqa: E402
from agents.env import SellerEnv  # noqa: E402
from agents.rl import checkpoint, ppo  # noqa: E402
from agents.rl.config import load_train_config  # noqa: E402

HEADER = [
    "config",
    "teacher",
    "its options (prior, assignment)",
    "learner's",
    "KL mean",
    "KL median",
    "KL max",
    "same most likely pair",
]
SHIPPED_CONFIG = Path(__file__).resolve().parents[1] / "agents/rl/configs/seller.toml"


def _log_pairs(net, decision) -> torch.Tensor:
    """log p(pair) of ``net`` on the features of ``decision`` (closed pairs -inf)."""
    arrays = (torch.from_numpy(a) for a in decision.features.arrays())
    with torch.inference_mode():
        logits = net(*arrays, torch.from_numpy(decision.open), value=False)[0]
    return torch.log_softmax(logits, -1)


def compare(config: str, markets: int, seed: int) -> list[list[str]]:
    """One row per teacher of the training config ``config``: the learner (its start)
    plays ``markets`` markets of that teacher's base config, sampling; at each state the
    teacher decides on its own features and is asked on the learner's."""
    cfg = load_train_config(config)
    learner = ppo.start_policy(cfg)
    asked, _ = ppo._load_teachers(cfg, learner)
    family = dict(cfg.family.configs)
    rows = []
    for base, path in cfg.teachers:
        own = checkpoint.load(cfg.resolve(path), seed=0, greedy=False)
        weights = [o.weight for o in cfg.opponents]
        env = SellerEnv(family[base], cfg.opponent_policies(cfg.seed), markets, seed=seed,
                        weights=weights)  # fmt: skip
        obs = env.reset()
        learner.reset(markets)
        own.reset(markets)
        kl, same = [], []
        for _ in range(family[base].turns):
            d = learner.decide(obs, sample=True)
            mine = _log_pairs(own.net, own.decide(obs, sample=False))
            theirs = _log_pairs(asked[base], d)
            p = mine.exp()
            gap = torch.where(torch.isfinite(mine), mine - theirs, torch.zeros_like(mine))
            kl.append((p * gap).sum(-1).numpy())
            same.append((mine.argmax(-1) == theirs.argmax(-1)).numpy())
            step = env.step(d.action)
            if step.done.any():
                learner.restart(step.done)
                own.restart(step.done)
            obs = step.obs
        kl_all, same_all = np.concatenate(kl), np.concatenate(same)
        rows.append(
            [
                base,
                Path(path).name,
                f"{own.signal_prior:g}, {own.assignment}",
                f"{learner.signal_prior:g}, {learner.assignment}",
                f"{kl_all.mean():.3f}",
                f"{np.median(kl_all):.3f}",
                f"{kl_all.max():.3f}",
                f"{same_all.mean():.1%}",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/teacher_inputs.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--config", default=str(SHIPPED_CONFIG), help="a training config")
    ap.add_argument("--markets", type=pos_int, default=32, help="markets per teacher")
    ap.add_argument("--seed", type=nonneg_int, default=99, help="the markets' seed")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    try:
        rows = compare(args.config, args.markets, args.seed)
    except (OSError, ValueError) as err:
        print(f"benchmarks/teacher_inputs.py: error: {err}", file=sys.stderr)
        return 2
    if not rows:
        print(f"{args.config} names no teachers", file=sys.stderr)
        return 2
    print(f"\n## teachers of {Path(args.config).name}: own play vs asked on the learner's features")
    print(f"({args.markets} markets per config, seed {args.seed})\n")
    print(tabulate(rows, headers=HEADER, tablefmt="github" if args.markdown else "simple"))
    print(f"\n{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
