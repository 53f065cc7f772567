"""Bad input that once escaped the one-line error: integers too large for a float or for
a store, output flags that could overwrite a run, empty values read as defaults, files
that are no Python module, the check's unbounded batch, the benchmark runner's errors and
flags that contradict each other. Each is one ``arena: error: ...`` line and exit code 2,
and no stored file changes."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

from arena.config import MarketConfig
from arena.generator import generate
from tests.test_hardening import run
from tournaments.cli import main
from tournaments.runner import run_tournament
from tournaments.spec import spec_from_dict

ROOT = Path(__file__).resolve().parents[1]
SELLER = f"{ROOT / 'examples' / 'my_agents.py'}:SignalSeller"
HUGE = 10**400
MATCH = "greedy_matcher|haggler|hidden|c"


def refused(capsys, *argv: str) -> str:
    """The one error line of a refused command (exit code 2, no traceback, no usage)."""
    code, _, err = run(capsys, *argv)
    assert code == 2, err
    assert err.startswith("arena: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "usage:" not in err
    return err


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished run of one match, one market, its transcript kept."""
    spec = spec_from_dict(
        {
            "tournament": {
                "name": "one",
                "markets": 1,
                "sellers": ["greedy_matcher"],
                "buyers": ["haggler"],
                "disclosure": ["hidden"],
                "transcripts": 1,
            },
            "configs": {"c": {"buyers": 4}},
        }
    )
    folder = tmp_path_factory.mktemp("runs") / "one"
    run_tournament(spec, folder, use_ray=False, progress=False)
    return folder


# ---------------------------------------------------------------------- huge numbers
@pytest.mark.parametrize(
    "field, value",
    [("price_range", (0, HUGE)), ("value_correlation", HUGE), ("agent_share", HUGE)],
    ids=["price_range", "value_correlation", "agent_share"],
)
def test_an_integer_too_large_for_a_float_is_a_value_error_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"^{field}: expected .* an integer of 401 digits$"):
        MarketConfig(**{field: value})


@pytest.mark.parametrize(
    "line",
    [f"price_range = [0, {HUGE}]", f"value_correlation = {HUGE}", f"agent_share = {HUGE}"],
    ids=["price_range", "value_correlation", "agent_share"],
)
def test_a_huge_integer_in_a_market_file_or_a_spec_is_one_line(capsys, tmp_path, line):
    market = tmp_path / "m.toml"
    market.write_text(f"[market]\n{line}\n")
    field = line.split(" ")[0]
    assert f"m.toml: {field}: expected" in refused(capsys, "play", "--market", str(market))
    assert f"m.toml: {field}: expected" in refused(capsys, "check", SELLER, "--market", str(market))
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[tournament]\nname = "one"\nmarkets = 1\nsellers = ["posted_price"]\n'
        f'buyers = ["truthful"]\ndisclosure = ["hidden"]\n[configs.c]\n{line}\n'
    )
    out = tmp_path / "run"
    err = refused(capsys, "tournament", str(spec), "--out", str(out), "--no-ray")
    assert f"configs.c: {field}: expected" in err and not out.exists()


def test_an_integer_past_pythons_digit_limit_names_the_file(capsys, tmp_path):
    market = tmp_path / "m.toml"
    market.write_text("[market]\nbuyers = " + "9" * 5000 + "\n")
    assert "m.toml: cannot read market file" in refused(capsys, "play", "--market", str(market))


def test_a_market_index_is_bounded_by_what_a_batch_and_a_store_hold(capsys, run_dir):
    big = "999999999999999999999999999999"
    assert "--index: a market index is at most" in refused(capsys, "play", "--index", big)
    err = refused(capsys, "show", str(run_dir), "--match", MATCH, "--market", big)
    assert "--market: a market index is at most" in err
    with pytest.raises(ValueError, match="index must be <="):
        generate(MarketConfig(), 0, 2**63)  # one past int64


# ---------------------------------------------------------------------- output files
def test_compare_csv_never_overwrites_a_run(capsys, run_dir):
    db = run_dir / "results.sqlite"
    before = db.read_bytes()
    err = refused(capsys, "compare", str(run_dir), str(run_dir), "--csv", str(db))
    assert "--csv: expected a path ending in .csv" in err
    assert db.read_bytes() == before
    sqlite3.connect(db).close()


def test_export_never_writes_over_a_runs_own_files(capsys, run_dir, tmp_path):
    """A link named rows.csv to the run's results.sqlite had the database replaced by CSV
    (and the command then failed on it); --to DIR/spec.json replaced the run's spec."""
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    link = tmp_path / "rows.csv"
    os.symlink(run_dir / "results.sqlite", link)
    assert "links to" in refused(capsys, "export", str(run_dir), "--to", str(link))
    link = tmp_path / "prompts.jsonl"
    os.symlink(run_dir / "spec.json", link)
    assert "links to" in refused(capsys, "export", str(run_dir), "--transcripts", str(link))
    err = refused(capsys, "export", str(run_dir), "--to", str(run_dir / "spec.json"))
    assert "is the run's own spec.json" in err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
    # Beside the run's own files an export is welcome, again and again.
    for _ in range(2):
        assert main(["export", str(run_dir), "--to", str(run_dir / "rows.json")]) == 0
    (run_dir / "rows.json").unlink()


def test_play_html_never_overwrites_a_run(capsys, run_dir, tmp_path):
    db = run_dir / "results.sqlite"
    before = db.read_bytes()
    assert "--html: expected a path ending in .html" in refused(capsys, "play", "--html", str(db))
    link = tmp_path / "page.html"
    os.symlink(db, link)
    assert "links to" in refused(capsys, "play", "--html", str(link))
    assert db.read_bytes() == before


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["play", "--html", ""], "--html: expected a path ending in .html"),
        (["play", "--market", ""], "--market: expected a non-empty value"),
        (["tournament", "spec.toml", "--out", ""], "--out: expected a non-empty value"),
        (["tournament", "spec.toml", "--address", ""], "--address: expected a non-empty value"),
        (["export", "RUN", "--to", ""], "--to: expected a non-empty value"),
        (["compare", "RUN", "RUN", "--by", ""], "--by: no name in ''"),
        (["compare", "RUN", "RUN", "--metrics", ""], "--metrics: no name in ''"),
        (["compare", "RUN", "RUN", "--metrics", " , "], "--metrics: no name in"),
        (["compare", "RUN", "RUN", "--csv", ""], "--csv: expected a path ending in .csv"),
    ],
)
def test_an_empty_value_is_refused_not_read_as_the_default(capsys, run_dir, argv, needle):
    argv = [str(run_dir) if a == "RUN" else a for a in argv]
    assert needle in refused(capsys, *argv)


# ---------------------------------------------------------------------- arena check
def test_check_on_a_file_that_is_no_python_module(capsys, tmp_path):
    target = tmp_path / "agents.toml"
    target.write_text("[market]\n")
    err = refused(capsys, "check", f"{target}:X")
    assert "agents.toml: not a Python file (expected FILE.py:CLASS)" in err


def test_check_bounds_its_markets_and_their_memory(capsys, tmp_path):
    assert "--markets: at most 1,000,000 markets" in refused(
        capsys, "check", SELLER, "--markets", "2000000"
    )
    err = refused(capsys, "check", SELLER, "--markets", "100000")
    assert "config 0: a batch of 100,000 markets" in err and "use --markets 65,535" in err
    market = tmp_path / "big.toml"
    market.write_text("[market]\nbuyers = 10000\nproducts = 1000\n")
    err = refused(capsys, "check", SELLER, "--market", str(market))
    assert "big.toml [market]: one market of 10,000 buyers x 1,000 products" in err


# ---------------------------------------------------------------------- arena bench
def test_bench_prints_a_scripts_own_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    err = refused(capsys, "bench", "report", str(tmp_path / "nothing"))
    assert "no run in" in err


def test_bench_on_a_damaged_run_is_one_line(capsys, run_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "results.sqlite").write_bytes((run_dir / "results.sqlite").read_bytes())
    with sqlite3.connect(damaged / "results.sqlite") as conn:
        conn.execute("DROP TABLE matches")
    err = refused(capsys, "bench", "report", str(damaged), "--repeats", "1")
    assert "bench report: " in err and "exited with code 1" in err


def test_bench_engine_refuses_a_count_of_zero(capsys, monkeypatch):
    """``--scalar-markets 0`` was a ZeroDivisionError traceback after the batched runs."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    assert main(["bench", "engine", "--scalar-markets", "0"]) == 2
    err = capsys.readouterr().err
    assert "argument --scalar-markets: expected a positive integer, got '0'" in err
    assert "Traceback" not in err


# Numeric flags a script checks itself once parsed, with its own one-line message and
# exit code 2 (their tests: tests/test_*benchmark*.py, test_buyer_bound, test_unseen_buyers).
CHECKED_AFTER_PARSING = {
    ("assignment.py", "--markets"),
    ("buyer_bound.py", "--markets"),
    ("buyer_dilemma.py", "--markets"),
    ("buyer_sweep.py", "--markets"),
    ("buyer_sweep.py", "--top"),
    ("generalization.py", "--threads"),  # use_threads, shared by the scripts that import it
    ("generalization.py", "--markets"),
    ("generalization.py", "--seed"),
    ("interpolation.py", "--markets"),
    ("interpolation.py", "--seed"),
    ("signal_prior.py", "--markets"),
    ("signal_prior.py", "--prior"),
    ("unseen_buyers.py", "--markets"),
}


def test_no_benchmark_flag_takes_an_unchecked_number():
    """Every benchmark script's numeric flags go through a checked type (``pos_int``,
    ``nonneg_int``, ``pos_number``) or a check of the script's own once parsed
    (``CHECKED_AFTER_PARSING``): a bare ``int`` or ``float`` let ``--markets -5`` or
    ``--scalar-markets 0`` through to a traceback deep in the run (``scripted``,
    ``engine``, ``lm``, ``training``, ``rllib_vs_arena``)."""
    import ast

    unchecked = []
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                flag = getattr(node.args[0], "value", None) if node.args else None
                for kw in node.keywords:
                    if kw.arg == "type" and getattr(kw.value, "id", "") in ("int", "float"):
                        if (script.name, flag) not in CHECKED_AFTER_PARSING:
                            unchecked.append(f"{script.name}:{node.lineno} {flag}")
    assert not unchecked, unchecked


# ---------------------------------------------------------------------- contradictions
def test_flags_that_contradict_each_other_are_refused(capsys, run_dir, tmp_path):
    err = refused(capsys, "tournament", "spec.toml", "--address", "127.0.0.1:1", "--no-ray")
    assert "--address" in err and "--no-ray" in err
    err = refused(capsys, "tournament", "spec.toml", "--connect-timeout", "5", "--no-ray")
    assert "--connect-timeout" in err and "--no-ray" in err
    assert "give --match ID too" in refused(capsys, "show", str(run_dir), "--market", "3")
    err = refused(capsys, "show", str(run_dir), "--match", MATCH, "--filter", "greedy")
    assert "give one of them" in err
    code, out, _ = run(capsys, "show", str(run_dir), "--match", MATCH)
    assert code == 0 and out.startswith(f"match {MATCH}, market 0\n")


def test_bench_report_refuses_no_repeats(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # bench sets argv for its script
    assert main(["bench", "report", "runs/none", "--repeats", "0"]) == 2
    assert "argument --repeats: expected a positive integer, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["eval", "play", "agents"])
def test_an_unknown_flag_points_to_the_commands_own_help(capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == f"arena: error: unrecognized arguments: --bogus (see: arena {command} --help)\n"
