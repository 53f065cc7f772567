"""Ratings: market scores, Elo against textbook updates, Bradley-Terry against analytic values
and an independent MM fit, bootstrap intervals, paired within-side leaderboards."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import norm, spearmanr

from tournaments.ratings import (
    DEFAULT_K,
    PairedLeaderboard,
    RatedPlayer,
    RatingScale,
    bootstrap_bt,
    bradley_terry,
    canonical_order,
    elo,
    elo_shuffled,
    expected_score,
    paired_leaderboard,
    ranks_from_intervals,
    score,
    to_table,
)

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def simulate(
    true: dict[str, float],
    sellers: list[str],
    buyers: list[str],
    games_per_pair: int,
    seed: int,
    kind: str = "beta",
) -> tuple[list[str], list[str], np.ndarray]:
    """Every seller meets every buyer; seller scores have mean P(seller beats buyer)."""
    rng = np.random.default_rng(seed)
    a, b, s = [], [], []
    for x in sellers:
        for y in buyers:
            p = 1.0 / (1.0 + 10.0 ** ((true[y] - true[x]) / 400.0))
            if kind == "beta":
                draws = rng.beta(4.0 * p, 4.0 * (1.0 - p), games_per_pair)
            else:
                draws = rng.binomial(1, p, games_per_pair).astype(float)
            a += [x] * games_per_pair
            b += [y] * games_per_pair
            s.append(draws)
    return a, b, np.concatenate(s)


def mm_bradley_terry(a: list[str], b: list[str], s: np.ndarray, iters: int = 20_000) -> dict:
    """Hunter's MM iteration for strengths gamma = 10 ** (R / 400), fractional wins allowed:
    gamma_i <- W_i / sum_j n_ij / (gamma_i + gamma_j). Mean rating pinned at 0."""
    players = sorted(set(a) | set(b))
    idx = {p: i for i, p in enumerate(players)}
    k = len(players)
    wins = np.zeros(k)
    n = np.zeros((k, k))
    for x, y, v in zip(a, b, s, strict=True):
        i, j = idx[x], idx[y]
        wins[i] += v
        wins[j] += 1.0 - v
        n[i, j] += 1
        n[j, i] += 1
    gamma = np.ones(k)
    for _ in range(iters):
        gamma = wins / (n / (gamma[:, None] + gamma[None, :])).sum(axis=1)
        gamma /= np.exp(np.log(gamma).mean())
    r = 400.0 * np.log10(gamma)
    return dict(zip(players, r - r.mean(), strict=True))


# ---------------------------------------------------------------------------
# score()
# ---------------------------------------------------------------------------


def test_score_hand_cases():
    assert score(10.0, 0.0, 10.0) == 1.0  # seller takes all of W*
    assert score(0.0, 10.0, 10.0) == 0.0  # buyers take all of W*
    assert score(5.0, 5.0, 10.0) == 0.5  # equal split
    assert score(7.0, 3.0, 10.0) == pytest.approx(0.7)
    assert score(30.0, 0.0, 10.0) == 1.0  # clipped above
    assert score(-30.0, 5.0, 10.0) == 0.0  # a loss-making seller, clipped below
    assert score(3.0, 1.0, 0.0) == 0.5  # no surplus to split: a draw
    assert score(3.0, 1.0, -2.0) == 0.5
    assert math.isnan(score(float("nan"), 1.0, 10.0))
    assert math.isnan(score(1.0, 1.0, float("nan")))
    assert isinstance(score(1.0, 1.0, 4.0), float)


def test_score_vectorised_and_broadcast():
    out = score(np.array([10.0, 0.0, 5.0, 8.0]), np.array([0.0, 10.0, 5.0, 0.0]), 10.0)
    np.testing.assert_allclose(out, [1.0, 0.0, 0.5, 0.9])
    out = score([[1.0], [2.0]], 0.0, [4.0, 0.0, 2.0])
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, [[0.625, 0.5, 0.75], [0.75, 0.5, 1.0]])


@given(
    st.floats(-1e6, 1e6),
    st.floats(-1e6, 1e6),
    st.floats(-1e6, 1e6),
)
def test_score_in_unit_interval_and_antisymmetric(profit, surplus, w_star):
    s = score(profit, surplus, w_star)
    assert 0.0 <= s <= 1.0
    # Swapping the two sides' gains swaps the scores.
    assert score(surplus, profit, w_star) == pytest.approx(1.0 - s, abs=1e-12)


# ---------------------------------------------------------------------------
# Elo
# ---------------------------------------------------------------------------


def test_expected_score_textbook():
    assert expected_score(1000, 1000) == 0.5
    assert expected_score(1200, 1000) == pytest.approx(1.0 / (1.0 + 10 ** (-0.5)))
    assert expected_score(1200, 1000) == pytest.approx(0.7597469, abs=1e-7)
    np.testing.assert_allclose(expected_score([1000, 1400], 1000), [0.5, 10 / 11])


def test_elo_textbook_win():
    r = elo(["A"], ["B"], [1.0], k=32)
    assert r == {"A": 1016.0, "B": 984.0}


def test_elo_textbook_favourite():
    e = 1.0 / (1.0 + 10 ** (-200 / 400))
    r = elo(["A"], ["B"], [1.0], k=32, start={"A": 1200.0, "B": 1000.0})
    assert r["A"] == pytest.approx(1200 + 32 * (1 - e))
    assert r["A"] - 1200 == pytest.approx(7.688, abs=1e-3)
    assert r["B"] == pytest.approx(1000 - 32 * (1 - e))
    # A draw costs the favourite points.
    r = elo(["A"], ["B"], [0.5], k=32, start={"A": 1200.0, "B": 1000.0})
    assert r["A"] == pytest.approx(1200 + 32 * (0.5 - e))
    assert r["A"] - 1200 == pytest.approx(-8.312, abs=1e-3)
    # Equal players drawing stay put.
    assert elo(["A"], ["B"], [0.5], k=32) == {"A": 1000.0, "B": 1000.0}


def test_elo_fractional_and_sequence_by_hand():
    assert elo(["A"], ["B"], [0.75], k=32) == {"A": 1008.0, "B": 992.0}
    # A beats B, then B beats A: the second update uses the ratings after the first.
    r = elo(["A", "B"], ["B", "A"], [1.0, 1.0], k=32)
    e_b = 1.0 / (1.0 + 10 ** ((1016 - 984) / 400))
    assert r["B"] == pytest.approx(984 + 32 * (1 - e_b))
    assert r["A"] == pytest.approx(1016 - 32 * (1 - e_b))
    assert r["A"] == pytest.approx(998.53, abs=0.01)


def test_elo_order_matters_and_sum_is_conserved():
    a, b, s = ["A", "B", "A", "C"], ["B", "A", "C", "B"], [1.0, 1.0, 0.2, 0.9]
    forward = elo(a, b, s, k=32)
    backward = elo(a[::-1], b[::-1], s[::-1], k=32)
    assert abs(forward["A"] - backward["A"]) > 1.0
    for r in (forward, backward):
        assert sum(r.values()) == pytest.approx(3000.0)


def test_elo_default_k_is_small():
    assert DEFAULT_K == 4.0
    assert elo(["A"], ["B"], [1.0]) == {"A": 1002.0, "B": 998.0}


def test_elo_reference_is_pinned():
    a, b, s = ["A", "B", "A"], ["B", "C", "C"], [0.9, 0.3, 0.6]
    free = elo(a, b, s, k=32)
    pinned = elo(a, b, s, k=32, reference="C", scale=RatingScale(initial=1500.0))
    assert pinned["C"] == 1500.0
    for p in "AB":
        assert pinned[p] - pinned["C"] == pytest.approx(free[p] - free["C"])


def test_canonical_order_makes_elo_schedule_free():
    rng = np.random.default_rng(3)
    match = np.repeat(np.arange(20), 5)
    index = np.tile(np.arange(5), 20)
    a = np.where(match % 2 == 0, "A", "B")
    b = np.where(match % 3 == 0, "C", "D")
    s = rng.uniform(size=100)
    reference = elo(a, b, s)
    perm = rng.permutation(100)
    arrived = (match[perm], index[perm], a[perm], b[perm], s[perm])
    assert elo(arrived[2], arrived[3], arrived[4]) != reference
    order = canonical_order(arrived[0], arrived[1])
    again = elo(arrived[2][order], arrived[3][order], arrived[4][order])
    assert again == reference


def test_elo_shuffled_is_the_mean_over_seeded_orders():
    a, b, s = simulate({"S": 100, "B": 0, "T": 50}, ["S", "T"], ["B"], 30, seed=1)
    a, b = np.array(a), np.array(b)
    rng = np.random.default_rng(7)
    expected = {p: 0.0 for p in ("S", "T", "B")}
    for _ in range(3):
        perm = rng.permutation(len(s))
        for p, v in elo(a[perm], b[perm], s[perm], k=16).items():
            expected[p] += v / 3
    got = elo_shuffled(a, b, s, shuffles=3, seed=7, k=16)
    for p in expected:
        assert got[p] == pytest.approx(expected[p], abs=1e-9)


def test_elo_shuffled_deterministic_and_stable_across_seeds():
    true = {"s0": 0.0, "s1": 150.0, "b0": 50.0, "b1": 250.0}
    a, b, s = simulate(true, ["s0", "s1"], ["b0", "b1"], 100, seed=2, kind="bernoulli")
    one = elo_shuffled(a, b, s, shuffles=1, seed=1)
    other = elo_shuffled(a, b, s, shuffles=1, seed=2)
    assert max(abs(one[p] - other[p]) for p in true) > 5.0  # single orders are noisy
    x = elo_shuffled(a, b, s, shuffles=200, seed=1)
    assert x == elo_shuffled(a, b, s, shuffles=200, seed=1)
    y = elo_shuffled(a, b, s, shuffles=200, seed=2)
    assert x != y
    assert max(abs(x[p] - y[p]) for p in true) < 3.0
    z = elo_shuffled(a, b, s, shuffles=200, seed=2, reference="s0")
    assert z["s0"] == 1000.0
    assert z["b1"] - z["s0"] == pytest.approx(y["b1"] - y["s0"])


# ---------------------------------------------------------------------------
# Bradley-Terry
# ---------------------------------------------------------------------------


def test_bt_two_players_analytic():
    # A scores 3/4 of the time: the MLE gap is 400 log10(3).
    r = bradley_terry(["A"] * 4, ["B"] * 4, [1.0, 1.0, 1.0, 0.0])
    assert r["A"] - r["B"] == pytest.approx(400 * math.log10(3), abs=0.01)
    # Fractional scores with the same mean give the same fit.
    f = bradley_terry(["A"] * 4, ["B"] * 4, [0.75] * 4)
    assert f["A"] - f["B"] == pytest.approx(r["A"] - r["B"], abs=1e-4)
    # Mean pinned when there is no reference; other units.
    assert (r["A"] + r["B"]) / 2 == pytest.approx(1000.0, abs=1e-9)
    g = bradley_terry(
        ["A"] * 4, ["B"] * 4, [0.75] * 4, scale=RatingScale(points=1.0, base=math.e, initial=0.0)
    )
    assert g["A"] - g["B"] == pytest.approx(math.log(3), abs=1e-5)


def test_bt_matches_independent_mm_fit():
    rng = np.random.default_rng(11)
    players = ["p0", "p1", "p2", "p3", "p4"]
    true = rng.normal(0, 150, 5)
    n = 3000
    i = rng.integers(5, size=n)
    j = (i + rng.integers(1, 5, size=n)) % 5
    p = 1 / (1 + 10 ** ((true[j] - true[i]) / 400))
    s = rng.beta(3 * p, 3 * (1 - p))
    a = [players[k] for k in i]
    b = [players[k] for k in j]
    fit = bradley_terry(a, b, s, scale=RatingScale(initial=0.0))
    ref = mm_bradley_terry(a, b, s)
    for q in players:
        assert fit[q] == pytest.approx(ref[q], abs=0.01)


def test_bt_reference_pinned_exactly_and_order_free():
    true = {"s0": 0.0, "s1": 120.0, "b0": 40.0, "b1": 300.0}
    a, b, s = simulate(true, ["s0", "s1"], ["b0", "b1"], 500, seed=4)
    r = bradley_terry(a, b, s, reference="s1", scale=RatingScale(initial=1000.0))
    assert r["s1"] == 1000.0
    perm = np.random.default_rng(9).permutation(len(s))
    shuffled = bradley_terry(np.array(a)[perm], np.array(b)[perm], s[perm], reference="s1")
    assert set(shuffled) == set(r)
    for p in r:
        assert shuffled[p] == pytest.approx(r[p], abs=1e-9)
    free = bradley_terry(a, b, s)
    assert np.mean(list(free.values())) == pytest.approx(1000.0, abs=1e-9)
    for p in r:
        assert r[p] - r["s0"] == pytest.approx(free[p] - free["s0"], abs=1e-6)


def test_bt_player_winning_everything_stays_finite():
    a = ["A"] * 50 + ["B"] * 50
    b = ["B"] * 50 + ["C"] * 50
    s = [1.0] * 50 + [0.6] * 50
    r = bradley_terry(a, b, s)
    assert all(math.isfinite(v) for v in r.values())
    assert r["A"] > r["B"] + 500
    assert r["B"] - r["C"] == pytest.approx(400 * math.log10(1.5), abs=0.5)
    rows = bootstrap_bt(a, b, s, rounds=20)
    assert all(math.isfinite(x.lower) and math.isfinite(x.upper) for x in rows)


def test_bt_recovers_known_strengths_bipartite():
    rng = np.random.default_rng(2024)
    sellers = ["s0", "s1", "s2", "s3"]
    buyers = ["b0", "b1", "b2", "b3"]
    values = rng.permutation(np.linspace(0, 400, 8)) + rng.uniform(-10, 10, 8)
    true = dict(zip(sellers + buyers, values, strict=True))
    a, b, s = simulate(true, sellers, buyers, 2000, seed=5)
    r = bradley_terry(a, b, s, reference="s0", scale=RatingScale(initial=true["s0"]))
    names = sellers + buyers
    rho = spearmanr([r[p] for p in names], [true[p] for p in names]).statistic
    assert rho == 1.0
    for p in names:
        assert r[p] == pytest.approx(true[p], abs=15.0)


def test_bootstrap_covers_truth_and_narrows_with_data():
    sellers = ["s0", "s1", "s2", "s3"]
    buyers = ["b0", "b1", "b2", "b3"]
    true = dict(zip(sellers + buyers, [0, 110, 230, 390, 60, 170, 280, 330], strict=True))
    widths = []
    for games, seed in ((250, 6), (4000, 7)):
        a, b, s = simulate(true, sellers, buyers, games, seed=seed)
        rows = bootstrap_bt(
            a, b, s, rounds=200, seed=1, reference="s0", scale=RatingScale(initial=0.0)
        )
        by = {row.player: row for row in rows}
        assert by["s0"].lower == by["s0"].upper == by["s0"].rating == 0.0
        covered = sum(by[p].lower <= true[p] <= by[p].upper for p in true if p != "s0")
        assert covered >= 6
        widths.append(np.mean([by[p].upper - by[p].lower for p in true if p != "s0"]))
        for row in rows:
            assert row.lower <= row.rating <= row.upper
            assert row.games == 4 * games
    # 16x the games: intervals about 4x narrower.
    assert widths[1] < 0.4 * widths[0]
    assert widths[1] > 0.1 * widths[0]


def test_bootstrap_interval_matches_normal_theory():
    # Two players, n Bernoulli games at p: the gap is 400 log10(p_hat / (1 - p_hat)), with
    # standard error 400 / ln(10) / sqrt(n p (1 - p)) by the delta method.
    n, p = 4000, 0.7
    s = np.random.default_rng(14).binomial(1, p, n).astype(float)
    rows = bootstrap_bt(["A"] * n, ["B"] * n, s, rounds=2000, seed=2, reference="B")
    a = next(r for r in rows if r.player == "A")
    p_hat = s.mean()
    se = 400 / math.log(10) / math.sqrt(n * p_hat * (1 - p_hat))
    assert a.rating - 1000 == pytest.approx(400 * math.log10(p_hat / (1 - p_hat)), abs=0.01)
    assert a.upper - a.lower == pytest.approx(2 * 1.96 * se, rel=0.08)
    half = bootstrap_bt(["A"] * n, ["B"] * n, s, rounds=2000, seed=2, reference="B", confidence=0.5)
    a50 = next(r for r in half if r.player == "A")
    assert a50.upper - a50.lower == pytest.approx(2 * 0.6745 * se, rel=0.1)


def test_bootstrap_is_seeded():
    a, b, s = simulate({"x": 0, "y": 80, "u": 40, "v": 10}, ["x", "y"], ["u", "v"], 300, seed=8)
    one = bootstrap_bt(a, b, s, rounds=50, seed=3)
    assert one == bootstrap_bt(a, b, s, rounds=50, seed=3)
    other = bootstrap_bt(a, b, s, rounds=50, seed=4)
    assert [r.rating for r in one] == [r.rating for r in other]
    assert [r.lower for r in one] != [r.lower for r in other]
    # Record order does not matter either.
    perm = np.random.default_rng(0).permutation(len(s))
    assert one == bootstrap_bt(np.array(a)[perm], np.array(b)[perm], s[perm], rounds=50, seed=3)


def test_rank_convention_constructed():
    lower = [10.0, 5.0, 0.0, -10.0, 4.5]
    upper = [20.0, 15.0, 4.0, -1.0, 6.0]
    # A: nobody's lower above 20; B: nobody above 15; C: A, B and E (4.5 > 4) above 4;
    # D: all four above -1; E: only A (10 > 6) above 6.
    np.testing.assert_array_equal(ranks_from_intervals(lower, upper), [1, 1, 4, 5, 2])
    # Strictly above: intervals that only touch share a rank.
    np.testing.assert_array_equal(ranks_from_intervals([1.0, 0.0], [2.0, 1.0]), [1, 1])
    np.testing.assert_array_equal(ranks_from_intervals([1.0, 0.0], [2.0, 0.99]), [1, 2])


def test_bootstrap_ranks_follow_intervals():
    true = {"top": 400.0, "twin1": 200.0, "twin2": 200.0, "low": 0.0, "opp": 200.0}
    a, b, s = simulate(true, ["top", "twin1", "twin2", "low"], ["opp"], 3000, seed=12)
    rows = bootstrap_bt(a, b, s, rounds=100, seed=0, reference="opp")
    by = {r.player: r for r in rows}
    assert [r.player for r in rows][0] == "top"
    assert by["top"].rank == 1
    assert by["twin1"].rank == by["twin2"].rank == 2  # overlapping intervals share a rank
    assert by["low"].rank == 5
    got = np.array([r.rank for r in rows])
    want = ranks_from_intervals([r.lower for r in rows], [r.upper for r in rows])
    np.testing.assert_array_equal(got, want)


def test_group_bootstrap_respects_duplicated_games():
    a, b, s = simulate({"x": 0, "y": 100, "u": 50}, ["x", "y"], ["u"], 500, seed=13, kind="b")
    base = {r.player: r.upper - r.lower for r in bootstrap_bt(a, b, s, rounds=200, seed=1)}
    # Every game recorded ten times: resampling games pretends there are 10x the data,
    # resampling the groups (the original games) does not.
    a10, b10, s10 = np.repeat(a, 10), np.repeat(b, 10), np.repeat(s, 10)
    group = np.repeat(np.arange(len(s)), 10)
    naive = bootstrap_bt(a10, b10, s10, rounds=200, seed=1)
    grouped = bootstrap_bt(a10, b10, s10, rounds=200, seed=1, group=group)
    for r in naive:
        assert r.upper - r.lower < 0.5 * base[r.player]
    for r in grouped:
        assert 0.75 * base[r.player] < r.upper - r.lower < 1.33 * base[r.player]
    # Record order does not matter.
    perm = np.random.default_rng(1).permutation(len(s10))
    assert grouped == bootstrap_bt(
        a10[perm], b10[perm], s10[perm], rounds=200, seed=1, group=group[perm]
    )
    # Tuples work as group labels too.
    tuples = [(int(g), "m") for g in group]
    assert bootstrap_bt(a10, b10, s10, rounds=20, seed=1, group=tuples) == bootstrap_bt(
        a10, b10, s10, rounds=20, seed=1, group=group
    )


def test_bootstrap_speed_12_players_1e5_games():
    rng = np.random.default_rng(0)
    true = np.linspace(0, 400, 12)
    n = 100_000
    i = rng.integers(6, size=n)
    j = rng.integers(6, size=n) + 6
    p = 1 / (1 + 10 ** ((true[j] - true[i]) / 400))
    s = rng.beta(4 * p, 4 * (1 - p))
    names = np.array([f"s{k}" for k in range(6)] + [f"b{k}" for k in range(6)])
    t0 = time.perf_counter()
    rows = bootstrap_bt(names[i], names[j], s, rounds=200, seed=0)
    elapsed = time.perf_counter() - t0
    assert len(rows) == 12
    assert elapsed < 10.0


def test_input_validation():
    with pytest.raises(ValueError, match="equal lengths"):
        bradley_terry(["A", "B"], ["B"], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        elo(["A"], ["B"], [1.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bootstrap_bt(["A"], ["B"], [float("nan")])
    with pytest.raises(ValueError, match="itself"):
        bradley_terry(["A", "A"], ["B", "A"], [1.0, 0.0])
    with pytest.raises(ValueError, match="reference"):
        bradley_terry(["A"], ["B"], [1.0], reference="Z")
    with pytest.raises(ValueError, match="shuffles"):
        elo_shuffled(["A"], ["B"], [1.0], shuffles=0)
    with pytest.raises(ValueError, match="group"):
        bootstrap_bt(["A", "A"], ["B", "B"], [1.0, 0.0], group=[1])
    assert bradley_terry([], [], []) == {}
    assert bootstrap_bt([], [], []) == []


def test_disconnected_schedule_warns():
    with pytest.warns(RuntimeWarning, match="never meet"):
        bradley_terry(["A", "C"], ["B", "D"], [1.0, 0.0])


# ---------------------------------------------------------------------------
# Paired within-side leaderboard
# ---------------------------------------------------------------------------


def paired_data(seed: int, markets: int = 2000, missing: float = 0.0):
    """Entries A > B > C > D, each beating the next on 70% of markets; a big market effect
    common to all entries (it cancels in the paired differences)."""
    rng = np.random.default_rng(seed)
    step = norm.ppf(0.7) * math.sqrt(2.0)  # P(N(step, 2) > 0) = 0.7
    effect = {"A": 3 * step, "B": 2 * step, "C": step, "D": 0.0}
    market_effect = rng.normal(0, 20, markets)
    entries, ids, values = [], [], []
    for e, mu in effect.items():
        v = market_effect + mu + rng.normal(0, 1, markets)
        keep = rng.uniform(size=markets) >= missing
        entries += [e] * int(keep.sum())
        ids += [("cfg", int(m)) for m in np.flatnonzero(keep)]
        values.append(v[keep])
    return entries, ids, np.concatenate(values), effect


def test_paired_leaderboard_recovers_order():
    entries, ids, values, effect = paired_data(seed=21)
    lb = paired_leaderboard(entries, ids, values, rounds=100, seed=0, reference="D")
    assert isinstance(lb, PairedLeaderboard)
    assert [r.player for r in lb.ratings] == ["A", "B", "C", "D"]
    assert [r.rank for r in lb.ratings] == [1, 2, 3, 4]
    by = {r.player: r for r in lb.ratings}
    assert by["D"].rating == 1000.0
    # Adjacent entries: 70% wins = 400 log10(7/3) points apart.
    gap = 400 * math.log10(0.7 / 0.3)
    assert by["C"].rating - by["D"].rating == pytest.approx(gap, abs=30)
    pairs = {(p.a, p.b): p for p in lb.pairs}
    assert set(pairs) == {("A", "B"), ("A", "C"), ("A", "D"), ("B", "C"), ("B", "D"), ("C", "D")}
    ab = pairs[("A", "B")]
    assert ab.markets == 2000
    assert ab.win_rate == pytest.approx(0.7, abs=0.03)
    assert ab.wins + ab.ties + ab.losses == ab.markets
    assert ab.win_rate == (ab.wins + ab.ties / 2) / ab.markets
    # The paired difference sees the small edge despite the huge market effect.
    assert ab.mean_diff == pytest.approx(effect["A"] - effect["B"], abs=0.1)
    assert 0 < ab.diff_lower < ab.mean_diff < ab.diff_upper
    assert pairs[("A", "D")].win_rate == pytest.approx(norm.cdf(3 * norm.ppf(0.7)), abs=0.02)
    rows = to_table(lb)
    assert [row["player"] for row in rows] == ["A", "B", "C", "D"]
    assert set(rows[0]) == {"rank", "player", "rating", "lower", "upper", "games"}
    assert lb.pair_rows()[0]["a"] == "A"


def test_paired_leaderboard_lower_is_better_and_missing_markets():
    entries, ids, values, _ = paired_data(seed=22, missing=0.2)
    lb = paired_leaderboard(entries, ids, values, rounds=50, higher_is_better=False)
    assert [r.player for r in lb.ratings] == ["D", "C", "B", "A"]
    # Only markets both entries have count.
    have: dict[str, set] = {}
    for e, m in zip(entries, ids, strict=True):
        have.setdefault(e, set()).add(m)
    for p in lb.pairs:
        assert p.markets == len(have[p.a] & have[p.b])
    by = {r.player: r for r in lb.ratings}
    assert by["A"].games == len(have["A"])
    # NaN values count as missing.
    nan_values = values.copy()
    first_a = [k for k, e in enumerate(entries) if e == "A"][:10]
    nan_values[first_a] = np.nan
    lb2 = paired_leaderboard(entries, ids, nan_values, rounds=10)
    ab = next(p for p in lb2.pairs if (p.a, p.b) == ("A", "B"))
    ab_all = next(p for p in lb.pairs if (p.a, p.b) == ("A", "B"))
    assert ab.markets == ab_all.markets - len(
        {ids[k] for k in first_a} & {m for e, m in zip(entries, ids, strict=True) if e == "B"}
    )


def test_paired_leaderboard_ties_count_half():
    ids = list(range(10)) * 3
    entries = ["X"] * 10 + ["Y"] * 10 + ["Z"] * 10
    base = np.arange(10.0)
    values = np.concatenate([base, base + 0.01, base - 5])
    lb = paired_leaderboard(entries, ids, values, tie_tol=0.05, rounds=20)
    pairs = {(p.a, p.b): p for p in lb.pairs}
    assert pairs[("X", "Y")].ties == 10
    assert pairs[("X", "Y")].win_rate == 0.5
    by = {r.player: r.rating for r in lb.ratings}
    assert by["X"] == pytest.approx(by["Y"], abs=1e-6)
    assert by["X"] > by["Z"] + 500
    strict = paired_leaderboard(entries, ids, values, rounds=20)
    assert {(p.a, p.b): p for p in strict.pairs}[("X", "Y")].losses == 10


def test_paired_leaderboard_seeded_and_rejects_duplicates():
    entries, ids, values, _ = paired_data(seed=23, markets=300)
    one = paired_leaderboard(entries, ids, values, rounds=30, seed=5)
    assert one == paired_leaderboard(entries, ids, values, rounds=30, seed=5)
    assert one != paired_leaderboard(entries, ids, values, rounds=30, seed=6)
    perm = np.random.default_rng(0).permutation(len(entries))
    shuffled = paired_leaderboard(
        [entries[k] for k in perm], [ids[k] for k in perm], values[perm], rounds=30, seed=5
    )
    assert shuffled == one
    with pytest.raises(ValueError, match="more than one value"):
        paired_leaderboard(["A", "A", "B"], [1, 1, 1], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="equal lengths"):
        paired_leaderboard(["A", "B"], [1, 1], [1.0])


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def test_to_table_orders_by_rating():
    rows = to_table({"b": 900.0, "a": 1100.0, "c": 1100.0})
    assert [r["player"] for r in rows] == ["a", "c", "b"]
    assert [r["rank"] for r in rows] == [1, 1, 3]
    rated = [
        RatedPlayer("x", 990.0, 980.0, 1000.0, 2, 10),
        RatedPlayer("y", 1010.0, 1005.0, 1015.0, 1, 10),
    ]
    rows = to_table(rated)
    assert [r["player"] for r in rows] == ["y", "x"]
    assert rows[1] == {
        "rank": 2,
        "player": "x",
        "rating": 990.0,
        "lower": 980.0,
        "upper": 1000.0,
        "games": 10,
    }


def test_a_player_absent_from_a_resample_is_left_out_not_pulled_to_the_prior():
    rng = np.random.default_rng(0)
    a = ["s1"] * 60 + ["s2"]
    b = ["b1"] * 30 + ["b2"] * 30 + ["b1"]
    scores = np.r_[rng.random(60) * 0.4 + 0.3, 1.0]
    rows = {r.player: r for r in bootstrap_bt(a, b, scores, rounds=300, seed=1, reference="s1")}
    # s2 played one game and won it: in about a third of the resamples it is absent, and
    # those rounds must not drag its lower bound down to where the ridge term would put it.
    assert rows["s2"].games == 1 and rows["s2"].lower > 1500


def test_paired_leaderboard_without_shared_markets_does_not_crash():
    board = paired_leaderboard(["a", "b"], [0, 1], [1.0, 1.0])
    assert board.pairs == () and {r.player for r in board.ratings} == {"a", "b"}


def test_clustered_bootstrap_widens_intervals_for_correlated_markets():
    # Each instance is met under five conditions with the same outcome: five copies of one
    # observation. Resampling conditions as if independent understates the uncertainty.
    rng = np.random.default_rng(3)
    entries, markets, values, clusters = [], [], [], []
    for inst in range(150):
        edge = rng.normal(0.05, 0.5)
        for cond in range(5):
            for name, v in (("a", edge), ("b", 0.0)):
                entries.append(name)
                markets.append((cond, inst))
                values.append(v)
                clusters.append(inst)
    plain = paired_leaderboard(entries, markets, values, rounds=300, seed=0)
    clustered = paired_leaderboard(entries, markets, values, rounds=300, seed=0, clusters=clusters)
    width = {}
    for name, board in (("plain", plain), ("clustered", clustered)):
        pair = board.pairs[0]
        width[name] = pair.diff_upper - pair.diff_lower
    assert width["clustered"] > 1.8 * width["plain"]  # about sqrt(5) = 2.24
    with pytest.raises(ValueError, match="same cluster"):
        paired_leaderboard(["a", "b"], [0, 0], [1.0, 2.0], clusters=[0, 1])
