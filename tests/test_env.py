"""The per-side environments: per-row restarts, rewards, opponent mixtures, both sides."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents import registry
from agents.base import BuyerAction, SellerAction, SellerPolicy
from agents.env import BuyerEnv, SellerEnv, split_rows
from agents.rollout import play_batch
from agents.scripted.buyers import Haggler, Truthful
from agents.scripted.sellers import GreedyMatcher, OracleSeller
from arena.config import MarketConfig
from arena.generator import generate_batch, generate_keyed_batch, replace_rows
from arena.metrics import welfare_bounds
from arena.rewards import buyer_reward, profit_scale, rating_score, seller_reward

CFG = MarketConfig(buyers=4, products=2, inventory=1, turns=6, agent_share=0.5)
IMPATIENT = MarketConfig(buyers=3, products=2, turns=8, patience=2, price_range=(100.0, 600.0))


def _alone(cfg, seed, index, seller, buyer):
    """(profit, buyer surplus, trades, turns) of market ``index`` played alone."""
    e = play_batch(generate_batch(cfg, seed, [index]), seller, buyer)
    return e.profit[0], e.buyer_surplus()[0].sum(), (e.bought[0] >= 0).sum(), e.turn[0]


def _run_seller_env(env, seller, steps):
    obs = env.reset()
    seller.reset(env.batch_size)
    if seller.sees_private:
        seller.reveal(env.batch)
    episodes = []
    for _ in range(steps):
        step = env.step(seller.act(obs))
        if step.done.any():
            episodes.append(step.info["episodes"])
            seller.restart(step.done)
            if seller.sees_private:
                seller.reveal(env.batch, step.done)
        obs = step.obs
    return {k: np.concatenate([e[k] for e in episodes]) for k in episodes[0]}


@pytest.mark.parametrize("cfg", [CFG, IMPATIENT])
@pytest.mark.parametrize("make_seller", [GreedyMatcher, OracleSeller])
def test_seller_env_markets_after_restarts_play_as_alone(cfg, make_seller):
    opponents = [Truthful(), Haggler()]
    env = SellerEnv(cfg, opponents, 5, weights=[3, 2], seed=7, markets="exact")
    ep = _run_seller_env(env, make_seller(), 60)
    assert len(ep["index"]) >= 20 and len(set(ep["index"].tolist())) == len(ep["index"])
    assert set(range(5)) <= set(ep["index"].tolist())  # the first markets are 0..B-1
    for k, index in enumerate(ep["index"]):
        buyer = opponents[0] if ep["rows"][k] < 3 else opponents[1]
        got = (ep["profit"][k], ep["buyer_surplus"][k], ep["trades"][k], ep["turns_used"][k])
        assert got == _alone(cfg, 7, int(index), make_seller(), buyer)


def test_seller_rewards_sum_to_the_episode_reward():
    env = SellerEnv(CFG, registry.make("noisy_human", "buyer"), 8, seed=3, penalty=0.25)
    ep = _run_seller_env(env, GreedyMatcher(), 40)
    expected = seller_reward(ep["profit"], ep["seller_violations"], ep["w_star"], CFG.width, 0.25)
    np.testing.assert_allclose(ep["return"], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ep["capture"], ep["profit"] / ep["w_star"])


def test_violations_are_penalized_step_by_step():
    class Invalid(GreedyMatcher):
        def act(self, obs):
            a = super().act(obs)
            return type(a)(to=a.to + 100, product=a.product, price=a.price)  # unknown buyer

    env = SellerEnv(CFG, Truthful(), 3, seed=0, penalty=0.1)
    obs = env.reset()
    step = env.step(Invalid().act(obs))
    np.testing.assert_allclose(step.reward, -0.1)


def test_without_autoreset_rows_end_once_and_stay_ended():
    env = SellerEnv(CFG, Truthful(), 6, seed=1, autoreset=False)
    seller = GreedyMatcher()
    obs = env.reset()
    seller.reset(6)
    ends = np.zeros(6, int)
    for _ in range(CFG.turns + 3):
        step = env.step(seller.act(obs))
        ends += step.done
        after = step.reward[env.engine.done & ~step.done]
        assert np.all(after == 0)
        obs = step.obs
    assert env.engine.all_done and np.all(ends == 1)


def test_environments_are_pure_functions_of_the_seed():
    def run(seed):
        env = SellerEnv(CFG, Truthful(), 16, seed=seed)
        return _run_seller_env(env, GreedyMatcher(), 20)["profit"]

    np.testing.assert_array_equal(run(4), run(4))
    assert not np.array_equal(run(4), run(5))


def test_play_batch_hook_sees_every_turn_with_rewards():
    batch = generate_batch(CFG, 2, 10)
    seen = []
    engine = play_batch(
        batch, GreedyMatcher(), Truthful(), on_step=lambda o, a, s: seen.append(s), rewards=True
    )
    total = sum(s.reward for s in seen)
    scale = profit_scale(welfare_bounds(batch), CFG.width)
    np.testing.assert_allclose(total, engine.profit / scale)
    assert len(seen) == engine.turn.max()


def test_buyer_env_markets_play_as_alone_and_rewards_are_own_surplus():
    env = BuyerEnv(
        IMPATIENT, [GreedyMatcher(), OracleSeller()], 4, kind="human", seed=5, markets="exact"
    )
    learner = Truthful()
    obs = env.reset()
    per_buyer = np.zeros((4, IMPATIENT.buyers))
    episodes, returns = [], []
    for _ in range(60):
        assert obs.needs_answer.any()
        step = env.step(learner.act(obs))
        per_buyer += step.reward
        if step.done.any():
            ep = step.info["episodes"]
            episodes.append(ep)
            returns.append(per_buyer[step.done].sum(axis=1))
            per_buyer[step.done] = 0.0
        obs = step.obs
    ep = {k: np.concatenate([e[k] for e in episodes]) for k in episodes[0]}
    assert len(ep["index"]) >= 10
    for k, index in enumerate(ep["index"]):
        seller = GreedyMatcher() if ep["rows"][k] < 2 else OracleSeller()
        got = (ep["profit"][k], ep["buyer_surplus"][k], ep["trades"][k], ep["turns_used"][k])
        assert got == _alone(IMPATIENT, 5, int(index), seller, Truthful())
    np.testing.assert_allclose(np.concatenate(returns), ep["buyer_surplus"] / IMPATIENT.width)
    np.testing.assert_allclose(ep["return"], ep["buyer_surplus"] / IMPATIENT.width)


def test_buyer_env_without_autoreset_ends_with_nobody_asked():
    env = BuyerEnv(CFG, GreedyMatcher(), 5, seed=2, autoreset=False)
    obs = env.reset()
    ends = np.zeros(5, int)
    for _ in range(50):
        step = env.step(Truthful().act(obs))
        ends += step.done
        obs = step.obs
        if env.engine.all_done:
            break
    assert env.engine.all_done and not obs.needs_answer.any() and np.all(ends == 1)
    assert env.engine.is_agent.all()  # the learner plays agent buyers by default


class _Scripted(SellerPolicy):
    """Talks to buyer 0 (no offer: it asks and nothing trades); where ``mute(calls, obs)``
    holds, writes to a buyer the market lacks (asks nobody); where ``sell(obs)`` holds,
    offers buyer 0 product 0 at the lowest price. More than ``limit`` messages fail the
    test, so an environment that would play on forever fails fast."""

    def __init__(self, mute=None, sell=None, limit=200):
        self.mute, self.sell, self.limit, self.calls = mute, sell, limit, 0

    def act(self, obs):
        self.calls += 1
        assert self.calls <= self.limit, "the environment kept asking the seller for messages"
        b, n = obs.active.shape
        mute = self.mute(self.calls, obs) if self.mute else np.zeros(b, bool)
        sell = self.sell(obs) if self.sell else np.zeros(b, bool)
        return SellerAction(
            to=np.where(mute, n, 0),
            product=np.where(sell, 0, -1),
            price=np.full(b, obs.price_range[0]),
        )


def _answer(b, decision=0, price=0.0):
    """The same answer in every row (reject, or a counter on product 0 at ``price``)."""
    return BuyerAction(
        decision=np.full(b, decision), product=np.zeros(b, np.int64), price=np.full(b, price)
    )


@pytest.mark.parametrize("autoreset", [True, False])
def test_buyer_env_records_the_markets_that_end_before_any_buyer_is_asked(autoreset):
    # The first T messages ask nobody: the first markets end in reset, unplayed.
    seller = _Scripted(mute=lambda calls, obs: np.full(obs.batch_size, calls <= CFG.turns))
    env = BuyerEnv(CFG, seller, 3, seed=0, autoreset=autoreset)
    env.reset()
    step = env.step(_answer(3))
    assert step.obs.needs_answer.all() == autoreset  # the next markets ask
    ep = step.info["episodes"]  # the first step brings them
    np.testing.assert_array_equal(ep["index"], [0, 1, 2])
    np.testing.assert_array_equal(ep["rows"], [0, 1, 2])
    np.testing.assert_array_equal(ep["turns_used"], CFG.turns)
    np.testing.assert_array_equal(ep["seller_violations"], CFG.turns)
    assert not step.done.any()  # the learner never played them
    assert "episodes" not in env.step(_answer(3)).info  # delivered once


@pytest.mark.parametrize("autoreset", [True, False])
def test_buyer_env_reports_a_market_ended_by_a_message_asking_nobody_in_that_step(autoreset):
    # Row 0's last message asks nobody and ends it while row 1 is asked (both markets
    # last T turns): row 0 is done in that step, not the next.
    t = CFG.turns
    seller = _Scripted(mute=lambda calls, obs: (np.arange(2) == 0) & (obs.turn == t - 1))
    env = BuyerEnv(CFG, seller, 2, seed=0, autoreset=autoreset)
    env.reset()
    steps = [env.step(_answer(2)) for _ in range(t)]  # reset sent message 1, step k k + 1
    np.testing.assert_array_equal(steps[t - 2].done, [True, False])
    np.testing.assert_array_equal(steps[t - 2].info["episodes"]["rows"], [0])
    np.testing.assert_array_equal(steps[t - 2].obs.needs_answer, [False, True])
    np.testing.assert_array_equal(steps[t - 1].done, [False, True])
    np.testing.assert_array_equal(steps[t - 1].info["episodes"]["rows"], [1])
    assert all(not s.done.any() for s in steps[: t - 2])
    obs = steps[t - 1].obs
    if autoreset:  # both rows play new markets (row 0 restarted between turns), asked
        np.testing.assert_array_equal(env.engine.batch.indices, [2, 3])
        np.testing.assert_array_equal(obs.needs_answer, [True, True])
        np.testing.assert_array_equal(obs.turn, [1, 1])
    else:
        assert env.engine.all_done and not obs.needs_answer.any()


def test_buyer_env_pays_and_reports_an_instant_trade_that_ends_a_market_in_one_step():
    # One unit on sale: row 0's buyer 0 bids, the seller's next message meets the bid and
    # the trade ends the market while row 1 is asked.
    cfg = MarketConfig(buyers=2, products=1, inventory=1, turns=6)
    seller = _Scripted(sell=lambda obs: (np.arange(2) == 0) & (obs.turn == 1))
    env = BuyerEnv(cfg, seller, 2, seed=0)
    env.reset()
    first = env.step(_answer(2, decision=2, price=cfg.price_range[1]))  # counter: a bid
    value = env.engine.values[0, 0, 0]
    paid = (value - cfg.price_range[0]) / cfg.width
    np.testing.assert_array_equal(first.done, [True, False])
    np.testing.assert_allclose(first.reward, [[paid, 0.0], [0.0, 0.0]])
    ep = first.info["episodes"]
    np.testing.assert_array_equal(ep["trades"], [1.0])
    np.testing.assert_allclose(ep["return"], [paid])
    assert not first.obs.needs_answer[0] and first.obs.needs_answer[1]
    second = env.step(_answer(2))  # row 0 restarts before the seller's next message
    assert not second.done.any() and not second.reward.any()
    np.testing.assert_array_equal(env.engine.batch.indices, [2, 1])
    np.testing.assert_array_equal(second.obs.needs_answer, [True, True])
    np.testing.assert_array_equal(second.obs.turn, [1, 3])


def test_buyer_env_with_a_seller_that_never_asks_ends_its_steps():
    seller = _Scripted(mute=lambda calls, obs: np.ones(obs.batch_size, bool), limit=10 * CFG.turns)
    env = BuyerEnv(CFG, seller, 2, seed=0)
    obs = env.reset()
    assert not obs.needs_answer.any() and seller.calls == CFG.turns
    step = env.step(_answer(2))
    assert step.done.all() and not step.obs.needs_answer.any()
    assert seller.calls == 2 * CFG.turns
    ep = step.info["episodes"]  # reset's markets, then the step's
    np.testing.assert_array_equal(ep["index"], [0, 1, 2, 3])
    np.testing.assert_array_equal(ep["turns_used"], CFG.turns)
    np.testing.assert_array_equal(ep["return"], 0.0)


def test_buyer_env_disclosure_choice_reaches_the_seller():
    cfg = MarketConfig(buyers=4, products=2, disclosure="voluntary")
    shown = BuyerEnv(cfg, GreedyMatcher(), 3, disclose=True)
    shown.reset()
    assert shown.engine.disclosed.all()
    picky = BuyerEnv(cfg, GreedyMatcher(), 3, disclose=lambda a, k, m: (np.arange(4) < 1) & a)
    picky.reset()
    np.testing.assert_array_equal(picky.engine.disclosed.sum(axis=1), [1, 1, 1])


def test_split_rows():
    groups = split_rows(10, [1, 1, 1])
    assert [g.size for g in groups] == [4, 3, 3]
    np.testing.assert_array_equal(np.concatenate(groups), np.arange(10))
    assert [g.size for g in split_rows(5, [0, 2])] == [0, 5]
    for bad in ([], [-1, 2], [0, 0], [np.nan]):
        with pytest.raises(ValueError, match="weights"):
            split_rows(4, bad)


def test_bad_environment_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="markets"):
        SellerEnv(CFG, Truthful(), 4, markets="random")
    with pytest.raises(ValueError, match="batch_size"):
        SellerEnv(CFG, Truthful(), 0)
    with pytest.raises(ValueError, match="one weight per opponent"):
        SellerEnv(CFG, [Truthful(), Haggler()], 4, weights=[1.0])
    with pytest.raises(ValueError, match="no opponent"):
        SellerEnv(CFG, [], 4)
    # An opponent of the learner's own side, or no policy at all, is named.
    with pytest.raises(TypeError, match="plays buyer policies inside; opponent 1 is GreedyMatcher"):
        SellerEnv(CFG, [Truthful(), GreedyMatcher()], 4)
    with pytest.raises(TypeError, match="plays seller policies inside; opponent 0 is Truthful"):
        BuyerEnv(CFG, Truthful(), 4)
    with pytest.raises(TypeError, match="opponent 0 is str"):
        BuyerEnv(CFG, "greedy_matcher", 4)
    with pytest.raises(ValueError, match="kind: expected 'agent' or 'human', got 'robot'"):
        BuyerEnv(CFG, GreedyMatcher(), 4, kind="robot")


def test_environment_calls_out_of_order_or_with_wrong_types_are_clear_errors():
    seller = SellerEnv(CFG, Truthful(), 3, autoreset=False)
    buyer = BuyerEnv(CFG, GreedyMatcher(), 3)
    with pytest.raises(RuntimeError, match=r"SellerEnv.send: call reset\(\) first"):
        seller.step(GreedyMatcher().act(SellerEnv(CFG, Truthful(), 3).reset()))
    with pytest.raises(RuntimeError, match=r"BuyerEnv.step: call reset\(\) first"):
        buyer.step(_answer(3))
    with pytest.raises(RuntimeError, match=r"SellerEnv.restart: call reset\(\) first"):
        seller.restart(np.ones(3, bool))
    obs = seller.reset()
    buyer.reset()
    with pytest.raises(TypeError, match="expected a SellerAction, got NoneType"):
        seller.step(None)
    with pytest.raises(TypeError, match="expected a BuyerAction, got SellerAction"):
        buyer.step(GreedyMatcher().act(obs))
    for rows in (np.ones(2, bool), np.array([0, 2]), [True, False, True, False]):
        with pytest.raises(ValueError, match=r"rows: expected a bool mask of shape \(3,\)"):
            seller.restart(rows)
    matcher = GreedyMatcher()
    matcher.reset(3)
    assert seller.send(matcher.act(obs)) is not None  # buyers asked, not yet answered
    with pytest.raises(RuntimeError, match=r"call finish\(answer\) first"):
        seller.send(matcher.act(obs))


# ---------------------------------------------------------------------- keyed markets
def test_keyed_markets_depend_only_on_config_seed_and_index():
    whole = generate_keyed_batch(CFG, 9, np.arange(6))
    part = generate_keyed_batch(CFG, 9, [4, 1])
    for name in ("values", "costs", "signals", "is_agent", "keys"):
        np.testing.assert_array_equal(getattr(part, name), getattr(whole, name)[[4, 1]])
    other = generate_keyed_batch(CFG, 10, np.arange(6))
    assert not np.array_equal(other.values, whole.values)
    assert np.all(whole.is_agent.sum(axis=1) == CFG.num_agents)
    assert not whole.values.flags.writeable


def test_keyed_markets_follow_the_valuation_model():
    cfg = MarketConfig(buyers=6, products=3, value_correlation=0.3, signal_noise=0.2)
    exact = generate_batch(cfg, 0, 3000)
    keyed = generate_keyed_batch(cfg, 0, np.arange(3000))
    for name in ("values", "costs", "signals"):
        a, b = getattr(exact, name), getattr(keyed, name)
        assert abs(a.mean() - b.mean()) < 0.5 and abs(a.std() - b.std()) < 0.5
    noise = (keyed.signals - keyed.values) / cfg.width
    assert abs(noise.std() - 0.2) < 0.005 and abs(noise.mean()) < 0.005


def test_replace_rows():
    base = generate_batch(CFG, 0, 4)
    new = generate_batch(CFG, 0, [10, 11])
    out = replace_rows(base, np.array([False, True, False, True]), new)
    np.testing.assert_array_equal(out.indices, [0, 10, 2, 11])
    np.testing.assert_array_equal(out.values[1], new.values[0])
    need = "replace_rows: need one market of the same config per marked row"
    with pytest.raises(ValueError, match=need):
        replace_rows(base, np.array([True, False, False, False]), new)
    # The right number of markets, of the same size, but drawn under another config.
    other = generate_batch(dataclasses.replace(CFG, cost_level=0.1), 0, [10, 11])
    with pytest.raises(ValueError, match=need):
        replace_rows(base, np.array([False, True, False, True]), other)


# ---------------------------------------------------------------------- rewards
def test_rewards_are_the_documented_functions():
    np.testing.assert_allclose(
        seller_reward([10.0, 4.0], [0, 2], [20.0, 0.0], 100.0, 0.5), [0.5, 0.04 - 1.0]
    )
    np.testing.assert_allclose(buyer_reward([[10.0, 0.0]], [50.0]), [[0.2, 0.0]])
    assert rating_score(7.0, 3.0, 10.0) == pytest.approx(0.7)
    assert rating_score(1.0, 0.0, 0.0) == 0.5


def test_a_weighted_opponent_left_no_rows_is_an_error_not_a_missing_opponent():
    with pytest.raises(ValueError, match="4 rows leave opponent 1 \\(weight 0.1\\) no rows"):
        split_rows(4, [0.9, 0.1])
    with pytest.raises(ValueError, match="leave haggler"):
        split_rows(1, [1, 1], names=["truthful", "haggler"])
    with pytest.raises(ValueError, match="rows leave"):
        SellerEnv(CFG, [Truthful(), Truthful()], 1)
    assert [g.size for g in split_rows(10, [0.9, 0.1])] == [9, 1]


def test_merged_actions_keep_every_parts_prices():
    """The merged arrays took the first part's dtype: a policy that bid whole numbers cut
    the others' bids of 40.75 to 40."""
    from agents.env import merge_actions

    whole = BuyerAction(np.array([2]), np.array([0]), np.array([40]))
    cents = BuyerAction(np.array([2, 2]), np.array([1, 0]), np.array([40.75, 12.5]))
    merged = merge_actions(3, [(np.array([0]), whole), (np.array([1, 2]), cents)], BuyerAction)
    np.testing.assert_array_equal(merged.price, [40.0, 40.75, 12.5])
    assert merged.decision.dtype.kind == "i" and merged.product.tolist() == [0, 1, 0]
    texts = BuyerAction(np.array([2]), np.array([0]), np.array(["x"], dtype=object))
    merged = merge_actions(3, [(np.array([0]), texts), (np.array([1, 2]), cents)], BuyerAction)
    assert merged.price.tolist() == ["x", 40.75, 12.5]  # the engine reads it entry by entry


def test_a_seed_other_than_the_given_batchs_is_refused_rather_than_ignored():
    batch = generate_batch(MarketConfig(buyers=3), 5, 4)
    env = SellerEnv.from_batch(batch, Truthful())
    with pytest.raises(ValueError, match=r"reset\(seed=6\): this environment plays the batch"):
        env.reset(seed=6)
    env.reset(seed=5)  # the batch's own seed: the batch, as without one
    np.testing.assert_array_equal(env.batch.values, batch.values)
