"""How much the greedy matcher leaves to a seller that plans its matches.

    python benchmarks/assignment.py [--markets 1000] [--buyers KIND ...]
                                    [--configs retail large ...] [--versus SELLER ...]
                                    [--markdown]

The greedy matcher offers, each turn, the open (buyer, product) pair with the highest
expected margin. The assignment matcher (``assignment_matcher``,
``agents.scripted.sellers.AssignmentMatcher``) keeps its estimates and its prices and
changes only that choice: each turn it matches the open buyers to the units in stock so
that the sum of expected margins is largest (a max-weight matching, kept across turns
while it stays optimal: ``agents.scripted.matching``) and offers the matched pair worth
the most. A buyer whose best product another buyer needs more is sent to its second best
instead of taking the unit first.

On the markets of ``benchmarks/generalization.py`` (its configs, seed and indices) this
prints, per config and buyer, the assignment matcher's profit and match quality minus the
greedy matcher's (paired over markets, 95% CI): how much planning the matches adds to
the same estimates and prices. ``--versus``
adds a column per seller (registry names or checkpoint directories): its profit minus the
assignment matcher's on the same markets.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import registry  # noqa: E402
from agents.evaluate import evaluate_batch, mean_ci  # noqa: E402
from agents.scripted.sellers import AssignmentMatcher, GreedyMatcher  # noqa: E402
from arena.generator import generate_batch  # noqa: E402
from arena.metrics import welfare_bounds  # noqa: E402
from benchmarks.generalization import CONFIGS, MIXED, SCRIPTED_BUYERS, SEED  # noqa: E402

BUYERS = (*SCRIPTED_BUYERS, MIXED)


def _play(batch, seller, kind: str, w) -> dict:
    return evaluate_batch(batch, seller, registry.make_buyers(kind, seed=0), w)


def _diff(a: np.ndarray, b: np.ndarray, fmt: str) -> str:
    m, lo, hi = mean_ci(a - b)
    return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def rows(
    configs: list[str], buyers: list[str], markets: int, versus: tuple[str, ...] = ()
) -> list[list[str]]:
    """Per config and buyer kind: the greedy matcher's profit, the assignment matcher's
    profit and match quality minus its, and each ``versus`` seller's profit minus the
    assignment matcher's (paired over the same markets, 95% CI; match quality on the
    markets where both traded, the only ones where both have one)."""
    out = []
    for name in configs:
        batch = generate_batch(CONFIGS[name], SEED, range(markets))
        w = welfare_bounds(batch)
        for kind in buyers:
            base = _play(batch, GreedyMatcher(), kind, w)
            got = _play(batch, AssignmentMatcher(), kind, w)
            cells = [name, "mixed" if kind == MIXED else kind, f"{base['profit'].mean():.1f}"]
            cells.append(_diff(got["profit"], base["profit"], "{:+.1f}"))
            cells.append(_diff(got["match_quality"], base["match_quality"], "{:+.3f}"))
            for v in versus:
                other = _play(batch, registry.make(v, "seller", seed=0), kind, w)
                cells.append(_diff(other["profit"], got["profit"], "{:+.1f}"))
            out.append(cells)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/assignment.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--markets", type=int, default=1000, help="markets per config")
    ap.add_argument("--buyers", nargs="+", default=list(BUYERS), help="buyer kinds")
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), help="configs")
    ap.add_argument("--versus", nargs="+", default=[], metavar="SELLER", help="sellers to compare")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = ap.parse_args(argv)
    configs, buyers = args.configs, args.buyers
    try:
        if args.markets < 1:
            raise ValueError(f"--markets must be >= 1, got {args.markets}")
        for name in configs:
            if name not in CONFIGS:
                raise ValueError(f"unknown config {name!r} (known: {', '.join(CONFIGS)})")
        for kind in buyers:
            registry.make_buyers(kind, seed=0)
        for name in args.versus:
            registry.make(name, "seller", seed=0)
    except (KeyError, ValueError) as err:
        print(f"benchmarks/assignment.py: error: {err}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    table = rows(configs, buyers, args.markets, tuple(args.versus))
    header = [
        "config",
        "buyers",
        "greedy matcher's profit",
        "assignment - greedy: profit",
        "match quality",
        *(f"{name} - assignment: profit" for name in args.versus),
    ]
    print(
        f"## assignment matcher - greedy matcher ({args.markets} markets per cell, paired 95% CI)\n"
    )
    print(tabulate(table, headers=header, tablefmt="github" if args.markdown else "simple",
                   disable_numparse=True))  # fmt: skip
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
