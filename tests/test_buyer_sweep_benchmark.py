"""benchmarks/buyer_sweep.py: every setting of the scripted buyers' grid, and the table."""

from __future__ import annotations

import numpy as np
import pytest

from agents import registry
from arena.generator import generate_batch


@pytest.fixture(scope="module")
def sweep(load_benchmark):
    return load_benchmark("buyer_sweep")


def test_every_setting_builds_once_and_a_zero_margin_threshold_buyer_is_truthful(sweep):
    labels = [sweep.label(n, p) for n, p in sweep.GRID]
    assert len(set(labels)) == len(labels) == 64
    for name, params in sweep.GRID:
        buyer = registry.make(name, "buyer", seed=0, **params)
        assert all(getattr(buyer, k) == v for k, v in params.items())
    # An independent check of the sweep's play: requiring no surplus is accepting every
    # offer worth its price, which is what the truthful buyer does.
    batch = generate_batch(sweep.CONFIGS["retail"], sweep.SEED, range(40))
    seller = registry.make("greedy_matcher", "seller")
    np.testing.assert_array_equal(
        sweep.surplus(batch, seller, "threshold", {"margin": 0.0}),
        sweep.surplus(batch, seller, "truthful"),
    )


def test_the_table_ranks_the_settings_against_the_best_default(sweep, monkeypatch, capsys):
    grid = (("threshold", {"margin": 0.3}), ("strategic", {"target": 1.0, "margin": 0.0}))
    monkeypatch.setattr(sweep, "GRID", grid)
    assert sweep.main(["--seller", "greedy_matcher", "--markets", "30", "--configs", "retail",
                       "--top", "2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "2 settings" in out
    row = next(line for line in out.splitlines() if line.startswith("retail"))
    batch = generate_batch(sweep.CONFIGS["retail"], sweep.SEED, 30)
    seller = registry.make("greedy_matcher", "seller")
    defaults = {b: sweep.surplus(batch, seller, b).mean() for b in sweep.SCRIPTED_BUYERS}
    ref = max(defaults, key=defaults.get)
    assert f"{ref} {defaults[ref]:.1f}" in row
    got = sorted(((sweep.surplus(batch, seller, n, p).mean(), n, p) for n, p in grid))[::-1]
    first, second = (f"{sweep.label(n, p)}: {s:.1f} ({s / defaults[ref]:.2f}x)" for s, n, p in got)
    assert row.index(first) < row.index(second)  # the most surplus first


def test_bad_flags_are_one_error_line(sweep, capsys):
    for argv in (
        ["--markets", "1"],
        ["--top", "0"],
        ["--configs", "mars"],
        ["--configs", ","],
        ["--seller", "nobody"],
        ["--threads", "0"],
    ):
        assert sweep.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("benchmarks/buyer_sweep.py: error:")
