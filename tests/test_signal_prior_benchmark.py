"""benchmarks/signal_prior.py: what the seller's signal prior does to each config."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("signal_prior")


def test_the_prior_shrinks_noisy_signals_and_leaves_exact_ones(bench, capsys):
    rows = {r[0]: r for r in bench.shrink_table(40, 0.25)}
    assert set(rows) == set(bench.CONFIGS)
    noisy, retail = rows["noisy"], rows["retail"]
    assert noisy[3] == "100.0%" and float(noisy[4]) < 0.4  # 0.25^2 / 0.5^2 or so
    assert float(retail[4]) > 0.95 and float(rows["wholesale"][4]) < float(retail[4])
    assert float(noisy[2]) > 2 * float(retail[2])  # the spread: tastes and noise together
    none = bench.shrink_table(40, 0.0)  # no prior: nothing shrinks
    assert all(r[3] == "0.0%" and r[4] == "1.000" for r in none)
    assert bench.main(["--markets", "12", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "## signal prior 0.25 (12 markets per config)" in out and "| noisy" in out
    assert bench.main(["--markets", "12", "--prior", "-1"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
