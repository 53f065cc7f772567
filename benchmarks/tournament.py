"""Tournament throughput on Ray vs in one process, for a spec (the default one by default).

Each configuration runs in a fresh Python process and a fresh run folder, so
Ray starts from nothing each time and its start-up is reported apart:

* Ray, 2 workers (the CLI default): wall time including Ray start;
* Ray, 1 worker: the base of the 2-worker speedup;
* no Ray: the same matches in one process, the base of the Ray overhead
  (Ray with 1 worker after start-up vs no Ray).

With ``--command`` it also times the whole command a user types, ``arena tournament
SPEC`` (play, analysis, report files, the ratings table), with Ray and with
``--no-ray``: wall seconds, and CPU seconds of the command and the processes it waited
for (with Ray, the Ray processes it started; their CPU is counted where the command
reaped them, so take the --no-ray figure as the CPU the work needs).

Each configuration runs ``--repeats`` times (interleaved); the table shows the median and
the spread (min-max) of the runs: on a shared 2-core machine one run of a few seconds
moves by several percent with whatever else the machine does. The machine's load average
is printed beside them.

    python benchmarks/tournament.py [--spec FILE] [--markets K] [--repeats 3] [--command]
                                    [--json]
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

from agents.command import pos_int
from tournaments.cli.common import HelpFormatter

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DEFAULT_SPEC = os.path.join(ROOT, "tournaments", "specs", "default.toml")

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from tournaments.runner import run_tournament
from tournaments.spec import load_spec
spec = load_spec(sys.argv[1], markets=None if sys.argv[2] == "-" else int(sys.argv[2]))
s = run_tournament(spec, sys.argv[3], workers=int(sys.argv[4]), use_ray=sys.argv[5] == "ray",
                   progress=False)
print(json.dumps({"wall_s": s.wall_s, "ray_start_s": s.ray_start_s, "markets": s.markets_run,
                  "units": s.units_run, "process_s": time.perf_counter() - t0}))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT}


def run(spec: str, markets: str, workers: int, mode: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, spec, markets, os.path.join(tmp, "run"),
             str(workers), mode],
            capture_output=True, text=True, check=True, env=_env(),
        )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_command(spec: str, markets: str, ray: bool) -> dict:
    """``arena tournament SPEC`` from start to end, in a fresh process and folder."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "tournaments.cli", "tournament", spec, "--quiet",
               "--out", os.path.join(tmp, "run")]  # fmt: skip
        cmd += [] if markets == "-" else ["--markets", markets]
        cmd += [] if ray else ["--no-ray"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, text=True, check=True, env=_env())
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    """median (min-max)."""
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--spec", default=os.path.relpath(DEFAULT_SPEC), help="tournament spec")
    ap.add_argument("--markets", type=pos_int, help="override markets per match")
    ap.add_argument("--repeats", type=pos_int, default=3, help="runs of each configuration")
    ap.add_argument("--command", action="store_true", help="also time `arena tournament SPEC`")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = ap.parse_args()
    markets = "-" if args.markets is None else str(args.markets)
    loads = [os.getloadavg()[0]]

    runs: dict[str, list[dict]] = {"ray2": [], "ray1": [], "local": []}
    commands: dict[str, list[dict]] = {"ray": [], "no-ray": []}
    for _ in range(args.repeats):
        runs["ray2"].append(run(args.spec, markets, 2, "ray"))
        runs["ray1"].append(run(args.spec, markets, 1, "ray"))
        runs["local"].append(run(args.spec, markets, 1, "local"))
        if args.command:
            commands["ray"].append(run_command(args.spec, markets, ray=True))
            commands["no-ray"].append(run_command(args.spec, markets, ray=False))
        loads.append(os.getloadavg()[0])

    def after_start(r: dict) -> float:
        return r["wall_s"] - r["ray_start_s"]

    def median_run(key: str) -> dict:
        return sorted(runs[key], key=after_start)[len(runs[key]) // 2]

    ray2, ray1, local = median_run("ray2"), median_run("ray1"), median_run("local")
    n = ray2["markets"]
    rows = []
    for label, key in (("Ray, 2 workers", "ray2"), ("Ray, 1 worker", "ray1"),
                       ("one process, no Ray", "local")):  # fmt: skip
        rs = runs[key]
        rows.append([
            label,
            spread([r["wall_s"] for r in rs]),
            spread([r["ray_start_s"] for r in rs]) if key != "local" else "-",
            spread([after_start(r) for r in rs]),
            spread([r["markets"] / after_start(r) for r in rs], "{:,.0f}"),
        ])  # fmt: skip
    pairs = zip(runs["ray1"], runs["ray2"], strict=True)
    speedups = [after_start(a) / after_start(b) for a, b in pairs]
    out = {
        "markets": n,
        "units": ray2["units"],
        "wall_s_2_workers": ray2["wall_s"],
        "ray_start_s": ray2["ray_start_s"],
        "markets_per_s_2_workers": n / after_start(ray2),
        "wall_s_1_worker": ray1["wall_s"],
        "markets_per_s_1_worker": n / after_start(ray1),
        "wall_s_no_ray": local["wall_s"],
        "markets_per_s_no_ray": n / local["wall_s"],
        "speedup_2_over_1": after_start(ray1) / after_start(ray2),
        "speedup_2_over_1_min": min(speedups),
        "speedup_2_over_1_max": max(speedups),
        "ray_overhead": after_start(ray1) / local["wall_s"] - 1.0,
        "runs": runs,
        "load_average": loads,
    }
    print(
        f"spec {os.path.relpath(args.spec)}: {n:,} markets in {out['units']} units; "
        f"cpus={os.cpu_count()}; {args.repeats} runs of each, interleaved; load average "
        f"{min(loads):.1f}-{max(loads):.1f}"
    )
    print(
        tabulate(
            rows,
            headers=["run", "wall s", "Ray start s", "after start s", "markets/s"],
            disable_numparse=True,
        )
    )
    print("(median of the runs, and min-max)")
    print(
        f"speedup 2 workers / 1: {out['speedup_2_over_1']:.2f}x (pairs of runs: "
        f"{min(speedups):.2f}-{max(speedups):.2f}x);  Ray overhead after start "
        f"(1 worker vs no Ray): {100 * out['ray_overhead']:+.1f}%"
    )
    if args.command:
        out["command"] = commands
        print()
        print(
            tabulate(
                [
                    [
                        f"arena tournament {os.path.relpath(args.spec)}" + suffix,
                        spread([r["wall_s"] for r in commands[key]]),
                        spread([r["cpu_s"] for r in commands[key]]),
                    ]
                    for key, suffix in (("ray", ""), ("no-ray", " --no-ray"))
                ],  # fmt: skip
                headers=["whole command (play, analysis, report)", "wall s", "CPU s"],
                disable_numparse=True,
            )
        )
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
