"""``arena bench NAME``: run one of the benchmark scripts of a source checkout."""

from __future__ import annotations

import argparse
import os
import subprocess
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
        if isinstance(exit_.code, str):  # sys.exit("message"): the script's own error
            raise CliError(exit_.code) from None
        return int(exit_.code or 0)
    except subprocess.CalledProcessError as err:
        raise CliError(f"bench {args.which}: {_failure(err)}") from None
    return 0


def _failure(err: subprocess.CalledProcessError) -> str:
    """A benchmark's failed child process as one line: the program, its exit code and the
    last line it wrote to stderr (a traceback's error)."""
    stderr = err.stderr or ""
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    cmd = err.cmd if isinstance(err.cmd, list | tuple) else [err.cmd]
    text = f"{os.path.basename(str(cmd[0]))} exited with code {err.returncode}"
    return f"{text}: {lines[-1]}" if lines else text


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
