"""Batched generation with keyed sampling: the same tokens for a market alone or in a batch.

Each row's draws come from ``arena.noise.uniform(seed, key, turn, salt, step)``: the
policy's seed, the market's key, the turn, a salt (the member of a GRPO group) and the
token's position in the completion. A token is drawn by inverting the row's CDF at that
uniform (temperature > 0) or is the argmax (temperature 0), so sampling keeps no
generator state and a market's message does not depend on the other rows of the batch,
on their order or on how the batch is split into chunks.

The numbers the draws are compared with do depend a little on the batch: on a CPU,
matrix kernels round differently for different batch shapes (about 1e-6 relative on the
logits; left padding itself changes nothing once masked). A message can therefore differ
between a batch and a row alone only when a draw falls within rounding of a token
boundary (or two logits tie to rounding under argmax). ``LMSeller.batch_invariance``
states this, and the conformance check says so for these entries.

Prompts longer than ``max_prompt_tokens`` keep their head (the market's state, up to
``head_chars`` characters of text) and their latest tokens: the oldest part of the
conversation is what is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from arena.noise import uniform


@dataclass(frozen=True)
class SamplingKeys:
    """Per row: (seed, market key, turn, salt); the draws of row b at step s are
    ``uniform(seed, key[b], turn[b], salt[b], s)``."""

    seed: int
    key: np.ndarray  # (B,) uint64
    turn: np.ndarray  # (B,)
    salt: np.ndarray  # (B,)

    def take(self, rows: np.ndarray) -> SamplingKeys:
        return SamplingKeys(self.seed, self.key[rows], self.turn[rows], self.salt[rows])


class KeyedSampler(LogitsProcessor):
    """Turns greedy decoding into keyed sampling: at each step it leaves one token per row
    (drawn as the module docstring says) and masks every other."""

    def __init__(self, keys: SamplingKeys, prompt_length: int, temperature: float) -> None:
        self.keys = keys
        self.prompt_length = prompt_length
        self.temperature = temperature

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        if self.temperature <= 0:
            return scores
        step = input_ids.shape[1] - self.prompt_length
        k = self.keys
        u = uniform(k.seed, k.key, k.turn, k.salt, step)
        probs = torch.softmax(scores.double() / self.temperature, dim=-1).cpu().numpy()
        cdf = np.cumsum(probs, axis=1)
        token = np.array(
            [
                min(int(np.searchsorted(c, x * c[-1], side="right")), c.size - 1)
                for c, x in zip(cdf, u, strict=True)
            ]
        )
        out = torch.full_like(scores, -float("inf"))
        out[torch.arange(scores.shape[0]), torch.as_tensor(token, device=scores.device)] = 0.0
        return out


def encode_text(tokenizer, text: str) -> list[int]:
    """Token ids of market text, every character of it as text: a message that writes
    ``<eos>`` or ``<pad>`` is those characters, never the special token, so that the text
    decodes back to itself. Special tokens are added by the code alone (the end-of-text
    token after a training completion)."""
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def encode_prompts(
    tokenizer, prompts: Sequence[str], max_prompt_tokens: int, head_chars: Sequence[int] | None
) -> list[list[int]]:
    """Token ids of each prompt (``encode_text``), cut to ``max_prompt_tokens`` (head and
    latest tokens)."""
    out = []
    for k, text in enumerate(prompts):
        ids = encode_text(tokenizer, text)
        if len(ids) > max_prompt_tokens:
            head = []
            if head_chars is not None and head_chars[k] > 0:
                head = encode_text(tokenizer, text[: head_chars[k]])
                head = head[: max_prompt_tokens // 2]
            ids = head + ids[len(ids) - (max_prompt_tokens - len(head)) :]
        out.append(ids)
    return out


@torch.no_grad()
def generate(
    model,
    tokenizer,
    prompt_ids: Sequence[list[int]],
    keys: SamplingKeys,
    *,
    max_new_tokens: int = 48,
    temperature: float = 1.0,
    chunk: int = 16,
) -> list[list[int]]:
    """The completion token ids of every prompt (end-of-text excluded), generated ``chunk``
    rows at a time with left padding, rows of similar length together (less padding: on a
    CPU, prefill attention over the padded length is most of the time)."""
    out: list[list[int] | None] = [None] * len(prompt_ids)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    device = next(model.parameters()).device
    order = np.argsort([len(x) for x in prompt_ids], kind="stable")
    for start in range(0, len(prompt_ids), chunk):
        rows = order[start : start + chunk]
        ids = [prompt_ids[r] for r in rows]
        length = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), length), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), length), dtype=torch.long)
        for k, x in enumerate(ids):
            input_ids[k, length - len(x) :] = torch.tensor(x, dtype=torch.long)
            mask[k, length - len(x) :] = 1
        sampler = KeyedSampler(keys.take(rows), length, temperature)
        gen = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            logits_processor=LogitsProcessorList([sampler]),
            pad_token_id=pad,
            eos_token_id=eos,
        )
        for r, row in zip(rows, gen[:, length:].tolist(), strict=True):
            done = row.index(eos) if eos in row else len(row)
            out[r] = row[:done]
    return out
