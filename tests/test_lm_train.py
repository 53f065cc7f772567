"""Language-model training on a tiny budget: both stages, the curve, resuming, the config."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from agents.lm import train as lm_train
from agents.lm.train import LMTrainConfig, group_advantages

ROOT = Path(__file__).resolve().parents[1]
# Both stages on a tiny budget: the smoke config the project ships.
TINY = LMTrainConfig.from_toml(ROOT / "agents/lm/configs/smoke.toml")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm") / "run"
    final = lm_train.train(TINY, out, progress=False)
    return out, final


def _curve(out: Path) -> list[dict]:
    with open(out / "curve.csv", newline="") as f:
        return list(csv.DictReader(f))


def _weights(path: Path) -> dict[str, np.ndarray]:
    return load_file(str(path / "model.safetensors"))


def test_stage_one_loss_falls_and_stage_two_reward_rises(run):
    out, final = run
    rows = _curve(out)
    sft = [float(r["loss"]) for r in rows if r["stage"] == "sft"]
    reward = [float(r["reward"]) for r in rows if r["stage"] == "grpo"]
    assert len(sft) == 64 and len(reward) == 8  # 8 epochs of 8 batches of teacher messages
    assert np.mean(sft[-5:]) < 0.3 * np.mean(sft[:5])
    assert np.mean(reward[-3:]) > np.mean(reward[:3]) + 0.05  # the same 4 markets each step
    assert (out / "curve.png").stat().st_size > 0


def test_every_trainable_parameter_changed_in_each_stage(run):
    out, final = run
    base, sft, end = _weights(out / "base"), _weights(out / "sft"), _weights(final)
    assert base.keys() == sft.keys() == end.keys()
    for name in base:
        assert not np.array_equal(base[name], sft[name]), f"stage one left {name} unchanged"
        assert not np.array_equal(sft[name], end[name]), f"stage two left {name} unchanged"


def test_checkpoints_are_safetensors_and_json_only(run):
    out, final = run
    files = [p for p in out.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in (".bin", ".pt", ".pth", ".pkl", ".pickle")]
    for d in (final, out / "sft", out / "latest"):
        assert (d / "model.safetensors").exists() and (d / "config.json").exists()
        assert (d / "tokenizer.json").exists()
    assert (out / "latest" / "optimizer.safetensors").exists()
    assert json.loads((out / "latest" / "position.json").read_text()) == {
        "stage": "grpo",
        "step": 8,
    }
    assert json.loads((out / "train_config.json").read_text()) == json.loads(
        json.dumps(TINY.to_json())
    )


class _Stop(Exception):
    pass


@pytest.mark.parametrize("where", ["_sft_step", "_grpo_step"])
def test_a_stopped_run_resumes_to_the_same_model(run, tmp_path, monkeypatch, where):
    out, final = run
    real = getattr(lm_train, where)
    calls = {"n": 0}

    def stop_on_the_third(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise _Stop
        return real(*args, **kwargs)

    monkeypatch.setattr(lm_train, where, stop_on_the_third)
    with pytest.raises(_Stop):
        lm_train.train(TINY, tmp_path / "run", progress=False)
    monkeypatch.setattr(lm_train, where, real)
    with pytest.raises(ValueError, match="already holds a training run"):
        lm_train.train(TINY, tmp_path / "run", progress=False)
    resumed = lm_train.train(TINY, tmp_path / "run", resume=True, progress=False)
    a, b = _weights(final), _weights(resumed)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert [r["stage"] + r["step"] for r in _curve(tmp_path / "run")] == [
        r["stage"] + r["step"] for r in _curve(out)
    ]


def test_resuming_with_another_config_is_refused(run, tmp_path):
    out, _ = run
    other = LMTrainConfig(**{**TINY.__dict__, "seed": 1})
    with pytest.raises(
        ValueError, match=r"another config \(it differs in seed: 0 at the start, 1 now\)"
    ):
        lm_train.train(other, out, resume=True, progress=False)


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


@pytest.mark.parametrize(
    ("name", "damage", "says"),
    [
        ("latest/optimizer.safetensors", _truncate, "incomplete metadata"),  # a traceback
        ("latest/optimizer.json", lambda _: b"{not json", "Expecting property name"),
        ("latest/position.json", lambda _: b"garbage", "Expecting value"),  # no file named
        ("latest/position.json", lambda _: b'{"stage": "xyz", "step": 3}', "stage 'xyz'"),
        ("latest/position.json", lambda _: b'{"stage": "grpo", "step": 99}', "step 99"),
        ("curve.csv", lambda _: b"stage,step\nfoo,3\n", "line 2 has stage 'foo'"),
    ],
)
def test_resuming_from_a_damaged_checkpoint_is_one_error_line_naming_the_file(
    run, tmp_path, name, damage, says
):
    import os
    import shutil
    import subprocess
    import sys

    out = tmp_path / "run"
    shutil.copytree(run[0], out)
    (out / name).write_bytes(damage((out / name).read_bytes()))
    done = subprocess.run(
        [sys.executable, "-m", "agents.lm.train", "agents/lm/configs/smoke.toml",
         "--out", str(out), "--resume"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"agents.lm.train: error: {out / name}: damaged checkpoint (")
    assert says in lines[0]


@pytest.mark.parametrize("analyst", [0, 3])
def test_a_teacher_that_reads_private_values_is_refused_before_anything_is_written(
    tmp_path, analyst
):
    import dataclasses

    from agents.lm.analyst import NarratedTeacher
    from agents.scripted.sellers import OracleSeller

    cfg = dataclasses.replace(TINY, teacher="oracle", analyst=analyst)
    with pytest.raises(ValueError, match="teacher: oracle reads the buyers' private values"):
        lm_train.train(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="OracleSeller reads the buyers' private values"):
        NarratedTeacher(OracleSeller())


def test_the_shipped_config_parses_and_bad_keys_are_named(tmp_path):
    cfg = LMTrainConfig.from_toml(ROOT / "agents/lm/configs/seller.toml")
    assert cfg.policy == "LMSeller" and cfg.teacher == "greedy_matcher"
    assert cfg.market.buyers == 8 and cfg.market.turns == 12 and cfg.grpo.group_size == 4
    bad = tmp_path / "bad.toml"
    bad.write_text("[grpo]\nstepz = 3\n")
    with pytest.raises(ValueError, match=r"\[grpo\]: unknown key\(s\) stepz"):
        LMTrainConfig.from_toml(bad)
    bad.write_text("[train]\npolicy = 'Nope'\n")
    with pytest.raises(ValueError, match="policy"):
        LMTrainConfig.from_toml(bad)
    market = tmp_path / "m.toml"
    market.write_text("[market]\nbuyers = 3\n")
    (tmp_path / "c.toml").write_text("[train]\nmarket = 'm.toml'\n")
    assert LMTrainConfig.from_toml(tmp_path / "c.toml").market.buyers == 3


def test_a_trainer_can_tell_language_model_configs(tmp_path):
    assert lm_train.is_lm_config(ROOT / "agents/lm/configs/seller.toml")
    other = tmp_path / "rl.toml"
    other.write_text("[train]\npolicy = 'PairScorer'\n")
    assert not lm_train.is_lm_config(other) and not lm_train.is_lm_config(tmp_path / "none")


def test_group_advantages_are_normalized_within_groups():
    adv = group_advantages(np.array([1.0, 3.0, 2.0, 2.0, 0.0, 0.0, 5.0, 5.0]), 2)
    np.testing.assert_allclose(adv[:2], [-1.0, 1.0], atol=1e-5)
    assert adv[2:].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_a_fixed_pool_cycles_over_its_markets_whatever_the_groups():
    from agents.lm.train import GRPOConfig, step_markets

    assert step_markets(GRPOConfig(groups=4, pool=0), 2).tolist() == [8, 9, 10, 11]
    assert step_markets(GRPOConfig(groups=4, pool=4), 3).tolist() == [0, 1, 2, 3]
    assert step_markets(GRPOConfig(groups=4, pool=2), 0).tolist() == [0, 1, 0, 1]
    assert step_markets(GRPOConfig(groups=4, pool=6), 1).tolist() == [4, 5, 0, 1]


def test_a_commit_stopped_at_any_point_leaves_a_checkpoint_to_resume(tmp_path):
    """``latest.old`` left behind by a commit stopped while removing it does not block the
    next commit; one stopped between the two renames leaves ``latest.old``, which resume
    takes back."""
    from agents.lm.train import _commit, _recover_latest

    latest = tmp_path / "latest"
    for name, text in (("latest", "2"), ("latest.old", "1"), ("latest.tmp", "3")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "position.json").write_text(text)
    _commit(tmp_path / "latest.tmp", latest)
    assert (latest / "position.json").read_text() == "3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]
    latest.rename(tmp_path / "latest.old")  # stopped between the renames
    _recover_latest(latest)
    assert (latest / "position.json").read_text() == "3"
    _recover_latest(latest)  # nothing to recover: unchanged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"max_prompt_tokens": 4}, "max_prompt_tokens"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"grpo": {"temperature": -1.0}}, "grpo.temperature"),
        ({"grpo": {"pool": -1}}, "pool"),
        ({"grpo": {"lr": -1e-3}}, "grpo.lr"),
        ({"sft": {"lr": 0.0}}, "sft.lr"),
        ({"grpo": {"kl": -0.1}}, "grpo.kl"),
        ({"sft": {"markets": 10**9}}, "sft.markets: at most 1,000,000"),
        ({"grpo": {"groups": 10**8}}, "grpo.groups x group_size: at most 4,096"),
        ({"max_prompt_tokens": 100_000}, "over the model's max_positions"),
        ({"model": {"hidden_size": 65_536}}, r"65,536 wide.*needs about [0-9.]+ GB, over the"),
        ({"model": {"vocab_size": 10**7}}, "a vocabulary of 10,000,000"),
        ({"micro_batch": 10**6}, "on 1,000,000 sequences"),
    ],
)
def test_bad_numbers_in_a_training_config_fail_before_any_training(changes, words):
    import dataclasses

    kw = {}
    for key, value in changes.items():
        if isinstance(value, dict):
            kw[key] = dataclasses.replace(getattr(TINY, key), **value)
        else:
            kw[key] = value
    with pytest.raises(ValueError, match=words):
        dataclasses.replace(TINY, **kw)


def test_the_memory_estimate_grows_with_the_model_and_the_shipped_configs_fit():
    """The estimate is 4 bytes x (5 copies of the parameters + a micro-batch's activations
    and logits); the shipped seller's is a few tens of MB."""
    import dataclasses

    from agents.rl.config import TRAIN_MEMORY

    shipped = LMTrainConfig.from_toml(ROOT / "agents/lm/configs/seller.toml")
    assert 10e6 < shipped.memory_bytes() < 100e6 < TRAIN_MEMORY
    m = shipped.model
    h, i, v = m.hidden_size, m.intermediate_size, m.vocab_size
    params = v * h + m.layers * (4 * h * h + 3 * h * i + 2 * h) + h
    from transformers import LlamaConfig, LlamaForCausalLM

    llama = LlamaConfig(
        vocab_size=v,
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=m.layers,
        num_attention_heads=m.heads,
        num_key_value_heads=m.heads,
        tie_word_embeddings=True,
    )
    assert params == sum(p.numel() for p in LlamaForCausalLM(llama).parameters())
    wider = dataclasses.replace(shipped, micro_batch=2 * shipped.micro_batch)
    assert wider.memory_bytes() > shipped.memory_bytes()


class _Recorder:
    """An optimizer that keeps the gradients it is asked to apply and changes nothing."""

    def __init__(self, model):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.grads = None

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        self.grads = [p.grad.detach().clone() for p in self.params]


def test_grpo_weighs_tokens_by_the_distribution_they_were_sampled_from(tmp_path):
    """The policy samples from softmax(logits / T); GRPO's gradient must be that
    distribution's, not the temperature-1 one (a biased gradient and KL otherwise)."""
    import dataclasses

    import torch

    from agents.lm.model import TinyModelConfig, build_tiny, load
    from agents.lm.train import _grpo_step, sequence_logprobs

    small = TinyModelConfig(
        vocab_size=320, hidden_size=32, intermediate_size=64, layers=2, heads=2, corpus_markets=2
    )
    model, _ = load(build_tiny(tmp_path / "m", small))
    examples = [([5, 9, 14, 3], [7, 8, 21]), ([5, 11, 2], [30, 4]), ([6, 9], [12, 13, 40, 2])]
    trace = [(row, p, c, False) for row, (p, c) in enumerate(examples)]
    played = {"return": np.array([1.0, 0.0, 0.5, 0.5]), "trace": trace}  # groups of two
    temperature = 0.5

    def grads_of(t):
        model.zero_grad()
        logp, mask = sequence_logprobs(model, examples, 0, "cpu", temperature=t)
        adv = torch.tensor(group_advantages(played["return"], 2)[:3], dtype=torch.float32)
        (-(adv * (logp * mask).sum(1) / mask.sum(1)).sum() / 3).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        return [p.grad.detach().clone() for p in model.parameters() if p.requires_grad]

    # The log-probabilities at T are those of softmax(logits / T), which the sampler uses.
    logp, _ = sequence_logprobs(model, examples[:1], 0, "cpu", temperature=temperature)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([examples[0][0] + examples[0][1]])).logits[0]
    direct = torch.log_softmax(logits.float() / temperature, -1)[[3, 4, 5], [7, 8, 21]]
    torch.testing.assert_close(logp[0], direct)

    grpo = dataclasses.replace(TINY.grpo, temperature=temperature, kl=0.0, group_size=2)
    cfg = dataclasses.replace(TINY, grpo=grpo)
    opt = _Recorder(model)
    _grpo_step(model, model, opt, played, cfg, pad=0, eos=2, device="cpu")
    # The step's messages end without the end-of-text token (ended=False), as above.
    want, at_one = grads_of(temperature), grads_of(1.0)
    for got, w in zip(opt.grads, want, strict=True):
        torch.testing.assert_close(got, w, rtol=1e-4, atol=1e-7)
    pairs = zip(want, at_one, strict=True)
    assert any(not torch.allclose(w, o, rtol=1e-3, atol=1e-6) for w, o in pairs)


def test_the_cosine_warm_start_schedule_falls_from_lr_to_zero(tmp_path, monkeypatch):
    import dataclasses

    from agents.lm.train import sft_rate

    rates = []

    def record(model, opt, examples, cfg, pad, device):
        rates.append(opt.param_groups[0]["lr"])
        return 1.0

    monkeypatch.setattr(lm_train, "_sft_step", record)
    sft = dataclasses.replace(TINY.sft, schedule="cosine")
    cfg = dataclasses.replace(TINY, sft=sft, grpo=dataclasses.replace(TINY.grpo, steps=0))
    lm_train.train(cfg, tmp_path / "run", progress=False)
    assert len(rates) > 2 and rates[0] == sft.lr and rates[-1] == pytest.approx(0.0, abs=1e-12)
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))
    # Set from the step alone (what a resumed run relies on); "constant" keeps lr.
    assert rates == [sft_rate(sft, k, len(rates)) for k in range(len(rates))]
    assert sft_rate(TINY.sft, 5, 10) == TINY.sft.lr
    with pytest.raises(ValueError, match="sft.schedule"):
        dataclasses.replace(TINY, sft=dataclasses.replace(sft, schedule="linear"))
