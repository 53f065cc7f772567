"""Bootstraps drawn per stratum (a tournament's configs), and bootstraps that cannot vary.

A spec plays a fixed number of markets per config. A bootstrap round that draws market
instances from all configs at once changes the mix of configs from round to round, which
adds variance the design does not have: a player strong in one config and weak in another
gets an interval several times too wide. Drawn per config, a round keeps the mix.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tournaments.ratings as rt
from arena.rewards import rating_score
from arena.seeding import keyed_sequence
from tests.test_analysis import make_records
from tournaments.analysis import _scored, ratings_table, side_leaderboards
from tournaments.compare import compare_runs
from tournaments.effects import bootstrap_mean_ci, clustered_mean_ci
from tournaments.league_measures import exploitability
from tournaments.ratings import bootstrap_bt, bradley_terry, paired_leaderboard
from tournaments.ratings.bootstrap import multiplicity_sampler
from tournaments.records import Records


@pytest.mark.parametrize("seed", range(20))
def test_each_stratum_draws_its_own_number_of_items_from_its_own_units(seed):
    rng = np.random.default_rng(seed)
    units = int(rng.integers(2, 60))
    size = rng.integers(1, 5, units)
    stratum = rng.integers(0, 4, units)
    draw = multiplicity_sampler(size, stratum)
    for _ in range(20):
        m = draw(rng)
        assert m.shape == (units,) and (m >= 0).all()
        for s in np.unique(stratum):
            assert m[stratum == s].sum() == size[stratum == s].sum()


def test_one_stratum_draws_exactly_as_no_strata():
    size = np.ones(50, np.int64)
    plain = multiplicity_sampler(size)(np.random.default_rng(7))
    one = multiplicity_sampler(size, np.zeros(50, np.int64))(np.random.default_rng(7))
    assert np.array_equal(plain, one)


def _two_config_games(markets: int = 100):
    """S1 scores 0.85 against B on every market of config a and 0.25 on every market of b;
    S2 scores 0.55 everywhere. No market varies within its config: all the spread a
    bootstrap could see is the mix of configs."""
    a, b, s, group, config = [], [], [], [], []
    for c, strong in (("a", 0.85), ("b", 0.25)):
        for m in range(markets):
            for player, score in (("S1", strong), ("S2", 0.55)):
                a.append(player)
                b.append("B")
                s.append(score)
                group.append((c, m))
                config.append(c)
    return a, b, np.array(s), group, config


def test_strata_take_the_config_mix_out_of_the_rating_intervals():
    a, b, s, group, config = _two_config_games()
    plain = {r.player: r for r in bootstrap_bt(a, b, s, group=group, rounds=200, seed=0)}
    strat = {
        r.player: r for r in bootstrap_bt(a, b, s, group=group, strata=config, rounds=200, seed=0)
    }
    assert strat["S1"].rating == plain["S1"].rating  # the point estimate is the same fit
    for p in ("S1", "S2", "B"):
        assert strat[p].upper - strat[p].lower < 1e-6
    assert plain["S1"].upper - plain["S1"].lower > 20.0  # the mix alone, drawn at random


def test_a_group_split_across_strata_is_refused():
    with pytest.raises(ValueError, match="one stratum"):
        bootstrap_bt(["a", "a"], ["b", "b"], [1.0, 0.0], group=[0, 0], strata=["x", "y"])
    with pytest.raises(ValueError, match="same stratum"):
        paired_leaderboard(["a", "b"], [0, 0], [1.0, 2.0], strata=["x", "y"])


def test_strata_without_groups_draw_games_within_each_stratum():
    # S1 meets B in strata a (always 0.85) and b (always 0.25), S2 meets B in c (0.55):
    # games drawn per stratum keep each stratum's games as they are.
    a = ["S1"] * 200 + ["S2"] * 100
    s = np.array([0.85] * 100 + [0.25] * 100 + [0.55] * 100)
    strata = ["a"] * 100 + ["b"] * 100 + ["c"] * 100
    plain = {r.player: r for r in bootstrap_bt(a, ["B"] * 300, s, rounds=100, seed=0)}
    strat = {
        r.player: r for r in bootstrap_bt(a, ["B"] * 300, s, strata=strata, rounds=100, seed=0)
    }
    assert strat["S1"].upper - strat["S1"].lower < 1e-6
    assert plain["S1"].upper - plain["S1"].lower > 10.0


def test_paired_leaderboard_draws_clusters_within_strata():
    entries, markets, values, clusters, strata = [], [], [], [], []
    for c, edge in (("a", 1.0), ("b", -0.5)):
        for m in range(80):
            for name, v in (("x", edge), ("y", 0.0)):
                entries.append(name)
                markets.append((c, m))
                values.append(v)
                clusters.append((c, m))
                strata.append(c)
    plain = paired_leaderboard(entries, markets, values, clusters=clusters, rounds=200, seed=1)
    strat = paired_leaderboard(
        entries, markets, values, clusters=clusters, strata=strata, rounds=200, seed=1
    )
    p, q = plain.pairs[0], strat.pairs[0]
    assert q.mean_diff == p.mean_diff == pytest.approx(0.25)
    assert q.diff_upper - q.diff_lower < 1e-9
    assert p.diff_upper - p.diff_lower > 0.1


def _two_config_records() -> dict[str, np.ndarray]:
    rec = make_records(n=60, seed=3, configs=("retail", "wholesale"))
    # The strong seller is far stronger in wholesale than in retail: its score depends on
    # the config, which a round drawing instances from both configs at once would mix.
    hit = (rec["seller"] == "strong") & (rec["config"] == "wholesale")
    rec["profit"] = np.where(hit, rec["profit"] + 0.3 * rec["w_star"], rec["profit"])
    return rec


def test_ratings_table_resamples_instances_within_each_config():
    rec = _two_config_records()
    rows = ratings_table(Records.from_columns(rec), rounds=100, seed=4)
    sc = _scored(Records.from_columns(rec))
    t = sc.rec.matches
    sellers = np.asarray(t.seller, dtype=object)[sc.rec.match]
    buyers = np.asarray(t.buyer, dtype=object)[sc.rec.match]
    common = {"group": sc.instance, "rounds": 100, "seed": 4}
    want = bootstrap_bt(sellers, buyers, sc.s, strata=sc.config[sc.instance], **common)
    mixed = bootstrap_bt(sellers, buyers, sc.s, **common)
    got = {(r.player, r.lower, r.upper) for r in rows}
    assert got == {(r.player, r.lower, r.upper) for r in want}
    assert got != {(r.player, r.lower, r.upper) for r in mixed}


def test_side_leaderboards_resample_instances_within_each_config(monkeypatch):
    rec = Records.from_columns(_two_config_records())
    board = side_leaderboards(rec, rounds=100, seed=2)["seller"]
    pair = board.pairs[0]
    # The same boards with the strata dropped: instances drawn from both configs at once.
    plain = rt.paired_leaderboard
    monkeypatch.setattr(rt, "paired_leaderboard", lambda *a, strata, **k: plain(*a, **k))
    mixed = side_leaderboards(rec, rounds=100, seed=2)["seller"].pairs[0]
    assert (pair.a, pair.b, pair.mean_diff) == (mixed.a, mixed.b, mixed.mean_diff)
    # strong - weak differs by config far more than within one: the mix dominated the width.
    assert pair.diff_upper - pair.diff_lower < 0.5 * (mixed.diff_upper - mixed.diff_lower)


def test_compare_all_row_resamples_instances_within_each_config():
    a = make_records(n=50, seed=1, configs=("retail", "wholesale"))
    b = {k: v.copy() for k, v in a.items()}
    b["profit"] = np.where(b["config"] == "retail", b["profit"] + 5.0, b["profit"])
    comp = compare_runs(Records.from_columns(a), Records.from_columns(b), rounds=300)
    row = next(r for r in comp.rows if r.group == ("all",) and r.metric == "profit")
    assert row.diff == pytest.approx(2.5)
    # Every retail instance gains exactly 5, every wholesale one 0, and a round keeps 50 of
    # each: the pooled mean cannot move.
    assert row.upper - row.lower < 1e-9


def test_one_market_gives_nan_bounds_and_one_shared_rank():
    rng = np.random.default_rng(1)
    a = rng.choice(["a", "b"], 300)
    s = (rng.random(300) < 0.6).astype(float)
    rows = bootstrap_bt(a, ["c"] * 300, s, group=["m0"] * 300, rounds=50)
    assert all(math.isnan(r.lower) and math.isnan(r.upper) and r.rank == 1 for r in rows)
    board = paired_leaderboard(["a", "b"], [1, 1], [1.0, 0.0])
    pair = board.pairs[0]
    assert math.isnan(pair.diff_lower) and math.isnan(pair.diff_upper)
    assert all(r.rank == 1 for r in board.ratings)
    # One market in each of two strata: still nothing to resample.
    two = bootstrap_bt(
        ["a", "a", "b", "b"], ["c"] * 4, [1.0, 0.0, 0.5, 1.0],
        group=[0, 0, 1, 1], strata=["x", "x", "y", "y"], rounds=50,
    )  # fmt: skip
    assert all(math.isnan(r.lower) for r in two)


def test_compare_all_row_of_one_instance_per_config_has_no_interval():
    a = make_records(n=1, seed=1, configs=("retail", "wholesale"))
    b = {k: v.copy() for k, v in a.items()}
    b["profit"] = b["profit"] + 1.0
    comp = compare_runs(Records.from_columns(a), Records.from_columns(b), rounds=100)
    row = next(r for r in comp.rows if r.group == ("all",) and r.metric == "profit")
    assert row.n > 1 and math.isnan(row.lower) and math.isnan(row.upper)


@pytest.mark.parametrize("l2", [0, -1.0, math.nan, math.inf, True, "1"])
def test_the_ridge_must_be_a_positive_number(l2):
    with pytest.raises(ValueError, match="l2 must be a positive"):
        bradley_terry(["a", "b"], ["b", "a"], [0.6, 0.3], l2=l2)


def test_clustered_mean_ci_of_singletons_in_one_stratum_is_the_plain_bootstrap():
    x = np.random.default_rng(0).normal(size=300)
    plain = bootstrap_mean_ci(x, np.random.default_rng(9))
    same = clustered_mean_ci(x, ["c"] * 300, range(300), np.random.default_rng(9))
    assert same == pytest.approx(plain, rel=1e-12)


def test_clustered_mean_ci_draws_within_strata_and_keeps_clusters_whole():
    # Stratum a always gives 1, stratum b always 0: drawn per stratum the mean cannot move.
    x = np.array([1.0] * 100 + [0.0] * 100)
    strata = ["a"] * 100 + ["b"] * 100
    lo, hi = clustered_mean_ci(x, strata, range(200), np.random.default_rng(1))
    assert hi - lo < 1e-12
    lo, hi = bootstrap_mean_ci(x, np.random.default_rng(1))
    assert hi - lo > 0.1
    # Each instance met under four rules with one outcome: four copies of one draw.
    rng = np.random.default_rng(2)
    one = rng.normal(size=100)
    x4, clusters = np.repeat(one, 4), np.repeat(np.arange(100), 4)
    wide = clustered_mean_ci(x4, ["a"] * 400, clusters, np.random.default_rng(3))
    narrow = bootstrap_mean_ci(x4, np.random.default_rng(3))
    assert wide[1] - wide[0] > 1.7 * (narrow[1] - narrow[0])  # about 2 = sqrt(4)
    assert all(math.isnan(v) for v in clustered_mean_ci(x[:2], ["a", "b"], [0, 1], rng))
    with pytest.raises(ValueError, match="one stratum"):
        clustered_mean_ci(x[:2], ["a", "b"], [0, 0], rng)


def test_exploitability_resamples_instances_within_configs():
    rec = make_records(n=40, seed=5, configs=("retail", "wholesale"))
    rec["profit"] = np.where(rec["config"] == "wholesale", 0.2 * rec["profit"], rec["profit"])
    rows = Records.from_columns(rec)
    response = rows.take(np.asarray(rows["buyer"] == "beta"))  # beta plays the best response
    pool = rows.take(np.asarray(rows["buyer"] == "alpha"))
    e = exploitability("seller", "strong", "beta", response, pool, seed=3)
    # The same differences, drawn as documented: (config, market) instances, per config.
    base = pool.take(np.asarray((pool["seller"] == "strong") & (pool["buyer"] == e.best_member)))
    mine = response.take(np.asarray(response["seller"] == "strong"))

    def keyed(r):
        s = 1.0 - rating_score(r["profit"], r["buyer_surplus"], r["w_star"])
        keys = zip(r["config"], r["disclosure"], r.market.tolist(), strict=True)
        return dict(zip(keys, s.tolist(), strict=True))

    a, b = keyed(mine), keyed(base)
    common = sorted(a)
    d = np.array([a[k] - b[k] for k in common])
    rng = np.random.default_rng(keyed_sequence(3, "exploitability\x1fstrong"))
    want = clustered_mean_ci(d, [k[0] for k in common], [(k[0], k[2]) for k in common], rng)
    assert (e.lower, e.upper) == want
    assert e.gain == pytest.approx(d.mean())
