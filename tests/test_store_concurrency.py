"""The results store under concurrent use: one writer per run folder, each unit stored
once, and a refused resume that leaves the run folder as it was."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tournaments.cli import main
from tournaments.runner import run_tournament
from tournaments.spec import load_spec
from tournaments.store import DB_NAME, ResultStore, StoreError
from tournaments.worker import MatchWorker, plan_units

ROOT = Path(__file__).resolve().parents[1]

SPEC = """
[tournament]
name = "shared"
seed = 2
markets = 50
sellers = ["posted_price"]
buyers = ["truthful"]
disclosure = ["hidden"]
transcripts = 1
[configs.a]
buyers = 4
products = 2
turns = 6
"""

# A driver that holds its run folder until its stdin closes or it is killed.
HOLD = """
import sys
from tournaments.spec import load_spec
from tournaments.store import ResultStore

store = ResultStore.create_or_resume(sys.argv[2], load_spec(sys.argv[1]), 25)
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def spec_path(tmp_path) -> str:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC)
    return str(path)


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of a folder: its bytes and modification time."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_a_unit_stored_between_the_check_and_the_insert_is_stored_once(tmp_path, spec_path):
    """Two writers of one unit, the second storing it while the first is between
    "stored already?" and its insert: the first stores it, the second skips it."""
    spec = load_spec(spec_path)
    store = ResultStore.create_or_resume(tmp_path / "run", spec, 25)
    result = MatchWorker(spec).play(next(iter(plan_units(spec, 25))))
    go, ready, other = threading.Event(), threading.Event(), []

    def other_writer() -> None:
        conn = sqlite3.connect(store.path, timeout=10.0)
        ready.set()
        go.wait(10.0)
        try:
            other.append(ResultStore(store.path, conn).write(result))
        except sqlite3.Error as err:
            other.append(err)
        finally:
            conn.close()

    thread = threading.Thread(target=other_writer)
    thread.start()
    ready.wait(10.0)
    insert = store.layout.insert

    def insert_after_the_other_writer(*args) -> None:
        go.set()
        thread.join(0.5)  # the other writer's whole write, unless it has to wait
        insert(*args)

    store.layout.insert = insert_after_the_other_writer
    try:
        assert store.write(result) is True
        thread.join(10.0)
        assert other == [False]
        assert store.counts() == (25, 1)
    finally:
        go.set()
        thread.join(10.0)
        store.close()


def test_a_second_run_on_a_folder_a_live_run_holds_is_refused(tmp_path, spec_path, capsys):
    folder = tmp_path / "run"
    spec = load_spec(spec_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, spec_path, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        with pytest.raises(StoreError, match=f"{folder} is in use: another run is writing"):
            ResultStore.create_or_resume(folder, spec, 25)
        # The same through the command line: one error line, nothing played.
        code = main(["tournament", spec_path, "--out", str(folder), "--no-ray", "--quiet"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert err[0].startswith(f"arena: error: {folder} is in use")
        # Readers take no lock.
        reader = ResultStore.open(folder)
        assert reader.counts() == (0, 0)
        reader.close()
    finally:
        holder.kill()
        holder.wait()
    # A killed driver holds nothing: its folder is refused for another spec, untouched...
    logged = {n: (folder / n).read_bytes() for n in (DB_NAME, f"{DB_NAME}-wal")}
    with pytest.raises(StoreError, match="different spec"):
        ResultStore.create_or_resume(folder, load_spec(spec_path, seed=9), 25)
    assert {n: (folder / n).read_bytes() for n in logged} == logged
    # ...and resumed for its own; a store closed hands the folder on at once.
    store = ResultStore.create_or_resume(folder, spec, 25)
    with pytest.raises(StoreError, match="is in use"):
        ResultStore.create_or_resume(folder, spec, 25)
    store.close()
    ResultStore.create_or_resume(folder, spec, 25).close()


@pytest.mark.parametrize(
    ("overrides", "unit_markets", "extend", "message"),
    [
        ({"seed": 9}, 25, False, "different spec"),
        ({"seed": 9}, 25, True, "different spec"),
        ({}, 10, False, "cut into units of 25 markets"),
    ],
)
def test_a_refused_resume_leaves_the_run_folder_as_it_was(
    tmp_path, spec_path, overrides, unit_markets, extend, message
):
    folder = tmp_path / "run"
    run_tournament(load_spec(spec_path), folder, use_ray=False, progress=False, unit_markets=25)
    before = _files(folder)
    assert {DB_NAME, "spec.json"} <= before.keys()
    other = load_spec(spec_path, **overrides)
    with pytest.raises(StoreError, match=message):
        ResultStore.create_or_resume(folder, other, unit_markets, extend=extend)
    assert _files(folder) == before  # no -wal or -shm beside it either
    conn = sqlite3.connect(f"file:{folder / DB_NAME}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    finally:
        conn.close()


# A run killed in the middle of a transaction on its (rollback-journal) database: the
# transaction's pages spill to the file, the journal stays behind, hot.
KILLED_IN_A_TRANSACTION = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE filler (x BLOB)")
for _ in range(200):
    conn.execute("INSERT INTO filler VALUES (randomblob(4000))")
conn.execute("DELETE FROM units")
os._exit(0)
"""


def test_a_run_killed_with_a_hot_journal_resumes_from_its_last_commit(tmp_path, spec_path):
    folder = tmp_path / "run"
    spec = load_spec(spec_path)
    run_tournament(spec, folder, use_ray=False, unit_markets=25, progress=False)
    done = ResultStore.open(folder).counts()
    assert done[1] > 0
    subprocess.run(
        [sys.executable, "-c", KILLED_IN_A_TRANSACTION, str(folder / DB_NAME)], check=True
    )
    journal = folder / f"{DB_NAME}-journal"
    assert journal.exists() and journal.stat().st_size > 0  # hot: the test's premise
    store = ResultStore.create_or_resume(folder, spec, 25)  # not "cannot use" it
    try:
        assert store.counts() == done
        assert not store.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'filler'"
        ).fetchone()
    finally:
        store.close()
