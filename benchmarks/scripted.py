"""Every scripted seller against every scripted buyer: the README's table.

    python benchmarks/scripted.py [--markets 2000] [--seed 0] [--markdown]

Each pairing plays the same markets (default MarketConfig, common random
numbers); cells are means with 95% Student-t intervals.
"""

from __future__ import annotations

import argparse
import time

from tabulate import tabulate

from agents import registry
from agents.command import nonneg_int, pos_int
from agents.evaluate import play_markets, summarize
from arena.config import MarketConfig
from tournaments.cli.common import HelpFormatter

METRICS = ("profit", "buyer_surplus", "efficiency", "capture")


def cell(summary: dict, name: str) -> str:
    lo, hi = summary[name + "_ci"]
    digits = 1 if abs(summary[name]) >= 10 else 3
    return f"{summary[name]:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--markets", type=pos_int, default=2000, help="markets per pairing")
    ap.add_argument("--seed", type=nonneg_int, default=0, help="root seed of the markets")
    ap.add_argument("--markdown", action="store_true", help="a GitHub Markdown table")
    args = ap.parse_args()

    config = MarketConfig()
    # Scripted entries only: the shipped checkpoints (entries with a source) are measured
    # by benchmarks/generalization.py.
    sellers = [e.name for e in registry.entries("seller") if not e.source]
    buyers = [e.name for e in registry.entries("buyer") if not e.disclosed and not e.source]
    rows = []
    t0 = time.perf_counter()
    for s in sellers:
        for b in buyers:
            seller = registry.make(s, "seller", seed=args.seed)
            buyer = registry.make_buyers(b, seed=args.seed)
            summary = summarize(
                play_markets(config, args.seed, range(args.markets), seller, buyer), METRICS
            )
            rows.append([s, b, *(cell(summary, m) for m in METRICS)])
    elapsed = time.perf_counter() - t0
    print(
        tabulate(
            rows,
            headers=["seller", "buyer", *METRICS],
            tablefmt="github" if args.markdown else "simple",
            disable_numparse=True,
        )
    )
    print(
        f"\n{len(sellers)} sellers x {len(buyers)} buyers x {args.markets} markets "
        f"(default MarketConfig, seed {args.seed}) in {elapsed:.1f} s"
    )


if __name__ == "__main__":
    main()
