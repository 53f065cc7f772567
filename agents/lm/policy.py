"""Local language-model policies: ``LMSeller`` and ``LMBuyer``.

Each turn the policy renders every market that needs a message (``agents.lm.prompts``),
generates all of them in batched chunks with keyed sampling (``agents.lm.generate``),
and turns the texts into an action with the shared parse helper (``agents.text``).
Output that does not parse is a counted violation in the market, never an exception.
The model is any local causal-LM directory (``agents.lm.model.load``).

The seller's prompt includes an analyst's short list computed from public information
(``analyst``: the number of offers listed, 0 for none; ``agents.lm.analyst``).

``trace``: when set to a list, every act appends, per market it decided, the token ids
the trainer needs: ``(row, prompt_ids, completion_ids, end)`` with ``end`` True when the
completion stopped on the end-of-text token (the token is not in ``completion_ids``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.base import (
    AGENT,
    BuyerAction,
    BuyerPolicy,
    SellerAction,
    SellerPolicy,
    is_entry_name,
)
from agents.lm.analyst import Analyst
from agents.lm.generate import SamplingKeys, encode_prompts, generate
from agents.lm.model import load
from agents.lm.prompts import prompt, seller_prompt
from agents.text import buyer_action, seller_action
from arena.observation import BuyerObs, SellerObs
from arena.protocol import MAX_MESSAGE_CHARS

BATCH_INVARIANCE = (
    "decisions: a market's sampled message equals the one it gets alone unless a keyed draw "
    "falls within float rounding (about 1e-6) of a token boundary; logits are not bit-identical "
    "across batch shapes on this backend"
)


@dataclass(eq=False)
class _LMPolicy:
    path: str = ""
    """A local causal-LM directory (safetensors weights, no remote code)."""
    seed: int = 0
    """Seed of the keyed sampling."""
    temperature: float = 1.0
    """Sampling temperature; 0: greedy."""
    max_new_tokens: int = 64
    """Cap on the tokens of one message."""
    max_prompt_tokens: int = 1536
    """Longer prompts keep the market's state and the latest conversation."""
    chunk: int = 16
    """Markets generated together (of similar prompt length)."""
    device: str = "cpu"
    """torch device; "cuda" where present."""
    threads: int = 0
    """torch CPU threads for the process hosting the policy (0: leave torch's setting).
    On a shared CPU one thread is often much faster than several that spin-wait."""
    model: Any = field(default=None, repr=False)
    """A loaded model (with ``tokenizer``) instead of ``path``, e.g. a trainer's."""
    tokenizer: Any = field(default=None, repr=False)

    reads_text = True
    batch_invariance = BATCH_INVARIANCE

    def __post_init__(self) -> None:
        if self.threads > 0:
            torch.set_num_threads(self.threads)
        if (
            not 0 <= self.temperature < math.inf  # NaN too
            or not 1 <= self.max_new_tokens <= MAX_MESSAGE_CHARS  # longer: too_long anyway
            or self.max_prompt_tokens < 8
            or self.chunk < 1
        ):
            raise ValueError(
                f"a finite temperature >= 0, 1 <= max_new_tokens <= {MAX_MESSAGE_CHARS:,}, "
                "max_prompt_tokens >= 8, chunk >= 1"
            )
        if self.model is None:
            if not self.path:
                raise ValueError("a language-model policy needs a model directory (path)")
            self.model, self.tokenizer = load(self.path, self.device)
        self.salt: np.ndarray | None = None  # (B,) per-row salt (GRPO group members)
        self.trace: list | None = None

    def _prompts(self, obs: SellerObs | BuyerObs, rows: np.ndarray) -> list[str]:
        return [prompt(obs, int(r)) for r in rows]

    def _texts(self, obs: SellerObs | BuyerObs, rows: np.ndarray) -> list[str]:
        b = obs.batch_size
        prompts = self._prompts(obs, rows)
        texts = [""] * b  # rows that need no message: ignored by the market
        if rows.size == 0:
            return texts
        heads = [p.find("\nConversation") for p in prompts]
        ids = encode_prompts(self.tokenizer, prompts, self.max_prompt_tokens, heads)
        salt = np.zeros(b, np.int64) if self.salt is None else self.salt
        keys = SamplingKeys(self.seed, obs.key, obs.turn, salt).take(rows)
        with torch.inference_mode():
            out = generate(
                self.model,
                self.tokenizer,
                ids,
                keys,
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                chunk=self.chunk,
            )
        for r, completion in zip(rows, out, strict=True):
            texts[r] = self.tokenizer.decode(completion, skip_special_tokens=True)
        if self.trace is not None:
            for r, p, c in zip(rows.tolist(), ids, out, strict=True):
                self.trace.append((r, p, c, len(c) < self.max_new_tokens))
        return texts


@dataclass(eq=False)
class LMSeller(_LMPolicy, SellerPolicy):
    """A seller whose messages a language model writes."""

    analyst: int = 3
    """Offers on the analyst's short list in the prompt (0: no list; ``agents.lm.analyst``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._analyst = Analyst(self.analyst) if self.analyst > 0 else None

    def reset(self, batch_size: int) -> None:
        if self._analyst is not None:
            self._analyst.reset(batch_size)

    def restart(self, rows: np.ndarray) -> None:
        if self._analyst is not None:
            self._analyst.restart(rows)

    def _prompts(self, obs: SellerObs, rows: np.ndarray) -> list[str]:
        if self._analyst is None:
            return super()._prompts(obs, rows)
        # Every row, every turn: the analyst takes in each answer as it comes.
        short = self._analyst.short_list(obs)
        return [seller_prompt(obs, int(r), short.note(int(r))) for r in rows]

    def act(self, obs: SellerObs) -> SellerAction:
        texts = self._texts(obs, np.flatnonzero(~obs.done))
        return seller_action(texts)[0]


@dataclass(eq=False)
class LMBuyer(_LMPolicy, BuyerPolicy):
    """A buyer (an agent) whose answers a language model writes."""

    kind = AGENT

    def act(self, obs: BuyerObs) -> BuyerAction:
        texts = self._texts(obs, np.flatnonzero(obs.needs_answer))
        return buyer_action(texts)[0]


# --------------------------------------------------------------------------- policy.json

POLICY_FILE = "policy.json"
POLICY_FORMAT = "agent-market-arena/lm-policy/1"
POLICY_CLASSES = {"LMSeller": ("seller", LMSeller), "LMBuyer": ("buyer", LMBuyer)}
_POLICY_KEYS = {"format", "class", "name", "side", "kind", "params"}
_NOT_PARAMS = {"path", "model", "tokenizer", "device", "threads", "seed"}


def policy_file(cls: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The ``policy.json`` of a language-model directory: which policy class plays it,
    under which entry name, with which parameters (the model is the directory itself)."""
    data = {"format": POLICY_FORMAT, "class": cls, "name": name,
            "side": POLICY_CLASSES[cls][0], "kind": "agent", "params": dict(params)}  # fmt: skip
    return check_policy_file(data, "policy.json")


def write_policy_file(directory: str | Path, cls: str, name: str, params: dict[str, Any]) -> Path:
    path = Path(directory) / POLICY_FILE
    path.write_text(json.dumps(policy_file(cls, name, params), indent=2, sort_keys=True) + "\n")
    return path


def check_policy_file(data: Any, where: str) -> dict[str, Any]:
    """``data`` if it is a valid policy.json, else a ``ValueError`` naming ``where``."""
    if not isinstance(data, dict) or data.get("format") != POLICY_FORMAT:
        raise ValueError(f"{where}: not a language-model policy (format must be {POLICY_FORMAT!r})")
    if set(data) != _POLICY_KEYS:
        raise ValueError(f"{where}: expected exactly the keys {sorted(_POLICY_KEYS)}")
    cls = data["class"]
    if not isinstance(cls, str) or cls not in POLICY_CLASSES:
        raise ValueError(f"{where}: unknown class {cls!r}; known: {sorted(POLICY_CLASSES)}")
    if data["side"] != POLICY_CLASSES[cls][0]:
        raise ValueError(f"{where}: an {cls} plays the {POLICY_CLASSES[cls][0]} side")
    if data["kind"] != AGENT:
        raise ValueError(f"{where}: a language-model policy is an agent")
    name = data["name"]
    if not is_entry_name(name):
        raise ValueError(f"{where}: bad entry name {name!r}")
    params = data["params"]
    allowed = {f for f in POLICY_CLASSES[cls][1].__dataclass_fields__} - _NOT_PARAMS
    if not isinstance(params, dict):
        raise ValueError(f"{where}: params must be a table, got {params!r}")
    if unknown := sorted(set(params) - allowed):
        raise ValueError(f"{where}: unknown params {unknown}; known: {sorted(allowed)}")
    fields = POLICY_CLASSES[cls][1].__dataclass_fields__
    for key, value in params.items():
        want = type(fields[key].default)
        kinds = {bool: bool, int: int, float: int | float}.get(want, want)
        ok = isinstance(value, kinds) and (want is bool or not isinstance(value, bool))
        if not ok:
            kind = "an int" if want is int else f"a {want.__name__}"
            raise ValueError(f"{where}: params.{key} must be {kind}, got {value!r}")
        if want is float and not math.isfinite(value):  # json reads NaN and Infinity
            raise ValueError(f"{where}: params.{key} must be finite, got {value!r}")
    return data


def read_policy_file(directory: str | Path) -> dict[str, Any]:
    """The checked ``policy.json`` of a language-model directory."""
    path = Path(directory) / POLICY_FILE
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"{path}: cannot read ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    return check_policy_file(data, str(path))


def from_directory(directory: str | Path, seed: int = 0, **overrides: Any) -> LMSeller | LMBuyer:
    """The policy a language-model directory describes (its policy.json), with its model."""
    meta = read_policy_file(directory)
    cls = POLICY_CLASSES[meta["class"]][1]
    return cls(path=str(directory), seed=seed, **{**meta["params"], **overrides})
