"""RLlib's PPO on the Gymnasium environment against ``arena train seller``, side by side:
the same wall-clock budget on this machine, the same market config and opponents, each
one's profit over time on the same held-out markets.

    python benchmarks/rllib_vs_arena.py [--budget 300] [--every 30] [--markets 5000]

* RLlib: ``examples/rllib_seller.py``'s PPO (the new API stack, one vector environment
  of ``--envs`` markets on the batched engine, sampled in this process), a 256x256 MLP
  over ``agents.spaces``'s fixed-size observation. Its clock starts once the algorithm
  is built (Ray's start and RLlib's import are not counted).
* arena: ``agents.rl.ppo.train``, what ``arena train seller`` runs (its warm start run
  batch by batch so that it can be evaluated on the way: ``run_arena``), with the shipped
  seller config's hyper-parameters (``agents/rl/configs/seller_joint.toml``; its warm start
  imitating the greedy matcher included and counted in its time, shortened to fit a
  budget of minutes: see ``arena_config``) on this benchmark's one config and opponents,
  in chunks of iterations resumed from its checkpoint.

Both sides run torch on one thread (``--threads``): on this shared 2-core machine two
threads thrash whenever other work is running (an imitation batch took 31 s on two
threads against 5 s on one, measured side by side at a load average of 5).

Every ``--every`` seconds of training each side's current policy is evaluated greedily
on the same ``--markets`` held-out markets (exact draws of a seed no training sees; the
rows split between the opponents in equal blocks); the clock stops while it is. The
table ends with when each side first reached the other's final profit, and the
machine's load average before and after (the figures are wall-clock under that load).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from agents import registry  # noqa: E402
from agents.command import nonneg_int, pos_int, pos_number  # noqa: E402
from agents.env import split_rows  # noqa: E402
from agents.evaluate import play_markets  # noqa: E402
from agents.rl import checkpoint  # noqa: E402
from agents.rl.config import ConfigFamily, Opponent, load_train_config  # noqa: E402
from agents.rl.policies import RLSeller  # noqa: E402
from agents.rl.ppo import imitate, train  # noqa: E402
from arena.config import MarketConfig  # noqa: E402

EVAL_SEED = 7_777_777  # held-out markets: a root seed no training run draws from
BUYERS = ("truthful", "threshold", "haggler", "noisy_human", "strategic")
SHIPPED_CONFIG = ROOT / "agents" / "rl" / "configs" / "seller_joint.toml"


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def evaluate(seller, config: MarketConfig, buyers: tuple[str, ...], markets: int) -> float:
    """Mean profit on markets 0..markets-1 of the held-out seed, the rows split between the
    opponents in equal contiguous blocks."""
    profit = []
    for name, rows in zip(buyers, split_rows(markets, [1.0] * len(buyers)), strict=True):
        buyer = registry.make_buyers(name, seed=0)
        profit.append(play_markets(config, EVAL_SEED, rows, seller, buyer)["profit"])
    return float(np.concatenate(profit).mean())


def run_rllib(args, config: MarketConfig, buyers: tuple[str, ...]) -> list[tuple[float, float]]:
    import ray
    import rllib_seller as rs

    s = rs.Settings(
        config=config.to_dict(),
        buyers=list(buyers),
        envs=args.envs,
        batch=args.rllib_batch,
        minibatch=args.rllib_minibatch,
        epochs=args.rllib_epochs,
        lr=args.rllib_lr,
        seed=args.seed,
    )
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        algo = rs.ppo_config(s).build_algo()
        points = [(0.0, evaluate(rs.policy_of(algo, s), config, buyers, args.markets))]
        clock, last, steps = 0.0, 0.0, 0
        while clock < args.budget:
            t = time.perf_counter()
            result = algo.train()
            clock += time.perf_counter() - t
            steps = result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", steps)
            if clock - last >= args.every or clock >= args.budget:
                last = clock
                points.append(
                    (clock, evaluate(rs.policy_of(algo, s), config, buyers, args.markets))
                )
                _say(
                    f"rllib  {clock:7.1f} s  {steps:>10,.0f} env steps  profit {points[-1][1]:.2f}"
                )
        algo.stop()
    finally:
        ray.shutdown()
    return points


def arena_config(args, config: MarketConfig, buyers: tuple[str, ...]):
    """The shipped seller config's hyper-parameters on this benchmark's config and
    opponents, sized for a budget of minutes: 1,024 markets a batch and a warm start of 10
    imitation batches of 4 epochs (the shipped run: 2,048, 40 and 8); no learning-rate or
    entropy annealing (a run is cut by time, not by a number of iterations)."""
    shipped = load_train_config(str(SHIPPED_CONFIG))
    return dataclasses.replace(
        shipped,
        name="arena_seller",
        seed=args.seed,
        batch_size=args.arena_batch,
        imitation_iterations=args.arena_imitation,
        imitation_epochs=4,
        threads=args.threads,
        iterations=100_000,
        eval_every=0,
        eval_markets=50,
        checkpoint_every=100_000,
        opponents=tuple(Opponent(b) for b in buyers),
        family=ConfigFamily(configs=(("bench", config),)),
        source="",
    )


def run_arena(args, config: MarketConfig, buyers: tuple[str, ...]) -> list[tuple[float, float]]:
    """``agents.rl.ppo.train`` in steps that can be evaluated: its warm start (the same
    ``imitate`` it runs, on the same fresh network) evaluated after every imitation batch,
    then the run continued from the warm-started weights (``init``, as ``train`` does
    after imitating: a fresh optimizer for PPO) in chunks of about ``--every`` seconds,
    each resumed from the checkpoint of the last. Everything but the evaluations is timed,
    the checkpoint writes between the steps included."""
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        return _run_arena(args, arena_config(args, config, buyers), config, buyers, Path(tmp))


def _run_arena(args, cfg, config: MarketConfig, buyers: tuple[str, ...], out: Path):
    """``run_arena`` in the folder ``out`` (its checkpoints)."""
    torch.manual_seed(cfg.seed)  # the initial weights, as train() draws them
    policy = RLSeller(seed=cfg.seed, greedy=False, hidden=cfg.hidden)
    points = [(0.0, _greedy_profit(policy, config, buyers, args.markets))]
    clock = 0.0
    batches = imitate(policy, cfg, progress=False)
    while True:
        t = time.perf_counter()
        row = next(batches, None)
        clock += time.perf_counter() - t
        if row is None:
            break
        points.append((clock, _greedy_profit(policy, config, buyers, args.markets)))
        _say(f"arena  {clock:7.1f} s  warm start {row['imitation_iteration']:>3}  "
             f"profit {points[-1][1]:.2f}")  # fmt: skip
    t = time.perf_counter()
    warm = checkpoint.save(out / "warm", policy, name=cfg.name)
    cfg = cfg.starting_from(str(warm))
    train(cfg, out / "run", progress=False, until=0)  # its first evaluation and checkpoint
    clock += time.perf_counter() - t
    done, chunk = 0, 1
    while clock < args.budget:
        t = time.perf_counter()
        train(cfg, out / "run", resume=True, progress=False, until=done + chunk)
        spent = time.perf_counter() - t
        clock += spent
        done += chunk
        seller = checkpoint.load(out / "run")
        points.append((clock, evaluate(seller, config, buyers, args.markets)))
        _say(f"arena  {clock:7.1f} s  iteration {done:>5}  profit {points[-1][1]:.2f}")
        chunk = max(1, round(chunk * args.every / max(spent, 1e-3)))
    return points


def _greedy_profit(policy, config: MarketConfig, buyers: tuple[str, ...], markets: int) -> float:
    """``evaluate`` of a policy in training, playing greedily for the evaluation."""
    before = policy.greedy
    policy.greedy = True
    try:
        return evaluate(policy, config, buyers, markets)
    finally:
        policy.greedy = before


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def reached(points: list[tuple[float, float]], target: float) -> float | None:
    """The first evaluation time at which the profit was at least ``target``."""
    return next((t for t, p in points if p >= target), None)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="benchmarks/rllib_vs_arena.py", description=__doc__)
    ap.add_argument("--budget", type=pos_number, default=300.0, help="training seconds per side")
    ap.add_argument("--every", type=pos_number, default=30.0, help="seconds between evaluations")
    ap.add_argument("--markets", type=pos_int, default=5000, help="held-out markets per point")
    ap.add_argument("--envs", type=pos_int, default=256, help="RLlib: markets per vector env")
    ap.add_argument("--rllib-batch", type=pos_int, default=8192, help="RLlib: env steps/iteration")
    ap.add_argument("--rllib-minibatch", type=pos_int, default=1024)
    ap.add_argument("--rllib-epochs", type=pos_int, default=4)
    ap.add_argument("--rllib-lr", type=pos_number, default=3e-4)
    ap.add_argument("--arena-batch", type=pos_int, default=1024, help="arena: markets a batch")
    ap.add_argument(
        "--arena-imitation", type=nonneg_int, default=10, help="arena: warm-start batches"
    )
    ap.add_argument("--seed", type=nonneg_int, default=0)
    ap.add_argument("--threads", type=pos_int, default=1, help="torch threads, both sides")
    ap.add_argument("--side", choices=("both", "rllib", "arena"), default="both")
    ap.add_argument("--json", action="store_true", help="also print one JSON object")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    config = MarketConfig()
    buyers = BUYERS
    before = load()
    greedy = evaluate(registry.make("greedy_matcher", "seller"), config, buyers, args.markets)
    out: dict = {"budget_s": args.budget, "markets": args.markets, "load_before": before}
    if args.side in ("both", "rllib"):
        out["rllib"] = run_rllib(args, config, buyers)
    if args.side in ("both", "arena"):
        out["arena"] = run_arena(args, config, buyers)
    out["load_after"] = load()
    out["greedy_matcher"] = greedy

    print(
        f"config: the default MarketConfig ({config.buyers} buyers, {config.products} products, "
        f"T={config.turns}); opponents {', '.join(buyers)} (equal shares); "
        f"{args.markets} held-out markets per point"
    )
    print(f"load average (1, 5, 15 min): before {before}, after {out['load_after']}")
    print(f"greedy_matcher on the same markets: {greedy:.2f}")
    for side in ("rllib", "arena"):
        if side in out:
            print(f"\n{side}: training s -> mean profit")
            for t, p in out[side]:
                print(f"  {t:8.1f}  {p:8.2f}")
    if "rllib" in out and "arena" in out:
        final_r, final_a = out["rllib"][-1][1], out["arena"][-1][1]
        t_r = out["rllib"][-1][0]
        t_a = reached(out["arena"], final_r)
        out["rllib_final"], out["arena_final"] = final_r, final_a
        out["arena_reaches_rllib_final_s"] = t_a
        if t_a is None:
            print(f"\narena never reached RLlib's final profit {final_r:.2f} (its best: "
                  f"{max(p for _, p in out['arena']):.2f})")  # fmt: skip
        else:
            print(
                f"\nRLlib's final profit {final_r:.2f} after {t_r:.0f} s; arena reached it "
                f"after {t_a:.0f} s ({t_a / t_r:.2f} of RLlib's time; target <= 0.20); "
                f"arena's final profit {final_a:.2f}"
            )
    if args.json:
        print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
