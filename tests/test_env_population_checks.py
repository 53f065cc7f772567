"""Where a buyer population meets a market config, and where a training config's
``[[opponents]]`` are read: a population split by kind (``human=H,agent=A``) on markets
where one kind never occurs is refused as ``arena play`` refuses it (one check,
``agents.env.check_kinds``), and an opponent that builds no policy is refused when the
file is read, naming the file, the table and the name as written."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

from agents import registry
from agents.env import check_kinds
from agents.gym_env import SELLER_ID, BuyerGymEnv, SellerGymEnv, SellerVectorEnv
from agents.rl.config import load_train_config
from arena.config import MarketConfig
from tests.test_rl import TINY_TOML
from tournaments.cli import main

ROOT = Path(__file__).resolve().parents[1]
BUYER_TOML = ROOT / "agents/rl/configs/buyer.toml"
MIXED = "human=noisy_human,agent=strategic"
NO_AGENTS = (
    "splits buyers by kind, but no buyer of this market is an agent (agent_share = 0 of "
    "8 buyers); set agent_share in the config, or name one entry"
)


def _refused(capsys, *argv: str) -> str:
    """The one error line of an ``arena`` command that must refuse its input."""
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("arena: error: "), err
    return err[0]


# ---------------------------------------------------------------------- environments
def test_make_vec_refuses_a_split_by_kind_on_a_market_without_agents():
    """The walkthrough's call: on the default market (agent_share = 0) the population
    played its human entry alone, as buyers="noisy_human" would."""
    with pytest.raises(ValueError) as err:
        gym.make_vec(SELLER_ID, num_envs=8, buyers=MIXED)
    assert str(err.value) == f"buyers {MIXED!r} {NO_AGENTS}"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda cfg: SellerGymEnv(cfg, MIXED), id="seller"),
        pytest.param(lambda cfg: SellerGymEnv(cfg, ["truthful", MIXED]), id="seller_list"),
        pytest.param(lambda cfg: SellerVectorEnv(4, cfg, MIXED), id="vector"),
        pytest.param(lambda cfg: gym.make(SELLER_ID, config=cfg, buyers=MIXED), id="make"),
    ],
)
def test_every_seller_environment_refuses_a_kind_that_never_occurs(make):
    with pytest.raises(ValueError, match="no buyer of this market is an agent"):
        make(MarketConfig())
    every = MarketConfig(buyers=4, agent_share=1.0)
    with pytest.raises(ValueError, match=r"every buyer of this market is an agent \(agent_sh"):
        make(every)
    make(dataclasses.replace(MarketConfig(), agent_share=0.5))  # both kinds: plays


def test_the_buyer_environment_refuses_other_buyers_split_by_kind_without_agents():
    with pytest.raises(ValueError) as err:
        BuyerGymEnv(MarketConfig(), others=MIXED)
    assert str(err.value) == f"others {MIXED!r} {NO_AGENTS}"
    BuyerGymEnv(MarketConfig(agent_share=0.5), others=MIXED)


def test_a_split_by_share_or_one_entry_is_never_refused():
    for buyers in ("noisy_human:0.5,strategic:0.5", "strategic", "noisy_human"):
        SellerVectorEnv(4, MarketConfig(), buyers)
        SellerVectorEnv(4, MarketConfig(buyers=4, agent_share=1.0), buyers)


def test_the_cli_keeps_its_message(capsys):
    line = _refused(capsys, "play", "--buyers", MIXED)
    assert line == (
        f"arena: error: --buyers {MIXED!r} splits buyers by kind, but no buyer of this "
        "market is an agent (agent_share = 0 of 8 buyers); set agent_share in a --market "
        "FILE.toml, or name one entry"
    )


def test_check_kinds_refuses_a_family_only_if_no_market_it_draws_has_the_kind():
    mixed = registry.make_buyers(MIXED)
    none, some = MarketConfig(agent_share=0.0), MarketConfig(agent_share=0.5)
    check_kinds(mixed, [none, some], "x", "y")  # one end without agents: fine
    with pytest.raises(ValueError, match=r"^x splits .* this market .* 8 buyers\); set agent_sh"):
        check_kinds(mixed, none, "x", "y")  # a fixed market
    with pytest.raises(ValueError, match=r"no market the family can draw has an agent buyer"):
        check_kinds(mixed, [none, dataclasses.replace(none, buyers=3)], "x", "y")
    all_agents = MarketConfig(agent_share=1.0)
    with pytest.raises(ValueError, match=r"every market the family can draw is an agent"):
        check_kinds(mixed, [all_agents, dataclasses.replace(all_agents, buyers=3)], "x", "y")


# ---------------------------------------------------------------------- training configs
def _tiny(tmp_path: Path, family: str = "", tail: str = "", share: str | None = None) -> Path:
    """``tests.test_rl.TINY_TOML`` (whose opponents include the population by kind) with
    its ``[family]`` agent share replaced (None: the base config's, 0) and lines added."""
    text = TINY_TOML.replace("agent_share = [0.0, 1.0]\n", "" if share is None else share + "\n")
    text = text.replace("[family]\n", f"[family]\n{family}\n", 1) + tail
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


def test_a_training_family_over_both_kinds_keeps_a_population_by_kind(tmp_path):
    """agent_share = [0, 1]: one end has no agent, the other no human; batches between
    have both, so the population plays both entries and is not refused."""
    cfg = load_train_config(str(_tiny(tmp_path, share="agent_share = [0.0, 1.0]")))
    assert [o.name for o in cfg.opponents] == ["truthful", MIXED]
    # agent_share up to 0.1 of 4 buyers never rounds to an agent (refused below), but with
    # the buyers jittered up to 4 + 4 a batch can have one: round(0.1 x 8) = 1.
    jitter = "[family.jitter]\nbuyers = [-1, 4]\n"
    load_train_config(str(_tiny(tmp_path, share="agent_share = [0.0, 0.1]", tail=jitter)))


@pytest.mark.parametrize(
    ("share", "says"),
    [
        (None, "no market the family can draw has an agent buyer (agent_share at most 0); "
               "set agent_share in [family] or [markets.NAME], or name one entry"),
        ("agent_share = [0.0, 0.1]", "no market the family can draw has an agent buyer "
                                     "(agent_share at most 0.1)"),
        ("agent_share = [1.0, 1.0]", "every buyer of every market the family can draw is an "
                                     "agent (agent_share at least 1); lower agent_share in"),
    ],
)  # fmt: skip
def test_a_training_family_without_one_kind_refuses_a_population_by_kind(
    share, says, tmp_path, capsys
):
    config = _tiny(tmp_path, share=share)
    out = tmp_path / "out"
    line = _refused(capsys, "train", "seller", "--config", str(config), "--out", str(out))
    assert line.startswith(
        f'arena: error: {config}: [[opponents]] 2 (name = "{MIXED}"): the population splits '
        "buyers by kind, but "
    ), line
    assert says in line, line
    assert not out.exists()


def test_a_copied_config_names_the_opponent_path_as_written_and_resolved(tmp_path, capsys):
    folder = tmp_path / "ux" / "configs"
    folder.mkdir(parents=True)
    config = folder / "buyer.toml"
    shutil.copy(BUYER_TOML, config)
    out = tmp_path / "ux" / "out"
    line = _refused(capsys, "train", "buyer", "--config", str(config), "--out", str(out),
                    "--iterations", "1", "--quiet")  # fmt: skip
    resolved = tmp_path / "ux" / "checkpoints" / "rl_seller"
    assert line == (
        f'arena: error: {config}: [[opponents]] 1 (name = "../checkpoints/rl_seller"): '
        f"{resolved}: no such checkpoint directory"
    )
    assert not out.exists()
    # With the checkpoint beside it, as in the repository, the copy reads.
    shutil.copytree(ROOT / "agents/rl/checkpoints/rl_seller", resolved)
    assert load_train_config(str(config)).opponents[0].name == "../checkpoints/rl_seller"


def test_an_opponent_typo_names_the_file_and_the_table(tmp_path, capsys):
    config = tmp_path / "buyer.toml"
    text = BUYER_TOML.read_text()
    text = text.replace('"../checkpoints/rl_seller"', '"posted_price"')
    config.write_text(text.replace('"greedy_matcher"', '"greedy_macher"'))
    out = tmp_path / "out"
    line = _refused(capsys, "train", "buyer", "--config", str(config), "--out", str(out))
    assert line.startswith(
        f'arena: error: {config}: [[opponents]] 2 (name = "greedy_macher"): unknown seller '
        "entry 'greedy_macher'; known: "
    ), line
    assert not out.exists()
    with pytest.raises(ValueError, match=r'\[\[opponents\]\] 2 \(name = "greedy_macher"\)'):
        load_train_config(str(config))


def test_an_opponent_of_the_wrong_side_is_refused_when_read(tmp_path):
    config = tmp_path / "cfg.toml"
    config.write_text(TINY_TOML.replace('name = "truthful"', 'name = "posted_price"'))
    with pytest.raises(ValueError) as err:
        load_train_config(str(config))
    assert str(err.value).startswith(
        f"{config}: [[opponents]] 1 (name = \"posted_price\"): 'posted_price' is a seller, "
        "not a buyer; buyers: "
    )
