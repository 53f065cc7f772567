"""Tests of the full-information oracle against independent brute force and theory."""

from __future__ import annotations

import numpy as np
import pytest

from arena.oracle import (
    optimal_assignment,
    optimal_welfare,
    optimal_welfare_batch,
    vcg_payments,
    walrasian_prices,
    welfare_bound,
)

TOL = 1e-9
EQ_TOL = 1e-7


# ---------------------------------------------------------------------------
# Independent reference: enumerate every assignment
# ---------------------------------------------------------------------------


def brute_welfare(
    values: np.ndarray, costs: np.ndarray, inventory: np.ndarray, max_trades: int | None = None
) -> float:
    """Best total surplus by trying, buyer by buyer, nothing or each product in stock."""
    n, m = values.shape
    cap = n if max_trades is None else max_trades
    stock = [int(x) for x in inventory]
    gain = [[float(values[i, j] - costs[j]) for j in range(m)] for i in range(n)]

    def best(i: int, trades_left: int) -> float:
        if i == n:
            return 0.0
        result = best(i + 1, trades_left)
        if trades_left == 0:
            return result
        for j in range(m):
            if stock[j] > 0 and gain[i][j] > 0:
                stock[j] -= 1
                result = max(result, gain[i][j] + best(i + 1, trades_left - 1))
                stock[j] += 1
        return result

    return best(0, cap)


def random_market(
    rng: np.random.Generator, max_n: int = 5, max_m: int = 3, max_inv: int = 2
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = int(rng.integers(0, max_n + 1))
    m = int(rng.integers(0, max_m + 1))
    if rng.random() < 0.5:
        # Small integers make ties and degenerate equilibria common.
        values = rng.integers(0, 11, size=(n, m)).astype(float)
        costs = rng.integers(0, 6, size=m).astype(float)
    else:
        values = rng.uniform(0.0, 10.0, size=(n, m))
        costs = rng.uniform(0.0, 5.0, size=m)
    inventory = rng.integers(0, max_inv + 1, size=m)
    return values, costs, inventory


def check_feasible(
    pairs: list[tuple[int, int]],
    values: np.ndarray,
    costs: np.ndarray,
    inventory: np.ndarray,
    max_trades: int | None = None,
) -> float:
    """Assert the pairs form a feasible assignment; return its welfare."""
    buyers = [i for i, _ in pairs]
    assert buyers == sorted(buyers)
    assert len(set(buyers)) == len(buyers)
    if max_trades is not None:
        assert len(pairs) <= max_trades
    counts = np.zeros(len(inventory), dtype=int)
    total = 0.0
    for i, j in pairs:
        assert 0 <= i < values.shape[0] and 0 <= j < values.shape[1]
        counts[j] += 1
        s = values[i, j] - costs[j]
        assert s > 0
        total += s
    assert (counts <= inventory).all()
    return total


def sold_counts(pairs: list[tuple[int, int]], m: int) -> np.ndarray:
    counts = np.zeros(m, dtype=int)
    for _, j in pairs:
        counts[j] += 1
    return counts


# ---------------------------------------------------------------------------
# Welfare and assignment
# ---------------------------------------------------------------------------


def test_welfare_and_assignment_match_brute_force() -> None:
    rng = np.random.default_rng(20240601)
    caps: list[int | None] = [None, 0, 1, 2, 3, 6]
    checked = 0
    for _ in range(400):
        values, costs, inventory = random_market(rng)
        cap = caps[int(rng.integers(len(caps)))]
        expected = brute_welfare(values, costs, inventory, cap)
        got = optimal_welfare(values, costs, inventory, cap)
        assert got == pytest.approx(expected, abs=TOL)
        pairs = optimal_assignment(values, costs, inventory, cap)
        assert check_feasible(pairs, values, costs, inventory, cap) == pytest.approx(
            expected, abs=TOL
        )
        checked += 1
    assert checked >= 300


def test_hand_welfare_and_cap() -> None:
    values = np.array([[10.0, 8.0], [6.0, 1.0]])
    costs = np.zeros(2)
    inventory = np.array([1, 1])
    assert optimal_welfare(values, costs, inventory) == pytest.approx(14.0)
    assert optimal_assignment(values, costs, inventory) == [(0, 1), (1, 0)]
    # One trade: the single best pair, not the best pair of the full optimum.
    assert optimal_welfare(values, costs, inventory, max_trades=1) == pytest.approx(10.0)
    assert optimal_assignment(values, costs, inventory, max_trades=1) == [(0, 0)]
    assert welfare_bound(values, costs, inventory, 1) == pytest.approx(10.0)
    assert optimal_welfare(values, costs, inventory, max_trades=0) == 0.0


def test_cap_is_monotone_and_reaches_uncapped() -> None:
    rng = np.random.default_rng(7)
    for _ in range(150):
        values, costs, inventory = random_market(rng, max_n=6, max_m=4, max_inv=3)
        n = values.shape[0]
        full = optimal_welfare(values, costs, inventory)
        series = [optimal_welfare(values, costs, inventory, k) for k in range(n + 3)]
        assert series[0] == 0.0
        assert all(b >= a - TOL for a, b in zip(series, series[1:], strict=False))
        for k in range(n, n + 3):
            assert series[k] == pytest.approx(full, abs=TOL)


def test_negative_surplus_pairs_are_never_traded() -> None:
    values = np.array([[1.0, 5.0], [2.0, 0.5]])
    costs = np.array([3.0, 1.0])
    pairs = optimal_assignment(values, costs, np.array([5, 5]))
    assert pairs == [(0, 1)]
    assert optimal_welfare(values, costs, np.array([5, 5])) == pytest.approx(4.0)


def test_degenerate_shapes() -> None:
    assert optimal_welfare(np.zeros((0, 3)), np.zeros(3), np.ones(3, dtype=int)) == 0.0
    assert optimal_welfare(np.zeros((4, 0)), np.zeros(0), np.zeros(0, dtype=int)) == 0.0
    values = np.full((3, 2), 9.0)
    assert optimal_welfare(values, np.zeros(2), np.zeros(2, dtype=int)) == 0.0
    assert optimal_assignment(values, np.zeros(2), np.zeros(2, dtype=int)) == []
    assert optimal_welfare(values, np.zeros(2), np.array([1, 0]), max_trades=0) == 0.0
    low, high = walrasian_prices(np.zeros((0, 2)), np.array([1.0, 2.0]), np.array([1, 1]))
    assert np.array_equal(low, [1.0, 2.0]) and np.array_equal(high, [1.0, 2.0])
    assert vcg_payments(np.zeros((0, 2)), np.zeros(2), np.array([1, 1])).shape == (0,)


def test_large_inventory_is_capped_without_changing_the_answer() -> None:
    values = np.array([[5.0], [4.0], [3.0]])
    assert optimal_welfare(values, np.array([1.0]), np.array([10**6])) == pytest.approx(9.0)


def test_assignment_is_deterministic() -> None:
    values = np.full((4, 2), 5.0)  # every assignment of two units ties
    costs = np.zeros(2)
    inventory = np.array([1, 1])
    first = optimal_assignment(values, costs, inventory)
    assert len(first) == 2
    for _ in range(5):
        assert optimal_assignment(values.copy(), costs.copy(), inventory.copy()) == first


def test_batch_equals_loop() -> None:
    rng = np.random.default_rng(11)
    for b, n, m in [(20, 5, 3), (7, 8, 4), (3, 0, 2), (4, 3, 0), (0, 3, 2)]:
        values = rng.uniform(0, 10, size=(b, n, m))
        costs = rng.uniform(0, 5, size=(b, m))
        inventory = rng.integers(0, 3, size=(b, m))
        caps = rng.integers(0, n + 2, size=b)
        loop_free = [optimal_welfare(values[t], costs[t], inventory[t]) for t in range(b)]
        loop_cap = [
            optimal_welfare(values[t], costs[t], inventory[t], int(caps[t])) for t in range(b)
        ]
        loop_two = [optimal_welfare(values[t], costs[t], inventory[t], 2) for t in range(b)]
        batch_free = optimal_welfare_batch(values, costs, inventory)
        batch_cap = optimal_welfare_batch(values, costs, inventory, caps)
        batch_two = optimal_welfare_batch(values, costs, inventory, 2)
        assert batch_free.shape == (b,)
        # Bit for bit: the batch solves the same matrices and sums the same pairs in order.
        np.testing.assert_array_equal(batch_free, loop_free)
        np.testing.assert_array_equal(batch_cap, loop_cap)
        np.testing.assert_array_equal(batch_two, loop_two)


@pytest.mark.parametrize("seed", range(12))
def test_batch_is_exact_and_independent_of_its_other_markets(seed) -> None:
    """Markets that share an inventory and a cap are solved as a group; a market's W*_T is
    the scalar one exactly, whatever else its batch holds and in any order."""
    rng = np.random.default_rng(100 + seed)
    b, (n, m) = 40, [(16, 8), (12, 6), (8, 4), (3, 5)][seed % 4]  # large down to retail
    values = rng.uniform(0, 10, size=(b, n, m))
    values[rng.random(b) < 0.1] = 0.0  # some markets without any positive surplus
    costs = rng.uniform(0, 5, size=(b, m))
    shared = rng.integers(0, 3, size=m)  # most markets share one inventory, as in one config
    inventory = np.where(rng.random((b, 1)) < 0.7, shared, rng.integers(0, 3, size=(b, m)))
    caps = rng.choice([0, 1, 2, n, n + 3], size=b)
    loop = [optimal_welfare(values[t], costs[t], inventory[t], int(caps[t])) for t in range(b)]
    batch = optimal_welfare_batch(values, costs, inventory, caps)
    np.testing.assert_array_equal(batch, loop)
    order = rng.permutation(b)
    shuffled = optimal_welfare_batch(values[order], costs[order], inventory[order], caps[order])
    np.testing.assert_array_equal(shuffled, batch[order])


# ---------------------------------------------------------------------------
# Walrasian prices
# ---------------------------------------------------------------------------


def assert_equilibrium(
    prices: np.ndarray,
    pairs: list[tuple[int, int]],
    values: np.ndarray,
    costs: np.ndarray,
    inventory: np.ndarray,
) -> None:
    n, m = values.shape
    on_market = inventory > 0
    # Products without stock are off the market: nobody can demand them.
    utility = np.where(on_market, values - prices, -np.inf)
    assigned = dict(pairs)
    for i in range(n):
        best_other = max(0.0, float(utility[i].max())) if m else 0.0
        if i in assigned:
            own = utility[i, assigned[i]]
            assert own >= best_other - EQ_TOL
        else:
            assert best_other <= EQ_TOL
    sold = sold_counts(pairs, m)
    unsold = sold < inventory
    np.testing.assert_allclose(prices[unsold], costs[unsold], atol=EQ_TOL)
    np.testing.assert_allclose(prices[~on_market], costs[~on_market], atol=0)
    assert (prices >= costs - EQ_TOL).all()


def test_walrasian_equilibrium_conditions_random() -> None:
    rng = np.random.default_rng(314)
    for _ in range(150):
        values, costs, inventory = random_market(rng)
        low, high = walrasian_prices(values, costs, inventory)
        assert low.shape == high.shape == costs.shape
        assert (low <= high + EQ_TOL).all()
        pairs = optimal_assignment(values, costs, inventory)
        assert_equilibrium(low, pairs, values, costs, inventory)
        assert_equilibrium(high, pairs, values, costs, inventory)


def test_walrasian_extremes_are_marginal_unit_values() -> None:
    # Each unit is a seller in the assignment game: its highest core payoff is its
    # marginal contribution W(inv) - W(inv - e_j), and the lowest price is what one
    # more unit of j would add, W(inv + e_j) - W(inv). Checked by brute force.
    rng = np.random.default_rng(2718)
    for _ in range(120):
        values, costs, inventory = random_market(rng, max_n=4, max_m=3, max_inv=2)
        low, high = walrasian_prices(values, costs, inventory)
        base = brute_welfare(values, costs, inventory)
        for j in range(len(inventory)):
            if inventory[j] == 0:
                assert low[j] == costs[j] and high[j] == costs[j]
                continue
            plus = inventory.copy()
            plus[j] += 1
            minus = inventory.copy()
            minus[j] -= 1
            expect_low = costs[j] + brute_welfare(values, costs, plus) - base
            expect_high = costs[j] + base - brute_welfare(values, costs, minus)
            assert low[j] == pytest.approx(expect_low, abs=1e-6)
            assert high[j] == pytest.approx(expect_high, abs=1e-6)


def test_walrasian_hand_examples() -> None:
    one = np.array([[10.0], [7.0]])
    cost = np.array([2.0])
    low, high = walrasian_prices(one, cost, np.array([1]))
    assert low == pytest.approx([7.0]) and high == pytest.approx([10.0])
    # Two units for two buyers: the lowest price falls to cost, the highest is the
    # weaker buyer's value.
    low, high = walrasian_prices(one, cost, np.array([2]))
    assert low == pytest.approx([2.0]) and high == pytest.approx([7.0])
    # A unit left over pins the price at cost.
    low, high = walrasian_prices(one, cost, np.array([3]))
    assert low == pytest.approx([2.0]) and high == pytest.approx([2.0])

    values = np.array([[10.0, 8.0], [6.0, 1.0]])
    low, high = walrasian_prices(values, np.zeros(2), np.array([1, 1]))
    assert low == pytest.approx([2.0, 0.0], abs=1e-9)
    assert high == pytest.approx([6.0, 4.0], abs=1e-9)

    # Zero inventory: price = cost, whatever the demand.
    low, high = walrasian_prices(values, np.array([1.0, 3.0]), np.array([1, 0]))
    assert low[1] == 3.0 and high[1] == 3.0
    assert low[0] == pytest.approx(6.0) and high[0] == pytest.approx(10.0)


# ---------------------------------------------------------------------------
# VCG
# ---------------------------------------------------------------------------


def test_vcg_second_price_auction() -> None:
    values = np.array([[10.0], [7.0], [5.0]])
    np.testing.assert_allclose(
        vcg_payments(values, np.array([0.0]), np.array([1])), [7.0, 0.0, 0.0]
    )
    np.testing.assert_allclose(
        vcg_payments(values, np.array([2.0]), np.array([1])), [7.0, 0.0, 0.0]
    )
    # Two units: both winners pay the highest losing bid.
    np.testing.assert_allclose(
        vcg_payments(values, np.array([0.0]), np.array([2])), [5.0, 5.0, 0.0]
    )
    # A buyer outbid by nobody pays the cost floor: the seller's reservation price.
    np.testing.assert_allclose(vcg_payments(values[:1], np.array([3.0]), np.array([1])), [3.0])


def test_vcg_hand_two_products() -> None:
    values = np.array([[10.0, 8.0], [6.0, 1.0]])
    np.testing.assert_allclose(
        vcg_payments(values, np.zeros(2), np.array([1, 1])), [0.0, 2.0], atol=1e-12
    )


def test_vcg_equals_lowest_walrasian_revenue() -> None:
    rng = np.random.default_rng(1983)
    for _ in range(250):
        values, costs, inventory = random_market(rng)
        n = values.shape[0]
        pay = vcg_payments(values, costs, inventory)
        low, _ = walrasian_prices(values, costs, inventory)
        pairs = optimal_assignment(values, costs, inventory)
        assert pay.shape == (n,)
        served = {i: j for i, j in pairs}
        revenue_low = sum(low[j] for _, j in pairs)
        assert pay.sum() == pytest.approx(revenue_low, abs=1e-6)
        for i in range(n):
            if i in served:
                j = served[i]
                assert pay[i] <= values[i, j] + TOL
                assert pay[i] >= costs[j] - TOL
                assert pay[i] == pytest.approx(low[j], abs=1e-6)
            else:
                assert pay[i] == 0.0


def test_revenue_benchmarks_are_ordered() -> None:
    rng = np.random.default_rng(99)
    strict = 0
    for _ in range(200):
        values, costs, inventory = random_market(rng)
        pairs = optimal_assignment(values, costs, inventory)
        served_cost = sum(costs[j] for _, j in pairs)
        vcg_profit = vcg_payments(values, costs, inventory).sum() - served_cost
        _, high = walrasian_prices(values, costs, inventory)
        high_profit = sum(high[j] - costs[j] for _, j in pairs)
        best = optimal_welfare(values, costs, inventory)
        assert vcg_profit <= high_profit + 1e-6
        assert high_profit <= best + 1e-6
        strict += vcg_profit < high_profit - 1e-6
    # The bounds differ on real instances, so the ordering check has teeth.
    assert strict > 10


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "costs", "inventory", "max_trades", "message"),
    [
        (np.ones(3), np.ones(3), np.ones(3, dtype=int), None, "values must be a 2-D"),
        (np.ones((2, 3)), np.ones(2), np.ones(3, dtype=int), None, "costs must have shape"),
        (np.ones((2, 3)), np.ones(3), np.ones(2, dtype=int), None, "inventory must have shape"),
        (
            np.array([[1.0, np.nan]]),
            np.ones(2),
            np.ones(2, dtype=int),
            None,
            "values must be finite",
        ),
        (
            np.array([[1.0, np.inf]]),
            np.ones(2),
            np.ones(2, dtype=int),
            None,
            "values must be finite",
        ),
        (
            np.ones((1, 2)),
            np.array([0.0, np.nan]),
            np.ones(2, dtype=int),
            None,
            "costs must be finite",
        ),
        (np.ones((1, 2)), np.ones(2), np.array([1, -1]), None, "inventory must be non-negative"),
        (np.ones((1, 2)), np.ones(2), np.array([1.5, 1.0]), None, "whole numbers"),
        (np.ones((1, 2)), np.ones(2), np.array(["a", "b"]), None, "inventory must be integers"),
        (np.ones((1, 2)), np.ones(2), np.ones(2, dtype=int), -1, "max_trades must be non-negative"),
        (np.ones((1, 2)), np.ones(2), np.ones(2, dtype=int), 1.5, "max_trades must be"),
    ],
)
def test_validation_errors(values, costs, inventory, max_trades, message) -> None:
    with pytest.raises(ValueError, match=message):
        optimal_welfare(values, costs, inventory, max_trades)
    if max_trades is None:
        for fn in (optimal_assignment, walrasian_prices, vcg_payments):
            with pytest.raises(ValueError, match=message):
                fn(values, costs, inventory)


def test_whole_float_inventory_is_accepted() -> None:
    values = np.array([[5.0], [4.0]])
    assert optimal_welfare(values, np.zeros(1), np.array([2.0])) == pytest.approx(9.0)


def test_batch_validation_errors() -> None:
    values = np.ones((2, 3, 2))
    costs = np.ones((2, 2))
    inventory = np.ones((2, 2), dtype=int)
    with pytest.raises(ValueError, match="3-D"):
        optimal_welfare_batch(np.ones((3, 2)), costs, inventory)
    with pytest.raises(ValueError, match="costs must have shape"):
        optimal_welfare_batch(values, np.ones(2), inventory)
    with pytest.raises(ValueError, match="inventory must be non-negative"):
        optimal_welfare_batch(values, costs, -inventory)
    with pytest.raises(ValueError, match="max_trades must be None, an int or shape"):
        optimal_welfare_batch(values, costs, inventory, np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="max_trades must be non-negative"):
        optimal_welfare_batch(values, costs, inventory, np.array([1, -2]))
    bad = values.copy()
    bad[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="values must be finite"):
        optimal_welfare_batch(bad, costs, inventory)
