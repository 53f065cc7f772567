"""Local language-model policies: ``LMSeller`` and ``LMBuyer``.

Each turn the policy renders every market that needs a message (``agents.lm.prompts``),
generates all of them in batched chunks with keyed sampling (``agents.lm.generate``),
and turns the texts into an action with the shared parse helper (``agents.text``).
Output that does not parse is a counted violation in the market, never an exception.
The model is any local causal-LM directory (``agents.lm.model.load``).

``trace``: when set to a list, every act appends, per market it decided, the token ids
the trainer needs: ``(row, prompt_ids, completion_ids, end)`` with ``end`` True when the
completion stopped on the end-of-text token (the token is not in ``completion_ids``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agents.base import AGENT, BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.lm.generate import SamplingKeys, encode_prompts, generate
from agents.lm.model import load
from agents.lm.prompts import prompt
from agents.text import buyer_action, seller_action
from arena.observation import BuyerObs, SellerObs

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
        if self.model is None:
            if not self.path:
                raise ValueError("a language-model policy needs a model directory (path)")
            self.model, self.tokenizer = load(self.path, self.device)
        if self.temperature < 0 or self.max_new_tokens < 1 or self.max_prompt_tokens < 8:
            raise ValueError("temperature >= 0, max_new_tokens >= 1, max_prompt_tokens >= 8")
        self.salt: np.ndarray | None = None  # (B,) per-row salt (GRPO group members)
        self.trace: list | None = None

    def _texts(self, obs: SellerObs | BuyerObs, rows: np.ndarray) -> list[str]:
        b = obs.batch_size
        texts = [""] * b  # rows that need no message: ignored by the market
        if rows.size == 0:
            return texts
        prompts = [prompt(obs, int(r)) for r in rows]
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
