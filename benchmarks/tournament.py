"""Tournament throughput on Ray vs in one process, for a spec (the default one by default).

Each configuration runs in a fresh Python process and a fresh run folder, so
Ray starts from nothing each time and its start-up is reported apart:

* Ray, 2 workers (the CLI default): wall time including Ray start;
* Ray, 1 worker: the base of the 2-worker speedup;
* no Ray: the same matches in one process, the base of the Ray overhead
  (Ray with 1 worker after start-up vs no Ray).

Each configuration runs ``--repeats`` times (interleaved) and the table shows the
run with the median time after start-up: on a 2-core machine one run of a few
seconds moves by several percent with whatever else the machine does.

    python benchmarks/tournament.py [--spec FILE] [--markets K] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from tabulate import tabulate

from tournaments.cli.common import HelpFormatter

DEFAULT_SPEC = os.path.join(os.path.dirname(__file__), "..", "tournaments", "specs", "default.toml")

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


def run(spec: str, markets: str, workers: int, mode: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                spec,
                markets,
                os.path.join(tmp, "run"),
                str(workers),
                mode,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--spec", default=os.path.relpath(DEFAULT_SPEC), help="tournament spec")
    ap.add_argument("--markets", type=int, help="override markets per match")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each configuration")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    markets = "-" if args.markets is None else str(args.markets)

    def after_start(r: dict) -> float:
        return r["wall_s"] - r["ray_start_s"]

    runs: dict[str, list[dict]] = {"ray2": [], "ray1": [], "local": []}
    for _ in range(args.repeats):
        runs["ray2"].append(run(args.spec, markets, 2, "ray"))
        runs["ray1"].append(run(args.spec, markets, 1, "ray"))
        runs["local"].append(run(args.spec, markets, 1, "local"))
    ray2, ray1, local = (
        sorted(runs[k], key=after_start)[len(runs[k]) // 2] for k in ("ray2", "ray1", "local")
    )

    out = {
        "markets": ray2["markets"],
        "units": ray2["units"],
        "wall_s_2_workers": ray2["wall_s"],
        "ray_start_s": ray2["ray_start_s"],
        "markets_per_s_2_workers": ray2["markets"] / after_start(ray2),
        "wall_s_1_worker": ray1["wall_s"],
        "markets_per_s_1_worker": ray1["markets"] / after_start(ray1),
        "wall_s_no_ray": local["wall_s"],
        "markets_per_s_no_ray": local["markets"] / local["wall_s"],
        "speedup_2_over_1": after_start(ray1) / after_start(ray2),
        "ray_overhead": after_start(ray1) / local["wall_s"] - 1.0,
    }
    rows = [
        [
            "Ray, 2 workers",
            f"{ray2['wall_s']:.1f}",
            f"{ray2['ray_start_s']:.1f}",
            f"{after_start(ray2):.1f}",
            f"{out['markets_per_s_2_workers']:,.0f}",
        ],
        [
            "Ray, 1 worker",
            f"{ray1['wall_s']:.1f}",
            f"{ray1['ray_start_s']:.1f}",
            f"{after_start(ray1):.1f}",
            f"{out['markets_per_s_1_worker']:,.0f}",
        ],
        [
            "one process, no Ray",
            f"{local['wall_s']:.1f}",
            "-",
            f"{local['wall_s']:.1f}",
            f"{out['markets_per_s_no_ray']:,.0f}",
        ],
    ]
    print(
        f"spec {os.path.relpath(args.spec)}: {out['markets']:,} markets in {out['units']} units; "
        f"cpus={os.cpu_count()}"
    )
    print(
        tabulate(
            rows,
            headers=["run", "wall s", "Ray start s", "after start s", "markets/s"],
            disable_numparse=True,
        )
    )
    print(
        f"speedup 2 workers / 1: {out['speedup_2_over_1']:.2f}x;  Ray overhead after start "
        f"(1 worker vs no Ray): {100 * out['ray_overhead']:+.1f}%"
    )
    if args.json:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
