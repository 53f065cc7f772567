"""Bad input to the trainers (``arena train``, ``agents.rl.ppo.train``,
``agents.lm.train.train``): one ``arena: error: ...`` line and exit code 2, refused when
the config is read or before anything is written, and never a checkpoint, a finished run
or anyone's files overwritten."""

from __future__ import annotations

import glob
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from agents.lm import train as lm_train
from agents.lm.model import TinyModelConfig
from agents.rl.config import load_train_config
from agents.rl.ppo import TrainError, train
from tests.test_rl import TINY_TOML, _tiny
from tournaments.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "agents/rl/checkpoints/rl_seller"
LM_SMOKE = ROOT / "agents/lm/configs/smoke.toml"
BIG = "1" + "0" * 400  # an integer too large for a float


def _refused(capsys, *argv: str) -> str:
    """The one error line of an ``arena`` command that must refuse its input."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("arena: error: "), err
    return err[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _config(tmp_path: Path, train=None, weight=None, family="", tail="") -> Path:
    """``tests.test_rl.TINY_TOML`` with ``[train]`` keys set (``train``), every
    opponent's weight, lines added to ``[family]`` and tables after it."""
    text = TINY_TOML
    for key, value in (train or {}).items():
        line = f"{key} = {value}"
        if re.search(rf"^{key} = ", text, re.M):  # the first: [train]'s own
            text = re.sub(rf"^{key} = .*$", lambda _, line=line: line, text, count=1, flags=re.M)
        else:
            text = text.replace("[train]\n", f"[train]\n{line}\n", 1)
    if weight is not None:
        text = re.sub(r"(\[\[opponents\]\]\nname = .*\n)", rf"\1weight = {weight}\n", text)
    text = text.replace("[family]\n", f"[family]\n{family}\n", 1) + tail
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------------- the run folder
def test_a_shipped_checkpoint_folder_is_never_trained_into(tmp_path, capsys):
    folder = tmp_path / "shipcopy"
    shutil.copytree(SHIPPED, folder)
    before = _snapshot(folder)
    config = _config(tmp_path, train={"iterations": 1})
    for cfg in (config, LM_SMOKE):  # a PPO config and a language-model one
        for extra in ([], ["--resume"]):
            line = _refused(capsys, "train", "seller", "--config", str(cfg), "--out",
                            str(folder), "--quiet", *extra)  # fmt: skip
            assert str(folder) in line
    assert _snapshot(folder) == before


def test_a_folder_that_holds_files_is_refused_and_named(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(TrainError, match=r"holds files already \(notes.txt\)"):
        train(_tiny(tmp_path, iterations=1), folder, progress=False)
    with pytest.raises(ValueError, match=r"holds notes.txt already"):
        lm_train.train(LM_SMOKE, folder, progress=False)
    with pytest.raises(ValueError, match="nothing to resume"):
        lm_train.train(LM_SMOKE, folder, resume=True, progress=False)
    assert _snapshot(folder) == {"notes.txt": b"mine"}


def test_an_empty_run_folder_name_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _config(tmp_path)
    line = _refused(capsys, "train", "seller", "--config", str(config), "--out", "")
    assert "--out: expected a non-empty value" in line
    with pytest.raises(TrainError, match="empty"):
        train(_tiny(tmp_path), "", progress=False)
    with pytest.raises(ValueError, match="empty"):
        lm_train.train(LM_SMOKE, "", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.toml"]


def test_a_run_stopped_before_its_first_checkpoint_starts_again(tmp_path):
    """What a run stopped in its warm start leaves (the curve so far) is no result to
    keep: the same command starts it again (a league restarts its learners so)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "curve.csv").write_text("iteration,phase\n0,imitation\n")
    train(_tiny(tmp_path, iterations=1), out, progress=False)
    assert (out / "train_state.json").is_file()


# ---------------------------------------------------------------------- config values
JITTER = "[family.jitter]\n"
BAD_RL = [
    pytest.param(dict(weight=0), "[[opponents]] weight: opponent weights must be non-negative",
                 id="weight_0"),
    pytest.param(dict(weight=-1), "opponents[0].weight: expected a number >= 0, got -1",
                 id="weight_negative"),
    pytest.param(dict(weight="nan"), "opponents[0].weight: expected a finite number, got nan",
                 id="weight_nan"),
    pytest.param(dict(weight=BIG), "opponents[0].weight: expected a finite number, got an integer",
                 id="weight_big"),
    pytest.param(dict(train={"lr": "inf"}), "train.lr: expected a finite number, got inf",
                 id="lr_inf"),
    pytest.param(dict(train={"lr": BIG}), "train.lr: expected a finite number, got an integer",
                 id="lr_big"),
    pytest.param(dict(train={"signal_prior": "inf"}), "train.signal_prior: expected a finite",
                 id="signal_prior_inf"),
    pytest.param(dict(train={"name": '"a/b"'}), "train.name: expected a plain name",
                 id="name_slash"),
    pytest.param(dict(train={"name": '""'}), "train.name: expected a plain name",
                 id="name_empty"),
    pytest.param(dict(train={"batch_size": 10**9}), "train.batch_size: 1,000,000,000 markets of",
                 id="batch_size_huge"),
    pytest.param(dict(train={"threads": 100000}), "train.threads: at most 256, got 100000",
                 id="threads_huge"),
    pytest.param(dict(train={"steps": 10**9}), "train.steps: at most 1,000,000",
                 id="steps_huge"),
    pytest.param(dict(train={"hidden": BIG}), "train.hidden: at most 4,096", id="hidden_big"),
    pytest.param(dict(train={"seed": 2**64}), "train.seed: at most", id="seed_over_64_bits"),
    pytest.param(dict(train={"eval_markets": 10**7}), "train.eval_markets: at most 1,000,000",
                 id="eval_markets_huge"),
    pytest.param(dict(family='configs = ["small", "c"]',
                      tail="[markets.c]\nbuyers = 10000\nproducts = 1000\n"),
                 "markets.c: one market of 10,000 buyers x 1,000 products needs about",
                 id="market_huge"),
    pytest.param(dict(tail=JITTER + "buyers = [1e9, 1e9]\n"),
                 "not a valid market (buyers: expected", id="jitter_buyers"),
    pytest.param(dict(tail=JITTER + f"buyers = [0, {BIG}]\n"),
                 "family.jitter.buyers: write FIELD = [low, high] (finite", id="jitter_big"),
    pytest.param(dict(tail=JITTER + "quality_spread = [0, 50]\n"), "high ends of its jitter",
                 id="jitter_spread"),
    pytest.param(dict(family="price_scale = [1e-300, 1e-300]"),
                 "low ends of its jitter and price_scale", id="price_scale_tiny"),
    pytest.param(dict(family=f"price_scale = [1, {BIG}]"),
                 "family.price_scale: write [low, high] (finite numbers), got [1, an",
                 id="price_scale_big"),
    # A TOML "false" is a true string: each switch took it as on, and two crashed.
    *[pytest.param(dict(train={k: '"false"'}), f"train.{k}: expected true or false, got 'false'",
                   id=f"{k}_text") for k in ("film", "plan_feature", "prior_feature", "pooled",
                                            "assignment", "within_plan")],
    pytest.param(dict(train={"pooled": 2}), "train.pooled: expected true or false, got 2",
                 id="pooled_number"),
    pytest.param(dict(train={"init": 5}), "train.init: expected a text, got 5", id="init_number"),
    # Options that would change nothing, said so rather than ignored.
    pytest.param(dict(train={"imitate": '"greedy_matcher"', "imitation_iterations": 0}),
                 "train.imitate: needs train.imitation_iterations > 0", id="imitate_no_iterations"),
    pytest.param(dict(train={"expert_pull": '"pair"'}),
                 "train.expert_pull = 'pair': needs train.expert_coef > 0", id="pull_no_coef"),
    pytest.param(dict(train={"imitate": "[1]"}), "train.imitate: expected a text, got [1]",
                 id="imitate_list"),
    pytest.param(dict(train={"expert_configs": 5}),
                 "train.expert_configs: write a list of names, got 5", id="expert_configs_int"),
    pytest.param(dict(train={"expert_configs": "[1]"}),
                 "train.expert_configs: write a list of names, got [1]", id="expert_configs_ints"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "says"), BAD_RL)
def test_a_bad_training_config_is_refused_before_anything_is_written(edit, says, tmp_path, capsys):
    config = _config(tmp_path, **edit)
    out = tmp_path / "out"
    line = _refused(capsys, "train", "seller", "--config", str(config), "--out", str(out))
    assert line.startswith(f"arena: error: {config}: ") and says in line, line
    assert not out.exists()


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        # No rule to draw: it failed inside numpy after the first checkpoint was written.
        ("[]", "family.disclosure: needs at least one rule"),
        ('"hidden"', "family.disclosure: write a list of names"),  # not letter by letter
    ],
)
def test_a_family_without_a_list_of_rules_is_refused(rules, says, tmp_path, capsys):
    config = _config(tmp_path)
    text = config.read_text()
    assert 'disclosure = ["hidden", "mandatory"]' in text
    config.write_text(text.replace('disclosure = ["hidden", "mandatory"]', f"disclosure = {rules}"))
    out = tmp_path / "out"
    line = _refused(capsys, "train", "seller", "--config", str(config), "--out", str(out))
    assert says in line and not out.exists()


def test_every_shipped_training_config_still_loads():
    paths = glob.glob(str(ROOT / "agents/rl/configs/**/*.toml"), recursive=True)
    assert len(paths) > 100
    for path in paths:
        cfg = load_train_config(path)
        assert len(cfg.family.extremes()) == 3 * len(cfg.family.configs)


def test_a_family_draws_its_markets_as_before():
    """The draws of a batch's market (seeded numbers a run's results rest on) are those
    that the family drew before its ends were checked."""
    cfg = load_train_config(str(ROOT / "agents/rl/configs/seller_joint.toml"))
    fam = cfg.family
    rng = np.random.default_rng(7)
    drawn = [fam.sample_named(rng) for _ in range(3)]
    assert [name for name, _ in drawn] == ["wholesale", "retail", "wholesale"]
    market = drawn[0][1]
    assert (market.buyers, market.products, market.inventory, market.turns) == (14, 7, 1, 9)
    assert market.price_range == (95.6521900313009, 1052.17409034431)
    assert market.value_correlation == 0.7400498854733677
    assert (market.disclosure, market.agent_share) == ("mandatory", 0.3030324268193135)


# ---------------------------------------------------------------------- language models
@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("heads = 0", "[model] heads: expected an integer >= 1, got 0"),
        ('hidden_size = "32"', "[model] hidden_size: expected an integer, got '32'"),
        ("hidden_size = -1", "[model] hidden_size: expected an integer >= 1, got -1"),
    ],
)
def test_a_bad_language_model_config_names_the_file_and_the_key(model, says, tmp_path, capsys):
    config = tmp_path / "lm.toml"
    config.write_text(f'[train]\npolicy = "LMSeller"\n[model]\n{model}\n')
    out = tmp_path / "out"
    line = _refused(capsys, "train", "seller", "--config", str(config), "--out", str(out))
    assert line == f"arena: error: {config}: {says}" and not out.exists()
    with pytest.raises(ValueError, match="expected an integer"):
        TinyModelConfig(heads=0)


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("[sft]\nlr = inf", "[sft] lr: expected a finite number"),
        (f"[sft]\nlr = {BIG}", "[sft] lr: expected a finite number"),
        ("[sft]\nepochs = 2.5", "[sft] epochs: expected an integer"),
        ("[train]\nthreads = 100000", "threads: at most 256"),
    ],
    ids=["lr_inf", "lr_big", "epochs_not_whole", "threads_huge"],
)
def test_a_bad_language_model_number_is_refused_when_read(table, says, tmp_path):
    config = tmp_path / "lm.toml"
    text = f"{table}\n" if table.startswith("[train]") else f"[train]\n{table}\n"
    config.write_text(text.replace("[train]\n", '[train]\npolicy = "LMSeller"\n', 1))
    with pytest.raises(ValueError) as err:
        lm_train.load_config(config)
    assert str(err.value).startswith(f"{config}: ") and says in str(err.value)


def test_a_binary_training_config_is_named(tmp_path, capsys):
    config = tmp_path / "cfg.toml"
    config.write_bytes(b"\xff\xfe\x00\x01binary")
    line = _refused(
        capsys, "train", "seller", "--config", str(config), "--out", str(tmp_path / "o")
    )
    assert f"{config}: not UTF-8 text" in line
    assert lm_train.is_lm_config(config) is False


@pytest.mark.parametrize("config", ["rl", "lm"])
def test_cuda_on_a_machine_without_it_is_one_line_before_anything_is_written(
    tmp_path, capsys, config
):
    """The language-model trainer came out with torch's assertion from inside ``.to``."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    path = _config(tmp_path) if config == "rl" else LM_SMOKE
    out = tmp_path / "run"
    says = _refused(capsys, "train", "seller", "--config", str(path), "--out", str(out),
                    "--device", "cuda")  # fmt: skip
    assert says == "arena: error: --device cuda: no CUDA device is available here"
    assert not out.exists()
