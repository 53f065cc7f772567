"""League configs that cannot run are refused when they are read, each as one line naming
the key (and, on the command line, one ``arena: error:`` line with exit code 2), before
anything is trained: training options the league sets itself, pool entries named as the
league names its own snapshots, values of the wrong type."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agents import registry
from tests.test_hardening import one_error_line, run
from tests.test_league import LEAGUE, ROOT, SELLER, _config
from tournaments.league_config import LeagueError, load_league_config

SIDE_TRAIN = "exploit_iterations = 2\n"
"""The end of the [seller] table in LEAGUE, where a [seller.train] table can follow."""


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Checkpoints the round robin's check registers stay in the test that registers them."""
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    monkeypatch.setattr(registry, "_CHECKPOINTS", dict(registry._CHECKPOINTS))


def seller_train(lines: str) -> str:
    """LEAGUE with a [seller.train] table of ``lines`` (braces kept through ``_config``'s
    ``format``)."""
    lines = lines.replace("{", "{{").replace("}", "}}")
    return LEAGUE.replace(SIDE_TRAIN, f"{SIDE_TRAIN}[seller.train]\n{lines}\n", 1)


def refused(path: Path, words: str) -> str:
    """The LeagueError that reading ``path`` raises: one line, naming the file, with
    ``words``."""
    with pytest.raises(LeagueError) as err:
        load_league_config(str(path))
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: "), text
    assert words in text, text
    return text


def refused_on_the_command_line(capsys, path: Path, words: str) -> None:
    out = path.parent / "run"
    code, _, err = run(capsys, "league", str(path), "--out", str(out), "--no-ray", "--quiet")
    assert code == 2 and words in one_error_line(err), err
    assert not out.exists()  # refused before the league folder is made


# ---------------------------------------------------------------------- [SIDE.train]
@pytest.mark.parametrize(
    "value", ['"small"', "{ small = { buyers = 3 } }", "5"], ids=["text", "table", "number"]
)
def test_a_family_in_side_train_is_refused_and_says_where_it_is_set(tmp_path, capsys, value):
    """``family`` in [seller.train] replaced the training config's ConfigFamily with a
    text or a table, and its memory check ended in an AttributeError traceback."""
    path = _config(tmp_path, "lg", seller_train(f"family = {value}"))
    refused(path, "[seller.train] sets family: the league sets family from [seller] family")
    refused_on_the_command_line(capsys, path, "[seller.train] sets family")


def test_the_side_in_side_train_is_refused(tmp_path):
    """It was read as the training config's own side ("seller.config: ... trains a
    buyer"), which the config file does not say."""
    path = _config(tmp_path, "lg", seller_train('side = "buyer"'))
    refused(path, "[seller.train] sets side: the league sets side from its table, [seller]")


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ("threads = 2", "threads from [league] threads"),
        ("eval_markets = 7", "eval_markets from [league] eval_markets"),
        ("checkpoint_every = 3", "checkpoint_every from [league] checkpoint_every"),
        ("eval_every = 2", "eval_every to 0"),
    ],
)
def test_league_wide_training_options_in_side_train_are_refused(tmp_path, capsys, line, where):
    """They were overwritten by [league]'s values (or its defaults) without a word."""
    key = line.split(" = ")[0]
    path = _config(tmp_path, "lg", seller_train(line))
    refused(path, f"[seller.train] sets {key}: the league sets {where}")
    refused_on_the_command_line(capsys, path, f"[seller.train] sets {key}")


def test_the_league_wide_options_set_in_league_reach_both_sides(tmp_path):
    text = LEAGUE.replace("seed = 0", "seed = 0\nthreads = 2", 1)
    cfg = load_league_config(str(_config(tmp_path, "lg", text)))
    for side in (cfg.seller, cfg.buyer):
        assert (side.base.threads, side.base.eval_markets, side.base.checkpoint_every) == (2, 4, 1)
        assert side.base.eval_every == 0


def test_a_bad_option_in_side_train_names_that_table(tmp_path):
    path = _config(tmp_path, "lg", seller_train('batch_size = "x"'))
    refused(path, "[seller.train]: train.batch_size: expected a positive integer, got 'x'")


# ---------------------------------------------------------------------- snapshot names
def _seller_checkpoint(folder: Path, name: str) -> str:
    from agents.rl import checkpoint
    from agents.rl.policies import RLSeller

    checkpoint.save(folder / "ck", RLSeller(hidden=16), name=name)
    return "./ck"


def pool(text: str, side: str, entry: str) -> str:
    old = {"seller": '"greedy_matcher"]', "buyer": '"mixed"]'}[side]
    return text.replace(old, old[:-1] + f', "{entry}"]', 1)


# The league tests register snapshots named lg_s1, lg_b1, ... in this process: the name
# checks below use a prefix of their own.
OWN = 'seed = 0\nprefix = "cfgchk"'


def test_a_pool_checkpoint_named_as_a_snapshot_is_refused_until_the_prefix_differs(
    tmp_path, capsys
):
    """A checkpoint named like a snapshot (lg_s1 for the prefix lg) in the seller pool
    loaded, then round 1 failed with "tournament.sellers names lg_s1 twice", on every
    rerun. (A prefix of this test's own: the league tests register checkpoints named
    lg_s1 in this process.)"""
    entry = _seller_checkpoint(tmp_path, "cfgchk_s1")
    mine = LEAGUE.replace("seed = 0", OWN, 1)
    path = _config(tmp_path, "lg", pool(mine, "seller", entry))
    ck = str((tmp_path / "ck").resolve())
    text = refused(path, f"seller.pool: {ck!r} (named 'cfgchk_s1') has a name the league gives")
    assert text.endswith("choose another [league] prefix")
    refused_on_the_command_line(capsys, path, "choose another [league] prefix")
    other = pool(LEAGUE.replace("seed = 0", 'seed = 0\nprefix = "gen"', 1), "seller", entry)
    cfg = load_league_config(str(_config(tmp_path, "lg", other)))
    assert cfg.snapshot_prefix == "gen" and len(cfg.seller.pool) == 3


@pytest.mark.parametrize(
    ("name", "learners"),
    [
        ("cfgchk_b1", 1),  # the buyer snapshot of round 1
        ("cfgchk_b12", 1),  # of a round --rounds may add later
        ("cfgchk_xb0", 1),  # the best response against round 0's seller
        ("cfgchk_b2_1", 2),  # the second buyer learner of round 2
    ],
)
def test_a_pool_population_named_as_the_leagues_own_is_refused(tmp_path, name, learners):
    text = LEAGUE.replace("mixed = ", f'{name} = "human=noisy_human,agent=strategic"\nmixed = ')
    text = text.replace("seed = 0", f"{OWN}\nlearners = {learners}", 1)
    path = _config(tmp_path, "lg", pool(text, "buyer", name))
    refused(path, f"buyer.pool: {name!r} has a name the league gives its own snapshots")


@pytest.mark.parametrize(
    "name", ["cfgchk_s0", "cfgchk_s01", "cfgchk_s1_0", "cfgchk_x1", "cfgchks_s1"]
)
def test_names_the_league_never_gives_load(tmp_path, name):
    text = LEAGUE.replace("mixed = ", f'{name} = "human=noisy_human,agent=strategic"\nmixed = ')
    text = text.replace("seed = 0", OWN, 1)
    cfg = load_league_config(str(_config(tmp_path, "lg", pool(text, "buyer", name))))
    assert name in cfg.buyer.pool


# ---------------------------------------------------------------------- types
@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('config = "seller.toml"', 'config = "seller.toml"\ninit = 5'), "seller.init: expected"),
        (('config = "seller.toml"', 'config = "seller.toml"\ninit = 0'), "seller.init: expected"),
        (
            ('config = "seller.toml"', 'config = "seller.toml"\nexploit_init = 5'),
            "seller.exploit_init: expected a checkpoint directory or an RL agent's name, got 5",
        ),
        ((SIDE_TRAIN, SIDE_TRAIN + "family = 5\n"), "seller.family: expected a non-empty list"),
        (
            (SIDE_TRAIN, SIDE_TRAIN + 'family = "small"\n'),
            "seller.family: write a list of base config names, as ['small']",
        ),
        ((SIDE_TRAIN, SIDE_TRAIN + "family = []\n"), "seller.family: expected a non-empty list"),
        (
            (SIDE_TRAIN, SIDE_TRAIN + 'family = ["big"]\n'),
            "seller.family: no base config 'big' in ",
        ),
        (
            ("[league]\n", "[[league]]\n"),
            "league: expected one [league] table, got [[league]], an array of tables",
        ),
        (("[seller]\n", "[[seller]]\n"), "seller: expected one [seller] table, got [[seller]]"),
        (("[tournament]\n", "[[tournament]]\n"), "tournament: expected one [tournament] table"),
        (("[populations]\n", "[[populations]]\n"), "populations: expected one [populations]"),
    ],
)
def test_a_value_of_the_wrong_type_names_its_key(tmp_path, capsys, change, words):
    """These said "argument of type 'int' is not iterable", "'int' object is not
    iterable", "seller.family: no base config ['s']" (a text read letter by letter) and
    "dictionary update sequence element #0 ...", naming no key."""
    old, new = change
    assert old in LEAGUE
    path = _config(tmp_path, "lg", LEAGUE.replace(old, new, 1))
    refused(path, words)
    refused_on_the_command_line(capsys, path, words)


def test_a_league_given_as_a_value_names_its_key(tmp_path):
    text = "league = 5\n" + LEAGUE[LEAGUE.index("[seller]") :]
    refused(_config(tmp_path, "lg", text), "league: expected one [league] table, got 5")


def test_a_family_of_base_config_names_chooses_them(tmp_path):
    text = LEAGUE.replace(SIDE_TRAIN, SIDE_TRAIN + 'family = ["small"]\n', 1)
    cfg = load_league_config(str(_config(tmp_path, "lg", text)))
    assert [n for n, _ in cfg.seller.base.family.configs] == ["small"]


# ---------------------------------------------------------------------- documentation
def test_a_best_response_from_no_checkpoint_keeps_the_warm_start_as_documented(tmp_path):
    """exploit_init "" is fresh weights with the base config's warm start (the league keeps
    ``imitate`` where a start is ""); its docstring said "no warm start"."""
    from tournaments.league import _League

    folder = tmp_path / "lg"
    path = _config(folder, "lg")
    warm = 'hidden = 16\nimitate = "greedy_matcher"\nimitation_iterations = 1\n'
    (folder / "seller.toml").write_text(SELLER.replace("hidden = 16\n", warm, 1))
    cfg = load_league_config(str(path))
    assert cfg.seller.exploit_init == "" and cfg.seller.base.imitate == "greedy_matcher"
    league = _League(cfg, tmp_path / "run", 1, None, False, False, lambda _: None, [])
    (job,) = league._exploit_jobs(0, {"seller": None, "buyer": "truthful"})
    assert (job.cfg.side, job.cfg.init, job.cfg.imitate) == ("seller", "", "greedy_matcher")

    source = (ROOT / "tournaments" / "league_config.py").read_text()
    doc = re.search(r'exploit_init: str = ""\s*"""(.*?)"""', source, re.S).group(1)
    doc = " ".join(doc.split())
    assert "no warm start" not in doc
    assert "fresh weights and the base config's warm start" in doc


def test_learners_and_best_responses_from_a_checkpoint_drop_the_warm_start(tmp_path):
    """The shipped league: its seller config imitates the greedy matcher, while its
    learners and best responses start from the shipped agents. Their training configs
    must drop the warm start whole (the imitation iterations too, which a training config
    without ``imitate`` refuses); they failed before round 0 had played."""
    from tournaments.league import _League

    cfg = load_league_config(str(ROOT / "tournaments" / "leagues" / "league.toml"))
    assert cfg.seller.base.imitate and cfg.seller.base.imitation_iterations
    assert cfg.seller.init and cfg.seller.exploit_init
    league = _League(cfg, tmp_path / "run", 1, None, False, False, print, [])
    jobs = league._exploit_jobs(0, {"seller": "rl_seller", "buyer": "rl_buyer"})
    assert {j.cfg.side for j in jobs} == {"seller", "buyer"}
    for job in jobs:
        assert job.cfg.init and not job.cfg.imitate and job.cfg.imitation_iterations == 0
