"""What registration checks (name, side, kind, the factory's policy, parameters), the
spec's check of which side a listed entry plays, and what a language-model directory
given as a checkpoint says."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import registry
from agents.base import AGENT, HUMAN, BuyerAction, BuyerPolicy
from agents.registry import Entry
from agents.rl import checkpoint
from agents.rl.policies import RLBuyer, RLSeller
from agents.scripted.buyers import StrategicAgent, Truthful
from agents.scripted.sellers import PostedPrice, PricingBandit
from tournaments.cli import main
from tournaments.spec import SpecError, spec_from_dict

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Entries registered by a test stay in that test."""
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    monkeypatch.setattr(registry, "_CHECKPOINTS", dict(registry._CHECKPOINTS))


class PlainLowballer(BuyerPolicy):
    """A buyer class that keeps ``BuyerPolicy``'s kind (human); rejects every offer."""

    def __init__(self, seed: int = 0, bid: float = 0.5) -> None:
        self.seed = seed
        self.bid = bid

    def act(self, obs) -> BuyerAction:
        b = obs.batch_size
        zero = np.zeros(b, np.int64)
        return BuyerAction(decision=zero, product=zero, price=np.zeros(b))


class AgentLowballer(PlainLowballer):
    kind = AGENT


def _truthful_built(seed: int = 0):
    return Truthful()


def _annotated(seed: int = 0) -> PostedPrice:
    return PostedPrice(seed=seed)


# ---------------------------------------------------------------------- kind


@pytest.mark.parametrize(
    ("cls", "kind", "theirs"),
    [(PlainLowballer, AGENT, HUMAN), (AgentLowballer, HUMAN, AGENT)],
    ids=["agent-entry-of-a-human-class", "human-entry-of-an-agent-class"],
)
def test_an_entry_whose_kind_is_not_its_policy_classs_is_refused(cls, kind, theirs):
    with pytest.raises(ValueError) as err:
        registry.register(Entry("lb_entry", "buyer", kind, cls))
    assert str(err.value) == (
        f"entry 'lb_entry' is registered as kind {kind!r}, but its policy {cls.__name__} has "
        f"kind {theirs!r}: set kind = {kind!r} on the class or register the entry as {theirs!r}"
    )
    assert "lb_entry" not in registry._ENTRIES
    assert "lb_entry+disclosed" not in registry._ENTRIES


def test_a_factory_functions_policy_of_another_kind_is_refused_when_built():
    registry.register(Entry("lb_function", "buyer", AGENT, _truthful_built))
    with pytest.raises(ValueError, match="^entry 'lb_function' is registered as kind 'agent', "):
        registry.make("lb_function", "buyer")
    with pytest.raises(ValueError, match="has kind 'human'"):
        registry.make("lb_function+disclosed", "buyer")


def test_an_agent_buyer_entry_plays_as_an_agent_and_has_its_disclosed_twin():
    registry.register(Entry("lb_agent", "buyer", AGENT, AgentLowballer, {"bid": 0.3}))
    shape = (2, 4)
    for name in ("lb_agent", "lb_agent+disclosed"):
        policy = registry.make(name, "buyer")
        assert policy.kinds(np.zeros(shape, bool), np.zeros(2, np.uint64)).all()
    told = registry.make("lb_agent+disclosed", "buyer").disclose(np.ones(shape, bool), None)
    assert told.all()


# ---------------------------------------------------------------------- what register checks


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (Entry("x", "sellr", AGENT, PostedPrice),
         "entry 'x': side must be 'seller' or 'buyer', got 'sellr'"),
        (Entry("x", ["seller"], AGENT, PostedPrice),
         "entry 'x': side must be 'seller' or 'buyer', got ['seller']"),
        (Entry("x", "seller", "robot", PostedPrice),
         "entry 'x': kind must be 'human' or 'agent', got 'robot'"),
        (Entry("x", "buyer", HUMAN, PostedPrice),
         "entry 'x' is a buyer entry, but PostedPrice is a seller policy"),
        (Entry("x", "seller", AGENT, StrategicAgent),
         "entry 'x' is a seller entry, but StrategicAgent is a buyer policy"),
        (Entry("x", "seller", AGENT, dict),
         "entry 'x' is a seller entry, but dict is not a SellerPolicy (agents.base)"),
        (Entry("x", "buyer", HUMAN, functools.partial(PostedPrice, markup=0.2)),
         "entry 'x' is a buyer entry, but PostedPrice is a seller policy"),
        (Entry("x", "buyer", HUMAN, _annotated),
         "entry 'x' is a buyer entry, but PostedPrice is a seller policy"),
        (Entry("x", "seller", AGENT, "PostedPrice"),
         "entry 'x': the factory must be a policy class or a function that builds one, "
         "got 'PostedPrice'"),
        (Entry("bad name", "seller", AGENT, PostedPrice),
         "entry name 'bad name': a name is a non-empty string without blanks or any of "
         "| # / \\ , : = and does not start with '.'"),
        (Entry("a:b", "seller", AGENT, PostedPrice), "entry name 'a:b': "),
        (Entry("", "seller", AGENT, PostedPrice), "entry name '': "),
        (Entry("x", "seller", AGENT, PostedPrice, {"markup": math.nan}),
         "x: parameter markup must be finite, got nan"),
        (Entry("x", "seller", AGENT, PostedPrice, {"markup": np.float32("inf")}),
         "x: parameter markup must be finite, got "),
        (Entry("x", "seller", AGENT, PricingBandit, {"arms": (0.7, math.inf)}),
         "x: parameter arms must be finite, got (0.7, inf)"),
        (Entry("x", "seller", AGENT, PostedPrice, {"markup": "high"}),
         "x: parameter markup must be a number, got 'high'"),
        (Entry("x", "seller", AGENT, PostedPrice, {"markp": 0.5}),
         "x: unknown parameter(s) markp"),
    ],
    ids=["side", "side-unhashable", "kind", "seller-as-buyer", "buyer-as-seller", "no-policy",
         "partial", "annotation", "not-callable", "blank", "colon", "empty", "nan", "inf",
         "nan-in-list", "type", "unknown-param"],
)  # fmt: skip
def test_register_refuses_an_entry_that_cannot_play_in_one_line(entry, message):
    before = dict(registry._ENTRIES)
    with pytest.raises(ValueError) as err:
        registry.register(entry)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)
    assert registry._ENTRIES == before


def test_a_nan_parameter_given_at_build_is_refused_too():
    with pytest.raises(ValueError, match="^posted_price: parameter markup must be finite"):
        registry.make("posted_price", "seller", markup=math.nan)


def test_every_registered_entry_and_the_guides_entry_pass_the_checks():
    for entry in registry.entries():
        registry.check_entry(entry)
    path = ROOT / "examples" / "my_agents.py"
    spec = importlib.util.spec_from_file_location("my_agents_for_checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.register_entries()
    assert registry.get("signal_seller", "seller").kind == AGENT
    registry.register(Entry("lb_ok", "buyer", HUMAN, functools.partial(Truthful)))
    registry.make("lb_ok", "buyer")


# ---------------------------------------------------------------------- specs


def _spec(sellers: list[str], buyers: list[str]) -> dict:
    return {
        "tournament": {"name": "sides", "markets": 5, "sellers": sellers, "buyers": buyers},
        "populations": {"mix": "truthful:0.5,strategic:0.5"},
        "configs": {"small": {"buyers": 4, "products": 2, "turns": 6}},
    }


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("sides")
    torch.manual_seed(0)
    checkpoint.save(root / "ck" / "seller", RLSeller(hidden=16), name="sides_seller")
    checkpoint.save(root / "ck" / "buyer", RLBuyer(hidden=16), name="sides_buyer")
    return root


@pytest.mark.parametrize(
    ("sellers", "buyers", "message"),
    [
        (["ck/buyer"], ["ck/buyer"],
         "tournament.sellers: 'ck/buyer' is a buyer entry ('sides_buyer'), not a seller"),
        (["ck/buyer"], ["truthful"],
         "tournament.sellers: 'ck/buyer' is a buyer entry ('sides_buyer'), not a seller"),
        (["greedy_matcher"], ["ck/seller"],
         "tournament.buyers: 'ck/seller' is a seller entry ('sides_seller'), not a buyer"),
        (["ck/seller"], ["sides_seller"],
         "tournament.buyers: 'sides_seller' is a seller entry, not a buyer"),
        (["truthful"], ["truthful"],
         "tournament.sellers: 'truthful' is a buyer entry, not a seller"),
        (["greedy_matcher"], ["greedy_matcher"],
         "tournament.buyers: 'greedy_matcher' is a seller entry, not a buyer"),
        (["mix"], ["mix"], "tournament.sellers: 'mix' is a buyer population, not a seller"),
        (["nobody"], ["nobody"], "nobody is both a seller and a buyer entry"),
    ],
    ids=["buyer-ck-in-both", "buyer-ck-as-seller", "seller-ck-as-buyer", "seller-ck-by-name",
         "buyer-in-both", "seller-in-both", "population-in-both", "unknown-in-both"],
)  # fmt: skip
def test_a_spec_says_which_side_a_misplaced_entry_plays(checkpoints, sellers, buyers, message):
    with pytest.raises(SpecError) as err:
        spec_from_dict(_spec(sellers, buyers), base=str(checkpoints))
    assert str(err.value) == message


# ---------------------------------------------------------------------- language-model directories

POLICY = {
    "class": "LMSeller",
    "format": "agent-market-arena/lm-policy/1",
    "kind": "agent",
    "name": "my_lm",
    "params": {"analyst": 3, "max_new_tokens": 64, "max_prompt_tokens": 96, "temperature": 0.0},
    "side": "seller",
}


def _lm_dir(path: Path, **change) -> Path:
    """A directory as the language-model trainer writes it: a model's config.json (not a
    checkpoint's) and policy.json."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (path / "policy.json").write_text(json.dumps({**POLICY, **change}))
    return path


def test_a_language_model_directory_says_what_it_is_and_how_to_play_it(tmp_path):
    model = _lm_dir(tmp_path / "lm")
    assert not checkpoint.is_checkpoint(model)
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.read_checkpoint(model)
    assert str(err.value) == (
        f"{model}: a language-model seller (policy.json), not an RL checkpoint; evaluate it "
        f"with `python -m agents.lm.evaluate --model {model}` or register it as an entry "
        "built by agents.lm.policy.from_directory"
    )
    buyer = _lm_dir(tmp_path / "lmb", side="buyer", **{"class": "LMBuyer"})
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.read_checkpoint(buyer)
    assert str(err.value) == (
        f"{buyer}: a language-model buyer (policy.json), not an RL checkpoint; register it "
        "as an entry built by agents.lm.policy.from_directory"
    )


def test_a_language_model_training_run_names_its_trained_model(tmp_path, capsys):
    run = tmp_path / "run"
    _lm_dir(run / "final")
    (run / "train_config.json").write_text("{}")
    code = main(["eval", "--seller", str(run), "--markets", "2"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"arena: error: {run}: a language-model training run, not an RL checkpoint; its "
        f"trained language-model seller is {run / 'final'}: evaluate it with `python -m "
        f"agents.lm.evaluate --model {run / 'final'}` or register it as an entry built by "
        "agents.lm.policy.from_directory\n"
    )


def test_the_marker_file_is_the_language_model_policy_file():
    from agents.lm.policy import POLICY_FILE

    assert checkpoint.LM_POLICY == POLICY_FILE


@pytest.mark.skipif(
    not (registry.SHIPPED_LM / "lm_seller" / "policy.json").is_file(), reason="no lm_seller"
)
def test_a_checkpoint_named_like_the_language_model_entry_is_a_name_clash(tmp_path):
    torch.manual_seed(0)
    checkpoint.save(tmp_path / "ck", RLSeller(hidden=16), name="lm_seller")
    data = checkpoint.read_checkpoint(tmp_path / "ck")
    with pytest.raises(ValueError, match="named 'lm_seller', which another entry already uses"):
        registry.register_checkpoint(data)


def test_a_checkpoint_written_again_in_its_folder_is_read_again(tmp_path):
    """The registry keeps the entries of a checkpoint directory it has read; a new
    training run into the same folder (other weights) must not play the old ones."""
    from safetensors.torch import load_file

    from agents.rl.interpolate import interpolate

    fine = ROOT / "agents/rl/checkpoints/rl_seller"
    start = ROOT / "agents/rl/checkpoints/stages/rl_seller_retail_mixed_pull"
    out = tmp_path / "ckpt"

    def played_weights() -> dict[str, torch.Tensor]:
        return registry.checkpoint_entry(out).build(seed=0).net.state_dict()

    for w, parent in ((0.0, fine), (1.0, start)):
        # Written again in place (interpolate itself refuses a folder that holds files).
        made = interpolate(str(fine), str(start), w, "same_name", str(tmp_path / f"w{w}"))
        out.mkdir(exist_ok=True)
        for f in made.iterdir():
            shutil.copyfile(f, out / f.name)
        want = load_file(str(parent / checkpoint.WEIGHTS))
        got = played_weights()
        assert all(torch.allclose(got[k], want[k]) for k in want), w
    assert registry.checkpoint_entry(out) is registry.checkpoint_entry(out)  # read once
