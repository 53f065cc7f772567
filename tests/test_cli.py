"""The arena command line: output contracts and one-line errors for bad input."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from agents import registry
from agents.scripted.buyers import Truthful
from tournaments.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_agents_json_lists_every_entry_with_side_and_kind(capsys):
    code, out, _ = run(capsys, "agents", "--json")
    rows = json.loads(out.strip().splitlines()[-1])
    assert code == 0
    names = {r["name"]: r for r in rows}
    assert {"posted_price", "oracle", "truthful", "strategic", "strategic+disclosed"} <= set(names)
    assert names["strategic+disclosed"]["kind"] == "agent" and names["truthful"]["kind"] == "human"
    assert {r["side"] for r in rows} == {"seller", "buyer"}
    assert names["oracle"]["reference"] is True


def test_agents_table(capsys):
    code, out, _ = run(capsys, "agents")
    assert code == 0 and "greedy_matcher" in out and "noisy_human" in out


def test_play_prints_the_four_part_transcript_and_the_oracle_figures(capsys):
    code, out, _ = run(
        capsys, "play", "--seller", "greedy_matcher", "--buyers", "haggler", "--seed", "3"
    )
    assert code == 0
    for tag in ("THINK:", "TO: buyer", "OFFER:", "SAY:", "DECISION:"):
        assert tag in out
    for figure in ("W*_T", "highest Walrasian", "lowest Walrasian", "VCG", "revenue"):
        assert figure in out


def test_play_lists_each_buyers_kind_and_disclosure(capsys, tmp_path):
    market = tmp_path / "m.toml"
    market.write_text("[market]\nbuyers = 6\nagent_share = 0.5\n")
    code, out, _ = run(
        capsys,
        "play",
        "--buyers",
        "human=noisy_human,agent=strategic+disclosed",
        "--disclosure",
        "voluntary",
        "--market",
        str(market),
    )
    line = next(x for x in out.splitlines() if x.startswith("buyers: "))
    assert code == 0 and line.count("agent (disclosed)") == 3 and line.count("human") == 3
    _, out, _ = run(
        capsys,
        "play",
        "--buyers",
        "human=noisy_human,agent=strategic",
        "--disclosure",
        "voluntary",
        "--market",
        str(market),
    )
    line = next(x for x in out.splitlines() if x.startswith("buyers: "))
    assert "disclosed" not in line and line.count("agent") == 3


def test_eval_json_has_the_metrics_and_their_intervals(capsys):
    code, out, _ = run(
        capsys,
        "eval",
        "--seller",
        "pricing_bandit",
        "--buyers",
        "truthful:0.5,strategic:0.5",
        "--markets",
        "300",
        "--json",
    )
    assert code == 0
    data = json.loads(out.strip().splitlines()[-1])
    for key in (
        "profit",
        "buyer_surplus",
        "efficiency",
        "capture",
        "match_quality",
        "deal_rate",
        "violation_rate",
        "seller_violation_rate",
        "buyer_violation_rate",
    ):
        assert isinstance(data[key], float)
        lo, hi = data[key + "_ci"]
        assert lo <= data[key] <= hi
    assert data["buyer_surplus_agent"] > 0 and data["buyer_surplus_human"] > 0


def test_eval_is_reproducible_for_a_seed(capsys):
    args = (
        "eval",
        "--seller",
        "pricing_bandit",
        "--buyers",
        "noisy_human",
        "--markets",
        "200",
        "--json",
    )
    _, a, _ = run(capsys, *args, "--seed", "5")
    _, b, _ = run(capsys, *args, "--seed", "5")
    _, c, _ = run(capsys, *args, "--seed", "6")
    assert a == b and a != c


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("play", "--seller", "nobody"), "unknown seller entry 'nobody'; known: posted_price"),
        (("play", "--buyers", "truthful:0.5,ghost:0.5"), "unknown buyer entry 'ghost'"),
        (("play", "--buyers", "truthful:0.7,haggler:0.7"), "sum to 1"),
        (
            ("eval", "--seller", "truthful"),
            "'truthful' is a buyer, not a seller; sellers: posted_price",
        ),
        (("play", "--buyers", "human=strategic,agent=truthful"), "cannot play the human buyers"),
        (
            ("play", "--buyers", "human=truthful,human=haggler,agent=strategic"),
            "exactly human=NAME",
        ),
        (("play", "--market", "/nonexistent.toml"), "cannot read market file"),
        (("report", "/nonexistent-run"), "no results here"),
    ],
)
def test_bad_input_is_one_error_line(capsys, argv, needle):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_malformed_market_files(capsys, tmp_path):
    cases = {
        "bad.toml": ("[market\n", "not valid TOML"),
        "empty.toml": ("title = 1\n", "no [market] table"),
        "field.toml": ("[market]\nbuyers = -1\n", "buyers: expected an integer"),
        "unknown.toml": ("[market]\nflavour = 1\n", "unknown market field(s) flavour"),
        "range.toml": ("[market]\nprice_range = [5, 1]\n", "price_range"),
    }
    for name, (text, needle) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        code, _, err = run(capsys, "eval", "--market", str(path), "--markets", "10")
        assert code == 2 and needle in err, (name, err)


def test_flags_are_checked_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--markets", "0"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("arena: error: argument --markets: expected a positive integer")
    assert err.count("\n") == 1


def test_the_console_script_exits_non_zero_without_a_traceback():
    out = subprocess.run(
        [sys.executable, "-m", "tournaments.cli", "play", "--seller", "x"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("arena: error: unknown seller entry 'x'")
    assert "Traceback" not in out.stderr


SPEC = """
[tournament]
name = "tiny"
markets = 60
sellers = ["posted_price", "greedy_matcher"]
buyers = ["truthful", "mixed"]
disclosure = ["hidden", "mandatory"]
reference = "posted_price"
[populations]
mixed = "human=noisy_human,agent=strategic"
[markets.m]
buyers = 5
agent_share = 0.4
"""


def test_tournament_report_show_export_end_to_end(capsys, tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    out_dir = tmp_path / "run"
    code, out, _ = run(
        capsys, "tournament", str(spec), "--out", str(out_dir), "--no-ray", "--quiet"
    )
    assert code == 0 and "Ratings" in out and "greedy_matcher" in out
    assert (out_dir / "report.md").is_file() and (out_dir / "report_ratings.png").is_file()
    code, out, _ = run(capsys, "report", str(out_dir))
    assert code == 0
    for title in ("Ratings", "Surplus split", "Disclosure effect"):
        assert title in out
    code, out, _ = run(
        capsys, "show", str(out_dir), "--match", "greedy_matcher|mixed|mandatory|m", "--market", "1"
    )
    assert code == 0 and "TO: buyer" in out and "DECISION:" in out
    code, _, err = run(capsys, "show", str(out_dir), "--match", "nope", "--market", "0")
    assert code == 2 and "no transcripts for match 'nope'" in err
    code, _, err = run(
        capsys,
        "show",
        str(out_dir),
        "--match",
        "greedy_matcher|mixed|mandatory|m",
        "--market",
        "40",
    )
    assert code == 2 and "kept: 0, 1" in err
    code, out, _ = run(capsys, "export", str(out_dir), "--to", str(tmp_path / "rows.csv"))
    assert code == 0 and (tmp_path / "rows.csv").read_text().count("\n") == 1 + 8 * 60
    # A rerun resumes: nothing left to play, the stored rows are untouched.
    code, out, _ = run(
        capsys, "tournament", str(spec), "--out", str(out_dir), "--no-ray", "--quiet"
    )
    assert code == 0 and out.startswith("Ratings\n") and "played" not in out
    code, _, err = run(
        capsys, "tournament", str(spec), "--out", str(out_dir), "--no-ray", "--quiet", "--seed", "4"
    )
    assert code == 2 and "different spec" in err


def test_bench_runs_a_benchmark_script_with_its_flags(capsys):
    code, out, _ = run(capsys, "bench", "scripted", "--markets", "20")
    assert code == 0 and "posted_price" in out and "x 20 markets" in out


class _GarblingBuyer(Truthful):
    """Truthful, but every answer it gives is a malformed message."""

    def act(self, obs):
        a = super().act(obs)
        return dataclasses.replace(a, malformed=np.ones(obs.batch_size, bool))


def test_eval_json_splits_the_violation_rate_by_side(capsys, monkeypatch):
    monkeypatch.setitem(
        registry._ENTRIES, "garbling", registry.Entry("garbling", "buyer", "human", _GarblingBuyer)
    )
    code, out, _ = run(
        capsys, "eval", "--seller", "greedy_matcher", "--buyers", "garbling", "--markets", "50",
        "--json",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out.strip().splitlines()[-1])
    assert data["seller_violation_rate"] == 0.0 and data["buyer_violation_rate"] > 0.5
    assert data["violation_rate"] == pytest.approx(data["buyer_violation_rate"])


def test_sample_plays_rl_entries_sampled_and_others_as_always(capsys):
    def profit(*flags):
        code, out, _ = run(
            capsys, "eval", "--markets", "100", "--json", *flags
        )  # fmt: skip
        assert code == 0
        data = json.loads(out.strip().splitlines()[-1])
        assert data["sample"] is ("--sample" in flags)
        return data["profit"]

    rl = ("--seller", "rl_seller", "--buyers", "noisy_human:0.5,rl_buyer:0.5")
    greedy, sampled = profit(*rl), profit(*rl, "--sample")
    assert sampled != greedy and profit(*rl, "--sample") == sampled  # keyed noise: reproducible
    scripted = ("--seller", "greedy_matcher", "--buyers", "strategic")
    assert profit(*scripted, "--sample") == profit(*scripted)
    assert registry.make("rl_seller", "seller", sample=True).greedy is False
    assert registry.make("rl_seller", "seller").greedy is True
    pop = registry.make_buyers("human=noisy_human,agent=rl_buyer", sample=True)  # by kind
    assert pop.members[1].greedy is False


@pytest.mark.parametrize("damage", ["weights", "json", "shape", "missing"])
@pytest.mark.parametrize("command", ["eval", "play"])
def test_a_broken_checkpoint_is_one_error_line_from_the_command(capsys, tmp_path, damage, command):
    import shutil

    ck = tmp_path / "ck"
    shutil.copytree("agents/rl/checkpoints/rl_seller", ck)
    config = json.loads((ck / "config.json").read_text())
    if damage == "weights":
        raw = bytearray((ck / "model.safetensors").read_bytes())
        raw[-1] ^= 0xFF
        (ck / "model.safetensors").write_bytes(bytes(raw))
    elif damage == "json":
        (ck / "config.json").write_text(json.dumps(config)[:-5])
    elif damage == "shape":
        config["policy"]["net"]["hidden"] += 1
        (ck / "config.json").write_text(json.dumps(config))
    else:
        (ck / "model.safetensors").unlink()
    code, _, err = run(
        capsys, command, "--seller", str(ck), "--markets" if command == "eval" else "--index", "5"
    )
    assert code == 2 and err.startswith("arena: error: ") and err.count("\n") == 1, err
    assert str(ck) in err
