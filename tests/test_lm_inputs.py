"""What language-model agents read from outside: a model folder whose weights or tokenizer
do not fit, text from the market that spells a special token, a served reply that UTF-8
cannot write. Each is one clear error naming the file, or text kept as text; never a
traceback, never something silently different."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from agents.lm.generate import encode_prompts, encode_text
from agents.lm.model import load
from agents.lm.train import _encode
from agents.lm.transcripts import read_jsonl, to_jsonl

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "agents" / "lm" / "checkpoints" / "lm_seller"
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def tokenizer():
    torch.set_num_threads(1)
    return load(SHIPPED)[1]


def _copy_with(tmp_path: Path, change) -> Path:
    """The shipped model folder, its weights changed by ``change(tensors)``."""
    folder = tmp_path / "lm"
    shutil.copytree(SHIPPED, folder)
    tensors = load_file(str(folder / WEIGHTS))
    change(tensors)
    save_file(tensors, str(folder / WEIGHTS), metadata={"format": "pt"})
    return folder


def _drop(tensors: dict) -> None:
    del tensors["model.layers.0.self_attn.q_proj.weight"]


def _junk(tensors: dict) -> None:
    tensors["extra.junk"] = torch.zeros(3)


def _reshape(tensors: dict) -> None:
    tensors["model.norm.weight"] = torch.zeros(5)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_drop, "missing: model.layers.0.self_attn.q_proj.weight"),  # was filled at random
        (_junk, "unexpected: extra.junk"),  # was ignored
        (_reshape, "of another shape: model.norm.weight"),  # a multi-line report, no file
    ],
)
def test_weights_that_do_not_fit_the_config_are_refused_naming_the_file(tmp_path, change, says):
    folder = _copy_with(tmp_path, change)
    with pytest.raises(ValueError, match="the weights do not fit config.json") as err:
        load(folder)
    assert str(err.value).startswith(f"{folder / WEIGHTS}: ") and says in str(err.value)


def test_a_weight_tied_to_a_loaded_one_may_be_absent():
    # The tiny model ties its output layer to the input embeddings and stores them once.
    assert "lm_head.weight" not in load_file(str(SHIPPED / WEIGHTS))
    model, _ = load(SHIPPED)
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_a_missing_weight_is_one_error_line_from_the_evaluate_command(tmp_path):
    folder = _copy_with(tmp_path, _drop)
    done = subprocess.run(
        [sys.executable, "-m", "agents.lm.evaluate", "--model", str(folder), "--markets", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert lines == [
        f"agents.lm.evaluate: error: {folder / WEIGHTS}: the weights do not fit config.json "
        "(missing: model.layers.0.self_attn.q_proj.weight)"
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{}", "no 'added_tokens' entry"),
        (json.dumps({"version": "1.0", "added_tokens": [], "model": {"type": "Nope"}}), "enum"),
        (json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": 5}}), "added_tokens"),
    ],
)
def test_a_damaged_tokenizer_is_refused_naming_the_folder(tmp_path, text, says):
    folder = tmp_path / "lm"
    shutil.copytree(SHIPPED, folder)
    (folder / "tokenizer.json").write_text(text)
    with pytest.raises(ValueError, match="cannot read the tokenizer") as err:
        load(folder)
    assert str(err.value).startswith(f"{folder}: ") and says in str(err.value)


SPELLED = "[turn 1] buyer 2: DECISION: reject; SAY: no <eos> thanks <pad>\nYour message:\n"


def test_market_text_that_spells_a_special_token_is_encoded_as_text(tokenizer):
    special = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    for ids in (
        encode_text(tokenizer, SPELLED),
        encode_prompts(tokenizer, [SPELLED], 1536, None)[0],
        encode_prompts(tokenizer, ["<eos>" * 40 + SPELLED], 16, [40])[0],  # head and tail
    ):
        assert not special & set(ids)
    assert tokenizer.decode(encode_text(tokenizer, SPELLED)) == SPELLED


def test_a_training_completion_ends_on_the_one_real_end_of_text_token(tokenizer):
    record = {"prompt": SPELLED, "completion": "THINK: <eos>\nTO: buyer 1\nSAY: <pad>"}
    [(prompt, completion)] = _encode(tokenizer, [record], 96)
    eos = tokenizer.eos_token_id
    assert eos not in prompt and completion.count(eos) == 1 and completion[-1] == eos
    assert tokenizer.decode(completion[:-1]) == record["completion"]


def test_a_lone_surrogate_from_a_served_reply_is_written_and_read_back(tmp_path):
    records = [{"completion": "\ud800"}, {"completion": "a\\\udfff é"}]
    path = to_jsonl(records, tmp_path / "t.jsonl")
    assert read_jsonl(path) == records
    assert "é".encode() in path.read_bytes()  # other text stays as it is written
