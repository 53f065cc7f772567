"""Every registered policy runs through the conformance check, and the check can fail."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from agents import registry
from agents.base import BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.conformance import CONFIGS, RandomBuyer, RandomSeller, check_buyer, check_seller
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import GreedyMatcher
from arena.observation import COUNTER
from tournaments.spec import load_spec

# The language-model seller was trained on one config (the default tournament's retail)
# and checks on that one. Its protocol violations are behaviour, measured by its
# evaluation (0.0004 a message over 1,000 markets; README), not a failure to conform: the
# check asks everything else of it (shapes, determinism, batch invariance as its
# ``batch_invariance`` states, per-row restarts).
_RETAIL = dict(load_spec(str(Path(__file__).resolve().parents[1] / "tournaments" / "specs"
                             / "default.toml")).configs)["retail"]  # fmt: skip
_CHECK = {"lm_seller": {"configs": (_RETAIL,), "strict": False}}


@pytest.mark.parametrize("name", [e.name for e in registry.entries("seller")])
def test_every_seller_conforms(name):
    options = _CHECK.get(name, {})
    assert check_seller(lambda seed: registry.make(name, "seller", seed), **options) == []


@pytest.mark.parametrize("name", [e.name for e in registry.entries("buyer")])
def test_every_buyer_conforms(name):
    assert check_buyer(lambda seed: registry.make(name, "buyer", seed)) == []


def test_populations_conform():
    buyers = [e.name for e in registry.entries("buyer")]
    spec = f"{buyers[0]}:0.3,{buyers[-1]}:0.7"
    assert check_buyer(lambda seed: registry.make_buyers(spec, seed)) == []
    by_kind = f"human={buyers[0]},agent={buyers[-1]}"
    assert check_buyer(lambda seed: registry.make_buyers(by_kind, seed)) == []


def test_the_random_opponents_conform():
    assert check_seller(lambda seed: RandomSeller(seed)) == []
    assert check_buyer(lambda seed: RandomBuyer(seed)) == []


@dataclass
class BatchMean(SellerPolicy):
    """Not batch-invariant: its price pools the signals of every market in the batch."""

    def act(self, obs):
        inner = RandomSeller().act(obs)
        lo, hi = obs.price_range
        price = np.full(obs.batch_size, np.clip(obs.signals.mean(), lo, hi))
        return SellerAction(inner.to, inner.product, np.round(price, 2))


@dataclass
class GlobalRandom(BuyerPolicy):
    """Not deterministic for a seed: draws from a generator seeded by the clock."""

    def act(self, obs):
        rng = np.random.default_rng()
        decision = np.where(rng.random(obs.batch_size) < 0.5, 1, 0)
        decision = np.where(obs.offer_product >= 0, decision, 0)
        return BuyerAction(decision, np.zeros_like(decision), np.zeros(obs.batch_size))


@dataclass
class BadShapes(BuyerPolicy):
    """One decision for the whole batch: the engine raises, after the check saw the shape."""

    def act(self, obs):
        d = Truthful().act(obs)
        return BuyerAction(d.decision[:1], d.product, d.price)


@dataclass
class FloatTargets(SellerPolicy):
    """Valid offers, with the buyer indices as floats (which the engine plays as they are)."""

    def act(self, obs):
        a = RandomSeller().act(obs)
        return SellerAction(a.to.astype(np.float64), a.product, a.price)


@dataclass
class NaNCounters(BuyerPolicy):
    """Counters with a NaN price on the markets that wait for its answer (``live``), or only
    on the padding rows that wait for none."""

    live: bool = True

    def act(self, obs):
        a = RandomBuyer().act(obs)
        rows = obs.needs_answer if self.live else ~obs.needs_answer
        decision = np.where(rows, COUNTER, a.decision)
        return BuyerAction(decision, a.product, np.where(rows, np.nan, a.price))


@dataclass
class Violator(SellerPolicy):
    def act(self, obs):
        b = obs.batch_size
        return SellerAction(np.full(b, 10_000), np.zeros(b, np.int64), np.zeros(b))


def test_the_check_catches_broken_policies():
    problems = check_seller(lambda seed: BatchMean())
    assert any("one at a time" in p for p in problems), problems
    problems = check_buyer(lambda seed: GlobalRandom())
    assert any("not deterministic" in p for p in problems), problems
    problems = check_seller(lambda seed: Violator())
    assert any("violations by the seller" in p for p in problems), problems
    assert check_seller(lambda seed: Violator(), strict=False) == []


def test_the_check_names_malformed_arrays():
    configs = range(len(CONFIGS))
    problems = check_buyer(lambda seed: BadShapes(), markets=12)
    for c in configs:
        assert f"config {c}: decision has shape (1,), expected (12,)" in problems, problems
        assert any(p.startswith(f"config {c}: raised ValueError") for p in problems), problems
    problems = check_seller(lambda seed: FloatTargets())
    assert problems == [f"config {c}: to has dtype float64, expected integers" for c in configs]
    problems = check_buyer(lambda seed: NaNCounters(), strict=False)
    assert problems == [f"config {c}: a price on a live market is not finite" for c in configs]
    # A NaN where no answer is asked is padding, not a malformed price.
    assert check_buyer(lambda seed: NaNCounters(live=False)) == []


@dataclass
class Forgetful(GreedyMatcher):
    """Remembers refusals but keeps them across a per-row restart."""

    def restart(self, rows):
        pass


def test_the_check_catches_a_policy_that_remembers_restarted_rows():
    problems = check_seller(lambda seed: Forgetful())
    assert any("per-row restart" in p for p in problems), problems
    assert check_seller(lambda seed: GreedyMatcher()) == []
