"""benchmarks/rllib_vs_arena.py: its arena side trains with the shipped seller's PPO
hyper-parameters from a warm start (stage 1's config), never from the shipped stages."""

from __future__ import annotations

import argparse
import dataclasses
import math

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


def test_the_arena_side_continues_from_its_warm_start_without_imitating_again(load_benchmark):
    """After its own warm start the benchmark trains from the saved weights. The shipped
    config imitates the greedy matcher, so that step must drop the warm start whole: it
    kept ``imitate`` with no imitation iterations, which the training config refuses, and
    the benchmark stopped there. Its arena side on a tiny budget, warm start included."""
    bench = load_benchmark("rllib_vs_arena")
    args = argparse.Namespace(
        seed=3, arena_batch=32, arena_imitation=1, threads=1, markets=20, budget=0.0, every=1.0
    )
    points = bench.run_arena(args, MarketConfig(buyers=3, products=2, turns=4), ("truthful",))
    assert len(points) == 2  # before and after the one imitation batch
    assert all(math.isfinite(profit) for _, profit in points)


def test_starting_from_a_checkpoint_drops_the_warm_start(tmp_path):
    joint = load_train_config("agents/rl/configs/seller_joint.toml")
    later = joint.starting_from(str(tmp_path / "warm"))
    assert later.init == str(tmp_path / "warm")
    assert (later.imitate, later.imitation_iterations) == ("", 0)
    assert joint.starting_from("") == dataclasses.replace(joint, init="")
