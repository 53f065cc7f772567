"""The language-model modules' command lines (``python -m agents.lm.evaluate``,
``agents.lm.train``, ``agents.lm.model``): bad input is one ``PROG: error: ...`` line
and exit code 2, as with ``arena``; a bug still raises."""

from __future__ import annotations

import pytest

from agents.command import run_guarded
from agents.lm import evaluate, model, train

SHIPPED = "agents/lm/checkpoints/lm_seller"


def _run(prog, main, argv, capsys):
    code = run_guarded(prog, lambda: main(argv))
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "/nowhere"], "/nowhere: not a model directory"),
        (["--model", SHIPPED, "--buyers", "nobody"], "unknown buyer entry 'nobody'"),
        (["--model", SHIPPED, "--market", "/nowhere.toml"], "cannot read market file"),
        (
            ["--model", SHIPPED, "--market", "tournaments/specs/default.toml:mall"],
            "no [configs.mall] table",
        ),
        (["--model", SHIPPED, "--market", "tournaments/specs/default.toml"], "no [market] table"),
        (["--model", SHIPPED, "--teacher", "nobody"], "unknown seller entry 'nobody'"),
    ],
)
def test_evaluate_turns_bad_input_into_one_line(argv, says, capsys):
    code, err = _run("agents.lm.evaluate", evaluate.main, [*argv, "--markets", "2"], capsys)
    assert code == 2
    assert len(err) == 1 and err[0].startswith("agents.lm.evaluate: error: ")
    assert says in err[0]


@pytest.mark.parametrize(
    "flag",
    [
        ["--markets", "0"],
        ["--markets", "-3"],
        ["--seed", "-1"],
        ["--threads", "x"],
        ["--temperature", "nan"],  # it played every message as a violation, and wrote NaN
        ["--temperature", "inf"],
        ["--temperature", "-0.5"],
    ],
)
def test_evaluate_refuses_impossible_flags_before_loading_anything(flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        evaluate.main(["--model", "/nowhere", *flag])
    assert exit_.value.code == 2
    assert f"argument {flag[0]}" in capsys.readouterr().err


def test_a_damaged_weights_file_is_one_line(tmp_path, capsys):
    """safetensors' own error for a damaged file is neither a ValueError nor an OSError:
    it came out as a traceback, here and through a training config's base_model."""
    import shutil

    broken = tmp_path / "lm"
    shutil.copytree(SHIPPED, broken)
    (broken / "model.safetensors").write_bytes(b"hello")
    code, err = _run("agents.lm.evaluate", evaluate.main, ["--model", str(broken)], capsys)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"agents.lm.evaluate: error: {broken}: cannot read the weights")


@pytest.mark.parametrize("device", ["cuda", "cuda:7", "tpu"])
def test_a_device_this_machine_lacks_is_one_line(device, capsys):
    import torch

    if device.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("this machine has the device")
    argv = ["--model", SHIPPED, "--markets", "2", "--device", device]
    code, err = _run("agents.lm.evaluate", evaluate.main, argv, capsys)
    assert code == 2 and len(err) == 1 and f"--device {device}" in err[0]


def test_train_and_model_turn_bad_input_into_one_line(tmp_path, capsys):
    code, err = _run(
        "agents.lm.train", train.main, ["/nowhere.toml", "--out", str(tmp_path)], capsys
    )
    assert code == 2 and len(err) == 1 and err[0].startswith("agents.lm.train: error: /nowhere")
    with pytest.raises(SystemExit) as exit_:
        model.main(["--out", str(tmp_path), "--seed", "-2"])
    assert exit_.value.code == 2


def test_a_bug_still_raises():
    def broken() -> int:
        raise TypeError("a bug")

    with pytest.raises(TypeError, match="a bug"):
        run_guarded("prog", broken)


@pytest.mark.parametrize("module", ["agents.lm.evaluate", "agents.lm.train"])
def test_the_modules_run_guarded(module, tmp_path):
    import subprocess
    import sys

    argv = ["--model", "/nowhere"] if module.endswith("evaluate") else ["/nowhere.toml"]
    argv += [] if module.endswith("evaluate") else ["--out", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=120
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"{module}: error: ")


def test_a_config_mismatch_names_the_keys_that_differ():
    from agents.command import config_mismatch, differing_keys

    saved = {"seed": 0, "sft": {"lr": 0.003, "epochs": 10}, "opponents": [{"name": "a"}]}
    now = {"seed": 0, "sft": {"lr": 0.003, "epochs": 10, "schedule": "cosine"}, "opponents": []}
    assert differing_keys(saved, now) == ["opponents", "sft.schedule"]
    assert differing_keys(saved, saved) == []
    assert differing_keys(1, 2) == ["(the whole config)"]
    many = {f"k{i}": [i] for i in range(9)}
    text = config_mismatch("run", many, {k: [-1] for k in many})
    assert (
        text
        == "run was started with another config (it differs in k0; k1; k2; k3; k4; k5 and 3 more)"
    )
    # A plain value shows both ends, so that a flag given at the start says what to give again.
    text = config_mismatch("run", {"iterations": 4, "sft": saved["sft"]}, {"iterations": 2})
    assert text == (
        "run was started with another config (it differs in iterations: 4 at the start, 2 now; sft)"
    )
    text = config_mismatch("run", {"a": {"b": "cosine"}}, {"a": {"b": "constant"}})
    assert text.endswith('(it differs in a.b: "cosine" at the start, "constant" now)')
    assert config_mismatch("run", {}, {"new": 1}).endswith("(it differs in new)")
