"""Train a language-model seller: supervised warm start on a teacher, then episode-level GRPO.

One file, top to bottom (``train``):

1. **Model.** A local causal-LM directory (``base_model``), or the tiny default built
   from ``[model]`` (``agents.lm.model.build_tiny``) into ``OUT/base``.
2. **Stage one, warm start.** The teacher (a registry name: ``greedy_matcher``, or the
   trained ``rl_seller``; not one that reads private values, which the model never sees)
   plays ``sft.markets`` markets against the buyers; every turn keeps the prompt the
   model will see (the view and, with ``analyst`` > 0, the analyst's short list:
   ``agents.lm.analyst``) and the teacher's move written as a message (its THINK names
   the analyst's rank of the move, or says it is the teacher's own). The model learns to
   write those messages: cross-entropy on the completion tokens and the end-of-text
   token, ``sft.epochs`` passes in seeded order, the learning rate ``sft.lr`` throughout
   or on a half cosine to 0 (``sft.schedule``). Saved as ``OUT/sft``.
3. **Stage two, GRPO.** Each step draws ``grpo.groups`` fresh market instances and plays
   every one ``grpo.group_size`` times (G complete episodes of the same market, the
   model sampling with a different salt per member). An episode's reward is the
   seller reward of ``arena.rewards`` (profit / W*_T - penalty x violations, summed over
   its turns) plus a format term, ``format_weight`` x the share of its messages that
   parsed. Advantages are normalized within each group, ``A = (R - mean) / (std + 1e-6)``
   (0 where all G agree), and every message of an episode is weighted by its episode's
   advantage::

       loss = mean over messages [ -A * mean_t log pi(token_t) ]
              + kl * mean over tokens [ exp(r) - r - 1 ],   r = log pi_ref - log pi

   with the warm-started model as pi_ref (the k3 estimator of KL(pi || pi_ref)). Both
   are the distributions the episodes were sampled from, softmax(logits /
   ``grpo.temperature``), not the temperature-1 ones. One gradient step per batch of
   episodes (on-policy, so no ratio or clipping is needed).
4. **Outputs.** ``OUT/final`` (the trained model, safetensors + JSON, with a
   ``policy.json`` naming its entry ``name`` and the parameters it plays with, greedy
   decoding: ``agents.lm.policy.from_directory`` and ``agents.lm.evaluate`` play it as
   trained; the registry does not take language-model directories yet),
   ``OUT/curve.csv`` and ``OUT/curve.png`` (the learning curve),
   ``OUT/train_config.json``. ``OUT/latest`` holds the model, the optimizer state
   (safetensors + JSON) and the stage and step reached after every step, so a run
   stopped at any moment resumes from there (``resume=True``) and ends as an
   uninterrupted one would; a damaged checkpoint is one error naming its file.

Config (TOML; every key optional; ``LMTrainConfig`` documents each field)::

    [train]                 # policy, side, seed, base_model, buyers, teacher, threads, ...
    [model]                 # the tiny default (TinyModelConfig)
    [market]                # a MarketConfig table, or  market = "path/to/file.toml"
    [sft]                   # markets, epochs, batch, lr, schedule
    [grpo]                  # steps, group_size, groups, lr, kl, format_weight, ...

    python -m agents.lm.train CONFIG.toml --out DIR [--resume] [--device cuda]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from agents import registry
from agents.base import SellerPolicy
from agents.command import config_mismatch, one_line, run_guarded
from agents.env import SellerEnv
from agents.lm.analyst import Analyst, NarratedTeacher
from agents.lm.model import TinyModelConfig, build_tiny, load
from agents.lm.policy import LMSeller, policy_file, write_policy_file
from agents.lm.transcripts import teacher_records
from agents.rl.config import MAX_SEED, MAX_STEPS, MAX_THREADS, TRAIN_MEMORY
from agents.rollout import play_batch
from agents.torch_device import torch_device
from arena import limits
from arena.config import MarketConfig, finite_float, load_market_file, read_toml
from arena.generator import generate_batch, generate_keyed_batch
from arena.rewards import VIOLATION_PENALTY
from arena.words import shown

POLICY_CLASSES = ("LMSeller",)
STAGES = ("sft", "grpo")
"""The training stages, in order (what ``latest/position.json`` and ``curve.csv`` name)."""


@dataclass(frozen=True)
class SFTConfig:
    """Stage one: supervised warm start on the teacher's messages."""

    markets: int = 256
    """Teacher markets played for the data set (every seller message is one example)."""
    epochs: int = 2
    """Passes over the data set."""
    batch: int = 16
    """Examples per optimizer step."""
    lr: float = 3e-3
    """Adam learning rate."""
    schedule: str = "constant"
    """``constant``: ``lr`` throughout; ``cosine``: from ``lr`` down to 0 over the stage's
    steps (half a cosine), set from the step alone, so a resumed run follows it."""


SFT_SCHEDULES = ("constant", "cosine")


def sft_rate(sft: SFTConfig, step: int, steps: int) -> float:
    """The warm start's learning rate at ``step`` of ``steps``."""
    if sft.schedule == "constant" or steps <= 1:
        return sft.lr
    return 0.5 * sft.lr * (1.0 + math.cos(math.pi * step / (steps - 1)))


@dataclass(frozen=True)
class GRPOConfig:
    """Stage two: episode-level GRPO against the buyers."""

    steps: int = 30
    """Optimizer steps (each plays groups x group_size complete episodes)."""
    group_size: int = 4
    """G: episodes sampled on the same market instance."""
    groups: int = 4
    """Market instances per step."""
    lr: float = 5e-4
    """Adam learning rate."""
    kl: float = 0.05
    """Weight of the KL term to the warm-started model."""
    format_weight: float = 0.1
    """Reward for an episode whose messages all parse (pro rata)."""
    penalty: float = VIOLATION_PENALTY
    """Seller reward's cost per violation (arena.rewards)."""
    temperature: float = 1.0
    """Sampling temperature while playing."""
    pool: int = 0
    """0: fresh market instances every step; k > 0: cycle over a fixed pool of k market
    instances (the same markets again and again: a clean learning signal for checks)."""


@dataclass(frozen=True)
class LMTrainConfig:
    """Everything a run needs; ``train_config.json`` in the run folder holds it."""

    policy: str = "LMSeller"
    """The policy class trained (what ``arena train`` dispatches on)."""
    side: str = "seller"
    """The side trained (only the seller for now)."""
    seed: int = 0
    """One root seed: teacher markets, data order, training markets, sampling."""
    base_model: str = ""
    """A local causal-LM directory to start from; "": the tiny default of ``model``."""
    buyers: str = "truthful"
    """Buyer entry or population (``agents.registry.make_buyers``) played against."""
    teacher: str = "greedy_matcher"
    """Registry name of the seller imitated in stage one."""
    name: str = "lm_seller"
    """Entry name the trained model plays under (its policy.json)."""
    analyst: int = 3
    """Offers on the analyst's short list in each prompt (0: the view alone)."""
    threads: int = 1
    """torch CPU threads (one is fastest on a shared machine)."""
    max_new_tokens: int = 64
    """Cap on the tokens of one generated message."""
    max_prompt_tokens: int = 1536
    """Longer prompts keep the market's state and the latest conversation."""
    micro_batch: int = 16
    """Sequences per forward/backward pass (memory only; the result is the same)."""
    model: TinyModelConfig = field(default_factory=TinyModelConfig)
    """The tiny default model (used when base_model is "")."""
    market: MarketConfig = field(default_factory=MarketConfig)
    """The markets trained on."""
    sft: SFTConfig = field(default_factory=SFTConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)

    def __post_init__(self) -> None:
        if self.policy not in POLICY_CLASSES:
            raise ValueError(f"policy: expected one of {', '.join(POLICY_CLASSES)}")
        if self.side != "seller":
            raise ValueError("side: only seller training is implemented for language models")
        checks = [
            (self.sft.markets >= 1 and self.sft.epochs >= 0 and self.sft.batch >= 1, "sft"),
            (self.grpo.steps >= 0 and self.grpo.group_size >= 2 and self.grpo.groups >= 1,
             "grpo (steps >= 0, group_size >= 2, groups >= 1)"),
            (self.threads >= 1 and self.micro_batch >= 1, "threads and micro_batch >= 1"),
        ]  # fmt: skip
        for ok, what in checks:
            if not ok:
                raise ValueError(f"bad {what} settings")
        if self.threads > MAX_THREADS:
            raise ValueError(f"threads: at most {MAX_THREADS}, got {self.threads}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed: expected an integer in [0, {MAX_SEED}], got {self.seed}")
        if not 0 <= self.analyst <= 9:
            raise ValueError("analyst: 0 (no short list) to 9 offers")
        numbers = [
            (self.max_new_tokens >= 1, "max_new_tokens >= 1"),
            (self.max_prompt_tokens >= 8, "max_prompt_tokens >= 8"),
            (self.sft.lr > 0 and self.grpo.lr > 0, "sft.lr and grpo.lr > 0"),
            (self.grpo.kl >= 0 and self.grpo.format_weight >= 0, "grpo.kl, format_weight >= 0"),
            (self.grpo.penalty >= 0 and self.grpo.pool >= 0, "grpo.penalty and pool >= 0"),
            (self.grpo.temperature > 0, "grpo.temperature > 0"),
            (self.sft.schedule in SFT_SCHEDULES, f"sft.schedule in {SFT_SCHEDULES}"),
        ]
        for ok, what in numbers:
            if not ok:
                raise ValueError(f"expected {what}")
        self._check_sizes()
        policy_file(self.policy, self.name, {})  # a bad entry name fails now, not at the end

    def _check_sizes(self) -> None:
        """Refuse, when the config is read, a run that could not fit memory or would run
        without end: counts of markets and steps are capped, the tiny model's positions
        must hold a prompt and its message, and its training must fit ``TRAIN_MEMORY``
        (``memory_bytes``; a ``base_model`` is sized when it is loaded)."""
        caps = [
            ("sft.markets", self.sft.markets, limits.MAX_MARKETS_PER_MATCH),
            ("sft.epochs", self.sft.epochs, MAX_STEPS),
            ("grpo.steps", self.grpo.steps, MAX_STEPS),
            ("grpo.groups x group_size", self.grpo.groups * self.grpo.group_size, 4096),
            ("grpo.pool", self.grpo.pool, limits.MAX_MARKETS_PER_MATCH),
            ("model.corpus_markets", self.model.corpus_markets, 100_000),
        ]
        for key, value, cap in caps:
            if value > cap:
                raise ValueError(f"{key}: at most {cap:,}, got {value:,}")
        if self.base_model:
            return
        seq = self.max_prompt_tokens + self.max_new_tokens
        if seq > self.model.max_positions:
            raise ValueError(
                f"max_prompt_tokens + max_new_tokens = {seq:,} is over the model's "
                f"max_positions ({self.model.max_positions:,})"
            )
        if (need := self.memory_bytes()) > TRAIN_MEMORY:
            raise ValueError(
                f"[model] and micro_batch: training the tiny model "
                f"({self.model.hidden_size:,} wide, {self.model.layers:,} layers, a vocabulary "
                f"of {self.model.vocab_size:,}) on {self.micro_batch:,} sequences of {seq:,} "
                f"tokens at once needs about {limits.size_text(need)}, over the "
                f"{limits.size_text(TRAIN_MEMORY)} a training run may use"
            )

    def memory_bytes(self) -> int:
        """About what training the tiny model needs at least (float32): the weights, their
        gradients, Adam's two moments and the frozen reference (five copies), and one
        micro-batch's activations (each layer's attention and MLP inputs and outputs) and
        logits, kept for the backward pass."""
        m = self.model
        h, i = m.hidden_size, m.intermediate_size
        params = m.vocab_size * h + m.layers * (4 * h * h + 3 * h * i + 2 * h) + h
        tokens = self.micro_batch * (self.max_prompt_tokens + self.max_new_tokens)
        activations = tokens * (m.layers * (6 * h + 3 * i) + 2 * m.vocab_size)
        return 4 * (5 * params + activations)

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: Path | None = None) -> LMTrainConfig:
        """From the TOML layout of the module docstring (unknown keys are an error)."""
        data = dict(data)
        known = {"train", "model", "market", "sft", "grpo"}
        if unknown := sorted(set(data) - known):
            raise ValueError(f"unknown table(s) {', '.join(unknown)}; known: {sorted(known)}")
        top = _only(cls, data.get("train", {}), "train", extra=("market",))
        market = top.pop("market", None)
        if isinstance(market, str):
            path = Path(market) if base is None or Path(market).is_absolute() else base / market
            market_cfg = load_market_file(str(path))
        else:
            table = data.get("market", {})
            market_cfg = _built("market", lambda: MarketConfig.from_dict(table))
        model = _only(TinyModelConfig, data.get("model", {}), "model")
        sft = _only(SFTConfig, data.get("sft", {}), "sft")
        grpo = _only(GRPOConfig, data.get("grpo", {}), "grpo")
        return cls(
            **top,
            model=_built("model", lambda: TinyModelConfig(**model)),
            market=market_cfg,
            sft=_built("sft", lambda: SFTConfig(**sft)),
            grpo=_built("grpo", lambda: GRPOConfig(**grpo)),
        )

    @classmethod
    def from_toml(cls, path: str | Path) -> LMTrainConfig:
        """Read a config file; every problem is one ValueError naming the file."""
        data = read_toml(str(path), "training config")
        try:
            return cls.from_dict(data, Path(path).parent)
        except (TypeError, ValueError, OverflowError) as err:
            raise ValueError(f"{path}: {err}") from None

    def to_json(self) -> dict:
        return asdict(self)


def _only(cls, table: dict, name: str, extra: tuple[str, ...] = ()) -> dict:
    """The keys of a TOML table ``[name]`` that ``cls`` takes, each of its field's type
    (an integer where it takes one; a finite number for a float): a string "32" or an
    integer too large for a float is refused here, naming the key, not deep in training."""
    if not isinstance(table, dict):
        raise ValueError(f"[{name}]: expected a table, got {table!r}")
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    names = (set(defaults) - {"model", "market", "sft", "grpo"}) | set(extra)
    if unknown := sorted(set(table) - names):
        raise ValueError(f"[{name}]: unknown key(s) {', '.join(unknown)}")
    for key, value in table.items():
        if key in defaults:
            _check_type(f"[{name}] {key}", defaults[key], value)
    return {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}


def _check_type(where: str, default: Any, value: Any) -> None:
    """``value`` of the type of the field's ``default``."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(default, bool):
        ok, expected = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, expected = number and isinstance(value, int), "an integer"
    elif isinstance(default, float):
        ok, expected = finite_float(value) is not None, "a finite number"
    elif isinstance(default, str):
        ok, expected = isinstance(value, str), "a string"
    else:
        return
    if not ok:
        raise ValueError(f"{where}: expected {expected}, got {shown(value)}")


def _built(name: str, make: Callable[[], Any]) -> Any:
    """``make()``, its errors prefixed with the table ``[name]`` they come from."""
    try:
        return make()
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"[{name}] {err}") from None


def is_lm_config(path: str | Path) -> bool:
    """Whether a training config names a language-model policy class (``[train] policy``),
    for a command that dispatches between trainers. Unreadable files are not (the other
    trainer's reader names what is wrong with them)."""
    try:
        data = read_toml(str(path), "training config")
    except ValueError:
        return False
    train_table = data.get("train")
    return isinstance(train_table, dict) and train_table.get("policy") in POLICY_CLASSES


def load_config(config: str | Path | LMTrainConfig) -> LMTrainConfig:
    return config if isinstance(config, LMTrainConfig) else LMTrainConfig.from_toml(config)


# --------------------------------------------------------------------------- pieces


def sequence_logprobs(
    model,
    examples: list[tuple[list[int], list[int]]],
    pad: int,
    device: str,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of each example's completion given its prompt:
    (E, C) values and a (E, C) mask, C the longest completion. Right padding: real
    tokens never attend to the padding after them. ``temperature``: the distribution
    softmax(logits / temperature) that the sampler drew from (``KeyedSampler``), so
    GRPO's gradient and KL are those of the policy that played."""
    lengths = [len(p) + len(c) for p, c in examples]
    width = max(lengths)
    c_max = max(len(c) for _, c in examples)
    ids = torch.full((len(examples), width), pad, dtype=torch.long)
    for k, (p, c) in enumerate(examples):
        ids[k, : lengths[k]] = torch.tensor(p + c, dtype=torch.long)
    logits = model(input_ids=ids.to(device)).logits.float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    out = torch.zeros((len(examples), c_max), device=logits.device)
    mask = torch.zeros((len(examples), c_max), device=logits.device)
    for k, (p, c) in enumerate(examples):
        pos = torch.arange(len(p) - 1, len(p) + len(c) - 1, device=logits.device)
        target = torch.tensor(c, dtype=torch.long, device=logits.device)
        out[k, : len(c)] = logp[k, pos, target]
        mask[k, : len(c)] = 1.0
    return out, mask


def group_advantages(returns: np.ndarray, group_size: int) -> np.ndarray:
    """(R - group mean) / (group std + 1e-6), groups of consecutive rows; 0 where a group's
    returns are all equal."""
    r = returns.reshape(-1, group_size)
    std = r.std(axis=1, keepdims=True)
    adv = np.where(std > 1e-9, (r - r.mean(axis=1, keepdims=True)) / (std + 1e-6), 0.0)
    return adv.reshape(-1)


def save_optimizer(opt: torch.optim.Optimizer, path: Path) -> None:
    """Optimizer state as safetensors (tensors) + JSON (everything else)."""
    state = opt.state_dict()
    tensors, meta = {}, {"param_groups": state["param_groups"], "state": {}}
    for idx, s in state["state"].items():
        meta["state"][str(idx)] = {}
        for name, value in s.items():
            if torch.is_tensor(value):
                tensors[f"{idx}.{name}"] = value.detach().cpu().contiguous()
            else:
                meta["state"][str(idx)][name] = value
    save_file(tensors, str(path.with_suffix(".safetensors")))
    path.with_suffix(".json").write_text(json.dumps(meta))


def read_optimizer(path: Path, params: list[torch.Tensor]) -> dict:
    """The optimizer state ``save_optimizer`` wrote, checked against the parameters it is
    for: a file that is damaged or holds the state of other parameters is one
    ``ValueError`` "FILE: damaged checkpoint (...)"."""
    meta_path, tensor_path = path.with_suffix(".json"), path.with_suffix(".safetensors")
    try:
        meta = json.loads(meta_path.read_text())
        state: dict[int, dict] = {int(k): dict(v) for k, v in meta["state"].items()}
        groups = meta["param_groups"]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise ValueError(f"{meta_path}: damaged checkpoint ({_reason(err)})") from None
    try:
        tensors = load_file(str(tensor_path))
        for key, value in tensors.items():
            idx, name = key.split(".", 1)
            state.setdefault(int(idx), {})[name] = value
    except (SafetensorError, ValueError) as err:  # a damaged file, or a key not "N.name"
        raise ValueError(f"{tensor_path}: damaged checkpoint ({_reason(err)})") from None
    saved = {"state": state, "param_groups": groups}
    try:
        _check_moments(params, state)
        torch.optim.Adam(params).load_state_dict(saved)  # what torch checks, on a spare
    except (ValueError, KeyError, TypeError, IndexError) as err:
        raise ValueError(f"{meta_path}: damaged checkpoint ({_reason(err)})") from None
    return saved


def _check_moments(params: list[torch.Tensor], state: dict[int, dict]) -> None:
    """The state is of these parameters, each saved tensor but a scalar (Adam's step) of
    its parameter's shape: torch keeps the state of a parameter it does not have, and
    takes another shape to fail only at the next step."""
    for idx, entry in state.items():
        if not 0 <= idx < len(params):
            raise ValueError(f"state of parameter {idx}; the model has {len(params)}")
        for name, value in entry.items():
            want = list(params[idx].shape)
            if torch.is_tensor(value) and value.ndim and list(value.shape) != want:
                raise ValueError(f"{idx}.{name} has shape {list(value.shape)}, not {want}")


def _reason(err: BaseException) -> str:
    return f"no {err.args[0]!r}" if isinstance(err, KeyError) and err.args else one_line(err)


def read_position(latest: Path, steps: dict[str, int]) -> dict:
    """The stage and step a checkpoint holds (``latest/position.json``): a stage of
    ``steps`` and a whole number of its steps, 0 to ``steps[stage]``; anything else is one
    ``ValueError`` "FILE: damaged checkpoint (...)"."""
    path = latest / "position.json"
    try:
        position = json.loads(path.read_text())
    except (ValueError, RecursionError) as err:  # not JSON, or not UTF-8
        raise ValueError(f"{path}: damaged checkpoint ({_reason(err)})") from None
    stage = position.get("stage") if isinstance(position, dict) else None
    if not isinstance(stage, str) or stage not in steps:
        raise ValueError(
            f"{path}: damaged checkpoint (stage {shown(stage)}; expected {' or '.join(steps)})"
        )
    step, last = position.get("step"), steps[stage]
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= last:
        raise ValueError(
            f"{path}: damaged checkpoint (step {shown(step)} of stage {stage}, which has "
            f"steps 0 to {last})"
        )
    return position


class Curve:
    """The learning curve: one CSV row per step, appended as it goes; a PNG at the end."""

    FIELDS = ("stage", "step", "loss", "reward", "capture", "violation_rate", "kl", "wall_s")

    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        if not (resume and path.exists()):
            with open(path, "w", newline="") as f:
                csv.writer(f).writerow(self.FIELDS)

    def truncate(self, stage: str, step: int) -> None:
        """Drop rows past the checkpoint being resumed from (a step begun, not saved). A row
        of no known stage or step is one ``ValueError`` "FILE: damaged checkpoint (...)"."""
        here = (STAGES.index(stage), step)
        keep = [r for n, r in enumerate(self.rows(), 2) if self._place(r, n) < here]
        with open(self.path, "w", newline="") as f:
            w = csv.DictWriter(f, self.FIELDS)
            w.writeheader()
            w.writerows(keep)

    def _place(self, row: dict, line: int) -> tuple[int, int]:
        """(stage, step) of a row, in training order."""
        stage, step = row.get("stage"), row.get("step")
        whole = isinstance(step, str) and step.isascii() and step.isdigit()
        if stage not in STAGES or not whole:
            raise ValueError(
                f"{self.path}: damaged checkpoint (line {line} has stage {shown(stage)} and "
                f"step {shown(step)}; expected a stage of {', '.join(STAGES)} and a step)"
            )
        return STAGES.index(stage), int(step)

    def add(self, **row: Any) -> None:
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerow([_fmt(row.get(k, "")) for k in self.FIELDS])

    def rows(self) -> list[dict]:
        with open(self.path, newline="") as f:
            return list(csv.DictReader(f))

    def plot(self, png: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = self.rows()
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        sft = [r for r in rows if r["stage"] == "sft"]
        grpo = [r for r in rows if r["stage"] == "grpo"]
        if sft:
            axes[0].plot([int(r["step"]) for r in sft], [float(r["loss"]) for r in sft])
        axes[0].set(title="stage one: warm start", xlabel="step", ylabel="cross-entropy")
        if grpo:
            x = [int(r["step"]) for r in grpo]
            axes[1].plot(x, [float(r["reward"]) for r in grpo], label="episode reward")
            axes[1].plot(x, [float(r["capture"]) for r in grpo], label="capture")
            axes[1].legend()
        axes[1].set(title="stage two: GRPO", xlabel="step", ylabel="mean per episode")
        fig.tight_layout()
        fig.savefig(png, dpi=100)
        plt.close(fig)


def _fmt(x: Any) -> Any:
    return f"{x:.6g}" if isinstance(x, float) else x


def _save_model(model, tokenizer, path: Path) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    return tmp


def _commit(tmp: Path, path: Path) -> None:
    """Replace ``path`` by ``tmp`` (a crash leaves either the old or the new one)."""
    old = path.with_name(path.name + ".old")
    if path.exists():
        if old.exists():  # left by a commit stopped while it removed it: ``path`` is newer
            shutil.rmtree(old)
        path.rename(old)
    tmp.rename(path)
    if old.exists():
        shutil.rmtree(old)


def _recover_latest(path: Path) -> None:
    """A run stopped between ``_commit``'s two renames has ``path.old`` and no ``path``:
    the old checkpoint is the last whole one, so it becomes ``path`` again."""
    old = path.with_name(path.name + ".old")
    if not path.exists() and (old / "position.json").exists():
        old.rename(path)


def _checkpoint(out: Path, model, tokenizer, opt, stage: str, step: int, extra: dict) -> None:
    """OUT/latest: model, optimizer and position, replaced as one unit."""
    tmp = _save_model(model, tokenizer, out / "latest")
    save_optimizer(opt, tmp / "optimizer")
    (tmp / "position.json").write_text(json.dumps({"stage": stage, "step": step, **extra}))
    _commit(tmp, out / "latest")


# --------------------------------------------------------------------------- stages


def teacher_policy(cfg: LMTrainConfig) -> SellerPolicy:
    """``cfg.teacher`` as stage one plays it. A seller that reads the buyers' private values
    is refused: the model never sees them, so its moves could not be learnt from what the
    model is shown (and the narrated teacher does not hand them on)."""
    teacher = registry.make(cfg.teacher, "seller", seed=cfg.seed)
    if getattr(teacher, "sees_private", False):
        raise ValueError(
            f"teacher: {cfg.teacher} reads the buyers' private values, which the model never "
            "sees: imitate a seller that plays from public information"
        )
    return teacher


def _teacher_examples(cfg: LMTrainConfig, teacher, buyers) -> list[dict]:
    """Stage one's records: (prompt, completion) of every teacher message."""
    if cfg.analyst == 0:
        return teacher_records(cfg.market, teacher, buyers, cfg.sft.markets, cfg.seed)
    narrated = NarratedTeacher(teacher, Analyst(cfg.analyst))
    play_batch(generate_batch(cfg.market, cfg.seed, cfg.sft.markets), narrated, buyers)
    return narrated.records


def policy_params(cfg: LMTrainConfig) -> dict:
    """What a trained model plays with (its policy.json): greedy decoding, the prompt it
    was trained on."""
    return {"analyst": cfg.analyst, "max_new_tokens": cfg.max_new_tokens,
            "max_prompt_tokens": cfg.max_prompt_tokens, "temperature": 0.0}  # fmt: skip


def _encode(
    tokenizer, records: list[dict], max_prompt_tokens: int, max_new_tokens: int | None = None
) -> list[tuple]:
    """(prompt ids, completion ids and the end-of-text token) of each record: the texts
    as text (``encode_text``), the end-of-text token the one special token."""
    from agents.lm.generate import encode_prompts, encode_text

    prompts = [r["prompt"] for r in records]
    heads = [p.find("\nConversation") for p in prompts]
    ids = encode_prompts(tokenizer, prompts, max_prompt_tokens, heads)
    eos = tokenizer.eos_token_id
    examples = [
        (p, encode_text(tokenizer, r["completion"]) + [eos])
        for p, r in zip(ids, records, strict=True)
    ]
    longest = max((len(c) for _, c in examples), default=0)
    if max_new_tokens is not None and longest > max_new_tokens:
        # The model could never finish the teacher's messages: every one would be cut
        # short and count as a violation.
        raise ValueError(
            f"the teacher's messages take up to {longest} tokens with the end-of-text token; "
            f"max_new_tokens is {max_new_tokens}"
        )
    return examples


def _sft_step(model, opt, examples, cfg: LMTrainConfig, pad: int, device: str) -> float:
    opt.zero_grad()
    tokens = sum(len(c) for _, c in examples)
    total = 0.0
    for start in range(0, len(examples), cfg.micro_batch):
        part = examples[start : start + cfg.micro_batch]
        logp, mask = sequence_logprobs(model, part, pad, device)
        loss = -(logp * mask).sum() / tokens
        loss.backward()
        total += float(loss.detach())
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return total


def step_markets(grpo: GRPOConfig, step: int) -> np.ndarray:
    """The market indices of GRPO step ``step`` (one a group): fresh ones every step, or
    with ``pool`` k the fixed pool of k markets, cycled market after market."""
    indices = np.arange(step * grpo.groups, (step + 1) * grpo.groups)
    return indices % grpo.pool if grpo.pool else indices


def _play_groups(model, tokenizer, cfg: LMTrainConfig, step: int, device: str) -> dict:
    """G episodes on each of the step's market instances; returns per-episode returns,
    metrics and each message's tokens and episode row."""
    g, n = cfg.grpo.group_size, cfg.grpo.groups
    # Markets of stage two: fresh instances every step (or a fixed pool), from a stream of
    # their own, so they are never the teacher's.
    indices = np.repeat(step_markets(cfg.grpo, step), g)
    batch = generate_keyed_batch(cfg.market, cfg.seed + 1_000_003, indices)
    buyers = registry.make_buyers(cfg.buyers, seed=cfg.seed)
    env = SellerEnv.from_batch(batch, buyers, rewards=True, penalty=cfg.grpo.penalty, dialogue=True)
    seller = LMSeller(
        model=model,
        tokenizer=tokenizer,
        seed=cfg.seed + step,
        temperature=cfg.grpo.temperature,
        max_new_tokens=cfg.max_new_tokens,
        max_prompt_tokens=cfg.max_prompt_tokens,
        analyst=cfg.analyst,
        device=device,
    )
    seller.salt = np.tile(np.arange(g), n)
    seller.trace = []
    obs = env.reset()
    seller.reset(batch.size)
    returns = np.zeros(batch.size)
    messages = np.zeros(batch.size)
    parsed = np.zeros(batch.size)
    episodes = {}
    while not env.engine.all_done:
        live = ~env.engine.done
        action = seller.act(obs)
        step_out = env.step(action)
        returns += np.where(live, step_out.reward, 0.0)
        messages += live
        parsed += live & ~action.malformed
        if "episodes" in step_out.info:
            ep = step_out.info["episodes"]
            for k, row in enumerate(ep["rows"]):
                episodes[int(row)] = {name: float(ep[name][k]) for name in ep if name != "rows"}
        obs = step_out.obs
    fmt = parsed / np.maximum(messages, 1)
    total = returns + cfg.grpo.format_weight * fmt
    capture = np.array([episodes[r]["capture"] for r in range(batch.size)])
    violations = np.array([episodes[r]["seller_violations"] for r in range(batch.size)])
    return {
        "return": total,
        "capture": np.nan_to_num(capture),
        "violation_rate": violations.sum() / max(messages.sum(), 1),
        "trace": seller.trace,
    }


def _grpo_step(model, ref, opt, played: dict, cfg: LMTrainConfig, pad, eos, device) -> dict:
    adv = group_advantages(played["return"], cfg.grpo.group_size)
    examples = [(p, c + [eos] if ended else c) for _, p, c, ended in played["trace"]]
    rows = np.array([r for r, *_ in played["trace"]])
    keep = [k for k, (_, c) in enumerate(examples) if len(c) > 0]
    opt.zero_grad()
    total_loss = total_kl = 0.0
    n_msg = len(keep)
    n_tok = sum(len(examples[k][1]) for k in keep)
    for start in range(0, n_msg, cfg.micro_batch):
        part = keep[start : start + cfg.micro_batch]
        ex = [examples[k] for k in part]
        a = torch.tensor(adv[rows[part]], dtype=torch.float32, device=device)
        logp, mask = sequence_logprobs(model, ex, pad, device, cfg.grpo.temperature)
        with torch.no_grad():
            ref_logp, _ = sequence_logprobs(ref, ex, pad, device, cfg.grpo.temperature)
        per_msg = (logp * mask).sum(dim=1) / mask.sum(dim=1)
        pg = -(a * per_msg).sum() / n_msg
        r = (ref_logp - logp) * mask
        kl = ((torch.exp(r) - r - 1.0) * mask).sum() / n_tok
        loss = pg + cfg.grpo.kl * kl
        loss.backward()
        total_loss += float(loss.detach())
        total_kl += float(kl.detach())
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return {"loss": total_loss, "kl": total_kl}


# --------------------------------------------------------------------------- train


def train(
    config: str | Path | LMTrainConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    device: str = "cpu",
    progress: bool = True,
) -> Path:
    """Run both stages (see the module docstring); returns ``OUT/final``.

    ``resume``: continue a run stopped in ``out_dir`` from ``OUT/latest`` (the config
    must be the one it was started with). Without it, an ``out_dir`` that already holds a
    run is refused, so nothing is overwritten by mistake; so is one that holds anything
    else (a checkpoint, anyone's files), with or without it."""
    from tqdm import tqdm

    cfg = load_config(config)
    if not str(out_dir):
        raise ValueError("the run folder (--out) is empty: name a folder for the run")
    torch_device(device)  # before anything is written
    out = Path(out_dir)
    saved = out / "train_config.json"
    if saved.exists():
        if not resume:
            raise ValueError(f"{out} already holds a training run; resume it or pick another")
        stored, now = json.loads(saved.read_text()), json.loads(json.dumps(cfg.to_json()))
        if stored != now:
            raise ValueError(f"{config_mismatch(out, stored, now)}; it cannot resume this one")
    else:
        _check_fresh_folder(out, resume)
    teacher = teacher_policy(cfg)  # one the model cannot learn from is refused before a write
    out.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(cfg.to_json(), indent=2) + "\n")
    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()

    # --- model
    if cfg.base_model:
        base = Path(cfg.base_model)
    else:
        base = out / "base"
        if not (base / "config.json").exists():
            build_tiny(base, cfg.model)

    # --- stage one's data: the teacher's messages, whose number sets the stage's steps
    buyers = registry.make_buyers(cfg.buyers, seed=cfg.seed)
    records = _teacher_examples(cfg, teacher, buyers)
    per_epoch = -(-len(records) // cfg.sft.batch)
    sft_steps = per_epoch * cfg.sft.epochs

    # --- where a resumed run stands: read and checked before anything is trained
    position, saved_opt = {"stage": "sft", "step": 0}, None
    latest = out / "latest"
    if resume:
        _recover_latest(latest)
    if resume and (latest / "position.json").exists():
        position = read_position(latest, {"sft": sft_steps, "grpo": cfg.grpo.steps})
        model, tokenizer = load(latest, device)
        if position["step"] > 0:  # the optimizer of the stage resumed
            saved_opt = read_optimizer(latest / "optimizer", list(model.parameters()))
    else:
        model, tokenizer = load(base, device)
    model.train()
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    curve = Curve(out / "curve.csv", resume)
    if resume:
        curve.truncate(position["stage"], position["step"])

    # --- stage one: supervised warm start
    examples = _encode(tokenizer, records, cfg.max_prompt_tokens, cfg.max_new_tokens)
    bar = tqdm(total=sft_steps + cfg.grpo.steps, disable=not progress, desc="train", unit="step")
    opt = torch.optim.Adam(model.parameters(), lr=cfg.sft.lr)
    if position["stage"] == "sft":
        if position["step"] > 0:
            opt.load_state_dict(saved_opt)
        bar.update(position["step"])
        for step in range(position["step"], sft_steps):
            epoch, k = divmod(step, per_epoch)
            order = np.random.default_rng([cfg.seed, epoch]).permutation(len(examples))
            chunk = [examples[i] for i in order[k * cfg.sft.batch : (k + 1) * cfg.sft.batch]]
            for group in opt.param_groups:
                group["lr"] = sft_rate(cfg.sft, step, sft_steps)
            loss = _sft_step(model, opt, chunk, cfg, pad, device)
            curve.add(stage="sft", step=step, loss=loss, wall_s=time.perf_counter() - t0)
            _checkpoint(out, model, tokenizer, opt, "sft", step + 1, {})
            bar.update(1)
            bar.set_postfix(stage="sft", loss=f"{loss:.3f}")
        tmp = _save_model(model, tokenizer, out / "sft")
        write_policy_file(tmp, cfg.policy, cfg.name + "_warm", policy_params(cfg))
        _commit(tmp, out / "sft")
        position = {"stage": "grpo", "step": 0}
        opt = torch.optim.Adam(model.parameters(), lr=cfg.grpo.lr)
        _checkpoint(out, model, tokenizer, opt, "grpo", 0, {})
    else:
        bar.update(sft_steps)

    # --- stage two: GRPO
    ref, _ = load(out / "sft", device)
    ref.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.grpo.lr)
    if position["step"] > 0:
        opt.load_state_dict(saved_opt)
    bar.update(position["step"])
    for step in range(position["step"], cfg.grpo.steps):
        model.eval()
        played = _play_groups(model, tokenizer, cfg, step, device)
        model.train()
        stats = _grpo_step(model, ref, opt, played, cfg, pad, eos, device)
        reward = float(played["return"].mean())
        curve.add(
            stage="grpo",
            step=step,
            loss=stats["loss"],
            reward=reward,
            capture=float(played["capture"].mean()),
            violation_rate=float(played["violation_rate"]),
            kl=stats["kl"],
            wall_s=time.perf_counter() - t0,
        )
        _checkpoint(out, model, tokenizer, opt, "grpo", step + 1, {})
        bar.update(1)
        bar.set_postfix(stage="grpo", reward=f"{reward:.3f}")
    bar.close()

    tmp = _save_model(model, tokenizer, out / "final")
    write_policy_file(tmp, cfg.policy, cfg.name, policy_params(cfg))
    _commit(tmp, out / "final")
    curve.plot(out / "curve.png")
    return out / "final"


def _check_fresh_folder(out: Path, resume: bool) -> None:
    """A folder that holds no run of this trainer (no ``train_config.json``) is trained
    into only when it is empty or not there yet: a checkpoint or anyone's files in it are
    never overwritten."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"{out}: not a folder; choose another run folder")
    held = sorted(p.name for p in out.iterdir())
    if held:
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        if resume:
            raise ValueError(
                f"{out}: nothing to resume (no train_config.json), and it holds {shown}, "
                "which training would overwrite; choose another run folder"
            )
        raise ValueError(
            f"{out}: holds {shown} already, which training would overwrite; choose another "
            "run folder (there is no run there to resume)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train a language-model seller.")
    parser.add_argument("config", help="training config (TOML)")
    parser.add_argument("--out", required=True, help="run folder")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run folder from its last checkpoint"
    )
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, ...)")
    args = parser.parse_args(argv)
    path = train(args.config, args.out, resume=args.resume, device=args.device)
    print(f"trained model: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_guarded("agents.lm.train", main))
