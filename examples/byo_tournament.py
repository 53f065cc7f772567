"""Play a policy class of one's own in a tournament from a script of one's own
(docs/bring_your_own_agent.md).

    python examples/byo_tournament.py --out runs/byo            # on Ray (local)
    python examples/byo_tournament.py --out runs/byo --no-ray   # in this process
    arena report runs/byo --html

The command line plays the same tournament, with the same results:

    arena tournament examples/byo.toml --out runs/byo   # the spec names my_agents.py

The class (``my_agents.SignalSeller``) becomes a registry entry, ``signal_seller``, and
the spec (``examples/byo.toml``) names it like any other. On Ray, the match workers are
other processes: here the runtime environment ships the module to them (``py_modules``)
and registers the entry in each of them before it plays (``worker_process_setup_hook``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import my_agents  # noqa: E402

from tournaments.runner import run_tournament  # noqa: E402
from tournaments.spec import load_spec  # noqa: E402

SPEC = Path(__file__).resolve().parent / "byo.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/byo", help="run folder")
    ap.add_argument("--markets", type=int, default=500, help="markets per match")
    ap.add_argument("--no-ray", action="store_true", help="play every match in this process")
    ap.add_argument("--address", help="join this Ray cluster (default: a new local one)")
    args = ap.parse_args(argv)

    my_agents.register_entries()  # here, for the spec's check of its entries
    spec = load_spec(str(SPEC), markets=args.markets)
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
