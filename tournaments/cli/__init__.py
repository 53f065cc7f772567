"""The ``arena`` command line: one module per command group.

- ``market``: ``play``, ``eval``, ``agents`` (one market or many, the registry);
- ``tournament``: ``tournament``, ``report``, ``show``, ``export`` (runs and their folders);
- ``bench``: ``bench NAME`` (the benchmark scripts);
- ``check``: ``check MODULE:CLASS`` (the conformance check on a policy class of one's own);
- ``compare``: ``compare RUN_A RUN_B`` (paired differences between two runs);
- ``train``, ``league``: training, and rounds of learners against frozen pools.

Every command turns bad input (unknown names, malformed files, impossible parameters)
into one ``arena: error: ...`` line and exit code 2; nothing here prints a traceback for
a user's mistake. An error raised in code of one's own (a policy of an ``--agents``
module) is one line too, with the file and line where it was raised.
"""

from __future__ import annotations

import argparse
import os
import sys

from agents.command import is_user_error, one_line, where_raised
from tournaments.cli import bench, check, compare, league, market, tournament, train
from tournaments.cli.common import CliError, Parser

GROUPS = (market, tournament, compare, train, league, bench, check)
"""Command groups, in the order ``arena --help`` lists them."""


RESUME = {
    "tournament": "; every stored unit is kept, and the same command finishes the run",
    "league": "; the same command goes on from the first unfinished round",
    "train": "; the same command with --resume goes on from the last saved checkpoint",
}
"""What an interrupted command says of going on (commands that keep their work)."""


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="arena", description="Two-sided agent market arena.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "takes_rest", False):
        # The command's own parser, so that the message points to `arena COMMAND --help`.
        (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    try:
        return args.func(args)
    except BrokenPipeError:  # output piped into head and the like
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter exit quiet
        return 0
    except KeyboardInterrupt:
        print(f"arena: interrupted{RESUME.get(args.command, '')}", file=sys.stderr)
        return 130
    except Exception as err:
        # Raised in code of one's own (a policy class, an --agents module): where, in one
        # line, as `arena check` says it; a bug of this package still raises.
        where = "" if isinstance(err, CliError) else where_raised(err)
        if not (isinstance(err, CliError) or is_user_error(err) or where):
            raise
        # A run that cannot go on (TournamentError) is a RuntimeError; results are kept.
        text = f"{type(err).__name__}: {one_line(err)}{where}" if where else one_line(err)
        print(f"arena: error: {text}", file=sys.stderr)
        return 2


__all__ = ["CliError", "GROUPS", "build_parser", "main"]
