"""The text channel: the engine's dialogue, the views each side may see, the parse helper."""

from __future__ import annotations

import re

import numpy as np
import pytest

from agents.rollout import play_batch, play_reference
from agents.scripted.buyers import Haggler, Truthful
from agents.scripted.sellers import GreedyMatcher
from agents.text import buyer_action, seller_action
from arena.config import MarketConfig
from arena.dialogue import buyer_message_of, seller_message_of
from arena.engine import BatchedMarket
from arena.generator import generate, generate_batch, instance_from_arrays, stack_instances
from arena.market import Market
from arena.messages import SellerMessage
from arena.observation import take_rows
from arena.protocol import render
from tests.test_engine_equivalence import (
    random_buyer_actions,
    random_config,
    random_seller_actions,
    seller_input,
)

# ------------------------------------------------------------------ the parse helper


def test_seller_texts_parse_into_arrays_and_a_malformed_mask():
    texts = [
        "THINK: secret\nTO: buyer 2\nOFFER: product 1 at 41.5\nSAY: hi",
        "THINK:\nTO: buyer 0\nOFFER: none\nSAY:",
        "TO: buyer 1\nOFFER: product 0 at 30\nSAY: no think part",
        "I offer buyer 1 product 0 at 30",  # numbers are there; nothing is guessed
        "THINK:\nTO: buyer 1\nOFFER: product 0 at about 30\nSAY:",
    ]
    action, errors = seller_action(texts)
    assert action.malformed.tolist() == [False, False, True, True, True]
    assert errors == ["", "", "missing_part", "missing_part", "bad_offer"]
    assert action.to[:2].tolist() == [2, 0]
    assert action.product[:2].tolist() == [1, -1]
    assert action.price[0] == 41.5
    # Malformed rows carry no decision at all: no offer, buyer 0.
    assert action.product[2:].tolist() == [-1, -1, -1] and action.to[2:].tolist() == [0, 0, 0]
    assert action.texts == texts


def test_buyer_texts_parse_into_arrays_and_a_malformed_mask():
    texts = [
        "THINK: my value is 80\nDECISION: counter\nOFFER: product 1 at 40\nSAY: lower?",
        "THINK:\nDECISION: accept\nOFFER: none\nSAY: deal",
        "THINK:\nDECISION: counter\nOFFER: none\nSAY:",
        "THINK:\nDECISION: yes please\nOFFER: none\nSAY:",
        "accept",
    ]
    action, errors = buyer_action(texts)
    assert action.malformed.tolist() == [False, False, True, True, True]
    assert errors == ["", "", "counter_without_offer", "bad_decision", "missing_part"]
    assert action.decision[:2].tolist() == [2, 1]
    assert (action.product[0], action.price[0]) == (1, 40.0)


def test_malformed_texts_are_violations_that_waste_the_turn():
    cfg = MarketConfig(buyers=2, products=1, inventory=1, turns=2)
    engine = BatchedMarket(generate_batch(cfg, 0, 2), dialogue=True)
    action, _ = seller_action(["garbage", "THINK:\nTO: buyer 0\nOFFER: product 0 at 50\nSAY:"])
    engine.offer(action.to, action.product, action.price, action.malformed, action.texts)
    assert engine.seller_violations[:, 1].tolist() == [1, 0]  # MALFORMED in row 0 only
    assert engine.pending.tolist() == [False, True]
    first = engine.dialogue[0][0]
    assert first.seller_text == "garbage" and first.seller_message is None
    assert first.seller_error == "missing_part" and first.buyer == -1


# ------------------------------------------------------------------ transcripts


def _transcripts_of_random_play(seed: int, b: int = 3):
    """Random play (every kind of invalid message) on both engines: the engine gets texts
    in some rows (through the parse helper) and arrays in others, the reference market the
    same messages."""
    rng = np.random.default_rng(seed)
    cfg = random_config(rng)
    batch = generate_batch(cfg, seed, range(b))
    disclose = rng.random((b, cfg.buyers)) < 0.5
    engine = BatchedMarket(batch, disclose, dialogue=True)
    markets = [Market(generate(cfg, seed, k), disclose=disclose[k]) for k in range(b)]
    text_rng = np.random.default_rng(seed + 1)
    for _ in range(cfg.turns + 1):
        to, product, price, bad = random_seller_actions(rng, cfg, b, engine.seller_observation())
        inputs = [seller_input(text_rng, to[k], product[k], price[k], bad[k]) for k in range(b)]
        texts = [x if isinstance(x, str) else None for x in inputs]
        parsed, _ = seller_action([t if t is not None else "" for t in texts])
        is_text = np.array([t is not None for t in texts])
        live = ~engine.done.copy()
        engine.offer(
            np.where(is_text, parsed.to, to),
            np.where(is_text, parsed.product, product),
            np.where(is_text, parsed.price, price),
            np.where(is_text, parsed.malformed, bad),
            texts,
        )
        asked = engine.pending.copy()
        for k, market in enumerate(markets):
            if live[k]:
                market.offer(texts[k] or seller_message_of(to[k], product[k], price[k], bad[k]))
        if asked.any():
            d = random_buyer_actions(rng, cfg, b, engine._pend_price)
            engine.answer(*d)
            for k, market in enumerate(markets):
                if asked[k]:
                    market.answer(buyer_message_of(*(a[k] for a in d)))
    return engine, markets


@pytest.mark.parametrize("seed", range(40))
def test_batched_dialogue_equals_the_reference_transcript(seed):
    engine, markets = _transcripts_of_random_play(seed)
    for k, market in enumerate(markets):
        assert engine.dialogue.records(k) == [r.to_dict() for r in market.transcript]


def test_scripted_play_keeps_the_same_transcript_in_both_engines():
    cfg = MarketConfig(patience=2, agent_share=0.5, disclosure="mandatory")
    batch = generate_batch(cfg, 7, 6)
    engine = play_batch(batch, GreedyMatcher(), Haggler(), dialogue=True)
    for k in range(batch.size):
        ref = play_reference(batch.instance(k), GreedyMatcher(), Haggler())
        assert engine.dialogue.records(k) == [r.to_dict() for r in ref.transcript]
    # Scripted agents write canned SAY lines.
    rec = engine.dialogue[0][0]
    assert rec.seller_message.say.startswith("I can let you have product")
    assert rec.buyer_text.endswith(rec.buyer_message.say) and rec.buyer_message.say


def test_the_dialogue_does_not_change_play():
    batch = generate_batch(MarketConfig(), 3, 16)
    off = play_batch(batch, GreedyMatcher(), Haggler())
    on = play_batch(batch, GreedyMatcher(), Haggler(), dialogue=True, prompts=True)
    assert off.dialogue is None
    for name in ("bought", "paid", "turn", "seller_violations", "buyer_violations"):
        np.testing.assert_array_equal(getattr(off, name), getattr(on, name))


def test_prompts_are_what_each_side_was_shown():
    batch = generate_batch(MarketConfig(buyers=3, products=2, turns=4), 1, 2)
    engine = play_batch(batch, GreedyMatcher(), Truthful(), prompts=True)
    rec = engine.dialogue[1][0]
    assert rec.seller_prompt.startswith("You are the seller. Turn 1 of 4")
    assert rec.seller_prompt.endswith("Conversation: none yet")
    assert rec.buyer_prompt.startswith(f"You are buyer {rec.buyer} of 3")
    first = engine.dialogue.records(1)[0]
    assert first["seller_prompt"] == rec.seller_prompt and first["buyer_prompt"]


def test_restarted_rows_start_an_empty_dialogue():
    from agents.env import SellerEnv

    env = SellerEnv(MarketConfig(buyers=2, products=1, turns=2), Truthful(), 3, dialogue=True)
    obs = env.reset()
    seller = GreedyMatcher()
    seller.reset(3)
    for _ in range(2):
        step = env.step(seller.act(obs))
        seller.restart(step.done)
        obs = step.obs
    assert step.done.all()
    assert all(len(obs.dialogue[b]) == 0 for b in range(3))


# ------------------------------------------------------------------ the views


def _hand_market():
    cfg = MarketConfig(buyers=2, products=2, inventory=1, turns=4, agent_share=0.5,
                       disclosure="mandatory")  # fmt: skip
    inst = instance_from_arrays(
        cfg,
        values=[[80.0, 60.0], [50.0, 70.0]],
        costs=[20.0, 30.0],
        signals=[[78.04, 61.0], [52.0, 69.96]],
        is_agent=[False, True],
    )
    return stack_instances([inst])


SECRET_S = "THINK: buyer 1 looks rich\nTO: buyer 1\nOFFER: product 1 at 65\nSAY: A fine product."
SECRET_B = "THINK: my value is 70\nDECISION: counter\nOFFER: product 1 at 55\nSAY: Too much."


def _play_hand_market():
    engine = BatchedMarket(_hand_market(), dialogue=True)
    a, _ = seller_action([SECRET_S])
    engine.offer(a.to, a.product, a.price, a.malformed, a.texts)
    d, _ = buyer_action([SECRET_B])
    engine.answer(d.decision, d.product, d.price, d.malformed, d.texts)
    a, _ = seller_action(["THINK: try buyer 0\nTO: buyer 0\nOFFER: product 0 at 200\nSAY: Hi"])
    engine.offer(a.to, a.product, a.price, a.malformed, a.texts)  # price out of range
    a, _ = seller_action(["THINK: meet the bid\nTO: buyer 1\nOFFER: product 1 at 55\nSAY: Ok."])
    engine.offer(a.to, a.product, a.price, a.malformed, a.texts)  # meets the standing bid
    return engine


def test_seller_view_shows_its_own_think_and_never_the_buyers():
    engine = _play_hand_market()
    text = engine.seller_observation().text(0)
    assert text == (
        "You are the seller. Turn 4 of 4 (1 left). Prices from 0 to 100.\n"
        "product 0: cost 20, 1 of 1 in stock\n"
        "product 1: cost 30, 0 of 1 in stock\n"
        "buyer 0: active; signals 78 61\n"
        "buyer 1: bought product 1, an agent (disclosed)\n"
        "Conversation:\n"
        "[turn 1] you:\n" + SECRET_S + "\n"
        "[turn 1] buyer 1: DECISION: counter; OFFER: product 1 at 55; SAY: Too much.\n"
        "[turn 2] you:\n"
        "THINK: try buyer 0\nTO: buyer 0\nOFFER: product 0 at 200\nSAY: Hi\n"
        "(invalid: price_out_of_range; the turn was wasted)\n"
        "[turn 3] you:\n"
        "THINK: meet the bid\nTO: buyer 1\nOFFER: product 1 at 55\nSAY: Ok.\n"
        "[turn 3] trade: buyer 1 bought product 1 at 55"
    )
    assert "my value is 70" not in text


def test_the_seller_view_of_an_ended_market_says_it_is_over():
    """After the last turn the view said "Turn 5 of 4 (0 left)"."""
    engine = _play_hand_market()
    a, _ = seller_action(["THINK: last try\nTO: buyer 0\nOFFER: product 0 at 90\nSAY: Last."])
    engine.offer(a.to, a.product, a.price, a.malformed, a.texts)
    d, _ = buyer_action(["DECISION: reject\nSAY: No."])
    engine.answer(d.decision, d.product, d.price, d.malformed, d.texts)
    head = engine.seller_observation().text(0).split("\n")[0]
    assert head == (
        "You are the seller. The market is over: all 4 turns are played. Prices from 0 to 100."
    )


def test_the_seller_view_of_a_market_sold_out_early_says_it_is_over():
    """It said "Turn 2 of 12 (11 left)" of a market with nothing left to sell."""
    batch = generate_batch(MarketConfig(buyers=2, products=1, inventory=1, turns=12), 0, 3)
    engine = play_batch(batch, GreedyMatcher(), Truthful(), dialogue=True)
    reference = play_reference(batch.instance(0), GreedyMatcher(), Truthful())
    obs = engine.seller_observation()
    assert obs.done.all() and (obs.turn < 12).all()
    for k in range(batch.size):
        turn = int(obs.turn[k])
        assert obs.text(k).startswith(
            f"You are the seller. The market is over after {turn} of 12 turns: "
            "no sale is left to make."
        )
    assert reference.seller_observation().text(0) == obs.text(0)


def test_buyer_view_shows_its_own_conversation_and_never_the_sellers_think():
    engine = BatchedMarket(_hand_market(), dialogue=True)
    a, _ = seller_action([SECRET_S])
    obs = engine.offer(a.to, a.product, a.price, a.malformed, a.texts)
    assert obs.text(0) == (
        "You are buyer 1 of 2, an agent. The seller has been told you are an agent. "
        "Seller turn 1 of 4. Prices from 0 to 100. You buy at most one unit.\n"
        "product 0: your value 50, cost 20, 1 in stock\n"
        "product 1: your value 70, cost 30, 1 in stock\n"
        "Conversation with the seller:\n"
        "[turn 1] seller: OFFER: product 1 at 65; SAY: A fine product."
    )
    d, _ = buyer_action([SECRET_B])
    engine.answer(d.decision, d.product, d.price, d.malformed, d.texts)
    # A message to buyer 0 never reaches buyer 1; a malformed one reaches nobody.
    for text in ["THINK: other\nTO: buyer 0\nOFFER: none\nSAY: psst", "junk"]:
        a, _ = seller_action([text])
        engine.offer(a.to, a.product, a.price, a.malformed, a.texts)
        if engine.pending.any():
            d, _ = buyer_action(["THINK: b0 secret\nDECISION: reject\nOFFER: none\nSAY: No."])
            engine.answer(d.decision, d.product, d.price, d.malformed, d.texts)
    a, _ = seller_action(["THINK: again\nTO: buyer 1\nOFFER: product 1 at 60\nSAY: Last."])
    obs = engine.offer(a.to, a.product, a.price, a.malformed, a.texts)
    text = obs.text(0)
    assert text.endswith(
        "your standing bid: product 1 at 55\n"
        "Conversation with the seller:\n"
        "[turn 1] seller: OFFER: product 1 at 65; SAY: A fine product.\n"
        "[turn 1] you:\n" + SECRET_B + "\n"
        "[turn 4] seller: OFFER: product 1 at 60; SAY: Last."
    )
    for hidden in ("looks rich", "again", "psst", "b0 secret", "junk"):
        assert hidden not in text


def test_an_empty_answer_shows_in_both_views_as_the_violation_it_was():
    """An empty answer (a served buyer's time-out, a model that stops at once) was left out
    of both views: it looked like a buyer still being asked."""
    engine = BatchedMarket(_hand_market(), dialogue=True)
    a, _ = seller_action([SECRET_S])
    engine.offer(a.to, a.product, a.price, a.malformed, a.texts)
    d, _ = buyer_action([""])
    engine.answer(d.decision, d.product, d.price, d.malformed, d.texts)
    assert engine.buyer_violations[0].sum() == 1
    assert (
        engine.seller_observation()
        .text(0)
        .endswith("[turn 1] buyer 1: (unreadable answer, counted as a reject: empty)")
    )
    obs = engine.offer(a.to, a.product, a.price, a.malformed, a.texts)
    assert obs.text(0).endswith(
        "[turn 1] seller: OFFER: product 1 at 65; SAY: A fine product.\n"
        "[turn 1] you:\n"
        "(empty message)\n"
        "(invalid: empty; counted as a reject)\n"
        "[turn 2] seller: OFFER: product 1 at 65; SAY: A fine product."
    )


def test_views_write_numbers_past_the_largest_price_a_message_can_state():
    """Signals lie past the top of the price range, which may itself be just below 10**12:
    the views refused to render them, so text agents could not play such a config."""
    from arena.text import num

    assert num(1e12 + 0.25) == "1000000000000.25" and num(1e20) == "1" + "0" * 20
    assert num(-5.255) == "-5.25" and num(-0.0) == "0" and num(float("nan")) == "none"
    batch = generate_batch(MarketConfig(price_range=(0.0, 9.5e11), signal_noise=0.5), 0, 8)
    assert (batch.signals >= 1e12).any()
    engine = play_batch(batch, GreedyMatcher(), Haggler(), dialogue=True)
    texts = [engine.seller_observation().text(k) for k in range(batch.size)]
    assert all(t.split("\n")[0].endswith("Prices from 0 to 950000000000.") for t in texts)
    assert any(re.search(r"signals .*\b1\d{12}", t) for t in texts)


def test_views_render_each_market_as_alone():
    batch = generate_batch(MarketConfig(agent_share=0.5, disclosure="mandatory"), 2, 5)
    engine = play_batch(batch, GreedyMatcher(), Haggler(), dialogue=True)
    obs = engine.seller_observation()
    for k in range(batch.size):
        alone = play_batch(generate_batch(batch.config, 2, [k]), GreedyMatcher(), Haggler(),
                           dialogue=True)  # fmt: skip
        assert alone.seller_observation().text(0) == obs.text(k)
        assert take_rows(obs, np.array([k])).text(0) == obs.text(k)
        assert take_rows(obs, slice(k, k + 1)).text(0) == obs.text(k)
    part = take_rows(obs, slice(1, 4))  # a slice: views of the arrays, the same dialogues
    assert np.shares_memory(part.signals, obs.signals)
    assert [part.text(k) for k in range(3)] == [obs.text(k) for k in range(1, 4)]


def test_the_reference_market_renders_the_same_views():
    batch = generate_batch(MarketConfig(buyers=4, products=2), 5, 1)
    engine = play_batch(batch, GreedyMatcher(), Haggler(), dialogue=True)
    ref = play_reference(batch.instance(0), GreedyMatcher(), Haggler())
    assert ref.seller_observation().text(0) == engine.seller_observation().text(0)


def test_canned_messages_render_and_parse():
    msg = seller_message_of(1, 0, 12.5)
    assert isinstance(msg, SellerMessage) and "12.5" in msg.say
    assert render(msg).endswith("SAY: I can let you have product 0 for 12.5.")
    assert seller_message_of(1.5, 0, 1.0).startswith("(no message form")
    assert buyer_message_of(2, 1, 9.0).say == "I would pay 9 for product 1."
    assert buyer_message_of(7, 0, 0.0).startswith("(no message form")


def test_a_tournament_keeps_transcripts_of_a_few_markets_from_the_same_play():
    from agents.evaluate import evaluate_batch, evaluate_with_transcripts

    batch = generate_batch(MarketConfig(patience=2), 0, range(10, 16))
    metrics, transcripts = evaluate_with_transcripts(batch, GreedyMatcher(), Haggler(), [0, 2])
    plain = evaluate_batch(batch, GreedyMatcher(), Haggler())
    for name in plain:
        np.testing.assert_array_equal(metrics[name], plain[name])
    assert sorted(transcripts) == [10, 12]
    for index in (10, 12):
        ref = play_reference(generate(batch.config, 0, index), GreedyMatcher(), Haggler())
        assert transcripts[index] == [r.to_dict() for r in ref.transcript]
    engine = play_batch(batch, GreedyMatcher(), Haggler(), dialogue=np.arange(6) == 1)
    assert [len(engine.dialogue[b]) > 0 for b in range(6)] == [False, True] + [False] * 4
    _, with_prompts = evaluate_with_transcripts(
        batch, GreedyMatcher(), Haggler(), [1], prompts=True
    )
    assert with_prompts[11][0]["seller_prompt"].startswith("You are the seller.")
