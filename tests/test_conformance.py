"""Every registered policy runs through the conformance check, and the check can fail."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from agents import registry
from agents.base import BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.conformance import RandomBuyer, RandomSeller, check_buyer, check_seller
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import GreedyMatcher
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
    def act(self, obs):
        d = Truthful().act(obs)
        return BuyerAction(d.decision[:1], d.product, d.price.astype(np.float32) * np.nan)


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
    problems = check_buyer(lambda seed: BadShapes())
    assert any("shape" in p for p in problems) or any("raised" in p for p in problems), problems
    problems = check_seller(lambda seed: Violator())
    assert any("violations by the seller" in p for p in problems), problems
    assert check_seller(lambda seed: Violator(), strict=False) == []


@dataclass
class Forgetful(GreedyMatcher):
    """Remembers refusals but keeps them across a per-row restart."""

    def restart(self, rows):
        pass


def test_the_check_catches_a_policy_that_remembers_restarted_rows():
    problems = check_seller(lambda seed: Forgetful())
    assert any("per-row restart" in p for p in problems), problems
    assert check_seller(lambda seed: GreedyMatcher()) == []
