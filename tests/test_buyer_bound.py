"""benchmarks/buyer_bound.py: the accept/refuse bound is the best of every answer
sequence, checked against sequences played one at a time, and bounds every buyer who
only accepts or refuses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents import registry
from agents.base import BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.evaluate import evaluate_batch
from arena.generator import generate, generate_batch, stack_instances
from arena.observation import ACCEPT, COUNTER, REJECT

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


@pytest.mark.parametrize(
    "seller", ["greedy_matcher", "descending_offers", "pricing_bandit", "rl_seller"]
)
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
    chosen = (top["plan"] << np.arange(config.turns)).sum(axis=1)
    np.testing.assert_allclose(each[chosen, np.arange(MARKETS)], top["buyer_surplus"])
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


def test_the_search_with_counters_plays_what_it_reports_and_never_loses_ground(bb):
    config = _tiny(bb, turns=6)
    indices = list(range(MARKETS))
    top = bb.bound("greedy_matcher", config, indices)
    found = bb.with_counters("greedy_matcher", config, indices, top, rounds=3)
    assert (found["buyer_surplus"] >= top["buyer_surplus"] - 1e-9).all()
    assert (found["plan"] >= 2).any()  # counters are among the answers it keeps
    replay = bb._play("greedy_matcher", config, indices, found["plan"])
    np.testing.assert_allclose(replay["buyer_surplus"], found["buyer_surplus"])
    np.testing.assert_allclose(replay["profit"], found["profit"])


def test_a_counter_stands_and_a_later_offer_under_it_trades_at_once(bb):
    """One buyer, one product; the seller offers it at the top of the range, then at the
    bottom. Refused twice, nothing trades; countered at half the way from cost to the
    first offer, the bid stands and the second offer, under it, trades without an answer.
    Countered at three quarters, likewise; accepted at once, it trades at the top."""
    config = _tiny(bb, buyers=1, products=1, turns=2)
    one = generate(config, bb.SEED, 0)
    batch = _hidden(stack_instances([one] * 4))
    lo, hi = config.price_range

    class TopThenBottom(SellerPolicy):
        def act(self, obs):
            z = np.zeros(obs.batch_size, int)
            return SellerAction(z, z, np.where(obs.turn == 0, hi, lo).astype(float))

    plans = np.array([[bb.REFUSE] * 2, [2 + 1, bb.REFUSE], [2 + 2, bb.REFUSE], [bb.TAKE] * 2])
    got = evaluate_batch(batch, TopThenBottom(), bb.AnswerPlan(plans, (0.25, 0.5, 0.75)))
    cost = float(one.costs[0])
    assert got["trades"].tolist() == [0, 1, 1, 1]
    np.testing.assert_allclose(got["profit"], [0.0, lo - cost, lo - cost, hi - cost])


def test_the_counters_bid_where_their_levels_say(bb):
    """The seller offers the top of the range, then 80% of the way from cost to it. A
    counter at three quarters of the way stands under the second offer, so nothing
    trades; with the levels set to 0.9 the same answer bids above it, and it trades."""
    config = _tiny(bb, buyers=1, products=1, turns=2)
    one = generate(config, bb.SEED, 0)
    cost = float(one.costs[0])
    hi = config.price_range[1]
    second = round(cost + 0.8 * (hi - cost), 2)

    class TopThenLower(SellerPolicy):
        def act(self, obs):
            z = np.zeros(obs.batch_size, int)
            return SellerAction(z, z, np.where(obs.turn == 0, hi, second).astype(float))

    plan = np.array([[2 + 2, bb.REFUSE]])
    batch = _hidden(stack_instances([one]))
    low = evaluate_batch(batch, TopThenLower(), bb.AnswerPlan(plan, (0.25, 0.5, 0.75)))
    high = evaluate_batch(batch, TopThenLower(), bb.AnswerPlan(plan, (0.25, 0.5, 0.9)))
    assert low["trades"].tolist() == [0] and high["trades"].tolist() == [1]
    np.testing.assert_allclose(high["profit"], [second - cost])
    assert bb.check_bids([0.5, 0.1, 0.5]) == (0.1, 0.5)
    for bad in ([], [0.0], [1.0], [0.5, 1.2]):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            bb.check_bids(bad)


def test_a_buyer_alone_counters_its_first_gainful_offer_and_takes_a_later_one(bb):
    """One buyer, one product of value v. The seller asks 10 over v, then v - 10, then
    1 under v: the first it refuses (no gain), the second it counters at 0.5 of the way
    from cost, and the third, above its bid and under its value, it accepts."""
    config = _tiny(bb, buyers=1, products=1, turns=3)
    one = next(
        m
        for m in (generate(config, bb.SEED, i) for i in range(100))
        if m.values[0, 0] < 85 and m.costs[0] < m.values[0, 0] - 20
    )
    v, cost = float(one.values[0, 0]), float(one.costs[0])
    asks = tuple(np.floor(np.array([v + 10, v - 10, v - 1]) * 100) / 100)  # whole cents

    class Asks(SellerPolicy):
        def act(self, obs):
            z = np.zeros(obs.batch_size, int)
            return SellerAction(z, z, np.asarray(asks)[np.minimum(obs.turn, 2)])

    seen = []

    class Watch(bb.CounterOnce):
        def act(self, obs):
            out = super().act(obs)
            seen.append((int(out.decision[0]), float(out.price[0])))
            return out

    batch = _hidden(stack_instances([one]))
    got = evaluate_batch(batch, Asks(), Watch(0.5))
    bid = np.floor((cost + 0.5 * (asks[1] - cost)) * 100) / 100
    assert [d for d, _ in seen] == [REJECT, COUNTER, ACCEPT]
    assert seen[1][1] == pytest.approx(bid)
    np.testing.assert_allclose(got["profit"], [asks[2] - cost])
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        bb.CounterOnce(1.0)


def test_counter_once_reports_its_best_share_and_answers_are_shares(bb):
    config = _tiny(bb, turns=6)
    indices = list(range(MARKETS))
    best = bb.counter_once("greedy_matcher", config, indices, (0.3, 0.6, 0.9))
    each = {
        f: bb._play_with("greedy_matcher", config, indices, bb.CounterOnce(f))
        for f in (0.3, 0.6, 0.9)
    }
    top = max(each, key=lambda f: each[f]["buyer_surplus"].mean())
    assert best["share"] == top
    np.testing.assert_array_equal(best["buyer_surplus"], each[top]["buyer_surplus"])
    assert bb.answers(np.array([[0, 1], [1, 3]]), (0.25, 0.5)) == (
        "refuse 25%, accept 50%, counter 0.5 25%"
    )


def test_answer_plans_outside_the_bound_are_refused(bb):
    with pytest.raises(ValueError, match="turns must be 1 to 12"):
        bb.sequences(bb.MAX_TURNS + 1)
    with pytest.raises(ValueError, match="plan: answers 0 to 4"):
        bb.AnswerPlan(np.full((2, 3), 5), (0.25, 0.5, 0.75))
    with pytest.raises(ValueError, match="plan: answers 0 to 10"):
        bb.AnswerPlan(np.full((2, 3), 11))
    with pytest.raises(ValueError, match="plan: \\(rows, turns\\)"):
        bb.AnswerPlan(np.zeros((2, 13), int))


def test_configs_with_too_many_turns_are_skipped(bb, monkeypatch):
    played = []
    monkeypatch.setattr(bb, "bound", lambda seller, config, idx: played.append(config) or {})

    class NoCells:
        def __init__(self, markets):
            pass

        def get(self, *cell):
            raise AssertionError(f"played {cell}")

    monkeypatch.setattr(bb, "Cells", NoCells)
    assert bb.rows("greedy_matcher", ["large"], 2) == []
    assert played == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--configs", "nowhere"], "--configs: known are"),
        (["--markets", "0"], "--markets: 1 at least"),
        (["--seller", "no_such_seller"], "no_such_seller"),
        (["--bids", "0.5,1.5"], "--bids: '0.5,1.5': fractions strictly between 0 and 1"),
        (["--bids", "half"], "--bids: 'half'"),
    ],
)
def test_bad_flags_give_one_error_line(bb, capsys, argv, message):
    with pytest.raises(SystemExit) as err:
        bb.main(argv)
    assert err.value.code == 2
    assert message in capsys.readouterr().err


def test_batches_of_any_size_give_the_same_bound_and_search(bb, monkeypatch):
    config = _tiny(bb, turns=5)
    indices = list(range(MARKETS))
    top = bb.bound("greedy_matcher", config, indices)
    found = bb.with_counters("greedy_matcher", config, indices, top)
    monkeypatch.setattr(bb, "ROWS", 7)  # one market a batch for the bound, 7 plays for the search
    small = bb.bound("greedy_matcher", config, indices)
    for k in top:
        np.testing.assert_array_equal(small[k], top[k])
    again = bb.with_counters("greedy_matcher", config, indices, small)
    for k in found:
        np.testing.assert_array_equal(again[k], found[k])
