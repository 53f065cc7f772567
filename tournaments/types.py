"""The run model's small types: a match, a unit of work and its result, the stored columns.

A match is one pairing of the round robin; its ``match_id`` (``seller|buyer|disclosure|
config``) is its one id, in the spec, the store, transcripts and reports. The store keeps a
match number beside it only as a short key for market rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arena.config import MarketConfig
from arena.metrics import METRICS

STORED_METRICS: tuple[str, ...] = METRICS
"""Columns stored per market: every metric of ``arena.metrics`` (definitions there)."""

KEY_COLUMNS: tuple[str, ...] = ("match_id", "market", "seller", "buyer", "disclosure", "config")
"""A market row's coordinates: its match (and the match's entries, rule and config name) and
the market's index among the config's instances."""

COLUMNS: tuple[str, ...] = KEY_COLUMNS + STORED_METRICS
"""Every column of an exported market row, in order."""


@dataclass(frozen=True)
class Match:
    """One pairing of the round robin: a seller entry against a buyer entry under one
    disclosure rule on one market config."""

    match_id: str
    """``seller|buyer|disclosure|config``: stable and human-readable."""
    seller: str
    buyer: str
    """A buyer entry or a population name."""
    disclosure: str
    config: str
    """The market config's name (its table in the spec)."""
    market_config: MarketConfig
    """That config with the match's disclosure rule."""


@dataclass(frozen=True)
class Unit:
    """Markets [start, stop) of one match."""

    match_id: str
    start: int
    stop: int


@dataclass
class UnitResult:
    """What a worker sends back for one unit."""

    unit: Unit
    table: np.ndarray
    """(len(STORED_METRICS), stop - start): one contiguous block to ship."""
    transcripts: dict[int, str]
    """Market index -> JSON list of turn records."""

    @property
    def metrics(self) -> dict[str, np.ndarray]:
        return dict(zip(STORED_METRICS, self.table, strict=True))
