"""RLlib's PPO on the Gymnasium seller environment (examples/rllib_seller.py): one
training iteration on the local Ray, and the export to a checkpoint the arena plays;
the exported seller (``FixedSizeSeller``) through the conformance check."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import registry
from agents.conformance import check_seller
from agents.evaluate import play_markets
from agents.rl import checkpoint
from agents.rl.fixed import FixedSizeSeller
from arena.config import MarketConfig
from tournaments.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SMALL = MarketConfig(buyers=4, products=2, inventory=1, turns=6, agent_share=0.5)


def _fixed(seed: int, greedy: bool = True) -> FixedSizeSeller:
    torch.manual_seed(3)  # the same weights for every policy of a check
    return FixedSizeSeller(seed=seed, greedy=greedy, buyers=4, products=2, hidden=(16,))


@pytest.mark.parametrize("greedy", [True, False])
def test_fixed_size_seller_conforms_on_its_market_size(greedy):
    configs = (
        SMALL,
        dataclasses.replace(SMALL, patience=2, disclosure="mandatory", price_range=(50.0, 900.0)),
    )
    assert check_seller(lambda s: _fixed(s, greedy), markets=8, configs=configs) == []


def test_fixed_size_seller_checkpoint_round_trip_and_a_wrong_size(tmp_path):
    seller = _fixed(0)
    checkpoint.save(tmp_path / "ck", seller, name="mlp")
    again = checkpoint.load(tmp_path / "ck")
    assert isinstance(again, FixedSizeSeller) and again.space == seller.space
    a = play_markets(SMALL, 1, range(32), seller, registry.make_buyers("truthful"))
    b = play_markets(SMALL, 1, range(32), again, registry.make_buyers("truthful"))
    np.testing.assert_array_equal(a["profit"], b["profit"])
    with pytest.raises(ValueError, match="markets of 4 buyers and 2 products"):
        play_markets(MarketConfig(), 0, range(2), again, registry.make_buyers("truthful"))


@pytest.fixture(scope="module")
def rllib_seller():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import rllib_seller
    finally:
        sys.path.remove(str(EXAMPLES))
    return rllib_seller


@pytest.mark.slow
def test_one_rllib_ppo_iteration_and_the_export_plays_in_the_arena(
    ray_session, rllib_seller, tmp_path, capsys
):
    s = rllib_seller.Settings(
        config=SMALL.to_dict(),
        buyers=["truthful", "haggler"],
        envs=8,
        batch=192,
        minibatch=96,
        epochs=1,
        hidden=[16],
    )
    algo = rllib_seller.ppo_config(s).build_algo()
    try:
        before = {
            k: v.copy() for k, v in algo.learner_group.get_weights()["default_policy"].items()
        }
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 192
        after = algo.learner_group.get_weights()["default_policy"]
        assert any(not np.array_equal(before[k], after[k]) for k in before)
        path = rllib_seller.export(algo, s, tmp_path / "exported")
        # The exported seller scores observations exactly as the trained module does.
        module = algo.get_module()
        from agents.gym_env import SellerVectorEnv

        env = SellerVectorEnv(8, SMALL, "truthful")
        obs, _ = env.reset(seed=0)
        with torch.no_grad():
            out = module.forward_inference(
                {"obs": {k: torch.from_numpy(v) for k, v in obs.items()}}
            )
        policy = checkpoint.load(path)
        ours = policy.logits(env._obs)
        theirs = out["action_dist_inputs"].double().numpy()
        legal = obs["action_mask"].astype(bool)
        np.testing.assert_allclose(ours[legal], theirs[legal], rtol=1e-5, atol=1e-5)
    finally:
        algo.stop()
    assert main(["eval", "--seller", str(path), "--buyers", "haggler", "--markets", "50",
                 "--market", str(_market_file(tmp_path))]) == 0  # fmt: skip
    assert "profit" in capsys.readouterr().out


def _market_file(tmp_path: Path) -> Path:
    lines = ["[market]"]
    for key, value in SMALL.to_dict().items():
        if isinstance(value, str):
            lines.append(f'{key} = "{value}"')
        elif isinstance(value, list | tuple):
            lines.append(f"{key} = [{', '.join(str(v) for v in value)}]")
        else:
            lines.append(f"{key} = {value}")
    path = tmp_path / "small.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
