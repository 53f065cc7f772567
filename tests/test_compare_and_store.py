"""Meta-strategies on known games, a store that grows by new matches, and arena compare."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from tests.test_tournament import assert_same_records, interrupted_run, records
from tournaments.cli import main
from tournaments.compare import CompareError, check_shared_markets, compare_runs, paired_configs
from tournaments.effects import disclosure_effect
from tournaments.metastrategy import opponent_weights, payoff_matrix, solve_zero_sum
from tournaments.records import Records
from tournaments.runner import run_tournament
from tournaments.spec import spec_from_dict
from tournaments.store import ResultStore, StoreError
from tournaments.types import STORED_METRICS


# ---------------------------------------------------------------------- meta-strategies
def test_nash_of_games_with_known_answers():
    # Matching pennies on the 0..1 score: both mix evenly, the value is one half.
    x, y, v = solve_zero_sum(np.array([[1.0, 0.0], [0.0, 1.0]]))
    np.testing.assert_allclose([x, y], [[0.5, 0.5], [0.5, 0.5]], atol=1e-9)
    assert v == pytest.approx(0.5)
    # Rock-paper-scissors: uniform, value one half.
    rps = np.array([[0.5, 0.0, 1.0], [1.0, 0.5, 0.0], [0.0, 1.0, 0.5]])
    x, y, v = solve_zero_sum(rps)
    np.testing.assert_allclose([x, y], np.full((2, 3), 1 / 3), atol=1e-9)
    assert v == pytest.approx(0.5)
    # A dominated column (the buyer never plays what gives the seller more everywhere)
    # and a 2x2 with a known mixed answer: p = (d - c) / (a - b - c + d).
    a = np.array([[0.8, 0.3, 0.9], [0.2, 0.6, 0.7]])
    x, y, v = solve_zero_sum(a)
    assert y[2] == pytest.approx(0.0, abs=1e-9)
    p = (0.6 - 0.2) / (0.8 - 0.3 - 0.2 + 0.6)
    np.testing.assert_allclose(x, [p, 1 - p], atol=1e-9)
    assert v == pytest.approx(p * 0.8 + (1 - p) * 0.2)
    with pytest.raises(ValueError, match="finite"):
        solve_zero_sum(np.array([[np.nan]]))


def _records(cells: dict[tuple[str, str], list[float]]) -> Records:
    """Rows whose seller score equals the given values (w_star = 1, buyer surplus 0)."""
    cols: dict[str, list] = {k: [] for k in ("match_id", "market", "seller", "buyer",
                                            "disclosure", "config", "profit", "buyer_surplus",
                                            "w_star")}  # fmt: skip
    for (s, b), scores in cells.items():
        for k, x in enumerate(scores):
            cols["match_id"].append(f"{s}|{b}|hidden|c")
            cols["market"].append(k)
            cols["seller"].append(s)
            cols["buyer"].append(b)
            cols["disclosure"].append("hidden")
            cols["config"].append("c")
            cols["profit"].append(2 * x - 1)  # score = 0.5 + profit / 2
            cols["buyer_surplus"].append(0.0)
            cols["w_star"].append(1.0)
    return Records.from_columns({k: np.asarray(v) for k, v in cols.items()})


def test_payoff_matrix_and_opponent_weights():
    rec = _records({("s1", "b1"): [0.9, 0.7], ("s1", "b2"): [0.2, 0.2],
                    ("s2", "b1"): [0.4, 0.4], ("s2", "b2"): [0.6, 0.6]})  # fmt: skip
    m = payoff_matrix(rec)
    assert m.sellers == ("s1", "s2") and m.buyers == ("b1", "b2")
    np.testing.assert_allclose(m.score, [[0.8, 0.2], [0.4, 0.6]])
    np.testing.assert_array_equal(m.markets, [[2, 2], [2, 2]])
    uni = opponent_weights(m, "seller", "uniform")
    assert uni == {"b1": 0.5, "b2": 0.5}
    nash = opponent_weights(m, "seller", "nash")
    _, y, _ = solve_zero_sum(m.score)
    assert list(nash.values()) == pytest.approx(list(y))
    # The buyer side's Nash weights are the sellers' equilibrium mixture.
    x, _, _ = solve_zero_sum(m.score)
    assert list(opponent_weights(m, "buyer", "nash").values()) == pytest.approx(list(x))
    # Prioritized: s1 scores 0.8 against b1 and 0.2 against b2, so b2 (its bane) weighs more.
    pri = opponent_weights(m, "seller", "prioritized", learner="s1")
    assert pri["b2"] > pri["b1"]
    assert pri["b2"] / pri["b1"] == pytest.approx((0.8 / 0.2) ** 2)
    mixed = opponent_weights(m, "seller", "prioritized", learner="s1", uniform_mix=1.0)
    assert mixed == pytest.approx(uni)
    assert sum(opponent_weights(m, "buyer", "prioritized", learner="b2",
                                uniform_mix=0.3).values()) == pytest.approx(1.0)  # fmt: skip
    with pytest.raises(ValueError, match="meta-strategy"):
        opponent_weights(m, "seller", "elo")


# ---------------------------------------------------------------------- the store grows
SPEC = {
    "tournament": {
        "name": "grow",
        "seed": 2,
        "markets": 50,
        "sellers": ["posted_price"],
        "buyers": ["truthful"],
        "disclosure": ["hidden"],
        "transcripts": 1,
    },
    "populations": {"mix": "human=noisy_human,agent=strategic"},
    "configs": {"a": {"buyers": 4, "products": 2, "turns": 6, "agent_share": 0.5}},
}


def _spec(**t):
    return spec_from_dict({**SPEC, "tournament": {**SPEC["tournament"], **t}})


def test_a_store_extended_by_entries_plays_only_the_new_matches(tmp_path):
    small = _spec()
    big = _spec(sellers=["posted_price", "greedy_matcher"], buyers=["truthful", "haggler"])
    run_tournament(small, tmp_path / "grown", use_ray=False, progress=False, unit_markets=25)
    with pytest.raises(StoreError, match="different spec"):
        run_tournament(big, tmp_path / "grown", use_ray=False, progress=False, unit_markets=25)
    out = run_tournament(big, tmp_path / "grown", use_ray=False, progress=False,
                         unit_markets=25, extend=True)  # fmt: skip
    assert out.units_total == 8 and out.units_run == 6  # 3 new matches of 2 units
    again = run_tournament(big, tmp_path / "grown", use_ray=False, progress=False,
                           unit_markets=25, extend=True)  # fmt: skip
    assert again.units_run == 0
    run_tournament(big, tmp_path / "whole", use_ray=False, progress=False, unit_markets=25)
    assert_same_records(records(tmp_path / "grown"), records(tmp_path / "whole"))
    store = ResultStore.open(tmp_path / "grown")
    try:
        assert store.spec() == big
    finally:
        store.close()
    # Not an extension: another seed, or an entry dropped, is refused even with extend.
    for other in (_spec(seed=3, sellers=list(big.sellers), buyers=list(big.buyers)), small):
        with pytest.raises(StoreError, match="different spec"):
            run_tournament(other, tmp_path / "grown", use_ray=False, progress=False,
                           unit_markets=25, extend=True)  # fmt: skip


def _legacy_folder(folder) -> None:
    """An empty run folder in the layout of older versions: one row per market."""
    folder.mkdir(parents=True)
    cols = ", ".join(f"{m} REAL" for m in STORED_METRICS)
    with sqlite3.connect(folder / "results.sqlite") as conn:
        conn.execute(
            f"CREATE TABLE markets (match INTEGER NOT NULL, market INTEGER NOT NULL, {cols}, "
            "PRIMARY KEY (match, market)) WITHOUT ROWID"
        )


def test_unit_rows_and_the_older_market_rows_hold_the_same_run(tmp_path):
    spec = _spec(sellers=["posted_price", "greedy_matcher"], buyers=["truthful", "mix"])
    _legacy_folder(tmp_path / "old")
    # The older layout is resumed in that layout: half the units, then the rest.
    interrupted_run(spec, tmp_path / "old", unit_markets=20, after=5)
    run_tournament(spec, tmp_path / "old", use_ray=False, progress=False, unit_markets=20)
    run_tournament(spec, tmp_path / "new", use_ray=False, progress=False, unit_markets=20)
    stores = [ResultStore.open(tmp_path / n) for n in ("old", "new")]
    try:
        old, new = stores
        assert (old.layout.legacy, new.layout.legacy) == (True, False)
        tables = {n: {r[0] for r in s.conn.execute("SELECT name FROM sqlite_master")}
                  for n, s in zip(("old", "new"), stores, strict=True)}  # fmt: skip
        assert "markets" in tables["old"] and "unit_rows" not in tables["old"]
        assert "unit_rows" in tables["new"] and "markets" not in tables["new"]
        assert_same_records(old.records(), new.records())
        assert_same_records(old.records(("profit",)), new.records(("profit",)))
        assert old.counts() == new.counts() == (4 * 50, 4 * 3)
        assert list(old._typed_rows()) == list(new._typed_rows())
        match = spec.matches()[3].match_id
        for market in (0, 19, 20, 49):
            assert old.market_row(match, market) == new.market_row(match, market) is not None
        assert new.market_row(match, 50) is None and new.market_row("nope", 0) is None
        for n, s in zip(("old", "new"), stores, strict=True):
            s.export_csv(tmp_path / f"{n}.csv")
        assert (tmp_path / "old.csv").read_text() == (tmp_path / "new.csv").read_text()
    finally:
        for s in stores:
            s.close()


def test_a_unit_row_of_the_wrong_length_is_one_clear_error(tmp_path, capsys):
    run_tournament(_spec(), tmp_path / "run", use_ray=False, progress=False, unit_markets=25)
    with sqlite3.connect(tmp_path / "run" / "results.sqlite") as conn:
        conn.execute("UPDATE unit_rows SET profit = ? WHERE start = 25", (b"\0" * 16,))
    store = ResultStore.open(tmp_path / "run")
    try:
        with pytest.raises(StoreError, match="profit of a unit of 25 markets has 16 bytes"):
            store.records()
        assert len(store.records(("w_star",)).market) == 50  # other columns still read
    finally:
        store.close()
    code = main(["report", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("arena: error:")
    assert "16 bytes" in err[0]


# ---------------------------------------------------------------------- arena compare
def _run(tmp_path, name, **t):
    folder = tmp_path / name
    run_tournament(_spec(**t), folder, use_ray=False, progress=False)
    store = ResultStore.open(folder)
    try:
        return folder, store.meta(), store.records()
    finally:
        store.close()


def test_compare_pairs_runs_market_by_market(tmp_path):
    kw = {"sellers": ["greedy_matcher", "disclosure_aware"],
          "buyers": ["mix"]}  # fmt: skip
    _, meta_h, hidden = _run(tmp_path, "hidden", **kw)
    _, meta_m, mandatory = _run(tmp_path, "mandatory", disclosure=["mandatory"], **kw)
    _, _, both = _run(tmp_path, "both", disclosure=["hidden", "mandatory"], **kw)
    check_shared_markets(meta_h, meta_m)
    rows = compare_runs(hidden, mandatory, by=("seller", "buyer", "config"),
                        metrics=("profit", "score"), rounds=200)  # fmt: skip
    # Two runs, one rule each, paired per market = the disclosure effect within one run.
    effect = {(r.seller, r.metric): r for r in disclosure_effect(both, ("profit",), rounds=200)}
    for r in rows:
        if r.metric == "profit" and r.group != ("all",):
            e = effect[(r.group[0], "profit")]
            assert r.n == e.n == 50
            assert r.diff == pytest.approx(e.diff)
            assert (r.t_lower, r.t_upper) == pytest.approx((e.t_lower, e.t_upper))
    by = {(r.group[0], r.metric): r for r in rows}
    # The greedy matcher ignores the flag: exactly nothing changes.
    g = by[("greedy_matcher", "profit")]
    assert (g.diff, g.lower, g.upper, g.p, g.significant) == (0.0, 0.0, 0.0, 1.0, False)
    assert by[("disclosure_aware", "profit")].significant
    assert [r.group for r in rows[-2:]] == [("all",), ("all",)]
    # The same run twice: zero everywhere. Renaming pairs a changed name.
    same = compare_runs(hidden, hidden, metrics=("profit",))
    assert all(r.diff == 0 for r in same)
    renamed = compare_runs(hidden, mandatory, rename={"hidden": "mandatory"}, metrics=("profit",))
    assert [r.diff for r in renamed] == pytest.approx(
        [r.diff for r in rows if r.metric == "profit"]
    )
    with pytest.raises(CompareError, match="no pairing in common"):
        compare_runs(hidden, mandatory, metrics=("profit",))
    with pytest.raises(CompareError, match="several matches"):
        compare_runs(both, mandatory, by=("seller", "config"), metrics=("profit",))
    # A rename onto a name run A uses already: said so (it read "once  is ignored").
    with pytest.raises(CompareError, match="after --rename; rename onto a name that run"):
        compare_runs(both, mandatory, rename={"hidden": "mandatory"}, metrics=("profit",))


def test_compare_refuses_runs_that_met_other_markets(tmp_path, capsys):
    from tournaments.cli import main

    a, meta_a, _ = _run(tmp_path, "a")
    b, meta_b, _ = _run(tmp_path, "b", seed=5)
    with pytest.raises(CompareError, match="seeds 2 and 5"):
        check_shared_markets(meta_a, meta_b)
    data = {**SPEC, "configs": {"a": {"buyers": 5, "products": 2, "turns": 6, "agent_share": 0.5}}}
    c = tmp_path / "c"
    run_tournament(spec_from_dict(data), c, use_ray=False, progress=False)
    assert main(["compare", str(a), str(c)]) == 2
    assert "differs in buyers" in capsys.readouterr().err
    assert main(["compare", str(a), str(b)]) == 2
    assert main(["compare", str(a), str(a), "--by", "colour"]) == 2
    assert main(["compare", str(a), str(a), "--metrics", "profit,score",
                 "--csv", str(tmp_path / "d.csv")]) == 0  # fmt: skip
    out = capsys.readouterr()
    assert "posted_price|truthful|hidden|a" in out.out and "Holm" in out.out
    assert len((tmp_path / "d.csv").read_text().splitlines()) == 1 + 2 + 2
    assert all(line.startswith("arena: error: ") for line in out.err.strip().splitlines())


def test_compare_refuses_configs_that_a_pairing_without_config_makes_meet(tmp_path, capsys):
    """With --by leaving out config, the matches of config 'a' (6 turns) were paired with
    those of config 'b' (9 turns) market by market, though their markets differ."""
    a, _, rec_a = _run(tmp_path, "a")
    data = {**SPEC, "configs": {"b": {**SPEC["configs"]["a"], "turns": 9}}}
    b = tmp_path / "b"
    run_tournament(spec_from_dict(data), b, use_ray=False, progress=False)
    by = "seller,buyer,disclosure"
    assert main(["compare", str(a), str(b), "--by", by]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "configs 'a' of RUN_A and 'b' of RUN_B, paired" in err[0]
    assert "differs in turns" in err[0]
    # The same structure under another name pairs, with config left out or renamed.
    data["configs"] = {"b": SPEC["configs"]["a"]}
    same = tmp_path / "same"
    run_tournament(spec_from_dict(data), same, use_ray=False, progress=False)
    assert main(["compare", str(a), str(same), "--by", by]) == 0
    assert main(["compare", str(a), str(same), "--rename", "a=b"]) == 0
    assert paired_configs(rec_a, rec_a, by=by.split(",")) == [("a", "a")]


def test_compare_refuses_a_negative_bootstrap_seed_as_a_flag(tmp_path, capsys):
    a, _, _ = _run(tmp_path, "a")
    with pytest.raises(SystemExit) as exit_:
        main(["compare", str(a), str(a), "--seed", "-1"])
    assert exit_.value.code == 2
    assert "argument --seed: expected a non-negative integer" in capsys.readouterr().err
