"""Transcripts kept during batched play, exported as prompt/completion records; the
training command's dispatch to the language-model trainer."""

from __future__ import annotations

import json

from tournaments.cli import main

SPEC = """
[tournament]
name = "p"
markets = 12
sellers = ["greedy_matcher"]
buyers = ["haggler"]
transcripts = 2
prompts = {prompts}
[configs.a]
buyers = 3
products = 2
turns = 5
"""


def _run(tmp_path, prompts: bool) -> str:
    spec = tmp_path / f"s{prompts}.toml"
    spec.write_text(SPEC.format(prompts=str(prompts).lower()))
    out = tmp_path / f"run{prompts}"
    assert main(["tournament", str(spec), "--out", str(out), "--no-ray", "--quiet"]) == 0
    return str(out)


def test_export_transcripts_as_prompt_completion_records(tmp_path, capsys):
    run = _run(tmp_path, True)
    path = tmp_path / "t.jsonl"
    assert main(["export", run, "--transcripts", str(path)]) == 0
    records = [json.loads(line) for line in path.read_text().splitlines()]
    sides = {r["side"] for r in records}
    assert sides == {"seller", "buyer"} and {r["market"] for r in records} == {0, 1}
    seller = [r for r in records if r["side"] == "seller"]
    assert seller[0]["prompt"].startswith("You are the seller") and seller[0]["turn"] == 1
    assert all(r["completion"].startswith("THINK:") for r in seller)
    # What a buyer is shown of the seller's messages never holds its private reasoning.
    seller_lines = [
        line for r in records if r["side"] == "buyer" for line in r["prompt"].splitlines()
        if "] seller:" in line
    ]  # fmt: skip
    assert seller_lines and not any("THINK" in line for line in seller_lines)


def test_export_without_prompts_or_target_is_one_clear_error(tmp_path, capsys):
    run = _run(tmp_path, False)
    capsys.readouterr()
    assert main(["export", run, "--transcripts", str(tmp_path / "t.jsonl")]) == 2
    assert main(["export", run]) == 2
    assert main(["export", run, "--transcripts", str(tmp_path / "t.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(e.startswith("arena: error:") for e in err)
    assert "prompts = true" in err[0]


def test_train_sends_a_language_model_config_to_its_trainer(tmp_path, capsys):
    config = "agents/lm/configs/smoke.toml"
    assert main(["train", "seller", "--config", config, "--out", str(tmp_path / "x"),
                 "--iterations", "3"]) == 2  # fmt: skip
    assert "not for a language-model config" in capsys.readouterr().err
