"""benchmarks/departures.py: who offers the greedy matcher's pair, counted turn by turn."""

from __future__ import annotations

import dataclasses

import pytest

from agents import registry
from agents.evaluate import evaluate_batch
from arena.generator import generate_batch


@pytest.fixture(scope="module")
def dep(load_benchmark):
    return load_benchmark("departures")


@pytest.mark.parametrize("config", ["retail", "wholesale"])
def test_every_live_turn_is_counted_once_and_the_matcher_always_agrees_with_itself(dep, config):
    batch = generate_batch(dep.CONFIGS[config], dep.SEED, range(40))
    for name in ("greedy_matcher", "posted_price"):
        spy = dep.Agreement(registry.make(name, "seller", seed=0))
        got = evaluate_batch(batch, spy, registry.make_buyers("truthful", seed=0))
        assert spy.first[1] == 40  # every market's first turn
        assert spy.first[1] + spy.later[1] == got["turns_used"].sum()
        if name == "greedy_matcher":
            assert spy.first[0] == spy.first[1] and spy.later[0] == spy.later[1]
        else:  # a posted-price seller picks its pairs another way
            assert dep.Agreement.share(spy.first + spy.later) < 0.9


def test_the_table_and_a_bad_entry(dep, capsys):
    rows = dep.rows(["greedy_matcher", "posted_price"], "truthful", 20, configs=("retail",))
    assert [r[:2] for r in rows] == [["greedy_matcher", "retail"], ["posted_price", "retail"]]
    assert rows[0][2:5] == ["1.000", "1.000", "1.000"]
    assert rows[0][5] == "+0.0 [+0.0, +0.0]"
    assert float(rows[1][4]) < 1.0 and rows[1][5].startswith("-")
    assert dep.main(["no_such_seller", "--markets", "5"]) == 2
    assert dep.main(["greedy_matcher", "--buyers", "nobody", "--markets", "5"]) == 2
    assert dep.main(["greedy_matcher", "--threads", "0", "--markets", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all("error:" in line for line in err)
    for bad in (
        "greedy_matcher:patience",
        "greedy_matcher:patience=x",
        "greedy_matcher:nope=1",
        "greedy_matcher:grid=3.5",
    ):
        assert dep.main([bad, "--markets", "5"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and bad.split(":")[1].split("=")[0] in err


def test_a_seller_with_parameters(dep):
    patient = dep._seller("greedy_matcher:patience=0.04,markup=0.2")
    assert (patient.patience, patient.markup) == (0.04, 0.2)
    finer = dep._seller("greedy_matcher:grid=37,spare=0.3")  # a count stays a whole number
    assert finer.grid == 37 and isinstance(finer.grid, int) and finer.spare == 0.3
    assert dep.size_rows(["greedy_matcher:grid=37"], "truthful", 10, ("retail",))
    rows = dep.size_rows(
        ["greedy_matcher", "greedy_matcher:patience=0.04"], "truthful", 30, ("retail",)
    )
    assert rows[0][2] == "+0.0 [+0.0, +0.0]" and rows[1][2] != rows[0][2]


def test_sizes_grow_retail_toward_large(dep, capsys):
    assert dep.SIZES["retail"] == dep.CONFIGS["retail"]
    assert dep.SIZES["large: 16 buyers, 8 products, 20 turns"] == dep.CONFIGS["large"]
    for name, cfg in dep.SIZES.items():  # each differs from retail in size alone
        same = dataclasses.replace(cfg, buyers=8, products=4, turns=12)
        assert same == dep.CONFIGS["retail"], name
    from agents.rl.config import load_train_config

    jitter = dict(load_train_config("agents/rl/configs/seller_retail.toml").family.jitter)
    for name in ("8 buyers, 10 turns", "10 buyers, 5 products, 12 turns"):  # inside it
        cfg = dep.SIZES[name]
        for field, base in (("buyers", 8), ("products", 4), ("turns", 12)):
            lo, hi = jitter[field]
            assert base + lo <= getattr(cfg, field) <= base + hi, (name, field)
    sizes = ("retail", "8 products")
    rows = dep.size_rows(["greedy_matcher", "posted_price"], "truthful", 20, sizes=sizes)
    assert [r[:2] for r in rows] == [
        [s, m] for m in sizes for s in ("greedy_matcher", "posted_price")
    ]
    assert rows[0][2:] == ["+0.0 [+0.0, +0.0]", "+0.000 [+0.000, +0.000]"]
    assert rows[1][2].startswith("-")  # posted price trails the matcher against truthful buyers
    assert dep.main(["greedy_matcher", "--sizes", "--markets", "5"]) == 0
    assert "retail grown toward large" in capsys.readouterr().out


def test_sizes_against_another_baseline(dep, capsys):
    """``--baseline``: the size table's differences are taken from that seller's play on
    the same markets; a bad baseline, or one without ``--sizes``, is one clear error."""
    sizes = ("retail",)
    rows = dep.size_rows(
        ["assignment_matcher", "greedy_matcher"], "truthful", 30, sizes, "assignment_matcher"
    )
    assert rows[0][2:] == ["+0.0 [+0.0, +0.0]", "+0.000 [+0.000, +0.000]"]
    greedy = dep.size_rows(["assignment_matcher"], "truthful", 30, sizes)[0][2]
    assert rows[1][2] != "+0.0 [+0.0, +0.0]" and rows[1][2] != greedy
    m_vs_assign = float(rows[1][2].split()[0])
    m_vs_greedy = float(greedy.split()[0])
    assert m_vs_assign == pytest.approx(-m_vs_greedy, abs=0.06)  # one pair, both ways round
    assert dep.main(["greedy_matcher", "--sizes", "--markets", "5", "--baseline", "nobody"]) == 2
    assert "error:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        dep.main(["greedy_matcher", "--markets", "5", "--baseline", "assignment_matcher"])
    assert stop.value.code == 2 and "goes with --sizes" in capsys.readouterr().err
    assert dep.main(["greedy_matcher", "--sizes", "--markets", "5", "--baseline",
                     "assignment_matcher"]) == 0  # fmt: skip
    assert "profit - assignment_matcher" in capsys.readouterr().out
