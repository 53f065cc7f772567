"""``arena league``: rounds of a seller learner and a buyer learner against frozen pools.

    arena league tournaments/leagues/league.toml --out runs/league [--rounds K]
        [--workers N] [--address HOST:PORT] [--no-ray] [--quiet] [--agents FILE.py]

Resumable: rerun the same command after a kill and the league goes on from its first
incomplete round, keeping every finished learner, stored round-robin unit and best
response. ``--rounds`` may grow a finished league by more rounds. See
``tournaments.league`` for what a round does and what the folder holds. ``--agents``
loads entries of one's own, which the pools may then name (here, and on Ray in every
learner and match worker); a resumed league needs the same ``--agents``, and one whose
code for such an entry changed since its matches were played is refused (the league
folder records the modules, as a tournament's run folder does).
"""

from __future__ import annotations

import argparse
import os

from arena.limits import MAX_WORKERS
from tournaments.cli import own_agents
from tournaments.cli.common import CliError, at_most, nonempty, pos_int


def cmd_league(args: argparse.Namespace) -> int:
    from arena import limits
    from tournaments.league import LeagueError, load_league_config, run_league
    from tournaments.league_report import league_rows, load_rounds

    # As `arena tournament`: workers a local Ray cannot have are refused before the league
    # folder, its league.json or Ray's log are made (a round would fail only after them).
    if not args.no_ray and not (args.address or os.environ.get("RAY_ADDRESS")):
        limits.check_workers(args.workers, os.cpu_count() or 1)
    agents = own_agents.load_all(args.agents)
    try:
        cfg = load_league_config(args.config, rounds=args.rounds)
    except LeagueError as err:
        if own_agents.names_unknown_entry(err):
            raise CliError(own_agents.hinted(err, args.agents)) from None
        raise CliError(str(err)) from None
    out = args.out or os.path.join("runs", cfg.name)
    print(
        f"league {cfg.name}: {cfg.rounds} rounds, {cfg.learners} learner(s) per side, "
        f"meta-strategy {cfg.meta_strategy} -> {out}"
    )
    # On Ray, every learner and match worker registers the --agents entries first.
    with own_agents.ship(() if args.no_ray else agents), own_agents.worker_errors():
        summary = run_league(
            cfg,
            out,
            workers=args.workers,
            address=args.address,
            use_ray=not args.no_ray,
            progress=not args.quiet,
            log=print,
            agents=[m.record() for m in agents],
        )
    rows = league_rows(load_rounds(out))
    print(f"\n{len(summary.rounds_run)} round(s) run in {summary.wall_s:.0f} s")
    _print_rows(rows)
    print(f"\nleague report: {os.path.join(out, 'league.md')} (plots league.png, payoff.png)")
    return 0


def _fmt(x: float, lo: float, hi: float) -> str:
    import math

    if not math.isfinite(x):
        return "-"
    return f"{x:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _print_rows(rows: list[dict]) -> None:
    from tabulate import tabulate

    table = [
        [
            r["round"],
            r["newest_seller"] or "-",
            r["newest_buyer"] or "-",
            "-" if r["capture"] != r["capture"] else f"{r['capture']:.3f}",
            "-" if r["buyer_share"] != r["buyer_share"] else f"{r['buyer_share']:.3f}",
            _fmt(r["exploit_seller"], r["exploit_seller_lower"], r["exploit_seller_upper"]),
            _fmt(r["exploit_buyer"], r["exploit_buyer_lower"], r["exploit_buyer_upper"]),
        ]
        for r in rows
    ]
    headers = ["round", "seller", "buyer", "capture", "buyer share", "exploit. seller",
               "exploit. buyer"]  # fmt: skip
    print(tabulate(table, headers=headers, disable_numparse=True))


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "league",
        help="rounds of seller and buyer learners against frozen pools (resumable)",
        description="Run (or resume) a league from a league config (TOML).",
    )
    p.add_argument("config", metavar="CONFIG.toml", help="league config")
    # nonempty: a blank --out or --address would read as not given (runs/NAME, local Ray).
    p.add_argument("--out", type=nonempty, metavar="DIR", help="league folder (default runs/NAME)")
    p.add_argument("--rounds", type=pos_int, help="override league.rounds")
    p.add_argument(
        "--workers",
        type=at_most(MAX_WORKERS, "workers"),
        default=2,
        help="CPUs for learners and matches",
    )
    p.add_argument(
        "--address",
        type=nonempty,
        help="join an existing Ray cluster (else RAY_ADDRESS, else local)",
    )
    p.add_argument("--no-ray", action="store_true", help="everything in this process, in turn")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    own_agents.add_flag(p)
    p.set_defaults(func=cmd_league)
