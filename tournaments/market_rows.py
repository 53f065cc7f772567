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
    """A stored unit's values cannot be read back (a BLOB of the wrong length)."""


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
        self, metrics: Sequence[str], number: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """(match position, market, {metric: values}) of every stored market, sorted by
        (match position, market); ``number`` maps a stored match number to its position."""
        if self.legacy:
            return self._legacy_columns(metrics, number)
        cursor = self.conn.execute(
            "SELECT " + ", ".join(["match", "start", "stop", *metrics]) + " FROM unit_rows"
        )
        units = sorted(((int(number[m]), start, stop, blobs) for m, start, stop, *blobs in cursor),
                       key=lambda u: (u[0], u[1]))  # fmt: skip
        sizes = [stop - start for _, start, stop, _ in units]
        match = np.repeat(np.array([u[0] for u in units], np.int64), sizes)
        market = (np.concatenate([np.arange(s, e) for _, s, e, _ in units])
                  if units else np.zeros(0, np.int64))  # fmt: skip
        columns = {}
        for k, name in enumerate(metrics):
            parts = [_floats(u[3][k], n, name) for u, n in zip(units, sizes, strict=True)]
            columns[name] = np.concatenate(parts) if parts else np.zeros(0)
        return match, market.astype(np.int64), columns

    def _legacy_columns(self, metrics: Sequence[str], number: np.ndarray):
        cursor = self.conn.execute(
            "SELECT " + ", ".join(["match", "market", *metrics]) + f" FROM {LEGACY_TABLE}"
        )
        # In slices: the Python rows of a whole run would take several times the memory of
        # the array. SQLite's NULL (a stored NaN) becomes NaN.
        parts = [np.zeros((0, 2 + len(metrics)))]
        while rows := cursor.fetchmany(1 << 15):
            parts.append(np.array(rows, dtype=float))
        data = np.concatenate(parts)
        match = number[data[:, 0].astype(np.int64)]
        market = data[:, 1].astype(np.int64)
        order = np.lexsort((market, match))
        columns = {name: np.ascontiguousarray(data[order, 2 + k])
                   for k, name in enumerate(metrics)}  # fmt: skip
        return match[order], market[order], columns

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


def _floats(blob: bytes, n: int, name: str) -> np.ndarray:
    if not isinstance(blob, bytes) or len(blob) != n * _FLOAT.itemsize:
        size = len(blob) if isinstance(blob, bytes) else type(blob).__name__
        raise CorruptRows(f"stored {name} of a unit of {n} markets has {size} bytes")
    return np.frombuffer(blob, _FLOAT)


__all__ = ["CorruptRows", "Layout"]
