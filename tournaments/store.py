"""The results store: one SQLite file per run folder.

Tables::

    meta         key -> value: the spec (JSON), seed, package versions, creation time,
                 the modules of entries of one's own (`agents`, JSON)
    matches      match number -> match_id, seller, buyer, disclosure, config (name)
    units        (match_id, start, stop): the slices of work already stored
    unit_rows    one row per unit: (match number, start, stop) and every metric of
                 arena.metrics as a column of the unit's values (enough to recompute every
                 statistic); see tournaments.market_rows, which also reads the one row per
                 market of older run folders
    transcripts  (match_id, market) -> the JSON list of turn records of a sample

Unit rows carry the match as a number, not its text; reads join the match table back
in (``records``, exports).

A unit's rows and its ``units`` row are written in one transaction, so a run
killed at any moment leaves whole units only; a rerun skips them and never
duplicates a row (the primary keys would refuse it anyway).

One writer per run folder: a store opened for writing holds an exclusive lock on its
folder (``flock`` on the folder itself, so no lock file is left behind) until it is
closed or its process ends, however it ends. A second run on a folder that a live run
holds is refused with a StoreError saying so; readers (report, show, export, compare)
take no lock and may read a run while it is written. Each unit is also checked and
stored under SQLite's write lock (``BEGIN IMMEDIATE``): "stored already?" and the
insert are one step, so no unit is stored twice, nor refused by a primary key, even
where the file system has no locks.

Opening checks before it changes: a folder whose database holds another spec or unit
size is refused after a look at it that writes nothing (the database keeps its bytes,
its journal mode, and gains no -wal or -shm file). The one exception: a rollback journal
left by a run killed mid-transaction is rolled back first (nothing can be read before),
which restores the database's last committed state.

A corrupt store (a table missing, the store's tables without a meta table, a spec that is
no spec, a matches row whose seller, buyer, rule or config is not what its match id spells,
recorded ``agents`` of other types, unit rows naming no match or overlapping, a unit's rows
without its ``units`` row or the reverse, a transcript that is no list of turn records,
pages SQLite cannot read) is one StoreError, "RUN/results.sqlite: corrupt results store
(...)": readers refuse what they would misread, and a resume is refused by the same look
that writes nothing, so no stored row is deleted or rewritten because of it.

Length: about 1,000 lines for one class and its helpers: opening (new, resumed, grown or
read-only folders, each refusal with its own message), the checks of a corrupt store and
of a kept transcript, writing, reading and exporting one SQLite file; the market rows'
layout is ``tournaments.market_rows``.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import json
import os
import platform
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import metadata
from numbers import Integral, Real
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from arena.words import plural
from tournaments.market_rows import LEGACY_TABLE, CorruptRows, Layout, int_column
from tournaments.records import MatchTable, Records
from tournaments.spec import SpecError, TournamentSpec, stored_spec
from tournaments.types import COLUMNS, STORED_METRICS, UnitResult

DB_NAME = "results.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS units (
    match_id TEXT NOT NULL, start INTEGER NOT NULL, stop INTEGER NOT NULL,
    PRIMARY KEY (match_id, start)
);
CREATE INDEX IF NOT EXISTS units_by_start ON units (start);
CREATE TABLE IF NOT EXISTS matches (
    match INTEGER PRIMARY KEY, match_id TEXT UNIQUE NOT NULL, seller TEXT NOT NULL,
    buyer TEXT NOT NULL, disclosure TEXT NOT NULL, config TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS transcripts (
    match_id TEXT NOT NULL, market INTEGER NOT NULL, turns TEXT NOT NULL,
    PRIMARY KEY (match_id, market)
);
"""

PACKAGES = ("numpy", "scipy", "ray", "torch", "transformers", "tabulate", "agent-market-arena")


class StoreError(ValueError):
    """The run folder cannot be used as asked (nothing in it is changed)."""


def corrupt(path: Path, detail: object) -> StoreError:
    """The one error of a store that this tool did not write so."""
    return StoreError(f"{path}: corrupt results store ({detail})")


_SQLITE_NOT_CORRUPT = (
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_IOERR",
    "SQLITE_NOMEM",
    "SQLITE_CANTOPEN",
    "SQLITE_PERM",
    "SQLITE_INTERRUPT",
    "SQLITE_FULL",
)
"""SQLite's errors (by the prefix of their name) that say the file could not be read now,
not that what it holds is wrong."""


def _read_error(path: Path, err: sqlite3.Error) -> StoreError:
    """An SQLite error met while reading a store, as a StoreError naming its file: what
    the file holds (pages that are no database, a sum past 64 bits of unit rows' bounds)
    is a corrupt store; a file that cannot be read now (locked, an I/O error) says so."""
    if getattr(err, "sqlite_errorname", "").startswith(_SQLITE_NOT_CORRUPT):
        return StoreError(f"{path}: cannot read it ({err})")
    return corrupt(path, err)


_T = TypeVar("_T")


def _named(method: Callable[..., _T]) -> Callable[..., _T]:
    """A reading method of ResultStore whose SQLite errors name the results file: a bare
    "database disk image is malformed" says nothing of which run folder it is."""

    @functools.wraps(method)
    def reading(self: ResultStore, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as err:
            raise _read_error(self.path, err) from None

    return reading


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


class ResultStore:
    """The SQLite store of one run folder."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        writable: bool = False,
        lock: int | None = None,
    ) -> None:
        self.path = path
        self.conn = conn
        self.writable = writable
        self._numbers: dict[str, int] | None = None  # match_id -> match number
        self.layout = Layout.create(conn) if writable else Layout(conn)
        # The run folder's lock (``_lock_folder``): released by close(), or when the
        # store is dropped unclosed.
        self._unlock = weakref.finalize(self, os.close, lock) if lock is not None else None

    # ------------------------------------------------------------------ opening
    @classmethod
    def create_or_resume(
        cls,
        folder: str | Path,
        spec: TournamentSpec,
        unit_markets: int = 1000,
        *,
        extend: bool = False,
    ) -> ResultStore:
        """Open the run folder for ``spec``: a new folder is initialised; an existing one must
        hold the same spec (same seed and markets included) cut into the same units, else
        StoreError and nothing in it is touched. The store holds the folder until it is
        closed: a folder another live run holds is a StoreError too.

        ``extend``: the folder may also hold a spec that ``spec`` extends (the same
        tournament with more sellers, buyers or checkpoints; see ``extends``): its new
        matches are added and the stored spec replaced by ``spec``, in one transaction, so
        a run grows by the new matches without replaying what is stored (how a league adds
        each round's snapshots to one store)."""
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise StoreError(f"{folder} exists and is not a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(
                f"{folder}: cannot create the run folder ({_reason(err)}); choose another --out"
            ) from None
        path = folder / DB_NAME
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            where = folder if not os.access(folder, os.W_OK) else path
            raise StoreError(
                f"{where} is read-only: a run writes its results there; choose another --out"
            )
        lock = _lock_folder(folder)
        try:
            conn = _open_checked(folder, path, spec, unit_markets, extend)
            return cls(path, conn, writable=True, lock=lock)
        except BaseException:
            if lock is not None:
                os.close(lock)
            raise

    @classmethod
    def open(cls, folder: str | Path) -> ResultStore:
        """Open an existing run folder for reading."""
        path = Path(folder) / DB_NAME
        if not path.is_file():
            raise StoreError(f"{folder}: no results here (expected {DB_NAME})")
        if not os.access(path, os.R_OK):
            raise StoreError(f"{path}: cannot read it (permission denied)")
        try:
            # Read-only: a report never changes a run folder, nor a file that is no run.
            conn = _open_read_only(path)
            spec = conn.execute("SELECT value FROM meta WHERE key = 'spec'").fetchone()
            if spec is None:
                raise sqlite3.DatabaseError("no spec stored")
            _check_columns(conn, path)
            missing = _missing_table(conn)
            # A reader (a report, a league) reads every field of it as its type.
            agents = agents_problem(dict(conn.execute("SELECT key, value FROM meta")))
        except sqlite3.Error as err:
            raise StoreError(f"{path}: not a results database ({err})") from None
        problem = (
            f"no {missing} table"
            if missing is not None
            else agents or _spec_problem(spec[0])  # a report read such a spec as "-"
        )
        if problem is not None:
            conn.close()
            raise corrupt(path, problem)
        return cls(path, conn)

    def close(self) -> None:
        """Close; a writer first folds its write-ahead log back into the database, so that a
        finished run folder is one file (no -wal, -shm) that opens on read-only media too."""
        if self.writable:
            self.writable = False
            with contextlib.suppress(sqlite3.Error):
                # Fails (and is left so) while a reader holds the database: the log stays.
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self.conn.execute("PRAGMA journal_mode=DELETE")
        self.conn.close()
        if self._unlock is not None:
            self._unlock()  # the database closed first: the next run finds it whole

    # ------------------------------------------------------------------ writing
    @_named
    def done_units(self) -> set[tuple[str, int]]:
        return set(self.conn.execute("SELECT match_id, start FROM units"))

    @_named
    def done_at(self, start: int) -> set[str]:
        """The match ids whose unit starting at market ``start`` is stored (one slice of the
        plan at a time: what a resumed run holds in memory does not grow with its size)."""
        return {r[0] for r in self.conn.execute("SELECT match_id FROM units WHERE start = ?",
                                                (start,))}  # fmt: skip

    @_named
    def units_stored(self) -> int:
        return self.conn.execute("SELECT count(*) FROM units").fetchone()[0]

    def write(self, result: UnitResult) -> bool:
        """Store one unit in one transaction; False if it was stored already."""
        u = result.unit
        if self._numbers is None:
            self._numbers = dict(self.conn.execute("SELECT match_id, match FROM matches"))
        if u.match_id not in self._numbers:
            raise corrupt(self.path, f"match {u.match_id} has no row in the matches table")
        with self.conn:
            # The write lock before the check: no other writer can store the unit between
            # "stored already?" and the insert.
            self.conn.execute("BEGIN IMMEDIATE")
            if self.conn.execute(
                "SELECT 1 FROM units WHERE match_id = ? AND start = ?", (u.match_id, u.start)
            ).fetchone():
                return False
            try:
                self.layout.insert(self._numbers[u.match_id], result)
                self.conn.executemany(
                    "INSERT INTO transcripts (match_id, market, turns) VALUES (?, ?, ?)",
                    [(u.match_id, k, t) for k, t in sorted(result.transcripts.items())],
                )
            except sqlite3.IntegrityError:
                # Rolled back: what is stored stays as it was.
                raise corrupt(
                    self.path,
                    f"unit {u.match_id} markets {u.start}-{u.stop - 1} has stored rows but no "
                    "units row",
                ) from None
            self.conn.execute(
                "INSERT INTO units (match_id, start, stop) VALUES (?, ?, ?)",
                (u.match_id, u.start, u.stop),
            )
        return True

    def record_agents(self, modules: Sequence[Mapping[str, Any]]) -> None:
        """Keep which code the run's entries of one's own came from (``--agents``, a spec's
        ``agents``): meta ``agents``, a JSON list of ``{"module", "entries", "sha256"}``.
        A resumed run adds the modules it was not given before. A run whose units were
        played with other code for an entry (its module's file changed, or another file
        registers it now) is refused (StoreError): finishing it would mix two versions of
        that entry in one set of results."""
        if not modules:
            return
        self.check_agents(modules)
        by_module = {r["module"]: r for r in stored_agents(self.meta())}
        for m in modules:
            by_module.setdefault(m["module"], dict(m))
        text = json.dumps(sorted(by_module.values(), key=lambda r: r["module"]), sort_keys=True)
        if self.meta().get("agents") == text:
            return
        with self.conn:
            self.conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('agents', ?)", (text,)
            )

    def check_agents(self, modules: Sequence[Mapping[str, Any]]) -> None:
        """StoreError when stored units were played with other code for an entry of
        ``modules`` than they have now (``record_agents``); reads only, so a run that plays
        other work first (a league's learners) can ask before it starts."""
        records = stored_agents(self.meta())
        if not (modules and records and self.units_stored()):
            return
        by_entry = {e: r for r in records for e in r["entries"]}
        by_module = {r["module"]: r for r in records}
        for m in modules:
            for old in [by_module.get(m["module"])] + [by_entry.get(e) for e in m["entries"]]:
                if old is not None and _other_code(old, m):
                    raise StoreError(_changed_code(self.path.parent, old, m))

    # ------------------------------------------------------------------ reading
    @_named
    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def spec(self) -> TournamentSpec:
        """The spec this folder was run with, rebuilt from what is stored (as it was run:
        entries are not checked against today's registry)."""
        spec = _stored_spec(self.meta().get("spec"))
        if spec is None:
            raise StoreError(f"{self.path}: the stored spec cannot be read")
        return spec

    @_named
    def records(self, metrics: Sequence[str] = STORED_METRICS) -> Records:
        """Every market row, sorted by (match_id, market), as columns: the stored ``metrics``
        (all by default; an analysis reads only those it uses, and most of the time of
        reading is spent per value)."""
        unknown = sorted(set(metrics) - set(STORED_METRICS))
        if unknown:
            raise ValueError(f"no stored column {', '.join(unknown)}")
        matches = self._matches()
        table = MatchTable(*(tuple(m[k] for m in matches) for k in range(1, 6)))
        try:
            # Match numbers follow match-id order when a run is created; the layout maps
            # them to positions, so that is an assumption of nothing.
            match, market, columns = self.layout.columns(metrics, self._match_numbers(matches))
        except CorruptRows as err:
            raise corrupt(self.path, err) from None
        return Records(table, match, market, columns)

    def _matches(self) -> list[tuple]:
        """The matches table, in match-id order; a row whose entries are not those its
        match id names is a corrupt store (every reader groups markets by them)."""
        rows = self.conn.execute(
            "SELECT match, match_id, seller, buyer, disclosure, config FROM matches "
            "ORDER BY match_id"
        ).fetchall()
        problem = _match_problem(rows)
        if problem is not None:
            raise corrupt(self.path, problem)
        return rows

    @staticmethod
    def _match_numbers(matches: list[tuple]) -> np.ndarray:
        return int_column([m[0] for m in matches], "matches.match")

    @_named
    def transcript(self, match_id: str, market: int) -> list[dict] | None:
        """The kept transcript of one market (None if none is kept): its turn records, as
        ``TurnRecord.to_dict()`` wrote them; anything else is a corrupt store."""
        row = self.conn.execute(
            "SELECT turns FROM transcripts WHERE match_id = ? AND market = ?", (match_id, market)
        ).fetchone()
        if row is None:
            return None
        try:
            turns = json.loads(row[0])
        except (TypeError, ValueError):
            raise corrupt(
                self.path, f"transcript of {match_id} market {market}: not JSON"
            ) from None
        problem = transcript_problem(turns)
        if problem is not None:
            raise corrupt(self.path, f"transcript of {match_id} market {market}: {problem}")
        return turns

    @_named
    def market_row(self, match_id: str, market: int) -> dict[str, float] | None:
        """The stored metrics of one market of one match (None if it is not stored)."""
        row = self.conn.execute("SELECT match FROM matches WHERE match_id = ?", (match_id,))
        number = row.fetchone()
        try:
            return None if number is None else self.layout.row(number[0], market)
        except CorruptRows as err:
            raise corrupt(self.path, err) from None

    @_named
    def transcript_keys(self) -> list[tuple[str, int]]:
        return list(self.conn.execute("SELECT match_id, market FROM transcripts ORDER BY 1, 2"))

    @_named
    def counts(self) -> tuple[int, int]:
        """(market rows, stored units)."""
        return (
            self.layout.count(),
            self.conn.execute("SELECT count(*) FROM units").fetchone()[0],
        )

    # ------------------------------------------------------------------ export
    def export_csv(self, path: str | Path) -> int:
        """Every market row, one line each, after a header of ``COLUMNS``."""
        n = 0
        rows = self._typed_rows()  # checked before the file is made
        with _writing(path) as fh:
            w = csv.writer(fh)
            w.writerow(COLUMNS)
            for row in rows:
                w.writerow(row)
                n += 1
        return n

    def export_json(self, path: str | Path) -> int:
        """``{"meta": {...}, "markets": [{column: value}, ...]}``: the stored metadata as
        JSON values (the spec and versions as objects, the seed as a number), every market
        row as an object; counts as integers, a stored NaN as null."""
        meta = {key: _json_value(value) for key, value in self.meta().items()}
        n = 0
        rows = self._typed_rows()  # checked before the file is made
        with _writing(path) as fh:
            # Row by row: the rows of a large run need not fit in memory as objects.
            fh.write('{"meta": ' + json.dumps(meta) + ', "markets": [')
            for row in rows:
                fh.write((",\n" if n else "\n") + json.dumps(dict(zip(COLUMNS, row, strict=True))))
                n += 1
            fh.write("\n]}\n")
        return n

    @_named
    def _typed_rows(self) -> Iterator[tuple]:
        """Market rows as exported, in (match_id, market) order: counts (stored as floats)
        as integers, a NaN as None. The stored rows are checked first (what ``records``
        refuses, an export refuses too, before it writes a line)."""
        matches = self._matches()
        try:
            self.layout.check(self._match_numbers(matches))
        except CorruptRows as err:
            raise corrupt(self.path, err) from None
        return self._typed(matches)

    def _typed(self, matches: list[tuple]) -> Iterator[tuple]:
        coords = {m[0]: m[1:] for m in matches}
        counts = [k for k, c in enumerate(STORED_METRICS) if c in COUNT_COLUMNS]
        try:
            for number, market, *values in self.layout.rows([m[0] for m in matches]):
                for k in counts:
                    if values[k] is not None:
                        values[k] = int(values[k])
                match_id, *entries = coords[number]
                yield (match_id, market, *entries, *values)
        except CorruptRows as err:
            raise corrupt(self.path, err) from None
        except sqlite3.Error as err:  # read as the rows are written, past ``_named``
            raise _read_error(self.path, err) from None


COUNT_COLUMNS = frozenset({"trades", "turns_used", "seller_violations", "buyer_violations"})
"""Stored metrics that are whole counts (exported as integers)."""


def _json_value(text: str):
    """A meta value as JSON: parsed where it is JSON text (the spec, versions, the seed),
    the text itself otherwise (the creation time)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _reason(err: OSError) -> str:
    """An OSError as a few words: "read-only file system", "permission denied"."""
    return (err.strerror or type(err).__name__).lower()


@contextlib.contextmanager
def _writing(path: str | Path):
    """A text file open for writing; a failure to open it is one StoreError naming it."""
    try:
        fh = open(path, "w", newline="")  # noqa: SIM115 - closed below
    except OSError as err:
        raise StoreError(f"{path}: cannot write it ({_reason(err)})") from None
    with fh:
        yield fh


def _open_read_only(path: Path) -> sqlite3.Connection:
    """Open for reading only. A database left in write-ahead-log mode (a run that was
    killed, or is running) needs its folder writable to be read; in a read-only folder no
    writer can be at work, so it is read as the immutable file it is there."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        if os.access(path.parent, os.W_OK):
            raise
    return _open_immutable(path)


def _open_immutable(path: Path) -> sqlite3.Connection:
    """The file as it stands, read with no lock and no -wal or -shm beside it: only for a
    database that no writer can change meanwhile."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, timeout=30.0)


def _lock_folder(folder: Path) -> int | None:
    """Hold ``folder`` for one writer: an exclusive ``flock`` on the folder itself, kept
    until the returned descriptor is closed (by ``ResultStore.close``, else at the end of
    the process, however it ends). A folder a live run holds is a StoreError; a file system
    without locks gives None (no lock; units are still stored once each, see ``write``)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if isinstance(err, BlockingIOError):
            raise StoreError(
                f"{folder} is in use: another run is writing to it now; wait for that run "
                "to end, or choose another --out"
            ) from None
        return None
    return fd


def _open_checked(
    folder: Path, path: Path, spec: TournamentSpec, unit_markets: int, extend: bool
) -> sqlite3.Connection:
    """The database of a locked run folder, open for writing ``spec`` cut into units of
    ``unit_markets``. What it holds is checked first, by a look that writes nothing: a
    folder refused (StoreError) is left exactly as it was, a corrupt store included."""
    spec_json = json.dumps(spec.to_dict(), sort_keys=True)
    try:
        with _looking(path) as look:
            stored = _stored_meta(look, path)
            # Compared as specs, not as text: a folder stored before a rename of the spec's
            # tables holds the same spec in other words.
            old = _held_spec(path, stored)
            grow = (extend and isinstance(old, TournamentSpec)
                    and old.to_dict() != spec.to_dict() and extends(spec, old))  # fmt: skip
            if old is not None and not grow and not _same_spec(old, spec):
                raise _other_spec(folder, old, spec)
            size = stored.get("unit_markets", str(unit_markets))
            if size != str(unit_markets):
                if not size.isdigit():
                    raise corrupt(path, f"stored unit size {size!r}")
                raise StoreError(
                    f"{folder} was cut into units of {plural(int(size), 'market')}, "
                    f"not {unit_markets}; resume with the same unit size"
                )
            if isinstance(old, TournamentSpec):
                _check_store(look, path, old)
    except sqlite3.Error as err:
        raise StoreError(f"{path}: cannot use this results database ({err})") from None
    try:
        conn = _connect(path)
    except sqlite3.Error as err:
        raise StoreError(f"{path}: cannot use this results database ({err})") from None
    try:
        if grow:
            _add_matches(conn, spec, spec_json)
        # spec.json first: a run killed after the commit below still has it.
        try:
            (folder / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2) + "\n")
        except OSError as err:
            raise StoreError(f"{folder}: cannot write spec.json ({_reason(err)})") from None
        if "spec" not in stored:
            _add_run(conn, spec, spec_json, unit_markets)
    except sqlite3.Error as err:
        conn.close()
        raise StoreError(f"{path}: cannot use this results database ({err})") from None
    except BaseException:
        conn.close()
        raise
    return conn


def check_spec(folder: str | Path, spec: TournamentSpec, *, grown: bool = False) -> None:
    """Refuse (StoreError) a run folder that ``create_or_resume(folder, spec, extend=True)``
    would refuse for the spec it holds, by a look that writes nothing and takes no lock (a
    folder with no store passes). With ``grown``, a store of ``spec`` grown by entries
    passes too: a league checks its folder so before it writes a file there."""
    folder = Path(folder)
    path = folder / DB_NAME
    if not path.is_file() or path.with_name(path.name + "-journal").exists():
        return  # none yet, or a killed run's transaction to roll back: create_or_resume's
    try:
        with _looking(path) as look:
            old = _held_spec(path, _stored_meta(look, path))
    except sqlite3.Error as err:
        raise StoreError(f"{path}: cannot use this results database ({err})") from None
    if old is None or _same_spec(old, spec):
        return
    if isinstance(old, TournamentSpec) and (extends(spec, old) or (grown and extends(old, spec))):
        return
    raise _other_spec(folder, old, spec)


@contextlib.contextmanager
def _looking(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A connection to look at a run's database (None for no file yet) without writing to
    the file or its folder."""
    if not path.exists():
        yield None
        return
    # With no log beside it, the file alone holds every commit (and no writer is at work:
    # the caller holds the folder); opening it as immutable leaves no empty -wal, -shm.
    # A rollback journal left by a killed run (killed in a transaction, or while its
    # journal mode switched) must be rolled back before anything can be read, which a
    # read-only connection cannot do: that one case opens for writing (no pragmas), and
    # the rollback restores the last committed state, the one a resume continues from.
    if path.with_name(path.name + "-journal").exists():
        conn = sqlite3.connect(path, timeout=30.0)
    elif path.with_name(path.name + "-wal").exists():
        conn = _open_read_only(path)
    else:
        conn = _open_immutable(path)
    try:
        yield conn
    finally:
        conn.close()


def _stored_meta(conn: sqlite3.Connection | None, path: Path) -> dict[str, str]:
    """The meta table of a run's database ({} for none yet); a database of another version
    of this tool is a StoreError."""
    if conn is None:
        return {}
    _check_columns(conn, path)
    tables = _tables(conn)
    if "meta" not in tables:
        # This tool makes the meta table before any other (``_SCHEMA``), so its other
        # tables without it are no new store, nor one a run killed as it began: taken as
        # new, its stored rows would refuse the new run's, after the file was changed.
        if tables & {"matches", "units", "unit_rows", "transcripts"} or _holds_rows(
            conn, LEGACY_TABLE, tables
        ):
            raise corrupt(path, "no meta table")
        return {}
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    # A new run's matches and spec are stored in one transaction (``_add_run``): matches
    # without a spec are no run killed as it began either.
    if "spec" not in meta and _holds_rows(conn, "matches", tables):
        raise corrupt(path, "no spec in the meta table")
    problem = agents_problem(meta)
    if problem is not None:
        raise corrupt(path, problem)
    return meta


def _spec_problem(value: object) -> str | None:
    """Why a stored spec is no spec a run writes (a JSON object with its ``tournament``
    table), in a few words; None if it is one."""
    try:
        spec = json.loads(value) if isinstance(value, str) else None
    except (json.JSONDecodeError, RecursionError):
        spec = None
    if not (isinstance(spec, dict) and isinstance(spec.get("tournament"), dict)):
        return f"the stored spec {_short(value)} is not a tournament spec"
    return None


def _holds_rows(conn: sqlite3.Connection, table: str, tables: set[str]) -> bool:
    return table in tables and conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None


def _held_spec(path: Path, stored: dict[str, str]) -> TournamentSpec | dict | None:
    """The spec a store holds: None for none yet; its JSON object where today's specs
    cannot rebuild it (a spec of an older version: another spec); a text that is no
    tournament spec at all is a corrupt store."""
    if "spec" not in stored:
        return None
    spec = _stored_spec(stored["spec"])
    if spec is not None:
        return spec
    try:
        data = json.loads(stored["spec"])
    except (TypeError, ValueError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("tournament"), dict):
        raise corrupt(path, "the stored spec is not a tournament spec")
    return data


def _same_spec(old: TournamentSpec | dict, spec: TournamentSpec) -> bool:
    return isinstance(old, TournamentSpec) and old.to_dict() == spec.to_dict()


def _other_spec(folder: Path, old: TournamentSpec | dict, spec: TournamentSpec) -> StoreError:
    before = old.to_dict() if isinstance(old, TournamentSpec) else old
    return StoreError(
        f"{folder} holds results of a different spec ({_spec_diff(before, spec.to_dict())}); "
        "rerun with the same spec, seed and --markets, or choose another --out"
    )


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _missing_table(conn: sqlite3.Connection) -> str | None:
    """A table that a store holding a spec lacks (None: none is missing). The market rows'
    table is needed once a unit is stored (a run killed as it began may lack it)."""
    tables = _tables(conn)
    for name in ("matches", "units", "transcripts"):
        if name not in tables:
            return name
    if not tables & {"unit_rows", LEGACY_TABLE}:
        if conn.execute("SELECT 1 FROM units LIMIT 1").fetchone() is not None:
            return "unit_rows"
    return None


def _check_store(conn: sqlite3.Connection, path: Path, spec: TournamentSpec) -> None:
    """Refuse, as a corrupt store, what a resume of ``spec`` would misread or fail on: a
    table missing, a match of the spec with no row, unit rows that ``records`` refuses, a
    unit's rows without its ``units`` row or the reverse. A look: nothing is written."""
    missing = _missing_table(conn)
    if missing is not None:
        raise corrupt(path, f"no {missing} table")
    matches = conn.execute(
        "SELECT match, match_id, seller, buyer, disclosure, config FROM matches"
    ).fetchall()
    problem = _match_problem(matches)
    if problem is not None:
        raise corrupt(path, problem)
    ids = {m[1] for m in matches}
    lost = [m.match_id for m in spec.matches() if m.match_id not in ids]
    if lost:
        raise corrupt(path, f"match {lost[0]} has no row in the matches table")
    layout = Layout(conn)
    if layout.table not in _tables(conn):
        return  # no unit stored yet
    try:
        layout.check(int_column([m[0] for m in matches], "matches.match"))
    except CorruptRows as err:
        raise corrupt(path, err) from None
    if layout.legacy:
        return  # a market row without its units row is found as its unit is stored again
    row = conn.execute(
        "SELECT m.match_id, r.start, r.stop FROM unit_rows r JOIN matches m ON m.match = r.match "
        "WHERE NOT EXISTS (SELECT 1 FROM units u WHERE u.match_id = m.match_id "
        "AND u.start = r.start) LIMIT 1"
    ).fetchone()
    if row is not None:
        raise corrupt(
            path, f"unit {row[0]} markets {row[1]}-{row[2] - 1} has stored rows but no units row"
        )
    row = conn.execute(
        "SELECT u.match_id, u.start, u.stop FROM units u WHERE NOT EXISTS (SELECT 1 FROM "
        "matches m JOIN unit_rows r ON r.match = m.match AND r.start = u.start "
        "WHERE m.match_id = u.match_id) LIMIT 1"
    ).fetchone()
    if row is not None:
        raise corrupt(
            path, f"unit {row[0]} markets {row[1]}-{row[2] - 1} has a units row but no stored rows"
        )


def _match_problem(rows: Sequence[tuple]) -> str | None:
    """The first row of the matches table (match, match_id, seller, buyer, disclosure,
    config) whose entries are not the ones its match id spells ("seller|buyer|rule|config",
    ``TournamentSpec.matches``), in a few words; None if there is none. Units are stored by
    match id and read back by these columns: a row that disagrees would show its markets
    under a seller, buyer, rule or config that never played them."""
    for number, match_id, *entries in rows:
        spelled = match_id.split("|") if isinstance(match_id, str) else None
        if spelled != entries:
            return (
                f"match {_short(match_id)} (number {number}) is stored as seller "
                f"{_short(entries[0])}, buyer {_short(entries[1])}, disclosure "
                f"{_short(entries[2])}, config {_short(entries[3])}"
            )
    return None


def _other_code(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a module record is other code than the one stored (another file, or the
    same file with other bytes; a module without a file hash is taken as it is)."""
    if old["module"] != new["module"]:
        return True
    return bool(old.get("sha256") and new.get("sha256") and old["sha256"] != new["sha256"])


def _changed_code(folder: Path, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    shared = [e for e in new["entries"] if e in old["entries"]] or list(old["entries"])
    what = f"{', '.join(shared)} ({old['module']}, sha256 {str(old.get('sha256'))[:12]})"
    if old["module"] != new["module"]:
        now = f"{new['module']} registers {', '.join(shared)} now"
    else:
        now = f"the file has changed since (sha256 {str(new.get('sha256'))[:12]} now)"
    return (
        f"{folder} was played with {what}, and {now}: finishing the run would mix two "
        "versions in one set of results; restore that code, or play this one into another "
        "--out"
    )


def stored_agents(meta: Mapping[str, Any]) -> list[dict]:
    """The modules a run folder recorded (``ResultStore.record_agents``): none for a
    folder without them. A store's are checked as it is opened (``agents_problem``); of
    other metadata, a record that is not one is left out."""
    value = meta.get("agents", "[]")
    try:
        rows = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        return []
    if not isinstance(rows, list):
        return []
    return [r for r in rows if _module_problem(r) is None]


def agents_problem(meta: Mapping[str, Any]) -> str | None:
    """Why the stored ``agents`` is not what ``record_agents`` keeps (a JSON list of
    ``{"module": str, "entries": [str, ...], "sha256": str or null}``), in a few words;
    None if it is, or is absent. Every field is read as that type (a report slices the
    hash, a resume compares the entries), so one of another type is a corrupt store."""
    if "agents" not in meta:
        return None
    value = meta["agents"]
    try:
        rows = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        return "the stored agents are not JSON"
    if not isinstance(rows, list):
        return f"the stored agents {_short(rows)} are not a list of modules"
    for k, row in enumerate(rows, 1):
        problem = _module_problem(row)
        if problem is not None:
            return f"stored agents module {k}: {problem}"
    return None


def _module_problem(row: object) -> str | None:
    """Why one record of the stored ``agents`` is not one (None if it is)."""
    if not isinstance(row, dict):
        return f"{_short(row)} is not a module record"
    if not isinstance(row.get("module"), str):
        return f"module {_short(row.get('module'))} is not a text"
    entries = row.get("entries")
    if not (isinstance(entries, list) and all(isinstance(e, str) for e in entries)):
        return f"entries {_short(entries)} are not a list of names"
    if not isinstance(row.get("sha256"), str | None):
        return f"sha256 {_short(row['sha256'])} is not a text"
    return None


def _add_run(
    conn: sqlite3.Connection, spec: TournamentSpec, spec_json: str, unit_markets: int
) -> None:
    """A new run's matches and meta, in one transaction."""
    with conn:
        conn.executemany(
            "INSERT INTO matches (match, match_id, seller, buyer, disclosure, config) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (k, m.match_id, m.seller, m.buyer, m.disclosure, m.config)
                for k, m in enumerate(spec.matches())
            ],
        )
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [
                ("spec", spec_json),
                ("seed", str(spec.seed)),
                ("unit_markets", str(unit_markets)),
                ("versions", json.dumps(package_versions(), sort_keys=True)),
                ("created", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            ],
        )


def _stored_spec(text: str | None) -> TournamentSpec | None:
    if text is None:
        return None
    try:
        return stored_spec(json.loads(text))
    except (SpecError, ValueError, TypeError, AttributeError):
        return None


def extends(new: TournamentSpec, old: TournamentSpec) -> bool:
    """Whether ``new`` is ``old`` with more entries: the same seed, markets per match,
    configs, rules, populations and settings; every seller, buyer and checkpoint of ``old``
    still there (a checkpoint with the same weights). Every stored match is then a match
    of ``new``, with the same markets and dice."""
    a, b = old.to_dict(), new.to_dict()
    ta, tb = a["tournament"], b["tournament"]
    grown = ("sellers", "buyers", "checkpoints")
    same = {k: v for k, v in ta.items() if k not in grown} == {
        k: v for k, v in tb.items() if k not in grown
    }
    old_ck, new_ck = ta.get("checkpoints", {}), tb.get("checkpoints", {})
    return (
        same
        and a["populations"] == b["populations"]
        and a["configs"] == b["configs"]
        and set(ta["sellers"]) <= set(tb["sellers"])
        and set(ta["buyers"]) <= set(tb["buyers"])
        and all(new_ck.get(k) == v for k, v in old_ck.items())
    )


def _add_matches(conn: sqlite3.Connection, spec: TournamentSpec, spec_json: str) -> None:
    """The matches of ``spec`` not stored yet, numbered after the stored ones, and the
    stored spec replaced, in one transaction."""
    known = {row[0] for row in conn.execute("SELECT match_id FROM matches")}
    start = (conn.execute("SELECT max(match) FROM matches").fetchone()[0] or 0) + 1
    new = [m for m in spec.matches() if m.match_id not in known]
    with conn:
        conn.executemany(
            "INSERT INTO matches (match, match_id, seller, buyer, disclosure, config) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (start + k, m.match_id, m.seller, m.buyer, m.disclosure, m.config)
                for k, m in enumerate(new)
            ],
        )
        conn.execute("UPDATE meta SET value = ? WHERE key = 'spec'", (spec_json,))


def _check_columns(conn: sqlite3.Connection, path: Path) -> None:
    missing = Layout(conn).missing_columns()
    if missing:
        raise StoreError(
            f"{path}: results of another version of this tool (no {', '.join(missing)} column)"
        )


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0)
    # WAL keeps readers (a report) and the writer (a running tournament) out of each other's
    # way; synchronous=NORMAL still never loses a committed transaction to a killed process.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)
    return conn


def _spec_diff(old: dict, new: dict) -> str:
    keys = []
    for section in sorted(set(old) | set(new)):
        a, b = old.get(section, {}), new.get(section, {})
        if not (isinstance(a, dict) and isinstance(b, dict)):
            if a != b:
                keys.append(section)
            continue
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                keys.append(f"{section}.{key}")
    return "differs in " + ", ".join(keys) if keys else "differs"


_TURN_FIELDS: dict[str, type | tuple[type, ...]] = {
    "turn": Integral,
    "seller_text": str,
    "seller_violation": str,
    "seller_error": str,
    "buyer": Integral,
    "buyer_text": str,
    "buyer_violation": str,
    "buyer_error": str,
    "buyer_left": (bool, np.bool_),
}
_TRADE_FIELDS: dict[str, type] = {"buyer": Integral, "product": Integral, "price": Real}


def transcript_problem(turns: object) -> str | None:
    """Why ``turns`` is not a transcript as a run keeps it (a list of ``TurnRecord.to_dict()``
    records, what ``arena show``, the viewer and the exports read), in a few words; None if
    it is one."""
    if not isinstance(turns, list):
        return f"{_short(turns)} is not a list of turn records"
    for k, rec in enumerate(turns, 1):
        if not isinstance(rec, dict):
            return f"turn {k} is {_short(rec)}, not a turn record"
        for key, kind in _TURN_FIELDS.items():
            if key not in rec:
                return f"turn {k} has no {key}"
            if not _is(rec[key], kind):
                return f"turn {k} has {key} {_short(rec[key])}"
        if "trade" not in rec:
            return f"turn {k} has no trade"
        trade = rec["trade"]
        if trade is not None:
            if not isinstance(trade, dict):
                return f"turn {k} has trade {_short(trade)}"
            for key, kind in _TRADE_FIELDS.items():
                if not _is(trade.get(key), kind):
                    return f"turn {k} has a trade with {key} {_short(trade.get(key))}"
        for key in ("seller_prompt", "buyer_prompt"):
            if not isinstance(rec.get(key, ""), str):
                return f"turn {k} has {key} {_short(rec[key])}"
    return None


def _is(value: object, kind: type | tuple[type, ...]) -> bool:
    """``isinstance``, where a bool is no number."""
    if kind is Integral or kind is Real:
        return isinstance(value, kind) and not isinstance(value, bool | np.bool_)
    return isinstance(value, kind)


def _short(value: object) -> str:
    """A value as a few characters of JSON (of its repr where it is no JSON)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = [
    "ResultStore",
    "StoreError",
    "agents_problem",
    "check_spec",
    "corrupt",
    "extends",
    "package_versions",
    "transcript_problem",
]
