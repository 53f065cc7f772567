"""benchmarks/unseen_buyers.py: sellers against buyers no seller trained on, on a tiny run."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

from agents import registry
from agents.base import SellerAction, SellerPolicy
from agents.evaluate import evaluate_batch
from arena.generator import generate, generate_batch, stack_instances
from arena.metrics import welfare_bounds


@pytest.fixture(scope="module")
def ub(load_benchmark):
    return load_benchmark("unseen_buyers")


def _direct(ub, seller: str, share: float, markets: int) -> dict[str, np.ndarray]:
    """The cell played without the benchmark's cache: the generalization markets of
    retail, the hidden rule, every buyer countering once at ``share``."""
    gen = sys.modules["benchmarks.generalization"]
    batch = generate_batch(gen.CONFIGS["retail"], gen.SEED, range(markets))
    batch = dataclasses.replace(
        batch, config=dataclasses.replace(batch.config, disclosure="hidden")
    )
    seller_policy = gen._make_seller(seller)
    return evaluate_batch(batch, seller_policy, ub.CounterOnce(share), welfare_bounds(batch))


def test_each_difference_is_the_cells_played_without_the_cache(ub, monkeypatch, capsys):
    monkeypatch.setattr(ub, "SELLERS", ("rl_seller", "greedy_matcher", "posted_price", "oracle"))
    assert ub.main(["--markets", "30", "--configs", "retail", "--shares", "0.7,0.5"]) == 0
    printed = capsys.readouterr().out
    cells = ub.Cells(30)
    table = ub.rows(cells, ["retail"], (0.5, 0.7))
    assert [r[:2] for r in table] == [["retail", "0.5"], ["retail", "0.7"]]
    for row, share in zip(table, (0.5, 0.7), strict=True):
        mine = _direct(ub, "rl_seller", share, 30)["profit"]
        assert row[2] == f"{mine.mean():.1f}"
        for k, other in enumerate(("greedy_matcher", "posted_price")):
            theirs = _direct(ub, other, share, 30)["profit"]
            assert row[3 + k] == ub._fmt(*ub._paired(mine, theirs))
        lower = [float(c.split("[")[1].split(",")[0]) for c in row[3:5]]
        assert row[5] == ("yes" if min(lower) > 0 else "NO")
        assert row[0] in printed and row[3] in printed
    won = sum(r[5] == "yes" for r in table)
    assert f"beats every scripted seller in {won} of 2 cells" in printed


def test_cells_play_caches_under_its_label_and_get_is_play_of_a_registry_buyer(ub):
    cells = ub.Cells(10)
    made = []

    def buyers():
        made.append(1)
        return ub.CounterOnce(0.7)

    first = cells.play("greedy_matcher", "c", buyers, "hidden", "retail")
    again = cells.play("greedy_matcher", "c", buyers, "hidden", "retail")
    assert first is again and len(made) == 1
    got = cells.get("greedy_matcher", "truthful", "hidden", "retail")
    fresh = ub.Cells(10).play(
        "greedy_matcher",
        "t",
        lambda: registry.make_buyers("truthful", seed=0),
        "hidden",
        "retail",
    )
    for k in got:
        np.testing.assert_array_equal(got[k], fresh[k])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--shares", "0.5,1.5"], "--shares: '0.5,1.5': fractions strictly between 0 and 1"),
        (["--shares", "most"], "--shares: 'most'"),
        (["--configs", "nowhere"], "--configs: known are"),
        (["--markets", "0"], "--markets: 1 at least"),
        (["--threads", "0"], "threads"),
        (["--actions", "nowhere"], "--actions: one config, known are"),
    ],
)
def test_bad_flags_give_one_error_line(ub, capsys, argv, message):
    with pytest.raises(SystemExit) as err:
        ub.main(argv)
    assert err.value.code == 2
    assert message in capsys.readouterr().err


def test_the_tally_sorts_each_offer_by_the_asked_buyers_bid(ub):
    """One buyer, one product of value v; the seller asks 10 over v, 10 under, then 1
    under, then 10 under again. The buyer refuses the first, counters the second at half
    way from cost (a bid under both later asks), and takes the third: two offers to a
    buyer without a bid, one of the bid's product above it, and none after the trade."""
    gen = sys.modules["benchmarks.generalization"]
    config = dataclasses.replace(gen.RETAIL, buyers=1, products=1, inventory=1, turns=4)
    one = next(
        m
        for m in (generate(config, gen.SEED, i) for i in range(100))
        if m.values[0, 0] < 85 and m.costs[0] < m.values[0, 0] - 20
    )
    v = float(one.values[0, 0])
    asks = np.floor(np.array([v + 10, v - 10, v - 1, v - 10]) * 100) / 100

    class Asks(SellerPolicy):
        def act(self, obs):
            z = np.zeros(obs.batch_size, int)
            return SellerAction(z, z, asks[np.minimum(obs.turn, 3)])

    tally = ub.Tally(Asks())
    batch = stack_instances([one])
    batch = dataclasses.replace(
        batch, config=dataclasses.replace(batch.config, disclosure="hidden")
    )
    got = evaluate_batch(batch, tally, ub.CounterOnce(0.5))
    assert got["trades"].tolist() == [1]
    assert tally.counts.tolist() == [0, 1, 0, 2]


def test_against_buyers_who_never_bid_every_offer_goes_to_a_buyer_without_one(ub, monkeypatch):
    monkeypatch.setattr(ub, "CounterOnce", lambda share: registry.make("truthful", "buyer"))
    monkeypatch.setattr(ub, "SELLERS", ("rl_seller", "greedy_matcher", "oracle"))
    rows = ub.action_rows("retail", (0.5,), 20)
    assert [r[1] for r in rows] == ["rl_seller", "greedy_matcher"]
    for row in rows:
        counts = [float(x) for x in row[4:]]
        assert counts[:3] == [0.0, 0.0, 0.0] and 0 < counts[3] <= 12
