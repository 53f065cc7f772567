"""``arena check module:Class``: run the conformance check on a policy class of one's own.

    arena check my_agents:MySeller
    arena check path/to/my_agents.py:MyBuyer --market small.toml

A file is imported as ``python FILE.py`` would import it, with its folder on ``sys.path``
(a module beside it imports); a file named like another module here (``arena.py``,
``numpy.py``) is refused, since it would replace that module. The class is a
``SellerPolicy`` or ``BuyerPolicy`` (``agents.base``); it is built as
``Class(seed=SEED)`` when its constructor takes a seed, else ``Class()``. The check
(``agents.conformance``) plays it against a random opponent on three configs (or on the
``--market`` file's config, for a policy made for one market size) and prints every
problem: malformed action arrays, rule violations, a different game (or, for a buyer, a
different ``kinds``/``disclose`` decision) for the same seed, a batch that plays
differently from its markets one at a time, a batch played differently after a
``reset`` than by a fresh instance, a write into the observation, an exception, a
market played differently after a per-row restart. ``--lenient`` does not count rule
violations as problems (the report says how many there were). Exit code 0 when it
conforms, 1 when it does not, 2 when the class cannot be found.
"""

from __future__ import annotations

import argparse
import inspect

from arena import limits
from arena.config import MarketConfig
from tournaments.cli.common import CliError, at_most, nonempty, nonneg_int


def load_class(target: str) -> type:
    """``module:Class`` (importable from here, the current folder included) or
    ``path/to/file.py:Class`` (imported with its folder on sys.path, as ``python FILE.py``
    would; ``tournaments.cli.own_agents.load_module``)."""
    from tournaments.cli.own_agents import load_module

    module_name, sep, name = target.rpartition(":")
    if not sep or not module_name or not name:
        raise CliError(f"expected MODULE:CLASS or FILE.py:CLASS, got {target!r}")
    module = load_module(module_name, expected="FILE.py:CLASS", importable=False)
    cls = getattr(module, name, None)
    if not inspect.isclass(cls):
        raise CliError(f"{module_name} has no class {name!r}")
    return cls


def _factory(cls: type, params: dict | None = None):
    """``seed -> policy``: ``cls(seed=seed, **params)``, the seed only where the
    constructor takes one; a parameter it does not take is refused here."""
    params = params or {}
    if "seed" in params:
        raise CliError("--param seed: the check gives the policy its seeds itself (--seed N)")
    names = inspect.signature(cls).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in names.values())
    if unknown := sorted(k for k in params if k not in names and not takes_any):
        takes = ", ".join(n for n in names if n not in ("self", "seed")) or "none"
        raise CliError(
            f"--param {unknown[0]}: {cls.__name__} takes no parameter {unknown[0]!r} "
            f"(it takes: {takes})"
        )
    takes_seed = "seed" in names
    return lambda seed: cls(seed=seed, **params) if takes_seed else cls(**params)


def _param(text: str) -> tuple[str, object]:
    """``KEY=VALUE``, the value read as TOML (``0.1``, ``true``, ``"name"``, ``[1, 2]``;
    a bare word is a string)."""
    import tomllib

    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value.strip()


def _check_memory(configs: list[tuple[str, MarketConfig]], markets: int) -> None:
    """The check plays each config's ``markets`` as one batch: refuse a config whose
    batch would not fit the memory of a tournament's unit (``arena.limits``), as
    ``play`` and ``eval`` refuse a market that does not."""
    limits.unit_markets(configs, 0)  # one market of each fits, else LimitError naming it
    for name, cfg in configs:
        need = limits.oracle_bytes(cfg) + markets * limits.market_bytes(cfg)
        if need > limits.UNIT_MEMORY:
            fit = (limits.UNIT_MEMORY - limits.oracle_bytes(cfg)) // limits.market_bytes(cfg)
            raise limits.LimitError(
                f"{name}: a batch of {markets:,} markets of {cfg.buyers:,} buyers x "
                f"{cfg.products:,} products needs about {limits.size_text(need)}, over the "
                f"{limits.size_text(limits.UNIT_MEMORY)} a unit may use; use --markets {fit:,} "
                "or fewer"
            )


def cmd_check(args: argparse.Namespace) -> int:
    from agents.base import BuyerPolicy, SellerPolicy
    from agents.command import where_raised
    from agents.conformance import CONFIGS, check_buyer, check_seller
    from arena.config import load_market_file

    cls = load_class(args.target)
    if issubclass(cls, SellerPolicy):
        side, check = "seller", check_seller
    elif issubclass(cls, BuyerPolicy):
        side, check = "buyer", check_buyer
    else:
        raise CliError(
            f"{cls.__name__} is neither a SellerPolicy nor a BuyerPolicy (agents.base); "
            "subclass one of them"
        )
    if args.market:
        configs = (load_market_file(args.market),)
        named = [(f"{args.market} [market]", configs[0])]
    else:
        configs = CONFIGS
        named = [(f"config {c}", cfg) for c, cfg in enumerate(configs)]
    _check_memory(named, args.markets)
    factory = _factory(cls, dict(args.param))
    try:
        factory(args.seed)
    except Exception as err:  # noqa: BLE001 - the user's class: report, do not crash
        # A constructor argument missing or wrong (not an abstract class): --param gives it.
        hint = (
            " (constructor arguments: --param KEY=VALUE)"
            if isinstance(err, TypeError) and not inspect.isabstract(cls)
            else ""
        )
        problems = [f"cannot build it: {type(err).__name__}: {err}{hint}"]
    else:
        tally: dict[str, int] = {}
        try:
            problems = check(
                factory,
                markets=args.markets,
                seed=args.seed,
                strict=not args.lenient,
                configs=configs,
                tally=tally,
            )
        except Exception as err:  # noqa: BLE001 - the check reports its plays' own; a backstop
            problems = [f"raised {type(err).__name__}: {err}{where_raised(err)}"]
    where = f"{len(configs)} config{'s' if len(configs) > 1 else ''}"
    if not problems:
        checked = (
            "the same game for the same seed, batch invariance, the same play after a "
            "reset, per-row restarts"
        )
        if side == "buyer":  # compared themselves: the check's seller ignores disclosure
            checked += ", the same kinds and disclose decisions throughout"
        if args.lenient:
            # Not "no rule violations": --lenient did not count them, and a policy whose
            # every message breaks the rules passes; say so, and how many there were.
            seen = tally.get("violations", 0)
            print(
                f"{cls.__name__} ({side}) conforms on {where} leniently: action arrays of "
                f"the right shapes and types, {checked}. Rule violations were not counted "
                f"(--lenient): {seen:,} in its first play of each config."
            )
        else:
            print(
                f"{cls.__name__} ({side}) conforms on {where}: well-formed actions, no rule "
                f"violations, {checked}."
            )
        return 0
    count = f"{len(problems)} problem" + ("s" if len(problems) > 1 else "")
    print(f"{cls.__name__} ({side}) does not conform ({count} on {where}):")
    for p in problems:
        print(f"  - {p}")
    return 1


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="run the conformance check on a policy class (MODULE:CLASS)",
        description=(__doc__ or "").split("\n\n")[0],
    )
    p.add_argument("target", metavar="MODULE:CLASS", help="e.g. my_agents:MySeller or f.py:C")
    p.add_argument(
        "--market",
        type=nonempty,
        metavar="FILE.toml",
        help="check on this [market] config only (or SPEC.toml:NAME, a spec's config)",
    )
    p.add_argument(
        "--markets",
        type=at_most(limits.MAX_MARKETS_PER_MATCH, "markets"),
        default=12,
        help="markets per config (12)",
    )
    p.add_argument("--seed", type=nonneg_int, default=0, help="seed (0)")
    p.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='a constructor argument (repeatable; the value as TOML: 0.1, true, "x")',
    )
    p.add_argument(
        "--lenient", action="store_true", help="do not count rule violations as problems"
    )
    p.set_defaults(func=cmd_check)
