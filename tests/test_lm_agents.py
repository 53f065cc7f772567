"""Local language-model agents: the tiny default model, keyed batched sampling, the
conformance check, transcripts as prompt/completion records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agents.conformance import check_buyer, check_seller, invariance_note
from agents.lm.generate import SamplingKeys, encode_prompts, generate
from agents.lm.model import TinyModelConfig, build_tiny, load
from agents.lm.policy import LMBuyer, LMSeller
from agents.lm.prompts import CUE, SYSTEM, prompt
from agents.lm.transcripts import prompt_completion, read_jsonl, teacher_records, to_jsonl
from agents.rollout import play_batch
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import GreedyMatcher
from arena.config import MarketConfig
from arena.generator import generate_batch

SMALL = TinyModelConfig(
    vocab_size=320, hidden_size=32, intermediate_size=64, layers=2, heads=2, corpus_markets=2
)
CFG = MarketConfig(buyers=3, products=2, inventory=1, turns=4)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: on a shared 2-core machine, two spin-waiting threads are slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny(tmp_path_factory.mktemp("tiny") / "model", SMALL)
    model, tokenizer = load(path)
    return path, model, tokenizer


def test_the_tiny_model_is_built_offline_reproducibly_and_small(tiny, tmp_path):
    path, model, tokenizer = tiny
    names = sorted(p.name for p in path.iterdir())
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(names)
    assert not [n for n in names if n.endswith((".bin", ".pt", ".pkl"))]
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 2
    assert (path / "model.safetensors").stat().st_size < 1_000_000
    # Digits are single tokens: prices are spelled digit by digit.
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("at 41.53")["input_ids"])
    assert [t for t in tokens if t.strip("Ġ").isdigit()] == ["4", "1", "5", "3"]
    again = build_tiny(tmp_path / "again", SMALL)
    assert (again / "model.safetensors").read_bytes() == (path / "model.safetensors").read_bytes()
    assert (again / "tokenizer.json").read_text() == (path / "tokenizer.json").read_text()


def test_loading_refuses_what_is_not_a_safetensors_model(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        load(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(ValueError, match="no safetensors"):
        load(tmp_path)


def _texts(engine) -> list[list[str]]:
    return [[r.seller_text for r in engine.dialogue[b]] for b in range(len(engine.dialogue))]


def test_unparsable_output_is_counted_never_raised(tiny):
    _, model, tok = tiny
    seller = LMSeller(model=model, tokenizer=tok, seed=1, max_new_tokens=12)
    engine = play_batch(generate_batch(CFG, 0, 3), seller, Truthful())
    assert engine.turn.tolist() == [4, 4, 4]  # every turn spent
    assert engine.seller_violations[:, 1].sum() == 12  # an untrained model writes noise
    assert all(r.seller_error for b in range(3) for r in engine.dialogue[b])


def test_sampling_is_seeded_per_market_and_batch_invariant(tiny):
    _, model, tok = tiny
    batch = generate_batch(CFG, 0, 5)

    def seller(seed=1, chunk=32):
        return LMSeller(model=model, tokenizer=tok, seed=seed, max_new_tokens=12, chunk=chunk)

    together = _texts(play_batch(batch, seller(), Truthful()))
    assert together == _texts(play_batch(batch, seller(chunk=2), Truthful()))
    assert together == _texts(play_batch(batch, seller(), Truthful()))
    other = _texts(play_batch(batch, seller(seed=2), Truthful()))
    assert together != other
    # Every market played alone, under either seed, writes what it wrote in the batch.
    for seed, rows in ((1, together), (2, other)):
        for k in range(batch.size):
            alone = play_batch(generate_batch(CFG, 0, [k]), seller(seed=seed), Truthful())
            assert _texts(alone)[0] == rows[k], (seed, k)
    # Rows of one batch differ (keyed by market), and so do salted copies of one market.
    assert len({t[0] for t in together}) == 5
    keys = SamplingKeys(1, np.zeros(3, np.uint64), np.zeros(3, np.int64), np.arange(3))
    ids = encode_prompts(tok, ["You are the seller."] * 3, 64, None)
    out = generate(model, tok, ids, keys, max_new_tokens=8, temperature=1.0)
    assert len({tuple(x) for x in out}) == 3


def test_greedy_decoding_repeats_itself(tiny):
    _, model, tok = tiny
    ids = encode_prompts(tok, ["You are the seller."] * 2, 64, None)
    keys = SamplingKeys(1, np.arange(2, dtype=np.uint64), np.zeros(2, np.int64), np.zeros(2))
    out = generate(model, tok, ids, keys, max_new_tokens=6, temperature=0.0)
    assert out[0] == out[1]


def test_long_prompts_keep_the_state_and_the_latest_turns(tiny):
    _, _, tok = tiny
    head = "You are the seller. Turn 9 of 12."
    text = head + "\nConversation:\n" + "\n".join(f"[turn {t}] you: hello" for t in range(40))
    ids = encode_prompts(tok, [text], 60, [text.find("\nConversation")])[0]
    assert len(ids) == 60
    kept = tok.decode(ids)
    assert kept.startswith(head) and kept.endswith("[turn 39] you: hello")
    assert "[turn 0]" not in kept


def test_language_model_policies_run_through_the_conformance_check(tiny):
    _, model, tok = tiny

    def seller(seed):
        return LMSeller(model=model, tokenizer=tok, seed=seed, max_new_tokens=4)

    def buyer(seed):
        return LMBuyer(model=model, tokenizer=tok, seed=seed, max_new_tokens=4)

    assert check_seller(seller, markets=2, strict=False) == []
    assert check_buyer(buyer, markets=2, strict=False) == []
    assert "rounding" in invariance_note(seller(0))
    assert invariance_note(GreedyMatcher()) == ""


def test_an_lm_buyer_reads_the_sellers_messages(tiny):
    _, model, tok = tiny
    engine = play_batch(generate_batch(CFG, 1, 2), GreedyMatcher(),
                        LMBuyer(model=model, tokenizer=tok, seed=0, max_new_tokens=6))  # fmt: skip
    assert engine.dialogue is not None and engine.buyer_violations.sum() > 0
    assert engine.seller_violations.sum() == 0


def test_teacher_transcripts_become_prompt_completion_records(tmp_path):
    records = teacher_records(CFG, GreedyMatcher(), Truthful(), markets=3, seed=4)
    assert {r["market"] for r in records} == {0, 1, 2}
    first = records[0]
    assert first["side"] == "seller" and first["turn"] == 1 and first["violation"] == "ok"
    assert first["system"] == SYSTEM["seller"]
    assert first["prompt"].startswith("You are the seller. Turn 1 of 4")
    assert first["prompt"].endswith("Conversation: none yet\n" + CUE["seller"] + "\n")
    assert first["completion"].startswith("THINK:\nTO: buyer ")
    path = to_jsonl(records, tmp_path / "out" / "t.jsonl")
    assert read_jsonl(path) == records
    # The prompt is what a policy is shown at that turn.
    engine = play_batch(generate_batch(CFG, 4, [0]), GreedyMatcher(), Truthful(), prompts=True)
    assert engine.dialogue[0][0].seller_prompt + f"\n{CUE['seller']}\n" == first["prompt"]
    buyer_side = prompt_completion(engine.dialogue.records(0), "buyer", 0)
    assert buyer_side and buyer_side[0]["prompt"].startswith("You are buyer")
    # Without kept prompts there is nothing to export.
    plain = play_batch(generate_batch(CFG, 4, [0]), GreedyMatcher(), Truthful(), dialogue=True)
    assert prompt_completion(plain.dialogue.records(0)) == []


def test_the_prompt_is_the_view_and_a_cue(tiny):
    batch = generate_batch(CFG, 0, 1)
    engine = play_batch(batch, GreedyMatcher(), Truthful(), dialogue=True)
    obs = engine.seller_observation()
    assert prompt(obs, 0) == obs.text(0) + "\nYour message:\n"


def test_an_lm_buyer_in_a_population_keeps_its_words(tiny):
    from agents.population import Population

    _, model, tok = tiny
    lm = LMBuyer(model=model, tokenizer=tok, seed=0, max_new_tokens=5)
    mixed = Population([Truthful(), lm], None, ["truthful", "lm"])
    cfg = MarketConfig(buyers=4, products=2, turns=6, agent_share=0.5)
    engine = play_batch(generate_batch(cfg, 0, 2), GreedyMatcher(), mixed)
    assert mixed.reads_text and engine.dialogue is not None
    answers = [(b, r) for b in range(2) for r in engine.dialogue[b] if r.buyer >= 0]
    by_lm = [r for b, r in answers if engine.batch.is_agent[b, r.buyer]]
    by_truthful = [r for b, r in answers if not engine.batch.is_agent[b, r.buyer]]
    assert by_lm and by_truthful
    assert all(r.buyer_message is None for r in by_lm)  # an untrained model's noise
    assert all(r.buyer_message is not None and r.buyer_message.say for r in by_truthful)
