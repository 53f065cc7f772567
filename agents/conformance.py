"""A conformance check every policy runs through (tests/test_conformance.py).

For a seller or buyer factory it plays markets of several configs against a
random opponent and checks:

* well-formed actions: arrays of shape (B,), integer indices, finite prices on
  the rows that matter; no exception;
* valid decisions (``strict``): no violations of the rules on live markets;
* determinism: a fresh policy built with the same seed plays identically;
* batch invariance: playing B markets at once equals playing each alone (the outcomes
  compared exactly). A policy whose numbers cannot be bit-identical across batch shapes
  (a language model: matrix kernels round differently for different shapes) states in
  its ``batch_invariance`` attribute what holds instead; the check compares the same
  outcomes and its report quotes that statement for that entry (``invariance_note``);
* per-row restarts: in an environment that restarts each row as its market ends
  (``agents.env``), every market played after a restart plays exactly as it does
  alone with a fresh policy (a stateful policy must forget restarted rows).

``check_seller`` / ``check_buyer`` return a list of problems (empty: conforms),
so a caller can print all of them at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agents.base import BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.command import where_raised
from agents.env import SellerEnv
from agents.rollout import play_batch
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate_batch
from arena.noise import uniform
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs, SellerObs

CONFIGS = (
    MarketConfig(),
    MarketConfig(
        buyers=5,
        products=3,
        inventory=1,
        turns=9,
        patience=2,
        price_range=(100.0, 1100.0),
        agent_share=0.6,
        disclosure="mandatory",
        signal_noise=0.5,
    ),
    MarketConfig(
        buyers=3,
        products=1,
        inventory=(2,),
        turns=7,
        disclosure="voluntary",
        agent_share=1.0,
        cost_level=0.0,
    ),
)


@dataclass
class RandomSeller(SellerPolicy):
    """Valid random offers (and some talk turns) to random active buyers."""

    seed: int = 12345

    def act(self, obs: SellerObs) -> SellerAction:
        n, m = obs.num_buyers, obs.num_products
        lo, hi = obs.price_range
        u = uniform(self.seed, obs.key[:, None], obs.turn[:, None], np.arange(max(n, m)))
        to = np.argmax(np.where(obs.active, u[:, :n] + 1.0, 0.0), axis=1)
        product = np.argmax(np.where(obs.stock > 0, u[:, :m] + 1.0, 0.0), axis=1)
        talk = uniform(self.seed, obs.key, obs.turn, 99) < 0.1
        price = lo + (hi - lo) * uniform(self.seed, obs.key, obs.turn, 98)
        return SellerAction(to, np.where(talk, -1, product), np.round(price, 2).clip(lo, hi))


@dataclass
class RandomBuyer(BuyerPolicy):
    """Valid random answers: accept, reject, or a counter on an in-stock product."""

    seed: int = 54321

    def act(self, obs: BuyerObs) -> BuyerAction:
        lo, hi = obs.price_range
        u = uniform(self.seed, obs.key, obs.turn, obs.buyer, 1)
        has_offer = obs.offer_product >= 0
        decision = np.where(u < 0.35, ACCEPT, np.where(u < 0.7, COUNTER, REJECT))
        decision = np.where(~has_offer & (decision == ACCEPT), REJECT, decision)
        product = np.argmax(obs.stock > 0, axis=1)
        price = lo + (hi - lo) * uniform(self.seed, obs.key, obs.turn, obs.buyer, 2)
        return BuyerAction(decision, product, np.round(price, 2).clip(lo, hi))


@dataclass
class _Checked:
    """Wraps a policy and records malformed action arrays."""

    inner: SellerPolicy | BuyerPolicy
    problems: list[str] = field(default_factory=list)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def reset(self, batch_size: int) -> None:
        self.inner.reset(batch_size)

    def act(self, obs):
        action = self.inner.act(obs)
        b = obs.batch_size
        if isinstance(obs, SellerObs):
            names, rows = ("to", "product", "price"), ~obs.done
        else:
            names, rows = ("decision", "product", "price"), obs.needs_answer
        for name in names:
            x = np.asarray(getattr(action, name))
            if x.shape != (b,):
                self.problems.append(f"{name} has shape {x.shape}, expected ({b},)")
                continue
            if name != "price" and x.dtype.kind not in "iu":
                self.problems.append(f"{name} has dtype {x.dtype}, expected integers")
            if name == "price" and not np.isfinite(x[rows]).all():
                self.problems.append("a price on a live market is not finite")
        return action


def _outcome(engine: BatchedMarket) -> dict[str, np.ndarray]:
    return {
        "bought": engine.bought,
        "paid": engine.paid,
        "turn": engine.turn,
        "seller_violations": engine.seller_violations,
        "buyer_violations": engine.buyer_violations,
        "last_decision": engine.last_decision,
        "counter_price": engine.counter_price,
    }


def _same(a: dict, b: dict) -> list[str]:
    return [k for k in a if not np.array_equal(a[k], b[k], equal_nan=True)]


def _check(
    side: str,
    factory: Callable[[int], SellerPolicy | BuyerPolicy],
    markets: int,
    seed: int,
    strict: bool,
    configs: tuple[MarketConfig, ...] = CONFIGS,
) -> list[str]:
    problems: list[str] = []
    for c, cfg in enumerate(configs):
        batch = generate_batch(cfg, seed + c, markets)
        policy = _Checked(factory(seed))

        def pair(p):
            return (p, RandomBuyer()) if side == "seller" else (RandomSeller(), p)

        try:
            engine = play_batch(batch, *pair(policy))
        except Exception as err:  # noqa: BLE001 - the check reports, it does not crash
            where = where_raised(err)
            engine, raised = None, f"config {c}: raised {type(err).__name__}: {err}{where}"
        # The malformed arrays seen before a raise say what the policy got wrong.
        problems += [f"config {c}: {p}" for p in dict.fromkeys(policy.problems)]
        if engine is None:
            problems.append(raised)
            continue
        own = engine.seller_violations if side == "seller" else engine.buyer_violations
        if strict and own.sum():
            problems.append(f"config {c}: {int(own.sum())} violations by the {side}")
        first = _outcome(engine)
        again = _outcome(play_batch(batch, *pair(factory(seed))))
        if diff := _same(first, again):
            problems.append(f"config {c}: not deterministic for one seed ({', '.join(diff)})")
        alone = [
            _outcome(play_batch(generate_batch(cfg, seed + c, [k]), *pair(factory(seed))))
            for k in range(markets)
        ]
        stacked = {k: np.concatenate([a[k] for a in alone]) for k in first}
        if diff := _same(first, stacked):
            problems.append(
                f"config {c}: batch of {markets} differs from one at a time ({', '.join(diff)})"
                + (f"; checked for this entry: {note}" if (note := invariance_note(policy)) else "")
            )
        try:
            problems += [f"config {c}: {p}" for p in _restarts(side, factory, cfg, seed + c)]
        except Exception as err:  # noqa: BLE001
            problems.append(
                f"config {c}: raised {type(err).__name__} under restarts: {err}{where_raised(err)}"
            )
    return problems


_RESTART_ROWS = 4
_RESTART_STEPS = 40
_EPISODE_KEYS = ("profit", "buyer_surplus", "trades", "turns_used", "seller_violations")


def _restarts(side: str, factory: Callable, cfg: MarketConfig, seed: int) -> list[str]:
    """Markets played after per-row restarts against markets played alone."""
    policy = factory(seed)
    if side == "seller":
        # A learner that reads text (a language model) asks the environment for the
        # dialogue, as play_batch turns it on for either side.
        text = True if getattr(policy, "reads_text", False) else None
        learner, env = (
            policy,
            SellerEnv(
                cfg, RandomBuyer(), _RESTART_ROWS, seed=seed, markets="exact", dialogue=text
            ),  # fmt: skip
        )
    else:
        learner, env = (
            RandomSeller(),
            SellerEnv(cfg, policy, _RESTART_ROWS, seed=seed, markets="exact"),
        )
    obs = env.reset()
    learner.reset(_RESTART_ROWS)
    if learner.sees_private:
        learner.reveal(env.batch)
    seen: dict[int, tuple] = {}
    for _ in range(_RESTART_STEPS):
        step = env.step(learner.act(obs))
        if step.done.any():
            ep = step.info["episodes"]
            for k, index in enumerate(ep["index"]):
                seen[int(index)] = tuple(float(ep[name][k]) for name in _EPISODE_KEYS)
            learner.restart(step.done)
            if learner.sees_private:
                learner.reveal(env.batch, step.done)
        obs = step.obs
    later = sorted(i for i in seen if i >= _RESTART_ROWS)  # markets that began on a restart
    if not later:
        return [f"no market ended within {_RESTART_STEPS} turns of {_RESTART_ROWS} rows"]
    bad = []
    for index in later:
        batch = generate_batch(cfg, seed, [index])
        fresh = factory(seed)
        pair = (fresh, RandomBuyer()) if side == "seller" else (RandomSeller(), fresh)
        e = play_batch(batch, *pair)
        alone = (
            e.profit[0],
            e.buyer_surplus()[0].sum(),
            (e.bought[0] >= 0).sum(),
            e.turn[0],
            e.seller_violations[0].sum(),
        )
        if tuple(float(x) for x in alone) != seen[index]:
            bad.append(index)
    if bad:
        return [f"markets {bad} play differently after a per-row restart than alone"]
    return []


def invariance_note(policy) -> str:
    """What batch invariance means for ``policy`` when it is not bit-identical play ("" when
    it is): the policy's own ``batch_invariance`` statement."""
    inner = getattr(policy, "inner", policy)
    note = getattr(inner, "batch_invariance", "exact")
    return "" if note == "exact" else str(note)


def check_seller(
    factory: Callable[[int], SellerPolicy],
    markets: int = 12,
    seed: int = 0,
    strict: bool = True,
    configs: tuple[MarketConfig, ...] = CONFIGS,
) -> list[str]:
    """Problems of a seller policy (``factory(seed)`` builds one); empty when it conforms.
    ``configs``: the markets it plays (a policy made for one market size checks on that)."""
    return _check("seller", factory, markets, seed, strict, configs)


def check_buyer(
    factory: Callable[[int], BuyerPolicy],
    markets: int = 12,
    seed: int = 0,
    strict: bool = True,
    configs: tuple[MarketConfig, ...] = CONFIGS,
) -> list[str]:
    """Problems of a buyer policy (``factory(seed)`` builds one); empty when it conforms."""
    return _check("buyer", factory, markets, seed, strict, configs)
