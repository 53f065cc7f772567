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
* a buyer's decisions before the market (``kinds``, ``disclose``): the seller the check
  plays ignores disclosure, so they are compared themselves: the same for a repeat call
  with the same inputs, for a fresh policy, for a batch and its markets alone, and after
  a reset;
* reuse after ``reset``: an instance that has played a batch plays another after its
  ``reset`` as a fresh one does (``arena eval`` plays its chunks on one instance);
* no writes into the observation: the policy is shown read-only arrays, and an
  exception in its own methods is a problem naming the method;
* per-row restarts: in an environment that restarts each row as its market ends
  (``agents.env``), every market played after a restart plays exactly as it does
  alone with a fresh policy (a stateful policy must forget restarted rows).

``check_seller`` / ``check_buyer`` return a list of problems (empty: conforms),
so a caller can print all of them at once; an exception in one play is one problem,
naming the config and the play, and the check goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agents.base import AGENT, HUMAN, BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.command import where_raised
from agents.env import SellerEnv
from agents.rollout import play_batch
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate_batch
from arena.noise import uniform
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs, SellerObs, read_only

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


class _PolicyRaised(Exception):
    """An exception raised in one of the policy's own methods (not in the engine)."""

    def __init__(self, method: str, err: Exception) -> None:
        super().__init__(method)
        self.method, self.err = method, err


@dataclass
class _Checked:
    """Wraps a policy: records malformed action arrays and what a buyer decided before
    its markets started (``kinds``, ``disclose``), and marks an exception raised in the
    policy's own methods as the policy's."""

    inner: SellerPolicy | BuyerPolicy
    problems: list[str] = field(default_factory=list)
    # The first kinds/disclose call of a play: (arguments, result). play_batch decides
    # once per play, so this is the play's decision.
    kinds_call: tuple | None = None
    disclose_call: tuple | None = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _call(self, method: str, *args):
        try:
            return getattr(self.inner, method)(*args)
        except Exception as err:  # noqa: BLE001 - reported as the policy's, with its name
            raise _PolicyRaised(f"{type(self.inner).__name__}.{method}", err) from err

    def reset(self, batch_size: int) -> None:
        self._call("reset", batch_size)

    def kinds(self, is_agent, key):
        out = self._call("kinds", is_agent, key)
        if self.kinds_call is None:
            self.kinds_call = ((is_agent, key), out)
            self._shape("kinds", out, np.shape(is_agent))
        return out

    def disclose(self, is_agent, key, market=None):
        out = self._call("disclose", is_agent, key, market)
        if self.disclose_call is None:
            self.disclose_call = ((is_agent, key, market), out)
            self._shape("disclose", out, np.shape(is_agent))
        return out

    def decided(self) -> dict[str, np.ndarray]:
        """What the buyer decided before the play, compared as the outcomes are: the
        seller the check plays ignores disclosure, so a disclose decision would not show
        in the outcome."""
        out = {}
        for name in ("kinds", "disclose"):
            call = getattr(self, f"{name}_call")
            if call is not None:
                out[name] = np.asarray(call[1])
        return out

    def _shape(self, name: str, out, shape: tuple) -> None:
        if np.shape(out) != shape:
            self.problems.append(f"{name} has shape {np.shape(out)}, expected {shape}")

    def act(self, obs):
        action = self._call("act", read_only(obs))  # every array, copies too: a write raises
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
    # A key one side lacks (a decision made in one play only) is a difference too.
    return [k for k in a if k not in b or not np.array_equal(a[k], b[k], equal_nan=True)]


def _raised(err: Exception) -> str:
    """One line for an exception: its type, message and the line of one's own code it
    came from; a write into a read-only observation array says so."""
    method = ""
    if isinstance(err, _PolicyRaised):
        method, err = err.method, err.err
    where = where_raised(err)
    line = f"raised {type(err).__name__}: {err}{where}"
    if method and not where:  # the line of code is in this project: name the method
        line += f" in {method}"
    if method.endswith(".act") and isinstance(err, ValueError) and "read-only" in str(err):
        line += f"; {method} writes into its observation, whose arrays are read-only"
    return line


# The second batch an instance plays after a reset (as ``arena eval`` plays its chunks
# on one instance): markets of their own, a smaller batch than the first (a last
# chunk), and few, as the check's cost is mostly in its plays.
def _reuse_size(markets: int) -> int:
    return max(1, markets // 4)


def _check(
    side: str,
    factory: Callable[[int], SellerPolicy | BuyerPolicy],
    markets: int,
    seed: int,
    strict: bool,
    configs: tuple[MarketConfig, ...] = CONFIGS,
    tally: dict[str, int] | None = None,
) -> list[str]:
    problems: list[str] = []
    try:
        kind = getattr(factory(seed), "kind", None) if side == "buyer" else None
    except Exception:  # noqa: BLE001 - building it is checked, and reported, below
        kind = None
    if kind is not None and kind not in (HUMAN, AGENT, "mixed"):
        # The market plays each buyer as a person or an agent (a population of both is
        # "mixed"); no entry takes another kind.
        problems.append(f"kind {kind!r}: a buyer is {HUMAN!r} or {AGENT!r}")
    for c, cfg in enumerate(configs):
        problems += [
            f"config {c}: {p}"
            for p in _check_config(side, factory, cfg, seed, seed + c, markets, strict, tally)
        ]
    return problems


def _check_config(
    side: str,
    factory: Callable[[int], SellerPolicy | BuyerPolicy],
    cfg: MarketConfig,
    seed: int,
    market_seed: int,
    markets: int,
    strict: bool,
    tally: dict[str, int] | None,
) -> list[str]:
    """The problems on one config, the config not named: policies built with ``seed``,
    markets drawn with ``market_seed``."""
    problems: list[str] = []
    batch = generate_batch(cfg, market_seed, markets)
    policy = _Checked(factory(seed))
    checked = [policy]  # every wrapper of the config: malformed arrays in any play count

    def new(p: SellerPolicy | BuyerPolicy) -> _Checked:
        checked.append(_Checked(p))
        return checked[-1]

    def play(b, p: _Checked) -> tuple[BatchedMarket, dict[str, np.ndarray]]:
        pair = (p, RandomBuyer()) if side == "seller" else (RandomSeller(), p)
        p.kinds_call = p.disclose_call = None
        engine = play_batch(b, *pair)
        return engine, {**_outcome(engine), **p.decided()}

    try:
        engine, first = play(batch, policy)
    except Exception as err:  # noqa: BLE001 - the check reports, it does not crash
        # The malformed arrays seen before a raise say what the policy got wrong.
        return [*dict.fromkeys(policy.problems), _raised(err)]
    problems += dict.fromkeys(policy.problems)
    own = engine.seller_violations if side == "seller" else engine.buyer_violations
    if tally is not None:
        tally["violations"] = tally.get("violations", 0) + int(own.sum())
    if strict and own.sum():
        problems.append(f"{int(own.sum())} violations by the {side}")
    note = invariance_note(policy)
    quoted = f"; checked for this entry: {note}" if note else ""
    # Each later play is labelled, so that an exception in it says which play raised;
    # what was found before it is kept.
    stage = ""
    try:
        # A buyer's decisions before the market (which buyers are agents, which disclose)
        # are held to what its actions are: the same for the same inputs, below the same
        # for a fresh policy, for a batch and its markets alone, and after a reset.
        for name, call in (("kinds", policy.kinds_call), ("disclose", policy.disclose_call)):
            if call is not None:
                stage = f"calling {name} again"
                args, out = call
                repeat = np.asarray(policy._call(name, *args))
                if np.shape(repeat) != np.shape(out) or not np.array_equal(repeat, out):
                    problems.append(f"{name} differs for a repeat call with the same inputs")
        stage = "playing again with a fresh policy"
        _, again = play(batch, new(factory(seed)))
        if diff := _same(first, again):
            problems.append(f"not deterministic for one seed ({', '.join(diff)})")
        stage = "playing its markets one at a time"
        alone = [
            play(generate_batch(cfg, market_seed, [k]), new(factory(seed)))[1]
            for k in range(markets)
        ]
        stacked = {k: np.concatenate([a[k] for a in alone]) for k in alone[0]}
        if diff := _same(first, stacked):
            problems.append(
                f"batch of {markets} differs from one at a time ({', '.join(diff)}){quoted}"
            )
        # ``arena eval`` plays its chunks on one instance, resetting it between them: a
        # policy must play a batch after a reset as a fresh one does.
        stage = "playing a second batch after a reset"
        size = _reuse_size(markets)
        second = generate_batch(cfg, market_seed, np.arange(markets, markets + size))
        _, reused = play(second, policy)
        _, fresh = play(second, new(factory(seed)))
        if diff := _same(fresh, reused):
            problems.append(
                f"a batch of {size} after a reset plays differently from a fresh policy's "
                f"({', '.join(diff)}): after reset a policy must play as a fresh one{quoted}"
            )
        raised = []
    except Exception as err:  # noqa: BLE001
        raised = [f"{_raised(err)} ({stage})"]
    # Arrays malformed only in a later play (a batch of one, say) are problems too, listed
    # before the exception they may have led to.
    problems += dict.fromkeys(p for w in checked for p in w.problems if p not in problems)
    problems += raised
    try:
        problems += _restarts(side, factory, cfg, market_seed)
    except Exception as err:  # noqa: BLE001
        problems.append(f"{_raised(err)} (under restarts)")
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
    tally: dict[str, int] | None = None,
) -> list[str]:
    """Problems of a seller policy (``factory(seed)`` builds one); empty when it conforms.
    ``configs``: the markets it plays (a policy made for one market size checks on that).
    ``tally`` (a dict) receives ``violations``: the rule violations seen in the policy's
    first play of each config, counted whether or not ``strict`` makes them problems."""
    return _check("seller", factory, markets, seed, strict, configs, tally)


def check_buyer(
    factory: Callable[[int], BuyerPolicy],
    markets: int = 12,
    seed: int = 0,
    strict: bool = True,
    configs: tuple[MarketConfig, ...] = CONFIGS,
    tally: dict[str, int] | None = None,
) -> list[str]:
    """Problems of a buyer policy (``factory(seed)`` builds one); empty when it conforms.
    ``configs``, ``tally``: as ``check_seller``'s."""
    return _check("buyer", factory, markets, seed, strict, configs, tally)
