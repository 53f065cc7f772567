"""What the commands that read a run folder say of a run that stopped part way (killed,
interrupted, a worker lost for good): the report and the export cover what is stored and
say that it is part of the run, and an export that would be refused writes no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tournaments.cli import main
from tournaments.runner import run_tournament
from tournaments.spec import load_spec

SPEC = """
[tournament]
name = "partial"
markets = 8
sellers = ["greedy_matcher", "posted_price"]
buyers = ["truthful", "haggler"]
reference = "posted_price"
transcripts = 1
[configs.a]
buyers = 3
products = 2
turns = 5
"""


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path, Path]:
    """A spec, its run stopped after its first unit of 4 markets (of 8 units), and the
    whole run."""
    spec = tmp_path / "partial.toml"
    spec.write_text(SPEC)

    def stop(*_):
        raise KeyboardInterrupt

    partial, whole = tmp_path / "partial", tmp_path / "whole"
    with pytest.raises(KeyboardInterrupt):
        run_tournament(load_spec(str(spec)), partial, use_ray=False, progress=False,
                       unit_markets=4, on_result=stop)  # fmt: skip
    run_tournament(load_spec(str(spec)), whole, use_ray=False, progress=False, unit_markets=4)
    return spec, partial, whole


def test_the_report_of_part_of_a_run_says_so(runs, capsys):
    spec, partial, whole = runs
    assert main(["report", str(whole), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "market rows analysed  32\n" in out and "incomplete" not in out + err
    assert main(["report", str(partial), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "market rows analysed  4 of 32 planned (incomplete run)" in out
    assert err == (
        f"arena: warning: {partial}: incomplete run: 4 of 32 planned markets stored; its "
        "tables cover those only (the same arena tournament command finishes it)\n"
    )
    assert "4 of 32 planned (incomplete run)" in (partial / "report.md").read_text()
    # The same command finishes it; its report then reads as the whole run's.
    assert main(["tournament", str(spec), "--out", str(partial), "--no-ray", "--quiet"]) == 0
    assert main(["report", str(partial), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "market rows analysed  32\n" in out and err == ""


def test_an_export_of_part_of_a_run_says_so(runs, tmp_path, capsys):
    _, partial, whole = runs
    capsys.readouterr()
    assert main(["export", str(whole), "--to", str(tmp_path / "w.csv")]) == 0
    assert capsys.readouterr().err == ""
    assert main(["export", str(partial), "--to", str(tmp_path / "p.json")]) == 0
    assert "incomplete run: 4 of 32 planned markets stored" in capsys.readouterr().err
    assert len(json.loads((tmp_path / "p.json").read_text())["markets"]) == 4


def test_a_refused_export_writes_no_file(runs, tmp_path, capsys):
    """--transcripts is checked (its suffix, and that the run kept prompts) before --to is
    written: one error line and no file, not a CSV and then an error."""
    _, _, whole = runs
    capsys.readouterr()
    for transcripts in ("t.csv", "t.jsonl"):  # a wrong suffix; a run that kept no prompts
        to = tmp_path / f"rows_{transcripts}.csv"
        code = main(["export", str(whole), "--to", str(to), "--transcripts",
                     str(tmp_path / transcripts)])  # fmt: skip
        assert code == 2 and not to.exists() and not (tmp_path / transcripts).exists()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("arena: error: ") for line in err)


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("command", "target", "says"),
    [
        ("tournament", "tournaments.runner.run_tournament",
         "every stored unit is kept, and the same command finishes the run"),
        ("train", "agents.rl.ppo.train",
         "the same command with --resume goes on from the last saved checkpoint"),
    ],
)  # fmt: skip
def test_an_interrupted_command_says_how_to_go_on(runs, tmp_path, capsys, monkeypatch, command,
                                                  target, says):  # fmt: skip
    import importlib

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    module, name = target.rsplit(".", 1)
    monkeypatch.setattr(importlib.import_module(module), name, interrupted)
    argv = {
        "tournament": ["tournament", str(runs[0]), "--no-ray"],
        "train": [
            "train",
            "seller",
            "--config",
            str(ROOT / "agents/rl/configs/seller_retail.toml"),
        ],
    }[command]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 130
    assert capsys.readouterr().err == f"arena: interrupted; {says}\n"
