"""The trainer's guards: small minibatches, non-finite losses, pulls toward a move the
policy cannot make, interrupted checkpoints, broken trainer state, options set on the
wrong side, and the caller's global state (torch's generator and threads, the plotting
backend), each left as it was or turned into one clear error."""

from __future__ import annotations

import json
import math

import matplotlib
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from agents.rl import checkpoint
from agents.rl.config import TrainConfig, load_train_config
from agents.rl.policies import RLSeller
from agents.rl.ppo import (
    STATE_JSON,
    TrainError,
    _expert_nll,
    _level_ce,
    _minibatches,
    _normalized,
    _opponents,
    _smoothed_ce,
    buyer_rollout,
    ppo_update,
    start_policy,
    train,
)
from tests.test_rl import SMALL, TINY_TOML
from tests.test_rl import _tiny as _rl_tiny


def _tiny(side: str = "seller", **kw) -> TrainConfig:
    """``tests.test_rl``'s tiny run, smaller still, saved after every iteration."""
    return _rl_tiny(None, side, **{"iterations": 3, "batch_size": 16, "checkpoint_every": 1, **kw})


def _finite(run) -> bool:
    return all(torch.isfinite(t).all() for t in load_file(str(run / "model.safetensors")).values())


# ---------------------------------------------------------------------- minibatches
def test_a_last_minibatch_of_one_sample_joins_the_one_before():
    g = torch.Generator().manual_seed(0)
    parts = _minibatches(7, 4, g)
    assert [p.numel() for p in parts] == [2, 2, 3]
    assert sorted(torch.cat(parts).tolist()) == list(range(7))
    assert [p.numel() for p in _minibatches(8, 4, g)] == [2, 2, 2, 2]  # as torch splits
    assert [p.numel() for p in _minibatches(1, 4, g)] == [1]
    assert _normalized(torch.tensor([3.0])).tolist() == [0.0]  # no spread to scale by
    a = _normalized(torch.tensor([1.0, 2.0, 6.0]))
    assert float(a.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(a.std()) == pytest.approx(1.0, rel=1e-6)


def test_a_buyer_run_whose_samples_split_unevenly_keeps_finite_weights(tmp_path):
    """Two markets a batch and four minibatches: a buyer's sample count varies per
    iteration, and a minibatch of one sample made every weight NaN."""
    run = train(_tiny("buyer", batch_size=2, minibatches=4), tmp_path / "run", progress=False)
    assert _finite(run)


def test_a_non_finite_loss_stops_before_the_weights_take_it(tmp_path):
    cfg = _tiny("buyer")
    policy = start_policy(cfg)
    data = buyer_rollout(policy, SMALL, _opponents(cfg, 0), [1.0, 1.0], cfg, 3).data
    data["ret"][0] = math.nan
    before = {k: v.clone() for k, v in policy.net.state_dict().items()}
    optimizer = torch.optim.Adam(policy.net.parameters(), lr=1e-3)
    with pytest.raises(TrainError, match="loss is nan"):
        ppo_update(policy, optimizer, data, cfg, 0.01, torch.Generator().manual_seed(0))
    for k, v in policy.net.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_a_buyer_rollout_against_a_seller_that_asks_nobody_reads_its_markets():
    """Every market ends inside the environment's reset (T messages that ask nobody): the
    rollout still takes its first step, which reports them, and the update on a rollout
    without a decision changes nothing."""
    from tests.test_env import _Scripted

    cfg = _tiny("buyer")
    policy = start_policy(cfg)
    mute = _Scripted(mute=lambda calls, obs: np.ones(obs.batch_size, bool), limit=10**6)
    rollout = buyer_rollout(policy, SMALL, [mute], [1.0], cfg, 3)
    assert rollout.stats["episodes"] == cfg.batch_size
    assert rollout.stats["decisions"] == 0.0
    assert rollout.stats["seller_violation_rate"] == 1.0
    assert rollout.data["adv"].shape == (0,)
    before = {k: v.clone() for k, v in policy.net.state_dict().items()}
    optimizer = torch.optim.Adam(policy.net.parameters(), lr=1e-3)
    upd = ppo_update(policy, optimizer, rollout.data, cfg, 0.01, torch.Generator().manual_seed(0))
    assert math.isnan(upd["policy_loss"])
    for k, v in policy.net.state_dict().items():
        assert torch.equal(v, before[k]), k


@pytest.mark.parametrize("poison", ["ret", "lr"])
def test_a_non_finite_warm_start_loss_stops_before_anything_is_written(
    tmp_path, monkeypatch, poison
):
    """The warm start checks its loss as PPO does: a NaN value target (or a step size
    that blows the weights up) stops the run before any weights are saved, and the
    folder is left for a new run, not holding NaN weights it can neither resume nor
    reuse."""
    import agents.rl.ppo as ppo

    if poison == "ret":
        real = ppo.imitation_rollout

        def poisoned(*args, **kwargs):
            data = real(*args, **kwargs)
            data["ret"][0] = math.nan
            return data

        monkeypatch.setattr(ppo, "imitation_rollout", poisoned)
        cfg = _tiny(imitate="greedy_matcher", imitation_iterations=1, iterations=1)
    else:
        cfg = _tiny(imitate="greedy_matcher", imitation_iterations=1, imitation_lr=1e30)
    run = tmp_path / "run"
    with pytest.raises(TrainError, match=r"the warm start loss is (nan|inf): stopped"):
        train(cfg, run, progress=False)
    assert not (run / "model.safetensors").exists() and not (run / STATE_JSON).exists()
    monkeypatch.undo()
    good = _tiny(imitate="greedy_matcher", imitation_iterations=1, iterations=1)
    assert _finite(train(good, run, progress=False))


# ---------------------------------------------------------------------- train.init
NO_GATE = r"has no market gate \(film\), train.film = true"
GATE = r"has a market gate \(film\), train.film = false"


@pytest.mark.parametrize(
    ("side", "saved", "asked", "words"),
    [
        ("seller", {"hidden": 16}, {"hidden": 8}, "is a network 16 wide, train.hidden = 8"),
        ("seller", {"hidden": 8}, {"hidden": 8, "film": True}, NO_GATE),
        ("seller", {"hidden": 8, "film": True}, {"hidden": 8}, GATE),
        ("buyer", {"hidden": 16}, {"hidden": 8}, "is a network 16 wide, train.hidden = 8"),
    ],
)
def test_a_start_whose_network_is_not_the_configs_is_refused(tmp_path, side, saved, asked, words):
    """``train.init`` trains the checkpoint's network: a config asking for another width
    or gate was ignored, while the run's training record (and its memory check) said
    otherwise."""
    from agents.rl.policies import RLBuyer

    init = tmp_path / "init"
    checkpoint.save(init, (RLSeller if side == "seller" else RLBuyer)(**saved), name="init")
    cfg = _tiny(side, init=str(init), iterations=1, **asked)
    with pytest.raises(TrainError, match=words) as err:
        train(cfg, tmp_path / "run", progress=False)
    assert "\n" not in str(err.value) and not (tmp_path / "run").exists()
    same = _tiny(side, init=str(init), iterations=1, **saved)  # the checkpoint's own: trains
    assert checkpoint.load(train(same, tmp_path / "ok", progress=False)).net.cfg == (
        checkpoint.load(init).net.cfg
    )


# ---------------------------------------------------------------------- the pulls
def test_the_expert_pull_skips_rows_whose_choice_leaves_the_experts_pair_out():
    logits = torch.tensor([[0.0, 1.0, 2.0], [0.5, 0.0, -math.inf]])
    policy = RLSeller(hidden=8)
    plog = torch.zeros(2, policy.levels)
    data = {
        "expert_pair": torch.tensor([1, 2]),  # row 1's expert pair is not allowed
        "pair": torch.tensor([1, 0]),
    }
    idx = torch.arange(2)
    got = _expert_nll(policy, logits, plog, data, idx, pull="pair")
    want = -torch.log_softmax(logits[0], -1)[1] / 2
    assert torch.isfinite(got) and float(got) == pytest.approx(float(want))
    # The move pull adds the price level on row 0 (its sampled pair is the expert's) only.
    move = _expert_nll(policy, logits, plog, data, idx, pull="move")
    level = -torch.log_softmax(plog[0], -1)[policy.expert_level]
    assert float(move) == pytest.approx(float(want + level / 2))


def test_a_within_plan_run_with_a_greedy_experts_pull_logs_a_finite_pull(tmp_path):
    import csv

    cfg = _tiny(within_plan=True, assignment=False, expert_coef=0.1, iterations=2)
    run = train(cfg, tmp_path / "run", progress=False)
    with open(run / "curve.csv", newline="") as fh:
        pulls = [float(r["expert_nll"]) for r in csv.DictReader(fh) if r["phase"] == "train"]
    assert len(pulls) == 2 and all(math.isfinite(x) and x > 0 for x in pulls)
    assert _finite(run)


def test_the_spread_around_the_experts_level_needs_levels_around_it():
    policy = RLSeller(hidden=8, expert_offsets=(0.0,))
    logits = torch.randn(5, policy.levels, generator=torch.Generator().manual_seed(1))
    target = torch.full((5,), policy.expert_level)
    got = _level_ce(policy, logits, target, 0.1, 0.2)
    assert torch.isfinite(got) and torch.equal(got, _smoothed_ce(logits, target, 0.1))
    wide = RLSeller(hidden=8)  # with levels around the expert's, the spread counts
    logits = torch.randn(5, wide.levels, generator=torch.Generator().manual_seed(1))
    target = torch.full((5,), wide.expert_level)
    assert not torch.equal(
        _level_ce(wide, logits, target, 0.1, 0.2), _smoothed_ce(logits, target, 0.1)
    )


def test_a_teacher_that_reads_private_values_is_refused(tmp_path):
    cfg = _tiny(imitate="oracle", imitation_iterations=1)
    with pytest.raises(TrainError, match="private values"):
        train(cfg, tmp_path / "run", progress=False)


# ---------------------------------------------------------------------- resuming
@pytest.fixture
def stopped(tmp_path):
    """A tiny seller run (``tests.test_rl.TINY_TOML``) stopped after 2 of its 4 iterations."""
    (tmp_path / "tiny.toml").write_text(TINY_TOML)
    cfg = load_train_config(str(tmp_path / "tiny.toml"))
    run = train(cfg, tmp_path / "run", progress=False, until=2)
    return cfg, run


def test_resume_refuses_weights_the_state_was_not_saved_with(stopped):
    """A run stopped after writing its weights and before its state: the pair differs."""
    cfg, run = stopped
    state = json.loads((run / STATE_JSON).read_text())
    assert state["weights_sha256"] == checkpoint.read_checkpoint(run).weights_sha256
    checkpoint.save(run, RLSeller(hidden=16, seed=9), name=cfg.name, training=cfg.to_dict())
    with pytest.raises(TrainError, match="stopped while saving"):
        train(cfg, run, resume=True, progress=False)


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda run: (run / "curve.csv").unlink(), "curve.csv: cannot resume"),
        (lambda run: _edit_state(run, lambda s: s.pop("param_groups")), "not a trainer state"),
        (lambda run: (run / STATE_JSON).write_text('{"iteration": 2, '), "train_state.json"),
        (lambda run: (run / STATE_JSON).write_text("[]"), "not a trainer state"),
    ],
)
def test_resume_from_a_damaged_run_is_one_clear_error(stopped, damage, words):
    cfg, run = stopped
    damage(run)
    with pytest.raises(TrainError, match=words) as err:
        train(cfg, run, resume=True, progress=False)
    assert "\n" not in str(err.value)


def _edit_state(run, change) -> None:
    state = json.loads((run / STATE_JSON).read_text())
    change(state)
    (run / STATE_JSON).write_text(json.dumps(state))


def test_a_damaged_run_is_one_error_line_from_the_command(stopped, tmp_path, capsys):
    from tournaments.cli import main

    _, run = stopped
    (run / "curve.csv").unlink()
    config = str(tmp_path / "tiny.toml")
    code = main(["train", "seller", "--config", config, "--out", str(run), "--resume"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "curve.csv: cannot resume" in err[0], err
    assert err[0].startswith("arena: error: ")


# ---------------------------------------------------------------------- options
@pytest.mark.parametrize(
    ("side", "option", "value"),
    [
        ("buyer", "gamma", 0.9),
        ("buyer", "penalty", 0.1),
        ("buyer", "steps", 4),
        ("buyer", "expert_pull", "pair"),
        ("buyer", "imitation_lr", 0.01),
        ("buyer", "within_plan", False),
        ("seller", "team_return", True),
        ("seller", "learned_disclosure", True),
    ],
)
def test_an_option_of_the_other_side_is_an_error_not_ignored(side, option, value):
    with pytest.raises(
        ValueError,
        match=f"train.{option}: a {'seller' if side == 'buyer' else 'buyer'}-side option",
    ):
        _tiny(side, **{option: value})
    _tiny(side)  # the defaults pass


def test_imitation_settings_need_a_teacher():
    with pytest.raises(ValueError, match="imitation_iterations: needs train.imitate"):
        _tiny(imitation_iterations=3)
    assert _tiny(imitate="greedy_matcher", imitation_iterations=3).imitation_iterations == 3


# ---------------------------------------------------------------------- global state
def test_training_leaves_the_callers_generator_threads_and_plot_backend(tmp_path):
    backend = matplotlib.get_backend()
    threads = torch.get_num_threads()
    matplotlib.use("pdf")
    torch.set_num_threads(2)
    try:
        torch.manual_seed(1234)
        rng = torch.get_rng_state()
        run = train(_tiny(iterations=1), tmp_path / "run", progress=False)
        assert (run / "curve.png").stat().st_size > 0
        assert torch.equal(torch.get_rng_state(), rng)
        assert torch.get_num_threads() == 2
        assert matplotlib.get_backend() == "pdf"
        # A fresh start draws the same weights whatever the caller's generator holds.
        torch.manual_seed(99)
        again = start_policy(_tiny(iterations=1)).net.state_dict()
        first = start_policy(_tiny(iterations=1)).net.state_dict()
        assert all(torch.equal(again[k], first[k]) for k in first)
    finally:
        matplotlib.use(backend)
        torch.set_num_threads(threads)


def test_the_warm_starts_value_targets_are_discounted_as_ppos_returns():
    """gamma 0: each turn's own reward; gamma 1: the market's rest. Over a batch, the
    rewards summed once each equal the returns of the first turns (every market is live
    then), and the undiscounted targets count later rewards again."""
    from agents.rl.ppo import imitation_rollout, imitation_teacher

    rets = {}
    for gamma in (0.0, 1.0):
        cfg = _tiny(imitate="greedy_matcher", imitation_iterations=1, gamma=gamma, batch_size=32)
        policy = start_policy(cfg)
        data = imitation_rollout(
            policy, imitation_teacher(cfg), SMALL, _opponents(cfg, 0), [1.0, 1.0], cfg, 7
        )
        rets[gamma] = data["ret"].double()
    total = rets[0.0].sum()
    assert float(total) > 0
    assert float(rets[1.0][:32].sum()) == pytest.approx(float(total), rel=1e-6)
    assert float(rets[1.0].sum()) > 1.5 * float(total)
