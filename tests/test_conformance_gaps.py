"""The conformance check's gaps a review found: a buyer's disclosure decision, an instance
reused after ``reset``, writes into the observation, an exception in a later play, and
what ``arena check --lenient`` claims."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agents.base import SellerAction, SellerPolicy
from agents.conformance import CONFIGS, check_buyer, check_seller
from agents.scripted.buyers import StrategicAgent, Truthful
from agents.scripted.sellers import PostedPrice
from tournaments.cli import main

CONFIG_NUMBERS = range(len(CONFIGS))


@dataclass
class RandomDisclose(StrategicAgent):
    """Discloses at random from numpy's global generator (unseeded)."""

    def disclose(self, is_agent, key, market=None):
        return np.random.rand(*np.shape(is_agent)) < 0.5  # noqa: NPY002 - the bug checked


@dataclass
class BatchDisclose(StrategicAgent):
    """Discloses only when it plays more than one market at once."""

    def disclose(self, is_agent, key, market=None):
        return np.full(np.shape(is_agent), np.shape(is_agent)[0] > 1)


def test_a_buyer_whose_disclosure_is_random_does_not_conform():
    problems = check_buyer(lambda seed: RandomDisclose())
    for c in CONFIG_NUMBERS:
        assert f"config {c}: disclose differs for a repeat call with the same inputs" in problems
        assert f"config {c}: not deterministic for one seed (disclose)" in problems, problems


def test_a_buyer_whose_disclosure_depends_on_the_batch_does_not_conform():
    problems = check_buyer(lambda seed: BatchDisclose())
    assert problems == [f"config {c}: batch of 12 differs from one at a time (disclose)"
                        for c in CONFIG_NUMBERS]  # fmt: skip
    # The same agent deciding from its inputs alone conforms.
    assert check_buyer(lambda seed: StrategicAgent()) == []


@dataclass
class Leaky(PostedPrice):
    """Its markup grows with every batch the instance plays: ``reset`` keeps a count."""

    batches: int = field(default=0, init=False)

    def reset(self, batch_size):
        self.batches += 1

    def act(self, obs):
        self.markup = 0.2 * self.batches
        return super().act(obs)


def test_a_policy_that_keeps_state_across_reset_does_not_conform():
    # Every play of the check but one builds a fresh policy: only reuse shows this, as
    # ``arena eval`` reusing one instance across its chunks would.
    problems = check_seller(lambda seed: Leaky())
    assert any("after a reset plays differently from a fresh policy's" in p for p in problems)
    assert all("after a reset" in p for p in problems), problems
    assert check_seller(lambda seed: PostedPrice()) == []


@dataclass
class WritesValues(Truthful):
    """Writes into its observation (the engine may hand out its own state)."""

    def act(self, obs):
        obs.values[:] = 0.0
        return super().act(obs)


def test_a_policy_that_writes_into_its_observation_fails_on_one_line_per_config():
    problems = check_buyer(lambda seed: WritesValues())
    assert len(problems) == len(CONFIGS), problems
    for c, p in zip(CONFIG_NUMBERS, problems, strict=True):
        assert p.startswith(f"config {c}: raised ValueError"), p
        assert p.endswith("WritesValues.act writes into its observation, whose arrays are "
                          "read-only"), p  # fmt: skip
        assert "\n" not in p


@dataclass
class BreaksAloneRaises(SellerPolicy):
    """Breaks the rules in a batch, and raises on a batch of one market."""

    def act(self, obs):
        if obs.batch_size == 1:
            raise RuntimeError("one market")
        b = obs.batch_size
        return SellerAction(np.full(b, 10_000), np.zeros(b, np.int64), np.zeros(b))


def test_an_exception_in_a_later_play_names_its_config_and_keeps_earlier_problems():
    problems = check_seller(lambda seed: BreaksAloneRaises())
    for c in CONFIG_NUMBERS:
        mine = [p for p in problems if p.startswith(f"config {c}: ")]
        assert any("violations by the seller" in p for p in mine), problems
        assert any("raised RuntimeError: one market" in p and "one at a time" in p
                   for p in mine), problems  # fmt: skip


OUT_OF_RANGE = """
import numpy as np

from agents.base import BuyerAction, BuyerPolicy, HUMAN


class WeirdDecision(BuyerPolicy):
    kind = HUMAN

    def act(self, obs):
        b = obs.batch_size
        return BuyerAction(np.full(b, 42), np.full(b, 10**9), np.full(b, -1.0))
"""


def test_lenient_does_not_claim_there_were_no_violations(capsys, tmp_path):
    (tmp_path / "weird_agents.py").write_text(OUT_OF_RANGE)
    target = f"{tmp_path / 'weird_agents.py'}:WeirdDecision"
    assert main(["check", target]) == 1
    assert "violations by the buyer" in capsys.readouterr().out
    assert main(["check", target, "--lenient"]) == 0
    out = capsys.readouterr().out
    assert "conforms on 3 configs leniently" in out and "no rule violations" not in out
    assert "Rule violations were not counted (--lenient): 336 " in out, out


def test_a_lenient_check_counts_the_violations_it_does_not_count_as_problems():
    tally: dict[str, int] = {}
    assert check_buyer(lambda seed: Truthful(), strict=False, tally=tally) == []
    assert tally == {"violations": 0}


@dataclass
class Robot(Truthful):
    kind = "robot"


def test_a_buyer_of_a_kind_the_market_does_not_know_does_not_conform():
    """It conformed, and the registry then refused it with advice no entry could follow
    ("register the entry as 'robot'")."""
    from agents import registry
    from agents.registry import Entry

    problems = check_buyer(lambda seed: Robot())
    assert problems[0] == "kind 'robot': a buyer is 'human' or 'agent'"
    try:
        registry.register(Entry("re_robot", "buyer", "human", Robot))
    except ValueError as err:
        assert "has kind 'robot'; a policy's kind is 'human' or 'agent'" in str(err)
    else:
        raise AssertionError("registered")
    assert "re_robot" not in {e.name for e in registry.entries()}
