"""PPO for the market's seller and for its buyers, in one file: ``arena train``.

Why PPO with GAE (and not GRPO-style group baselines): a seller's turns are decisions
with information arriving in between (an answer after every message), the reward is
paid turn by turn (profit as it is made), and episodes are short and of varying length.
A learned value over the whole market state gives per-turn advantages that a baseline
shared by a group of episodes cannot, and the environment's per-row restarts keep every
row busy, with the value bootstrapping the markets a rollout cuts off. For buyers, each
buyer's reward arrives once (its surplus when it trades), so the buyer side plays whole
episodes and uses each decision's return to the end of the market, minus the value.

Layout, top to bottom: seeding, the rollouts (one per side) and GAE, the warm start
(imitation of a scripted seller, seller side only), the PPO update and its pulls,
evaluation, and the loop (``train``; one PPO iteration is ``_iteration``) with its
checkpoints, curve and resume. Tensors are ``(steps, batch, ...)`` until
flattened for the update.

Reproducibility: iteration ``i`` draws everything (its market config, its markets, its
minibatch order) from ``SeedSequence([seed, i])``, and sampling uses the policy's keyed
noise, so a run resumed from the checkpoint of iteration k continues exactly as the
uninterrupted run (same machine, same torch threads): model, optimizer and counters are
saved as safetensors + JSON.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm import tqdm

from agents import registry
from agents.base import SellerPolicy
from agents.command import config_mismatch
from agents.env import BuyerEnv, SellerEnv
from agents.evaluate import play_markets
from agents.rl import checkpoint
from agents.rl.config import TrainConfig
from agents.rl.features import SellerFeatures
from agents.rl.policies import RLBuyer, RLSeller
from agents.torch_device import torch_device
from arena.config import MarketConfig

STATE_JSON = checkpoint.TRAIN_STATE  # checkpoint.unfinished reads it too
STATE_TENSORS = "train_state.safetensors"
REFERENCE = "reference.safetensors"  # the warm start, frozen (train.ref_coef > 0)
CURVE = "curve.csv"
EVAL_SEED = 1_000_003  # evaluation markets: exact draws, never the keyed training markets
_IMITATION = 10**9  # iteration numbers of the warm start's batches, apart from PPO's


class TrainError(ValueError):
    """A run that cannot start or resume; one line for the command line."""


# ---------------------------------------------------------------------- seeding
def iteration_rng(cfg: TrainConfig, i: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([cfg.seed, i]))


def _torch_generator(rng: np.random.Generator) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(int(rng.integers(2**62)))
    return g


# ---------------------------------------------------------------------- opponents
def _opponents(cfg: TrainConfig, seed: int) -> list:
    return cfg.opponent_policies(seed)


# ---------------------------------------------------------------------- rollouts
@dataclass
class Rollout:
    """Flattened samples of one iteration (tensors) and what to log about it."""

    data: dict[str, Any]
    stats: dict[str, float]


def _episode_stats(episodes: list[dict]) -> dict[str, float]:
    if not episodes:
        return {}
    ep = {k: np.concatenate([e[k] for e in episodes]) for k in episodes[0]}
    turns = np.maximum(ep["turns_used"], 1.0)
    return {
        "episodes": float(len(ep["profit"])),
        "return": float(ep["return"].mean()),
        "profit": float(ep["profit"].mean()),
        "buyer_surplus": float(ep["buyer_surplus"].mean()),
        "capture": float(np.nanmean(ep["capture"])),
        "seller_violation_rate": float((ep["seller_violations"] / turns).mean()),
        "buyer_violation_rate": float((ep["buyer_violations"] / turns).mean()),
    }


def seller_rollout(
    policy: RLSeller,
    market: MarketConfig,
    opponents: list,
    weights: list[float],
    cfg: TrainConfig,
    env_seed: int,
) -> Rollout:
    """``steps`` turns of B markets with per-row restarts; GAE advantages."""
    steps = cfg.steps or market.turns
    env = SellerEnv(
        market, opponents, cfg.batch_size, seed=env_seed, weights=weights, penalty=cfg.penalty
    )
    obs = env.reset()
    policy.reset(cfg.batch_size)
    cols: dict[str, list] = {
        k: []
        for k in (
            "pair_x",
            "buyer_x",
            "product_x",
            "market_x",
            "open",
            "pair",
            "level",
            "level_ok",
            "logp",
            "value",
            "reward",
            "done",
            "expert_pair",
        )
    }
    episodes = []
    for _ in range(steps):
        if cfg.expert_pull == "scarce":
            cols.setdefault("expert_scarce", []).append(scarce_turns(obs, cfg.expert_spare))
        d = policy.decide(obs, sample=True)
        step = env.step(d.action)
        for k, a in zip(
            ("pair_x", "buyer_x", "product_x", "market_x"), d.features.arrays(), strict=True
        ):
            cols[k].append(a)
        for k, a in (
            ("open", d.open),
            ("pair", d.pair),
            ("level", d.level),
            ("level_ok", d.level_ok),
            ("logp", d.logp),
            ("value", d.value),
            ("reward", step.reward),
            ("done", step.done),
            ("expert_pair", d.expert_pair),
        ):
            cols[k].append(a)
        if d.choice is not None:
            cols.setdefault("choice", []).append(d.choice)
        if step.done.any():
            policy.restart(step.done)
            episodes.append(step.info["episodes"])
        obs = step.obs
    last_value = policy.decide(obs, sample=True).value
    reward = np.stack(cols["reward"])  # (S, B)
    done = np.stack(cols["done"]).astype(float)
    value = np.stack(cols["value"])
    adv = gae(reward, value, done, last_value, cfg.gamma, cfg.gae_lambda)
    data = {
        k: torch.from_numpy(np.concatenate(cols[k]))
        for k in cols
        if k not in ("reward", "done", "value")
    }
    data["adv"] = torch.from_numpy(adv.reshape(-1)).float()
    data["ret"] = torch.from_numpy((adv + value).reshape(-1)).float()
    data["pair"] = data["pair"].long()
    data["level"] = data["level"].long()
    data["expert_pair"] = data["expert_pair"].long()
    if cfg.expert_opponents:  # the rows the expert pull reaches, at every step
        rows = expert_rows(cfg, env.groups, cfg.batch_size)
        data["expert_rows"] = torch.from_numpy(np.tile(rows, steps)).float()
    stats = _episode_stats(episodes)
    stats["step_reward"] = float(reward.mean())
    return Rollout(data, stats)


def scarce_turns(obs, spare: float) -> np.ndarray:
    """(B,) 1.0 where the turns left exceed the sales still possible (the active buyers,
    or the units in stock where fewer) by at most ``spare`` times their number
    (``train.expert_spare``), else 0. Where stock outlasts the buyers, this is
    ``GreedyMatcher.spare``'s reading of the turns."""
    sales = np.minimum(obs.active.sum(1), obs.stock.sum(1))
    return (obs.turns_left - sales <= spare * sales).astype(np.float32)


def expert_rows(cfg: TrainConfig, groups: list[np.ndarray], batch_size: int) -> np.ndarray:
    """(B,) 1.0 on the rows played by an opponent named in ``cfg.expert_opponents`` (each
    opponent plays its block of rows, ``groups``, for the environment's life), else 0."""
    rows = np.zeros(batch_size)
    for opp, g in zip(cfg.opponents, groups, strict=True):
        if opp.name in cfg.expert_opponents:
            rows[g] = 1.0
    return rows


def gae(reward, value, done, last_value, gamma: float, lam: float) -> np.ndarray:
    """Generalized advantage estimates over (S, B) arrays; ``done[t]``: the market ended
    at step t (the next value belongs to a new market and is not bootstrapped)."""
    s = reward.shape[0]
    adv = np.zeros_like(reward)
    running = np.zeros(reward.shape[1])
    for t in reversed(range(s)):
        nxt = last_value if t == s - 1 else value[t + 1]
        keep = 1.0 - done[t]
        delta = reward[t] + gamma * nxt * keep - value[t]
        running = delta + gamma * lam * keep * running
        adv[t] = running
    return adv


def buyer_rollout(
    policy: RLBuyer,
    market: MarketConfig,
    opponents: list,
    weights: list[float],
    cfg: TrainConfig,
    env_seed: int,
) -> Rollout:
    """Whole episodes of B markets; each decision's advantage is its buyer's return to
    the end of the market (its surplus from then on) minus the value."""
    learned = policy.disclosure == "learned"
    env = BuyerEnv(
        market,
        opponents,
        cfg.batch_size,
        seed=env_seed,
        weights=weights,
        autoreset=False,
        disclose=policy.disclose if learned else False,
    )
    policy.trace_disclosure = [] if learned else None
    obs = env.reset()
    policy.reset(cfg.batch_size)
    keys = (
        "x",
        "offered",
        "in_stock",
        "decision_ok",
        "decision",
        "product",
        "level",
        "logp",
        "value",
        "mask",
        "buyer",
        "reward",
    )
    cols: dict[str, list] = {k: [] for k in keys}
    episodes = []
    # Each step spends a seller turn in every market still open, so T steps end them all;
    # the loop's bound only guards that. The first step is always taken: markets that
    # ended inside reset (messages that asked nobody) are reported in its info.
    for _ in range(2 * market.turns + 2):
        d = policy.decide(obs, sample=True)
        step = env.step(d.action)
        for k, a in (
            ("x", d.features),
            ("offered", d.offered),
            ("in_stock", d.in_stock),
            ("decision_ok", d.decision_ok),
            ("decision", d.decision),
            ("product", d.product),
            ("level", d.level),
            ("logp", d.logp),
            ("value", d.value),
            ("mask", obs.needs_answer),
            ("buyer", obs.buyer),
            ("reward", step.reward),
        ):
            cols[k].append(a)
        if "episodes" in step.info:
            episodes.append(step.info["episodes"])
        obs = step.obs
        if env.engine.all_done:
            break
    else:
        raise RuntimeError("buyer_rollout: the markets did not end within 2T + 2 steps")
    to_go = returns_to_go(np.stack(cols["reward"]), cfg.team_return)  # (S, B, N)
    disclosure = _disclosure_samples(policy, market, env, to_go[0]) if learned else {}
    buyer = np.stack(cols["buyer"])  # (S, B)
    ret = np.take_along_axis(to_go, buyer[..., None], axis=2)[..., 0]
    mask = np.stack(cols["mask"]).reshape(-1)
    value = np.stack(cols["value"])
    data = {
        k: torch.from_numpy(np.concatenate(cols[k])[mask])
        for k in ("x", "offered", "in_stock", "decision_ok", "decision", "product", "level", "logp")
    }
    for k in ("decision", "product", "level"):
        data[k] = data[k].long()
    data["ret"] = torch.from_numpy(ret.reshape(-1)[mask]).float()
    data["adv"] = torch.from_numpy((ret - value).reshape(-1)[mask]).float()
    data.update(disclosure)
    stats = _episode_stats(episodes)
    stats["decisions"] = float(mask.sum())
    if "disc_choice" in disclosure:
        stats["disclosure_rate"] = float(disclosure["disc_choice"].float().mean())
    return Rollout(data, stats)


def returns_to_go(reward: np.ndarray, team: bool = False) -> np.ndarray:
    """(S, B, N) buyer rewards per step -> each buyer's return from step t to the end of
    its market; with ``team`` (``train.team_return``), the mean of those over the
    market's buyers, the same for every buyer."""
    to_go = np.flip(np.cumsum(np.flip(reward, 0), 0), 0)
    if team:
        to_go = np.broadcast_to(to_go.mean(axis=2, keepdims=True), to_go.shape)
    return to_go


def _disclosure_samples(policy: RLBuyer, market: MarketConfig, env, total: np.ndarray) -> dict:
    """The disclosure choices of the rollout's agent buyers (taken at the start of each
    market), with each buyer's whole-market return; only under the voluntary rule, where
    the choice changes anything."""
    trace, policy.trace_disclosure = policy.trace_disclosure, None
    if market.disclosure != "voluntary" or not trace:
        return {}
    x, choice, logp, value = trace[0]
    agent = env.engine.is_agent
    return {
        "disc_x": torch.from_numpy(x[agent]),
        "disc_choice": torch.from_numpy(choice[agent]),
        "disc_logp": torch.from_numpy(logp[agent]).float(),
        "disc_ret": torch.from_numpy(total[agent]).float(),
        "disc_adv": torch.from_numpy(total[agent] - value[agent]).float(),
    }


# ---------------------------------------------------------------------- warm start
def imitation_rollout(
    policy: RLSeller,
    teacher,
    market: MarketConfig,
    opponents: list,
    weights: list[float],
    cfg: TrainConfig,
    env_seed: int,
) -> dict:
    """Whole episodes of the teacher's play, as (features, pair, level) targets for the
    policy and returns for its value head. The teacher's price maps to the nearest level
    (the bid level when it meets a standing bid)."""
    env = SellerEnv(
        market,
        opponents,
        cfg.batch_size,
        seed=env_seed,
        weights=weights,
        penalty=cfg.penalty,
        autoreset=False,
    )
    obs = env.reset()
    policy.reset(cfg.batch_size)
    teacher.reset(cfg.batch_size)
    cols: dict[str, list] = {
        k: []
        for k in (
            "pair_x",
            "buyer_x",
            "product_x",
            "market_x",
            "open",
            "pair",
            "level",
            "level_ok",
            "reward",
            "live",
        )
    }
    m = market.products
    while not env.engine.all_done:
        live = ~env.engine.done
        d = policy.decide(obs, sample=False)  # features, and the memory kept up to date
        a = teacher.act(obs)
        pair = a.to * m + a.product
        level = _nearest_level(policy, obs, a.to, a.product, a.price)
        level_ok = policy._level_ok(obs, a.to, a.product)
        step = env.step(a)
        for k, x in zip(
            ("pair_x", "buyer_x", "product_x", "market_x"), d.features.arrays(), strict=True
        ):
            cols[k].append(x)
        for k, x in (
            ("open", d.open),
            ("pair", pair),
            ("level", level),
            ("level_ok", level_ok),
            ("reward", step.reward),
            ("live", live),
        ):
            cols[k].append(x)
        obs = step.obs
    reward = np.stack(cols["reward"])
    ret = np.zeros_like(reward)  # discounted as PPO's returns are (gamma: 1 shipped)
    ret[-1] = reward[-1]
    for t in range(len(reward) - 2, -1, -1):
        ret[t] = reward[t] + cfg.gamma * ret[t + 1]
    live = np.concatenate(cols["live"])
    data = {
        k: torch.from_numpy(np.concatenate(cols[k])[live])
        for k in ("pair_x", "buyer_x", "product_x", "market_x", "open", "pair", "level", "level_ok")
    }
    data["pair"] = data["pair"].long()
    data["level"] = data["level"].long()
    data["ret"] = torch.from_numpy(ret.reshape(-1)[live]).float()
    return data


def _nearest_level(policy: RLSeller, obs, to, product, price) -> np.ndarray:
    """The level that offers ``price`` for the pair: the expert's own level when it gives
    that price (the teacher is the expert), else the standing bid, else the nearest.
    Call after ``policy.decide(obs)`` on the same ``obs``: the prices come from the
    expert's table and the memory that call leaves."""
    cands = np.stack(
        [policy._price(obs, to, product, np.full(obs.batch_size, j)) for j in range(policy.levels)],
        axis=1,
    )
    k = len(policy.offsets)
    usable, _ = policy._bid(obs, to, product)
    cands[:, k] = np.where(usable, cands[:, k], np.inf)
    exact = np.isclose(cands, price[:, None], rtol=0, atol=1e-9)
    nearest = np.argmin(np.abs(cands - price[:, None]), axis=1)
    e = policy.expert_level
    return np.where(exact[:, e], e, np.where(exact[:, k], k, nearest))


def _smoothed_ce(logits: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
    """Cross-entropy with label smoothing over the allowed options only (the -inf ones
    stay impossible): the warm-started policy keeps some entropy, so that PPO can still
    explore and its ratios stay tame."""
    logp = torch.log_softmax(logits, dim=-1)
    allowed = torch.isfinite(logp)
    uniform = torch.where(allowed, logp, torch.zeros_like(logp)).sum(-1) / allowed.sum(-1)
    picked = logp.gather(1, target[:, None])[:, 0]
    return -((1.0 - eps) * picked + eps * uniform).mean()


def _level_ce(
    policy: RLSeller, logits: torch.Tensor, target: torch.Tensor, eps: float, spread: float
) -> torch.Tensor:
    """The price level's smoothed cross-entropy; where the teacher played the expert's own
    price, a further ``spread`` of the target goes to the levels around it, so that PPO
    starts out trying small departures from the expert (where its gains are)."""
    loss = _smoothed_ce(logits, target, eps)
    near = list(range(policy.expert_level + 1, policy.expert_level + len(policy.expert_offsets)))
    if spread <= 0 or not near:  # no levels around the expert's own
        return loss
    logp = torch.log_softmax(logits, dim=-1)
    on_expert = (target == policy.expert_level).to(logp.dtype)
    # CE of (1 - eps - spread) on the target, spread spread over ``near``, eps uniform.
    around = -logp[:, near].mean(-1) + logp.gather(1, target[:, None])[:, 0]
    return loss + spread * (on_expert * around).mean()


def imitation_teacher(cfg: TrainConfig) -> SellerPolicy:
    """``cfg.imitate`` as the warm start plays it: with ``imitation_patience`` and
    ``imitation_spare`` where set (nonzero)."""
    params = {"patience": cfg.imitation_patience} if cfg.imitation_patience else {}
    if cfg.imitation_spare:
        params["spare"] = cfg.imitation_spare
    teacher = registry.make(cfg.imitate, "seller", seed=cfg.seed, **params)
    if teacher.sees_private:
        raise TrainError(
            f"train.imitate: {cfg.imitate} reads the buyers' private values, which the "
            "learner never sees: imitate a seller that plays from public information"
        )
    return teacher


def imitate(policy: RLSeller, cfg: TrainConfig, progress: bool) -> Iterator[dict]:
    """Behaviour cloning of ``cfg.imitate`` (cross-entropy on its pair and price level),
    with the value head fitted to the teacher's returns, so that PPO starts from the
    teacher's play with a critic that already knows what it is worth."""
    teacher = imitation_teacher(cfg)
    optimizer = torch.optim.Adam(policy.net.parameters(), lr=cfg.imitation_lr, eps=1e-5)
    bar = tqdm(
        range(cfg.imitation_iterations),
        desc="imitating " + cfg.imitate,
        disable=not progress,
        leave=False,
    )
    for i in bar:
        rng = iteration_rng(cfg, _IMITATION + i)
        market = cfg.family.sample(rng)
        opponents = _opponents(cfg, cfg.seed)
        weights = [o.weight for o in cfg.opponents]
        data = imitation_rollout(
            policy, teacher, market, opponents, weights, cfg, int(rng.integers(2**31))
        )
        g = _torch_generator(rng)
        n = data["pair"].shape[0]
        losses = []
        for _ in range(cfg.imitation_epochs):
            for idx in torch.randperm(n, generator=g).chunk(cfg.minibatches):
                x = [data[k][idx] for k in ("pair_x", "buyer_x", "product_x", "market_x")]
                _, _, value, logits, plog = policy.evaluate(
                    x,
                    data["open"][idx],
                    data["pair"][idx],
                    data["level"][idx],
                    data["level_ok"][idx],
                )
                eps = cfg.imitation_smoothing
                ce = _smoothed_ce(logits, data["pair"][idx], eps) + _level_ce(
                    policy, plog, data["level"][idx], eps, cfg.imitation_spread
                )
                v_loss = 0.5 * ((value - data["ret"][idx]) ** 2).mean()
                loss = ce + cfg.vf_coef * v_loss
                _check_finite(loss, "warm start")
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.net.parameters(), cfg.max_grad_norm)
                optimizer.step()
                losses.append((ce.item(), v_loss.item()))
        ce, vl = np.mean(losses, axis=0)
        bar.set_postfix(ce=f"{ce:.3f}")
        yield {"imitation_iteration": i + 1, "cross_entropy": ce, "value_loss": vl}


# ---------------------------------------------------------------------- update
def ppo_update(
    policy,
    optimizer,
    data: dict,
    cfg: TrainConfig,
    ent_coef: float,
    g: torch.Generator,
    expert_coef: float | None = None,
    ref_coef: float | None = None,
) -> dict[str, float]:
    """PPO's epochs over one rollout; with ``data["ref_pair"]`` (``reference_logp``), plus
    ``ref_coef`` (default ``cfg.ref_coef``; ``cfg.teacher_coef`` where the reference is
    the batch's teacher) times the KL divergence from the policy to the reference, and
    ``expert_coef`` (default ``cfg.expert_coef``; 0 for batches outside
    ``cfg.expert_configs``) times the expert's negative log-likelihood."""
    expert_coef = cfg.expert_coef if expert_coef is None else expert_coef
    ref_coef = cfg.ref_coef if ref_coef is None else ref_coef
    n = data["adv"].shape[0]
    stats: dict[str, list] = {
        k: [] for k in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
    }
    for _ in range(cfg.epochs):
        if cfg.target_kl and stats["approx_kl"] and stats["approx_kl"][-1] > cfg.target_kl:
            break  # the policy has moved far enough from the one that collected the data
        for idx in _minibatches(n, cfg.minibatches, g):
            expert = torch.zeros(())
            ref_kl = torch.zeros(())
            if isinstance(policy, RLSeller):
                x = [data[k][idx] for k in ("pair_x", "buyer_x", "product_x", "market_x")]
                logp, ent, value, logits, plog = policy.evaluate(
                    x,
                    data["open"][idx],
                    data["pair"][idx],
                    data["level"][idx],
                    data["level_ok"][idx],
                    data["choice"][idx] if "choice" in data else None,
                )
                if expert_coef > 0:
                    expert = _expert_nll(policy, logits, plog, data, idx, cfg.expert_pull)
                if "ref_pair" in data:
                    ref_kl = (
                        kl_divergence(logits, data["ref_pair"][idx])
                        + kl_divergence(plog, data["ref_level"][idx])
                    ).mean()
            else:
                logp, ent, value = policy.evaluate(
                    data["x"][idx],
                    data["offered"][idx],
                    data["in_stock"][idx],
                    data["decision_ok"][idx],
                    data["decision"][idx],
                    data["product"][idx],
                    data["level"][idx],
                )
            adv = _normalized(data["adv"][idx])
            log_ratio = logp - data["logp"][idx]
            ratio = log_ratio.exp()
            pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - cfg.clip, 1 + cfg.clip)).mean()
            v_loss = 0.5 * ((value - data["ret"][idx]) ** 2).mean()
            loss = pg - ent_coef * ent.mean() + cfg.vf_coef * v_loss + expert_coef * expert
            if "ref_pair" in data:
                loss = loss + ref_coef * ref_kl
            _check_finite(loss, "PPO")
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.net.parameters(), cfg.max_grad_norm)
            optimizer.step()
            with torch.no_grad():
                stats.setdefault("expert_nll", []).append(float(expert))
                if "ref_pair" in data:
                    stats.setdefault("ref_kl", []).append(float(ref_kl))
                stats["policy_loss"].append(float(pg))
                stats["value_loss"].append(float(v_loss))
                stats["entropy"].append(float(ent.mean()))
                stats["approx_kl"].append(float(((ratio - 1) - log_ratio).mean()))
                stats["clipfrac"].append(float(((ratio - 1).abs() > cfg.clip).float().mean()))
    # A rollout without a decision (a seller that asked nobody) updates nothing: NaN.
    out = {k: float(np.mean(v)) if v else math.nan for k, v in stats.items()}
    if "disc_x" in data:
        out.update(_disclosure_update(policy, optimizer, data, cfg, ent_coef, g))
    return out


def _minibatches(n: int, k: int, g: torch.Generator) -> list[torch.Tensor]:
    """A random split of ``n`` samples into ``k`` minibatches (fewer where ``n < k``), a
    last one of a single sample merged into the one before: one sample has no spread to
    normalise its advantage by. None for no samples."""
    if n == 0:
        return []
    parts = list(torch.randperm(n, generator=g).chunk(k))
    if len(parts) > 1 and parts[-1].numel() < 2:
        parts[-2:] = [torch.cat(parts[-2:])]
    return parts


def _normalized(adv: torch.Tensor) -> torch.Tensor:
    """Advantages with mean 0 and spread 1 over the minibatch (0 for a single sample)."""
    if adv.numel() < 2:
        return torch.zeros_like(adv)
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def _check_finite(loss: torch.Tensor, what: str) -> None:
    """Stop before a non-finite loss reaches the weights (a run that reports success
    with NaN weights loses more than one that stops)."""
    if not torch.isfinite(loss):
        raise TrainError(
            f"the {what} loss is {float(loss.detach())}: stopped before the weights take it"
        )


def kl_divergence(logits: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Row-wise KL(p || q) of categorical logits ``logits`` (p) from log-probabilities
    ``ref_logp`` (q), both -inf at the same excluded options (they count 0)."""
    logp = torch.log_softmax(logits, dim=-1)
    ok = torch.isfinite(logp)
    zero = torch.zeros_like(logp)
    diff = torch.where(ok, logp, zero) - torch.where(ok, ref_logp, zero)
    return (logp.exp() * diff).sum(-1)


@torch.no_grad()
def reference_logp(reference: nn.Module, data: dict, chunk: int = 2048) -> dict:
    """The reference network's log-probabilities of every pair, and of every price level
    of the pair taken, at the rollout's stored states (``ref_pair`` (n, N*M), ``ref_level``
    (n, K)), computed once per rollout in chunks of ``chunk`` states."""
    keys = ("pair_x", "buyer_x", "product_x", "market_x")
    pair_out, level_out = [], []
    for lo in range(0, data["pair"].shape[0], chunk):
        sl = slice(lo, lo + chunk)
        logits, h, _ = reference(*(data[k][sl] for k in keys), data["open"][sl], value=False)
        taken = h[torch.arange(logits.shape[0]), data["pair"][sl]]
        plog = reference.price_logits(taken, data["level_ok"][sl])
        pair_out.append(torch.log_softmax(logits, -1))
        level_out.append(torch.log_softmax(plog, -1))
    return {"ref_pair": torch.cat(pair_out), "ref_level": torch.cat(level_out)}


def _save_reference(out: Path, net: nn.Module) -> None:
    tmp = out / (REFERENCE + ".tmp")
    save_file({k: v.detach().clone().contiguous() for k, v in net.state_dict().items()}, str(tmp))
    os.replace(tmp, out / REFERENCE)


def _load_reference(out: Path, like: nn.Module) -> nn.Module:
    ref = copy.deepcopy(like)
    try:
        ref.load_state_dict(load_file(str(out / REFERENCE)))
    except (OSError, RuntimeError, ValueError, SafetensorError) as err:
        raise TrainError(f"{out}: cannot resume ({REFERENCE}: {err})") from None
    return ref.requires_grad_(False).eval()


class PlanBlindTeacher(nn.Module):
    """A teacher without the plan feature (``train.plan_feature``) for a learner with it:
    it reads the learner's features less their last pair feature (the plan bit), which
    are the features it was trained on, so a specialist trained before the option can
    still teach."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, pair: torch.Tensor, *rest, **kwargs):
        return self.net(pair[..., : -SellerFeatures.PLAN], *rest, **kwargs)

    def price_logits(self, h_pair: torch.Tensor, level_ok: torch.Tensor) -> torch.Tensor:
        return self.net.price_logits(h_pair, level_ok)


def _load_teachers(cfg: TrainConfig, like: RLSeller) -> tuple[dict[str, nn.Module], dict]:
    """``cfg.teachers``' networks, frozen, by base config, and the SHA-256 of each one's
    weights (a resumed run checks that its teachers are the ones it started with); one
    error for a checkpoint that is not a seller or sees other features than the learner.
    The one difference allowed: a learner with the plan feature may learn from a teacher
    without it (``PlanBlindTeacher``)."""
    out, hashes = {}, {}
    for name, path in cfg.teachers:
        where = cfg.resolve(path)
        try:
            data = checkpoint.read_checkpoint(where)
            teacher = checkpoint.build(data, greedy=False)
        except checkpoint.CheckpointError as err:
            raise TrainError(f"train.teachers.{name}: {err}") from None
        hashes[name] = hashlib.sha256(data.weights).hexdigest()
        if not isinstance(teacher, RLSeller):
            raise TrainError(f"train.teachers.{name}: {where} is not a seller checkpoint")
        mine, theirs = like.net.cfg, teacher.net.cfg
        blind = like.plan_feature and not teacher.plan_feature
        seen = (mine.features[0] - SellerFeatures.PLAN, *mine.features[1:]) if blind else None
        if mine.levels != theirs.levels or theirs.features not in (mine.features, seen):
            raise TrainError(
                f"train.teachers.{name}: {where} sees features {theirs.features} and "
                f"{theirs.levels} price levels; the learner {mine.features} and {mine.levels}"
            )
        net = teacher.net.requires_grad_(False).eval()
        out[name] = PlanBlindTeacher(net) if blind else net
    return out, hashes


def _expert_nll(
    policy: RLSeller, logits, plog, data: dict, idx, pull: str = "move"
) -> torch.Tensor:
    """How unlikely the expert's own move is under the policy: the expert's pair, and
    (``pull="move"``) its price level where the sampled pair was the expert's
    (``pull="scarce"``: on the turns when turns are scarce alone). A small weight on it
    keeps the policy on the expert's move wherever departing from it has not proved
    better. Rows whose choice leaves the expert's pair out count 0."""
    pair = data["expert_pair"][idx]
    # Where the choice leaves the expert's pair out (``within_plan`` with a greedy expert),
    # the row is not pulled: its likelihood would be 0.
    allowed = torch.isfinite(logits.gather(1, pair[:, None])[:, 0])
    pair = torch.where(allowed, pair, logits.argmax(-1))
    nll = -torch.log_softmax(logits, -1).gather(1, pair[:, None])[:, 0] * allowed
    if pull != "pair":
        same = (data["pair"][idx] == pair).to(nll.dtype) * allowed
        if pull == "scarce":
            same = same * data["expert_scarce"][idx]
        nll = nll - same * torch.log_softmax(plog, -1)[:, policy.expert_level]
    if "expert_rows" in data:  # train.expert_opponents: the other rows are not pulled
        nll = nll * data["expert_rows"][idx]
    return nll.mean()


def _disclosure_update(policy: RLBuyer, optimizer, data: dict, cfg: TrainConfig,
                       ent_coef: float, g: torch.Generator) -> dict[str, float]:  # fmt: skip
    """The same clipped objective for the learned disclosure choice (one sample per agent
    buyer per market), whose advantage is the buyer's whole-market return minus the
    disclosure head's value."""
    n = data["disc_x"].shape[0]
    losses = []
    for _ in range(cfg.epochs):
        for idx in _minibatches(n, cfg.minibatches, g):
            logp, ent, value = policy.evaluate_disclosure(data["disc_x"][idx],
                                                          data["disc_choice"][idx])  # fmt: skip
            adv = _normalized(data["disc_adv"][idx])
            ratio = (logp - data["disc_logp"][idx]).exp()
            pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - cfg.clip, 1 + cfg.clip)).mean()
            v_loss = 0.5 * ((value - data["disc_ret"][idx]) ** 2).mean()
            loss = pg - ent_coef * ent.mean() + cfg.vf_coef * v_loss
            _check_finite(loss, "disclosure")
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.net.parameters(), cfg.max_grad_norm)
            optimizer.step()
            losses.append((pg.item(), v_loss.item()))
    pg, vl = np.mean(losses, axis=0)
    return {"disclosure_policy_loss": float(pg), "disclosure_value_loss": float(vl)}


# ---------------------------------------------------------------------- evaluation
def evaluate(policy, cfg: TrainConfig, reference: str | None = None) -> dict[str, float]:
    """Greedy play against every opponent on each base config (hidden rule), on exact
    markets no rollout meets: mean profit (seller) or buyer surplus (buyer) per market.
    With ``reference``, the same for that registry entry in the learner's place."""
    out = {}
    greedy = policy.greedy
    policy.greedy = True
    try:
        for k, opp in enumerate(cfg.opponents):
            for name, market in cfg.family.configs:
                m = _eval_markets(policy, cfg, k, market)
                label = f"{_opponent_label(cfg, opp.name)}@{name}"
                out[label] = m
                if reference is not None:
                    ref = registry.make(reference, cfg.side, seed=cfg.seed)
                    out[f"{label}[{reference}]"] = _eval_markets(ref, cfg, k, market)
    finally:
        policy.greedy = greedy
    return out


def _eval_markets(policy, cfg: TrainConfig, k: int, market: MarketConfig) -> float:
    opp = _opponents(cfg, cfg.seed)[k]
    idx = np.arange(cfg.eval_markets)
    if cfg.side == "seller":
        metrics = play_markets(market, EVAL_SEED, idx, policy, opp)
        return float(metrics["profit"].mean())
    metrics = play_markets(market, EVAL_SEED, idx, opp, _AllAgents(policy))
    return float(metrics["buyer_surplus"].mean())


class _AllAgents:
    """The learner buyer as an evaluation opponent: agent kind, never discloses."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.kind = inner.kind

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def kinds(self, is_agent, key):
        return np.full(np.shape(is_agent), self.inner.kind == "agent")

    def disclose(self, is_agent, key, market=None):
        return np.zeros(np.shape(is_agent), bool)


def _opponent_label(cfg: TrainConfig, name: str) -> str:
    """An opponent as the curve names it: a checkpoint by the name in its config.json
    (moving it changes nothing), anything else as the config writes it."""
    if not registry.looks_like_path(name) or registry.is_population(name):
        return name  # a registry name, or a population
    return registry.checkpoint_entry(cfg.resolve(name)).name  # its variant's name too


# ---------------------------------------------------------------------- the loop
def start_policy(cfg: TrainConfig):
    """The policy a run starts from: ``train.init``'s checkpoint with the config's play
    options, or fresh weights. A start that sees other features than the config asks for
    is a ``TrainError``."""
    if cfg.init:
        policy = checkpoint.load(cfg.resolve(cfg.init), seed=cfg.seed, greedy=False)
        want = RLSeller if cfg.side == "seller" else RLBuyer
        if not isinstance(policy, want):
            raise TrainError(f"train.init: {cfg.init} is not a {cfg.side} checkpoint")
        for flag in ("pooled", "prior_feature", "plan_feature"):
            if cfg.side == "seller" and getattr(policy, flag) != getattr(cfg, flag):
                raise TrainError(
                    f"train.init: {cfg.init} sees features {policy.net.cfg.features}, "
                    f"train.{flag} = {str(getattr(cfg, flag)).lower()} asks for the other kind"
                )
        if cfg.side == "seller" and cfg.signal_prior is not None:
            policy.signal_prior = float(cfg.signal_prior)
        if cfg.side == "seller" and cfg.assignment is not None:
            policy.assignment = cfg.assignment
        if cfg.side == "seller" and cfg.within_plan is not None:
            policy.within_plan = cfg.within_plan
        if cfg.side == "buyer" and cfg.bid_to_offer:
            policy.bid_to_offer = True
        if cfg.side == "buyer" and cfg.learned_disclosure:
            policy = _with_disclosure_head(policy, cfg)
        return policy
    with torch.random.fork_rng(devices=[]):  # the caller's torch RNG is left as it was
        torch.manual_seed(cfg.seed)  # the initial weights; nothing else draws from it
        return _fresh_policy(cfg)


def _check_start_network(cfg: TrainConfig, policy) -> None:
    """A run from ``train.init`` trains the checkpoint's network: a config asking for
    another width or gate would be recorded in the run's checkpoint (and its memory
    sized) for a network it does not train. Checked where a run starts, not in
    ``start_policy``, which also builds a checkpoint's policy with a config's play
    options where no network is trained (a league checking its learners' starts)."""
    net = policy.net.cfg
    if net.hidden != cfg.hidden:
        raise TrainError(
            f"train.init: {cfg.init} is a network {net.hidden} wide, train.hidden = "
            f"{cfg.hidden} asks for another width (set it to {net.hidden})"
        )
    if cfg.side == "seller" and net.film != cfg.film:
        has = "has a" if net.film else "has no"
        raise TrainError(
            f"train.init: {cfg.init} {has} market gate (film), train.film = "
            f"{str(cfg.film).lower()} asks for the other kind of network"
        )


def _fresh_policy(cfg: TrainConfig):
    if cfg.side == "seller":
        return RLSeller(
            seed=cfg.seed,
            greedy=False,
            hidden=cfg.hidden,
            film=cfg.film,
            pooled=cfg.pooled,
            signal_prior=cfg.signal_prior or 0.0,
            prior_feature=cfg.prior_feature,
            plan_feature=cfg.plan_feature,
            assignment=bool(cfg.assignment),
            within_plan=bool(cfg.within_plan),
        )
    mode = "learned" if cfg.learned_disclosure else "never"
    return RLBuyer(
        seed=cfg.seed,
        greedy=False,
        hidden=cfg.hidden,
        disclosure=mode,
        bid_to_offer=cfg.bid_to_offer,
    )


def _with_disclosure_head(policy: RLBuyer, cfg: TrainConfig) -> RLBuyer:
    """The buyer, with a (fresh) disclosure head if it has none, choosing by it."""
    net = policy.net
    if not net.cfg.disclosure:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            grown = RLBuyer(hidden=net.cfg.hidden, shares=policy.shares, disclosure_head=True).net
        missing, unexpected = grown.load_state_dict(net.state_dict(), strict=False)
        assert not unexpected and all(k.startswith("disclosure_head.") for k in missing)
        net = grown
    return RLBuyer(
        net,
        seed=cfg.seed,
        greedy=False,
        shares=policy.shares,
        disclosure="learned",
        bid_to_offer=policy.bid_to_offer,
    )


def _save_state(out: Path, optimizer: torch.optim.Optimizer, iteration: int, info: dict) -> None:
    state = optimizer.state_dict()
    tensors = {}
    for pid, st in state["state"].items():
        for key, value in st.items():
            tensors[f"{pid}.{key}"] = value.detach().clone().contiguous()
    tmp = out / (STATE_TENSORS + ".tmp")
    save_file(tensors, str(tmp))
    os.replace(tmp, out / STATE_TENSORS)
    meta = {"iteration": iteration, "param_groups": state["param_groups"], **info}
    (out / (STATE_JSON + ".tmp")).write_text(json.dumps(meta, indent=2))
    os.replace(out / (STATE_JSON + ".tmp"), out / STATE_JSON)


def _read_state(out: Path) -> dict:
    """The trainer state's JSON, checked for what resuming reads (``TrainError`` naming
    the file otherwise)."""
    path = out / STATE_JSON
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise TrainError(f"{path}: cannot resume ({err})") from None
    ok = (
        isinstance(meta, dict)
        and isinstance(meta.get("iteration"), int)
        and isinstance(meta.get("param_groups"), list)
        and isinstance(meta.get("config"), dict)
    )
    if not ok:
        raise TrainError(f"{path}: cannot resume (not a trainer state: iteration, param_groups)")
    # bool is an int to Python: ``true`` would resume as iteration 1.
    if isinstance(meta["iteration"], bool) or meta["iteration"] < 0:
        raise TrainError(
            f"{path}: cannot resume (iteration {json.dumps(meta['iteration'])} is not a "
            "count of iterations)"
        )
    teachers = meta.get("teachers", {})
    if not isinstance(teachers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in teachers.items()
    ):
        raise TrainError(
            f"{path}: cannot resume (teachers: not a table of config names to weight hashes)"
        )
    return meta


# Adam's state of one parameter, as the trainer's optimizer keeps it (amsgrad adds one).
_ADAM_STATE = ("step", "exp_avg", "exp_avg_sq")


def _load_state(out: Path, optimizer: torch.optim.Optimizer) -> dict:
    """The trainer state of the run in ``out``, its optimizer state loaded into
    ``optimizer`` (built from the config, as a fresh run builds it). The optimizer's
    settings stay the config's: the file gives only what a resumed run cannot rebuild
    (Adam's step counts and moments, each checked against its parameter), and groups
    that disagree with the config's are refused, never taken (a ``maximize`` or a
    ``weight_decay`` there would change the run without a word)."""
    meta = _read_state(out)
    fresh = optimizer.state_dict()
    _check_groups(out / STATE_JSON, meta["param_groups"], fresh["param_groups"])
    where = out / STATE_TENSORS
    params = [p for group in optimizer.param_groups for p in group["params"]]
    names = _ADAM_STATE + (("max_exp_avg_sq",) if optimizer.defaults.get("amsgrad") else ())
    try:
        tensors = load_file(str(where))
    except (OSError, ValueError, SafetensorError) as err:
        raise TrainError(f"{where}: cannot resume ({err})") from None
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        pid, _, name = key.partition(".")
        if not (pid.isascii() and pid.isdigit() and str(int(pid)) == pid) or name not in names:
            raise TrainError(f"{where}: cannot resume (tensor {key!r}: not an optimizer state)")
        if int(pid) >= len(params):
            raise TrainError(
                f"{where}: cannot resume (tensor {key!r}: the network has {len(params)} parameters)"
            )
        state.setdefault(int(pid), {})[name] = value
    for pid, st in sorted(state.items()):
        problem = _state_problem(st, params[pid], names)
        if problem:
            raise TrainError(f"{where}: cannot resume (parameter {pid}: {problem})")
    try:
        optimizer.load_state_dict({"state": state, "param_groups": fresh["param_groups"]})
    except (TypeError, ValueError, KeyError, RuntimeError) as err:
        raise TrainError(f"{where}: cannot resume ({err})") from None
    return meta


def _check_groups(path: Path, saved: list, fresh: list[dict]) -> None:
    """The saved optimizer groups against the config's (``fresh``): the same parameters
    and settings, or a ``TrainError`` naming the file. ``lr`` is left out (the schedule
    sets it every iteration), and so are settings only one torch version knows."""
    want = json.loads(json.dumps(fresh))  # as the file writes them: tuples as lists
    if len(saved) != len(want) or not all(isinstance(g, dict) for g in saved):
        raise TrainError(
            f"{path}: cannot resume (param_groups: not the {len(want)} group(s) of the "
            "trainer's optimizer)"
        )
    for got, group in zip(saved, want, strict=True):
        if got.get("params") != group["params"]:
            raise TrainError(
                f"{path}: cannot resume (param_groups: params are not the network's "
                f"{len(group['params'])} parameters in order)"
            )
        for key in sorted((set(got) & set(group)) - {"lr", "params"}):
            if got[key] != group[key]:
                raise TrainError(
                    f"{path}: cannot resume (param_groups: {key} = {json.dumps(got[key])}, "
                    f"the config's optimizer has {json.dumps(group[key])})"
                )


def _state_problem(st: dict[str, torch.Tensor], param: torch.Tensor, names) -> str | None:
    """What is wrong with one parameter's saved Adam state (None if nothing): checked
    here, as one line naming the file, not at the first ``optimizer.step``."""
    missing = [n for n in names if n not in st]
    if missing:
        return f"no {missing[0]}"
    step = st["step"]
    if step.shape != () or step.dtype not in (torch.float32, torch.float64):
        return f"step is {_described(step)}, not a count"
    count = float(step)
    if not (math.isfinite(count) and count >= 1 and count == int(count)):
        return f"step {count} is not a count of steps"
    for name in names[1:]:
        value = st[name]
        if value.shape != param.shape or value.dtype != param.dtype:
            return f"{name} is {_described(value)}, its parameter {_described(param)}"
        if not bool(torch.isfinite(value).all()):
            return f"{name} holds NaN or infinite values"
        if name != "exp_avg" and bool((value < 0).any()):
            return f"{name} holds negative values"
    return None


def _described(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}"


def train(
    cfg: TrainConfig,
    out: str | os.PathLike,
    *,
    resume: bool = False,
    device: str = "cpu",
    progress: bool = True,
    until: int | None = None,
) -> Path:
    """Run (or resume) a training run into ``out``; returns the checkpoint directory
    (``out`` itself: model.safetensors + config.json, beside the curve and the state).
    ``until`` stops after that iteration (saving a checkpoint), to be resumed later.
    torch runs on ``cfg.threads`` threads meanwhile; the caller's count is restored."""
    if not os.fspath(out):
        raise TrainError("the run folder (--out) is empty: name a folder for the checkpoint")
    if not resume:
        _check_new_run(Path(out))
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        return _train(cfg, Path(out), resume, device, progress, until)
    finally:
        torch.set_num_threads(threads)


# What a run stopped before its first checkpoint leaves (a warm start's curve, the
# frozen reference): such a folder starts again from scratch.
_UNFINISHED_START = (CURVE, CURVE + ".tmp", REFERENCE)


def _check_new_run(out: Path) -> None:
    """Refuse to start a run in a folder that holds anything but the leftovers of a run
    stopped before its first checkpoint (``TrainError``): a checkpoint, a finished run
    or anyone's files there are never overwritten."""
    if not out.exists():
        return
    if not out.is_dir():
        raise TrainError(f"{out}: not a folder (choose another --out)")
    if (out / STATE_JSON).exists():
        raise TrainError(f"{out}: a run is already there (use --resume, or a new --out)")
    held = sorted(p.name for p in out.iterdir())
    if set(held) - set(_UNFINISHED_START):
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        what = "a checkpoint" if checkpoint.is_checkpoint(out) else "files"
        raise TrainError(
            f"{out}: holds {what} already ({shown}), which training would overwrite; choose "
            f"another --out (--resume continues a stopped run, one with its {STATE_JSON})"
        )


def _train(
    cfg: TrainConfig, out: Path, resume: bool, device: str, progress: bool, until: int | None
) -> Path:
    torch_device(device)  # a device this machine lacks is one error line, before any work
    if resume:
        policy = _resumed_policy(cfg, out)
    else:
        policy = start_policy(cfg)
        if cfg.init:
            _check_start_network(cfg, policy)
        out.mkdir(parents=True, exist_ok=True)
    policy.net.to(device)
    optimizer = torch.optim.Adam(policy.net.parameters(), lr=cfg.lr, eps=1e-5)
    start = 0
    curve_rows: list[dict] = []
    if resume:
        meta = _load_state(out, optimizer)
        start = meta["iteration"]
        curve_rows = _resumed_curve(out, start)
    elif cfg.side == "seller" and cfg.imitate and cfg.imitation_iterations:
        for row in imitate(policy, cfg, progress):
            curve_rows.append({"iteration": 0, "phase": "imitation", **row})
            _write_curve(out, curve_rows)
    reference = None
    if cfg.side == "seller" and cfg.ref_coef > 0:
        if resume:
            reference = _load_reference(out, policy.net)
        else:  # the warm start as the imitation left it
            reference = copy.deepcopy(policy.net).requires_grad_(False).eval()
            _save_reference(out, reference)
    teachers, teacher_hashes = _load_teachers(cfg, policy)
    if resume and meta.get("teachers", {}) != teacher_hashes:
        changed = sorted(set(meta.get("teachers", {}).items()) ^ set(teacher_hashes.items()))
        raise TrainError(
            f"{out}: cannot resume (train.teachers.{changed[0][0]}: not the weights the run "
            "started with)"
        )
    if start == 0:
        row = {"iteration": 0, "phase": "eval", "samples": 0, "wall_s": 0.0}
        row.update(_prefixed(evaluate(policy, cfg, _reference(cfg)), "eval_"))
        curve_rows.append(row)
        _checkpoint(out, policy, optimizer, cfg, 0, curve_rows, teacher_hashes)

    opponents = _opponents(cfg, cfg.seed)
    wall0 = time.perf_counter() - (float(curve_rows[-1].get("wall_s", 0) or 0) if resume else 0)
    samples = int(float(curve_rows[-1].get("samples", 0) or 0)) if resume else 0
    stop = cfg.iterations if until is None else min(until, cfg.iterations)
    bar = tqdm(
        range(start, stop),
        initial=start,
        total=cfg.iterations,
        desc=f"training {cfg.name}",
        disable=not progress,
    )
    for i in bar:
        stats, n = _iteration(cfg, i, policy, optimizer, opponents, reference, teachers, device)
        samples += n
        row = {
            "iteration": i + 1,
            "phase": "train",
            "samples": samples,
            "wall_s": round(time.perf_counter() - wall0, 3),
            **stats,
        }
        if cfg.eval_every and (i + 1) % cfg.eval_every == 0 or i + 1 == cfg.iterations:
            row.update(_prefixed(evaluate(policy, cfg), "eval_"))
        curve_rows.append(row)
        bar.set_postfix(
            ret=f"{row.get('return', float('nan')):.3f}",
            cap=f"{row.get('capture', float('nan')):.3f}",
        )
        if cfg.checkpoint_every and (i + 1) % cfg.checkpoint_every == 0 or i + 1 == stop:
            _checkpoint(out, policy, optimizer, cfg, i + 1, curve_rows, teacher_hashes)
        else:
            _write_curve(out, curve_rows)  # progress to look at; resume cuts it back
    plot_curve(out)
    return out


def _resumed_policy(cfg: TrainConfig, out: Path):
    """The policy of the run in ``out`` as its last checkpoint left it, once the state
    there is shown to belong to this config and to these weights."""
    if not (out / STATE_JSON).is_file():
        raise TrainError(f"{out}: nothing to resume (no {STATE_JSON})")
    saved = _read_state(out)
    now = json.loads(json.dumps(cfg.to_dict()))
    if saved["config"] != now:
        raise TrainError(config_mismatch(out, saved["config"], now))
    data = checkpoint.read_checkpoint(out)
    if saved.get("weights_sha256", data.weights_sha256) != data.weights_sha256:
        raise TrainError(
            f"{out}: cannot resume ({checkpoint.WEIGHTS} is not the one {STATE_JSON} "
            "was saved with: the run stopped while saving)"
        )
    policy = checkpoint.build(data, seed=cfg.seed, greedy=False)
    if cfg.side == "buyer" and cfg.learned_disclosure:
        policy = _with_disclosure_head(policy, cfg)
    return policy


def _iteration(
    cfg: TrainConfig,
    i: int,
    policy,
    optimizer: torch.optim.Optimizer,
    opponents: list,
    reference: nn.Module | None,
    teachers: dict[str, nn.Module],
    device: str,
) -> tuple[dict, int]:
    """PPO iteration ``i``: the schedules' values, one rollout on a config drawn from the
    family (by ``iteration_rng``), the pulls that apply to it, and the update. Returns
    the figures it logs and its sample count."""
    frac = i / cfg.iterations
    lr = cfg.lr + frac * (cfg.lr_end - cfg.lr)
    for group in optimizer.param_groups:
        group["lr"] = lr
    ent_coef = cfg.ent_coef + frac * (cfg.ent_end - cfg.ent_coef)
    rng = iteration_rng(cfg, i)
    base, market = cfg.family.sample_named(rng)
    env_seed = int(rng.integers(2**31))
    pull = cfg.expert_coef if not cfg.expert_configs or base in cfg.expert_configs else 0.0
    policy.net.cpu()
    weights = [o.weight for o in cfg.opponents]
    rollout = (seller_rollout if cfg.side == "seller" else buyer_rollout)(
        policy, market, opponents, weights, cfg, env_seed
    )
    policy.net.to(device)
    data = {k: v.to(device) for k, v in rollout.data.items()}
    if reference is not None:
        data.update(reference_logp(reference.to(device), data))
    ref_coef = None
    if base in teachers:
        data.update(reference_logp(teachers[base].to(device), data))
        ref_coef = cfg.teacher_weight(base)
    upd = ppo_update(policy, optimizer, data, cfg, ent_coef, _torch_generator(rng), pull, ref_coef)
    policy.net.cpu()
    stats = {
        "lr": lr,
        "ent_coef": ent_coef,
        "buyers": market.buyers,
        "products": market.products,
        "disclosure": market.disclosure,
        **rollout.stats,
        **upd,
    }
    return stats, int(data["adv"].shape[0])


def _reference(cfg: TrainConfig) -> str | None:
    """The scripted baseline drawn beside the learner's evaluations."""
    return "greedy_matcher" if cfg.side == "seller" else "strategic"


def _prefixed(d: dict, prefix: str) -> dict:
    return {prefix + k: v for k, v in d.items()}


def _checkpoint(
    out: Path,
    policy,
    optimizer,
    cfg: TrainConfig,
    iteration: int,
    rows: list[dict],
    teachers: dict[str, str],
) -> None:
    checkpoint.save(out, policy, name=cfg.name, training=cfg.to_dict())
    _write_curve(out, rows)
    # The state last, naming the weights it goes with: a run stopped between the files
    # cannot resume a mismatched pair.
    info = {
        "config": cfg.to_dict(),
        "weights_sha256": checkpoint.read_checkpoint(out).weights_sha256,
        **({"teachers": teachers} if teachers else {}),
    }
    _save_state(out, optimizer, iteration, info)


def _write_curve(out: Path, rows: list[dict]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    tmp = out / (CURVE + ".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    os.replace(tmp, out / CURVE)


def _resumed_curve(out: Path, start: int) -> list[dict]:
    """The curve's rows up to iteration ``start``, where a resumed run goes on from. A row
    training did not write (an iteration that is no whole number, a count that is no
    finite number, e.g. a line appended by hand) is a TrainError naming the file and its
    line, as a missing row is: one line of the command's, not a bare ``int()`` message."""
    where = out / CURVE
    try:
        rows = _read_curve(out)
    except (csv.Error, UnicodeDecodeError) as err:
        raise TrainError(f"{where}: cannot resume (not a CSV file: {err})") from None
    kept: list[tuple[int, dict]] = []  # (line in the file, row)
    for line, row in enumerate(rows, start=2):  # line 1 is the header
        got = row.get("iteration")
        try:
            iteration = int(got or "")
        except ValueError:
            raise TrainError(
                f"{where}: cannot resume (line {line}: iteration {got!r} is not a whole "
                "number; remove the line or restore the file)"
            ) from None
        if iteration <= start:
            kept.append((line, row))
    if not kept or int(kept[-1][1]["iteration"]) != start:
        raise TrainError(f"{where}: cannot resume (no row for iteration {start})")
    line, last = kept[-1]
    for key in ("samples", "wall_s"):  # what the resumed run counts on from
        got = last.get(key)
        try:
            ok = math.isfinite(float(got or 0))
        except ValueError:
            ok = False
        if not ok:
            raise TrainError(
                f"{where}: cannot resume (line {line}: {key} {got!r} is not a finite number)"
            )
    return [row for _, row in kept]


def _read_curve(out: Path) -> list[dict]:
    try:
        with open(out / CURVE, newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError:
        return []


def plot_curve(out: Path) -> Path | None:
    """``curve.png`` from ``curve.csv``: training reward, capture, profit and buyer surplus,
    violations, and the periodic evaluation against each opponent beside the scripted
    reference."""
    from matplotlib.figure import Figure  # no pyplot: the caller's backend is left alone

    rows = _read_curve(Path(out))
    train_rows = [r for r in rows if r.get("phase") == "train"]
    if not train_rows:
        return None

    def col(rs, k):
        return np.array([float(r[k]) if r.get(k) not in (None, "") else math.nan for r in rs])

    it = col(train_rows, "iteration")
    fig = Figure(figsize=(15, 4))
    axes = fig.subplots(1, 3)
    ax = axes[0]
    ax.plot(it, col(train_rows, "return"), label="episode return")
    if "capture" in train_rows[0]:
        ax.plot(it, col(train_rows, "capture"), label="capture")
    ax.set_xlabel("iteration")
    ax.set_title("training")
    ax.legend(loc="upper left")
    money = [k for k in ("profit", "buyer_surplus") if k in train_rows[0]]
    if money:  # per market, on the price scale: a second axis
        right = ax.twinx()
        for k, style in zip(money, (":", "-."), strict=False):
            right.plot(it, col(train_rows, k), ls=style, color="gray", label=k.replace("_", " "))
        right.set_ylabel("per market")
        right.legend(loc="lower right")
    ax = axes[1]
    for k in ("seller_violation_rate", "buyer_violation_rate"):
        ax.plot(it, col(train_rows, k), label=k)
    ax.set_xlabel("iteration")
    ax.set_title("violations per turn")
    ax.legend()
    ax = axes[2]
    evals = [r for r in rows if any(k.startswith("eval_") and r[k] not in ("", None) for k in r)]
    keys = sorted({k for r in evals for k in r if k.startswith("eval_") and "[" not in k})
    ref = [r for r in rows if r.get("phase") == "eval"]
    for k in keys:
        line = ax.plot(col(evals, "iteration"), col(evals, k), marker=".", label=k[5:])[0]
        refs = [c for c in (ref[0] if ref else {}) if c.startswith(k + "[")]
        for c in refs:
            ax.axhline(float(ref[0][c]), color=line.get_color(), ls="--", lw=0.8)
    ax.set_xlabel("iteration")
    ax.set_title("evaluation (dashed: scripted reference)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    path = Path(out) / "curve.png"
    fig.savefig(path, dpi=90)
    return path
