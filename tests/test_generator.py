"""Market instances: determinism, common random numbers and the documented valuation model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from arena.config import MarketConfig
from arena.generator import (
    generate,
    generate_batch,
    instance_from_arrays,
    market_seed,
    stack_instances,
)

ARRAYS = ("values", "costs", "inventory", "signals", "is_agent")

CFG = MarketConfig(
    buyers=6,
    products=3,
    inventory=(1, 2, 3),
    turns=9,
    price_range=(10.0, 60.0),
    value_correlation=0.4,
    quality_spread=0.15,
    wealth_spread=0.25,
    cost_level=0.5,
    signal_noise=0.2,
    agent_share=0.5,
)


def assert_same_instance(a, b):
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name
    assert a.key == b.key


# ---------------------------------------------------------------- determinism


def test_same_seed_and_index_give_byte_identical_arrays():
    a = generate(CFG, 7, 3)
    b = generate(CFG, 7, 3)
    assert_same_instance(a, b)
    assert (a.seed, a.index) == (7, 3)
    assert a.values.shape == (6, 3) and a.signals.shape == (6, 3)
    assert a.costs.shape == (3,) and a.inventory.shape == (3,) and a.is_agent.shape == (6,)
    assert a.is_agent.dtype == bool
    assert a.num_buyers == 6 and a.num_products == 3


def test_an_instance_does_not_depend_on_what_was_generated_before():
    fresh = generate(CFG, 11, 5)
    for i in (0, 9, 4, 6, 1):
        generate(CFG, 11, i)
        generate(CFG, 12, 5)
    assert_same_instance(fresh, generate(CFG, 11, 5))


def test_stream_is_the_documented_seed_sequence_child():
    ss = market_seed(42, 3)
    spawned = np.random.SeedSequence(42).spawn(4)[3]
    assert np.array_equal(ss.generate_state(4), spawned.generate_state(4))


@pytest.mark.parametrize(("seed", "index"), [(-1, 0), (0, -1)])
def test_negative_seed_or_index_is_rejected(seed, index):
    with pytest.raises(
        ValueError, match=f"seed and index must be >= 0, got seed={seed}, index={index}"
    ):
        generate(CFG, seed, index)


def test_different_index_or_seed_gives_different_values():
    base = generate(CFG, 7, 3)
    for other in (generate(CFG, 7, 4), generate(CFG, 8, 3), generate(CFG, 3, 7)):
        assert not np.array_equal(base.values, other.values)
        assert not np.array_equal(base.signals, other.signals)
        assert base.key != other.key


def test_market_keys_differ_across_indices_and_are_stable():
    keys = [generate(CFG, 5, i).key for i in range(50)]
    assert len(set(keys)) == 50
    assert all(isinstance(k, int) and 0 <= k < 2**64 for k in keys)
    assert keys == [generate(CFG, 5, i).key for i in range(50)]
    assert generate(CFG, 6, 0).key != keys[0]
    batch = generate_batch(CFG, 5, 50)
    assert batch.keys.dtype == np.uint64
    assert [int(k) for k in batch.keys] == keys


def test_instance_arrays_are_read_only():
    inst = generate(CFG, 1, 0)
    for name in ARRAYS:
        arr = getattr(inst, name)
        assert not arr.flags.writeable, name
        with pytest.raises(ValueError):
            arr[0] = arr[0]
    before = inst.values.copy()
    with pytest.raises(ValueError):
        inst.values += 1.0
    assert np.array_equal(inst.values, before)


def test_instances_are_frozen():
    inst = generate(CFG, 1, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        inst.values = np.zeros((6, 3))


# ---------------------------------------------------------------- batches


@pytest.mark.parametrize("indices", [[0, 1, 2, 3], [3, 1, 2], [9, 0, 9, 4], [17]])
def test_generate_batch_equals_stacked_generate(indices):
    batch = generate_batch(CFG, 21, indices)
    assert batch.size == len(indices)
    assert batch.config == CFG and batch.seed == 21
    assert batch.indices.tolist() == list(indices)
    assert batch.values.shape == (len(indices), 6, 3)
    for b, i in enumerate(indices):
        one = generate(CFG, 21, i)
        for name in ARRAYS:
            assert getattr(batch, name)[b].tobytes() == getattr(one, name).tobytes(), name
        assert int(batch.keys[b]) == one.key
        assert_same_instance(batch.instance(b), one)
        assert batch.instance(b).index == i


def test_generate_batch_row_does_not_depend_on_batch_composition():
    a = generate_batch(CFG, 4, [0, 1, 2, 3, 4])
    b = generate_batch(CFG, 4, [4, 2])
    assert a.values[2].tobytes() == b.values[1].tobytes()
    assert a.values[4].tobytes() == b.values[0].tobytes()
    assert a.keys[2] == b.keys[1]


def test_generate_batch_int_means_range():
    a = generate_batch(CFG, 4, 3)
    b = generate_batch(CFG, 4, [0, 1, 2])
    assert a.indices.tolist() == [0, 1, 2]
    for name in ARRAYS:
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()


@pytest.mark.parametrize("indices", [[], 0, [[0, 1]]])
def test_generate_batch_rejects_empty_or_nested_indices(indices):
    with pytest.raises(
        ValueError, match="indices must be a non-empty 1-d sequence of market indices"
    ):
        generate_batch(CFG, 0, indices)


def test_stack_instances_rejects_mixed_configs():
    a = generate(CFG, 0, 0)
    b = generate(dataclasses.replace(CFG, cost_level=0.1), 0, 1)
    with pytest.raises(ValueError):
        stack_instances([a, b])
    with pytest.raises(ValueError):
        stack_instances([])
    ok = stack_instances([a, generate(CFG, 0, 1)])
    assert ok.size == 2 and ok.indices.tolist() == [0, 1]


# ---------------------------------------------------------------- hand-made instances


def test_instance_from_arrays_defaults():
    cfg = MarketConfig(buyers=2, products=3, inventory=(1, 2, 3))
    values = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    inst = instance_from_arrays(cfg, values, [0.5, 0.5, 0.5])
    assert np.array_equal(inst.values, values)
    assert np.array_equal(inst.signals, values)
    assert inst.inventory.tolist() == [1, 2, 3]
    assert inst.is_agent.tolist() == [False, False]
    for name in ARRAYS:
        assert not getattr(inst, name).flags.writeable, name
    # The instance owns its arrays: changing the caller's list changes nothing.
    values[0][0] = 99.0
    assert inst.values[0, 0] == 1.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"values": np.zeros((3, 3))},
        {"values": np.zeros((2, 2))},
        {"values": np.zeros(6)},
        {"costs": np.zeros(2)},
        {"costs": np.zeros((1, 3))},
        {"inventory": np.ones(4, int)},
        {"inventory": np.ones((1, 3), int)},
    ],
)
def test_instance_from_arrays_validates_shapes(kwargs):
    cfg = MarketConfig(buyers=2, products=3)
    args = {"values": np.zeros((2, 3)), "costs": np.zeros(3)} | kwargs
    with pytest.raises(ValueError) as err:
        instance_from_arrays(cfg, **args)
    assert next(iter(kwargs)) in str(err.value)


# ---------------------------------------------------------------- valuation model


def test_values_and_costs_lie_in_the_price_range():
    cfg = dataclasses.replace(
        CFG,
        buyers=50,
        products=8,
        inventory=1,
        wealth_spread=0.6,
        quality_spread=0.4,
        cost_level=0.95,
    )
    batch = generate_batch(cfg, 3, 40)
    lo, hi = cfg.price_range
    assert batch.values.min() >= lo and batch.values.max() <= hi
    assert batch.costs.min() >= lo and batch.costs.max() <= hi
    # The spreads are wide enough that clipping happens at both ends.
    assert (batch.values == lo).any() and (batch.values == hi).any()


@pytest.mark.parametrize("cost_level", [0.0, 0.3, 0.9])
def test_costs_follow_the_documented_formula(cost_level):
    cfg = MarketConfig(
        buyers=3, products=50, price_range=(20.0, 70.0), quality_spread=0.4, cost_level=cost_level
    )
    lo, w = cfg.lo, cfg.width
    for i in range(5):
        inst = generate(cfg, 9, i)
        assert np.all(inst.costs <= lo + w * cost_level + 1e-9)
        assert np.all(inst.costs >= lo)
        # Recompute from the documented stream: g is the first draw.
        g = np.random.default_rng(market_seed(9, i)).standard_normal(cfg.products)
        expected = lo + w * cost_level * np.clip(0.5 + cfg.quality_spread * g, 0.0, 1.0)
        np.testing.assert_allclose(inst.costs, expected, rtol=0, atol=1e-9)
    if cost_level == 0.0:
        assert np.all(generate(cfg, 9, 0).costs == lo)


def test_cost_tracks_product_mean_value():
    # With no buyer spread, every buyer values product j at lo + w * clip(m_j, 0, 1),
    # so cost = lo + cost_level * (value - lo).
    cfg = MarketConfig(
        buyers=4,
        products=30,
        price_range=(5.0, 45.0),
        quality_spread=0.3,
        wealth_spread=0.0,
        cost_level=0.6,
    )
    inst = generate(cfg, 2, 0)
    assert np.all(inst.values == inst.values[0])
    np.testing.assert_allclose(inst.costs, 5.0 + 0.6 * (inst.values[0] - 5.0), atol=1e-9)


def test_zero_signal_noise_gives_exact_values():
    cfg = dataclasses.replace(CFG, signal_noise=0.0)
    for i in range(3):
        inst = generate(cfg, 1, i)
        assert np.array_equal(inst.signals, inst.values)


def test_signal_noise_scales_with_the_range_width():
    cfg = MarketConfig(buyers=500, products=4, price_range=(0.0, 200.0), signal_noise=0.3)
    inst = generate(cfg, 0, 0)
    resid = inst.signals - inst.values
    assert abs(resid.std() - 0.3 * 200.0) < 0.05 * 0.3 * 200.0
    assert abs(resid.mean()) < 0.1 * 0.3 * 200.0


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_cross_product_correlation_matches_value_correlation(rho):
    cfg = MarketConfig(
        buyers=10_000,
        products=2,
        value_correlation=rho,
        quality_spread=0.0,
        wealth_spread=0.05,
        signal_noise=0.0,
    )
    v = generate(cfg, 13, 0).values
    assert v.min() > cfg.lo and v.max() < cfg.hi  # no clipping
    r = np.corrcoef(v[:, 0], v[:, 1])[0, 1]
    assert abs(r - rho) < 0.05


def test_full_correlation_makes_buyers_rank_products_alike():
    cfg = MarketConfig(
        buyers=200, products=3, value_correlation=1.0, quality_spread=0.0, wealth_spread=0.05
    )
    v = generate(cfg, 13, 0).values
    # rho = 1 and no quality spread: each buyer values every product the same.
    np.testing.assert_allclose(v, v[:, :1].repeat(3, axis=1), atol=1e-9)


@pytest.mark.parametrize("ws", [0.02, 0.05, 0.1])
def test_between_buyer_spread_is_wealth_spread(ws):
    cfg = MarketConfig(
        buyers=10_000,
        products=2,
        price_range=(0.0, 80.0),
        value_correlation=1.0,
        quality_spread=0.0,
        wealth_spread=ws,
    )
    v = generate(cfg, 3, 0).values
    assert v.min() > 0.0 and v.max() < 80.0
    sd = v[:, 0].std()
    assert abs(sd - 80.0 * ws) < 0.05 * 80.0 * ws


def test_wealth_spread_scales_buyer_dispersion_exactly_under_common_numbers():
    base = MarketConfig(buyers=300, products=3, value_correlation=0.3, quality_spread=0.05)
    small = generate(dataclasses.replace(base, wealth_spread=0.02), 1, 0).values
    large = generate(dataclasses.replace(base, wealth_spread=0.06), 1, 0).values
    dev_small = small - small.mean(axis=0)
    dev_large = large - large.mean(axis=0)
    np.testing.assert_allclose(dev_large, 3.0 * dev_small, atol=1e-9)


def test_quality_spread_moves_the_spread_between_products():
    base = MarketConfig(
        buyers=200,
        products=200,
        value_correlation=0.5,
        wealth_spread=0.05,
        price_range=(0.0, 100.0),
    )
    spreads = []
    for qs in (0.0, 0.02, 0.05, 0.1):
        v = generate(dataclasses.replace(base, quality_spread=qs), 5, 0).values
        spreads.append(v.mean(axis=0).std())
    assert spreads == sorted(spreads)
    # Product means differ only through q_j (up to buyer sampling noise), in units of w.
    assert spreads[0] < 1.0
    for qs, sd in zip((0.02, 0.05, 0.1), spreads[1:], strict=True):
        assert abs(sd - 100.0 * qs) < 0.15 * 100.0 * qs + 0.5


@pytest.mark.parametrize(("buyers", "share"), [(1, 0.0), (1, 1.0), (3, 0.5), (8, 0.25), (7, 0.9)])
def test_is_agent_has_exactly_num_agents_true_entries(buyers, share):
    cfg = MarketConfig(buyers=buyers, agent_share=share)
    batch = generate_batch(cfg, 2, 30)
    assert np.all(batch.is_agent.sum(axis=1) == cfg.num_agents)


def test_agent_positions_are_random():
    cfg = MarketConfig(buyers=8, agent_share=0.25)
    rows = {tuple(generate(cfg, 2, i).is_agent.tolist()) for i in range(30)}
    assert len(rows) > 5


# ---------------------------------------------------------------- common random numbers


@pytest.mark.parametrize(
    "change",
    [
        {"cost_level": 0.0},
        {"cost_level": 0.8},
        {"disclosure": "mandatory"},
        {"disclosure": "voluntary"},
        {"patience": 3},
        {"turns": 100},
        {"signal_noise": 1.5},
        {"agent_share": 0.1},
        {"inventory": 4},
    ],
)
def test_values_are_shared_across_configs_that_differ_elsewhere(change):
    other = dataclasses.replace(CFG, **change)
    for i in range(4):
        a, b = generate(CFG, 31, i), generate(other, 31, i)
        assert a.values.tobytes() == b.values.tobytes()
        assert a.key == b.key
        if "signal_noise" not in change and "cost_level" not in change:
            assert a.signals.tobytes() == b.signals.tobytes()
            assert a.costs.tobytes() == b.costs.tobytes()


def test_a_different_price_range_is_an_affine_transform():
    lo1, hi1, lo2, hi2 = 10.0, 60.0, 200.0, 1200.0
    cfg1 = dataclasses.replace(CFG, price_range=(lo1, hi1), wealth_spread=0.5)
    cfg2 = dataclasses.replace(cfg1, price_range=(lo2, hi2))
    w1, w2 = hi1 - lo1, hi2 - lo2
    for i in range(5):
        a, b = generate(cfg1, 8, i), generate(cfg2, 8, i)
        np.testing.assert_allclose(b.values, lo2 + (a.values - lo1) * w2 / w1, rtol=0, atol=1e-9)
        np.testing.assert_allclose(b.costs, lo2 + (a.costs - lo1) * w2 / w1, rtol=0, atol=1e-9)
        np.testing.assert_allclose(b.signals, lo2 + (a.signals - lo1) * w2 / w1, rtol=0, atol=1e-9)
        assert np.array_equal(a.is_agent, b.is_agent)
        assert not np.allclose(a.values, b.values)
