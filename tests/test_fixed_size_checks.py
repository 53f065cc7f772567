"""A fixed-size policy (``agents.rl.fixed.FixedSizeSeller``: markets of one number of
buyers and products) meets markets of another size: a tournament spec refuses it when it
is read, naming the entry, its size and the config (not a unit failing three times after
a long run), and ``arena eval`` / ``arena play`` on the default market say how to give it
one of its size (``--market``)."""

from __future__ import annotations

import pytest
import torch

from agents import registry
from agents.base import AGENT
from agents.rl import checkpoint
from agents.rl.fixed import FixedSizeSeller
from agents.rl.policies import RLSeller
from arena.config import MarketConfig
from tournaments.cli import main
from tournaments.spec import SpecError, load_spec

SPEC = """
[tournament]
name = "fixed"
markets = 2
sellers = ["greedy_matcher", "{seller}"]
buyers = ["truthful"]
transcripts = 0
[configs.small]
buyers = 4
products = 2
turns = 6
{more}
"""
BIG = "[configs.big]\nbuyers = 8\nproducts = 4\n"


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    """A checkpoint of a FixedSizeSeller for markets of 4 buyers and 2 products."""
    root = tmp_path_factory.mktemp("fixed")
    torch.manual_seed(0)
    seller = FixedSizeSeller(buyers=4, products=2, hidden=(8,))
    return checkpoint.save(root / "ck", seller, name="fixed_4x2")


def _refused(capsys, *argv: str) -> str:
    """The one error line of an ``arena`` command that must refuse its input."""
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("arena: error: "), err
    return err[0]


def test_a_spec_of_its_size_takes_it(fixed, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(seller=fixed, more=""))
    assert load_spec(str(spec)).sellers == ("greedy_matcher", "fixed_4x2")


def test_a_spec_with_a_config_of_another_size_is_refused_before_the_run(fixed, tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(seller=fixed, more=BIG))
    out = tmp_path / "run"
    line = _refused(capsys, "tournament", str(spec), "--no-ray", "--quiet", "--out", str(out))
    assert line == (
        f"arena: error: {spec}: tournament.sellers: 'fixed_4x2' (checkpoint {fixed}) plays "
        "markets of 4 buyers and 2 products only; configs.big has 8 buyers and 4 products: "
        "give it configs of its size, or leave it out of this spec"
    )
    assert not out.exists()


def test_an_entry_whose_class_is_fixed_size_is_checked_too(tmp_path, monkeypatch):
    """Not only checkpoints: any entry whose factory is a class declaring the markets it
    plays (``market_problem``) is asked with the entry's parameters."""
    entry = registry.Entry(
        "fixed_entry_4x2", "seller", AGENT, FixedSizeSeller,
        {"buyers": 4, "products": 2, "hidden": (8,)},
    )  # fmt: skip
    monkeypatch.setitem(registry._ENTRIES, entry.name, entry)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(seller=entry.name, more=""))
    assert load_spec(str(spec)).sellers[-1] == entry.name
    spec.write_text(SPEC.format(seller=entry.name, more=BIG))
    with pytest.raises(SpecError, match=r"'fixed_entry_4x2' plays markets of 4 buyers and 2 "):
        load_spec(str(spec))


def test_policies_of_any_size_declare_nothing(tmp_path):
    torch.manual_seed(0)
    data = checkpoint.read_checkpoint(
        checkpoint.save(tmp_path / "rl", RLSeller(hidden=8), name="x")
    )
    assert checkpoint.market_problem(data, MarketConfig(buyers=3, products=5)) is None
    params = {"buyers": 4, "products": 2}
    assert FixedSizeSeller.market_problem(params, MarketConfig(buyers=4, products=2)) is None
    assert "4 buyers and 2 products" in FixedSizeSeller.market_problem(params, MarketConfig())


@pytest.mark.parametrize("command", ["eval", "play"])
def test_eval_and_play_on_the_default_market_suggest_one_of_its_size(
    command, fixed, tmp_path, capsys
):
    line = _refused(capsys, command, "--seller", str(fixed), "--buyers", "truthful")
    assert "markets of 4 buyers and 2 products only; this market has 8 buyers and 4" in line
    assert "--market FILE.toml whose [market] table sets buyers = 4 and products = 2" in line
    # What it suggests plays.
    market = tmp_path / "market.toml"
    market.write_text("[market]\nbuyers = 4\nproducts = 2\nturns = 6\n")
    extra = ["--markets", "2"] if command == "eval" else []
    argv = [command, "--seller", str(fixed), "--buyers", "truthful", "--market", str(market)]
    assert main([*argv, *extra]) == 0


def test_a_fresh_fixed_size_seller_is_one_policy_per_seed(tmp_path, capsys):
    """Built without a network, its weights come from its seed alone (they came from
    torch's global generator: two sellers of one seed played differently, and ``arena
    check`` on a market of its size, as the guide says to run it, found it not
    deterministic). Torch's own stream is left as it was."""
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    a, b, c = (FixedSizeSeller(seed=s, buyers=4, products=2) for s in (3, 3, 4))
    assert torch.rand(1) == before
    for x, y in zip(a.net.parameters(), b.net.parameters(), strict=True):
        assert torch.equal(x, y)
    pairs = zip(a.net.parameters(), c.net.parameters(), strict=True)
    assert any(not torch.equal(x, y) for x, y in pairs)
    market = tmp_path / "market.toml"
    market.write_text("[market]\nbuyers = 4\nproducts = 2\ninventory = 1\nturns = 6\n")
    target = "agents.rl.fixed:FixedSizeSeller"
    code = main(["check", target, "--param", "buyers=4", "--param", "products=2",
                 "--market", str(market)])  # fmt: skip
    assert code == 0, capsys.readouterr().out
    assert "conforms" in capsys.readouterr().out
