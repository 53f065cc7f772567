"""League configs (``arena league CONFIG.toml``): the ``[league]``, ``[seller]``,
``[buyer]``, ``[tournament]``, ``[populations]`` and ``[configs.NAME]`` tables, checked
into a ``LeagueConfig`` with one clear error per problem (``LeagueError``). The league
itself is ``tournaments.league``."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.config import read_toml
from tournaments.metastrategy import META_STRATEGIES
from tournaments.spec import SpecError, TournamentSpec, spec_from_dict

SIDES = ("seller", "buyer")


class LeagueError(ValueError):
    """A league that cannot start or go on; one line for the command line."""


# ---------------------------------------------------------------------- config
@dataclass(frozen=True)
class SideConfig:
    """One side of the league: its learners, its initial pool, its best responses."""

    side: str
    base: Any
    """The ``TrainConfig`` every learner of the side starts from (its market family and
    hyper-parameters, with the ``[SIDE.train]`` overrides); a round sets ``name``,
    ``seed``, ``iterations``, ``init`` and ``opponents``."""
    pool: tuple[str, ...]
    """The initial pool: registry names, population names (buyers) or checkpoint paths."""
    iterations: int
    """PPO iterations of each learner in each round."""
    init: str = ""
    """Round one's starting checkpoint (a directory; "": fresh weights and the base
    config's warm start)."""
    exploit_iterations: int = 10
    """PPO iterations of the best response trained against the other side's newest
    snapshot."""
    exploit_init: str = ""
    """The best response's starting checkpoint ("": fresh weights, no warm start)."""


@dataclass(frozen=True)
class LeagueConfig:
    """Everything a league depends on (with the seeds, it fixes every number)."""

    name: str
    seller: SideConfig
    buyer: SideConfig
    tournament: dict[str, Any]
    """The round robin's spec without its entries: ``tournament`` (seed, markets,
    disclosure, reference, ...), ``populations`` and ``configs`` tables."""
    seed: int = 0
    """Root seed of learners and best responses (the markets use the tournament's)."""
    rounds: int = 3
    meta_strategy: str = "nash"
    """uniform | nash | prioritized (see ``tournaments.metastrategy``)."""
    uniform_mix: float = 0.25
    """Share of the uniform distribution mixed into the meta-strategy's weights."""
    power: float = 2.0
    """Exponent of ``prioritized``."""
    learners: int = 1
    """Learners per side per round (each with its own seed); all are frozen into the
    pool and the best-rated is the side's newest snapshot."""
    prefix: str = ""
    """Start of the snapshots' entry names ("": the league's name)."""
    rating_rounds: int = 200
    """Bootstrap rounds of the ratings."""
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        # Strings before anything reads them as one (a TOML ``name = 5`` would otherwise
        # end in an AttributeError from the entry-name check below).
        for name in ("name", "prefix", "meta_strategy"):
            x = getattr(self, name)
            if not isinstance(x, str):
                raise ValueError(f"league.{name}: expected a string, got {x!r}")
        if self.meta_strategy not in META_STRATEGIES:
            raise ValueError(
                f"league.meta_strategy: {self.meta_strategy!r}; known: "
                + ", ".join(META_STRATEGIES)
            )
        if not (_is_number(self.uniform_mix) and 0.0 <= self.uniform_mix <= 1.0):
            raise ValueError(
                f"league.uniform_mix: expected a number in [0, 1], got {self.uniform_mix!r}"
            )
        # A negative exponent would invert ``prioritized`` (weight on the opponents the
        # learner beats) and nan would turn it uniform, both without a word; a string
        # would fail only once round 0 is played.
        if not (_is_number(self.power) and math.isfinite(self.power) and self.power >= 0):
            raise ValueError(f"league.power: expected a finite number >= 0, got {self.power!r}")
        for name in ("rounds", "learners", "seed", "rating_rounds"):
            x = getattr(self, name)
            least = 0 if name == "seed" else 1
            if isinstance(x, bool) or not isinstance(x, int) or x < least:
                raise ValueError(f"league.{name}: expected an integer >= {least}, got {x!r}")
        if not _good_name(self.snapshot_prefix):
            raise ValueError(f"league.prefix: {self.snapshot_prefix!r} cannot start entry names")

    @property
    def snapshot_prefix(self) -> str:
        return self.prefix or self.name

    def side(self, side: str) -> SideConfig:
        return self.seller if side == "seller" else self.buyer

    def to_dict(self) -> dict[str, Any]:
        """Plain data: what ``league.json`` holds and a resumed league is compared with."""
        out: dict[str, Any] = {
            k: getattr(self, k)
            for k in ("name", "seed", "rounds", "meta_strategy", "uniform_mix", "power")
        }
        out.update(
            learners=self.learners,
            prefix=self.snapshot_prefix,
            rating_rounds=self.rating_rounds,
            tournament=self.tournament,
        )
        for side in SIDES:
            sc = self.side(side)
            out[side] = {
                "pool": list(sc.pool),
                "iterations": sc.iterations,
                "init": sc.init,
                "exploit_iterations": sc.exploit_iterations,
                "exploit_init": sc.exploit_init,
                "train": sc.base.to_dict(),
            }
        return json.loads(json.dumps(out))


def _is_number(x: Any) -> bool:
    """An int or a float, not a bool (TOML ``true`` is no exponent)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def _good_name(name: str) -> bool:
    return bool(name) and not name.startswith(".") and not any(c in name for c in "|#/\\,:= ")


_LEAGUE_KEYS = {
    "name",
    "seed",
    "rounds",
    "meta_strategy",
    "uniform_mix",
    "power",
    "learners",
    "prefix",
    "rating_rounds",
    "threads",
    "eval_markets",
    "checkpoint_every",
}
_SIDE_KEYS = {
    "config",
    "train",
    "family",
    "pool",
    "iterations",
    "init",
    "exploit_iterations",
    "exploit_init",
}


def load_league_config(path: str, **overrides: Any) -> LeagueConfig:
    """Read a league config (TOML); every problem is one LeagueError naming the file.
    ``overrides`` replace ``[league]`` keys (``rounds``)."""
    try:
        data = read_toml(path, "league config")  # its errors name the file already
    except ValueError as err:
        raise LeagueError(str(err)) from None
    try:
        return league_from_dict(data, base=str(Path(path).parent), source=path, **overrides)
    except (TypeError, ValueError) as err:
        raise LeagueError(f"{path}: {err}") from None


def league_from_dict(
    data: dict[str, Any], *, base: str = ".", source: str = "", **overrides: Any
) -> LeagueConfig:
    """A league config from parsed TOML; paths are relative to ``base``."""
    from agents.rl.config import TrainConfig, load_train_config

    # What [seller.train] / [buyer.train] may set: a training config's fields.
    train_keys = {f.name for f in dataclasses.fields(TrainConfig)} - {"source"}

    unknown = sorted(set(data) - {"league", "seller", "buyer", "tournament", "populations",
                                  "configs"})  # fmt: skip
    if unknown:
        raise LeagueError(f"unknown table(s) {', '.join(unknown)}")
    league = dict(data.get("league", {}))
    bad = sorted(set(league) - _LEAGUE_KEYS)
    if bad:
        raise LeagueError(f"unknown [league] key(s) {', '.join(bad)}")
    league.update({k: v for k, v in overrides.items() if v is not None})
    # Integers as given: int() would quietly truncate ``threads = 1.9`` to one thread.
    train_common = {
        "threads": _int(league.pop("threads", 1), "league.threads"),
        "eval_every": 0,
        "eval_markets": _int(league.pop("eval_markets", 100), "league.eval_markets"),
        "checkpoint_every": _int(
            league.pop("checkpoint_every", 5), "league.checkpoint_every", least=0
        ),
    }
    sides = {}
    for side in SIDES:
        table = data.get(side)
        if not isinstance(table, dict):
            raise LeagueError(f"no [{side}] table")
        bad = sorted(set(table) - _SIDE_KEYS)
        if bad:
            raise LeagueError(f"unknown [{side}] key(s) {', '.join(bad)}")
        if "config" not in table:
            raise LeagueError(f"{side}.config: the training config its learners start from")
        if not isinstance(table["config"], str) or not table["config"]:
            raise LeagueError(f"{side}.config: expected a path, got {table['config']!r}")
        cfg_path = _path(table["config"], base)
        if not isinstance(table.get("train", {}), dict):
            raise LeagueError(f"[{side}.train]: expected a table of training options")
        overrides_train = dict(table.get("train", {}))
        known_train = set(overrides_train) & {"name", "seed", "iterations", "init", "opponents"}
        if known_train:
            raise LeagueError(
                f"[{side}.train] sets {', '.join(sorted(known_train))}: the league sets those"
            )
        unknown_train = sorted(set(overrides_train) - train_keys)
        if unknown_train:
            raise LeagueError(f"unknown [{side}.train] key(s) {', '.join(unknown_train)}")
        overrides_train.update(train_common)
        try:
            train = load_train_config(cfg_path)
            train = dataclasses.replace(train, **overrides_train)
        except (TypeError, ValueError) as err:
            raise LeagueError(f"{side}.config: {err}") from None
        if train.side != side:
            raise LeagueError(f"{side}.config: {cfg_path} trains a {train.side}")
        family = table.get("family")
        if family is not None:
            names = dict(train.family.configs)
            missing = [n for n in family if n not in names]
            if missing or not family:
                raise LeagueError(f"{side}.family: no base config {missing[:1] or '[]'}")
            train = dataclasses.replace(
                train,
                family=dataclasses.replace(
                    train.family, configs=tuple((n, names[n]) for n in family)
                ),
            )
        # Paths in the training config resolve against its own folder; the league's
        # learners name everything by absolute path or registry name instead.
        train = dataclasses.replace(train, source="")
        pool = table.get("pool")
        if not isinstance(pool, list) or not pool or not all(isinstance(x, str) for x in pool):
            raise LeagueError(f"{side}.pool: a non-empty list of entries")
        init = _checkpoint_dir(table.get("init", ""), base, f"{side}.init")
        exploit_init = _checkpoint_dir(
            table.get("exploit_init", table.get("init", "")), base, f"{side}.exploit_init"
        )
        _check_start(train, init, f"{side}.init")
        if exploit_init != init:
            _check_start(train, exploit_init, f"{side}.exploit_init")
        sides[side] = SideConfig(
            side=side,
            base=train,
            pool=tuple(_entry_path(x, base) for x in pool),
            iterations=_int(table.get("iterations", 20), f"{side}.iterations"),
            init=init,
            exploit_iterations=_int(
                table.get("exploit_iterations", 10), f"{side}.exploit_iterations"
            ),
            exploit_init=exploit_init,
        )
    t = dict(data.get("tournament", {}))
    for key in ("sellers", "buyers"):
        if key in t:
            raise LeagueError(f"tournament.{key}: the pools are the league's [seller]/[buyer] pool")
    if "agents" in t:
        raise LeagueError(
            "tournament.agents: a league loads entries of one's own from the command line "
            "(arena league CONFIG.toml --agents FILE.py)"
        )
    tournament = {"tournament": t, "populations": dict(data.get("populations", {}))}
    tournament["configs"] = data.get("configs", {})
    name = league.pop("name", "league")
    cfg = LeagueConfig(
        name=name,
        seller=sides["seller"],
        buyer=sides["buyer"],
        tournament=tournament,
        source=source,
        **league,
    )
    # The initial round robin must be a valid spec (entries, populations, configs).
    pools = {side: list(cfg.side(side).pool) for side in SIDES}
    try:
        round_robin_spec(cfg, pools["seller"], pools["buyer"], check=True)
    except SpecError as err:
        raise LeagueError(f"the round robin: {err}") from None
    _check_learner_kinds(cfg)
    return cfg


def _check_learner_kinds(cfg: LeagueConfig) -> None:
    """A population of the buyer pool split by kind must meet both kinds in some market
    of the seller learner's family (``agents.env.check_kinds``), as in a training config:
    else the learner trains against one of its members and says nothing."""
    from agents import registry
    from agents.env import check_kinds

    populations = cfg.tournament.get("populations", {})
    ends = cfg.seller.base.family.kind_ends()
    for name in cfg.buyer.pool:
        if name not in populations:
            continue
        mix = registry.make_buyers(str(populations[name]))
        try:
            check_kinds(mix, ends, f"buyer.pool {name!r}", "the [seller] training config")
        except ValueError as err:
            raise LeagueError(f"{err} (the seller learner trains against the buyer pool)") from None


def _int(x: Any, what: str, least: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < least:
        want = "a positive integer" if least == 1 else f"an integer >= {least}"
        raise LeagueError(f"{what}: expected {want}, got {x!r}")
    return x


def _path(p: str, base: str) -> str:
    return str(Path(p) if Path(p).is_absolute() else (Path(base) / p).resolve())


def _entry_path(name: str, base: str) -> str:
    """A pool entry: checkpoint paths become absolute; names pass."""
    from agents.registry import DISCLOSED_SUFFIX

    if "/" not in name and not name.startswith("."):
        return name
    suffix = DISCLOSED_SUFFIX if name.endswith(DISCLOSED_SUFFIX) else ""
    return _path(name.removesuffix(suffix), base) + suffix


def _check_start(train, path: str, what: str) -> None:
    """A learner's start (a checkpoint directory, or "" for fresh weights) must be one the
    side's training config can train on (the same features): found when the config is
    read, not a round into the league."""
    if not path:
        return
    from agents.rl.checkpoint import CheckpointError
    from agents.rl.ppo import TrainError, start_policy

    try:
        start_policy(dataclasses.replace(train, init=path))
    except (TrainError, CheckpointError) as err:
        raise LeagueError(f"{what}: {err}") from None


def _checkpoint_dir(name: str, base: str, what: str) -> str:
    """A learner's start: "" (fresh), a checkpoint directory, or a registry entry built
    from one (a shipped RL agent), as an absolute path."""
    if not name:
        return ""
    if "/" in name or name.startswith("."):
        path = _path(name, base)
        if not (Path(path) / "config.json").is_file():
            raise LeagueError(f"{what}: {path} is not a checkpoint directory")
        return path
    from agents import registry

    try:
        entry = registry.get(name)
    except registry.UnknownEntry as err:
        raise LeagueError(
            f"{what}: {err} (a shipped RL agent is an entry once its checkpoint is in "
            "agents/rl/checkpoints)"
        ) from None
    if not entry.source or not (Path(entry.source) / "config.json").is_file():
        raise LeagueError(f"{what}: {name!r} is not built from a checkpoint")
    return str(Path(entry.source).resolve())


def round_robin_spec(
    cfg: LeagueConfig, sellers: list[str], buyers: list[str], *, check: bool = True
) -> TournamentSpec:
    """The round robin of the pools, in the league's one spec (growing by entries)."""
    data = json.loads(json.dumps(cfg.tournament))
    t = data["tournament"]
    t.update(name=cfg.name, sellers=list(sellers), buyers=list(buyers))
    t.setdefault("transcripts", 0)
    return spec_from_dict(data, check_entries=check)
