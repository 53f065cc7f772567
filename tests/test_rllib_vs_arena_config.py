"""benchmarks/rllib_vs_arena.py: its arena side trains with the shipped seller's PPO
hyper-parameters from a warm start (stage 1's config), never from the shipped stages."""

from __future__ import annotations

import argparse

from agents.rl.config import load_train_config
from arena.config import MarketConfig


def test_the_arena_side_is_plain_ppo_from_a_warm_start(load_benchmark):
    bench = load_benchmark("rllib_vs_arena")
    args = argparse.Namespace(seed=3, arena_batch=64, arena_imitation=2, threads=1)
    cfg = bench.arena_config(args, MarketConfig(buyers=3, products=2), ("truthful",))
    joint = load_train_config("agents/rl/configs/seller_joint.toml")
    assert cfg.imitate == joint.imitate == "greedy_matcher" and cfg.imitation_iterations == 2
    assert (cfg.lr, cfg.epochs, cfg.hidden) == (joint.lr, joint.epochs, joint.hidden)
    assert cfg.teachers == () and cfg.init == ""
