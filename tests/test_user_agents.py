"""Entries of one's own from the command line: ``--agents FILE.py`` on ``eval``, ``play``,
``agents`` and ``tournament`` (in this process and on Ray, where every match worker and
policy host registers them before it plays), and ``arena check FILE.py:CLASS`` importing
a file as ``python FILE.py`` would. Each test leaves the registry, ``sys.modules`` and
``sys.path`` as it found them."""

from __future__ import annotations

import csv
import hashlib
import json
import sys
import textwrap
from pathlib import Path

import pytest

from agents import registry
from tests.conftest import isolate_registry
from tournaments import raysession
from tournaments.cli import main, own_agents
from tournaments.remote import PolicyHost
from tournaments.store import ResultStore, stored_agents
from tournaments.worker import MatchWorker

MODULE = '''
"""Entries of one's own: a Thompson-sampling seller (it draws from its seed, so where it
plays would show) and a haggling buyer, under names of their own."""

from agents.registry import Entry, entries, register
from agents.scripted.buyers import Haggler
from agents.scripted.sellers import PricingBandit


def register_entries():
    names = {{e.name for e in entries()}}
    if "{p}_bandit" not in names:
        register(Entry("{p}_bandit", "seller", "agent", PricingBandit, {{}}, "A bandit."))
    if "{p}_haggler" not in names:
        register(Entry("{p}_haggler", "buyer", "human", Haggler, {{}}, "A haggler."))
'''

TOP_LEVEL = """
from agents.registry import Entry, register
from agents.scripted.sellers import PostedPrice

register(Entry("{p}_posted", "seller", "agent", PostedPrice, {{"markup": 0.3}}, "Posted."))
"""

SPEC = """
[tournament]
name = "own"
seed = 3
markets = {markets}
sellers = ["{p}_bandit", "{p}_hosted"]
buyers = ["{p}_haggler", "truthful"]
disclosure = ["hidden"]
hosted = {hosted}
transcripts = 1

[configs.small]
buyers = 4
products = 2
"""

HOSTED_MODULE = """
from agents.registry import Entry, entries, register
from agents.scripted.sellers import PricingBandit


def register_entries():
    if "{p}_hosted" not in {{e.name for e in entries()}}:
        register(Entry("{p}_hosted", "seller", "agent", PricingBandit, {{}}, "Hosted bandit."))
"""


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    """The registry, the test's modules and sys.path as they were before the test."""
    isolate_registry(monkeypatch)
    modules = dict(sys.modules)
    yield
    # The tests' own modules (all named ua_*) only: a library first imported during a test
    # (torch, by training) stays, since importing its extension modules again would crash.
    for name in [n for n in sys.modules if n not in modules and n.startswith("ua_")]:
        del sys.modules[name]
    sys.modules.update(modules)


def as_in_a_new_process(monkeypatch, entries: dict) -> None:
    """Forget what this process registered and loaded since ``entries`` (the registry then),
    as the next command in a new process would start."""
    monkeypatch.setattr(registry, "_ENTRIES", dict(entries))
    monkeypatch.setattr(own_agents, "_LOADED", {})
    for name in [n for n in sys.modules if n.startswith("ua_")]:
        del sys.modules[name]


def run(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv) -> str:
    """The one error line of a refused command."""
    code, _, err = run(capsys, *argv)
    assert code == 2, err
    assert err.startswith("arena: error: ") and err.count("\n") == 1, err
    return err


def write(folder: Path, name: str, text: str, **fmt) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text.format(**fmt)))
    return path


def rows(capsys, folder: Path) -> list[list[str]]:
    """A run's market rows, sorted (an export's order is the store's)."""
    out = folder.parent / f"{folder.name}.csv"
    assert run(capsys, "export", folder, "--to", out)[0] == 0
    with open(out, newline="") as fh:
        return sorted(csv.reader(fh))


# ---------------------------------------------------------------------- eval, play, agents
def test_eval_plays_an_entry_of_ones_own_and_says_where_one_comes_from(capsys, tmp_path):
    mod = write(tmp_path, "ua_eval.py", MODULE, p="ua_eval")
    argv = ["eval", "--seller", "ua_eval_bandit", "--buyers", "ua_eval_haggler",
            "--markets", "30", "--json"]  # fmt: skip
    err = refused(capsys, *argv)
    assert "unknown seller entry 'ua_eval_bandit'" in err
    assert "(an entry of your own? pass --agents FILE.py)" in err
    code, out, err = run(capsys, *argv, "--agents", mod)
    assert code == 0, err
    first = json.loads(out.strip().splitlines()[-1])
    assert (first["seller"], first["buyers"], first["markets"]) == (
        "ua_eval_bandit", "ua_eval_haggler", 30
    )  # fmt: skip
    # Registering twice in one process (the module given twice, or again) is a no-op, and
    # the entry draws the same dice: the same numbers.
    code, out, _ = run(capsys, *argv, "--agents", mod, "--agents", mod)
    assert code == 0 and json.loads(out.strip().splitlines()[-1]) == first


def test_play_and_agents_take_entries_registered_at_a_modules_top_level(capsys, tmp_path):
    mod = write(tmp_path, "ua_top.py", TOP_LEVEL, p="ua_top")
    code, out, err = run(capsys, "play", "--agents", mod, "--seller", "ua_top_posted")
    assert code == 0, err
    assert "seller ua_top_posted vs buyers truthful" in out
    code, out, _ = run(capsys, "agents", "--agents", mod, "--side", "seller", "--json")
    assert code == 0
    (row,) = [r for r in json.loads(out) if r["name"] == "ua_top_posted"]
    assert row["params"] == {"markup": 0.3} and row["description"] == "Posted."


def test_a_dotted_module_name_is_imported_from_the_current_folder(capsys, tmp_path, monkeypatch):
    write(tmp_path, "ua_dotted.py", MODULE, p="ua_dotted")
    monkeypatch.chdir(tmp_path)
    sys.path[:] = [p for p in sys.path if p not in ("", str(tmp_path))]
    code, out, err = run(
        capsys, "eval", "--agents", "ua_dotted", "--seller", "ua_dotted_bandit", "--markets", "5"
    )
    assert code == 0, err
    assert out.startswith("ua_dotted_bandit vs truthful: 5 markets")


def test_a_module_imported_by_another_is_given_its_own_entries(capsys, tmp_path):
    write(tmp_path, "ua_inner.py", TOP_LEVEL, p="ua_inner")
    outer = write(tmp_path, "ua_outer.py", "import ua_inner  # noqa: F401\n" + MODULE, p="ua_o")
    loaded = own_agents.load_all([str(outer), str(tmp_path / "ua_inner.py")])
    # ua_inner's entry is registered while ua_outer imports it: ua_outer's, as a worker
    # loading ua_outer registers it too; ua_inner, given next, adds nothing and is no error.
    assert [m.entries for m in loaded] == [
        ("ua_inner_posted", "ua_o_bandit", "ua_o_haggler"),
        (),
    ]
    assert "json: registers no entry" in refused(capsys, "agents", "--agents", "json")


# ---------------------------------------------------------------------- tournaments
def test_a_spec_names_the_entries_and_a_resumed_run_needs_them_again(capsys, tmp_path, monkeypatch):
    start = dict(registry._ENTRIES)
    mod = write(tmp_path, "ua_spec.py", MODULE, p="ua_spec")
    hosted = write(tmp_path, "ua_spec_hosted.py", HOSTED_MODULE, p="ua_spec")
    spec = write(tmp_path, "own.toml", SPEC, p="ua_spec", markets=8, hosted="[]")
    out = tmp_path / "run"
    argv = ["tournament", spec, "--out", out, "--no-ray", "--quiet"]
    err = refused(capsys, *argv)
    assert "own.toml: unknown seller entry 'ua_spec_bandit'" in err
    assert "(an entry of your own? pass --agents FILE.py)" in err
    code, text, err = run(capsys, *argv, "--agents", mod, "--agents", hosted)
    assert code == 0, err
    assert "ua_spec_bandit" in text and "ua_spec_haggler" in text
    assert len(rows(capsys, out)) == 1 + 2 * 2 * 8
    # The same command again, without --agents: the entries are unknown, and it says why.
    as_in_a_new_process(monkeypatch, start)
    err = refused(capsys, *argv)
    assert "unknown seller entry 'ua_spec_bandit'" in err and "pass --agents FILE.py" in err
    code, text, _ = run(capsys, "tournament", spec, "--out", out, "--no-ray",
                        "--agents", mod, "--agents", hosted)  # fmt: skip
    assert code == 0 and "is complete" in text


def with_agents(spec: Path, *targets: str) -> Path:
    """``spec`` with ``agents = [targets]`` in its [tournament] table, beside it."""
    text = spec.read_text().replace("[tournament]\n", f"[tournament]\nagents = {list(targets)!r}\n")
    out = spec.with_name(f"{spec.stem}_agents.toml")
    out.write_text(text.replace("'", '"'))
    return out


def test_a_spec_that_names_its_modules_runs_on_ray_and_resumes_without_the_flag(
    capsys, tmp_path, monkeypatch, ray_session
):
    start = dict(registry._ENTRIES)
    mod = write(tmp_path, "ua_self.py", MODULE, p="ua_self")
    hosted = write(tmp_path, "ua_self_hosted.py", HOSTED_MODULE, p="ua_self")
    plain = write(tmp_path, "own.toml", SPEC, p="ua_self", markets=6, hosted='["ua_self_hosted"]')
    spec = with_agents(plain, "ua_self.py", "ua_self_hosted.py")  # relative to the spec
    flagged, named = tmp_path / "flagged", tmp_path / "named"
    code, _, err = run(capsys, "tournament", plain, "--out", flagged, "--workers", "1", "--quiet",
                       "--agents", mod, "--agents", hosted)  # fmt: skip
    assert code == 0, err
    # A new process, the spec alone, from another folder: the modules load from the
    # spec's folder, here and in the Ray workers (one match worker, one policy host).
    as_in_a_new_process(monkeypatch, start)
    monkeypatch.chdir(tmp_path.parent)
    code, _, err = run(capsys, "tournament", spec, "--out", named, "--workers", "1", "--quiet")
    assert code == 0, err
    assert rows(capsys, named) == rows(capsys, flagged)
    # The folder records which code the entries were, and the report lists it.
    for folder in (flagged, named):
        stored = ResultStore.open(folder)
        try:
            recorded = stored_agents(stored.meta())
        finally:
            stored.close()
        assert recorded == [
            {"module": str(f), "entries": [f"ua_self_{e}" for e in es],
             "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
            for f, es in ((mod, ["bandit", "haggler"]), (hosted, ["hosted"]))
        ]  # fmt: skip
    _, text, _ = run(capsys, "report", named)
    assert "entries of ua_self.py" in text and "ua_self_bandit, ua_self_haggler" in text
    # Resumed by the spec alone, in a new process: complete; the spec with the key and the
    # one without are one spec, and a module given both ways is loaded and recorded once.
    as_in_a_new_process(monkeypatch, start)
    code, text, err = run(capsys, "tournament", spec, "--out", flagged, "--no-ray", "--agents", mod)
    assert code == 0 and "is complete" in text, err
    stored = ResultStore.open(flagged)
    try:
        assert [r["module"] for r in stored_agents(stored.meta())] == [str(mod), str(hosted)]
    finally:
        stored.close()


def test_a_run_is_not_finished_with_changed_code_for_its_entries(capsys, tmp_path, monkeypatch):
    """Markets stored by one version of an entry and the rest played by another would be
    one set of results from two policies: a resumed run refuses other code for an entry
    (the module's file changed, or another file registers the entry now)."""
    from tournaments.runner import run_tournament
    from tournaments.spec import load_spec

    start = dict(registry._ENTRIES)
    mod = write(tmp_path, "ua_chg.py", MODULE, p="ua_chg")
    write(tmp_path, "ua_chg_hosted.py", HOSTED_MODULE, p="ua_chg")
    plain = write(tmp_path, "own.toml", SPEC, p="ua_chg", markets=8, hosted="[]")
    spec = with_agents(plain, "ua_chg.py", "ua_chg_hosted.py")

    def stopped_run(out: Path) -> None:
        """The run of ``spec`` into ``out``, stopped after its first unit (as a kill would)."""
        loaded = own_agents.load_all(
            [str(tmp_path / "ua_chg.py"), str(tmp_path / "ua_chg_hosted.py")]
        )

        def stop(*_):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_tournament(
                load_spec(str(spec)), out, use_ray=False, progress=False, unit_markets=4,
                on_result=stop, agents=[m.record() for m in loaded],
            )  # fmt: skip

    out = tmp_path / "run"
    stopped_run(out)
    first = hashlib.sha256(mod.read_bytes()).hexdigest()
    argv = ["tournament", spec, "--out", out, "--no-ray", "--quiet"]
    # The module's file changed: refused, and nothing stored is touched.
    as_in_a_new_process(monkeypatch, start)
    mod.write_text(mod.read_text().replace('"A bandit."', '"A bandit, changed."'))
    err = refused(capsys, *argv)
    assert (
        f"{out} was played with ua_chg_bandit, ua_chg_haggler ({mod}, sha256 {first[:12]})" in err
    )
    assert "the file has changed since" in err and "another --out" in err
    # Restored, the run finishes; a complete run then keeps the record of its code.
    as_in_a_new_process(monkeypatch, start)
    mod.write_text(mod.read_text().replace('"A bandit, changed."', '"A bandit."'))
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    as_in_a_new_process(monkeypatch, start)
    mod.write_text(mod.read_text().replace('"A bandit."', '"A bandit, changed."'))
    code, text, err = run(capsys, *argv[:-1])
    assert code == 0 and "is complete" in text, err
    stored = ResultStore.open(out)
    try:
        assert stored_agents(stored.meta())[0]["sha256"] == first
    finally:
        stored.close()
    # Another file registering the same entries, on another stopped run: refused too.
    as_in_a_new_process(monkeypatch, start)
    mod.write_text(mod.read_text().replace('"A bandit, changed."', '"A bandit."'))
    stopped_run(tmp_path / "run2")
    as_in_a_new_process(monkeypatch, start)
    other = write(tmp_path, "ua_chg_other.py", MODULE, p="ua_chg")
    err = refused(capsys, "tournament", plain, "--out", tmp_path / "run2", "--no-ray",
                  "--agents", other, "--agents", tmp_path / "ua_chg_hosted.py")  # fmt: skip
    assert f"and {other} registers ua_chg_bandit, ua_chg_haggler now" in err


@pytest.mark.parametrize(
    ("agents", "needle"),
    [
        ('"ua_x.py"', "tournament.agents must be a list of Python files"),
        ("[3]", "tournament.agents must be a list of Python files"),
        ('[""]', "tournament.agents must be a list of Python files"),
        ('["ua_missing.py"]', "tournament.agents: {tmp}/ua_missing.py: no such file"),
        ('["ua_empty.py"]', "tournament.agents: {tmp}/ua_empty.py: registers no entry"),
        ('["ua_missing_pkg.mod"]', "tournament.agents: cannot import 'ua_missing_pkg.mod'"),
    ],
)
def test_a_spec_whose_modules_cannot_be_loaded_is_one_error_line(capsys, tmp_path, agents, needle):
    write(tmp_path, "ua_empty.py", "X = 1\n")
    text = SPEC.format(p="ua_bad", markets=4, hosted="[]")
    spec = tmp_path / "bad.toml"
    spec.write_text(text.replace("[tournament]\n", f"[tournament]\nagents = {agents}\n"))
    err = refused(capsys, "tournament", spec, "--out", tmp_path / "run", "--no-ray")
    assert err.startswith(f"arena: error: {spec}: "), err
    assert needle.format(tmp=tmp_path) in err, err
    assert not (tmp_path / "run").exists()


def test_ray_workers_and_policy_hosts_register_the_entries_and_play_as_here(
    capsys, tmp_path, ray_session
):
    mod = write(tmp_path, "ua_ray.py", MODULE, p="ua_ray")
    hosted = write(tmp_path, "ua_ray_hosted.py", HOSTED_MODULE, p="ua_ray")
    spec = write(tmp_path, "own.toml", SPEC, p="ua_ray", markets=6, hosted="[]")
    on_ray = write(tmp_path, "ray.toml", SPEC, p="ua_ray", markets=6, hosted='["ua_ray_hosted"]')
    agents = ["--agents", mod, "--agents", hosted]
    here, there = tmp_path / "here", tmp_path / "ray"
    code, _, err = run(capsys, "tournament", spec, "--out", here, "--no-ray", "--quiet", *agents)
    assert code == 0, err
    # On Ray (the fixture's, already running in this process): one match worker, and
    # ua_ray_hosted in its own policy host; both register the entries first.
    code, _, err = run(capsys, "tournament", on_ray, "--out", there, "--workers", "1", "--quiet",
                       *agents)  # fmt: skip
    assert code == 0, err
    assert rows(capsys, there) == rows(capsys, here)
    assert len(rows(capsys, here)) == 1 + 2 * 2 * 6


def test_a_module_a_ray_worker_cannot_import_is_one_error_line(capsys, tmp_path, ray_session):
    mod = write(
        tmp_path,
        "ua_worker_fails.py",
        """
        import sys

        if "default_worker" in " ".join(sys.argv):  # a Ray worker's process only
            import ua_not_installed_on_the_nodes  # noqa: F401
        {body}
        """,
        body=textwrap.indent(MODULE.format(p="ua_wf"), " " * 8).strip(),
    )
    spec = write(tmp_path, "own.toml", SPEC, p="ua_wf", markets=2, hosted="[]")
    spec.write_text(spec.read_text().replace(', "ua_wf_hosted"', ""))
    out = tmp_path / "run"
    err = refused(capsys, "tournament", spec, "--out", out, "--workers", "1", "--quiet",
                  "--agents", mod)  # fmt: skip
    assert f"--agents {mod} on a Ray worker: " in err
    assert "No module named 'ua_not_installed_on_the_nodes'" in err
    assert not out.exists()  # nothing stored: the new folder is gone again


def test_a_joined_cluster_gets_the_module_files(tmp_path, monkeypatch):
    import ray

    mod = write(tmp_path, "ua_join.py", MODULE, p="ua_join")
    loaded = own_agents.load_agents(str(mod))
    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    monkeypatch.setattr(raysession, "probe", lambda address, timeout: None)
    monkeypatch.setattr(raysession, "_use_token", lambda: None)
    with own_agents.ship([loaded]):
        raysession.connect("127.0.0.1:6379", 1)
    raysession.connect("127.0.0.1:6379", 1)
    assert calls[0]["runtime_env"] == {"py_modules": [str(mod.resolve())]}
    assert calls[1]["runtime_env"] is None  # outside: what it always was


def test_a_worker_without_the_file_imports_the_shipped_copy(tmp_path):
    shipped = tmp_path / "unpacked"
    shipped.mkdir()
    write(shipped, "ua_copy.py", MODULE, p="ua_copy")
    gone = str(tmp_path / "driver" / "ua_copy.py")  # the driver's path, absent on this node
    copy = own_agents.AgentsModule(gone, "ua_copy", str(shipped), gone, ("ua_copy_bandit",))
    own_agents.register_in_worker((copy,))
    assert registry.get("ua_copy_bandit", "seller").factory.__name__ == "PricingBandit"
    other = own_agents.AgentsModule(gone, "ua_copy", str(shipped), gone, ("ua_copy_missing",))
    own_agents._REGISTERED_HERE.clear()
    with pytest.raises(RuntimeError, match="on a Ray worker registered no ua_copy_missing"):
        own_agents.register_in_worker((other,))


def test_without_agents_a_run_builds_its_actors_from_the_plain_classes(tmp_path):
    mod = write(tmp_path, "ua_plain.py", MODULE, p="ua_plain")
    assert raysession.actor_class(MatchWorker) is MatchWorker
    assert raysession.actor_class(PolicyHost) is PolicyHost
    with own_agents.ship([own_agents.load_agents(str(mod))]):
        wrapped = raysession.actor_class(MatchWorker)
        assert wrapped is not MatchWorker and issubclass(wrapped, MatchWorker)
    with own_agents.ship(()):
        assert raysession.actor_class(MatchWorker) is MatchWorker
    assert raysession.actor_class(MatchWorker) is MatchWorker


# ---------------------------------------------------------------------- bad modules
@pytest.mark.parametrize(
    "name, text, needle",
    [
        ("ua_raises.py", "raise RuntimeError('boom')\n", "importing it raised RuntimeError: boom"),
        ("ua_nothing.py", "X = 1\n", "ua_nothing.py: registers no entry; call"),
        (
            "ua_hook_raises.py",
            "def register_entries():\n    raise ValueError('no')\n",
            "register_entries() raised ValueError: no",
        ),
        (
            "ua_script.py",
            "import sys\nsys.exit(3)\n",
            "importing it raised SystemExit(3): does it run a script when imported?",
        ),
        ("ua-dash.py", "X = 1\n", "'ua-dash' is no module name"),
        (
            "ua_taken.py",
            "from agents.registry import Entry, register\n"
            "from agents.scripted.sellers import PostedPrice\n"
            "register(Entry('posted_price', 'seller', 'agent', PostedPrice))\n",
            "importing it raised ValueError: entry 'posted_price' is registered twice",
        ),
    ],
)
def test_a_module_that_cannot_give_entries_is_one_error_line(capsys, tmp_path, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    assert needle in refused(capsys, "eval", "--agents", path, "--markets", "2")


def test_a_missing_file_or_module_is_one_error_line(capsys, tmp_path):
    missing = tmp_path / "ua_missing.py"
    assert f"{missing}: no such file" in refused(capsys, "eval", "--agents", missing)
    spec = write(tmp_path, "own.toml", SPEC, p="ua_missing", markets=4, hosted="[]")
    err = refused(capsys, "tournament", spec, "--agents", "ua_no_such_module")
    assert "cannot import 'ua_no_such_module'" in err


@pytest.mark.parametrize("name", ["agents.py", "arena.py", "numpy.py"])
def test_a_file_named_like_a_module_here_is_refused(capsys, tmp_path, name):
    path = tmp_path / name
    path.write_text(MODULE.format(p="ua_shadow"))
    stem = name.removesuffix(".py")
    before = sys.modules[stem]
    for argv in (["check", f"{path}:PricingBandit"], ["eval", "--agents", path]):
        err = refused(capsys, *argv)
        assert f"its module name {stem!r} is the name of another module here" in err
        assert f"rename the file, e.g. to my_{stem}.py" in err
        assert sys.modules[stem] is before


# ---------------------------------------------------------------------- arena check
def test_check_imports_a_module_beside_the_file(capsys, tmp_path):
    (tmp_path / "ua_helper.py").write_text("MARKUP = 0.4\n")
    path = tmp_path / "ua_checked.py"
    path.write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass

            from agents.scripted.sellers import PostedPrice
            from ua_helper import MARKUP


            @dataclass
            class Mine(PostedPrice):
                markup: float = MARKUP
            """
        )
    )
    code, out, err = run(capsys, "check", f"{path}:Mine", "--markets", "4")
    assert code == 0, err
    assert "Mine (seller) conforms on 3 configs" in out
    assert str(tmp_path) not in sys.path  # only while it imported


# ---------------------------------------------------------------------- train
BUYER_CONFIG = """
[train]
side = "buyer"
name = "ua_train_buyer"
iterations = 2
batch_size = 32
hidden = 16
epochs = 1
minibatches = 2
eval_markets = 4
[[opponents]]
name = "ua_train_bandit"
[family]
[markets.small]
buyers = 4
products = 2
turns = 6
"""


def test_train_takes_opponents_of_ones_own(capsys, tmp_path):
    mod = write(tmp_path, "ua_train.py", MODULE, p="ua_train")
    config = tmp_path / "buyer.toml"
    config.write_text(BUYER_CONFIG)
    out = tmp_path / "run"
    err = refused(capsys, "train", "buyer", "--config", config, "--out", out, "--quiet")
    assert '[[opponents]] 1 (name = "ua_train_bandit"): unknown seller entry' in err
    assert not out.exists()
    code, printed, err = run(
        capsys, "train", "buyer", "--config", config, "--out", out, "--quiet", "--agents", mod
    )
    assert code == 0, err
    assert "checkpoint:" in printed and (out / "model.safetensors").is_file()
    with open(out / "curve.csv", newline="") as fh:
        evals = [k for k in next(csv.DictReader(fh)) if "ua_train_bandit" in k]
    assert evals  # the learning curve evaluates against the entry of one's own


# ---------------------------------------------------------------------- league
def test_a_league_takes_pools_of_ones_own_on_ray(capsys, tmp_path, ray_session):
    """The pools name entries of one's own: the round robin's match workers and the
    learners (Ray tasks, one per learner) register them before they play or train."""
    from tests.test_league import LEAGUE, _config

    mod = write(tmp_path, "ua_lg.py", MODULE, p="ua_lg")
    text = LEAGUE.replace('"posted_price", "greedy_matcher"]', '"posted_price", "ua_lg_bandit"]')
    text = text.replace('"truthful", "strategic", "mixed"]', '"truthful", "ua_lg_haggler"]')
    cfg = _config(tmp_path / "cfg", "ua_lg", text)
    out = tmp_path / "league"
    err = refused(capsys, "league", cfg, "--out", out, "--quiet")
    assert "ua_lg_bandit" in err and "pass --agents FILE.py" in err
    assert not out.exists()
    code, _, err = run(capsys, "league", cfg, "--out", out, "--quiet", "--agents", mod)
    assert code == 0, err
    stored = ResultStore.open(out)
    try:
        players = {m.seller for m in stored.spec().matches()} | {
            m.buyer for m in stored.spec().matches()
        }
        recorded = [r["module"] for r in stored_agents(stored.meta())]
    finally:
        stored.close()
    assert {"ua_lg_bandit", "ua_lg_haggler"} <= players
    assert recorded == [str(mod.resolve())]
    # Growing it by a round with the module's file changed is refused before a learner
    # trains: its stored matches were played by the code before.
    mod.write_text(mod.read_text().replace('"A bandit."', '"A bandit, changed."'))
    err = refused(capsys, "league", cfg, "--out", out, "--quiet", "--rounds", "2", "--agents", mod)
    assert "the file has changed since" in err
    assert not (out / "round_002").exists()
    # A league's [tournament] table does not load modules: the command line does.
    bad = _config(
        tmp_path / "bad",
        "ua_lg",
        text.replace("[tournament]\n", '[tournament]\nagents = ["ua_lg.py"]\n'),
    )
    err = refused(capsys, "league", bad, "--out", tmp_path / "bad_run", "--agents", mod)
    assert "tournament.agents: a league loads entries of one's own from the command line" in err


# ---------------------------------------------------------------------- errors in one's code
RAISING = """
from agents.registry import Entry, register
from agents.scripted.sellers import PostedPrice


class Boom(PostedPrice):
    def act(self, obs):
        return 1 / 0


register(Entry("{p}_boom", "seller", "agent", Boom, {{}}, "Raises."))
"""


def one_seller_spec(folder: Path, name: str, seller: str, module: str) -> Path:
    """A spec of one seller of one's own (from ``module``) against truthful buyers, one
    match of 4 markets."""
    return write(folder, f"{name}.toml", """
        [tournament]
        name = "{spec}"
        markets = 4
        sellers = ["{seller}"]
        buyers = ["truthful"]
        agents = ["{module}"]
        [configs.a]
        buyers = 3
        products = 2
    """, spec=name, seller=seller, module=module)  # fmt: skip


def test_an_error_in_ones_own_policy_is_one_line_with_its_place(capsys, tmp_path, ray_session):
    """Every command that plays the entry, here and on a Ray worker, says what was raised
    and where in the module (file, line, function), as `arena check` does."""
    mod = write(tmp_path, "ua_boom.py", RAISING, p="ua_boom")
    where = f"ZeroDivisionError: division by zero (at {mod}:8, in act)"
    flags = ["--agents", mod, "--seller", "ua_boom_boom", "--buyers", "truthful"]
    assert refused(capsys, "eval", *flags, "--markets", "4") == f"arena: error: {where}\n"
    assert refused(capsys, "play", *flags) == f"arena: error: {where}\n"
    spec = one_seller_spec(tmp_path, "boom", "ua_boom_boom", "ua_boom.py")
    unit = "unit ua_boom_boom|truthful|hidden|a markets 0-3 failed"
    err = refused(capsys, "tournament", spec, "--out", tmp_path / "here", "--no-ray")
    assert err == f"arena: error: {unit}: {where}\n"
    err = refused(capsys, "tournament", spec, "--out", tmp_path / "ray", "--workers", "1")
    assert err == f"arena: error: {unit} 3 times; last: {where}\n"


FLAKY = """
from pathlib import Path

from agents.registry import Entry, register
from agents.scripted.sellers import PostedPrice

MARK = Path({mark!r})


class Flaky(PostedPrice):
    def act(self, obs):
        if not MARK.exists():  # the first call anywhere raises, every later one plays
            MARK.write_text("raised once")
            raise RuntimeError("flaky")
        return super().act(obs)


register(Entry("ua_flaky_seller", "seller", "agent", Flaky, {{}}, "Raises once."))
"""


def test_a_unit_played_again_after_an_error_is_reported(capsys, tmp_path, ray_session):
    """On Ray a unit whose policy raised is played again (a worker may have died under
    it); a policy that raises only sometimes is not deterministic, so the run says how
    many units it played again rather than ending as if nothing happened."""
    mod = write(tmp_path, "ua_flaky.py", FLAKY, mark=str(tmp_path / "mark"))
    spec = one_seller_spec(tmp_path, "flaky", "ua_flaky_seller", "ua_flaky.py")
    code, out, err = run(capsys, "tournament", spec, "--out", tmp_path / "run", "--workers", "1")
    assert code == 0, err
    assert "played 1 of 1 unit " in out and "; 1 unit played again after an error" in out
    assert mod.exists()
