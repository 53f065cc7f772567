"""League configs (``arena league CONFIG.toml``): the ``[league]``, ``[seller]``,
``[buyer]``, ``[tournament]``, ``[populations]`` and ``[configs.NAME]`` tables, checked
into a ``LeagueConfig`` with one clear error per problem (``LeagueError``). The league
itself is ``tournaments.league``."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.config import read_toml
from arena.words import shown
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
    """The ``TrainConfig`` every learner of the side starts from: the side's training
    config with ``[league]``'s ``threads``, ``eval_markets`` and ``checkpoint_every``
    (``eval_every`` 0), the ``[SIDE.train]`` overrides and the base configs ``[SIDE]
    family`` names. A round sets ``name``, ``seed``, ``iterations``, ``init`` and
    ``opponents`` (``_SET_BY_LEAGUE``: what ``[SIDE.train]`` may not set), and drops
    ``imitate`` where it starts from a checkpoint."""
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
    """The best response's starting checkpoint (by default ``init``; "": fresh weights and
    the base config's warm start, its ``imitate``, as for ``init``)."""


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
_SET_BY_LEAGUE = {
    "name": "from [league] prefix",
    "seed": "from [league] seed",
    "side": "from its table, [{side}]",
    "iterations": "from [{side}] iterations",
    "init": "from [{side}] init",
    "opponents": "from the [{other}] pool",
    "family": "from [{side}] family (names of the training config's base configs)",
    "threads": "from [league] threads",
    "eval_markets": "from [league] eval_markets",
    "checkpoint_every": "from [league] checkpoint_every",
    "eval_every": "to 0 (a learner is evaluated at its end)",
}
"""The training config fields a ``[SIDE.train]`` table may not set: the league sets them
itself, from where each says (a per-side value would be overwritten, or, for ``family``,
not be a family at all)."""


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
    unknown = sorted(set(data) - {"league", "seller", "buyer", "tournament", "populations",
                                  "configs"})  # fmt: skip
    if unknown:
        raise LeagueError(f"unknown table(s) {', '.join(unknown)}")
    league = _table(data, "league", {})
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
    sides = {side: _side_config(side, _table(data, side), base, train_common) for side in SIDES}
    t = _table(data, "tournament", {})
    for key in ("sellers", "buyers"):
        if key in t:
            raise LeagueError(f"tournament.{key}: the pools are the league's [seller]/[buyer] pool")
    if "agents" in t:
        raise LeagueError(
            "tournament.agents: a league loads entries of one's own from the command line "
            "(arena league CONFIG.toml --agents FILE.py)"
        )
    tournament = {"tournament": t, "populations": _table(data, "populations", {})}
    tournament["configs"] = data.get("configs", {})  # the spec checks its tables
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
        spec = round_robin_spec(cfg, pools["seller"], pools["buyer"], check=True)
    except SpecError as err:
        raise LeagueError(f"the round robin: {err}") from None
    _check_pool_names(cfg, spec)
    _check_learner_kinds(cfg)
    return cfg


def _table(data: dict[str, Any], key: str, default: dict | None = None) -> dict[str, Any]:
    """``data[key]`` as a table (a copy); a missing one is ``default``, or an error where
    there is none."""
    x = data.get(key, default)
    if x is None:
        raise LeagueError(f"no [{key}] table")
    if not isinstance(x, dict):
        tables = isinstance(x, list) and bool(x) and all(isinstance(v, dict) for v in x)
        got = f"[[{key}]], an array of tables" if tables else shown(x)
        raise LeagueError(f"{key}: expected one [{key}] table, got {got}")
    return dict(x)


def _side_config(
    side: str, table: dict[str, Any], base: str, train_common: dict[str, Any]
) -> SideConfig:
    """One side's ``[SIDE]`` table, its training config and its starts checked."""
    bad = sorted(set(table) - _SIDE_KEYS)
    if bad:
        raise LeagueError(f"unknown [{side}] key(s) {', '.join(bad)}")
    train = _side_train(side, table, base, train_common)
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
    return SideConfig(
        side=side,
        base=train,
        pool=tuple(_entry_path(x, base) for x in pool),
        iterations=_int(table.get("iterations", 20), f"{side}.iterations"),
        init=init,
        exploit_iterations=_int(table.get("exploit_iterations", 10), f"{side}.exploit_iterations"),
        exploit_init=exploit_init,
    )


def _side_train(side: str, table: dict[str, Any], base: str, train_common: dict[str, Any]):
    """The side's base ``TrainConfig`` (``SideConfig.base``); each error names the key it
    comes from: ``SIDE.config``, ``league``, ``[SIDE.train]`` or ``SIDE.family``."""
    from agents.rl.config import load_train_config

    if "config" not in table:
        raise LeagueError(f"{side}.config: the training config its learners start from")
    if not isinstance(table["config"], str) or not table["config"]:
        raise LeagueError(f"{side}.config: expected a path, got {table['config']!r}")
    cfg_path = _path(table["config"], base)
    overrides = _train_overrides(side, table.get("train", {}))
    try:
        train = load_train_config(cfg_path)
    except (TypeError, ValueError) as err:
        raise LeagueError(f"{side}.config: {err}") from None
    if train.side != side:
        raise LeagueError(f"{side}.config: {cfg_path} trains a {train.side}")
    train = _replaced(train, train_common, "league")
    train = _replaced(train, overrides, f"[{side}.train]")
    train = _chosen_configs(train, table.get("family"), f"{side}.family", cfg_path)
    # Paths in the training config resolve against its own folder; the league's
    # learners name everything by absolute path or registry name instead.
    return dataclasses.replace(train, source="")


def _train_overrides(side: str, table: Any) -> dict[str, Any]:
    """``[SIDE.train]``: training config fields, none of those the league sets itself."""
    from agents.rl.config import TrainConfig

    if not isinstance(table, dict):
        raise LeagueError(f"[{side}.train]: expected a table of training options")
    taken = sorted(set(table) & set(_SET_BY_LEAGUE))
    if taken:
        other = "buyer" if side == "seller" else "seller"
        where = ", ".join(f"{k} {_SET_BY_LEAGUE[k].format(side=side, other=other)}" for k in taken)
        raise LeagueError(f"[{side}.train] sets {', '.join(taken)}: the league sets {where}")
    keys = {f.name for f in dataclasses.fields(TrainConfig)} - {"source"}
    unknown = sorted(set(table) - keys)
    if unknown:
        raise LeagueError(f"unknown [{side}.train] key(s) {', '.join(unknown)}")
    return dict(table)


def _replaced(train, changes: dict[str, Any], what: str):
    """``train`` with ``changes``; an error names ``what`` set them. An AttributeError is
    one too: a value of a type the training config's own checks do not look at (as a
    ``family`` that is no family was) must not end in a traceback."""
    try:
        return dataclasses.replace(train, **changes)
    except (TypeError, ValueError, AttributeError) as err:
        raise LeagueError(f"{what}: {err}") from None


def _chosen_configs(train, family: Any, what: str, cfg_path: str):
    """``train`` on the base configs of its family that ``[SIDE] family`` names (a list of
    their names; None: all of them)."""
    if family is None:
        return train
    if isinstance(family, str):
        raise LeagueError(f"{what}: write a list of base config names, as [{family!r}]")
    if not (isinstance(family, list) and family and all(isinstance(n, str) for n in family)):
        got = shown(family)
        raise LeagueError(f"{what}: expected a non-empty list of base config names, got {got}")
    names = dict(train.family.configs)
    missing = [n for n in family if n not in names]
    if missing:
        raise LeagueError(
            f"{what}: no base config {missing[0]!r} in {cfg_path} (it has {', '.join(names)})"
        )
    configs = tuple((n, names[n]) for n in family)
    try:
        return dataclasses.replace(train, family=dataclasses.replace(train.family, configs=configs))
    except ValueError as err:
        raise LeagueError(f"{what}: {err}") from None


def _check_pool_names(cfg: LeagueConfig, spec: TournamentSpec) -> None:
    """No pool entry may play under a name the league gives its own checkpoints
    (``tournaments.league``): snapshots ``PREFIX_sR`` and ``PREFIX_bR`` (``_K`` appended
    with several learners a side), best responses ``PREFIX_xsR`` and ``PREFIX_xbR``, in
    any round (``--rounds`` may grow a league). Else the round robin meets that name
    twice a round in, and on every rerun. ``spec`` is the initial round robin's: its
    entries are the names the pools play under (a checkpoint's from its config.json)."""
    from agents.registry import VARIANT_SUFFIXES

    prefix = cfg.snapshot_prefix
    number = r"(0|[1-9]\d*)"
    learner = f"_{number}" if cfg.learners > 1 else ""
    made = re.compile(rf"{re.escape(prefix)}_([sb][1-9]\d*{learner}|x[sb]{number})")
    for side, names in (("seller", spec.sellers), ("buyer", spec.buyers)):
        for entry, name in zip(cfg.side(side).pool, names, strict=True):
            plain = name
            for suffix in VARIANT_SUFFIXES:  # a variant registers its checkpoint's name too
                plain = plain.removesuffix(suffix)
            if made.fullmatch(plain):
                what = repr(name) if entry == name else f"{entry!r} (named {name!r})"
                raise LeagueError(
                    f"{side}.pool: {what} has a name the league gives its own snapshots and "
                    f"best responses ({prefix}_sR, {prefix}_bR, {prefix}_xsR, {prefix}_xbR); "
                    "choose another [league] prefix"
                )


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


def _checkpoint_dir(name: Any, base: str, what: str) -> str:
    """A learner's start: "" (fresh), a checkpoint directory, or a registry entry built
    from one (a shipped RL agent), as an absolute path."""
    if not isinstance(name, str):  # before its truth: ``init = 0`` is no fresh start
        raise LeagueError(
            f"{what}: expected a checkpoint directory or an RL agent's name, got {shown(name)}"
        )
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
