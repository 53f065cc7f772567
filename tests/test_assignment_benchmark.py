"""benchmarks/assignment.py: the greedy matcher with its pair chosen by a max-weight
assignment."""

from __future__ import annotations

import numpy as np
import pytest

from agents.conformance import check_seller
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import GreedyMatcher, assigned_pairs, max_weight_matching
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate_batch


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("assignment")


def _brute_force(value: np.ndarray, stock: np.ndarray) -> float:
    """The largest sum of values over matchings (each buyer at most once, product j at
    most stock[j] times, open pairs only), by trying them all."""
    n, m = value.shape

    def best(i: int, left: tuple[int, ...]) -> float:
        if i == n:
            return 0.0
        out = best(i + 1, left)  # buyer i unmatched
        for j in range(m):
            if left[j] > 0 and np.isfinite(value[i, j]):
                rest = left[:j] + (left[j] - 1,) + left[j + 1 :]
                out = max(out, value[i, j] + best(i + 1, rest))
        return out

    return best(0, tuple(int(s) for s in stock))


def test_the_matching_is_valid_and_as_heavy_as_the_best_one_by_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, m = rng.integers(1, 5), rng.integers(1, 4)
        value = rng.normal(1.0, 1.5, (n, m))  # some margins negative
        value[rng.random((n, m)) < 0.3] = -np.inf  # closed pairs
        stock = rng.integers(0, 3, m)
        got = max_weight_matching(value, stock)
        buyers = [i for i, _ in got]
        assert len(set(buyers)) == len(buyers)
        assert all(np.isfinite(value[i, j]) for i, j in got)
        assert all(sum(j == k for _, j in got) <= stock[k] for k in range(m))
        total = sum(value[i, j] for i, j in got)
        assert total == pytest.approx(_brute_force(value, stock), abs=1e-9)


def test_a_buyer_is_sent_to_its_second_best_when_another_needs_its_first():
    # Buyer 0 values product 0 most (10) and product 1 nearly as much (9); buyer 1 can
    # only buy product 0 (8). Greedy offers (0, 0) and strands buyer 1; the matching
    # sells both, and its most valuable pair is (0, 1).
    value = np.array([[[10.0, 9.0], [8.0, -np.inf]]])
    stock = np.array([[1, 1]])
    assert sorted(max_weight_matching(value[0], stock[0])) == [(0, 1), (1, 0)]
    to, product = assigned_pairs(value, stock)
    assert (to[0], product[0]) == (0, 1)
    nothing = np.full((1, 2, 2), -np.inf)  # no open pair: the greedy argmax, as the matcher
    assert [a[0] for a in assigned_pairs(nothing, stock)] == [0, 0]


def test_it_offers_the_matched_pair_at_the_greedy_matchers_price_and_passes_conformance(bench):
    assert check_seller(lambda seed: bench.AssignmentMatcher(), markets=6) == []
    batch = generate_batch(MarketConfig(buyers=6, products=3, inventory=1, turns=8), 5, range(32))
    engine, seller, shadow = BatchedMarket(batch), bench.AssignmentMatcher(), GreedyMatcher()
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
