"""Tournament analyses on synthetic records with planted effects: surplus split against direct
numpy, disclosure effect (paired on market index, NaN-aware), ratings, determinism."""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pytest
from scipy import stats

from agents.evaluate import mean_ci
from tournaments.analysis import (
    SPLIT_METRICS,
    analyze,
    bootstrap_mean_ci,
    disclosure_effect,
    ratings_table,
    side_leaderboards,
    surplus_split,
)
from tournaments.formatting import fmt, fmt_ci
from tournaments.tables import format_tables

CAPTURE = {"strong": 0.6, "weak": 0.3}  # share of W* the seller takes as profit
TOUGHNESS = {"alpha": 0.0, "beta": 0.05}  # share of W* the buyer claws back
EFFECT = 5.0  # mandatory profit = hidden profit + EFFECT + noise


def make_records(
    n: int = 200,
    seed: int = 0,
    sellers: tuple[str, ...] = ("strong", "weak"),
    buyers: tuple[str, ...] = ("alpha", "beta"),
    configs: tuple[str, ...] = ("small",),
) -> dict[str, np.ndarray]:
    """Records shaped like ``ResultStore.records()``: sellers x buyers x {hidden, mandatory} x
    configs x ``n`` markets. W* depends on the market index only (common random numbers), and
    the mandatory rule adds EFFECT (+ unit noise of mean exactly 0) to each market's hidden
    profit. mean_price is
    NaN on about 10% of markets, independently per rule."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {}

    def add(**kw) -> None:
        for k, v in kw.items():
            cols.setdefault(k, []).append(np.asarray(v))

    for config in configs:
        w_star = rng.uniform(50.0, 150.0, n)
        for seller in sellers:
            for buyer in buyers:
                share = CAPTURE[seller] - TOUGHNESS[buyer]
                hidden = share * w_star + rng.normal(0.0, 2.0, n)
                noise = rng.normal(0.0, 1.0, n)
                noise -= noise.mean()  # the sample effect is EFFECT exactly
                profits = {"hidden": hidden, "mandatory": hidden + EFFECT + noise}
                for rule, profit in profits.items():
                    surplus = 0.85 * w_star - profit + rng.normal(0.0, 2.0, n)
                    human = surplus * rng.uniform(0.3, 0.7, n)
                    price = 40.0 + 0.2 * profit + rng.normal(0.0, 1.0, n)
                    price[rng.random(n) < 0.1] = np.nan
                    add(
                        match_id=np.full(n, f"{seller}|{buyer}|{rule}|{config}", dtype=object),
                        market=np.arange(n, dtype=np.int64),
                        seller=np.full(n, seller, dtype=object),
                        buyer=np.full(n, buyer, dtype=object),
                        disclosure=np.full(n, rule, dtype=object),
                        config=np.full(n, config, dtype=object),
                        profit=profit,
                        buyer_surplus=surplus,
                        buyer_surplus_human=human,
                        buyer_surplus_agent=surplus - human,
                        w_star=w_star,
                        efficiency=(profit + surplus) / w_star,
                        capture=profit / w_star,
                        deal_rate=rng.uniform(0.5, 1.0, n),
                        seller_violations=rng.poisson(0.3, n).astype(float),
                        buyer_violations=rng.poisson(0.1, n).astype(float),
                        mean_price=price,
                    )
    return {k: np.concatenate(v) for k, v in cols.items()}


def take(records: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[idx] for k, v in records.items()}


def same(a, b) -> bool:
    """Equality of nested rows, NaN equal to NaN."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and same(dataclasses.asdict(a), dataclasses.asdict(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


@pytest.fixture(scope="module")
def records() -> dict[str, np.ndarray]:
    return make_records()


# ---------------------------------------------------------------------------
# Surplus split
# ---------------------------------------------------------------------------


def test_surplus_split_matches_direct_computation(records):
    rows = surplus_split(records)
    assert len(rows) == 2 * 2 * 2
    keys = [(r.config, r.disclosure, r.seller, r.buyer) for r in rows]
    assert keys == sorted(keys)
    for r in rows:
        sel = (
            (records["seller"] == r.seller)
            & (records["buyer"] == r.buyer)
            & (records["disclosure"] == r.disclosure)
            & (records["config"] == r.config)
        )
        assert r.n == sel.sum() == 200
        for m in SPLIT_METRICS:
            x = records[m][sel]
            mean, lower, upper = r.metrics[m]
            assert mean == pytest.approx(x.mean(), rel=1e-12, abs=1e-12)
            half = (upper - lower) / 2
            expect = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
            assert half == pytest.approx(expect, rel=1e-9, abs=1e-12)
            assert mean == pytest.approx((upper + lower) / 2, abs=1e-9)


def test_surplus_split_order_does_not_matter(records):
    perm = np.random.default_rng(1).permutation(len(records["market"]))
    assert same(surplus_split(take(records, perm)), surplus_split(records))


# ---------------------------------------------------------------------------
# Disclosure effect
# ---------------------------------------------------------------------------


def _row(rows, seller, buyer, metric):
    (r,) = [x for x in rows if (x.seller, x.buyer, x.metric) == (seller, buyer, metric)]
    return r


def test_disclosure_effect_recovers_planted_profit_effect(records):
    rows = disclosure_effect(records)
    assert len(rows) == 4 * 5  # 4 pairings x 5 metrics
    for seller in CAPTURE:
        for buyer in TOUGHNESS:
            r = _row(rows, seller, buyer, "profit")
            assert r.n == 200
            assert r.diff == pytest.approx(EFFECT, abs=1e-9)
            assert r.lower < EFFECT < r.upper
            assert r.lower > 0
            # Paired on the instance, the interval is as narrow as the unit noise allows,
            # far narrower than the spread of profit across markets.
            assert r.upper - r.lower < 0.5
            assert r.t_lower < EFFECT < r.t_upper
            assert r.treatment_mean - r.control_mean == pytest.approx(r.diff)


def test_disclosure_effect_pairs_by_market_index(records):
    base = disclosure_effect(records)
    perm = np.random.default_rng(7).permutation(len(records["market"]))
    assert same(disclosure_effect(take(records, perm)), base)

    # Drop markets 0..49 of strong|alpha under mandatory: only the 150 shared markets count.
    drop = (
        (records["seller"] == "strong")
        & (records["buyer"] == "alpha")
        & (records["disclosure"] == "mandatory")
        & (records["market"] < 50)
    )
    kept = take(records, np.flatnonzero(~drop)[::-1])  # reversed order as well
    r = _row(disclosure_effect(kept), "strong", "alpha", "profit")
    pair = (records["seller"] == "strong") & (records["buyer"] == "alpha")
    h = records["profit"][pair & (records["disclosure"] == "hidden")]
    m = records["profit"][pair & (records["disclosure"] == "mandatory")]
    assert r.n == 150
    assert r.diff == pytest.approx((m[50:] - h[50:]).mean(), rel=1e-12)
    # Other pairings are untouched.
    assert same(
        _row(disclosure_effect(kept), "weak", "beta", "profit"),
        _row(base, "weak", "beta", "profit"),
    )


def test_disclosure_effect_handles_nan_metric(records):
    rows = disclosure_effect(records)
    r = _row(rows, "weak", "alpha", "mean_price")
    pair = (records["seller"] == "weak") & (records["buyer"] == "alpha")
    h = records["mean_price"][pair & (records["disclosure"] == "hidden")]
    m = records["mean_price"][pair & (records["disclosure"] == "mandatory")]
    ok = np.isfinite(h) & np.isfinite(m)
    assert 0 < ok.sum() < 200
    assert r.n == ok.sum()
    assert r.diff == pytest.approx((m[ok] - h[ok]).mean(), rel=1e-12)
    assert all(
        math.isfinite(getattr(r, k)) for k in ("diff", "lower", "upper", "t_lower", "t_upper")
    )

    # A metric that is NaN everywhere gives a row with n = 0 and NaN figures, no error.
    blank = dict(records, mean_price=np.full(len(records["market"]), np.nan))
    r = _row(disclosure_effect(blank), "weak", "alpha", "mean_price")
    assert r.n == 0 and math.isnan(r.diff) and math.isnan(r.lower)


def test_disclosure_effect_skips_pairings_missing_a_rule(records):
    keep = ~((records["seller"] == "weak") & (records["disclosure"] == "hidden"))
    rows = disclosure_effect(take(records, np.flatnonzero(keep)))
    assert {r.seller for r in rows} == {"strong"}
    assert len(rows) == 2 * 5


def test_disclosure_effect_rejects_duplicate_markets(records):
    idx = np.concatenate([np.arange(len(records["market"])), [0]])
    with pytest.raises(ValueError, match="appears twice"):
        disclosure_effect(take(records, idx))


def test_bootstrap_interval_matches_loop_and_covers_mean():
    x = np.random.default_rng(3).normal(2.0, 1.0, 300)
    lo, hi = bootstrap_mean_ci(x, np.random.default_rng(0), rounds=500)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(x), size=(500, len(x)))
    ref = np.percentile(x[idx].mean(axis=1), [2.5, 97.5])
    assert (lo, hi) == (pytest.approx(ref[0]), pytest.approx(ref[1]))
    m, t_lo, t_hi = mean_ci(x)
    assert lo < m < hi
    assert hi - lo == pytest.approx(t_hi - t_lo, rel=0.15)


# ---------------------------------------------------------------------------
# Ratings
# ---------------------------------------------------------------------------


def test_ratings_table_orders_planted_strengths_and_pins_reference(records):
    rows = ratings_table(records, reference="weak", rounds=50)
    by = {r.player: r for r in rows}
    assert set(by) == {"strong", "weak", "alpha", "beta"}
    assert {r.side for r in rows if r.player in CAPTURE} == {"seller"}
    assert {r.side for r in rows if r.player in TOUGHNESS} == {"buyer"}
    assert by["strong"].bt > by["weak"].bt + 50
    assert by["strong"].elo > by["weak"].elo
    assert by["strong"].lower > by["weak"].upper
    assert by["strong"].rank < by["weak"].rank
    assert by["beta"].bt > by["alpha"].bt  # the tougher buyer
    assert by["weak"].bt == by["weak"].lower == by["weak"].upper == 1000.0
    assert by["weak"].elo == 1000.0
    assert all(r.games == 2 * 2 * 200 for r in rows)
    assert [r.bt for r in rows] == sorted((r.bt for r in rows), reverse=True)
    with pytest.raises(ValueError, match="reference"):
        ratings_table(records, reference="nobody", rounds=5)


def test_side_leaderboards_compare_on_identical_markets(records):
    boards = side_leaderboards(records, rounds=50)
    assert set(boards) == {"seller", "buyer"}
    sellers = boards["seller"]
    assert [r.player for r in sellers.ratings] == ["strong", "weak"]
    (pair,) = sellers.pairs
    assert (pair.a, pair.b) == ("strong", "weak")
    assert pair.markets == 2 * 2 * 200  # buyer x rule x market coordinates
    assert pair.win_rate > 0.95
    assert pair.diff_lower > 0
    assert [r.player for r in boards["buyer"].ratings] == ["beta", "alpha"]

    one = take(records, np.flatnonzero(records["seller"] == "strong"))
    assert set(side_leaderboards(one, rounds=5)) == {"buyer"}


# ---------------------------------------------------------------------------
# Determinism and text
# ---------------------------------------------------------------------------


def test_same_seed_same_tables_other_seed_other_intervals(records):
    a = analyze(records, seed=0, rating_rounds=30, effect_rounds=200)
    perm = np.random.default_rng(5).permutation(len(records["market"]))
    b = analyze(take(records, perm), seed=0, rating_rounds=30, effect_rounds=200)
    assert same(a.ratings, b.ratings)
    assert same(a.effect, b.effect)
    assert a.sides == b.sides
    assert format_tables(a) == format_tables(b)

    c = analyze(records, seed=1, rating_rounds=30, effect_rounds=200)
    assert [r.diff for r in c.effect] == [r.diff for r in a.effect]
    assert [r.lower for r in c.effect] != [r.lower for r in a.effect]
    assert [r.bt for r in c.ratings] == pytest.approx([r.bt for r in a.ratings])
    assert [r.lower for r in c.ratings] != [r.lower for r in a.ratings]


def test_format_tables_has_every_table(records):
    text = format_tables(analyze(records, rating_rounds=20, effect_rounds=100))
    for title in (
        "Ratings",
        "Within-side leaderboard: sellers",
        "Within-side leaderboard: buyers",
        "Paired comparisons: sellers",
        "Surplus split",
        "Efficiency and conduct",
        "Disclosure effect (mandatory - hidden)",
    ):
        assert f"{title}\n{'=' * len(title)}\n" in text
    assert "strong" in text and "[" in text and "nan" not in text


def test_empty_records():
    empty = take(make_records(n=1), np.zeros(0, np.int64))
    a = analyze(empty, rating_rounds=5, effect_rounds=5)
    assert a.ratings == () and a.split == () and a.effect == () and a.sides == {}
    assert "(no rows)" in format_tables(a)


def test_number_format():
    assert fmt(123.456) == "123.5"
    assert fmt(2.5) == "2.50"
    assert fmt(-0.0001) == "0.000"
    assert fmt(float("nan")) == "-"
    assert fmt_ci(-0.001, -3.07, 2.98) == "0.00 [-3.07, 2.98]"
    assert fmt_ci(0.5, 0.4, 0.6, point=False) == "[0.400, 0.600]"
    assert fmt_ci(float("nan"), 0.0, 1.0) == "-"


def test_effects_of_each_rule_and_pairings_the_rule_cannot_change_are_set_apart():
    from tournaments.analysis import analyze, informative_effects

    rng = np.random.default_rng(5)
    rows = []
    for rule in ("hidden", "mandatory", "voluntary"):
        for seller in ("aware", "blind"):
            for k in range(60):
                base = 100.0 + 10 * rng.standard_normal() * 0 + k
                lift = 5.0 if (seller == "aware" and rule != "hidden") else 0.0
                rows.append((seller, "agents", rule, "m", k, base + lift))
    rec = {
        "match_id": np.array([f"{s}|{b}|{r}|{c}" for s, b, r, c, _, _ in rows], dtype=object),
        "market": np.array([r[4] for r in rows]),
        "seller": np.array([r[0] for r in rows], dtype=object),
        "buyer": np.array([r[1] for r in rows], dtype=object),
        "disclosure": np.array([r[2] for r in rows], dtype=object),
        "config": np.array([r[3] for r in rows], dtype=object),
    }
    profit = np.array([r[5] for r in rows])
    for name in (
        "profit",
        "buyer_surplus",
        "buyer_surplus_agent",
        "buyer_surplus_human",
        "efficiency",
        "capture",
        "deal_rate",
        "seller_violations",
        "buyer_violations",
        "mean_price",
        "w_star",
    ):
        rec[name] = profit.copy() if name == "profit" else np.full(len(rows), 1.0)
    analysis = analyze(rec, rating_rounds=20, effect_rounds=100)
    assert {r.treatment for r in analysis.effect} == {"mandatory", "voluntary"}
    kept, omitted = informative_effects(analysis.effect)
    assert {r.seller for r in kept} == {"aware"}
    assert sorted(k[2] for k in omitted) == ["blind", "blind"]
    lifts = [r.diff for r in kept if r.metric == "profit"]
    assert lifts == [5.0, 5.0]
    text = format_tables(analysis)
    assert "Disclosure effect (mandatory - hidden)" in text
    assert "Disclosure effect (voluntary - hidden)" in text
    assert "Omitted: 1 pairings where the rule changed nothing" in text


def test_one_market_gives_no_interval_rather_than_a_point():
    from agents.evaluate import mean_ci
    from tournaments.analysis import bootstrap_mean_ci

    m, lo, hi = mean_ci(np.array([3.0]))
    assert m == 3.0 and np.isnan(lo) and np.isnan(hi)
    lo, hi = bootstrap_mean_ci(np.array([3.0]), np.random.default_rng(0))
    assert np.isnan(lo) and np.isnan(hi)


def _no_fallback(monkeypatch):
    """A background call that the child did not deliver fails instead of being made here,
    and so does Elo computed here after the call."""
    from tournaments import background
    from tournaments import ratings as rt

    def fell_back(*args, **kwargs):
        raise AssertionError("fell back")

    monkeypatch.setattr(background, "_resolve", fell_back)
    monkeypatch.setattr(rt, "elo_shuffled_games", fell_back)


def test_elo_in_a_second_process_gives_the_same_ratings(records, monkeypatch):
    here = analyze(records, rating_rounds=20, effect_rounds=50, background=False).ratings
    _no_fallback(monkeypatch)
    beside = analyze(records, rating_rounds=20, effect_rounds=50, background=True).ratings
    assert [(r.player, r.elo, r.bt, r.lower, r.upper) for r in here] == [
        (r.player, r.elo, r.bt, r.lower, r.upper) for r in beside
    ]


def test_a_background_call_returns_what_the_call_returns_here():
    from tournaments.background import Background

    assert Background("math:hypot", 3.0, 4.0).result() == 5.0
    assert Background("os:getpid").result() != os.getpid()  # made in another process
    # A child that fails leaves the call to this process, which raises as the call would.
    with pytest.raises(ValueError):
        Background("math:sqrt", -1.0).result()


def test_a_background_call_passes_large_arguments_through_pipes_not_files(tmp_path, monkeypatch):
    import tempfile
    import time

    from tournaments.background import Background

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _no_fallback(monkeypatch)
    big = np.arange(2_000_000, dtype=np.float64)  # 16 MB: far more than a pipe buffer
    t = time.perf_counter()
    call = Background("numpy:sum", big)
    started = time.perf_counter() - t
    assert list(tmp_path.iterdir()) == []  # nothing written to disk
    assert call.result() == big.sum()
    assert started < 2.0  # the caller does not wait for the child to read its arguments
