"""A run's market rows as columns: what every analysis reads.

Rows are kept sorted by (match id, market), each match's rows contiguous, and the
match coordinates (seller, buyer, disclosure, config) are held once per match
rather than once per row::

    records.matches          MatchTable: match_id, seller, buyer, disclosure, config per match
    records.match            (rows,) int64: the row's match, an index into ``matches``
    records.market           (rows,) int64: the market's index among its config's instances
    records.metrics[name]    (rows,) float: the stored metrics (NaN where undefined)

``records[name]`` gives any column per row (coordinates expanded), so a ``Records``
reads like the mapping of columns that ``from_columns`` accepts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from tournaments.types import KEY_COLUMNS

MATCH_KEYS = ("seller", "buyer", "disclosure", "config")


@dataclass(frozen=True)
class MatchTable:
    """The coordinates of each match, sorted by match id."""

    match_id: tuple[str, ...]
    seller: tuple[str, ...]
    buyer: tuple[str, ...]
    disclosure: tuple[str, ...]
    config: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.match_id)

    def codes(self, key: str) -> tuple[list[str], np.ndarray]:
        """(sorted distinct values, each match's index into them) of one coordinate."""
        values = getattr(self, key)
        names = sorted(set(values))
        index = {v: k for k, v in enumerate(names)}
        return names, np.fromiter((index[v] for v in values), np.int64, len(values))


@dataclass(frozen=True, eq=False)
class Records(Mapping[str, np.ndarray]):
    """Every market row of a run (or any subset of them), as columns."""

    matches: MatchTable
    match: np.ndarray
    market: np.ndarray
    metrics: dict[str, np.ndarray]

    # ------------------------------------------------------------------ building
    @classmethod
    def from_columns(cls, columns: Mapping[str, np.ndarray]) -> Records:
        """Records from one array per column (``KEY_COLUMNS`` and float metrics), rows in any
        order; they are sorted by (match id, market)."""
        if isinstance(columns, Records):
            return columns
        match_ids = np.asarray([str(x) for x in columns["match_id"]], dtype=str)
        market = np.asarray(columns["market"], dtype=np.int64).reshape(-1)
        order = np.lexsort((market, match_ids)) if len(market) else np.zeros(0, np.int64)
        ids, first, match = np.unique(match_ids[order], return_index=True, return_inverse=True)
        keys = {
            k: tuple(str(columns[k][order[i]]) for i in first) for k in MATCH_KEYS
        }  # one value per match: its coordinates
        metrics = {
            name: np.asarray(col, dtype=float)[order]
            for name, col in columns.items()
            if name not in KEY_COLUMNS
        }
        table = MatchTable(tuple(str(x) for x in ids), **keys)
        return cls(table, match.astype(np.int64).reshape(-1), market[order], metrics)

    @classmethod
    def empty(cls, metric_names: tuple[str, ...] = ()) -> Records:
        table = MatchTable((), (), (), (), ())
        none = np.zeros(0, np.int64)
        return cls(table, none, none, {m: np.zeros(0) for m in metric_names})

    def take(self, rows: np.ndarray) -> Records:
        """The given rows (a boolean mask or sorted indices), matches kept as they are."""
        return Records(
            self.matches,
            self.match[rows],
            self.market[rows],
            {k: v[rows] for k, v in self.metrics.items()},
        )

    # ------------------------------------------------------------------ reading
    @property
    def rows(self) -> int:
        return len(self.market)

    def per_row(self, key: str) -> np.ndarray:
        """A match coordinate (or ``match_id``) for every row, as an object array."""
        return np.asarray(getattr(self.matches, key), dtype=object)[self.match]

    def __getitem__(self, name: str) -> np.ndarray:
        if name == "market":
            return self.market
        if name == "match_id" or name in MATCH_KEYS:
            if len(self.matches) == 0:
                return np.zeros(0, dtype=object)
            return self.per_row(name)
        return self.metrics[name]

    def __iter__(self) -> Iterator[str]:
        yield from KEY_COLUMNS
        yield from self.metrics

    def __len__(self) -> int:
        return len(KEY_COLUMNS) + len(self.metrics)
