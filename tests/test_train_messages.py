"""What ``arena train`` and a checkpoint say when their input is wrong: one ``arena:
error:`` line naming the file and what in it (the row of a curve a resumed run cannot go
on from, the key of a training config, the missing hash of a checkpoint), never a bare
message of the code that tripped over it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agents.rl import checkpoint
from agents.rl.policies import RLSeller
from tests.test_rl import TINY_TOML
from tournaments.cli import main


def _refused(capsys, *argv: str) -> str:
    """The one error line of an ``arena`` command that must refuse its input."""
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("arena: error: "), err
    return err[0]


def _stopped_after_one(tmp_path, capsys) -> tuple[list[str], Path]:
    """A tiny seller run of 2 iterations stopped after 1: its ``arena train`` argv (to
    resume it) and its folder."""
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_TOML.replace("iterations = 4", "iterations = 2"))
    out = tmp_path / "run"
    argv = ["train", "seller", "--config", str(config), "--out", str(out), "--quiet"]
    assert main([*argv, "--stop-after", "1"]) == 0
    capsys.readouterr()
    return argv, out


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("garbage,,,", "line 4: iteration 'garbage' is not a whole number"),
        ("", "no row for iteration 1"),  # as before: the row to go on from is missing
    ],
)
def test_a_resumed_run_with_a_malformed_curve_names_the_file_and_the_line(
    row, says, tmp_path, capsys
):
    argv, out = _stopped_after_one(tmp_path, capsys)
    curve = out / "curve.csv"
    lines = curve.read_text().splitlines()
    assert len(lines) == 3  # header, iteration 0's evaluation, iteration 1
    if row:
        curve.write_text("\n".join([*lines, row]) + "\n")
    else:
        curve.write_text("\n".join(lines[:2]) + "\n")
    line = _refused(capsys, *argv, "--resume")
    assert line.startswith(f"arena: error: {curve}: cannot resume (") and says in line, line


def test_imitating_a_buyer_names_the_file_and_the_key(tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(
        TINY_TOML.replace("[train]\n", '[train]\nimitate = "haggler"\nimitation_iterations = 1\n')
    )
    out = tmp_path / "run"
    line = _refused(capsys, "train", "seller", "--config", str(config), "--out", str(out))
    assert line.startswith(
        f"arena: error: {config}: train.imitate: 'haggler' is a buyer, not a seller; sellers: "
    ), line
    assert not out.exists()  # refused when the config is read


def test_a_checkpoint_without_its_weights_hash_says_it_is_missing(tmp_path, capsys):
    torch.manual_seed(0)
    ck = checkpoint.save(tmp_path / "ck", RLSeller(hidden=8), name="no_hash")
    meta = json.loads((ck / "config.json").read_text())
    del meta["provenance"]["weights_sha256"]
    (ck / "config.json").write_text(json.dumps(meta))
    line = _refused(capsys, "eval", "--seller", str(ck), "--markets", "2")
    assert line == (
        f"arena: error: {ck}/config.json: provenance.weights_sha256 is missing (the SHA-256 "
        "of model.safetensors, which reading checks the weights against)"
    )


def test_playing_a_run_that_stopped_early_warns_that_it_is_unfinished(tmp_path, capsys):
    """An intermediate checkpoint plays (it is a checkpoint), with a warning that it is
    one; the finished run's folder plays without."""
    argv, out = _stopped_after_one(tmp_path, capsys)
    warning = (
        f"arena: warning: {out} is trained 1 of 2 iterations: its training stopped early "
        "(arena train ... --resume on that folder goes on)\n"
    )
    for command in (["eval", "--markets", "2"], ["play"]):
        assert main([*command, "--seller", str(out), "--buyers", "truthful"]) == 0
        assert capsys.readouterr().err == warning
    assert main([*argv, "--resume"]) == 0
    capsys.readouterr()
    assert main(["eval", "--markets", "2", "--seller", str(out), "--buyers", "truthful"]) == 0
    assert capsys.readouterr().err == ""
