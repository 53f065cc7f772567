"""Engine throughput: the scalar reference vs the batched engine.

The same work at every size: buyers=8, products=4, turns=12, a posted-price
seller against truthful buyers (both vectorized policies), markets drawn from
one seed. Seller-turns are the turns the markets actually used. Beside the
engine it times a bare, inlined numpy loop of the simplest rules (no configs,
observations, validation or metrics) to show what the structure costs.

    python benchmarks/engine.py            # a table
    python benchmarks/engine.py --json     # ... and a last line of JSON
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from tabulate import tabulate

from agents.command import pos_int
from agents.rollout import play_batch, play_reference
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import PostedPrice
from arena.config import MarketConfig
from arena.generator import generate, generate_batch
from arena.metrics import batch_metrics
from tournaments.cli.common import HelpFormatter

CONFIG = MarketConfig(buyers=8, products=4, inventory=2, turns=12)


def best_of(fn, repeats: int) -> tuple[float, int]:
    """(best wall time, turns) over repeats."""
    best, turns = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        turns = fn()
        best = min(best, time.perf_counter() - t0)
    return best, turns


def scalar_run(markets: int) -> tuple[float, int]:
    instances = [generate(CONFIG, 0, k) for k in range(markets)]
    seller, buyer = PostedPrice(), Truthful()
    return best_of(lambda: sum(play_reference(x, seller, buyer).turn for x in instances), 3)


def batched_run(b: int, repeats: int) -> tuple[float, int]:
    batch = generate_batch(CONFIG, 0, b)
    seller, buyer = PostedPrice(), Truthful()
    return best_of(lambda: int(play_batch(batch, seller, buyer).turn.sum()), repeats)


def bare_run(b: int, repeats: int) -> tuple[float, int]:
    """The simplest rules inlined: round-robin buyer, best signalled product at a posted
    price, accept if value >= price. No validation, no observations, no patience."""
    batch = generate_batch(CONFIG, 0, b)
    n, t_max = CONFIG.buyers, CONFIG.turns

    def run() -> int:
        ar = np.arange(b)
        price = batch.costs * 1.5
        stock = batch.inventory.copy()
        bought = np.zeros((b, n), bool)
        done = np.zeros(b, bool)
        turn = np.zeros(b, np.int64)
        nmsg = np.zeros((b, n), np.int64)
        for _ in range(t_max):
            turn += ~done
            i = np.argmin(np.where(bought, 1 << 40, nmsg * n + np.arange(n)), axis=1)
            sig = batch.signals[ar, i]
            j = np.argmax(np.where(stock > 0, sig - price, -np.inf), axis=1)
            p = price[ar, j]
            nmsg[ar, i] += 1
            yes = ~done & (batch.values[ar, i, j] >= p)
            stock[ar, j] -= yes
            bought[ar, i] |= yes
            done |= (turn >= t_max) | bought.all(axis=1) | (stock.sum(axis=1) == 0)
        return int(turn.sum())

    return best_of(run, repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    ap.add_argument(
        "--scalar-markets", type=pos_int, default=300, help="markets played on the scalar reference"
    )
    args = ap.parse_args()

    rows, out = [], {}
    dt, turns = scalar_run(args.scalar_markets)
    out["scalar_turns_per_s"] = turns / dt
    rows.append(
        ["scalar reference", args.scalar_markets, turns, f"{dt * 1e3:.1f}", f"{turns / dt:,.0f}"]
    )
    for b, reps in ((1, 50), (64, 20), (4096, 7)):
        dt, turns = batched_run(b, reps)
        rows.append([f"batched B={b}", b, turns, f"{dt * 1e3:.1f}", f"{turns / dt:,.0f}"])
        out[f"batched_b{b}_turns_per_s"] = turns / dt
    out["batched_turns_per_s"] = out["batched_b4096_turns_per_s"]
    dt, turns = bare_run(4096, 7)
    out["bare_numpy_turns_per_s"] = turns / dt
    rows.append(["bare numpy loop B=4096", 4096, turns, f"{dt * 1e3:.1f}", f"{turns / dt:,.0f}"])

    engine = play_batch(generate_batch(CONFIG, 0, 4096), PostedPrice(), Truthful())

    def metrics() -> int:
        batch_metrics(engine)
        return 0

    metrics()  # the first call also imports the solver (scipy.optimize)
    dt, _ = best_of(metrics, 3)
    out["metrics_ms_b4096"] = dt * 1e3

    out["ratio"] = out["batched_turns_per_s"] / out["scalar_turns_per_s"]
    out["engine_vs_bare"] = out["batched_turns_per_s"] / out["bare_numpy_turns_per_s"]
    print(
        f"config: {CONFIG.buyers} buyers, {CONFIG.products} products, T={CONFIG.turns}; "
        f"posted price vs truthful; best of several runs; cpus={os.cpu_count()}"
    )
    print(
        tabulate(
            rows,
            headers=["engine", "markets", "seller-turns", "ms", "turns/s"],
            disable_numparse=True,
        )
    )
    print(
        f"batched (B=4096) / scalar: {out['ratio']:,.0f}x;  engine / bare loop: "
        f"{out['engine_vs_bare']:.2f};  all metrics for 4096 markets (two oracle solves "
        f"each): {out['metrics_ms_b4096']:.0f} ms"
    )
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in out.items()}))


if __name__ == "__main__":
    main()
