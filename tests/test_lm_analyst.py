"""The analyst's short list in a language-model seller's prompt: the greedy matcher's best
open pairs in order, its best line the matcher's move, the teacher's moves narrated as
parsable messages."""

from __future__ import annotations

import numpy as np
import pytest

from agents.base import SellerAction
from agents.env import SellerEnv
from agents.lm.analyst import HEADER, RANKS, Analyst, NarratedTeacher, narrate
from agents.lm.prompts import CUE, seller_prompt
from agents.rollout import play_batch
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import GreedyMatcher
from agents.text import seller_action
from arena.config import MarketConfig
from arena.generator import generate_batch
from arena.text import num

CFG = MarketConfig(buyers=5, products=3, inventory=1, turns=8)


def _ranked(value: np.ndarray, price: np.ndarray, top: int) -> list[tuple]:
    """One market's ``top`` open pairs by expected margin, best first (ties: lowest buyer,
    then product), from the matcher's (N, M) table: (buyer, product, price, margin)."""
    n, m = value.shape
    pairs = [(i, j) for i in range(n) for j in range(m) if np.isfinite(value[i, j])]
    pairs.sort(key=lambda p: (-value[p], p))
    return [(i, j, price[i, j], value[i, j]) for i, j in pairs[:top]]


@pytest.mark.parametrize(
    "cfg",
    [
        CFG,
        MarketConfig(buyers=2, products=3, turns=10),  # buyers refuse one product after another
        MarketConfig(buyers=2, products=1, turns=4),  # fewer open pairs than the list's three
    ],
)
def test_the_short_list_is_the_matchers_best_open_pairs_in_order(cfg):
    """Turn by turn, as refusals come in, the analyst's list against a greedy matcher fed
    the same turns: its three best open pairs, best first; a market with fewer lists all."""
    batch = generate_batch(cfg, 3, 16)
    env = SellerEnv.from_batch(batch, Truthful())
    obs = env.reset()
    analyst, matcher = Analyst(3), GreedyMatcher()
    analyst.reset(batch.size)
    matcher.reset(batch.size)
    for _ in range(cfg.turns - 1):
        short = analyst.short_list(obs)
        value, price = matcher.pair_table(obs)
        for b in np.flatnonzero(~obs.done):
            want = _ranked(value[b], price[b], 3)
            got = [
                (short.buyer[b, k], short.product[b, k], short.price[b, k], short.margin[b, k])
                for k in range(len(want))
            ]
            assert got == want
            assert (short.buyer[b, len(want) :] == -1).all()
            lines = [
                f"{RANKS[k]}: buyer {i}, product {j} at {p:.2f}, expected margin {num(v, 1)}"
                for k, (i, j, p, v) in enumerate(want)
            ]
            assert short.note(b) == "\n".join([HEADER, *reversed(lines)])
        # Offer the last listed pair: the truthful buyers refuse some of these.
        last = np.maximum((short.buyer >= 0).sum(axis=1) - 1, 0)
        pick = np.arange(batch.size), last
        to, product = np.maximum(short.buyer[pick], 0), np.maximum(short.product[pick], 0)
        obs = env.step(SellerAction(to, product, np.nan_to_num(short.price[pick]))).obs


class _Recorder(NarratedTeacher):
    """Keeps, every turn, the analyst's list, the teacher's move and the parsed action."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.turns: list[tuple] = []

    def act(self, obs):
        inner = self.teacher.act
        seen = {}

        def teacher_act(o):
            seen["move"] = inner(o)
            return seen["move"]

        short_list = self.analyst.short_list

        def analyst_list(o):
            seen["short"] = short_list(o)
            return seen["short"]

        self.teacher.act, self.analyst.short_list = teacher_act, analyst_list
        try:
            action = super().act(obs)
        finally:
            del self.teacher.act, self.analyst.short_list
        # Copies: the environment updates its observation arrays in place.
        live, move = ~obs.done.copy(), seen["move"]
        move = type(move)(to=move.to.copy(), product=move.product.copy(), price=move.price.copy())
        self.turns.append((live, seen["short"], move, action))
        return action


@pytest.fixture(scope="module")
def narrated():
    teacher = _Recorder(GreedyMatcher(), Analyst(3))
    engine = play_batch(generate_batch(CFG, 5, 24), teacher, Truthful())
    return teacher, engine


def test_the_best_line_is_the_greedy_matchers_move(narrated):
    teacher, _ = narrated
    checked = 0
    for live, short, move, _ in teacher.turns:
        for b in np.flatnonzero(live):
            if move.product[b] < 0:
                continue
            assert (short.buyer[b, 0], short.product[b, 0]) == (move.to[b], move.product[b])
            assert num(short.price[b, 0]) == num(move.price[b])
            assert short.rank(b, int(move.to[b]), int(move.product[b]), move.price[b]) == 0
            # Best last, just above the cue.
            line = short.note(b).splitlines()[-1]
            assert line.startswith("1st: ") and f"buyer {int(move.to[b])}," in line
            checked += 1
    assert checked > 100
    assert all("the analyst's 1st choice" in r["completion"] for r in teacher.records)


def test_the_narrated_message_parses_to_the_teachers_move(narrated):
    teacher, _ = narrated
    assert sum(live.sum() for live, *_ in teacher.turns) > 100
    for live, _, move, action in teacher.turns:
        assert not action.malformed[live].any()
        np.testing.assert_array_equal(action.to[live], move.to[live])
        np.testing.assert_array_equal(action.product[live], move.product[live])
        np.testing.assert_allclose(action.price[live], move.price[live], atol=0.005)


def test_narrated_play_is_the_teachers_play(narrated):
    _, engine = narrated
    plain = play_batch(generate_batch(CFG, 5, 24), GreedyMatcher(), Truthful())
    np.testing.assert_allclose(engine.profit, plain.profit, atol=1e-9)


def test_records_hold_the_prompt_with_the_list_above_the_cue(narrated):
    teacher, _ = narrated
    for r in teacher.records[:50]:
        head, _, tail = r["prompt"].rpartition(HEADER)
        assert head and tail.endswith(f"\n{CUE['seller']}\n")
        assert tail.rstrip("\n").splitlines()[-2].startswith("1st: ")


def test_narrate_and_parse_round_trip():
    text = narrate(2, 1, 47.5, 0)
    action, _ = seller_action([text])
    assert (action.to[0], action.product[0], action.price[0]) == (2, 1, 47.5)
    assert "OFFER: product 1 at 47.50\n" in text  # every price in one shape: two decimals
    for price in (80.0, 9.5, 100.0, 61.234, 0.0):
        action, _ = seller_action([narrate(0, 0, price, 0)])
        assert not action.malformed[0] and action.price[0] == round(price, 2)
    assert "1st choice" in text
    assert "my own move" in narrate(0, 0, 10.0, -1)
    with pytest.raises(ValueError):
        Analyst(0)
    obs, b = _one_obs()
    assert HEADER not in seller_prompt(obs, b, "")  # no list: the view and the cue


def _one_obs():
    return SellerEnv.from_batch(generate_batch(CFG, 0, 1), Truthful()).reset(), 0
