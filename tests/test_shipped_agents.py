"""The shipped RL agents: registered by name, conforming, violation-free, reproducible from
the config they name (agents/rl/checkpoints, agents/rl/configs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import registry
from agents.conformance import check_buyer, check_seller
from agents.evaluate import play_markets
from agents.rl import checkpoint
from agents.rl.config import load_train_config
from tournaments.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "agents" / "rl" / "checkpoints"
DEFAULT = ROOT / "tournaments" / "specs" / "default.toml"


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("name", "side"), [("rl_seller", "seller"), ("rl_buyer", "buyer")])
def test_shipped_agents_are_registered_from_their_checkpoints(name, side):
    entry = registry.get(name, side)
    assert entry.kind == "agent"
    meta = json.loads((SHIPPED / name / "config.json").read_text())
    assert meta["policy"]["name"] == name
    # The training config it records is the shipped config file's, so the one documented
    # command reproduces it.
    shipped = load_train_config(str(ROOT / "agents" / "rl" / "configs" / f"{side}.toml"))
    assert meta["training"] == json.loads(json.dumps(shipped.to_dict()))
    # Curve written by the run: the trainer's own log.
    assert (SHIPPED / name / "curve.csv").read_text().startswith("iteration,")


def test_the_shipped_buyer_plays_as_three_variants():
    for name in ("rl_buyer", "rl_buyer+disclosed", "rl_buyer+learned"):
        assert registry.get(name, "buyer").kind == "agent"


def test_the_shipped_seller_never_breaks_a_rule_on_the_default_configs():
    spec = load_spec(str(DEFAULT))
    seller = registry.make("rl_seller", "seller", seed=0)
    for _, cfg in spec.configs:
        for buyers in ("truthful", "haggler", "human=noisy_human,agent=strategic"):
            m = play_markets(cfg, 3, range(300), seller, registry.make_buyers(buyers))
            assert m["seller_violations"].sum() == 0, (cfg, buyers)
            assert np.isfinite(m["profit"]).all()


def test_the_shipped_agents_conform():
    seller = checkpoint.load(SHIPPED / "rl_seller")
    buyer = checkpoint.load(SHIPPED / "rl_buyer")
    assert (
        check_seller(lambda seed: registry.make("rl_seller", "seller", seed=seed), markets=6) == []
    )
    assert check_buyer(lambda seed: registry.make("rl_buyer", "buyer", seed=seed), markets=6) == []
    assert seller.greedy and buyer.greedy


def test_the_default_tournament_enters_both():
    spec = load_spec(str(DEFAULT))
    assert "rl_seller" in spec.sellers
    assert "rl_buyer" in spec.buyers and "rl_buyer+disclosed" in spec.buyers
