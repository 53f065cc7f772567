"""Playing one unit of work: a slice of one match's markets. No Ray here.

``play_unit`` is a pure function of (spec, match, market range): the policies are
built from the registry with the match's seed, the markets are drawn from
(config, tournament seed, index), and the result is the same on any worker, in
any order, on any retry. ``MatchWorker`` wraps it with caches for a long-lived
process (a Ray actor, or the driver itself when Ray is off).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import numpy as np

from agents import registry
from agents.evaluate import evaluate_with_transcripts
from arena.generator import MarketBatch, generate_batch
from arena.metrics import welfare_bounds
from tournaments.remote import RemoteBuyer, RemoteSeller
from tournaments.spec import TournamentSpec
from tournaments.types import STORED_METRICS, Match, Unit, UnitResult

# Market slices (instances and their W*_T) a worker keeps for the next pairings.
MARKET_CACHE_UNITS = 16


def plan_units(spec: TournamentSpec, unit_markets: int = 1000) -> Iterator[Unit]:
    """Every unit of the round robin: slice by slice of markets, each in match-id order, so
    that consecutive units meet the same market instances (the workers' cache). The order
    changes no result. A generator: the plan of a run takes no memory, however many
    markets a match has (``count_units`` counts it)."""
    for start in range(0, spec.markets, unit_markets):
        for m in spec.matches():
            yield Unit(m.match_id, start, min(start + unit_markets, spec.markets))


def count_units(spec: TournamentSpec, unit_markets: int = 1000) -> int:
    """How many units ``plan_units`` yields."""
    return -(-spec.markets // unit_markets) * len(spec.matches())


def _close(*policies) -> None:
    for p in policies:
        if hasattr(p, "close"):
            p.close()


class MatchWorker:
    """Plays units; keeps the round robin and the oracle bounds it has computed."""

    def __init__(self, spec: TournamentSpec, hosts: dict | None = None) -> None:
        self.spec = spec
        spec.register_checkpoints()
        self.hosts = hosts or {}  # (side, entry) -> PolicyHost actor handle
        self.matches = {m.match_id: m for m in spec.matches()}
        self._markets_cache: dict[tuple[str, int, int], tuple[MarketBatch, np.ndarray]] = {}

    def ping(self) -> int:
        return 0

    def play(self, unit: Unit, hosts: dict | None = None) -> UnitResult:
        """Play one unit; ``hosts`` (when given) are the current actors of hosted entries."""
        if hosts is not None:
            self.hosts = hosts
        match = self.matches[unit.match_id]
        seeds = (self.spec.policy_seed(match, "seller"), self.spec.policy_seed(match, "buyer"))
        session = f"{unit.match_id}#{unit.start}"
        seller, buyer = self._policies(match, seeds, session)
        batch, w_star = self._markets(match, unit)
        # Transcripts of the first ``spec.transcripts`` markets are kept during this very
        # play (no market is replayed, so a language model writes each message once).
        keep = range(0, max(0, min(unit.stop, self.spec.transcripts) - unit.start))
        try:
            metrics, kept = evaluate_with_transcripts(
                batch, seller, buyer, keep, w_star, prompts=self.spec.prompts
            )
        finally:
            _close(seller, buyer)
        transcripts = {k: json.dumps(turns) for k, turns in kept.items()}
        table = np.stack([np.asarray(metrics[name], dtype=float) for name in STORED_METRICS])
        return UnitResult(unit, table, transcripts)

    def _policies(self, match: Match, seeds: tuple[int, int], session: str):
        seller_host = self.hosts.get(("seller", match.seller))
        buyer_host = self.hosts.get(("buyer", match.buyer))
        if seller_host is not None:
            seller = RemoteSeller(seller_host, session, seeds[0])
        else:
            seller = registry.make(match.seller, "seller", seed=seeds[0])
        if buyer_host is not None:
            buyer = RemoteBuyer(buyer_host, session, seeds[1])
        else:
            buyer = registry.make_buyers(self.spec.buyer_spec(match.buyer), seed=seeds[1])
        return seller, buyer

    def _markets(self, match: Match, unit: Unit) -> tuple[MarketBatch, np.ndarray]:
        """The unit's markets and their W*_T. Every pairing and every disclosure rule meet
        the same instances (the rule lives in the config, not in the draw), so both are
        drawn and solved once per worker and reused with the match's config."""
        key = (match.config, unit.start, unit.stop)
        if key not in self._markets_cache:
            # Units come in match order, so a handful of recent slices covers the reuse and
            # memory stays bounded however many markets a match has.
            while len(self._markets_cache) >= MARKET_CACHE_UNITS:
                self._markets_cache.pop(next(iter(self._markets_cache)))
            batch = generate_batch(
                match.market_config, self.spec.seed, range(unit.start, unit.stop)
            )
            self._markets_cache[key] = (batch, welfare_bounds(batch))
        batch, w_star = self._markets_cache[key]
        return dataclasses.replace(batch, config=match.market_config), w_star
