"""benchmarks/buyer_bound.py: the accept/refuse bound is the best of every answer
sequence, checked against sequences played one at a time, and bounds every buyer who
only accepts or refuses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents import registry
from agents.base import BuyerAction, BuyerPolicy
from agents.evaluate import evaluate_batch
from arena.generator import generate_batch
from arena.observation import ACCEPT, REJECT

TINY = dict(buyers=3, products=2, inventory=1, turns=4, agent_share=0.5)
MARKETS = 40


@pytest.fixture(scope="module")
def bb(load_benchmark):
    return load_benchmark("buyer_bound")


def _tiny(bb, **changes):
    return dataclasses.replace(bb.CONFIGS["retail"], **{**TINY, **changes})


class _OneSequence(BuyerPolicy):
    """Every market answers message k by bit k-1 of ``sequence``."""

    def __init__(self, sequence: int) -> None:
        self.sequence = sequence

    def act(self, obs):
        b = obs.batch_size
        bit = (self.sequence >> (obs.turn - 1)) & 1
        accept = (bit == 1) & (obs.offer_product >= 0)
        return BuyerAction(np.where(accept, ACCEPT, REJECT), np.full(b, -1), np.full(b, np.nan))


def _hidden(batch):
    return dataclasses.replace(batch, config=dataclasses.replace(batch.config, disclosure="hidden"))


@pytest.mark.parametrize("seller", ["greedy_matcher", "descending_offers", "pricing_bandit"])
@pytest.mark.parametrize("changes", [{}, {"turns": 5, "patience": 2}, {"buyers": 4, "turns": 3}])
def test_the_bound_is_the_best_sequence_played_one_at_a_time(bb, seller, changes):
    config = _tiny(bb, **changes)
    indices = list(range(MARKETS))
    top = bb.bound(seller, config, indices)
    batch = _hidden(generate_batch(config, bb.SEED, indices))
    each = np.stack(
        [
            evaluate_batch(batch, bb._make_seller(seller), _OneSequence(s))["buyer_surplus"]
            for s in range(1 << config.turns)
        ]
    )  # (sequences, markets)
    np.testing.assert_allclose(top["buyer_surplus"], each.max(axis=0))
    np.testing.assert_allclose(each[top["sequence"], np.arange(MARKETS)], top["buyer_surplus"])
    assert (each.max(axis=0) > each.min(axis=0)).any()  # the answers matter


@pytest.mark.parametrize("buyer", ["truthful", "threshold", "noisy_human"])
def test_no_buyer_who_only_accepts_or_refuses_beats_the_bound(bb, buyer):
    """These scripted buyers never counter here (noisy humans counter at a rate, so they
    are set not to), so each market's play is one of the sequences."""
    config = _tiny(bb, turns=6)
    indices = list(range(MARKETS))
    top = bb.bound("greedy_matcher", config, indices)
    params = {"counter_rate": 0.0} if buyer == "noisy_human" else {}
    batch = _hidden(generate_batch(config, bb.SEED, indices))
    got = evaluate_batch(
        batch, bb._make_seller("greedy_matcher"), registry.make(buyer, "buyer", **params)
    )
    assert (top["buyer_surplus"] >= got["buyer_surplus"] - 1e-9).all()
    assert (top["buyer_surplus"] > got["buyer_surplus"] + 1e-9).any()


def test_answer_sequences_refuse_turn_budgets_outside_the_bound(bb):
    with pytest.raises(ValueError, match="turns must be 1 to 12"):
        bb.AnswerSequences(bb.MAX_TURNS + 1)


def test_configs_with_too_many_turns_are_skipped(bb, monkeypatch):
    played = []
    monkeypatch.setattr(bb, "bound", lambda seller, config, idx: played.append(config) or {})
    monkeypatch.setattr(bb, "against", lambda *a: (_ for _ in ()).throw(AssertionError))
    assert bb.rows("greedy_matcher", ["large"], 2) == []
    assert played == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--configs", "nowhere"], "--configs: known are"),
        (["--markets", "0"], "--markets: 1 at least"),
        (["--seller", "no_such_seller"], "no_such_seller"),
    ],
)
def test_bad_flags_give_one_error_line(bb, capsys, argv, message):
    with pytest.raises(SystemExit) as err:
        bb.main(argv)
    assert err.value.code == 2
    assert message in capsys.readouterr().err
