"""benchmarks/generalization.py: its checks count what its tables say, on a tiny run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from agents.rl import checkpoint
from agents.rl.policies import RLBuyer, RLSeller


@pytest.fixture(scope="module")
def gen(load_benchmark):
    return load_benchmark("generalization")


def test_paired_differences_get_a_t_interval(gen):
    rng = np.random.default_rng(0)
    a, b = rng.normal(3, 2, 50), rng.normal(2, 2, 50)
    m, lo, hi = gen._paired(a, b)
    d = a - b
    want = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert m == pytest.approx(d.mean()) and (lo, hi) == pytest.approx(want)


def test_the_capture_check_compares_with_the_trained_mean_and_with_retail(gen):
    """Wholesale's large ratio lifts the trained mean so high that retail itself fails the
    first check; the second compares every held-out market with retail."""
    ratios = {"retail": 1.0, "wholesale": 3.0, "large": 0.95, "uncorrelated": 0.85}
    capture = {(c, b, r): ratios.get(c, 1.0) for c in gen.CONFIGS for b, r in gen.BUYERS}
    rows = gen.capture_check(capture)
    assert len(rows) == len(gen.CONFIGS) * len(gen.BUYERS)
    by = {(row[0], row[2]): row for row in rows}
    retail, large, unc = (
        by[("retail", "truthful")],
        by[("large", "truthful")],
        by[("uncorrelated", "truthful")],
    )
    assert retail[1] == "trained" and large[1] == "held out"
    assert retail[4] == "2.000" and retail[6] == "NO"  # 1.0 < 0.9 x mean(1, 3)
    assert large[6] == "NO" and large[9] == "yes"  # 0.95 >= 0.9 x 1.0
    assert unc[9] == "NO"  # 0.85 < 0.9
    assert gen._ratio(1.0, 0.0) != gen._ratio(1.0, 0.0)  # nan, not a crash


def test_a_tiny_run_prints_every_table_and_counts_its_targets(gen, tmp_path, capsys, monkeypatch):
    """The whole script on a cut-down grid (two configs, two buyer settings, four sellers,
    12 markets a cell): every table, and target lines that count their verdict columns."""
    monkeypatch.setattr(gen, "CONFIGS", {"retail": gen.RETAIL, "noisy": gen.CONFIGS["noisy"]})
    monkeypatch.setattr(gen, "IN_DISTRIBUTION", ("retail",))
    monkeypatch.setattr(gen, "BUYERS", (("truthful", "hidden"), (gen.MIXED, "mandatory")))
    monkeypatch.setattr(gen, "SCRIPTED_BUYERS", ("truthful", "strategic"))
    sellers = ("rl_seller", "greedy_matcher", "assignment_matcher", "posted_price", "oracle")
    monkeypatch.setattr(gen, "SELLERS", sellers)
    runs = []
    for seed in (3, 4):
        torch.manual_seed(seed)
        run = checkpoint.save(
            tmp_path / f"seed{seed}",
            RLSeller(hidden=8),
            name="s",
            training={"seed": seed, "iterations": 7},
        )
        runs.append(str(run))
    torch.manual_seed(5)
    fresh = str(checkpoint.save(tmp_path / "buyer", RLBuyer(hidden=8), name="b"))
    shipped_buyer = str(gen.SHIPPED / "rl_buyer")
    out = tmp_path / "gen.json"
    argv = ["--markets", "12", "--json", str(out), "--seed-runs", *runs, "--candidates", *runs]
    argv += ["--buyer-candidates", shipped_buyer, fresh]
    assert gen.main(argv) == 0
    printed = capsys.readouterr().out
    tables = json.loads(out.read_text())
    cells = len(gen.CONFIGS) * len(gen.BUYERS)
    assert len(tables["profit"]["rows"]) == len(tables["quality"]["rows"]) == cells
    beats = tables["profit"]["header"].index("beats all")
    yes = sum(row[beats] == "yes" for row in tables["profit"]["rows"])
    assert f"beats every scripted seller (paired CI above 0) in {yes} of {cells} cells" in printed
    held_out = (len(gen.CONFIGS) - len(gen.IN_DISTRIBUTION)) * len(gen.BUYERS)
    capture = tables["capture"]
    k = capture["header"].index(">= 0.9 of retail")
    near = sum(r[k] == "yes" for r in capture["rows"] if r[1] == "held out")
    assert f"the ratio on retail in {near} of {held_out} cells" in printed
    assert tables["targets"][0].startswith("rl_seller beats every scripted seller")
    # ... and against the baselines before the assignment matcher: every lower bound but
    # its own above 0.
    header = tables["profit"]["header"]
    earlier = [header.index(f"- {s}") for s in ("greedy_matcher", "posted_price")]
    lower = [
        [float(r[k].split("[")[1].split(",")[0]) for k in earlier] for r in tables["profit"]["rows"]
    ]
    verdict = header.index("beats all but assignment_matcher")
    assert [r[verdict] for r in tables["profit"]["rows"]] == [
        "yes" if all(x > 0 for x in row) else "NO" for row in lower
    ]
    above = sum(all(x > 0 for x in row) for row in lower)
    assert above >= yes
    assert (
        f"every one but assignment_matcher (the baselines before it) in {above} of {cells}"
        in printed
    )
    buyer = tables["buyer"]
    assert len(buyer["rows"]) == len(gen.CONFIGS)
    h = buyer["header"]
    for row in buyer["rows"]:
        by_rl = float(row[h.index("rl_buyer vs rl_seller")])
        best = float(row[h.index("its surplus vs rl_seller")])
        assert (row[h.index(">= 1.2x vs rl_seller")] == "yes") == (by_rl >= 1.2 * best - 0.1)
    for column, words in (
        (">= 1.2x vs rl_seller", "against rl_seller"),
        (">= best vs scripted", "(mean)"),
        ("above the best vs scripted (CI)", "(paired CI above 0)"),
    ):
        met = sum(r[h.index(column)] == "yes" for r in buyer["rows"])
        assert f"{words} in {met} of {len(gen.CONFIGS)} configs" in printed
    # A buyer checkpoint is scored as rl_buyer is: the shipped one, given by its path,
    # repeats rl_buyer's rows; an untrained one does not.
    scored = tables["buyer candidates"]
    assert scored["header"] == ["buyer", *h]
    assert [r[0] for r in scored["rows"]] == [shipped_buyer] * 2 + [fresh] * 2
    assert [r[1:] for r in scored["rows"][:2]] == buyer["rows"]
    assert [r[1:] for r in scored["rows"][2:]] != buyer["rows"]
    candidates = tables["candidates"]["rows"]
    assert [r[0] for r in candidates] == ["rl_seller", *runs]
    assert candidates[0][-1] == f"{yes} of {cells}"
    assert sum(int(k) for k in candidates[0][1:-1]) == yes
    missed = tables["missed cells"]["rows"]
    for row in candidates:  # every cell is met or listed, once
        listed = [m for m in missed if m[0] == row[0]]
        assert len(listed) + int(row[-1].split()[0]) == cells
        assert len({tuple(m[1:3]) for m in listed}) == len(listed)
    profit = tables["profit"]
    assert sum(m[0] == "rl_seller" for m in missed) == cells - yes > 0
    for config, buyers, closest, diff in (m[1:] for m in missed if m[0] == "rl_seller"):
        row = next(r for r in profit["rows"] if r[:2] == [config, buyers])
        assert row[beats] == "NO" and row[profit["header"].index(f"- {closest}")] == diff
    seeds = tables["seeds"]["rows"]
    shipped = json.loads((gen.SHIPPED / "rl_seller" / "config.json").read_text())["training"]
    mine = [str(shipped["seed"]), str(shipped["iterations"])]
    assert [r[1:3] for r in seeds[:3]] == [mine, ["3", "7"], ["4", "7"]]
    spread = abs(float(seeds[1][3]) - float(seeds[2][3]))
    assert seeds[3][0] == "spread at 7 iterations (2 seeds)" and len(seeds) == 4
    assert float(seeds[3][3]) == pytest.approx(spread, abs=0.011)


def test_the_family_wise_verdict_reads_intervals_at_bonferronis_level(gen, monkeypatch):
    """Synthetic cells whose differences are exact multiples of their standard error: a
    margin of 2.5 standard errors beats every baseline at 95% but not at the family-wise
    level of 6 cells (t quantile 2.9), 4.0 beats them at both, 1.5 at neither."""
    configs = {"retail": gen.RETAIL, "noisy": gen.CONFIGS["noisy"]}
    buyers = (("truthful", "hidden"), ("haggler", "hidden"), (gen.MIXED, "mandatory"))
    sellers = ("rl_seller", "greedy_matcher", "posted_price", "oracle")
    monkeypatch.setattr(gen, "CONFIGS", configs)
    monkeypatch.setattr(gen, "BUYERS", buyers)
    monkeypatch.setattr(gen, "SELLERS", sellers)
    assert gen.family_level() == pytest.approx(1 - 0.05 / 6)
    n = 50
    z = np.random.default_rng(0).normal(size=n)
    z = (z - z.mean()) / z.std(ddof=1)  # mean 0, sample sd 1: the margin is in se units
    se = 1 / np.sqrt(n)
    margins = {("retail", "truthful"): 2.5, ("retail", "haggler"): 4.0}
    cells = gen.Cells(n)
    for config in configs:
        for buyer, rule in buyers:
            base = np.full(n, 100.0)
            margin = margins.get((config, buyer), 1.5)
            for seller in sellers:
                profit = base + margin * se + z if seller == "rl_seller" else base
                cells.cache[(seller, buyer, rule, config)] = {
                    key: profit if key == "profit" else np.ones(n)
                    for key in ("profit", "match_quality", "efficiency", "capture", "trades")
                }
    rows, _, _ = gen.seller_tables(cells)
    # config, buyers, profit, two baselines' differences, oracle, three verdicts
    assert len(rows[0]) == 9
    verdicts = {(r[0], r[1]): (r[-2], r[-1]) for r in rows}
    assert verdicts[("retail", "truthful")] == ("yes", "NO")
    assert verdicts[("retail", "haggler")] == ("yes", "yes")
    assert verdicts[("noisy", "truthful")] == ("NO", "NO")
    q = stats.t.ppf(1 - 0.05 / 6 / 2, n - 1)
    assert 2.5 < q < 4.0 and stats.t.ppf(0.975, n - 1) < 2.5
    lines = gen.targets(
        {
            "profit": (
                ["beats all but assignment_matcher", "beats all", gen.FAMILY],
                [r[-3:] for r in rows],
            ),
            "capture": (["set", ">= 0.9", ">= 0.9 of retail"], []),
            "quality": (gen.QUALITY_HEADER, []),
        }
    )
    assert any("holding together at 95%" in line and "in 1 of 6 cells" in line for line in lines)
    assert any(line.startswith("rl_seller beats every") and "in 2 of 6" in line for line in lines)


def test_paired_means_over_defined_markets_keep_the_pairing_and_skip_only_undefined_ones(gen):
    """Without gaps the interval is ``_paired``'s; with a seller that trades in few markets
    the difference is of each one's mean over its own markets (a 0 filled in for a market
    without a trade would count as the worst match), and the interval agrees with a
    paired bootstrap over markets."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.9, 0.05, 400), rng.normal(0.88, 0.05, 400)
    assert gen.paired_nanmeans(a, b) == pytest.approx(gen._paired(a, b), rel=1e-9)
    b_gaps = np.where(rng.random(400) < 0.7, np.nan, b + 0.05)  # it trades in 30% only
    d, lo, hi = gen.paired_nanmeans(a, b_gaps)
    assert d == pytest.approx(a.mean() - np.nanmean(b_gaps))
    assert d < 0 < gen._paired(a, np.nan_to_num(b_gaps))[0]  # filling 0 reverses it
    idx = rng.integers(0, 400, (4000, 400))
    boot = np.mean(a[idx], axis=1) - np.nanmean(b_gaps[idx], axis=1)
    assert (hi - lo) / 2 == pytest.approx(1.96 * boot.std(), rel=0.1)
    assert np.isnan(gen.paired_nanmeans(a, np.full(400, np.nan))[0])
    m, lo2, hi2, n = gen.paired_where_both(a, b_gaps)
    both = np.isfinite(b_gaps)
    assert n == both.sum() and (m, lo2, hi2) == gen._paired(a[both], b_gaps[both])


def test_the_quality_table_puts_efficiency_and_trades_beside_match_quality(gen, monkeypatch):
    """Match quality is defined where a seller traded, so each row reads it with
    ``paired_nanmeans``, and also has it on the markets both traded in, the efficiency
    difference, and both sellers' markets with a trade and trades, with verdicts read
    from the intervals."""
    monkeypatch.setattr(gen, "CONFIGS", {"retail": gen.RETAIL})
    monkeypatch.setattr(gen, "BUYERS", (("haggler", "hidden"), ("truthful", "hidden")))
    monkeypatch.setattr(gen, "SELLERS", ("rl_seller", "greedy_matcher", "oracle"))
    cells = gen.Cells(40)
    _, quality, _ = gen.seller_tables(cells)
    h = gen.QUALITY_HEADER
    assert [r[:2] for r in quality] == [["retail", "haggler"], ["retail", "truthful"]]
    for row, buyer in zip(quality, ("haggler", "truthful"), strict=True):
        rl = cells.get("rl_seller", buyer, "hidden", "retail")
        g = cells.get("greedy_matcher", buyer, "hidden", "retail")
        mq = gen.paired_nanmeans(rl["match_quality"], g["match_quality"])
        *both, n = gen.paired_where_both(rl["match_quality"], g["match_quality"])
        eff = gen._paired(rl["welfare"] / rl["w_star"], g["welfare"] / g["w_star"])
        assert row[h.index("match quality - greedy_matcher")] == gen._fmt(*mq, digits=3)
        assert row[h.index("where both traded (markets)")] == f"{gen._fmt(*both, digits=3)} ({n})"
        shares = f"{(rl['trades'] > 0).mean():.2f} / {(g['trades'] > 0).mean():.2f}"
        assert row[h.index("markets traded in: rl_seller / greedy_matcher")] == shares
        assert row[h.index("efficiency - greedy_matcher")] == gen._fmt(*eff, digits=3)
        assert row[h.index("not below it")] == ("yes" if mq[2] >= 0 else "NO")
        assert row[h.index("above it")] == ("yes" if eff[1] > 0 else "NO")
        trades = f"{rl['trades'].mean():.2f} / {g['trades'].mean():.2f}"
        assert row[h.index("trades: rl_seller / greedy_matcher")] == trades


def test_the_match_quality_target_counts_the_verdict_columns(gen):
    h = gen.QUALITY_HEADER

    def row(below: bool, above: bool) -> list:
        r = ["x"] * len(h)
        r[h.index("not below it")] = "NO" if below else "yes"
        r[h.index("above it")] = "yes" if above else "NO"
        return r

    rows = [row(False, True), row(True, True), row(True, False), row(True, True)]
    tables = {
        "profit": (["beats all", "beats all but assignment_matcher", gen.FAMILY], []),
        "capture": (["set", ">= 0.9", ">= 0.9 of retail"], []),
        "quality": (h, rows),
    }
    lines = gen.targets(tables)
    assert (
        "rl_seller's match quality is not below the greedy matcher's (CI) in 1 of 4 cells;"
        " in 2 of the 3 others its efficiency is above the greedy matcher's (CI above 0)"
    ) in lines


def test_seeds_only_prints_the_seed_table_of_the_whole_run(gen, tmp_path, capsys, monkeypatch):
    """``--seeds-only``: the seeds table alone, the same rows as in the whole run, from
    the in-distribution cells alone; without ``--seed-runs`` it is one error line."""
    monkeypatch.setattr(gen, "CONFIGS", {"retail": gen.RETAIL, "noisy": gen.CONFIGS["noisy"]})
    monkeypatch.setattr(gen, "IN_DISTRIBUTION", ("retail",))
    monkeypatch.setattr(gen, "BUYERS", (("truthful", "hidden"),))
    torch.manual_seed(5)
    run = str(checkpoint.save(tmp_path / "s5", RLSeller(hidden=8), name="s5"))
    played = []
    get = gen.Cells.get
    monkeypatch.setattr(gen.Cells, "get", lambda self, *key: played.append(key) or get(self, *key))
    assert gen.main(["--markets", "8", "--seed-runs", run, "--seeds-only"]) == 0
    out = capsys.readouterr().out
    assert "## seeds" in out and "## profit" not in out and "## targets" not in out
    assert {key[3] for key in played} == {"retail"}
    assert {key[0] for key in played} == {"rl_seller", run}
    rows = gen.seed_spread(gen.Cells(8), [run])
    assert [r[0] for r in rows] == ["rl_seller", run]
    table = gen.tabulate(rows, headers=gen.SEEDS_HEADER, tablefmt="simple", disable_numparse=True)
    assert table in out
    assert gen.main(["--markets", "8", "--seeds-only"]) == 2
    err = capsys.readouterr().err
    assert "--seeds-only needs --seed-runs" in err and err.count("\n") == 1


def test_threads_set_the_torch_threads_and_zero_is_one_line_and_exit_2(gen, capsys):
    before = torch.get_num_threads()
    try:
        for threads in (2, 1):
            gen.use_threads(threads)
            assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    assert gen.main(["--markets", "12", "--threads", "0"]) == 2
    err = capsys.readouterr().err
    assert "--threads: 1 at least" in err and err.count("\n") == 1


def test_a_run_that_is_not_a_checkpoint_is_one_line_and_exit_2(gen, tmp_path, capsys):
    assert gen.main(["--markets", "12", "--candidates", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "nowhere: not a checkpoint directory" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("flag", "entry", "says"),
    [
        ("--buyer-candidates", "rl_seller", "a seller checkpoint, not a buyer"),
        ("--candidates", "rl_buyer", "a buyer checkpoint, not a seller"),
        ("--seed-runs", "rl_buyer", "a buyer checkpoint, not a seller"),
    ],
)
def test_a_checkpoint_of_the_other_side_is_one_line_and_exit_2(gen, capsys, flag, entry, says):
    assert gen.main(["--markets", "12", flag, str(gen.SHIPPED / entry)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_a_tampered_checkpoint_is_one_line_and_exit_2(gen, tmp_path, capsys):
    torch.manual_seed(0)
    run = checkpoint.save(tmp_path / "s", RLSeller(hidden=8), name="s")
    (run / "model.safetensors").write_bytes(b"not the weights")
    assert gen.main(["--markets", "12", "--candidates", str(run)]) == 2
    err = capsys.readouterr().err
    assert "do not match the hash" in err and err.count("\n") == 1


def test_the_buyer_table_also_compares_with_the_buyer_best_against_the_scripted_sellers(
    gen, monkeypatch
):
    """Besides the best scripted buyer against rl_seller (the issue's reference), the
    scripted buyer best against the scripted sellers is chosen on its own, and rl_buyer's
    surplus minus its, per market averaged over the scripted sellers, gets a paired CI."""
    monkeypatch.setattr(gen, "CONFIGS", {"retail": gen.RETAIL})
    monkeypatch.setattr(gen, "SCRIPTED_BUYERS", ("truthful", "haggler", "strategic"))
    monkeypatch.setattr(gen, "SELLERS", ("rl_seller", "greedy_matcher", "posted_price", "oracle"))
    cells = gen.Cells(30)
    (row,) = gen.buyer_table(cells)
    h = gen.BUYER_HEADER

    def per_market(buyer):
        return np.mean(
            [cells.get(s, buyer, "hidden", "retail")["buyer_surplus"] for s in gen.SELLERS[1:-1]],
            axis=0,
        )

    means = {b: per_market(b).mean() for b in gen.SCRIPTED_BUYERS}
    top = max(means, key=means.get)
    diff = gen._paired(per_market("rl_buyer"), per_market(top))
    assert row[h.index("best scripted buyer vs scripted sellers")] == f"{top}: {means[top]:.1f}"
    assert row[h.index("rl_buyer - it")] == gen._fmt(*diff)
    assert row[h.index("above the best vs scripted (CI)")] == ("yes" if diff[1] > 0 else "NO")
    best = row[h.index("best scripted buyer")]
    vs_rl = {
        b: cells.get("rl_seller", b, "hidden", "retail")["buyer_surplus"].mean()
        for b in gen.SCRIPTED_BUYERS
    }
    assert best == max(vs_rl, key=vs_rl.get)
    assert row[h.index("best buyer vs scripted sellers")] == f"{means[best]:.1f}"
