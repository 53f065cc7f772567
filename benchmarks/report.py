"""Seconds to analyse a run folder and write its report, step by step.

Each repeat runs in a fresh Python process, as ``arena report DIR`` does, and times:

* import: the modules a report needs;
* load: every market row the analyses read, from the run's SQLite store;
* analysis: within-side leaderboards, surplus split, disclosure effect; Elo runs in a
  second process started before the load, as ``arena report`` does it;
* markdown + plots: ``report.md`` and its PNGs, written into a scratch folder (the run
  folder is not touched); the ratings (Bradley-Terry, its bootstrap, and the wait for
  Elo) are computed here, when the first table or plot needs them;
* text: every table for the terminal;
* total: the process from start to end (interpreter start-up included);
* total cpu: CPU seconds of the report's process and of its Elo process together.

The table shows the minimum, median and maximum of ``--repeats`` runs: on a shared 2-core
machine a single run moves with whatever else the machine does.

    python benchmarks/report.py [RUN_DIR] [--repeats 5] [--json]

RUN_DIR defaults to ``runs/default-seed0`` (made by ``arena tournament
tournaments/specs/default.toml``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from tabulate import tabulate

from tournaments.cli.common import HelpFormatter, pos_int

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# The steps of ``arena report`` (tournaments/cli/tournament.py), timed one by one. As
# there, Elo starts in a second process before the rows are read, and the plots that need
# no rating are drawn while it runs: "analysis" stops before Elo is waited for, "markdown +
# plots" includes that wait, and "text" comes last.
CHILD = """
import json, sys, time
t0 = time.perf_counter()
from tournaments.analysis import COLUMNS
from tournaments.report import analyze_run, report_text, start_elo, write_report
from tournaments.store import ResultStore
t1 = time.perf_counter()
store = ResultStore.open(sys.argv[1])
meta = store.meta()
elo = start_elo(sys.argv[1], meta)
records = store.records(COLUMNS)
store.close()
t2 = time.perf_counter()
analysis = analyze_run(records, meta, background=elo)
t3 = time.perf_counter()
write_report(sys.argv[2], records, meta, analysis=analysis)
t4 = time.perf_counter()
text = report_text(records, meta, analysis=analysis)
t5 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "analysis": t3 - t2,
                  "markdown + plots": t4 - t3, "text": t5 - t4, "rows": records.rows}))
"""

STEPS = ("import", "load", "analysis", "markdown + plots", "text", "total", "total cpu")


def run_once(folder: str, scratch: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, folder, scratch],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of the report and of the Elo process it starts: less moved by other work on the
    # machine than wall time, and the floor of wall time on two cores is half of it.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "total": wall, "total cpu": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter
    )
    ap.add_argument(
        "run", nargs="?", default=os.path.join("runs", "default-seed0"), help="run folder"
    )
    ap.add_argument("--repeats", type=pos_int, default=5, help="runs, each in a fresh process")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = ap.parse_args()
    if not os.path.isfile(os.path.join(args.run, "results.sqlite")):
        sys.exit(f"no run in {args.run}: arena tournament tournaments/specs/default.toml first")
    with tempfile.TemporaryDirectory() as scratch:
        runs = [run_once(args.run, scratch) for _ in range(args.repeats)]
    summary = {
        step: {
            "min": min(r[step] for r in runs),
            "median": statistics.median(r[step] for r in runs),
            "max": max(r[step] for r in runs),
        }
        for step in STEPS
    }
    print(
        f"{args.run}: {runs[0]['rows']:,} market rows; {args.repeats} runs, each in a fresh "
        f"process; cpus={os.cpu_count()}; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        tabulate(
            [
                [
                    s,
                    f"{summary[s]['min']:.2f}",
                    f"{summary[s]['median']:.2f}",
                    f"{summary[s]['max']:.2f}",
                ]
                for s in STEPS
            ],  # fmt: skip
            headers=["step", "min s", "median s", "max s"],
            disable_numparse=True,
        )
    )
    if args.json:
        print(json.dumps({"rows": runs[0]["rows"], "repeats": args.repeats, **summary}))


if __name__ == "__main__":
    main()
