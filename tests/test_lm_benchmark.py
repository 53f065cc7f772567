"""benchmarks/lm.py: its timing of generation on fewer messages than a batch."""

from __future__ import annotations

from pathlib import Path

from agents.lm.model import load

SHIPPED = Path(__file__).resolve().parents[1] / "agents/lm/checkpoints/lm_seller"


def test_fewer_messages_than_a_batch_are_timed(load_benchmark):
    """The warm-up took a whole batch of 64 keys from 4 messages: an IndexError."""
    bench = load_benchmark("lm")
    model, tokenizer = load(SHIPPED)
    prompts = bench.seller_prompts(4)
    tok_s, msg_s, prompt_tokens = bench.time_generation(
        model, tokenizer, prompts, 64, new_tokens=2, device="cpu", prompt_tokens=64
    )
    assert len(prompts) == 4 and tok_s > 0 and msg_s > 0 and 0 < prompt_tokens <= 64
