"""What registration refuses so that an entry of one's own never fails in play: a name
ending in the suffix of an agent buyer's twin, an entry whose twin's name is taken (or a
checkpoint whose variant's is), a parameter without a default that the entry does not
give, a parameter of another type than its default's (a tuple's elements, an integer, a
seed); what the ``+disclosed`` twin passes on from the policy it wraps; and ``arena agents
--json`` on a NumPy parameter."""

from __future__ import annotations

import functools
import json
import sys
import textwrap
from dataclasses import dataclass

import numpy as np
import pytest

from agents import registry
from agents.base import AGENT, HUMAN, BuyerAction, BuyerPolicy
from agents.registry import Entry
from agents.rl import checkpoint
from agents.rl.policies import RLBuyer
from agents.scripted.buyers import StrategicAgent, Truthful
from agents.scripted.sellers import GreedyMatcher, PostedPrice, PricingBandit, RandomTarget
from arena.observation import REJECT
from tests.conftest import isolate_registry
from tests.test_user_agents import refused, run


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    """Entries and modules (all named re_*) registered by a test stay in that test."""
    isolate_registry(monkeypatch)
    yield
    for name in [n for n in sys.modules if n.startswith("re_")]:
        del sys.modules[name]


def refuses(entry: Entry, message: str) -> None:
    """``register`` refuses ``entry`` with a one-line message starting with ``message``
    and leaves the registry as it was."""
    before = dict(registry._ENTRIES)
    with pytest.raises(ValueError) as err:
        registry.register(entry)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)
    assert registry._ENTRIES == before


# ---------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("side", "kind", "factory"),
    [("buyer", AGENT, StrategicAgent), ("buyer", HUMAN, Truthful), ("seller", AGENT, PostedPrice)],
    ids=["agent-buyer", "human-buyer", "seller"],
)
def test_a_name_ending_in_the_twins_suffix_is_refused(side, kind, factory):
    refuses(
        Entry("x+disclosed", side, kind, factory),
        "entry name 'x+disclosed': a name must not end in '+disclosed', which the registry "
        "gives an agent buyer's twin that discloses",
    )


def test_an_entry_named_like_a_twin_neither_replaces_nor_is_replaced(capsys, tmp_path):
    # The reviewer's order: the user's "x+disclosed" first, then "x", whose twin replaced it.
    path = tmp_path / "re_overwrite.py"
    path.write_text(
        textwrap.dedent("""
        from agents.registry import Entry, register
        from agents.scripted.buyers import StrategicAgent
        register(Entry("x+disclosed", "buyer", "agent", StrategicAgent, {"target": 0.9}))
        register(Entry("x", "buyer", "agent", StrategicAgent))
        """)
    )
    err = refused(capsys, "agents", "--agents", path)
    assert "entry name 'x+disclosed': a name must not end in '+disclosed'" in err
    assert "x+disclosed+disclosed" not in registry._ENTRIES


def test_an_agent_buyer_whose_twins_name_is_taken_is_refused():
    # However the twin's name came to be taken (a checkpoint's variants are added as they
    # are), registering the base must not replace it.
    other = Entry("x+disclosed", "buyer", AGENT, StrategicAgent, {"target": 0.9}, "mine")
    registry._ENTRIES[other.name] = other
    refuses(
        Entry("x", "buyer", AGENT, StrategicAgent),
        "entry 'x': its disclosed twin's name 'x+disclosed' is taken by another entry",
    )
    assert registry._ENTRIES["x+disclosed"] is other


def test_a_checkpoint_whose_variant_is_taken_replaces_nothing(tmp_path):
    # One's own stand-in for a learned choice, then a checkpoint of that base name whose
    # network has a disclosure head: its "+learned" variant would have replaced the entry.
    mine = Entry("ckl+learned", "buyer", AGENT, StrategicAgent, {}, "mine")
    registry.register(mine)
    before = dict(registry._ENTRIES)
    checkpoint.save(tmp_path / "ckl", RLBuyer(hidden=8, disclosure_head=True), name="ckl")
    with pytest.raises(ValueError, match="its variant\\(s\\) 'ckl\\+learned' are names another"):
        registry.register_checkpoint(checkpoint.read_checkpoint(tmp_path / "ckl"))
    assert registry._ENTRIES == before


# ---------------------------------------------------------------------- the disclosed twin


@dataclass
class TextBuyer(BuyerPolicy):
    """An agent buyer that reads the dialogue (rejects every offer)."""

    kind = AGENT
    reads_text = True
    batch_invariance = "to rounding"

    def act(self, obs):
        assert obs.dialogue is not None, "no dialogue kept although reads_text"
        n = obs.batch_size
        return BuyerAction(np.full(n, REJECT), np.zeros(n, np.int64), np.zeros(n))


def test_the_disclosed_twin_reads_text_and_states_batch_invariance_as_its_policy():
    registry.register(Entry("re_text", "buyer", AGENT, TextBuyer))
    twin = registry.make("re_text+disclosed", "buyer")
    assert twin.reads_text is True
    assert twin.batch_invariance == "to rounding"
    plain = registry.make("strategic+disclosed", "buyer")
    assert plain.reads_text is False
    assert plain.batch_invariance == "exact"


def test_a_text_reading_twin_plays_with_its_dialogue(capsys):
    registry.register(Entry("re_text", "buyer", AGENT, TextBuyer))
    for name in ("re_text", "re_text+disclosed"):
        code, out, err = run(capsys, "eval", "--buyers", name, "--markets", "2")
        assert code == 0, err
        assert f"vs {name}: 2 markets" in out


# ---------------------------------------------------------------------- parameters


@dataclass
class Req(Truthful):
    level: float


@dataclass
class Loose(Truthful):
    level: float = 0  # an integer default of a parameter annotated float


def _req(level, seed: int = 0) -> Truthful:
    return Req(level=level)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (Entry("x", "seller", AGENT, PricingBandit, {"arms": "19"}),
         "x: parameter arms must be a list of numbers, got '19'"),
        (Entry("x", "seller", AGENT, PricingBandit, {"arms": [[0.9]]}),
         "x: parameter arms must be a list of numbers, got [[0.9]]"),
        (Entry("x", "seller", AGENT, PricingBandit, {"arms": None}),
         "x: parameter arms must be a list of numbers, got None"),
        (Entry("x", "seller", AGENT, PricingBandit, {"arms": [0.9, True]}),
         "x: parameter arms must be a list of numbers, got [0.9, True]"),
        (Entry("x", "seller", AGENT, RandomTarget, {"seed": 1.5}),
         "x: parameter seed must be an integer, got 1.5"),
        (Entry("x", "seller", AGENT, RandomTarget, {"seed": True}),
         "x: parameter seed must be an integer, got True"),
        (Entry("x", "seller", AGENT, RandomTarget, {"seed": -1}),
         "x: parameter seed must be an integer in [0, 2**63), got -1"),
        (Entry("x", "seller", AGENT, RandomTarget, {"seed": 2**63}),
         "x: parameter seed must be an integer in [0, 2**63), got 9223372036854775808"),
        (Entry("x", "seller", AGENT, GreedyMatcher, {"grid": 7.0}),
         "x: parameter grid must be an integer, got 7.0"),
        (Entry("x", "buyer", HUMAN, Req),
         "entry 'x': the factory's parameter(s) level have no default; give a value in the "
         "entry's params"),
        (Entry("x", "buyer", HUMAN, _req),
         "entry 'x': the factory's parameter(s) level have no default"),
    ],
    ids=["tuple-as-string", "nested", "none", "flag-in-list", "fractional-seed", "flag-seed",
         "negative-seed", "huge-seed", "fractional-int", "required-field", "required-arg"],
)  # fmt: skip
def test_register_refuses_a_parameter_that_would_fail_in_play(entry, message):
    refuses(entry, message)


@pytest.mark.parametrize(
    ("name", "side", "kind", "factory", "params"),
    [
        ("re_arms", "seller", AGENT, PricingBandit, {"arms": [1, 0.5]}),
        ("re_arms32", "seller", AGENT, PricingBandit, {"arms": (np.float32(0.5),)}),
        ("re_grid", "seller", AGENT, GreedyMatcher, {"grid": np.int64(7)}),
        ("re_seed", "seller", AGENT, RandomTarget, {"seed": np.int64(5)}),
        ("re_loose", "buyer", HUMAN, Loose, {"level": 0.5}),
        ("re_req", "buyer", HUMAN, Req, {"level": 1.0}),
        ("re_partial", "buyer", HUMAN, functools.partial(Req, level=1.0), {}),
        ("re_fn", "buyer", HUMAN, _req, {"level": 1.0}),
    ],
)
def test_parameters_of_their_defaults_types_register_and_build(name, side, kind, factory, params):
    registry.register(Entry(name, side, kind, factory, params))
    registry.make(name, side)


def test_a_module_registering_a_bad_parameter_is_one_error_line(capsys, tmp_path):
    path = tmp_path / "re_params.py"
    path.write_text(
        "from agents.registry import Entry, register\n"
        "from agents.scripted.sellers import PricingBandit\n"
        "register(Entry('re_bandit', 'seller', 'agent', PricingBandit, {'arms': None}))\n"
    )
    err = refused(capsys, "eval", "--agents", path, "--seller", "re_bandit", "--markets", "2")
    assert "re_bandit: parameter arms must be a list of numbers, got None" in err


# ---------------------------------------------------------------------- arena agents --json


def test_agents_json_writes_numpy_parameters_as_numbers(capsys):
    params = {"grid": np.int64(7), "markup": np.float64(0.2)}
    registry.register(Entry("re_np", "seller", AGENT, GreedyMatcher, params))
    code, out, err = run(capsys, "agents", "--json", "--side", "seller")
    assert code == 0, err
    row = next(r for r in json.loads(out) if r["name"] == "re_np")
    assert row["params"]["grid"] == 7 and row["params"]["markup"] == 0.2
    bandit = next(r for r in json.loads(out) if r["name"] == "pricing_bandit")
    assert bandit["params"]["arms"] == [0.7, 0.8, 0.9, 1.0]


def test_a_seller_that_reads_private_values_registers_only_as_a_reference():
    """It could be registered as a competitor and rated beside sellers that cannot."""
    from agents.scripted.sellers import OracleSeller

    refuses(
        Entry("re_peek", "seller", AGENT, OracleSeller),
        "entry 're_peek': OracleSeller reads private values (sees_private); register it with "
        "reference=True",
    )
    registry.register(Entry("re_peek", "seller", AGENT, OracleSeller, reference=True))
    assert registry.get("re_peek").build(seed=0).sees_private


@pytest.mark.parametrize("spec", ["truthful:0.5,haggler:0.5,", "truthful:0.5,,haggler:0.5", ","])
def test_a_population_with_an_empty_member_is_refused(spec):
    """A trailing comma played the members given; "," read as a population by kind."""
    with pytest.raises(ValueError, match="an empty member between commas"):
        registry.make_buyers(spec)


def test_a_checkpoint_named_by_its_path_and_its_name_is_one_member():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "agents/rl/checkpoints/rl_buyer"
    with pytest.raises(ValueError, match="a member is named twice"):
        registry.make_buyers(f"{path}:0.5,rl_buyer:0.5")
