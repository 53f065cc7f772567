"""benchmarks/assignment.py: the greedy matcher with its pair chosen by a max-weight
assignment."""

from __future__ import annotations

import numpy as np
import pytest

from agents.conformance import check_seller
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import AssignmentMatcher, GreedyMatcher
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate_batch


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("assignment")


def test_it_offers_the_matched_pair_at_the_greedy_matchers_price_and_passes_conformance(bench):
    assert check_seller(lambda seed: AssignmentMatcher(), markets=6) == []
    batch = generate_batch(MarketConfig(buyers=6, products=3, inventory=1, turns=8), 5, range(32))
    engine, seller, shadow = BatchedMarket(batch), AssignmentMatcher(), GreedyMatcher()
    seller.reset(32)
    shadow.reset(32)
    buyer, moved = Truthful(), 0
    while not engine.all_done:
        obs = engine.seller_observation()
        action = seller.act(obs)
        value, price = shadow.pair_table(obs)  # the same estimates, kept in step
        live = ~obs.done
        b = np.flatnonzero(live)
        assert np.isfinite(value[b, action.to[b], action.product[b]]).all()
        want = np.clip(
            np.round(price[b, action.to[b], action.product[b]] * 100) / 100, *obs.price_range
        )
        assert np.allclose(action.price[b], want, atol=0.006)
        greedy = value.reshape(32, -1).argmax(1)
        moved += int((greedy[b] != action.to[b] * obs.num_products + action.product[b]).sum())
        prompt = engine.offer(action.to, action.product, action.price)
        if prompt is not None:
            d = buyer.act(prompt)
            engine.answer(d.decision, d.product, d.price)
    assert moved > 0  # it does leave the greedy pair


def test_the_command_prints_a_table_and_rejects_bad_flags(bench, capsys):
    mixed = "human=noisy_human,agent=strategic"
    argv = ["--markets", "8", "--buyers", "truthful", mixed, "--configs", "retail"]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "assignment matcher - greedy matcher (8 markets" in out
    assert "retail    truthful" in out and "retail    mixed" in out
    table = bench.rows(["retail"], ["truthful"], 8, versus=("greedy_matcher", "posted_price"))
    assert len(table) == 1 and len(table[0]) == 7
    back = table[0][3].split()[0]  # assignment - greedy, and greedy - assignment: opposite
    assert table[0][5].split()[0] == ("-" + back[1:] if back[0] == "+" else "+" + back[1:])
    for bad in (
        ["--configs", "nowhere", "--markets", "8"],
        ["--buyers", "nobody", "--markets", "8"],
        ["--markets", "0"],
        ["--versus", "nobody", "--markets", "8"],
    ):
        assert bench.main(bad) == 2
        assert capsys.readouterr().err.count("\n") == 1
