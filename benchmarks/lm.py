"""Language-model agent throughput: generation at batch 1 and 64, and GRPO steps.

Prompts are real seller views of the retail config (8 buyers, 4 products, T=12), taken
at every turn of greedy-matcher play, so prompt lengths are those a seller meets
(about 330 tokens at the first turn to 1,100 at the last with the tiny tokenizer).
Generation runs the policy's own path (keyed sampling, left padding, a cap of
``--new-tokens`` tokens); an untrained model seldom stops early, so nearly every message
is the full cap. GRPO steps are stage two of ``agents.lm.train`` (play G episodes on each
market, then one gradient step with the KL term) on the same config.

    python benchmarks/lm.py                       # the tiny default model, CPU
    python benchmarks/lm.py --json                # ... and a last line of JSON
    python benchmarks/lm.py --prompt-tokens 96 --new-tokens 64   # lm_seller's budgets
    python benchmarks/lm.py --model PATH --device cuda --threads 0   # a larger local model
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from tabulate import tabulate

from agents.command import nonneg_int, pos_int
from agents.lm import train as lm_train
from agents.lm.generate import SamplingKeys, encode_prompts, generate
from agents.lm.model import build_tiny, load
from agents.lm.prompts import CUE
from agents.rollout import play_batch
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import GreedyMatcher
from arena.config import MarketConfig
from arena.generator import generate_batch

RETAIL = MarketConfig(buyers=8, products=4, inventory=2, turns=12, agent_share=0.5)


def seller_prompts(count: int) -> list[str]:
    """``count`` seller prompts of the retail config, cycling over turns 1..12."""
    engine = play_batch(generate_batch(RETAIL, 0, count), GreedyMatcher(), Truthful(), prompts=True)
    out = []
    for b in range(count):
        turns = engine.dialogue[b]
        rec = turns[b % len(turns)]
        out.append(f"{rec.seller_prompt}\n{CUE['seller']}\n")
    return out


def time_generation(
    model, tokenizer, prompts, batch: int, new_tokens: int, device: str, prompt_tokens: int
):
    """(tokens/s, messages/s, mean prompt tokens) generating ``prompts`` ``batch`` at a time,
    each cut to ``prompt_tokens`` as the policy cuts it (the view's head and its tail)."""
    heads = [p.find("\nConversation") for p in prompts]
    ids = encode_prompts(tokenizer, prompts, prompt_tokens, heads)
    n = len(ids)
    keys = SamplingKeys(0, np.arange(n, dtype=np.uint64), np.zeros(n, np.int64), np.zeros(n))
    warm = min(batch, n)  # fewer messages than a batch: warm up on those there are
    generate(model, tokenizer, ids[:warm], keys.take(np.arange(warm)), max_new_tokens=4)
    t0 = time.perf_counter()
    out = []
    for start in range(0, n, batch):
        rows = np.arange(start, min(start + batch, n))
        out += generate(
            model,
            tokenizer,
            [ids[r] for r in rows],
            keys.take(rows),
            max_new_tokens=new_tokens,
            temperature=1.0,
            chunk=min(batch, 16),  # the policy's default: 16 rows of similar length at once
        )
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    tokens = sum(len(x) for x in out)
    return tokens / wall, n / wall, float(np.mean([len(x) for x in ids]))


def time_grpo(path: Path, steps: int, device: str, new_tokens: int, prompt_tokens: int) -> float:
    """Seconds per GRPO step (4 markets x G=4 episodes of the retail config)."""
    cfg = lm_train.LMTrainConfig(
        market=RETAIL,
        max_new_tokens=new_tokens,
        max_prompt_tokens=prompt_tokens,
        grpo=lm_train.GRPOConfig(steps=steps, group_size=4, groups=4, temperature=1.0),
    )
    model, tokenizer = load(path, device)
    ref, _ = load(path, device)
    ref.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.grpo.lr)
    t0 = time.perf_counter()
    for step in range(steps):
        model.eval()
        played = lm_train._play_groups(model, tokenizer, cfg, step, device)
        model.train()
        pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
        lm_train._grpo_step(model, ref, opt, played, cfg, pad, eos, device)
    return (time.perf_counter() - t0) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a local causal-LM directory (default: the tiny one)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--threads", type=nonneg_int, default=1, help="torch CPU threads (0: torch's)"
    )
    parser.add_argument("--messages", type=pos_int, default=128, help="messages per batch size")
    parser.add_argument("--new-tokens", type=pos_int, default=48)
    parser.add_argument("--prompt-tokens", type=pos_int, default=1536,
                        help="prompt budget (the shipped lm_seller: 96)")  # fmt: skip
    parser.add_argument("--grpo-steps", type=pos_int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.model) if args.model else build_tiny(Path(tmp) / "tiny")
        model, tokenizer = load(path, args.device)
        params = sum(p.numel() for p in model.parameters())
        prompts = seller_prompts(args.messages)
        rows, result = [], {"model": str(args.model or "tiny default"), "params": params,
                            "device": args.device, "threads": torch.get_num_threads()}  # fmt: skip
        for batch in (1, 64):
            few = prompts[: min(len(prompts), 16)] if batch == 1 else prompts
            tok_s, msg_s, plen = time_generation(
                model, tokenizer, few, batch, args.new_tokens, args.device, args.prompt_tokens
            )
            rows.append([batch, len(few), f"{plen:.0f}", f"{tok_s:,.0f}", f"{msg_s:,.2f}"])
            result[f"tokens_per_s_b{batch}"] = round(tok_s, 1)
            result[f"messages_per_s_b{batch}"] = round(msg_s, 3)
        sec = time_grpo(path, args.grpo_steps, args.device, args.new_tokens, args.prompt_tokens)
        result["grpo_s_per_step"] = round(sec, 2)
        result["grpo_steps_per_s"] = round(1.0 / sec, 4)

    print(f"model: {result['model']} ({params:,} parameters) on {args.device}, "
          f"{result['threads']} torch thread(s)")  # fmt: skip
    print(tabulate(rows, ["batch", "messages", "prompt tokens", "tokens/s", "messages/s"]))
    print(f"GRPO (4 markets x G=4 episodes of the retail config per step): {sec:.1f} s/step, "
          f"{1.0 / sec:.3f} steps/s")  # fmt: skip
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
