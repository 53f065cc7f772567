"""How far toward the retail specialist to move the fine-tuned seller's weights, chosen on
the training configs alone.

    python benchmarks/interpolation.py [--fine-tuned DIR] [--start DIR]
        [--weights 0,0.05,0.1,0.15,0.2,0.3,0.5] [--markets 5000] [--seed 2029] [--markdown]

Stage 2 of the seller's recipe starts from the retail specialist and learns wholesale;
``agents.rl.interpolate`` puts a checkpoint on the line between the two, a share ``W``
of the way back to the specialist. For each ``W`` of the grid this plays the
in-distribution cells of ``benchmarks/generalization.py`` (retail and wholesale, every
scripted buyer and the mixed population, hidden rule; the mixed population under the
mandatory rule too) on markets of another seed (2029: neither the benchmark's 2027 nor
the fresh 2028), and prints the mean profit over those cells and its paired difference
from ``W = 0`` (each market's mean over the cells of its config, so the 95% interval is
over markets). The chosen ``W`` is the one with the highest mean: the choice sees no
held-out config, which ``benchmarks/generalization.py --candidates`` then scores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.evaluate import mean_ci  # noqa: E402
from agents.rl.interpolate import interpolate  # noqa: E402
from benchmarks.generalization import (  # noqa: E402
    BUYERS,
    IN_DISTRIBUTION,
    SHIPPED,
    Cells,
    add_threads_flag,
    use_threads,
)

SELECTION_SEED = 2029
HEADER = ["W (share of the specialist)", "retail", "wholesale", "in-distribution mean",
          "minus W = 0 [95% CI]"]  # fmt: skip


def weights_list(text: str) -> list[float]:
    try:
        out = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers in [0, 1], got {text!r}") from None
    if not out or not all(0.0 <= w <= 1.0 for w in out):
        raise argparse.ArgumentTypeError(f"expected numbers in [0, 1], got {text!r}")
    return out if out[0] == 0.0 else [0.0, *out]  # W = 0, the fine-tuned seller, is the base


def selection_table(cells: Cells, runs: dict[float, str]) -> tuple[list[list[str]], float]:
    """One row per ``W``: mean profit per training config and over both, and the paired
    difference from ``W = 0``; with the ``W`` of the highest mean."""

    def per_market(run: str, config: str) -> np.ndarray:  # mean over the config's cells
        return np.mean([cells.get(run, b, r, config)["profit"] for b, r in BUYERS], axis=0)

    base = {c: per_market(runs[0.0], c) for c in IN_DISTRIBUTION}
    rows, means = [], {}
    for w, run in runs.items():
        mine = {c: per_market(run, c) for c in IN_DISTRIBUTION}
        means[w] = float(np.mean([mine[c].mean() for c in IN_DISTRIBUTION]))
        diff = np.mean([mine[c] - base[c] for c in IN_DISTRIBUTION], axis=0)
        m, lo, hi = mean_ci(diff)
        rows.append(
            [f"{w:g}", *(f"{mine[c].mean():.2f}" for c in IN_DISTRIBUTION), f"{means[w]:.2f}",
             "-" if w == 0.0 else f"{m:+.2f} [{lo:+.2f}, {hi:+.2f}]"]
        )  # fmt: skip
    return rows, max(means, key=lambda w: (means[w], -w))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--fine-tuned",
        default=str(SHIPPED / "rl_seller"),
        help="the fine-tuned seller (stage 2: the shipped rl_seller)",
    )
    ap.add_argument(
        "--start",
        default=str(SHIPPED / "stages" / "rl_seller_retail_mixed_pull"),
        help="the checkpoint it was fine-tuned from (the retail specialist)",
    )
    ap.add_argument(
        "--weights",
        type=weights_list,
        default=weights_list("0,0.05,0.1,0.15,0.2,0.3,0.5"),
        help="the grid of W, comma-separated (0 is always in it)",
    )
    ap.add_argument("--markets", type=int, default=5000, help="markets per cell")
    ap.add_argument("--seed", type=int, default=SELECTION_SEED, help="root seed of the markets")
    ap.add_argument("--markdown", action="store_true", help="Markdown table")
    add_threads_flag(ap)
    args = ap.parse_args(argv)
    if args.markets < 2:
        ap.error("--markets: at least 2 (an interval needs two markets)")
    if args.seed < 0:
        ap.error(f"--seed: expected a non-negative integer, got {args.seed}")
    use_threads(args.threads)
    t0 = time.perf_counter()
    cells = Cells(args.markets, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            w: str(interpolate(args.fine_tuned, args.start, w, f"w{w:g}", f"{tmp}/w{w:g}"))
            for w in args.weights
        }
        rows, chosen = selection_table(cells, runs)
    fmt = "github" if args.markdown else "simple"
    print(f"## in-distribution profit by W ({args.markets} markets per cell, seed {args.seed})\n")
    print(f"fine-tuned: {args.fine_tuned}\nstart: {args.start}\n")
    print(tabulate(rows, headers=HEADER, tablefmt=fmt, disable_numparse=True))
    print(f"\nchosen: W = {chosen:g} (the highest in-distribution mean)")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
