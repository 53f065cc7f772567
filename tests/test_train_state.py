"""The trainer state a stopped run leaves (``train_state.json`` and
``train_state.safetensors``) as ``--resume`` reads it: the optimizer's settings are the
config's, the file gives only Adam's step counts and moments, and a state that is not
what training writes is one error line naming the file, never a traceback, a failure at
the first optimizer step or a resumed run that silently computes something else."""

from __future__ import annotations

import csv
import json
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from agents.rl.config import load_train_config
from agents.rl.ppo import STATE_JSON, STATE_TENSORS, TrainError, train
from tests.test_rl import TINY_TOML
from tests.test_train_bad_input import _refused

# tests.test_rl's tiny seller run, smaller still: two iterations, stopped after the first.
SMALLER = {"iterations": 2, "batch_size": 8, "hidden": 8, "checkpoint_every": 1}


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    root = tmp_path_factory.mktemp("state")
    text = TINY_TOML
    for key, value in SMALLER.items():
        text = re.sub(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.M)
    (root / "tiny.toml").write_text(text)
    cfg = load_train_config(str(root / "tiny.toml"))
    train(cfg, root / "stopped", progress=False, until=1)
    return root


@pytest.fixture
def run(stopped, tmp_path):
    """A copy of the stopped run, to damage, and its config."""
    shutil.copytree(stopped / "stopped", tmp_path / "run")
    return load_train_config(str(stopped / "tiny.toml")), tmp_path / "run"


def _edit_json(run, change) -> None:
    state = json.loads((run / STATE_JSON).read_text())
    change(state)
    (run / STATE_JSON).write_text(json.dumps(state))


def _group(key, value):
    return lambda s: s["param_groups"][0].__setitem__(key, value)


def _edit_tensors(run, change) -> None:
    tensors = load_file(str(run / STATE_TENSORS))
    tensors = change(tensors)
    save_file(tensors, str(run / STATE_TENSORS))


def _curve(run) -> list[dict]:
    with open(run / "curve.csv", newline="") as fh:
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in csv.DictReader(fh)]


def test_a_resumed_run_is_the_uninterrupted_one_whatever_lr_the_state_recorded(stopped, run):
    """The settings come from the config (the schedule sets lr every iteration), so the
    resumed run matches the one never stopped, to the bit."""
    cfg, folder = run
    _edit_json(folder, _group("lr", 123.0))
    whole = train(cfg, stopped / "whole", progress=False)
    train(cfg, folder, resume=True, progress=False)
    for name in ("model.safetensors", STATE_TENSORS):
        a, b = load_file(str(whole / name)), load_file(str(folder / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    assert _curve(whole) == _curve(folder)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        # Settings that would change what the resumed run computes.
        (_group("maximize", True), "maximize = true, the config's optimizer has false"),
        (_group("weight_decay", 50), "weight_decay = 50, the config's optimizer has 0"),
        (_group("eps", -1), "eps = -1, the config's optimizer has 1e-05"),
        (_group("amsgrad", True), "amsgrad = true"),
        # Groups that are no optimizer's.
        (_group("betas", 5), "betas = 5"),
        (lambda s: s.__setitem__("param_groups", [5]), "not the 1 group"),
        (lambda s: s.__setitem__("param_groups", [{}]), "params are not the network's"),
        (lambda s: s.__setitem__("param_groups", []), "not the 1 group"),
        (_group("params", "ab"), "params are not the network's"),
        (_group("params", [100, 101]), "params are not the network's"),
        # The counters and the teachers' hashes.
        (lambda s: s.__setitem__("iteration", True), "iteration true is not a count"),
        (lambda s: s.__setitem__("iteration", -1), "iteration -1 is not a count"),
        (lambda s: s.__setitem__("teachers", [1]), "teachers: not a table"),
        (lambda s: s.__setitem__("teachers", {"small": 1}), "teachers: not a table"),
    ],
)
def test_a_state_whose_json_is_not_the_trainers_is_refused(run, change, words):
    cfg, folder = run
    _edit_json(folder, change)
    _resume_refused(cfg, folder, STATE_JSON, words)


def _resume_refused(cfg, folder, file: str, words: str) -> None:
    """A resume refused with one line that names ``file`` and says ``words``."""
    with pytest.raises(TrainError, match=re.escape(words)) as err:
        train(cfg, folder, resume=True, progress=False)
    assert str(err.value).startswith(f"{folder / file}: cannot resume (")
    assert "\n" not in str(err.value)


def _replace(suffix, make):
    """Every state tensor whose name ends with ``suffix`` made by ``make`` from it."""
    return lambda t: {k: (make(v) if k.endswith(suffix) else v) for k, v in t.items()}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda t: {**t, "0.exp_avg": torch.zeros(3)}, "parameter 0: exp_avg is float32 [3]"),
        (_replace("exp_avg", lambda v: v.double()), "exp_avg is float64"),
        (_replace("exp_avg_sq", lambda v: torch.full_like(v, float("nan"))), "NaN or infinite"),
        (_replace("exp_avg_sq", lambda v: -torch.ones_like(v)), "negative values"),
        (_replace(".step", lambda v: torch.zeros_like(v)), "step 0.0 is not a count"),
        (_replace(".step", lambda v: torch.ones(2)), "step is float32 [2], not a count"),
        (lambda t: {k: v for k, v in t.items() if not k.endswith(".step")}, "no step"),
        (lambda t: {"x" + k: v for k, v in t.items()}, "not an optimizer state"),
        (lambda t: {**t, "0.other": torch.zeros(1)}, "'0.other': not an optimizer state"),
        (lambda t: {**t, "999.step": torch.ones(())}, "'999.step': the network has"),
    ],
)
def test_an_optimizer_state_that_does_not_fit_is_refused_when_read(run, change, words):
    """Not at the first ``optimizer.step`` (a bare torch message) nor as a NaN loss many
    steps later."""
    cfg, folder = run
    _edit_tensors(folder, change)
    _resume_refused(cfg, folder, STATE_TENSORS, words)


def test_a_damaged_state_is_one_error_line_from_the_command(stopped, run, capsys):
    _, folder = run
    _edit_json(folder, _group("betas", 5))
    config = str(stopped / "tiny.toml")
    line = _refused(capsys, "train", "seller", "--config", config, "--out", str(folder),
                    "--resume", "--quiet")  # fmt: skip
    assert f"{folder / STATE_JSON}: cannot resume (param_groups: betas = 5" in line
