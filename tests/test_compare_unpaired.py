"""``arena compare`` says what it could not pair: matches only one run has, and a
``--rename`` name that run A does not have."""

from __future__ import annotations

import json

import pytest

from tests.test_compare_and_store import _spec
from tournaments.cli import main
from tournaments.cli.compare import _left_out
from tournaments.compare import CompareError, compare_runs
from tournaments.runner import run_tournament
from tournaments.store import ResultStore

ONLY_A = "greedy_matcher|truthful|hidden|a"
ONLY_B = "disclosure_aware|truthful|hidden|a"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs of the same markets sharing posted_price; each has one seller the other
    lacks. (folder, records) of each."""
    root = tmp_path_factory.mktemp("unpaired")
    out = []
    for name, other in (("a", "greedy_matcher"), ("b", "disclosure_aware")):
        run_tournament(_spec(sellers=["posted_price", other]), root / name, use_ray=False,
                       progress=False)  # fmt: skip
        store = ResultStore.open(root / name)
        try:
            out.append((str(root / name), store.records()))
        finally:
            store.close()
    return out


def test_the_comparison_names_the_matches_it_could_not_pair(runs):
    (_, a), (_, b) = runs
    cmp = compare_runs(a, b, metrics=("profit",), rounds=50)
    assert (cmp.only_a, cmp.only_b) == ((ONLY_A,), (ONLY_B,))
    # Only the shared match is in the rows, the pooled row included.
    assert [r.group for r in cmp] == [("posted_price", "truthful", "hidden", "a"), ("all",)]
    assert cmp[-1].n == 50
    same = compare_runs(a, a, metrics=("profit",), rounds=50)
    assert (same.only_a, same.only_b) == ((), ())
    # A renamed seller pairs: nothing is left out of A, B's extra seller still is.
    renamed = compare_runs(a, b, rename={"greedy_matcher": "disclosure_aware"},
                           metrics=("profit",), rounds=50)  # fmt: skip
    assert (renamed.only_a, renamed.only_b) == ((), ())
    assert renamed[-1].n == 100


def test_the_command_prints_one_line_on_what_it_left_out(runs, capsys):
    (a, _), (b, _) = runs
    assert main(["compare", a, b, "--metrics", "profit"]) == 0
    out = capsys.readouterr().out.splitlines()
    line = [x for x in out if x.startswith("left out:")]
    assert line == [
        f"left out: 1 match only in RUN_A ({ONLY_A}), 1 match only in RUN_B ({ONLY_B}): "
        "no counterpart to pair with"
    ]
    # With --json the line goes to stderr and stdout stays one JSON document.
    assert main(["compare", a, b, "--metrics", "profit", "--json"]) == 0
    cap = capsys.readouterr()
    assert len(json.loads(cap.out)) == 2
    assert cap.err.startswith("left out: 1 match only in RUN_A")
    # Everything paired: no such line.
    assert main(["compare", a, a, "--metrics", "profit"]) == 0
    assert "left out" not in capsys.readouterr().out


def test_the_left_out_line_names_a_few_and_counts_the_rest():
    ids = tuple(f"rl_seller|b{k}|hidden|a" for k in range(8))
    assert _left_out(ids, ids[:1]) == (
        "left out: 8 matches only in RUN_A (rl_seller|b0|hidden|a, rl_seller|b1|hidden|a, "
        "rl_seller|b2|hidden|a and 5 more), 1 match only in RUN_B (rl_seller|b0|hidden|a): "
        "no counterpart to pair with"
    )
    assert _left_out((), ids[:3]).startswith("left out: 3 matches only in RUN_B (")
    assert _left_out((), ()) == ""


def _one_error_line(capsys) -> str:
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("arena: error: ")
    return err[0]


def test_runs_with_nothing_in_common_are_one_error_line(runs, capsys):
    (a, _), (b, _) = runs
    # Renaming the one shared seller away leaves no pairing at all.
    assert main(["compare", a, b, "--rename", "posted_price=other"]) == 2
    assert "no pairing in common" in _one_error_line(capsys)


def test_a_rename_of_a_name_run_a_lacks_is_refused(runs, capsys):
    (a, rec_a), (b, rec_b) = runs
    assert main(["compare", a, b, "--rename", "rl_seller=disclosure_aware"]) == 2
    line = _one_error_line(capsys)
    assert "'rl_seller'" in line
    assert "sellers: greedy_matcher, posted_price; buyers: truthful" in line
    with pytest.raises(CompareError, match="'nope', 'gone'"):
        compare_runs(rec_a, rec_b, rename={"nope": "x", "posted_price": "y", "gone": "z"})
    # Any coordinate of run A may be renamed: a rule or a config is no unknown name.
    for old in ("hidden", "a"):
        assert main(["compare", a, b, "--metrics", "profit", "--rename", f"{old}={old}"]) == 0
    capsys.readouterr()
