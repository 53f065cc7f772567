"""Tournaments: specs, determinism across schedules, resume after a kill, worker faults."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tournaments.report import report_text, write_report
from tournaments.runner import run_tournament
from tournaments.spec import SpecError, load_spec, spec_from_dict
from tournaments.store import ResultStore, StoreError

SMALL = {
    "tournament": {
        "name": "small",
        "seed": 3,
        "markets": 120,
        "sellers": ["posted_price"],
        "buyers": ["truthful"],
        "disclosure": ["hidden", "mandatory"],
        "transcripts": 2,
    },
    "markets": {"a": {"buyers": 5, "products": 3, "turns": 8}, "b": {"patience": 2}},
}


def small_spec(**tournament):
    data = {**SMALL, "tournament": {**SMALL["tournament"], **tournament}}
    return spec_from_dict(data)


# The small spec with entries that draw keyed noise and keep state within a market (a
# Thompson-sampling seller; noisy humans beside strategic agents): runs that agree on it
# agree on every policy's dice, not only on deterministic play.
NOISY = {
    **SMALL,
    "tournament": {**SMALL["tournament"], "sellers": ["pricing_bandit"], "buyers": ["mix"]},
    "populations": {"mix": "human=noisy_human,agent=strategic"},
    "markets": {name: {**cfg, "agent_share": 0.5} for name, cfg in SMALL["markets"].items()},
}


def noisy_spec(**tournament):
    return spec_from_dict({**NOISY, "tournament": {**NOISY["tournament"], **tournament}})


def records(folder) -> dict:
    store = ResultStore.open(folder)
    try:
        return store.records()
    finally:
        store.close()


def assert_same_records(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if a[k].dtype == object:
            assert a[k].tolist() == b[k].tolist(), k
        else:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def interrupted_run(spec, folder, unit_markets: int, after: int) -> None:
    """A run stopped like Ctrl-C right after its ``after``-th unit was stored."""
    stored = {"n": 0}

    def interrupt(result, ctx):
        stored["n"] += 1
        if stored["n"] == after:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_tournament(
            spec,
            folder,
            use_ray=False,
            progress=False,
            unit_markets=unit_markets,
            on_result=interrupt,
        )


# ---------------------------------------------------------------------- specs
def write(tmp_path, text: str):
    path = tmp_path / "spec.toml"
    path.write_text(textwrap.dedent(text))
    return str(path)


GOOD = """
[tournament]
sellers = ["posted_price"]
buyers = ["truthful"]
disclosure = ["hidden"]
[markets.m]
buyers = 4
"""


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace('"posted_price"', '"nobody"'), "unknown seller entry 'nobody'"),
        # A population is named in [populations] (an unnamed one failed the run later).
        (GOOD.replace('"truthful"', '"truthful:0.5,ghost:0.5"'), "is a population; name it in"),
        (GOOD.replace("buyers = 4", "buyers = 0"), "configs.m: buyers"),
        (GOOD.replace("buyers = 4", "colour = 4"), "unknown market field(s) colour"),
        (GOOD.replace('sellers = ["posted_price"]', "sellers = []"), "tournament.sellers is empty"),
        (GOOD.replace('["truthful"]', '["truthful", "truthful"]'), "names truthful twice"),
        (GOOD.replace('["hidden"]', '["sometimes"]'), "unknown disclosure rule"),
        (GOOD.replace("[tournament]", "[tournament]\nmarkets = 0"), "tournament.markets"),
        (GOOD.replace("[tournament]", "[tournament]\nspeed = 1"), "unknown tournament key"),
        (GOOD.replace("[markets.m]\nbuyers = 4\n", ""), "no [configs.NAME] table"),
        (GOOD + "\n[oops\n", "not valid TOML"),
        (
            GOOD.replace("[tournament]", '[tournament]\ncheckpoints = {a = "b"}'),
            "tournament.checkpoints: a list of checkpoint paths",
        ),
        (
            GOOD + '\n[populations]\nunused = "truthful:0.5,ghost:0.5"\n',
            "unknown buyer entry 'ghost'",
        ),
    ],
)
def test_bad_specs_get_one_clear_error(tmp_path, text, needle):
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, text))
    assert needle in str(err.value)
    assert str(err.value).startswith(str(tmp_path))


def test_missing_spec_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(str(tmp_path / "nope.toml"))


def test_round_robin_and_seeds():
    spec = small_spec()
    matches = spec.matches()
    assert len(matches) == 1 * 1 * 2 * 2
    assert [m.match_id for m in matches] == sorted(m.match_id for m in matches)
    assert {m.market_config.disclosure for m in matches} == {"hidden", "mandatory"}
    # A side's seed depends on its entry and the market config, not on the opponent or the
    # disclosure rule, so paired comparisons share the dice.
    by_rule = {(m.config, m.disclosure): spec.policy_seed(m, "buyer") for m in matches}
    assert by_rule[("a", "hidden")] == by_rule[("a", "mandatory")]
    assert by_rule[("a", "hidden")] != by_rule[("b", "hidden")]
    assert spec.policy_seed(matches[0], "seller") != spec.policy_seed(matches[0], "buyer")
    # Each policy keys its own seed by its name; a disclosure variant shares its base's.
    from agents.registry import get, policy_seed

    assert get("strategic+disclosed").base_name == "strategic"
    assert policy_seed(7, "noisy_human") != policy_seed(7, "pricing_bandit")
    other = small_spec(seed=4)
    assert other.policy_seed(matches[0], "seller") != spec.policy_seed(matches[0], "seller")


# ---------------------------------------------------------------------- runs
def test_results_do_not_depend_on_workers_or_ray(tmp_path, ray_session):
    spec = noisy_spec()
    run_tournament(spec, tmp_path / "local", use_ray=False, progress=False, unit_markets=50)
    run_tournament(spec, tmp_path / "one", workers=1, progress=False, unit_markets=50)
    run_tournament(spec, tmp_path / "two", workers=2, progress=False, unit_markets=50)
    base = records(tmp_path / "local")
    assert len(base["match_id"]) == 4 * 120
    assert_same_records(base, records(tmp_path / "one"))
    assert_same_records(base, records(tmp_path / "two"))
    # Identical report output too (the report holds no timings or dates).
    texts = []
    for name in ("local", "one", "two"):
        store = ResultStore.open(tmp_path / name)
        rec, meta = store.records(), store.meta()
        store.close()
        texts.append((report_text(rec, meta), write_report(tmp_path / name, rec, meta).read_text()))
    assert texts[0] == texts[1] == texts[2]


def test_an_entry_hosted_in_its_own_actor_plays_the_same(tmp_path, ray_session):
    spec = noisy_spec()
    hosted = noisy_spec(hosted=["pricing_bandit", "mix"])
    run_tournament(spec, tmp_path / "inproc", workers=2, progress=False)
    run_tournament(hosted, tmp_path / "actors", workers=2, progress=False)
    assert_same_records(records(tmp_path / "inproc"), records(tmp_path / "actors"))


def test_a_killed_worker_is_replaced_and_results_are_the_same(tmp_path, ray_session):
    spec = noisy_spec()
    run_tournament(spec, tmp_path / "clean", use_ray=False, progress=False, unit_markets=30)
    killed = []

    def kill_one(result, ctx):
        if not killed:
            ray_session.kill(ctx["actors"][0])
            killed.append(True)

    summary = run_tournament(
        spec, tmp_path / "faulty", workers=2, progress=False, unit_markets=30, on_result=kill_one
    )
    assert killed and summary.workers_replaced >= 1
    assert_same_records(records(tmp_path / "clean"), records(tmp_path / "faulty"))


def test_an_interrupted_run_resumes_without_loss_or_duplicates(tmp_path):
    spec = small_spec()
    interrupted_run(spec, tmp_path / "run", unit_markets=40, after=3)
    store = ResultStore.open(tmp_path / "run")
    assert store.counts() == (3 * 40, 3)
    store.close()
    summary = run_tournament(spec, tmp_path / "run", use_ray=False, progress=False, unit_markets=40)
    assert summary.units_run == summary.units_total - 3
    run_tournament(spec, tmp_path / "clean", use_ray=False, progress=False, unit_markets=40)
    assert_same_records(records(tmp_path / "clean"), records(tmp_path / "run"))


def test_a_different_spec_never_touches_stored_results(tmp_path):
    run_tournament(small_spec(), tmp_path / "run", use_ray=False, progress=False)
    before = records(tmp_path / "run")
    with pytest.raises(StoreError, match="different spec .*tournament.seed"):
        run_tournament(small_spec(seed=9), tmp_path / "run", use_ray=False, progress=False)
    assert_same_records(before, records(tmp_path / "run"))


def test_transcripts_and_exports(tmp_path):
    run_tournament(small_spec(), tmp_path / "run", use_ray=False, progress=False)
    store = ResultStore.open(tmp_path / "run")
    keys = store.transcript_keys()
    assert len(keys) == 4 * 2  # two markets per match
    turns = store.transcript(*keys[0])
    assert turns and {"seller_text", "seller_message", "seller_violation"} <= set(turns[0])
    assert turns[0]["seller_text"].startswith("THINK:")
    assert store.export_csv(tmp_path / "out.csv") == 4 * 120
    assert store.export_json(tmp_path / "out.json") == 4 * 120
    header = (tmp_path / "out.csv").read_text().splitlines()[0]
    assert header.startswith("match_id,market,seller,buyer,disclosure,config,profit")
    meta = store.meta()
    assert {"spec", "seed", "versions"} <= set(meta) and "numpy" in meta["versions"]
    store.close()
    assert (tmp_path / "run" / "spec.json").is_file()


KILL_SPEC = """
[tournament]
name = "killme"
seed = 1
markets = 8000
sellers = ["posted_price"]
buyers = ["truthful"]
disclosure = ["hidden", "mandatory"]
transcripts = 0
[markets.a]
buyers = 8
[markets.b]
buyers = 6
"""


def test_killing_the_driver_mid_run_loses_nothing(tmp_path):
    spec_path = write(tmp_path, KILL_SPEC)
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "tournaments.cli",
        "tournament",
        spec_path,
        "--out",
        str(out),
        "--no-ray",
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    db = out / "results.sqlite"
    deadline = time.time() + 60
    units = 0
    while time.time() < deadline and proc.poll() is None:
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=5) as conn:
                    units = conn.execute("SELECT count(*) FROM units").fetchone()[0]
            except sqlite3.OperationalError:
                units = 0
            if units >= 2:
                break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed; make it longer"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = records(out)
    assert 0 < len(partial["match_id"]) < 4 * 8000  # some, not all, units stored
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    final = records(out)
    keys = list(zip(final["match_id"].tolist(), final["market"].tolist(), strict=True))
    assert len(keys) == len(set(keys)) == 4 * 8000
    clean = tmp_path / "clean"
    subprocess.run([*cmd[:6], str(clean), *cmd[7:]], check=True, capture_output=True)
    assert_same_records(records(clean), final)


# Units on both nodes of the cluster, with dice: a trained seller, noisy humans and a
# population of both kinds, two rules (8 units for the 2 workers).
CLUSTER_SPEC = """
[tournament]
markets = 40
sellers = ["greedy_matcher", "rl_seller"]
buyers = ["noisy_human", "mixed"]
disclosure = ["hidden", "mandatory"]
[populations]
mixed = "human=noisy_human,agent=strategic"
[configs.a]
buyers = 4
products = 2
agent_share = 0.5
"""

CLUSTER_SCRIPT = """
import sys
import ray
from ray.cluster_utils import Cluster
from tournaments.report import report_text, write_report
from tournaments.runner import run_tournament
from tournaments.spec import load_spec

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
cluster.add_node(num_cpus=1)
try:
    summary = run_tournament(load_spec(sys.argv[1]), sys.argv[2], workers=2,
                             address=cluster.address, progress=False)
    print("units", summary.units_run)
finally:
    ray.shutdown()
    cluster.shutdown()
"""


@pytest.mark.parametrize("token_file", [False, True])
def test_joins_an_existing_cluster_with_address(tmp_path, token_file):
    """A cluster without tokens is joined as it is, also from a home holding a token file
    (``ray get-auth-token`` writes one): the token used to be sent because the file was
    there, and the cluster then refused the driver's calls (a traceback, no run)."""
    spec_path = write(tmp_path, CLUSTER_SPEC)
    script = tmp_path / "cluster.py"
    script.write_text(CLUSTER_SCRIPT)
    unset = {"RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"}
    env = {k: v for k, v in os.environ.items() if k not in unset}
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    if token_file:
        (home / ".ray" / "auth_token").write_text("0" * 64)
    env["HOME"] = str(home)
    out = subprocess.run(
        [sys.executable, str(script), spec_path, str(tmp_path / "remote")],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "units 8" in out.stdout  # both workers, on both nodes, play
    run_tournament(load_spec(spec_path), tmp_path / "local", use_ray=False, progress=False)
    assert_same_records(records(tmp_path / "local"), records(tmp_path / "remote"))


def test_variants_and_populations_share_dice_so_only_disclosure_differs(tmp_path):
    tournament = {
        **SMALL["tournament"],
        "sellers": ["pricing_bandit", "disclosure_aware"],
        "buyers": ["strategic", "strategic+disclosed", "mixed", "mixed_disclosed"],
        "disclosure": ["hidden", "mandatory", "voluntary"],
    }
    data = {
        "tournament": tournament,
        "populations": {
            "mixed": "human=noisy_human,agent=strategic",
            "mixed_disclosed": "human=noisy_human,agent=strategic+disclosed",
        },
        "markets": {"a": {"buyers": 6, "agent_share": 0.5, "turns": 9}},
    }
    spec = spec_from_dict(data)
    run_tournament(spec, tmp_path / "run", use_ray=False, progress=False)
    rec = records(tmp_path / "run")

    def rows(seller, buyer, rule):
        pick = (rec["seller"] == seller) & (rec["buyer"] == buyer) & (rec["disclosure"] == rule)
        return rec["profit"][pick], rec["buyer_surplus"][pick]

    for seller in spec.sellers:
        for base, variant in (("strategic", "strategic+disclosed"), ("mixed", "mixed_disclosed")):
            # Disclosure choices matter only under the voluntary rule.
            for rule in ("hidden", "mandatory"):
                np.testing.assert_array_equal(rows(seller, base, rule), rows(seller, variant, rule))
            # Under voluntary, the variant that discloses equals mandatory; the base, hidden.
            np.testing.assert_array_equal(
                rows(seller, variant, "voluntary"), rows(seller, variant, "mandatory")
            )
            np.testing.assert_array_equal(
                rows(seller, base, "voluntary"), rows(seller, base, "hidden")
            )
    # And the disclosure-aware seller does react to it.
    assert not np.array_equal(
        rows("disclosure_aware", "mixed", "hidden")[0],
        rows("disclosure_aware", "mixed", "mandatory")[0],
    )


def test_rules_change_nothing_for_human_only_buyers_even_with_stochastic_sellers(tmp_path):
    # Common random numbers across disclosure rules: with no agent to disclose, mandatory and
    # hidden must give identical markets, so a paired effect is exactly zero, not noise.
    spec = small_spec(sellers=["pricing_bandit", "random_target"], buyers=["noisy_human"])
    run_tournament(spec, tmp_path / "run", use_ray=False, progress=False)
    rec = records(tmp_path / "run")
    hidden = rec["disclosure"] == "hidden"
    for name in ("profit", "buyer_surplus", "trades", "turns_used"):
        np.testing.assert_array_equal(rec[name][hidden], rec[name][~hidden], err_msg=name)
    assert np.unique(rec["profit"][hidden]).size > 10  # the markets are not trivial


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"populations": {"truthful": "haggler:1.0"}}, "has the name of a registered entry"),
        ({"tournament": {"markets": "10"}}, "tournament.markets: expected a positive integer"),
        ({"tournament": {"hosted": "posted_price"}}, "tournament.hosted must be a list"),
        ({"tournament": {"transcripts": 1000}}, "at most 100"),
        ({"markets": {"a|b": {}}}, "contain no '|'"),
        ({"markets": {"a": {"disclosure": "mandatory"}}}, "set disclosure rules in tournament"),
        # An inline population in the buyers list failed a run later, as an unknown entry.
        (
            {"tournament": {"buyers": ["truthful:0.5,haggler:0.5"]}},
            "'truthful:0.5,haggler:0.5' is a population; name it in",
        ),
        # A population by kind whose agent member no config lets play played its human
        # member alone, under its own name, without a word.
        (
            {
                "tournament": {"buyers": ["mix"]},
                "populations": {"mix": "human=noisy_human,agent=strategic"},
            },
            "tournament.buyers 'mix' splits buyers by kind, but no market of the spec's configs",
        ),
    ],
)
def test_spec_validation_gaps_are_closed(change, needle):
    data = {
        "tournament": {**SMALL["tournament"], **change.get("tournament", {})},
        "markets": change.get("markets", SMALL["markets"]),
    }
    if "populations" in change:
        data["populations"] = change["populations"]
    with pytest.raises(SpecError, match=needle.replace("|", r"\|").replace("(", r"\(")):
        spec_from_dict(data)


def test_a_population_of_one_entry_plays_that_entry():
    """It named the population itself as the entry to check: "unknown entry 'mix'"."""
    data = {**SMALL, "tournament": {**SMALL["tournament"], "buyers": ["mix"]}}
    spec = spec_from_dict({**data, "populations": {"mix": " strategic+disclosed "}})
    assert spec.buyer_spec("mix").strip() == "strategic+disclosed"
    # Beside a config with agents, a share-0 config is fine (the disclosure study's).
    shares = {"a": {"agent_share": 0.0}, "b": {"agent_share": 0.5}}
    kinds = {"mix": "human=noisy_human,agent=strategic"}
    spec = spec_from_dict({**data, "markets": shares, "populations": kinds})
    assert [name for name, _ in spec.configs] == ["a", "b"]


def test_an_int_and_a_float_config_value_are_one_spec(tmp_path):
    a = {**SMALL, "markets": {"a": {"quality_spread": 0}}}
    b = {**SMALL, "markets": {"a": {"quality_spread": 0.0}}}
    run_tournament(spec_from_dict(a), tmp_path / "run", use_ray=False, progress=False)
    summary = run_tournament(spec_from_dict(b), tmp_path / "run", use_ray=False, progress=False)
    assert summary.units_run == 0


def test_resuming_with_another_unit_size_is_refused(tmp_path):
    spec = small_spec()
    interrupted_run(spec, tmp_path / "run", unit_markets=10, after=2)
    with pytest.raises(StoreError, match="units of 10 markets, not 20"):
        run_tournament(spec, tmp_path / "run", use_ray=False, progress=False, unit_markets=20)
    assert ResultStore.open(tmp_path / "run").counts() == (20, 2)


def test_reading_never_writes_and_foreign_files_are_refused(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    db = folder / "results.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE other (x)")
    before = db.read_bytes()
    with pytest.raises(StoreError, match="not a results database"):
        ResultStore.open(folder)
    assert db.read_bytes() == before
    (folder / "results.sqlite").write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError):
        ResultStore.open(folder)
    with pytest.raises(StoreError, match="cannot use this results database"):
        run_tournament(small_spec(), folder, use_ray=False, progress=False)


def test_more_workers_than_cpus_is_a_clear_error(tmp_path, ray_session):
    from tournaments.runner import TournamentError

    with pytest.raises(TournamentError, match="2 CPUs for 3 workers"):
        run_tournament(small_spec(), tmp_path / "run", workers=3, progress=False)


def test_workers_that_cannot_start_are_one_error_line_and_no_run_folder(tmp_path, ray_session):
    """A worker process that fails before it can play (here its set-up raises; on a
    cluster, say, a node without the project) ends the run with one line saying so, not
    Ray's traceback, and the new run folder is removed again."""
    import functools

    from tournaments.raysession import worker_setup
    from tournaments.runner import TournamentError

    broken = functools.partial(int, "not a number")  # raises ValueError in each worker
    with worker_setup(broken), pytest.raises(TournamentError) as err:
        run_tournament(small_spec(), tmp_path / "run", workers=1, progress=False)
    text = str(err.value)
    assert text.startswith("the workers did not start: ") and "\n" not in text
    assert not (tmp_path / "run").exists()


def test_a_killed_policy_host_is_replaced_and_results_are_the_same(tmp_path, ray_session):
    hosted = noisy_spec(hosted=["pricing_bandit"])
    run_tournament(noisy_spec(), tmp_path / "clean", use_ray=False, progress=False, unit_markets=30)
    killed = []

    def kill_host(result, ctx):
        if not killed:
            ray_session.kill(ctx["hosts"][("seller", "pricing_bandit")])
            killed.append(True)

    summary = run_tournament(
        hosted, tmp_path / "faulty", workers=2, progress=False, unit_markets=30, on_result=kill_host
    )
    assert killed and summary.workers_replaced >= 1
    assert_same_records(records(tmp_path / "clean"), records(tmp_path / "faulty"))


def test_configs_tables_under_either_name_are_one_spec(tmp_path):
    old = {**SMALL}
    new = {k: v for k, v in SMALL.items() if k != "markets"} | {"configs": SMALL["markets"]}
    assert spec_from_dict(old) == spec_from_dict(new)
    assert [name for name, _ in spec_from_dict(new).configs] == ["a", "b"]
    with pytest.raises(SpecError, match="use one name"):
        spec_from_dict({**new, "markets": SMALL["markets"]})


def test_a_folder_stored_before_the_rename_resumes_and_reports(tmp_path):
    spec = small_spec(markets=20, transcripts=0)
    folder = tmp_path / "run"
    run_tournament(spec, folder, use_ray=False, progress=False)
    # Earlier versions stored the config tables as "markets", each with its disclosure field.
    data = spec.to_dict()
    data["markets"] = {name: cfg.to_dict() for name, cfg in spec.configs}
    del data["configs"]
    conn = sqlite3.connect(folder / "results.sqlite")
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'spec'", (json.dumps(data),))
    conn.close()
    summary = run_tournament(spec, folder, use_ray=False, progress=False)
    assert summary.units_run == 0
    store = ResultStore.open(folder)
    try:
        assert store.spec() == spec
        text = report_text(store.records(), store.meta())
        assert "Disclosure effect (mandatory - hidden)" in text
    finally:
        store.close()
