"""Where does a seller leave the greedy matcher's choice of buyer and product?

    python benchmarks/departures.py [--markets 500] [--buyers truthful] [--markdown]
                                    [--sizes] [--baseline SELLER] SELLER ...

SELLER: a registry name, a registry name with numeric parameters
(``greedy_matcher:patience=0.04``: the matcher asking 0.04 of the range more while turns
are to spare) or a checkpoint directory. On the markets of
``benchmarks/generalization.py`` (same configs, same seed), each seller plays against
``--buyers``; on every turn of every live market a fresh greedy matcher is asked which
(buyer, product) pair it would offer on the same observation. Printed per seller and
config: the share of turns on which the seller offers the greedy matcher's pair (on the
first turn and on later ones), and the seller's profit minus the greedy matcher's
(paired over markets, 95% CI). ``--sizes``: profit and match quality on retail grown
toward ``large``, minus the greedy matcher's or, with ``--baseline``, another seller's
(``--baseline assignment_matcher``: the baseline the trained seller trails on ``large``).

Why: ``rl_seller`` starts from the greedy matcher (a warm start that imitates it, and
the matcher's per-pair estimates among its features) and learns where to depart from its
pair. Where signals are noisy (wholesale) departing is what earns it its profit; where
they are precise and buyers answer truthfully the matcher's pair is hard to beat, so
departures there cost profit. The table shows how often each seller departs, config by
config, beside what it earns.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import registry  # noqa: E402
from agents.base import SellerAction, SellerPolicy  # noqa: E402
from agents.command import pos_int
from agents.evaluate import evaluate_batch, mean_ci  # noqa: E402
from agents.scripted.sellers import GreedyMatcher  # noqa: E402
from arena.generator import generate_batch  # noqa: E402
from arena.metrics import welfare_bounds  # noqa: E402
from arena.observation import SellerObs  # noqa: E402
from benchmarks.generalization import (  # noqa: E402
    CONFIGS,
    RETAIL,
    SEED,
    add_threads_flag,
    use_threads,
)

# Retail (8 buyers, 4 products, 12 turns: 1.5 turns a buyer) with fewer turns a buyer
# inside its training family (jitter: +-2 buyers and turns, +-1 product), then grown
# toward ``large``.
SIZES = {
    "retail": RETAIL,
    "8 buyers, 10 turns": dataclasses.replace(RETAIL, turns=10),
    "10 buyers, 5 products, 12 turns": dataclasses.replace(RETAIL, buyers=10, products=5, turns=12),
    "16 buyers, 24 turns": dataclasses.replace(RETAIL, buyers=16, turns=24),
    "16 buyers, 20 turns": dataclasses.replace(RETAIL, buyers=16, turns=20),
    "8 products": dataclasses.replace(RETAIL, products=8),
    "16 buyers, 8 products, 24 turns": dataclasses.replace(RETAIL, buyers=16, products=8, turns=24),
    "large: 16 buyers, 8 products, 20 turns": CONFIGS["large"],
}


class Agreement(SellerPolicy):
    """Plays ``inner`` unchanged and counts, per turn of each live market, whether its
    (buyer, product) is the one a fresh greedy matcher picks on the same observation."""

    def __init__(self, inner: SellerPolicy) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.sees_private = inner.sees_private
        self.reads_text = inner.reads_text
        self.expert = GreedyMatcher()
        self.first = np.zeros(2, np.int64)  # (agreed, turns) on each market's first turn
        self.later = np.zeros(2, np.int64)  # the same on later turns

    def reset(self, batch_size: int) -> None:
        self.inner.reset(batch_size)
        self.expert.reset(batch_size)

    def restart(self, rows: np.ndarray) -> None:
        self.inner.restart(rows)
        self.expert.restart(rows)

    def reveal(self, batch, rows=None) -> None:
        self.inner.reveal(batch, rows)

    def act(self, obs: SellerObs) -> SellerAction:
        mine = self.inner.act(obs)
        theirs = self.expert.act(obs)
        live = ~obs.done
        same = (mine.to == theirs.to) & (mine.product == theirs.product)
        start = obs.turn == 0
        for acc, rows in ((self.first, live & start), (self.later, live & ~start)):
            acc += (int(same[rows].sum()), int(rows.sum()))
        return mine

    @staticmethod
    def share(acc: np.ndarray) -> float:
        return float(acc[0] / acc[1]) if acc[1] else float("nan")


def _seller(name: str) -> SellerPolicy:
    """A registered seller (``NAME:key=value,...`` sets numeric parameters) or a
    checkpoint directory, as the tournaments build them."""
    base, _, given = name.partition(":")
    if not given or Path(name).exists():
        return registry.make(name, "seller", seed=0)
    params = {}
    for item in given.split(","):
        key, eq, value = item.partition("=")
        whole = value.strip().lstrip("+-").isdigit()  # ``grid=37``: a count stays whole
        try:
            params[key.strip()] = int(value) if whole else float(value)
        except ValueError:
            eq = ""
        if not eq:
            raise ValueError(f"{name!r}: parameters must be key=number, got {item!r}")
    return registry.make(base, "seller", seed=0, **params)


def _paired(
    configs: dict,
    sellers: list[str],
    buyers: str,
    markets: int,
    wrap=None,
    baseline: str = "greedy_matcher",
):
    """For each config (in order) and seller: (config, seller, the policy played, its
    per-market metrics, the baseline's on the same markets)."""
    for label, config in configs.items():
        batch = generate_batch(config, SEED, range(markets))
        w = welfare_bounds(batch)
        base = evaluate_batch(batch, _seller(baseline), registry.make_buyers(buyers, seed=0), w)
        for name in sellers:
            policy = _seller(name) if wrap is None else wrap(_seller(name))
            got = evaluate_batch(batch, policy, registry.make_buyers(buyers, seed=0), w)
            yield label, name, policy, got, base


def rows(sellers: list[str], buyers: str, markets: int, configs=tuple(CONFIGS)) -> list[list]:
    out = []
    chosen = {c: CONFIGS[c] for c in configs}
    for config, name, spy, got, base in _paired(chosen, sellers, buyers, markets, Agreement):
        m, lo, hi = mean_ci(got["profit"] - base["profit"])
        out.append(
            [
                name,
                config,
                f"{Agreement.share(spy.first):.3f}",
                f"{Agreement.share(spy.later):.3f}",
                f"{Agreement.share(spy.first + spy.later):.3f}",
                f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]",
            ]
        )
    return out


def size_rows(
    sellers: list[str],
    buyers: str,
    markets: int,
    sizes=tuple(SIZES),
    baseline: str = "greedy_matcher",
) -> list[list]:
    """Per market size and seller: profit and match quality minus the baseline's on the
    same markets (paired, 95% CI; match quality on the markets where both traded, the
    only ones where both have one)."""
    out = []
    chosen = {size: SIZES[size] for size in sizes}
    for size, name, _, got, base in _paired(chosen, sellers, buyers, markets, baseline=baseline):
        cells = [name, size]
        for metric, fmt in (("profit", "{:+.1f}"), ("match_quality", "{:+.3f}")):
            m, lo, hi = mean_ci(got[metric] - base[metric])
            cells.append(f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]")
        out.append(cells)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/departures.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("sellers", nargs="+", metavar="SELLER", help="registry names or checkpoints")
    ap.add_argument("--markets", type=pos_int, default=500, help="markets per config")
    ap.add_argument("--buyers", default="truthful", help="the buyers every seller meets")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    ap.add_argument(
        "--sizes", action="store_true", help="profit on retail grown toward large, instead"
    )
    ap.add_argument(
        "--baseline",
        default="greedy_matcher",
        metavar="SELLER",
        help="with --sizes: the seller the others are compared with",
    )
    add_threads_flag(ap)
    args = ap.parse_args(argv)
    if args.baseline != "greedy_matcher" and not args.sizes:
        ap.error("--baseline goes with --sizes (the pair counts are the greedy matcher's)")
    try:  # every entry builds before anything is played
        use_threads(args.threads)
        for name in (*args.sellers, args.baseline):
            _seller(name)
        registry.make_buyers(args.buyers, seed=0)
    except (KeyError, ValueError) as err:
        print(f"benchmarks/departures.py: error: {err}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    fmt = "github" if args.markdown else "simple"
    if args.sizes:
        table = size_rows(args.sellers, args.buyers, args.markets, baseline=args.baseline)
        header = [
            "seller",
            "market",
            f"profit - {args.baseline}",
            f"match quality - {args.baseline}",
        ]
        print(f"## retail grown toward large ({args.markets} markets per size, {args.buyers})\n")
        print(tabulate(table, headers=header, tablefmt=fmt, disable_numparse=True))
        print(f"\n{time.perf_counter() - t0:.0f} s")
        return 0
    table = rows(args.sellers, args.buyers, args.markets)
    header = [
        "seller",
        "config",
        "on its pair, first turn",
        "later turns",
        "all turns",
        "profit - greedy_matcher",
    ]
    print(f"## the greedy matcher's pair ({args.markets} markets per config, {args.buyers})\n")
    print(tabulate(table, headers=header, tablefmt=fmt, disable_numparse=True))
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
