"""Speed of the RL seller: greedy play, rollouts and PPO updates, in one run.

    python benchmarks/training.py [--markets 4096] [--repeats 3] [--json] [--seller DIR]

Prints, on the default tournament's retail config against truthful buyers:

* greedy play of the torch seller (the shipped ``rl_seller``, the checkpoint given by
  ``--seller``, or fresh weights of the shipped shape when none is shipped) in
  seller-turns/s at B markets, beside the scripted
  greedy matcher's and assignment matcher's rates on the same markets (median of
  ``--repeats`` runs);
* a training rollout (sampling, per-row restarts, rewards) in seller-turns/s;
* a PPO update in samples/s (3 epochs of 4 minibatches over one rollout);
* the wall time the shipped checkpoints' training took, from their ``curve.csv``: for a
  seller trained in stages, its own run plus the longest of the stages before it (stages
  1 and 2 of rl_seller run side by side, on a core each).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from agents import registry
from agents.command import pos_int
from agents.rl import checkpoint
from agents.rl.config import ConfigFamily, Opponent, TrainConfig
from agents.rl.policies import RLSeller
from agents.rl.ppo import _torch_generator, ppo_update, seller_rollout
from agents.rollout import play_batch
from agents.scripted.buyers import Truthful
from arena.config import MarketConfig
from arena.generator import generate_batch

RETAIL = MarketConfig(buyers=8, products=4, inventory=2, turns=12, agent_share=0.5)
SHIPPED = Path(__file__).resolve().parents[1] / "agents" / "rl" / "checkpoints"
CONFIGS = SHIPPED.parent / "configs"


def _turns_per_s(batch, seller) -> float:
    t = time.perf_counter()
    engine = play_batch(batch, seller, Truthful())
    return float(engine.turn.sum()) / (time.perf_counter() - t)


def _training_wall(path: Path) -> float | None:
    """The wall time of the run that wrote checkpoint ``path`` (the last ``wall_s`` of its
    curve.csv), plus the longest of those of the checkpoints it started from or learnt from
    (``train.init``, ``train.teachers``; shipped configs name them relative to
    agents/rl/configs): stages that can run side by side count once, the longest."""
    try:
        with open(path / "curve.csv", newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r.get("wall_s")]
        training = json.loads((path / "config.json").read_text()).get("training", {})
    except (OSError, ValueError):
        return None
    if not rows:
        return None
    before = [training.get("init") or "", *(training.get("teachers") or {}).values()]
    walls = [_training_wall((CONFIGS / p).resolve()) for p in before if p]
    if any(w is None for w in walls):
        return None
    return round(float(rows[-1]["wall_s"]) + max(walls, default=0.0), 3)


def _fail(message: str) -> None:
    print(f"benchmarks/training.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="benchmarks/training.py", description=__doc__.split("\n")[0])
    ap.add_argument("--markets", type=pos_int, default=4096, help="B, markets played at once")
    ap.add_argument("--repeats", type=pos_int, default=3, help="runs of each measurement")
    ap.add_argument("--threads", type=pos_int, default=2, help="torch threads")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument(
        "--seller", metavar="DIR", help="a seller checkpoint to measure instead of rl_seller"
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    shipped = (SHIPPED / "rl_seller").is_dir()
    if args.seller:
        try:
            seller = checkpoint.load(args.seller)
        except ValueError as err:  # CheckpointError: missing, tampered or not a checkpoint
            _fail(str(err))
        if not isinstance(seller, RLSeller):
            _fail(f"{args.seller}: not a seller checkpoint")
        weights = str(args.seller)
    else:
        seller = checkpoint.load(SHIPPED / "rl_seller") if shipped else RLSeller()
        weights = "shipped rl_seller" if shipped else "fresh (no shipped checkpoint)"
    batch = generate_batch(RETAIL, 0, args.markets)
    # Warm-up on other markets of the same size (first touches of memory, and the
    # network's buffers, are not what a long run pays per turn).
    _turns_per_s(generate_batch(RETAIL, 1, args.markets), seller)
    rl = statistics.median(_turns_per_s(batch, seller) for _ in range(args.repeats))
    greedy = statistics.median(
        _turns_per_s(batch, registry.make("greedy_matcher", "seller")) for _ in range(args.repeats)
    )
    planned = statistics.median(
        _turns_per_s(batch, registry.make("assignment_matcher", "seller"))
        for _ in range(args.repeats)
    )

    cfg = TrainConfig(
        side="seller",
        batch_size=2048,
        opponents=(Opponent("truthful"),),
        family=ConfigFamily(configs=(("retail", RETAIL),)),
    )
    learner = RLSeller(
        seller.net, greedy=False, **seller.from_checkpoint_params(seller.checkpoint_params())
    )
    rollout_rates, update_rates = [], []
    optimizer = torch.optim.Adam(learner.net.parameters(), lr=1e-6)
    for k in range(args.repeats):
        t = time.perf_counter()
        ro = seller_rollout(learner, RETAIL, [Truthful()], [1.0], cfg, env_seed=k)
        rollout_rates.append(cfg.batch_size * RETAIL.turns / (time.perf_counter() - t))
        t = time.perf_counter()
        rng = np.random.default_rng(k)
        ppo_update(learner, optimizer, ro.data, cfg, 0.0, _torch_generator(rng))
        n = ro.data["adv"].shape[0] * cfg.epochs
        update_rates.append(n / (time.perf_counter() - t))
    out = {
        "markets": args.markets,
        "threads": args.threads,
        "seller_weights": weights,
        "seller_hidden": seller.net.cfg.hidden,
        "rl_seller_greedy_turns_per_s": round(rl),
        "greedy_matcher_turns_per_s": round(greedy),
        "rl_over_greedy_matcher": round(rl / greedy, 3),
        "assignment_matcher_turns_per_s": round(planned),
        "rollout_turns_per_s": round(statistics.median(rollout_rates)),
        "update_samples_per_s": round(statistics.median(update_rates)),
        "shipped_seller_training_wall_s": _training_wall(SHIPPED / "rl_seller"),
        "shipped_buyer_training_wall_s": _training_wall(SHIPPED / "rl_buyer"),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:36s} {v}")
    return out


if __name__ == "__main__":
    main()
