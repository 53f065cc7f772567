"""``arena bench NAME``: run one of the benchmark scripts of a source checkout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tournaments.cli.common import CliError

BENCHMARKS = {
    "engine": "seller-turns/s of the scalar reference and the batched engine",
    "tournament": "the default tournament on Ray and without it: wall time, markets/s",
    "scripted": "every scripted seller against every scripted buyer: mean metrics",
    "report": "the analysis and report of a run folder: seconds per step, min and median",
}


def cmd_bench(args: argparse.Namespace) -> int:
    """Run one of the benchmark scripts of a source checkout with its own flags."""
    root = Path(__file__).resolve().parents[2]
    script = root / "benchmarks" / f"{args.which}.py"
    if not script.is_file():
        raise CliError(f"no {script.name} here: benchmarks run from a source checkout")
    # argparse names a script after argv[0], so its --help and errors say "arena bench
    # NAME". (runpy would set argv[0] to the script's path.)
    sys.argv = [f"arena bench {args.which}", *args.rest]
    code = compile(script.read_text(), str(script), "exec")
    try:
        exec(code, {"__name__": "__main__", "__file__": str(script)})
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="run a benchmark of benchmarks/ and print its figures",
        description="Run a benchmark script of a source checkout; flags after the name go to\n"
        "the script (e.g. arena bench engine --json).",
    )
    kinds = p.add_subparsers(dest="which", required=True, metavar="NAME")
    for name, what in BENCHMARKS.items():
        # Every flag after the name is the script's own (``main`` hands them over as
        # ``rest``), --help included.
        q = kinds.add_parser(name, help=what, description=what, add_help=False)
        q.set_defaults(func=cmd_bench, rest=[], takes_rest=True)
