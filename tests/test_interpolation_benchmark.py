"""benchmarks/interpolation.py: the share W toward the retail specialist, chosen on the
training configs alone."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("interpolation")


def test_it_scores_each_share_against_the_fine_tuned_seller_and_picks_the_best(bench, capsys):
    assert bench.main(["--markets", "4", "--weights", "0.5"]) == 0
    out = capsys.readouterr().out
    rows = [r for r in map(str.split, out.splitlines()) if len(r) >= 5 and r[0][0].isdigit()]
    shares = [r[0] for r in rows]
    assert shares[:2] == ["0", "0.5"]  # W = 0, the fine-tuned seller, is always the base
    assert rows[0][-1] == "-" and rows[1][-1].endswith("]")
    means = {r[0]: float(r[3]) for r in rows[:2]}
    chosen = max(means, key=lambda w: (means[w], -float(w)))
    assert f"chosen: W = {chosen} (the highest in-distribution mean)" in out


def test_a_pair_of_identical_checkpoints_differs_by_nothing(bench):
    cells = bench.Cells(3, seed=5)
    shipped = str(bench.SHIPPED / "rl_seller")
    rows, chosen = bench.selection_table(cells, {0.0: shipped, 0.3: shipped})
    assert rows[1][-1] == "+0.00 [+0.00, +0.00]" and chosen == 0.0  # a tie goes to the smaller W


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (["--weights", "2"], "--weights"),
        (["--weights", "x"], "--weights"),
        (["--markets", "1"], "--markets"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_bad_flags_are_a_usage_error(bench, capsys, bad, said):
    with pytest.raises(SystemExit) as exc:
        bench.main(bad)
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error:" in last and said in last
