"""A corrupt results store: every reader and a resume give one clear line ("RUN/results.sqlite:
corrupt results store (...)", exit code 2), never a traceback, and a refused command leaves
every stored row (the database's very bytes) as it was. One small run is played once; each
test corrupts copies of it."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tests.test_tournament import assert_same_records
from tournaments.cli import main
from tournaments.cli.common import print_transcript
from tournaments.compare import CompareError, check_shared_markets
from tournaments.store import ResultStore, StoreError
from tournaments.types import STORED_METRICS

SPEC = """
[tournament]
name = "corrupt"
markets = 12
sellers = ["posted_price", "greedy_matcher"]
buyers = ["truthful"]
disclosure = ["hidden", "mandatory"]
reference = "posted_price"
transcripts = 1
[configs.m]
buyers = 4
products = 2
turns = 6
"""

MATCH = "greedy_matcher|truthful|mandatory|m"
"""The match the tests corrupt (match number 1: matches are numbered in match-id order)."""
NUMBER = 1


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A complete run of SPEC (``spec.toml`` beside it, for resumes)."""
    root = tmp_path_factory.mktemp("corrupt")
    (root / "spec.toml").write_text(SPEC)
    run = root / "run"
    assert main(["tournament", str(root / "spec.toml"), "--out", str(run), "--no-ray",
                 "--quiet"]) == 0  # fmt: skip
    conn = sqlite3.connect(run / "results.sqlite")
    try:
        number = conn.execute("SELECT match FROM matches WHERE match_id = ?", (MATCH,)).fetchone()
    finally:
        conn.close()
    assert number == (NUMBER,)
    return run


def corrupted(base: Path, tmp_path: Path, *sql: str, params: tuple = ()) -> Path:
    """A copy of the base run with ``sql`` applied to its database."""
    run = tmp_path / "bad"
    shutil.copytree(base, run)
    with sqlite3.connect(run / "results.sqlite") as conn:
        for statement in sql:
            conn.execute(statement, params if "?" in statement else ())
    conn.close()
    return run


def command(name: str, run: Path, tmp_path: Path, base: Path) -> list[str]:
    return {
        "report": ["report", str(run), "--quiet"],
        "html": ["report", str(run), "--quiet", "--html"],
        "compare": ["compare", str(base), str(run)],
        "export": ["export", str(run), "--to", str(tmp_path / "rows.csv")],
        "export-json": ["export", str(run), "--to", str(tmp_path / "rows.json")],
        "transcripts": ["export", str(run), "--transcripts", str(tmp_path / "t.jsonl")],
        "show": ["show", str(run), "--match", MATCH],
        "resume": ["tournament", str(base.parent / "spec.toml"), "--out", str(run), "--no-ray",
                   "--quiet"],
    }[name]  # fmt: skip


def state(run: Path) -> tuple[bytes, list[str]]:
    """What a refused command must leave as it was: the database's bytes and the folder's
    files."""
    return (run / "results.sqlite").read_bytes(), sorted(p.name for p in run.iterdir())


def refused(capsys, base: Path, run: Path, tmp_path: Path, names: list[str], *words: str):
    """Every command of ``names`` on ``run`` is one line naming the corrupt store and
    ``words``, exit code 2, with the run folder and its rows left as they were."""
    before = state(run)
    for name in names:
        code = main(command(name, run, tmp_path, base))
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert err.startswith("arena: error: ") and err.count("\n") == 1, (name, err)
        assert "Traceback" not in err
        assert f"{run / 'results.sqlite'}: corrupt results store (" in err, (name, err)
        for w in words:
            assert w in err, (name, err)
        assert state(run) == before, name
    assert not (tmp_path / "rows.csv").exists() and not (tmp_path / "rows.json").exists()


# ---------------------------------------------------------------------- unit rows
_ROWS = f"UPDATE unit_rows SET {{}} WHERE match = {NUMBER}"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (_ROWS.format("match = 99"), "unit_rows.match 99 names no match"),
        (_ROWS.format("match = 'abc'"), "unit_rows.match 'abc' is not a whole number"),
        (_ROWS.format("start = 'abc'"), "unit_rows.start 'abc' is not a whole number"),
        (_ROWS.format("stop = 'x'"), "unit_rows.stop 'x' is not a whole number"),
        (_ROWS.format("start = -3, stop = 9"), f"match number {NUMBER} hold markets -3 to 9"),
        (f"UPDATE matches SET match = 1000000000000 WHERE match = {NUMBER}",
         f"unit_rows.match {NUMBER} names no match"),
    ],
)  # fmt: skip
def test_unit_rows_that_name_no_match_or_no_markets_are_refused(
    capsys, tmp_path, base, change, words
):
    run = corrupted(base, tmp_path, change)
    refused(capsys, base, run, tmp_path, ["report", "compare", "export", "resume"], words)


def test_match_numbers_are_any_integers(tmp_path, base):
    """A store whose match numbers are renumbered alike in both tables reads as before (no
    table as long as the largest number is made)."""
    run = corrupted(
        base,
        tmp_path,
        f"UPDATE matches SET match = 1000000000000 WHERE match = {NUMBER}",
        f"UPDATE unit_rows SET match = 1000000000000 WHERE match = {NUMBER}",
    )
    stores = [ResultStore.open(f) for f in (base, run)]
    try:
        assert_same_records(stores[0].records(), stores[1].records())
        assert list(stores[0]._typed_rows()) == list(stores[1]._typed_rows())
    finally:
        for s in stores:
            s.close()


def _overlap() -> str:
    """A second unit of markets 4-7 inside the stored unit of markets 0-11 of MATCH."""
    values = ", ".join(f"substr({m}, 33, 32)" for m in STORED_METRICS)
    return (
        f"INSERT INTO unit_rows SELECT match, 4, 8, {values} FROM unit_rows WHERE match = {NUMBER}"
    )


def test_overlapping_units_are_refused_by_every_reader_alike(capsys, tmp_path, base):
    run = corrupted(base, tmp_path, _overlap())
    refused(capsys, base, run, tmp_path, ["report", "compare", "export", "export-json", "resume"],
            f"unit_rows of match number {NUMBER} overlap", "both hold market 4")  # fmt: skip


@pytest.mark.parametrize("table", ["matches", "units", "unit_rows", "transcripts"])
def test_a_dropped_table_is_refused_and_not_made_again(capsys, tmp_path, base, table):
    run = corrupted(base, tmp_path, f"DROP TABLE {table}")
    refused(capsys, base, run, tmp_path, ["report", "export", "resume"], f"no {table} table")


def test_a_sum_of_unit_bounds_past_64_bits_is_refused_naming_the_store(capsys, tmp_path, base):
    """SQLite's own error (an integer overflow in the count of stored rows) names the file
    like every other refusal."""
    run = corrupted(base, tmp_path, _ROWS.format("stop = 9223372036854775807"))
    refused(capsys, base, run, tmp_path, ["report", "compare", "export", "resume"])
    main(command("report", run, tmp_path, base))
    assert "(integer overflow)" in capsys.readouterr().err


def _malformed(base: Path, tmp_path: Path) -> Path:
    """A copy of the base run whose unit_rows table's first page is garbage: the file
    opens and its meta reads, its rows do not."""
    run = corrupted(base, tmp_path)
    db = run / "results.sqlite"
    with sqlite3.connect(db) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'unit_rows'")
        root = root.fetchone()[0]
    conn.close()
    with open(db, "r+b") as fh:
        fh.seek((root - 1) * page)
        fh.write(b"\xff" * page)
    return run


def test_a_malformed_database_is_refused_naming_the_store(capsys, tmp_path, base):
    run = _malformed(base, tmp_path)
    refused(capsys, base, run, tmp_path, ["report", "compare", "export", "export-json"],
            "database disk image is malformed")  # fmt: skip
    words = f"{run / 'results.sqlite'}: corrupt results store (database disk image is malformed)"
    store = ResultStore.open(run)
    try:
        for read in (store.records, store.counts, lambda: list(store._typed_rows())):
            with pytest.raises(StoreError, match=re.escape(words)):
                read()
    finally:
        store.close()
    before = state(run)
    assert main(command("resume", run, tmp_path, base)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"arena: error: {run / 'results.sqlite'}: ") and err.count("\n") == 1
    assert "database disk image is malformed" in err
    assert state(run) == before


# ---------------------------------------------------------------------- the matches table
@pytest.mark.parametrize(
    ("column", "value"),
    [("seller", 5), ("buyer", "mix"), ("disclosure", "hidden"), ("config", "zz")],
)
def test_a_matches_row_that_its_match_id_does_not_spell_is_refused(
    capsys, tmp_path, base, column, value
):
    """The markets of a match are stored by its id and read back by its columns: a row
    whose columns disagree would show a seller (a rule, a config) that never played."""
    change = f"UPDATE matches SET {column} = ? WHERE match = {NUMBER}"
    run = corrupted(base, tmp_path, change, params=(value,))
    seller, buyer, rule, config = MATCH.split("|")
    entries = {"seller": seller, "buyer": buyer, "disclosure": rule, "config": config}
    entries[column] = str(value)
    words = f'match "{MATCH}" (number {NUMBER}) is stored as ' + ", ".join(
        f'{k} "{v}"' for k, v in entries.items()
    )
    refused(capsys, base, run, tmp_path,
            ["report", "html", "compare", "export", "export-json", "resume"], words)  # fmt: skip


# ---------------------------------------------------------------------- the meta table
def files(run: Path) -> dict[str, bytes]:
    """Every file of a run folder, by name, with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(run.iterdir())}


@pytest.mark.parametrize(
    ("change", "words"),
    [("DROP TABLE meta", "no meta table"), ("DELETE FROM meta", "no spec in the meta table")],
)
def test_stored_matches_without_their_meta_are_refused_leaving_every_file(
    capsys, tmp_path, base, change, words
):
    """Taken for a new store, such a folder would be switched to WAL and given a meta
    table before its stored matches refused the new run's."""
    run = corrupted(base, tmp_path, change)
    before = files(run)
    refused(capsys, base, run, tmp_path, ["resume"], words)
    assert files(run) == before


@pytest.mark.parametrize(
    ("agents", "words"),
    [
        ('[{"module": "m", "entries": ["x"], "sha256": 5}]', "module 1: sha256 5 is not a text"),
        ('[{"module": 5, "entries": ["x"]}]', "module 1: module 5 is not a text"),
        ('[{"module": "m", "entries": "x"}]', 'entries "x" are not a list of names'),
        ('[{"module": "m", "entries": [1]}]', "entries [1] are not a list of names"),
        ('[{"module": "m", "entries": []}, 7]', "module 2: 7 is not a module record"),
        ('{"module": "m"}', 'agents {"module": "m"} are not a list of modules'),
        ("[{", "the stored agents are not JSON"),
    ],
)
def test_stored_agents_of_other_types_are_refused(capsys, tmp_path, base, agents, words):
    change = "INSERT OR REPLACE INTO meta (key, value) VALUES ('agents', ?)"
    run = corrupted(base, tmp_path, change, params=(agents,))
    refused(capsys, base, run, tmp_path, ["report", "html", "compare", "resume"], words)


def test_stored_agents_as_a_run_keeps_them_are_read(capsys, tmp_path, base):
    """A module without a file has no hash (null); one recorded before hashes, none."""
    agents = [
        {"module": "pkg.mod", "entries": ["x"], "sha256": None},
        {"module": "old.py", "entries": ["y", "z"]},
        {"module": "new.py", "entries": ["w"], "sha256": "ab" * 32},
    ]
    change = "INSERT OR REPLACE INTO meta (key, value) VALUES ('agents', ?)"
    run = corrupted(base, tmp_path, change, params=(json.dumps(agents),))
    for name in ("report", "resume"):
        assert main(command(name, run, tmp_path, base)) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "y, z (old.py)" in out and f"w (new.py, sha256 {'ab' * 6})" in out


# ---------------------------------------------------------------------- units and their rows
def test_a_unit_without_its_units_row_is_refused_by_a_resume_naming_it(capsys, tmp_path, base):
    run = corrupted(base, tmp_path, "DELETE FROM units WHERE match_id = ?", params=(MATCH,))
    refused(capsys, base, run, tmp_path, ["resume"],
            f"unit {MATCH} markets 0-11 has stored rows but no units row")  # fmt: skip


def test_a_units_row_without_its_rows_is_refused_by_a_resume(capsys, tmp_path, base):
    run = corrupted(base, tmp_path, f"DELETE FROM unit_rows WHERE match = {NUMBER}")
    refused(capsys, base, run, tmp_path, ["resume"],
            f"unit {MATCH} markets 0-11 has a units row but no stored rows")  # fmt: skip


def test_a_legacy_unit_without_its_units_row_is_refused_as_it_is_stored_again(tmp_path):
    """Older run folders (one row per market) are checked as a unit is stored: the insert
    that the primary key refuses is rolled back and named."""
    from tests.test_compare_and_store import _legacy_folder, _spec
    from tournaments.runner import run_tournament
    from tournaments.store import StoreError

    spec = _spec()
    run = tmp_path / "old"
    _legacy_folder(run)
    run_tournament(spec, run, use_ray=False, progress=False, unit_markets=25)
    match = spec.matches()[0].match_id
    with sqlite3.connect(run / "results.sqlite") as conn:
        conn.execute("DELETE FROM units WHERE match_id = ? AND start = 25", (match,))
    conn.close()
    rows = _rows(run)
    words = f"corrupt results store (unit {match} markets 25-49 has stored rows but no units row)"
    with pytest.raises(StoreError, match=re.escape(words)):
        run_tournament(spec, run, use_ray=False, progress=False)
    assert _rows(run) == rows


def _rows(run: Path) -> dict[str, list]:
    with sqlite3.connect(f"file:{run / 'results.sqlite'}?mode=ro", uri=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}"))) for t in tables}
    conn.close()
    return out


# ---------------------------------------------------------------------- the stored spec
@pytest.mark.parametrize("text", ["[1, 2]", '{"tournament": 5}', "{nope"])
def test_a_stored_spec_that_is_no_spec_is_refused_by_resume_and_compare(
    capsys, tmp_path, base, text
):
    run = corrupted(base, tmp_path, "UPDATE meta SET value = ? WHERE key = 'spec'", params=(text,))
    refused(capsys, base, run, tmp_path, ["resume"], "the stored spec is not a tournament spec")
    # The readers too: a report read such a spec as "-" and went on.
    readers = ["report", "html", "export", "export-json", "show"]
    refused(capsys, base, run, tmp_path, readers, "is not a tournament spec")
    before = state(run)
    db = str(run / "results.sqlite")  # the line names the corrupt store's file
    for argv, label in ((["compare", str(base), str(run)], db),
                        (["compare", str(run), str(base)], db)):  # fmt: skip
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"arena: error: {label}: corrupt results")
    assert state(run) == before
    meta = {"spec": json.dumps({"tournament": {"seed": 1}, "configs": {}})}
    with pytest.raises(CompareError, match="^RUN: corrupt results store"):
        check_shared_markets(meta, {"spec": text}, labels=("A", "RUN"))


# ---------------------------------------------------------------------- transcripts
@pytest.mark.parametrize(
    ("turns", "words"),
    [
        ("[1, 2]", "turn 1 is 1, not a turn record"),
        ('{"a": 1}', '{"a": 1} is not a list of turn records'),
        ('[{"turn": 1}]', "turn 1 has no seller_text"),
        ("[{", "not JSON"),
    ],
)
def test_a_transcript_that_is_no_list_of_turn_records_is_refused(
    capsys, tmp_path, base, turns, words
):
    change = "UPDATE transcripts SET turns = ? WHERE match_id = ?"
    run = corrupted(base, tmp_path, change, params=(turns, MATCH))
    refused(capsys, base, run, tmp_path, ["show", "transcripts", "html"],
            f"transcript of {MATCH} market 0: {words}")  # fmt: skip
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("turns", [[1, 2], {"a": 1}, [{"turn": 1}], [{"turn": 1, "buyer": "x"}]])
def test_the_readers_of_turn_records_refuse_other_data_with_a_value_error(turns):
    from agents.lm.transcripts import prompt_completion
    from arena.config import MarketConfig
    from arena.generator import generate
    from tournaments.viewer import replay

    with pytest.raises(ValueError, match="not a transcript"):
        print_transcript(turns)
    with pytest.raises(ValueError, match="not a transcript"):
        replay(generate(MarketConfig(), 0, 0), turns)
    if isinstance(turns, list):  # a dict iterates as its keys: str turns, refused too
        with pytest.raises(ValueError, match="turn 1 of the transcript"):
            prompt_completion([{**t, "buyer_prompt": "x"} if isinstance(t, dict) else t
                               for t in turns], "buyer")  # fmt: skip
    else:
        with pytest.raises(ValueError, match="turn 1 of the transcript is str"):
            prompt_completion(turns)


def test_a_valid_run_reads_as_before(capsys, tmp_path, base):
    """The checks refuse nothing this tool writes: the base run reports, exports, shows and
    resumes (nothing to play) as ever."""
    run = corrupted(base, tmp_path)
    rows = _rows(run)
    for name in ("report", "export", "show", "resume", "compare"):
        assert main(command(name, run, tmp_path, base)) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert _rows(run) == rows
    store = ResultStore.open(run)
    try:
        keys = store.transcript_keys()
        assert keys and all(store.transcript(m, k) for m, k in keys)
        assert np.array_equal(store.records(()).market, store.records().market)
    finally:
        store.close()


# ---------------------------------------------------------------------- league
def test_a_league_refuses_a_tournament_folder_before_writing_there(capsys, tmp_path, base):
    from tests.test_league import _config

    run = corrupted(base, tmp_path)
    before = state(run)
    config = _config(tmp_path / "config", "lg")
    assert main(["league", str(config), "--out", str(run), "--no-ray", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "holds results of a different spec" in err and "Traceback" not in err
    assert state(run) == before  # no league.json, no round_000/
