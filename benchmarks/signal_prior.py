"""How much the shipped seller's signal prior shrinks each config's signals.

    python benchmarks/signal_prior.py [--markets 5000] [--prior TAU] [--markdown]

``rl_seller`` reads the signals through ``agents.rl.features.calibrate_signals``: per
market, each product's signals shrink toward their mean over the buyers by f = min(1,
tau^2 / spread^2). On the markets ``benchmarks/generalization.py`` plays (its configs,
seed and indices), this prints per config the signal spread (a fraction of the range),
the share of markets shrunk (f < 1) and the mean f. ``--prior`` defaults to the shipped
seller's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.rl import checkpoint  # noqa: E402
from agents.rl.features import shrink_factor  # noqa: E402
from arena.engine import BatchedMarket  # noqa: E402
from arena.generator import generate_batch  # noqa: E402
from benchmarks.generalization import CONFIGS, SEED, SHIPPED  # noqa: E402

HEADER = ["config", "signal noise", "signal spread (mean)", "markets shrunk", "mean factor"]


def shrink_table(markets: int, prior: float) -> list[list[str]]:
    """Per config: the spread of the signals, the share of markets the prior shrinks and
    the mean shrink factor (``shrink_factor``: 1 where a market is left as it is)."""
    rows = []
    for name, cfg in CONFIGS.items():
        obs = BatchedMarket(generate_batch(cfg, SEED, range(markets))).seller_observation()
        lo, hi = obs.price_range
        dev = obs.signals - obs.signals.mean(axis=1, keepdims=True)
        spread = np.sqrt(np.square(dev).mean(axis=(1, 2))) / (hi - lo)
        factor = shrink_factor(obs, prior)
        rows.append(
            [
                name,
                f"{cfg.signal_noise:g}",
                f"{spread.mean():.3f}",
                f"{np.mean(factor < 1):.1%}",
                f"{factor.mean():.3f}",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/signal_prior.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--markets", type=int, default=5000, help="markets per config")
    ap.add_argument("--prior", type=float, default=None, help="tau (default: rl_seller's)")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = ap.parse_args(argv)
    prior = args.prior
    if prior is None:
        prior = checkpoint.load(SHIPPED / "rl_seller").signal_prior
    if not prior >= 0 or args.markets < 1:
        print("--prior must be >= 0 and --markets >= 1", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rows = shrink_table(args.markets, prior)
    print(f"\n## signal prior {prior:g} ({args.markets} markets per config)\n")
    print(tabulate(rows, headers=HEADER, tablefmt="github" if args.markdown else "simple"))
    print(f"\n{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
