"""What a spec, a training config or a flag may ask of one run, and how many markets a
unit of work holds.

A tournament is played in units (a slice of one match's markets, one worker call), so
the memory a run needs is the memory of one unit per worker, whatever the number of
markets per match. A unit's markets are played as one batch: its arrays hold a value
per (market, buyer, product), so the size that matters is B x N x M, not N and M alone
(the largest config, 10,000 buyers x 1,000 products, would need about 10 GB for a
single market). ``unit_markets`` sizes units to fit ``UNIT_MEMORY`` and refuses a
config whose single market does not.

The byte figures are upper estimates measured on the scripted policies with
``tracemalloc`` (the greedy matcher, the largest, peaks at about 700 bytes per
(market, buyer, product) while it plays a unit; a kept transcript at about 3.7 KB per
turn while it is played).
"""

from __future__ import annotations

import math

from arena.config import MarketConfig
from arena.words import plural

MAX_MARKETS_PER_MATCH = 1_000_000
"""``tournament.markets`` and ``--markets``."""
MAX_MARKET_ROWS = 100_000_000
"""Matches x markets per match: every row is stored, and a report reads them all."""
MAX_WORKERS = 256
"""``--workers``; an embedded local Ray is further held to this machine's CPUs."""

UNIT_MARKETS = 1000
"""Markets per unit when they fit (one worker call; the progress bar's step)."""
UNIT_MEMORY = 2 << 30
"""Bytes one unit may need while a worker plays it."""
BYTES_PER_PAIR = 1024
"""Per market and (buyer, product) pair while a unit plays (measured: up to ~700)."""
ORACLE_BYTES_PER_CELL = 24
"""W*_T solves one assignment per market over N buyers x (units in stock + N) columns:
the weight matrix and the solver's copy of it, 8 bytes a cell each, and some room."""
TRANSCRIPT_BYTES_PER_TURN = 4096
"""A kept transcript, per turn, while it is played and kept (measured: ~3.7 KB)."""


class LimitError(ValueError):
    """A run larger than this tool plays; the message names the limit."""


def size_text(n: float) -> str:
    """A byte count for a message: MB below 0.1 GB, GB above, any size."""
    if n >= 1e15:
        return "over 1,000,000 GB"
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def market_bytes(cfg: MarketConfig) -> int:
    """What one market of ``cfg`` adds to a unit's memory."""
    return cfg.buyers * cfg.products * BYTES_PER_PAIR


def oracle_bytes(cfg: MarketConfig) -> int:
    """Memory of one W*_T solve (one market at a time)."""
    n = cfg.buyers
    units = sum(min(k, n) for k in cfg.inventory_per_product)
    return n * (units + n) * ORACLE_BYTES_PER_CELL


def check_markets(markets: int, matches: int, what: str = "tournament.markets") -> None:
    """Markets per match and market rows of a run within the limits."""
    if markets > MAX_MARKETS_PER_MATCH:
        raise LimitError(
            f"{what}: at most {MAX_MARKETS_PER_MATCH:,} markets per match, got {markets:,}"
        )
    if markets * matches > MAX_MARKET_ROWS:
        raise LimitError(
            f"{matches:,} matches x {markets:,} markets = {markets * matches:,} market rows; "
            f"a run stores at most {MAX_MARKET_ROWS:,} (lower {what} or split the spec)"
        )


def check_workers(workers: int, local_cpus: int | None = None) -> None:
    """``workers`` within the limit; ``local_cpus``: the CPUs of an embedded local Ray."""
    if workers > MAX_WORKERS:
        raise LimitError(f"--workers: at most {MAX_WORKERS}, got {workers}")
    if local_cpus is not None and workers > local_cpus:
        raise LimitError(
            f"--workers {workers}: this machine has {plural(local_cpus, 'CPU')} for a local Ray "
            f"instance; use --workers {local_cpus} or fewer, or join a cluster with --address"
        )


def unit_markets(configs: list[tuple[str, MarketConfig]], transcripts: int) -> int:
    """The markets per unit of a run of ``configs`` (label, config) keeping ``transcripts``
    transcripts per match: ``UNIT_MARKETS``, or fewer where a unit of that many would not
    fit ``UNIT_MEMORY``. LimitError names the config's label when not even one market
    fits."""
    size = UNIT_MARKETS
    budget = size_text(UNIT_MEMORY)
    for name, cfg in configs:
        kept = transcripts * cfg.turns * TRANSCRIPT_BYTES_PER_TURN
        if kept > UNIT_MEMORY:
            raise LimitError(
                f"{name}: keeping {transcripts} transcripts of up to {cfg.turns:,} "
                f"turns needs about {size_text(kept)}, over the {budget} a unit may use; "
                "keep fewer transcripts or lower turns"
            )
        fixed = oracle_bytes(cfg) + kept
        room = UNIT_MEMORY - fixed
        per_market = market_bytes(cfg)
        if room < per_market:
            need = size_text(fixed + per_market)
            raise LimitError(
                f"{name}: one market of {cfg.buyers:,} buyers x {cfg.products:,} "
                f"products needs about {need}, over the {budget} a unit may use; "
                "lower buyers, products or inventory"
            )
        size = min(size, room // per_market)
    return max(1, math.floor(size))


__all__ = [
    "BYTES_PER_PAIR",
    "LimitError",
    "MAX_MARKETS_PER_MATCH",
    "MAX_MARKET_ROWS",
    "MAX_WORKERS",
    "UNIT_MARKETS",
    "UNIT_MEMORY",
    "check_markets",
    "check_workers",
    "market_bytes",
    "oracle_bytes",
    "spec_unit_markets",
    "unit_markets",
]


def spec_unit_markets(spec) -> int:
    """``unit_markets`` of a tournament spec (its configs named ``configs.NAME``)."""
    return unit_markets([(f"configs.{n}", c) for n, c in spec.configs], spec.transcripts)
