"""Do buyers paid their own surplus face a social dilemma against a seller?

    python benchmarks/buyer_dilemma.py [--seller rl_seller] [--markets 2000]
                                       [--configs retail,noisy] [--markdown] BUYER ...

BUYER: a registry name or a checkpoint directory (two at least). On the markets of
``benchmarks/generalization.py`` (same configs, same seed), against ``--seller``, for
every ordered pair (crowd A, newcomer B) of the buyers given: every market has N - 1
buyers playing A and one playing B (which one is dealt from the market key, as
populations deal their slots, the same slot for every pair); with B = A every
buyer plays A. Printed per config and
pair: the mean surplus of one buyer of the crowd, of the newcomer, the newcomer's minus
the crowd's (paired by market, 95% CI), the surplus of all the market's buyers and the
seller's profit.

Why: a trained buyer is one of N independent learners sharing a network, each paid its
own surplus (``arena/rewards.py``). Where a lone B among A earns more than the buyers
of A (so each buyer gains by switching to B) while a market of B leaves each buyer less
than a market of A, the buyers face a social dilemma: learners paid their own surplus
drift to B although all would do better playing A. The script prints that reading for
every pair.
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
from agents.evaluate import mean_ci  # noqa: E402
from agents.population import Population  # noqa: E402
from agents.rollout import play_batch  # noqa: E402
from arena.generator import MarketBatch, generate_batch  # noqa: E402
from benchmarks.generalization import (  # noqa: E402
    CONFIGS,
    SEED,
    add_threads_flag,
    chosen_configs,
    use_threads,
)


def buyers(crowd: str, newcomer: str, n: int) -> Population:
    """N - 1 buyers playing ``crowd`` and one playing ``newcomer``. The newcomer's slot is
    a function of the market key alone, the same for every pair (with ``newcomer`` the
    crowd's own entry as well): sellers break ties by buyer index, so a fixed slot would
    not be a buyer like the others."""
    members = [registry.make(crowd, "buyer", seed=0), registry.make(newcomer, "buyer", seed=0)]
    return Population(members, [(n - 1) / n, 1 / n], [crowd, newcomer])


def surplus(batch: MarketBatch, seller: str, crowd: str, newcomer: str) -> dict[str, np.ndarray]:
    """Per market: the crowd's mean surplus per buyer, the newcomer's, all buyers' (sum and
    mean) and the seller's profit."""
    n = batch.values.shape[1]
    policy = buyers(crowd, newcomer, n)
    engine = play_batch(batch, registry.make(seller, "seller", seed=0), policy)
    own = engine.buyer_surplus()  # (B, N)
    new = policy.assign(batch.is_agent, batch.keys) == 1
    assert np.all(new.sum(axis=1) == 1), "one newcomer per market"
    return {
        "crowd": np.where(new, 0.0, own).sum(axis=1) / (n - 1),
        "newcomer": own[new],
        "buyers": own.sum(axis=1),
        "per_buyer": own.mean(axis=1),
        "profit": engine.profit.copy(),
    }


def rows(names: list[str], seller: str, markets: int, configs=tuple(CONFIGS)):
    """The table's rows and the readings (one line per config and pair of buyers)."""
    table, readings = [], []
    for config in configs:
        batch = generate_batch(CONFIGS[config], SEED, range(markets))
        got = {(a, b): surplus(batch, seller, a, b) for a in names for b in names}
        for (a, b), s in got.items():
            m, lo, hi = mean_ci(s["newcomer"] - s["crowd"])
            table.append(
                [
                    config,
                    a,
                    b,
                    f"{s['crowd'].mean():.2f}",
                    f"{s['newcomer'].mean():.2f}",
                    f"{m:+.2f} [{lo:+.2f}, {hi:+.2f}]",
                    f"{s['buyers'].mean():.1f}",
                    f"{s['profit'].mean():.1f}",
                ]
            )
        for a in names:
            for b in names:
                if a < b:
                    readings.append(f"{config}: {reading(got, a, b)}")
    return table, readings


def reading(got: dict, a: str, b: str) -> str:
    """Which of A and B each buyer prefers, against which the buyers as a whole prefer."""
    per_buyer = {x: got[(x, x)]["per_buyer"].mean() for x in (a, b)}
    # The two crowds meet the same markets: their per-buyer surplus is paired by market.
    _, lo, hi = mean_ci(got[(a, a)]["per_buyer"] - got[(b, b)]["per_buyer"])
    # Switching pays where a lone newcomer out-earns the crowd it joins (CI above 0).
    pays = {
        (x, y): mean_ci(got[(x, y)]["newcomer"] - got[(x, y)]["crowd"])[1] > 0
        for x, y in ((a, b), (b, a))
    }
    better = a if per_buyer[a] >= per_buyer[b] else b
    worse = b if better == a else a
    verb = {True: "out-earns", False: "does not out-earn"}
    text = (
        f"every buyer playing {better} earns {per_buyer[better]:.2f} each, "
        f"playing {worse} {per_buyer[worse]:.2f}; "
        f"a lone {worse} among {better} {verb[pays[(better, worse)]]} them, "
        f"a lone {better} among {worse} {verb[pays[(worse, better)]]} them"
    )
    if lo <= 0 <= hi:
        return text + " (the two crowds' difference per buyer is within its 95% CI of 0)"
    if pays[(better, worse)] and not pays[(worse, better)]:
        return text + f": a social dilemma (each gains by {worse}, all do better with {better})"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/buyer_dilemma.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("buyers", nargs="+", metavar="BUYER", help="registry names or checkpoints")
    ap.add_argument("--seller", default="rl_seller", help="the seller every market meets")
    ap.add_argument("--markets", type=int, default=2000, help="markets per config")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated configs")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    add_threads_flag(ap)
    args = ap.parse_args(argv)
    try:  # every entry builds before anything is played
        use_threads(args.threads)
        if len(set(args.buyers)) < 2:
            raise ValueError("name two buyers at least")
        if args.markets < 2:
            raise ValueError("--markets: 2 at least")
        configs = chosen_configs(args.configs)
        registry.make(args.seller, "seller", seed=0)
        for name in args.buyers:
            registry.make(name, "buyer", seed=0)
    except (KeyError, ValueError) as err:
        print(f"benchmarks/buyer_dilemma.py: error: {err}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    names = list(dict.fromkeys(args.buyers))
    table, readings = rows(names, args.seller, args.markets, configs)
    header = [
        "config",
        "crowd (N - 1 buyers)",
        "newcomer (1 buyer)",
        "a crowd buyer earns",
        "the newcomer earns",
        "newcomer - crowd buyer",
        "all buyers",
        "seller profit",
    ]
    print(f"## buyers against {args.seller} ({args.markets} markets per config)\n")
    print(tabulate(table, headers=header, tablefmt="github" if args.markdown else "simple",
                   disable_numparse=True))  # fmt: skip
    print()
    for line in readings:
        print(f"- {line}")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
