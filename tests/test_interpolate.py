"""Weight-space interpolation of two checkpoints (``python -m agents.rl.interpolate``):
the line between them, tensor by tensor, written as an ordinary checkpoint that records
how it was made; checkpoints that do not fit together are one error line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from agents.rl.checkpoint import load, read_checkpoint
from agents.rl.interpolate import main

ROOT = Path(__file__).resolve().parents[1]
FINE = ROOT / "agents/rl/checkpoints/rl_seller"
START = ROOT / "agents/rl/checkpoints/stages/rl_seller_retail_mixed_pull"
BUYER = ROOT / "agents/rl/checkpoints/rl_buyer"


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


@pytest.mark.parametrize("w", [0.0, 0.15, 0.5, 1.0])
def test_the_weights_lie_on_the_line_and_the_play_is_the_fine_tuned_ones(tmp_path, capsys, w):
    out = tmp_path / "mix"
    assert (
        main([str(FINE), str(START), "--weight", str(w), "--name", "mix", "--out", str(out)]) == 0
    )
    a, b, got = weights(FINE), weights(START), weights(out)
    assert set(got) == set(a)
    for k in a:
        assert torch.allclose(got[k], (1 - w) * a[k] + w * b[k], atol=1e-6), k
    if w == 0.0:
        assert all(torch.equal(got[k], a[k]) for k in a)
    meta = read_checkpoint(out).meta()
    fine = read_checkpoint(FINE).meta()
    # The fine-tuned one's play (its signal prior among its params) and sizes; the new name.
    assert meta["policy"] == {**fine["policy"], "name": "mix"}
    made = meta["training"]["interpolation"]
    assert made["weight"] == w
    assert made["fine_tuned"]["weights_sha256"] == read_checkpoint(FINE).weights_sha256
    assert made["start"]["weights_sha256"] == read_checkpoint(START).weights_sha256
    assert made["start"]["name"] == "rl_seller_retail_mixed_pull"
    assert load(out).net.cfg == load(FINE).net.cfg


def test_the_same_command_makes_the_same_weights(tmp_path, capsys):
    for k in (1, 2):
        main(
            [
                str(FINE),
                str(START),
                "--weight",
                "0.15",
                "--name",
                "m",
                "--out",
                str(tmp_path / f"m{k}"),
            ]
        )
    assert (tmp_path / "m1/model.safetensors").read_bytes() == (
        tmp_path / "m2/model.safetensors"
    ).read_bytes()
    one, two = (json.loads((tmp_path / f"m{k}/config.json").read_text()) for k in (1, 2))
    one["provenance"].pop("created"), two["provenance"].pop("created")
    assert one == two


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([str(FINE), str(BUYER), "--weight", "0.5"], "only one network shape interpolates"),
        ([str(FINE), str(START), "--weight", "1.5"], "--weight: expected a number in [0, 1]"),
        ([str(FINE), str(START), "--weight", "nan"], "--weight: expected a number in [0, 1]"),
        ([str(FINE), "no/such/dir", "--weight", "0.5"], "no such checkpoint directory"),
    ],
)
def test_what_does_not_interpolate_is_one_error_line(tmp_path, capsys, argv, needle):
    out = tmp_path / "mix"
    assert main([*argv, "--name", "mix", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m agents.rl.interpolate: error: ") and err.count("\n") == 1, err
    assert needle in err and not out.exists()


def test_a_name_no_reader_accepts_or_a_folder_with_files_is_refused_before_writing(
    tmp_path, capsys
):
    """--name "bad name" wrote a checkpoint that every reader then refused; --out the
    fine-tuned checkpoint itself wrote over it."""
    out = tmp_path / "mix"
    argv = [str(FINE), str(START), "--weight", "0.5"]
    assert main([*argv, "--name", "bad name", "--out", str(out)]) == 2
    assert "--name: expected a plain name" in capsys.readouterr().err and not out.exists()
    held = tmp_path / "held"
    held.mkdir()
    (held / "notes.txt").write_text("mine")
    assert main([*argv, "--name", "mix", "--out", str(held)]) == 2
    assert "holds files already" in capsys.readouterr().err
    assert [p.name for p in held.iterdir()] == ["notes.txt"]


def test_a_training_block_that_is_no_table_is_read_as_an_empty_one(tmp_path, capsys):
    import shutil

    fine = tmp_path / "fine"
    shutil.copytree(FINE, fine)
    config = json.loads((fine / "config.json").read_text())
    config["training"] = 5
    (fine / "config.json").write_text(json.dumps(config))
    out = tmp_path / "mix"
    assert main([str(fine), str(START), "--weight", "0.5", "--name", "mix", "--out", str(out)]) == 0
    assert set(read_checkpoint(out).meta()["training"]) == {"interpolation"}
