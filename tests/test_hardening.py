"""The edges a new user hits: bounded input, plain names, one-line errors, read-only folders,
wording, listing and exporting a run. Everything here runs without Ray (the Ray start-up,
joining and leak checks are in test_ray_head.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from arena import limits
from tournaments import raysession
from tournaments.cli import main
from tournaments.cli.common import plural
from tournaments.runner import run_tournament
from tournaments.spec import SpecError, load_spec, spec_from_dict
from tournaments.store import ResultStore
from tournaments.worker import count_units, plan_units

ROOT = Path(__file__).resolve().parents[1]

ONE = """
[tournament]
name = "one"
markets = 1
sellers = ["greedy_matcher"]
buyers = ["haggler"]
disclosure = ["hidden"]
transcripts = 1
[configs.c]
buyers = 4
"""

TINY = """
[tournament]
name = "tiny"
markets = 30
sellers = ["posted_price", "greedy_matcher"]
buyers = ["truthful", "mixed"]
disclosure = ["hidden", "mandatory"]
reference = "posted_price"
transcripts = 2
[populations]
mixed = "human=noisy_human,agent=strategic"
[configs.m]
buyers = 5
agent_share = 0.4
"""


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error_line(err: str) -> str:
    assert err.startswith("arena: error: ") and err.count("\n") == 1, err
    assert "usage:" not in err and "Traceback" not in err
    return err


def spec_file(tmp_path, text: str, name: str = "spec.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---------------------------------------------------------------------- flags
@pytest.mark.parametrize("flag", ["--markets", "--workers"])
def test_zero_and_negative_counts_get_one_message(capsys, tmp_path, flag):
    spec = spec_file(tmp_path, ONE)
    messages = set()
    for value in ("0", "-5", "x"):
        code, _, err = run(capsys, "tournament", spec, flag, value)
        assert code == 2
        one_error_line(err)
        assert f"argument {flag}: expected a positive integer, got '{value}'" in err
        messages.add(err.replace(repr(value), "V"))
    assert len(messages) == 1


def test_parser_errors_are_one_line_naming_the_command(capsys):
    for argv in (["tournament"], ["play", "--nope"], ["show"], ["bogus"]):
        code, _, err = run(capsys, *argv)
        assert code == 2
        one_error_line(err)
    _, _, err = run(capsys, "tournament")
    assert "required: SPEC" in err and "arena tournament --help" in err


def test_flags_and_specs_are_bounded_with_the_limit_in_the_error(capsys, tmp_path, monkeypatch):
    spec = spec_file(tmp_path, ONE)
    code, _, err = run(capsys, "tournament", spec, "--markets", "100000000000")
    assert code == 2 and "at most 1,000,000 markets per match" in one_error_line(err)
    code, _, err = run(capsys, "tournament", spec, "--workers", "100000")
    assert code == 2 and f"at most {limits.MAX_WORKERS} workers" in one_error_line(err)
    code, _, err = run(capsys, "eval", "--markets", "2000000")
    assert code == 2 and "at most 1,000,000 markets" in one_error_line(err)
    # In the spec, with or without Ray: refused at once, before anything is printed or made.
    big = spec_file(tmp_path, ONE.replace("markets = 1\n", "markets = 100000000000\n"))
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    code, out, err = run(capsys, "tournament", big, "--no-ray")
    assert code == 2 and out == "" and time.perf_counter() - t0 < 5
    assert "tournament.markets: at most 1,000,000 markets per match" in one_error_line(err)
    assert not (tmp_path / "runs").exists()
    # Matches x markets: the rows a run stores (7 x 5 x 3 = 105 matches of a million).
    wide = ONE.replace("markets = 1\n", "markets = 1000000\n")
    wide = wide.replace('["hidden"]', '["hidden", "mandatory", "voluntary"]')
    wide = wide.replace('["haggler"]', '["truthful", "threshold", "haggler", "noisy_human", "x"]')
    wide = wide.replace('"x"', '"strategic"').replace('["greedy_matcher"]', str(SELLERS))
    with pytest.raises(SpecError, match="105 matches x 1,000,000 markets = 105,000,000 market"):
        load_spec(spec_file(tmp_path, wide, "wide.toml"))


SELLERS = [
    "posted_price",
    "greedy_matcher",
    "descending_offers",
    "pricing_bandit",
    "disclosure_aware",
    "random_target",
    "oracle",
]


def test_more_workers_than_this_machine_has_cpus_is_refused_for_a_local_ray(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    spec = spec_file(tmp_path, ONE)
    many = str((os.cpu_count() or 1) + 1)
    code, out, err = run(capsys, "tournament", spec, "--workers", many, "--out", "x")
    assert code == 2 and out == "" and f"has {os.cpu_count()} CPUs" in one_error_line(err)
    assert not (tmp_path / "x").exists()


def test_the_memory_of_a_unit_is_checked_and_units_are_sized_to_fit(tmp_path, capsys):
    from arena.config import MarketConfig

    huge = ONE.replace("buyers = 4", "buyers = 10000\nproducts = 1000")
    code, _, err = run(capsys, "tournament", spec_file(tmp_path, huge), "--no-ray")
    one_error_line(err)
    assert code == 2 and "configs.c: one market of 10,000 buyers x 1,000 products" in err
    assert f"over the {limits.UNIT_MEMORY / 1e9:.1f} GB a unit may use" in err
    # A config whose 1,000 markets would not fit gets smaller units, that do.
    size = limits.unit_markets([("c", MarketConfig(buyers=1000, products=100))], 2)
    cfg = MarketConfig(buyers=1000, products=100)
    assert 1 <= size < limits.UNIT_MARKETS
    assert size * limits.market_bytes(cfg) + limits.oracle_bytes(cfg) <= limits.UNIT_MEMORY
    assert limits.unit_markets([("c", MarketConfig())], 2) == limits.UNIT_MARKETS
    # Kept transcripts count too: a million turns each is refused.
    with pytest.raises(limits.LimitError, match="keeping 2 transcripts of up to 1,000,000 turns"):
        limits.unit_markets([("c", MarketConfig(turns=1_000_000))], 2)


def test_memory_does_not_grow_with_markets_per_match(tmp_path):
    spec = load_spec(spec_file(tmp_path, ONE.replace("markets = 1\n", "markets = 1000000\n")))
    units = plan_units(spec, 1)
    assert next(units).start == 0 and count_units(spec, 1) == 1_000_000

    class Stop(Exception):
        pass

    def stop(result, ctx):
        raise Stop

    # Imports and first-use caches before measuring.
    run_tournament(load_spec(spec_file(tmp_path, ONE)), tmp_path / "warm", use_ray=False,
                   progress=False)  # fmt: skip
    # A million one-market units planned: a list of them alone would take well over 100 MB.
    tracemalloc.start()
    try:
        with pytest.raises(Stop):
            run_tournament(
                spec, tmp_path / "run", use_ray=False, progress=False, unit_markets=1,
                on_result=stop,
            )  # fmt: skip
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40e6, f"{peak / 1e6:.0f} MB"


# ---------------------------------------------------------------------- names and paths
@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("../../escape", "it names the run folder"),
        ("a/b", "it names the run folder"),
        (".hidden", "not starting with '.'"),
        ("a b", "only letters, digits"),
        ("", "tournament.name must not be empty"),
    ],
)
def test_a_spec_name_is_a_plain_folder_name(capsys, tmp_path, monkeypatch, name, needle):
    work = tmp_path / "deep" / "er"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    spec = spec_file(tmp_path, ONE.replace('name = "one"', f'name = "{name}"'))
    code, out, err = run(capsys, "tournament", spec, "--no-ray", "--quiet")
    assert code == 2 and out == "" and needle in one_error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "spec.toml"]
    assert list(work.iterdir()) == []


def test_plain_names_are_accepted_and_report_files_stay_in_the_folder(tmp_path):
    spec = load_spec(spec_file(tmp_path, ONE.replace('name = "one"', 'name = "v1.2_b+c-d"')))
    assert spec.name == "v1.2_b+c-d"
    from tournaments.report import write_report

    with pytest.raises(ValueError, match="a file name in the folder"):
        write_report(tmp_path, {}, {}, out_name="../up.md")


# ---------------------------------------------------------------------- files
def test_a_spec_that_is_not_utf8_is_one_line_naming_the_file(capsys, tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(ONE.replace('"one"', '"caf\xe9"').encode("latin-1"))
    code, _, err = run(capsys, "tournament", str(path))
    assert code == 2 and f"{path}: not UTF-8 text (byte 0xe9" in one_error_line(err)
    code, _, err = run(capsys, "play", "--market", str(path))
    assert code == 2 and "not UTF-8" in one_error_line(err)


def test_an_export_into_a_missing_folder_names_the_file(capsys, tmp_path):
    spec = spec_file(tmp_path, ONE)
    run(capsys, "tournament", spec, "--out", str(tmp_path / "run"), "--no-ray", "--quiet")
    target = tmp_path / "nowhere" / "rows.json"
    code, _, err = run(capsys, "export", str(tmp_path / "run"), "--to", str(target))
    assert code == 2 and f"{target}: cannot write it (no such file or directory)" in err
    one_error_line(err)
    code, _, err = run(capsys, "export", str(tmp_path / "run"), "--to", "rows.parquet")
    assert code == 2 and "--to: export to FILE.csv or FILE.json" in one_error_line(err)


def _read_only(folder: Path, argv: list[str]) -> subprocess.CompletedProcess:
    """``arena argv`` in a child that sees ``folder`` read-only: a read-only bind mount in a
    private mount namespace (any user, root included), else the folder's permissions."""
    cmd = [sys.executable, "-m", "tournaments.cli", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode == 0:
        mount = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'
        cmd = [unshare, "-rm", "sh", "-c", mount, "sh", str(folder), *cmd]
    elif os.geteuid() != 0:
        folder.chmod(0o555)
    else:
        pytest.skip("no way to make a read-only folder here")
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    finally:
        folder.chmod(0o755)


def test_read_only_folders(capsys, tmp_path):
    spec = spec_file(tmp_path, TINY)
    run_dir = tmp_path / "run"
    code, _, _ = run(capsys, "tournament", spec, "--out", str(run_dir), "--no-ray", "--quiet")
    assert code == 0
    (run_dir / "report.md").unlink()
    # A report of a read-only run folder prints every table and says what it could not write.
    out = _read_only(run_dir, ["report", str(run_dir), "--quiet"])
    assert out.returncode == 0, out.stderr
    assert "Ratings" in out.stdout and "Disclosure effect" in out.stdout
    assert out.stderr.startswith(f"arena: warning: {run_dir}: could not write report.md")
    assert "read-only file system" in out.stderr or "permission denied" in out.stderr
    assert not (run_dir / "report.md").exists()
    # With --html the warning names the page it did not write either.
    out = _read_only(run_dir, ["report", str(run_dir), "--quiet", "--html"])
    assert out.returncode == 0 and "report.md, its plots and report.html" in out.stderr
    assert not (run_dir / "report.html").exists()
    # Resuming into it, or a new run under it: one line saying the folder is read-only.
    out = _read_only(run_dir, ["tournament", spec, "--out", str(run_dir), "--no-ray"])
    assert out.returncode == 2 and f"{run_dir} is read-only" in one_error_line(out.stderr)
    new = run_dir / "new"
    out = _read_only(run_dir, ["tournament", spec, "--out", str(new), "--no-ray"])
    assert out.returncode == 2, out.stderr
    assert "cannot create the run folder (" in one_error_line(out.stderr)
    assert "[Errno" not in out.stderr and not new.exists()


def test_a_finished_run_folder_is_one_database_file(capsys, tmp_path):
    spec = spec_file(tmp_path, TINY)
    run(capsys, "tournament", spec, "--out", str(tmp_path / "run"), "--no-ray", "--quiet")
    names = {p.name for p in (tmp_path / "run").iterdir()}
    assert "results.sqlite" in names
    assert not {n for n in names if n.endswith(("-wal", "-shm", "-journal"))}, names


# ---------------------------------------------------------------------- wording
def test_plurals():
    assert plural(1, "worker") == "1 worker" and plural(2, "worker") == "2 workers"
    assert plural(1, "market") == "1 market" and plural(1000, "market") == "1,000 markets"
    assert plural(1, "buyer entry", "buyer entries") == "1 buyer entry"
    assert plural(3, "match", "matches") == "3 matches"


def test_run_lines_count_in_words_and_a_complete_run_says_so(capsys, tmp_path):
    spec = spec_file(tmp_path, ONE)
    code, out, err = run(capsys, "tournament", spec, "--out", str(tmp_path / "r"), "--no-ray")
    assert code == 0
    head, played = out.splitlines()[:2]
    assert head.endswith(
        "1 seller x 1 buyer entry x 1 disclosure rule x 1 config = 1 match of 1 market -> "
        f"{tmp_path / 'r'}"
    )
    assert played.startswith("played 1 of 1 unit (1 market) in ") and "Ray" not in out
    assert "Ray" not in err
    code, out, _ = run(capsys, "tournament", spec, "--out", str(tmp_path / "r"), "--no-ray")
    assert code == 0
    assert f"{tmp_path / 'r'} is complete: 1 unit (1 market) stored already" in out
    assert "played" not in out and "markets/s" not in out


def test_quiet_prints_only_the_final_table(capsys, tmp_path):
    spec = spec_file(tmp_path, TINY)
    code, out, err = run(
        capsys, "tournament", spec, "--out", str(tmp_path / "r"), "--no-ray", "--quiet"
    )
    assert code == 0 and err == ""
    assert out.startswith("Ratings\n") and "played" not in out and "report with" not in out


def test_the_report_shows_its_progress(capsys, tmp_path, monkeypatch):
    spec = spec_file(tmp_path, TINY)
    run(capsys, "tournament", spec, "--out", str(tmp_path / "r"), "--no-ray", "--quiet")
    code, out, err = run(capsys, "report", str(tmp_path / "r"))
    assert code == 0 and err == ""  # no progress where stderr is no terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = run(capsys, "report", str(tmp_path / "r"))
    assert code == 0 and "Surplus split" in out
    for step in ("reading 240 market rows", "plot: surplus split", "ratings (Bradley-Terry"):
        assert step in err
    assert f"report {tournament_steps()}/{tournament_steps()}: tables" in err


def tournament_steps() -> int:
    from tournaments.cli.tournament import REPORT_STEPS

    return REPORT_STEPS


def test_a_split_by_kind_on_a_market_without_agents_says_so(capsys, tmp_path):
    for command in ("play", "eval"):
        code, _, err = run(capsys, command, "--buyers", "human=noisy_human,agent=strategic")
        assert code == 2 and "no buyer of this market is an agent" in one_error_line(err)
    market = tmp_path / "all.toml"
    market.write_text("[market]\nbuyers = 4\nagent_share = 1.0\n")
    code, _, err = run(
        capsys, "play", "--buyers", "human=noisy_human,agent=strategic", "--market", str(market)
    )
    assert code == 2 and "every buyer of this market is an agent" in one_error_line(err)
    # A split by share, and a split by kind with both kinds present, play as before.
    code, _, _ = run(capsys, "eval", "--buyers", "noisy_human:0.5,strategic:0.5", "--markets", "5")
    assert code == 0


# ---------------------------------------------------------------------- show, export, help
def test_show_lists_matches_and_a_transcript_ends_with_its_outcome(capsys, tmp_path):
    spec = spec_file(tmp_path, TINY)
    run(capsys, "tournament", spec, "--out", str(tmp_path / "r"), "--no-ray", "--quiet")
    code, out, _ = run(capsys, "show", str(tmp_path / "r"))
    lines = out.splitlines()
    assert code == 0 and len(lines) == 8 + 1
    assert lines[0] == "greedy_matcher|mixed|hidden|m  markets 0, 1"
    assert lines[-1].startswith("8 matches with kept transcripts")
    code, out, _ = run(capsys, "show", str(tmp_path / "r"), "--filter", "posted_price|truthful")
    assert code == 0 and out.count("posted_price|truthful|") == 2 and "1 match" not in out
    code, _, err = run(capsys, "show", str(tmp_path / "r"), "--filter", "nobody")
    assert code == 2 and "no match id contains 'nobody'" in one_error_line(err)
    code, out, _ = run(
        capsys, "show", str(tmp_path / "r"), "--match", "greedy_matcher|mixed|mandatory|m"
    )
    assert code == 0
    tail = out.splitlines()[-3:]
    assert tail[0].startswith("outcome: ") and " trade" in tail[0] and "W*_T" in tail[0]
    assert tail[1].startswith("seller violations: ") and tail[2].startswith("buyer violations: ")


def test_json_export_writes_numbers_as_numbers_and_json_as_json(capsys, tmp_path):
    spec = spec_file(tmp_path, TINY)
    run(capsys, "tournament", spec, "--out", str(tmp_path / "r"), "--no-ray", "--quiet")
    code, out, _ = run(capsys, "export", str(tmp_path / "r"), "--to", str(tmp_path / "a.json"))
    assert code == 0 and out == f"240 market rows written to {tmp_path / 'a.json'}\n"
    data = json.loads((tmp_path / "a.json").read_text())
    meta = data["meta"]
    assert meta["seed"] == 0 and isinstance(meta["seed"], int)
    assert meta["spec"]["tournament"]["name"] == "tiny" and isinstance(meta["versions"], dict)
    assert meta["unit_markets"] == 1000
    row = data["markets"][0]
    for key in ("market", "trades", "turns_used", "seller_violations", "buyer_violations"):
        assert type(row[key]) is int, key
    assert isinstance(row["profit"], float) and len(data["markets"]) == 240
    store = ResultStore.open(tmp_path / "r")
    try:
        assert store.export_csv(tmp_path / "a.csv") == 240
    finally:
        store.close()
    first = (tmp_path / "a.csv").read_text().splitlines()[1].split(",")
    assert first[1] == "0" and "." not in first[-6]  # market, and trades as whole numbers


def test_help_shows_defaults_and_benchmarks_name_themselves(capsys):
    code, out, _ = run(capsys, "tournament", "--help")
    assert code == 0 and "match workers (default: 2)" in out
    assert "(default: 30.0)" in out and "(default: None)" not in out
    code, out, _ = run(capsys, "bench", "engine", "--help")
    assert code == 0 and out.startswith("usage: arena bench engine ")
    assert "(default: 300)" in out


# ---------------------------------------------------------------------- joining (no Ray)
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_where_nothing_listens_fails_in_bounded_time():
    port = _free_port()
    t0 = time.perf_counter()
    with pytest.raises(raysession.RayConnectError, match="nothing is listening there"):
        raysession.probe(f"127.0.0.1:{port}", timeout=2)
    assert time.perf_counter() - t0 < 15


def test_a_failed_connection_leaves_no_run_folder(tmp_path, monkeypatch):
    def refuse(address, workers, timeout):
        raise raysession.RayConnectError("cannot join the Ray cluster at nowhere:1")

    monkeypatch.setattr(raysession, "connect", refuse)
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    spec = spec_from_dict(
        {
            "tournament": {"sellers": ["posted_price"], "buyers": ["truthful"], "markets": 5},
            "configs": {"c": {}},
        }
    )
    folder = tmp_path / "runs" / "new"
    with pytest.raises(raysession.RayConnectError):
        run_tournament(spec, folder, workers=1, address="nowhere:1", progress=False)
    assert not (tmp_path / "runs").exists()

    # A folder with stored results is kept as it is.
    def stop(result, ctx):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_tournament(spec, folder, use_ray=False, progress=False, unit_markets=2, on_result=stop)
    with pytest.raises(raysession.RayConnectError):
        run_tournament(spec, folder, workers=1, address="nowhere:1", progress=False)
    assert ResultStore.open(folder).counts() == (2, 1)


def test_the_token_comes_from_the_environment_or_rays_default_file(tmp_path, monkeypatch):
    for key in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert raysession.token_source() is None
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("abc")
    assert raysession.token_source() == str(tmp_path / ".ray" / "auth_token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "/somewhere/token")
    assert raysession.token_source() == "RAY_AUTH_TOKEN_PATH (/somewhere/token)"
    monkeypatch.setenv("RAY_AUTH_TOKEN", "abc")
    assert raysession.token_source() == "RAY_AUTH_TOKEN"
