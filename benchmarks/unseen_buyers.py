"""Does the trained seller still beat the baselines against buyers no seller trained on?

    python benchmarks/unseen_buyers.py [--markets 5000] [--shares 0.5,0.7,0.9]
                                       [--configs retail,large] [--markdown] [--threads 1]

The generalization benchmark holds markets out; this one holds a buyer behaviour out.
Every buyer plays ``CounterOnce`` (``benchmarks/buyer_bound.py``): it counters the first
offer it gains from at a share of the way from the product's cost to the price offered,
then takes a later offer of that product it gains from. No seller met it in training
(``rl_seller``'s pool is the scripted buyers and the mixed population); at 0.7 it is
the best of its shares for the buyers against ``rl_seller`` on retail-like markets
(``benchmarks/results/buyer_bound.md``). On the generalization benchmark's markets
(same configs, same seed, hidden rule), every seller plays against it; printed per
config and share: ``rl_seller``'s profit, its paired difference (95% CI) with each
scripted seller (the oracle aside), whether it beats them all, and the buyers' surplus
against ``rl_seller`` beside the strategic buyers'.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.buyer_bound import CounterOnce, parse_fractions  # noqa: E402
from benchmarks.generalization import (  # noqa: E402
    CONFIGS,
    SELLERS,
    Cells,
    _fmt,
    _paired,
    add_threads_flag,
    chosen_configs,
    use_threads,
)

SHARES = (0.5, 0.7, 0.9)


def against(cells: Cells, seller: str, share: float, config: str) -> dict[str, np.ndarray]:
    """``seller``'s cell against buyers who all counter once at ``share``."""
    label = f"counter_once:{share:g}"
    return cells.play(seller, label, lambda: CounterOnce(share), "hidden", config)


def rows(cells: Cells, configs: list[str], shares: tuple[float, ...]) -> list[list]:
    """One row per (config, share)."""
    out = []
    for config in configs:
        strategic = cells.get("rl_seller", "strategic", "hidden", config)["buyer_surplus"]
        for share in shares:
            mine = against(cells, "rl_seller", share, config)
            diffs = [
                _paired(mine["profit"], against(cells, s, share, config)["profit"])
                for s in SELLERS[1:-1]
            ]
            out.append(
                [
                    config,
                    f"{share:g}",
                    f"{np.mean(mine['profit']):.1f}",
                    *(_fmt(*d) for d in diffs),
                    "yes" if min(lo for _, lo, _ in diffs) > 0 else "NO",
                    f"{np.mean(mine['buyer_surplus']):.1f} / {np.mean(strategic):.1f}",
                ]
            )
    return out


def header() -> list[str]:
    return [
        "config",
        "share",
        "rl_seller profit",
        *(f"- {s}" for s in SELLERS[1:-1]),
        "beats all",
        "buyers' surplus: these / strategic",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/unseen_buyers.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--markets", type=int, default=5000, help="markets per cell")
    ap.add_argument(
        "--shares",
        default=",".join(f"{x:g}" for x in SHARES),
        help="the counter's shares of the way from cost to the offer, comma-separated",
    )
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    add_threads_flag(ap)
    args = ap.parse_args(argv)
    try:
        configs = chosen_configs(args.configs)
        shares = parse_fractions("--shares", args.shares)
        if args.markets < 1:
            raise ValueError("--markets: 1 at least")
        use_threads(args.threads)
    except ValueError as err:
        ap.error(str(err))
    t0 = time.perf_counter()
    table = rows(Cells(args.markets), configs, shares)
    fmt = "github" if args.markdown else "simple"
    print(f"## rl_seller against buyers who counter once ({args.markets} markets a cell)\n")
    print(tabulate(table, headers=header(), tablefmt=fmt, disable_numparse=True))
    won = sum(r[-2] == "yes" for r in table)
    print(f"\nrl_seller beats every scripted seller in {won} of {len(table)} cells")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
