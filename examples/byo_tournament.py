"""Play a policy class of one's own in a tournament (docs/bring_your_own_agent.md).

    python examples/byo_tournament.py --out runs/byo            # on Ray (local)
    python examples/byo_tournament.py --out runs/byo --no-ray   # in this process
    arena report runs/byo --html

The class (``my_agents.SignalSeller``) becomes a registry entry, ``signal_seller``, and
the spec names it like any other. On Ray, the match workers are other processes: the
runtime environment ships the module to them (``py_modules``) and registers the entry in
each of them before it plays (``worker_process_setup_hook``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import my_agents  # noqa: E402

from tournaments.runner import run_tournament  # noqa: E402
from tournaments.spec import spec_from_dict  # noqa: E402

SPEC = {
    "tournament": {
        "name": "byo",
        "markets": 500,
        "sellers": ["signal_seller", "greedy_matcher", "posted_price"],
        "buyers": ["truthful", "haggler", "mixed"],
        "disclosure": ["hidden", "mandatory"],
        "reference": "posted_price",
    },
    "populations": {"mixed": "human=noisy_human,agent=strategic"},
    "configs": {"retail": {"buyers": 8, "products": 4, "agent_share": 0.5}},
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/byo", help="run folder")
    ap.add_argument("--markets", type=int, default=500, help="markets per match")
    ap.add_argument("--no-ray", action="store_true", help="play every match in this process")
    ap.add_argument("--address", help="join this Ray cluster (default: a new local one)")
    args = ap.parse_args(argv)

    my_agents.register_entries()  # here, for the spec's check of its entries
    data = {**SPEC, "tournament": {**SPEC["tournament"], "markets": args.markets}}
    spec = spec_from_dict(data)
    if not args.no_ray:
        import ray

        runtime_env = {
            "py_modules": [my_agents],
            "worker_process_setup_hook": "my_agents.register_entries",
        }
        where = {"address": args.address} if args.address else {"address": "local", "num_cpus": 2}
        ray.init(**where, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    summary = run_tournament(spec, args.out, use_ray=not args.no_ray, progress=False)
    print(f"played {summary.markets_run} markets into {summary.folder}")
    print(f"next: arena report {summary.folder} --html")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
