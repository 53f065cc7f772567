"""The league on tiny budgets: a round's files, one growing store, exploitability, resume
after a kill, the same numbers on Ray, learners on a node without the league folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tournaments.league import (
    LeagueError,
    learner_job,
    load_league_config,
    run_league,
    run_learner,
)
from tournaments.store import ResultStore

ROOT = Path(__file__).resolve().parent.parent

SELLER = """
[train]
side = "seller"
name = "tiny_seller"
batch_size = 32
hidden = 16
epochs = 2
minibatches = 2
[[opponents]]
name = "truthful"
[family]
disclosure = ["hidden", "mandatory"]
[markets.small]
buyers = 4
products = 2
turns = 6
agent_share = 0.5
"""

BUYER = """
[train]
side = "buyer"
name = "tiny_buyer"
batch_size = 32
hidden = 16
epochs = 2
minibatches = 2
[[opponents]]
name = "greedy_matcher"
[family]
[markets.small]
buyers = 4
products = 2
turns = 6
"""

LEAGUE = """
[league]
name = "{name}"
seed = 0
rounds = 1
meta_strategy = "nash"
eval_markets = 4
checkpoint_every = 1

[seller]
config = "seller.toml"
pool = ["posted_price", "greedy_matcher"]
iterations = 3
exploit_iterations = 2

[buyer]
config = "buyer.toml"
pool = ["truthful", "strategic", "mixed"]
iterations = 3
exploit_iterations = 2

[tournament]
seed = 1
markets = 40
disclosure = ["hidden"]
reference = "posted_price"

[populations]
mixed = "human=noisy_human,agent=strategic"

[configs.small]
buyers = 4
products = 2
turns = 6
agent_share = 0.5
"""


def _config(folder: Path, name: str, text: str = LEAGUE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "seller.toml").write_text(SELLER)
    (folder / "buyer.toml").write_text(BUYER)
    path = folder / "league.toml"
    path.write_text(text.format(name=name))
    return path


def _rounds(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.glob("round_*/round.json")):
        info = json.loads(path.read_text())
        info.pop("wall_s")
        info.pop("load_average")
        out.append(info)
    return out


@pytest.fixture(scope="module")
def league(tmp_path_factory):
    """A one-round league played in this process (the reference run)."""
    root = tmp_path_factory.mktemp("league")
    cfg = load_league_config(str(_config(root, "lg")))
    run_league(cfg, root / "run", use_ray=False, progress=False, log=None)
    return root


def test_a_round_freezes_snapshots_into_one_store_and_measures_them(league):
    run = league / "run"
    info = json.loads((run / "round_001" / "round.json").read_text())
    assert info["newest_names"] == {"seller": "lg_s1", "buyer": "lg_b1"}
    assert info["sellers"] == ["posted_price", "greedy_matcher", "lg_s1"]
    assert info["buyers"] == ["truthful", "strategic", "mixed", "lg_b1"]
    # Round one's learners trained against the pools weighted by the meta-strategy,
    # computed from round 0's payoff matrix and kept for a resume.
    weights = json.loads((run / "round_001" / "weights.json").read_text())
    assert set(weights["seller"]) == {"truthful", "strategic", "mixed"}
    assert sum(weights["buyer"].values()) == pytest.approx(1.0, abs=1e-5)
    state = json.loads((run / "round_001" / "seller" / "train_state.json").read_text())
    assert state["iteration"] == 3
    assert {o["name"] for o in state["config"]["opponents"]} == {
        "truthful", "strategic", "human=noisy_human,agent=strategic"}  # fmt: skip
    # One store: every snapshot met every member of the other side's pool, once.
    store = ResultStore.open(run)
    try:
        rec = store.records(("profit",))
        spec = store.spec()
    finally:
        store.close()
    pairs = set(zip(rec["seller"].tolist(), rec["buyer"].tolist(), strict=True))
    assert pairs == {(s, b) for s in info["sellers"] for b in info["buyers"]}
    assert rec.rows == len(pairs) * 40
    assert spec.reference == "posted_price" and "lg_s1" in dict(spec.checkpoints)
    ratings = {r["player"]: r for r in info["ratings"]}
    assert ratings["posted_price"]["bt"] == pytest.approx(1000.0)
    assert set(ratings) == set(info["sellers"]) | set(info["buyers"])
    np.testing.assert_allclose(
        [[x for x in row] for row in info["payoff"]["score"]],
        np.loadtxt(run / "round_001" / "payoff.csv", delimiter=",", skiprows=1,
                   usecols=range(1, 5)),
        rtol=1e-5,
    )  # fmt: skip
    for side, other in (("seller", "buyer"), ("buyer", "seller")):
        e = info["exploitability"][side]
        assert e["target"] == info["newest_names"][side]
        assert e["best_member"] in info[other + "s"] and e["markets"] == 40
        assert e["gain"] == pytest.approx(e["response_score"] - e["best_score"])
        assert e["lower"] <= e["gain"] <= e["upper"]
    split = {(s["config"], s["disclosure"]): s for s in info["split"]}
    assert split[("all", "all")]["n"] == 40
    # Round 0 (the initial pools, scripted only here) measures nothing of the learners.
    zero = json.loads((run / "round_000" / "round.json").read_text())
    assert zero["exploitability"] == {} and zero["snapshots"] == {"seller": [], "buyer": []}
    lines = (run / "league.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("round,")
    for name in ("league.md", "league.png", "payoff.png"):
        assert (run / name).stat().st_size > 0


def test_a_killed_league_resumes_to_the_same_numbers_and_grows_by_rounds(league, tmp_path):
    """SIGKILL while round one's best responses are being evaluated (learners trained,
    round robin stored), rerun: nothing is lost or played twice, and the numbers are
    those of the uninterrupted league. Then --rounds 2 adds a round to the finished one."""
    from tournaments.cli import main

    path = _config(tmp_path, "lg")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tournaments.cli", "league", str(path), "--out", str(out),
           "--no-ray", "--quiet"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = out / "round_001" / "exploit_seller" / "eval"
    deadline = time.time() + 240
    while not target.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "round_001" / "round.json").exists()
    assert main(["league", str(path), "--out", str(out), "--no-ray", "--quiet"]) == 0
    assert _rounds(out) == _rounds(league / "run")
    for side in ("seller", "buyer", "exploit_seller", "exploit_buyer"):
        a = (out / "round_001" / side / "model.safetensors").read_bytes()
        assert a == (league / "run" / "round_001" / side / "model.safetensors").read_bytes()
    # A different config is refused; more rounds extend the league.
    other = _config(tmp_path / "other", "lg", LEAGUE.replace("seed = 0", "seed = 5"))
    assert main(["league", str(other), "--out", str(out), "--no-ray", "--quiet"]) == 2
    assert main(["league", str(path), "--out", str(out), "--no-ray", "--quiet",
                 "--rounds", "2"]) == 0  # fmt: skip
    two = json.loads((out / "round_002" / "round.json").read_text())
    assert two["newest_names"] == {"seller": "lg_s2", "buyer": "lg_b2"}
    state = json.loads((out / "round_002" / "buyer" / "train_state.json").read_text())
    assert state["config"]["init"] == str(out / "round_001" / "buyer")


def test_a_league_grows_and_resumes_from_any_working_directory(league, tmp_path, monkeypatch):
    """A round run with a relative folder stores its newest snapshots relative to the
    league, and its learners' starts by the absolute folder: the same league, named from
    another directory, grows by a round (a start spelled from the old directory was no
    checkpoint there) and a finished round is not refused as another config."""
    import shutil

    shutil.copytree(league / "run", tmp_path / "a" / "run")
    path = _config(tmp_path / "a", "lg")
    monkeypatch.chdir(tmp_path / "a")
    assert run_league(
        load_league_config(str(path), rounds=2), "run", use_ray=False, progress=False, log=None
    ).rounds_run == [2]
    two = json.loads((tmp_path / "a" / "run" / "round_002" / "round.json").read_text())
    assert two["newest"] == {"seller": "round_002/seller", "buyer": "round_002/buyer"}
    state = json.loads(
        (tmp_path / "a" / "run" / "round_002" / "seller" / "train_state.json").read_text()
    )
    assert state["config"]["init"] == str(tmp_path / "a" / "run" / "round_001" / "seller")
    monkeypatch.chdir(tmp_path)
    three = run_league(
        load_league_config(str(path), rounds=3), "a/run", use_ray=False, progress=False, log=None
    )
    assert three.rounds_run == [3]
    state = json.loads(
        (tmp_path / "a" / "run" / "round_003" / "buyer" / "train_state.json").read_text()
    )
    assert state["config"]["init"] == str(tmp_path / "a" / "run" / "round_002" / "buyer")


def test_the_league_on_ray_gives_the_same_numbers(league, tmp_path, ray_session):
    cfg = load_league_config(str(_config(tmp_path, "lg")))
    run_league(cfg, tmp_path / "run", workers=2, progress=False, log=None)
    assert _rounds(tmp_path / "run") == _rounds(league / "run")


def test_the_league_command_on_its_own_ray_plays_every_round(league, tmp_path):
    """As a user runs it: a fresh process that starts its own Ray for the whole league (its
    round robins and learners share it), over round transitions, Ray's lines in the log."""
    path = _config(tmp_path, "lg")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    cmd = [sys.executable, "-m", "tournaments.cli", "league", str(path), "--out", str(out),
           "--quiet", "--workers", "2"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _rounds(out) == _rounds(league / "run")
    assert "Started a local Ray instance" not in proc.stdout + proc.stderr
    assert "Started a local Ray instance" in (out / "ray.log").read_text()


def test_a_learner_on_a_node_without_the_league_folder_trains_from_bytes(league, tmp_path):
    """The checkpoints a learner names travel as bytes; where the league folder is not
    visible, it trains in a temporary folder and sends its files back."""
    import dataclasses

    from agents.rl.config import Opponent, load_train_config

    base = load_train_config(str(league / "buyer.toml"))
    snapshot = league / "run" / "round_001" / "seller"
    copy = tmp_path / "snap"
    shutil.copytree(snapshot, copy)
    cfg = dataclasses.replace(
        base, threads=1, iterations=2, eval_every=0, eval_markets=4, checkpoint_every=1,
        opponents=(Opponent(str(copy)), Opponent("greedy_matcher")), source="",
    )  # fmt: skip
    here = run_learner(learner_job(cfg, tmp_path / "here"))
    job = learner_job(cfg, tmp_path / "elsewhere" / "run")
    shutil.rmtree(copy)  # the node sees neither the checkpoint nor the folder
    there = run_learner(job)
    assert here["model.safetensors"] == there["model.safetensors"]
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('meta_strategy = "nash"', 'meta_strategy = "elo"'), "meta_strategy"),
        (("rounds = 1", "rounds = 0"), "league.rounds"),
        (("rounds = 1", "rounds = 1\ncolour = 1"), "unknown [league] key"),
        (('"posted_price", "greedy_matcher"]', '"posted_price", "nobody"]'), "nobody"),
        (('config = "seller.toml"', 'config = "buyer.toml"'), "trains a buyer"),
        (
            ('config = "seller.toml"', 'config = "seller.toml"\ninit = "ck/none"'),
            "not a checkpoint",
        ),
        (("iterations = 3", "iterations = 3\n[seller.train]\nseed = 4"), "the league sets"),
        (('reference = "posted_price"', 'reference = "oracle"'), "reference"),
        (('config = "seller.toml"', "config = 5"), "seller.config: expected a path, got 5"),
        (("iterations = 3", "iterations = 3\n[seller.train]\nfoo = 1"), "[seller.train] key(s) "),
        (("seed = 0", "seed = -1"), "league.seed: expected an integer >= 0, got -1"),
        # Strings where a string is read (an int name crashed the entry-name check).
        (('name = "{name}"', "name = 5"), "league.name: expected a string, got 5"),
        (('name = "{name}"', 'name = ["a"]'), "league.name: expected a string, got ['a']"),
        (("seed = 0", "seed = 0\nprefix = 7"), "league.prefix: expected a string, got 7"),
        # The exponent of prioritized: a string failed a round late, -1 and nan changed
        # the weighting without a word.
        (("seed = 0", 'seed = 0\npower = "x"'), "league.power: expected a finite number >= 0"),
        (("seed = 0", "seed = 0\npower = -1.0"), "league.power: expected a finite number >= 0"),
        (("seed = 0", "seed = 0\npower = nan"), "league.power: expected a finite number >= 0"),
        (("seed = 0", "seed = 0\npower = true"), "league.power: expected a finite number >= 0"),
        (("seed = 0", 'seed = 0\nuniform_mix = "x"'), "league.uniform_mix: expected a number"),
        # Integers stay integers: int() truncated 1.9 threads to one.
        (("seed = 0", "seed = 0\nthreads = 1.9"), "league.threads: expected a positive integer"),
        (("seed = 0", "seed = 0\nthreads = true"), "league.threads: expected a positive integer"),
        (("eval_markets = 4", "eval_markets = 1.5"), "league.eval_markets: expected a positive"),
        (("checkpoint_every = 1", "checkpoint_every = 0.5"), "league.checkpoint_every: expected"),
    ],
)
def test_bad_league_configs_are_one_clear_error(tmp_path, change, words):
    path = _config(tmp_path, "bad", LEAGUE.replace(*change, 1))
    with pytest.raises(LeagueError, match=re.escape(words)) as err:
        load_league_config(str(path))
    assert "\n" not in str(err.value) and str(err.value).startswith(str(path))


def test_a_learner_start_with_other_features_than_its_config_is_one_clear_error(tmp_path):
    """A seller that sees its plan (train.plan_feature) starts learners only where the
    seller config asks for that feature too; found when the league config is read."""
    from agents.rl import checkpoint
    from agents.rl.policies import RLSeller

    checkpoint.save(
        tmp_path / "ck", RLSeller(hidden=16, plan_feature=True, assignment=True), name="planner"
    )
    start = ('config = "seller.toml"', 'config = "seller.toml"\ninit = "./ck"')
    path = _config(tmp_path, "bad", LEAGUE.replace(*start, 1))
    with pytest.raises(LeagueError, match=r"seller\.init: .*train\.plan_feature = false"):
        load_league_config(str(path))
    best_response = ('config = "seller.toml"', 'config = "seller.toml"\nexploit_init = "./ck"')
    path = _config(tmp_path, "bad", LEAGUE.replace(*best_response, 1))
    with pytest.raises(LeagueError, match=r"seller\.exploit_init: .*train\.plan_feature"):
        load_league_config(str(path))
    plan = "exploit_iterations = 2\n[seller.train]\nplan_feature = true\n"
    fixed = LEAGUE.replace(*start, 1).replace("exploit_iterations = 2\n", plan, 1)
    cfg = load_league_config(str(_config(tmp_path, "good", fixed)))
    assert cfg.seller.base.plan_feature and cfg.seller.init == str((tmp_path / "ck").resolve())


def test_league_numbers_at_their_bounds_load(tmp_path):
    """power 0 (prioritized as uniform) and an integer power are numbers; checkpoint_every
    0 is a training config's own "no periodic checkpoint"."""
    text = LEAGUE.replace("seed = 0", "seed = 0\npower = 0\nthreads = 2", 1)
    cfg = load_league_config(str(_config(tmp_path, "ok", text)))
    assert cfg.power == 0 and cfg.seller.base.threads == cfg.buyer.base.threads == 2
    text = LEAGUE.replace("checkpoint_every = 1", "checkpoint_every = 0", 1)
    text = text.replace("seed = 0", "seed = 0\npower = 3", 1)
    cfg = load_league_config(str(_config(tmp_path / "b", "ok", text)))
    assert cfg.power == 3 and cfg.seller.base.checkpoint_every == 0


@pytest.mark.parametrize("flag", ["--out", "--address"])
def test_a_blank_out_or_address_is_refused_not_read_as_the_default(
    tmp_path, capsys, monkeypatch, flag
):
    """--out "" ran the league in runs/NAME and --address "" started a local Ray."""
    from tests.test_hardening import run

    monkeypatch.chdir(tmp_path)  # where a blank --out would put runs/NAME
    path = _config(tmp_path, "lg")
    code, _, err = run(capsys, "league", str(path), flag, "", "--no-ray", "--quiet")
    assert code == 2 and f"argument {flag}: expected a non-empty value" in err
    assert not (tmp_path / "runs").exists()


def test_too_many_workers_are_refused_before_the_league_folder_is_made(
    tmp_path, capsys, monkeypatch
):
    """--workers past the limit, or past this machine's CPUs for the local Ray the league
    would start, used to fail in round 0 after league.json, ray.log and round_000/ were
    written; now nothing is made (as `arena tournament`). Cheap: Ray never starts."""
    import tournaments.runner
    from arena.limits import LimitError
    from tests.test_hardening import run

    def no_ray(*_):
        raise AssertionError("Ray started")

    monkeypatch.setattr(tournaments.runner, "init_ray", no_ray)
    path = _config(tmp_path, "lg")
    out = tmp_path / "run"
    code, _, err = run(capsys, "league", str(path), "--out", str(out), "--no-ray",
                       "--quiet", "--workers", "1000")  # fmt: skip
    assert code == 2 and "--workers: at most 256 workers, got 1,000" in err
    assert not out.exists()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    code, _, err = run(capsys, "league", str(path), "--out", str(out), "--quiet",
                       "--workers", "2")  # fmt: skip
    assert code == 2 and err.startswith("arena: error: --workers 2: this machine has 1 CPU")
    assert not out.exists()
    # The library call too: past the limit, refused before the folder is made.
    cfg = load_league_config(str(path))
    with pytest.raises(LimitError, match="at most 256"):
        run_league(cfg, out, workers=1000, use_ray=False, progress=False, log=None)
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "words"), [(None, "cannot read league config"), ("rounds = = 1", "not valid TOML")]
)
def test_an_unreadable_league_config_names_its_file_once(tmp_path, text, words):
    path = tmp_path / "league.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(LeagueError, match=re.escape(words)) as err:
        load_league_config(str(path))
    assert "\n" not in str(err.value) and str(err.value).count(str(path)) == 1


def test_the_shipped_league_configs_load():
    scripted = load_league_config(str(ROOT / "tournaments" / "leagues" / "league_scripted.toml"))
    assert scripted.seller.init == scripted.buyer.init == ""
    cfg = load_league_config(str(ROOT / "tournaments" / "leagues" / "league.toml"))
    assert cfg.rounds >= 3 and cfg.meta_strategy == "nash"
    assert cfg.seller.init.endswith("rl_seller") and cfg.buyer.init.endswith("rl_buyer")


def test_the_league_learners_train_with_plain_ppo_and_a_warm_start():
    """The leagues read the shipped seller's base config (seller_joint.toml), not the
    shipped seller.toml, whose start and teachers are the shipped stage checkpoints: a
    league's learners start from their own snapshots and learn from their pools alone."""
    cfg = load_league_config(str(ROOT / "tournaments" / "leagues" / "league_scripted.toml"))
    base = cfg.seller.base
    assert base.teachers == () and base.teacher_coef == 0 and base.init == ""
    assert base.imitate == "greedy_matcher" and base.imitation_iterations > 0


def test_a_buyer_pool_population_by_kind_needs_both_kinds_in_the_sellers_markets(tmp_path):
    """The seller learner trains against the buyer pool: a population split by kind on
    markets without agent buyers would be its human member alone, said nowhere."""
    path = _config(tmp_path / "k", "kinds")
    (tmp_path / "k" / "seller.toml").write_text(SELLER.replace("agent_share = 0.5\n", ""))
    with pytest.raises(LeagueError, match=r"buyer.pool 'mixed' splits buyers by kind, but no "
                       r"market the family can draw has an agent buyer"):  # fmt: skip
        load_league_config(str(path))
