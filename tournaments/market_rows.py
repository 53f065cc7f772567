"""How a run folder stores its market rows: one SQLite row per unit, one column per metric.

A unit (the markets ``start..stop-1`` of one match) is one row of the ``unit_rows`` table,
and each stored metric is a column holding that unit's values as one little-endian
float64 BLOB, in market order (a NaN stays a NaN)::

    unit_rows    (match number, start, stop, <metric> BLOB for every metric of
                  tournaments.types.STORED_METRICS)

Reading a run is then a few hundred BLOBs rather than hundreds of thousands of rows: the
480,000 market rows of the default tournament load in well under a tenth of a second,
where one SQLite row per market took about 1.3 s (most of it spent per value), and the
driver of a tournament writes one row per unit instead of a thousand.

Run folders written before this layout hold a ``markets`` table with one row per market
(``match, market, <metric> REAL ...``, a NaN stored as NULL). They keep working: a folder
uses the layout it was created with, for reading and for resuming alike (``Layout``).

Rows that are not what this tool writes (a unit naming no match, bounds that are no whole
numbers, overlapping units, a BLOB of the wrong length) are refused as ``CorruptRows``,
found by checks over whole columns before anything the size of the rows is made.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator, Sequence
from itertools import repeat

import numpy as np

from tournaments.types import STORED_METRICS, UnitResult

UNIT_TABLE = f"""
CREATE TABLE IF NOT EXISTS unit_rows (
    match INTEGER NOT NULL, start INTEGER NOT NULL, stop INTEGER NOT NULL,
    {", ".join(f"{m} BLOB NOT NULL" for m in STORED_METRICS)},
    PRIMARY KEY (match, start)
);
"""

LEGACY_TABLE = "markets"
"""The one-row-per-market table of older run folders."""

_FLOAT = np.dtype("<f8")


class CorruptRows(ValueError):
    """Stored market rows that this tool did not write so: they cannot be read back."""


class Layout:
    """The market rows of one open database, in whichever layout its folder was created."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self.legacy = LEGACY_TABLE in tables

    @classmethod
    def create(cls, conn: sqlite3.Connection) -> Layout:
        """The layout of a writable database: a new one gets ``unit_rows``."""
        layout = cls(conn)
        if not layout.legacy:
            conn.executescript(UNIT_TABLE)
        return layout

    @property
    def table(self) -> str:
        return LEGACY_TABLE if self.legacy else "unit_rows"

    def missing_columns(self) -> list[str]:
        """Columns this version needs that the stored table lacks ([] for a new database)."""
        have = [row[1] for row in self.conn.execute(f"PRAGMA table_info({self.table})")]
        keys = ("match", "market") if self.legacy else ("match", "start", "stop")
        need = (*keys, *STORED_METRICS)
        return [c for c in need if c not in have] if have else []

    # ------------------------------------------------------------------ writing
    def insert(self, match: int, result: UnitResult) -> None:
        """Store one unit's rows (the caller holds the transaction)."""
        u = result.unit
        if self.legacy:
            # Column lists zipped at C speed; SQLite stores a NaN as NULL.
            rows = zip(repeat(match, u.stop - u.start), range(u.start, u.stop),
                       *result.table.tolist(), strict=True)  # fmt: skip
            self.conn.executemany(
                f"INSERT INTO {LEGACY_TABLE} VALUES ({', '.join('?' * (2 + len(STORED_METRICS)))})",
                rows,
            )
            return
        table = np.asarray(result.table, dtype=_FLOAT)
        if table.shape != (len(STORED_METRICS), u.stop - u.start):
            raise ValueError(f"unit {u.match_id}@{u.start}: table of shape {table.shape}")
        self.conn.execute(
            f"INSERT INTO unit_rows VALUES ({', '.join('?' * (3 + len(STORED_METRICS)))})",
            (match, u.start, u.stop, *(np.ascontiguousarray(col).tobytes() for col in table)),
        )

    # ------------------------------------------------------------------ reading
    def columns(
        self, metrics: Sequence[str], numbers: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """(match position, market, {metric: values}) of every stored market, sorted by
        (match position, market); ``numbers``: the stored match numbers, in position order.
        Rows this tool did not write so are CorruptRows."""
        if self.legacy:
            return self._legacy_columns(metrics, numbers)
        # With no metric asked for, one is still read: its lengths bound the rows.
        read = list(metrics) or [STORED_METRICS[0]]
        rows = self.conn.execute(
            "SELECT " + ", ".join(["match", "start", "stop", *read]) + " FROM unit_rows"
        ).fetchall()
        order, pos, start, stop = _unit_keys(rows, numbers)
        sizes = (stop - start).tolist()
        values = {}
        for k, name in enumerate(read):
            parts = [_floats(rows[i][3 + k], n, name)
                     for i, n in zip(order.tolist(), sizes, strict=True)]  # fmt: skip
            values[name] = np.concatenate(parts) if parts else np.zeros(0)
        match = np.repeat(pos, sizes)
        bounds = zip(start.tolist(), stop.tolist(), strict=True)
        market = np.concatenate([np.arange(s, e) for s, e in bounds] or [np.zeros(0, np.int64)])
        return match, market.astype(np.int64), {name: values[name] for name in metrics}

    def _legacy_columns(self, metrics: Sequence[str], numbers: np.ndarray):
        cursor = self.conn.execute(
            "SELECT " + ", ".join(["match", "market", *metrics]) + f" FROM {LEGACY_TABLE}"
        )
        # In slices: the Python rows of a whole run would take several times the memory of
        # the array. SQLite's NULL (a stored NaN) becomes NaN.
        parts = [np.zeros((0, 2 + len(metrics)))]
        try:
            while rows := cursor.fetchmany(1 << 15):
                parts.append(np.array(rows, dtype=float))
        except (TypeError, ValueError):
            raise CorruptRows(f"{LEGACY_TABLE} holds a value that is not a number") from None
        data = np.concatenate(parts)
        with np.errstate(invalid="ignore"):
            keys = data[:, :2].astype(np.int64)
        if (keys != data[:, :2]).any() or (keys[:, 1] < 0).any():
            raise CorruptRows(f"{LEGACY_TABLE} holds a match or market that is no whole number")
        match = match_positions(numbers, keys[:, 0], f"{LEGACY_TABLE}.match")
        market = keys[:, 1]
        order = np.lexsort((market, match))
        columns = {name: np.ascontiguousarray(data[order, 2 + k])
                   for k, name in enumerate(metrics)}  # fmt: skip
        return match[order], market[order], columns

    def check(self, numbers: np.ndarray) -> None:
        """Refuse (CorruptRows) stored rows that ``columns`` or ``rows`` would refuse, by a
        look at their keys and lengths only (what an export checks before it writes, and a
        resumed run before it stores); ``numbers`` as for ``columns``."""
        if self.legacy:
            bad = self.conn.execute(
                f"SELECT match, market FROM {LEGACY_TABLE} WHERE typeof(match) != 'integer' "
                "OR typeof(market) != 'integer' OR market < 0 LIMIT 1"
            ).fetchone()
            if bad is not None:
                raise CorruptRows(f"{LEGACY_TABLE} holds match {bad[0]!r}, market {bad[1]!r}")
            stored = [r[0] for r in self.conn.execute(f"SELECT DISTINCT match FROM {LEGACY_TABLE}")]
            match_positions(numbers, np.array(stored, np.int64), f"{LEGACY_TABLE}.match")
            return
        # length() of a BLOB reads its size, not its bytes.
        lengths = [f"CASE typeof({m}) WHEN 'blob' THEN length({m}) ELSE -1 END"
                   for m in STORED_METRICS]  # fmt: skip
        rows = self.conn.execute(
            f"SELECT match, start, stop, {', '.join(lengths)} FROM unit_rows"
        ).fetchall()
        order, _, start, stop = _unit_keys(rows, numbers)
        if not rows:
            return
        got = np.array([r[3:] for r in rows], np.int64)[order]
        wrong = got != (stop - start)[:, None] * _FLOAT.itemsize
        if wrong.any():
            i, k = np.argwhere(wrong)[0]
            size = "no BLOB" if got[i, k] < 0 else f"{got[i, k]} bytes"
            raise CorruptRows(_length_error(STORED_METRICS[k], int(stop[i] - start[i]), size))

    def row(self, match: int, market: int) -> dict[str, float] | None:
        """The stored metrics of one market (None if it is not stored)."""
        cols = ", ".join(STORED_METRICS)
        if self.legacy:
            row = self.conn.execute(
                f"SELECT {cols} FROM {LEGACY_TABLE} WHERE match = ? AND market = ?",
                (match, market),
            ).fetchone()
            if row is None:
                return None
            return {c: (math.nan if v is None else v)
                    for c, v in zip(STORED_METRICS, row, strict=True)}  # fmt: skip
        row = self.conn.execute(
            f"SELECT start, stop, {cols} FROM unit_rows WHERE match = ? AND start <= ? "
            "AND stop > ?",
            (match, market, market),
        ).fetchone()
        if row is None:
            return None
        start, stop, *blobs = row
        if type(start) is not int or type(stop) is not int:
            raise CorruptRows(
                f"unit_rows of match number {match} hold markets {start!r} to {stop!r}"
            )
        return {name: float(_floats(blob, stop - start, name)[market - start])
                for name, blob in zip(STORED_METRICS, blobs, strict=True)}  # fmt: skip

    def count(self) -> int:
        """Stored market rows."""
        if self.legacy:
            return self.conn.execute(f"SELECT count(*) FROM {LEGACY_TABLE}").fetchone()[0]
        total = self.conn.execute("SELECT coalesce(sum(stop - start), 0) FROM unit_rows")
        return total.fetchone()[0]

    def rows(self, numbers: Sequence[int]) -> Iterator[tuple]:
        """Every stored market as (match number, market, *metrics), a NaN as None: match by
        match in the order of ``numbers``, markets in order."""
        metrics = ", ".join(STORED_METRICS)
        for number in numbers:
            if self.legacy:
                yield from self.conn.execute(
                    f"SELECT match, market, {metrics} FROM {LEGACY_TABLE} WHERE match = ? "
                    "ORDER BY market",
                    (number,),
                )
                continue
            cursor = self.conn.execute(
                f"SELECT start, stop, {metrics} FROM unit_rows WHERE match = ? ORDER BY start",
                (number,),
            )
            for start, stop, *blobs in cursor:
                cols = [_floats(b, stop - start, name).tolist()
                        for b, name in zip(blobs, STORED_METRICS, strict=True)]  # fmt: skip
                for k, values in enumerate(zip(*cols, strict=True)):
                    yield (number, start + k, *(None if v != v else v for v in values))


def int_column(values: Sequence, column: str) -> np.ndarray:
    """A stored column of whole numbers as int64; a value of another type (text, a
    fraction, NULL) is CorruptRows."""
    out = np.array(values)
    if out.dtype.kind != "i":
        if not len(values):
            return np.zeros(0, np.int64)
        bad = next((v for v in values if type(v) is not int), values[0])
        raise CorruptRows(f"{column} {bad!r} is not a whole number")
    return out.astype(np.int64, copy=False)


def match_positions(numbers: np.ndarray, stored: np.ndarray, column: str) -> np.ndarray:
    """The position in ``numbers`` (the stored match numbers, in position order) of each
    match number of ``stored``; one that names no match is CorruptRows. Found by search,
    not by a table as long as the largest number: a match number is any integer."""
    order = np.argsort(numbers, kind="stable")
    ranked = numbers[order]
    at = np.searchsorted(ranked, stored)
    found = at < len(ranked)
    found[found] = ranked[at[found]] == stored[found]
    if not found.all():
        raise CorruptRows(f"{column} {stored[~found][0]} names no match")
    return order[at]


def _unit_keys(
    rows: Sequence[tuple], numbers: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, match position, start, stop) of unit rows ``(match, start, stop, ...)``, the
    last three in (match position, start) order, ``order`` the rows' indices in it. Keys
    that are not whole numbers, naming no match, bounds that are no run of markets, and
    units that overlap (a market stored twice) are CorruptRows."""
    number, start, stop = (int_column([r[k] for r in rows], f"unit_rows.{c}")
                           for k, c in enumerate(("match", "start", "stop")))  # fmt: skip
    pos = match_positions(numbers, number, "unit_rows.match")
    order = np.lexsort((start, pos))
    number, pos, start, stop = number[order], pos[order], start[order], stop[order]
    bad = np.flatnonzero((start < 0) | (stop < start))
    if bad.size:
        k = bad[0]
        raise CorruptRows(
            f"unit_rows of match number {number[k]} hold markets {start[k]} to {stop[k]}"
        )
    over = np.flatnonzero((pos[1:] == pos[:-1]) & (start[1:] < stop[:-1]))
    if over.size:
        k = over[0]
        raise CorruptRows(
            f"unit_rows of match number {number[k]} overlap: the units of markets "
            f"{start[k]}-{stop[k] - 1} and {start[k + 1]}-{stop[k + 1] - 1} both hold market "
            f"{start[k + 1]}"
        )
    return order, pos, start, stop


def _length_error(name: str, n: int, size: str) -> str:
    return f"stored {name} of a unit of {n} markets has {size}"


def _floats(blob: bytes, n: int, name: str) -> np.ndarray:
    if not isinstance(blob, bytes) or len(blob) != n * _FLOAT.itemsize:
        size = f"{len(blob)} bytes" if isinstance(blob, bytes) else "no BLOB"
        raise CorruptRows(_length_error(name, n, size))
    return np.frombuffer(blob, _FLOAT)


__all__ = ["CorruptRows", "Layout", "int_column", "match_positions"]
