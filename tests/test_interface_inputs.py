"""Actions given to the Gymnasium and PettingZoo environments: what the action space
contains is played, anything else is refused before it reaches the market, with one
line that names the space and what was given."""

from __future__ import annotations

import numpy as np
import pytest

from agents.gym_env import BuyerGymEnv, SellerGymEnv, SellerVectorEnv
from agents.pettingzoo_env import SELLER, MarketAEC
from arena.config import MarketConfig

SMALL = MarketConfig(buyers=2, products=1, inventory=1, turns=6)

# (action, error, what the message shows of it: its repr, an array's shape); "n" stands
# for the space's size.
BAD_ONE = [
    (1.7, TypeError, "1.7"),
    ("3", TypeError, "'3'"),
    (None, TypeError, "None"),
    (True, TypeError, "True"),  # Python counts a bool as an int; an action is not one
    (np.float64(1.0), TypeError, repr(np.float64(1.0))),
    (np.array(2.0), TypeError, "array(2.)"),
    (np.bool_(True), TypeError, repr(np.bool_(True))),
    (np.uint64(1), TypeError, repr(np.uint64(1))),  # Discrete.contains refuses it too
    (np.array([[3]]), ValueError, "shape (1, 1)"),
    (np.array([1, 2]), ValueError, "shape (2,)"),
    (np.array([], np.int64), ValueError, "shape (0,)"),
    (-1, ValueError, "got -1"),
    ("n", ValueError, "got {n}"),
    (2**70, ValueError, "got 1180591620717411303424"),
    (np.int64(2**62), ValueError, f"got {2**62}"),
]
GOOD_ONE = [3, np.int64(3), np.int8(3), np.uint32(3), np.array(3), np.array(3, np.int16)]


def _single_envs():
    return {
        "seller": (SellerGymEnv(SMALL), "seller action space Discrete"),
        "buyer": (BuyerGymEnv(SMALL, seat=0), "buyer action space Discrete"),
    }


def _bad(action, n):
    return n if isinstance(action, str) and action == "n" else action


@pytest.mark.parametrize("side", ["seller", "buyer"])
@pytest.mark.parametrize(("action", "error", "shown"), BAD_ONE)
def test_a_single_env_refuses_an_action_outside_its_space(side, action, error, shown):
    env, space = _single_envs()[side]
    n = int(env.action_space.n)
    action = _bad(action, n)
    env.reset(seed=0)
    with pytest.raises(error) as err:
        env.step(action)
    message = str(err.value)
    assert f"{space}({n})" in message and shown.format(n=n) in message
    assert "\n" not in message


def _contains(space, action) -> bool:
    try:
        return bool(space.contains(action))
    except OverflowError:  # Discrete.contains on a Python int past int64
        return False


@pytest.mark.parametrize("side", ["seller", "buyer"])
def test_a_single_env_accepts_exactly_what_its_space_contains_but_a_bool(side):
    env, _ = _single_envs()[side]
    n = int(env.action_space.n)
    for action in [_bad(a, n) for a, _, _ in BAD_ONE] + GOOD_ONE:
        env.reset(seed=0)
        try:
            env.step(action)
            played = True
        except (TypeError, ValueError):
            played = False
        assert played == (_contains(env.action_space, action) and not isinstance(action, bool))


@pytest.mark.parametrize("side", ["seller", "buyer"])
def test_a_refused_action_plays_nothing(side):
    env, _ = _single_envs()[side]
    env.reset(seed=0)
    for action in (1.7, np.array([[3]]), 2**70):
        with pytest.raises((TypeError, ValueError)):
            env.step(action)
    after = env.step(0)
    env.reset(seed=0)
    fresh = env.step(0)
    np.testing.assert_array_equal(after[0]["observation"], fresh[0]["observation"])
    assert after[1:] == fresh[1:]


@pytest.mark.parametrize("side", ["seller", "buyer"])
@pytest.mark.parametrize("action", GOOD_ONE, ids=repr)
def test_a_single_env_plays_what_its_space_contains_as_that_integer(side, action):
    env, _ = _single_envs()[side]
    assert env.action_space.contains(action)
    env.reset(seed=0)
    got = env.step(action)
    env.reset(seed=0)
    want = env.step(3)
    np.testing.assert_array_equal(got[0]["observation"], want[0]["observation"])
    assert got[1:] == want[1:]


# (actions for 2 markets, error, what the message shows of them)
BAD_VECTOR = [
    (np.array([0.9, 1.5]), TypeError, "dtype float64 and shape (2,)"),
    ([0.9, 1], TypeError, "[0.9, 1]"),
    (np.array(["1", "2"]), TypeError, "dtype <U1"),
    ([True, False], TypeError, "[True, False]"),
    (None, TypeError, "None"),
    ([1, [2]], TypeError, "[1, [2]]"),
    (np.array([1, 2], np.uint64), TypeError, "dtype uint64"),
    (np.array([1, 2, 3]), ValueError, "shape (3,)"),
    (np.array([[1, 2]]), ValueError, "shape (1, 2)"),
    (1, ValueError, "got 1"),
    (np.array([1, -1]), ValueError, "got -1"),
    ("n", ValueError, "got {n}"),
]


@pytest.mark.parametrize(("actions", "error", "shown"), BAD_VECTOR)
def test_the_vector_env_refuses_actions_outside_its_space(actions, error, shown):
    vec = SellerVectorEnv(2, SMALL)
    n = int(vec.single_action_space.n)
    if isinstance(actions, str):
        actions = np.array([0, n])
    vec.reset(seed=0)
    with pytest.raises(error) as err:
        vec.step(actions)
    message = str(err.value)
    assert f"seller actions (Discrete({n}), one per market)" in message
    assert shown.format(n=n) in message and "\n" not in message


def test_the_vector_env_plays_integer_arrays_and_lists_alike():
    vec = SellerVectorEnv(2, SMALL)
    results = []
    for actions in ([1, 2], np.array([1, 2], np.int32), (np.int64(1), np.int8(2))):
        vec.reset(seed=0)
        results.append(vec.step(actions))
    for got in results[1:]:
        np.testing.assert_array_equal(got[0]["observation"], results[0][0]["observation"])
        np.testing.assert_array_equal(got[1], results[0][1])


@pytest.mark.parametrize(("action", "error", "shown"), BAD_ONE)
def test_the_aec_game_refuses_actions_outside_the_agents_space(action, error, shown):
    """The seller, then the buyer it asks: each refused, then plays as if nothing was
    given."""
    game = MarketAEC(SMALL)
    game.reset(seed=0)
    for agent, side, then in ((SELLER, "seller", "buyer_0"), ("buyer_0", "buyer", SELLER)):
        n = int(game.action_space(agent).n)
        with pytest.raises(error) as err:
            game.step(_bad(action, n))
        message = str(err.value)
        assert f"{side} action space Discrete({n})" in message
        assert shown.format(n=n) in message and "\n" not in message
        assert game.agent_selection == agent  # nothing was played
        game.step(0)  # the seller offers buyer 0 product 0, buyer 0 rejects
        assert game.agent_selection == then
