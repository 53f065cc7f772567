"""Tournament specs (TOML) and the round robin they describe.

A spec::

    [tournament]
    name = "default"
    seed = 0
    markets = 1000                 # markets per match
    sellers = ["posted_price", "greedy_matcher", ...]
    buyers = ["truthful", "strategic", "strategic+disclosed", "mixed"]
    disclosure = ["hidden", "mandatory"]
    reference = "posted_price"     # the entry pinned on the rating scale

    [populations]                  # optional short names for buyer populations
    mixed = "noisy_human:0.5,strategic:0.5"

    [markets.small]                # one table per market config (MarketConfig schema)
    buyers = 8
    ...

The round robin is every seller x buyer entry x disclosure rule x market config.
Market instances depend only on (market config, tournament seed, index): every
pairing, and every disclosure rule, meet the same markets. Policy seeds derive
from the tournament seed and the match's coordinates (``policy_seed``), so
results do not depend on which worker plays a match or when.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents import registry
from arena.config import DISCLOSURE_RULES, MarketConfig, read_toml

_TOP_KEYS = {"tournament", "populations", "markets"}
_TOURNAMENT_KEYS = {
    "name",
    "seed",
    "markets",
    "sellers",
    "buyers",
    "disclosure",
    "reference",
    "transcripts",
    "hosted",
}


class SpecError(ValueError):
    """A spec that cannot be run; the message names the file and the problem."""


@dataclass(frozen=True)
class Match:
    """One pairing of the round robin."""

    match_id: str  # seller|buyer|disclosure|market, stable and human-readable
    seller: str
    buyer: str  # an entry name or a population name
    disclosure: str
    market: str  # the market config's name
    config: MarketConfig  # with the match's disclosure rule


@dataclass(frozen=True)
class TournamentSpec:
    name: str
    seed: int
    markets: int
    sellers: tuple[str, ...]
    buyers: tuple[str, ...]
    disclosure: tuple[str, ...]
    market_configs: tuple[tuple[str, MarketConfig], ...]
    populations: tuple[tuple[str, str], ...] = ()
    reference: str | None = None
    transcripts: int = 2  # markets per match whose full transcripts are kept
    hosted: tuple[str, ...] = ()  # entries served from their own actor (besides the registry's)

    def __post_init__(self) -> None:
        _check(isinstance(self.name, str) and self.name != "", "tournament.name must be a string")
        _check(_is_int(self.seed) and self.seed >= 0, "tournament.seed must be an integer >= 0")
        _check(_is_int(self.markets) and self.markets >= 1, "tournament.markets must be >= 1")
        _check(
            _is_int(self.transcripts) and self.transcripts >= 0,
            "tournament.transcripts must be an integer >= 0",
        )
        for side, names in (("sellers", self.sellers), ("buyers", self.buyers)):
            _check(len(names) > 0, f"tournament.{side} is empty")
            dup = sorted({n for n in names if names.count(n) > 1})
            _check(not dup, f"tournament.{side} names {', '.join(dup)} twice")
        _check(len(self.disclosure) > 0, "tournament.disclosure is empty")
        for rule in self.disclosure:
            _check(
                rule in DISCLOSURE_RULES,
                f"unknown disclosure rule {rule!r}; known: {', '.join(DISCLOSURE_RULES)}",
            )
        _check(len(set(self.disclosure)) == len(self.disclosure), "a disclosure rule is twice")
        _check(len(self.market_configs) > 0, "no [markets.NAME] table")
        pops = dict(self.populations)
        for name in (*self.sellers, *self.buyers, *(n for n, _ in self.market_configs)):
            _check(
                isinstance(name, str) and name and "|" not in name and "#" not in name,
                f"name {name!r}: names are non-empty and contain no '|' or '#'",
            )
        for name in pops:
            if name in {e.name for e in registry.entries()}:
                raise SpecError(
                    f"population {name!r} has the name of a registered entry; rename it"
                )
        for name in self.sellers:
            _entry(lambda n=name: registry.get(n, "seller"))
        for name in self.buyers:
            _entry(lambda n=name: registry.make_buyers(pops.get(n, n)))
        both = set(self.sellers) & set(self.buyers)
        _check(not both, f"{', '.join(sorted(both))} is both a seller and a buyer entry")
        for name in self.hosted:
            _check(
                name in self.sellers or name in self.buyers,
                f"hosted entry {name!r} is not an entry of this tournament",
            )
        if self.reference is not None:
            _check(
                self.reference in self.sellers or self.reference in self.buyers,
                f"reference {self.reference!r} is not an entry of this tournament",
            )

    # ------------------------------------------------------------------ round robin
    def buyer_spec(self, buyer: str) -> str:
        """The registry spec of a buyer entry (a population name resolves to its mix)."""
        return dict(self.populations).get(buyer, buyer)

    def hosted_entries(self) -> list[tuple[str, str]]:
        """(side, entry) of every entry that runs in its own actor: the spec's ``hosted`` list
        and the entries the registry marks as expensive."""
        out = []
        for name in self.sellers:
            if name in self.hosted or registry.get(name, "seller").hosting == "actor":
                out.append(("seller", name))
        for name in self.buyers:
            spec = self.buyer_spec(name)
            own = name in self.hosted
            if not own and spec == name:
                own = registry.get(name, "buyer").hosting == "actor"
            if own:
                out.append(("buyer", name))
        return out

    def matches(self) -> list[Match]:
        out = []
        for market, cfg in self.market_configs:
            for rule in self.disclosure:
                mcfg = dataclasses.replace(cfg, disclosure=rule)
                for seller in self.sellers:
                    for buyer in self.buyers:
                        mid = f"{seller}|{buyer}|{rule}|{market}"
                        out.append(Match(mid, seller, buyer, rule, market, mcfg))
        return sorted(out, key=lambda m: m.match_id)

    def policy_seed(self, match: Match, side: str) -> int:
        """The root seed of one side's policies in a match, from (tournament seed, side,
        market config); each policy then derives its own from its entry name
        (``agents.registry.policy_seed``). It leaves out the opponent and the disclosure rule
        on purpose: a policy draws the same noise whoever it meets and under every rule, so
        paired comparisons (seller vs seller on identical markets, mandatory vs hidden,
        NAME vs NAME+disclosed) measure policies and rules, not the dice."""
        digest = hashlib.sha256(f"{side}|{match.market}".encode()).digest()
        ss = np.random.SeedSequence([self.seed, int.from_bytes(digest[:8], "little")])
        return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))

    def to_dict(self) -> dict[str, Any]:
        return {
            "tournament": {
                "name": self.name,
                "seed": self.seed,
                "markets": self.markets,
                "sellers": list(self.sellers),
                "buyers": list(self.buyers),
                "disclosure": list(self.disclosure),
                "transcripts": self.transcripts,
                "hosted": list(self.hosted),
                **({"reference": self.reference} if self.reference else {}),
            },
            "populations": dict(self.populations),
            "markets": {name: cfg.to_dict() for name, cfg in self.market_configs},
        }


def _name(t: dict) -> str:
    name = t.get("name", "tournament")
    _check(isinstance(name, str) and name.strip() != "", "tournament.name must be a string")
    return name


def _int_key(t: dict, key: str, default: int, low: int) -> int:
    value = t.get(key, default)
    _check(_is_int(value), f"tournament.{key} must be an integer, got {value!r}")
    _check(value >= low, f"tournament.{key} must be >= {low}, got {value}")
    return value


def _str_list(t: dict, key: str, default: list) -> list:
    value = t.get(key, default)
    _check(
        isinstance(value, list) and all(isinstance(x, str) for x in value),
        f"tournament.{key} must be a list of names, got {value!r}",
    )
    return value


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise SpecError(message)


def _entry(build) -> None:
    try:
        build()
    except (registry.UnknownEntry, ValueError) as err:
        raise SpecError(str(err)) from None


def spec_from_dict(data: dict[str, Any], **overrides: Any) -> TournamentSpec:
    """Build and validate a spec from parsed TOML; ``overrides`` replace tournament keys."""
    unknown = sorted(set(data) - _TOP_KEYS)
    _check(not unknown, f"unknown table(s) {', '.join(unknown)}; known: {', '.join(_TOP_KEYS)}")
    t = data.get("tournament")
    _check(isinstance(t, dict), "no [tournament] table")
    unknown = sorted(set(t) - _TOURNAMENT_KEYS)
    _check(not unknown, f"unknown tournament key(s) {', '.join(unknown)}")
    t = {**t, **{k: v for k, v in overrides.items() if v is not None}}
    for key in ("sellers", "buyers"):
        _str_list(t, key, None)
    disclosure = _str_list(t, "disclosure", ["hidden"])
    markets_per_match = _int_key(t, "markets", 1000, 1)
    transcripts = _int_key(t, "transcripts", 2, 0)
    _check(transcripts <= 100, f"tournament.transcripts: at most 100 per match, got {transcripts}")
    pops = data.get("populations", {})
    _check(
        isinstance(pops, dict) and all(isinstance(v, str) for v in pops.values()),
        '[populations] maps a name to a mix such as "a:0.5,b:0.5"',
    )
    markets = data.get("markets")
    _check(isinstance(markets, dict) and markets, "no [markets.NAME] table")
    configs = []
    for name, table in markets.items():
        _check(isinstance(table, dict), f"markets.{name} must be a table")
        _check(
            "disclosure" not in table,
            f"markets.{name}: set disclosure rules in tournament.disclosure, not per market",
        )
        try:
            configs.append((name, MarketConfig.from_dict(table)))
        except (TypeError, ValueError) as err:
            raise SpecError(f"markets.{name}: {err}") from None
    return TournamentSpec(
        name=_name(t),
        seed=_int_key(t, "seed", 0, 0),
        markets=markets_per_match,
        sellers=tuple(t["sellers"]),
        buyers=tuple(t["buyers"]),
        disclosure=tuple(disclosure),
        market_configs=tuple(configs),
        populations=tuple(sorted(pops.items())),
        reference=t.get("reference"),
        transcripts=transcripts,
        hosted=tuple(_str_list(t, "hosted", [])),
    )


def load_spec(path: str, **overrides: Any) -> TournamentSpec:
    """Read and validate a spec file; every problem is a SpecError naming the file."""
    try:
        data = read_toml(path, "spec")
    except ValueError as err:
        raise SpecError(str(err)) from None
    try:
        return spec_from_dict(data, **overrides)
    except SpecError as err:
        raise SpecError(f"{path}: {err}") from None
