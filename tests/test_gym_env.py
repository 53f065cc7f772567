"""The Gymnasium environments: Gymnasium's own checker, the documented spaces, seeding,
the vector environment on the batched engine (next-step autoreset), the buyer seat,
episode infos where W* is 0, torch's seeded stream left alone by a checkpoint opponent."""

from __future__ import annotations

import dataclasses
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agents.gym_env import BUYER_ID, SELLER_ID, BuyerGymEnv, SellerGymEnv, SellerVectorEnv
from agents.spaces import SellerSpace
from arena.config import MarketConfig
from arena.rewards import VIOLATION_PENALTY

SMALL = MarketConfig(buyers=4, products=2, inventory=1, turns=6, agent_share=0.5)
ZERO_WELFARE = MarketConfig(buyers=1, products=1, turns=1, cost_level=0.95)  # W* = 0 in some
IMPATIENT = MarketConfig(
    buyers=3,
    products=2,
    turns=9,
    patience=2,
    price_range=(100.0, 600.0),
    agent_share=0.6,
    disclosure="voluntary",
)


def _first_legal(obs) -> int:
    return int(np.flatnonzero(obs["action_mask"])[0])


def _episode(env, seed, policy=_first_legal):
    """(observations, rewards, final info) of one market under a deterministic policy."""
    obs, _ = env.reset(seed=seed)
    seen, rewards, done, info = [obs], [], False, {}
    while not done:
        obs, r, term, trunc, info = env.step(policy(obs))
        seen.append(obs)
        rewards.append(r)
        done = term or trunc
    return seen, rewards, info


@pytest.mark.parametrize("cfg", [MarketConfig(), IMPATIENT])
def test_seller_env_passes_gymnasiums_checker(cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its advice on render fps and the like
        check_env(SellerGymEnv(cfg, ["truthful", "haggler"]), skip_render_check=True)
        mixed = dataclasses.replace(cfg, agent_share=0.5)  # a split by kind meets both kinds
        check_env(SellerGymEnv(mixed, "human=noisy_human,agent=strategic"), skip_render_check=True)


@pytest.mark.parametrize("seat", [None, 1])
def test_buyer_env_passes_gymnasiums_checker(seat):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(BuyerGymEnv(IMPATIENT, ["greedy_matcher", "descending_offers"], seat=seat))


def test_spaces_have_the_documented_fixed_sizes():
    for n, m in [(8, 4), (3, 2), (12, 6)]:
        cfg = MarketConfig(buyers=n, products=m)
        env = SellerGymEnv(cfg)
        k = len(env.space.offsets) + 1
        assert env.action_space.n == n * m * k
        assert env.observation_space["observation"].shape == (3 + 3 * m + 10 * n + 9 * n * m,)
        assert env.observation_space["action_mask"].shape == (n * m * k,)
        buyer = BuyerGymEnv(cfg)
        assert buyer.action_space.n == 2 + m * len(buyer.space.shares)
        assert buyer.observation_space["observation"].shape == (7 + 8 * m,)


def test_reset_with_a_seed_replays_and_reset_without_moves_on():
    env = SellerGymEnv(SMALL, "noisy_human")
    a, ra, _ = _episode(env, 5)
    obs, info = env.reset()
    assert info == {"market": 1, "seed": 5}
    b, rb, _ = _episode(env, 5)
    assert ra == rb
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x["observation"], y["observation"])
    assert not np.array_equal(obs["observation"], a[0]["observation"])  # another market


def test_rewards_sum_to_capture_and_info_reports_the_market():
    env = SellerGymEnv(MarketConfig(), "truthful")
    _, rewards, info = _episode(env, 11)
    assert info["seller_violations"] == 0
    assert sum(rewards) == pytest.approx(info["capture"], abs=1e-12)
    assert info["capture"] == pytest.approx(info["profit"] / info["w_star"])


def test_masked_actions_are_legal_and_an_illegal_one_is_a_penalized_violation():
    env = SellerGymEnv(IMPATIENT, ["haggler", "strategic"])
    rng = np.random.default_rng(0)
    for seed in range(12):
        _, _, info = _episode(env, seed, lambda o: rng.choice(np.flatnonzero(o["action_mask"])))
        assert info["seller_violations"] == 0
    env = SellerGymEnv(SMALL, "truthful")
    n, m, k = 4, 2, env.space.levels
    obs, _ = env.reset(seed=0)
    bought = None
    while bought is None:  # play legal offers until some buyer has bought
        obs, *_ = env.step(_first_legal(obs))
        flags = obs["observation"][3 + 3 * m :].reshape(-1)[: 10 * n].reshape(n, 10)
        done = np.flatnonzero(flags[:, 1] == 1.0)
        bought = int(done[0]) if done.size else None
    mine = slice(bought * m * k, (bought + 1) * m * k)
    assert obs["action_mask"][mine].sum() == 0  # every action towards it is masked
    _, reward, *_ = env.step(bought * m * k)  # played anyway: a violation, the penalty
    assert reward == pytest.approx(-VIOLATION_PENALTY)


def test_make_and_make_vec_by_id_use_the_batched_engine():
    env = gym.make(f"agents.gym_env:{SELLER_ID}", config=SMALL, buyers="truthful")
    obs, _ = env.reset(seed=0)
    assert obs["observation"].shape == (SellerSpace(4, 2).size,)
    env.close()
    vec = gym.make_vec(SELLER_ID, num_envs=16, config=SMALL, buyers=["truthful", "haggler"])
    assert isinstance(vec.unwrapped, SellerVectorEnv)
    obs, _ = vec.reset(seed=0)
    assert obs["observation"].shape == (16, SellerSpace(4, 2).size)
    assert vec.unwrapped._env.batch_size == 16  # one engine of 16 rows, not 16 engines
    assert gym.make(BUYER_ID, config=SMALL).action_space.n == 2 + 2 * 8


def test_vector_rows_play_the_single_environments_markets_with_next_step_resets():
    b = 4
    vec = SellerVectorEnv(b, SMALL, "noisy_human", markets="exact")
    obs, _ = vec.reset(seed=9)
    first = {}  # row -> its first market's return
    running = np.zeros(b)
    ended = np.zeros(b, bool)
    for _ in range(2 * SMALL.turns):
        actions = np.array([np.flatnonzero(m)[0] if m.any() else 0 for m in obs["action_mask"]])
        obs, reward, term, trunc, info = vec.step(actions)
        assert not trunc.any()
        # Next-step autoreset: a row that ended on the last step starts afresh, paid 0.
        assert np.all(reward[ended] == 0) and not term[ended].any()
        assert np.all(obs["observation"][ended, 0] == 0.0)  # turns used / T
        running += reward
        for row in np.flatnonzero(term):
            if row not in first:
                assert info["index"][row] == row  # rows start with markets 0..B-1
                first[int(row)] = running[row]
            running[row] = 0.0
        ended = term
    assert sorted(first) == list(range(b))
    single = SellerGymEnv(SMALL, "noisy_human")
    for row, ret in first.items():
        single.reset(seed=9)
        for _ in range(row):
            single.reset()  # market `row` of seed 9
        obs1, total, done = single._observe(), 0.0, False
        while not done:
            obs1, r, done, _, _ = single.step(_first_legal(obs1))
            total += r
        assert ret == pytest.approx(total, abs=1e-12)


def test_buyer_env_pays_the_seat_its_own_surplus():
    env = BuyerGymEnv(MarketConfig(), "greedy_matcher", others="haggler")
    for seed in range(6):
        _, rewards, info = _episode(env, seed, lambda o: 1 if o["action_mask"][1] else 0)
        width = 100.0
        assert sum(rewards) == pytest.approx(info["surplus"] / width, abs=1e-12)
        assert info["bought"] >= 0 or info["surplus"] == 0.0


def test_render_shows_the_sellers_view():
    env = SellerGymEnv(SMALL, "truthful", render_mode="ansi")
    env.reset(seed=1)
    env.step(0)
    text = env.render()
    assert "You are the seller" in text and "TO: buyer 0" in text


def test_the_other_buyers_disclose_as_their_policy_chooses_from_the_market(monkeypatch):
    """A policy may choose whether to disclose from the market it is in (a learned head
    reads the values); the seat's environment shows the other buyers their market, as
    the seller's environment does."""
    from agents import registry
    from agents.base import AGENT
    from agents.scripted.buyers import Truthful

    class SeesItsMarket(Truthful):
        kind = AGENT

        def disclose(self, is_agent, key, market=None):
            return np.full(np.shape(is_agent), market is not None)

    entry = registry.Entry("sees_its_market", "buyer", AGENT, SeesItsMarket)
    monkeypatch.setitem(registry._ENTRIES, entry.name, entry)
    cfg = MarketConfig(buyers=4, products=2, inventory=1, turns=6, agent_share=1.0,
                       disclosure="voluntary")  # fmt: skip
    env = BuyerGymEnv(cfg, "greedy_matcher", others="sees_its_market", seat=0)
    env.reset(seed=3)
    assert env._env.engine.disclosed[:, 1:].all()


def test_a_vector_env_too_small_for_its_opponents_is_refused():
    """Each opponent plays a block of the rows: a positive weight left no row would never
    be played, so it is an error rather than a silently missing opponent."""
    with pytest.raises(ValueError, match="leave haggler"):
        SellerVectorEnv(4, SMALL, ["truthful", "haggler"], weights=[0.9, 0.1])
    with pytest.raises(ValueError, match="one per opponent"):
        SellerVectorEnv(4, SMALL, ["truthful", "haggler"], weights=[1.0])
    env = SellerVectorEnv(10, SMALL, ["truthful", "haggler"], weights=[0.9, 0.1])
    env.reset(seed=0)
    assert [g.size for g in env._env.groups] == [9, 1]
    SellerVectorEnv(4, SMALL, ["truthful", "haggler"], weights=[1.0, 0.0])  # weight 0: fine


def test_markets_where_welfare_is_zero_pass_the_checker_without_nan_in_infos():
    """capture and efficiency are not defined where W* is 0: the single environment's
    info leaves them out (NaN would fail the checker's info comparison)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(SellerGymEnv(ZERO_WELFARE), skip_render_check=True)
    env = SellerGymEnv(ZERO_WELFARE)
    zero = []
    for seed in range(12):
        env.reset(seed=seed)
        *_, terminated, _, info = env.step(0)
        assert terminated and all(np.isfinite(v) for v in info.values()), info
        zero.append(info["w_star"] == 0)
        assert ("capture" in info) == ("efficiency" in info) == (info["w_star"] > 0)
    assert any(zero) and not all(zero)


def test_vector_infos_mask_out_capture_where_welfare_is_zero():
    """Gymnasium's vector convention: a metric's ``_name`` mask is false where it is not
    defined, and no entry is NaN."""
    vec = SellerVectorEnv(8, ZERO_WELFARE, markets="exact")
    vec.reset(seed=0)
    _, _, terminated, _, info = vec.step(np.zeros(8, np.int64))
    assert terminated.all()
    w = info["w_star"]
    assert (w == 0).any() and (w > 0).any()
    for name in ("capture", "efficiency"):
        np.testing.assert_array_equal(info["_" + name], w > 0)
    np.testing.assert_array_equal(info["_w_star"], terminated)
    assert not any(np.isnan(v).any() for v in info.values())


def test_a_checkpoint_opponent_leaves_torchs_seeded_stream_alone():
    """Building a checkpoint's network draws its initial values from a fork of torch's
    generator: the user's seeded stream goes on as if nothing was built."""
    torch = pytest.importorskip("torch")
    from agents.registry import SHIPPED
    from agents.rl import checkpoint

    torch.manual_seed(0)
    a = torch.rand(3)
    torch.manual_seed(0)
    checkpoint.load(SHIPPED / "rl_buyer")  # not the shared copy: a network built here
    SellerGymEnv(SMALL, "rl_buyer")
    b = torch.rand(3)
    assert torch.equal(a, b)
