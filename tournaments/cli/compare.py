"""``arena compare RUN_A RUN_B``: paired differences between two runs that met the same
markets (before and after training, two leagues, two rules).

    arena compare runs/before runs/after
    arena compare runs/hidden runs/mandatory --by seller,buyer,config
    arena compare runs/a runs/b --rename rl_seller=league_s3 --metrics profit,score --csv d.csv

See ``tournaments.compare`` for the pairing and the intervals.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys

from tournaments.cli.common import CliError, json_safe, nonneg_int, output_file


def cmd_compare(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from tournaments.compare import (
        COMPARE_METRICS,
        CompareError,
        check_shared_markets,
        compare_runs,
        paired_configs,
        stored_columns,
    )
    from tournaments.formatting import fmt, fmt_ci
    from tournaments.records import MATCH_KEYS
    from tournaments.store import ResultStore
    from tournaments.types import STORED_METRICS

    metrics = _names(args.metrics, COMPARE_METRICS, (*STORED_METRICS, "score"), "--metrics")
    by = _names(args.by, MATCH_KEYS, MATCH_KEYS, "--by")
    rename = {}
    for item in args.rename or []:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise CliError(f"--rename: write OLD=NEW, got {item!r}")
        rename[old] = new
    records, metas, paths = [], [], []
    for folder in (args.run_a, args.run_b):
        store = ResultStore.open(folder)
        try:
            metas.append(store.meta())
            records.append(store.records(stored_columns(metrics)))
            paths.append(str(store.path))
        finally:
            store.close()
    try:
        pairs = paired_configs(records[0], records[1], by=by, rename=rename)
        check_shared_markets(metas[0], metas[1], rename, labels=paths, pairs=pairs)
        rows = compare_runs(records[0], records[1], by=by, rename=rename, metrics=metrics,
                            seed=args.seed)  # fmt: skip
    except CompareError as err:
        raise CliError(str(err)) from None
    table = [
        [
            "|".join(r.group),
            r.metric,
            str(r.n),
            fmt(r.mean_a),
            fmt(r.mean_b),
            fmt_ci(r.diff, r.lower, r.upper),
            fmt_ci(r.diff, r.t_lower, r.t_upper, point=False),
            "-" if r.p != r.p else f"{r.p:.2g}",
            "*" if r.significant else "",
        ]
        for r in rows
    ]
    headers = ["pairing (" + "|".join(by) + ")", "metric", "n", "A", "B",
               "B - A [bootstrap]", "t interval", "p", "Holm"]  # fmt: skip
    if args.json:
        print(json.dumps(json_safe([r.__dict__ for r in rows])))
    else:
        print(f"B - A, paired by {', '.join(by)} and market index: A = {args.run_a}, "
              f"B = {args.run_b}")  # fmt: skip
        print(tabulate(table, headers=headers, disable_numparse=True))
        k = sum(r.significant for r in rows)
        tested = sum(r.p == r.p for r in rows)
        print(
            f"\n95% intervals per row; * = p < 0.05 after Holm's correction over the {tested} "
            f"pairing rows ({k} significant). 'all' rows pool every pair (instances "
            "resampled)."
        )
    left_out = _left_out(rows.only_a, rows.only_b)
    if left_out:
        # Beside --json, on stderr: stdout stays one JSON document.
        print(left_out, file=sys.stderr if args.json else sys.stdout)
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["group", "metric", "n", "mean_a", "mean_b", "diff", "lower", "upper",
                        "t_lower", "t_upper", "p", "significant"])  # fmt: skip
            for r in rows:
                w.writerow(
                    ["|".join(r.group), r.metric, r.n, r.mean_a, r.mean_b, r.diff, r.lower,
                     r.upper, r.t_lower, r.t_upper, r.p, r.significant]
                )  # fmt: skip
        print(f"{len(rows)} rows written to {args.csv}")
    return 0


def _left_out(only_a: tuple[str, ...], only_b: tuple[str, ...], shown: int = 3) -> str:
    """One line on the matches no row covers (empty when every match paired): the rows'
    ``n`` counts paired markets only, so without it a seller that only one run has would
    vanish from the comparison unnoticed. Names the first ``shown`` of each run."""

    def some(ids: tuple[str, ...]) -> str:
        more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
        return ", ".join(ids[:shown]) + more

    parts = [
        f"{len(ids)} {'match' if len(ids) == 1 else 'matches'} only in {label} ({some(ids)})"
        for label, ids in (("RUN_A", only_a), ("RUN_B", only_b))
        if ids
    ]
    return f"left out: {', '.join(parts)}: no counterpart to pair with" if parts else ""


def _names(text: str | None, default: tuple, known: tuple, flag: str) -> tuple[str, ...]:
    """The names of a comma-separated flag (``default`` when it is not given); a list
    with no name in it is refused, not read as the default."""
    if text is None:
        return tuple(default)
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise CliError(f"{flag}: no name in {text!r}; known: {', '.join(known)}")
    bad = [x for x in names if x not in known]
    if bad:
        raise CliError(f"{flag}: unknown {', '.join(bad)}; known: {', '.join(known)}")
    return names


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="paired differences between two runs that share seeds and markets",
        description="Paired differences B - A between two run folders (or league folders) "
        "that met the same markets, with bootstrap and t intervals.",
    )
    p.add_argument("run_a", metavar="RUN_A", help="run folder A")
    p.add_argument("run_b", metavar="RUN_B", help="run folder B")
    p.add_argument("--by", help="coordinates to pair on (default seller,buyer,disclosure,config)")
    p.add_argument("--rename", action="append", metavar="OLD=NEW",
                   help="a name in RUN_A that RUN_B calls NEW (repeatable)")  # fmt: skip
    p.add_argument("--metrics", help="comma-separated metrics (default: the main ones and score)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="bootstrap seed")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--csv", type=output_file(".csv"), metavar="FILE.csv",
                   help="also write the rows to a CSV file")  # fmt: skip
    p.set_defaults(func=cmd_compare)
