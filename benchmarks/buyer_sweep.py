"""How much can a scripted buyer get from a seller? A sweep over the scripted buyers'
own parameters.

    python benchmarks/buyer_sweep.py [--seller rl_seller] [--markets 1000]
                                     [--configs retail,large] [--top 3] [--markdown]

On the markets of ``benchmarks/generalization.py`` (same configs, same seed), every
buyer of every market plays one setting of a scripted buyer against ``--seller``: the
threshold buyer's required surplus, the haggler's hold, shade and rounds, the strategic
agent's target and margin (``GRID``: 64 settings). Printed per config: the best
scripted buyer at its registered defaults (the reference of the issue's buyer target,
as ``generalization.py`` picks it), ``rl_buyer``, and the ``--top`` settings that
leave the buyers the most surplus, each as a ratio to the reference and, for the best,
the paired 95% CI of its difference from it.

Why: ``rl_buyer`` is asked for 1.2x the best scripted buyer's surplus against
``rl_seller``. A sweep of the scripted families' parameters bounds what those
strategies can get from the seller: where no setting comes near 1.2x, what limits the
buyers is the seller as much as the learner.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import registry  # noqa: E402
from agents.evaluate import evaluate_batch, mean_ci  # noqa: E402
from arena.generator import generate_batch  # noqa: E402
from benchmarks.generalization import (  # noqa: E402
    CONFIGS,
    SCRIPTED_BUYERS,
    SEED,
    add_threads_flag,
    chosen_configs,
    use_threads,
)

GRID: tuple[tuple[str, dict], ...] = (
    *(("threshold", {"margin": m}) for m in (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)),
    *(
        ("haggler", {"hold": h, "shade": s, "rounds": r})
        for h, s, r in itertools.product((0.1, 0.25, 0.4, 0.6), (0.2, 0.5, 0.8, 1.0), (1, 2, 4))
        if s >= h  # the haggler's own rule: it never shades below what it held out for
    ),
    *(
        ("strategic", {"target": t, "margin": m})
        for t, m in itertools.product((0.0, 0.25, 0.5, 0.75, 1.0), (0.0, 0.05, 0.15, 0.3))
    ),
)
"""(registered buyer, parameters) of every setting swept."""


def label(name: str, params: dict) -> str:
    return name + "".join(f" {k}={v}" for k, v in params.items())


def surplus(batch, seller, name: str, params: dict | None = None) -> np.ndarray:
    """Per-market surplus of all the market's buyers, every buyer playing ``name``."""
    buyer = registry.make(name, "buyer", seed=0, **(params or {}))
    return evaluate_batch(batch, seller, buyer)["buyer_surplus"]


def rows(seller_name: str, markets: int, configs: list[str], top: int) -> list[list[str]]:
    seller = registry.make(seller_name, "seller", seed=0)
    out = []
    for config in configs:
        batch = generate_batch(CONFIGS[config], SEED, markets)
        defaults = {b: surplus(batch, seller, b) for b in SCRIPTED_BUYERS}
        ref = max(defaults, key=lambda b: defaults[b].mean())
        base = defaults[ref]
        learnt = surplus(batch, seller, "rl_buyer")
        swept = sorted(
            ((surplus(batch, seller, n, p), label(n, p)) for n, p in GRID),
            key=lambda x: -x[0].mean(),
        )
        best = swept[0][0]
        mean, lo, hi = mean_ci(best - base)
        out.append(
            [
                config,
                f"{ref} {base.mean():.1f}",
                f"{learnt.mean():.1f} ({learnt.mean() / base.mean():.2f}x)",
                *(
                    f"{name}: {s.mean():.1f} ({s.mean() / base.mean():.2f}x)"
                    for s, name in swept[:top]
                ),
                f"{mean:+.1f} [{lo:+.1f}, {hi:+.1f}]",
            ]
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/buyer_sweep.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--seller", default="rl_seller", help="the seller every market meets")
    ap.add_argument("--markets", type=int, default=1000, help="markets per config")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated configs")
    ap.add_argument("--top", type=int, default=3, help="best settings shown per config")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    add_threads_flag(ap)
    args = ap.parse_args(argv)
    try:  # every entry builds before anything is played
        use_threads(args.threads)
        if args.markets < 2:
            raise ValueError("--markets: 2 at least")
        if args.top < 1:
            raise ValueError("--top: 1 at least")
        configs = chosen_configs(args.configs)
        registry.make(args.seller, "seller", seed=0)
    except (KeyError, ValueError) as err:
        print(f"benchmarks/buyer_sweep.py: error: {err}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    table = rows(args.seller, args.markets, configs, args.top)
    header = [
        "config",
        "best scripted buyer (defaults)",
        "rl_buyer",
        *(f"swept #{k + 1}" for k in range(args.top)),
        "swept #1 - defaults",
    ]
    print(
        f"\n## every buyer one setting of a scripted buyer, against {args.seller}"
        f" ({args.markets} markets per config, {len(GRID)} settings; buyers' surplus)\n"
    )
    fmt = "github" if args.markdown else "simple"
    print(tabulate(table, headers=header, tablefmt=fmt, disable_numparse=True))
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
