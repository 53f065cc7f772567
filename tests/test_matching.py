"""agents/scripted/matching.py: max-weight matchings, their certifying prices, and the
matchings kept across turns."""

from __future__ import annotations

import numpy as np
import pytest

from agents import registry
from agents.scripted.matching import (
    PlannedMatches,
    _certified,
    _lowest_prices,
    _solve,
    _worth,
    assigned_pairs,
    max_weight_matching,
)
from agents.scripted.sellers import GreedyMatcher
from arena.config import MarketConfig
from arena.engine import BatchedMarket
from arena.generator import generate_batch


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


def _random_market(rng, n=None, m=None):
    n = int(rng.integers(1, 6)) if n is None else n
    m = int(rng.integers(1, 4)) if m is None else m
    value = rng.normal(1.0, 1.5, (n, m))  # some margins negative
    value[rng.random((n, m)) < 0.3] = -np.inf  # closed pairs
    return value, rng.integers(0, 3, m)


def _weight(value: np.ndarray, match: np.ndarray) -> np.ndarray:
    """(B,) the sum of values of the matched pairs of ``match`` (B, N)."""
    took = np.take_along_axis(value, np.maximum(match, 0)[..., None], -1)[..., 0]
    return np.where(match >= 0, took, 0.0).sum(axis=-1)


def _valid(value: np.ndarray, stock: np.ndarray, match: np.ndarray) -> bool:
    m = value.shape[-1]
    counts = (match[..., None] == np.arange(m)).sum(axis=-2)
    took = np.take_along_axis(value, np.maximum(match, 0)[..., None], -1)[..., 0]
    return bool((counts <= stock).all() and (took[match >= 0] > 0).all())


def test_both_solvers_match_the_brute_force_optimum_on_random_markets():
    rng = np.random.default_rng(7)
    for _ in range(300):
        value, stock = _random_market(rng)
        want = _brute_force(np.where(value > 0, value, -np.inf), stock)
        got = max_weight_matching(value, stock)
        buyers = [i for i, _ in got]
        assert len(set(buyers)) == len(buyers)
        assert all(np.isfinite(value[i, j]) for i, j in got)
        assert all(sum(j == k for _, j in got) <= stock[k] for k in range(value.shape[1]))
        assert sum(value[i, j] for i, j in got) == pytest.approx(want, abs=1e-9)
        match = _solve(_worth(value)[None], stock[None])
        assert _valid(value[None], stock[None], match)
        assert _weight(value[None], match)[0] == pytest.approx(want, abs=1e-9)


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
    # More buyers than units of every product: the extra columns are worth nothing.
    crowd = np.array([[[5.0], [7.0], [6.0]]])
    assert [a[0] for a in assigned_pairs(crowd, np.array([[1]]))] == [1, 0]


def test_the_lowest_prices_certify_exactly_the_optimal_matchings():
    """Soundness and completeness of the certificate: a random feasible matching is
    certified by its lowest prices exactly when it is as heavy as the optimum; the
    solver's matchings always are."""
    rng = np.random.default_rng(11)
    certified = rejected = 0
    for _ in range(400):
        value, stock = _random_market(rng, n=int(rng.integers(1, 7)), m=int(rng.integers(1, 4)))
        worth = _worth(value)[None]
        best = _brute_force(np.where(value > 0, value, -np.inf), stock)
        solved = _solve(worth, stock[None])
        assert _certified(worth, solved, stock[None], _lowest_prices(worth, solved, stock[None]))[0]
        # A random feasible matching on positive pairs.
        left, match = stock.copy(), np.full(value.shape[0], -1)
        for i in rng.permutation(value.shape[0]):
            ok = np.flatnonzero((value[i] > 0) & (left > 0))
            if ok.size and rng.random() < 0.8:
                match[i] = rng.choice(ok)
                left[match[i]] -= 1
        match = match[None]
        prices = _lowest_prices(worth, match, stock[None])
        optimal = abs(_weight(value[None], match)[0] - best) < 1e-9
        assert _certified(worth, match, stock[None], prices)[0] == optimal
        certified += optimal
        rejected += not optimal
    assert certified > 20 and rejected > 100  # both sides were exercised


def test_kept_matchings_stay_optimal_through_random_turns():
    """Random turns of the kinds play makes (one buyer's values move, a matched or an
    unmatched pair sold, a buyer leaves, a market restarts): after every turn each
    market's kept matching is valid and as heavy as a fresh solve, and the pick is the
    fresh pick; some markets keep their matching."""
    rng = np.random.default_rng(3)
    b, n, m = 64, 6, 3
    value = rng.normal(2.0, 1.5, (b, n, m))
    stock = rng.integers(1, 3, (b, m))
    plan, turns = PlannedMatches(), 0
    for _ in range(40):
        to, product = plan.pairs(value, stock)
        turns += b
        fresh = _solve(_worth(value), stock)
        assert _valid(value, stock, plan._match)
        np.testing.assert_allclose(
            _weight(_worth(value), plan._match), _weight(_worth(value), fresh), atol=1e-9
        )
        want = assigned_pairs(value, stock)
        assert (to == want[0]).all() and (product == want[1]).all()
        ar = np.arange(b)
        kind = rng.integers(0, 5, b)
        i = rng.integers(0, n, b)
        # 0: buyer i's values move; 1: the pick sells; 2: buyer i buys its best product;
        # 3: buyer i leaves; 4: nothing.
        move = kind == 0
        value[ar[move], i[move]] += rng.normal(0.0, 1.0, (move.sum(), m))
        for rows, who, what in (
            (kind == 1, to, product),
            (kind == 2, i, np.argmax(value[ar, i], axis=1)),
        ):
            r = ar[rows & np.isfinite(value[ar, who, what])]
            stock[r, what[r]] -= 1
            value[r, who[r]] = -np.inf
        value[ar[kind == 3], i[kind == 3]] = -np.inf
        value.transpose(0, 2, 1)[stock == 0] = -np.inf  # sold out: closed for everyone
        gone = ~np.isfinite(value).any(axis=(1, 2))
        if gone.any():  # ended markets restart with fresh ones
            value[gone] = rng.normal(2.0, 1.5, (gone.sum(), n, m))
            stock[gone] = rng.integers(1, 3, (gone.sum(), m))
            plan.restart(np.flatnonzero(gone))
    assert b < plan.solved < turns / 2


@pytest.mark.parametrize(
    "config, buyers",
    [
        (MarketConfig(buyers=8, products=4, inventory=2, turns=12), "truthful"),
        (MarketConfig(buyers=8, products=4, inventory=2, turns=12), "haggler"),
        (
            MarketConfig(
                buyers=12, products=6, inventory=1, turns=10, patience=2,
                price_range=(100.0, 1100.0), signal_noise=0.25,
            ),
            "threshold",
        ),
        (MarketConfig(buyers=16, products=8, inventory=2, turns=20), "noisy_human"),
    ],
)  # fmt: skip
def test_in_play_the_kept_pick_is_the_fresh_pick(config, buyers):
    """The greedy matcher's own values over real play (refusals, counters, sales,
    impatient buyers): each turn the kept matchings give the same pick as solving every
    market afresh, while solving fewer markets."""
    batch = generate_batch(config, 9, range(96))
    engine, matcher, plan = BatchedMarket(batch), GreedyMatcher(), PlannedMatches()
    matcher.reset(96)
    buyer = registry.make_buyers(buyers, seed=0)
    market_turns = 0
    while not engine.all_done:
        obs = engine.seller_observation()
        value, price = matcher.pair_table(obs)
        to, product = plan.pairs(value, obs.stock)
        want = assigned_pairs(value, obs.stock)
        live = ~obs.done
        assert (to[live] == want[0][live]).all() and (product[live] == want[1][live]).all()
        market_turns += 96
        ar = np.arange(96)
        p = np.clip(np.round(price[ar, to, product] * 100) / 100, *obs.price_range)
        prompt = engine.offer(to, product, p)
        if prompt is not None:
            d = buyer.act(prompt)
            engine.answer(d.decision, d.product, d.price)
    assert plan.solved < 0.85 * market_turns


def test_a_new_batch_shape_or_a_reset_starts_afresh():
    rng = np.random.default_rng(5)
    plan = PlannedMatches()
    value = rng.normal(2.0, 1.0, (4, 3, 2))
    stock = np.ones((4, 2), np.int64)
    plan.pairs(value, stock)
    plan.pairs(value, stock)
    assert plan.solved == 4  # nothing changed: every market kept its matching
    bigger = rng.normal(2.0, 1.0, (4, 5, 2))
    to, product = plan.pairs(bigger, stock)
    assert plan.solved == 8
    assert (to == assigned_pairs(bigger, stock)[0]).all()
    plan.reset()
    plan.pairs(bigger, stock)
    assert plan.solved == 12
    plan.restart(np.array([1]))
    plan.pairs(bigger, stock)
    assert plan.solved == 13
