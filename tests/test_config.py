"""MarketConfig: validation, derived values, dict round trips, immutability."""

from __future__ import annotations

import dataclasses
import math

import pytest

from arena.config import CONFIG_FIELDS, DISCLOSURE_RULES, MarketConfig


def test_defaults_construct_and_are_valid():
    cfg = MarketConfig()
    assert cfg.buyers >= 1 and cfg.products >= 1 and cfg.turns >= 1
    assert cfg.disclosure in DISCLOSURE_RULES
    lo, hi = cfg.price_range
    assert 0 <= lo < hi
    assert cfg.lo == lo and cfg.hi == hi and cfg.width == hi - lo
    assert isinstance(cfg.price_range, tuple)
    assert set(CONFIG_FIELDS) == {f.name for f in dataclasses.fields(MarketConfig)}


BAD_FIELDS = [
    ("buyers", 0),
    ("buyers", 2.5),
    ("buyers", True),
    ("buyers", -3),
    ("buyers", "8"),
    ("products", 0),
    ("products", 1.0),
    ("inventory", 0),
    ("inventory", -1),
    ("inventory", 1.5),
    ("inventory", [1, 2, 3]),  # default products=4: wrong length
    ("inventory", (1, 1, 1, 1, 1)),
    ("inventory", [1, 0, 2, 1]),
    ("inventory", [1, 1, True, 1]),
    ("turns", 0),
    ("turns", False),
    ("price_range", (5, 5)),
    ("price_range", (10, 1)),
    ("price_range", (-1, 5)),
    ("price_range", (0, math.inf)),
    ("price_range", (0, math.nan)),
    ("price_range", "ab"),
    ("price_range", (1.0,)),
    ("price_range", (0, 1, 2)),
    ("price_range", ("0", "5")),
    ("price_range", 100.0),
    ("value_correlation", -0.1),
    ("value_correlation", 1.1),
    ("value_correlation", math.nan),
    ("quality_spread", -1),
    ("quality_spread", math.inf),
    ("wealth_spread", math.nan),
    ("wealth_spread", -0.5),
    ("cost_level", 1.0),
    ("cost_level", -0.1),
    ("cost_level", "0.3"),
    ("signal_noise", -1),
    ("signal_noise", math.nan),
    ("patience", -1),
    ("patience", 2.0),
    ("agent_share", 1.5),
    ("agent_share", -0.01),
    ("disclosure", "sometimes"),
    ("disclosure", "Hidden"),
    ("disclosure", None),
]


@pytest.mark.parametrize(("name", "bad"), BAD_FIELDS, ids=[f"{n}={v!r}" for n, v in BAD_FIELDS])
def test_bad_field_raises_value_error_naming_the_field(name, bad):
    with pytest.raises(ValueError) as err:
        MarketConfig(**{name: bad})
    assert name in str(err.value)


@pytest.mark.parametrize(
    ("name", "good"),
    [
        ("buyers", 1),
        ("products", 1),
        ("inventory", 1),
        ("turns", 1),
        ("patience", 0),
        ("price_range", (0, 1)),
        ("price_range", [2.5, 3.5]),
        ("price_range", (0.0, 1e11)),
        ("value_correlation", 0.0),
        ("value_correlation", 1.0),
        ("quality_spread", 0.0),
        ("wealth_spread", 0.0),
        ("cost_level", 0.0),
        ("cost_level", 0.999),
        ("signal_noise", 0.0),
        ("agent_share", 0.0),
        ("agent_share", 1.0),
        ("disclosure", "hidden"),
        ("disclosure", "mandatory"),
        ("disclosure", "voluntary"),
    ],
)
def test_boundary_values_are_accepted(name, good):
    cfg = MarketConfig(**{name: good})
    stored = getattr(cfg, name)
    if name == "price_range":
        assert stored == (float(good[0]), float(good[1]))
        assert all(isinstance(x, float) for x in stored)
    else:
        assert stored == good


def test_inventory_list_is_stored_as_a_tuple():
    cfg = MarketConfig(products=3, inventory=[1, 2, 3])
    assert cfg.inventory == (1, 2, 3)
    assert isinstance(cfg.inventory, tuple)
    assert cfg.inventory_per_product == (1, 2, 3)


def test_inventory_per_product_from_an_int():
    cfg = MarketConfig(products=3, inventory=5)
    assert cfg.inventory == 5
    assert cfg.inventory_per_product == (5, 5, 5)
    assert MarketConfig(products=1, inventory=2).inventory_per_product == (2,)


def test_price_range_list_is_stored_as_a_float_tuple():
    cfg = MarketConfig(price_range=[10, 30])
    assert cfg.price_range == (10.0, 30.0)
    assert isinstance(cfg.price_range, tuple)
    assert cfg.width == 20.0


@pytest.mark.parametrize(
    ("share", "buyers", "expected"),
    [
        (0.0, 8, 0),
        (1.0, 8, 8),
        (0.5, 3, 2),  # 1.5 rounds half up
        (0.25, 2, 1),  # 0.5 rounds half up
        (0.5, 1, 1),  # 0.5 rounds half up
        (0.5, 5, 3),  # 2.5 rounds half up (not to even)
        (0.5, 4, 2),
        (0.2, 8, 2),  # 1.6
        (0.1, 4, 0),  # 0.4
        (0.75, 10, 8),  # 7.5
    ],
)
def test_num_agents_rounds_half_up(share, buyers, expected):
    cfg = MarketConfig(buyers=buyers, agent_share=share)
    assert cfg.num_agents == expected
    assert 0 <= cfg.num_agents <= buyers


def test_from_dict_rejects_unknown_keys_and_names_them():
    with pytest.raises(ValueError) as err:
        MarketConfig.from_dict({"buyers": 3, "bogus_field": 1})
    assert "bogus_field" in str(err.value)
    with pytest.raises(ValueError) as err:
        MarketConfig.from_dict({"zzz": 1, "aaa": 2})
    assert "zzz" in str(err.value) and "aaa" in str(err.value)


def test_from_dict_rejects_a_non_table():
    with pytest.raises(ValueError):
        MarketConfig.from_dict([("buyers", 3)])


def test_from_dict_validates_values():
    with pytest.raises(ValueError, match="turns"):
        MarketConfig.from_dict({"turns": 0})


def test_from_dict_partial_uses_defaults():
    cfg = MarketConfig.from_dict({"buyers": 3})
    assert cfg == MarketConfig(buyers=3)


@pytest.mark.parametrize(
    "cfg",
    [
        MarketConfig(),
        MarketConfig(products=3, inventory=[1, 2, 3], price_range=(5, 50), patience=2),
        MarketConfig(
            buyers=5,
            agent_share=0.4,
            disclosure="voluntary",
            value_correlation=1.0,
            quality_spread=0.0,
            wealth_spread=0.05,
            cost_level=0.9,
            signal_noise=2.0,
        ),
    ],
)
def test_to_dict_from_dict_round_trip(cfg):
    data = cfg.to_dict()
    assert set(data) == set(CONFIG_FIELDS)
    assert isinstance(data["price_range"], list)
    if isinstance(cfg.inventory, tuple):
        assert isinstance(data["inventory"], list)
    back = MarketConfig.from_dict(data)
    assert back == cfg
    assert hash(back) == hash(cfg)
    assert back.to_dict() == data


def test_configs_are_hashable_and_equal_by_value():
    a = MarketConfig(products=2, inventory=[1, 2], price_range=[0, 10])
    b = MarketConfig(products=2, inventory=(1, 2), price_range=(0.0, 10.0))
    assert a == b and hash(a) == hash(b)
    assert len({a, b, MarketConfig()}) == 2
    assert a != MarketConfig(products=2, inventory=(2, 1), price_range=(0.0, 10.0))


@pytest.mark.parametrize(("name", "value"), [("buyers", 3), ("inventory", 1), ("disclosure", "x")])
def test_configs_are_frozen(name, value):
    cfg = MarketConfig()
    before = getattr(cfg, name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cfg, name, value)
    assert getattr(cfg, name) == before


def test_a_market_file_or_a_specs_config_by_name(tmp_path):
    """``load_market_file`` reads a [market] table, or ``SPEC:NAME`` a spec's
    [configs.NAME] (what ``arena eval/play/check --market`` and the LM evaluation take)."""
    from pathlib import Path

    from arena.config import load_market_file
    from tournaments.spec import load_spec

    spec = Path(__file__).resolve().parents[1] / "tournaments" / "specs" / "default.toml"
    played = dict(load_spec(str(spec)).configs)
    for name in ("retail", "wholesale"):
        assert load_market_file(f"{spec}:{name}") == played[name]
    with pytest.raises(ValueError, match=r"no \[configs.mars\] table; it has retail, wholesale"):
        load_market_file(f"{spec}:mars")
    with pytest.raises(ValueError, match=r"no \[market\] table \(or name a spec's config"):
        load_market_file(str(spec))
    odd = tmp_path / "a:b.toml"  # a file's own name may hold a colon
    odd.write_text("[market]\nbuyers = 3\n")
    assert load_market_file(str(odd)).buyers == 3
    old = tmp_path / "old.toml"  # specs written before [configs] was the tables' name
    old.write_text("[markets.small]\nbuyers = 2\nproducts = 1\n")
    assert load_market_file(f"{old}:small").buyers == 2
    with pytest.raises(ValueError, match="cannot read market file"):
        load_market_file(f"{tmp_path}/none.toml:small")
