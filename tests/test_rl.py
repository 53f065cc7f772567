"""RL policies, checkpoints as entries, and the PPO trainer on tiny budgets."""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import math
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from agents import registry
from agents.conformance import check_buyer, check_seller
from agents.evaluate import play_markets
from agents.rl import checkpoint
from agents.rl.config import ConfigFamily, Opponent, TrainConfig, load_train_config
from agents.rl.features import disclosure_features
from agents.rl.policies import BID_SHARES, RLBuyer, RLSeller
from agents.rl.ppo import gae, returns_to_go, start_policy, train
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import GreedyMatcher
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate_batch
from arena.observation import COUNTER, BuyerObs, take_rows

# Stage 3 of the recipe shipped before the plan-feature one, the base of the experiments
# measured against it (agents/rl/configs/experiments/seller_stage3.toml).
STAGE3 = "experiments/seller_stage3.toml"
MIXED_NAME = "human=noisy_human,agent=strategic"

SMALL = MarketConfig(buyers=4, products=2, inventory=1, turns=6, agent_share=0.5)


def _seller(seed: int = 0) -> RLSeller:
    torch.manual_seed(seed)
    return RLSeller(hidden=16)


def _buyer(seed: int = 0) -> RLBuyer:
    torch.manual_seed(seed)
    return RLBuyer(hidden=16)


# ---------------------------------------------------------------------- policies
def test_rl_policies_conform():
    """Sampling mode: the stricter case, since every choice draws keyed noise."""
    s, b = _seller(), _buyer()
    assert check_seller(lambda seed: RLSeller(s.net, seed=seed, greedy=False), markets=6) == []
    assert check_buyer(lambda seed: RLBuyer(b.net, seed=seed, greedy=False), markets=6) == []


def test_seller_runs_unchanged_on_any_market_size_and_scale():
    s = _seller()
    for cfg in (
        MarketConfig(buyers=1, products=1),
        MarketConfig(buyers=30, products=9, turns=40, price_range=(5000.0, 90000.0)),
    ):
        m = play_markets(cfg, 0, range(8), s, Truthful())
        assert m["seller_violations"].sum() == 0 and np.isfinite(m["profit"]).all()


def test_the_levels_price_from_signal_expert_and_cost():
    from arena.prices import cents

    s = _seller()
    batch = generate_batch(SMALL, 4, range(16))
    engine = BatchedMarket(batch)
    obs = engine.seller_observation()
    s.reset(16)
    d = s.decide(obs)  # fills the expert's table and the memory
    to, product, ar = d.action.to, d.action.product, np.arange(16)
    lo, hi = obs.price_range
    cost, signal = obs.costs[ar, product], obs.signals[ar, to, product]
    first = s.expert_level + len(s.expert_offsets)
    assert s.levels == first + len(s.markups) and s.markups == (0.2, 0.35, 0.5, 0.7, 1.0)
    for k, markup in enumerate(s.markups):
        p = s._price(obs, to, product, np.full(16, first + k))
        np.testing.assert_array_equal(p, cents(cost * (1 + markup), lo, hi))
    for k, off in enumerate(s.offsets):
        p = s._price(obs, to, product, np.full(16, k))
        np.testing.assert_array_equal(p, cents(np.maximum(signal + off * (hi - lo), cost), lo, hi))
    expert = s._price(obs, to, product, np.full(16, s.expert_level))
    np.testing.assert_array_equal(expert, cents(s._table[1][ar, to, product], lo, hi))


def test_sampling_explores_and_greedy_does_not():
    s = _seller()
    sampled = play_markets(SMALL, 0, range(64), RLSeller(s.net, seed=1, greedy=False), Truthful())
    again = play_markets(SMALL, 0, range(64), RLSeller(s.net, seed=2, greedy=False), Truthful())
    assert not np.array_equal(sampled["profit"], again["profit"])  # the seed matters
    g1 = play_markets(SMALL, 0, range(64), RLSeller(s.net, seed=1), Truthful())
    g2 = play_markets(SMALL, 0, range(64), RLSeller(s.net, seed=2), Truthful())
    np.testing.assert_array_equal(g1["profit"], g2["profit"])  # greedy ignores it


def _random_net(seed: int, film: bool = False, hidden: int = 16) -> RLSeller:
    """A seller whose every weight is drawn (heads included: they start at zero)."""
    s = RLSeller(hidden=hidden, film=film)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in s.net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return s


@pytest.mark.parametrize("size", ["small", "chunked"])
def test_play_without_gradients_gives_the_training_numbers_to_the_bit(size):
    """The net runs in place when no gradient is recorded, a chunk of markets at a time
    when the batch is large; on the same operands in the same order, so logits,
    embeddings and values equal the differentiable pass over the whole batch exactly.
    ``chunked``: batches of 2 to 3 chunks, sizes that divide evenly or do not."""
    from agents.rl.nets import PLAY_ROWS

    rng = np.random.default_rng(0)
    # Chunked: the shipped width, sizes of the training family and beyond; some of them
    # (7 x 5, 9 x 5, 11 x 3) round the pair head's product differently on a chunk's rows.
    shapes = [(1024, 8, 4), (1024, 7, 5), (1024, 9, 5), (1024, 11, 3), (263, 16, 8), (2000, 6, 3)]
    for seed in range(24 if size == "small" else len(shapes)):
        # with the market gate on odd seeds
        net = _random_net(seed, film=seed % 2 == 1, hidden=16 if size == "small" else 48).net
        b, n, m = (int(x) for x in rng.integers(1, 9, size=3))
        if size == "chunked":
            b, n, m = shapes[seed]
            assert b * n * m > PLAY_ROWS  # 2 to 3 chunks
        f = [
            torch.from_numpy(rng.normal(size=shape).astype(np.float32))
            for shape in (
                (b, n, m, net.cfg.features[0]),
                (b, n, net.cfg.features[1]),
                (b, m, net.cfg.features[2]),
                (b, net.cfg.features[3]),
            )
        ]
        open_ = torch.from_numpy(rng.random((b, n, m)) < 0.7)
        open_[0] = False  # a row with nothing open
        with torch.enable_grad():
            logits, h, value = net(*f, open_)
        with torch.inference_mode():
            logits2, h2, value2 = net(*f, open_)
            h2 = h2.clone()  # play's embeddings live in a buffer the next call reuses
            logits3, h3, value3 = net(*f, open_, value=False)
        assert torch.equal(logits, logits2) and torch.equal(h, h2) and torch.equal(value, value2)
        assert torch.equal(logits, logits3) and value3 is None
        flat = open_.reshape(b, n * m)
        assert torch.equal(h[flat], h3[flat])  # the only pairs play reads
        chunk, _, whole = net._workspace[threading.get_ident()]
        assert (chunk.shape[0] < whole.shape[0]) == (size == "chunked")


@pytest.mark.parametrize(("b", "n", "m"), [(4096, 8, 4), (1024, 7, 5), (999, 16, 8), (5, 3, 3)])
def test_play_chunks_start_on_multiples_of_64_pairs_and_stay_near_the_size_aimed_at(b, n, m):
    from agents.rl.nets import PLAY_ROWS, _chunk_markets

    step = _chunk_markets(b, n * m)
    starts = range(0, b, step)
    assert all(s * n * m % 64 == 0 for s in starts)  # rows where one pass puts them
    if b * n * m > PLAY_ROWS:
        assert len(starts) <= -(-b * n * m // PLAY_ROWS)  # no more chunks than the size needs
        assert step * n * m <= PLAY_ROWS + 64 * n * m
    else:
        assert len(starts) == 1


def test_seller_features_are_the_same_however_the_markets_are_shared_among_threads(
    monkeypatch,
):
    """``seller_features(..., threads=k)`` splits the markets among k threads; each
    market's features come from its own rows, so every split gives the same arrays, on
    every turn of markets with refusals, counters and bids."""
    import os

    from agents import rows
    from agents.rl import features

    monkeypatch.setattr(features, "ROWS_PER_THREAD", 1)  # split even these small batches
    turns = []

    class Checking(RLSeller):
        def decide(self, obs, sample=None, record=True):
            d = super().decide(obs, sample, record)
            alone = features.seller_features(obs, self._mem, self._table, threads=1)
            for threads in (2, 3, 7):
                split = features.seller_features(obs, self._mem, self._table, threads=threads)
                for a, b in zip(alone.arrays(), split.arrays(), strict=True):
                    np.testing.assert_array_equal(a, b)
            turns.append(obs.batch_size)
            return d

    seller = Checking(_random_net(1).net, seed=3, greedy=False)
    buyers = registry.make_buyers("human=haggler,agent=strategic")
    play_markets(SMALL, 0, range(37), seller, buyers)
    assert len(turns) == SMALL.turns and set(turns) == {37}
    assert {(os.getpid(), k) for k in (2, 3, 7)} <= set(rows._POOLS)


def test_the_market_gate_starts_as_no_gate_and_then_changes_the_play():
    torch.manual_seed(3)
    plain = RLSeller(hidden=16)
    torch.manual_seed(3)
    gated = RLSeller(hidden=16, film=True)
    for k, v in plain.net.state_dict().items():  # the other layers start the same
        assert torch.equal(v, gated.net.state_dict()[k])
    rng = np.random.default_rng(1)
    f = [
        torch.from_numpy(rng.normal(size=shape).astype(np.float32))
        for shape in ((3, 4, 2, gated.net.cfg.features[0]), (3, 4, gated.net.cfg.features[1]),
                      (3, 2, gated.net.cfg.features[2]), (3, gated.net.cfg.features[3]))
    ]  # fmt: skip
    open_ = torch.ones(3, 4, 2, dtype=torch.bool)
    with torch.no_grad():
        for head in (plain.net.pair_head, gated.net.pair_head):
            head.weight.fill_(0.3)
        a, b = plain.net(*f, open_)[0], gated.net(*f, open_)[0]
        assert torch.equal(a, b)  # a zero gate scales by exactly 1
        gated.net.film.bias.fill_(0.5)
        assert not torch.equal(a, gated.net(*f, open_)[0])
    with pytest.raises(ValueError, match="seller-side"):
        _tiny(Path("."), "buyer", film=True)


def test_pooled_answers_are_the_markets_answers_over_all_its_buyers():
    """``pooled``: four market features after the others, from the answers so far."""
    from agents.rl import features
    from agents.rl.features import SellerFeatures, SellerMemory

    obs = BatchedMarket(generate_batch(SMALL, 0, range(2))).seller_observation()
    mem = SellerMemory.empty(2, SMALL.buyers, SMALL.products)
    # Market 0: buyer 0 answered twice (refused once, by countering), buyer 2 once (a
    # refusal 0.1 of the range above its signal); market 1: no answer yet.
    mem.answers[0, [0, 2]] = (2, 1)
    mem.refusals[0, [0, 2]] = (1, 1)
    mem.counters[0, 0] = 1
    mem.depth[0, [0, 2]] = (0.2, 0.1)
    expert = GreedyMatcher().pair_table(obs)
    plain = features.seller_features(obs, mem, expert)
    pooled = features.seller_features(obs, mem, expert, pooled=True)
    assert pooled.market.shape == (2, SellerFeatures.MARKET + SellerFeatures.POOLED)
    np.testing.assert_allclose(
        pooled.market[:, SellerFeatures.MARKET :],
        [[2 / 3, 1 / 3, 0.3 / 3, 3 / SMALL.buyers / 3], [0, 0, 0, 0]],
        rtol=1e-6,
    )
    for a, b in zip(plain.arrays()[:3], pooled.arrays()[:3], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(plain.market, pooled.market[:, : SellerFeatures.MARKET])


def test_a_pooled_seller_keeps_its_features_through_checkpoints_and_training(tmp_path):
    from agents.rl.features import SELLER_FEATURES, SELLER_FEATURES_POOLED

    torch.manual_seed(0)
    seller = RLSeller(hidden=16, pooled=True)
    assert seller.pooled and seller.net.cfg.features == SELLER_FEATURES_POOLED
    assert not _seller().pooled and _seller().net.cfg.features == SELLER_FEATURES
    assert check_seller(lambda seed: RLSeller(seller.net, seed=seed, greedy=False)) == []
    back = checkpoint.load(checkpoint.save(tmp_path / "ck", seller, name="pooled"))
    assert back.pooled
    _a_feature_option_trains_and_refuses_other_starts(tmp_path, "pooled")


def test_a_seller_that_sees_its_plan_reads_the_matching_as_its_last_pair_feature(tmp_path):
    """``plan_feature``: one more pair feature, 1 exactly on the pairs of the market's
    planned matching; the rest of the features are those of the seller without it; the
    checkpoint keeps it, and older checkpoints read as without it."""
    from agents.rl.features import SELLER_FEATURES, SellerFeatures

    torch.manual_seed(0)
    seller = RLSeller(hidden=16, plan_feature=True, assignment=True)
    assert seller.plan_feature and seller.net.cfg.features == (
        SellerFeatures.PAIR + 1,
        *SELLER_FEATURES[1:],
    )
    assert not _seller().plan_feature
    plain = RLSeller(hidden=16, assignment=True)
    cfg = dataclasses.replace(SMALL, buyers=6, products=3, turns=8)
    engine = BatchedMarket(generate_batch(cfg, 2, range(30)))
    seller.reset(30)
    plain.reset(30)
    seen = 0
    while not engine.all_done:
        obs = engine.seller_observation()
        d = seller.decide(obs, record=True)
        ref = plain.decide(obs, record=True)
        np.testing.assert_array_equal(d.features.pair[..., :-1], ref.features.pair)
        plan = d.features.pair[..., -1]
        np.testing.assert_array_equal(plan, seller._plan.matched())
        seen += int(plan.sum())
        prompt = engine.offer(ref.action.to, ref.action.product, ref.action.price)
        if prompt is not None:
            dec = Truthful().act(prompt)
            engine.answer(dec.decision, dec.product, dec.price)
    assert seen > 0
    assert check_seller(lambda seed: RLSeller(seller.net, seed=seed, greedy=False)) == []
    assert checkpoint.load(checkpoint.save(tmp_path / "ck", seller, name="plan")).plan_feature
    _a_feature_option_trains_and_refuses_other_starts(tmp_path, "plan_feature", assignment=True)


def _a_feature_option_trains_and_refuses_other_starts(tmp_path, option: str, **extra) -> None:
    """A seller option that adds features (``train.pooled``, ``train.prior_feature``): it
    trains, the checkpoint keeps it, configs record it only when set (as the shipped
    checkpoints' records read), and a start or a teacher without it is refused."""
    from agents.rl.ppo import TrainError

    cfg = _tiny(tmp_path, iterations=2, checkpoint_every=0, **{option: True}, **extra)
    assert cfg.to_dict()[option] is True
    assert option not in _tiny(tmp_path).to_dict()
    train(cfg, tmp_path / "run", progress=False)
    assert getattr(checkpoint.load(tmp_path / "run"), option)
    plain = checkpoint.save(tmp_path / "plain", _seller(), name="plain")
    with pytest.raises(TrainError, match=f"train.{option} = true"):
        train(dataclasses.replace(cfg, init=str(plain)), tmp_path / "again", progress=False)
    taught = dataclasses.replace(cfg, teachers=(("small", str(plain)),), teacher_coef=0.2)
    if option == "plan_feature":  # a teacher without the plan may teach (PlanBlindTeacher)
        train(taught, tmp_path / "t", progress=False)
    else:
        with pytest.raises(TrainError, match="sees features"):
            train(taught, tmp_path / "t", progress=False)
    with pytest.raises(ValueError, match="seller-side"):
        _tiny(tmp_path, "buyer", **{option: True})


def test_a_teacher_without_the_plan_reads_the_learners_features_less_the_plan_bit(tmp_path):
    """A learner with ``plan_feature`` may learn from a teacher trained without it: the
    teacher's logits are its own on the learner's features less the last pair feature,
    on every state of a rollout, so the plan bit changes nothing it computes. Any other
    difference in features is still refused, and a learner without the plan feature is
    not taught by one with it."""
    from agents.rl.ppo import (
        PlanBlindTeacher,
        TrainError,
        _load_teachers,
        reference_logp,
        seller_rollout,
    )

    torch.manual_seed(1)
    learner = RLSeller(hidden=16, plan_feature=True, assignment=True)
    with torch.no_grad():  # every weight drawn, heads included, so that no logit is flat
        for p in learner.net.parameters():
            p.normal_(0.0, 0.5)
    teacher = _random_net(3)
    plain = checkpoint.save(tmp_path / "plain", teacher, name="plain")
    cfg = _tiny(tmp_path, plan_feature=True, assignment=True, teacher_coef=0.2,
                teachers=(("small", str(plain)),))  # fmt: skip
    teachers, hashes = _load_teachers(cfg, learner)
    blind = teachers["small"]
    assert isinstance(blind, PlanBlindTeacher) and set(hashes) == {"small"}
    assert not any(p.requires_grad for p in blind.parameters())
    data = seller_rollout(learner, SMALL, [Truthful()], [1.0], cfg, 4).data
    assert data["pair_x"][..., -1].sum() > 0  # the plan bit is set somewhere
    got = reference_logp(blind, data)
    ref = teacher.net.eval()
    cut = {**data, "pair_x": data["pair_x"][..., :-1]}
    want = reference_logp(ref, cut)
    for k in ("ref_pair", "ref_level"):
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=0)
    wrong = reference_logp(ref, {**data, "pair_x": data["pair_x"][..., 1:]})  # another cut
    assert not torch.equal(wrong["ref_pair"], want["ref_pair"])
    flipped = {**data, "pair_x": data["pair_x"].clone()}
    flipped["pair_x"][..., -1] = 1 - flipped["pair_x"][..., -1]
    torch.testing.assert_close(reference_logp(blind, flipped)["ref_pair"], got["ref_pair"],
                               rtol=0, atol=0)  # fmt: skip
    assert not torch.equal(
        reference_logp(learner.net.eval(), flipped)["ref_pair"],
        reference_logp(learner.net.eval(), data)["ref_pair"],
    )  # while a learner that sees the plan reads the bit
    prior = RLSeller(hidden=16, prior_feature=True)
    other = checkpoint.save(tmp_path / "prior", prior, name="prior")
    with pytest.raises(TrainError, match="sees features"):
        _load_teachers(dataclasses.replace(cfg, teachers=(("small", str(other)),)), learner)
    planned = checkpoint.save(tmp_path / "planned", learner, name="planned")
    with pytest.raises(TrainError, match="sees features"):
        _load_teachers(dataclasses.replace(cfg, teachers=(("small", str(planned)),)), _seller())


def test_calibrated_signals_shrink_only_what_spreads_wider_than_tastes():
    """``calibrate_signals``: per market, each product's signals shrink toward their mean
    over the buyers by f = min(1, prior^2 / spread^2); a market that spreads no wider
    than the prior keeps its signals to the bit, and the markets of a batch do not mix."""
    from agents.rl.features import calibrate_signals

    for seed in range(12):
        exact = dataclasses.replace(
            SMALL, buyers=6, products=3, signal_noise=0.0, wealth_spread=0.1
        )
        noisy = dataclasses.replace(exact, signal_noise=0.6, price_range=(200.0, 1700.0))
        for cfg in (exact, noisy):
            obs = BatchedMarket(generate_batch(cfg, seed, range(5))).seller_observation()
            assert calibrate_signals(obs, 0.0) is obs
            out = calibrate_signals(obs, 0.15)
            lo, hi = obs.price_range
            dev = obs.signals - obs.signals.mean(axis=1, keepdims=True)
            spread = np.sqrt(np.square(dev).mean(axis=(1, 2))) / (hi - lo)  # (B,)
            new_dev = out.signals - out.signals.mean(axis=1, keepdims=True)
            for b in range(5):
                if spread[b] <= 0.15:
                    np.testing.assert_array_equal(out.signals[b], obs.signals[b])
                    continue
                f = 0.15**2 / spread[b] ** 2
                np.testing.assert_allclose(new_dev[b], f * dev[b], rtol=1e-9, atol=1e-9)
                np.testing.assert_allclose(  # each product's mean stays where it was
                    out.signals[b].mean(axis=0), obs.signals[b].mean(axis=0), rtol=1e-12
                )
                one = calibrate_signals(take_rows(obs, slice(b, b + 1)), 0.15)
                np.testing.assert_array_equal(one.signals[0], out.signals[b])
            # Only the signals change; markets with exact signals keep theirs.
            assert out.costs is obs.costs and out.active is obs.active
            if cfg is exact:
                assert (spread < 0.15).any()
            else:
                assert (spread > 0.15).all()


def test_the_assignment_option_makes_the_assignments_pick_the_experts_and_is_recorded(tmp_path):
    """``RLSeller.assignment``: the expert's table with the assignment's pick raised to
    the best value, so that the pick features mark it; play changes where the pick
    differs from the greedy one; checkpoints record it; a bad value is a clear error."""
    from agents.rl.policies import _assigned_table
    from agents.scripted.matching import assigned_pairs

    # Buyer 0 wants product 0 most (10) and product 1 nearly as much (9); buyer 1 can
    # only buy product 0 (8): the assignment's pick is (0, 1), the greedy one (0, 0).
    value = np.array([[[10.0, 9.0], [8.0, -np.inf]], [[5.0, 1.0], [1.0, 4.0]]])
    price = np.arange(8.0).reshape(2, 2, 2)
    stock = np.array([[1, 1], [1, 1]])
    got, same_price = _assigned_table((value, price), assigned_pairs(value, stock))
    assert same_price is price
    assert got[0, 0, 1] > 10.0 and got[0, 0, 1] == pytest.approx(10.0)
    np.testing.assert_array_equal(np.delete(got[0].ravel(), 1), np.delete(value[0].ravel(), 1))
    np.testing.assert_array_equal(got[1], value[1])  # there the greedy pick is the assignment's

    shipped = checkpoint.load(Path("agents/rl/checkpoints/rl_seller"))
    planned = RLSeller(shipped.net, signal_prior=shipped.signal_prior, assignment=True)
    cfg = dataclasses.replace(SMALL, buyers=6, products=3, turns=8)
    batch = generate_batch(cfg, 4, range(48))
    engine = BatchedMarket(batch)
    planned.reset(48)
    marked = differs = 0
    while not engine.all_done:
        obs = engine.seller_observation()
        d = planned.decide(obs, record=True)
        # The matcher's own values, before the raise (truthful buyers never bid, so no
        # standing bid changes them).
        greedy_value = planned._expert._table[0]
        to, product = assigned_pairs(np.where(_open(obs), greedy_value, -np.inf), obs.stock)
        live = np.flatnonzero(~obs.done)
        flag = d.features.pair[live, :, :, 14]  # the expert-pick feature
        assert (flag[np.arange(live.size), to[live], product[live]] == 1).all()
        assert (flag.reshape(live.size, -1).sum(1) == 1).all()
        np.testing.assert_array_equal(d.expert_pair[live], (to * obs.num_products + product)[live])
        marked += live.size
        differs += int((greedy_value.reshape(48, -1).argmax(1)[live] != d.expert_pair[live]).sum())
        prompt = engine.offer(d.action.to, d.action.product, d.action.price)
        if prompt is not None:
            dec = Truthful().act(prompt)
            engine.answer(dec.decision, dec.product, dec.price)
    assert marked > 0 and differs > 0
    plain = RLSeller(shipped.net, signal_prior=shipped.signal_prior)
    a = play_markets(cfg, 4, range(200), plain, Truthful())
    b = play_markets(cfg, 4, range(200), planned, Truthful())
    assert not np.array_equal(a["profit"], b["profit"])
    assert check_seller(lambda seed: RLSeller(shipped.net, seed=seed, assignment=True)) == []

    back = _a_flag_goes_through_checkpoints(tmp_path, "assignment", planned, plain)
    assert back.signal_prior == shipped.signal_prior


def test_train_assignment_sets_the_option_on_fresh_and_checkpoint_starts(tmp_path):
    from agents.rl.ppo import start_policy

    assert "assignment" not in _tiny(tmp_path).to_dict()  # as records from before it read
    assert _tiny(tmp_path, assignment=True).to_dict()["assignment"] is True
    assert start_policy(_tiny(tmp_path, assignment=True)).assignment is True
    assert start_policy(_tiny(tmp_path)).assignment is False
    start = str(checkpoint.save(tmp_path / "ck", RLSeller(assignment=True), name="planned"))
    assert start_policy(_tiny(tmp_path, init=start)).assignment is True  # unset: its own
    assert start_policy(_tiny(tmp_path, init=start, assignment=False)).assignment is False
    with pytest.raises(ValueError, match="seller-side"):
        _tiny(tmp_path, "buyer", assignment=True)
    for bad in ("yes", 1):
        with pytest.raises(ValueError, match="train.assignment"):
            _tiny(tmp_path, assignment=bad)
    assert load_train_config("agents/rl/configs/seller.toml").assignment is True  # shipped


def test_a_seller_within_its_plan_picks_matched_pairs_and_trains_on_the_same_choice(tmp_path):
    """``RLSeller.within_plan``: every pair it offers (greedy or sampled) is a pair of its
    market's max-weight matching when that matching has one; the log-probabilities a
    trainer recomputes from the stored choice are the ones it played with; the option goes
    through checkpoints and training configs, and a bad value is a clear error."""
    from agents.rl.ppo import start_policy
    from agents.scripted.matching import max_weight_matching

    shipped = checkpoint.load(Path("agents/rl/checkpoints/rl_seller"))
    cfg = dataclasses.replace(SMALL, buyers=6, products=3, turns=8)
    for sample in (False, True):
        seller = RLSeller(shipped.net, seed=3, assignment=True, within_plan=True)
        batch = generate_batch(cfg, 5, range(40))
        engine = BatchedMarket(batch)
        seller.reset(40)
        checked = 0
        while not engine.all_done:
            obs = engine.seller_observation()
            d = seller.decide(obs, sample=sample, record=True)
            # The matcher's values the plan was made on (as in the assignment test above).
            value = np.where(_open(obs), seller._expert._table[0], -np.inf)
            for b in np.flatnonzero(~obs.done):
                plan = max_weight_matching(value[b], obs.stock[b])
                if plan:  # the kept matching is a max-weight one, and the pair is in it
                    kept = [tuple(p) for p in np.argwhere(d.choice[b])]
                    got = sum(value[b][i, j] for i, j in kept)
                    assert got == pytest.approx(sum(value[b][i, j] for i, j in plan), rel=1e-9)
                    assert (d.action.to[b], d.action.product[b]) in kept
                    checked += 1
            _the_played_logp_is_recomputed(seller, d)
            _truthful_answer(engine, d.action)
        assert checked > 100
    # The shipped seller keeps to its plan against truthful buyers; the specialist shipped
    # before it leaves the plan there, so the option changes its play.
    leaves = checkpoint.load(Path("agents/rl/checkpoints/stages/rl_seller_retail_plan"))
    plain = RLSeller(leaves.net, assignment=True)
    within = RLSeller(leaves.net, assignment=True, within_plan=True)
    a = play_markets(cfg, 4, range(200), plain, Truthful())
    b = play_markets(cfg, 4, range(200), within, Truthful())
    assert not np.array_equal(a["profit"], b["profit"])
    assert (
        plain.decide(BatchedMarket(generate_batch(cfg, 4, range(2))).seller_observation()).choice
        is None
    )
    assert check_seller(lambda seed: RLSeller(shipped.net, seed=seed, within_plan=True)) == []

    back = _a_flag_goes_through_checkpoints(tmp_path, "within_plan", within, plain)
    assert back.assignment is True

    assert "within_plan" not in _tiny(tmp_path).to_dict()  # as records from before it read
    assert start_policy(_tiny(tmp_path, within_plan=True)).within_plan is True
    start = str(checkpoint.save(tmp_path / "ck2", within, name="within"))
    sees = shipped.plan_feature  # a run from it must ask for the features it sees
    assert start_policy(_tiny(tmp_path, init=start, plan_feature=sees)).within_plan is True
    off = _tiny(tmp_path, init=start, plan_feature=sees, within_plan=False)
    assert start_policy(off).within_plan is False  # set: the config's
    with pytest.raises(ValueError, match="train.within_plan"):
        _tiny(tmp_path, within_plan="yes")
    with pytest.raises(ValueError, match="seller-side"):
        _tiny(tmp_path, "buyer", within_plan=True)


def test_planned_matches_give_their_matching_as_pairs():
    from agents.scripted.matching import PlannedMatches, max_weight_matching

    plan = PlannedMatches()
    with pytest.raises(RuntimeError, match="pairs first"):
        plan.matched()
    rng = np.random.default_rng(0)
    value = rng.uniform(-2.0, 10.0, (30, 5, 3))
    value[rng.random(value.shape) < 0.2] = -np.inf
    stock = rng.integers(0, 3, (30, 3))
    to, product = plan.pairs(value, stock)
    got = plan.matched()
    assert got.shape == (30, 5, 3) and got.dtype == bool
    for b in range(30):
        ref = max_weight_matching(value[b], stock[b])
        assert sum(value[b][tuple(p)] for p in np.argwhere(got[b])) == pytest.approx(
            sum(value[b][i, j] for i, j in ref)
        )
        assert (got[b].sum(axis=0) <= stock[b]).all() and (got[b].sum(axis=1) <= 1).all()
        if ref:
            assert got[b, to[b], product[b]]


def test_a_seller_on_the_experts_pair_offers_the_assignment_matchers_pair(tmp_path):
    """``RLSeller.expert_pair``: with planned matches, every pair it offers is the one the
    assignment matcher offers on the same observation, greedy or sampled, at its own
    network's prices; the log-probabilities recomputed from the stored choice are the
    played ones; the option goes through checkpoints, and a bad value is a clear error."""
    from agents.scripted.sellers import AssignmentMatcher

    shipped = checkpoint.load(Path("agents/rl/checkpoints/rl_seller"))
    cfg = dataclasses.replace(SMALL, buyers=6, products=3, turns=8)
    for sample in (False, True):
        seller = RLSeller(shipped.net, seed=3, assignment=True, expert_pair=True)
        matcher = AssignmentMatcher()
        engine = BatchedMarket(generate_batch(cfg, 5, range(40)))
        seller.reset(40)
        matcher.reset(40)
        checked = priced = 0
        while not engine.all_done:
            obs = engine.seller_observation()
            d = seller.decide(obs, sample=sample, record=True)
            a = matcher.act(obs)
            live = ~obs.done
            np.testing.assert_array_equal(d.action.to[live], a.to[live])
            np.testing.assert_array_equal(d.action.product[live], a.product[live])
            checked += int(live.sum())
            priced += int((d.action.price[live] != a.price[live]).sum())
            _the_played_logp_is_recomputed(seller, d)
            _truthful_answer(engine, d.action)
        assert checked > 100 and priced > 0  # the same pairs, not the same prices
    # As above: a seller that leaves the plan against truthful buyers, so that the option
    # changes its play.
    leaves = checkpoint.load(Path("agents/rl/checkpoints/stages/rl_seller_retail_plan"))
    plain = RLSeller(leaves.net, assignment=True)
    on = RLSeller(leaves.net, assignment=True, expert_pair=True)
    a = play_markets(cfg, 4, range(200), plain, Truthful())
    b = play_markets(cfg, 4, range(200), on, Truthful())
    assert not np.array_equal(a["profit"], b["profit"])
    assert check_seller(lambda seed: RLSeller(shipped.net, seed=seed, expert_pair=True)) == []
    assert _a_flag_goes_through_checkpoints(tmp_path, "expert_pair", on, plain).assignment


def _the_played_logp_is_recomputed(seller: RLSeller, d) -> None:
    """The log-probabilities a trainer recomputes from decision ``d``'s stored features
    and choice are the ones it was played with."""
    x = [torch.from_numpy(a) for a in d.features.arrays()]
    stored = (d.open, d.pair, d.level, d.level_ok, d.choice)
    logp = seller.evaluate(x, *(torch.from_numpy(a) for a in stored))[0]
    np.testing.assert_allclose(logp.detach().numpy(), d.logp, rtol=1e-5, atol=1e-5)


def _truthful_answer(engine: BatchedMarket, action) -> None:
    """Offer ``action`` and let truthful buyers answer it."""
    prompt = engine.offer(action.to, action.product, action.price)
    if prompt is not None:
        dec = Truthful().act(prompt)
        engine.answer(dec.decision, dec.product, dec.price)


def _a_flag_goes_through_checkpoints(tmp_path, flag: str, on: RLSeller, off: RLSeller):
    """Seller option ``flag`` (true in ``on``, false in ``off``) goes through a checkpoint
    (written only when true, so that older records read as they were); a non-boolean is
    a clear error, from a checkpoint or from the constructor. Returns ``on`` loaded back."""
    back = checkpoint.load(checkpoint.save(tmp_path / "ck", on, name="on"))
    assert getattr(back, flag) is True
    saved = checkpoint.save(tmp_path / "off", off, name="off")
    assert flag not in json.loads((saved / "config.json").read_text())["policy"]["params"]
    assert getattr(checkpoint.load(saved), flag) is False
    _bad_params_are_checkpoint_errors(tmp_path / "ck", flag, ('"yes"', "1", "null"))
    with pytest.raises(ValueError, match=flag):
        RLSeller(**{flag: "yes"})
    return back


def _bad_params_are_checkpoint_errors(ck: Path, key: str, values: tuple[str, ...]) -> None:
    """Each JSON value in ``values`` written as policy param ``key`` of checkpoint ``ck``
    makes loading it a ``CheckpointError`` that names the param."""
    for bad in values:
        cfg_path = ck / "config.json"
        text = json.loads(cfg_path.read_text())
        text["policy"]["params"][key] = json.loads(bad)
        cfg_path.write_text(json.dumps(text))
        with pytest.raises(checkpoint.CheckpointError, match=key):
            checkpoint.load(ck)


def _open(obs) -> np.ndarray:
    return obs.active[:, :, None] & (obs.stock > 0)[:, None, :]


def test_a_seller_with_a_signal_prior_plays_as_before_on_exact_markets_and_records_it(
    tmp_path,
):
    """The prior changes the play only where the signals spread wider than it; it goes
    through checkpoints and training configs, and a bad one is a clear error."""
    from agents.rl.ppo import start_policy

    plain = _seller()
    calibrated = RLSeller(plain.net, signal_prior=0.25)
    exact = dataclasses.replace(SMALL, signal_noise=0.0, wealth_spread=0.1)
    noisy = dataclasses.replace(SMALL, signal_noise=0.8)
    with torch.no_grad():
        plain.net.pair_head.weight.normal_()  # a net whose choices depend on the signals
        plain.net.price_head.weight.normal_()
    a = play_markets(exact, 3, range(64), plain, Truthful())
    b = play_markets(exact, 3, range(64), calibrated, Truthful())
    np.testing.assert_array_equal(a["profit"], b["profit"])
    a = play_markets(noisy, 3, range(64), plain, Truthful())
    b = play_markets(noisy, 3, range(64), calibrated, Truthful())
    assert not np.array_equal(a["profit"], b["profit"])
    assert check_seller(lambda seed: RLSeller(plain.net, seed=seed, signal_prior=0.25)) == []

    back = checkpoint.load(checkpoint.save(tmp_path / "ck", calibrated, name="calibrated"))
    assert back.signal_prior == 0.25
    saved = checkpoint.save(tmp_path / "plain", plain, name="plain")
    assert "signal_prior" not in json.loads((saved / "config.json").read_text())["policy"]["params"]
    assert checkpoint.load(saved).signal_prior == 0.0
    _bad_params_are_checkpoint_errors(tmp_path / "ck", "signal_prior", ('"wide"', "-0.1", "true"))
    with pytest.raises(ValueError, match="signal_prior"):
        RLSeller(signal_prior=-1.0)

    cfg = _tiny(tmp_path, signal_prior=0.2)
    assert cfg.to_dict()["signal_prior"] == 0.2
    assert "signal_prior" not in _tiny(tmp_path).to_dict()  # as the shipped checkpoints record it
    assert start_policy(cfg).signal_prior == 0.2
    assert start_policy(dataclasses.replace(cfg, init=str(saved))).signal_prior == 0.2
    # Unset, a checkpoint start keeps its own prior (a league's learners starting from
    # rl_seller keep 0.25); set to 0, it reads the raw signals.
    start = str(tmp_path / "ck2")
    checkpoint.save(start, calibrated, name="calibrated")
    assert start_policy(_tiny(tmp_path, init=start)).signal_prior == 0.25
    assert start_policy(_tiny(tmp_path, init=start, signal_prior=0.0)).signal_prior == 0.0
    assert start_policy(_tiny(tmp_path)).signal_prior == 0.0
    with pytest.raises(ValueError, match="seller-side"):
        _tiny(tmp_path, "buyer", signal_prior=0.2)
    for bad in (-0.2, "wide", True):
        with pytest.raises(ValueError, match="signal_prior"):
            _tiny(tmp_path, signal_prior=bad)


def test_a_seller_with_the_prior_feature_sees_its_shrink_factor(tmp_path):
    """``prior_feature``: one more market feature, the factor ``calibrate_signals`` shrank
    the market's signals by; it goes through checkpoints and training, and a start or
    teacher without it is refused."""
    from agents.rl.features import SellerFeatures, seller_feature_counts, shrink_factor

    torch.manual_seed(0)
    seller = RLSeller(hidden=16, signal_prior=0.15, prior_feature=True)
    assert seller.prior_feature and not seller.pooled
    assert seller.net.cfg.features == seller_feature_counts(prior=True)
    assert seller_feature_counts(True, True)[3] == (
        SellerFeatures.MARKET + SellerFeatures.POOLED + SellerFeatures.PRIOR
    )
    noisy = dataclasses.replace(SMALL, buyers=6, signal_noise=0.6, wealth_spread=0.1)
    for cfg in (noisy, dataclasses.replace(noisy, signal_noise=0.0)):
        obs = BatchedMarket(generate_batch(cfg, 2, range(8))).seller_observation()
        seller.reset(8)
        d = seller.decide(obs)
        f = shrink_factor(obs, 0.15)
        np.testing.assert_array_equal(d.features.market[:, -1], f.astype(np.float32))
        assert (f < 1).all() if cfg is noisy else (f == 1).all()
    both = RLSeller(hidden=16, pooled=True, prior_feature=True)
    assert both.pooled and both.prior_feature
    back = checkpoint.load(checkpoint.save(tmp_path / "ck", seller, name="pf"))
    assert back.prior_feature and back.signal_prior == 0.15
    assert check_seller(lambda seed: RLSeller(seller.net, seed=seed, signal_prior=0.15)) == []
    _a_feature_option_trains_and_refuses_other_starts(tmp_path, "prior_feature", signal_prior=0.15)


def test_play_buffers_follow_the_input_and_stay_out_of_copies():
    import copy
    import pickle

    net = _random_net(0).net
    rng = np.random.default_rng(5)
    shapes = (
        (3, 4, 2, net.cfg.features[0]),
        (3, 4, net.cfg.features[1]),
        (3, 2, net.cfg.features[2]),
        (3, net.cfg.features[3]),
    )
    f = [torch.from_numpy(rng.normal(size=s).astype(np.float32)) for s in shapes]
    open_ = torch.ones(3, 4, 2, dtype=torch.bool)
    with torch.inference_mode():
        want = net(*f, open_)[0]
        net.double()
        got = net(*(x.double() for x in f), open_)[0]  # new dtype: new buffers, no error
    assert got.dtype == torch.float64 and torch.allclose(got.float(), want, atol=1e-4)
    assert net._workspace  # play filled them
    assert copy.deepcopy(net)._workspace == {}
    assert pickle.loads(pickle.dumps(net))._workspace == {}


class _Recording(RLSeller):
    def act(self, obs):
        d = self.decide(obs)
        assert d.logp is not None and d.value is not None and d.expert_pair is not None
        return d.action


def test_play_skips_only_what_a_trainer_reads():
    for seed in range(6):
        net = _random_net(seed).net
        for greedy in (True, False):
            played = RLSeller(net, seed=seed, greedy=greedy)
            recorded = _Recording(net, seed=seed, greedy=greedy)
            a = play_markets(SMALL, seed, range(48), played, Truthful())
            b = play_markets(SMALL, seed, range(48), recorded, Truthful())
            for key in ("profit", "buyer_surplus", "seller_violations"):
                np.testing.assert_array_equal(a[key], b[key])
    obs = BatchedMarket(generate_batch(SMALL, 0, range(4))).seller_observation()
    played.reset(4)
    d = played.decide(obs, record=False)
    assert d.logp is None and d.value is None and d.expert_pair is None


def test_feature_columns_stack_as_float32_like_numpy():
    from agents.rl.features import _stack

    rng = np.random.default_rng(1)
    for _ in range(50):
        shape = tuple(int(x) for x in rng.integers(1, 6, size=rng.integers(1, 4)))
        cols = [
            rng.normal(size=shape) * 1e3,
            rng.random(shape) < 0.5,
            np.broadcast_to(rng.normal(size=shape[-1:]), shape),
            rng.integers(-5, 5, shape),
        ]
        want = np.stack([np.asarray(c, np.float32) for c in cols], axis=-1)
        got = _stack(cols)
        assert got.dtype == np.float32 and np.array_equal(got, want)


# ---------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip(tmp_path):
    s = _seller(3)
    checkpoint.save(tmp_path / "ck", s, name="my_seller", training={"note": 1})
    meta = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert meta["policy"]["class"] == "RLSeller" and meta["policy"]["name"] == "my_seller"
    assert len(meta["provenance"]["weights_sha256"]) == 64 and meta["training"] == {"note": 1}
    back = checkpoint.load(tmp_path / "ck")
    for k, v in s.net.state_dict().items():
        torch.testing.assert_close(back.net.state_dict()[k], v, rtol=0, atol=0)
    a = play_markets(SMALL, 1, range(32), s, Truthful())
    b = play_markets(SMALL, 1, range(32), back, Truthful())
    np.testing.assert_array_equal(a["profit"], b["profit"])


def _corrupt(path, how):
    cfg = path / "config.json"
    meta = json.loads(cfg.read_text())
    if how == "json":
        cfg.write_text("{not json")
    elif how == "class":
        meta["policy"]["class"] = "os.system"
        cfg.write_text(json.dumps(meta))
    elif how == "weights":
        raw = bytearray((path / "model.safetensors").read_bytes())
        raw[-1] ^= 0xFF
        (path / "model.safetensors").write_bytes(bytes(raw))
    elif how == "shape":
        meta["policy"]["net"]["hidden"] = 32
        cfg.write_text(json.dumps(meta))
    elif how == "missing":
        (path / "model.safetensors").unlink()
    elif how == "field":
        meta["policy"]["extra"] = 1
        cfg.write_text(json.dumps(meta))
    elif how == "class_type":
        meta["policy"]["class"] = ["RLSeller"]
        cfg.write_text(json.dumps(meta))
    elif how == "provenance":
        meta["provenance"] = []
        cfg.write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("json", "not valid JSON"),
        ("class", "unknown policy class"),
        ("weights", "do not match the hash"),
        ("shape", "weights do not fit"),
        ("missing", "cannot read"),
        ("field", "exactly"),
        ("class_type", "unknown policy class"),
        ("provenance", "do not match the hash"),
    ],
)
def test_bad_checkpoints_are_one_clear_error(tmp_path, how, words):
    checkpoint.save(tmp_path / "ck", _seller(), name="s")
    _corrupt(tmp_path / "ck", how)
    with pytest.raises(checkpoint.CheckpointError, match=words) as err:
        checkpoint.load(tmp_path / "ck")
    assert "\n" not in str(err.value)
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.load(tmp_path / "nowhere")


def test_a_checkpoint_is_an_entry_named_by_its_config(tmp_path):
    checkpoint.save(tmp_path / "a", _buyer(), name="ck_buyer")
    shutil.copytree(tmp_path / "a", tmp_path / "moved")
    e1 = registry.get(str(tmp_path / "a"), "buyer")
    e2 = registry.get(str(tmp_path / "moved"), "buyer")
    assert e1.name == e2.name == "ck_buyer" and e1.kind == "agent"
    twin = registry.get(str(tmp_path / "a") + "+disclosed", "buyer")
    assert twin.name == "ck_buyer+disclosed" and twin.disclosed
    # Same name, same dice: the moved copy plays identically under any root seed.
    seller = registry.make("greedy_matcher", "seller")
    m1 = play_markets(SMALL, 0, range(16), seller, registry.make_buyers(str(tmp_path / "a"), 5))
    m2 = play_markets(SMALL, 0, range(16), seller, registry.make_buyers(str(tmp_path / "moved"), 5))
    np.testing.assert_array_equal(m1["buyer_surplus"], m2["buyer_surplus"])
    with pytest.raises(registry.UnknownEntry, match="is a buyer"):
        registry.get(str(tmp_path / "a"), "seller")


def test_the_learning_curve_names_a_checkpoint_opponent_by_its_config(tmp_path):
    """A seller checkpoint in a folder of another name: the buyer's evaluation columns
    carry the name in its config.json, as tournaments do."""
    checkpoint.save(tmp_path / "folder", _seller(), name="ck_seller")
    cfg = _tiny(tmp_path, "buyer", iterations=1, opponents=(Opponent(str(tmp_path / "folder")),))
    out = train(cfg, tmp_path / "run", progress=False)
    header = (out / "curve.csv").read_text().splitlines()[0].split(",")
    assert "eval_ck_seller@small" in header and not any("folder" in h for h in header)


# ---------------------------------------------------------------------- trainer
def test_gae_matches_a_hand_computation():
    r = np.array([[1.0], [0.0], [2.0]])
    v = np.array([[0.5], [0.2], [0.1]])
    done = np.array([[0.0], [1.0], [0.0]])
    adv = gae(r, v, done, np.array([0.3]), gamma=0.9, lam=0.8)
    d2 = 2.0 + 0.9 * 0.3 - 0.1
    d1 = 0.0 - 0.2  # the market ended: no bootstrap
    d0 = 1.0 + 0.9 * 0.2 - 0.5
    np.testing.assert_allclose(adv[:, 0], [d0 + 0.72 * d1, d1, d2])


def _tiny(tmp_path, side="seller", **kw) -> TrainConfig:
    family = ConfigFamily(
        configs=(("small", SMALL),),
        disclosure=("hidden", "mandatory"),
        agent_share=(0.0, 1.0),
        jitter=(("buyers", (-1.0, 1.0)),),
    )
    opponents = (
        (Opponent("truthful"), Opponent("haggler"))
        if side == "seller"
        else (Opponent("greedy_matcher"), Opponent("posted_price"))
    )
    base = dict(
        side=side,
        threads=1,
        name=f"tiny_{side}",
        iterations=4,
        batch_size=32,
        hidden=16,
        eval_every=0,
        eval_markets=4,
        checkpoint_every=2,
        epochs=2,
        minibatches=2,
        opponents=opponents,
        family=family,
    )
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("side", ["seller", "buyer"])
def test_tiny_training_changes_every_parameter_and_logs(tmp_path, side):
    extra = {"imitate": "greedy_matcher", "imitation_iterations": 1} if side == "seller" else {}
    cfg = _tiny(tmp_path, side, **extra)
    torch.manual_seed(cfg.seed)
    fresh = (RLSeller if side == "seller" else RLBuyer)(hidden=16).net.state_dict()
    out = train(cfg, tmp_path / "run", progress=False)
    trained = load_file(str(out / "model.safetensors"))
    for k, v in fresh.items():
        assert not torch.equal(trained[k], v), f"{k} did not change"
    rows = (out / "curve.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert {"return", "policy_loss", "value_loss", "entropy"} <= set(header)
    assert any(h.startswith("eval_") for h in header)
    with open(out / "curve.csv", newline="") as fh:
        logged = [r for r in csv.DictReader(fh) if r["phase"] == "train"]
    assert [int(r["iteration"]) for r in logged] == list(range(1, cfg.iterations + 1))
    assert all(math.isfinite(float(r["return"])) for r in logged)  # a reward every iteration
    assert (out / "curve.png").stat().st_size > 0
    policy = checkpoint.load(out)
    assert isinstance(policy, RLSeller if side == "seller" else RLBuyer)


def test_checkpoint_every_0_saves_only_at_the_end(tmp_path, monkeypatch):
    import agents.rl.ppo as ppo

    saved = []
    real = ppo._checkpoint
    monkeypatch.setattr(ppo, "_checkpoint", lambda *a: saved.append(a[4]) or real(*a))
    out = train(_tiny(tmp_path, iterations=3, checkpoint_every=0), tmp_path / "a", progress=False)
    assert saved == [0, 3]  # the starting point (after any warm start), then the end
    assert json.loads((out / ppo.STATE_JSON).read_text())["iteration"] == 3
    assert isinstance(checkpoint.load(out), RLSeller)
    saved.clear()
    train(_tiny(tmp_path, iterations=4, checkpoint_every=2), tmp_path / "b", progress=False)
    assert saved == [0, 2, 4]


TINY_TOML = """
[train]
side = "seller"
name = "tiny"
threads = 1
iterations = 4
batch_size = 32
hidden = 16
epochs = 2
minibatches = 2
eval_every = 0
eval_markets = 4
checkpoint_every = 2
[[opponents]]
name = "truthful"
[[opponents]]
name = "human=noisy_human,agent=strategic"
[family]
disclosure = ["hidden", "mandatory"]
agent_share = [0.0, 1.0]
[markets.small]
buyers = 4
products = 2
turns = 6
"""


def test_the_train_command_resumes_bit_identical_to_an_uninterrupted_run(tmp_path, capsys):
    from tournaments.cli import main

    config = _write(tmp_path / "tiny.toml", TINY_TOML)
    assert main(["train", "seller", "--config", str(config), "--out", str(tmp_path / "whole"),
                 "--quiet"]) == 0  # fmt: skip
    assert "checkpoint:" in capsys.readouterr().out
    split = [
        "train",
        "seller",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "split"),
        "--quiet",
    ]
    capsys.readouterr()
    assert main([*split, "--stop-after", "2"]) == 0
    said = "stopped after iteration 2 of 4: the same command with --resume instead of --stop-after"
    assert said in capsys.readouterr().out
    assert main([*split, "--resume"]) == 0
    assert "stopped after" not in capsys.readouterr().out
    a = load_file(str(tmp_path / "whole" / "model.safetensors"))
    b = load_file(str(tmp_path / "split" / "model.safetensors"))
    for k in a:
        assert torch.equal(a[k], b[k]), k
    sa = load_file(str(tmp_path / "whole" / "train_state.safetensors"))
    sb = load_file(str(tmp_path / "split" / "train_state.safetensors"))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)

    def curve(run):  # every logged figure but the wall time
        with open(tmp_path / run / "curve.csv", newline="") as fh:
            return [{k: v for k, v in r.items() if k != "wall_s"} for r in csv.DictReader(fh)]

    assert curve("split") == curve("whole") and len(curve("whole")) == 5
    # Bad input is one line and exit 2, whatever the mistake.
    assert main(["train", "buyer", "--config", str(config), "--out", str(tmp_path / "x")]) == 2
    assert main([*split, "--resume", "--iterations", "9"]) == 2
    assert main([*split]) == 2  # a run is already there
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("arena: error: ") for line in err)


def test_resume_refuses_a_different_config(tmp_path):
    cfg = _tiny(tmp_path)
    train(cfg, tmp_path / "run", progress=False, until=2)
    with pytest.raises(
        ValueError, match=r"another config \(it differs in lr: [0-9.e-]+ at the start, 0.001 now\)"
    ):
        train(dataclasses.replace(cfg, lr=1e-3), tmp_path / "run", resume=True, progress=False)
    with pytest.raises(ValueError, match="already there"):
        train(cfg, tmp_path / "run", progress=False)


def test_resume_from_a_broken_trainer_state_is_one_clear_error(tmp_path):
    cfg = _tiny(tmp_path)
    run = train(cfg, tmp_path / "run", progress=False, until=2)
    (run / "train_state.safetensors").write_bytes(b"\x00" * 16)
    with pytest.raises(ValueError, match="cannot resume"):
        train(cfg, run, resume=True, progress=False)


def test_shipped_training_configs_load():
    for side in ("seller", "buyer"):
        cfg = load_train_config(f"agents/rl/configs/{side}.toml")
        assert cfg.side == side and cfg.opponents and cfg.family.configs


def test_the_buyer_experiment_configs_change_only_what_they_say():
    shipped = load_train_config("agents/rl/configs/buyer.toml")
    alone = load_train_config("agents/rl/configs/experiments/buyer_alone.toml")
    team = load_train_config("agents/rl/configs/experiments/buyer_team.toml")
    assert alone.opponents == team.opponents and len(alone.opponents) == 1
    seller = Path(shipped.resolve(shipped.opponents[0].name)).resolve()
    assert Path(alone.resolve(alone.opponents[0].name)).resolve() == seller
    assert seller == Path("agents/rl/checkpoints/rl_seller").resolve()
    assert (alone.name, team.name, team.team_return, alone.team_return) == (
        "buyer_alone",
        "buyer_team",
        True,
        False,
    )
    same = {"opponents", "source", "name", "team_return"}
    for cfg in (alone, team):
        for f in dataclasses.fields(TrainConfig):
            if f.name not in same:
                assert getattr(cfg, f.name) == getattr(shipped, f.name), f.name


def _pool(cfg) -> list[tuple[str, float]]:
    """The opponent pool as (resolved name, weight), checkpoint paths made absolute (a
    file that extends another rebases the paths it takes over)."""
    out = []
    for o in cfg.opponents:
        path = Path(cfg.resolve(o.name))
        out.append((str(path.resolve()) if path.is_dir() else o.name, o.weight))
    return out


def test_the_buyer_noise_experiments_change_only_what_they_say():
    """benchmarks/results/generalization_buyer_noisy.md: each is buyer.toml (or
    buyer_alone.toml) with the one change its header names."""
    exp = "agents/rl/configs/experiments/"
    shipped = load_train_config("agents/rl/configs/buyer.toml")
    noisier = load_train_config(exp + "buyer_noisier_retail.toml")
    wider = (("retail", (("signal_noise", (-0.05, 0.2)),)),)
    assert shipped.family.config_jitter == ()
    assert noisier.family == dataclasses.replace(shipped.family, config_jitter=wider)
    seller = str(Path("agents/rl/checkpoints/rl_seller").resolve())
    assert _pool(shipped)[0] == (seller, 3.0)
    stages = Path("agents/rl/checkpoints/stages")
    added = [
        (str((stages / n).resolve()), 1.0)
        for n in (
            "rl_seller_retail_mixed_pull",
            "rl_seller_retail_plan",
            "rl_seller_retail",
            "rl_seller_wholesale",
            "rl_seller_joint",
        )
    ]
    for config, changed, base in (
        ("buyer_noisier_retail", {"family": noisier.family}, "buyer.toml"),
        ("buyer_alone_noisier", {"family": noisier.family}, "experiments/buyer_alone.toml"),
        (
            "buyer_noisier_retail_w6",
            {"opponents": [(seller, 6.0)] + _pool(shipped)[1:]},
            "experiments/buyer_noisier_retail.toml",
        ),
        (
            "buyer_seller_pool",
            {"opponents": _pool(shipped)[:1] + added + _pool(shipped)[1:]},
            "buyer.toml",
        ),
    ):
        _same_but(f"experiments/{config}.toml", {"name": config, **changed}, base=base)


@pytest.mark.parametrize(
    ("name", "changed"),
    [
        ("seller_retail_pull", {"expert_coef": 0.5, "expert_pull": "pair",
                                "expert_configs": ("retail",)}),
        ("seller_film", {"film": True}),
        ("seller_film_pull", {"film": True, "expert_coef": 0.1, "expert_pull": "pair",
                              "expert_configs": ("retail",)}),
    ],
)  # fmt: skip
def test_the_seller_experiment_configs_change_only_what_they_say(name, changed):
    """Each experiment config is stage 1 of the shipped seller with the changes it names."""
    _same_but(f"experiments/{name}.toml", changed)


@pytest.mark.parametrize(
    ("name", "changed"),
    [
        (
            "seller_stage3_from_retail",
            {"init": Path("agents/rl/checkpoints/stages/rl_seller_retail").resolve()},
        ),
        ("seller_stage3_turns", {"turns": (-4.0, 2.0)}),
        ("seller_stage3_noise", {"signal_noise": (-0.1, 0.15)}),
    ],
)
def test_the_stage_3_experiment_configs_change_only_what_they_say(name, changed):
    """Each is stage 3 of the shipped seller (seller.toml) with the one change it names:
    its start, or one field's jitter range."""
    shipped = load_train_config(f"agents/rl/configs/{STAGE3}")
    if "init" not in changed:
        jitter = tuple((k, changed.get(k, v)) for k, v in shipped.family.jitter)
        assert jitter != shipped.family.jitter
        changed = {"family": dataclasses.replace(shipped.family, jitter=jitter)}
    changed = {**changed, "name": name, "signal_prior": 0.0}  # measured before the prior
    _same_but(f"experiments/{name}.toml", changed, base=STAGE3)
    run = load_train_config(f"agents/rl/configs/experiments/{name}.toml")
    for path in (run.init, *dict(run.teachers).values()):  # every checkpoint it names exists
        assert (Path(run.resolve(path)) / "model.safetensors").is_file(), path


def test_the_wholesale_specialist_and_its_stage_3_change_only_what_they_say():
    joint = load_train_config("agents/rl/configs/seller_joint.toml")
    wholesale = dataclasses.replace(joint.family, configs=joint.family.configs[1:])
    assert [name for name, _ in wholesale.configs] == ["wholesale"]
    _same_but(
        "experiments/seller_wholesale.toml", {"name": "seller_wholesale", "family": wholesale}
    )
    shipped = load_train_config(f"agents/rl/configs/{STAGE3}")
    teachers = (
        ("retail", Path(shipped.resolve(dict(shipped.teachers)["retail"])).resolve()),
        ("wholesale", Path("runs/seller_wholesale").resolve()),  # where the specialist's
    )  # command writes it (not shipped: train it first)
    _same_but(
        "experiments/seller_stage3_wholesale_teacher.toml",
        {"name": "seller_stage3_wholesale_teacher", "teachers": teachers, "signal_prior": 0.0},
        base=STAGE3,
    )


def test_the_prior_pull_experiment_is_the_shipped_stage_3_with_a_stronger_pull():
    """Measured with the signal prior, so it keeps seller.toml's."""
    _same_but(
        "experiments/seller_prior_pull05.toml",
        {"name": "seller_prior_pull05", "teacher_coef": 0.5},
        base=STAGE3,
    )
    assert (
        load_train_config("agents/rl/configs/experiments/seller_prior_pull05.toml").signal_prior
        == 0.25
    )


def _stages_1_and_2_change_only(changed: dict, suffix: str) -> None:
    """experiments/seller_joint_SUFFIX.toml and seller_retail_SUFFIX.toml are the shipped
    stages 1 and 2 with ``changed`` (and their names)."""
    for stage, base in (("joint", "seller_joint.toml"), ("retail", "seller_retail.toml")):
        name = f"seller_{stage}_{suffix}"
        _same_but(f"experiments/{name}.toml", {**changed, "name": name}, base)


def test_the_prior_feature_stages_change_only_what_they_say():
    """Stages 1 and 2 with the signal prior and its factor as a feature; stage 3 (with
    seller.toml's prior) from them."""
    changed = {"signal_prior": 0.25, "prior_feature": True}
    _stages_1_and_2_change_only(changed, "prior")
    runs = Path("runs").resolve()  # where the stage commands write (train them first)
    joint = load_train_config("agents/rl/configs/seller_joint.toml")
    wholesale = dataclasses.replace(joint.family, configs=joint.family.configs[1:])
    _same_but(
        "experiments/seller_wholesale_prior.toml",
        {**changed, "name": "seller_wholesale_prior", "family": wholesale, "iterations": 120},
    )
    for name, wholesale_teacher in (
        ("seller_prior_feature", "seller_joint_prior"),
        ("seller_prior_wteacher", "seller_wholesale_prior"),
    ):  # stage 3 from the prior-trained stages; they differ in the wholesale teacher
        _same_but(
            f"experiments/{name}.toml",
            {"name": name, "prior_feature": True,
             "init": runs / "seller_joint_prior",
             "teachers": (("retail", runs / "seller_retail_prior"),
                          ("wholesale", runs / wholesale_teacher))},
            base=STAGE3,
        )  # fmt: skip


def test_the_truthful_weighted_runs_change_only_the_opponent_weights():
    shipped = load_train_config(f"agents/rl/configs/{STAGE3}").opponents
    heavier = {"truthful": 3.0, "noisy_human": 2.0}
    weighted = tuple(Opponent(o.name, heavier.get(o.name, o.weight)) for o in shipped)
    assert [o.weight for o in weighted] == [3.0, 1.0, 1.0, 2.0, 1.0, 1.0]
    for name, base in (
        ("seller_stage3_truthful3", STAGE3),
        ("seller_retail_spare_truthful3", "experiments/seller_retail_spare.toml"),
    ):
        _same_but(f"experiments/{name}.toml", {"name": name, "opponents": weighted}, base)


def test_the_warm_start_teacher_plays_with_the_patience_and_spare_of_the_config():
    from agents.rl.ppo import imitation_teacher
    from agents.scripted.sellers import GreedyMatcher

    cfg = load_train_config("agents/rl/configs/experiments/seller_joint_spare.toml")
    teacher = imitation_teacher(cfg)
    assert isinstance(teacher, GreedyMatcher)
    assert (teacher.patience, teacher.spare) == (0.04, 0.3)
    plain = dataclasses.replace(cfg, imitation_patience=0.0, imitation_spare=0.0)
    assert (imitation_teacher(plain).patience, imitation_teacher(plain).spare) == (0.0, 0.0)


def _stage_3_from_stages(name: str, suffix: str, planned: bool = False, **changed) -> None:
    """experiments/NAME.toml is the shipped stage 3 (seller.toml) started from
    seller_joint_SUFFIX, with seller_retail_SUFFIX and seller_joint_SUFFIX as its retail
    and wholesale teachers (where their commands write them), and ``changed``."""
    runs = Path("runs").resolve()
    joint = runs / f"seller_joint_{suffix}"
    _same_but(
        f"experiments/{name}.toml",
        {"name": name, "init": joint,
         "teachers": (("retail", runs / f"seller_retail_{suffix}"), ("wholesale", joint)),
         **changed},
        base=STAGE3, planned=planned,
    )  # fmt: skip


def test_the_spare_turn_stages_change_only_what_they_say():
    """Stages 1 and 2 whose warm start is patient only with turns to spare; stage 3 (with
    seller.toml's prior) from them."""
    changed = {"imitation_spare": 0.3}
    _stages_1_and_2_change_only(changed, "spare")
    runs = Path("runs").resolve()  # where the stage commands write (train them first)
    _stage_3_from_stages("seller_spare", "spare")
    _same_but(
        "experiments/seller_spare_retail12.toml",
        {"name": "seller_spare_retail12",
         "init": runs / "seller_joint_spare",
         "teachers": (("retail", runs / "seller_retail_spare"),
                      ("retail12", runs / "seller_retail_spare"),
                      ("wholesale", runs / "seller_joint_spare"))},
        base="experiments/seller_stage3_retail12.toml",
    )  # fmt: skip
    stages = Path("agents/rl/checkpoints/stages").resolve()
    _same_but(  # the shipped stage 1, the spare-turn stage 2 teaching retail
        "experiments/seller_stage3_retail_spare.toml",
        {"name": "seller_stage3_retail_spare",
         "teachers": (("retail", runs / "seller_retail_spare"),
                      ("wholesale", stages / "rl_seller_joint"))},
        base=STAGE3,
    )  # fmt: skip


def _jitter(base: TrainConfig, **ranges) -> ConfigFamily:
    return dataclasses.replace(
        base.family, jitter=tuple((k, ranges.get(k, v)) for k, v in base.family.jitter)
    )


def test_the_stage_2_and_stage_3_variants_change_only_what_they_say():
    retail = load_train_config("agents/rl/configs/seller_retail.toml")
    wide = _jitter(retail, products=(-1.0, 2.0), turns=(-4.0, 2.0))
    wider = _jitter(retail, products=(-1.0, 2.0), turns=(-4.0, 2.0), buyers=(-2.0, 4.0))
    for name, changed in (
        ("seller_retail_wide", {"family": wide}),
        ("seller_retail_wider", {"family": wider}),
        ("seller_retail_patience02", {"imitation_patience": 0.02}),
        ("seller_retail_pooled", {"pooled": True}),
    ):
        _same_but(f"experiments/{name}.toml", {**changed, "name": name}, "seller_retail.toml")
    _same_but(
        "experiments/seller_joint_pooled.toml", {"name": "seller_joint_pooled", "pooled": True}
    )
    stages = Path("agents/rl/checkpoints/stages").resolve()
    runs = Path("runs").resolve()  # where the stage commands write (not shipped: train first)
    for name, changed in (
        (
            "seller_stage3_patience02",
            {"teachers": (("retail", runs / "seller_retail_patience02"),
                          ("wholesale", stages / "rl_seller_joint"))},
        ),
        (
            "seller_stage3_specialists",
            {"init": stages / "rl_seller_retail",
             "teachers": (("retail", stages / "rl_seller_retail"),
                          ("wholesale", runs / "seller_wholesale"))},
        ),
        ("seller_stage3_pull05", {"teacher_coef": 0.5}),
        ("seller_stage3_pull10", {"teacher_coef": 1.0}),
        ("seller_stage3_longer", {"iterations": 120}),
        (
            "seller_pooled",
            {"pooled": True, "init": runs / "seller_joint_pooled",
             "teachers": (("retail", runs / "seller_retail_pooled"),
                          ("wholesale", runs / "seller_joint_pooled"))},
        ),
    ):  # fmt: skip
        # Each was measured before seller.toml read the signals through a prior, and
        # says so (signal_prior = 0), so that its command still gives what was measured.
        changed = {**changed, "name": name, "signal_prior": 0.0}
        _same_but(f"experiments/{name}.toml", changed, base=STAGE3)


def _same_but(
    config: str, changed: dict, base: str = "seller_joint.toml", planned: bool = False
) -> None:
    if base == STAGE3 and not planned:
        # The stage-3 experiments measured before seller.toml planned its matches say so
        # (assignment = false), so that their commands still give what was measured.
        changed = {"assignment": False, **changed}
    shipped = load_train_config(f"agents/rl/configs/{base}")
    run = load_train_config(f"agents/rl/configs/{config}")

    def folder(cfg, path):  # relative to the file's folder, whether or not it exists yet
        return (Path(cfg.source).parent / path).resolve()

    def value(cfg, name):  # checkpoint paths as the folders they name: extends rebases them
        v = getattr(cfg, name)
        if name == "init" and v:
            return folder(cfg, v)
        if name == "teachers":
            return tuple((k, folder(cfg, p)) for k, p in v)
        if name == "opponents":
            return _pool(cfg)
        return v

    for f in dataclasses.fields(TrainConfig):
        if f.name in changed:
            assert changed[f.name] in (getattr(run, f.name), value(run, f.name)), f.name
            assert value(run, f.name) != value(shipped, f.name), f.name
        elif f.name != "source":
            assert value(run, f.name) == value(shipped, f.name), f.name


def test_the_shipped_sellers_stages_are_stage_one_with_what_they_say():
    """The shipped recipe: two specialists, retail (seller_retail.toml with planned matches
    and the plan feature, pulled toward its plan on the rows of the naive buyers and the
    mixed population, and toward the expert's price on scarce turns) and wholesale
    (stage 1's config on wholesale batches for 100 iterations), then stage 2 from the
    retail one with both teaching."""
    joint = load_train_config("agents/rl/configs/seller_joint.toml")
    assert joint.name == "rl_seller_joint" and joint.family.configs[0][0] == "retail"
    retail = dataclasses.replace(joint.family, configs=joint.family.configs[:1])
    wholesale = dataclasses.replace(joint.family, configs=joint.family.configs[1:])
    assert [name for name, _ in wholesale.configs] == ["wholesale"]
    _same_but("seller_retail.toml", {"name": "rl_seller_retail", "family": retail})
    _same_but(
        "seller_retail_plan.toml",
        {"name": "rl_seller_retail_plan", "assignment": True, "plan_feature": True},
        base="seller_retail.toml",
    )
    _same_but(
        "seller_retail_naive_pull.toml",
        {"name": "rl_seller_retail_naive_pull", "expert_coef": 0.05, "expert_pull": "pair",
         "expert_opponents": ("truthful", "noisy_human")},
        base="seller_retail_plan.toml",
    )  # fmt: skip
    _same_but(
        "seller_retail_scarce_pull.toml",
        {"name": "rl_seller_retail_scarce_pull", "expert_pull": "scarce"},
        base="seller_retail_naive_pull.toml",
    )
    _same_but(
        "seller_retail_mixed_pull.toml",
        {"name": "rl_seller_retail_mixed_pull",
         "expert_opponents": ("truthful", "noisy_human", MIXED_NAME)},
        base="seller_retail_scarce_pull.toml",
    )  # fmt: skip
    _same_but(
        "seller_wholesale.toml",
        {"name": "rl_seller_wholesale", "family": wholesale, "iterations": 100},
    )
    stages = "../checkpoints/stages/"
    _same_but("seller.toml", {
        "name": "rl_seller", "init": stages + "rl_seller_retail_mixed_pull",  # 200 iterations
        "imitate": "", "imitation_iterations": 0, "teacher_coef": 1.0,
        "teacher_coefs": (("wholesale", 0.5),), "signal_prior": 0.25, "assignment": True,
        "plan_feature": True,
        "teachers": (("retail", stages + "rl_seller_retail_mixed_pull"),
                     ("wholesale", stages + "rl_seller_wholesale")),
    })  # fmt: skip
    runs = Path("runs").resolve()  # where the experiment commands wrote what was measured
    _same_but(  # the shipped recipe, measured first as experiments
        "experiments/seller_retail_plan_naive_scarce_pull00.toml",
        {"name": "seller_retail_plan_naive_scarce_pull00", "expert_pull": "scarce"},
        base="seller_retail_naive_pull.toml",
    )
    stages = Path("agents/rl/checkpoints/stages").resolve()
    # the scarce-pull recipe's stage 2, as it shipped before
    _stage_2_from(
        "experiments/seller_scarce_pull_stage2.toml", stages / "rl_seller_retail_scarce_pull"
    )
    # the naive-pull recipe's stage 2, as it shipped before that
    _stage_2_from(
        "experiments/seller_naive_pull_stage2.toml", stages / "rl_seller_retail_naive_pull"
    )
    # the naive-pull recipe, measured first as experiments
    _stage_2_from(
        "experiments/seller_plan_naive_pull005.toml", runs / "seller_retail_plan_naive_pull005"
    )
    _same_but(
        "experiments/seller_retail_plan_naive_pull005.toml",
        {"name": "seller_retail_plan_naive_pull005"},
        base="seller_retail_naive_pull.toml",
    )
    _its_seeds("seller_plan_naive_pull005", "seller_retail_plan_naive_pull005")
    # the plan-feature recipe's stage 2, as it shipped before
    _stage_2_from("experiments/seller_plan_stage2.toml", stages / "rl_seller_retail_plan")
    _same_but(  # the plan-feature recipe shipped before, measured first as experiments
        "experiments/seller_plan_feature_w100.toml",
        {"name": "seller_plan_feature_w100", "init": runs / "seller_retail_plan_feature",
         "teachers": (("retail", runs / "seller_retail_plan_feature"),
                      ("wholesale", runs / "seller_wholesale100"))},
        base="seller.toml",
    )  # fmt: skip
    _same_but(
        "experiments/seller_wholesale100.toml",
        {"name": "seller_wholesale100"},
        base="seller_wholesale.toml",
    )
    _its_seeds("seller_plan_feature_w100", "seller_retail_plan_feature")


def _its_seeds(recipe: str, specialist: str) -> None:
    """``experiments/{recipe}_seedN.toml`` (N = 1, 2): the shipped stage 2 from the retail
    specialist ``specialist`` and the wholesale one, both trained with seed N."""
    runs = Path("runs").resolve()
    for seed in (1, 2):
        _same_but(
            f"experiments/{recipe}_seed{seed}.toml",
            {"name": f"{recipe}_seed{seed}", "seed": seed,
             "init": runs / f"{specialist}_seed{seed}",
             "teachers": (("retail", runs / f"{specialist}_seed{seed}"),
                          ("wholesale", runs / f"seller_wholesale100_seed{seed}"))},
            base="seller.toml",
        )  # fmt: skip


def test_the_previous_stage_3_is_kept_as_it_shipped():
    """experiments/seller_stage3.toml, the base of the experiments measured against it, is
    the recipe's stage 3 as it shipped until the plan-feature recipe (commit df1ecaa)."""
    stages = Path("agents/rl/checkpoints/stages").resolve()
    _same_but(STAGE3, {
        "name": "seller_stage3", "iterations": 60, "init": stages / "rl_seller_joint",
        "imitate": "", "imitation_iterations": 0, "teacher_coef": 0.2, "signal_prior": 0.25,
        "assignment": True,
        "teachers": (("retail", stages / "rl_seller_retail"),
                     ("wholesale", stages / "rl_seller_joint")),
    })  # fmt: skip


def test_a_config_can_extend_another_and_name_only_what_differs(tmp_path):
    # A buyer checkpoint: the opponents of a seller's run are built when the file is read.
    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "agents/rl/checkpoints/rl_buyer", tmp_path / "ckpt")
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "b.toml").write_text(
        "[train]\nlr = 1e-3\niterations = 7\n[[opponents]]\nname = '../ckpt'\n"
        "[[opponents]]\nname = 'truthful'\n[family]\n[markets.a]\nbuyers = 3\n"
    )
    child = _write(tmp_path / "c.toml", "extends = 'base/b.toml'\n[train]\niterations = 9\n")
    cfg = load_train_config(str(child))
    assert (cfg.lr, cfg.iterations) == (1e-3, 9)  # [train] merged key by key
    assert [o.name for o in cfg.opponents] == ["ckpt", "truthful"]  # the path still points there
    assert Path(cfg.resolve(cfg.opponents[0].name)).resolve() == (tmp_path / "ckpt").resolve()
    assert cfg.family.configs[0][1].buyers == 3
    teach = _write(
        tmp_path / "base" / "t.toml",
        "extends = 'b.toml'\n[train]\nteacher_coef = 1.0\nteachers = { a = '../ckpt' }\n",
    )
    taught = load_train_config(str(_write(tmp_path / "u.toml", "extends = 'base/t.toml'\n")))
    assert taught.teachers == (("a", "ckpt"),)  # a teacher's path still points there too
    assert load_train_config(str(teach)).teachers == (("a", "../ckpt"),)
    other = _write(tmp_path / "d.toml", "extends = 'c.toml'\n[[opponents]]\nname = 'haggler'\n")
    assert [o.name for o in load_train_config(str(other)).opponents] == ["haggler"]  # replaced
    (tmp_path / "f.toml").write_text(
        "[[opponents]]\nname = 'truthful'\n[markets.a]\nbuyers = 3\n[markets.z]\nbuyers = 4\n"
        "[family]\nconfigs = ['a']\nprice_scale = [0.5, 2.0]\n"
        "[family.jitter]\nturns = [-1, 1]\nbuyers = [-1, 1]\n"
    )
    jit = _write(tmp_path / "j.toml", "extends = 'f.toml'\n[family.jitter]\nturns = [-3, 1]\n")
    fam = load_train_config(str(jit)).family  # [family] merged key by key, jitter by field
    assert [name for name, _ in fam.configs] == ["a"] and fam.price_scale == (0.5, 2.0)
    assert dict(fam.jitter) == {"turns": (-3.0, 1.0), "buyers": (-1.0, 1.0)}
    fam = load_train_config(str(_write(tmp_path / "k.toml", "extends = 'f.toml'\n"))).family
    assert dict(fam.jitter) == {"turns": (-1.0, 1.0), "buyers": (-1.0, 1.0)}
    wide = _write(tmp_path / "w.toml", "extends = 'j.toml'\n[family]\nconfigs = ['a', 'z']\n")
    fam = load_train_config(str(wide)).family  # through two files
    assert [name for name, _ in fam.configs] == ["a", "z"] and fam.price_scale == (0.5, 2.0)
    assert dict(fam.jitter)["turns"] == (-3.0, 1.0)
    more = _write(
        tmp_path / "m.toml",  # [markets.NAME] merged field by field; a new NAME adds a config
        "extends = 'f.toml'\n[markets.a]\nturns = 9\n[markets.y]\nbuyers = 5\n"
        "[family]\nconfigs = ['a', 'y', 'z']\n",
    )
    a, y, z = (m for _, m in load_train_config(str(more)).family.configs)
    assert (a.buyers, a.turns, y.buyers, z.buyers) == (3, 9, 5, 4)
    for text, words in [
        ("extends = 'e.toml'\n", "extends it back"),
        ("extends = 'nowhere.toml'\n", "nowhere.toml: cannot read"),
        ("extends = 3\n", "path of another training config"),
        ("extends = 'c.toml'\ntrain = 3\n", "must be a table"),
    ]:
        with pytest.raises(ValueError, match=words):
            load_train_config(str(_write(tmp_path / "e.toml", text)))


_GOOD = "[[opponents]]\nname = 'truthful'\n[family]\n[markets.a]\nbuyers = 3\n"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[train]\nside = 'both'\n" + _GOOD, "side"),
        ("[train]\nlr = -1\n" + _GOOD, "lr"),
        ("[train]\nsteps_per = 3\n" + _GOOD, "unknown"),
        ("[[opponents]]\nname='truthful'\n[family]\nconfigs=['x']\n", "markets.x"),
        ("[[opponents]]\nname='truthful'\n[markets.a]\nbuyers=0\n[family]\n", "buyers"),
        ("[family]\n[markets.a]\nbuyers = 3\n", "opponents"),
        ("[train\n", "not valid TOML"),
        ("[train]\nexpert_pull = 'price'\n" + _GOOD, "expert_pull"),
        ("[train]\nref_coef = 0.1\n" + _GOOD, "warm start"),
        ("[train]\nref_coef = -0.1\nimitate = 'greedy_matcher'\n" + _GOOD, "ref_coef"),
        ("[train]\nimitation_patience = -0.1\n" + _GOOD, "imitation_patience"),
        ("[train]\nimitation_spare = -0.1\n" + _GOOD, "imitation_spare"),
        ("[train]\nexpert_spare = 0.3\n" + _GOOD, "needs train.expert_pull = 'scarce'"),
        ("[train]\nexpert_pull = 'scarce'\nexpert_spare = -1\n" + _GOOD, "expert_spare"),
        (
            "[train]\nexpert_pull = 'scarce'\nexpert_spare = true\n" + _GOOD,
            "expert_spare: expected a number >= 0, got True",
        ),
        (
            "[train]\nimitation_spare = 'lots'\n" + _GOOD,
            "imitation_spare: expected a number >= 0, got 'lots'",
        ),
        ("[train]\neval_markets = 0\n" + _GOOD, "eval_markets: expected a positive integer"),
        ("[train]\nteam_return = true\n" + _GOOD, "team_return"),
        ("[train]\nteacher_coef = 1.0\n" + _GOOD, "go together"),
        ("[train]\nteachers = { a = 'x' }\n" + _GOOD, "go together"),
        ("[train]\nteacher_coef = 1\nteachers = { b = 'x' }\n" + _GOOD, "'b' is not in"),
        ("[train]\nteacher_coef = 1\nteachers = { a = 3 }\n" + _GOOD, "teachers.a"),
        ("[train]\nteacher_coef = 1\nteachers = ['a']\n" + _GOOD, "teachers"),
        (
            "[train]\nside = 'buyer'\nteacher_coef = 1\nteachers = { a = 'x' }\n" + _GOOD,
            "seller-side",
        ),
    ],
)
def test_bad_training_configs_name_the_problem(tmp_path, text, words):
    path = tmp_path / "t.toml"
    path.write_text(text)
    assert load_train_config(str(_write(tmp_path / "ok.toml", _GOOD))).family
    with pytest.raises(ValueError, match=words):
        load_train_config(str(path))


def _write(path, text):
    path.write_text(text)
    return path


def test_learning_works_where_the_answer_is_known(tmp_path):
    """Exact public signals, truthful buyers, T >= N: asking each buyer its signal on the
    best assignment takes the whole surplus. A short PPO run from scratch gets there, past
    its greedy-matcher expert (about 0.77 here: it assumes noisy signals)."""
    exact = MarketConfig(buyers=3, products=2, inventory=2, turns=4, signal_noise=0.0)
    cfg = TrainConfig(
        side="seller",
        name="exact",
        iterations=10,
        batch_size=128,
        hidden=32,
        threads=1,
        lr=1e-3,
        lr_end=3e-4,
        target_kl=0.0,
        eval_every=0,
        eval_markets=10,
        checkpoint_every=10,
        opponents=(Opponent("truthful"),),
        family=ConfigFamily(configs=(("exact", exact),)),
    )
    torch.manual_seed(cfg.seed)
    untrained = play_markets(exact, 99, range(400), RLSeller(hidden=32), Truthful())
    out = train(cfg, tmp_path / "run", progress=False)
    trained = play_markets(exact, 99, range(400), checkpoint.load(out), Truthful())
    assert np.nanmean(untrained["capture"]) < 0.6
    assert np.nanmean(trained["capture"]) >= 0.9


def test_a_buyer_learns_whether_to_disclose_and_plays_as_three_variants(tmp_path):
    family = ConfigFamily(configs=(("small", SMALL),), disclosure=("voluntary",))
    cfg = _tiny(tmp_path, "buyer", family=family, learned_disclosure=True)
    cfg = dataclasses.replace(cfg, opponents=(Opponent("disclosure_aware"),))
    out = train(cfg, tmp_path / "run", progress=False)
    rows = list(csv.DictReader(open(out / "curve.csv")))
    assert any(r.get("disclosure_rate") not in (None, "") for r in rows)
    torch.manual_seed(cfg.seed)
    fresh = RLBuyer(hidden=16, disclosure="learned").net.state_dict()
    trained = load_file(str(out / "model.safetensors"))
    for k in fresh:
        if k.startswith("disclosure_head."):
            assert not torch.equal(trained[k], fresh[k]), k
    never = registry.get(str(out), "buyer")
    always = registry.get(str(out) + "+disclosed", "buyer")
    learned = registry.get(str(out) + "+learned", "buyer")
    assert never.base_name == always.base_name == learned.base_name == "tiny_buyer"
    seller = registry.make("disclosure_aware", "seller")
    voluntary = dataclasses.replace(SMALL, disclosure="voluntary")
    markets = {}
    for entry in (never, always, learned):
        m = play_markets(voluntary, 0, range(64), seller, entry.build(3))
        markets[entry.name] = m
    assert np.all(markets["tiny_buyer"]["buyer_surplus_disclosed"] == 0)
    market = generate_batch(voluntary, 0, 64)
    keys, every = np.arange(64, dtype=np.uint64), np.ones((64, 4), bool)
    rates = [np.mean(entry.build(3).disclose(every, keys, market)) for entry in (never, always)]
    assert rates == [0.0, 1.0]
    # The learned variant discloses where its head's logit is positive, and only agents.
    chooser = learned.build(3)
    with torch.inference_mode():
        logit = chooser.net.disclosure(torch.from_numpy(disclosure_features(market)))[0].numpy()
    assert 0 < market.is_agent.sum() < market.is_agent.size
    np.testing.assert_array_equal(
        chooser.disclose(market.is_agent, keys, market), (logit > 0) & market.is_agent
    )
    fixed = copy.deepcopy(chooser)  # its network is shared with every build of the checkpoint
    head = fixed.net.disclosure_head[-1]
    rates = []
    for bias in (1.0, -1.0):
        with torch.no_grad():
            head.weight.zero_()
            head.bias.fill_(bias)
        rates.append(np.mean(fixed.disclose(every, keys, market)))
        chosen = fixed.disclose(market.is_agent, keys, market)
        np.testing.assert_array_equal(chosen, market.is_agent & (bias > 0))  # agents only
    assert rates == [1.0, 0.0]
    assert check_buyer(lambda seed: learned.build(seed), markets=6) == []


def test_buyer_returns_are_each_buyers_own_unless_the_team_option_pools_them():
    # 3 steps, 2 markets, 3 buyers: buyer 1 of market 0 trades at step 1 (surplus 0.5),
    # buyer 2 at step 2 (0.25); in market 1 buyer 0 trades at step 0 (0.75).
    r = np.zeros((3, 2, 3))
    r[1, 0, 1], r[2, 0, 2], r[0, 1, 0] = 0.5, 0.25, 0.75
    own = returns_to_go(r)
    np.testing.assert_allclose(own[:, 0, 1], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(own[:, 0, 2], [0.25, 0.25, 0.25])
    np.testing.assert_allclose(own[:, 0, 0], 0.0)  # never traded: nothing to go
    np.testing.assert_allclose(own[:, 1, 0], [0.75, 0.0, 0.0])
    team = returns_to_go(r, team=True)
    np.testing.assert_allclose(team[:, 0, :], np.repeat([[0.25], [0.25], [0.25 / 3]], 3, 1))
    np.testing.assert_allclose(team[:, 1, :], np.repeat([[0.25], [0.0], [0.0]], 3, 1))
    np.testing.assert_allclose(team.sum(axis=2), own.sum(axis=2))  # a split, not a change


def test_a_team_return_run_trains_other_weights_and_records_the_option(tmp_path):
    own = train(_tiny(tmp_path, "buyer", iterations=2), tmp_path / "own", progress=False)
    team = train(_tiny(tmp_path, "buyer", iterations=2, team_return=True), tmp_path / "team",
                 progress=False)  # fmt: skip
    assert json.loads((team / "config.json").read_text())["training"]["team_return"] is True
    assert json.loads((own / "config.json").read_text())["training"]["team_return"] is False
    a, b = load_file(str(own / "model.safetensors")), load_file(str(team / "model.safetensors"))
    assert any(not torch.equal(a[k], b[k]) for k in a)


def test_the_expert_pull_can_be_kept_to_some_base_configs(tmp_path):
    family = ConfigFamily(
        configs=(("small", SMALL), ("wide", dataclasses.replace(SMALL, buyers=8))),
        jitter=(("buyers", (-1.0, 1.0)), ("signal_noise", (0.0, 0.05))),
    )
    for i in range(20):  # naming the base config changes no draw
        a, b = np.random.default_rng(i), np.random.default_rng(i)
        name, cfg = family.sample_named(a)
        assert cfg == family.sample(b) and abs(cfg.buyers - {"small": 4, "wide": 8}[name]) <= 1
    cfg = _tiny(tmp_path, family=family, iterations=8, expert_coef=1.0, expert_pull="pair",
                expert_configs=("wide",))  # fmt: skip
    out = train(cfg, tmp_path / "run", progress=False)
    rows = [r for r in csv.DictReader(open(out / "curve.csv")) if r["phase"] == "train"]
    pulled = {int(r["buyers"]): [] for r in rows}
    for r in rows:
        pulled[int(r["buyers"])].append(float(r["expert_nll"]))
    small = [x for n, xs in pulled.items() if n <= 5 for x in xs]
    wide = [x for n, xs in pulled.items() if n >= 7 for x in xs]
    assert small and wide  # both configs were drawn
    assert all(x == 0.0 for x in small) and all(x > 0.0 for x in wide)
    with pytest.raises(ValueError, match="not in family.configs"):
        dataclasses.replace(cfg, expert_configs=("retail",))
    with pytest.raises(ValueError, match="needs train.expert_coef"):
        dataclasses.replace(cfg, expert_coef=0.0)
    with pytest.raises(ValueError, match="write a list of names"):
        dataclasses.replace(cfg, expert_configs="wide")


def test_the_expert_pull_can_be_kept_to_some_opponents_rows(tmp_path):
    """``train.expert_opponents``: only the named opponents' rows are pulled, each as hard
    as without the option; a pull on no opponent's rows trains as no pull at all, to the
    bit; names are checked."""
    from agents.rl.ppo import expert_rows

    cfg = _tiny(tmp_path, expert_coef=1.0, expert_pull="pair", expert_opponents=("haggler",))
    groups = [np.arange(0, 20), np.arange(20, 32)]
    assert expert_rows(cfg, groups, 32).tolist() == [0.0] * 20 + [1.0] * 12
    runs = {}
    for name, kw in {
        "none": dict(expert_coef=0.0),
        "haggler": dict(expert_coef=1.0, expert_pull="pair", expert_opponents=("haggler",)),
        "all": dict(expert_coef=1.0, expert_pull="pair"),
    }.items():
        run = train(_tiny(tmp_path, name=f"x_{name}", **kw), tmp_path / name, progress=False)
        rows = [r for r in csv.DictReader(open(run / "curve.csv")) if r["phase"] == "train"]
        runs[name] = (load_file(str(run / "model.safetensors")), rows)
    (none, _), (half, half_rows), (full, full_rows) = runs["none"], runs["haggler"], runs["all"]
    assert any(not torch.equal(none[k], half[k]) for k in none)  # the haggler rows pulled
    assert any(not torch.equal(half[k], full[k]) for k in half)  # ... and no other rows
    # The first update starts from the same weights and data: a pull on 12 rows of 32 is
    # the mean over all 32 rows of the pull on those 12.
    assert 0.0 < float(half_rows[0]["expert_nll"]) < float(full_rows[0]["expert_nll"])
    idle = (Opponent("truthful"), Opponent("haggler", weight=0.0))  # the haggler plays no row
    unpulled, nobody = (
        load_file(str(train(_tiny(tmp_path, name="x_idle", opponents=idle, **kw),
                            tmp_path / where, progress=False) / "model.safetensors"))
        for where, kw in (
            ("unpulled", dict(expert_coef=0.0)),
            ("nobody", dict(expert_coef=1.0, expert_pull="pair", expert_opponents=("haggler",))),
        )
    )  # fmt: skip
    assert all(torch.equal(unpulled[k], nobody[k]) for k in unpulled)
    for kw, words in [
        (dict(expert_opponents=("strategic",)), "not among the \\[\\[opponents\\]\\]"),
        (dict(expert_opponents="haggler"), "write a list of names"),
        (dict(expert_coef=0.0), "needs train.expert_coef"),
    ]:
        with pytest.raises(ValueError, match=words):
            dataclasses.replace(cfg, **kw)


def test_the_scarce_price_pull_trains_as_the_move_pull_where_every_turn_is_scarce(tmp_path):
    """``expert_pull = "scarce"``: with a spare so wide that every turn is scarce it
    trains to the bit as the "move" pull; with none, as neither "move" nor "pair"; the
    checkpoint records the spare."""
    weights = {}
    for name, kw in {
        "move": dict(expert_pull="move"),
        "pair": dict(expert_pull="pair"),
        "all_scarce": dict(expert_pull="scarce", expert_spare=100.0),
        "scarce": dict(expert_pull="scarce"),
    }.items():
        cfg = _tiny(tmp_path, name=f"x_{name}", expert_coef=1.0, **kw)
        run = train(cfg, tmp_path / name, progress=False)
        weights[name] = load_file(str(run / "model.safetensors"))
        spare = json.loads((run / "config.json").read_text())["training"].get("expert_spare")
        assert spare == kw.get("expert_spare")
    same = {n: all(torch.equal(weights["move"][k], w[k]) for k in w) for n, w in weights.items()}
    assert same == {"move": True, "pair": False, "all_scarce": True, "scarce": False}
    assert any(not torch.equal(weights["pair"][k], weights["scarce"][k]) for k in weights["pair"])


def test_one_base_config_may_jitter_its_own_ranges(tmp_path):
    """``family.config_jitter``: one config's batches draw from their own ranges, field
    by field; the other configs draw exactly as without it; it is read from TOML, merged
    through ``extends`` field by field, recorded only where set, and checked."""
    base = ConfigFamily(
        configs=(("small", SMALL), ("wide", dataclasses.replace(SMALL, buyers=8))),
        jitter=(("buyers", (-1.0, 1.0)), ("signal_noise", (0.0, 0.05))),
    )
    own = dataclasses.replace(
        base, config_jitter=(("wide", (("buyers", (2.0, 4.0)), ("turns", (-1.0, 0.0)))),)
    )
    assert own.jitter_for("small") == base.jitter
    assert own.jitter_for("wide") == (
        ("buyers", (2.0, 4.0)), ("signal_noise", (0.0, 0.05)), ("turns", (-1.0, 0.0))
    )  # fmt: skip
    seen = set()
    for i in range(40):
        (a, x), (b, y) = (
            base.sample_named(np.random.default_rng(i)),
            own.sample_named(np.random.default_rng(i)),
        )
        assert a == b
        seen.add(a)
        if a == "small":
            assert x == y  # the same draws, to the bit
        else:
            assert 10 <= y.buyers <= 12 and SMALL.turns - 1 <= y.turns <= SMALL.turns
            assert 7 <= x.buyers <= 9 and x.turns == SMALL.turns
            assert y.signal_noise == x.signal_noise  # the shared field drew the same
    assert seen == {"small", "wide"}
    for bad, words in [
        ((("retail", (("buyers", (0.0, 1.0)),)),), "not in family.configs"),
        ((("wide", (("colour", (0.0, 1.0)),)),), "cannot jitter 'colour'"),
        ((("wide", (("buyers", (2.0, 1.0)),)),), r"config_jitter.wide.buyers: need low <= high"),
    ]:
        with pytest.raises(ValueError, match=words):
            dataclasses.replace(base, config_jitter=bad)
    (tmp_path / "f.toml").write_text(
        "[[opponents]]\nname = 'truthful'\n[markets.a]\nbuyers = 3\n[markets.z]\nbuyers = 4\n"
        "[family]\nconfigs = ['a', 'z']\n"
        "[family.jitter]\nturns = [-1, 1]\nbuyers = [-1, 1]\n"
        "[family.config_jitter.z]\nbuyers = [0, 3]\nproducts = [0, 1]\n"
    )
    fam = load_train_config(str(tmp_path / "f.toml")).family
    assert fam.config_jitter == (("z", (("buyers", (0.0, 3.0)), ("products", (0.0, 1.0)))),)
    more = _write(
        tmp_path / "g.toml", "extends = 'f.toml'\n[family.config_jitter.z]\nbuyers = [1, 2]\n"
    )
    cfg = load_train_config(str(more))
    assert dict(cfg.family.config_jitter)["z"] == (("buyers", (1.0, 2.0)), ("products", (0.0, 1.0)))
    assert cfg.to_dict()["family"]["config_jitter"] == {
        "z": {"buyers": [1.0, 2.0], "products": [0.0, 1.0]}
    }
    assert (
        "config_jitter"
        not in load_train_config("agents/rl/configs/seller.toml").to_dict()["family"]
    )
    for text, words in [
        ("[family.config_jitter]\nz = 3\n", "write FIELD = \\[low, high\\]"),
        ("[family.config_jitter.z]\nbuyers = ['a', 'b']\n", "write FIELD"),
        ("[family.config_jitter.z]\nbuyers = [-inf, 1]\n", "write FIELD"),
        ("[family.config_jitter.y]\nbuyers = [0, 1]\n", "not in family.configs"),
    ]:
        with pytest.raises(ValueError, match=words):
            load_train_config(str(_write(tmp_path / "h.toml", "extends = 'f.toml'\n" + text)))


def test_the_expert_pull_covers_the_price_level_only_when_asked():
    from types import SimpleNamespace

    from agents.rl.ppo import _expert_nll

    g = torch.Generator().manual_seed(0)
    logits, plog = torch.randn(6, 5, generator=g), torch.randn(6, 4, generator=g)
    data = {
        "expert_pair": torch.tensor([0, 1, 2, 3, 4, 0]),
        "pair": torch.tensor([0, 1, 0, 0, 0, 0]),
    }
    idx, policy = torch.arange(6), SimpleNamespace(expert_level=2)
    pair_nll = -torch.log_softmax(logits, -1)[idx, data["expert_pair"]]
    level_nll = -torch.log_softmax(plog, -1)[:, 2]
    same = (data["pair"] == data["expert_pair"]).float()
    pair_only = _expert_nll(policy, logits, plog, data, idx, "pair")
    move = _expert_nll(policy, logits, plog, data, idx, "move")
    assert torch.allclose(pair_only, pair_nll.mean())
    assert torch.allclose(move, (pair_nll + same * level_nll).mean())
    assert not torch.allclose(move, pair_only)
    # "scarce": the price level only on the turns marked scarce.
    data["expert_scarce"] = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    scarce = _expert_nll(policy, logits, plog, data, idx, "scarce")
    assert torch.allclose(scarce, (pair_nll + same * data["expert_scarce"] * level_nll).mean())
    assert not torch.allclose(scarce, move) and not torch.allclose(scarce, pair_only)


def test_scarce_turns_are_those_the_greedy_matcher_spares_no_patience_on():
    """``train.expert_spare`` reads turns as ``GreedyMatcher.spare`` does: on every state
    of played markets, a turn is scarce exactly where the patient matcher asks no more
    than a copy of itself without patience (away from standing bids and the top of the
    range)."""
    import copy
    from types import SimpleNamespace

    from agents.rl.ppo import scarce_turns
    from agents.rollout import play_batch
    from agents.scripted.buyers import Truthful
    from agents.scripted.sellers import GreedyMatcher
    from arena.generator import generate_batch

    @dataclasses.dataclass
    class Watched(GreedyMatcher):
        seen: set = dataclasses.field(default_factory=set)

        def act(self, obs):
            twin = copy.deepcopy(self)  # its memory too
            object.__setattr__(twin, "patience", 0.0)
            plain = GreedyMatcher.act(twin, obs)
            ask = super().act(obs)
            ar = np.arange(obs.batch_size)
            assert np.array_equal(plain.to, ask.to) and np.array_equal(plain.product, ask.product)
            live = ~obs.done & (obs.counter_product[ar, ask.to] != ask.product)
            live &= ask.price < obs.price_range[1]
            live &= obs.stock.sum(1) >= obs.active.sum(1)  # stock outlasts the buyers
            flag = scarce_turns(obs, self.spare)
            assert np.array_equal((ask.price > plain.price)[live], flag[live] == 0)
            self.seen.update(flag[live].tolist())
            return ask

    for spare in (0.0, 0.3, 1.0):
        patient = Watched(patience=0.1, spare=spare)
        for seed in range(4):
            market = dataclasses.replace(SMALL, buyers=6, products=3, inventory=2, turns=6 + seed)
            play_batch(generate_batch(market, seed, 64), patient, Truthful())
        assert patient.seen == {0.0, 1.0}  # both kinds of turn were met
    # Where stock runs out before the buyers, the units in stock are the sales left:
    # (active buyers, units in stock, turns left) -> scarce at spare 0.3.
    cases = {(16, 16, 20): 1.0, (16, 8, 20): 0.0, (8, 8, 12): 0.0, (8, 8, 10): 1.0,
             (10, 10, 12): 1.0, (16, 8, 10): 1.0, (3, 0, 5): 0.0}  # fmt: skip
    for (n, units, left), want in cases.items():
        obs = SimpleNamespace(
            active=np.arange(20)[None] < n,
            stock=np.array([[units, 0]]),
            turns_left=np.array([left]),
        )
        assert scarce_turns(obs, 0.3).tolist() == [want], (n, units, left)


def test_kl_divergence_matches_torch_distributions_where_options_are_excluded():
    from agents.rl.ppo import kl_divergence

    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        p, q = torch.randn(8, 6, generator=g), torch.randn(8, 6, generator=g)
        shut = torch.rand(8, 6, generator=g) < 0.3
        shut[:, 0] = False  # every row keeps an option
        p, q = p.masked_fill(shut, float("-inf")), q.masked_fill(shut, float("-inf"))
        p.requires_grad_(True)
        got = kl_divergence(p, torch.log_softmax(q, -1))
        # The same sums over the open options only, from torch's own KL.
        want = torch.stack(
            [
                torch.distributions.kl_divergence(
                    torch.distributions.Categorical(logits=p[r][~shut[r]]),
                    torch.distributions.Categorical(logits=q[r][~shut[r]]),
                )
                for r in range(8)
            ]
        )
        assert torch.allclose(got, want, atol=1e-6)
        got.sum().backward()
        assert torch.isfinite(p.grad).all()
    same = torch.randn(4, 5, generator=g)
    zero = kl_divergence(same, torch.log_softmax(same, -1))
    assert torch.allclose(zero, torch.zeros(4), atol=1e-6)


def _teacher(path, seed: int) -> Path:
    """A seller checkpoint with random weights everywhere (its heads too): a play of its own."""
    torch.manual_seed(seed)
    policy = RLSeller(seed=seed, greedy=False, hidden=16)
    with torch.no_grad():
        for p in policy.net.parameters():
            p.normal_(0.0, 0.5)
    return checkpoint.save(path, policy, name=f"teacher{seed}")


def test_a_seller_is_pulled_toward_the_teacher_of_its_batchs_config_only(tmp_path):
    from agents.rl.ppo import _opponents, kl_divergence, reference_logp, seller_rollout

    other = MarketConfig(buyers=3, products=3, inventory=2, turns=4, patience=2)
    family = ConfigFamily(configs=(("small", SMALL), ("other", other)))
    a = _teacher(tmp_path / "a", 1)
    cfg = _tiny(tmp_path, family=family, iterations=20, teacher_coef=20.0, target_kl=0.0,
                lr=1e-2, teachers={"small": str(a)})  # fmt: skip
    start = checkpoint.load(train(cfg, tmp_path / "start", progress=False, until=0), greedy=False)
    end = checkpoint.load(train(cfg, tmp_path / "run", progress=False), greedy=False)
    teacher = checkpoint.load(a).net

    def kl(student) -> float:
        data = seller_rollout(student, SMALL, _opponents(cfg, 7), [1.0, 1.0], cfg, 11).data
        mine, theirs = reference_logp(student.net, data), reference_logp(teacher, data)
        return sum(float(kl_divergence(mine[k], theirs[k]).mean()) for k in mine)

    assert kl(end) < 0.5 * kl(start)
    # The pull (and its logged KL) is on the teacher's config's batches alone.
    with open(tmp_path / "run" / "curve.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["phase"] == "train"]
    logged = {(r["buyers"], r["ref_kl"] != "") for r in rows}
    assert logged == {("4", True), ("3", False)}
    training = json.loads((tmp_path / "run" / "config.json").read_text())["training"]
    assert training["teachers"] == {"small": str(a)} and training["teacher_coef"] == 20.0
    # Resumed, the run ends on the same bytes; with other teacher weights it refuses.
    train(cfg, tmp_path / "split", progress=False, until=10)
    split = train(cfg, tmp_path / "split", resume=True, progress=False)
    assert (split / "model.safetensors").read_bytes() == (
        tmp_path / "run" / "model.safetensors"
    ).read_bytes()
    train(cfg, tmp_path / "moved", progress=False, until=10)
    _teacher(a, 5)  # the same path, other weights
    with pytest.raises(ValueError, match="train.teachers.small: not the weights the run"):
        train(cfg, tmp_path / "moved", resume=True, progress=False)


def test_per_teacher_weights_replace_the_common_one_for_their_config(tmp_path):
    """``train.teacher_coefs``: a teacher named there pulls by its own weight (0: not at
    all, so the run is the run without it); the others keep ``teacher_coef``; configs
    record the weights only when set; bad entries are one clear error."""
    a = _teacher(tmp_path / "a", 1)
    base = dict(iterations=3, checkpoint_every=0, teachers={"small": str(a)})

    def weights(name: str, **kw) -> dict:
        run = train(_tiny(tmp_path, **kw), tmp_path / name, progress=False)
        return load_file(str(run / "model.safetensors"))

    alone = weights("alone", iterations=3, checkpoint_every=0)
    off = weights("off", teacher_coef=0.2, teacher_coefs={"small": 0.0}, **base)
    common = weights("common", teacher_coef=0.2, **base)
    own = weights("own", teacher_coef=0.2, teacher_coefs={"small": 2.0}, **base)
    assert all(torch.equal(alone[k], off[k]) for k in alone)
    assert not all(torch.equal(common[k], own[k]) for k in common)
    assert not all(torch.equal(common[k], alone[k]) for k in common)
    cfg = _tiny(tmp_path, teacher_coef=0.2, teacher_coefs={"small": 2.0}, **base)
    assert cfg.teacher_weight("small") == 2.0 and cfg.to_dict()["teacher_coefs"] == {"small": 2.0}
    assert "teacher_coefs" not in _tiny(tmp_path, teacher_coef=0.2, **base).to_dict()
    for coefs, words in (
        ({"elsewhere": 0.1}, "'elsewhere' has no teacher"),
        ({"small": -1.0}, "teacher_coefs.small: expected a number >= 0"),
        ({"small": True}, "teacher_coefs.small: expected a number >= 0"),
        ("0.1", "write teacher_coefs"),
    ):
        with pytest.raises(ValueError, match=words):
            _tiny(tmp_path, teacher_coef=0.2, teacher_coefs=coefs, **base)


def test_teachers_that_cannot_teach_are_one_error(tmp_path):
    buyer = checkpoint.save(tmp_path / "buyer", RLBuyer(hidden=16), name="b")
    coarse = RLSeller(hidden=16, offsets=(0.0, 0.1))  # fewer price levels than the learner
    coarse = checkpoint.save(tmp_path / "coarse", coarse, name="coarse")
    for path, words in [
        (tmp_path / "nowhere", "train.teachers.small: .*no such checkpoint"),
        (buyer, "not a seller checkpoint"),
        (coarse, "price levels; the learner"),
    ]:
        cfg = _tiny(tmp_path, teacher_coef=1.0, teachers={"small": str(path)})
        with pytest.raises(ValueError, match=words):
            train(cfg, tmp_path / f"run_{path.name}", progress=False)


def test_the_pull_to_the_warm_start_is_saved_resumed_and_holds_the_policy_near_it(tmp_path):
    from agents.rl.ppo import REFERENCE

    warm = {"imitate": "greedy_matcher", "imitation_iterations": 1}
    # The reference is the network as the warm start left it (the iteration-0 checkpoint).
    cfg = _tiny(tmp_path, ref_coef=0.5, **warm)
    start = train(cfg, tmp_path / "start", progress=False, until=0)
    ref = load_file(str(start / REFERENCE))
    model = load_file(str(start / "model.safetensors"))
    assert ref.keys() == model.keys() and all(torch.equal(ref[k], model[k]) for k in ref)

    def last_kl(run):
        with open(run / "curve.csv", newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["phase"] == "train"]
        return float(rows[-1]["ref_kl"])

    cfg = _tiny(tmp_path, ref_coef=0.5, iterations=6, **warm)
    whole = train(cfg, tmp_path / "whole", progress=False)
    train(cfg, tmp_path / "split", progress=False, until=3)
    split = train(cfg, tmp_path / "split", resume=True, progress=False)
    a, b = (load_file(str(r / "model.safetensors")) for r in (whole, split))
    assert all(torch.equal(a[k], b[k]) for k in a)
    (split / REFERENCE).write_bytes(b"not safetensors")
    with pytest.raises(ValueError, match="cannot resume"):
        train(cfg, split, resume=True, progress=False)
    # A heavy pull keeps the policy nearer its warm start than a negligible one.
    loose = train(_tiny(tmp_path, ref_coef=1e-6, iterations=6, **warm), tmp_path / "loose",
                  progress=False)  # fmt: skip
    tight = train(_tiny(tmp_path, ref_coef=50.0, iterations=6, **warm), tmp_path / "tight",
                  progress=False)  # fmt: skip
    assert last_kl(tight) < 0.5 * last_kl(loose)


def test_the_longer_and_larger_batch_retail_teachers_change_only_what_they_say():
    """Stage 2 with twice its samples (400 iterations, or batches of 2,048), and the shipped
    stage 3 (with its prior) taught by each on retail batches."""
    for name, changed in (
        ("seller_retail_long", {"iterations": 400}),
        ("seller_retail_big", {"batch_size": 2048}),
    ):
        _same_but(f"experiments/{name}.toml", {**changed, "name": name}, "seller_retail.toml")
    stages = Path("agents/rl/checkpoints/stages").resolve()
    runs = Path("runs").resolve()  # where the stage-2 commands write (train them first)
    for teacher in ("seller_retail_long", "seller_retail_big"):
        name = teacher.replace("seller_", "seller_stage3_")
        teachers = (("retail", runs / teacher), ("wholesale", stages / "rl_seller_joint"))
        _same_but(f"experiments/{name}.toml", {"name": name, "teachers": teachers}, base=STAGE3)


def test_the_stage_3_with_a_larger_retail_config_changes_only_what_it_says():
    """Stage 3 with a third base config, retail at 12 buyers, 6 products and 15 turns
    (nothing else changed), on which the retail teacher teaches too; still smaller, once
    jittered, than the held-out `large` (16 buyers, 8 products)."""
    shipped = load_train_config(f"agents/rl/configs/{STAGE3}")
    (_, retail), (_, wholesale) = shipped.family.configs
    retail12 = dataclasses.replace(retail, buyers=12, products=6, turns=15)
    family = dataclasses.replace(
        shipped.family,
        configs=(("retail", retail), ("retail12", retail12), ("wholesale", wholesale)),
    )
    jitter = dict(family.jitter)
    assert (
        retail12.buyers + jitter["buyers"][1] < 16 and retail12.products + jitter["products"][1] < 8
    )
    stages = Path("agents/rl/checkpoints/stages").resolve()
    runs = Path("runs").resolve()  # where seller_retail_long.toml's command writes
    for name, teacher, planned in (
        ("seller_stage3_retail12", stages / "rl_seller_retail", False),
        ("seller_stage3_retail12_long", runs / "seller_retail_long", False),
        (  # measured after seller.toml planned its matches, so it keeps them
            "seller_stage3_retail12_planned_features",
            runs / "seller_retail12_planned_features",
            True,
        ),
    ):
        teachers = (
            ("retail", teacher),
            ("retail12", teacher),
            ("wholesale", stages / "rl_seller_joint"),
        )
        _same_but(
            f"experiments/{name}.toml",
            {"name": name, "family": family, "teachers": teachers},
            base=STAGE3,
            planned=planned,
        )
    # Its teacher: the stage 2 trained with planned matches, on retail and retail12.
    stage2 = load_train_config("agents/rl/configs/experiments/seller_retail_planned_features.toml")
    two = dataclasses.replace(stage2.family, configs=(("retail", retail), ("retail12", retail12)))
    _same_but(
        "experiments/seller_retail12_planned_features.toml",
        {"name": "seller_retail12_planned_features", "family": two},
        base="experiments/seller_retail_planned_features.toml",
    )


def test_the_stage_within_its_plan_changes_only_that():
    _same_but(
        "experiments/seller_within_plan.toml",
        {"name": "seller_within_plan", "within_plan": True},
        base=STAGE3,
        planned=True,  # measured after seller.toml planned its matches
    )


def test_the_planned_stages_change_only_what_they_say():
    """Stages 1 and 2 that plan their matches from the start (planned matches, a warm
    start that imitates the assignment matcher without patience); stage 3 from them, and
    the shipped stage 3 with the planned stage 2 as its retail teacher."""
    changed = {"assignment": True, "imitate": "assignment_matcher", "imitation_patience": 0.0}
    _stages_1_and_2_change_only(changed, "planned")
    runs = Path("runs").resolve()  # where the stage commands write (train them first)
    stages = Path("agents/rl/checkpoints/stages").resolve()
    planned = runs / "seller_joint_planned"
    for name, start, wholesale in (
        ("seller_planned", {"init": planned}, planned),
        ("seller_stage3_retail_planned", {}, stages / "rl_seller_joint"),
    ):
        run = load_train_config(f"agents/rl/configs/experiments/{name}.toml")
        assert run.assignment is True  # seller.toml's, kept
        _same_but(
            f"experiments/{name}.toml",
            {"name": name, **start,
             "teachers": (("retail", runs / "seller_retail_planned"), ("wholesale", wholesale))},
            base=STAGE3, planned=True,
        )  # fmt: skip


def test_the_stages_trained_with_planned_matches_change_only_that():
    """Stages 1 and 2 trained with planned matches (the warm start as shipped); stage 3
    from them, and the shipped stage 3 with that stage 2 as its retail teacher."""
    _stages_1_and_2_change_only({"assignment": True}, "planned_features")
    _stage_3_from_stages("seller_planned_features", "planned_features", planned=True)
    runs = Path("runs").resolve()  # where the stage commands write (train them first)
    stages = Path("agents/rl/checkpoints/stages").resolve()
    _same_but(
        "experiments/seller_stage3_retail_planned_features.toml",
        {"name": "seller_stage3_retail_planned_features",
         "teachers": (("retail", runs / "seller_retail_planned_features"),
                      ("wholesale", stages / "rl_seller_joint"))},
        base=STAGE3, planned=True,
    )  # fmt: skip


def test_the_stages_that_see_their_plan_change_only_that():
    """Stages 1 and 2 trained with planned matches and the plan as a feature; stage 3
    from them, with the feature."""
    _stages_1_and_2_change_only({"assignment": True, "plan_feature": True}, "plan_feature")
    _stage_3_from_stages("seller_plan_feature", "plan_feature", planned=True, plan_feature=True)
    name = "seller_plan_feature_from_retail"
    runs = Path("runs").resolve()  # where the stage commands write (train them first)
    _same_but(
        f"experiments/{name}.toml",
        {"name": name, "init": runs / "seller_retail_plan_feature"},
        base="experiments/seller_plan_feature.toml",
    )
    _same_but(
        f"experiments/{name}_pull10.toml",
        {"name": f"{name}_pull10", "teacher_coef": 1.0},
        base=f"experiments/{name}.toml",
    )
    _same_but(
        "experiments/seller_plan_feature_retail_only.toml",
        {"name": "seller_plan_feature_retail_only", "iterations": 200,
         "teachers": (("retail", runs / "seller_retail_plan_feature"),)},
        base=f"experiments/{name}.toml",
    )  # fmt: skip
    for coef in ("02", "05", "10", "20"):
        _same_but(
            f"experiments/seller_plan_feature_wteacher{coef}.toml",
            {"name": f"seller_plan_feature_wteacher{coef}",
             "teachers": (("retail", runs / "seller_retail_plan_feature"),
                          ("wholesale", runs / "seller_joint_plan_feature")),
             "teacher_coefs": (("wholesale", float(f"0.{coef}")),)},
            base="experiments/seller_plan_feature_retail_only.toml",
        )  # fmt: skip
    _seed_1_from_its_specialist(
        "seller_plan_feature_wteacher20", runs / "seller_joint_plan_feature_seed1"
    )
    specialist = load_train_config("agents/rl/configs/experiments/seller_retail_plan_feature.toml")
    for name, turns in (("sizes", (-2.0, 6.0)), ("sizes_only", (-2.0, 2.0))):
        _same_but(  # retail up to 14 buyers and 7 products: `large` stays larger
            f"experiments/seller_retail_plan_feature_{name}.toml",
            {"name": f"seller_retail_plan_feature_{name}",
             "family": _jitter(specialist, buyers=(-2.0, 6.0), products=(-1.0, 3.0),
                               turns=turns)},
            base="experiments/seller_retail_plan_feature.toml",
        )  # fmt: skip
    stages = Path("agents/rl/checkpoints/stages").resolve()
    _same_but(  # the shipped stage 1, without the plan feature, teaches wholesale
        "experiments/seller_plan_feature_shipped_wteacher.toml",
        {"name": "seller_plan_feature_shipped_wteacher",
         "teachers": (("retail", runs / "seller_retail_plan_feature"),
                      ("wholesale", stages / "rl_seller_joint"))},
        base="experiments/seller_plan_feature_wteacher20.toml",
    )  # fmt: skip
    _same_but(
        "experiments/seller_plan_feature_shipped_wteacher50.toml",
        {"name": "seller_plan_feature_shipped_wteacher50", "teacher_coefs": (("wholesale", 0.5),)},
        base="experiments/seller_plan_feature_shipped_wteacher.toml",
    )
    for recipe in ("shipped_wteacher50", "shipped_wteacher50_rpull10"):
        _seed_1_from_its_specialist(f"seller_plan_feature_{recipe}", stages / "rl_seller_joint")
    taught = load_train_config(
        "agents/rl/configs/experiments/seller_plan_feature_shipped_wteacher50.toml"
    )
    retail_sizes = (("retail", (("buyers", (-2.0, 6.0)), ("products", (-1.0, 3.0)),
                                ("turns", (-2.0, 6.0)))),)  # fmt: skip
    _same_but(  # the size-widened specialist starts and teaches; retail batches jitter as its
        "experiments/seller_plan_feature_sizes.toml",
        {"name": "seller_plan_feature_sizes",
         "init": runs / "seller_retail_plan_feature_sizes",
         "teachers": (("retail", runs / "seller_retail_plan_feature_sizes"),
                      ("wholesale", stages / "rl_seller_joint")),
         "family": dataclasses.replace(taught.family, config_jitter=retail_sizes)},
        base="experiments/seller_plan_feature_shipped_wteacher50.toml",
    )  # fmt: skip
    for pull in ("05", "10"):  # the retail specialist's pull, the wholesale teacher's kept
        _same_but(
            f"experiments/seller_plan_feature_shipped_wteacher50_rpull{pull}.toml",
            {"name": f"seller_plan_feature_shipped_wteacher50_rpull{pull}",
             "teacher_coef": float(pull) / 10},
            base="experiments/seller_plan_feature_shipped_wteacher50.toml",
        )  # fmt: skip
    _same_but(
        "experiments/seller_retail_plan_feature_long.toml",
        {"name": "seller_retail_plan_feature_long", "iterations": 400},
        base="experiments/seller_retail_plan_feature.toml",
    )
    _same_but(
        "experiments/seller_retail_plan_feature_pooled.toml",
        {"name": "seller_retail_plan_feature_pooled", "pooled": True},
        base="experiments/seller_retail_plan_feature.toml",
    )
    sized = load_train_config("agents/rl/configs/experiments/seller_plan_feature_sizes.toml")
    for name, cfg in sized.family.configs:  # every config stays below `large`'s 16 and 8
        j = dict(sized.family.jitter_for(name))
        assert cfg.buyers + j["buyers"][1] == 14 and cfg.products + j["products"][1] == 7


def test_the_scarce_turn_experiments_change_only_what_they_say():
    """The shipped retail specialist with scarcer turns (and more sizes), and the shipped
    stage 2 started from and taught by each, its retail batches jittered alike; no market
    trained on is as large as `large`."""
    runs = Path("runs").resolve()
    stages = Path("agents/rl/checkpoints/stages").resolve()
    shipped = load_train_config("agents/rl/configs/seller_retail_plan.toml")
    jitter = dict(shipped.family.jitter)
    scarce = {**jitter, "turns": (-4.0, 2.0)}
    sizes = {**scarce, "buyers": (-2.0, 4.0), "products": (-1.0, 2.0)}
    for name, ranges in (("scarce", scarce), ("scarce_sizes", sizes)):
        family = dataclasses.replace(shipped.family, jitter=tuple(ranges.items()))
        _same_but(
            f"experiments/seller_retail_plan_{name}.toml",
            {"name": f"seller_retail_plan_{name}", "family": family},
            base="seller_retail_plan.toml",
        )
    stage2 = load_train_config("agents/rl/configs/seller.toml")
    for name, own in (
        ("scarce", (("turns", (-4.0, 2.0)),)),
        ("scarce_sizes", (("turns", (-4.0, 2.0)), ("buyers", (-2.0, 4.0)),
                          ("products", (-1.0, 2.0)))),
    ):  # fmt: skip
        specialist = runs / f"seller_retail_plan_{name}"
        family = dataclasses.replace(stage2.family, config_jitter=(("retail", own),))
        _same_but(
            f"experiments/seller_plan_{name}.toml",
            {"name": f"seller_plan_{name}", "init": specialist,
             "teachers": (("retail", specialist), ("wholesale", stages / "rl_seller_wholesale")),
             "family": family},
            base="seller.toml",
        )  # fmt: skip
        cfg = load_train_config(f"agents/rl/configs/experiments/seller_plan_{name}.toml")
        for config, market in cfg.family.configs:
            j = dict(cfg.family.jitter_for(config))
            assert market.buyers + j["buyers"][1] < 16 and market.products + j["products"][1] < 8


def test_the_plan_pull_experiments_change_only_what_they_say():
    """The shipped retail specialist pulled toward the plan's pair (on every row, or on
    the naive buyers' rows alone), and the shipped stage 2 started from and taught by
    each; one stage 2 also pulled on retail batches."""
    runs = Path("runs").resolve()
    wholesale = Path("agents/rl/checkpoints/stages/rl_seller_wholesale").resolve()
    naive = ("truthful", "noisy_human")
    for name, coef, rows in (
        ("pull005", 0.05, ()),
        ("pull02", 0.2, ()),
        ("naive_pull005", 0.05, naive),
        ("naive_pull01", 0.1, naive),
    ):
        changed = {"name": f"seller_retail_plan_{name}", "expert_coef": coef, "expert_pull": "pair"}
        if rows:
            changed["expert_opponents"] = rows
        _same_but(f"experiments/seller_retail_plan_{name}.toml", changed, "seller_retail_plan.toml")
        if name == "pull02":
            continue
        specialist = runs / f"seller_retail_plan_{name}"
        _same_but(
            f"experiments/seller_plan_{name}.toml",
            {"name": f"seller_plan_{name}", "init": specialist,
             "teachers": (("retail", specialist), ("wholesale", wholesale))},
            base="seller.toml",
        )  # fmt: skip
    _same_but(
        "experiments/seller_plan_pull005_retail_pull.toml",
        {"name": "seller_plan_pull005_retail_pull", "expert_coef": 0.05, "expert_pull": "pair",
         "expert_configs": ("retail",)},
        base="experiments/seller_plan_pull005.toml",
    )  # fmt: skip


def test_the_last_cell_experiments_change_only_what_they_say():
    """The experiments on the shipped seller's last cells
    (benchmarks/results/generalization_last_cells.md and
    generalization_scarce_pull.md): each retail specialist is the shipped one with one
    change, each stage 2 the shipped one started from and taught on retail by its
    specialist (the shipped wholesale specialist kept), each seed config its recipe with
    the training seed and that seed's specialist."""
    runs = Path("runs").resolve()
    naive = ("truthful", "noisy_human")
    specialists = {
        "naive_mixed_pull005": {"expert_opponents": (*naive, MIXED_NAME)},
        "naive_move_pull005": {"expert_pull": "move"},
        "naive_scarce_pull03": {"expert_pull": "scarce", "expert_spare": 0.3},
        "naive_scarce_pull00": {"expert_pull": "scarce"},
        "naive_mixed_scarce_pull00": {"expert_pull": "scarce",
                                      "expert_opponents": (*naive, MIXED_NAME)},
    }  # fmt: skip
    for name, changed in specialists.items():
        _same_but(
            f"experiments/seller_retail_plan_{name}.toml",
            {"name": f"seller_retail_plan_{name}", **changed},
            base="seller_retail_naive_pull.toml",
        )
        recipe = f"seller_plan_{name}"
        for seed in (0, 1, 2):
            config = f"experiments/{recipe}" + (f"_seed{seed}" if seed else "") + ".toml"
            if seed and not Path("agents/rl/configs", config).exists():
                continue
            specialist = runs / (f"seller_retail_plan_{name}" + (f"_seed{seed}" if seed else ""))
            _stage_2_from(config, specialist, **({"seed": seed} if seed else {}))
    # The naive-pull recipe's stage 2 (shipped when these were measured) with one change.
    _same_but(
        "experiments/seller_naive_retail_pull.toml",
        {"name": "seller_naive_retail_pull", "expert_coef": 0.05, "expert_pull": "pair",
         "expert_configs": ("retail",), "expert_opponents": naive},
        base="experiments/seller_naive_pull_stage2.toml",
    )  # fmt: skip
    _same_but(
        "experiments/seller_rteacher20.toml",
        {"name": "seller_rteacher20", "teacher_coef": 2.0},
        base="experiments/seller_naive_pull_stage2.toml",
    )


def test_the_retail_sizes_stage_2_changes_only_its_retail_sizes():
    """experiments/seller_retail_sizes_stage2.toml is the shipped stage 2 with retail's
    batches drawn up to 14 buyers, 7 products and 18 turns, no larger than the family's
    wholesale markets, so `large` stays held out; its seeds start from and are taught by
    the retail specialists of those seeds."""
    shipped = load_train_config("agents/rl/configs/seller.toml")
    run = load_train_config("agents/rl/configs/experiments/seller_retail_sizes_stage2.toml")
    sizes = (("retail", (("buyers", (-2.0, 6.0)), ("products", (-1.0, 3.0)),
                         ("turns", (-2.0, 6.0)))),)  # fmt: skip
    assert run.family == dataclasses.replace(shipped.family, config_jitter=sizes)
    _same_but(
        "experiments/seller_retail_sizes_stage2.toml",
        {"name": "seller_retail_sizes_stage2", "family": run.family},
        base="seller.toml",
    )
    base = dict(shipped.family.configs)
    jitter = dict(shipped.family.jitter)
    widest = {
        f: max(getattr(c, f) + (dict(sizes[0][1]) if n == "retail" else jitter)[f][1]
               for n, c in base.items())
        for f in ("buyers", "products")
    }  # fmt: skip
    assert widest == {"buyers": 14, "products": 7}
    runs = Path("runs").resolve()
    for seed in (1, 2):
        specialist = runs / f"seller_retail_plan_naive_mixed_scarce_pull00_seed{seed}"
        wholesale = Path("agents/rl/checkpoints/stages/rl_seller_wholesale").resolve()
        _same_but(
            f"experiments/seller_retail_sizes_stage2_seed{seed}.toml",
            {"name": f"seller_retail_sizes_stage2_seed{seed}", "seed": seed,
             "init": specialist, "teachers": (("retail", specialist), ("wholesale", wholesale))},
            base="experiments/seller_retail_sizes_stage2.toml",
        )  # fmt: skip


def test_the_doubled_retail_pulls_change_only_the_weight():
    """The shipped stage 2, and the stage 2 on larger retail markets, each with the retail
    specialist's pull doubled (wholesale's left at 0.5)."""
    for config, base in (
        ("seller_rteacher20_mixed", "seller.toml"),
        ("seller_retail_sizes_rteacher20", "experiments/seller_retail_sizes_stage2.toml"),
    ):
        _same_but(
            f"experiments/{config}.toml",
            {"name": config, "teacher_coef": 2.0},
            base=base,
        )
        cfg = load_train_config(f"agents/rl/configs/experiments/{config}.toml")
        assert dict(cfg.teacher_coefs) == {"wholesale": 0.5}


def test_the_stage_2_start_experiments_change_only_what_they_say():
    """The two levers on where stage 2 loses the specialist's lead on `large`
    (benchmarks/results/generalization_large_20k.md): a retail specialist trained with
    stage 2's signal prior and the stage 2 started from and taught by it, and the shipped
    stage 2 with a lower starting learning rate; and a retail specialist trained on more
    products."""
    shipped = load_train_config("agents/rl/configs/seller.toml")
    _same_but(
        "experiments/seller_retail_mixed_pull_prior.toml",
        {"name": "seller_retail_mixed_pull_prior", "signal_prior": shipped.signal_prior},
        base="seller_retail_mixed_pull.toml",
    )
    _stage_2_from(
        "experiments/seller_prior_specialist_stage2.toml",
        Path("runs/seller_retail_mixed_pull_prior").resolve(),
    )
    _same_but("experiments/seller_gentle_stage2.toml",
              {"name": "seller_gentle_stage2", "lr": 3e-4}, base="seller.toml")  # fmt: skip
    # and a specialist on retail markets with up to 7 products (`large` has 8)
    specialist = load_train_config("agents/rl/configs/seller_retail_mixed_pull.toml")
    products = dataclasses.replace(
        specialist.family, config_jitter=(("retail", (("products", (-1.0, 3.0)),)),)
    )
    _same_but(
        "experiments/seller_retail_mixed_pull_products.toml",
        {"name": "seller_retail_mixed_pull_products", "family": products},
        base="seller_retail_mixed_pull.toml",
    )
    retail = dict(specialist.family.configs)["retail"]
    assert retail.products + 3 < 8
    assert load_train_config("agents/rl/configs/experiments/seller_gentle_stage2.toml").lr_end == (
        shipped.lr_end
    )


def test_the_large_diagnostic_is_the_shipped_specialist_on_the_held_out_large(load_benchmark):
    """experiments/seller_large_diagnostic.toml (never shipped) trains the shipped retail
    specialist's recipe on the held-out `large` market itself: the benchmark's own config,
    with the family's jitter, and nothing else changed."""
    gen = load_benchmark("generalization")
    shipped = load_train_config("agents/rl/configs/seller_retail_mixed_pull.toml")
    large = dataclasses.replace(shipped.family, configs=(("large", gen.CONFIGS["large"]),))
    _same_but(
        "experiments/seller_large_diagnostic.toml",
        {"name": "seller_large_diagnostic", "family": large},
        base="seller_retail_mixed_pull.toml",
    )


def _stage_2_from(config: str, specialist: Path, **changed) -> None:
    """``config`` is the shipped stage 2 (seller.toml) started from, and taught on retail
    by, ``specialist``, with the shipped wholesale teacher, and ``changed`` besides."""
    wholesale = Path("agents/rl/checkpoints/stages/rl_seller_wholesale").resolve()
    _same_but(
        config,
        {"name": Path(config).stem, "init": specialist,
         "teachers": (("retail", specialist), ("wholesale", wholesale)), **changed},
        base="seller.toml",
    )  # fmt: skip


def _seed_1_from_its_specialist(recipe: str, wholesale: Path) -> None:
    """``experiments/{recipe}_seed1.toml``: the recipe with training seed 1, started from
    and taught on retail by the plan-feature retail specialist trained with seed 1."""
    specialist = Path("runs").resolve() / "seller_retail_plan_feature_seed1"
    _same_but(
        f"experiments/{recipe}_seed1.toml",
        {"name": f"{recipe}_seed1", "seed": 1, "init": specialist,
         "teachers": (("retail", specialist), ("wholesale", wholesale))},
        base=f"experiments/{recipe}.toml",
    )  # fmt: skip


@pytest.mark.parametrize("suffix, coef", [("pull05", 0.5), ("pull10", 1.0)])
def test_the_planned_retail_teacher_pulls_change_only_the_weight(suffix, coef):
    name = f"seller_stage3_retail_planned_features_{suffix}"
    _same_but(
        f"experiments/{name}.toml",
        {"name": name, "teacher_coef": coef},
        base="experiments/seller_stage3_retail_planned_features.toml",
    )


def _countering(bid_to_offer: bool, level: int) -> RLBuyer:
    """A buyer whose network always counters, on the first product in stock, at bid level
    ``level`` (every weight zero but the decision's and the bid level's biases)."""
    buyer = RLBuyer(hidden=8, bid_to_offer=bid_to_offer)
    with torch.no_grad():
        for p in buyer.net.parameters():
            p.zero_()
        buyer.net.decision_head[-1].bias[COUNTER] = 10.0
        buyer.net.price_head.bias[level] = 10.0
    return buyer


def _offer(product: int, price: float) -> BuyerObs:
    """One buyer asked about ``product`` at ``price``: values 80 and 50 for two products
    of cost 20 on a [0, 100] range."""

    def one(x, dtype=float):
        return np.asarray([x], dtype)

    return BuyerObs(
        turns=4,
        price_range=(0.0, 100.0),
        patience=0,
        needs_answer=one(True, bool),
        buyer=one(0, np.int64),
        values=np.asarray([[80.0, 50.0]]),
        costs=np.asarray([[20.0, 20.0]]),
        stock=np.asarray([[1, 1]]),
        offer_product=one(product, np.int64),
        offer_price=one(price),
        n_messages=one(1, np.int64),
        first_price=one(price),
        counter_product=one(-1, np.int64),
        counter_price=one(np.nan),
        is_agent=one(True, bool),
        disclosed=one(False, bool),
        turn=one(1, np.int64),
        key=one(7, np.uint64),
        num_buyers=1,
    )


def test_bids_to_the_offer_ask_a_share_of_the_sellers_margin_back():
    """Level 0.5 on product 0 (value 80, cost 20): half way to the value bids 50 whatever
    the offer; half way to the offer bids 40 on an offer of 60, and 50 again on an offer
    of 95, above the value (the anchor is the lesser of the two). A counter on a product
    not on offer bids toward its value either way."""
    half = BID_SHARES.index(0.5)
    value, offer = _countering(False, half), _countering(True, half)
    assert value.act(_offer(0, 60.0)).price.tolist() == [50.0]
    got = offer.act(_offer(0, 60.0))
    assert got.decision.tolist() == [COUNTER] and got.product.tolist() == [0]
    assert got.price.tolist() == [40.0]
    assert offer.act(_offer(0, 95.0)).price.tolist() == [50.0]
    assert offer.act(_offer(1, 30.0)).price.tolist() == [50.0]  # product 0 is not on offer


def test_bids_to_the_offer_travel_with_the_checkpoint_and_the_config(tmp_path):
    half = BID_SHARES.index(0.5)
    saved = checkpoint.save(tmp_path / "b", _countering(True, half), name="b")
    again = checkpoint.load(saved)
    assert again.bid_to_offer and again.act(_offer(0, 60.0)).price.tolist() == [40.0]
    plain = checkpoint.load(checkpoint.save(tmp_path / "p", _countering(False, half), name="p"))
    assert not plain.bid_to_offer
    assert (
        "bid_to_offer"
        not in json.loads((tmp_path / "p" / "config.json").read_text())["policy"]["params"]
    )
    with pytest.raises(ValueError, match="bid_to_offer must be true or false"):
        RLBuyer.from_checkpoint_params({"shares": [0.5], "bid_to_offer": "yes"})
    exp = load_train_config("agents/rl/configs/experiments/buyer_bid_to_offer.toml")
    shipped = load_train_config("agents/rl/configs/buyer.toml")
    assert exp.bid_to_offer and not shipped.bid_to_offer
    assert _pool(exp) == _pool(shipped)
    for f in dataclasses.fields(TrainConfig):
        if f.name not in {"bid_to_offer", "name", "source", "opponents"}:
            assert getattr(exp, f.name) == getattr(shipped, f.name), f.name
    with pytest.raises(ValueError, match="train.bid_to_offer: a buyer-side option"):
        dataclasses.replace(exp, side="seller", learned_disclosure=False)


def test_a_run_with_bids_to_the_offer_starts_and_ends_with_them(tmp_path):
    """``train.bid_to_offer`` reaches the policy a run starts from, fresh or from a
    ``train.init`` checkpoint trained without it (with its disclosure head grown)."""
    exp = load_train_config("agents/rl/configs/experiments/buyer_bid_to_offer.toml")
    fresh = start_policy(exp)
    assert isinstance(fresh, RLBuyer) and fresh.bid_to_offer and fresh.disclosure == "learned"
    assert not start_policy(dataclasses.replace(exp, bid_to_offer=False)).bid_to_offer
    plain = checkpoint.save(tmp_path / "plain", RLBuyer(hidden=16), name="plain")
    grown = start_policy(dataclasses.replace(exp, init=str(plain), hidden=16))
    assert grown.bid_to_offer and grown.net.cfg.disclosure
    saved = checkpoint.load(checkpoint.save(tmp_path / "out", grown, name="out"))
    assert saved.bid_to_offer
