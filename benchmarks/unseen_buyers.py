"""Does the trained seller still beat the baselines against buyers no seller trained on?

    python benchmarks/unseen_buyers.py [--markets 5000] [--shares 0.5,0.7,0.9]
                                       [--configs retail,large] [--actions CONFIG]
                                       [--markdown] [--threads 1]

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
against ``rl_seller`` beside the strategic buyers'. ``--actions CONFIG`` adds, for that
config, what each seller does with the buyers' bids (``Tally``): per market, its offers
at or under the asked buyer's standing bid, of the bid's product above it, of another
product to a buyer with a bid, and to a buyer without one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.evaluate import evaluate_batch  # noqa: E402
from arena.generator import generate_batch  # noqa: E402
from benchmarks.buyer_bound import CounterOnce, parse_fractions  # noqa: E402
from benchmarks.generalization import (  # noqa: E402
    CONFIGS,
    SEED,
    SELLERS,
    Cells,
    _fmt,
    _make_seller,
    _paired,
    add_threads_flag,
    chosen_configs,
    under_rule,
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


ACTIONS = (
    "at or under the bid",
    "the bid's product above it",
    "another product to a bidder",
    "to a buyer without a bid",
)


class Tally:
    """Plays as ``seller`` does and counts its offers (messages with a product, in live
    markets) by what they do with the asked buyer's standing bid, in ``ACTIONS`` order."""

    def __init__(self, seller) -> None:
        self.seller = seller
        self.counts = np.zeros(len(ACTIONS))

    def __getattr__(self, name: str):
        return getattr(self.seller, name)

    def act(self, obs):
        action = self.seller.act(obs)
        rows = np.arange(obs.batch_size)
        offer = ~obs.done & (action.to >= 0) & (action.product >= 0)
        to = np.maximum(action.to, 0)
        bid_on, bid = obs.counter_product[rows, to], obs.counter_price[rows, to]
        has_bid = offer & (bid_on >= 0)
        same = has_bid & (bid_on == action.product)
        with np.errstate(invalid="ignore"):
            under = same & (action.price <= bid)
        kinds = (under, same & ~under, has_bid & ~same, offer & ~has_bid)
        self.counts += [k.sum() for k in kinds]
        return action


def action_rows(config: str, shares: tuple[float, ...], markets: int) -> list[list]:
    """Per share and seller (the oracle aside): profit, trades and ``Tally``'s counts, a
    market each, on the first ``markets`` markets of ``config``."""
    batch = under_rule(generate_batch(CONFIGS[config], SEED, range(markets)), "hidden")
    out = []
    for share in shares:
        for seller in SELLERS[:-1]:
            tally = Tally(_make_seller(seller))
            got = evaluate_batch(batch, tally, CounterOnce(share))
            per = tally.counts / markets
            out.append(
                [
                    f"{share:g}",
                    seller,
                    f"{np.mean(got['profit']):.1f}",
                    f"{np.mean(got['trades']):.2f}",
                    *(f"{x:.2f}" for x in per),
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
    ap.add_argument(
        "--actions", metavar="CONFIG", help="also what each seller does with the bids there"
    )
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    add_threads_flag(ap)
    args = ap.parse_args(argv)
    try:
        configs = chosen_configs(args.configs)
        if args.actions is not None and args.actions not in CONFIGS:
            raise ValueError(f"--actions: one config, known are {', '.join(CONFIGS)}")
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
    if args.actions is not None:
        print(f"\n## What each seller does with the bids: {args.actions}, offers a market\n")
        print(
            tabulate(
                action_rows(args.actions, shares, args.markets),
                headers=["share", "seller", "profit", "trades", *ACTIONS],
                tablefmt=fmt,
                disable_numparse=True,
            )
        )
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
