"""Tournament specs (TOML) and the round robin they describe.

The registry (and with it every policy) is imported only to check or host entries, so
that reading a stored spec for a report stays cheap.

A spec::

    [tournament]
    name = "default"
    seed = 0
    markets = 1000                 # markets per match
    sellers = ["posted_price", "greedy_matcher", ...]
    buyers = ["truthful", "strategic", "strategic+disclosed", "mixed"]
    disclosure = ["hidden", "mandatory"]
    reference = "posted_price"     # the entry pinned on the rating scale
    checkpoints = ["ck/buyer"]      # optional: checkpoints named in populations only
    agents = ["my_agents.py"]       # optional: files (or modules) registering entries

    [populations]                  # optional short names for buyer populations
    mixed = "noisy_human:0.5,strategic:0.5"

    [configs.small]                # one table per market config (MarketConfig schema)
    buyers = 8
    ...

Checkpoints: a checkpoint directory (``model.safetensors`` + ``config.json``) stands
wherever a registry name does in ``sellers`` and ``buyers`` (a path containing ``/``,
relative to the spec's folder; ``PATH+disclosed`` for the disclosing variant of an agent
buyer). It plays under the name in its config.json, so moving it changes nothing; a
population names it by that name once it is listed in ``checkpoints``. The spec carries
the checkpoints' bytes to every worker, and a run folder stores their names and weights
hashes, so a changed checkpoint is a different spec.

Entries of one's own: ``agents`` lists Python files (relative to the spec's folder) or
dotted module names that register entries, as ``arena tournament --agents FILE.py``
would load them (``spec_agents``); the spec then runs with no flag, and a resumed run
finds them again. Where the modules are named does not make a spec another one; the
run folder records each module and a hash of its file beside the spec, refuses to
finish a run with changed code for an entry (``ResultStore.record_agents``), and
``arena report`` lists the modules.

Words: a *market* is one market instance; a *config* is a market structure (a
``MarketConfig``, one ``[configs.NAME]`` table). Spec files written before that
rename name the tables ``[markets.NAME]``; they are read the same.

The round robin is every seller x buyer entry x disclosure rule x config. Market
instances depend only on (config, tournament seed, index): every pairing, and
every disclosure rule, meet the same markets. Policy seeds derive from the
tournament seed and the match's coordinates (``policy_seed``), so results do not
depend on which worker plays a match or when.

Length: about 450 lines, most of them the checks of every key of a spec, each with its
own message (a broken spec is one clear line, never a traceback); they read best beside
the schema they check, so they stay here.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from agents.command import is_file_target
from arena import limits
from arena.config import DISCLOSURE_RULES, MarketConfig, read_toml
from arena.seeding import keyed_seed
from arena.words import plural
from tournaments.types import Match

_TOP_KEYS = {"tournament", "populations", "configs"}
_OLD_CONFIGS_KEY = "markets"  # the [configs.NAME] tables' name before the rename
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
    "checkpoints",
    "prompts",
    "agents",
}


class SpecError(ValueError):
    """A spec that cannot be run; the message names the file and the problem."""


@dataclass(frozen=True)
class TournamentSpec:
    name: str
    seed: int
    markets: int
    sellers: tuple[str, ...]
    buyers: tuple[str, ...]
    disclosure: tuple[str, ...]
    configs: tuple[tuple[str, MarketConfig], ...]
    populations: tuple[tuple[str, str], ...] = ()
    reference: str | None = None
    transcripts: int = 2  # markets per match whose full transcripts are kept
    prompts: bool = False  # kept transcripts also hold what each side was shown (for export)
    hosted: tuple[str, ...] = ()  # entries served from their own actor (besides the registry's)
    checkpoints: tuple[tuple[str, str], ...] = ()  # (entry name, weights sha256) of checkpoints
    # The checkpoints' bytes, carried to every worker (no shared filesystem needed); a
    # stored spec has only their names and hashes.
    checkpoint_data: tuple = dataclasses.field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        """Checks of the spec's own structure; ``check_entries`` checks names against the
        registry (a stored spec is rebuilt without it, for reports of any run)."""
        _check(isinstance(self.name, str), "tournament.name must be a string")
        _check(self.name.strip() != "", "tournament.name must not be empty")
        for key, low in (("seed", 0), ("markets", 1), ("transcripts", 0)):
            value = getattr(self, key)
            _check(_is_int(value) and value >= low, _expected(key, low, value))
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
        _check(len(self.configs) > 0, "no [configs.NAME] table")
        for name in (*self.sellers, *self.buyers, *(n for n, _ in self.configs)):
            _check(
                isinstance(name, str) and name and "|" not in name and "#" not in name,
                f"name {name!r}: names are non-empty and contain no '|' or '#'",
            )
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

    def register_checkpoints(self) -> None:
        """Make the spec's checkpoints entries of this process's registry (driver, workers,
        policy hosts alike)."""
        from agents import registry

        for data in self.checkpoint_data:
            _entry(lambda d=data: registry.register_checkpoint(d))

    def check_entries(self) -> None:
        """Every seller, buyer entry and population names something the registry builds."""
        from agents import registry
        from agents.env import check_kinds

        self.register_checkpoints()
        pops = dict(self.populations)
        for name in pops:
            if name in {e.name for e in registry.entries()}:
                raise SpecError(
                    f"population {name!r} has the name of a registered entry; rename it"
                )
        for mix in pops.values():  # every population, played or not
            _entry(lambda m=mix: registry.make_buyers(m))
        played = [("sellers", name, name) for name in self.sellers]
        for name in self.sellers:
            _entry(lambda n=name: registry.get(n, "seller"))
        configs = [cfg for _, cfg in self.configs]
        for name in self.buyers:
            mix = pops.get(name, name)
            if name not in pops and registry.is_population(name):
                raise SpecError(
                    f"tournament.buyers: {name!r} is a population; name it in [populations] "
                    f'(mixed = "{name}") and list that name'
                )
            buyers = _entry(lambda m=mix: registry.make_buyers(m))
            members = buyers.names if registry.is_population(mix) else [mix.strip()]
            played += [("buyers", name, member) for member in members]
            # A population by kind whose one member no config lets play (the disclosure
            # study's share-0 and share-1 configs are fine beside others).
            _entry(
                lambda b=buyers, n=name: check_kinds(
                    b,
                    configs,
                    f"tournament.buyers {n!r}",
                    "a [configs.NAME] table",
                    drawn="of the spec's configs",
                )
            )
        self._check_market_sizes(played)

    def _check_market_sizes(self, played: list[tuple[str, str, str]]) -> None:
        """Every played entry (``(list, entry as listed, registry name)``) can play every
        config, as its policy class declares (``_market_problem``): a fixed-size policy in
        a spec of other sizes is one error naming the entry, its sizes and the config,
        before a run rather than a unit failing after a long one."""
        from agents import registry

        data = {d.meta()["policy"]["name"]: d for d in self.checkpoint_data}
        for key, listed, name in played:
            entry = registry.get(name)
            for config, cfg in self.configs:
                problem = _market_problem(entry, data.get(entry.base_name), cfg)
                if problem is None:
                    continue
                what = f"{listed!r}" if listed == name else f"{name!r} (a member of {listed!r})"
                if entry.base_name in data:
                    what += f" (checkpoint {data[entry.base_name].source})"
                raise SpecError(
                    f"tournament.{key}: {what} {problem}; configs.{config} has "
                    f"{plural(cfg.buyers, 'buyer')} and {plural(cfg.products, 'product')}: "
                    "give it configs of its size, or leave it out of this spec"
                )

    # ------------------------------------------------------------------ round robin
    def buyer_spec(self, buyer: str) -> str:
        """The registry spec of a buyer entry (a population name resolves to its mix)."""
        return dict(self.populations).get(buyer, buyer)

    def hosted_entries(self) -> list[tuple[str, str]]:
        """(side, entry) of every entry that runs in its own actor: the spec's ``hosted`` list
        and the entries the registry marks as expensive."""
        from agents import registry

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

    def matches(self) -> tuple[Match, ...]:
        """Every match of the round robin, sorted by match id (computed once per spec)."""
        return self._matches

    @cached_property
    def _matches(self) -> tuple[Match, ...]:
        out = []
        for config, cfg in self.configs:
            for rule in self.disclosure:
                mcfg = dataclasses.replace(cfg, disclosure=rule)
                for seller in self.sellers:
                    for buyer in self.buyers:
                        mid = f"{seller}|{buyer}|{rule}|{config}"
                        out.append(Match(mid, seller, buyer, rule, config, mcfg))
        return tuple(sorted(out, key=lambda m: m.match_id))

    def policy_seed(self, match: Match, side: str) -> int:
        """The root seed of one side's policies in a match, from (tournament seed, side,
        config); each policy then derives its own from its entry name
        (``agents.registry.policy_seed``). It leaves out the opponent and the disclosure rule
        on purpose: a policy draws the same noise whoever it meets and under every rule, so
        paired comparisons (seller vs seller on identical markets, mandatory vs hidden,
        NAME vs NAME+disclosed) measure policies and rules, not the dice."""
        return keyed_seed(self.seed, f"{side}|{match.config}")

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
                **({"prompts": True} if self.prompts else {}),
                "hosted": list(self.hosted),
                **({"reference": self.reference} if self.reference else {}),
                **({"checkpoints": dict(self.checkpoints)} if self.checkpoints else {}),
            },
            "populations": dict(self.populations),
            # The rule is the match's, not the config's: left out, as in a spec file.
            "configs": {
                name: {k: v for k, v in cfg.to_dict().items() if k != "disclosure"}
                for name, cfg in self.configs
            },
        }


def _name(t: dict) -> str:
    name = t.get("name", "tournament")
    _check(isinstance(name, str), f"tournament.name must be a string, got {name!r}")
    _check(name.strip() != "", "tournament.name must not be empty")
    return name


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_+\-][A-Za-z0-9_.+\-]*")


def check_run_name(name: str) -> None:
    """A spec's name names its run folder (``runs/NAME-seedS``), so it is a plain name:
    letters, digits, ``-``, ``_``, ``.``, ``+``, not starting with a dot."""
    _check(name != "", "tournament.name must not be empty")
    _check(
        _PLAIN_NAME.fullmatch(name) is not None,
        f"tournament.name {name!r}: it names the run folder, so only letters, digits, "
        "'-', '_', '.' and '+', not starting with '.'",
    )


def _expected(key: str, low: int, value: object) -> str:
    what = "a positive integer" if low == 1 else "a non-negative integer"
    return f"tournament.{key}: expected {what}, got {value!r}"


def _int_key(t: dict, key: str, default: int, low: int) -> int:
    value = t.get(key, default)
    _check(_is_int(value) and value >= low, _expected(key, low, value))
    return value


def _bool_key(t: dict, key: str, default: bool) -> bool:
    value = t.get(key, default)
    _check(isinstance(value, bool), f"tournament.{key} must be true or false, got {value!r}")
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


def _entry(build) -> Any:
    from agents import registry

    try:
        return build()
    except (registry.UnknownEntry, ValueError) as err:
        raise SpecError(str(err)) from None


def _market_problem(entry, data, cfg: MarketConfig) -> str | None:
    """Why ``entry`` cannot play the markets of ``cfg`` (None: it can), as its policy
    class declares with an optional ``market_problem(params, config)`` classmethod (e.g.
    ``agents.rl.fixed.FixedSizeSeller``): asked with the checkpoint's params for a
    checkpoint of this spec (``data``), with the entry's parameters for an entry whose
    factory is such a class. Any other entry is taken to play every size."""
    if data is not None:
        from agents.rl.checkpoint import market_problem

        return market_problem(data, cfg)
    factory = entry.factory
    while isinstance(factory, partial):
        factory = factory.func
    declared = getattr(factory, "market_problem", None) if isinstance(factory, type) else None
    return None if declared is None else declared(entry.all_params, cfg)


def _checkpoints(t: dict, base: str | None, stored_ok: bool) -> tuple[tuple, tuple]:
    """Resolve checkpoint paths in ``sellers``, ``buyers`` and ``checkpoints`` (a list of
    paths, relative to the spec's folder) to the names in their config.json, in place in
    ``t``; returns ((name, weights hash), ...) and the checkpoints' bytes. A stored spec
    (``stored_ok``) has ``checkpoints`` as a table of name = hash, kept as it is; a new
    spec may not claim checkpoints that way (no bytes would back them)."""
    from pathlib import Path

    stored = t.get("checkpoints", [])
    if isinstance(stored, dict):
        _check(
            stored_ok,
            "tournament.checkpoints: a list of checkpoint paths (a table of name = hash is "
            "what a run folder stores)",
        )
        _check(
            all(isinstance(k, str) and isinstance(v, str) for k, v in stored.items()),
            "tournament.checkpoints: a list of checkpoint paths",
        )
        return tuple(sorted(stored.items())), ()
    paths = _str_list(t, "checkpoints", [])
    found: dict[str, tuple[str, Any]] = {}

    def resolve(name: str, side: str | None = None) -> str:
        """The entry name of a checkpoint path (``name`` itself if it is not a path),
        listed as a ``side`` entry (None: in ``checkpoints``, any side)."""
        from agents import registry

        if not registry.looks_like_path(name):
            return name
        suffix = next((x for x in registry.VARIANT_SUFFIXES if name.endswith(x)), "")
        raw = name.removesuffix(suffix)
        path = Path(raw) if base is None or Path(raw).is_absolute() else Path(base) / raw
        from agents.rl.checkpoint import read_checkpoint

        try:
            data = read_checkpoint(path)
        except ValueError as err:
            raise SpecError(str(err)) from None
        meta = data.meta()
        entry = meta["policy"]["name"]
        _check(
            side in (None, meta["policy"]["side"]),
            f"tournament.{side}s: {name!r} is a {meta['policy']['side']} entry ({entry!r}), "
            f"not a {side}",
        )
        digest = meta["provenance"]["weights_sha256"]
        # Other weights, or the same weights played by another config: not one player.
        if entry in found and found[entry][1].identity != data.identity:
            raise SpecError(f"two different checkpoints are named {entry!r}")
        found[entry] = (digest, data)
        return entry + suffix

    for side in ("seller", "buyer"):
        t[side + "s"] = [resolve(n, side) for n in t[side + "s"]]
    for p in paths:
        resolve(p if "/" in p else "./" + p)
    return (
        tuple(sorted((k, v[0]) for k, v in found.items())),
        tuple(v[1] for _, v in sorted(found.items())),
    )


def _check_sides(t: dict, pops: dict, checkpoints: tuple) -> None:
    """A name listed both in ``sellers`` and in ``buyers`` whose side is known (a
    population, a checkpoint of this spec, a registered entry): an error saying which side
    it plays. A name known nowhere is left to ``TournamentSpec``'s check (both lists)."""
    from agents import registry

    sides = {}
    for data in checkpoints:
        policy = data.meta()["policy"]
        sides[policy["name"]] = policy["side"]
    for name in sorted(set(t["sellers"]) & set(t["buyers"])):
        side = "buyer" if name in pops else sides.get(name)
        if side is None:
            try:
                side = registry.get(name).side
            except (registry.UnknownEntry, ValueError):
                continue
        other = "seller" if side == "buyer" else "buyer"
        what = "buyer population" if name in pops else f"{side} entry"
        raise SpecError(f"tournament.{other}s: {name!r} is a {what}, not a {other}")


def spec_from_dict(
    data: dict[str, Any],
    *,
    check_entries: bool = True,
    base: str | None = None,
    **overrides: Any,
) -> TournamentSpec:
    """Build and validate a spec from parsed TOML (or ``to_dict``); ``overrides`` replace
    tournament keys. ``check_entries=False`` skips the registry check, the run-folder name
    and the size limits (``arena.limits``): a stored spec is rebuilt as it was run,
    whatever the registry holds now. ``base``: the folder that checkpoint paths are
    relative to (the spec file's)."""
    if _OLD_CONFIGS_KEY in data:
        _check("configs" not in data, "[configs.NAME] and [markets.NAME] tables: use one name")
        data = {("configs" if k == _OLD_CONFIGS_KEY else k): v for k, v in data.items()}
    unknown = sorted(set(data) - _TOP_KEYS)
    _check(not unknown, f"unknown table(s) {', '.join(unknown)}; known: {', '.join(_TOP_KEYS)}")
    t = data.get("tournament")
    _check(isinstance(t, dict), "no [tournament] table")
    unknown = sorted(set(t) - _TOURNAMENT_KEYS)
    _check(not unknown, f"unknown tournament key(s) {', '.join(unknown)}")
    t = {**t, **{k: v for k, v in overrides.items() if v is not None}}
    for key in ("sellers", "buyers"):
        _str_list(t, key, None)
    _agents_list(t)  # loaded by the command before the spec is read (``spec_agents``)
    disclosure = _str_list(t, "disclosure", ["hidden"])
    markets_per_match = _int_key(t, "markets", 1000, 1)
    transcripts = _int_key(t, "transcripts", 2, 0)
    _check(transcripts <= 100, f"tournament.transcripts: at most 100 per match, got {transcripts}")
    pops = data.get("populations", {})
    _check(
        isinstance(pops, dict) and all(isinstance(v, str) for v in pops.values()),
        '[populations] maps a name to a mix such as "a:0.5,b:0.5"',
    )
    tables = data.get("configs")
    _check(isinstance(tables, dict) and tables, "no [configs.NAME] table")
    configs = []
    for name, table in tables.items():
        _check(isinstance(table, dict), f"configs.{name} must be a table")
        _check(
            "disclosure" not in table,
            f"configs.{name}: set disclosure rules in tournament.disclosure, not per config",
        )
        try:
            configs.append((name, MarketConfig.from_dict(table)))
        except (TypeError, ValueError) as err:
            raise SpecError(f"configs.{name}: {err}") from None
    checkpoints, data_list = _checkpoints(t, base, stored_ok=not check_entries)
    if check_entries:
        _check_sides(t, pops, data_list)
    spec = TournamentSpec(
        name=_name(t),
        seed=_int_key(t, "seed", 0, 0),
        markets=markets_per_match,
        sellers=tuple(t["sellers"]),
        buyers=tuple(t["buyers"]),
        disclosure=tuple(disclosure),
        configs=tuple(configs),
        populations=tuple(sorted(pops.items())),
        reference=t.get("reference"),
        transcripts=transcripts,
        hosted=tuple(_str_list(t, "hosted", [])),
        checkpoints=checkpoints,
        checkpoint_data=data_list,
        prompts=_bool_key(t, "prompts", False),
    )
    if check_entries:
        # A new run (a stored spec is rebuilt as it was run, under the rules of its day).
        check_run_name(spec.name)
        n_matches = len(spec.sellers) * len(spec.buyers) * len(spec.disclosure) * len(configs)
        try:
            limits.check_markets(spec.markets, n_matches)
        except limits.LimitError as err:
            raise SpecError(str(err)) from None
        spec.check_entries()
    return spec


def stored_spec(data: dict[str, Any]) -> TournamentSpec:
    """A spec as a run folder stores it (``to_dict``, of this version or an earlier one),
    rebuilt as it was run: entries are not checked against today's registry. Earlier
    versions stored each config with its (unused) disclosure field; it is dropped."""
    tables = data.get("configs", data.get(_OLD_CONFIGS_KEY))
    if isinstance(tables, dict):
        key = "configs" if "configs" in data else _OLD_CONFIGS_KEY
        tables = {
            name: {k: v for k, v in t.items() if k != "disclosure"} if isinstance(t, dict) else t
            for name, t in tables.items()
        }
        data = {**data, key: tables}
    return spec_from_dict(data, check_entries=False)


def _agents_list(t: dict) -> list[str]:
    value = t.get("agents", [])
    _check(
        isinstance(value, list) and all(isinstance(x, str) and x.strip() for x in value),
        "tournament.agents must be a list of Python files (relative to the spec's folder) or "
        f"dotted module names, got {value!r}",
    )
    return value


def spec_agents(path: str) -> tuple[str, ...]:
    """The ``agents`` a spec file names, each file's path resolved against the spec's
    folder (a dotted module name as it is); SpecError naming the file when the spec cannot
    be read or the key is no list of names. The command loads them before it reads the
    spec itself, whose entry names may be theirs."""
    from pathlib import Path

    try:
        data = read_toml(path, "spec")
    except ValueError as err:
        raise SpecError(str(err)) from None
    t = data.get("tournament")
    if not isinstance(t, dict):
        return ()  # load_spec says what is wrong
    try:
        targets = _agents_list(t)
    except SpecError as err:
        raise SpecError(f"{path}: {err}") from None
    base = Path(path).parent
    return tuple(
        str(base / x) if is_file_target(x) and not Path(x).is_absolute() else x for x in targets
    )


def load_spec(path: str, **overrides: Any) -> TournamentSpec:
    """Read and validate a spec file; every problem is a SpecError naming the file."""
    try:
        data = read_toml(path, "spec")
    except ValueError as err:
        raise SpecError(str(err)) from None
    from pathlib import Path

    try:
        return spec_from_dict(data, base=str(Path(path).parent), **overrides)
    except SpecError as err:
        raise SpecError(f"{path}: {err}") from None
